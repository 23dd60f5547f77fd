//! Status writes, shared by the reconcilers: server-side apply (field manager
//! `repowire-operator`) of the whole status, conditional on the version of the object the
//! reconcile started from (then on the version its own last write produced).
//!
//! Why conditional: a reconcile works from the controller's cache, which can lag behind this
//! operator's own last write. Unconditionally, a reconcile of a stale object would write a
//! status computed from old state over newer state (a tenant id or a pending mint erased). With
//! the version as a precondition, such a write gets 409 Conflict. The writer then reads the
//! object: if its status is still the one the reconcile started from, only the spec or metadata
//! moved (a person edited it) and the write is repeated on the new version, so that an outcome
//! (a tenant created, a key minted) is never lost to an unrelated edit; otherwise the conflict
//! is returned and the reconcile runs again on the newer object.

use std::fmt::Debug;
use std::sync::Mutex;

use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use kube::runtime::controller::Action;

use crate::context::{Error, MANAGER, is_conflict};
use crate::crd::{Conditions, set_condition};

/// What this reconcile believes is on the server.
#[derive(Debug)]
struct Seen {
    version: Option<String>,
    status: Value,
}

/// Writes one object's status during one reconcile.
#[derive(Debug)]
pub struct StatusWriter<K> {
    api: Api<K>,
    name: String,
    seen: Mutex<Seen>,
}

/// The `status` of an object, as JSON (`null` when it has none).
fn status_of<K: Serialize>(obj: &K) -> Value {
    serde_json::to_value(obj)
        .ok()
        .and_then(|v| v.get("status").cloned())
        .unwrap_or(Value::Null)
}

impl<K> StatusWriter<K>
where
    K: Resource<DynamicType = ()> + Clone + Debug + Serialize + DeserializeOwned,
{
    /// A writer for `obj` as the reconcile read it.
    pub fn new(api: &Api<K>, obj: &K) -> Self {
        Self {
            api: api.clone(),
            name: obj.name_any(),
            seen: Mutex::new(Seen {
                version: obj.meta().resource_version.clone(),
                status: status_of(obj),
            }),
        }
    }

    fn seen(&self) -> (Option<String>, Value) {
        match self.seen.lock() {
            Ok(s) => (s.version.clone(), s.status.clone()),
            Err(p) => {
                let s = p.into_inner();
                (s.version.clone(), s.status.clone())
            }
        }
    }

    fn remember(&self, written: &K, status: Value) {
        let mut s = match self.seen.lock() {
            Ok(s) => s,
            Err(p) => p.into_inner(),
        };
        s.version = written.meta().resource_version.clone();
        s.status = status;
    }

    async fn apply(&self, status: &Value, version: Option<String>) -> Result<K, kube::Error> {
        let mut metadata = json!({ "name": self.name });
        if let Some(v) = version {
            metadata["resourceVersion"] = json!(v);
        }
        let patch = json!({
            "apiVersion": K::api_version(&()),
            "kind": K::kind(&()),
            "metadata": metadata,
            "status": status,
        });
        self.api
            .patch_status(
                &self.name,
                &PatchParams::apply(MANAGER).force(),
                &Patch::Apply(&patch),
            )
            .await
    }

    /// The status as this reconcile last saw or wrote it (what a report of a failure must
    /// start from: the cached object may lack a pending marker written since).
    pub fn current<S: DeserializeOwned + Default>(&self) -> S {
        serde_json::from_value(self.seen().1).unwrap_or_default()
    }

    /// When `result` is a relay error, records `Synced=False` with its reason on the object,
    /// starting from the status this reconcile last wrote (best effort: the error is what the
    /// controller acts on).
    pub async fn report_relay_error<S>(
        &self,
        result: &Result<Action, Error>,
        generation: Option<i64>,
    ) where
        S: Serialize + DeserializeOwned + Default + Conditions,
    {
        let Err(Error::Relay(e)) = result else {
            return;
        };
        let mut status: S = self.current();
        set_condition(
            status.conditions_mut(),
            "Synced",
            false,
            e.reason(),
            e.to_string(),
            generation,
        );
        if let Err(write) = self.write(&status).await {
            tracing::debug!(error = %write, "could not record the failure on the object");
        }
    }

    /// Writes `status` unless it is what is there already.
    pub async fn write<S: Serialize>(&self, status: &S) -> Result<(), Error> {
        let value = serde_json::to_value(status).map_err(|e| Error::Invalid(e.to_string()))?;
        let (version, base) = self.seen();
        if value == base {
            return Ok(());
        }
        match self.apply(&value, version).await {
            Ok(written) => {
                self.remember(&written, value);
                Ok(())
            }
            Err(e) if is_conflict(&e) => {
                let fresh = self.api.get_status(&self.name).await?;
                if status_of(&fresh) != base {
                    return Err(e.into());
                }
                let written = self
                    .apply(&value, fresh.meta().resource_version.clone())
                    .await?;
                self.remember(&written, value);
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }
}
