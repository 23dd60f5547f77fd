//! What a sign-in through the provider opens, by its purpose: a member's session (or, for a
//! member of several tenants, a chooser), a new team with its owner, or a staff member's
//! operator session.

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;

use super::idp::Identity;
use super::{DonePage, failed};
use crate::edge::dashboard::operator::OPERATOR_COOKIE;
use crate::edge::dashboard::page::{Chrome, PageError, render};
use crate::edge::dashboard::{session, signup};
use crate::ids::now_ms;
use crate::state::AppState;
use crate::storage::store::{DashboardSession, MemberRecord};
use crate::tenancy::admin::tokens::{READ, WRITE};
use crate::tenancy::apikey;

/// How long a chooser session lasts, seconds.
const CHOOSER_SECS: u64 = 600;

fn expiry(now: i64, secs: u64) -> i64 {
    now.saturating_add(i64::try_from(secs.saturating_mul(1000)).unwrap_or(i64::MAX))
}

/// Stores `stored` as the browser's session in `cookie` (ending the one it had) and returns
/// the `Set-Cookie` value.
async fn store_session(
    state: &AppState,
    headers: &HeaderMap,
    cookie: session::CookieKind,
    mut stored: DashboardSession,
    secs: u64,
) -> Result<HeaderValue, PageError> {
    let now = stored.created_at_ms;
    if let Some(previous) = cookie.read(headers) {
        state
            .store
            .end_dashboard_session(&session::hash(previous), now)
            .await?;
    }
    let secret = session::new_secret();
    stored.id_hash = session::hash(&secret);
    state.store.create_dashboard_session(&stored).await?;
    Ok(cookie.set(&secret, secs))
}

/// Opens a session of `member` (a tenant's pages, with the member's scopes).
pub(in crate::edge::dashboard) async fn member_session(
    state: &AppState,
    headers: &HeaderMap,
    member: &MemberRecord,
    who: &str,
) -> Result<HeaderValue, PageError> {
    let now = now_ms();
    let lifetime = state.config.dashboard_session_secs;
    let stored = DashboardSession {
        id_hash: String::new(),
        audience: "tenant".into(),
        tenant_id: Some(member.tenant_id.clone()),
        key_id: None,
        member_id: Some(member.id.clone()),
        subject: format!("oidc:{who}"),
        scopes: member.scopes.clone(),
        csrf: session::new_secret(),
        created_at_ms: now,
        expires_at_ms: expiry(now, lifetime),
    };
    let cookie = store_session(state, headers, session::TENANT_COOKIE, stored, lifetime).await?;
    tracing::info!(tenant = %member.tenant_id, member = %member.id, "dashboard session opened through the identity provider");
    Ok(cookie)
}

fn done(cookie: HeaderValue, next: &str, who: &str) -> Response {
    let mut response = render(&DonePage {
        chrome: Chrome::anonymous(),
        next,
        who,
    });
    response.headers_mut().insert(header::SET_COOKIE, cookie);
    response
}

/// A member signing in: to the one tenant, or to the chooser of several.
pub(super) async fn member(
    state: &AppState,
    identity: &Identity,
    headers: &HeaderMap,
) -> Result<Response, PageError> {
    let now = now_ms();
    let who = identity.display();
    let members = state
        .store
        .sign_in_member(
            &identity.issuer,
            &identity.subject,
            identity.verified_email.as_deref(),
            now,
        )
        .await?;
    match members.as_slice() {
        [] => {
            let unverified = if identity.verified_email.is_none() {
                " Your identity provider has not verified an email of yours, so no invitation \
                 could be claimed."
            } else {
                ""
            };
            Err(failed(
                StatusCode::FORBIDDEN,
                format!(
                    "No team on this relay has {who} as a member. Ask a team's owner to invite \
                     you on its Members page, or start a team.{unverified}"
                ),
            ))
        }
        [one] => {
            let cookie = member_session(state, headers, one, &who).await?;
            Ok(done(cookie, "/dashboard", &who))
        }
        several => {
            let ids: Vec<&str> = several.iter().map(|m| m.id.as_str()).collect();
            let stored = DashboardSession {
                id_hash: String::new(),
                audience: "chooser".into(),
                tenant_id: None,
                key_id: None,
                member_id: None,
                subject: format!("oidc:{who}"),
                scopes: ids.join(" "),
                csrf: session::new_secret(),
                created_at_ms: now,
                expires_at_ms: expiry(now, CHOOSER_SECS),
            };
            let cookie =
                store_session(state, headers, session::TENANT_COOKIE, stored, CHOOSER_SECS).await?;
            Ok(done(cookie, "/dashboard/choose", &who))
        }
    }
}

/// This relay's public address, from the callback URL it was configured with.
fn relay_url(state: &AppState) -> String {
    state
        .oidc
        .as_ref()
        .map(|idp| {
            idp.settings()
                .redirect_url
                .trim_end_matches("/dashboard/oidc/callback")
                .to_owned()
        })
        .unwrap_or_default()
}

/// A sign-up: the team, its owner (this identity) and its first key, shown once.
pub(super) async fn signed_up(
    state: &AppState,
    identity: &Identity,
    team: Option<&str>,
    headers: &HeaderMap,
) -> Result<Response, PageError> {
    if !state.config.signup {
        return Err(failed(
            StatusCode::NOT_FOUND,
            "this relay does not take sign-ups: ask its operator for an API key",
        ));
    }
    let Some(team) = team else {
        return Err(failed(
            StatusCode::BAD_REQUEST,
            "this sign-up names no team",
        ));
    };
    let made = match signup::create_team(state, team).await? {
        Ok(made) => made,
        Err(page) => return Ok(page),
    };
    let now = now_ms();
    let owner = MemberRecord {
        id: format!("mem-{}", uuid::Uuid::now_v7().simple()),
        tenant_id: made.tenant.id.clone(),
        issuer: Some(identity.issuer.clone()),
        subject: Some(identity.subject.clone()),
        email: identity.verified_email.clone(),
        scopes: apikey::ALL_SCOPES.join(" "),
        owner: true,
        invited_by: None,
        created_at_ms: now,
        joined_at_ms: Some(now),
        last_seen_at_ms: Some(now),
        removed_at_ms: None,
    };
    let who = identity.display();
    // The key is shown whatever happens next: it exists only here.
    let mut response = signup::welcome(&made, &relay_url(state));
    let opened = match state.store.add_member(&owner).await {
        Ok(true) => member_session(state, headers, &owner, &who).await.map(Some),
        Ok(false) => Ok(None),
        Err(e) => Err(e.into()),
    };
    match opened {
        Ok(Some(cookie)) => {
            response.headers_mut().insert(header::SET_COOKIE, cookie);
        }
        Ok(None) | Err(_) => {
            tracing::warn!(tenant = %made.tenant.id, "signed up, but its owner could not be recorded or signed in");
        }
    }
    tracing::info!(tenant = %made.tenant.id, plan = %made.tenant.plan, "tenant signed up through the identity provider");
    Ok(response)
}

/// The service's staff: an operator session, if the provider verified an email the relay
/// names (`--operator-staff`).
pub(super) async fn staff(
    state: &AppState,
    identity: &Identity,
    headers: &HeaderMap,
) -> Result<Response, PageError> {
    let entry = identity.verified_email.as_deref().and_then(|email| {
        state
            .oidc
            .as_ref()?
            .settings()
            .staff
            .iter()
            .find(|(e, _)| e == email)
            .cloned()
    });
    let Some((email, writes)) = entry else {
        return Err(failed(
            StatusCode::FORBIDDEN,
            format!(
                "{} is not on this relay's staff (--operator-staff), or the identity provider has \
                 not verified that email",
                identity.display()
            ),
        ));
    };
    let now = now_ms();
    let lifetime = state.config.dashboard_session_secs;
    let scopes = if writes {
        format!("{READ} {WRITE}")
    } else {
        READ.to_owned()
    };
    let stored = DashboardSession {
        id_hash: String::new(),
        audience: "operator".into(),
        tenant_id: None,
        key_id: Some(format!("{STAFF}{email}")),
        member_id: None,
        subject: format!("{STAFF}{email}"),
        scopes,
        csrf: session::new_secret(),
        created_at_ms: now,
        expires_at_ms: expiry(now, lifetime),
    };
    let cookie = store_session(state, headers, OPERATOR_COOKIE, stored, lifetime).await?;
    tracing::info!(staff = %email, "operator dashboard session opened through the identity provider");
    Ok(done(cookie, "/dashboard/operator", &email))
}

/// What an operator session of a staff member records as its credential: `staff:<email>`.
pub const STAFF: &str = "staff:";
