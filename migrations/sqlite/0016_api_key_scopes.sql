-- What an API key may do, space-separated: 'connect' (exchange it for a token and connect
-- agents) and 'usage:read' (read the tenant's own limits and usage). Keys made before scopes
-- existed could do both, and keep doing both.
ALTER TABLE api_keys ADD COLUMN scopes TEXT NOT NULL DEFAULT 'connect usage:read';
