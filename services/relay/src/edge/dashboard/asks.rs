//! `GET /dashboard/asks`: the tenant's recent asks (questions to `@approvers` included) with
//! what became of them — open, delivered, acked, answered, expired, failed — and each
//! recipient's state; filtered by state, asker and circle. Message text across the tenant,
//! tool inputs included: for sessions whose key holds `messages:read` only.

use askama::Template;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use repowire_protocol::validate::is_valid_name;
use serde::Deserialize;

use super::overview::ago;
use super::page::{Chrome, PageError, render};
use super::session;
use crate::ids::now_ms;
use crate::state::AppState;
use crate::storage::store::{AskOverview, CLOSED_BY_TIMEOUT};
use crate::tenancy::apikey;
use crate::tenancy::usage::calendar;

/// How many recent asks are read for one page (filters apply to these).
const RECENT: i64 = 200;

/// What became of an ask, in the order a person reads it.
pub const STATES: [&str; 6] = [
    "open",
    "delivered",
    "acked",
    "answered",
    "expired",
    "failed",
];

/// An ask's state. Closed, it is decided by how it closed: with an answer (an option chosen,
/// or its question's timeout default) `answered`; by its question's timeout without a default
/// `expired`; by a reply without an answer `acked`. Open, by its recipients: every one failed
/// is `failed`, every one expired `expired`, any reached `delivered`, else `open` (accepted,
/// not yet reached).
pub fn state_of(ask: &AskOverview) -> &'static str {
    if ask.ask.closed_at_ms.is_some() {
        return if ask.ask.answer.is_some() {
            "answered"
        } else if ask.ask.closed_by.as_deref() == Some(CLOSED_BY_TIMEOUT) {
            "expired"
        } else {
            "acked"
        };
    }
    let states: Vec<&str> = ask.recipients.iter().map(|r| r.state.as_str()).collect();
    let all = |s: &str| !states.is_empty() && states.iter().all(|x| *x == s);
    if all("failed") {
        "failed"
    } else if all("expired") {
        "expired"
    } else if states
        .iter()
        .any(|s| matches!(*s, "delivered" | "injected" | "acked" | "answered"))
    {
        "delivered"
    } else {
        "open"
    }
}

/// One recipient as the table shows it.
#[derive(Debug)]
pub struct ToRow {
    name: String,
    state: String,
    reason: String,
}

/// One ask as the table shows it.
#[derive(Debug)]
pub struct AskLine {
    id: String,
    from: String,
    circle: String,
    text: String,
    sent_iso: String,
    sent_ago: String,
    state: &'static str,
    to: Vec<ToRow>,
    reply: String,
}

/// A state filter option.
#[derive(Debug)]
pub struct StateOption {
    name: &'static str,
    selected: bool,
}

#[derive(Template)]
#[template(path = "dashboard/asks.html")]
struct AsksPage {
    chrome: Chrome,
    asks: Vec<AskLine>,
    states: Vec<StateOption>,
    from: String,
    circle: String,
    read: usize,
    filtered: bool,
}

/// The filters.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AsksQuery {
    /// One of [`STATES`]; empty: all.
    #[serde(default)]
    state: String,
    /// The asker's name; empty: anyone.
    #[serde(default)]
    from: String,
    /// The asker's circle; empty: any.
    #[serde(default)]
    circle: String,
}

/// `GET /dashboard/asks`.
pub async fn page(
    State(state): State<AppState>,
    headers: HeaderMap,
    query: Result<Query<AsksQuery>, QueryRejection>,
) -> Result<Response, PageError> {
    let signed = session::required(&state, &headers).await?;
    if !signed.may(apikey::MESSAGES_READ) {
        return Err(PageError::Shown(
            StatusCode::FORBIDDEN,
            format!(
                "the Asks page shows the tenant's messages: it needs a sign-in with a key that holds `{}`",
                apikey::MESSAGES_READ
            ),
        ));
    }
    let Query(q) = query.map_err(|e| PageError::Shown(StatusCode::BAD_REQUEST, e.body_text()))?;
    let bad = |what: &str| {
        PageError::Shown(
            StatusCode::BAD_REQUEST,
            format!("`{what}` is not a filter this page offers"),
        )
    };
    if !q.state.is_empty() && !STATES.contains(&q.state.as_str()) {
        return Err(bad(&q.state));
    }
    for name in [&q.from, &q.circle] {
        if !name.is_empty() && !is_valid_name(name) {
            return Err(bad(name));
        }
    }
    let now = now_ms();
    let recent = state.store.recent_asks(signed.tenant_id(), RECENT).await?;
    let read = recent.len();
    let asks = recent
        .into_iter()
        .filter(|a| q.from.is_empty() || a.ask.from_name == q.from)
        .filter(|a| q.circle.is_empty() || a.ask.from_circle == q.circle)
        .map(|a| (state_of(&a), a))
        .filter(|(s, _)| q.state.is_empty() || *s == q.state)
        .map(|(s, a)| AskLine {
            id: a
                .ask
                .correlation_id
                .clone()
                .unwrap_or(a.ask.message_id.clone()),
            from: a.ask.from_name,
            circle: a.ask.from_circle,
            text: a.ask.body,
            sent_iso: calendar::utc_string(a.ask.created_at_ms),
            sent_ago: ago(a.ask.created_at_ms, now),
            state: s,
            to: a
                .recipients
                .into_iter()
                .map(|r| ToRow {
                    name: r.name.unwrap_or(r.peer_id),
                    state: r.state,
                    reason: r.reason.unwrap_or_default(),
                })
                .collect(),
            reply: a.ask.reply_text.unwrap_or_default(),
        })
        .collect();
    Ok(render(&AsksPage {
        chrome: signed.chrome("asks"),
        asks,
        states: STATES
            .iter()
            .map(|s| StateOption {
                name: s,
                selected: q.state == *s,
            })
            .collect(),
        filtered: !(q.state.is_empty() && q.from.is_empty() && q.circle.is_empty()),
        from: q.from,
        circle: q.circle,
        read,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::store::{AskRecipient, ListedAsk};

    fn ask(closed_by: Option<&str>, states: &[&str]) -> AskOverview {
        answered(closed_by, None, states)
    }

    fn answered(closed_by: Option<&str>, answer: Option<&str>, states: &[&str]) -> AskOverview {
        AskOverview {
            ask: ListedAsk {
                message_id: "m".into(),
                correlation_id: None,
                from_name: "a".into(),
                from_circle: "dev".into(),
                body: "?".into(),
                created_at_ms: 0,
                closed_at_ms: closed_by.map(|_| 1),
                closed_by: closed_by.map(str::to_owned),
                answer: answer.map(str::to_owned),
                reply_text: None,
            },
            recipients: states
                .iter()
                .map(|s| AskRecipient {
                    message_id: "m".into(),
                    peer_id: "p".into(),
                    name: None,
                    state: (*s).into(),
                    reason: None,
                })
                .collect(),
        }
    }

    #[test]
    fn an_asks_state_reads_its_recipients_and_how_it_closed() {
        assert_eq!(state_of(&ask(None, &["accepted"])), "open");
        assert_eq!(
            state_of(&ask(None, &["accepted", "delivered"])),
            "delivered"
        );
        assert_eq!(state_of(&ask(None, &["injected"])), "delivered");
        assert_eq!(state_of(&ask(None, &["failed", "failed"])), "failed");
        assert_eq!(state_of(&ask(None, &["failed", "accepted"])), "open");
        assert_eq!(state_of(&ask(None, &["expired"])), "expired");
        assert_eq!(state_of(&ask(Some("timeout"), &["delivered"])), "expired");
        assert_eq!(state_of(&ask(Some("msg-r"), &["acked"])), "acked");
        assert_eq!(
            state_of(&answered(Some("msg-r"), Some("allow"), &["answered"])),
            "answered"
        );
        // A question's timeout that chose its default is an answer, shown with the default.
        assert_eq!(
            state_of(&answered(Some("timeout"), Some("deny"), &["answered"])),
            "answered"
        );
        // Closed, with its recipient forgotten since (no rows): still how it closed.
        assert_eq!(state_of(&ask(Some("msg-r"), &[])), "acked");
        // An entry that expired before the reply came: the reply decides.
        assert_eq!(state_of(&ask(Some("msg-r"), &["expired"])), "acked");
        assert_eq!(state_of(&ask(None, &[])), "open");
    }
}
