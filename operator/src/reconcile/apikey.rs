//! The ApiKey reconciler: mint once and reuse; rotate on a generation bump; revoke on
//! deletion. A mint is recorded as pending on the object before the relay is asked, with an
//! idempotency key, so a crash between the mint and the Secret write makes no second key.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::Resource;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::finalizer::{Event as Finalizer, finalizer};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::secret;
use super::status::StatusWriter;
use crate::context::{
    Context, Error, MANAGER, deletion_overdue, namespace, now_ms, object_key, parse_rfc3339,
    rfc3339, uid,
};
use crate::crd::{ApiKey, ApiKeyStatus, PendingMint, ReclaimPolicy, Tenant, set_ready_and_synced};
use crate::relay::{KeyCreated, RelayError};

/// The finalizer on every ApiKey.
pub const FINALIZER: &str = "repowire.io/api-key";

/// The relay forgets an idempotency key after 7 days; a pending mint older than this is not
/// retried (its outcome could no longer be learnt).
const PENDING_LIMIT_MS: i64 = 6 * 24 * 3600 * 1000;

/// Reconciles one ApiKey.
pub async fn reconcile(obj: Arc<ApiKey>, ctx: Arc<Context>) -> Result<Action, Error> {
    let started = std::time::Instant::now();
    let api: Api<ApiKey> = Api::namespaced(ctx.client.clone(), &namespace(obj.as_ref())?);
    let result = finalizer(&api, FINALIZER, obj, |event| async {
        match event {
            Finalizer::Apply(k) => apply_or_report(&k, &ctx, &StatusWriter::new(&api, &k)).await,
            Finalizer::Cleanup(k) => cleanup(&k, &ctx).await,
        }
    })
    .await
    .map_err(Error::from_finalizer);
    ctx.metrics.reconciled("ApiKey", started.elapsed());
    result
}

/// [`apply`], and when the relay could not be reached or refused, `Synced=False` with the
/// reason on the object ([`StatusWriter::report_relay_error`]).
async fn apply_or_report(
    k: &ApiKey,
    ctx: &Context,
    w: &StatusWriter<ApiKey>,
) -> Result<Action, Error> {
    let result = apply(k, ctx, w).await;
    w.report_relay_error::<ApiKeyStatus>(&result, k.meta().generation)
        .await;
    result
}

/// The error policy.
pub fn error_policy(obj: Arc<ApiKey>, error: &Error, ctx: Arc<Context>) -> Action {
    ctx.backoff(obj.as_ref(), "ApiKey", error)
}

/// The key request the spec asks for (the body of `POST /tenants/{t}/keys`) and its digest.
pub fn request(k: &ApiKey) -> (Value, String) {
    let label = k
        .spec
        .label
        .clone()
        .unwrap_or_else(|| format!("k8s {}", object_key(k)));
    let mut body = json!({ "label": label });
    if let Some(scopes) = &k.spec.scopes {
        let mut scopes: Vec<&str> = scopes.iter().map(|s| s.as_str()).collect();
        scopes.sort_unstable();
        scopes.dedup();
        body["scopes"] = json!(scopes);
    }
    if let Some(at) = &k.spec.expires_at {
        body["expires_at_ms"] = json!(at.0.as_millisecond());
    }
    let digest = format!("{:x}", Sha256::digest(body.to_string().as_bytes()));
    (body, digest.get(..16).unwrap_or_default().to_string())
}

fn not_ready(
    status: &mut ApiKeyStatus,
    generation: Option<i64>,
    reason: &str,
    message: &str,
    synced: bool,
) {
    set_ready_and_synced(
        &mut status.conditions,
        false,
        synced,
        reason,
        message,
        generation,
    );
}

/// Why a new key is needed, if one is.
fn mint_reason(
    k: &ApiKey,
    status: &ApiKeyStatus,
    digest: &str,
    held: bool,
) -> Option<&'static str> {
    status.key_id.as_ref()?;
    if status.rotation_generation != Some(k.spec.rotation.rotation_generation) {
        Some("Rotated")
    } else if status.request_digest.as_deref() != Some(digest) {
        Some("SpecChanged")
    } else if !held {
        Some("SecretLost")
    } else {
        None
    }
}

async fn apply(k: &ApiKey, ctx: &Context, w: &StatusWriter<ApiKey>) -> Result<Action, Error> {
    let generation = k.meta().generation;
    let ns = namespace(k)?;
    let mut status = k.status.clone().unwrap_or_default();

    // The tenant first: without its id there is nothing to mint for.
    let tenants: Api<Tenant> = Api::namespaced(ctx.client.clone(), &ns);
    let tenant_name = &k.spec.tenant_ref.name;
    let tenant_id = match tenants.get_opt(tenant_name).await? {
        Some(t) => t.status.and_then(|s| s.tenant_id),
        None => None,
    };
    let Some(tenant_id) = tenant_id else {
        let message = format!("waiting for Tenant {tenant_name} to be created in the relay");
        not_ready(&mut status, generation, "TenantNotReady", &message, true);
        w.write(&status).await?;
        return Ok(Action::requeue(Duration::from_secs(15)));
    };

    if let Some(pending) = status.pending_mint.clone() {
        return finish_mint(k, ctx, w, status, &tenant_id, &pending).await;
    }

    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
    let current = secrets.get_opt(&k.spec.secret_name).await?;
    if let Some(s) = &current
        && !secret::owned_by(s, k)
    {
        let message = format!(
            "Secret {} exists and does not belong to this ApiKey; the operator will not overwrite it",
            k.spec.secret_name
        );
        not_ready(&mut status, generation, "SecretConflict", &message, false);
        w.write(&status).await?;
        return Ok(Action::requeue(ctx.settings.resync));
    }
    let (body, digest) = request(k);
    let held = match (&current, &status.key_id, &status.prefix) {
        (Some(s), Some(id), Some(prefix)) => secret::holds(s, id, prefix),
        _ => false,
    };
    if status.key_id.is_none() {
        return start_mint(k, ctx, w, status, &tenant_id, body, digest, "Minted").await;
    }
    if let Some(reason) = mint_reason(k, &status, &digest, held) {
        return start_mint(k, ctx, w, status, &tenant_id, body, digest, reason).await;
    }

    // Everything is in place: check the relay only once per resync interval.
    let key_id = status.key_id.clone().unwrap_or_default();
    if !ctx.recently_verified(&uid(k)) {
        match ctx.relay.get_key(&key_id).await {
            Ok(key) if key.usable_at(now_ms()) => ctx.verified(&uid(k)),
            Ok(_) | Err(RelayError::Status { status: 404, .. }) => {
                if k.spec.remint_if_revoked {
                    return start_mint(k, ctx, w, status, &tenant_id, body, digest, "Reminted")
                        .await;
                }
                let message = format!(
                    "key {key_id} is revoked, expired or gone in the relay; bump spec.rotation.rotationGeneration (or set remintIfRevoked) for a new one"
                );
                let was = status.conditions.clone();
                not_ready(&mut status, generation, "Degraded", &message, true);
                w.write(&status).await?;
                if was != status.conditions {
                    ctx.event(k, true, "Degraded", "Observe", message).await;
                }
                return Ok(Action::requeue(ctx.settings.resync));
            }
            Err(e) => return Err(e.into()),
        }
    }
    // The Secret's labels, annotations or URL may have been changed by hand or by the spec.
    if let Some(s) = &current
        && let Some(text) = secret::value(s, secret::keys::API_KEY)
    {
        let wanted = secret::build(k, &key_id, text, &ctx.settings.public_relay_url);
        if !secret::in_place(s, &wanted) {
            write_secret(&secrets, &wanted).await?;
        }
    }
    let requeue = revoke_previous(k, ctx, &mut status).await?;
    status.observed_generation = generation;
    let message = format!("Secret {} holds key {key_id}", k.spec.secret_name);
    set_ready_and_synced(
        &mut status.conditions,
        true,
        true,
        "KeyReady",
        &message,
        generation,
    );
    w.write(&status).await?;
    ctx.succeeded(k);
    Ok(Action::requeue(requeue.min(ctx.settings.resync)))
}

async fn write_secret(secrets: &Api<Secret>, wanted: &Secret) -> Result<(), Error> {
    let name = wanted.metadata.name.clone().unwrap_or_default();
    let mut body = serde_json::to_value(wanted).map_err(|e| Error::Invalid(e.to_string()))?;
    body["apiVersion"] = json!("v1");
    body["kind"] = json!("Secret");
    secrets
        .patch(
            &name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&body),
        )
        .await?;
    Ok(())
}

/// Records the mint as pending (a new idempotency key), then asks the relay.
#[allow(clippy::too_many_arguments)]
async fn start_mint(
    k: &ApiKey,
    ctx: &Context,
    w: &StatusWriter<ApiKey>,
    mut status: ApiKeyStatus,
    tenant_id: &str,
    body: Value,
    digest: String,
    reason: &str,
) -> Result<Action, Error> {
    status.mint_count += 1;
    let generation = k.spec.rotation.rotation_generation;
    let pending = PendingMint {
        idempotency_key: format!("k8s-{}-g{generation}-m{}", uid(k), status.mint_count),
        request: body.to_string(),
        rotation_generation: generation,
        request_digest: digest,
        since: rfc3339(now_ms()),
    };
    tracing::info!(api_key = %object_key(k), reason, "minting a key");
    status.pending_mint = Some(pending.clone());
    w.write(&status).await?;
    finish_mint(k, ctx, w, status, tenant_id, &pending).await
}

/// Sends (or re-sends) the pending mint and delivers its key to the Secret.
async fn finish_mint(
    k: &ApiKey,
    ctx: &Context,
    w: &StatusWriter<ApiKey>,
    mut status: ApiKeyStatus,
    tenant_id: &str,
    pending: &PendingMint,
) -> Result<Action, Error> {
    let generation = k.meta().generation;
    let started = parse_rfc3339(&pending.since).unwrap_or(0);
    if now_ms() - started > PENDING_LIMIT_MS {
        let message = format!(
            "a mint started at {} never completed and the relay no longer remembers it; revoke any stray key of this tenant, then remove status.pendingMint",
            pending.since
        );
        not_ready(
            &mut status,
            generation,
            "MintOutcomeUnknown",
            &message,
            false,
        );
        w.write(&status).await?;
        return Ok(Action::await_change());
    }
    let body: Value = serde_json::from_str(&pending.request)
        .map_err(|e| Error::Invalid(format!("status.pendingMint.request: {e}")))?;
    let created = match ctx
        .relay
        .create_key(tenant_id, &body, &pending.idempotency_key)
        .await
    {
        Ok(c) => c,
        Err(
            e @ RelayError::Status {
                status: 400 | 409, ..
            },
        ) => {
            // Refused: nothing was made (an expiry in the past, a deleted tenant). The
            // pending mint is dropped; a spec change or a tenant back in order tries again.
            let message = format!("the relay refused the key: {e}");
            status.pending_mint = None;
            not_ready(&mut status, generation, "KeyRefused", &message, false);
            w.write(&status).await?;
            ctx.event(k, true, "KeyRefused", "Mint", message).await;
            return Ok(Action::requeue(ctx.settings.resync));
        }
        Err(e) => return Err(e.into()),
    };
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &namespace(k)?);
    let text = match created.api_key.clone() {
        Some(text) => text,
        None => match recover_text(&secrets, k, &created).await? {
            Some(text) => text,
            None => return lost(k, ctx, w, status, &created).await,
        },
    };
    let wanted = secret::build(k, &created.key.id, &text, &ctx.settings.public_relay_url);
    write_secret(&secrets, &wanted).await?;

    let now = now_ms();
    let old = status.key_id.clone().filter(|id| *id != created.key.id);
    if let Some(old) = &old {
        // A rotation while an earlier one is still in its grace period: that one goes now.
        if let Some(previous) = status.previous_key_id.take() {
            ctx.relay.revoke_key(&previous).await?;
        }
        status.previous_key_id = Some(old.clone());
        let grace = k.spec.rotation.grace_period_seconds.max(0) * 1000;
        status.previous_key_revoke_at = Some(rfc3339(now + grace));
        status.last_rotated_at = Some(rfc3339(now));
    }
    status.key_id = Some(created.key.id.clone());
    status.prefix = Some(created.key.prefix.clone());
    status.expires_at = created.key.expires_at_ms.map(rfc3339);
    status.rotation_generation = Some(pending.rotation_generation);
    status.request_digest = Some(pending.request_digest.clone());
    status.pending_mint = None;
    status.observed_generation = generation;
    let message = format!("Secret {} holds key {}", k.spec.secret_name, created.key.id);
    set_ready_and_synced(
        &mut status.conditions,
        true,
        true,
        "KeyReady",
        &message,
        generation,
    );
    w.write(&status).await?;
    ctx.verified(&uid(k));
    let note = match &old {
        Some(old) => format!(
            "key {} ({}…) written to Secret {}; key {old} is revoked at {}",
            created.key.id,
            created.key.prefix,
            k.spec.secret_name,
            status.previous_key_revoke_at.as_deref().unwrap_or_default()
        ),
        None => format!(
            "key {} ({}…) written to Secret {}",
            created.key.id, created.key.prefix, k.spec.secret_name
        ),
    };
    let reason = if old.is_some() {
        "KeyRotated"
    } else {
        "KeyMinted"
    };
    ctx.event(k, false, reason, "Mint", note).await;
    ctx.succeeded(k);
    Ok(Action::requeue(Duration::ZERO))
}

/// The text of a replayed key whose text the relay no longer shows: found in our Secret if a
/// crash came after the Secret write.
async fn recover_text(
    secrets: &Api<Secret>,
    k: &ApiKey,
    created: &KeyCreated,
) -> Result<Option<String>, Error> {
    Ok(secrets
        .get_opt(&k.spec.secret_name)
        .await?
        .filter(|s| {
            secret::owned_by(s, k) && secret::holds(s, &created.key.id, &created.key.prefix)
        })
        .and_then(|s| secret::value(&s, secret::keys::API_KEY).map(str::to_string)))
}

/// The relay made the key but its text is gone: it was never delivered, so it is revoked, and
/// the next reconcile mints another under a new idempotency key.
async fn lost(
    k: &ApiKey,
    ctx: &Context,
    w: &StatusWriter<ApiKey>,
    mut status: ApiKeyStatus,
    created: &KeyCreated,
) -> Result<Action, Error> {
    ctx.relay.revoke_key(&created.key.id).await?;
    let message = format!(
        "key {} was made but its text was lost before it reached the Secret; it is revoked and a new one is minted",
        created.key.id
    );
    status.pending_mint = None;
    not_ready(
        &mut status,
        k.meta().generation,
        "MintOutcomeLost",
        &message,
        true,
    );
    w.write(&status).await?;
    ctx.event(k, true, "MintOutcomeLost", "Mint", message).await;
    Ok(Action::requeue(Duration::ZERO))
}

/// Revokes the key a rotation replaced once its grace period is over; else how long to wait.
async fn revoke_previous(
    k: &ApiKey,
    ctx: &Context,
    status: &mut ApiKeyStatus,
) -> Result<Duration, Error> {
    let Some(previous) = status.previous_key_id.clone() else {
        return Ok(Duration::MAX);
    };
    let at = status
        .previous_key_revoke_at
        .as_deref()
        .and_then(parse_rfc3339)
        .unwrap_or(0);
    let wait = at - now_ms();
    if wait > 0 {
        return Ok(Duration::from_millis(u64::try_from(wait).unwrap_or(0)));
    }
    ctx.relay.revoke_key(&previous).await?;
    status.previous_key_id = None;
    status.previous_key_revoke_at = None;
    ctx.event(
        k,
        false,
        "PreviousKeyRevoked",
        "Revoke",
        format!("key {previous} revoked after the rotation's grace period"),
    )
    .await;
    Ok(Duration::MAX)
}

async fn cleanup(k: &ApiKey, ctx: &Context) -> Result<Action, Error> {
    ctx.forget(&uid(k));
    let status = k.status.clone().unwrap_or_default();
    if k.spec.reclaim_policy == ReclaimPolicy::Retain {
        if let Some(id) = &status.key_id {
            ctx.event(
                k,
                false,
                "KeyRetained",
                "Delete",
                format!("key {id} keeps working (reclaimPolicy retain)"),
            )
            .await;
        }
        return Ok(Action::await_change());
    }
    match revoke_all(k, ctx, &status).await {
        Ok(revoked) => {
            if !revoked.is_empty() {
                ctx.event(
                    k,
                    false,
                    "KeyRevoked",
                    "Delete",
                    format!("revoked {}", revoked.join(", ")),
                )
                .await;
            }
            Ok(Action::await_change())
        }
        Err(e) if deletion_overdue(k, ctx.settings.deletion_timeout) => {
            let message = format!(
                "gave up revoking after {} s: {e}; revoke key {} with the admin API",
                ctx.settings.deletion_timeout.as_secs(),
                status.key_id.as_deref().unwrap_or("(none)")
            );
            tracing::warn!(api_key = %object_key(k), "{message}");
            ctx.event(k, true, "RevocationAbandoned", "Delete", message)
                .await;
            Ok(Action::await_change())
        }
        Err(e) => Err(e),
    }
}

/// Revokes the current key, the previous one, and whatever a pending mint made.
async fn revoke_all(
    k: &ApiKey,
    ctx: &Context,
    status: &ApiKeyStatus,
) -> Result<Vec<String>, Error> {
    let mut ids: Vec<String> = status
        .key_id
        .iter()
        .chain(status.previous_key_id.iter())
        .cloned()
        .collect();
    if let Some(pending) = &status.pending_mint {
        let tenants: Api<Tenant> = Api::namespaced(ctx.client.clone(), &namespace(k)?);
        let tenant_id = tenants
            .get_opt(&k.spec.tenant_ref.name)
            .await?
            .and_then(|t| t.status.and_then(|s| s.tenant_id));
        if let Some(tenant_id) = tenant_id {
            let body: Value = serde_json::from_str(&pending.request).unwrap_or(Value::Null);
            match ctx
                .relay
                .create_key(&tenant_id, &body, &pending.idempotency_key)
                .await
            {
                Ok(created) => ids.push(created.key.id),
                // Refused: the mint never happened (or the tenant is gone with its keys).
                Err(RelayError::Status {
                    status: 400 | 404 | 409,
                    ..
                }) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    ids.dedup();
    for id in &ids {
        ctx.relay.revoke_key(id).await?;
    }
    Ok(ids)
}
