//! Sign-in through the relay's OpenID Connect provider (`--oidc-issuer`): a tenant's members as
//! themselves, sign-up, and the service's staff on the operator's pages.
//!
//! - `POST /dashboard/oidc/start` (`purpose` = `signin`, `signup` with `team` and
//!   `invite_code`, or `operator`): a same-origin form post. Stores the attempt (its `state`'s
//!   hash, nonce, PKCE verifier) and sends the browser to the provider with a binding cookie,
//!   `repowire_oidc` (HttpOnly, Secure, SameSite=Lax, Path=/dashboard/oidc, ten minutes), by a
//!   page that moves on (the CSP's `form-action 'self'` also binds a form's redirects).
//! - `GET /dashboard/oidc/callback`: takes the attempt once (on any pod), checks the binding
//!   cookie (a callback in another browser — login CSRF, a code replayed elsewhere — is
//!   refused) and the RFC 9207 `iss`, exchanges the code and checks the ID token ([`idp`]),
//!   then opens the session [`open`] says.
//! - [`choose`]: a member of several tenants picks one.
//!
//! Lax, not Strict, for the binding cookie: the provider's redirect back is a cross-site
//! navigation, which a Strict cookie would not follow. The session cookie itself stays Strict,
//! so the callback answers with a page of this relay that moves on (a same-site navigation)
//! instead of a redirect.

pub mod choose;
pub mod idp;
pub mod open;

use askama::Template;
use axum::extract::{Extension, Form, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use serde::Deserialize;

use self::idp::{Idp, IdpError};
use super::page::{Chrome, PageError, render};
use super::{session, signup};
use crate::edge::httplimit::ClientAddr;
use crate::ids::now_ms;
use crate::state::AppState;
use crate::storage::store::OidcAttempt;

/// The binding cookie.
const BINDING: session::CookieKind = session::CookieKind {
    name: "repowire_oidc",
    path: "/dashboard/oidc",
};
/// How long a sign-in through the provider may take, ms.
const ATTEMPT_TTL_MS: i64 = 600_000;

/// The relay's provider, or the page saying there is none.
pub(super) fn provider(state: &AppState) -> Result<&Idp, PageError> {
    state.oidc.as_deref().ok_or_else(|| {
        PageError::Shown(
            StatusCode::NOT_FOUND,
            "this relay has no identity provider: sign in with a link or a key".into(),
        )
    })
}

/// What a failure shows.
pub(super) fn failed(status: StatusCode, why: impl Into<String>) -> PageError {
    PageError::Shown(status, why.into())
}

impl From<IdpError> for PageError {
    fn from(e: IdpError) -> Self {
        match e {
            IdpError::Unavailable(_) => failed(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("{e}; try again in a minute"),
            ),
            IdpError::Refused(_) => failed(StatusCode::UNAUTHORIZED, e.to_string()),
        }
    }
}

/// `POST /dashboard/oidc/start` form.
#[derive(Debug, Default, Deserialize)]
pub struct StartForm {
    #[serde(default)]
    purpose: String,
    #[serde(default)]
    team: String,
    #[serde(default)]
    invite_code: String,
}

/// `POST /dashboard/oidc/start`.
pub async fn start(
    State(state): State<AppState>,
    client: Option<Extension<ClientAddr>>,
    headers: HeaderMap,
    Form(form): Form<StartForm>,
) -> Result<Response, PageError> {
    let idp = provider(&state)?;
    session::same_origin(&headers)?;
    let source = signup::source_ip(&state, client, &headers);
    if let Some(ip) = source {
        // Each start stores a row and calls the provider: bounded per source like a
        // credential's requests.
        state.http_limit.check(&format!("oidc-start:{ip}"))?;
    }
    let team = form.team.trim();
    let signup_team = match form.purpose.as_str() {
        "signin" => None,
        "signup" => {
            if let Err(page) = signup::admit(&state, source, team, &form.invite_code)? {
                return Ok(page);
            }
            Some(team.to_owned())
        }
        "operator" if !idp.settings().staff.is_empty() => None,
        "operator" => {
            return Err(failed(
                StatusCode::NOT_FOUND,
                "this relay names no staff who sign in through its identity provider",
            ));
        }
        other => {
            return Err(failed(
                StatusCode::BAD_REQUEST,
                format!("`{other}` is not a kind of sign-in"),
            ));
        }
    };
    let begun = idp.begin().await?;
    let binding = session::new_secret();
    let now = now_ms();
    state
        .store
        .create_oidc_attempt(&OidcAttempt {
            state_hash: session::hash(&begun.state),
            browser_hash: session::hash(&binding),
            purpose: form.purpose.clone(),
            nonce: begun.nonce,
            pkce_verifier: begun.pkce_verifier,
            signup_team,
            created_at_ms: now,
            expires_at_ms: now + ATTEMPT_TTL_MS,
        })
        .await?;
    let cookie = format!(
        "{}={binding}; Path={}; Max-Age={}; HttpOnly; Secure; SameSite=Lax",
        BINDING.name,
        BINDING.path,
        ATTEMPT_TTL_MS / 1000
    );
    // A page that moves on, not a redirect: the dashboard's CSP (`form-action 'self'`) also
    // governs where a form's answer redirects to, and the provider is another origin.
    let mut response = render(&GoPage {
        chrome: Chrome::anonymous(),
        url: &begun.url,
        name: &idp.settings().name,
    });
    response.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_str(&cookie)
            .map_err(|_| failed(StatusCode::INTERNAL_SERVER_ERROR, "bad cookie"))?,
    );
    Ok(response)
}

/// The page `start` answers with: on to the provider.
#[derive(Template)]
#[template(path = "dashboard/oidc_go.html")]
struct GoPage<'a> {
    chrome: Chrome,
    url: &'a str,
    name: &'a str,
}

/// `GET /dashboard/oidc/callback` query.
#[derive(Debug, Deserialize)]
pub struct CallbackQuery {
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    state: Option<String>,
    #[serde(default)]
    iss: Option<String>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    error_description: Option<String>,
}

/// The page the callback answers with once a session is open: it moves on to `next` by a
/// same-site navigation, which carries the new Strict cookie (a redirect would still count as
/// the provider's cross-site one).
#[derive(Template)]
#[template(path = "dashboard/oidc_done.html")]
pub(super) struct DonePage<'a> {
    pub chrome: Chrome,
    pub next: &'a str,
    pub who: &'a str,
}

/// `GET /dashboard/oidc/callback`.
pub async fn callback(
    State(state): State<AppState>,
    client: Option<Extension<ClientAddr>>,
    headers: HeaderMap,
    Query(query): Query<CallbackQuery>,
) -> Result<Response, PageError> {
    let idp = provider(&state)?;
    let source = signup::source_ip(&state, client, &headers);
    if let Some(ip) = source {
        state.failed_auth.check(ip)?;
    }
    // Refusals here are not counted against the source's failed sign-ins: any page on the web
    // can send a browser to this URL, and the state's 128 random bits are what stop guessing.
    let refuse = |status, why: &str| -> Result<Response, PageError> { Err(failed(status, why)) };
    let now = now_ms();
    let Some(state_param) = query.state.as_deref().filter(|s| !s.is_empty()) else {
        return refuse(
            StatusCode::BAD_REQUEST,
            "this sign-in has no state: start it again",
        );
    };
    let Some(attempt) = state
        .store
        .take_oidc_attempt(&session::hash(state_param), now)
        .await?
    else {
        return refuse(
            StatusCode::BAD_REQUEST,
            "this sign-in was used already or has expired (it works once, for ten minutes): start it again",
        );
    };
    let bound = BINDING
        .read(&headers)
        .is_some_and(|b| session::same_secret(&session::hash(b), &attempt.browser_hash));
    if !bound {
        return refuse(
            StatusCode::FORBIDDEN,
            "this sign-in was started in another browser: start it again here",
        );
    }
    if let Some(error) = &query.error {
        let why = query.error_description.as_deref().unwrap_or(error.as_str());
        return Err(failed(
            StatusCode::UNAUTHORIZED,
            format!("the identity provider did not sign you in: {why}"),
        ));
    }
    if query
        .iss
        .as_deref()
        .is_some_and(|iss| iss != idp.settings().issuer)
    {
        return refuse(
            StatusCode::FORBIDDEN,
            "this answer comes from another identity provider than this relay's",
        );
    }
    let Some(code) = query.code.as_deref().filter(|c| !c.is_empty()) else {
        return refuse(
            StatusCode::BAD_REQUEST,
            "the identity provider sent no code",
        );
    };
    let identity = idp
        .finish(code, &attempt.nonce, &attempt.pkce_verifier)
        .await?;
    let mut response = match attempt.purpose.as_str() {
        "signup" => {
            open::signed_up(&state, &identity, attempt.signup_team.as_deref(), &headers).await?
        }
        "operator" => open::staff(&state, &identity, &headers).await?,
        _ => open::member(&state, &identity, &headers).await?,
    };
    response
        .headers_mut()
        .append(header::SET_COOKIE, BINDING.clear_lax());
    Ok(response)
}
