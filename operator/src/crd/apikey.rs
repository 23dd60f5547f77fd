//! `ApiKey`: a relay API key for a `Tenant` in the same namespace, delivered in a Secret.
// KubeSchema's derive makes a private copy of the spec struct, which this lint flags.
#![allow(unreachable_pub)]

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ReclaimPolicy;

/// An API key of a tenant. The operator mints it once, writes it to `secretName`, and reuses
/// it until `rotation.rotationGeneration` changes.
#[derive(CustomResource, KubeSchema, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "repowire.io",
    version = "v1alpha1",
    kind = "ApiKey",
    doc = "An API key of a relay tenant, delivered in a Secret (docs/operator.md).",
    namespaced,
    status = "ApiKeyStatus",
    shortname = "rwkey",
    category = "repowire",
    printcolumn = r#"{"name":"Tenant","type":"string","jsonPath":".spec.tenantRef.name"}"#,
    printcolumn = r#"{"name":"Secret","type":"string","jsonPath":".spec.secretName"}"#,
    printcolumn = r#"{"name":"Key","type":"string","jsonPath":".status.prefix"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Reason","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].reason"}"#,
    printcolumn = r#"{"name":"Expires","type":"string","jsonPath":".status.expiresAt"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ApiKeySpec {
    /// The `Tenant` object (same namespace) the key belongs to. It cannot change.
    #[x_kube(validation = kube::core::Rule::new("self == oldSelf").message("tenantRef cannot change"))]
    pub tenant_ref: TenantRef,
    /// For people (at most 128 bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 128))]
    pub label: Option<String>,
    /// What the key may do (`connect`, `usage:read`, `approve`, `keys:manage`, `messages:read`); left out: `connect` and `usage:read` (the relay's default: `approve` only when named). A change takes effect with a new key (a rotation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub scopes: Option<Vec<Scope>>,
    /// When the key stops working (RFC 3339), at most 3650 days ahead; default never. A
    /// change takes effect with a new key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    /// The Secret (same namespace) the key is written to. It cannot change.
    #[x_kube(validation = kube::core::Rule::new("self == oldSelf").message("secretName cannot change"))]
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
    )]
    pub secret_name: String,
    /// Extra labels and annotations for the Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_metadata: Option<SecretMetadata>,
    /// Rotation: bump `rotationGeneration` to replace the key.
    #[serde(default)]
    pub rotation: Rotation,
    /// Mint a new key when the current one is found revoked or expired in the relay (default
    /// `false`: the object turns `Degraded` and waits for a person).
    #[serde(default)]
    pub remint_if_revoked: bool,
    /// `delete` (default): deleting this object revokes the key; `retain`: the key keeps
    /// working (and its Secret is deleted with the object).
    #[serde(default = "ReclaimPolicy::key_default")]
    pub reclaim_policy: ReclaimPolicy,
}

/// A reference to a `Tenant` in the same namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TenantRef {
    /// The `Tenant` object's name.
    #[schemars(length(min = 1))]
    pub name: String,
}

/// What a key may do.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub enum Scope {
    /// Exchange the key for a token and connect agents.
    #[serde(rename = "connect")]
    Connect,
    /// Read the tenant's own limits and usage.
    #[serde(rename = "usage:read")]
    UsageRead,
    /// Answer agents' tool approvals as a person, orchestrator or service peer. A key with it
    /// can let agents on other machines run code: only for people's machines, asked for here.
    #[serde(rename = "approve")]
    Approve,
    /// List, create and revoke the tenant's API keys (the dashboard's Keys page).
    #[serde(rename = "keys:manage")]
    KeysManage,
    /// Read the tenant's messages across every circle (the dashboard's Asks page).
    #[serde(rename = "messages:read")]
    MessagesRead,
}

impl Scope {
    /// The admin API's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Connect => "connect",
            Self::UsageRead => "usage:read",
            Self::Approve => "approve",
            Self::KeysManage => "keys:manage",
            Self::MessagesRead => "messages:read",
        }
    }
}

/// Labels and annotations added to the Secret.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SecretMetadata {
    /// Labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// Key rotation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Rotation {
    /// Bump it to rotate: a new key is minted and written to the Secret, and the old one is
    /// revoked after the grace period.
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub rotation_generation: i64,
    /// How long the old key keeps working after a rotation, seconds (0–2 592 000; default
    /// 3600), so that every consumer can pick up the new Secret.
    #[serde(default = "default_grace")]
    #[schemars(range(min = 0, max = 2_592_000))]
    pub grace_period_seconds: i64,
}

fn default_grace() -> i64 {
    3600
}

impl Default for Rotation {
    fn default() -> Self {
        Self {
            rotation_generation: 0,
            grace_period_seconds: default_grace(),
        }
    }
}

/// What the operator observed. Never the key itself.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApiKeyStatus {
    /// The relay's id of the key in the Secret (`key-…`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_id: Option<String>,
    /// The key's first characters, to recognise it (never the secret part).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready` (the Secret holds a working key) and `Synced`, each with a reason and message.
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// The rotation generation the current key was minted for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotation_generation: Option<i64>,
    /// A digest of what the current key was asked for (label, scopes, expiry): a change mints
    /// a new key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_digest: Option<String>,
    /// When the current key replaced an earlier one (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_rotated_at: Option<String>,
    /// When the current key expires (RFC 3339); left out: never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// The key a rotation replaced, until it is revoked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_key_id: Option<String>,
    /// When the previous key is revoked (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_key_revoke_at: Option<String>,
    /// How many mints were started for this object (each gets its own idempotency key).
    #[serde(default)]
    pub mint_count: i64,
    /// A mint in flight: recorded before the relay is asked, cleared once the Secret holds the
    /// key. Its idempotency key makes a retry return the same key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_mint: Option<PendingMint>,
}

/// A mint in flight.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PendingMint {
    /// The `Idempotency-Key` sent to the relay.
    pub idempotency_key: String,
    /// The exact request body sent (JSON), so that a retry sends it again.
    pub request: String,
    /// The rotation generation it mints for.
    pub rotation_generation: i64,
    /// The digest of the request.
    pub request_digest: String,
    /// When the attempt started (RFC 3339).
    pub since: String,
}
