-- Admin tokens minted through the admin API (besides the bootstrap REPOWIRE_ADMIN_TOKEN): only
-- the SHA-256 of the token text is stored; scopes are 'admin:read', 'admin:write' or both,
-- space-separated.
CREATE TABLE admin_tokens (
    id              TEXT PRIMARY KEY,
    label           TEXT NOT NULL,
    scopes          TEXT NOT NULL,
    hash            TEXT NOT NULL UNIQUE,
    display         TEXT NOT NULL,
    created_at_ms   INTEGER NOT NULL,
    expires_at_ms   INTEGER,
    revoked_at_ms   INTEGER,
    last_used_at_ms INTEGER
);
