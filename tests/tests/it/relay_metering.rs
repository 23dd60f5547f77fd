//! Issue 16.4: usage is exact under retries and a killed process. A relay on Postgres is
//! killed with SIGKILL in the middle of a burst of notifications; after a restart every
//! notification is sent again with its original id. The tenant's metered count must equal the
//! number of distinct messages stored: 0 over (retries of stored messages are not counted
//! again), 0 under (nothing stored is missed). Connection time, which the process measures and
//! flushes every `REPOWIRE_USAGE_FLUSH_MS`, loses at most what was measured since the last
//! flush: one interval per open connection.

use std::time::{Duration, Instant};

use repowire_e2e::client::{TestClient, notify_frame};
use repowire_e2e::process::{RelayProcess, TempDatabase, relay_bin};
use repowire_protocol::{Body, Frame, Register};
use serde_json::Value;

const ADMIN: &str = "metering-admin-token";
const MESSAGES: usize = 400;
/// The relay's usage flush interval.
const FLUSH_MS: i64 = 250;

async fn start(db: &TempDatabase) -> RelayProcess {
    let url = db.url();
    RelayProcess::start(
        &relay_bin(),
        &[],
        &[
            ("DATABASE_URL", url.as_str()),
            (
                "REPOWIRE_JWT_SECRET",
                "metering-test-secret-metering-test-secret",
            ),
            ("REPOWIRE_ADMIN_TOKEN", ADMIN),
            ("REPOWIRE_USAGE_FLUSH_MS", "250"),
        ],
    )
    .await
}

/// Connection time stored for every tenant (ms).
fn connection_ms(db: &TempDatabase) -> i64 {
    usage(db, "connection_ms", "sum")
}

/// A usage metric over every row: `sum` or `max`.
fn usage(db: &TempDatabase, metric: &str, how: &str) -> i64 {
    db.psql(&format!(
        "SELECT COALESCE({how}(value), 0) FROM usage_hourly WHERE metric = '{metric}'"
    ))
    .parse()
    .expect("number")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_relay_neither_loses_nor_double_counts_usage() {
    let db = TempDatabase::create("metering");
    let relay = start(&db).await;
    let key = relay.first_key.clone().expect("bootstrap key");
    let opening = Instant::now();
    let mut b = TestClient::connect(&relay.http, &relay.ws, &key).await;
    b.peer("bob", "dev").await;
    let mut a = TestClient::connect(&relay.http, &relay.ws, &key).await;
    let alice = a.peer("alice", "dev").await;
    let open = Instant::now();
    // Some flushes first, so what the kill loses is measured against stored time.
    let deadline = Instant::now() + Duration::from_secs(20);
    while connection_ms(&db) < 1_000 {
        assert!(Instant::now() < deadline, "no connection time was flushed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(usage(&db, "peak_connections", "max"), 2, "two connections");
    assert_eq!(usage(&db, "peak_peers", "max"), 2, "two live peers");
    let frames: Vec<Frame> = (0..MESSAGES)
        .map(|i| notify_frame(&alice, "bob", format!("metered {i}")))
        .collect();

    // Everything goes out at once; the relay is killed once a quarter has been answered.
    for f in &frames {
        a.send_frame(f).await;
    }
    for f in &frames[..MESSAGES / 4] {
        a.answer(f.id).await.expect("accepted");
    }
    let killing = Instant::now();
    relay.signal("KILL");
    let _ = relay.wait(Duration::from_secs(10)).await;
    let killed = Instant::now();
    // Both connections were open from `open` to `killing` at least, `opening` to `killed` at
    // most; what was measured after the last flush is lost: one interval (plus the flush's own
    // few milliseconds of scheduling) per connection.
    let stored = connection_ms(&db);
    let ms = |d: Duration| i64::try_from(d.as_millis()).expect("ms");
    let slack = 100;
    let (low, high) = (
        2 * (ms(killing - open) - FLUSH_MS - slack),
        2 * ms(killed - opening) + 2,
    );
    println!("connection time stored at the kill: {stored} ms, expected {low}..={high}");
    assert!(
        (low..=high).contains(&stored),
        "stored {stored} ms of connection time, expected {low}..={high}"
    );
    let stored_at_kill: usize = db
        .psql("SELECT count(*) FROM messages")
        .parse()
        .expect("count");
    println!("killed with {stored_at_kill} of {MESSAGES} stored");
    assert!(
        (MESSAGES / 4..=MESSAGES).contains(&stored_at_kill),
        "{stored_at_kill} stored"
    );

    // Restarted: the sender reclaims its peer and sends every frame again, same ids.
    let relay = start(&db).await;
    let mut a = TestClient::connect(&relay.http, &relay.ws, &key).await;
    a.register(Register {
        name: Some("alice".into()),
        circle: Some("dev".into()),
        backend: "claude-code".into(),
        path: Some("/work/alice".into()),
        reclaim: Some(alice.peer_id.clone()),
        ..Default::default()
    })
    .await;
    for f in &frames {
        a.send_frame(f).await;
    }
    for f in &frames {
        match a.answer(f.id).await {
            Ok(Body::Accepted(_)) => {}
            other => panic!("{}: {other:?}", f.id),
        }
    }

    let distinct: i64 = db
        .psql("SELECT count(DISTINCT message_id) FROM messages WHERE kind = 'notify'")
        .parse()
        .expect("count");
    assert_eq!(
        distinct, MESSAGES as i64,
        "every notification is stored once"
    );
    let report: Value = reqwest::Client::new()
        .get(format!(
            "{}/admin/v1/tenants/default/usage?granularity=month",
            relay.http
        ))
        .bearer_auth(ADMIN)
        .send()
        .await
        .expect("usage")
        .json()
        .await
        .expect("json");
    let metered: i64 = report["periods"]
        .as_array()
        .expect("periods")
        .iter()
        .map(|p| p["metrics"]["messages_notify"].as_i64().expect("metric"))
        .sum();
    assert_eq!(
        metered, distinct,
        "metered {metered}, stored {distinct} (killed with {stored_at_kill} stored): {report}"
    );
    let entries: i64 = db
        .psql("SELECT count(*) FROM inbox")
        .parse()
        .expect("count");
    let metered_entries: i64 = report["periods"]
        .as_array()
        .expect("periods")
        .iter()
        .map(|p| p["metrics"]["inbox_entries"].as_i64().expect("metric"))
        .sum();
    assert_eq!(metered_entries, entries);
}
