-- The `keys:manage` scope: the dashboard's Keys page. A relay's first key, its owner's (the
-- `default` tenant's oldest key, labelled `bootstrap` and minted with every scope there was),
-- keeps holding every scope; every other key, including one named with all three earlier scopes
-- or labelled `bootstrap` by someone, gets it only when asked for.
UPDATE api_keys SET scopes = 'connect usage:read approve keys:manage'
WHERE id = (
    SELECT k.id FROM api_keys k JOIN tenants t ON t.id = k.tenant_id
    WHERE t.name = 'default'
    ORDER BY k.created_at_ms, k.id LIMIT 1
) AND label = 'bootstrap' AND scopes = 'connect usage:read approve';
