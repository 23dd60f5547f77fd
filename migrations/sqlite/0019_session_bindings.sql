-- Session bindings: a durable Repowire session id (`rs-…`) per work stream, its current (or
-- last) executor peer, and a pointer into the runtime's transcript (a path and a cursor, never
-- the text). `work_session_runtimes` maps the runtime's own session ids (kept across `/clear`
-- and a resume, the newest 16 per session) to the session, so a resumed runtime session
-- rebinds to its Repowire session.
CREATE TABLE work_sessions (
    tenant_id          TEXT NOT NULL,
    session_id         TEXT NOT NULL,
    backend            TEXT NOT NULL,
    circle             TEXT NOT NULL,
    project_path       TEXT,
    machine            TEXT,
    executor_peer_id   TEXT,
    transcript_path    TEXT,
    transcript_cursor  BIGINT,
    created_at_ms      BIGINT NOT NULL,
    last_seen_ms       BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, session_id)
);
CREATE INDEX work_sessions_executor ON work_sessions (tenant_id, executor_peer_id);
CREATE TABLE work_session_runtimes (
    tenant_id           TEXT NOT NULL,
    runtime_session_id  TEXT NOT NULL,
    session_id          TEXT NOT NULL,
    seen_at_ms          BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, runtime_session_id)
);
CREATE INDEX work_session_runtimes_session ON work_session_runtimes (tenant_id, session_id);
-- The sessions a message went between (nullable: known at accept time, or not).
ALTER TABLE messages ADD COLUMN from_session_id TEXT;
ALTER TABLE messages ADD COLUMN to_session_id TEXT;
