//! `GET|POST /dashboard/choose`: a person who signed in through the provider and is a member of
//! several tenants picks one. The chooser session (audience `chooser`, ten minutes) reaches
//! only this page; its `scopes` list the memberships it may pick. Picking one replaces it with
//! that member's session.

use askama::Template;
use axum::extract::{Form, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use crate::edge::dashboard::page::{Chrome, PageError, render};
use crate::edge::dashboard::session;
use crate::ids::now_ms;
use crate::state::AppState;
use crate::storage::store::{DashboardSession, TenantKey};

/// A tenant the person may pick.
#[derive(Debug)]
pub struct Choice {
    member_id: String,
    tenant: String,
    scopes: String,
}

#[derive(Template)]
#[template(path = "dashboard/choose.html")]
struct ChoosePage {
    chrome: Chrome,
    who: String,
    csrf: String,
    choices: Vec<Choice>,
}

/// The request's chooser session.
async fn chooser(state: &AppState, headers: &HeaderMap) -> Result<DashboardSession, PageError> {
    let secret = session::cookie(headers).ok_or(PageError::SignIn)?;
    let id_hash = session::hash(secret);
    state.http_limit.check(&id_hash)?;
    state
        .store
        .find_dashboard_session(&id_hash, now_ms())
        .await?
        .filter(|s| s.audience == "chooser")
        .ok_or(PageError::SignIn)
}

/// `GET /dashboard/choose`.
pub async fn page(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Response, PageError> {
    let chooser = chooser(&state, &headers).await?;
    let mut choices = Vec::new();
    for id in chooser.scopes.split(' ') {
        let Some(member) = state.store.get_member(id).await? else {
            continue;
        };
        if member.removed_at_ms.is_some() {
            continue;
        }
        let Some(tenant) = state
            .store
            .find_tenant(TenantKey::Id(&member.tenant_id))
            .await?
            .filter(|t| t.deleted_at_ms.is_none())
        else {
            continue;
        };
        choices.push(Choice {
            member_id: member.id,
            tenant: tenant.display_name.unwrap_or(tenant.name),
            scopes: member.scopes,
        });
    }
    Ok(render(&ChoosePage {
        chrome: Chrome::anonymous(),
        who: chooser
            .subject
            .strip_prefix("oidc:")
            .unwrap_or(&chooser.subject)
            .to_owned(),
        csrf: chooser.csrf,
        choices,
    }))
}

/// `POST /dashboard/choose` form.
#[derive(Debug, Default, Deserialize)]
pub struct ChooseForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    member_id: String,
}

/// `POST /dashboard/choose`.
pub async fn pick(
    State(state): State<AppState>,
    headers: HeaderMap,
    Form(form): Form<ChooseForm>,
) -> Result<Response, PageError> {
    session::same_origin(&headers)?;
    let chooser = chooser(&state, &headers).await?;
    if !session::same_secret(&form.csrf, &chooser.csrf) {
        return Err(PageError::Shown(
            StatusCode::FORBIDDEN,
            "this form is stale or was not made by this dashboard: sign in again".into(),
        ));
    }
    // Only a membership this sign-in found, still a member now.
    let member = match chooser.scopes.split(' ').find(|id| *id == form.member_id) {
        Some(id) => state.store.get_member(id).await?,
        None => None,
    };
    let Some(member) = member.filter(|m| m.removed_at_ms.is_none()) else {
        return Err(PageError::Shown(
            StatusCode::FORBIDDEN,
            "that is not a team this sign-in may open".into(),
        ));
    };
    let who = chooser
        .subject
        .strip_prefix("oidc:")
        .unwrap_or(&chooser.subject)
        .to_owned();
    let cookie = super::open::member_session(&state, &headers, &member, &who).await?;
    let mut response = Redirect::to("/dashboard").into_response();
    response.headers_mut().insert(header::SET_COOKIE, cookie);
    Ok(response)
}
