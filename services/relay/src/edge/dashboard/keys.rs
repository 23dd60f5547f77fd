//! The Keys page, for sessions whose key holds `keys:manage`: the tenant's API keys (never
//! their text), a form that makes one and shows its text once, and a revoke button per key.
//! Every write is audited as the dashboard's, naming the session's key.
//!
//! A session never hands out more than it holds: a key it makes has at most its scopes and
//! expires no later than its own key; it revokes only keys that may do no more than it (and
//! its own). Each render of the form carries a fresh idempotency key, so a form sent twice (a
//! reload of the answer) makes one key and shows the same text again, as the admin API's
//! `Idempotency-Key` does.

use askama::Template;
use axum::extract::{Form, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::page::{Chrome, PageError, render};
use super::session::{self, TenantSession};
use crate::ids::now_ms;
use crate::state::AppState;
use crate::storage::store::ApiKeyRecord;
use crate::tenancy::admin::audit::{self, AdminCtx};
use crate::tenancy::admin::keys as admin_keys;
use crate::tenancy::apikey;
use crate::tenancy::usage::calendar;

/// One key as the table shows it.
#[derive(Debug)]
pub struct KeyRow {
    id: String,
    label: String,
    display: String,
    scopes: String,
    created: String,
    expires: String,
    last_used: String,
    /// `active`, `revoked` or `expired`.
    state: &'static str,
    /// The key this browser signed in with.
    own: bool,
}

/// A scope checkbox of the create form.
#[derive(Debug)]
pub struct ScopeChoice {
    pub(super) name: &'static str,
    pub(super) what: &'static str,
    pub(super) checked: bool,
}

impl ScopeChoice {
    /// A checkbox for `name`, explained by `what`.
    pub fn new(name: &'static str, what: &'static str, checked: bool) -> Self {
        Self {
            name,
            what,
            checked,
        }
    }
}

/// An expiry choice of the create form.
#[derive(Debug)]
pub struct ExpiryChoice {
    value: String,
    label: String,
    selected: bool,
}

#[derive(Template)]
#[template(path = "dashboard/keys.html")]
struct KeysPage {
    chrome: Chrome,
    keys: Vec<KeyRow>,
    scopes: Vec<ScopeChoice>,
    expiries: Vec<ExpiryChoice>,
    /// The idempotency key of this render's create form.
    once: String,
    created: Option<Created>,
    problem: Option<String>,
    /// The relay has an identity provider: the page links the Members page.
    members: bool,
}

/// The lifetimes offered, in days (`None`: never), those the session's key allows.
fn expiries(signed: &TenantSession, now: i64) -> Vec<ExpiryChoice> {
    let mut out: Vec<ExpiryChoice> = [
        (Some(30), "in 30 days"),
        (Some(90), "in 90 days"),
        (Some(365), "in a year"),
        (None, "never"),
    ]
    .into_iter()
    .filter(|(days, _)| within_session_key(signed, now, *days).is_ok())
    .map(|(days, label)| ExpiryChoice {
        value: days.map_or_else(|| "never".to_owned(), |d| d.to_string()),
        label: label.to_owned(),
        selected: days == Some(90),
    })
    .collect();
    if let Some(until) = signed.key_expires_at_ms {
        // An hour's margin: the choice is checked again when the form comes back.
        let days = (until - now - 3_600_000) / 86_400_000;
        if days >= 1 && !out.iter().any(|e| e.value == days.to_string()) {
            out.push(ExpiryChoice {
                value: days.to_string(),
                label: format!("in {days} days (when this session's key expires)"),
                selected: out.is_empty(),
            });
        }
    }
    out
}

/// Refuses a lifetime that outlives the session's own key.
fn within_session_key(signed: &TenantSession, now: i64, days: Option<u32>) -> Result<(), String> {
    let Some(until) = signed.key_expires_at_ms else {
        return Ok(());
    };
    let ends = days.map(|d| now + i64::from(d) * 86_400_000);
    match ends {
        Some(ends) if ends <= until => Ok(()),
        _ => Err(format!(
            "this session's key expires on {}: a key it makes expires no later",
            day(until)
        )),
    }
}

/// A key just made: its text, shown this once.
#[derive(Debug)]
pub struct Created {
    text: String,
    label: String,
}

fn day(ms: i64) -> String {
    calendar::utc_string(ms)[..10].to_owned()
}

fn row(k: ApiKeyRecord, signed: &TenantSession, now: i64) -> KeyRow {
    let state = if k.revoked_at_ms.is_some() {
        "revoked"
    } else if !k.usable_at(now) {
        "expired"
    } else {
        "active"
    };
    KeyRow {
        own: signed.session.key_id.as_deref() == Some(k.id.as_str()),
        created: day(k.created_at_ms),
        expires: k.expires_at_ms.map(day).unwrap_or_else(|| "never".into()),
        last_used: k.last_used_at_ms.map(day).unwrap_or_else(|| "never".into()),
        id: k.id,
        label: k.label,
        display: k.display,
        scopes: k.scopes,
        state,
    }
}

pub(super) fn what(scope: &str) -> &'static str {
    match scope {
        apikey::CONNECT => "connect agents",
        apikey::USAGE_READ => "read usage, open this dashboard",
        apikey::APPROVE => "approve agents' tool calls (people's machines only)",
        apikey::KEYS_MANAGE => "manage keys",
        apikey::MESSAGES_READ => "read every ask and reply of the tenant (people only)",
        _ => "",
    }
}

/// The session, if it may manage keys.
pub(super) async fn manager(
    state: &AppState,
    headers: &HeaderMap,
) -> Result<TenantSession, PageError> {
    let signed = session::required(state, headers).await?;
    if !signed.may(apikey::KEYS_MANAGE) {
        return Err(PageError::Shown(
            StatusCode::FORBIDDEN,
            format!(
                "managing keys needs a sign-in with a key that holds `{}`",
                apikey::KEYS_MANAGE
            ),
        ));
    }
    Ok(signed)
}

async fn page_of(
    state: &AppState,
    signed: &TenantSession,
    created: Option<Created>,
    problem: Option<String>,
) -> Result<Response, PageError> {
    let now = now_ms();
    let mut keys: Vec<KeyRow> = state
        .store
        .list_api_keys(signed.tenant_id())
        .await?
        .into_iter()
        .map(|k| row(k, signed, now))
        .collect();
    // Newest first: the one just made is at the top.
    keys.reverse();
    let scopes = apikey::ALL_SCOPES
        .iter()
        .filter(|s| signed.may(s))
        .map(|s| ScopeChoice {
            name: s,
            what: what(s),
            checked: apikey::DEFAULT_SCOPES.contains(s),
        })
        .collect();
    let status = if problem.is_some() {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::OK
    };
    let mut response = render(&KeysPage {
        chrome: signed.chrome("keys"),
        keys,
        scopes,
        expiries: expiries(signed, now),
        once: session::new_secret(),
        created,
        problem,
        members: state.oidc.is_some(),
    });
    *response.status_mut() = status;
    Ok(response)
}

/// `GET /dashboard/keys`.
pub async fn page(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Response, PageError> {
    let signed = manager(&state, &headers).await?;
    page_of(&state, &signed, None, None).await
}

/// The create form. Scopes come as repeated `scope` fields, so the body is read as pairs.
#[derive(Debug)]
pub struct CreateForm(Vec<(String, String)>);

impl CreateForm {
    fn one(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
    fn all(&self, name: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .collect()
    }
}

pub(super) fn dashboard_ctx(signed: &TenantSession) -> AdminCtx {
    AdminCtx {
        actor: format!("dashboard:{}", signed.session.subject),
        request_id: uuid::Uuid::now_v7().to_string(),
        token: None,
    }
}

/// `POST /dashboard/keys`: makes a key and shows its text once.
pub async fn create(
    State(state): State<AppState>,
    headers: HeaderMap,
    Form(pairs): Form<Vec<(String, String)>>,
) -> Result<Response, PageError> {
    let form = CreateForm(pairs);
    session::same_origin(&headers)?;
    let signed = manager(&state, &headers).await?;
    signed.check_csrf(form.one("csrf").unwrap_or_default())?;
    let refuse = |why: String| page_of(&state, &signed, None, Some(why));
    let label = form.one("label").unwrap_or_default().trim().to_owned();
    let days = match form.one("expires_in_days").unwrap_or_default().trim() {
        "" | "never" => None,
        d => match d.parse::<u32>() {
            Ok(d) => Some(d),
            Err(_) => return refuse(format!("`{d}` is not a number of days")).await,
        },
    };
    if let Err(why) = within_session_key(&signed, now_ms(), days) {
        return refuse(why).await;
    }
    let once = form.one("once").unwrap_or_default().to_owned();
    if once.is_empty() {
        return refuse("the form is incomplete: reload the page".into()).await;
    }
    let scopes = form.all("scope");
    if scopes.is_empty() {
        return refuse("choose at least one scope".into()).await;
    }
    // No key gets more than the session that makes it.
    if let Some(beyond) = scopes.iter().find(|s| !signed.may(s)) {
        return Err(PageError::Shown(
            StatusCode::FORBIDDEN,
            format!("this session cannot give a key the scope `{beyond}`, which it does not hold"),
        ));
    }
    let request = admin_keys::KeyRequestBody {
        label,
        test: false,
        expires_in_days: days,
        expires_at_ms: None,
        scopes: Some(scopes),
    };
    let window_ms =
        i64::try_from(state.config.key_replay_window_secs.saturating_mul(1000)).unwrap_or(i64::MAX);
    let created = match admin_keys::create_key_once(
        state.store.as_ref(),
        &state.tokens,
        signed.tenant_id(),
        &request,
        &format!("dashboard:{once}"),
        window_ms,
    )
    .await
    {
        Ok(created) => created,
        Err(crate::tenancy::admin::AdminError::Invalid(why)) => return refuse(why).await,
        Err(e) => return Err(crate::error::AppError::from(e).into()),
    };
    if !created.replayed {
        audit::record(
            state.store.as_ref(),
            &dashboard_ctx(&signed),
            "key.create",
            &created.key.id,
            Some(signed.tenant_id()),
            None::<&()>,
            Some(&created.key),
        )
        .await;
        tracing::info!(tenant = %signed.tenant_id(), key = %created.key.id, "key created in the dashboard");
    }
    let problem = created.api_key.is_none().then(|| {
        "this form was sent before, and its key's text is shown only for a while after: make another key"
            .to_owned()
    });
    let shown = created.api_key.map(|text| Created {
        text,
        label: created.key.label.clone(),
    });
    page_of(&state, &signed, shown, problem).await
}

/// `POST /dashboard/keys/revoke` form.
#[derive(Debug, Deserialize)]
pub struct RevokeForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    key_id: String,
}

/// `POST /dashboard/keys/revoke`: revokes one of the tenant's keys. Another tenant's key id is
/// answered as an unknown one.
pub async fn revoke(
    State(state): State<AppState>,
    headers: HeaderMap,
    Form(form): Form<RevokeForm>,
) -> Result<Response, PageError> {
    session::same_origin(&headers)?;
    let signed = manager(&state, &headers).await?;
    signed.check_csrf(&form.csrf)?;
    let before = state
        .store
        .get_api_key(&form.key_id)
        .await?
        .filter(|k| k.tenant_id == signed.tenant_id())
        .ok_or_else(|| PageError::Shown(StatusCode::NOT_FOUND, "no such key".into()))?;
    // A session revokes its own key, or a key that may do no more than it: a key without
    // `approve` cannot lock out the owner's.
    let own = signed.session.key_id.as_deref() == Some(before.id.as_str());
    if let Some(beyond) = before.scopes.split(' ').find(|s| !signed.may(s))
        && !own
    {
        return Err(PageError::Shown(
            StatusCode::FORBIDDEN,
            format!("this session cannot revoke a key that may do more than it (`{beyond}`)"),
        ));
    }
    if before.revoked_at_ms.is_none() {
        admin_keys::revoke_key(state.store.as_ref(), Some(&state.hub), &before.id)
            .await
            .map_err(crate::error::AppError::from)?;
        let after = state.store.get_api_key(&before.id).await?;
        audit::record(
            state.store.as_ref(),
            &dashboard_ctx(&signed),
            "key.revoke",
            &before.id,
            Some(signed.tenant_id()),
            Some(&before),
            after.as_ref(),
        )
        .await;
        tracing::info!(tenant = %signed.tenant_id(), key = %before.id, "key revoked in the dashboard");
    }
    // Revoking the key this browser signed in with ends its session: the next page says so.
    Ok(Redirect::to("/dashboard/keys").into_response())
}
