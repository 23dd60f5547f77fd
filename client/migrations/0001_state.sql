-- The state.db schema as it was before migrations existed. Every statement is IF NOT EXISTS,
-- so a state.db made by a daemon of that time passes through this step unchanged.
CREATE TABLE IF NOT EXISTS sessions (
    session_id    TEXT PRIMARY KEY,
    backend       TEXT NOT NULL,
    role          TEXT NOT NULL,
    circle        TEXT NOT NULL,
    path          TEXT,
    pane          TEXT,
    tmux_socket   TEXT,
    agent_pid     INTEGER,
    agent_start   INTEGER,
    transcript    TEXT,
    peer_id       TEXT,
    name          TEXT,
    turn_state    TEXT NOT NULL DEFAULT 'unknown',
    active        INTEGER NOT NULL DEFAULT 1,
    -- 1 when the next session of the same agent process takes this one's peer over
    -- (a pane adopted by `repowire link`, or a `/clear` in the runtime).
    handoff       INTEGER NOT NULL DEFAULT 0,
    started_at_ms INTEGER NOT NULL,
    ended_at_ms   INTEGER
);
CREATE INDEX IF NOT EXISTS sessions_peer ON sessions(peer_id);
CREATE TABLE IF NOT EXISTS inbox (
    message_id     TEXT NOT NULL,
    peer_id        TEXT NOT NULL,
    seq            INTEGER NOT NULL,
    kind           TEXT NOT NULL,
    correlation_id TEXT,
    body           TEXT NOT NULL,
    state          TEXT NOT NULL,
    closed         INTEGER NOT NULL DEFAULT 0,
    received_at_ms INTEGER NOT NULL,
    handed_at_ms   INTEGER,
    -- An injected/failed receipt that could not be sent (link down): sent after reconnecting.
    receipt_pending INTEGER NOT NULL DEFAULT 0,
    fail_reason    TEXT,
    -- A broadcast is one message delivered to several local peers.
    PRIMARY KEY (peer_id, message_id)
);
CREATE INDEX IF NOT EXISTS inbox_peer_state ON inbox(peer_id, state);
CREATE TABLE IF NOT EXISTS outbox (
    frame_id      TEXT PRIMARY KEY,
    peer_id       TEXT NOT NULL,
    frame         TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS sent (
    message_id     TEXT PRIMARY KEY,
    peer_id        TEXT NOT NULL,
    kind           TEXT NOT NULL,
    to_name        TEXT,
    text           TEXT NOT NULL,
    correlation_id TEXT,
    state          TEXT NOT NULL,
    error          TEXT,
    reply          TEXT,
    created_at_ms  INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS sent_cid ON sent(correlation_id);
CREATE TABLE IF NOT EXISTS sent_events (
    message_id TEXT NOT NULL,
    recipient  TEXT,
    state      TEXT NOT NULL,
    reason     TEXT,
    at_ms      INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS sent_events_msg ON sent_events(message_id);
