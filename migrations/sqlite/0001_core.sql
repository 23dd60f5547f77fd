-- Core schema: tenants, API keys, peers, messages, inboxes.
-- Every table is keyed by tenant_id first; every query filters on it.
-- Times are milliseconds since the Unix epoch (INTEGER) so both dialects agree.

CREATE TABLE tenants (
    id                       TEXT PRIMARY KEY,
    name                     TEXT NOT NULL UNIQUE,
    plan                     TEXT NOT NULL DEFAULT 'free',
    -- Limits; NULL means the plan's default. Enforced by the usage/billing admin API issue.
    max_peers                INTEGER,
    max_messages_per_minute  INTEGER,
    max_monthly_messages     INTEGER,
    max_message_bytes        INTEGER,
    created_at_ms            INTEGER NOT NULL,
    disabled_at_ms           INTEGER
);

CREATE TABLE api_keys (
    id               TEXT PRIMARY KEY,
    tenant_id        TEXT NOT NULL REFERENCES tenants (id),
    hash             TEXT NOT NULL UNIQUE,
    display          TEXT NOT NULL,
    label            TEXT NOT NULL DEFAULT '',
    mode             TEXT NOT NULL,
    created_at_ms    INTEGER NOT NULL,
    expires_at_ms    INTEGER,
    revoked_at_ms    INTEGER
);
CREATE INDEX api_keys_tenant ON api_keys (tenant_id);

CREATE TABLE peers (
    tenant_id           TEXT NOT NULL REFERENCES tenants (id),
    peer_id             TEXT NOT NULL,
    name                TEXT NOT NULL,
    circle              TEXT NOT NULL,
    backend             TEXT NOT NULL,
    role                TEXT NOT NULL,
    path                TEXT,
    machine             TEXT,
    description         TEXT,
    description_at_ms   INTEGER,
    created_at_ms       INTEGER NOT NULL,
    last_seen_ms        INTEGER NOT NULL,
    -- Highest inbox sequence number handed out for this peer.
    last_seq            INTEGER NOT NULL DEFAULT 0,
    -- Inbox entries still waiting for delivery (effectively 'accepted'); bounded by the inbox cap.
    pending             INTEGER NOT NULL DEFAULT 0,
    -- Delivered cursor: an inbox entry whose row still says 'accepted' is delivered once its
    -- seq is at or below this. Receipts advance it instead of rewriting a row per message.
    delivered_seq       INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, peer_id)
);
CREATE INDEX peers_name ON peers (tenant_id, name);

CREATE TABLE messages (
    tenant_id           TEXT NOT NULL REFERENCES tenants (id),
    message_id          TEXT NOT NULL,
    kind                TEXT NOT NULL,
    from_peer_id        TEXT NOT NULL,
    from_name           TEXT NOT NULL,
    from_circle         TEXT NOT NULL,
    body                TEXT NOT NULL,
    correlation_id      TEXT,
    reply_to            TEXT,
    question            TEXT,
    answer              TEXT,
    content_hash        TEXT NOT NULL,
    created_at_ms       INTEGER NOT NULL,
    expires_at_ms       INTEGER NOT NULL,
    -- Asks: when and by which frame the thread was closed, and the reply text if any.
    closed_at_ms        INTEGER,
    closed_by           TEXT,
    reply_text          TEXT,
    PRIMARY KEY (tenant_id, message_id)
);
-- Replies share their ask's correlation id, so only originating messages are unique.
CREATE UNIQUE INDEX messages_correlation ON messages (tenant_id, correlation_id) WHERE kind <> 'reply';

CREATE TABLE inbox (
    tenant_id       TEXT NOT NULL REFERENCES tenants (id),
    peer_id         TEXT NOT NULL,
    seq             INTEGER NOT NULL,
    message_id      TEXT NOT NULL,
    state           TEXT NOT NULL,
    reason          TEXT,
    updated_at_ms   INTEGER NOT NULL,
    expires_at_ms   INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, peer_id, seq)
);
CREATE UNIQUE INDEX inbox_message ON inbox (tenant_id, message_id, peer_id);
CREATE INDEX inbox_pending_expiry ON inbox (expires_at_ms) WHERE state = 'accepted';
