-- When each API key was last exchanged for a token (the admin CLI and API show it, so an
-- operator can tell a key in use from a forgotten one before revoking it).
ALTER TABLE api_keys ADD COLUMN last_used_at_ms BIGINT;
