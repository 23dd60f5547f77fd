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
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::{Extension, Json};
use repowire_protocol::ErrorCode;
use repowire_protocol::http::DashboardLinkResponse;
use serde::Deserialize;

use super::page::{Chrome, PageError, render};
use super::session::{self, TenantSession};
use crate::edge::api::usable_key;
use crate::edge::httplimit::{ClientAddr, source};
use crate::error::AppError;
use crate::ids::now_ms;
use crate::state::AppState;
use crate::storage::store::{ApiKeyRecord, DashboardLink, DashboardSession};
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

/// A key's text checked for dashboard use, counting a refusal against its source address.
async fn dashboard_key(
    state: &AppState,
    client: Option<Extension<ClientAddr>>,
    headers: &HeaderMap,
    text: &str,
    now: i64,
) -> Result<ApiKeyRecord, AppError> {
    let source = client.map(|Extension(ClientAddr(addr))| {
        source(addr.ip(), headers, &state.config.trusted_proxies)
    });
    if let Some(ip) = source {
        state.failed_auth.check(ip)?;
    }
    let key = usable_key(state, text, now).await;
    if let (Err(e), Some(ip)) = (&key, source)
        && e.status == StatusCode::UNAUTHORIZED
    {
        state.failed_auth.failed(ip)?;
    }
    let key = key?;
    if !key.has(apikey::USAGE_READ) {
        return Err(lacks_usage_read());
    }
    Ok(key)
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
    let key = dashboard_key(&state, client, &headers, &text, now).await?;
    let token = session::new_secret();
    let link = DashboardLink {
        token_hash: session::hash(&token),
        tenant_id: key.tenant_id.clone(),
        key_id: key.id.clone(),
        created_at_ms: now,
        expires_at_ms: now + LINK_TTL_MS,
    };
    state.store.create_dashboard_link(&link).await?;
    tracing::info!(tenant = %key.tenant_id, key = %key.id, "dashboard sign-in link minted");
    Ok(Json(DashboardLinkResponse {
        path: format!("/dashboard/signin?link={token}"),
        expires_at_ms: link.expires_at_ms,
    }))
}

#[derive(Template)]
#[template(path = "dashboard/signin.html")]
struct SignInPage {
    chrome: Chrome,
    link_token: Option<String>,
    problem: Option<String>,
}

fn signin_page(
    status: StatusCode,
    link_token: Option<String>,
    problem: Option<String>,
) -> Response {
    let mut response = render(&SignInPage {
        chrome: Chrome::anonymous(),
        link_token,
        problem,
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
    headers: HeaderMap,
    Query(query): Query<SignInQuery>,
) -> Result<Response, PageError> {
    let link = query.link.filter(|l| is_token(l));
    if link.is_none() && session::current(&state, &headers).await?.is_some() {
        return Ok(Redirect::to("/dashboard").into_response());
    }
    Ok(signin_page(StatusCode::OK, link, None))
}

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
    let key = match (form.link.filter(|l| !l.is_empty()), form.api_key) {
        (Some(link), _) => {
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
                    StatusCode::UNAUTHORIZED,
                    None,
                    Some(
                        "This sign-in link was used already or has expired (a link works once, \
                         for two minutes): run `repowire dashboard` again."
                            .into(),
                    ),
                )
            };
            let Some(taken) = taken else {
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
        (None, Some(text)) => match dashboard_key(&state, client, &headers, text.trim(), now).await
        {
            Ok(key) => key,
            Err(e) if e.status == StatusCode::TOO_MANY_REQUESTS => return Err(e.into()),
            Err(e) => return Ok(signin_page(e.status, None, Some(e.message))),
        },
        (None, None) => {
            return Ok(signin_page(
                StatusCode::BAD_REQUEST,
                None,
                Some("Give an API key, or open a link from `repowire dashboard`.".into()),
            ));
        }
    };
    let secret = session::new_secret();
    let lifetime = state.config.dashboard_session_secs;
    let stored = DashboardSession {
        id_hash: session::hash(&secret),
        audience: "tenant".into(),
        tenant_id: Some(key.tenant_id.clone()),
        key_id: Some(key.id.clone()),
        subject: format!("key:{}", key.id),
        scopes: key.scopes.clone(),
        csrf: session::new_secret(),
        created_at_ms: now,
        expires_at_ms: now
            .saturating_add(i64::try_from(lifetime.saturating_mul(1000)).unwrap_or(i64::MAX)),
    };
    state.store.create_dashboard_session(&stored).await?;
    tracing::info!(tenant = %key.tenant_id, key = %key.id, "dashboard session opened");
    let mut response = Redirect::to("/dashboard").into_response();
    response
        .headers_mut()
        .insert(header::SET_COOKIE, session::set_cookie(&secret, lifetime));
    Ok(response)
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
    let signed: Option<TenantSession> = session::current(&state, &headers).await?;
    if let Some(signed) = &signed {
        signed.check_csrf(&form.csrf)?;
        state
            .store
            .end_dashboard_session(&signed.session.id_hash, now_ms())
            .await?;
        tracing::info!(tenant = %signed.tenant_id(), "dashboard session ended");
    }
    let mut response = Redirect::to("/dashboard/signin").into_response();
    response
        .headers_mut()
        .insert(header::SET_COOKIE, session::clear_cookie());
    Ok(response)
}
