//! `GET|POST /dashboard/signup`: self-serve sign-up for a hosted relay, off unless
//! `--signup` (`REPOWIRE_SIGNUP`). A visitor names a team; the relay creates a tenant on
//! `--signup-plan` (the free plan by default, so a new tenant starts within its limits), makes
//! its first key (every scope: it is the owner's), shows that key once with the exact
//! commands to connect a machine to this relay, and signs the browser in.
//!
//! Abuse controls: sign-ups per source address (`--signups-per-hour`, counted whether they
//! succeed or not, past it `429`), an optional invite code (`--signup-invite-code`; a wrong
//! one spends the source's failed sign-in budget, like a wrong key), and the plan's limits.
//! Everything is checked before anything is stored; a tenant whose first key could not be
//! made is removed again.

use std::net::IpAddr;
use std::num::NonZeroU32;

use askama::Template;
use axum::Form;
use axum::extract::{Extension, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use serde::Deserialize;

use super::page::{Chrome, PageError, render};
use super::{session, signin};
use crate::edge::httplimit::ClientAddr;
use crate::ids::now_ms;
use crate::state::AppState;
use crate::tenancy::admin::AdminError;
use crate::tenancy::admin::keys::create_key;
use crate::tenancy::admin::tenants::{NewTenant, create_tenant, delete_tenant, purge_tenant};
use crate::tenancy::apikey::{self, KeyMode};

/// Sign-ups per source address and hour.
#[derive(Debug)]
pub struct SignupLimiter(Option<DefaultKeyedRateLimiter<IpAddr>>);

impl SignupLimiter {
    /// `per_hour` sign-ups a source may try (0: no limit).
    pub fn new(per_hour: u32) -> Self {
        Self(
            NonZeroU32::new(per_hour)
                .map(|n| RateLimiter::keyed(Quota::per_hour(n).allow_burst(n))),
        )
    }

    fn check(&self, ip: IpAddr) -> Result<(), PageError> {
        let Some(limiter) = &self.0 else {
            return Ok(());
        };
        limiter.check_key(&ip).map_err(|not_until| {
            let wait = not_until.wait_time_from(governor::clock::Clock::now(
                &governor::clock::DefaultClock::default(),
            ));
            PageError::Limited(
                "too many sign-ups from this address; try again later".into(),
                wait,
            )
        })
    }
}

#[derive(Template)]
#[template(path = "dashboard/signup.html")]
struct SignupPage<'a> {
    chrome: Chrome,
    problem: Option<String>,
    invite: bool,
    team: &'a str,
    /// The identity provider's name, when sign-up may go through it.
    oidc: Option<&'a str>,
}

#[derive(Template)]
#[template(path = "dashboard/welcome.html")]
struct WelcomePage<'a> {
    chrome: Chrome,
    team: &'a str,
    plan: &'a str,
    key: &'a str,
    relay_url: &'a str,
}

/// The form.
#[derive(Debug, Default, Deserialize)]
pub struct SignupForm {
    #[serde(default)]
    team: String,
    #[serde(default)]
    invite_code: String,
}

fn off() -> PageError {
    PageError::Shown(
        StatusCode::NOT_FOUND,
        "this relay does not take sign-ups: ask its operator for an API key".into(),
    )
}

pub(super) fn form_page(
    state: &AppState,
    status: StatusCode,
    team: &str,
    problem: Option<String>,
) -> Response {
    let mut response = render(&SignupPage {
        chrome: Chrome::anonymous(),
        problem,
        invite: state.config.signup_invite_code.is_some(),
        team,
        oidc: state.oidc.as_ref().map(|idp| idp.settings().name.as_str()),
    });
    *response.status_mut() = status;
    response
}

/// `GET /dashboard/signup`.
pub async fn page(State(state): State<AppState>) -> Result<Response, PageError> {
    if !state.config.signup {
        return Err(off());
    }
    Ok(form_page(&state, StatusCode::OK, "", None))
}

/// This relay's address as the browser reached it (its `Origin`, which the same-origin rule
/// has checked against `Host`), for the commands shown.
fn relay_url(headers: &HeaderMap) -> String {
    if let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) {
        return origin.trim_end_matches('/').to_owned();
    }
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("RELAY_HOST");
    format!("https://{host}")
}

/// The source address of a request, as the rate limits count it.
pub(super) fn source_ip(
    state: &AppState,
    client: Option<Extension<ClientAddr>>,
    headers: &HeaderMap,
) -> Option<IpAddr> {
    client.map(|Extension(ClientAddr(addr))| {
        crate::edge::httplimit::source(addr.ip(), headers, &state.config.trusted_proxies)
    })
}

/// The checks a sign-up passes before anything is stored, however it goes on (this form, or
/// the identity provider): sign-ups on, the source's budgets, the invite code, a valid name.
/// `Ok(Err(page))`: refused with that page.
pub(super) fn admit(
    state: &AppState,
    source: Option<IpAddr>,
    team: &str,
    invite_code: &str,
) -> Result<Result<(), Response>, PageError> {
    if !state.config.signup {
        return Err(off());
    }
    if let Some(ip) = source {
        state.failed_auth.check(ip)?;
        state.signups.check(ip)?;
    }
    if let Some(code) = &state.config.signup_invite_code
        && !session::same_secret(invite_code.trim(), code)
    {
        if let Some(ip) = source {
            state.failed_auth.failed(ip)?;
        }
        return Ok(Err(form_page(
            state,
            StatusCode::FORBIDDEN,
            team,
            Some("that invite code is not this relay's".into()),
        )));
    }
    if let Err(AdminError::Invalid(why)) = crate::tenancy::admin::tenants::check_name(team) {
        return Ok(Err(form_page(
            state,
            StatusCode::BAD_REQUEST,
            team,
            Some(why),
        )));
    }
    Ok(Ok(()))
}

/// A new team: its tenant and the owner's first key (its text shown once).
pub(super) struct Team {
    /// The tenant.
    pub tenant: crate::storage::store::TenantRecord,
    /// Its first key.
    pub key: apikey::MintedKey,
}

/// Creates the team `team` on the sign-up plan with its first key (every scope). `Ok(Err(page))`:
/// refused with that page (the name is taken), nothing stored.
pub(super) async fn create_team(
    state: &AppState,
    team: &str,
) -> Result<Result<Team, Response>, PageError> {
    let new = NewTenant {
        name: team.to_owned(),
        display_name: None,
        plan: Some(state.config.signup_plan.clone()),
        overrides: Default::default(),
    };
    let store = state.store.as_ref();
    let tenant = match create_tenant(store, new).await {
        Ok(t) => t,
        Err(AdminError::Store(crate::storage::store::StoreError::Conflict(_))) => {
            return Ok(Err(form_page(
                state,
                StatusCode::CONFLICT,
                team,
                Some(format!("the name `{team}` is taken: choose another")),
            )));
        }
        Err(AdminError::Invalid(why)) => {
            return Ok(Err(form_page(
                state,
                StatusCode::BAD_REQUEST,
                team,
                Some(why),
            )));
        }
        Err(other) => return Err(crate::error::AppError::from(other).into()),
    };
    let scopes: Vec<String> = apikey::ALL_SCOPES.iter().map(|s| (*s).to_owned()).collect();
    match create_key(
        store,
        &tenant.id,
        KeyMode::Live,
        "owner",
        None,
        Some(&scopes),
    )
    .await
    {
        Ok(key) => Ok(Ok(Team { tenant, key })),
        Err(error) => {
            // No tenant without a key nobody could ever reach it with.
            let _ = delete_tenant(store, &tenant.id).await;
            let _ = purge_tenant(store, &tenant.id).await;
            Err(crate::error::AppError::from(error).into())
        }
    }
}

/// The page that shows a new team's first key, once, with the commands to connect a machine.
pub(super) fn welcome(team: &Team, relay_url: &str) -> Response {
    render(&WelcomePage {
        chrome: Chrome::anonymous(),
        team: &team.tenant.name,
        plan: &team.tenant.plan,
        key: &team.key.text,
        relay_url,
    })
}

/// `POST /dashboard/signup`.
pub async fn submit(
    State(state): State<AppState>,
    client: Option<Extension<ClientAddr>>,
    headers: HeaderMap,
    Form(form): Form<SignupForm>,
) -> Result<Response, PageError> {
    if !state.config.signup {
        return Err(off());
    }
    session::same_origin(&headers)?;
    let source = source_ip(&state, client, &headers);
    let team = form.team.trim();
    if let Err(page) = admit(&state, source, team, &form.invite_code)? {
        return Ok(page);
    }
    let made = match create_team(&state, team).await? {
        Ok(made) => made,
        Err(page) => return Ok(page),
    };
    tracing::info!(tenant = %made.tenant.id, plan = %made.tenant.plan, source = ?source, "tenant signed up");
    // The key is shown whatever happens next: it exists only here. Without a session the
    // page says to sign in with it.
    let mut response = welcome(&made, &relay_url(&headers));
    match signin::open_session(&state, &headers, &made.key.record, now_ms()).await {
        Ok(cookie) => {
            response.headers_mut().insert(header::SET_COOKIE, cookie);
        }
        Err(error) => {
            tracing::warn!(?error, tenant = %made.tenant.id, "signed up, but the browser could not be signed in");
        }
    }
    Ok(response)
}
