-- The expiry sweep no longer reads an index of every 'accepted' row. Inbox rows delivered through
-- the peer's cursor keep saying 'accepted' (nothing rewrites them), so that index held every
-- message ever routed: once the message TTL had passed, each sweep walked the whole delivered
-- history to find the few rows still waiting. The sweep now reads each peer's entries past its
-- cursor (the inbox primary key), work in proportion to what is actually undelivered, and every
-- routed message stops paying for an index entry it never needed.
DROP INDEX IF EXISTS inbox_pending_expiry;
