-- A session's Repowire session id (`rs-…`) is one relay tenant's, like its peer id: kept per
-- relay identity with the peer identity, so that switching relay or tenant neither offers one
-- tenant's id to another's relay nor forgets it for a switch back.
ALTER TABLE session_identities ADD COLUMN repowire_session_id TEXT;
