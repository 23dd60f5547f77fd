-- A tenant's members: people who sign in to its dashboard through the relay's OpenID Connect
-- provider. A member is an identity (the provider's issuer and subject), never a shared secret.
-- An invitation names an email and has no identity yet: the first sign-in whose provider
-- vouches for that email (`email_verified`) claims it. `scopes`: what the member's sessions may
-- do (space-separated). `owner`: made by sign-up. Removing a member keeps its row (audit) and
-- ends its sessions.
CREATE TABLE tenant_members (
    id               TEXT PRIMARY KEY,
    tenant_id        TEXT NOT NULL REFERENCES tenants (id),
    issuer           TEXT,
    subject          TEXT,
    email            TEXT,
    scopes           TEXT NOT NULL,
    owner            BOOLEAN NOT NULL DEFAULT FALSE,
    invited_by       TEXT,
    created_at_ms    BIGINT NOT NULL,
    joined_at_ms     BIGINT,
    last_seen_at_ms  BIGINT,
    removed_at_ms    BIGINT
);
CREATE UNIQUE INDEX tenant_members_identity ON tenant_members (tenant_id, issuer, subject)
    WHERE issuer IS NOT NULL AND removed_at_ms IS NULL;
CREATE UNIQUE INDEX tenant_members_invite ON tenant_members (tenant_id, email)
    WHERE issuer IS NULL AND removed_at_ms IS NULL;
CREATE INDEX tenant_members_by_identity ON tenant_members (issuer, subject);
CREATE INDEX tenant_members_by_email ON tenant_members (email) WHERE issuer IS NULL;
-- A session opened by a member's sign-in acts with the member's scopes while the member stays.
ALTER TABLE dashboard_sessions ADD COLUMN member_id TEXT;
-- A sign-in through the provider under way: what the callback needs, found by the SHA-256 of
-- the `state` it carries and used once (on any pod). `browser_hash`: the SHA-256 of the
-- binding cookie set on the browser that started it, so a callback in another browser (login
-- CSRF, a stolen code) is refused. `purpose`: `signin`, `signup` or `operator`.
CREATE TABLE dashboard_oidc_attempts (
    state_hash     TEXT PRIMARY KEY,
    browser_hash   TEXT NOT NULL,
    purpose        TEXT NOT NULL,
    nonce          TEXT NOT NULL,
    pkce_verifier  TEXT NOT NULL,
    signup_team    TEXT,
    created_at_ms  BIGINT NOT NULL,
    expires_at_ms  BIGINT NOT NULL,
    used_at_ms     BIGINT
);
CREATE INDEX dashboard_oidc_attempts_expiry ON dashboard_oidc_attempts (expires_at_ms);
