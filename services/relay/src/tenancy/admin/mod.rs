//! Tenants and API keys: the operations, shared by the admin HTTP API
//! ([`crate::edge::admin`]) and the `repowire-relay admin` subcommands ([`cli`]).

pub mod audit;
pub mod cli;
pub mod fields;
pub mod keys;
pub mod page;
pub mod plans;
pub mod tenants;
pub mod tokens;

pub use keys::{
    KeyCreated, KeyRequestBody, create_key, get_key, list_keys, revoke_key, rotate_key,
};
pub use tenants::{NewTenant, TenantDetail, TenantPatch, create_tenant, get_tenant, update_tenant};

use crate::error::AppError;
use crate::tenancy::apikey::{self, KeyMode, MintedKey};

use crate::ids::{TENANT_ID_PREFIX, now_ms, random_suffix};
use crate::storage::store::{Store, StoreError, TenantKey, TenantRecord};

/// Why an admin operation failed.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// No such tenant or key.
    #[error("{0}")]
    NotFound(String),
    /// Bad input.
    #[error("{0}")]
    Invalid(String),
    /// The credential may not do this.
    #[error("{0}")]
    Forbidden(String),

    /// Storage.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<AdminError> for AppError {
    fn from(e: AdminError) -> Self {
        match e {
            AdminError::NotFound(m) => AppError::not_found(m),
            AdminError::Invalid(m) => AppError::bad_request(m),
            AdminError::Forbidden(m) => AppError::new(
                axum::http::StatusCode::FORBIDDEN,
                repowire_protocol::ErrorCode::Forbidden,
                m,
            ),

            AdminError::Store(s) => s.into(),
        }
    }
}

/// What a `{tenant}` in a path or a CLI argument means: a text with the id prefix (`tnt-`) is
/// an id and is looked up only as an id; any other text is a name. A name can never have the
/// id's shape ([`tenants::create_tenant`] refuses it), so no text can mean two tenants.
pub fn tenant_key(tenant_ref: &str) -> TenantKey<'_> {
    if tenant_ref.starts_with(TENANT_ID_PREFIX) {
        TenantKey::Id(tenant_ref)
    } else {
        TenantKey::Name(tenant_ref)
    }
}

/// The tenant a `{tenant}` reference names (see [`tenant_key`]).
pub(crate) async fn tenant(
    store: &dyn Store,
    tenant_ref: &str,
) -> Result<TenantRecord, AdminError> {
    tenant_by(store, tenant_key(tenant_ref)).await
}

/// The tenant a key names, or `NotFound`.
pub(crate) async fn tenant_by(
    store: &dyn Store,
    key: TenantKey<'_>,
) -> Result<TenantRecord, AdminError> {
    store.find_tenant(key).await?.ok_or_else(|| {
        AdminError::NotFound(match key {
            TenantKey::Id(id) => format!("no tenant with id `{id}`"),
            TenantKey::Name(name) => format!("no tenant named `{name}`"),
        })
    })
}

/// The `default` tenant and its first key, minted but not stored: the caller keeps the key
/// text somewhere safe first, then stores both with [`store_first_tenant`].
pub fn default_tenant() -> (TenantRecord, MintedKey) {
    // The local machine's own relay: no plan limits.
    let tenant = TenantRecord {
        id: format!("{TENANT_ID_PREFIX}{}", random_suffix()),
        name: "default".into(),
        plan: "unlimited".into(),
        created_at_ms: now_ms(),
        suspended_at_ms: None,
        deleted_at_ms: None,
        display_name: None,
        overrides: crate::storage::store::Limits::default(),
    };
    let mut key = apikey::mint(
        &tenant.id,
        KeyMode::Live,
        "bootstrap",
        tenant.created_at_ms,
        None,
    );
    // The owner's key of a new relay (or of a laptop's own embedded one): it may approve, as
    // its owner does; keys minted later for agent machines do not unless asked.
    key.record.scopes = apikey::ALL_SCOPES.join(" ");
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
