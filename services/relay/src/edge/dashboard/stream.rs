//! `GET /dashboard/events/stream`: the tenant's event log as Server-Sent Events, from a cursor
//! (`Last-Event-ID`, which a browser's `EventSource` sends when it reconnects, or `?after=`)
//! onward, so a reconnecting browser — to any pod — misses nothing the log keeps. Events:
//!
//! - `row` (id: the entry's place): one [`EventRow`] as JSON;
//! - `missed`: how many entries after the cursor the log no longer keeps;
//! - `reset`: the log started again (it was idle past its lifetime): the page reloads;
//! - `ended`: the session ended (logout, expiry, revoked key): the page reloads to sign-in.
//!
//! The stream wakes when this pod or another appends to the tenant's log
//! ([`crate::cluster::events::EventLog::watch`]), reads from the bus, and checks its session
//! again every [`RECHECK`]. A pod serves at most [`MAX_STREAMS`] streams of one tenant.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt};
use serde::Deserialize;
use tokio::sync::watch;
use tokio::time::Instant;

use super::events::{Names, may_read, row};
use super::page::PageError;
use super::session;
use crate::state::AppState;

/// How often a stream checks that its session still holds.
pub const RECHECK: Duration = Duration::from_secs(10);
/// Streams of one tenant one pod serves at most.
pub const MAX_STREAMS: usize = 64;
/// Entries read from the bus at a time.
const PAGE: usize = 500;
/// A stream reads the log at least this often even without a notice (one lost with the bus).
const POLL: Duration = RECHECK;
/// Peer ids a stream reloads the names for at most (each once: a peer registered since).
const NAMES_TRIED: usize = 10_000;

/// Where to start.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamQuery {
    /// The last place the page has.
    #[serde(default)]
    after: Option<u64>,
}

/// A stream's state between reads.
struct Tail {
    state: AppState,
    headers: HeaderMap,
    tenant_id: String,
    after: u64,
    notices: watch::Receiver<u64>,
    names: Names,
    /// Ids the names were reloaded for (a forgotten peer's id stays unknown: once is enough).
    tried: std::collections::HashSet<String>,
    checked: Instant,
    done: bool,
}

/// `GET /dashboard/events/stream`.
pub async fn stream(
    State(state): State<AppState>,
    headers: HeaderMap,
    query: Result<Query<StreamQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, PageError> {
    let signed = session::required(&state, &headers).await?;
    may_read(&signed)?;
    let Query(q) = query.map_err(|e| PageError::Shown(StatusCode::BAD_REQUEST, e.body_text()))?;
    let after = match headers.get("last-event-id") {
        Some(v) => v
            .to_str()
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .ok_or_else(|| {
                PageError::Shown(
                    StatusCode::BAD_REQUEST,
                    "Last-Event-ID is not a place in the event log".into(),
                )
            })?,
        None => q.after.unwrap_or(0),
    };
    let tenant_id = signed.tenant_id().to_owned();
    let (notices, watching) = state.cluster.events().watch(&tenant_id);
    if watching > MAX_STREAMS {
        return Err(PageError::Limited(
            format!(
                "this relay already streams {MAX_STREAMS} event logs of this tenant; close a tab"
            ),
            POLL,
        ));
    }
    state.cluster.events().note_watched(&tenant_id).await;
    let names = Names::load(&state, &tenant_id).await?;
    let now = Instant::now();
    let tail = Tail {
        state,
        headers,
        tenant_id,
        after,
        notices,
        names,
        tried: std::collections::HashSet::new(),
        checked: now,
        done: false,
    };
    let mut response = Sse::new(events(tail))
        .keep_alive(KeepAlive::default())
        .into_response();
    // Proxies that buffer (nginx) would hold events back.
    response
        .headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(response)
}

fn events(tail: Tail) -> impl Stream<Item = Result<Event, Infallible>> {
    futures::stream::unfold(tail, |mut tail| async move {
        let batch = next(&mut tail).await?;
        Some((futures::stream::iter(batch.into_iter().map(Ok)), tail))
    })
    .flatten()
}

/// The next events to send; `None` ends the stream.
async fn next(t: &mut Tail) -> Option<Vec<Event>> {
    if t.done {
        return None;
    }
    loop {
        if t.checked.elapsed() >= RECHECK {
            t.checked = Instant::now();
            let holds = matches!(
                session::current(&t.state, &t.headers).await,
                Ok(Some(s)) if s.tenant_id() == t.tenant_id && may_read(&s).is_ok()
            );
            if !holds {
                t.done = true;
                return Some(vec![Event::default().event("ended").data("signed out")]);
            }
            // Still watched: keep the tenant's events recorded.
            t.state.cluster.events().note_watched(&t.tenant_id).await;
        }
        let log = t.state.cluster.events();
        match log.read(&t.tenant_id, t.after, PAGE).await {
            Ok(page) if page.last < t.after => {
                t.done = true;
                return Some(vec![
                    Event::default()
                        .event("reset")
                        .data("the event log started again"),
                ]);
            }
            Ok(page) => {
                let mut out = Vec::new();
                if page.missed > 0 {
                    out.push(
                        Event::default()
                            .event("missed")
                            .data(page.missed.to_string()),
                    );
                }
                let unknown: Vec<String> = page
                    .events
                    .iter()
                    .filter_map(|e| serde_json::from_str(&e.data).ok())
                    .flat_map(|ev| t.names.unknown(&ev))
                    .filter(|id| !t.tried.contains(id))
                    .collect();
                if !unknown.is_empty() && t.tried.len() < NAMES_TRIED {
                    t.tried.extend(unknown);
                    if let Ok(names) = Names::load(&t.state, &t.tenant_id).await {
                        t.names = names;
                    }
                }
                for entry in &page.events {
                    t.after = entry.seq;
                    let Some(row) = row(entry, &t.names) else {
                        continue;
                    };
                    match Event::default()
                        .id(entry.seq.to_string())
                        .event("row")
                        .json_data(&row)
                    {
                        Ok(event) => out.push(event),
                        Err(error) => tracing::warn!(%error, "an event row could not be encoded"),
                    }
                }
                if !out.is_empty() {
                    return Some(out);
                }
            }
            Err(error) => {
                tracing::warn!(%error, tenant = %t.tenant_id, "cannot read the event log; retrying");
            }
        }
        tokio::select! {
            () = t.state.shutdown.cancelled() => return None,
            changed = t.notices.changed() => if changed.is_err() { return None },
            () = tokio::time::sleep(POLL) => {}
        }
    }
}
