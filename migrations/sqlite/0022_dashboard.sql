-- The web dashboard's sign-in links and browser sessions. Only the SHA-256 of each secret (the
-- link's token, the session cookie) is kept: a copy of this table signs nobody in.
-- A link is minted by `repowire dashboard` with an API key and opens one session, once, within
-- its lifetime; the session acts with that key's scopes for as long as the key stays usable.
CREATE TABLE dashboard_links (
    token_hash     TEXT PRIMARY KEY,
    tenant_id      TEXT NOT NULL,
    key_id         TEXT NOT NULL,
    created_at_ms  BIGINT NOT NULL,
    expires_at_ms  BIGINT NOT NULL,
    used_at_ms     BIGINT
);
CREATE INDEX dashboard_links_expiry ON dashboard_links (expires_at_ms);
-- `audience`: `tenant` (a tenant's pages). `subject` says who signed in (`key:<key id>`).
-- `scopes`: what the session may do (space-separated), at most its key's scopes at each request.
-- `csrf`: the token every form of the session carries.
CREATE TABLE dashboard_sessions (
    id_hash        TEXT PRIMARY KEY,
    audience       TEXT NOT NULL,
    tenant_id      TEXT,
    key_id         TEXT,
    subject        TEXT NOT NULL,
    scopes         TEXT NOT NULL,
    csrf           TEXT NOT NULL,
    created_at_ms  BIGINT NOT NULL,
    expires_at_ms  BIGINT NOT NULL,
    ended_at_ms    BIGINT
);
CREATE INDEX dashboard_sessions_expiry ON dashboard_sessions (expires_at_ms);
-- The dashboard's Asks page: a tenant's newest asks.
CREATE INDEX messages_recent_asks ON messages (tenant_id, created_at_ms) WHERE kind = 'ask';
