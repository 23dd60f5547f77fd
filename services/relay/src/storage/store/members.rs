//! A tenant's members (people who sign in through the relay's OpenID Connect provider) and the
//! sign-ins under way, in storage. See migration 0024 for what each column means.

use async_trait::async_trait;

use super::Result;

/// A member of a tenant, or an invitation not yet claimed (no `issuer`).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct MemberRecord {
    /// `mem-…`.
    pub id: String,
    /// Its tenant.
    pub tenant_id: String,
    /// The provider that vouches for it (none: an invitation).
    pub issuer: Option<String>,
    /// Its subject at that provider.
    pub subject: Option<String>,
    /// Its email (lower case): the invitation's, then the provider's.
    pub email: Option<String>,
    /// What its sessions may do, space-separated.
    pub scopes: String,
    /// Made by sign-up.
    pub owner: bool,
    /// Who invited it (`key:<id>` or `member:<id>`).
    pub invited_by: Option<String>,
    /// Invited (ms).
    pub created_at_ms: i64,
    /// First signed in (ms).
    pub joined_at_ms: Option<i64>,
    /// Last signed in (ms).
    pub last_seen_at_ms: Option<i64>,
    /// Removed (ms): its sessions end, its row stays.
    pub removed_at_ms: Option<i64>,
}

impl MemberRecord {
    /// Whether it may do what `scope` allows.
    pub fn has(&self, scope: &str) -> bool {
        self.scopes.split(' ').any(|s| s == scope)
    }
}

/// A sign-in through the provider under way.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct OidcAttempt {
    /// SHA-256 (hex) of the `state` it sent the browser off with.
    pub state_hash: String,
    /// SHA-256 (hex) of the binding cookie of the browser that started it.
    pub browser_hash: String,
    /// `signin`, `signup` or `operator`.
    pub purpose: String,
    /// The nonce the ID token must carry.
    pub nonce: String,
    /// The PKCE verifier for the code exchange.
    pub pkce_verifier: String,
    /// The team a sign-up names.
    pub signup_team: Option<String>,
    /// Started (ms).
    pub created_at_ms: i64,
    /// Unusable from (ms).
    pub expires_at_ms: i64,
}

/// Members, invitations, and sign-ins through the provider.
#[async_trait]
pub trait MemberStore: Send + Sync {
    /// Stores a member or an invitation; false (and nothing stored) if the tenant already has
    /// that identity, or an open invitation for that email.
    async fn add_member(&self, member: &MemberRecord) -> Result<bool>;
    /// The tenant's members and open invitations (not removed), oldest first.
    async fn list_members(&self, tenant_id: &str) -> Result<Vec<MemberRecord>>;
    /// One member by id, removed or not.
    async fn get_member(&self, id: &str) -> Result<Option<MemberRecord>>;
    /// Removes a member of `tenant_id`, the tenant's open invitations for its email, and ends
    /// its dashboard sessions; false if there is none (another tenant's id included).
    async fn remove_member(&self, tenant_id: &str, id: &str, now_ms: i64) -> Result<bool>;
    /// A sign-in of (`issuer`, `subject`): first claims the open invitations for `email` (only
    /// pass an email the provider verified) in tenants the identity is not a member of yet, then
    /// returns every membership of the identity, with its last sign-in set to `now_ms`.
    async fn sign_in_member(
        &self,
        issuer: &str,
        subject: &str,
        verified_email: Option<&str>,
        now_ms: i64,
    ) -> Result<Vec<MemberRecord>>;
    /// Stores a sign-in under way, and forgets those that expired a day before it started.
    async fn create_oidc_attempt(&self, attempt: &OidcAttempt) -> Result<()>;
    /// Uses a sign-in under way: returns it and marks it used if it exists, is unused and has
    /// not expired at `now_ms`; `None` otherwise. Two takers: one gets it.
    async fn take_oidc_attempt(&self, state_hash: &str, now_ms: i64)
    -> Result<Option<OidcAttempt>>;
}
