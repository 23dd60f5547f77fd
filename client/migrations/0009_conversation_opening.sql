-- The opener's own opening message (its `sent` row), so that `conversation show` lists it first:
-- the opener never receives its opening, and its `sent` row names the peers, not the
-- conversation, which the relay minted only when it accepted it.
ALTER TABLE conversations ADD COLUMN opening_message_id TEXT;
