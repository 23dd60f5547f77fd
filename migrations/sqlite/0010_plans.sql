-- Plans: named bundles of limits a tenant is on. A NULL limit is unlimited. free, team and
-- unlimited are seeded; a deployment edits them through the admin API.
CREATE TABLE plans (
    name                 TEXT PRIMARY KEY,
    description          TEXT NOT NULL DEFAULT '',
    max_peers            INTEGER,
    max_connections      INTEGER,
    max_message_bytes    INTEGER,
    inbox_cap            INTEGER,
    messages_per_minute  INTEGER,
    messages_per_month   INTEGER,
    created_at_ms        INTEGER NOT NULL,
    updated_at_ms        INTEGER NOT NULL
);

INSERT INTO plans (name, description, max_peers, max_connections, max_message_bytes, inbox_cap,
                   messages_per_minute, messages_per_month, created_at_ms, updated_at_ms)
VALUES
    ('free', 'Try it out: a handful of agents', 10, 10, 32768, 1000, 60, 10000, 0, 0),
    ('team', 'A team''s agents on a shared relay', 200, 200, 32768, 10000, 1200, 1000000, 0, 0),
    ('unlimited', 'No limits beyond the relay''s own', NULL, NULL, NULL, NULL, NULL, NULL, 0, 0);

-- Per-tenant overrides of the plan's limits (NULL: the plan's value). max_peers,
-- max_message_bytes, max_messages_per_minute and max_monthly_messages exist since 0001.
ALTER TABLE tenants ADD COLUMN max_connections INTEGER;
ALTER TABLE tenants ADD COLUMN inbox_cap INTEGER;
ALTER TABLE tenants ADD COLUMN display_name TEXT;

-- The single-user tenant a relay bootstraps was created on the default plan, 'free'; it is the
-- local machine's own relay, so it is on 'unlimited'.
UPDATE tenants SET plan = 'unlimited' WHERE name = 'default';
