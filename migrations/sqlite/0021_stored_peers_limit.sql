-- Issue 30 item 7: a tenant's stored peers (live and offline) are bounded by its plan (a free
-- tenant stored 3 000 in seconds, registering and leaving in a loop). Past the limit the relay
-- forgets the tenant's longest-offline peer that holds nothing (relay/src/route/register.rs);
-- NULL limits: unlimited (plans) or the plan's value (tenants).
ALTER TABLE plans ADD COLUMN max_stored_peers INTEGER;
ALTER TABLE tenants ADD COLUMN max_stored_peers INTEGER;
UPDATE plans SET max_stored_peers = 100 WHERE name = 'free';
UPDATE plans SET max_stored_peers = 5000 WHERE name = 'team';
-- The eviction scan: a tenant's peers by how long ago they were last seen.
CREATE INDEX peers_last_seen ON peers (tenant_id, last_seen_ms);
-- ... and whether a peer still waits for an answer to an ask it sent (then it is kept).
CREATE INDEX messages_open_asks_from ON messages (tenant_id, from_peer_id)
    WHERE kind = 'ask' AND closed_at_ms IS NULL;
