-- Tool calls the PreToolUse gate denied on this machine without an approver's decision: the
-- relay could not be reached, the question could not be asked, or no answer reached this
-- machine in time. The relay keeps the record of every decision made
-- by an approver or a question's timeout; these are the ones it cannot know about, shown by
-- `repowire approvals history` beside its record. Within a relay identity (realm), like the
-- rest of this database; the newest 1000 of each realm are kept.
CREATE TABLE local_decisions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    realm TEXT NOT NULL,
    decided_at_ms INTEGER NOT NULL,
    session_id TEXT NOT NULL,
    peer_id TEXT,
    name TEXT,
    circle TEXT,
    correlation_id TEXT,
    text TEXT NOT NULL,
    reason TEXT NOT NULL
);
CREATE INDEX local_decisions_by_realm ON local_decisions (realm, decided_at_ms);
