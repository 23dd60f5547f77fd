//! API keys: create (once per `Idempotency-Key`), get, list, revoke, rotate with a grace
//! period. The key text is shown once and never stored; only its hash is.

use repowire_protocol::CloseCode;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::tenants::live_tenant;
use super::{AdminError, tenant};
use crate::ids::now_ms;
use crate::routing::hub::Hub;
use crate::storage::store::{ApiKeyRecord, Store, TenantKey};
use crate::tenancy::apikey::{self, KeyMode, MintedKey};
use crate::tenancy::token::Tokens;

/// Longest key lifetime, in days (protocol.md §3.6).
pub const MAX_EXPIRES_IN_DAYS: u32 = 3650;
/// Longest key label, in bytes.
pub const MAX_LABEL_BYTES: usize = 128;

/// Checks a key's label and lifetime: a lifetime of 0 days would mint a key that is expired
/// already, and a label is shown in tables and dashboards, so it holds no control characters.
pub(crate) fn check_new_key(label: &str, expires_in_days: Option<u32>) -> Result<(), AdminError> {
    if let Some(days) = expires_in_days
        && !(1..=MAX_EXPIRES_IN_DAYS).contains(&days)
    {
        return Err(AdminError::Invalid(format!(
            "expires_in_days is {days}; it must be 1 to {MAX_EXPIRES_IN_DAYS} (leave it out for a key that does not expire)"
        )));
    }
    super::plans::check_text("label", label, MAX_LABEL_BYTES)?;
    Ok(())
}

/// The stored scopes of a new key: `given`, checked, or [`apikey::DEFAULT_SCOPES`] (never
/// `approve` unasked).
fn new_key_scopes(given: Option<&[String]>) -> Result<String, AdminError> {
    match given {
        Some(given) => apikey::scopes(given).map_err(AdminError::Invalid),
        None => Ok(apikey::DEFAULT_SCOPES.join(" ")),
    }
}

/// Mints and stores a key for a tenant (by id or name), with `scopes` (`None`: `connect` and
/// `usage:read`).
pub async fn create_key(
    store: &dyn Store,
    tenant_ref: &str,
    mode: KeyMode,
    label: &str,
    expires_in_days: Option<u32>,
    scopes: Option<&[String]>,
) -> Result<MintedKey, AdminError> {
    check_new_key(label, expires_in_days)?;
    let expires = key_expiry(now_ms(), expires_in_days, None)?;
    create_key_until(store, tenant_ref, mode, label, expires, scopes).await
}

/// Like [`create_key`], with the expiry as a time (ms since the epoch), checked by
/// [`key_expiry`].
pub async fn create_key_until(
    store: &dyn Store,
    tenant_ref: &str,
    mode: KeyMode,
    label: &str,
    expires_at_ms: Option<i64>,
    scopes: Option<&[String]>,
) -> Result<MintedKey, AdminError> {
    check_new_key(label, None)?;
    let now = now_ms();
    let expires = key_expiry(now, None, expires_at_ms)?;
    let scopes = new_key_scopes(scopes)?;
    // A deleted tenant's keys were revoked with it; it gets no new ones (409).
    let tenant = live_tenant(store, super::tenant_key(tenant_ref)).await?;
    let mut minted = apikey::mint(&tenant.id, mode, label, now, expires);
    minted.record.scopes = scopes;
    store.insert_api_key(&minted.record).await?;
    Ok(minted)
}

/// When a new key expires: `expires_in_days` after `now`, or at `expires_at_ms` (later than
/// `now`, at most 3650 days after it), or never. Both at once is refused.
pub fn key_expiry(
    now: i64,
    expires_in_days: Option<u32>,
    expires_at_ms: Option<i64>,
) -> Result<Option<i64>, AdminError> {
    let longest = i64::from(MAX_EXPIRES_IN_DAYS) * 86_400_000;
    match (expires_in_days, expires_at_ms) {
        (Some(_), Some(_)) => Err(AdminError::Invalid(
            "give expires_in_days or expires_at_ms, not both".into(),
        )),
        (Some(days), None) => Ok(Some(now + i64::from(days) * 86_400_000)),
        (None, Some(at)) if at <= now => Err(AdminError::Invalid(format!(
            "expires_at_ms is {at}, which is not in the future (now is {now})"
        ))),
        (None, Some(at)) if at - now > longest => Err(AdminError::Invalid(format!(
            "expires_at_ms is {at}, more than {MAX_EXPIRES_IN_DAYS} days from now"
        ))),
        (None, at) => Ok(at),
    }
}

/// Keys of a tenant.
pub async fn list_keys(
    store: &dyn Store,
    tenant_ref: &str,
) -> Result<Vec<ApiKeyRecord>, AdminError> {
    let tenant = tenant(store, tenant_ref).await?;
    Ok(store.list_api_keys(&tenant.id).await?)
}

/// A page of a tenant's keys.
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct KeyPage {
    /// Oldest first; never the key text.
    pub items: Vec<ApiKeyRecord>,
    /// Pass as `cursor` for the next page; `null` on the last one.
    pub next_cursor: Option<String>,
}

/// A page of a tenant's keys, oldest first.
pub async fn list_keys_page(
    store: &dyn Store,
    tenant_ref: &str,
    page: &super::page::PageQuery,
) -> Result<KeyPage, AdminError> {
    let limit = page.limit()?;
    let after = page.after()?;
    let tenant = tenant(store, tenant_ref).await?;
    let items = store.list_api_keys_page(&tenant.id, after, limit).await?;
    let full = i64::try_from(items.len()).unwrap_or(i64::MAX) == limit;
    let next_cursor =
        super::page::next_cursor(full, items.last().map(|k| (k.created_at_ms, k.id.as_str())));
    Ok(KeyPage { items, next_cursor })
}

/// Revokes a key and closes this process's connections that use it.
pub async fn revoke_key(
    store: &dyn Store,
    hub: Option<&Hub>,
    key_id: &str,
) -> Result<(), AdminError> {
    if store.get_api_key(key_id).await?.is_none() {
        return Err(AdminError::NotFound(format!("no key `{key_id}`")));
    }
    store.revoke_api_key(key_id, now_ms()).await?;
    if let Some(hub) = hub {
        let closed = hub.kick_key(key_id, CloseCode::KEY_REVOKED, "API key revoked");
        tracing::info!(key = key_id, closed, "api key revoked");
    }
    Ok(())
}

/// Longest `Idempotency-Key`, bytes.
pub const MAX_IDEMPOTENCY_KEY_BYTES: usize = 255;

/// Longest rotation grace period, seconds (30 days).
pub const MAX_GRACE_SECONDS: u64 = 30 * 24 * 3600;

/// `POST /tenants/{tenant}/keys`.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct KeyRequestBody {
    /// For people (at most 128 bytes, no control characters).
    #[serde(default)]
    pub label: String,
    /// A test key (`rw_test_…`).
    #[serde(default)]
    pub test: bool,
    /// 1–3650; left out (and no `expires_at_ms`): the key does not expire.
    #[serde(default)]
    pub expires_in_days: Option<u32>,
    /// Instead of `expires_in_days`: when the key expires, ms since the epoch (in the future,
    /// at most 3650 days away). A retry with the same `Idempotency-Key` sends the same time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at_ms: Option<i64>,
    /// What the key may do: `connect` (exchange it for a token and connect agents),
    /// `usage:read` (read the tenant's own limits and usage), `approve` (answer agents' tool
    /// approvals, as a person, orchestrator or service peer: a key with it can let agents on
    /// other machines run code, so it is never given unasked), `keys:manage` (list, create and
    /// revoke the tenant's keys in the dashboard), `messages:read` (read the tenant's asks and
    /// replies in the dashboard). Left out: `connect` and `usage:read`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scopes: Option<Vec<String>>,
}

/// A key just made (or found again by its `Idempotency-Key`).
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct KeyCreated {
    /// The key text: shown once. A retry with the same `Idempotency-Key` within the replay
    /// window (10 minutes by default) shows it again; after that it is `null`.
    pub api_key: Option<String>,
    /// The key's record.
    pub key: ApiKeyRecord,
    /// True when this answers a retry (nothing new was made).
    pub replayed: bool,
}

fn check_idempotency_key(key: &str) -> Result<(), AdminError> {
    if key.is_empty()
        || key.len() > MAX_IDEMPOTENCY_KEY_BYTES
        || !key.bytes().all(|b| b.is_ascii_graphic())
    {
        return Err(AdminError::Invalid(format!(
            "an Idempotency-Key is 1-{MAX_IDEMPOTENCY_KEY_BYTES} printable ASCII characters without spaces"
        )));
    }
    Ok(())
}

/// Creates a key at most once per `(tenant, idempotency_key)`: a retry of the same request
/// answers with the key the first one made (its text too, within `replay_window_ms`:
/// recomputed from a seed derived from the relay's secret, never
/// stored); a different request with the same idempotency key is refused (`Conflict`).
pub async fn create_key_once(
    store: &dyn Store,
    tokens: &Tokens,
    tenant_ref: &str,
    request: &KeyRequestBody,
    idempotency_key: &str,
    replay_window_ms: i64,
) -> Result<KeyCreated, AdminError> {
    check_idempotency_key(idempotency_key)?;
    check_new_key(&request.label, request.expires_in_days)?;
    let now = now_ms();
    let expires = key_expiry(now, request.expires_in_days, request.expires_at_ms)?;
    let scopes = new_key_scopes(request.scopes.as_deref())?;
    let tenant = live_tenant(store, super::tenant_key(tenant_ref)).await?;
    let request_hash = format!(
        "{:x}",
        Sha256::digest(
            serde_json::to_string(&(tenant.id.as_str(), request))
                .unwrap_or_default()
                .as_bytes()
        )
    );
    // The seed names the moment the record is made, so a retry after the record was forgotten
    // (7 days) makes a new key instead of the old one again (whose id is taken: that was a
    // permanent 503), while a retry before it recomputes the same text from the stored time.
    let seed_at = |at_ms: i64| {
        tokens.seed(
            "idempotent api key",
            &[&tenant.id, idempotency_key, &at_ms.to_string()],
        )
    };
    let mode = if request.test {
        KeyMode::Test
    } else {
        KeyMode::Live
    };
    let mut minted =
        apikey::mint_seeded(seed_at(now), &tenant.id, mode, &request.label, now, expires);
    minted.record.scopes = scopes;
    let Some(earlier) = store
        .insert_api_key_once(&minted.record, idempotency_key, &request_hash)
        .await?
    else {
        return Ok(KeyCreated {
            api_key: Some(minted.text),
            key: minted.record,
            replayed: false,
        });
    };
    if earlier.request_hash != request_hash {
        return Err(AdminError::Store(
            crate::storage::store::StoreError::Conflict(
                "this Idempotency-Key was used for a different request".into(),
            ),
        ));
    }
    let key = store
        .get_api_key(&earlier.key_id)
        .await?
        .ok_or_else(|| AdminError::NotFound(format!("no key `{}`", earlier.key_id)))?;
    // The same seed makes the same text: shown again only while the window is open, and only
    // if it is the text of the stored key.
    let again = apikey::mint_seeded(
        seed_at(earlier.created_at_ms),
        &tenant.id,
        mode,
        &request.label,
        earlier.created_at_ms,
        expires,
    );
    let text = (now - earlier.created_at_ms < replay_window_ms
        && key.id == again.record.id
        && key.hash == again.record.hash)
        .then_some(again.text);
    Ok(KeyCreated {
        api_key: text,
        key,
        replayed: true,
    })
}

/// One key by id (never its text).
pub async fn get_key(store: &dyn Store, key_id: &str) -> Result<ApiKeyRecord, AdminError> {
    store
        .get_api_key(key_id)
        .await?
        .ok_or_else(|| AdminError::NotFound(format!("no key `{key_id}`")))
}

/// Rotates a key: a new key for the same tenant, label, mode, scopes and expiry, and the old one keeps
/// working for `grace_seconds` (0: it stops at once), then expires — closing its connections
/// on every relay process at their next key check. Returns the new key and the old record.
pub async fn rotate_key(
    store: &dyn Store,
    key_id: &str,
    grace_seconds: u64,
) -> Result<(MintedKey, ApiKeyRecord), AdminError> {
    if grace_seconds > MAX_GRACE_SECONDS {
        return Err(AdminError::Invalid(format!(
            "grace_seconds is {grace_seconds}; it must be 0 to {MAX_GRACE_SECONDS}"
        )));
    }
    let old = get_key(store, key_id).await?;
    live_tenant(store, TenantKey::Id(&old.tenant_id)).await?;
    let now = now_ms();
    if !old.usable_at(now) {
        return Err(AdminError::Invalid(format!(
            "key `{key_id}` is revoked or expired: create a new key instead"
        )));
    }
    let mode = if old.mode == KeyMode::Test.as_str() {
        KeyMode::Test
    } else {
        KeyMode::Live
    };
    let mut minted = apikey::mint(&old.tenant_id, mode, &old.label, now, old.expires_at_ms);
    minted.record.scopes = old.scopes.clone();
    store.insert_api_key(&minted.record).await?;
    let grace_end = now.saturating_add(i64::try_from(grace_seconds).unwrap_or(i64::MAX) * 1000);
    let ends = old.expires_at_ms.map_or(grace_end, |e| e.min(grace_end));
    if !store.set_key_expiry(key_id, Some(ends)).await? {
        return Err(AdminError::NotFound(format!("no usable key `{key_id}`")));
    }
    let old = get_key(store, key_id).await?;
    Ok((minted, old))
}
