-- The `keys:manage` scope: the dashboard's Keys page. A relay's first key, its owner's
-- (`bootstrap`, minted with every scope), keeps holding every scope; every other key, including
-- one named with all three earlier scopes, gets it only when asked for.
UPDATE api_keys SET scopes = 'connect usage:read approve keys:manage'
WHERE label = 'bootstrap' AND scopes = 'connect usage:read approve';
