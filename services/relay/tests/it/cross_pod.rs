//! Two in-process pods on one Postgres database and real Redis (a fresh key prefix), for the
//! cross-pod cases whose timing a test has to hold still: a forward held on its way, presence
//! writes that fail.

use crate::common;
use repowire_e2e::redis_url;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use common::{Db, TestClient, TestRelay, WAIT};
use repowire_relay::cluster::bus::gcra::{Grant, Rate};
use repowire_relay::cluster::bus::redis::RedisBus;
use repowire_relay::cluster::bus::{Bus, BusEvent, Presence, Refreshed, Result, Target};
use tokio::sync::{mpsc, watch};

/// A Redis bus whose batched sends (the ordered forwards) wait while the gate is shut, and
/// whose presence writes fail while `presence_down` is set.
#[derive(Debug)]
struct Gated {
    inner: RedisBus,
    open: watch::Sender<bool>,
    presence_down: AtomicBool,
    /// Presence writes refused so far.
    refused: AtomicUsize,
    /// Presence refreshes (heartbeats) wait while this is shut.
    refresh_open: watch::Sender<bool>,
}

impl Gated {
    fn new(inner: RedisBus) -> Self {
        Self {
            inner,
            open: watch::channel(true).0,
            presence_down: AtomicBool::new(false),
            refused: AtomicUsize::new(0),
            refresh_open: watch::channel(true).0,
        }
    }

    fn presence_write(&self) -> Result<()> {
        if self.presence_down.load(Ordering::SeqCst) {
            self.refused.fetch_add(1, Ordering::SeqCst);
            return Err(repowire_relay::cluster::bus::BusError::Unavailable(
                "presence write refused".into(),
            ));
        }
        Ok(())
    }
}

#[async_trait]
impl Bus for Gated {
    fn pod(&self) -> &str {
        self.inner.pod()
    }
    async fn ping(&self) -> Result<()> {
        self.inner.ping().await
    }
    async fn to_pod(&self, pod: &str, event: &BusEvent) -> Result<()> {
        self.inner.to_pod(pod, event).await
    }
    async fn to_all(&self, event: &BusEvent) -> Result<()> {
        self.inner.to_all(event).await
    }
    async fn subscribe(&self) -> Result<mpsc::UnboundedReceiver<BusEvent>> {
        self.inner.subscribe().await
    }
    async fn set_presence(&self, t: &str, p: &Presence, ttl: Duration) -> Result<()> {
        self.presence_write()?;
        self.inner.set_presence(t, p, ttl).await
    }
    async fn refresh_presence(&self, t: &str, p: &Presence, ttl: Duration) -> Result<Refreshed> {
        let mut open = self.refresh_open.subscribe();
        let _ = open.wait_for(|open| *open).await;
        self.presence_write()?;
        self.inner.refresh_presence(t, p, ttl).await
    }
    async fn clear_presence(&self, t: &str, peer: &str) -> Result<bool> {
        self.inner.clear_presence(t, peer).await
    }
    async fn presence(&self, t: &str, peer: &str) -> Result<Option<Presence>> {
        self.inner.presence(t, peer).await
    }
    async fn send_all(&self, events: &[(Target, BusEvent)]) -> Result<()> {
        let mut open = self.open.subscribe();
        let _ = open.wait_for(|open| *open).await;
        self.inner.send_all(events).await
    }
    async fn tenant_presence(&self, t: &str) -> Result<Vec<Presence>> {
        self.inner.tenant_presence(t).await
    }
    async fn take_tokens(&self, t: &str, rate: Rate, want: u64) -> Result<Grant> {
        self.inner.take_tokens(t, rate, want).await
    }
    async fn hold_connection(
        &self,
        t: &str,
        s: &str,
        m: Option<u64>,
        e: i64,
    ) -> Result<Option<u64>> {
        self.inner.hold_connection(t, s, m, e).await
    }
    async fn refresh_connections(&self, t: &str, s: &[String], e: i64) -> Result<u64> {
        self.inner.refresh_connections(t, s, e).await
    }
    async fn release_connection(&self, t: &str, s: &str) -> Result<()> {
        self.inner.release_connection(t, s).await
    }
    async fn append_events(
        &self,
        t: &str,
        events: &[String],
        keep: u64,
        ttl: Duration,
    ) -> Result<u64> {
        self.inner.append_events(t, events, keep, ttl).await
    }
    async fn read_events(
        &self,
        t: &str,
        after: u64,
        limit: usize,
    ) -> Result<repowire_relay::cluster::bus::EventPage> {
        self.inner.read_events(t, after, limit).await
    }
    async fn latest_events(
        &self,
        t: &str,
        limit: usize,
    ) -> Result<repowire_relay::cluster::bus::EventPage> {
        self.inner.latest_events(t, limit).await
    }
    async fn drop_events(&self, t: &str) -> Result<()> {
        self.inner.drop_events(t).await
    }
    async fn mark_watched(&self, t: &str, ttl: Duration) -> Result<()> {
        self.inner.mark_watched(t, ttl).await
    }
    async fn is_watched(&self, t: &str) -> Result<bool> {
        self.inner.is_watched(t).await
    }
}

/// protocol.md §10.9: from `registered` on, a connection gets a peer's entries in increasing
/// `seq`. Entry 1 is committed on pod a and its forward held; entry 2 is committed on pod b,
/// where the recipient is. Pod b must not push 2 before 1, nor push 1 again when its forward
/// finally arrives.
#[sqlx::test(migrations = false)]
async fn a_forward_overtaken_by_a_local_entry_is_delivered_in_seq_order_once(pool: sqlx::PgPool) {
    let prefix = format!("repowire-test-{}", uuid::Uuid::new_v4().simple());
    let connect = |pod: &'static str| {
        let prefix = prefix.clone();
        async move {
            RedisBus::connect(&redis_url(), &prefix, pod)
                .await
                .expect("redis")
        }
    };
    let gated = Arc::new(Gated::new(connect("pod-a").await));
    let db = Db::Postgres(pool);
    let pod_a = TestRelay::start_pod(&db, gated.clone()).await;
    let pod_b = TestRelay::start_pod(&db, Arc::new(connect("pod-b").await)).await;
    let (_, key) = pod_a.tenant("acme").await;

    let mut xc = pod_b.client(&key).await;
    let x = xc.peer("x", "dev").await;
    let mut on_a = pod_a.client(&key).await;
    let sender_a = on_a.peer("sender-a", "dev").await;
    let mut on_b = pod_b.client(&key).await;
    let sender_b = on_b.peer("sender-b", "dev").await;

    // Pod a must know where x is, or it would not forward at all.
    let deadline = tokio::time::Instant::now() + WAIT;
    while !on_a
        .list(&sender_a.peer_id, false)
        .await
        .iter()
        .any(|p| p.peer_id == x.peer_id)
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "pod a never saw x online"
        );
        tokio::task::yield_now().await;
    }

    gated.open.send_replace(false);
    let one = on_a.notify(&sender_a, "x", "one").await.expect("accepted");
    let two = on_b.notify(&sender_b, "x", "two").await.expect("accepted");
    let first = xc.delivered_to(&x.peer_id).await;
    assert_eq!(
        (first.seq, first.message.message_id),
        (1, one.message_id),
        "entry 1 comes first though its forward is held"
    );
    let second = xc.delivered_to(&x.peer_id).await;
    assert_eq!((second.seq, second.message.message_id), (2, two.message_id));

    // The held forward of entry 1 now arrives at pod b, ahead of entry 3 on the same channel.
    gated.open.send_replace(true);
    let three = on_a
        .notify(&sender_a, "x", "three")
        .await
        .expect("accepted");
    let third = xc.delivered_to(&x.peer_id).await;
    assert_eq!(
        (third.seq, third.message.message_id),
        (3, three.message_id),
        "entry 1 was not pushed again"
    );

    assert_eq!(
        common::counter(&pod_b.metrics().await, "repowire_order_catch_ups_total"),
        1.0,
        "one catch-up put entries 1 and 2 in order"
    );
    assert_eq!(
        common::counter(&pod_a.metrics().await, "repowire_order_catch_ups_total"),
        0.0
    );

    pod_a.stop().await;
    pod_b.stop().await;
}

/// Two pods on one database and a fresh Redis prefix; pod b (heartbeat every second, its bus
/// [`Gated`]) holds peer `x`, pod a holds `sender`.
struct XOnPodB {
    pod_a: TestRelay,
    pod_b: TestRelay,
    bus_b: Arc<Gated>,
    tenant_id: String,
    xc: TestClient,
    x: repowire_protocol::PeerInfo,
    on_a: TestClient,
    sender: repowire_protocol::PeerInfo,
}

impl XOnPodB {
    async fn start(pool: sqlx::PgPool) -> Self {
        let prefix = format!("repowire-test-{}", uuid::Uuid::new_v4().simple());
        let connect = |pod: &'static str| {
            let prefix = prefix.clone();
            async move {
                RedisBus::connect(&redis_url(), &prefix, pod)
                    .await
                    .expect("redis")
            }
        };
        let db = Db::Postgres(pool);
        let pod_a = TestRelay::start_pod(&db, Arc::new(connect("pod-a").await)).await;
        // A third of the shortest presence TTL.
        let mut config = repowire_relay::config::RelayConfig::for_tests();
        config.presence_ttl_secs = 3;
        let bus_b = Arc::new(Gated::new(connect("pod-b").await));
        let pod_b = TestRelay::start_pod_with(&db, config, bus_b.clone()).await;
        let (tenant_id, key) = pod_a.tenant("acme").await;
        let mut xc = pod_b.client(&key).await;
        let x = xc.peer("x", "dev").await;
        let mut on_a = pod_a.client(&key).await;
        let sender = on_a.peer("sender", "dev").await;
        Self {
            pod_a,
            pod_b,
            bus_b,
            tenant_id,
            xc,
            x,
            on_a,
            sender,
        }
    }

    /// Deletes x's presence record from Redis, as an expiry or an emptied Redis would.
    async fn lose_xs_record(&self) {
        let mut admin = redis::Client::open(redis_url().as_str())
            .expect("client")
            .get_multiplexed_async_connection()
            .await
            .expect("admin connection");
        let _: i64 = redis::cmd("DEL")
            .arg(
                self.bus_b
                    .inner
                    .presence_key(&self.tenant_id, self.x.peer_id.as_str()),
            )
            .query_async(&mut admin)
            .await
            .expect("del");
    }

    async fn stop(self) {
        self.pod_a.stop().await;
        self.pod_b.stop().await;
    }
}

/// Redis loses a peer's presence (it restarted empty) and the pod holding the peer cannot write
/// it back at once (the first command after Redis returns can fail). A message sent from
/// another pod meanwhile finds the peer offline and stays in its inbox, unforwarded. Once the
/// holding pod's presence write succeeds, the entry is pushed to the live peer: it does not
/// wait for the peer to register again.
#[sqlx::test(migrations = false)]
async fn a_message_sent_while_presence_was_missing_reaches_the_live_peer(pool: sqlx::PgPool) {
    let mut t = XOnPodB::start(pool).await;
    // Presence writes fail on pod b, and x's record is gone from Redis.
    t.bus_b.presence_down.store(true, Ordering::SeqCst);
    t.lose_xs_record().await;
    // A heartbeat of pod b tried, and failed, to write it back.
    let deadline = tokio::time::Instant::now() + WAIT;
    while t.bus_b.refused.load(Ordering::SeqCst) == 0 {
        assert!(tokio::time::Instant::now() < deadline, "no heartbeat");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let sent = t
        .on_a
        .notify(&t.sender, "x", "while away")
        .await
        .expect("accepted");
    t.bus_b.presence_down.store(false, Ordering::SeqCst);
    let got = t.xc.delivered_to(&t.x.peer_id).await;
    assert_eq!(got.message.message_id, sent.message_id);
    t.stop().await;
}

/// A peer's presence lapses (its record expired or was evicted) although every write succeeds.
/// A message sent from another pod meanwhile finds the peer offline; the holding pod's next
/// refresh finds the record missing and writes it again, and the entry is then pushed to the
/// live peer.
#[sqlx::test(migrations = false)]
async fn a_message_sent_while_presence_had_lapsed_reaches_the_live_peer(pool: sqlx::PgPool) {
    let mut t = XOnPodB::start(pool).await;
    // Heartbeats held; x's record gone; a message sent while it is.
    t.bus_b.refresh_open.send_replace(false);
    t.lose_xs_record().await;
    let sent = t
        .on_a
        .notify(&t.sender, "x", "while lapsed")
        .await
        .expect("accepted");
    t.bus_b.refresh_open.send_replace(true);
    let got = t.xc.delivered_to(&t.x.peer_id).await;
    assert_eq!(got.message.message_id, sent.message_id);
    assert_eq!(t.bus_b.refused.load(Ordering::SeqCst), 0, "no write failed");
    t.stop().await;
}
