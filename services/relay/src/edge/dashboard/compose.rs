//! `GET|POST /dashboard/compose`: the person sends a notify or an ask to a peer (by name, peer
//! id or `rs-…` session id, optionally within a circle) as their own `human` peer
//! ([`super::human`]), through the relay's routing like any agent's frame. Needs a session
//! whose key holds `connect` (the scope every peer's key has) and `messages:read` (replies
//! show on the Asks page). The form carries the frame's id,
//! minted when the page was drawn: sent twice (a reload of the answer), it is one message.

use askama::Template;
use axum::Form;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use repowire_protocol::{Ask, Body, MessageId, Notify};

use super::page::{Chrome, PageError, render};
use super::session::{self, TenantSession};
use crate::state::AppState;
use crate::tenancy::apikey;

/// What became of the last send, shown above the form.
#[derive(Debug)]
pub struct Outcome {
    /// It went through.
    pub ok: bool,
    /// What to say.
    pub text: String,
}

#[derive(Template)]
#[template(path = "dashboard/compose.html")]
struct ComposePage {
    chrome: Chrome,
    once: String,
    outcome: Option<Outcome>,
    kind: String,
    to: String,
    circle: String,
    text: String,
    me: String,
}

/// The form.
#[derive(Debug, Default, serde::Deserialize)]
pub struct ComposeForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    once: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    to: String,
    #[serde(default)]
    circle: String,
    #[serde(default)]
    text: String,
}

/// Whether a session may send: as a peer (`connect`), and read what comes back on the Asks
/// page (`messages:read`), or replies to the person would be receipted and never seen.
pub fn may_send(signed: &TenantSession) -> bool {
    signed.may(apikey::CONNECT) && signed.may(apikey::MESSAGES_READ)
}

async fn sender(state: &AppState, headers: &HeaderMap) -> Result<TenantSession, PageError> {
    let signed = session::required(state, headers).await?;
    if !may_send(&signed) {
        return Err(PageError::Shown(
            StatusCode::FORBIDDEN,
            format!(
                "sending needs a sign-in with a key that holds `{}` and `{}` (the replies show on the Asks page)",
                apikey::CONNECT,
                apikey::MESSAGES_READ
            ),
        ));
    }
    Ok(signed)
}

fn page_of(signed: &TenantSession, form: ComposeForm, outcome: Option<Outcome>) -> Response {
    render(&ComposePage {
        chrome: signed.chrome("compose"),
        once: MessageId::new().to_string(),
        outcome,
        kind: if form.kind == "ask" { "ask" } else { "notify" }.to_owned(),
        to: form.to,
        circle: form.circle,
        text: form.text,
        me: signed.key_label.clone(),
    })
}

/// `GET /dashboard/compose` (`?to=NAME` fills in the recipient).
pub async fn page(
    State(state): State<AppState>,
    headers: HeaderMap,
    axum::extract::Query(q): axum::extract::Query<std::collections::HashMap<String, String>>,
) -> Result<Response, PageError> {
    let signed = sender(&state, &headers).await?;
    let form = ComposeForm {
        to: q.get("to").cloned().unwrap_or_default(),
        ..ComposeForm::default()
    };
    Ok(page_of(&signed, form, None))
}

/// `POST /dashboard/compose`.
pub async fn send(
    State(state): State<AppState>,
    headers: HeaderMap,
    Form(form): Form<ComposeForm>,
) -> Result<Response, PageError> {
    session::same_origin(&headers)?;
    let signed = sender(&state, &headers).await?;
    signed.check_csrf(&form.csrf)?;
    let Ok(id) = form.once.parse::<MessageId>() else {
        return Err(PageError::Shown(
            StatusCode::BAD_REQUEST,
            "the form is incomplete: reload the page".into(),
        ));
    };
    let refuse = |form: ComposeForm, why: String| {
        let mut response = page_of(
            &signed,
            form,
            Some(Outcome {
                ok: false,
                text: why,
            }),
        );
        *response.status_mut() = StatusCode::UNPROCESSABLE_ENTITY;
        Ok(response)
    };
    let to = form.to.trim().to_owned();
    if to.is_empty() || form.text.trim().is_empty() {
        return refuse(form, "say who it is for and what it says".into());
    }
    let circle = Some(form.circle.trim().to_owned()).filter(|c| !c.is_empty());
    let conn = match state.humans.open(&state, &signed).await {
        Ok(conn) => conn,
        Err(why) => return refuse(form, format!("could not send as you: {why}")),
    };
    let from = conn.peer_id();
    let body = if form.kind == "ask" {
        Body::Ask(Ask {
            from,
            to: to.clone(),
            circle,
            text: form.text.clone(),
            reply_to: None,
            question: None,
        })
    } else {
        Body::Notify(Notify {
            from,
            to: to.clone(),
            circle,
            text: form.text.clone(),
        })
    };
    match conn.send_as(id, body).await {
        Ok(Body::Accepted(a)) => {
            let names: Vec<String> = a.recipients.iter().map(|r| r.name.clone()).collect();
            let text = format!(
                "Accepted for {} (message …{}). Its delivery shows on the Events page{}.",
                names.join(", "),
                &a.message_id.to_string()[28..],
                if form.kind == "ask" {
                    ", the reply on the Asks page"
                } else {
                    ""
                }
            );
            Ok(page_of(
                &signed,
                ComposeForm {
                    kind: form.kind,
                    ..ComposeForm::default()
                },
                Some(Outcome { ok: true, text }),
            ))
        }
        Ok(other) => refuse(form, format!("the relay answered `{}`", other.type_name())),
        Err(why) => refuse(form, format!("Not sent: {why}")),
    }
}
