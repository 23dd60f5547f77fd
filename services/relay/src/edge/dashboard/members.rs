//! `/dashboard/members`: the people of a tenant who sign in as themselves, through the relay's
//! OpenID Connect provider (`keys:manage`, like the Keys page; only on a relay with a provider).
//!
//! A member is invited by email with scopes (at most the inviter's own); the first sign-in
//! whose provider has verified that email claims the invitation, and from then on the member
//! is that identity (issuer and subject), whatever its email becomes. Removing a member ends
//! its sessions, its open invitations, and its person's connection at once, on every pod;
//! nobody removes a member who may do more than they may, nor themselves. Both are audited.

use askama::Template;
use axum::extract::{Form, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use repowire_protocol::CloseCode;

use super::keys::{ScopeChoice, dashboard_ctx, manager, what};
use super::oidc::provider;
use super::page::{Chrome, PageError, render};
use super::session::{self, TenantSession};
use crate::ids::now_ms;
use crate::state::AppState;
use crate::storage::store::MemberRecord;
use crate::tenancy::admin::audit;
use crate::tenancy::apikey;
use crate::tenancy::usage::calendar;

/// Longest email, bytes (RFC 5321's path limit).
const MAX_EMAIL: usize = 254;

/// A member as the table shows it.
#[derive(Debug)]
pub struct MemberRow {
    id: String,
    /// This session may remove it.
    removable: bool,
    email: String,
    scopes: String,
    state: String,
    owner: bool,
    you: bool,
}

#[derive(Template)]
#[template(path = "dashboard/members.html")]
struct MembersPage {
    chrome: Chrome,
    provider: String,
    members: Vec<MemberRow>,
    scopes: Vec<ScopeChoice>,
    problem: Option<String>,
}

fn row(m: MemberRecord, signed: &TenantSession) -> MemberRow {
    let state = match (&m.issuer, m.last_seen_at_ms) {
        (None, _) => format!("invited {}", calendar::utc_string(m.created_at_ms)),
        (Some(_), Some(seen)) => format!("signed in {}", calendar::utc_string(seen)),
        (Some(_), None) => "joined".to_owned(),
    };
    MemberRow {
        removable: signed.session.member_id.as_deref() != Some(m.id.as_str())
            && m.scopes.split(' ').all(|s| signed.may(s)),
        you: signed.session.member_id.as_deref() == Some(m.id.as_str()),
        email: m.email.unwrap_or_else(|| m.subject.unwrap_or_default()),
        scopes: m.scopes,
        state,
        owner: m.owner,
        id: m.id,
    }
}

async fn page_of(
    state: &AppState,
    signed: &TenantSession,
    status: StatusCode,
    problem: Option<String>,
) -> Result<Response, PageError> {
    let idp = provider(state)?;
    let members = state
        .store
        .list_members(signed.tenant_id())
        .await?
        .into_iter()
        .map(|m| row(m, signed))
        .collect();
    let scopes = apikey::ALL_SCOPES
        .iter()
        .filter(|s| signed.may(s))
        .map(|s| ScopeChoice::new(s, what(s), apikey::DEFAULT_SCOPES.contains(s)))
        .collect();
    let mut response = render(&MembersPage {
        chrome: signed.chrome("keys"),
        provider: idp.settings().name.clone(),
        members,
        scopes,
        problem,
    });
    *response.status_mut() = status;
    Ok(response)
}

/// `GET /dashboard/members`.
pub async fn page(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Response, PageError> {
    let signed = manager(&state, &headers).await?;
    page_of(&state, &signed, StatusCode::OK, None).await
}

/// Checks an email as typed: one `@`, no spaces, not too long. Lower-cased.
fn email_of(text: &str) -> Result<String, String> {
    let email = text.trim().to_lowercase();
    let valid = email.len() <= MAX_EMAIL
        && email.split('@').count() == 2
        && email.split('@').all(|part| !part.is_empty())
        && !email.chars().any(|c| c.is_whitespace() || c.is_control());
    if valid {
        Ok(email)
    } else {
        Err(format!("`{}` is not an email address", text.trim()))
    }
}

/// `POST /dashboard/members`: invites an email.
pub async fn invite(
    State(state): State<AppState>,
    headers: HeaderMap,
    Form(pairs): Form<Vec<(String, String)>>,
) -> Result<Response, PageError> {
    session::same_origin(&headers)?;
    let signed = manager(&state, &headers).await?;
    provider(&state)?;
    let one = |name: &str| {
        pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .unwrap_or_default()
    };
    signed.check_csrf(one("csrf"))?;
    let email = match email_of(one("email")) {
        Ok(email) => email,
        Err(why) => return page_of(&state, &signed, StatusCode::BAD_REQUEST, Some(why)).await,
    };
    let scopes: Vec<&str> = pairs
        .iter()
        .filter(|(k, _)| k == "scope")
        .map(|(_, v)| v.as_str())
        .collect();
    if !scopes.contains(&apikey::USAGE_READ) {
        let why = format!(
            "a member needs `{}` to open the dashboard",
            apikey::USAGE_READ
        );
        return page_of(&state, &signed, StatusCode::BAD_REQUEST, Some(why)).await;
    }
    // Nobody is given more than the person who invites them holds.
    if let Some(beyond) = scopes
        .iter()
        .find(|s| !apikey::ALL_SCOPES.contains(s) || !signed.may(s))
    {
        return Err(PageError::Shown(
            StatusCode::FORBIDDEN,
            format!(
                "this session cannot give a member the scope `{beyond}`, which it does not hold"
            ),
        ));
    }
    // A joined member's scopes are not changed by inviting them again (the invitation would
    // wait, unclaimed, and bring them back after a removal): remove and invite instead.
    let joined = state
        .store
        .list_members(signed.tenant_id())
        .await?
        .into_iter()
        .any(|m| m.issuer.is_some() && m.email.as_deref() == Some(email.as_str()));
    if joined {
        let why =
            format!("{email} is a member already: remove them first to change what they may do");
        return page_of(&state, &signed, StatusCode::CONFLICT, Some(why)).await;
    }
    let now = now_ms();
    let member = MemberRecord {
        id: format!("mem-{}", uuid::Uuid::now_v7().simple()),
        tenant_id: signed.tenant_id().to_owned(),
        issuer: None,
        subject: None,
        email: Some(email.clone()),
        scopes: scopes.join(" "),
        owner: false,
        invited_by: Some(session_actor(&signed)),
        created_at_ms: now,
        joined_at_ms: None,
        last_seen_at_ms: None,
        removed_at_ms: None,
    };
    if !state.store.add_member(&member).await? {
        let why = format!("{email} is invited already");
        return page_of(&state, &signed, StatusCode::CONFLICT, Some(why)).await;
    }
    audit::record(
        state.store.as_ref(),
        &dashboard_ctx(&signed),
        "member.invite",
        &member.id,
        Some(signed.tenant_id()),
        None::<&()>,
        Some(&serde_json::json!({ "email": email, "scopes": member.scopes })),
    )
    .await;
    tracing::info!(tenant = %signed.tenant_id(), member = %member.id, "member invited in the dashboard");
    Ok(Redirect::to("/dashboard/members").into_response())
}

/// Who a session is, as an inviter.
fn session_actor(signed: &TenantSession) -> String {
    match (&signed.session.key_id, &signed.session.member_id) {
        (Some(key), _) => format!("key:{key}"),
        (None, Some(member)) => format!("member:{member}"),
        (None, None) => signed.session.subject.clone(),
    }
}

/// `POST /dashboard/members/remove` form.
#[derive(Debug, Default, serde::Deserialize)]
pub struct RemoveForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    member_id: String,
}

/// `POST /dashboard/members/remove`.
pub async fn remove(
    State(state): State<AppState>,
    headers: HeaderMap,
    Form(form): Form<RemoveForm>,
) -> Result<Response, PageError> {
    session::same_origin(&headers)?;
    let signed = manager(&state, &headers).await?;
    provider(&state)?;
    signed.check_csrf(&form.csrf)?;
    let before = state.store.get_member(&form.member_id).await?;
    // Another tenant's member is not found here, whatever its id.
    let Some(before) = before.filter(|m| m.tenant_id == signed.tenant_id()) else {
        return page_of(
            &state,
            &signed,
            StatusCode::NOT_FOUND,
            Some("no such member".into()),
        )
        .await;
    };
    // As with keys: nobody removes a member who may do more than they may (so only someone
    // with every scope removes the owner), and nobody removes themselves (sign out instead).
    if signed.session.member_id.as_deref() == Some(before.id.as_str()) {
        return Err(PageError::Shown(
            StatusCode::FORBIDDEN,
            "you cannot remove yourself: sign out, or ask another member".into(),
        ));
    }
    if let Some(beyond) = before.scopes.split(' ').find(|s| !signed.may(s)) {
        return Err(PageError::Shown(
            StatusCode::FORBIDDEN,
            format!("this session cannot remove a member who may do more than it (`{beyond}`)"),
        ));
    }
    if !state
        .store
        .remove_member(signed.tenant_id(), &before.id, now_ms())
        .await?
    {
        return page_of(
            &state,
            &signed,
            StatusCode::NOT_FOUND,
            Some("that member was removed already".into()),
        )
        .await;
    }
    // Its person's connection closes here and on every other pod.
    let credential = session::member_credential(&before.id);
    state
        .hub
        .kick_key(&credential, CloseCode::KEY_REVOKED, "member removed");
    state.cluster.revoked(&credential).await;
    audit::record(
        state.store.as_ref(),
        &dashboard_ctx(&signed),
        "member.remove",
        &before.id,
        Some(signed.tenant_id()),
        Some(&serde_json::json!({ "email": before.email, "scopes": before.scopes })),
        None::<&()>,
    )
    .await;
    tracing::info!(tenant = %signed.tenant_id(), member = %before.id, "member removed in the dashboard");
    Ok(Redirect::to("/dashboard/members").into_response())
}
