-- A deleted tenant: its keys are revoked and it serves nothing; its rows stay until it is
-- purged (explicitly, or by the relay once the retention period has passed).
ALTER TABLE tenants ADD COLUMN deleted_at_ms INTEGER;
