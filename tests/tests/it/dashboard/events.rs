//! The event log: a browser follows the tenant's events (peers coming and going, messages,
//! delivery states) over Server-Sent Events from one pod while they happen on both, drops the
//! stream, and picks it up on the other pod with `Last-Event-ID`, missing nothing and seeing
//! nothing twice; never another tenant's; only with `messages:read`.

use std::time::Duration;

use repowire_e2e::client::TestClient;
use repowire_e2e::process::{TempDatabase, admin};
use repowire_e2e::web::{Browser, EventStream};
use repowire_protocol::{Body, ErrorCode, ReceiptState, Register};
use serde_json::Value;

use super::{attribute_after, pods, scoped_key, signed_in};

const WAIT: Duration = Duration::from_secs(15);

/// Rows from `stream` until `done` holds for the rows read (each with its id checked to be the
/// next place after `after`). Returns them and the last place.
async fn rows_until(
    stream: &mut EventStream,
    mut after: u64,
    done: impl Fn(&[Value]) -> bool,
) -> (Vec<Value>, u64) {
    let mut rows = Vec::new();
    while !done(&rows) {
        let event = stream.next(WAIT).await.expect("the stream stays open");
        assert_eq!(event.event, "row", "{event:?}");
        let id: u64 = event
            .id
            .as_deref()
            .expect("an id")
            .parse()
            .expect("a place");
        assert_eq!(id, after + 1, "places follow one another: {event:?}");
        after = id;
        let row: Value = serde_json::from_str(&event.data).expect("a JSON row");
        assert_eq!(row["seq"], id);
        rows.push(row);
    }
    (rows, after)
}

fn has(rows: &[Value], kind: &str, state: &str, who: &str) -> bool {
    rows.iter()
        .any(|r| r["kind"] == kind && r["state"] == state && r["who"].as_str() == Some(who))
}

fn has_text(rows: &[Value], text: &str) -> bool {
    rows.iter()
        .any(|r| r["kind"] == "message" && r["what"].as_str() == Some(text))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_log_streams_from_any_pod_and_a_reconnect_misses_nothing() {
    let db = TempDatabase::create("repowire_dashboard_events");
    let (a, b) = pods(&db).await;
    admin(&db.url(), &["tenant", "create", "acme"]);
    let ours = scoped_key(
        &db,
        "default",
        "ours",
        &["connect", "usage:read", "messages:read"],
    );
    let agent_key = admin(&db.url(), &["key", "create", "default", "--label", "agent"]);
    let theirs = scoped_key(
        &db,
        "acme",
        "theirs",
        &["connect", "usage:read", "messages:read"],
    );

    let mut browser = signed_in(&a.http, &ours).await;
    let page = browser.get("/dashboard/events").await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(
        page.body.contains("Nothing has happened yet"),
        "{}",
        page.body
    );
    assert!(
        page.body
            .contains(r#"<script src="/dashboard/assets/events.js"#),
        "{}",
        page.body
    );
    let start: u64 = attribute_after(&page.body, "data-after=\"")
        .expect("the page's place")
        .parse()
        .expect("a number");
    assert_eq!(start, 0);

    // The same browser follows the log from pod b while things happen on both pods.
    let mut on_b_browser = Browser::new(&b.http);
    on_b_browser.cookie = browser.cookie.clone();
    let mut stream = on_b_browser
        .events("/dashboard/events/stream?after=0", None)
        .await
        .expect("a stream");
    assert_eq!(
        stream
            .headers
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("text/event-stream")
    );
    let mut on_a = TestClient::connect(&a.http, &a.ws, &agent_key).await;
    let mut on_b = TestClient::connect(&b.http, &b.ws, &agent_key).await;
    let alice = on_a.peer("alice", "dev").await;
    let bob = on_b.peer("bob", "qa").await;
    let hostile = "<img src=x onerror=alert(1)> \u{202e}evil";
    let sent = on_a
        .notify(&alice, bob.peer_id.as_str(), hostile)
        .await
        .expect("accepted");
    let got = on_b.delivered_to(&bob.peer_id).await;
    on_b.receipt(
        &bob.peer_id,
        got.message.message_id,
        ReceiptState::Delivered,
    )
    .await;
    let (rows, last) = rows_until(&mut stream, 0, |rows| {
        has(rows, "presence", "online", "alice (dev)")
            && has(rows, "presence", "online", "bob (qa)")
            && has_text(rows, hostile)
            && has(
                rows,
                "delivery",
                "delivered",
                &format!(
                    "bob ← alice, message …{}",
                    &sent.message_id.to_string()[28..]
                ),
            )
    })
    .await;
    assert!(
        rows.iter().any(|r| r["kind"] == "message"
            && r["who"] == "alice (dev) → bob"
            && r["state"] == "notify"),
        "{rows:?}"
    );
    drop(stream);

    // While no browser watches: an ask, a long message, bob leaves.
    on_b.ask(&bob, alice.peer_id.as_str(), "ready to ship?")
        .await
        .expect("accepted");
    let long = "y".repeat(1000);
    on_a.notify(&alice, bob.peer_id.as_str(), &long)
        .await
        .expect("accepted");
    drop(on_b);

    // Back, on pod a, from where it stopped: the rest, and nothing seen before.
    let mut stream = browser
        .events("/dashboard/events/stream?after=0", Some(&last.to_string()))
        .await
        .expect("a stream");
    let (rows, _) = rows_until(&mut stream, last, |rows| {
        has_text(rows, "ready to ship?")
            && has(rows, "presence", "offline", "bob (qa)")
            && rows.iter().any(|r| {
                r["what"]
                    .as_str()
                    .is_some_and(|w| w.ends_with("… (720 more characters)"))
            })
    })
    .await;
    assert!(!has_text(&rows, hostile), "seen twice: {rows:?}");

    // The page itself now shows the newest first, escaped.
    let page = browser.get("/dashboard/events").await;
    assert!(!page.body.contains("<img"), "{}", page.body);
    assert!(page.body.contains("&#60;img") || page.body.contains("&lt;img"));
    let newest = page.body.find("bob (qa)").expect("bob's offline");
    let oldest = page.body.find("alice (dev)</td>").expect("alice online");
    assert!(newest < oldest, "newest first");

    // Another tenant's browser sees its own events only. A tenant no dashboard has looked at
    // is not recorded: its peer that joined before its stream opened is not in its log.
    let mut acme = TestClient::connect(&a.http, &a.ws, &theirs).await;
    acme.peer("acme-early", "dev").await;
    let mut their_browser = Browser::new(&b.http);
    their_browser
        .post("/dashboard/signin", &[("api_key", &theirs)])
        .await;
    let mut theirs_stream = their_browser
        .events("/dashboard/events/stream", None)
        .await
        .expect("a stream");
    // On the stream's pod: it records at once (another pod learns of the watch from a bus
    // notice, an instant later).
    let mut acme_b = TestClient::connect(&b.http, &b.ws, &theirs).await;
    acme_b.peer("acme-agent", "dev").await;
    let (rows, acme_last) = rows_until(&mut theirs_stream, 0, |rows| !rows.is_empty()).await;
    assert_eq!(rows[0]["who"], "acme-agent (dev)", "{rows:?}");
    let page = their_browser.get("/dashboard/events").await;
    assert!(!page.body.contains("alice"), "{}", page.body);

    // A limit refuses something (the free plan's 10 live peers): the stream shows it, and the
    // overview lists it under recent limit refusals; ours never does.
    let overview = their_browser.get("/dashboard").await;
    assert!(overview.body.contains("None recently"), "{}", overview.body);
    let mut crowd = TestClient::connect(&b.http, &b.ws, &theirs).await;
    // acme-early, acme-agent and 8 more: the plan's 10.
    for i in 0..8 {
        crowd.peer(&format!("extra-{i}"), "dev").await;
    }
    let id = crowd
        .send(Body::Register(Register {
            name: Some("one-too-many".into()),
            circle: Some("dev".into()),
            backend: "test".into(),
            role: None,
            path: None,
            machine: None,
            reclaim: None,
        }))
        .await;
    let refused = crowd
        .answer(id)
        .await
        .expect_err("the 11th peer is refused");
    assert_eq!(refused.code, ErrorCode::LimitExceeded);
    let (rows, _) = rows_until(&mut theirs_stream, acme_last, |rows| {
        rows.iter().any(|r| r["kind"] == "refused")
    })
    .await;
    let row = rows
        .iter()
        .find(|r| r["kind"] == "refused")
        .expect("a refusal");
    assert_eq!(row["state"], "peers", "{row}");
    let overview = their_browser.get("/dashboard").await;
    assert!(
        overview
            .body
            .contains(r#"<span class="state failed">peers</span>"#),
        "{}",
        overview.body
    );
    assert!(
        overview.body.contains("allows 10 live peers"),
        "{}",
        overview.body
    );
    let ours_overview = browser.get("/dashboard").await;
    assert!(
        ours_overview.body.contains("None recently"),
        "{}",
        ours_overview.body
    );

    // A cursor that is not a place, and a session without `messages:read`.
    let refused = browser
        .events("/dashboard/events/stream", Some("nope"))
        .await
        .expect_err("refused");
    assert_eq!(refused.status, 400);
    let mut agent_browser = Browser::new(&a.http);
    agent_browser
        .post("/dashboard/signin", &[("api_key", &agent_key)])
        .await;
    assert_eq!(agent_browser.get("/dashboard/events").await.status, 403);
    let refused = agent_browser
        .events("/dashboard/events/stream", None)
        .await
        .expect_err("refused");
    assert_eq!(refused.status, 403);
    // Signed out: to the sign-in page, not a stream.
    let refused = Browser::new(&a.http)
        .events("/dashboard/events/stream", None)
        .await
        .expect_err("refused");
    assert_eq!(refused.status, 303);
}
