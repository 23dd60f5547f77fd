-- The Repowire session (`rs-…`) the relay bound this runtime session to: named again when the
-- session registers (after a reconnect, a `/clear` that hands the peer over, a resume), so the
-- work stream keeps its id.
ALTER TABLE sessions ADD COLUMN repowire_session_id TEXT;
