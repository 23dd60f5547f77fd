//! `GET /dashboard`: the tenant's peers by circle (status, turn, what each is doing, machine,
//! runtime, last seen) and this month's usage against its plan's limits.

use askama::Template;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;

use super::page::{Chrome, PageError, render};
use super::session;
use crate::ids::now_ms;
use crate::state::AppState;
use crate::storage::store::TenantKey;
use crate::tenancy::usage::calendar;

/// One usage figure against its limit.
#[derive(Debug)]
pub struct UsageLine {
    label: &'static str,
    used: i64,
    used_text: String,
    max: Option<i64>,
    max_text: String,
    /// Where the meter turns amber and red.
    low: i64,
    high: i64,
}

impl UsageLine {
    fn new(label: &'static str, used: i64, max: Option<i64>, text: fn(i64) -> String) -> Self {
        let m = max.unwrap_or(0);
        Self {
            label,
            used,
            used_text: text(used),
            max,
            max_text: max.map(text).unwrap_or_default(),
            low: m / 4 * 3,
            high: m / 10 * 9,
        }
    }
}

/// One peer as the table shows it.
#[derive(Debug)]
pub struct PeerRow {
    name: String,
    role: String,
    status: String,
    turn_state: String,
    description: String,
    machine: String,
    backend: String,
    last_seen_iso: String,
    last_seen_ago: String,
}

/// A circle and its peers.
#[derive(Debug)]
pub struct CircleRows {
    name: String,
    online: usize,
    peers: Vec<PeerRow>,
}

#[derive(Template)]
#[template(path = "dashboard/overview.html")]
struct Overview {
    chrome: Chrome,
    tenant_name: String,
    plan: String,
    month_start: String,
    month_resets: String,
    usage: Vec<UsageLine>,
    circles: Vec<CircleRows>,
    online: usize,
    total: usize,
    refusals: Vec<RefusalLine>,
}

/// A recent limit refusal.
#[derive(Debug)]
pub struct RefusalLine {
    at_iso: String,
    at_ago: String,
    limit: String,
    message: String,
}

/// Recent limit refusals the overview shows.
const REFUSALS_SHOWN: usize = 10;

/// `12,345`.
fn count(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(d);
    }
    if n < 0 { format!("-{out}") } else { out }
}

fn bytes(n: i64) -> String {
    match n {
        n if n >= 1 << 20 => format!("{:.1} MiB", n as f64 / f64::from(1 << 20)),
        n if n >= 1 << 10 => format!("{:.1} KiB", n as f64 / f64::from(1 << 10)),
        n => format!("{n} B"),
    }
}

/// "just now", "5 min ago", "3 h ago", "2 days ago".
pub fn ago(then_ms: i64, now_ms: i64) -> String {
    let secs = (now_ms - then_ms).max(0) / 1000;
    match secs {
        0..60 => "just now".into(),
        60..3600 => format!("{} min ago", secs / 60),
        3600..86_400 => format!("{} h ago", secs / 3600),
        _ => format!("{} days ago", secs / 86_400),
    }
}

/// `GET /dashboard`.
pub async fn page(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Response, PageError> {
    let signed = session::required(&state, &headers).await?;
    let tenant_id = signed.tenant_id().to_owned();
    let now = now_ms();
    let detail = crate::tenancy::admin::tenants::get_tenant_by(
        state.store.as_ref(),
        TenantKey::Id(&tenant_id),
    )
    .await
    .map_err(crate::error::AppError::from)?;
    let start = calendar::month_start(now);
    let end = calendar::next_month_start(start);
    let messages = state.store.messages_counted(&tenant_id, start, end).await?;
    let limits = &detail.effective_limits;
    let usage = vec![
        UsageLine::new("Messages", messages, limits.messages_per_month, count),
        UsageLine::new(
            "Stored peers",
            detail.stored_peers,
            limits.max_stored_peers,
            count,
        ),
        UsageLine::new(
            "Shared state",
            detail.state_bytes,
            limits.max_state_bytes,
            bytes,
        ),
    ];

    let ttl = i64::try_from(state.config.description_ttl().as_millis()).unwrap_or(i64::MAX / 4);
    let members = crate::routing::roster::members(&state, &tenant_id).await?;
    let total = members.len();
    let mut circles: Vec<CircleRows> = Vec::new();
    for member in members {
        let info = member.info();
        // A description past its TTL is not shown (the list frame clears it; reading here
        // changes nothing).
        let fresh = member
            .record
            .description_at_ms
            .is_none_or(|at| at.saturating_add(ttl) > now);
        let row = PeerRow {
            name: info.name,
            role: serde_plain(&info.role),
            status: serde_plain(&info.status),
            turn_state: serde_plain(&info.turn_state),
            description: info.description.filter(|_| fresh).unwrap_or_default(),
            machine: info.machine.unwrap_or_default(),
            backend: info.backend,
            last_seen_iso: calendar::utc_string(info.last_seen_ms),
            last_seen_ago: ago(info.last_seen_ms, now),
        };
        let online = member.online();
        match circles.last_mut() {
            Some(c) if c.name == info.circle => {
                c.online += usize::from(online);
                c.peers.push(row);
            }
            _ => circles.push(CircleRows {
                name: info.circle,
                online: usize::from(online),
                peers: vec![row],
            }),
        }
    }
    let online = circles.iter().map(|c| c.online).sum();
    // Recent limit refusals: the page still shows without them when the bus cannot be read.
    let refusals = match state
        .cluster
        .events()
        .refusals(&tenant_id, REFUSALS_SHOWN)
        .await
    {
        Ok(list) => list,
        Err(error) => {
            tracing::warn!(%error, "cannot read recent limit refusals");
            Vec::new()
        }
    };
    let refusals = refusals
        .into_iter()
        .filter_map(|e| match e {
            crate::cluster::events::TenantEvent::Refused {
                at_ms,
                limit,
                message,
                repeated,
                ..
            } => Some(RefusalLine {
                at_iso: calendar::utc_string(at_ms),
                at_ago: ago(at_ms, now),
                limit,
                message: if repeated > 0 {
                    format!("{message} (and {repeated} more like it since the one before)")
                } else {
                    message
                },
            }),
            _ => None,
        })
        .collect();
    Ok(render(&Overview {
        refusals,
        chrome: signed.chrome("overview"),
        tenant_name: detail
            .tenant
            .display_name
            .clone()
            .unwrap_or_else(|| detail.tenant.name.clone()),
        plan: detail.tenant.plan.clone(),
        month_start: calendar::utc_string(start)[..10].to_owned(),
        month_resets: calendar::utc_string(end)[..10].to_owned(),
        usage,
        circles,
        online,
        total,
    }))
}

/// A wire enum's spelling (`"busy"`, `"working"`).
fn serde_plain<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_as_people_say_them() {
        let now = 10_000_000_000;
        assert_eq!(ago(now - 5_000, now), "just now");
        assert_eq!(ago(now - 125_000, now), "2 min ago");
        assert_eq!(ago(now - 3 * 3_600_000, now), "3 h ago");
        assert_eq!(ago(now - 50 * 3_600_000, now), "2 days ago");
        assert_eq!(ago(now + 5_000, now), "just now");
    }

    #[test]
    fn counts_have_thousands_separators() {
        assert_eq!(count(0), "0");
        assert_eq!(count(999), "999");
        assert_eq!(count(10_000), "10,000");
        assert_eq!(count(1_234_567), "1,234,567");
        assert_eq!(count(-1_000), "-1,000");
    }

    #[test]
    fn byte_counts_are_readable() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(2048), "2.0 KiB");
        assert_eq!(bytes(3 << 20), "3.0 MiB");
    }
}
