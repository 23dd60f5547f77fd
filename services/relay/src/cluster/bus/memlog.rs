//! Tenant event logs in memory, for [`super::memory::MemoryBus`]: the same numbering, trimming
//! and lifetime as the Redis streams of [`super::redis`].

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use tokio::time::Instant;

use super::{EventPage, LoggedEvent};

/// One tenant's log.
#[derive(Debug)]
struct Log {
    last: u64,
    entries: VecDeque<LoggedEvent>,
    /// Dropped (as if it never was) after this.
    until: Instant,
}

/// Every tenant's log.
#[derive(Debug, Default)]
pub struct MemLogs {
    logs: HashMap<String, Log>,
}

impl MemLogs {
    /// The tenant's log, unless its lifetime is over (then it is dropped).
    fn live(&mut self, tenant_id: &str) -> Option<&mut Log> {
        let now = Instant::now();
        if self.logs.get(tenant_id).is_some_and(|l| l.until <= now) {
            self.logs.remove(tenant_id);
        }
        self.logs.get_mut(tenant_id)
    }

    /// See [`super::Bus::append_events`].
    pub fn append(&mut self, tenant_id: &str, events: &[String], keep: u64, ttl: Duration) -> u64 {
        let until = Instant::now() + ttl;
        if self.live(tenant_id).is_none() {
            self.logs.insert(
                tenant_id.to_owned(),
                Log {
                    last: 0,
                    entries: VecDeque::new(),
                    until,
                },
            );
        }
        let Some(log) = self.logs.get_mut(tenant_id) else {
            return 0;
        };
        log.until = until;
        for data in events {
            log.last += 1;
            log.entries.push_back(LoggedEvent {
                seq: log.last,
                data: data.clone(),
            });
        }
        let keep = usize::try_from(keep.max(1)).unwrap_or(usize::MAX);
        while log.entries.len() > keep {
            log.entries.pop_front();
        }
        log.last
    }

    /// See [`super::Bus::read_events`].
    pub fn read(&mut self, tenant_id: &str, after: u64, limit: usize) -> EventPage {
        let Some(log) = self.live(tenant_id) else {
            return EventPage::default();
        };
        let events: Vec<LoggedEvent> = log
            .entries
            .iter()
            .filter(|e| e.seq > after)
            .take(limit)
            .cloned()
            .collect();
        EventPage {
            missed: missed(after, &events),
            events,
            last: log.last,
        }
    }

    /// See [`super::Bus::drop_events`].
    pub fn drop_log(&mut self, tenant_id: &str) {
        self.logs.remove(tenant_id);
    }

    /// See [`super::Bus::latest_events`].
    pub fn latest(&mut self, tenant_id: &str, limit: usize) -> EventPage {
        let Some(log) = self.live(tenant_id) else {
            return EventPage::default();
        };
        let skip = log.entries.len().saturating_sub(limit);
        EventPage {
            events: log.entries.iter().skip(skip).cloned().collect(),
            missed: 0,
            last: log.last,
        }
    }
}

/// Entries after `after` that are gone: those between the cursor and the first entry read
/// (the newest entry is never trimmed, so a read that finds nothing after the cursor missed
/// nothing). Counted from what the read returned, so an append racing the read cannot make it
/// count entries that were read.
pub fn missed(after: u64, read: &[LoggedEvent]) -> u64 {
    read.first()
        .map_or(0, |e| e.seq.saturating_sub(after.saturating_add(1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_after_a_trimmed_cursor_are_counted_as_missed() {
        let at = |seq: u64| LoggedEvent {
            seq,
            data: String::new(),
        };
        assert_eq!(missed(0, &[at(1)]), 0);
        assert_eq!(missed(3, &[at(4), at(5)]), 0);
        assert_eq!(missed(3, &[at(8)]), 4);
        assert_eq!(missed(0, &[at(6)]), 5);
        assert_eq!(missed(12, &[]), 0, "nothing read, nothing missed");
    }

    #[tokio::test(start_paused = true)]
    async fn a_log_keeps_its_newest_entries_and_is_dropped_after_its_lifetime() {
        let mut logs = MemLogs::default();
        let ttl = Duration::from_secs(60);
        let batch: Vec<String> = (1..=5).map(|i| format!("e{i}")).collect();
        assert_eq!(logs.append("t1", &batch, 3, ttl), 5);
        let page = logs.read("t1", 0, 10);
        assert_eq!(page.last, 5);
        assert_eq!(page.missed, 2);
        assert_eq!(
            page.events.iter().map(|e| e.seq).collect::<Vec<_>>(),
            [3, 4, 5]
        );
        assert_eq!(logs.read("t1", 4, 10).events.len(), 1);
        assert_eq!(logs.read("t1", 4, 10).missed, 0);
        assert_eq!(logs.latest("t1", 2).events[0].seq, 4);
        assert_eq!(
            logs.read("t2", 0, 10),
            EventPage::default(),
            "tenants apart"
        );
        tokio::time::advance(ttl).await;
        assert_eq!(logs.read("t1", 0, 10).last, 0, "dropped after its lifetime");
        assert_eq!(
            logs.append("t1", &batch[..1], 3, ttl),
            1,
            "and started again"
        );
    }
}
