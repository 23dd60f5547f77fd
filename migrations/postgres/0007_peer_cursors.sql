-- Each peer's delivered cursor moves to a row of its own. Accepts write a recipient's inbox
-- slots (peers.last_seq, peers.admitted); receipts move its cursor and release slots
-- (peer_cursors.delivered_seq, peer_cursors.released). On one row, a pod accepting messages for
-- a peer and the pod serving that peer's receipts locked the same row in every batch, so two
-- pods' writers took turns (measured: 69 us per write each, against 23 us for one pod alone).
-- Now they lock different rows.
--
-- The inbox's pending count is admitted - released. An accept checks the cap against the
-- released count it reads without locking: that read can only be behind (released only grows),
-- so the cap can refuse a slot a moment early but never admits past it.
--
-- Upgrading: pods of the previous version update peers.delivered_seq and peers.pending, which no
-- longer exist; stop them before applying this (a rolling upgrade across this migration would
-- have old pods fail their writes with explicit errors until replaced, nothing accepted is lost).
CREATE TABLE peer_cursors (
    tenant_id      TEXT COLLATE "C" NOT NULL,
    peer_id        TEXT COLLATE "C" NOT NULL,
    -- An inbox entry whose row still says 'accepted' is delivered once its seq is at or below
    -- this. Receipts advance it instead of rewriting a row per message.
    delivered_seq  BIGINT NOT NULL DEFAULT 0,
    -- Inbox slots freed (delivered through the cursor, moved past 'accepted', or expired).
    released       BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, peer_id),
    FOREIGN KEY (tenant_id, peer_id) REFERENCES peers (tenant_id, peer_id)
);
INSERT INTO peer_cursors (tenant_id, peer_id, delivered_seq)
    SELECT tenant_id, peer_id, delivered_seq FROM peers;
-- Slots ever granted; pending = admitted - released (released starts at 0 here).
ALTER TABLE peers RENAME COLUMN pending TO admitted;
ALTER TABLE peers DROP COLUMN delivered_seq;

CREATE OR REPLACE FUNCTION repowire_take_slots(tenants text[], peer_ids text[], counts bigint[], caps bigint[])
RETURNS TABLE (k integer, last bigint)
LANGUAGE plpgsql AS $$
BEGIN
    FOR j IN 1 .. coalesce(array_length(tenants, 1), 0) LOOP
        UPDATE peers p SET last_seq = p.last_seq + counts[j], admitted = p.admitted + counts[j]
        WHERE p.tenant_id = tenants[j] AND p.peer_id = peer_ids[j]
          AND p.admitted + counts[j] - (SELECT c.released FROM peer_cursors c
                                        WHERE c.tenant_id = tenants[j] AND c.peer_id = peer_ids[j]) <= caps[j]
        RETURNING j, p.last_seq INTO k, last;
        IF FOUND THEN
            RETURN NEXT;
        END IF;
    END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION repowire_advance_cursors(tenants text[], peer_ids text[], froms bigint[], tos bigint[], freed bigint[])
RETURNS TABLE (k integer)
LANGUAGE plpgsql AS $$
BEGIN
    FOR j IN 1 .. coalesce(array_length(tenants, 1), 0) LOOP
        UPDATE peer_cursors c SET delivered_seq = tos[j], released = c.released + freed[j]
        WHERE c.tenant_id = tenants[j] AND c.peer_id = peer_ids[j] AND c.delivered_seq = froms[j];
        IF FOUND THEN
            k := j;
            RETURN NEXT;
        END IF;
    END LOOP;
END
$$;
