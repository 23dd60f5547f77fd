//! The bus of a cluster, on Redis: presence as one hash per peer (`pod`, `data`) with a TTL
//! plus a per-tenant index (a sorted set scored by expiry); events over pub/sub on one channel
//! per pod and one for all pods. Commands go through a `ConnectionManager` (reconnects by
//! itself); the subscription has its own connection and re-subscribes after it breaks.
//!
//! Keys: `{prefix}:t:{tenant}:p:{peer}`, `{prefix}:t:{tenant}:peers` and the display-name
//! claims `{prefix}:t:{tenant}:n:{circle}:{name}` (the holder's peer id, living as long as its
//! presence), the message buckets `{prefix}:t:{tenant}:rate` ([`limits`]), the event logs
//! `{prefix}:t:{tenant}:events` ([`events`]); channels
//! `{prefix}:pod:{pod}` and `{prefix}:all`.

use std::collections::HashMap;
use std::sync::LazyLock;
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use redis::AsyncCommands;
use redis::aio::ConnectionManager;
use tokio::sync::mpsc;

mod events;
mod limits;

use super::{Bus, BusError, BusEvent, EventPage, Presence, Refreshed, Result, Target};
use crate::cluster::bus::gcra::{Grant, Rate};

fn unavailable(e: redis::RedisError) -> BusError {
    BusError::Unavailable(e.to_string())
}

/// How the command connection reconnects. While Redis is away every command waits for the
/// reconnect in progress; the library's default (six retries, up to 3.2 s apart, with jitter)
/// holds a command for up to ~13 s, and a broadcast makes several, so a client waited longer
/// than any sane timeout for its `unavailable`. Two quick retries bound one command to about
/// 0.5 s when the port refuses and about 3.5 s when it black-holes; the next command after
/// Redis is back reconnects, so recovery needs no retry budget here.
fn reconnect_policy() -> redis::aio::ConnectionManagerConfig {
    redis::aio::ConnectionManagerConfig::new()
        .set_number_of_retries(2)
        .set_min_delay(Duration::from_millis(50))
        .set_max_delay(Duration::from_millis(500))
        .set_connection_timeout(Some(Duration::from_secs(1)))
}

fn now_ms() -> i64 {
    crate::ids::now_ms()
}

/// Removes a presence only if `pod` still holds it, with the peer's name claim (found from the
/// presence's own circle and name) if the peer still holds that.
const CLEAR_IF_OWNER: &str = r#"
if redis.call('HGET', KEYS[1], 'pod') == ARGV[1] then
  local data = redis.call('HGET', KEYS[1], 'data')
  if data then
    local p = cjson.decode(data)
    local name_key = ARGV[3] .. p.circle .. ':' .. p.name
    if redis.call('GET', name_key) == ARGV[2] then
      redis.call('DEL', name_key)
    end
  end
  redis.call('DEL', KEYS[1])
  redis.call('ZREM', KEYS[2], ARGV[2])
  return 1
end
return 0
"#;

/// Refreshes a presence, and the peer's name claim, unless another pod holds the presence (a
/// newer claim): 0 taken, 1 renewed, 2 written again (there was none).
const REFRESH_IF_NOT_TAKEN: &str = r#"
local holder = redis.call('HGET', KEYS[1], 'pod')
if holder and holder ~= ARGV[1] then
  return 0
end
local answer = 1
if not holder then
  answer = 2
end
redis.call('HSET', KEYS[1], 'pod', ARGV[1], 'data', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[5])
redis.call('PEXPIRE', KEYS[2], ARGV[6])
local name_holder = redis.call('GET', KEYS[3])
if name_holder == ARGV[5] then
  redis.call('PEXPIRE', KEYS[3], ARGV[3])
elseif not name_holder then
  redis.call('SET', KEYS[3], ARGV[5], 'PX', ARGV[3])
end
return answer
"#;

/// Claims the first free name of KEYS for peer ARGV[1] for ARGV[2] ms, letting go of the
/// peer's claim on ARGV[3] (a key, or ''); returns the 1-based index claimed, or 0.
const CLAIM_NAME: &str = r#"
for i, key in ipairs(KEYS) do
  local holder = redis.call('GET', key)
  if not holder or holder == ARGV[1] then
    redis.call('SET', key, ARGV[1], 'PX', ARGV[2])
    if ARGV[3] ~= '' and ARGV[3] ~= key and redis.call('GET', ARGV[3]) == ARGV[1] then
      redis.call('DEL', ARGV[3])
    end
    return i
  end
end
return 0
"#;

/// Redis-backed bus.
#[derive(Clone)]
pub struct RedisBus {
    pod: String,
    prefix: String,
    client: redis::Client,
    conn: ConnectionManager,
}

impl std::fmt::Debug for RedisBus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisBus")
            .field("pod", &self.pod)
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl RedisBus {
    /// Connects to `url` as pod `pod`; every key and channel starts with `prefix`.
    pub async fn connect(url: &str, prefix: &str, pod: &str) -> Result<Self> {
        let client = redis::Client::open(url).map_err(unavailable)?;
        let conn = client
            .get_connection_manager_with_config(reconnect_policy())
            .await
            .map_err(unavailable)?;
        Ok(Self {
            pod: pod.to_owned(),
            prefix: prefix.to_owned(),
            client,
            conn,
        })
    }

    /// The key of one peer's presence.
    pub fn presence_key(&self, tenant_id: &str, peer_id: &str) -> String {
        format!("{}:t:{tenant_id}:p:{peer_id}", self.prefix)
    }

    /// The key of a display name's claim in a circle (names and circles hold no `:`).
    pub fn name_key(&self, tenant_id: &str, circle: &str, name: &str) -> String {
        format!("{}{circle}:{name}", self.name_prefix(tenant_id))
    }

    fn name_prefix(&self, tenant_id: &str) -> String {
        format!("{}:t:{tenant_id}:n:", self.prefix)
    }

    fn tenant_index(&self, tenant_id: &str) -> String {
        format!("{}:t:{tenant_id}:peers", self.prefix)
    }

    fn pod_channel(&self, pod: &str) -> String {
        format!("{}:pod:{pod}", self.prefix)
    }

    fn all_channel(&self) -> String {
        format!("{}:all", self.prefix)
    }

    async fn publish(&self, channel: String, event: &BusEvent) -> Result<()> {
        let payload = serde_json::to_string(event).map_err(|e| BusError::Corrupt(e.to_string()))?;
        let mut conn = self.conn.clone();
        let _receivers: i64 = conn.publish(channel, payload).await.map_err(unavailable)?;
        Ok(())
    }
}

/// Forwards one subscription's events until it ends; false when nobody listens any more.
async fn forward(pubsub: redis::aio::PubSub, tx: &mpsc::UnboundedSender<BusEvent>) -> bool {
    let mut messages = pubsub.into_on_message();
    loop {
        tokio::select! {
            _ = tx.closed() => return false,
            next = messages.next() => {
                let Some(msg) = next else { return true };
                match serde_json::from_slice::<BusEvent>(msg.get_payload_bytes()) {
                    Ok(event) => {
                        if tx.send(event).is_err() {
                            return false;
                        }
                    }
                    Err(error) => tracing::error!(%error, channel = msg.get_channel_name(), "unreadable bus event"),
                }
            }
        }
    }
}

async fn subscribed(
    client: &redis::Client,
    channels: &[String; 2],
) -> redis::RedisResult<redis::aio::PubSub> {
    let mut pubsub = client.get_async_pubsub().await?;
    for c in channels {
        pubsub.subscribe(c).await?;
    }
    Ok(pubsub)
}

/// Keeps a subscription alive: forwards, and after it breaks re-subscribes with backoff.
async fn pump(
    client: redis::Client,
    channels: [String; 2],
    first: redis::aio::PubSub,
    tx: mpsc::UnboundedSender<BusEvent>,
) {
    let mut current = Some(first);
    let mut backoff = Duration::from_millis(50);
    loop {
        if let Some(pubsub) = current.take() {
            if !forward(pubsub, &tx).await {
                return;
            }
            tracing::warn!("bus subscription ended; re-subscribing");
            if tx.send(BusEvent::SubscriptionLost).is_err() {
                return;
            }
        }
        tokio::select! {
            _ = tx.closed() => return,
            _ = tokio::time::sleep(backoff) => {}
        }
        match subscribed(&client, &channels).await {
            Ok(pubsub) => {
                backoff = Duration::from_millis(50);
                current = Some(pubsub);
                tracing::info!("bus subscription re-established");
                if tx.send(BusEvent::Resubscribed).is_err() {
                    return;
                }
            }
            Err(error) => {
                backoff = (backoff * 2).min(Duration::from_secs(2));
                tracing::warn!(%error, ?backoff, "bus subscription failed; retrying");
            }
        }
    }
}

#[async_trait]
impl Bus for RedisBus {
    fn pod(&self) -> &str {
        &self.pod
    }

    async fn ping(&self) -> Result<()> {
        let mut conn = self.conn.clone();
        let _: String = redis::cmd("PING")
            .query_async(&mut conn)
            .await
            .map_err(unavailable)?;
        Ok(())
    }

    async fn to_pod(&self, pod: &str, event: &BusEvent) -> Result<()> {
        self.publish(self.pod_channel(pod), event).await
    }

    async fn to_all(&self, event: &BusEvent) -> Result<()> {
        self.publish(self.all_channel(), event).await
    }

    /// Two round trips when the batch names peers: their holders (one pipeline), then every
    /// publish (another). A Lua script doing both in one call measured no lower latency and
    /// about twice Redis's CPU per forwarded frame, and Redis is the one part every pod shares.
    async fn send_all(&self, events: &[(Target, BusEvent)]) -> Result<()> {
        if events.is_empty() {
            return Ok(());
        }
        let mut keys: HashMap<(&str, &str), usize> = HashMap::new();
        let mut lookup = redis::pipe();
        for (target, _) in events {
            if let Target::Holder { tenant_id, peer_id } = target {
                let next = keys.len();
                keys.entry((tenant_id.as_str(), peer_id.as_str()))
                    .or_insert_with(|| {
                        lookup.hget(self.presence_key(tenant_id, peer_id), "pod");
                        next
                    });
            }
        }
        let holders: Vec<Option<String>> = if keys.is_empty() {
            Vec::new()
        } else {
            lookup
                .query_async(&mut self.conn.clone())
                .await
                .map_err(unavailable)?
        };
        let mut publish = redis::pipe();
        for (target, event) in events {
            let channel = match target {
                Target::All => self.all_channel(),
                Target::Holder { tenant_id, peer_id } => {
                    let holder = keys
                        .get(&(tenant_id.as_str(), peer_id.as_str()))
                        .and_then(|&i| holders.get(i))
                        .and_then(Option::as_deref);
                    match holder {
                        // Offline, or held here: the entry waits in the inbox, or is served here.
                        Some(pod) if pod != self.pod => self.pod_channel(pod),
                        _ => continue,
                    }
                }
            };
            let payload =
                serde_json::to_string(event).map_err(|e| BusError::Corrupt(e.to_string()))?;
            publish.publish(channel, payload).ignore();
        }
        // Every peer named is offline or held here: nothing to send, and redis refuses an
        // empty pipeline as an error, which would read as the bus being down.
        if publish.is_empty() {
            return Ok(());
        }
        publish
            .query_async::<()>(&mut self.conn.clone())
            .await
            .map_err(unavailable)
    }

    async fn subscribe(&self) -> Result<mpsc::UnboundedReceiver<BusEvent>> {
        // Subscribed before returning, so nothing published after this call is missed.
        let channels = [self.pod_channel(&self.pod), self.all_channel()];
        let first = subscribed(&self.client, &channels)
            .await
            .map_err(unavailable)?;
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(pump(self.client.clone(), channels, first, tx));
        Ok(rx)
    }

    async fn set_presence(
        &self,
        tenant_id: &str,
        presence: &Presence,
        ttl: Duration,
    ) -> Result<()> {
        let data = serde_json::to_string(presence).map_err(|e| BusError::Corrupt(e.to_string()))?;
        let key = self.presence_key(tenant_id, &presence.peer_id);
        let index = self.tenant_index(tenant_id);
        let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX).max(1);
        let mut conn = self.conn.clone();
        redis::pipe()
            .atomic()
            .hset_multiple(
                &key,
                &[("pod", presence.pod.as_str()), ("data", data.as_str())],
            )
            .ignore()
            .pexpire(&key, ttl_ms)
            .ignore()
            .zadd(&index, &presence.peer_id, now_ms() + ttl_ms)
            .ignore()
            .pexpire(&index, ttl_ms.saturating_mul(4))
            .ignore()
            .query_async::<()>(&mut conn)
            .await
            .map_err(unavailable)
    }

    async fn refresh_presence(
        &self,
        tenant_id: &str,
        presence: &Presence,
        ttl: Duration,
    ) -> Result<Refreshed> {
        let data = serde_json::to_string(presence).map_err(|e| BusError::Corrupt(e.to_string()))?;
        let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX).max(1);
        let written: i64 = REFRESH
            .key(self.presence_key(tenant_id, &presence.peer_id))
            .key(self.tenant_index(tenant_id))
            .key(self.name_key(tenant_id, &presence.circle, &presence.name))
            .arg(&presence.pod)
            .arg(data)
            .arg(ttl_ms)
            .arg(now_ms() + ttl_ms)
            .arg(&presence.peer_id)
            .arg(ttl_ms.saturating_mul(4))
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(unavailable)?;
        Ok(match written {
            0 => Refreshed::Taken,
            2 => Refreshed::Recreated,
            _ => Refreshed::Kept,
        })
    }

    async fn clear_presence(&self, tenant_id: &str, peer_id: &str) -> Result<bool> {
        let mut conn = self.conn.clone();
        let removed: i64 = CLEAR
            .key(self.presence_key(tenant_id, peer_id))
            .key(self.tenant_index(tenant_id))
            .arg(&self.pod)
            .arg(peer_id)
            .arg(self.name_prefix(tenant_id))
            .invoke_async(&mut conn)
            .await
            .map_err(unavailable)?;
        Ok(removed == 1)
    }

    async fn presence(&self, tenant_id: &str, peer_id: &str) -> Result<Option<Presence>> {
        let mut conn = self.conn.clone();
        let data: Option<String> = conn
            .hget(self.presence_key(tenant_id, peer_id), "data")
            .await
            .map_err(unavailable)?;
        data.map(|d| serde_json::from_str(&d).map_err(|e| BusError::Corrupt(e.to_string())))
            .transpose()
    }

    async fn tenant_presence(&self, tenant_id: &str) -> Result<Vec<Presence>> {
        let index = self.tenant_index(tenant_id);
        let now = now_ms();
        let mut conn = self.conn.clone();
        // Expired index entries are dropped as they are met.
        let _: i64 = conn
            .zrembyscore(&index, "-inf", now)
            .await
            .map_err(unavailable)?;
        let peers: Vec<String> = conn
            .zrangebyscore(&index, now, "+inf")
            .await
            .map_err(unavailable)?;
        if peers.is_empty() {
            return Ok(Vec::new());
        }
        // Every peer's record in one round trip.
        let mut reads = redis::pipe();
        for peer in &peers {
            reads.hget(self.presence_key(tenant_id, peer), "data");
        }
        let records: Vec<Option<String>> =
            reads.query_async(&mut conn).await.map_err(unavailable)?;
        let mut out: Vec<Presence> = Vec::with_capacity(records.len());
        for data in records.into_iter().flatten() {
            out.push(serde_json::from_str(&data).map_err(|e| BusError::Corrupt(e.to_string()))?);
        }
        out.sort_by(|a, b| a.peer_id.cmp(&b.peer_id));
        Ok(out)
    }

    async fn append_events(
        &self,
        tenant_id: &str,
        events: &[String],
        keep: u64,
        ttl: Duration,
    ) -> Result<u64> {
        self.append(tenant_id, events, keep, ttl).await
    }

    async fn read_events(&self, tenant_id: &str, after: u64, limit: usize) -> Result<EventPage> {
        self.read(tenant_id, after, limit).await
    }

    async fn latest_events(&self, tenant_id: &str, limit: usize) -> Result<EventPage> {
        self.latest(tenant_id, limit).await
    }

    async fn mark_watched(&self, tenant_id: &str, ttl: Duration) -> Result<()> {
        redis::cmd("SET")
            .arg(format!("{}:watched", self.events_key(tenant_id)))
            .arg(1)
            .arg("PX")
            .arg(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1))
            .query_async::<()>(&mut self.conn.clone())
            .await
            .map_err(unavailable)
    }

    async fn is_watched(&self, tenant_id: &str) -> Result<bool> {
        redis::cmd("EXISTS")
            .arg(format!("{}:watched", self.events_key(tenant_id)))
            .query_async::<bool>(&mut self.conn.clone())
            .await
            .map_err(unavailable)
    }

    async fn drop_events(&self, tenant_id: &str) -> Result<()> {
        redis::cmd("DEL")
            .arg(self.events_key(tenant_id))
            .query_async::<()>(&mut self.conn.clone())
            .await
            .map_err(unavailable)
    }

    async fn take_tokens(&self, tenant_id: &str, rate: Rate, want: u64) -> Result<Grant> {
        self.take_tokens_at(tenant_id, rate, want, None).await
    }

    async fn hold_connection(
        &self,
        tenant_id: &str,
        slot: &str,
        max: Option<u64>,
        expires_at_ms: i64,
    ) -> Result<Option<u64>> {
        self.hold(tenant_id, slot, max, expires_at_ms).await
    }

    async fn refresh_connections(
        &self,
        tenant_id: &str,
        slots: &[String],
        expires_at_ms: i64,
    ) -> Result<u64> {
        self.refresh_slots(tenant_id, slots, expires_at_ms).await
    }

    async fn release_connection(&self, tenant_id: &str, slot: &str) -> Result<()> {
        self.release(tenant_id, slot).await
    }

    async fn claim_name(
        &self,
        tenant_id: &str,
        circle: &str,
        candidates: &[String],
        peer_id: &str,
        previous: Option<&str>,
        ttl: Duration,
    ) -> Result<Option<usize>> {
        if candidates.is_empty() {
            return Ok(None);
        }
        let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX).max(1);
        let mut invocation = CLAIM.prepare_invoke();
        for name in candidates {
            invocation.key(self.name_key(tenant_id, circle, name));
        }
        let previous = previous
            .map(|name| self.name_key(tenant_id, circle, name))
            .unwrap_or_default();
        let claimed: usize = invocation
            .arg(peer_id)
            .arg(ttl_ms)
            .arg(previous)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(unavailable)?;
        Ok(claimed.checked_sub(1))
    }
}

/// The scripts, each hashed once per process (invoked with EVALSHA, falling back to EVAL when
/// Redis does not have it).
static CLEAR: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(CLEAR_IF_OWNER));
static REFRESH: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(REFRESH_IF_NOT_TAKEN));
static CLAIM: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(CLAIM_NAME));
