//! The bus of a single process: presence in memory (with the same TTL semantics as Redis),
//! events to this pod's own subscribers.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::memlog::MemLogs;
use super::{Bus, BusEvent, EventPage, Presence, Refreshed, Result};
use crate::cluster::bus::gcra::{self, Grant, Rate};

/// Single-process bus.
#[derive(Debug)]
pub struct MemoryBus {
    pod: String,
    presence: Mutex<HashMap<(String, String), (Presence, Instant)>>,
    subscribers: Mutex<Vec<mpsc::UnboundedSender<BusEvent>>>,
    /// Message buckets by tenant (`gcra` theoretical arrival times, µs since `epoch`).
    buckets: Mutex<HashMap<String, f64>>,
    epoch: Instant,
    /// Connection slots by tenant, with their expiry (ms since the Unix epoch).
    slots: Mutex<HashMap<String, HashMap<String, i64>>>,
    /// Tenant event logs.
    logs: Mutex<MemLogs>,
    /// Tenants a dashboard looks at, until when.
    watched: Mutex<HashMap<String, Instant>>,
}

impl MemoryBus {
    /// A bus for pod `pod`.
    pub fn new(pod: impl Into<String>) -> Self {
        Self {
            pod: pod.into(),
            presence: Mutex::new(HashMap::new()),
            subscribers: Mutex::new(Vec::new()),
            buckets: Mutex::new(HashMap::new()),
            epoch: Instant::now(),
            slots: Mutex::new(HashMap::new()),
            logs: Mutex::new(MemLogs::default()),
            watched: Mutex::new(HashMap::new()),
        }
    }

    #[allow(clippy::unwrap_used)] // a poisoned lock only follows a panic elsewhere
    fn publish(&self, event: &BusEvent) {
        self.subscribers
            .lock()
            .unwrap()
            .retain(|tx| tx.send(event.clone()).is_ok());
    }
}

#[allow(clippy::unwrap_used)] // a poisoned lock only follows a panic elsewhere
#[async_trait]
impl Bus for MemoryBus {
    fn pod(&self) -> &str {
        &self.pod
    }

    fn shared(&self) -> bool {
        false
    }

    async fn ping(&self) -> Result<()> {
        Ok(())
    }

    async fn to_pod(&self, pod: &str, event: &BusEvent) -> Result<()> {
        if pod == self.pod {
            self.publish(event);
        }
        Ok(())
    }

    async fn to_all(&self, event: &BusEvent) -> Result<()> {
        self.publish(event);
        Ok(())
    }

    async fn subscribe(&self) -> Result<mpsc::UnboundedReceiver<BusEvent>> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.subscribers.lock().unwrap().push(tx);
        Ok(rx)
    }

    async fn set_presence(
        &self,
        tenant_id: &str,
        presence: &Presence,
        ttl: Duration,
    ) -> Result<()> {
        self.presence.lock().unwrap().insert(
            (tenant_id.to_owned(), presence.peer_id.clone()),
            (presence.clone(), Instant::now() + ttl),
        );
        Ok(())
    }

    async fn refresh_presence(
        &self,
        tenant_id: &str,
        presence: &Presence,
        ttl: Duration,
    ) -> Result<Refreshed> {
        let mut map = self.presence.lock().unwrap();
        let key = (tenant_id.to_owned(), presence.peer_id.clone());
        let now = Instant::now();
        let answer = match map.get(&key) {
            Some((p, until)) if *until > now && p.pod != self.pod => return Ok(Refreshed::Taken),
            Some((_, until)) if *until > now => Refreshed::Kept,
            _ => Refreshed::Recreated,
        };
        map.insert(key, (presence.clone(), now + ttl));
        Ok(answer)
    }

    async fn clear_presence(&self, tenant_id: &str, peer_id: &str) -> Result<bool> {
        let mut map = self.presence.lock().unwrap();
        let key = (tenant_id.to_owned(), peer_id.to_owned());
        if map.get(&key).is_some_and(|(p, _)| p.pod == self.pod) {
            map.remove(&key);
            return Ok(true);
        }
        Ok(false)
    }

    async fn presence(&self, tenant_id: &str, peer_id: &str) -> Result<Option<Presence>> {
        let now = Instant::now();
        Ok(self
            .presence
            .lock()
            .unwrap()
            .get(&(tenant_id.to_owned(), peer_id.to_owned()))
            .filter(|(_, until)| *until > now)
            .map(|(p, _)| p.clone()))
    }

    async fn take_tokens(&self, tenant_id: &str, rate: Rate, want: u64) -> Result<Grant> {
        let now_us = self.epoch.elapsed().as_micros() as f64;
        let mut buckets = self.buckets.lock().unwrap();
        let (grant, tat) = gcra::take(buckets.get(tenant_id).copied(), now_us, rate, want);
        buckets.insert(tenant_id.to_owned(), tat);
        Ok(grant)
    }

    async fn hold_connection(
        &self,
        tenant_id: &str,
        slot: &str,
        max: Option<u64>,
        expires_at_ms: i64,
    ) -> Result<Option<u64>> {
        let now = crate::ids::now_ms();
        let mut slots = self.slots.lock().unwrap();
        let held = slots.entry(tenant_id.to_owned()).or_default();
        held.retain(|_, until| *until > now);
        if !held.contains_key(slot) && max.is_some_and(|max| held.len() as u64 >= max) {
            return Ok(None);
        }
        held.insert(slot.to_owned(), expires_at_ms);
        Ok(Some(held.len() as u64))
    }

    async fn refresh_connections(
        &self,
        tenant_id: &str,
        slots: &[String],
        expires_at_ms: i64,
    ) -> Result<u64> {
        let now = crate::ids::now_ms();
        let mut all = self.slots.lock().unwrap();
        let Some(held) = all.get_mut(tenant_id) else {
            return Ok(0);
        };
        for slot in slots {
            if let Some(until) = held.get_mut(slot) {
                *until = expires_at_ms;
            }
        }
        Ok(held.values().filter(|until| **until > now).count() as u64)
    }

    async fn release_connection(&self, tenant_id: &str, slot: &str) -> Result<()> {
        let mut slots = self.slots.lock().unwrap();
        if let Some(held) = slots.get_mut(tenant_id) {
            held.remove(slot);
            if held.is_empty() {
                slots.remove(tenant_id);
            }
        }
        Ok(())
    }

    async fn append_events(
        &self,
        tenant_id: &str,
        events: &[String],
        keep: u64,
        ttl: Duration,
    ) -> Result<u64> {
        Ok(self
            .logs
            .lock()
            .unwrap()
            .append(tenant_id, events, keep, ttl))
    }

    async fn read_events(&self, tenant_id: &str, after: u64, limit: usize) -> Result<EventPage> {
        Ok(self.logs.lock().unwrap().read(tenant_id, after, limit))
    }

    async fn latest_events(&self, tenant_id: &str, limit: usize) -> Result<EventPage> {
        Ok(self.logs.lock().unwrap().latest(tenant_id, limit))
    }

    async fn drop_events(&self, tenant_id: &str) -> Result<()> {
        self.logs.lock().unwrap().drop_log(tenant_id);
        Ok(())
    }

    async fn mark_watched(&self, tenant_id: &str, ttl: Duration) -> Result<()> {
        let until = Instant::now() + ttl;
        let mut watched = self.watched.lock().unwrap();
        watched.retain(|_, at| *at > Instant::now());
        watched.insert(tenant_id.to_owned(), until);
        Ok(())
    }

    async fn is_watched(&self, tenant_id: &str) -> Result<bool> {
        Ok(self
            .watched
            .lock()
            .unwrap()
            .get(tenant_id)
            .is_some_and(|until| *until > Instant::now()))
    }

    async fn tenant_presence(&self, tenant_id: &str) -> Result<Vec<Presence>> {
        let now = Instant::now();
        let mut out: Vec<Presence> = self
            .presence
            .lock()
            .unwrap()
            .iter()
            .filter(|((t, _), (_, until))| t == tenant_id && *until > now)
            .map(|(_, (p, _))| p.clone())
            .collect();
        out.sort_by(|a, b| a.peer_id.cmp(&b.peer_id));
        Ok(out)
    }
}
