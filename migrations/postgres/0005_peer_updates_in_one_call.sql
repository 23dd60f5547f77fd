-- The per-peer updates of a write batch in one round trip each. A batch touches a few peer rows
-- (inbox slots for its recipients, delivered cursors for its receipts), one primary-key update per
-- peer; sent one by one they were most of a small batch's round trips (11 of 18 at 1 000
-- messages/s), and on a busy machine each round trip costs far more than the update. A single
-- array-driven UPDATE ... FROM unnest(...) was tried and measured slower (its plan reads the
-- peer table, whose rows every batch rewrites); these loop over the same single-row updates.

-- Grants counts[j] consecutive inbox slots to peer j if its inbox has room for all of them.
-- Returns (j, the peer's new last_seq) for each peer granted; others are left unchanged.
CREATE FUNCTION repowire_take_slots(tenants text[], peer_ids text[], counts bigint[], caps bigint[])
RETURNS TABLE (k integer, last bigint)
LANGUAGE plpgsql AS $$
BEGIN
    FOR j IN 1 .. coalesce(array_length(tenants, 1), 0) LOOP
        UPDATE peers p SET last_seq = p.last_seq + counts[j], pending = p.pending + counts[j]
        WHERE p.tenant_id = tenants[j] AND p.peer_id = peer_ids[j] AND p.pending + counts[j] <= caps[j]
        RETURNING j, p.last_seq INTO k, last;
        IF FOUND THEN
            RETURN NEXT;
        END IF;
    END LOOP;
END
$$;

-- Moves peer j's delivered cursor from froms[j] to tos[j] (compare-and-set: only if it is still
-- at froms[j]), releasing freed[j] inbox slots. Returns the j of each cursor moved.
CREATE FUNCTION repowire_advance_cursors(tenants text[], peer_ids text[], froms bigint[], tos bigint[], freed bigint[])
RETURNS TABLE (k integer)
LANGUAGE plpgsql AS $$
BEGIN
    FOR j IN 1 .. coalesce(array_length(tenants, 1), 0) LOOP
        UPDATE peers p SET delivered_seq = tos[j], pending = p.pending - freed[j]
        WHERE p.tenant_id = tenants[j] AND p.peer_id = peer_ids[j] AND p.delivered_seq = froms[j];
        IF FOUND THEN
            k := j;
            RETURN NEXT;
        END IF;
    END LOOP;
END
$$;
