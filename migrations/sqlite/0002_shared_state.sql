-- Shared state: a small key-value store per tenant and circle (state_set / state_get).
CREATE TABLE shared_state (
    tenant_id     TEXT    NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    circle        TEXT    NOT NULL,
    key           TEXT    NOT NULL,
    value         TEXT    NOT NULL,
    updated_by    TEXT    NOT NULL,
    updated_at_ms INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, circle, key)
);
