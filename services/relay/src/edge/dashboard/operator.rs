//! `/dashboard/operator`: the relay operator's pages, for the service's own staff — every
//! tenant with its plan, status, this month's messages against its limit and its recent limit
//! refusals; suspend and resume (`admin:write`); the plans. Signed in with an admin credential
//! (the relay's `--admin-token`, or a minted admin token with `admin:read`), never a tenant's
//! key; a session of its own in its own cookie (`repowire_operator`, Path=/dashboard/operator),
//! stored like a tenant's (audience `operator`), so neither kind of session opens the other's
//! pages. Staff named by `--operator-staff` sign in through the relay's identity provider
//! instead, as themselves (their sessions end when the relay stops naming them). Off (`404`)
//! when the relay has neither an admin token nor staff, like the admin API.

use askama::Template;
use axum::extract::{Extension, Form, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::oidc::open::STAFF;
use super::page::{Chrome, PageError, render};
use super::session;
use crate::edge::httplimit::{ClientAddr, source};
use crate::ids::now_ms;
use crate::state::AppState;
use crate::storage::store::{DashboardSession, PlanRecord, TenantKey};
use crate::tenancy::admin::audit::AdminCtx;
use crate::tenancy::admin::tokens::{READ, WRITE};
use crate::tenancy::usage::calendar;

/// The operator's cookie: its own name, sent only to its pages.
pub const OPERATOR_COOKIE: session::CookieKind = session::CookieKind {
    name: "repowire_operator",
    path: "/dashboard/operator",
};
/// Tenants one page lists.
const PAGE: u32 = 100;
/// A session opened with the relay's own admin token records this and the token's
/// [`fingerprint`], so it ends when the relay's token changes.
const BOOTSTRAP: &str = "bootstrap:";

/// The first bytes of a credential's digest, hex: enough to tell a changed token, useless to
/// recover it.
fn fingerprint(token: &str) -> String {
    crate::edge::admin::digest(token)[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn cookie(headers: &HeaderMap) -> Option<&str> {
    OPERATOR_COOKIE.read(headers)
}

/// A signed-in operator.
#[derive(Debug)]
pub struct Operator {
    session: DashboardSession,
    scopes: Vec<String>,
}

impl Operator {
    fn may(&self, scope: &str) -> bool {
        self.scopes.iter().any(|s| s == scope)
    }

    /// The audit actor: who, through the dashboard.
    fn ctx(&self, token: Option<crate::storage::store::AdminTokenRecord>) -> AdminCtx {
        AdminCtx {
            actor: format!("dashboard:{}", self.session.subject),
            request_id: uuid::Uuid::now_v7().to_string(),
            token,
        }
    }
}

/// The pages are on when the relay has an admin token or names staff who sign in through its
/// identity provider; `404` otherwise, like the admin API.
fn off(state: &AppState) -> Result<(), PageError> {
    if admin_token(state).is_some() || !staff(state).is_empty() {
        return Ok(());
    }
    Err(PageError::Shown(
        StatusCode::NOT_FOUND,
        "the operator's pages are off: the relay has no admin token".into(),
    ))
}

/// The relay's own admin token, if it has one.
fn admin_token(state: &AppState) -> Option<&str> {
    state
        .config
        .admin_token
        .as_deref()
        .filter(|t| !t.is_empty())
}

/// The staff who sign in through the identity provider: (email, may act).
fn staff(state: &AppState) -> &[(String, bool)] {
    state
        .oidc
        .as_ref()
        .map(|idp| idp.settings().staff.as_slice())
        .unwrap_or_default()
}

/// The operator session of the request, if it has a usable one: its admin token (a minted
/// one) still usable, read again on every request.
async fn current(state: &AppState, headers: &HeaderMap) -> Result<Option<Operator>, PageError> {
    off(state)?;
    let Some(secret) = cookie(headers) else {
        return Ok(None);
    };
    let id_hash = session::hash(secret);
    state.http_limit.check(&id_hash)?;
    let now = now_ms();
    let Some(found) = state.store.find_dashboard_session(&id_hash, now).await? else {
        return Ok(None);
    };
    if found.audience != "operator" {
        return Ok(None);
    }
    let mut scopes: Vec<String> = found.scopes.split(' ').map(str::to_owned).collect();
    if let Some(print) = found
        .key_id
        .as_deref()
        .and_then(|k| k.strip_prefix(BOOTSTRAP))
    {
        // Opened with the relay's own token: only where the relay still has that token.
        if admin_token(state).map(fingerprint).as_deref() != Some(print) {
            return Ok(None);
        }
    } else if let Some(email) = found.key_id.as_deref().and_then(|k| k.strip_prefix(STAFF)) {
        // A staff member: only while the relay still names them, with what it names now.
        let Some((_, writes)) = staff(state).iter().find(|(e, _)| e == email) else {
            state.store.end_dashboard_session(&id_hash, now).await?;
            return Ok(None);
        };
        scopes.retain(|s| s == READ || (*writes && s == WRITE));
    } else if let Some(token_id) = &found.key_id {
        let tokens = state.store.list_admin_tokens().await?;
        let Some(token) = tokens
            .into_iter()
            .find(|t| &t.id == token_id && t.usable_at(now))
        else {
            state.store.end_dashboard_session(&id_hash, now).await?;
            return Ok(None);
        };
        scopes.retain(|s| token.has(s));
    }
    Ok(Some(Operator {
        session: found,
        scopes,
    }))
}

async fn required(state: &AppState, headers: &HeaderMap) -> Result<Operator, PageError> {
    current(state, headers)
        .await?
        .ok_or(PageError::Redirect("/dashboard/operator/signin"))
}

#[derive(Template)]
#[template(path = "dashboard/operator_signin.html")]
struct SigninPage {
    chrome: Chrome,
    problem: Option<String>,
    /// The relay has an admin token: the form for it is shown.
    admin_token: bool,
    /// The identity provider's name, when staff sign in through it.
    oidc: Option<String>,
}

fn signin_page(state: &AppState, status: StatusCode, problem: Option<String>) -> Response {
    let mut response = render(&SigninPage {
        chrome: Chrome::anonymous(),
        problem,
        admin_token: admin_token(state).is_some(),
        oidc: state
            .oidc
            .as_ref()
            .filter(|_| !staff(state).is_empty())
            .map(|idp| idp.settings().name.clone()),
    });
    *response.status_mut() = status;
    response
}

/// `GET /dashboard/operator/signin`.
pub async fn signin(State(state): State<AppState>) -> Result<Response, PageError> {
    off(&state)?;
    Ok(signin_page(&state, StatusCode::OK, None))
}

/// The sign-in form.
#[derive(Debug, Default, Deserialize)]
pub struct SigninForm {
    #[serde(default)]
    admin_token: String,
}

/// `POST /dashboard/operator/signin`.
pub async fn signin_submit(
    State(state): State<AppState>,
    client: Option<Extension<ClientAddr>>,
    headers: HeaderMap,
    Form(form): Form<SigninForm>,
) -> Result<Response, PageError> {
    off(&state)?;
    let Some(expected) = admin_token(&state).map(str::to_owned) else {
        return Ok(signin_page(
            &state,
            StatusCode::NOT_FOUND,
            Some(
                "this relay has no admin token: staff sign in through its identity provider".into(),
            ),
        ));
    };
    session::same_origin(&headers)?;
    let from = client.map(|Extension(ClientAddr(addr))| {
        source(addr.ip(), &headers, &state.config.trusted_proxies)
    });
    if let Some(ip) = from {
        state.failed_auth.check(ip)?;
    }
    let given = form.admin_token.trim();
    let digest = crate::edge::admin::digest;
    let (subject, token_id, scopes) = if digest(given) == digest(&expected) {
        (
            "admin-token".to_owned(),
            Some(format!("{BOOTSTRAP}{}", fingerprint(&expected))),
            format!("{READ} {WRITE}"),
        )
    } else {
        match crate::tenancy::admin::tokens::find(state.store.as_ref(), given)
            .await
            .map_err(crate::error::AppError::from)?
        {
            Some(t) if t.has(READ) => {
                if let Err(error) = state.store.admin_token_used(&t.id, now_ms()).await {
                    tracing::warn!(%error, token = %t.id, "could not record an admin token's use");
                }
                (
                    format!("admin-token:{}", t.id),
                    Some(t.id.clone()),
                    t.scopes.clone(),
                )
            }
            _ => {
                if let Some(ip) = from {
                    state.failed_auth.failed(ip)?;
                }
                return Ok(signin_page(
                    &state,
                    StatusCode::UNAUTHORIZED,
                    Some(
                        "that is not an admin credential of this relay (with `admin:read`)".into(),
                    ),
                ));
            }
        }
    };
    let now = now_ms();
    if let Some(previous) = cookie(&headers) {
        state
            .store
            .end_dashboard_session(&session::hash(previous), now)
            .await?;
    }
    let secret = session::new_secret();
    let lifetime = state.config.dashboard_session_secs;
    state
        .store
        .create_dashboard_session(&DashboardSession {
            id_hash: session::hash(&secret),
            audience: "operator".into(),
            tenant_id: None,
            key_id: token_id,
            member_id: None,
            subject: subject.clone(),
            scopes,
            csrf: session::new_secret(),
            created_at_ms: now,
            expires_at_ms: now
                .saturating_add(i64::try_from(lifetime.saturating_mul(1000)).unwrap_or(i64::MAX)),
        })
        .await?;
    tracing::info!(subject = %subject, "operator dashboard session opened");
    let mut response = Redirect::to("/dashboard/operator").into_response();
    response
        .headers_mut()
        .insert(header::SET_COOKIE, OPERATOR_COOKIE.set(&secret, lifetime));
    Ok(response)
}

/// A tenant as the operator's table shows it.
#[derive(Debug)]
pub struct TenantLine {
    id: String,
    name: String,
    plan: String,
    status: &'static str,
    messages: String,
    peers: String,
    refusals: usize,
    last_refusal: String,
}

#[derive(Template)]
#[template(path = "dashboard/operator.html")]
struct OperatorPage {
    chrome: Chrome,
    csrf: String,
    writes: bool,
    subject: String,
    tenants: Vec<TenantLine>,
    more: bool,
    plans: Vec<PlanLine>,
    outcome: Option<super::compose::Outcome>,
}

/// A plan as the table shows it.
#[derive(Debug)]
pub struct PlanLine {
    name: String,
    description: String,
    peers: String,
    per_minute: String,
    per_month: String,
    message_bytes: String,
}

fn or_unlimited(v: Option<i64>) -> String {
    v.map_or_else(|| "no limit".into(), |v| v.to_string())
}

impl From<PlanRecord> for PlanLine {
    fn from(p: PlanRecord) -> Self {
        Self {
            name: p.name,
            description: p.description,
            peers: or_unlimited(p.limits.max_peers),
            per_minute: or_unlimited(p.limits.messages_per_minute),
            per_month: or_unlimited(p.limits.messages_per_month),
            message_bytes: or_unlimited(p.limits.max_message_bytes),
        }
    }
}

fn limit_text(used: i64, max: Option<i64>) -> String {
    match max {
        Some(max) => format!("{used} of {max}"),
        None => format!("{used} (no limit)"),
    }
}

async fn page_of(
    state: &AppState,
    operator: &Operator,
    outcome: Option<super::compose::Outcome>,
) -> Result<Response, PageError> {
    let store = state.store.as_ref();
    let listed = crate::tenancy::admin::tenants::list_tenants(
        store,
        crate::tenancy::admin::tenants::TenantQuery {
            limit: Some(PAGE),
            ..Default::default()
        },
    )
    .await
    .map_err(crate::error::AppError::from)?;
    let now = now_ms();
    let start = calendar::month_start(now);
    let end = calendar::next_month_start(start);
    let mut tenants = Vec::new();
    for t in &listed.items {
        if t.deleted_at_ms.is_some() {
            continue;
        }
        // One purged since the list was read is left out, not an error of the whole page.
        let Ok(detail) =
            crate::tenancy::admin::tenants::get_tenant_by(store, TenantKey::Id(&t.id)).await
        else {
            continue;
        };
        let messages = store.messages_counted(&t.id, start, end).await?;
        let refusals = state
            .cluster
            .events()
            .refusals(&t.id, 20)
            .await
            .unwrap_or_default();
        let last_refusal = refusals
            .first()
            .and_then(|e| match e {
                crate::cluster::events::TenantEvent::Refused { at_ms, limit, .. } => {
                    Some(format!("{limit}, {}", super::overview::ago(*at_ms, now)))
                }
                _ => None,
            })
            .unwrap_or_default();
        tenants.push(TenantLine {
            id: t.id.clone(),
            name: t.name.clone(),
            plan: t.plan.clone(),
            status: if t.suspended_at_ms.is_some() {
                "suspended"
            } else {
                "active"
            },
            messages: limit_text(messages, detail.effective_limits.messages_per_month),
            peers: limit_text(
                detail.stored_peers,
                detail.effective_limits.max_stored_peers,
            ),
            refusals: refusals.len(),
            last_refusal,
        });
    }
    let plans = store
        .list_plans()
        .await?
        .into_iter()
        .map(PlanLine::from)
        .collect();
    Ok(render(&OperatorPage {
        chrome: Chrome::anonymous(),
        csrf: operator.session.csrf.clone(),
        writes: operator.may(WRITE),
        subject: operator.session.subject.clone(),
        tenants,
        more: listed.next_cursor.is_some(),
        plans,
        outcome,
    }))
}

/// `GET /dashboard/operator`.
pub async fn page(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Response, PageError> {
    let operator = required(&state, &headers).await?;
    page_of(&state, &operator, None).await
}

/// A suspend or resume.
#[derive(Debug, Default, Deserialize)]
pub struct TenantForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    tenant_id: String,
    #[serde(default)]
    action: String,
}

/// `POST /dashboard/operator/tenants`: suspend or resume a tenant (`admin:write`), audited.
pub async fn tenant_action(
    State(state): State<AppState>,
    headers: HeaderMap,
    Form(form): Form<TenantForm>,
) -> Result<Response, PageError> {
    session::same_origin(&headers)?;
    let operator = required(&state, &headers).await?;
    if !session::same_secret(&form.csrf, &operator.session.csrf) {
        return Err(PageError::Shown(
            StatusCode::FORBIDDEN,
            "this form is stale or was not made by this dashboard: reload the page and try again"
                .into(),
        ));
    }
    if !operator.may(WRITE) {
        return Err(PageError::Shown(
            StatusCode::FORBIDDEN,
            format!("suspending and resuming tenants needs `{WRITE}`"),
        ));
    }
    let suspend = match form.action.as_str() {
        "suspend" => true,
        "resume" => false,
        other => {
            return Err(PageError::Shown(
                StatusCode::BAD_REQUEST,
                format!("`{other}` is not an action of this page"),
            ));
        }
    };
    // A tenant id only (`tnt-…`), never a name: the form names what the table showed.
    if !form.tenant_id.starts_with(crate::ids::TENANT_ID_PREFIX) {
        return Err(PageError::Shown(
            StatusCode::BAD_REQUEST,
            "the form names no tenant: reload the page".into(),
        ));
    }
    let token = match operator
        .session
        .key_id
        .as_deref()
        .filter(|k| !k.starts_with(BOOTSTRAP))
    {
        Some(id) => state
            .store
            .list_admin_tokens()
            .await?
            .into_iter()
            .find(|t| t.id == id),
        None => None,
    };
    let ctx = operator.ctx(token);
    let outcome = match crate::edge::admin::set_tenant_suspended(
        &state,
        &ctx,
        &form.tenant_id,
        suspend,
    )
    .await
    {
        Ok(detail) => super::compose::Outcome {
            ok: true,
            text: format!(
                "{} is {}.",
                detail.tenant.name,
                if suspend {
                    "suspended: its connections close and its keys are refused"
                } else {
                    "active again"
                }
            ),
        },
        Err(e) => super::compose::Outcome {
            ok: false,
            text: e.message,
        },
    };
    page_of(&state, &operator, Some(outcome)).await
}

/// `POST /dashboard/operator/logout`.
pub async fn logout(
    State(state): State<AppState>,
    headers: HeaderMap,
    Form(form): Form<TenantForm>,
) -> Result<Response, PageError> {
    session::same_origin(&headers)?;
    if let Some(operator) = current(&state, &headers).await? {
        if !session::same_secret(&form.csrf, &operator.session.csrf) {
            return Err(PageError::Shown(
                StatusCode::FORBIDDEN,
                "this form is stale: reload the page and try again".into(),
            ));
        }
        state
            .store
            .end_dashboard_session(&operator.session.id_hash, now_ms())
            .await?;
    }
    let mut response = Redirect::to("/dashboard/operator/signin").into_response();
    response
        .headers_mut()
        .insert(header::SET_COOKIE, OPERATOR_COOKIE.clear());
    Ok(response)
}
