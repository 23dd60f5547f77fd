-- Direct conversations (protocol.md §10.15): participants whose every finished turn reaches the
-- others. The relay owns one order per conversation: `last_seq` is the seq of its latest
-- message, taken under the conversation row's lock in the transaction that enqueues the
-- message, so every participant's inbox holds the conversation in that order.
-- `state`: `active`, `paused` or `ended`; `reason` says why it is not active.
-- `turns_since_person`: turns relayed since a person's prompt (the loop guard's count).
CREATE TABLE conversations (
    tenant_id           TEXT NOT NULL REFERENCES tenants (id),
    conversation_id     TEXT NOT NULL,
    opener_peer_id      TEXT NOT NULL,
    state               TEXT NOT NULL,
    reason              TEXT,
    last_seq            BIGINT NOT NULL,
    turns_since_person  BIGINT NOT NULL DEFAULT 0,
    created_at_ms       BIGINT NOT NULL,
    last_turn_at_ms     BIGINT NOT NULL,
    ended_at_ms         BIGINT,
    PRIMARY KEY (tenant_id, conversation_id)
);
CREATE INDEX conversations_active ON conversations (last_turn_at_ms) WHERE state <> 'ended';
-- Who takes part, as the opener resolved them (name and circle at that time); `position`: the
-- opener is 0, then in the order the opener named them.
CREATE TABLE conversation_participants (
    tenant_id        TEXT NOT NULL REFERENCES tenants (id),
    conversation_id  TEXT NOT NULL,
    peer_id          TEXT NOT NULL,
    name             TEXT NOT NULL,
    circle           TEXT NOT NULL,
    position         BIGINT NOT NULL,
    left_at_ms       BIGINT,
    PRIMARY KEY (tenant_id, conversation_id, peer_id)
);
CREATE INDEX conversation_participants_by_peer ON conversation_participants (tenant_id, peer_id);
-- A conversation's messages: the id, and the `Message.conversation` they are delivered with
-- (JSON: id, seq, event, participants, reason), fixed when accepted.
ALTER TABLE messages ADD COLUMN conversation_id TEXT;
ALTER TABLE messages ADD COLUMN conversation TEXT;
CREATE INDEX messages_by_conversation ON messages (tenant_id, conversation_id) WHERE conversation_id IS NOT NULL;
