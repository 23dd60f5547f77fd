-- When each API key was last exchanged for a token (see the Postgres migration of the same name).
ALTER TABLE api_keys ADD COLUMN last_used_at_ms INTEGER;
