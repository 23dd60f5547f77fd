//! The custom resources: `Tenant` and `ApiKey` (group `repowire.io`, version `v1alpha1`), and
//! what both use. `repowire-operator crdgen` prints them; the chart commits the output.

pub mod apikey;
pub mod tenant;

pub use apikey::{
    ApiKey, ApiKeySpec, ApiKeyStatus, PendingMint, Rotation, Scope, SecretMetadata, TenantRef,
};
pub use tenant::{Limits, PendingCreate, Tenant, TenantSpec, TenantStatus, TenantUsage};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResourceExt;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The API group.
pub const GROUP: &str = "repowire.io";

/// What happens in the relay when the Kubernetes object is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReclaimPolicy {
    /// Leave the relay's tenant or key as it is; only the Kubernetes object goes.
    Retain,
    /// Delete the tenant or revoke the key in the relay, then let the object go.
    Delete,
}

impl ReclaimPolicy {
    /// `retain` by default for a tenant (its data outlives a mistaken `kubectl delete`).
    pub fn tenant_default() -> Self {
        Self::Retain
    }

    /// `delete` by default for a key (a key nobody manages any more should not keep working).
    pub fn key_default() -> Self {
        Self::Delete
    }
}

/// Every CRD as YAML documents, in a stable order.
pub fn crds_yaml() -> Result<String, serde_yaml::Error> {
    let mut out = String::new();
    for crd in [Tenant::crd(), ApiKey::crd()] {
        out.push_str("---\n");
        out.push_str(&serde_yaml::to_string(&crd)?);
    }
    Ok(out)
}

/// Sets condition `type_` to `status` with `reason` and `message`, keeping its last transition
/// time when the status does not change.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: bool,
    reason: &str,
    message: impl Into<String>,
    generation: Option<i64>,
) {
    let status = if status { "True" } else { "False" }.to_string();
    let message = message.into();
    if let Some(c) = conditions.iter_mut().find(|c| c.type_ == type_) {
        if c.status != status {
            c.last_transition_time = now();
        }
        c.status = status;
        c.reason = reason.to_string();
        c.message = message;
        c.observed_generation = generation;
        return;
    }
    conditions.push(Condition {
        type_: type_.to_string(),
        status,
        reason: reason.to_string(),
        message,
        observed_generation: generation,
        last_transition_time: now(),
    });
}

/// Sets both conditions of an object, `Ready` and `Synced`, with one reason and message.
pub fn set_ready_and_synced(
    conditions: &mut Vec<Condition>,
    ready: bool,
    synced: bool,
    reason: &str,
    message: &str,
    generation: Option<i64>,
) {
    set_condition(conditions, "Ready", ready, reason, message, generation);
    set_condition(conditions, "Synced", synced, reason, message, generation);
}

/// A status with conditions (both kinds').
pub trait Conditions {
    /// Its conditions.
    fn conditions_mut(&mut self) -> &mut Vec<Condition>;
}

impl Conditions for TenantStatus {
    fn conditions_mut(&mut self) -> &mut Vec<Condition> {
        &mut self.conditions
    }
}

impl Conditions for ApiKeyStatus {
    fn conditions_mut(&mut self) -> &mut Vec<Condition> {
        &mut self.conditions
    }
}

/// The condition `type_`, if set.
pub fn condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Conditions equal but for their transition times.
pub fn same_conditions(a: &[Condition], b: &[Condition]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.type_ == y.type_
                && x.status == y.status
                && x.reason == y.reason
                && x.message == y.message
                && x.observed_generation == y.observed_generation
        })
}

/// Now, as a Kubernetes time.
pub fn now() -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Time {
    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now())
}
