-- Every admin write: who (actor), what (action, target), when, the request it came in, and
-- the object before and after it (JSON; never a key's text).
CREATE TABLE admin_audit (
    id          TEXT PRIMARY KEY,
    at_ms       INTEGER NOT NULL,
    actor       TEXT NOT NULL,
    action      TEXT NOT NULL,
    target      TEXT NOT NULL,
    tenant_id   TEXT,
    request_id  TEXT NOT NULL,
    before_json TEXT,
    after_json  TEXT
);
CREATE INDEX admin_audit_at ON admin_audit (at_ms, id);
CREATE INDEX admin_audit_tenant ON admin_audit (tenant_id, at_ms, id);
