-- The loop guard's second count (protocol.md §10.15): bytes of the turns relayed since a
-- person's prompt. A turn that would take it past the relay's `conversation_loop_bytes` pauses
-- the conversation as the 21st turn without a person does.
ALTER TABLE conversations ADD COLUMN bytes_since_person BIGINT NOT NULL DEFAULT 0;
