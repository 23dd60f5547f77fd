//! The pages: the overview across two pods (peers of both, a busy one, a hostile description
//! escaped, a peer going offline) and the Asks page (states, replies, filters), never another
//! tenant's; the Keys page (made once with its text shown once, within the session's scopes and
//! lifetime, revoked within the tenant, audited) and the usage CSV.

use repowire_e2e::client::TestClient;
use repowire_e2e::process::{RelayProcess, TempDatabase, admin};
use repowire_e2e::web::Browser;
use repowire_protocol::{Body, TurnState, UpdatePeer};

use super::{attribute_after, embedded_admin, pods, scoped_key, signed_in, token_status};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overview_shows_the_tenants_peers_on_every_pod_and_no_other_tenants() {
    let db = TempDatabase::create("repowire_dashboard");
    let (a, b) = pods(&db).await;
    admin(&db.url(), &["tenant", "create", "acme"]);
    // A person's key that may read the tenant's messages (the Asks page).
    let ours = scoped_key(
        &db,
        "default",
        "ours",
        &["connect", "usage:read", "messages:read"],
    );
    let theirs = admin(&db.url(), &["key", "create", "acme", "--label", "theirs"]);

    // Ours: one peer on each pod, one of them saying something hostile.
    let mut on_a = TestClient::connect(&a.http, &a.ws, &ours).await;
    let mut on_b = TestClient::connect(&b.http, &b.ws, &ours).await;
    on_a.peer("builder", "dev").await;
    let reviewer = on_b.peer("reviewer", "qa").await;
    let id = on_b
        .send(Body::UpdatePeer(UpdatePeer {
            peer_id: reviewer.peer_id.clone(),
            turn_state: Some(TurnState::Working),
            description: Some("<script>alert(1)</script> reviewing".into()),
        }))
        .await;
    on_b.answer(id).await.expect("updated");
    // Theirs: a peer with a name ours never has.
    let mut acme = TestClient::connect(&a.http, &a.ws, &theirs).await;
    acme.peer("acme-secret-agent", "dev").await;

    let mut browser = signed_in(&a.http, &ours).await;
    let page = browser.get("/dashboard").await;
    assert_eq!(page.status, 200, "{}", page.body);
    let body = &page.body;
    assert!(
        body.contains(">builder<") && body.contains(">reviewer<"),
        "{body}"
    );
    assert!(body.contains(">dev ") && body.contains(">qa "), "{body}");
    assert!(body.contains("2 online of 2"), "{body}");
    assert!(
        body.contains(r#"<span class="status busy">busy</span>"#),
        "{body}"
    );
    assert!(
        body.contains("&#60;script&#62;alert(1)&#60;/script&#62; reviewing")
            || body.contains("&lt;script&gt;alert(1)&lt;/script&gt; reviewing"),
        "the description is not escaped: {body}"
    );
    assert!(!body.contains("<script>"), "{body}");
    assert!(
        !body.contains("acme-secret-agent"),
        "another tenant's peer: {body}"
    );

    // Their session sees theirs only; a session is not a tenant picker: nothing in a URL or
    // form names a tenant.
    let mut their_browser = signed_in(&b.http, &theirs).await;
    let page = their_browser.get("/dashboard").await;
    assert!(page.body.contains("acme-secret-agent"), "{}", page.body);
    assert!(!page.body.contains(">builder<"), "{}", page.body);
    for probe in [
        "/dashboard?tenant=default",
        "/dashboard/?tenant_id=tnt-default",
    ] {
        let page = their_browser.get(probe).await;
        assert!(!page.body.contains(">builder<"), "{probe}: {}", page.body);
    }

    // Asks across the pods: one acked with a reply, one still open; the Asks page shows both
    // with their states and escaped text, filters them, and never shows the other tenant's.
    let builder = on_a.peer("asker", "dev").await;
    let acked = on_a
        .ask(&builder, reviewer.peer_id.as_str(), "<b>ship it?</b>")
        .await
        .expect("ask accepted");
    on_b.delivered_to(&reviewer.peer_id).await;
    let id = on_b
        .send(Body::Ack(repowire_protocol::Ack {
            from: reviewer.peer_id.clone(),
            correlation_id: acked.correlation_id.clone().expect("ask id"),
            reply: Some("yes & go".into()),
        }))
        .await;
    on_b.answer(id).await.expect("acked");
    on_a.ask(&builder, "builder", "still there?")
        .await
        .expect("ask accepted");
    let acme_peer = acme.peer("acme-asker", "dev").await;
    acme.ask(&acme_peer, "acme-secret-agent", "acme-only question")
        .await
        .expect("their ask");
    let page = browser.get("/dashboard/asks").await;
    assert_eq!(page.status, 200, "{}", page.body);
    let body = &page.body;
    assert!(
        body.contains("&#60;b&#62;ship it?&#60;/b&#62;")
            || body.contains("&lt;b&gt;ship it?&lt;/b&gt;"),
        "{body}"
    );
    assert!(
        body.contains(r#"<span class="state acked">acked</span>"#),
        "{body}"
    );
    assert!(
        body.contains("yes &#38; go") || body.contains("yes &amp; go"),
        "{body}"
    );
    assert!(body.contains("still there?"), "{body}");
    assert!(
        !body.contains("acme-only question"),
        "another tenant's ask: {body}"
    );
    let acked_only = browser.get("/dashboard/asks?state=acked").await.body;
    assert!(
        acked_only.contains("ship it?") && !acked_only.contains("still there?"),
        "{acked_only}"
    );
    let from_nobody = browser.get("/dashboard/asks?from=nobody").await.body;
    assert!(!from_nobody.contains("ship it?"), "{from_nobody}");
    assert_eq!(browser.get("/dashboard/asks?state=bogus").await.status, 400);
    // A key without `messages:read` (an agent machine's default) reads no messages here.
    let plain = admin(&db.url(), &["key", "create", "default", "--label", "plain"]);
    let mut plain_browser = Browser::new(&a.http);
    let signed = plain_browser
        .post("/dashboard/signin", &[("api_key", &plain)])
        .await;
    assert_eq!(signed.status, 303);
    assert!(
        !plain_browser
            .get("/dashboard")
            .await
            .body
            .contains("/dashboard/asks")
    );
    let refused = plain_browser.get("/dashboard/asks").await;
    assert_eq!(refused.status, 403);
    assert!(!refused.body.contains("ship it?"), "{}", refused.body);
    assert_eq!(browser.get("/dashboard/asks?tenant=acme").await.status, 400);

    // The peer on pod b goes offline: the overview on pod a says so.
    drop(on_b);
    let deadline = tokio::time::Instant::now() + repowire_e2e::SLOW_WAIT;
    loop {
        let page = browser.get("/dashboard").await;
        if page.body.contains("2 online of 3")
            && page
                .body
                .contains(r#"<span class="status offline">offline</span>"#)
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the overview never showed reviewer offline: {}",
            page.body
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_are_made_shown_once_and_revoked_only_within_the_tenant_and_audited() {
    let data = tempfile::tempdir().expect("data");
    let dir = data.path().to_str().expect("utf8").to_owned();
    let relay = RelayProcess::start(
        &repowire_e2e::process::relay_bin(),
        &["--data-dir", &dir],
        &[("REPOWIRE_ADMIN_TOKEN", "dashboard-test-admin-token")],
    )
    .await;
    let owner = relay.first_key.clone().expect("bootstrap key");
    embedded_admin(&dir, &["tenant", "create", "acme"]);
    let theirs = embedded_admin(&dir, &["key", "create", "acme", "--label", "theirs"]);
    let key_id = |tenant: &str, label: &str| -> String {
        let listed: serde_json::Value =
            serde_json::from_str(&embedded_admin(&dir, &["key", "list", tenant, "--json"]))
                .expect("JSON");
        listed
            .as_array()
            .and_then(|keys| keys.iter().find(|k| k["label"] == label))
            .and_then(|k| k["id"].as_str())
            .unwrap_or_else(|| panic!("no key {label}: {listed}"))
            .to_owned()
    };
    let key_count = || {
        embedded_admin(&dir, &["key", "list", "default"])
            .lines()
            .count()
    };
    let their_id = key_id("acme", "theirs");

    // The owner's key may manage keys: the header links the page.
    let mut browser = Browser::new(&relay.http);
    let signed_in = browser
        .post("/dashboard/signin", &[("api_key", &owner)])
        .await;
    assert_eq!(signed_in.status, 303);
    let overview = browser.get("/dashboard").await;
    assert!(
        overview.body.contains(r#"href="/dashboard/keys""#),
        "{}",
        overview.body
    );
    let page = browser.get("/dashboard/keys").await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("(this browser's)"), "{}", page.body);
    let csrf = page.hidden("csrf").expect("csrf");
    let once = page.hidden("once").expect("the form's idempotency key");
    let before = key_count();

    // Without the page's token nothing is made.
    let form = [
        ("label", "ci"),
        ("expires_in_days", "30"),
        ("scope", "connect"),
        ("once", once.as_str()),
    ];
    assert_eq!(browser.post("/dashboard/keys", &form).await.status, 403);
    let mut with_csrf = form.to_vec();
    with_csrf.push(("csrf", &csrf));
    let made = browser.post("/dashboard/keys", &with_csrf).await;
    assert_eq!(made.status, 200, "{}", made.body);
    let shown = r#"id="made-key" type="text" readonly value=""#;
    let text = attribute_after(&made.body, shown)
        .expect("the key's text, once")
        .to_owned();
    assert!(text.starts_with("rw_live_"), "{text}");
    assert_eq!(
        token_status(&relay, &text).await,
        200,
        "the new key connects"
    );
    // The same form sent again (a reload of the answer) makes no second key.
    let again = browser.post("/dashboard/keys", &with_csrf).await;
    assert_eq!(
        attribute_after(&again.body, shown),
        Some(text.as_str()),
        "{}",
        again.body
    );
    assert_eq!(key_count(), before + 1);
    let listed = browser.get("/dashboard/keys").await;
    assert!(
        !listed.body.contains(&text),
        "the key's text was shown again"
    );
    assert!(listed.body.contains(">ci"), "{}", listed.body);
    // It may only connect: it opens no dashboard.
    let mut narrow = Browser::new(&relay.http);
    let refused = narrow
        .post("/dashboard/signin", &[("api_key", &text)])
        .await;
    assert_eq!(refused.status, 403);

    // A key that manages keys but does not approve, and expires in 10 days: it cannot make a
    // key that approves or outlives it, nor revoke the owner's key.
    let manager = embedded_admin(
        &dir,
        &[
            "key",
            "create",
            "default",
            "--label",
            "manager",
            "--scope",
            "usage:read",
            "--scope",
            "keys:manage",
            "--expires-in-days",
            "10",
        ],
    );
    let mut limited = Browser::new(&relay.http);
    let signed_in = limited
        .post("/dashboard/signin", &[("api_key", &manager)])
        .await;
    assert_eq!(signed_in.status, 303);
    let page = limited.get("/dashboard/keys").await;
    assert!(
        !page.body.contains(r#"value="approve""#),
        "offered a scope it lacks"
    );
    assert!(
        !page.body.contains(r#"value="never""#),
        "offered a key outliving its own"
    );
    assert!(
        page.body.contains("days (when this session"),
        "{}",
        page.body
    );
    let l_csrf = page.hidden("csrf").expect("csrf");
    let l_once = page.hidden("once").expect("once");
    let sneaky = [
        ("label", "sneaky"),
        ("scope", "approve"),
        ("expires_in_days", "5"),
        ("csrf", l_csrf.as_str()),
        ("once", l_once.as_str()),
    ];
    let page = limited.post("/dashboard/keys", &sneaky).await;
    assert_eq!(page.status, 403, "{}", page.body);
    let forever = [
        ("label", "forever"),
        ("scope", "usage:read"),
        ("expires_in_days", "never"),
        ("csrf", l_csrf.as_str()),
        ("once", l_once.as_str()),
    ];
    let page = limited.post("/dashboard/keys", &forever).await;
    assert_eq!(page.status, 400, "{}", page.body);
    assert!(page.body.contains("expires no later"), "{}", page.body);
    let owner_id = key_id("default", "bootstrap");
    let revoke_owner = [("key_id", owner_id.as_str()), ("csrf", l_csrf.as_str())];
    let page = limited.post("/dashboard/keys/revoke", &revoke_owner).await;
    assert_eq!(page.status, 403, "{}", page.body);
    assert_eq!(
        token_status(&relay, &owner).await,
        200,
        "the owner's key still works"
    );

    // A key without `keys:manage` sees no Keys page.
    let reader = embedded_admin(&dir, &["key", "create", "default", "--label", "reader"]);
    let mut reading = Browser::new(&relay.http);
    let signed_in = reading
        .post("/dashboard/signin", &[("api_key", &reader)])
        .await;
    assert_eq!(signed_in.status, 303);
    assert!(
        !reading
            .get("/dashboard")
            .await
            .body
            .contains("/dashboard/keys")
    );
    assert_eq!(reading.get("/dashboard/keys").await.status, 403);

    // Another tenant's key id is unknown here, and stays usable.
    let revoke_theirs = [("key_id", their_id.as_str()), ("csrf", csrf.as_str())];
    let page = browser.post("/dashboard/keys/revoke", &revoke_theirs).await;
    assert_eq!(page.status, 404);
    assert_eq!(token_status(&relay, &theirs).await, 200);

    // Revoking the new key: it stops working at once.
    let made_id = key_id("default", "ci");
    let revoke_made = [("key_id", made_id.as_str()), ("csrf", csrf.as_str())];
    let page = browser.post("/dashboard/keys/revoke", &revoke_made).await;
    assert_eq!(page.status, 303);
    assert_eq!(token_status(&relay, &text).await, 401);
    assert!(
        browser
            .get("/dashboard/keys")
            .await
            .body
            .contains("revoked")
    );

    // Both writes are in the audit log as the dashboard's, naming the session's key.
    let (status, audit) = repowire_e2e::http_json(
        reqwest::Method::GET,
        &format!("{}/admin/v1/audit?tenant=default", relay.http),
        Some("dashboard-test-admin-token"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{audit}");
    let events: Vec<(String, String)> = audit["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|e| {
            (
                e["action"].as_str().unwrap_or_default().to_owned(),
                e["actor"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    for action in ["key.create", "key.revoke"] {
        let by_dashboard = events
            .iter()
            .filter(|(a, actor)| a == action && actor.starts_with("dashboard:key:key-"))
            .count();
        assert_eq!(
            by_dashboard, 1,
            "{action} once as the dashboard's: {events:?}"
        );
    }

    // Usage as a CSV download, for a signed-in browser only (and acme has usage of its own).
    let mut acme = TestClient::connect(&relay.http, &relay.ws, &theirs).await;
    let acme_peer = acme.peer("acme-peer", "dev").await;
    acme.notify(&acme_peer, "acme-peer", "counted for acme")
        .await
        .expect("acme's message");
    let mut ours = TestClient::connect(&relay.http, &relay.ws, &owner).await;
    let our_peer = ours.peer("our-peer", "dev").await;
    ours.notify(&our_peer, "our-peer", "counted for default")
        .await
        .expect("our message");
    let csv = browser.get("/dashboard/usage.csv?granularity=hour").await;
    assert_eq!(csv.status, 200, "{}", csv.body);
    let content_type = csv.headers["content-type"].to_str().unwrap_or_default();
    assert!(content_type.starts_with("text/csv"), "{content_type}");
    let disposition = csv.headers["content-disposition"]
        .to_str()
        .unwrap_or_default();
    assert!(
        disposition.starts_with("attachment; filename=\"repowire-usage-default-"),
        "{disposition}"
    );
    assert!(
        csv.body
            .starts_with("tenant_id,tenant_name,period_start,granularity,metric,value"),
        "{}",
        csv.body
    );
    assert!(csv.body.contains(",default,"), "{}", csv.body);
    assert!(!csv.body.contains("acme"), "{}", csv.body);
    assert_eq!(
        Browser::new(&relay.http)
            .get("/dashboard/usage.csv")
            .await
            .status,
        303
    );
    let bad = browser.get("/dashboard/usage.csv?granularity=week").await;
    assert_eq!(bad.status, 400);
}
