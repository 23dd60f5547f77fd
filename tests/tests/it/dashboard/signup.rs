//! Self-serve sign-up: off by default (`404`); on, with an invite code: a wrong code and a bad
//! name store nothing; a good one creates a tenant on the free plan, shows its first key once
//! with the commands to connect a machine to this relay, and signs the browser in; a taken
//! name is said; a source past its sign-ups per hour gets `429`. Timed: from the sign-up page
//! to two agents of the new team asking and answering, with stand-in agents.

use std::time::Instant;

use repowire_e2e::client::TestClient;
use repowire_e2e::process::{RelayProcess, TempDatabase, admin};
use repowire_e2e::web::Browser;
use repowire_protocol::{Ack, Body};

use super::attribute_after;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_visitor_signs_up_a_team_and_its_agents_talk_within_five_minutes() {
    let db = TempDatabase::create("repowire_dashboard_signup");
    let redis = repowire_e2e::redis_url();
    let prefix = repowire_e2e::redis_prefix();
    let closed = RelayProcess::start_pod(&db.url(), &redis, &prefix, "pod-a", &[]).await;
    let open = RelayProcess::start_pod(
        &db.url(),
        &redis,
        &prefix,
        "pod-b",
        &[
            ("REPOWIRE_SIGNUP", "true"),
            ("REPOWIRE_SIGNUP_INVITE_CODE", "let-me-in"),
            ("REPOWIRE_SIGNUPS_PER_HOUR", "3"),
            ("REPOWIRE_TRUSTED_PROXIES", "127.0.0.1/32"),
        ],
    )
    .await;
    let started = Instant::now();
    assert_eq!(
        Browser::new(&closed.http)
            .get("/dashboard/signup")
            .await
            .status,
        404,
        "off unless turned on"
    );

    let mut visitor = Browser::new(&open.http);
    visitor
        .headers
        .push(("x-forwarded-for".into(), "198.51.100.20".into()));
    let page = visitor.get("/dashboard/signup").await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains(r#"name="invite_code""#), "{}", page.body);
    let tenants = || admin(&db.url(), &["tenant", "list"]);

    // Nothing is stored for a wrong code or a bad name.
    let wrong = visitor
        .post(
            "/dashboard/signup",
            &[("team", "rocket"), ("invite_code", "guess")],
        )
        .await;
    assert_eq!(wrong.status, 403, "{}", wrong.body);
    assert!(!tenants().contains("rocket"));
    let bad = visitor
        .post(
            "/dashboard/signup",
            &[("team", "no spaces!"), ("invite_code", "let-me-in")],
        )
        .await;
    assert_eq!(bad.status, 400, "{}", bad.body);

    // The team: its key once, the commands for this relay, and a signed-in browser.
    let welcome = visitor
        .post(
            "/dashboard/signup",
            &[("team", "rocket"), ("invite_code", "let-me-in")],
        )
        .await;
    assert_eq!(welcome.status, 200, "{}", welcome.body);
    let key = attribute_after(
        &welcome.body,
        r#"id="made-key" type="text" readonly value=""#,
    )
    .expect("the key")
    .to_owned();
    assert!(key.starts_with("rw_live_"), "{key}");
    assert!(
        welcome.body.contains(&format!(
            "repowire setup --relay-url {} --api-key {key}",
            open.http
        )),
        "{}",
        welcome.body
    );
    let listed = tenants();
    let line = listed
        .lines()
        .find(|l| l.contains("rocket"))
        .unwrap_or_else(|| panic!("no tenant: {listed}"));
    assert!(line.contains("free"), "on the free plan: {line}");
    let overview = visitor.get("/dashboard").await;
    assert_eq!(overview.status, 200, "signed in: {}", overview.body);
    assert!(overview.body.contains("rocket"), "{}", overview.body);
    assert!(overview.body.contains("plan free"), "{}", overview.body);
    let keys = visitor.get("/dashboard/keys").await;
    assert!(!keys.body.contains(&key), "the key is not shown again");

    // Two agents of the new team, on the two pods, ask and answer.
    let mut alice = TestClient::connect(&closed.http, &closed.ws, &key).await;
    let mut bob = TestClient::connect(&open.http, &open.ws, &key).await;
    let a = alice.peer("alice", "dev").await;
    let b = bob.peer("bob", "dev").await;
    alice
        .ask(&a, b.peer_id.as_str(), "first day: what do I work on?")
        .await
        .expect("asked");
    let asked = bob.delivered_to(&b.peer_id).await;
    bob.submit(Body::Ack(Ack {
        from: b.peer_id.clone(),
        correlation_id: asked.message.correlation_id.clone().expect("an ask id"),
        reply: Some("the onboarding doc".into()),
    }))
    .await
    .expect("answered");
    let reply = alice.delivered_to(&a.peer_id).await;
    assert_eq!(reply.message.text, "the onboarding doc");
    let took = started.elapsed();
    eprintln!(
        "sign-up page to two agents talking: {took:?} (machine time; a person adds reading and typing)"
    );
    assert!(took.as_secs() < 300, "{took:?}");

    // The name is taken now; and a source past 3 sign-ups an hour is refused.
    let mut other = Browser::new(&open.http);
    other
        .headers
        .push(("x-forwarded-for".into(), "203.0.113.9".into()));
    let taken = other
        .post(
            "/dashboard/signup",
            &[("team", "rocket"), ("invite_code", "let-me-in")],
        )
        .await;
    assert_eq!(taken.status, 409, "{}", taken.body);
    assert!(taken.body.contains("taken"), "{}", taken.body);
    let past = visitor
        .post(
            "/dashboard/signup",
            &[("team", "rocket-two"), ("invite_code", "let-me-in")],
        )
        .await;
    assert_eq!(past.status, 429, "{}", past.body);
    assert!(past.headers.get("retry-after").is_some());
    assert!(!tenants().contains("rocket-two"), "nothing stored");
}
