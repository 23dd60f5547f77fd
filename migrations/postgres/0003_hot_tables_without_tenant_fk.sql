-- Messages and inbox entries are the hot path (two rows per routed message). Their foreign keys
-- to `tenants` cost a referential-integrity check per inserted row, each taking a KEY SHARE row
-- lock on the tenant's one row: with several pods writing at once those locks pile up as
-- multixacts on a single row. Every write of these tables comes from a relay that took the tenant
-- from a verified token, and tenants are disabled, never deleted, so the check guards nothing.
-- `peers`, `api_keys` and `shared_state` keep theirs (written rarely).
ALTER TABLE messages DROP CONSTRAINT messages_tenant_id_fkey;
ALTER TABLE inbox DROP CONSTRAINT inbox_tenant_id_fkey;
