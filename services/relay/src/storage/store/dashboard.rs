//! The web dashboard's sign-in links and browser sessions in storage. Secrets are stored as
//! their SHA-256 only; the caller hashes them.

use async_trait::async_trait;

use super::Result;

/// A one-time sign-in link, minted with an API key.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct DashboardLink {
    /// SHA-256 (hex) of the link's token.
    pub token_hash: String,
    /// The key's tenant.
    pub tenant_id: String,
    /// The key it was minted with: the session acts with its scopes.
    pub key_id: String,
    /// Minted (ms).
    pub created_at_ms: i64,
    /// Unusable from (ms).
    pub expires_at_ms: i64,
}

/// A signed-in browser.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct DashboardSession {
    /// SHA-256 (hex) of the cookie's secret.
    pub id_hash: String,
    /// Whose pages: `tenant`, `operator`, or `chooser` (signed in through the provider as a
    /// member of several tenants, before choosing one: `scopes` lists those memberships' ids).
    pub audience: String,
    /// The tenant (tenant sessions).
    pub tenant_id: Option<String>,
    /// The API key it acts with, if any: the session ends when the key stops being usable.
    pub key_id: Option<String>,
    /// The member it acts as, if any (a sign-in through the provider): the session ends when
    /// the member is removed, and acts with the member's scopes.
    pub member_id: Option<String>,
    /// Who signed in (`key:<key id>`, `oidc:<email or subject>`, `staff:<email>`).
    pub subject: String,
    /// What it may do, space-separated.
    pub scopes: String,
    /// The token its forms carry.
    pub csrf: String,
    /// Signed in (ms).
    pub created_at_ms: i64,
    /// Unusable from (ms).
    pub expires_at_ms: i64,
}

/// An ask as the dashboard lists it.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ListedAsk {
    /// Message id.
    pub message_id: String,
    /// Its correlation id (`ask-…`).
    pub correlation_id: Option<String>,
    /// The asker's name then.
    pub from_name: String,
    /// The asker's circle then.
    pub from_circle: String,
    /// The question's text.
    pub body: String,
    /// Sent (ms).
    pub created_at_ms: i64,
    /// Closed (ms): by a reply, or by its question's timeout.
    pub closed_at_ms: Option<i64>,
    /// What closed it: the reply's message id, or `timeout`.
    pub closed_by: Option<String>,
    /// The answer's option id, when an `answer` (or a question's timeout default) closed it;
    /// `None` for an `ack`.
    pub answer: Option<String>,
    /// The reply's text, if a reply closed it.
    pub reply_text: Option<String>,
}

/// One recipient of a listed ask.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct AskRecipient {
    /// The ask.
    pub message_id: String,
    /// The recipient.
    pub peer_id: String,
    /// Its name now (none once the peer is forgotten).
    pub name: Option<String>,
    /// Its entry's effective state (wire spelling: `delivered` once its cursor passed it).
    pub state: String,
    /// Why it failed, if it did.
    pub reason: Option<String>,
}

/// An ask and its recipients.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AskOverview {
    /// The ask.
    pub ask: ListedAsk,
    /// Its recipients, by peer id.
    pub recipients: Vec<AskRecipient>,
}

/// Dashboard sign-in links and sessions, and the dashboard's reads.
#[async_trait]
pub trait DashboardStore: Send + Sync {
    /// Stores a new link, and forgets links and sessions that expired a day before `link`
    /// was minted (so the tables do not grow with use).
    async fn create_dashboard_link(&self, link: &DashboardLink) -> Result<()>;
    /// Uses a link: returns it and marks it used if it exists, is unused and has not expired
    /// at `now_ms`; `None` otherwise (and nothing changes). Two takers of one link: one gets it.
    async fn take_dashboard_link(
        &self,
        token_hash: &str,
        now_ms: i64,
    ) -> Result<Option<DashboardLink>>;
    /// A link that could be used at `now_ms` (unused, not expired), without using it: what the
    /// sign-in page says before the click.
    async fn peek_dashboard_link(
        &self,
        token_hash: &str,
        now_ms: i64,
    ) -> Result<Option<DashboardLink>>;
    /// Stores a new session, and forgets sessions that expired a day before it was opened.
    async fn create_dashboard_session(&self, session: &DashboardSession) -> Result<()>;
    /// A session that has not ended or expired at `now_ms`.
    async fn find_dashboard_session(
        &self,
        id_hash: &str,
        now_ms: i64,
    ) -> Result<Option<DashboardSession>>;
    /// Ends a session (logout); true if it was open.
    async fn end_dashboard_session(&self, id_hash: &str, now_ms: i64) -> Result<bool>;
    /// The tenant's newest `limit` asks, newest first, each with its recipients' states.
    async fn recent_asks(&self, tenant_id: &str, limit: i64) -> Result<Vec<AskOverview>>;
}
