//! `GET|POST /dashboard/approvals`: the tenant's open questions to `@approvers` (tool
//! permissions and choices), oldest first, each with its asker, the text with the tool's input
//! as sent (escaped, never markup), the time left, and a button per option. Pressing one
//! answers as the person's `human` peer ([`super::human`]) through the relay's routing, which
//! checks what it checks for any approver (an approving role, a key with `approve`, not the
//! asker, before the deadline).
//!
//! A person's decision, and how the dashboard knows it is one: the session's key must hold
//! `approve` (an agent's key does not); the session was opened by a person (a one-time link
//! that `repowire dashboard` hands only to a command at a terminal of its own, or a key typed
//! into the sign-in form); the answer is a form post carrying the session's CSRF token from
//! this relay's own page (`Origin` checked); and it must be a navigation the browser marks as
//! made by the user (`Sec-Fetch-User: ?1`, sent for a click or key press and which no script
//! in any page can set). An agent on the same machine holding a key with `approve` could
//! answer anyway — over its own WebSocket as well; the scope is the line.

use askama::Template;
use axum::Form;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use repowire_protocol::{Answer, Body, MessageId, Question};

use super::compose::Outcome;
use super::overview::ago;
use super::page::{Chrome, PageError, render};
use super::session::{self, TenantSession};
use crate::ids::now_ms;
use crate::state::AppState;
use crate::tenancy::apikey;
use crate::tenancy::usage::calendar;

/// Open questions shown at most.
const SHOWN: i64 = 100;

/// One option's button.
#[derive(Debug)]
pub struct OptionButton {
    id: String,
    label: String,
    once: String,
    deny: bool,
}

/// One open question.
#[derive(Debug)]
pub struct Pending {
    correlation_id: String,
    from: String,
    circle: String,
    kind: String,
    text: String,
    asked_iso: String,
    asked_ago: String,
    left: String,
    options: Vec<OptionButton>,
}

#[derive(Template)]
#[template(path = "dashboard/approvals.html")]
struct ApprovalsPage {
    chrome: Chrome,
    pending: Vec<Pending>,
    outcome: Option<Outcome>,
}

/// The answer.
#[derive(Debug, Default, serde::Deserialize)]
pub struct AnswerForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    once: String,
    #[serde(default)]
    correlation_id: String,
    #[serde(default)]
    option_id: String,
}

async fn approver(state: &AppState, headers: &HeaderMap) -> Result<TenantSession, PageError> {
    let signed = session::required(state, headers).await?;
    if !signed.may(apikey::APPROVE) {
        return Err(PageError::Shown(
            StatusCode::FORBIDDEN,
            format!(
                "answering approvals needs a sign-in with a key that holds `{}`",
                apikey::APPROVE
            ),
        ));
    }
    Ok(signed)
}

fn left(deadline_ms: Option<i64>, now: i64) -> String {
    match deadline_ms {
        None => "no deadline".into(),
        Some(d) if d <= now => "timing out".into(),
        Some(d) => {
            let secs = (d - now) / 1000;
            if secs < 120 {
                format!("{secs} s left")
            } else {
                format!("{} min left", secs / 60)
            }
        }
    }
}

async fn page_of(
    state: &AppState,
    signed: &TenantSession,
    outcome: Option<Outcome>,
) -> Result<Response, PageError> {
    let now = now_ms();
    let open = state
        .store
        .list_questions(signed.tenant_id(), None, false, SHOWN)
        .await?;
    let pending = open
        .into_iter()
        .filter(|q| q.deadline_ms.is_none_or(|d| d > now))
        .filter_map(|q| {
            let question: Question = serde_json::from_str(q.question.as_deref()?).ok()?;
            let kind: &str = question.kind.into();
            Some(Pending {
                correlation_id: q.correlation_id.clone()?,
                from: q.from_name,
                circle: q.from_circle,
                kind: kind.replace('_', " "),
                text: q.body,
                asked_iso: calendar::utc_string(q.created_at_ms),
                asked_ago: ago(q.created_at_ms, now),
                left: left(q.deadline_ms, now),
                options: question
                    .options
                    .into_iter()
                    .map(|o| OptionButton {
                        deny: o.id == "deny",
                        once: MessageId::new().to_string(),
                        id: o.id,
                        label: o.label,
                    })
                    .collect(),
            })
        })
        .collect();
    Ok(render(&ApprovalsPage {
        chrome: signed.chrome("approvals"),
        pending,
        outcome,
    }))
}

/// `GET /dashboard/approvals`.
pub async fn page(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Response, PageError> {
    let signed = approver(&state, &headers).await?;
    page_of(&state, &signed, None).await
}

/// Refuses a post the browser does not mark as the user's own doing.
fn by_the_user(headers: &HeaderMap) -> Result<(), PageError> {
    if headers.get("sec-fetch-user").and_then(|v| v.to_str().ok()) == Some("?1") {
        return Ok(());
    }
    Err(PageError::Shown(
        StatusCode::FORBIDDEN,
        "an approval is a person's decision: press the button in the dashboard (this request \
         was not marked by a browser as made by its user)"
            .into(),
    ))
}

/// `POST /dashboard/approvals`.
pub async fn answer(
    State(state): State<AppState>,
    headers: HeaderMap,
    Form(form): Form<AnswerForm>,
) -> Result<Response, PageError> {
    session::same_origin(&headers)?;
    let signed = approver(&state, &headers).await?;
    signed.check_csrf(&form.csrf)?;
    by_the_user(&headers)?;
    let correlation_id = repowire_protocol::CorrelationId::from(form.correlation_id.clone());
    let (Ok(id), false) = (
        form.once.parse::<MessageId>(),
        form.correlation_id.is_empty(),
    ) else {
        return Err(PageError::Shown(
            StatusCode::BAD_REQUEST,
            "the form is incomplete: reload the page".into(),
        ));
    };
    let conn = match state.humans.open(&state, &signed).await {
        Ok(conn) => conn,
        Err(why) => {
            let text = format!("could not answer as you: {why}");
            return page_of(&state, &signed, Some(Outcome { ok: false, text })).await;
        }
    };
    let sent = conn
        .send_as(
            id,
            Body::Answer(Answer {
                from: conn.peer_id(),
                correlation_id,
                option_id: Some(form.option_id.clone()),
                text: None,
            }),
        )
        .await;
    let outcome = match sent {
        Ok(Body::Accepted(_)) => Outcome {
            ok: true,
            text: format!("Answered `{}`.", form.option_id),
        },
        Ok(other) => Outcome {
            ok: false,
            text: format!("the relay answered `{}`", other.type_name()),
        },
        Err(why) => Outcome {
            ok: false,
            text: format!("Not answered: {why}"),
        },
    };
    tracing::info!(tenant = %signed.tenant_id(), credential = %signed.credential_id(), option = %form.option_id, ok = outcome.ok, "approval answered from the dashboard");
    page_of(&state, &signed, Some(outcome)).await
}
