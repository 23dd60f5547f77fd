//! Two relay pods sharing Postgres and Redis, as the chart runs them: a peer on one pod asks a
//! peer on the other, gets the ack's reply back, sees its delivery states, and both pods list
//! the same live peers.

use std::time::{Duration, Instant};

use repowire_e2e::client::{self, TestClient};
use repowire_e2e::process::{RelayProcess, TempDatabase};
use repowire_protocol::*;

async fn pod(db: &TempDatabase, prefix: &str, name: &str) -> RelayProcess {
    let redis = repowire_e2e::redis_url();
    RelayProcess::start_pod(&db.url(), &redis, prefix, name, &[]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peers_on_two_pods_ask_ack_and_list_each_other() {
    let db = TempDatabase::create("repowire_cluster");
    let prefix = repowire_e2e::redis_prefix();
    let a_pod = pod(&db, &prefix, "pod-a").await;
    let key = a_pod
        .first_key
        .clone()
        .expect("the first pod bootstraps the tenant");
    let b_pod = pod(&db, &prefix, "pod-b").await;

    let mut a = TestClient::connect(&a_pod.http, &a_pod.ws, &key).await;
    let mut b = TestClient::connect(&b_pod.http, &b_pod.ws, &key).await;
    let alice = a.peer("alice", "dev").await;
    let bob = b.peer("bob", "dev").await;

    // A second "bob" in the same circle, on the other pod, gets a suffix as on one relay.
    let mut twin = TestClient::connect(&a_pod.http, &a_pod.ws, &key).await;
    let bob2 = twin.peer("bob", "dev").await;
    assert_eq!(bob2.name, "bob-2");
    drop(twin);

    // Bob's arrival on pod b is announced to alice's connection on pod a.
    let online = a
        .expect(|f| match &f.body {
            Body::Presence(p) if p.peer.peer_id == bob.peer_id => Some(p.clone()),
            _ => None,
        })
        .await;
    assert_eq!(online.event, PresenceEvent::Online);

    // Both pods list both peers as online.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let from_a = a.list(&alice.peer_id, false).await;
        let from_b = b.list(&bob.peer_id, false).await;
        let names = |l: &[PeerInfo]| {
            let mut n: Vec<(String, PeerStatus)> =
                l.iter().map(|p| (p.name.clone(), p.status)).collect();
            n.sort_by(|x, y| x.0.cmp(&y.0));
            n
        };
        let want = vec![
            ("alice".to_owned(), PeerStatus::Online),
            ("bob".to_owned(), PeerStatus::Online),
        ];
        if names(&from_a) == want && names(&from_b) == want {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "pods disagree: {:?} vs {:?}",
            names(&from_a),
            names(&from_b)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Alice (pod a) asks bob (pod b) by name.
    let asked = a
        .ask(&alice, "bob", "cross-pod works?")
        .await
        .expect("accepted");
    assert_eq!(asked.recipients[0].peer_id, bob.peer_id);
    let got = b.delivered_to(&bob.peer_id).await;
    assert_eq!(got.message.text, "cross-pod works?");
    b.receipt(
        &bob.peer_id,
        got.message.message_id,
        ReceiptState::Delivered,
    )
    .await;
    let state = a.state_of(asked.message_id).await;
    assert_eq!(state.state, DeliveryState::Delivered);

    // Bob acks with a reply; it reaches alice on the other pod, with the ask's state.
    let cid = asked.correlation_id.clone().expect("cid");
    b.submit(Body::Ack(Ack {
        from: bob.peer_id.clone(),
        correlation_id: cid.clone(),
        reply: Some("yes, through Redis".into()),
    }))
    .await
    .expect("ack accepted");
    let reply = a.delivered_to(&alice.peer_id).await;
    assert_eq!(reply.message.kind, MessageKind::Reply);
    assert_eq!(reply.message.text, "yes, through Redis");
    assert_eq!(reply.message.correlation_id, Some(cid));
    let acked = a.state_of(asked.message_id).await;
    assert_eq!(acked.state, DeliveryState::Acked);

    // A broadcast reaches the circle on every pod.
    let sent = a
        .submit(Body::Broadcast(Broadcast {
            from: alice.peer_id.clone(),
            text: "release at 5".into(),
        }))
        .await
        .expect("broadcast accepted");
    assert_eq!(sent.recipients.len(), 1, "{sent:?}");
    assert_eq!(sent.recipients[0].peer_id, bob.peer_id);
    let got = b.delivered_to(&bob.peer_id).await;
    assert_eq!(got.message.kind, MessageKind::Broadcast);
    assert_eq!(got.message.text, "release at 5");
}

/// A steady stream from pod a to pod b, which goes away (`signal`) mid-stream: nothing lost
/// ([`repowire_e2e::stream::across_a_lost_pod`]).
async fn the_receivers_pod_goes_away_mid_stream(signal: &str) {
    let db = TempDatabase::create("repowire_cluster");
    let prefix = repowire_e2e::redis_prefix();
    let a_pod = pod(&db, &prefix, "pod-a").await;
    let key = a_pod.first_key.clone().expect("key");
    let b_pod = pod(&db, &prefix, "pod-b").await;
    let report = repowire_e2e::stream::across_a_lost_pod(
        (&a_pod.http, &a_pod.ws),
        (&b_pod.http, &b_pod.ws),
        &key,
        || b_pod.signal(signal),
    )
    .await;
    eprintln!("{signal}: {report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_the_receivers_pod_loses_nothing() {
    the_receivers_pod_goes_away_mid_stream("KILL").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drain_of_the_receivers_pod_loses_nothing() {
    the_receivers_pod_goes_away_mid_stream("TERM").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_reclaimed_on_another_pod_is_let_go_by_the_first() {
    let db = TempDatabase::create("repowire_cluster");
    let prefix = repowire_e2e::redis_prefix();
    let a_pod = pod(&db, &prefix, "pod-a").await;
    let key = a_pod.first_key.clone().expect("key");
    let b_pod = pod(&db, &prefix, "pod-b").await;

    let mut sender = TestClient::connect(&a_pod.http, &a_pod.ws, &key).await;
    let alice = sender.peer("alice", "dev").await;
    let mut old = TestClient::connect(&b_pod.http, &b_pod.ws, &key).await;
    let bob = old.peer("bob", "dev").await;

    // The same peer comes back through pod a (a daemon that moved): it keeps its id.
    let mut new = TestClient::connect(&a_pod.http, &a_pod.ws, &key).await;
    let again = new
        .register(Register {
            name: Some("bob".into()),
            circle: Some("dev".into()),
            backend: "claude-code".into(),
            path: Some("/work/bob".into()),
            reclaim: Some(bob.peer_id.clone()),
            ..Default::default()
        })
        .await;
    assert!(again.reclaimed);

    // Pod b lets go of it and tells the old connection, as a single relay would.
    let notice = old
        .expect(|f| match &f.body {
            Body::Error(e) if e.re.is_none() => Some(e.clone()),
            _ => None,
        })
        .await;
    assert_eq!(notice.code, ErrorCode::NotRegistered);

    // Messages for bob now reach the new connection only.
    let sent = sender
        .notify(&alice, bob.peer_id.as_str(), "after the move")
        .await
        .expect("accepted");
    assert_eq!(
        new.delivered_to(&bob.peer_id).await.message.message_id,
        sent.message_id
    );
    let id = old
        .send(Body::ListPeers(ListPeers {
            peer_id: bob.peer_id.clone(),
            circle: None,
            include_offline: false,
            all_circles: false,
            limit: None,
            cursor: None,
        }))
        .await;
    let refused = old
        .answer(id)
        .await
        .expect_err("the old connection no longer holds bob");
    assert_eq!(refused.code, ErrorCode::NotRegistered);
    assert!(
        !old.buffered().any(|f| matches!(f.body, Body::Deliver(_))),
        "a message went to the old connection"
    );
}

/// One message's path across two pods is one trace: the ask continues the sender's
/// `traceparent` on pod a, pod b's push of it and bob's receipt continue pod a's span, and the
/// `delivered` state forwarded back to pod a continues the receipt's span. The pods export to a
/// real OTLP/gRPC endpoint (the protocol's own service definition, served in this test) and
/// flush on SIGTERM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_message_across_two_pods_is_one_trace() {
    use repowire_e2e::otlp::Collector;
    let collector = Collector::start().await;
    let db = TempDatabase::create("repowire_cluster");
    let prefix = repowire_e2e::redis_prefix();
    let redis = repowire_e2e::redis_url();
    let env = [("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint.as_str())];
    let a_pod = RelayProcess::start_pod(&db.url(), &redis, &prefix, "pod-a", &env).await;
    let key = a_pod.first_key.clone().expect("key");
    let b_pod = RelayProcess::start_pod(&db.url(), &redis, &prefix, "pod-b", &env).await;
    let mut a = TestClient::connect(&a_pod.http, &a_pod.ws, &key).await;
    let mut b = TestClient::connect(&b_pod.http, &b_pod.ws, &key).await;
    let alice = a.peer("alice", "dev").await;
    let bob = b.peer("bob", "dev").await;
    // A message that lands while bob's inbox catch-up runs reaches him through the catch-up,
    // with no `forward deliver` span on pod b: wait until deliveries to bob are live.
    live_path_open(&mut a, &alice, &mut b, &bob).await;

    // The sender's own span: a trace id and span id of this run.
    let trace_id = uuid::Uuid::new_v4().simple().to_string();
    let client_span = uuid::Uuid::new_v4().simple().to_string()[..16].to_owned();
    let parts = |tp: &str| -> (String, String) {
        let p: Vec<&str> = tp.split('-').collect();
        (p[1].to_owned(), p[2].to_owned())
    };
    let ask = Frame::new(Body::Ask(Ask {
        from: alice.peer_id.clone(),
        to: bob.peer_id.to_string(),
        circle: None,
        text: "traced?".into(),
        reply_to: None,
        question: None,
    }))
    .traced(Some(format!("00-{trace_id}-{client_span}-01")));
    a.send_frame(&ask).await;
    let accepted_tp = a
        .expect(|f| match &f.body {
            Body::Accepted(acc) if acc.re == ask.id => Some(f.traceparent.clone()),
            Body::Error(e) if e.re == Some(ask.id) => panic!("ask refused: {e:?}"),
            _ => None,
        })
        .await
        .expect("`accepted` carries the trace");
    let (t, ask_span) = parts(&accepted_tp);
    assert_eq!(t, trace_id, "the relay continues the sender's trace");
    assert_ne!(
        ask_span, client_span,
        "pod a's span is a child of the sender's"
    );

    // Pod b pushes the deliver with pod a's span as its parent.
    let (deliver_tp, message_id) = b
        .expect(|f| match &f.body {
            Body::Deliver(d) if d.to == bob.peer_id => {
                Some((f.traceparent.clone(), d.message.message_id))
            }
            _ => None,
        })
        .await;
    let deliver_tp = deliver_tp.expect("`deliver` carries the trace");
    assert_eq!(parts(&deliver_tp), (trace_id.clone(), ask_span.clone()));

    // Bob's receipt continues the deliver's trace; the state comes back to alice on pod a.
    let receipt = Frame::new(Body::Receipt(Receipt {
        peer_id: bob.peer_id.clone(),
        message_id,
        state: ReceiptState::Delivered,
        reason: None,
    }))
    .traced(Some(deliver_tp.clone()));
    b.send_frame(&receipt).await;
    let delivery_tp = a
        .expect(|f| match &f.body {
            Body::Delivery(d)
                if d.message_id == message_id && d.state == DeliveryState::Delivered =>
            {
                Some(f.traceparent.clone())
            }
            _ => None,
        })
        .await
        .expect("`delivery` carries the trace");
    let (t, receipt_span) = parts(&delivery_tp);
    assert_eq!(t, trace_id);

    // Both pods flush their spans when they drain.
    for p in [a_pod, b_pod] {
        p.signal("TERM");
        assert!(p.wait(Duration::from_secs(15)).await.success());
    }
    let spans: Vec<_> = collector
        .spans()
        .into_iter()
        .filter(|s| s.trace_id == trace_id)
        .collect();
    let find = |instance: &str, name: &str| {
        spans
            .iter()
            .find(|s| s.instance == instance && s.name == name)
            .unwrap_or_else(|| panic!("no `{name}` span from {instance} in {spans:#?}"))
            .clone()
    };
    let ask_a = find("pod-a", "ask");
    assert_eq!(ask_a.service, "repowire-relay");
    assert_eq!(ask_a.span_id, ask_span);
    assert_eq!(ask_a.parent_span_id, client_span);
    let forwarded_b = find("pod-b", "forward deliver");
    assert_eq!(forwarded_b.parent_span_id, ask_span);
    let receipt_b = find("pod-b", "receipt");
    assert_eq!(receipt_b.parent_span_id, ask_span);
    assert_eq!(receipt_b.span_id, receipt_span);
    let back_a = find("pod-a", "forward frame");
    assert_eq!(back_a.parent_span_id, receipt_span);
}

/// A takeover whose notice a pod missed: Redis says pod b holds bob, pod a still has him bound.
/// Pod a's next heartbeat finds the newer claim, writes nothing, and lets bob go (his connection
/// is told), instead of taking him back and routing his messages to itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heartbeat_that_finds_a_newer_claim_lets_the_peer_go() {
    let db = TempDatabase::create("repowire_cluster");
    let prefix = repowire_e2e::redis_prefix();
    let redis = repowire_e2e::redis_url();
    let ttl = [("REPOWIRE_PRESENCE_TTL_SECS", "3")];
    let a_pod = RelayProcess::start_pod(&db.url(), &redis, &prefix, "pod-a", &ttl).await;
    let key = a_pod.first_key.clone().expect("key");
    let mut a = TestClient::connect(&a_pod.http, &a_pod.ws, &key).await;
    let bob = a.peer("bob", "dev").await;

    // Pod b's claim, as it would record it; the notice to pod a is what got lost.
    let presence_key = format!("{prefix}:t:{}:p:{}", a.tenant_id, bob.peer_id);
    let data = serde_json::json!({
        "pod": "pod-b", "peer_id": bob.peer_id.as_str(), "name": "bob", "circle": "dev",
        "role": "agent", "turn_state": "idle", "last_seen_ms": 1
    })
    .to_string();
    let status = std::process::Command::new("redis-cli")
        .args([
            "-u",
            &redis,
            "HSET",
            &presence_key,
            "pod",
            "pod-b",
            "data",
            &data,
        ])
        .status()
        .expect("redis-cli");
    assert!(status.success());

    let notice = a
        .expect(|f| match &f.body {
            Body::Error(e) if e.re.is_none() && e.code == ErrorCode::NotRegistered => {
                Some(e.clone())
            }
            _ => None,
        })
        .await;
    assert!(notice.message.contains(bob.peer_id.as_str()), "{notice:?}");
    // Redis still says pod b: the heartbeat did not take him back.
    let holder = std::process::Command::new("redis-cli")
        .args(["-u", &redis, "HGET", &presence_key, "pod"])
        .output()
        .expect("redis-cli");
    assert_eq!(String::from_utf8_lossy(&holder.stdout).trim(), "pod-b");
}

/// Pods keep stored peers for name resolution (a database read per message otherwise). A name
/// that changes hands on another pod is seen at once: bob's session ends on pod b and a new
/// session takes the name "bob" there; once alice (pod a) has seen the new bob come online, a
/// message to "bob" goes to the new session, never to the old one's inbox.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_taken_by_a_new_session_on_another_pod_routes_to_it_at_once() {
    let db = TempDatabase::create("repowire_cluster");
    let prefix = repowire_e2e::redis_prefix();
    let a_pod = pod(&db, &prefix, "pod-a").await;
    let key = a_pod.first_key.clone().expect("key");
    let b_pod = pod(&db, &prefix, "pod-b").await;

    let mut a = TestClient::connect(&a_pod.http, &a_pod.ws, &key).await;
    let alice = a.peer("alice", "dev").await;
    let mut old = TestClient::connect(&b_pod.http, &b_pod.ws, &key).await;
    let bob = old.peer("bob", "dev").await;
    presence(&mut a, &bob.peer_id, PresenceEvent::Online).await;

    // Pod a resolves "bob" (and keeps the answer).
    let first = a
        .notify(&alice, "bob", "to the first bob")
        .await
        .expect("accepted");
    assert_eq!(first.recipients[0].peer_id, bob.peer_id);
    assert_eq!(
        old.delivered_to(&bob.peer_id).await.message.text,
        "to the first bob"
    );

    // The first session ends; a new one (no reclaim: a new peer) takes the name on pod b.
    drop(old);
    presence(&mut a, &bob.peer_id, PresenceEvent::Offline).await;
    let mut new = TestClient::connect(&b_pod.http, &b_pod.ws, &key).await;
    let bob2 = new.peer("bob", "dev").await;
    assert_eq!(bob2.name, "bob", "the name was free again");
    assert_ne!(bob2.peer_id, bob.peer_id);
    presence(&mut a, &bob2.peer_id, PresenceEvent::Online).await;

    let second = a
        .notify(&alice, "bob", "to the new bob")
        .await
        .expect("accepted");
    assert_eq!(
        second.recipients[0].peer_id, bob2.peer_id,
        "resolved with a stale answer: routed to the old session's inbox"
    );
    assert_eq!(
        new.delivered_to(&bob2.peer_id).await.message.text,
        "to the new bob"
    );
}

/// Waits for a presence frame about `peer`.
/// A key revoked with the admin CLI (which writes only the database) has its live connections
/// closed on every pod within seconds, and its unexpired token is refused everywhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_revoked_with_the_cli_closes_its_connections_on_every_pod() {
    let db = TempDatabase::create("repowire_cluster");
    let prefix = repowire_e2e::redis_prefix();
    let a_pod = pod(&db, &prefix, "pod-a").await;
    let b_pod = pod(&db, &prefix, "pod-b").await;
    let admin = |args: &[&str]| repowire_e2e::process::admin(&db.url(), args);
    let key = admin(&["key", "create", "default", "--label", "doomed"]);
    let keep = a_pod.first_key.clone().expect("the first pod bootstraps");
    let key_id = repowire_e2e::process::key_id_labelled(&db.url(), "default", "doomed");
    let token = repowire_e2e::client::token(&a_pod.http, &key)
        .await
        .expect("token")
        .token;
    let mut on_a = TestClient::connect(&a_pod.http, &a_pod.ws, &key).await;
    let mut on_b = TestClient::connect(&b_pod.http, &b_pod.ws, &key).await;
    let mut other = TestClient::connect(&b_pod.http, &b_pod.ws, &keep).await;
    on_a.peer("a-side", "dev").await;
    on_b.peer("b-side", "dev").await;
    let survivor = other.peer("survivor", "dev").await;

    let revoked_at = Instant::now();
    admin(&["key", "revoke", &key_id]);
    for client in [&mut on_a, &mut on_b] {
        let close = client.closed().await.expect("closed");
        assert_eq!(u16::from(close.code), CloseCode::KEY_REVOKED);
    }
    let took = revoked_at.elapsed();
    assert!(took < Duration::from_secs(5), "closed after {took:?}");
    for pod in [&a_pod, &b_pod] {
        assert_eq!(
            repowire_e2e::client::open(&pod.ws, Some(&token))
                .await
                .err(),
            Some(401),
            "the token minted before the revocation is dead on every pod"
        );
    }
    // The tenant's other key is untouched.
    assert!(
        other
            .list(&survivor.peer_id, false)
            .await
            .iter()
            .any(|p| p.peer_id == survivor.peer_id)
    );
}

/// Display names are allocated atomically across the cluster: many peers of one base name
/// registering at the same moment on two pods all get different names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_name_registered_at_once_on_two_pods_is_never_given_twice() {
    let db = TempDatabase::create("repowire_cluster");
    let prefix = repowire_e2e::redis_prefix();
    let a_pod = pod(&db, &prefix, "pod-a").await;
    let b_pod = pod(&db, &prefix, "pod-b").await;
    let key = a_pod.first_key.clone().expect("key");
    for round in 0..4 {
        let circle = format!("round{round}");
        let mut clients = Vec::new();
        for i in 0..12 {
            let p = if i % 2 == 0 { &a_pod } else { &b_pod };
            clients.push(TestClient::connect(&p.http, &p.ws, &key).await);
        }
        let peers =
            futures::future::join_all(clients.iter_mut().map(|c| c.peer("twin", &circle))).await;
        let mut names: Vec<String> = peers.iter().map(|p| p.name.clone()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), peers.len(), "round {round}: {names:?}");
        assert!(names.contains(&"twin".to_owned()), "{names:?}");
    }
}

/// protocol.md §10.9: a peer's live `deliver` frames come in `seq` order, also when senders on
/// two pods write to its inbox at once (local commits and forwarded ones interleave).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_deliveries_from_both_pods_at_once_keep_seq_order() {
    const SENDERS: usize = 4;
    const EACH: usize = 250;
    const WINDOW: usize = 50;
    let db = TempDatabase::create("repowire_cluster");
    let prefix = repowire_e2e::redis_prefix();
    let a_pod = pod(&db, &prefix, "pod-a").await;
    let b_pod = pod(&db, &prefix, "pod-b").await;
    let key = a_pod.first_key.clone().expect("key");
    let mut receiver = TestClient::connect(&b_pod.http, &b_pod.ws, &key).await;
    let target = receiver.peer("target", "dev").await;
    let mut senders = Vec::new();
    for i in 0..SENDERS {
        let p = if i % 2 == 0 { &a_pod } else { &b_pod };
        let mut c = TestClient::connect(&p.http, &p.ws, &key).await;
        let me = c.peer(&format!("sender{i}"), "dev").await;
        senders.push((c, me));
    }
    let tasks: Vec<_> = senders
        .into_iter()
        .map(|(mut c, me)| {
            tokio::spawn(async move {
                for window in 0..EACH / WINDOW {
                    let frames: Vec<Frame> = (0..WINDOW)
                        .map(|k| client::notify_frame(&me, "target", format!("{window}-{k}")))
                        .collect();
                    for f in &frames {
                        c.send_frame(f).await;
                    }
                    for f in &frames {
                        c.answer(f.id).await.expect("accepted");
                    }
                }
            })
        })
        .collect();
    let mut last = 0u64;
    let mut seen = 0;
    while seen < SENDERS * EACH {
        let (seq, redelivery) = receiver
            .expect(|f| match &f.body {
                Body::Deliver(d) if d.to == target.peer_id => Some((d.seq, d.redelivery)),
                _ => None,
            })
            .await;
        if redelivery {
            continue;
        }
        assert!(seq > last, "deliver seq {seq} after {last}");
        last = seq;
        seen += 1;
    }
    for t in tasks {
        t.await.expect("sender");
    }
}

async fn presence(client: &mut TestClient, peer: &PeerId, event: PresenceEvent) {
    client
        .expect(|f| match &f.body {
            Body::Presence(p) if &p.peer.peer_id == peer && p.event == event => Some(()),
            _ => None,
        })
        .await
}

/// Sends traced notifies from `from` to `to` until one arrives live (with its trace, which a
/// delivery by the inbox catch-up, read back from the database, does not carry): from then on
/// this binding's deliveries are live.
/// Waits until a message from `a` reaches `b` live (pushed when committed) rather than from the
/// inbox by `b`'s catch-up. Needs trace export on: a live `deliver` carries the sending pod's
/// span (the one on its `accepted`), one from the inbox a span of its own under it.
async fn live_path_open(a: &mut TestClient, from: &PeerInfo, b: &mut TestClient, to: &PeerInfo) {
    for _ in 0..50 {
        let probe = Frame::new(Body::Notify(Notify {
            from: from.peer_id.clone(),
            to: to.peer_id.to_string(),
            circle: None,
            text: "probe".into(),
        }))
        .traced(Some(format!(
            "00-{}-{}-01",
            uuid::Uuid::new_v4().simple(),
            &uuid::Uuid::new_v4().simple().to_string()[..16]
        )));
        a.send_frame(&probe).await;
        let sent = a
            .expect(|f| match &f.body {
                Body::Accepted(acc) if acc.re == probe.id => Some(f.traceparent.clone()),
                _ => None,
            })
            .await;
        let got = b
            .expect(|f| match &f.body {
                Body::Deliver(d) if d.message.message_id == probe.id => Some(f.traceparent.clone()),
                _ => None,
            })
            .await;
        if sent.is_some() && got == sent {
            return;
        }
    }
    panic!("deliveries to {} never went live", to.peer_id);
}
