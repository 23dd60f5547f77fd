//! The Tenant reconciler: the relay tenant follows the object's spec; deletion detaches or
//! deletes it per `reclaimPolicy`.

use std::sync::Arc;

use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::finalizer::{Event as Finalizer, finalizer};
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::status::StatusWriter;
use crate::context::{
    Context, Error, deletion_overdue, namespace, now_ms, object_key, parse_rfc3339, rfc3339, uid,
};
use crate::crd::{
    Limits, PendingCreate, ReclaimPolicy, Tenant, TenantStatus, TenantUsage, set_ready_and_synced,
};
use crate::relay::{NewTenant, RelayError, RelayTenant};

/// The finalizer on every Tenant.
pub const FINALIZER: &str = "repowire.io/tenant";

/// Set by a person to adopt an existing relay tenant (`tnt-…`) whose creation could not be
/// confirmed, or that was made outside Kubernetes.
pub const ADOPT_ANNOTATION: &str = "repowire.io/adopt-tenant-id";

/// Reconciles one Tenant.
pub async fn reconcile(obj: Arc<Tenant>, ctx: Arc<Context>) -> Result<Action, Error> {
    let started = std::time::Instant::now();
    let api: Api<Tenant> = Api::namespaced(ctx.client.clone(), &namespace(obj.as_ref())?);
    let result = finalizer(&api, FINALIZER, obj, |event| async {
        match event {
            Finalizer::Apply(t) => apply_or_report(&t, &ctx, &StatusWriter::new(&api, &t)).await,
            Finalizer::Cleanup(t) => cleanup(&t, &ctx).await,
        }
    })
    .await
    .map_err(Error::from_finalizer);
    ctx.metrics.reconciled("Tenant", started.elapsed());
    result
}

/// [`apply`], and when the relay could not be reached or refused, `Synced=False` with the
/// reason on the object ([`StatusWriter::report_relay_error`]).
async fn apply_or_report(
    t: &Tenant,
    ctx: &Context,
    w: &StatusWriter<Tenant>,
) -> Result<Action, Error> {
    let result = apply(t, ctx, w).await;
    w.report_relay_error::<TenantStatus>(&result, t.meta().generation)
        .await;
    result
}

/// The error policy.
pub fn error_policy(obj: Arc<Tenant>, error: &Error, ctx: Arc<Context>) -> Action {
    ctx.backoff(obj.as_ref(), "Tenant", error)
}

/// The relay name of a Tenant object.
pub fn relay_name(t: &Tenant) -> String {
    t.spec.tenant_name.clone().unwrap_or_else(|| t.name_any())
}

fn failed(status: &mut TenantStatus, generation: Option<i64>, reason: &str, message: String) {
    set_ready_and_synced(
        &mut status.conditions,
        false,
        false,
        reason,
        &message,
        generation,
    );
}

async fn apply(t: &Tenant, ctx: &Context, w: &StatusWriter<Tenant>) -> Result<Action, Error> {
    let generation = t.meta().generation;
    let old = t.status.clone().unwrap_or_default();
    let mut status = old.clone();
    let name = relay_name(t);

    let Some(tenant_id) = status.tenant_id.clone() else {
        return create(t, ctx, w, status, &name).await;
    };
    if ctx.recently_verified(&uid(t)) && old.observed_generation == generation {
        return Ok(Action::requeue(ctx.settings.resync));
    }
    let relay = match ctx.relay.get_tenant(&tenant_id).await {
        Ok(r) if r.deleted_at_ms.is_none() => r,
        Ok(_) | Err(RelayError::Status { status: 404, .. }) => {
            failed(
                &mut status,
                generation,
                "TenantGoneFromRelay",
                format!("relay tenant {tenant_id} was deleted outside Kubernetes"),
            );
            w.write(&status).await?;
            if old.conditions != status.conditions {
                ctx.event(
                    t,
                    true,
                    "TenantGoneFromRelay",
                    "Observe",
                    format!("relay tenant {tenant_id} was deleted outside Kubernetes"),
                )
                .await;
            }
            return Ok(Action::requeue(ctx.settings.resync));
        }
        Err(e) => return Err(e.into()),
    };
    let relay = update(t, ctx, &relay).await?;
    status.effective_limits = relay.effective_limits.clone();
    refresh_usage(ctx, &tenant_id, &mut status).await;
    status.observed_generation = generation;
    let message = format!("relay tenant {tenant_id} ({name}) matches the spec");
    set_ready_and_synced(
        &mut status.conditions,
        true,
        true,
        "Reconciled",
        &message,
        generation,
    );
    w.write(&status).await?;
    ctx.verified(&uid(t));
    ctx.succeeded(t);
    Ok(Action::requeue(ctx.settings.resync))
}

/// Creates the relay tenant (or adopts the one a person named), records its id.
async fn create(
    t: &Tenant,
    ctx: &Context,
    w: &StatusWriter<Tenant>,
    mut status: TenantStatus,
    name: &str,
) -> Result<Action, Error> {
    let generation = t.meta().generation;
    if let Some(id) = t.annotations().get(ADOPT_ANNOTATION) {
        let relay = ctx.relay.get_tenant(id).await?;
        if relay.name != name || relay.deleted_at_ms.is_some() {
            failed(
                &mut status,
                generation,
                "AdoptionRefused",
                format!(
                    "relay tenant {id} is named {} (deleted: {}), not {name}",
                    relay.name,
                    relay.deleted_at_ms.is_some()
                ),
            );
            w.write(&status).await?;
            return Ok(Action::await_change());
        }
        status.tenant_id = Some(relay.id.clone());
        status.pending_create = None;
        w.write(&status).await?;
        ctx.event(
            t,
            false,
            "Adopted",
            "Adopt",
            format!("adopted relay tenant {} ({name})", relay.id),
        )
        .await;
        return Ok(Action::requeue(std::time::Duration::ZERO));
    }
    let tried_before = status.pending_create.is_some();
    if !tried_before {
        status.pending_create = Some(PendingCreate {
            since: rfc3339(now_ms()),
        });
        w.write(&status).await?;
    }
    let limits = t.spec.limits.clone().unwrap_or_default();
    let created = ctx
        .relay
        .create_tenant(&NewTenant {
            name,
            plan: t.spec.plan.as_deref(),
            display_name: t.spec.display_name.as_deref(),
            overrides: &limits,
        })
        .await;
    match created {
        Ok(relay) => {
            status.tenant_id = Some(relay.id.clone());
            status.pending_create = None;
            w.write(&status).await?;
            ctx.event(
                t,
                false,
                "Created",
                "Create",
                format!("created relay tenant {} ({name})", relay.id),
            )
            .await;
            // Straight on to suspension, usage and Ready.
            Ok(Action::requeue(std::time::Duration::ZERO))
        }
        Err(RelayError::Status { status: 409, .. }) => {
            let (reason, message) = if tried_before {
                (
                    "CannotDetermineCreation",
                    format!(
                        "a relay tenant named {name} exists and an earlier attempt to create it (since {}) did not record its outcome; if this object made it, set the annotation {ADOPT_ANNOTATION} to its id",
                        status
                            .pending_create
                            .as_ref()
                            .map(|p| p.since.as_str())
                            .unwrap_or_default()
                    ),
                )
            } else {
                status.pending_create = None;
                (
                    "NameTaken",
                    format!(
                        "the relay already has a tenant named {name}, which this object did not create; choose spec.tenantName, or set the annotation {ADOPT_ANNOTATION} to adopt it"
                    ),
                )
            };
            failed(&mut status, generation, reason, message.clone());
            w.write(&status).await?;
            ctx.event(t, true, reason, "Create", message).await;
            Ok(Action::await_change())
        }
        Err(RelayError::Status {
            status: 400,
            message,
            ..
        }) => {
            // The spec is refused (an unknown plan, a bad name): nothing was made.
            status.pending_create = None;
            failed(&mut status, generation, "SpecRefused", message.clone());
            w.write(&status).await?;
            ctx.event(t, true, "SpecRefused", "Create", message).await;
            Ok(Action::await_change())
        }
        Err(e) => Err(e.into()),
    }
}

/// Brings the relay tenant in line with the spec: one PATCH if anything differs, and a
/// suspend or resume.
async fn update(t: &Tenant, ctx: &Context, relay: &RelayTenant) -> Result<RelayTenant, Error> {
    let limits = t.spec.limits.clone().unwrap_or_default();
    let mut patch = serde_json::Map::new();
    if let Some(plan) = &t.spec.plan
        && *plan != relay.plan
    {
        patch.insert("plan".into(), json!(plan));
    }
    if t.spec.display_name != relay.display_name {
        patch.insert("display_name".into(), json!(t.spec.display_name));
    }
    if limits != relay.overrides {
        patch.insert("overrides".into(), limits.as_patch());
    }
    let mut current = relay.clone();
    if !patch.is_empty() {
        let fields: Vec<String> = patch.keys().cloned().collect();
        match ctx.relay.patch_tenant(&relay.id, &patch.into()).await {
            Ok(r) => current = r,
            Err(RelayError::Status {
                status: 400,
                message,
                ..
            }) => {
                ctx.event(t, true, "SpecRefused", "Update", message.clone())
                    .await;
                return Err(Error::Invalid(format!(
                    "the relay refused the change: {message}"
                )));
            }
            Err(e) => return Err(e.into()),
        }
        ctx.event(
            t,
            false,
            "Updated",
            "Update",
            format!("changed {} of relay tenant {}", fields.join(", "), relay.id),
        )
        .await;
    }
    if t.spec.suspended != relay.suspended_at_ms.is_some() {
        ctx.relay.set_suspended(&relay.id, t.spec.suspended).await?;
        let (reason, what) = if t.spec.suspended {
            ("Suspended", "suspended")
        } else {
            ("Resumed", "resumed")
        };
        ctx.event(
            t,
            false,
            reason,
            reason,
            format!("{what} relay tenant {}", relay.id),
        )
        .await;
    }
    if current.effective_limits.is_none() {
        current = ctx.relay.get_tenant(&relay.id).await?;
    }
    Ok(current)
}

/// Reads this month's usage into the status when the last reading is older than the usage
/// interval. A failure keeps the old reading: usage is informative, not worth a retry storm.
async fn refresh_usage(ctx: &Context, tenant_id: &str, status: &mut TenantStatus) {
    let interval = i64::try_from(ctx.settings.usage_interval.as_millis()).unwrap_or(i64::MAX);
    let now = now_ms();
    let fresh = status
        .usage
        .as_ref()
        .and_then(|u| parse_rfc3339(&u.refreshed_at))
        .is_some_and(|at| now - at < interval);
    if fresh {
        return;
    }
    match ctx.relay.month_usage(tenant_id).await {
        Ok(u) => {
            let period = rfc3339(now).get(..7).unwrap_or_default().to_string();
            status.usage = Some(TenantUsage {
                period,
                messages: u.messages,
                peak_peers: u.peak_peers,
                refreshed_at: rfc3339(now),
            });
        }
        Err(e) => tracing::warn!(tenant = tenant_id, error = %e, "could not read usage"),
    }
}

async fn cleanup(t: &Tenant, ctx: &Context) -> Result<Action, Error> {
    ctx.forget(&uid(t));
    let Some(tenant_id) = t.status.as_ref().and_then(|s| s.tenant_id.clone()) else {
        return Ok(Action::await_change());
    };
    if t.spec.reclaim_policy == ReclaimPolicy::Retain {
        ctx.event(
            t,
            false,
            "Detached",
            "Delete",
            format!("relay tenant {tenant_id} retained (reclaimPolicy retain)"),
        )
        .await;
        return Ok(Action::await_change());
    }
    match ctx.relay.delete_tenant(&tenant_id).await {
        Ok(()) => {
            ctx.event(
                t,
                false,
                "Deleted",
                "Delete",
                format!("deleted relay tenant {tenant_id}"),
            )
            .await;
            Ok(Action::await_change())
        }
        Err(e) if deletion_overdue(t, ctx.settings.deletion_timeout) => {
            let message = format!(
                "gave up deleting relay tenant {tenant_id} after {} s: {e}; delete it with the admin API",
                ctx.settings.deletion_timeout.as_secs()
            );
            tracing::warn!(tenant = %object_key(t), "{message}");
            ctx.event(t, true, "DeletionAbandoned", "Delete", message)
                .await;
            Ok(Action::await_change())
        }
        Err(e) => Err(e.into()),
    }
}

impl Limits {
    /// Whether no limit is set.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}
