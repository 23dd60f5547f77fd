-- The `approve` scope: answering questions to `@approvers` (agents' tool approvals). A key that
-- could do everything before keeps doing everything; a key restricted to some scopes stays
-- restricted (it gets no approvals).
UPDATE api_keys SET scopes = 'connect usage:read approve' WHERE scopes = 'connect usage:read';
