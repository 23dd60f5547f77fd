//! Admin tokens: credentials for the admin API minted, listed and revoked through it, each with
//! scopes — `admin:read` (every `GET`), `admin:write` (everything else) and `admin:tokens`
//! (minting, listing and revoking admin tokens, whatever the method). A token mints only
//! scopes it holds itself, so no token can raise its own rights (issue 30 item 6: a write-only
//! token minted itself a reader and read the audit log). The bootstrap token of the relay's
//! config holds every scope and cannot be revoked here. Like API keys, only the SHA-256
//! of a token is stored and its text is shown once.

use serde::{Deserialize, Serialize};

use super::AdminError;
use crate::ids::{now_ms, random_suffix};
use crate::storage::store::{AdminTokenRecord, KeyStore};

/// Prefix of minted admin tokens (never a valid API key or JWT).
pub const PREFIX: &str = "rw_admin_";
/// Read scope: every `GET` of the admin API.
pub const READ: &str = "admin:read";
/// Write scope: every other method.
pub const WRITE: &str = "admin:write";
/// Managing admin tokens: `GET`, `POST` and `DELETE` of `/admin-tokens`.
pub const TOKENS: &str = "admin:tokens";
/// Every scope, in the order they are stored.
pub const ALL: [&str; 3] = [READ, WRITE, TOKENS];

/// `POST /admin-tokens`.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NewAdminToken {
    /// What it is for (at most 128 bytes, no control characters).
    #[serde(default)]
    pub label: String,
    /// Some of `admin:read`, `admin:write` and `admin:tokens`; at least one, each held by
    /// the token that mints it.
    pub scopes: Vec<String>,
    /// Days until it stops working (1–3650); absent: never.
    #[serde(default)]
    pub expires_in_days: Option<u32>,
}

/// A minted admin token: its text, shown this once, and its record.
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MintedAdminToken {
    /// The token (`rw_admin_…`); not stored, not shown again.
    pub token: String,
    /// Its record.
    pub admin_token: AdminTokenRecord,
}

/// Mints and stores an admin token with some of the scopes `holder` has (`None`: the bootstrap
/// token or the CLI, which hold every scope).
pub async fn create(
    store: &dyn KeyStore,
    new: NewAdminToken,
    holder: Option<&AdminTokenRecord>,
) -> Result<MintedAdminToken, AdminError> {
    super::keys::check_new_key(&new.label, new.expires_in_days)?;
    if new.scopes.is_empty() {
        return Err(AdminError::Invalid(format!(
            "scopes is empty; give some of `{READ}`, `{WRITE}` and `{TOKENS}`"
        )));
    }
    let mut scopes: Vec<&str> = Vec::new();
    for s in &new.scopes {
        let known = ALL.into_iter().find(|k| k == s).ok_or_else(|| {
            AdminError::Invalid(format!(
                "unknown scope `{s}`; the scopes are `{READ}`, `{WRITE}` and `{TOKENS}`"
            ))
        })?;
        if !scopes.contains(&known) {
            scopes.push(known);
        }
    }
    if let Some(holder) = holder
        && let Some(missing) = scopes.iter().find(|s| !holder.has(s))
    {
        return Err(AdminError::Forbidden(format!(
            "admin token {} does not hold `{missing}`, so it cannot give it",
            holder.id
        )));
    }
    scopes.sort_by_key(|s| ALL.iter().position(|k| k == s));
    // 192 random bits, as hex.
    let bytes: [u8; 24] = rand::random();
    let text = format!(
        "{PREFIX}{}",
        bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()
    );
    let now = now_ms();
    let record = AdminTokenRecord {
        id: format!("adm-{}", random_suffix()),
        label: new.label,
        scopes: scopes.join(" "),
        hash: crate::tenancy::apikey::hash(&text),
        display: format!("{}…", &text[..PREFIX.len() + 4]),
        created_at_ms: now,
        expires_at_ms: new.expires_in_days.map(|d| now + i64::from(d) * 86_400_000),
        revoked_at_ms: None,
        last_used_at_ms: None,
    };
    store.insert_admin_token(&record).await?;
    Ok(MintedAdminToken {
        token: text,
        admin_token: record,
    })
}

/// Every admin token (never their text).
pub async fn list(store: &dyn KeyStore) -> Result<Vec<AdminTokenRecord>, AdminError> {
    Ok(store.list_admin_tokens().await?)
}

/// Revokes an admin token: it stops working at once, on every relay process. A minted
/// `holder` revokes only tokens whose every scope it holds itself (no token takes away the
/// rights of one above it).
pub async fn revoke(
    store: &dyn KeyStore,
    id: &str,
    holder: Option<&AdminTokenRecord>,
) -> Result<(), AdminError> {
    if let Some(holder) = holder
        && let Some(target) = store
            .list_admin_tokens()
            .await?
            .into_iter()
            .find(|t| t.id == id)
        && let Some(missing) = target.scopes.split(' ').find(|s| !holder.has(s))
    {
        return Err(AdminError::Forbidden(format!(
            "admin token {} does not hold `{missing}`, which {id} holds, so it cannot revoke it",
            holder.id
        )));
    }
    if store.revoke_admin_token(id, now_ms()).await? {
        return Ok(());
    }
    Err(AdminError::NotFound(format!(
        "no admin token `{id}` that is not revoked already"
    )))
}

/// The usable admin token with this text, if any.
pub async fn find(
    store: &dyn KeyStore,
    text: &str,
) -> Result<Option<AdminTokenRecord>, AdminError> {
    if !text.starts_with(PREFIX) {
        return Ok(None);
    }
    let now = now_ms();
    Ok(store
        .admin_token_by_hash(&crate::tenancy::apikey::hash(text))
        .await?
        .filter(|t| t.usable_at(now)))
}
