-- A direct conversation's own rate (protocol.md §10.15): the relay's
-- `conversation_turns_per_minute`, kept as a generic cell rate (GCRA) in one column, the
-- theoretical arrival time of the next turn, in ms since the epoch. A turn that arrives more
-- than a minute's worth of turns before it is refused with `rate_limited`; nothing else changes.
ALTER TABLE conversations ADD COLUMN turn_rate_tat_ms BIGINT NOT NULL DEFAULT 0;
