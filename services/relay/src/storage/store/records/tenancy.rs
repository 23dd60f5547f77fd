//! Tenants, plans, keys, admin tokens, audit events and usage rows, as the store keeps them.

/// A tenant.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow, serde::Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TenantRecord {
    /// Id (`tnt-…`).
    pub id: String,
    /// Unique name.
    pub name: String,
    /// Plan name.
    pub plan: String,
    /// Creation time (ms).
    pub created_at_ms: i64,
    /// When the operator suspended it (ms); `null` while it is active.
    pub suspended_at_ms: Option<i64>,
    /// When it was deleted (ms): its keys are revoked and its data waits for the purge.
    pub deleted_at_ms: Option<i64>,
    /// A name for people; the `name` is the stable handle.
    pub display_name: Option<String>,
    /// This tenant's own values, replacing the plan's; `null`: the plan's value.
    #[sqlx(flatten)]
    pub overrides: Limits,
}

/// The limits a plan sets, or a tenant's overrides of them. In a plan `null` is unlimited; in
/// overrides it is "the plan's value".
#[derive(
    Debug, Clone, Default, PartialEq, Eq, sqlx::FromRow, serde::Serialize, serde::Deserialize,
)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Live peers at once.
    #[serde(default)]
    pub max_peers: Option<i64>,
    /// Open WebSocket connections at once.
    #[serde(default)]
    pub max_connections: Option<i64>,
    /// Largest message text, bytes (at most the protocol's 32 768).
    #[serde(default)]
    pub max_message_bytes: Option<i64>,
    /// Undelivered entries per peer inbox.
    #[serde(default)]
    pub inbox_cap: Option<i64>,
    /// Messages accepted per minute, across every relay process.
    #[serde(default)]
    pub messages_per_minute: Option<i64>,
    /// Messages accepted per calendar month (UTC).
    #[serde(default)]
    pub messages_per_month: Option<i64>,
    /// Bytes of shared state (keys and values, every circle) the tenant may store.
    #[serde(default)]
    pub max_state_bytes: Option<i64>,
    /// Peers (live and offline) the relay keeps for the tenant; past it, registering a new peer
    /// forgets the longest-offline peer that holds nothing (protocol.md §10.1.1).
    #[serde(default)]
    pub max_stored_peers: Option<i64>,
}

/// A plan: a named bundle of limits tenants are on.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow, serde::Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PlanRecord {
    /// Unique name (the name rule of protocol.md §5).
    pub name: String,
    /// What it is for, for people.
    pub description: String,
    /// Its limits; `null` is unlimited.
    #[sqlx(flatten)]
    pub limits: Limits,
    /// Creation time (ms); 0 for the seeded plans.
    pub created_at_ms: i64,
    /// Last change (ms).
    pub updated_at_ms: i64,
}

/// An admin token minted through the admin API; the token text itself is never stored.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow, serde::Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AdminTokenRecord {
    /// Id (`adm-…`).
    pub id: String,
    /// What it is for.
    pub label: String,
    /// `admin:read`, `admin:write` or both, space-separated.
    pub scopes: String,
    /// SHA-256 of the token text (never shown).
    #[serde(skip)]
    pub hash: String,
    /// The token's first characters, to recognise it.
    pub display: String,
    /// Creation time (ms).
    pub created_at_ms: i64,
    /// When it stops working (ms); `null`: never.
    pub expires_at_ms: Option<i64>,
    /// When it was revoked (ms).
    pub revoked_at_ms: Option<i64>,
    /// When it was last used (ms).
    pub last_used_at_ms: Option<i64>,
}

impl AdminTokenRecord {
    /// Whether it may be used at `now_ms`.
    pub fn usable_at(&self, now_ms: i64) -> bool {
        self.revoked_at_ms.is_none() && self.expires_at_ms.is_none_or(|e| e > now_ms)
    }

    /// Whether it holds `scope`.
    pub fn has(&self, scope: &str) -> bool {
        self.scopes.split(' ').any(|s| s == scope)
    }
}

/// An API key; the key text itself is never stored.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow, serde::Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ApiKeyRecord {
    /// Id (`key-…`), the JWT subject.
    pub id: String,
    /// Owning tenant.
    pub tenant_id: String,
    /// SHA-256 of the full key text, hex.
    #[serde(skip)]
    pub hash: String,
    /// A recognisable, non-secret rendering (`rw_live_ab12…`).
    pub display: String,
    /// Free-form label.
    pub label: String,
    /// `live` or `test`.
    pub mode: String,
    /// Creation time (ms).
    pub created_at_ms: i64,
    /// Expiry (ms), if any.
    pub expires_at_ms: Option<i64>,
    /// Revocation time (ms), if revoked.
    pub revoked_at_ms: Option<i64>,
    /// When the key was last exchanged for a token (ms), if ever.
    pub last_used_at_ms: Option<i64>,
    /// What it may do, space-separated: `connect` (exchange it for a token and connect
    /// agents), `usage:read` (read the tenant's own limits and usage), `approve` (answer
    /// agents' tool approvals), `keys:manage` (manage the tenant's keys in the dashboard),
    /// `messages:read` (read the tenant's messages in the dashboard).
    pub scopes: String,
    /// True when the key's tenant is suspended (read with the key; not a column of its own).
    #[serde(skip)]
    pub tenant_suspended: bool,
}

impl ApiKeyRecord {
    /// True when the key may be used at `now_ms`.
    pub fn usable_at(&self, now_ms: i64) -> bool {
        self.revoked_at_ms.is_none() && self.expires_at_ms.is_none_or(|e| e > now_ms)
    }

    /// Whether it holds `scope`.
    pub fn has(&self, scope: &str) -> bool {
        self.scopes.split(' ').any(|s| s == scope)
    }
}

/// A key a live connection uses that may no longer be used.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct UnusableKey {
    /// The key id.
    pub id: String,
    /// True when only its tenant's suspension stops it (the key itself is valid).
    pub tenant_suspended: bool,
}

/// What an idempotent key creation found: the key the request made (now or before).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct KeyRequest {
    /// The key it made.
    pub key_id: String,
    /// SHA-256 of the request it was made for.
    pub request_hash: String,
    /// When it was first made (ms).
    pub created_at_ms: i64,
}

/// Which tenants a listing returns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TenantFilter {
    /// Only tenants on this plan.
    pub plan: Option<String>,
    /// Only tenants in this state; `None`: every tenant not deleted.
    pub status: Option<TenantStatus>,
    /// Only tenants after this one in listing order (`created_at_ms`, `id`).
    pub after: Option<(i64, String)>,
}

/// A tenant's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum TenantStatus {
    /// Serving.
    Active,
    /// Suspended by the operator.
    Suspended,
    /// Deleted, waiting for the purge.
    Deleted,
}

/// One admin write, as the audit log keeps it.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow, serde::Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AuditEvent {
    /// Event id (a UUIDv7: ordered by time).
    pub id: String,
    /// When (ms).
    pub at_ms: i64,
    /// Who: `admin-token` (the configured admin credential) or `cli` (`repowire-relay admin`).
    pub actor: String,
    /// What, e.g. `tenant.update`, `key.create`.
    pub action: String,
    /// The object acted on (a tenant, key or plan id/name).
    pub target: String,
    /// The tenant concerned, if any.
    pub tenant_id: Option<String>,
    /// The request it came in (the `x-request-id` answer header of the admin API).
    pub request_id: String,
    /// The object before the write (JSON text), when there was one.
    pub before_json: Option<String>,
    /// The object after the write (JSON text), when there is one.
    pub after_json: Option<String>,
}

/// Which audit events a listing returns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditFilter {
    /// Only events of this tenant (id).
    pub tenant_id: Option<String>,
    /// Only events at or after this time (ms).
    pub from_ms: Option<i64>,
    /// Only events before this time (ms).
    pub to_ms: Option<i64>,
    /// Only events after this one in listing order (`at_ms`, `id`).
    pub after: Option<(i64, String)>,
}

/// Usage of one tenant in one hour, for one metric.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow, serde::Serialize)]
pub struct UsageRow {
    /// The tenant.
    pub tenant_id: String,
    /// Start of the hour (ms, UTC).
    pub hour_ms: i64,
    /// What was counted (`messages_ask` …, see `store::metering::metric`).
    pub metric: String,
    /// How much.
    pub value: i64,
}

/// Usage a pod measured outside the write path, to add to an hourly row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageAdd {
    /// The tenant.
    pub tenant_id: String,
    /// Start of the hour (ms, UTC).
    pub hour_ms: i64,
    /// One of `store::metering::metric`'s connection metrics.
    pub metric: &'static str,
    /// Amount (a count to add, or a peak to keep if larger).
    pub value: i64,
}
