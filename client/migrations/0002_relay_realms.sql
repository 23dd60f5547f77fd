-- The tenant wall inside the daemon: everything that belongs to a relay is stamped with the
-- relay identity ("realm") it was created under: `<relay url>#<tenant id>`, or
-- `<relay url>#key:<fingerprint>` until the tenant is known. Rows of another realm are never
-- sent, resent or re-minted on the current relay. '' marks rows from before this migration;
-- the daemon assigns them to the realm it starts in.
ALTER TABLE sessions ADD COLUMN realm TEXT NOT NULL DEFAULT '';
ALTER TABLE inbox ADD COLUMN realm TEXT NOT NULL DEFAULT '';
ALTER TABLE outbox ADD COLUMN realm TEXT NOT NULL DEFAULT '';
ALTER TABLE sent ADD COLUMN realm TEXT NOT NULL DEFAULT '';
CREATE INDEX outbox_realm ON outbox(realm);

-- A session's peer identity on each relay it has been registered with, so that switching back
-- to a relay reclaims the peer it had there (and its queued messages go out as that peer).
CREATE TABLE session_identities (
    session_id TEXT NOT NULL,
    realm      TEXT NOT NULL,
    peer_id    TEXT NOT NULL,
    name       TEXT,
    PRIMARY KEY (session_id, realm)
);

-- Relays this daemon has used: which tenant a key belongs to, learned from the relay.
CREATE TABLE relays (
    relay_url       TEXT NOT NULL,
    key_fingerprint TEXT NOT NULL,
    tenant_id       TEXT,
    first_seen_ms   INTEGER NOT NULL,
    last_seen_ms    INTEGER NOT NULL,
    PRIMARY KEY (relay_url, key_fingerprint)
);
