-- Each peer's delivered cursor moves to a row of its own (see the Postgres migration of the same
-- name: accepts write peers.last_seq/admitted, receipts write peer_cursors). The pending count is
-- admitted - released.
CREATE TABLE peer_cursors (
    tenant_id      TEXT NOT NULL,
    peer_id        TEXT NOT NULL,
    delivered_seq  INTEGER NOT NULL DEFAULT 0,
    released       INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, peer_id),
    FOREIGN KEY (tenant_id, peer_id) REFERENCES peers (tenant_id, peer_id)
);
INSERT INTO peer_cursors (tenant_id, peer_id, delivered_seq)
    SELECT tenant_id, peer_id, delivered_seq FROM peers;
ALTER TABLE peers RENAME COLUMN pending TO admitted;
ALTER TABLE peers DROP COLUMN delivered_seq;
