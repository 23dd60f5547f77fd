//! The tenant event log: what happened in a tenant — messages accepted, their delivery states,
//! peers coming online, changing turn, going offline — in one order for every pod, for the
//! dashboard's live view (`/dashboard/events`). Each tenant's log is on the bus (a Redis stream
//! across pods, memory for one process), numbered 1, 2, 3 … so a browser that reconnects, to
//! any pod, resumes after the last entry it saw and misses nothing the log still keeps; what
//! the log no longer keeps (it keeps its newest `--event-log-len` entries) is counted and said.
//!
//! Recording never blocks the write path: the dispatcher and the presence code hand events to
//! [`EventLog::record`], and one task appends them in batches. While the bus cannot take them
//! they wait (up to [`HELD`]); past that the oldest are let go and the log gets a `missed`
//! entry saying how many, so a gap is always visible. The log observes: messages and their
//! states are in the database whether or not it records them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use repowire_protocol::DeliveryState;
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, watch};

use crate::cluster::bus::{Bus, BusEvent, EventPage};
use crate::ids::now_ms;

/// How long a tenant's log lives after its last entry.
pub const LOG_TTL: Duration = Duration::from_secs(7 * 24 * 3600);
/// Events held while the bus cannot take them, before the oldest are let go (and counted); as
/// many again may wait to be taken by the appender, past which new ones are let go (counted).
pub const HELD: usize = 50_000;
/// Characters of a message's text the log keeps (the Asks page shows all of it).
pub const PREVIEW_CHARS: usize = 280;
/// Events appended in one batch at most.
const BATCH: usize = 1024;
/// How long a tenant's events are recorded after a dashboard last looked at its event log.
pub const WATCH_TTL: Duration = Duration::from_secs(3600);
/// How long a pod believes what it read of whether a tenant is watched.
const WATCH_CACHE: Duration = Duration::from_secs(5);
/// Limit refusals each tenant's refusal log keeps (the overview's "recent limit refusals").
pub const REFUSALS_KEPT: u64 = 20;

/// The log of a tenant's limit refusals: a log of its own beside the event log (tenant ids hold
/// no `:`, so it is no tenant's), kept short, so the overview reads them without scanning.
fn refusals_of(tenant_id: &str) -> String {
    format!("{tenant_id}:refusals")
}

/// One event of a tenant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TenantEvent {
    /// A message was accepted for these recipients.
    Message {
        /// When (ms since the Unix epoch).
        at_ms: i64,
        /// Its id.
        message_id: String,
        /// `notify`, `ask`, `reply`, `broadcast`.
        kind: String,
        /// The sender's name and circle.
        from: String,
        /// The sender's circle.
        circle: String,
        /// The recipients' names (or ids when not known here).
        to: Vec<String>,
        /// The start of its text, at most [`PREVIEW_CHARS`] characters.
        text: String,
        /// Its text's length in characters.
        text_chars: usize,
        /// The thread it belongs to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        correlation_id: Option<String>,
    },
    /// A recipient's copy of a message changed state.
    Delivery {
        /// When.
        at_ms: i64,
        /// The message.
        message_id: String,
        /// Its sender (peer id).
        sender: String,
        /// The recipient (peer id).
        recipient: String,
        /// The new state (wire spelling).
        state: String,
        /// Why, for failures.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// A peer came online, changed, or went offline.
    Presence {
        /// When.
        at_ms: i64,
        /// `online`, `updated`, `offline`.
        event: String,
        /// The peer's id.
        peer_id: String,
        /// Its name.
        name: String,
        /// Its circle.
        circle: String,
        /// Its turn state (wire spelling), when online.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        turn_state: Option<String>,
    },
    /// A tenant limit refused something (a message, a connection, a registration).
    Refused {
        /// When.
        at_ms: i64,
        /// Which limit (`rate`, `quota`, `message_bytes`, `peers`, …).
        limit: String,
        /// The error code the client got.
        code: String,
        /// What it was told.
        message: String,
        /// Refusals of the same limit not recorded since the previous one (at most one is
        /// recorded a second).
        #[serde(default, skip_serializing_if = "is_zero")]
        repeated: u64,
    },
    /// Events this pod could not record (the bus was unreachable too long).
    Missed {
        /// When they were let go.
        at_ms: i64,
        /// How many.
        count: u64,
    },
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl TenantEvent {
    /// A message accepted for `to`.
    pub fn message(
        m: &crate::storage::store::NewMessage,
        correlation_id: Option<&str>,
        to: Vec<String>,
    ) -> Self {
        let text_chars = m.body.chars().count();
        TenantEvent::Message {
            at_ms: m.created_at_ms,
            message_id: m.message_id.clone(),
            kind: m.kind.as_str().to_owned(),
            from: m.from_name.clone(),
            circle: m.from_circle.clone(),
            to,
            text: m.body.chars().take(PREVIEW_CHARS).collect(),
            text_chars,
            correlation_id: correlation_id.map(str::to_owned),
        }
    }

    /// A delivery state change.
    pub fn delivery(c: &crate::storage::store::StateChange) -> Self {
        TenantEvent::Delivery {
            at_ms: now_ms(),
            message_id: c.message_id.clone(),
            sender: c.sender.clone(),
            recipient: c.recipient.clone(),
            state: DeliveryState::as_str(c.state).to_owned(),
            reason: c.reason.clone(),
        }
    }

    /// A presence frame's event.
    pub fn presence(p: &repowire_protocol::Presence) -> Self {
        let offline = p.event == repowire_protocol::PresenceEvent::Offline;
        TenantEvent::Presence {
            at_ms: now_ms(),
            event: <&str>::from(p.event).to_owned(),
            peer_id: p.peer.peer_id.to_string(),
            name: p.peer.name.clone(),
            circle: p.peer.circle.clone(),
            turn_state: (!offline).then(|| p.peer.turn_state.as_str().to_owned()),
        }
    }
}

/// This pod's side of the tenant event logs: records, and wakes the streams watching a tenant.
#[derive(Debug)]
pub struct EventLog {
    bus: Arc<dyn Bus>,
    tx: mpsc::UnboundedSender<(String, TenantEvent)>,
    /// The newest place each watched tenant's log is known to have reached, for the streams
    /// of this pod that watch it.
    watched: Mutex<HashMap<String, watch::Sender<u64>>>,
    /// Events sent to the appender and not yet taken by it: past [`HELD`], new ones are let go
    /// and counted in `overflow` (the appender turns the counts into `missed` entries).
    queued: std::sync::atomic::AtomicUsize,
    overflow: Mutex<HashMap<String, u64>>,
    /// Whether a dashboard looks at each tenant, as this pod last read it, and when.
    looked_at: Mutex<HashMap<String, (bool, std::time::Instant)>>,
    /// When this pod last told the others that a dashboard looks at a tenant.
    told: Mutex<HashMap<String, std::time::Instant>>,
}

impl EventLog {
    /// Starts the appending task; each tenant's log keeps at least `keep` entries (0: no event
    /// log; limit refusals are still recorded).
    pub fn start(bus: Arc<dyn Bus>, keep: u64) -> Arc<Self> {
        let (tx, rx) = mpsc::unbounded_channel();
        let log = Arc::new(Self {
            bus,
            tx,
            watched: Mutex::new(HashMap::new()),
            queued: std::sync::atomic::AtomicUsize::new(0),
            overflow: Mutex::new(HashMap::new()),
            looked_at: Mutex::new(HashMap::new()),
            told: Mutex::new(HashMap::new()),
        });
        tokio::spawn(append_in_batches(Arc::downgrade(&log), rx, keep));
        log
    }

    /// Whether events of the tenant may be recorded now: `false` only when this pod read
    /// within [`WATCH_CACHE`] that no dashboard looks at it (callers then skip building them;
    /// when unknown, the appender decides).
    pub fn recording(&self, tenant_id: &str) -> bool {
        #[allow(clippy::unwrap_used)] // a poisoned lock only follows a panic elsewhere
        let cached = self.looked_at.lock().unwrap().get(tenant_id).copied();
        !matches!(cached, Some((false, at)) if at.elapsed() < WATCH_CACHE)
    }

    /// Records an event of a tenant (never blocks); a refusal goes to its refusal log too.
    pub fn record(&self, tenant_id: &str, event: TenantEvent) {
        if matches!(event, TenantEvent::Refused { .. }) {
            self.queue(refusals_of(tenant_id), event.clone());
        }
        self.queue(tenant_id.to_owned(), event);
    }

    /// Hands an event to the appender, or counts it let go when [`HELD`] wait already (the
    /// bus has been away long enough for that).
    fn queue(&self, tenant_id: String, event: TenantEvent) {
        use std::sync::atomic::Ordering;
        if self.queued.fetch_add(1, Ordering::Relaxed) >= HELD {
            self.queued.fetch_sub(1, Ordering::Relaxed);
            #[allow(clippy::unwrap_used)] // a poisoned lock only follows a panic elsewhere
            let mut overflow = self.overflow.lock().unwrap();
            *overflow.entry(tenant_id).or_default() += 1;
            return;
        }
        if self.tx.send((tenant_id, event)).is_err() {
            self.queued.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Takes an event off the queue count (the appender took it).
    fn taken(&self) {
        self.queued
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// The tenant's newest `limit` limit refusals, newest first.
    pub async fn refusals(
        &self,
        tenant_id: &str,
        limit: usize,
    ) -> crate::cluster::bus::Result<Vec<TenantEvent>> {
        let page = self
            .bus
            .latest_events(&refusals_of(tenant_id), limit)
            .await?;
        Ok(page
            .events
            .iter()
            .rev()
            .filter_map(|e| serde_json::from_str(&e.data).ok())
            .collect())
    }

    /// A dashboard looks at the tenant's event log (its page, its stream): every pod records
    /// the tenant's events for [`WATCH_TTL`] from now (this one at once, the others within
    /// [`WATCH_CACHE`]).
    pub async fn note_watched(&self, tenant_id: &str) {
        let now = std::time::Instant::now();
        let told = {
            #[allow(clippy::unwrap_used)] // a poisoned lock only follows a panic elsewhere
            let mut told = self.told.lock().unwrap();
            if told.len() > 100_000 {
                told.retain(|_, at| now.duration_since(*at) < WATCH_CACHE * 12);
            }
            told.insert(tenant_id.to_owned(), now)
                .is_some_and(|at| now.duration_since(at) < WATCH_CACHE * 12)
        };
        #[allow(clippy::unwrap_used)] // a poisoned lock only follows a panic elsewhere
        self.looked_at
            .lock()
            .unwrap()
            .insert(tenant_id.to_owned(), (true, now));
        if let Err(error) = self.bus.mark_watched(tenant_id, WATCH_TTL).await {
            tracing::warn!(%error, "could not note that a dashboard watches a tenant");
        }
        // The other pods at once (not at their next read of the mark), when this pod has not
        // told them within the last minute.
        if !told && self.bus.shared() {
            let notice = BusEvent::TenantWatched {
                tenant_id: tenant_id.to_owned(),
            };
            if let Err(error) = self.bus.to_all(&notice).await {
                tracing::debug!(%error, "could not tell the other pods a tenant is watched");
            }
        }
    }

    /// Another pod's dashboard looks at the tenant: record its events from now on.
    pub fn watched_elsewhere(&self, tenant_id: &str) {
        #[allow(clippy::unwrap_used)] // a poisoned lock only follows a panic elsewhere
        self.looked_at
            .lock()
            .unwrap()
            .insert(tenant_id.to_owned(), (true, std::time::Instant::now()));
    }

    /// Whether the tenant's events are recorded now: a dashboard looked at them within
    /// [`WATCH_TTL`] (read from the bus at most every [`WATCH_CACHE`]; when the bus cannot
    /// say, they are).
    async fn watched(&self, tenant_id: &str) -> bool {
        let now = std::time::Instant::now();
        #[allow(clippy::unwrap_used)] // a poisoned lock only follows a panic elsewhere
        let cached = self.looked_at.lock().unwrap().get(tenant_id).copied();
        if let Some((watched, at)) = cached
            && now.duration_since(at) < WATCH_CACHE
        {
            return watched;
        }
        let watched = self.bus.is_watched(tenant_id).await.unwrap_or(true);
        #[allow(clippy::unwrap_used)] // a poisoned lock only follows a panic elsewhere
        let mut looked_at = self.looked_at.lock().unwrap();
        if looked_at.len() > 100_000 {
            looked_at.retain(|_, (_, at)| now.duration_since(*at) < WATCH_CACHE);
        }
        // A watch noted while the bus was read (here or in a notice) is newer: it stays.
        match looked_at.get(tenant_id) {
            Some((newer, at)) if *at > now => *newer,
            _ => {
                looked_at.insert(tenant_id.to_owned(), (watched, now));
                watched
            }
        }
    }

    /// Wakes this pod's streams of a tenant: its log reached `last`.
    pub fn appended(&self, tenant_id: &str, last: u64) {
        #[allow(clippy::unwrap_used)] // a poisoned lock only follows a panic elsewhere
        let mut watched = self.watched.lock().unwrap();
        if let Some(tx) = watched.get(tenant_id) {
            if tx.receiver_count() == 0 {
                watched.remove(tenant_id);
            } else {
                tx.send_modify(|seen| *seen = (*seen).max(last));
            }
        }
    }

    /// Wakes every stream (after the bus was away: notices may have been missed).
    pub fn wake_all(&self) {
        #[allow(clippy::unwrap_used)] // a poisoned lock only follows a panic elsewhere
        let mut watched = self.watched.lock().unwrap();
        watched.retain(|_, tx| tx.receiver_count() > 0);
        for tx in watched.values() {
            tx.send_modify(|_| {});
        }
    }

    /// A receiver that changes when the tenant's log grows, and how many streams of this pod
    /// watch the tenant with it.
    pub fn watch(&self, tenant_id: &str) -> (watch::Receiver<u64>, usize) {
        #[allow(clippy::unwrap_used)] // a poisoned lock only follows a panic elsewhere
        let mut watched = self.watched.lock().unwrap();
        let tx = watched
            .entry(tenant_id.to_owned())
            .or_insert_with(|| watch::channel(0).0);
        let rx = tx.subscribe();
        (rx, tx.receiver_count())
    }

    /// Up to `limit` entries after `after`.
    pub async fn read(
        &self,
        tenant_id: &str,
        after: u64,
        limit: usize,
    ) -> crate::cluster::bus::Result<EventPage> {
        self.bus.read_events(tenant_id, after, limit).await
    }

    /// Drops a tenant's log (deleted or purged): its messages' text goes with it.
    pub async fn forget(&self, tenant_id: &str) {
        let dropped = match self.bus.drop_events(tenant_id).await {
            Ok(()) => self.bus.drop_events(&refusals_of(tenant_id)).await,
            Err(e) => Err(e),
        };
        if let Err(error) = dropped {
            // It expires by itself (LOG_TTL); nobody can sign in to a deleted tenant.
            tracing::warn!(%error, tenant = %tenant_id, "could not drop a deleted tenant's event log");
        }
    }

    /// The newest `limit` entries.
    pub async fn latest(
        &self,
        tenant_id: &str,
        limit: usize,
    ) -> crate::cluster::bus::Result<EventPage> {
        self.bus.latest_events(tenant_id, limit).await
    }
}

/// Events waiting for the bus, in order, and how many of each tenant's were let go.
#[derive(Debug, Default)]
struct Held {
    events: std::collections::VecDeque<(String, TenantEvent)>,
    dropped: HashMap<String, u64>,
}

impl Held {
    fn push(&mut self, tenant_id: String, event: TenantEvent) {
        if self.events.len() >= HELD
            && let Some((t, _)) = self.events.pop_front()
        {
            *self.dropped.entry(t).or_default() += 1;
        }
        self.events.push_back((tenant_id, event));
    }

    /// The next batch by tenant, in order, with the `missed` entries owed first.
    fn batch(&mut self) -> Vec<(String, Vec<TenantEvent>)> {
        let mut by_tenant: Vec<(String, Vec<TenantEvent>)> = Vec::new();
        let mut add = |tenant: String, event: TenantEvent| match by_tenant
            .iter_mut()
            .find(|(t, _)| *t == tenant)
        {
            Some((_, list)) => list.push(event),
            None => by_tenant.push((tenant, vec![event])),
        };
        for (tenant, count) in self.dropped.drain() {
            let at_ms = now_ms();
            add(tenant, TenantEvent::Missed { at_ms, count });
        }
        let n = self.events.len().min(BATCH);
        for (tenant, event) in self.events.drain(..n) {
            add(tenant, event);
        }
        by_tenant
    }

    /// Puts a batch that could not be appended back in front, in order (a `missed` entry
    /// back into the count it came from).
    fn put_back(&mut self, failed: Vec<(String, Vec<TenantEvent>)>) {
        let mut again = std::collections::VecDeque::new();
        for (tenant, events) in failed {
            for event in events {
                match event {
                    TenantEvent::Missed { count, .. } => {
                        *self.dropped.entry(tenant.clone()).or_default() += count;
                    }
                    event => again.push_back((tenant.clone(), event)),
                }
            }
        }
        again.append(&mut self.events);
        self.events = again;
        while self.events.len() > HELD {
            if let Some((t, _)) = self.events.pop_front() {
                *self.dropped.entry(t).or_default() += 1;
            }
        }
    }
}

async fn append_in_batches(
    log: std::sync::Weak<EventLog>,
    mut rx: mpsc::UnboundedReceiver<(String, TenantEvent)>,
    keep: u64,
) {
    let mut held = Held::default();
    let mut retry = Duration::from_millis(100);
    loop {
        if held.events.is_empty() && held.dropped.is_empty() {
            let Some((tenant, event)) = rx.recv().await else {
                return;
            };
            held.push(tenant, event);
            if let Some(log) = log.upgrade() {
                log.taken();
            }
        }
        let Some(log) = log.upgrade() else { return };
        while let Ok((tenant, event)) = rx.try_recv() {
            log.taken();
            held.push(tenant, event);
        }
        #[allow(clippy::unwrap_used)] // a poisoned lock only follows a panic elsewhere
        for (tenant, count) in log.overflow.lock().unwrap().drain() {
            *held.dropped.entry(tenant).or_default() += count;
        }
        let mut failed = Vec::new();
        let mut batch = held.batch().into_iter();
        while let Some((tenant, events)) = batch.next() {
            let refusals = tenant.ends_with(":refusals");
            // A tenant nobody looks at is not recorded (its refusals are: the overview shows
            // them): the log costs the relay only while it is used. With no log at all
            // (`keep` 0), only refusals are.
            if !refusals && (keep == 0 || !log.watched(&tenant).await) {
                continue;
            }
            let encoded: Vec<String> = events
                .iter()
                .filter_map(|e| serde_json::to_string(e).ok())
                .collect();
            let kept = if refusals { REFUSALS_KEPT } else { keep };
            match log
                .bus
                .append_events(&tenant, &encoded, kept, LOG_TTL)
                .await
            {
                Ok(last) => {
                    log.appended(&tenant, last);
                    if log.bus.shared() && !refusals {
                        let notice = BusEvent::EventsAppended {
                            tenant_id: tenant.clone(),
                            last,
                        };
                        if let Err(error) = log.bus.to_all(&notice).await {
                            tracing::debug!(%error, "could not announce new tenant events");
                        }
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, tenant = %tenant, count = events.len(), "could not record tenant events; holding them");
                    // The bus is away: the rest waits too, instead of each tenant's append
                    // waiting out its own timeout.
                    failed.push((tenant, events));
                    failed.extend(batch);
                    break;
                }
            }
        }
        drop(log);
        if failed.is_empty() {
            retry = Duration::from_millis(100);
            continue;
        }
        held.put_back(failed);
        // A backoff before the bus is tried again (not a wait for anything to happen).
        tokio::time::sleep(retry).await;
        retry = (retry * 2).min(Duration::from_secs(5));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::bus::memory::MemoryBus;

    fn presence(at_ms: i64, name: &str) -> TenantEvent {
        TenantEvent::Presence {
            at_ms,
            event: "online".into(),
            peer_id: format!("id-{name}"),
            name: name.into(),
            circle: "dev".into(),
            turn_state: Some("idle".into()),
        }
    }

    #[test]
    fn held_events_past_the_bound_are_counted_and_said_first() {
        let mut held = Held::default();
        for i in 0..(HELD + 3) {
            held.push("t1".into(), presence(i64::try_from(i).unwrap_or(0), "a"));
        }
        assert_eq!(held.events.len(), HELD);
        let batch = held.batch();
        let (tenant, events) = &batch[0];
        assert_eq!(tenant, "t1");
        assert!(
            matches!(events[0], TenantEvent::Missed { count: 3, .. }),
            "{:?}",
            events[0]
        );
        assert_eq!(events[1], presence(3, "a"), "the oldest were let go");
        // A batch the bus refused goes back in front, before what came meanwhile.
        held.push("t1".into(), presence(-1, "late"));
        let second = batch[0].1[2].clone();
        held.put_back(batch);
        assert_eq!(held.events.len(), HELD, "still bounded");
        assert_eq!(
            held.events.front().map(|(_, e)| e.clone()),
            Some(second),
            "the oldest let go again"
        );
        assert_eq!(
            held.dropped.get("t1"),
            Some(&4),
            "and counted with the rest"
        );
    }

    #[tokio::test]
    async fn recorded_events_reach_the_log_in_order_and_wake_the_watchers() {
        let bus: Arc<dyn Bus> = Arc::new(MemoryBus::new("pod"));
        let log = EventLog::start(bus, 100);
        let (mut rx, watching) = log.watch("t1");
        assert_eq!(watching, 1);
        log.note_watched("t1").await;
        log.record("t1", presence(1, "a"));
        log.record("t2", presence(2, "b"));
        log.record("t1", presence(3, "c"));
        while *rx.borrow_and_update() < 2 {
            rx.changed().await.expect("log open");
        }
        let page = log.read("t1", 0, 10).await.expect("read");
        let names: Vec<String> = page
            .events
            .iter()
            .map(|e| match serde_json::from_str(&e.data).expect("event") {
                TenantEvent::Presence { name, .. } => name,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(names, ["a", "c"], "t1's events only, in order");
        assert_eq!(
            log.read("t2", 0, 10).await.expect("read").last,
            0,
            "a tenant no dashboard looks at is not recorded"
        );
    }
}
