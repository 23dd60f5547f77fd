-- Idempotency-Key of admin key creation: a retry with the same key finds the key it made
-- instead of minting a second one. The key text itself is never stored (a retry within the
-- window recomputes it from a secret the relay keeps; see admin/keys.rs).
CREATE TABLE key_requests (
    tenant_id       TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    request_hash    TEXT NOT NULL,
    key_id          TEXT NOT NULL,
    created_at_ms   INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, idempotency_key)
);
