-- Two dashboard scopes: `keys:manage` (the Keys page) and `messages:read` (the Asks page). A
-- relay's first key, its owner's (labelled `bootstrap` in the `default` tenant and minted with
-- every scope there was; a rotation of it keeps that label and those scopes), keeps holding
-- every scope; every other key gets them only when asked for.
UPDATE api_keys SET scopes = 'connect usage:read approve keys:manage messages:read'
WHERE label = 'bootstrap' AND scopes = 'connect usage:read approve' AND revoked_at_ms IS NULL
AND tenant_id IN (SELECT id FROM tenants WHERE name = 'default');
