-- Direct conversations a local peer takes part in: a cache of what the relay owns, learnt from
-- the `accepted` of a `converse` this daemon sent and from delivered conversation messages.
-- The Stop hook reads it (never the relay) to decide where a finished turn goes.
-- `participants`: JSON array of the relay's PeerSummary, the opener first.
-- `joined_at_ms`: when this peer joined (opened it, or received its opening): a turn that
-- started before that is not relayed.
CREATE TABLE conversations (
    realm            TEXT NOT NULL,
    peer_id          TEXT NOT NULL,
    conversation_id  TEXT NOT NULL,
    state            TEXT NOT NULL,
    reason           TEXT,
    participants     TEXT NOT NULL,
    opener           TEXT NOT NULL,
    joined_at_ms     INTEGER NOT NULL,
    last_seq         INTEGER NOT NULL,
    updated_at_ms    INTEGER NOT NULL,
    PRIMARY KEY (realm, peer_id, conversation_id)
);
-- The current segment of each session's turn: when it started (a prompt, or a Stop that
-- handed messages over and let the agent go on), whether a person's prompt started it, and
-- the conversations whose messages it was handed (JSON array of ids): a segment no person
-- started is relayed only to those, so an answer to another peer's ask never leaks into a
-- conversation.
CREATE TABLE turn_segments (
    session_id     TEXT PRIMARY KEY,
    started_at_ms  INTEGER NOT NULL,
    by_person      INTEGER NOT NULL,
    conversations  TEXT NOT NULL DEFAULT '[]'
);
-- A delivered message that does not wake the agent nor make it go on at Stop (a conversation's
-- pause or end notice): handed over with the next turn's other messages.
ALTER TABLE inbox ADD COLUMN quiet INTEGER NOT NULL DEFAULT 0;
