-- Issue 30 item 7: a tenant's shared state is bounded in bytes by its plan (a free tenant
-- stored 17 MB in seconds). Each entry keeps its size (key and value bytes) so the tenant's
-- total is one SUM; NULL limits: unlimited (plans) or the plan's value (tenants).
ALTER TABLE shared_state ADD COLUMN size_bytes INTEGER NOT NULL DEFAULT 0;
UPDATE shared_state SET size_bytes = length(CAST(key AS BLOB)) + length(CAST(value AS BLOB));
ALTER TABLE plans ADD COLUMN max_state_bytes INTEGER;
ALTER TABLE tenants ADD COLUMN max_state_bytes INTEGER;
UPDATE plans SET max_state_bytes = 1048576 WHERE name = 'free';
UPDATE plans SET max_state_bytes = 67108864 WHERE name = 'team';
