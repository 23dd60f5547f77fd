//! Signing a browser in and out.
//!
//! - `POST /v1/dashboard/links` (`Authorization: Bearer <API key>`, what `repowire dashboard`
//!   calls): a one-time sign-in link, usable once within [`LINK_TTL_MS`]. Nobody pastes a key
//!   into a browser by habit, and the key never reaches the browser.
//! - `GET /dashboard/signin[?link=…]`: the sign-in page. Following a link does not sign in by
//!   itself (a mail scanner or link preview fetching it would use it up): the page asks for a
//!   click, which posts the link's token.
//! - `POST /dashboard/signin`: with `link` or `api_key` (the fallback); opens a session.
//! - `POST /dashboard/logout`: ends it.
//!
//! Either way in, the key needs the `usage:read` scope, and the session gets the key's scopes.

use askama::Template;
use axum::extract::{Form, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::{Extension, Json};
use repowire_protocol::ErrorCode;
use repowire_protocol::http::DashboardLinkResponse;
use serde::Deserialize;

use super::page::{Chrome, PageError, render};
use super::session;
use crate::edge::api::usable_key;
use crate::edge::httplimit::{ClientAddr, source};
use crate::error::AppError;
use crate::ids::now_ms;
use crate::state::AppState;
use crate::storage::store::{ApiKeyRecord, DashboardLink, DashboardSession, TenantKey};
use crate::tenancy::apikey;
use crate::tenancy::token::bearer;

/// How long a sign-in link can be used, ms.
pub const LINK_TTL_MS: i64 = 120_000;

fn lacks_usage_read() -> AppError {
    AppError::new(
        StatusCode::FORBIDDEN,
        ErrorCode::Forbidden,
        format!(
            "this API key lacks the scope `{}`, which the dashboard needs",
            apikey::USAGE_READ
        ),
    )
}

/// The request's source address (the client, or what a trusted proxy says it is).
fn source_of(
    state: &AppState,
    client: Option<Extension<ClientAddr>>,
    headers: &HeaderMap,
) -> Option<std::net::IpAddr> {
    client.map(|Extension(ClientAddr(addr))| {
        source(addr.ip(), headers, &state.config.trusted_proxies)
    })
}

/// Refuses a source past its budget of failed sign-ins (as `POST /v1/token` does).
fn source_allowed(state: &AppState, source: Option<std::net::IpAddr>) -> Result<(), AppError> {
    match source {
        Some(ip) => state.failed_auth.check(ip),
        None => Ok(()),
    }
}

/// Counts a failed sign-in (a wrong key, an unknown link) against its source.
fn source_failed(state: &AppState, source: Option<std::net::IpAddr>) -> Result<(), AppError> {
    match source {
        Some(ip) => state.failed_auth.failed(ip),
        None => Ok(()),
    }
}

/// Counts a link that could not be used against its source, except from this machine: a
/// browser reloading a used link on a laptop would otherwise spend the budget the daemon's
/// token exchanges need from the same address. (A link's token is 256 random bits: the count
/// bounds the lookups a remote source makes, not the odds of a guess.)
fn link_failed(state: &AppState, source: Option<std::net::IpAddr>) -> Result<(), AppError> {
    match source {
        Some(ip) if !ip.is_loopback() => state.failed_auth.failed(ip),
        _ => Ok(()),
    }
}

/// A key's text checked for dashboard use, counting a refusal against its source address.
async fn dashboard_key(
    state: &AppState,
    source: Option<std::net::IpAddr>,
    text: &str,
    now: i64,
) -> Result<ApiKeyRecord, AppError> {
    source_allowed(state, source)?;
    let key = usable_key(state, text, now).await;
    if let Err(e) = &key
        && e.status == StatusCode::UNAUTHORIZED
    {
        source_failed(state, source)?;
    }
    let key = key?;
    if !key.has(apikey::USAGE_READ) {
        return Err(lacks_usage_read());
    }
    Ok(key)
}

/// Records that a key was used (the Keys page and the admin API show it). A failure here does
/// not refuse a valid key.
async fn record_use(state: &AppState, key_id: &str, now: i64) {
    if let Err(error) = state.store.key_used(key_id, now).await {
        tracing::warn!(%error, key = %key_id, "could not record the key's last use");
    }
}

/// `POST /v1/dashboard/links`.
pub async fn mint_link(
    State(state): State<AppState>,
    client: Option<Extension<ClientAddr>>,
    headers: HeaderMap,
) -> Result<Json<DashboardLinkResponse>, AppError> {
    let text = bearer(&headers)
        .map_err(|e| AppError::unauthorized(ErrorCode::Unauthorized, e.to_string()))?
        .ok_or_else(|| {
            AppError::unauthorized(
                ErrorCode::Unauthorized,
                "missing credential: send `Authorization: Bearer <API key>`",
            )
        })?
        .to_owned();
    let now = now_ms();
    let key = dashboard_key(&state, source_of(&state, client, &headers), &text, now).await?;
    let token = session::new_secret();
    let link = DashboardLink {
        token_hash: session::hash(&token),
        tenant_id: key.tenant_id.clone(),
        key_id: key.id.clone(),
        created_at_ms: now,
        expires_at_ms: now + LINK_TTL_MS,
    };
    state.store.create_dashboard_link(&link).await?;
    record_use(&state, &key.id, now).await;
    tracing::info!(tenant = %key.tenant_id, key = %key.id, "dashboard sign-in link minted");
    Ok(Json(DashboardLinkResponse {
        path: format!("/dashboard/signin?link={token}"),
        expires_at_ms: link.expires_at_ms,
    }))
}

/// What a usable link signs in to, shown before the click.
#[derive(Debug)]
pub struct LinkFor {
    /// The link's token (posted by the click).
    token: String,
    /// The tenant's name.
    tenant: String,
    /// The key's label.
    key_label: String,
}

#[derive(Template)]
#[template(path = "dashboard/signin.html")]
struct SignInPage {
    chrome: Chrome,
    link: Option<LinkFor>,
    problem: Option<String>,
    /// The identity provider's name, when members sign in through it.
    oidc: Option<String>,
}

fn signin_page(
    state: &AppState,
    status: StatusCode,
    link: Option<LinkFor>,
    problem: Option<String>,
) -> Response {
    let mut response = render(&SignInPage {
        chrome: Chrome::anonymous(),
        link,
        problem,
        oidc: state.oidc.as_ref().map(|idp| idp.settings().name.clone()),
    });
    *response.status_mut() = status;
    response
}

/// `GET /dashboard/signin` query.
#[derive(Debug, Deserialize)]
pub struct SignInQuery {
    /// A sign-in link's token.
    link: Option<String>,
}

/// `GET /dashboard/signin`.
pub async fn page(
    State(state): State<AppState>,
    client: Option<Extension<ClientAddr>>,
    headers: HeaderMap,
    Query(query): Query<SignInQuery>,
) -> Result<Response, PageError> {
    // A session that cannot be used (its tenant suspended) is no reason to refuse the page: a
    // browser may sign in with another key.
    let signed_in = matches!(session::current(&state, &headers).await, Ok(Some(_)));
    let Some(token) = query.link else {
        if signed_in {
            return Ok(Redirect::to("/dashboard").into_response());
        }
        return Ok(signin_page(&state, StatusCode::OK, None, None));
    };
    // Say what the link signs in to before it is used: a link someone else sent would sign in
    // to their tenant.
    // Unknown links count as failed sign-ins of their source: nobody guesses links for free.
    let source = source_of(&state, client, &headers);
    source_allowed(&state, source)?;
    let usable = if is_token(&token) {
        state
            .store
            .peek_dashboard_link(&session::hash(&token), now_ms())
            .await?
    } else {
        None
    };
    if usable.is_none() {
        link_failed(&state, source)?;
    }
    let found = match usable {
        Some(l) => {
            let tenant = state.store.find_tenant(TenantKey::Id(&l.tenant_id)).await?;
            let key = state
                .store
                .get_api_key(&l.key_id)
                .await?
                .filter(|k| k.usable_at(now_ms()) && !k.tenant_suspended);
            tenant.zip(key).map(|(t, k)| LinkFor {
                token,
                tenant: t.display_name.unwrap_or(t.name),
                key_label: k.label,
            })
        }
        None => None,
    };
    Ok(match found {
        Some(link) => signin_page(&state, StatusCode::OK, Some(link), None),
        None => signin_page(&state, StatusCode::GONE, None, Some(DEAD_LINK.into())),
    })
}

/// What a used or expired link gets.
const DEAD_LINK: &str = "This sign-in link was used already or has expired (a link works once, \
                         for two minutes): run `repowire dashboard` again.";

/// A token this relay could have made (64 hex digits); anything else is not looked up.
fn is_token(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// `POST /dashboard/signin` form.
#[derive(Debug, Deserialize)]
pub struct SignInForm {
    /// A sign-in link's token.
    #[serde(default)]
    link: Option<String>,
    /// An API key.
    #[serde(default)]
    api_key: Option<String>,
}

/// `POST /dashboard/signin`.
pub async fn submit(
    State(state): State<AppState>,
    client: Option<Extension<ClientAddr>>,
    headers: HeaderMap,
    Form(form): Form<SignInForm>,
) -> Result<Response, PageError> {
    session::same_origin(&headers)?;
    let now = now_ms();
    let source = source_of(&state, client, &headers);
    let key = match (form.link.filter(|l| !l.is_empty()), form.api_key) {
        (Some(link), _) => {
            source_allowed(&state, source)?;
            let taken = if is_token(&link) {
                state
                    .store
                    .take_dashboard_link(&session::hash(&link), now)
                    .await?
            } else {
                None
            };
            let refused = || {
                signin_page(
                    &state,
                    StatusCode::UNAUTHORIZED,
                    None,
                    Some(DEAD_LINK.into()),
                )
            };
            let Some(taken) = taken else {
                link_failed(&state, source)?;
                return Ok(refused());
            };
            match state.store.get_api_key(&taken.key_id).await? {
                Some(k)
                    if k.tenant_id == taken.tenant_id
                        && k.usable_at(now)
                        && !k.tenant_suspended
                        && k.has(apikey::USAGE_READ) =>
                {
                    k
                }
                _ => return Ok(refused()),
            }
        }
        (None, Some(text)) => match dashboard_key(&state, source, text.trim(), now).await {
            Ok(key) => key,
            Err(e) if e.status == StatusCode::TOO_MANY_REQUESTS => return Err(e.into()),
            Err(e) => return Ok(signin_page(&state, e.status, None, Some(e.message))),
        },
        (None, None) => {
            return Ok(signin_page(
                &state,
                StatusCode::BAD_REQUEST,
                None,
                Some("Give an API key, or open a link from `repowire dashboard`.".into()),
            ));
        }
    };
    let cookie = open_session(&state, &headers, &key, now).await?;
    let mut response = Redirect::to("/dashboard").into_response();
    response.headers_mut().insert(header::SET_COOKIE, cookie);
    Ok(response)
}

/// Opens a session of `key` for this browser (its previous one, if any, ends: one cookie, one
/// session) and returns the `Set-Cookie` value.
pub(super) async fn open_session(
    state: &AppState,
    headers: &HeaderMap,
    key: &ApiKeyRecord,
    now: i64,
) -> Result<HeaderValue, PageError> {
    if let Some(previous) = session::cookie(headers) {
        state
            .store
            .end_dashboard_session(&session::hash(previous), now)
            .await?;
    }
    record_use(state, &key.id, now).await;
    let secret = session::new_secret();
    let lifetime = state.config.dashboard_session_secs;
    let stored = DashboardSession {
        id_hash: session::hash(&secret),
        audience: "tenant".into(),
        tenant_id: Some(key.tenant_id.clone()),
        key_id: Some(key.id.clone()),
        member_id: None,
        subject: format!("key:{}", key.id),
        scopes: key.scopes.clone(),
        csrf: session::new_secret(),
        created_at_ms: now,
        expires_at_ms: now
            .saturating_add(i64::try_from(lifetime.saturating_mul(1000)).unwrap_or(i64::MAX)),
    };
    state.store.create_dashboard_session(&stored).await?;
    tracing::info!(tenant = %key.tenant_id, key = %key.id, "dashboard session opened");
    Ok(session::set_cookie(&secret, lifetime))
}

/// `POST /dashboard/logout` form.
#[derive(Debug, Deserialize)]
pub struct LogoutForm {
    /// The session's CSRF token.
    #[serde(default)]
    csrf: String,
}

/// `POST /dashboard/logout`.
pub async fn logout(
    State(state): State<AppState>,
    headers: HeaderMap,
    Form(form): Form<LogoutForm>,
) -> Result<Response, PageError> {
    session::same_origin(&headers)?;
    match session::current(&state, &headers).await {
        Ok(Some(signed)) => {
            signed.check_csrf(&form.csrf)?;
            state
                .store
                .end_dashboard_session(&signed.session.id_hash, now_ms())
                .await?;
            tracing::info!(tenant = %signed.tenant_id(), "dashboard session ended");
        }
        // A session that cannot be used (its tenant suspended) still ends here: its page
        // could not show a form, so there is no token to check, and ending it harms nobody.
        Err(PageError::Shown(StatusCode::FORBIDDEN, _)) => {
            if let Some(secret) = session::cookie(&headers) {
                state
                    .store
                    .end_dashboard_session(&session::hash(secret), now_ms())
                    .await?;
            }
        }
        Err(other) => return Err(other),
        // A session that opens no tenant page (a chooser) ends too; a cookie that names no
        // session changes nothing.
        Ok(None) => {
            if let Some(secret) = session::cookie(&headers) {
                state
                    .store
                    .end_dashboard_session(&session::hash(secret), now_ms())
                    .await?;
            }
        }
    }
    let mut response = Redirect::to("/dashboard/signin").into_response();
    response
        .headers_mut()
        .insert(header::SET_COOKIE, session::clear_cookie());
    Ok(response)
}
