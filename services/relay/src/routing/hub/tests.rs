//! The hub's unit tests: binding and names, delivery order, slow consumers, revocations.

use super::*;

fn connect(hub: &Hub, tenant: &str, id: ConnId, key_id: &str, tx: OutSender, kick: Arc<Kick>) {
    hub.add_conn(
        tenant,
        ConnHandle {
            id,
            key_id: key_id.into(),
            tx,
            kick,
        },
    );
}

fn record(peer_id: &str, circle: &str) -> PeerRecord {
    PeerRecord::for_tests("t", peer_id, "", circle)
}

#[test]
fn colliding_names_in_one_circle_get_suffixes_but_other_circles_do_not() {
    let hub = Hub::default();
    assert_eq!(
        hub.bind_peer(1, record("p1", "a"), "api", 0).record.name,
        "api"
    );
    assert_eq!(
        hub.bind_peer(1, record("p2", "a"), "api", 0).record.name,
        "api-2"
    );
    assert_eq!(
        hub.bind_peer(1, record("p3", "a"), "api", 0).record.name,
        "api-3"
    );
    assert_eq!(
        hub.bind_peer(1, record("p4", "b"), "api", 0).record.name,
        "api"
    );
    // Rebinding the same peer keeps its own name.
    assert_eq!(
        hub.bind_peer(2, record("p1", "a"), "api", 0).record.name,
        "api"
    );
}

#[test]
fn live_deliveries_wait_for_catch_up_to_finish() {
    let hub = Hub::default();
    let (tx, mut rx) = queue(8, 0, Budget::new(0));
    connect(&hub, "t", 1, "k", tx, Arc::default());
    let epoch = hub.bind_peer(1, record("p1", "a"), "api", 0).epoch;
    assert_eq!(
        hub.deliver_live("t", "p1", 1, || "m1".into()),
        Live::Held,
        "skipped while catching up"
    );
    assert_eq!(
        hub.finish_catch_up("t", "p1", epoch, 0),
        Some(false),
        "seq 1 was committed after the read"
    );
    assert_eq!(hub.finish_catch_up("t", "p1", epoch, 1), Some(true));
    assert_eq!(hub.deliver_live("t", "p1", 2, || "m2".into()), Live::Pushed);
    assert_eq!(&*rx.try_recv().expect("pushed"), "m2");
    assert_eq!(
        hub.deliver_live("t", "other", 1, || "m".into()),
        Live::NotHere
    );
}

/// Live pushes for a binding never go back in `seq`: an entry arriving after a later one
/// (a forward from another pod) was pushed by the catch-up the later one started, and is
/// not pushed again.
#[test]
fn an_entry_that_skips_ahead_starts_a_catch_up_and_late_ones_are_not_pushed_again() {
    let hub = Hub::default();
    let mut requests = hub.take_catch_up_requests().expect("first take");
    assert!(hub.take_catch_up_requests().is_none(), "taken once");
    let (tx, mut rx) = queue(8, 0, Budget::new(0));
    connect(&hub, "t", 1, "k", tx, Arc::default());
    let epoch = hub.bind_peer(1, record("p1", "a"), "api", 0).epoch;
    assert_eq!(hub.finish_catch_up("t", "p1", epoch, 0), Some(true));
    assert_eq!(hub.deliver_live("t", "p1", 1, || "m1".into()), Live::Pushed);

    // Entry 3 before 2: held, and a catch-up from 1 is asked for.
    assert_eq!(hub.deliver_live("t", "p1", 3, || "m3".into()), Live::Held);
    let c = requests.try_recv().expect("a catch-up was asked for");
    assert_eq!((c.conn, c.epoch, c.after_seq), (1, epoch, 1));
    assert_eq!(hub.deliver_live("t", "p1", 4, || "m4".into()), Live::Held);
    assert!(requests.try_recv().is_err(), "one catch-up at a time");
    // The catch-up pushes 2, 3 and 4 from the inbox, read after a snapshot of 4.
    for seq in 2..=4 {
        assert!(hub.catch_up_sender(&c, seq).is_some());
    }
    assert_eq!(hub.finish_catch_up("t", "p1", epoch, 4), Some(true));

    // The late forward of entry 2 is not pushed again; entry 5 is.
    assert_eq!(hub.deliver_live("t", "p1", 2, || "m2".into()), Live::Held);
    assert_eq!(hub.deliver_live("t", "p1", 5, || "m5".into()), Live::Pushed);
    let pushed: Vec<String> = std::iter::from_fn(|| rx.try_recv())
        .map(String::from)
        .collect();
    assert_eq!(pushed, ["m1", "m5"], "2 to 4 went by the catch-up");
    assert!(requests.try_recv().is_err());
}

/// A registration's catch-up covers the inbox up to the seq the peer registered with, so
/// the first live entry after it is no gap.
#[test]
fn live_delivery_continues_after_the_inbox_seq_of_the_registration() {
    let hub = Hub::default();
    let mut requests = hub.take_catch_up_requests().expect("requests");
    let (tx, mut rx) = queue(8, 0, Budget::new(0));
    connect(&hub, "t", 1, "k", tx, Arc::default());
    let mut reclaimed = record("p1", "a");
    reclaimed.last_seq = 7;
    let epoch = hub.bind_peer(1, reclaimed, "api", 0).epoch;
    assert_eq!(hub.finish_catch_up("t", "p1", epoch, 0), Some(true));
    assert_eq!(hub.deliver_live("t", "p1", 8, || "m8".into()), Live::Pushed);
    assert_eq!(&*rx.try_recv().expect("pushed"), "m8");
    assert!(requests.try_recv().is_err());
}

/// After the bus was down, a catch-up starts again after what was pushed, unless one is
/// running (it reads the inbox until current anyway).
#[test]
fn a_restarted_catch_up_begins_after_what_was_pushed() {
    let hub = Hub::default();
    let (tx, _rx) = queue(8, 0, Budget::new(0));
    connect(&hub, "t", 1, "k", tx, Arc::default());
    let epoch = hub.bind_peer(1, record("p1", "a"), "api", 0).epoch;
    assert_eq!(hub.restart_catch_up("t", "p1"), None, "one is running");
    assert_eq!(hub.finish_catch_up("t", "p1", epoch, 0), Some(true));
    assert_eq!(hub.deliver_live("t", "p1", 1, || "m1".into()), Live::Pushed);
    let c = hub.restart_catch_up("t", "p1").expect("restarted");
    assert_eq!((c.after_seq, c.conn), (1, 1));
    assert_ne!(c.epoch, epoch, "a replay of the old epoch stops");
    assert_eq!(hub.deliver_live("t", "p1", 2, || "m2".into()), Live::Held);
}

#[test]
fn a_full_queue_kicks_the_connection_as_a_slow_consumer() {
    let hub = Hub::default();
    let (tx, _rx) = queue(1, 0, Budget::new(0));
    let kick = Arc::new(Kick::default());
    connect(&hub, "t", 1, "k", tx, kick.clone());
    assert!(hub.send_to_conn("t", 1, "a".into()));
    assert!(!hub.send_to_conn("t", 1, "b".into()));
    assert_eq!(
        kick.reason.get().map(|r| r.0),
        Some(CloseCode::SLOW_CONSUMER)
    );
}

#[test]
fn a_queue_past_its_byte_cap_kicks_the_connection_as_a_slow_consumer() {
    let hub = Hub::default();
    let (tx, _rx) = queue(1024, 1000, Budget::new(0));
    let kick = Arc::new(Kick::default());
    connect(&hub, "t", 1, "k", tx, kick.clone());
    assert!(hub.send_to_conn("t", 1, "a".repeat(600).into()));
    assert!(!hub.send_to_conn("t", 1, "b".repeat(600).into()));
    assert_eq!(
        kick.reason.get().map(|r| r.0),
        Some(CloseCode::SLOW_CONSUMER)
    );
}

#[test]
fn revoking_a_key_kicks_only_its_connections() {
    let hub = Hub::default();
    let (a, b) = (Arc::new(Kick::default()), Arc::new(Kick::default()));
    let (tx, _rx) = queue(1, 0, Budget::new(0));
    connect(&hub, "t1", 1, "k1", tx.clone(), a.clone());
    connect(&hub, "t2", 2, "k2", tx, b.clone());
    assert_eq!(hub.kick_key("k1", CloseCode::KEY_REVOKED, "revoked"), 1);
    assert!(a.token.is_cancelled() && !b.token.is_cancelled());
}

#[test]
fn a_rebind_makes_the_old_bindings_catch_up_stale() {
    let hub = Hub::default();
    let (tx, _rx) = queue(8, 0, Budget::new(0));
    connect(&hub, "t", 1, "k", tx, Arc::default());
    let first = hub.bind_peer(1, record("p1", "a"), "api", 0).epoch;
    let second = hub.bind_peer(1, record("p1", "a"), "api", 0).epoch;
    assert_ne!(first, second);
    assert_eq!(
        hub.latest_seq("t", "p1", first),
        None,
        "the old catch-up stops"
    );
    assert!(hub.conn_sender("t", 1, "p1", Some(first)).is_none());
    assert_eq!(
        hub.finish_catch_up("t", "p1", first, 0),
        None,
        "and cannot open the new binding's live path"
    );
    assert_eq!(hub.finish_catch_up("t", "p1", second, 0), Some(true));
}

#[test]
fn a_failed_registration_restores_the_binding_it_replaced() {
    let hub = Hub::default();
    let old = hub.bind_peer(1, record("p1", "a"), "api", 0);
    let new = hub.bind_peer(2, record("p1", "a"), "api", 0);
    assert_eq!(new.previous_conn, Some(1));
    let restored = hub
        .rollback_bind("t", "p1", new.epoch, new.replaced)
        .expect("restored");
    assert_eq!(restored.conn, 1);
    assert_ne!(restored.epoch, old.epoch, "the old catch-up stops");
    let back = hub.live_peer("t", "p1").expect("still live");
    assert_eq!((back.conn, back.epoch), (1, restored.epoch));
    // Without a replaced binding, the peer is simply unbound.
    let fresh = hub.bind_peer(1, record("p2", "a"), "web", 0);
    hub.rollback_bind("t", "p2", fresh.epoch, fresh.replaced);
    assert!(hub.live_peer("t", "p2").is_none());
}

#[test]
fn an_expired_description_is_cleared_only_if_unchanged() {
    let hub = Hub::default();
    hub.bind_peer(1, record("p1", "a"), "api", 0);
    hub.update_peer("t", 1, "p1", None, Some(Some("old".into())), 10);
    hub.update_peer("t", 1, "p1", None, Some(Some("new".into())), 20);
    hub.clear_description("t", "p1", 10);
    assert_eq!(
        hub.live_peer("t", "p1")
            .and_then(|p| p.record.description)
            .as_deref(),
        Some("new")
    );
    hub.clear_description("t", "p1", 20);
    assert_eq!(
        hub.live_peer("t", "p1").and_then(|p| p.record.description),
        None
    );
}

#[test]
fn one_replay_at_a_time_per_peer() {
    let hub = Hub::default();
    hub.bind_peer(1, record("p1", "a"), "api", 0);
    let epoch = hub.start_replay("t", 1, "p1").expect("first replay");
    assert_eq!(
        hub.start_replay("t", 1, "p1"),
        None,
        "a second one waits for the first"
    );
    assert_eq!(
        hub.start_replay("t", 2, "p1"),
        None,
        "only the holding connection may replay"
    );
    hub.end_replay("t", "p1", epoch + 1);
    assert_eq!(
        hub.start_replay("t", 1, "p1"),
        None,
        "another binding's end does not count"
    );
    hub.end_replay("t", "p1", epoch);
    assert!(hub.start_replay("t", 1, "p1").is_some());
}
