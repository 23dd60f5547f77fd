//! Tenants and API keys: the operations, shared by the admin HTTP API ([`http`]) and the
//! `repowire-relay admin` subcommands ([`cli`]).

pub mod cli;
mod http;
pub mod plans;
pub mod tenants;

use repowire_protocol::CloseCode;

#[cfg(feature = "openapi")]
pub use http::openapi;
pub use http::router;
pub use tenants::{NewTenant, TenantDetail, TenantPatch, create_tenant, get_tenant, update_tenant};

use crate::apikey::{self, KeyMode, MintedKey};
use crate::error::AppError;
use crate::hub::Hub;
use crate::ids::{now_ms, random_suffix};
use crate::store::{ApiKeyRecord, Store, StoreError, TenantRecord};

/// Why an admin operation failed.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// No such tenant or key.
    #[error("{0}")]
    NotFound(String),
    /// Bad input.
    #[error("{0}")]
    Invalid(String),

    /// Storage.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<AdminError> for AppError {
    fn from(e: AdminError) -> Self {
        match e {
            AdminError::NotFound(m) => AppError::not_found(m),
            AdminError::Invalid(m) => AppError::bad_request(m),

            AdminError::Store(s) => s.into(),
        }
    }
}

pub(crate) async fn tenant(
    store: &dyn Store,
    id_or_name: &str,
) -> Result<TenantRecord, AdminError> {
    store
        .find_tenant(id_or_name)
        .await?
        .ok_or_else(|| AdminError::NotFound(format!("no tenant `{id_or_name}`")))
}

/// Longest key lifetime, in days (protocol.md §3.6).
pub const MAX_EXPIRES_IN_DAYS: u32 = 3650;
/// Longest key label, in bytes.
pub const MAX_LABEL_BYTES: usize = 128;

/// Checks a key's label and lifetime: a lifetime of 0 days would mint a key that is expired
/// already, and a label is shown in tables and dashboards, so it holds no control characters.
fn check_new_key(label: &str, expires_in_days: Option<u32>) -> Result<(), AdminError> {
    if let Some(days) = expires_in_days
        && !(1..=MAX_EXPIRES_IN_DAYS).contains(&days)
    {
        return Err(AdminError::Invalid(format!(
            "expires_in_days is {days}; it must be 1 to {MAX_EXPIRES_IN_DAYS} (leave it out for a key that does not expire)"
        )));
    }
    if label.len() > MAX_LABEL_BYTES {
        return Err(AdminError::Invalid(format!(
            "the label is {} bytes; the limit is {MAX_LABEL_BYTES}",
            label.len()
        )));
    }
    if label.chars().any(char::is_control) {
        return Err(AdminError::Invalid(
            "the label holds control characters".into(),
        ));
    }
    Ok(())
}

/// Mints and stores a key for a tenant (by id or name).
pub async fn create_key(
    store: &dyn Store,
    tenant_ref: &str,
    mode: KeyMode,
    label: &str,
    expires_in_days: Option<u32>,
) -> Result<MintedKey, AdminError> {
    check_new_key(label, expires_in_days)?;
    let tenant = tenant(store, tenant_ref).await?;
    let now = now_ms();
    let expires = expires_in_days.map(|d| now + i64::from(d) * 86_400_000);
    let minted = apikey::mint(&tenant.id, mode, label, now, expires);
    store.insert_api_key(&minted.record).await?;
    Ok(minted)
}

/// Keys of a tenant.
pub async fn list_keys(
    store: &dyn Store,
    tenant_ref: &str,
) -> Result<Vec<ApiKeyRecord>, AdminError> {
    let tenant = tenant(store, tenant_ref).await?;
    Ok(store.list_api_keys(&tenant.id).await?)
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

/// The `default` tenant and its first key, minted but not stored: the caller keeps the key
/// text somewhere safe first, then stores both with [`store_first_tenant`].
pub fn default_tenant() -> (TenantRecord, MintedKey) {
    // The local machine's own relay: no plan limits.
    let tenant = TenantRecord {
        id: format!("tnt-{}", random_suffix()),
        name: "default".into(),
        plan: "unlimited".into(),
        created_at_ms: now_ms(),
        suspended_at_ms: None,
        display_name: None,
        overrides: crate::store::Limits::default(),
    };
    let key = apikey::mint(
        &tenant.id,
        KeyMode::Live,
        "bootstrap",
        tenant.created_at_ms,
        None,
    );
    (tenant, key)
}

/// Stores a first tenant and its key in one transaction. False, with nothing stored, when the
/// store has a tenant of that name already: another process bootstrapped the same database at
/// the same moment (two pods of a fresh install), which is not an error.
pub async fn store_first_tenant(
    store: &dyn Store,
    tenant: &TenantRecord,
    key: &MintedKey,
) -> Result<bool, AdminError> {
    match store.create_tenant_with_key(tenant, &key.record).await {
        Ok(()) => Ok(true),
        Err(StoreError::Conflict(_)) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// On an empty store: a `default` tenant and its first key. `None` when the store has tenants,
/// including when another process created the first one concurrently.
pub async fn bootstrap(store: &dyn Store) -> Result<Option<(TenantRecord, MintedKey)>, AdminError> {
    if !store.list_tenants().await?.is_empty() {
        return Ok(None);
    }
    let (tenant, key) = default_tenant();
    Ok(store_first_tenant(store, &tenant, &key)
        .await?
        .then_some((tenant, key)))
}
