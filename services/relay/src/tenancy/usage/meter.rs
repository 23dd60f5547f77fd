//! Connection time and peaks, measured by each pod in memory and added to the usage rows every
//! flush interval (`REPOWIRE_USAGE_FLUSH_MS`) and once more at a clean stop (see
//! [`crate::tenancy::flusher`]). Message counts are not here: they are stored with the messages.
//!
//! What a kill loses: a pod killed without a clean stop loses what it measured since its last
//! successful flush — at most one flush interval of its connections' time, and the peaks it saw
//! in that interval (a peak that lasts is seen again by the next connection, registration or
//! heartbeat on any pod).
//!
//! Peaks are cluster-wide: a connection's pod reads the tenant's open connections from the bus
//! when it takes the slot and at every heartbeat, a registration's pod counts the tenant's live
//! peers on every pod, and the rows keep the largest value an hour saw.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use crate::ids::now_ms;
use crate::storage::store::UsageAdd;
use crate::storage::store::metering::{HOUR_MS, metric};

/// The measurements of one pod, per tenant, since its last flush.
#[derive(Debug, Default)]
pub struct Meter {
    tallies: Mutex<HashMap<String, Tally>>,
}

#[derive(Debug, Default)]
struct Tally {
    /// Connections open on this pod.
    open: i64,
    /// Connection time is measured up to here (ms).
    since_ms: i64,
    /// `(hour, metric) → value` not yet flushed.
    adds: BTreeMap<(i64, &'static str), i64>,
}

fn hour_of(at_ms: i64) -> i64 {
    at_ms.div_euclid(HOUR_MS) * HOUR_MS
}

impl Tally {
    /// Adds the open connections' time up to `now_ms`, split at hour boundaries.
    fn integrate(&mut self, now_ms: i64) {
        let mut at = self.since_ms;
        if self.open > 0 {
            while at < now_ms {
                let hour = hour_of(at);
                let until = now_ms.min(hour + HOUR_MS);
                *self.adds.entry((hour, metric::CONNECTION_MS)).or_insert(0) +=
                    self.open * (until - at);
                at = until;
            }
        }
        // A clock that stepped back measures nothing until it passes `since_ms` again.
        self.since_ms = self.since_ms.max(now_ms);
    }

    fn peak(&mut self, metric: &'static str, value: i64, at_ms: i64) {
        let held = self.adds.entry((hour_of(at_ms), metric)).or_insert(0);
        *held = (*held).max(value);
    }
}

/// An open connection, measured until dropped.
#[derive(Debug)]
pub struct Open {
    meter: Arc<Meter>,
    tenant_id: String,
}

impl Drop for Open {
    fn drop(&mut self) {
        self.meter.closed_at(&self.tenant_id, now_ms());
    }
}

fn count(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl Meter {
    fn with<R>(&self, tenant_id: &str, now_ms: i64, f: impl FnOnce(&mut Tally) -> R) -> R {
        let mut tallies = self.tallies.lock().unwrap_or_else(|p| p.into_inner());
        let tally = tallies
            .entry(tenant_id.to_owned())
            .or_insert_with(|| Tally {
                since_ms: now_ms,
                ..Tally::default()
            });
        tally.integrate(now_ms);
        f(tally)
    }

    /// A connection of `tenant_id` opened now; `cluster_open` is the tenant's open connections
    /// in the cluster with this one (from the bus; `None` when it could not be read).
    pub fn opened(self: &Arc<Self>, tenant_id: &str, cluster_open: Option<u64>) -> Open {
        self.opened_at(tenant_id, cluster_open, now_ms());
        Open {
            meter: self.clone(),
            tenant_id: tenant_id.to_owned(),
        }
    }

    /// [`Meter::opened`] at `now_ms`, without the guard.
    pub fn opened_at(&self, tenant_id: &str, cluster_open: Option<u64>, now_ms: i64) {
        self.with(tenant_id, now_ms, |t| {
            t.open += 1;
            let seen = t.open.max(cluster_open.map_or(0, count));
            t.peak(metric::PEAK_CONNECTIONS, seen, now_ms);
        });
    }

    /// A connection of `tenant_id` closed at `now_ms`.
    pub fn closed_at(&self, tenant_id: &str, now_ms: i64) {
        self.with(tenant_id, now_ms, |t| t.open = (t.open - 1).max(0));
    }

    /// The tenant has `cluster_open` connections open in the cluster (a heartbeat's reading).
    pub fn connections_at(&self, tenant_id: &str, cluster_open: u64, now_ms: i64) {
        self.with(tenant_id, now_ms, |t| {
            let seen = t.open.max(count(cluster_open));
            t.peak(metric::PEAK_CONNECTIONS, seen, now_ms);
        });
    }

    /// The tenant has `live` peers live in the cluster.
    pub fn peers_at(&self, tenant_id: &str, live: u64, now_ms: i64) {
        self.with(tenant_id, now_ms, |t| {
            t.peak(metric::PEAK_PEERS, count(live), now_ms);
        });
    }

    /// Everything measured up to `now_ms`, taken out for a flush. The hour `now_ms` is in
    /// gets each tenant's open connections here as its peak so far, so a level that lasts
    /// into a new hour is that hour's peak too. Tenants with nothing open are forgotten.
    pub fn take_at(&self, now_ms: i64) -> Vec<UsageAdd> {
        let mut tallies = self.tallies.lock().unwrap_or_else(|p| p.into_inner());
        let mut rows = Vec::new();
        for (tenant_id, tally) in tallies.iter_mut() {
            tally.integrate(now_ms);
            if tally.open > 0 {
                let open = tally.open;
                tally.peak(metric::PEAK_CONNECTIONS, open, now_ms);
            }
            for ((hour_ms, metric), value) in std::mem::take(&mut tally.adds) {
                if value > 0 {
                    rows.push(UsageAdd {
                        tenant_id: tenant_id.clone(),
                        hour_ms,
                        metric,
                        value,
                    });
                }
            }
        }
        tallies.retain(|_, t| t.open > 0);
        rows
    }

    /// Puts back what a failed flush took, to go with the next one.
    pub fn restore(&self, rows: Vec<UsageAdd>) {
        let mut tallies = self.tallies.lock().unwrap_or_else(|p| p.into_inner());
        for r in rows {
            let tally = tallies.entry(r.tenant_id).or_insert_with(|| Tally {
                since_ms: now_ms(),
                ..Tally::default()
            });
            let held = tally.adds.entry((r.hour_ms, r.metric)).or_insert(0);
            if metric::is_peak(r.metric) {
                *held = (*held).max(r.value);
            } else {
                *held += r.value;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-11-24 10:00 UTC.
    const T0: i64 = 1_795_860_000_000;

    fn value(rows: &[UsageAdd], tenant: &str, hour_ms: i64, metric: &str) -> i64 {
        rows.iter()
            .filter(|r| r.tenant_id == tenant && r.hour_ms == hour_ms && r.metric == metric)
            .map(|r| r.value)
            .sum()
    }

    #[test]
    fn connection_time_is_split_at_hour_boundaries_and_each_flush_takes_it_once() {
        let m = Meter::default();
        m.opened_at("a", Some(1), T0 + HOUR_MS - 1_000);
        m.opened_at("a", Some(2), T0 + HOUR_MS - 500);
        m.closed_at("a", T0 + HOUR_MS + 2_000);
        let rows = m.take_at(T0 + HOUR_MS + 3_000);
        // 1 s + 0.5 s before the hour; 2 s + 2 s after it; then one connection for 1 s.
        assert_eq!(value(&rows, "a", T0, metric::CONNECTION_MS), 1_500);
        assert_eq!(
            value(&rows, "a", T0 + HOUR_MS, metric::CONNECTION_MS),
            5_000
        );
        assert_eq!(value(&rows, "a", T0, metric::PEAK_CONNECTIONS), 2);
        assert_eq!(
            value(&rows, "a", T0 + HOUR_MS, metric::PEAK_CONNECTIONS),
            1,
            "the level still open carries into the new hour"
        );
        let again = m.take_at(T0 + HOUR_MS + 3_000);
        assert!(
            again.iter().all(|r| r.metric != metric::CONNECTION_MS),
            "a second flush at the same moment adds no time: {again:?}"
        );
        m.closed_at("a", T0 + HOUR_MS + 4_000);
        let last = m.take_at(T0 + HOUR_MS + 9_000);
        assert_eq!(
            value(&last, "a", T0 + HOUR_MS, metric::CONNECTION_MS),
            1_000
        );
        assert!(
            m.take_at(T0 + HOUR_MS + 20_000).is_empty(),
            "a tenant with nothing open is forgotten"
        );
    }

    #[test]
    fn peaks_keep_the_cluster_reading_and_tenants_stay_apart() {
        let m = Meter::default();
        m.opened_at("a", Some(5), T0);
        m.connections_at("a", 3, T0 + 10);
        m.peers_at("a", 4, T0 + 20);
        m.peers_at("b", 2, T0 + 30);
        let rows = m.take_at(T0 + 1_000);
        assert_eq!(value(&rows, "a", T0, metric::PEAK_CONNECTIONS), 5);
        assert_eq!(value(&rows, "a", T0, metric::PEAK_PEERS), 4);
        assert_eq!(value(&rows, "b", T0, metric::PEAK_PEERS), 2);
        assert_eq!(value(&rows, "b", T0, metric::CONNECTION_MS), 0);
        assert_eq!(value(&rows, "a", T0, metric::CONNECTION_MS), 1_000);
    }

    #[test]
    fn a_failed_flush_is_put_back_and_goes_with_the_next() {
        let m = Meter::default();
        m.opened_at("a", None, T0);
        let failed = m.take_at(T0 + 1_000);
        m.restore(failed);
        m.closed_at("a", T0 + 1_500);
        let rows = m.take_at(T0 + 2_000);
        assert_eq!(value(&rows, "a", T0, metric::CONNECTION_MS), 1_500);
        assert_eq!(value(&rows, "a", T0, metric::PEAK_CONNECTIONS), 1);
    }

    #[test]
    fn what_a_kill_loses_is_what_was_measured_since_the_last_flush() {
        // Flushing every 10 s, a connection open for 35 s: the flushes at 10, 20 and 30 s
        // stored 30 s; a kill at 35 s loses the 5 s since, less than one interval.
        let m = Meter::default();
        m.opened_at("a", None, T0);
        let mut stored = 0;
        for flush in 1..=3 {
            stored += value(
                &m.take_at(T0 + flush * 10_000),
                "a",
                T0,
                metric::CONNECTION_MS,
            );
        }
        let kill = T0 + 35_000;
        let lost = (kill - T0) - stored;
        assert_eq!(stored, 30_000);
        assert!((0..10_000).contains(&lost), "lost {lost} ms");
    }
}
