//! The bus both ways: presence semantics on the in-memory bus (paused clock) and on real Redis,
//! pod-addressed events between two Redis-backed pods. Each test uses its own key prefix.

use repowire_e2e::{redis_prefix, redis_url};
use std::time::Duration;

use repowire_relay::cluster::bus::memory::MemoryBus;
use repowire_relay::cluster::bus::redis::RedisBus;
use repowire_relay::cluster::bus::{Bus, BusEvent, Presence, Refreshed, Target};

async fn next(rx: &mut tokio::sync::mpsc::UnboundedReceiver<BusEvent>) -> BusEvent {
    tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .expect("event in time")
        .expect("subscription open")
}

/// Pods `pod-a` and `pod-b` on real Redis, under a fresh prefix (returned too).
async fn two_redis_pods() -> (String, RedisBus, RedisBus) {
    let p = redis_prefix();
    let a = RedisBus::connect(&redis_url(), &p, "pod-a")
        .await
        .expect("redis");
    let b = RedisBus::connect(&redis_url(), &p, "pod-b")
        .await
        .expect("redis");
    (p, a, b)
}

fn presence(pod: &str, peer: &str) -> Presence {
    Presence {
        pod: pod.into(),
        peer_id: peer.into(),
        name: "alice".into(),
        circle: "dev".into(),
        role: "agent".into(),
        turn_state: "idle".into(),
        last_seen_ms: 1,
    }
}

/// Tenant scoping and owner-only clearing, the same on every implementation.
async fn presence_is_tenant_scoped_and_cleared_only_by_its_pod(a: &dyn Bus, b: &dyn Bus) {
    let ttl = Duration::from_secs(30);
    a.set_presence("tnt-one", &presence(a.pod(), "peer-1"), ttl)
        .await
        .expect("set");
    assert_eq!(
        b.presence("tnt-one", "peer-1").await.expect("get"),
        Some(presence(a.pod(), "peer-1"))
    );
    assert_eq!(
        b.presence("tnt-two", "peer-1").await.expect("get"),
        None,
        "another tenant sees nothing"
    );
    assert_eq!(b.tenant_presence("tnt-one").await.expect("list").len(), 1);
    assert!(b.tenant_presence("tnt-two").await.expect("list").is_empty());
    if a.pod() != b.pod() {
        assert!(
            !b.clear_presence("tnt-one", "peer-1").await.expect("clear"),
            "only the holder clears"
        );
        assert!(
            b.presence("tnt-one", "peer-1")
                .await
                .expect("get")
                .is_some()
        );
    }
    assert!(a.clear_presence("tnt-one", "peer-1").await.expect("clear"));
    assert_eq!(b.presence("tnt-one", "peer-1").await.expect("get"), None);
    assert!(b.tenant_presence("tnt-one").await.expect("list").is_empty());
}

/// A heartbeat never takes back a peer that another pod claimed after this one (a takeover
/// whose notice this pod missed): the refresh writes nothing and says so.
async fn a_late_heartbeat_never_takes_a_claimed_peer_back(a: &dyn Bus, claimer: &dyn Bus) {
    let ttl = Duration::from_secs(30);
    assert_eq!(
        a.refresh_presence("t", &presence(a.pod(), "p"), ttl)
            .await
            .expect("refresh"),
        Refreshed::Recreated,
        "nobody holds it: recorded, and said to have been missing"
    );
    assert_eq!(
        a.refresh_presence("t", &presence(a.pod(), "p"), ttl)
            .await
            .expect("refresh"),
        Refreshed::Kept,
        "its own: refreshed"
    );
    claimer
        .set_presence("t", &presence("pod-b", "p"), ttl)
        .await
        .expect("claim");
    assert_eq!(
        a.refresh_presence("t", &presence(a.pod(), "p"), ttl)
            .await
            .expect("refresh"),
        Refreshed::Taken,
        "pod-b holds it now"
    );
    let holder = a.presence("t", "p").await.expect("get").map(|p| p.pod);
    assert_eq!(holder.as_deref(), Some("pod-b"));
}

#[tokio::test]
async fn memory_late_heartbeat_never_takes_a_claimed_peer_back() {
    let bus = MemoryBus::new("pod-a");
    a_late_heartbeat_never_takes_a_claimed_peer_back(&bus, &bus).await;
}

#[tokio::test]
async fn redis_late_heartbeat_never_takes_a_claimed_peer_back() {
    let (_, a, b) = two_redis_pods().await;
    a_late_heartbeat_never_takes_a_claimed_peer_back(&a, &b).await;
}

#[tokio::test]
async fn memory_presence_is_tenant_scoped_and_cleared_only_by_its_pod() {
    let bus = MemoryBus::new("pod-a");
    presence_is_tenant_scoped_and_cleared_only_by_its_pod(&bus, &bus).await;
}

#[tokio::test]
async fn redis_presence_is_tenant_scoped_and_cleared_only_by_its_pod() {
    let (p, a, b) = two_redis_pods().await;
    presence_is_tenant_scoped_and_cleared_only_by_its_pod(&a, &b).await;
    assert!(
        a.presence_key("tnt-one", "peer-1")
            .starts_with(&format!("{p}:t:tnt-one:"))
    );
}

#[tokio::test(start_paused = true)]
async fn memory_presence_expires_after_its_ttl() {
    let bus = MemoryBus::new("pod-a");
    bus.set_presence("t", &presence("pod-a", "p"), Duration::from_secs(30))
        .await
        .expect("set");
    tokio::time::advance(Duration::from_secs(29)).await;
    assert!(bus.presence("t", "p").await.expect("get").is_some());
    tokio::time::advance(Duration::from_secs(2)).await;
    assert!(bus.presence("t", "p").await.expect("get").is_none());
    assert!(bus.tenant_presence("t").await.expect("list").is_empty());
}

#[tokio::test]
async fn redis_presence_of_a_pod_that_stops_refreshing_expires() {
    // A pod that dies keeps nothing online longer than the TTL: Redis drops the key itself.
    let bus = RedisBus::connect(&redis_url(), &redis_prefix(), "pod-a")
        .await
        .expect("redis");
    bus.set_presence("t", &presence("pod-a", "p"), Duration::from_millis(300))
        .await
        .expect("set");
    assert!(bus.presence("t", "p").await.expect("get").is_some());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while bus.presence("t", "p").await.expect("get").is_some() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "presence outlived its TTL"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(bus.tenant_presence("t").await.expect("list").is_empty());
}

#[tokio::test]
async fn redis_events_reach_the_addressed_pod_and_broadcasts_reach_all() {
    let (_, a, b) = two_redis_pods().await;
    let other = RedisBus::connect(&redis_url(), &redis_prefix(), "pod-b")
        .await
        .expect("redis");
    let mut at_a = a.subscribe().await.expect("sub");
    let mut at_b = b.subscribe().await.expect("sub");
    let mut other_prefix = other.subscribe().await.expect("sub");

    let to_b = BusEvent::ToPeer {
        tenant_id: "t".into(),
        peer_id: "p".into(),
        seq: Some(7),
        frame: "{}".into(),
        traceparent: Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into()),
    };
    a.to_pod("pod-b", &to_b).await.expect("publish");
    let revoked = BusEvent::KeyRevoked {
        key_id: "key-1".into(),
    };
    b.to_all(&revoked).await.expect("publish");

    assert_eq!(next(&mut at_b).await, to_b);
    assert_eq!(next(&mut at_b).await, revoked);
    // Pod a got only the broadcast: the first event it sees is the revocation.
    assert_eq!(next(&mut at_a).await, revoked);
    // The same pod name under another prefix (another deployment) heard nothing.
    assert!(
        tokio::time::timeout(Duration::from_millis(200), other_prefix.recv())
            .await
            .is_err()
    );
}

fn to_peer(tenant: &str, peer: &str, seq: i64) -> BusEvent {
    BusEvent::ToPeer {
        tenant_id: tenant.into(),
        peer_id: peer.into(),
        seq: Some(seq),
        frame: "{}".into(),
        traceparent: None,
    }
}

fn holder(tenant: &str, peer: &str) -> Target {
    Target::Holder {
        tenant_id: tenant.into(),
        peer_id: peer.into(),
    }
}

/// A batch's events for a peer go to the pod holding it at send time, in order with the
/// broadcasts between them; none go anywhere for a peer held by the sending pod, by no pod, or
/// by a pod in another tenant only.
#[tokio::test]
async fn redis_a_batch_reaches_each_peers_holder_in_order() {
    let (_, a, b) = two_redis_pods().await;
    let ttl = Duration::from_secs(30);
    a.set_presence("t", &presence("pod-a", "here"), ttl)
        .await
        .expect("set");
    b.set_presence("t", &presence("pod-b", "there"), ttl)
        .await
        .expect("set");
    let mut at_a = a.subscribe().await.expect("sub");
    let mut at_b = b.subscribe().await.expect("sub");

    let all = BusEvent::PeersChanged {
        tenant_id: "t".into(),
    };
    let end = BusEvent::KeyRevoked {
        key_id: "end".into(),
    };
    a.send_all(&[
        (holder("t", "there"), to_peer("t", "there", 1)),
        (Target::All, all.clone()),
        (holder("t", "here"), to_peer("t", "here", 1)),
        (holder("t", "nobody"), to_peer("t", "nobody", 1)),
        (holder("u", "there"), to_peer("u", "there", 1)),
        (holder("t", "there"), to_peer("t", "there", 2)),
        (Target::All, end.clone()),
    ])
    .await
    .expect("send");

    for expected in [
        to_peer("t", "there", 1),
        all.clone(),
        to_peer("t", "there", 2),
    ] {
        assert_eq!(next(&mut at_b).await, expected);
    }
    assert_eq!(next(&mut at_b).await, end, "nothing else reached pod b");
    assert_eq!(next(&mut at_a).await, all);
    assert_eq!(next(&mut at_a).await, end, "nothing for its own peer");
}

/// A batch whose every peer is offline or held by the sending pod (peers leaving while their
/// forwards are queued, as when a pod drains) publishes nothing, and that is a success, not
/// the bus being unavailable.
#[tokio::test]
async fn redis_a_batch_with_nothing_to_publish_succeeds() {
    let (_, a, b) = two_redis_pods().await;
    a.set_presence("t", &presence("pod-a", "here"), Duration::from_secs(30))
        .await
        .expect("set");
    let mut at_b = b.subscribe().await.expect("sub");
    a.send_all(&[
        (holder("t", "here"), to_peer("t", "here", 1)),
        (holder("t", "nobody"), to_peer("t", "nobody", 1)),
    ])
    .await
    .expect("nothing to publish is not an error");
    let end = BusEvent::KeyRevoked {
        key_id: "end".into(),
    };
    a.to_all(&end).await.expect("publish");
    assert_eq!(next(&mut at_b).await, end, "nothing else reached pod b");
}

/// The same on one process: its own peers and unknown ones get nothing through the bus.
#[tokio::test]
async fn memory_a_batch_for_its_own_or_unknown_peers_sends_only_the_broadcasts() {
    let bus = MemoryBus::new("pod-a");
    bus.set_presence("t", &presence("pod-a", "here"), Duration::from_secs(30))
        .await
        .expect("set");
    let mut heard = bus.subscribe().await.expect("sub");
    let all = BusEvent::PeersChanged {
        tenant_id: "t".into(),
    };
    bus.send_all(&[
        (holder("t", "here"), to_peer("t", "here", 1)),
        (holder("t", "nobody"), to_peer("t", "nobody", 1)),
        (Target::All, all.clone()),
    ])
    .await
    .expect("send");
    assert_eq!(next(&mut heard).await, all);
    assert!(heard.try_recv().is_err());
}

/// A display name is held by one live peer at a time across pods: a second claimant gets the
/// next free candidate, the holder keeps its own, a peer's claim goes with its presence, and
/// claims are per circle and per tenant.
#[tokio::test]
async fn redis_a_name_is_claimed_by_one_peer_at_a_time() {
    let (_, a, b) = two_redis_pods().await;
    let ttl = Duration::from_secs(30);
    let names = |base: &str| vec![base.to_owned(), format!("{base}-2"), format!("{base}-3")];
    let claim = |bus: &RedisBus, peer: &'static str, circle: &'static str| {
        let bus = bus.clone();
        let candidates = names("alice");
        async move {
            bus.claim_name("t", circle, &candidates, peer, None, ttl)
                .await
                .expect("claim")
        }
    };
    assert_eq!(claim(&a, "peer-1", "dev").await, Some(0));
    assert_eq!(claim(&b, "peer-2", "dev").await, Some(1), "taken on pod a");
    assert_eq!(claim(&b, "peer-1", "dev").await, Some(0), "its own name");
    assert_eq!(claim(&a, "peer-3", "ops").await, Some(0), "another circle");
    assert_eq!(
        b.claim_name("t2", "dev", &names("alice"), "peer-9", None, ttl)
            .await
            .expect("claim"),
        Some(0),
        "another tenant"
    );
    assert_eq!(claim(&a, "peer-4", "dev").await, Some(2));
    assert_eq!(claim(&a, "peer-5", "dev").await, None, "all held");

    // peer-1 (presence "alice" in "dev" on pod a) leaves: its name is free again.
    a.set_presence("t", &presence("pod-a", "peer-1"), ttl)
        .await
        .expect("set");
    assert!(a.clear_presence("t", "peer-1").await.expect("clear"));
    assert_eq!(claim(&b, "peer-5", "dev").await, Some(0));
    // A rename lets go of the previous claim.
    let renamed = vec!["bob".to_owned()];
    assert_eq!(
        b.claim_name("t", "dev", &renamed, "peer-5", Some("alice"), ttl)
            .await
            .expect("claim"),
        Some(0)
    );
    assert_eq!(claim(&a, "peer-6", "dev").await, Some(0));
}

/// A tenant's event log on Redis: two pods append to one numbering with no gaps, a cursor
/// reads what follows it, the newest entries survive trimming and what a trim removed after a
/// cursor is counted exactly; tenants are apart.
#[tokio::test]
async fn redis_event_logs_number_every_pods_entries_and_count_what_was_trimmed() {
    let (_, a, b) = two_redis_pods().await;
    let ttl = Duration::from_secs(60);
    let batch =
        |from: u32, n: u32| -> Vec<String> { (from..from + n).map(|i| format!("e{i}")).collect() };
    assert_eq!(
        a.append_events("tnt-one", &batch(1, 2), 10_000, ttl)
            .await
            .expect("append"),
        2
    );
    assert_eq!(
        b.append_events("tnt-one", &batch(3, 3), 10_000, ttl)
            .await
            .expect("append"),
        5
    );
    assert_eq!(
        a.append_events("tnt-two", &batch(1, 1), 10_000, ttl)
            .await
            .expect("append"),
        1
    );
    let page = b.read_events("tnt-one", 0, 100).await.expect("read");
    assert_eq!(page.last, 5);
    assert_eq!(page.missed, 0);
    assert_eq!(
        page.events
            .iter()
            .map(|e| (e.seq, e.data.as_str()))
            .collect::<Vec<_>>(),
        [(1, "e1"), (2, "e2"), (3, "e3"), (4, "e4"), (5, "e5")]
    );
    let page = a.read_events("tnt-one", 3, 1).await.expect("read");
    assert_eq!(
        page.events.iter().map(|e| e.seq).collect::<Vec<_>>(),
        [4],
        "a limit holds"
    );
    let latest = a.latest_events("tnt-one", 2).await.expect("latest");
    assert_eq!(
        latest.events.iter().map(|e| e.seq).collect::<Vec<_>>(),
        [4, 5]
    );
    assert_eq!(latest.last, 5);
    assert!(
        a.read_events("tnt-three", 0, 10)
            .await
            .expect("read")
            .events
            .is_empty()
    );

    // Trimming (Redis trims whole nodes, so at least `keep` stay): the newest stay, and the
    // entries after a cursor that are gone are counted.
    let total: u32 = 2000;
    for chunk in 0..20 {
        a.append_events("tnt-two", &batch(2 + chunk * 100, 100), 10, ttl)
            .await
            .expect("append");
    }
    let page = b.read_events("tnt-two", 1, 5000).await.expect("read");
    assert_eq!(page.last, u64::from(total) + 1);
    let first = page.events.first().expect("kept").seq;
    assert!(first > 2, "trimmed: {first}");
    assert_eq!(
        page.missed,
        first - 2,
        "what is gone after the cursor is counted"
    );
    let seqs: Vec<u64> = page.events.iter().map(|e| e.seq).collect();
    assert_eq!(
        seqs,
        (first..=page.last).collect::<Vec<_>>(),
        "no gaps in what is kept"
    );
    assert!(seqs.len() >= 10);
    let fresh = b
        .read_events("tnt-two", page.last - 1, 10)
        .await
        .expect("read");
    assert_eq!(fresh.missed, 0);
    assert_eq!(fresh.events.len(), 1);

    // A deleted tenant's log goes; the other's stays.
    a.drop_events("tnt-two").await.expect("drop");
    assert_eq!(
        b.read_events("tnt-two", 0, 10).await.expect("read"),
        Default::default()
    );
    assert_eq!(b.read_events("tnt-one", 0, 10).await.expect("read").last, 5);
}
