//! `GET /dashboard/events`: the tenant's event log — messages, their delivery states, peers
//! coming and going — newest first. The page shows the newest [`SHOWN`] entries as HTML (so it
//! reads without JavaScript); `assets/dashboard/events.js` then follows the log live through
//! [`super::stream`], from the place the page ends. Message text across the tenant: for
//! sessions whose key holds `messages:read` only.

use std::collections::HashMap;

use askama::Template;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde::Serialize;

use super::page::{Chrome, PageError, render};
use super::session::{self, TenantSession};
use crate::cluster::bus::LoggedEvent;
use crate::cluster::events::TenantEvent;
use crate::error::AppError;
use crate::state::AppState;
use crate::tenancy::apikey;
use crate::tenancy::usage::calendar;

/// Entries the page shows (and the live view keeps).
pub const SHOWN: usize = 200;

/// One entry as the page (and the stream) shows it. Every field is text: the page escapes it,
/// the script sets it as `textContent`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EventRow {
    /// Its place in the log.
    pub seq: u64,
    /// When, as ISO 8601 UTC.
    pub at_iso: String,
    /// When, as `HH:MM:SS`.
    pub at_time: String,
    /// `message`, `delivery`, `presence`, `missed`.
    pub kind: &'static str,
    /// The state shown as a badge: a message's kind, a delivery state, a presence event.
    pub state: String,
    /// Who: sender and recipients, the recipient, the peer.
    pub who: String,
    /// What: the text, the reason, the turn state.
    pub what: String,
}

/// Peer names by id, for delivery entries (which name peers by id).
#[derive(Debug, Default)]
pub struct Names(HashMap<String, String>);

impl Names {
    /// The tenant's stored peers' names.
    pub async fn load(state: &AppState, tenant_id: &str) -> Result<Self, AppError> {
        let peers = state.store.list_peers(tenant_id).await?;
        Ok(Self(
            peers.into_iter().map(|p| (p.peer_id, p.name)).collect(),
        ))
    }

    /// The peer ids an entry names that are not known.
    pub fn unknown(&self, event: &TenantEvent) -> Vec<String> {
        match event {
            TenantEvent::Delivery {
                sender, recipient, ..
            } => [sender, recipient]
                .into_iter()
                .filter(|id| !self.0.contains_key(*id))
                .cloned()
                .collect(),
            _ => Vec::new(),
        }
    }

    fn name<'a>(&'a self, id: &'a str) -> &'a str {
        self.0.get(id).map_or(id, String::as_str)
    }
}

fn short(id: &str) -> &str {
    id.get(id.len().saturating_sub(8)..).unwrap_or(id)
}

/// An entry as it is shown; `None` for one that cannot be read (logged).
pub fn row(entry: &LoggedEvent, names: &Names) -> Option<EventRow> {
    let event: TenantEvent = match serde_json::from_str(&entry.data) {
        Ok(e) => e,
        Err(error) => {
            tracing::warn!(%error, seq = entry.seq, "unreadable event log entry");
            return None;
        }
    };
    Some(row_of(entry.seq, &event, names))
}

/// How an event is shown. A message's text is its start; how much more there is is said.
pub fn row_of(seq: u64, event: &TenantEvent, names: &Names) -> EventRow {
    let (at_ms, kind, state, who, what) = match event {
        TenantEvent::Message {
            at_ms,
            kind,
            from,
            circle,
            to,
            text,
            text_chars,
            ..
        } => {
            let shown = text.chars().count();
            let what = if *text_chars > shown {
                format!("{text}… ({} more characters)", text_chars - shown)
            } else {
                text.clone()
            };
            let to = if to.is_empty() {
                "nobody".to_owned()
            } else {
                to.join(", ")
            };
            (
                *at_ms,
                "message",
                kind.clone(),
                format!("{from} ({circle}) → {to}"),
                what,
            )
        }
        TenantEvent::Delivery {
            at_ms,
            message_id,
            sender,
            recipient,
            state,
            reason,
        } => (
            *at_ms,
            "delivery",
            state.clone(),
            format!(
                "{} ← {}, message …{}",
                names.name(recipient),
                names.name(sender),
                short(message_id)
            ),
            reason.clone().unwrap_or_default(),
        ),
        TenantEvent::Presence {
            at_ms,
            event,
            name,
            circle,
            turn_state,
            ..
        } => (
            *at_ms,
            "presence",
            event.clone(),
            format!("{name} ({circle})"),
            turn_state
                .as_ref()
                .map(|t| format!("turn: {t}"))
                .unwrap_or_default(),
        ),
        TenantEvent::Refused {
            at_ms,
            limit,
            message,
            repeated,
            ..
        } => (
            *at_ms,
            "refused",
            limit.clone(),
            "a tenant limit".to_owned(),
            if *repeated > 0 {
                format!("{message} (and {repeated} more like it since the one before)")
            } else {
                message.clone()
            },
        ),
        TenantEvent::Missed { at_ms, count } => (
            *at_ms,
            "missed",
            "failed".to_owned(),
            format!("{count} events not recorded"),
            "the relay could not reach its bus for a while; the Asks page has every message"
                .to_owned(),
        ),
    };
    let at_iso = calendar::utc_string(at_ms);
    EventRow {
        seq,
        at_time: at_iso.get(11..19).unwrap_or_default().to_owned(),
        at_iso,
        kind,
        state,
        who,
        what,
    }
}

#[derive(Template)]
#[template(path = "dashboard/events.html")]
struct EventsPage {
    chrome: Chrome,
    rows: Vec<EventRow>,
    last: u64,
}

/// Refuses a session that may not read the tenant's messages.
pub fn may_read(signed: &TenantSession) -> Result<(), PageError> {
    if signed.may(apikey::MESSAGES_READ) {
        return Ok(());
    }
    Err(PageError::Shown(
        StatusCode::FORBIDDEN,
        format!(
            "the event log shows the tenant's messages: it needs a sign-in with a key that holds `{}`",
            apikey::MESSAGES_READ
        ),
    ))
}

/// `GET /dashboard/events`.
pub async fn page(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Response, PageError> {
    let signed = session::required(&state, &headers).await?;
    may_read(&signed)?;
    let tenant_id = signed.tenant_id();
    // From now on every pod records the tenant's events (for an hour after the last look).
    state.cluster.events().note_watched(tenant_id).await;
    let log = state
        .cluster
        .events()
        .latest(tenant_id, SHOWN)
        .await
        .map_err(AppError::from)?;
    let names = Names::load(&state, tenant_id).await?;
    let mut rows: Vec<EventRow> = log.events.iter().filter_map(|e| row(e, &names)).collect();
    rows.reverse();
    Ok(render(&EventsPage {
        chrome: signed.chrome("events"),
        rows,
        last: log.last,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_message_says_how_much_is_not_shown_and_ids_become_names() {
        let text = "x".repeat(crate::cluster::events::PREVIEW_CHARS);
        let message = TenantEvent::Message {
            at_ms: 86_400_000 + 3_723_000,
            message_id: "m".into(),
            kind: "ask".into(),
            from: "alice".into(),
            circle: "dev".into(),
            to: vec!["bob".into(), "carol".into()],
            text: text.clone(),
            text_chars: 1000,
            correlation_id: None,
        };
        let r = row_of(7, &message, &Names::default());
        assert_eq!(r.at_time, "01:02:03");
        assert_eq!(r.who, "alice (dev) → bob, carol");
        assert_eq!(
            r.what,
            format!(
                "{text}… ({} more characters)",
                1000 - crate::cluster::events::PREVIEW_CHARS
            )
        );
        let names = Names(HashMap::from([("p1".into(), "bob".into())]));
        let delivery = TenantEvent::Delivery {
            at_ms: 0,
            message_id: "0190aaaa-bbbb-7ccc-8ddd-0123456789ab".into(),
            sender: "p2".into(),
            recipient: "p1".into(),
            state: "failed".into(),
            reason: Some("inbox full".into()),
        };
        assert_eq!(names.unknown(&delivery), ["p2"]);
        let r = row_of(8, &delivery, &names);
        assert_eq!(r.who, "bob ← p2, message …456789ab");
        assert_eq!(
            (r.state.as_str(), r.what.as_str()),
            ("failed", "inbox full")
        );
    }
}
