//! `Tenant`: a relay tenant declared in Kubernetes.
// KubeSchema's derive makes a private copy of the spec struct, which this lint flags.
#![allow(unreachable_pub)]

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ReclaimPolicy;

/// A tenant of the relay: its plan, its limit overrides, whether it is suspended, and what
/// happens to its data when this object is deleted.
#[derive(CustomResource, KubeSchema, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "repowire.io",
    version = "v1alpha1",
    kind = "Tenant",
    doc = "A relay tenant declared in Kubernetes (docs/operator.md).",
    namespaced,
    status = "TenantStatus",
    shortname = "rwtenant",
    category = "repowire",
    printcolumn = r#"{"name":"Tenant","type":"string","jsonPath":".status.tenantId"}"#,
    printcolumn = r#"{"name":"Plan","type":"string","jsonPath":".spec.plan"}"#,
    printcolumn = r#"{"name":"Suspended","type":"boolean","jsonPath":".spec.suspended"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Reason","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].reason"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = kube::core::Rule::new("has(self.tenantName) == has(oldSelf.tenantName)").message("tenantName cannot be added or removed"))]
pub struct TenantSpec {
    /// The tenant's name in the relay (1–64 letters, digits, `.`, `_`, `-`). Default: this
    /// object's name. It cannot change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = kube::core::Rule::new("self == oldSelf").message("tenantName cannot change"))]
    #[schemars(length(min = 1, max = 64), regex(pattern = r"^[A-Za-z0-9._-]+$"))]
    pub tenant_name: Option<String>,
    /// A name for people (at most 128 bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 128))]
    pub display_name: Option<String>,
    /// The relay plan (`GET /admin/v1/plans` lists them). Default: `free`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<String>,
    /// Limits replacing the plan's for this tenant, by the admin API's names. A limit left out
    /// takes the plan's value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<Limits>,
    /// Suspend the tenant: its keys stop working and its connections close; `false` resumes.
    #[serde(default)]
    pub suspended: bool,
    /// `retain` (default): deleting this object leaves the relay tenant and its data;
    /// `delete`: the relay tenant is deleted (its keys revoked) first.
    #[serde(default = "ReclaimPolicy::tenant_default")]
    pub reclaim_policy: ReclaimPolicy,
}

/// Limit overrides, by the admin API's names (docs/admin.md "Plans and limits").
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Live peers at once (1–1 000 000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1_000_000))]
    pub max_peers: Option<i64>,
    /// Open WebSocket connections at once (1–1 000 000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1_000_000))]
    pub max_connections: Option<i64>,
    /// Largest message text, bytes (1–32 768).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 32_768))]
    pub max_message_bytes: Option<i64>,
    /// Undelivered entries per peer inbox (1–1 000 000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1_000_000))]
    pub inbox_cap: Option<i64>,
    /// Messages accepted per minute across the relay (1–100 000 000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100_000_000))]
    pub messages_per_minute: Option<i64>,
    /// Messages accepted per calendar month, UTC (1–10¹²).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1_000_000_000_000_i64))]
    pub messages_per_month: Option<i64>,
    /// Bytes of shared state the tenant may store, every circle (1–2⁴⁰).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1_099_511_627_776_i64))]
    pub max_state_bytes: Option<i64>,
    /// Peers (live and offline) the relay keeps for the tenant; past it a new peer makes room
    /// by forgetting the longest-offline idle one (1–100 000 000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100_000_000))]
    pub max_stored_peers: Option<i64>,
}

impl Limits {
    /// Every limit, by its admin API name, with `null` for those left out (a PATCH body that
    /// returns an override left out to the plan's value).
    pub fn as_patch(&self) -> serde_json::Value {
        serde_json::json!({
            "max_peers": self.max_peers,
            "max_connections": self.max_connections,
            "max_message_bytes": self.max_message_bytes,
            "inbox_cap": self.inbox_cap,
            "messages_per_minute": self.messages_per_minute,
            "messages_per_month": self.messages_per_month,
            "max_state_bytes": self.max_state_bytes,
            "max_stored_peers": self.max_stored_peers,
        })
    }
}

/// What the operator observed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TenantStatus {
    /// The relay's id for the tenant (`tnt-…`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<String>,
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready` (the relay tenant matches the spec) and `Synced` (the last reconcile reached
    /// the relay), each with a reason and a message.
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// The limits in effect: each override, else the plan's value; left out is unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effective_limits: Option<Limits>,
    /// This month's usage, refreshed on a slow interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<TenantUsage>,
    /// Set just before the operator asks the relay to create the tenant, cleared once the id
    /// is recorded: found set with no id, the earlier attempt's outcome is unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_create: Option<PendingCreate>,
}

/// A tenant creation in flight.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PendingCreate {
    /// When the attempt started (RFC 3339).
    pub since: String,
}

/// A month's usage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TenantUsage {
    /// The month, `YYYY-MM` (UTC).
    pub period: String,
    /// Messages accepted (ask, notify, broadcast and reply).
    pub messages: i64,
    /// The most peers online at once.
    pub peak_peers: i64,
    /// When it was read from the relay (RFC 3339).
    pub refreshed_at: String,
}
