-- Byte-order ("C") collation for the identifier columns of the hot tables. Every routed message
-- inserts into and looks up B-tree indexes keyed on these (tenant, message, peer, correlation
-- ids), and under a linguistic collation each key comparison goes through the C library's
-- strcoll: on a C.UTF-8 database that was ~17 % of Postgres's CPU under load (perf), and more
-- under en_US-style collations. These are opaque ids, compared only for equality and ordered
-- only for the index's sake, so byte order loses nothing. Display names keep the database's
-- collation (presence lists are ordered by them).
--
-- Queries compare these columns with parameters and with each other; a parameter takes the
-- column's collation, so the indexes keep being used. Columns of other tables that reference
-- them (tenants.id, api_keys.tenant_id, shared_state.tenant_id) keep theirs: no query joins them
-- to these, and the foreign keys compare for equality, which both collations agree on.
--
-- Upgrading: the columns' storage does not change (no table rewrite), but the indexes on them
-- are rebuilt under an exclusive lock on each table; on a large database, apply this in a quiet
-- moment. Pods of the previous version keep working with the result (their queries are the
-- same).
ALTER TABLE peers
    ALTER COLUMN tenant_id TYPE text COLLATE "C",
    ALTER COLUMN peer_id TYPE text COLLATE "C";
ALTER TABLE messages
    ALTER COLUMN tenant_id TYPE text COLLATE "C",
    ALTER COLUMN message_id TYPE text COLLATE "C",
    ALTER COLUMN correlation_id TYPE text COLLATE "C";
ALTER TABLE inbox
    ALTER COLUMN tenant_id TYPE text COLLATE "C",
    ALTER COLUMN peer_id TYPE text COLLATE "C",
    ALTER COLUMN message_id TYPE text COLLATE "C";
