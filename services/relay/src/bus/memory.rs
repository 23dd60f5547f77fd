//! The bus of a single process: presence in memory (with the same TTL semantics as Redis),
//! events to this pod's own subscribers.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::{Bus, BusEvent, Presence, Result};

/// Single-process bus.
#[derive(Debug)]
pub struct MemoryBus {
    pod: String,
    presence: Mutex<HashMap<(String, String), (Presence, Instant)>>,
    subscribers: Mutex<Vec<mpsc::UnboundedSender<BusEvent>>>,
}

impl MemoryBus {
    /// A bus for pod `pod`.
    pub fn new(pod: impl Into<String>) -> Self {
        Self {
            pod: pod.into(),
            presence: Mutex::new(HashMap::new()),
            subscribers: Mutex::new(Vec::new()),
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
    ) -> Result<bool> {
        let mut map = self.presence.lock().unwrap();
        let key = (tenant_id.to_owned(), presence.peer_id.clone());
        let now = Instant::now();
        if map
            .get(&key)
            .is_some_and(|(p, until)| *until > now && p.pod != self.pod)
        {
            return Ok(false);
        }
        map.insert(key, (presence.clone(), now + ttl));
        Ok(true)
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
