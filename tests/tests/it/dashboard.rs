//! The web dashboard over HTTP, against two relay pods on Postgres and Redis: sign-in with a
//! one-time link (minted on one pod, used on the other) or an API key, the session cookie's
//! attributes, CSRF and same-origin refusals, logout, a revoked key ending the session, the
//! overview showing peers of both pods with what a remote peer said escaped, and one tenant's
//! session never showing another tenant's peers. (The browser test drives the same pages in
//! Chromium.)

use repowire_e2e::client::TestClient;
use repowire_e2e::process::{RelayProcess, TempDatabase, admin, key_id_labelled};
use repowire_e2e::web::Browser;
use repowire_protocol::{Body, TurnState, UpdatePeer};

async fn pods(db: &TempDatabase) -> (RelayProcess, RelayProcess) {
    let redis = repowire_e2e::redis_url();
    let prefix = repowire_e2e::redis_prefix();
    let a = RelayProcess::start_pod(&db.url(), &redis, &prefix, "pod-a", &[]).await;
    let b = RelayProcess::start_pod(&db.url(), &redis, &prefix, "pod-b", &[]).await;
    (a, b)
}

/// `POST /v1/dashboard/links` with `key` on `relay`: the link's path.
async fn link(relay: &RelayProcess, key: &str) -> String {
    let (status, body) = repowire_e2e::http_json(
        reqwest::Method::POST,
        &format!("{}/v1/dashboard/links", relay.http),
        Some(key),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let path = body["path"].as_str().expect("path").to_owned();
    assert!(path.starts_with("/dashboard/signin?link="), "{path}");
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_signs_in_once_per_link_and_out_and_its_session_ends_with_its_key() {
    let db = TempDatabase::create("repowire_dashboard");
    let (a, b) = pods(&db).await;
    let key = admin(
        &db.url(),
        &["key", "create", "default", "--label", "laptop"],
    );
    let key_id = key_id_labelled(&db.url(), "default", "laptop");
    let mut browser = Browser::new(&b.http);

    // Not signed in: every page sends the browser to sign in.
    let page = browser.get("/dashboard").await;
    assert_eq!(page.status, 303);
    assert_eq!(page.location(), Some("/dashboard/signin"));

    // A link minted on pod a, followed on pod b: the page asks for a click and uses nothing.
    let path = link(&a, &key).await;
    let token = path.rsplit('=').next().expect("token").to_owned();
    for _ in 0..2 {
        let page = browser.get(&path).await;
        assert_eq!(page.status, 200);
        assert_eq!(page.hidden("link").as_deref(), Some(token.as_str()));
        // It says what it signs in to before the click.
        assert!(
            page.body.contains("<strong>default</strong>")
                && page.body.contains("<strong>laptop</strong>"),
            "{}",
            page.body
        );
        let csp = page.headers["content-security-policy"]
            .to_str()
            .expect("csp");
        assert!(csp.contains("default-src 'none'") && csp.contains("frame-ancestors 'none'"));
        assert_eq!(page.headers["referrer-policy"], "same-origin");
        assert_eq!(page.headers["cache-control"], "no-store");
    }
    // Another site's page cannot sign this browser in.
    let page = browser
        .post_from(
            "/dashboard/signin",
            &[("link", &token)],
            Some("https://evil.example"),
        )
        .await;
    assert_eq!(page.status, 403);
    assert!(browser.cookie.is_none());
    // The click signs in: a cookie only the dashboard's pages get, never scripts or other sites.
    let page = browser.post("/dashboard/signin", &[("link", &token)]).await;
    assert_eq!(page.status, 303, "{}", page.body);
    assert_eq!(page.location(), Some("/dashboard"));
    let set = page.set_cookies().join("\n");
    for attribute in [
        "HttpOnly",
        "Secure",
        "SameSite=Strict",
        "Path=/dashboard",
        "Max-Age=43200",
    ] {
        assert!(set.contains(attribute), "{attribute} missing: {set}");
    }
    let signed_in = browser.cookie.clone().expect("a session cookie");
    // The link worked once.
    let mut other = Browser::new(&a.http);
    let page = other.post("/dashboard/signin", &[("link", &token)]).await;
    assert_eq!(page.status, 401);
    assert!(
        page.body.contains("used already or has expired"),
        "{}",
        page.body
    );
    assert!(other.cookie.is_none());
    // Following it again shows no button, only that it is used.
    let page = other.get(&path).await;
    assert_eq!(page.status, 410);
    assert!(page.hidden("link").is_none(), "{}", page.body);

    // The session works on either pod.
    let page = browser.get("/dashboard").await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("<h1>default"), "{}", page.body);
    let mut on_a = Browser::new(&a.http);
    on_a.cookie = Some(signed_in.clone());
    assert_eq!(on_a.get("/dashboard").await.status, 200);

    // Logout needs the page's CSRF token and this site's origin.
    let csrf = page.hidden("csrf").expect("the logout form's token");
    assert_eq!(
        browser
            .post("/dashboard/logout", &[("csrf", "0")])
            .await
            .status,
        403
    );
    let page = browser
        .post_from(
            "/dashboard/logout",
            &[("csrf", &csrf)],
            Some("https://evil.example"),
        )
        .await;
    assert_eq!(page.status, 403);
    assert_eq!(on_a.get("/dashboard").await.status, 200, "still signed in");
    let page = browser.post("/dashboard/logout", &[("csrf", &csrf)]).await;
    assert_eq!(page.status, 303);
    assert_eq!(page.location(), Some("/dashboard/signin"));
    assert!(browser.cookie.is_none(), "the cookie is removed");
    // The session ended on every pod, also for a copy of its cookie.
    assert_eq!(on_a.get("/dashboard").await.status, 303);

    // The API key as a fallback: a wrong one is refused without being echoed.
    let wrong = format!("{}x", &key[..key.len() - 1]);
    let wrong = if wrong == key {
        format!("{}y", &key[..key.len() - 1])
    } else {
        wrong
    };
    let page = browser
        .post("/dashboard/signin", &[("api_key", &wrong)])
        .await;
    assert_eq!(page.status, 401);
    assert!(!page.body.contains(&wrong), "the key was echoed");
    assert!(browser.cookie.is_none());
    let page = browser
        .post("/dashboard/signin", &[("api_key", &key)])
        .await;
    assert_eq!(page.status, 303, "{}", page.body);
    assert_eq!(browser.get("/dashboard").await.status, 200);
    // Signing in again ends the browser's previous session: one cookie, one session.
    let mut previous = Browser::new(&a.http);
    previous.cookie = browser.cookie.clone();
    let page = browser
        .post("/dashboard/signin", &[("api_key", &key)])
        .await;
    assert_eq!(page.status, 303);
    assert_ne!(browser.cookie, previous.cookie);
    assert_eq!(previous.get("/dashboard").await.status, 303);
    assert_eq!(browser.get("/dashboard").await.status, 200);

    // Revoking the key ends the sessions opened with it, and its links stop minting.
    let fresh = link(&a, &key).await;
    admin(&db.url(), &["key", "revoke", &key_id]);
    let page = browser.get("/dashboard").await;
    assert_eq!(page.status, 303);
    let fresh_token = fresh.rsplit('=').next().expect("token");
    assert_eq!(
        browser
            .post("/dashboard/signin", &[("link", fresh_token)])
            .await
            .status,
        401
    );
    let (status, _) = repowire_e2e::http_json(
        reqwest::Method::POST,
        &format!("{}/v1/dashboard/links", a.http),
        Some(&key),
        None,
    )
    .await;
    assert_eq!(status, 401);

    // A key without `usage:read` (an agent's key) opens no dashboard.
    let agent_key = admin(
        &db.url(),
        &[
            "key", "create", "default", "--label", "agent", "--scope", "connect",
        ],
    );
    let page = browser
        .post("/dashboard/signin", &[("api_key", &agent_key)])
        .await;
    assert_eq!(page.status, 403);
    assert!(page.body.contains("usage:read"), "{}", page.body);

    // A suspended tenant's browser is refused its pages, but can still sign out and reach the
    // sign-in page (to sign in with another tenant's key).
    admin(&db.url(), &["tenant", "create", "paused"]);
    let paused_key = admin(&db.url(), &["key", "create", "paused"]);
    let mut paused = Browser::new(&b.http);
    let page = paused
        .post("/dashboard/signin", &[("api_key", &paused_key)])
        .await;
    assert_eq!(page.status, 303);
    admin(&db.url(), &["tenant", "suspend", "paused"]);
    assert_eq!(paused.get("/dashboard").await.status, 403);
    assert_eq!(paused.get("/dashboard/signin").await.status, 200);
    let page = paused.post("/dashboard/logout", &[("csrf", "")]).await;
    assert_eq!(page.status, 303);
    assert!(paused.cookie.is_none(), "the cookie is removed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overview_shows_the_tenants_peers_on_every_pod_and_no_other_tenants() {
    let db = TempDatabase::create("repowire_dashboard");
    let (a, b) = pods(&db).await;
    admin(&db.url(), &["tenant", "create", "acme"]);
    let ours = admin(&db.url(), &["key", "create", "default", "--label", "ours"]);
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

    let mut browser = Browser::new(&a.http);
    assert_eq!(
        browser
            .post("/dashboard/signin", &[("api_key", &ours)])
            .await
            .status,
        303
    );
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
    let mut their_browser = Browser::new(&b.http);
    assert_eq!(
        their_browser
            .post("/dashboard/signin", &[("api_key", &theirs)])
            .await
            .status,
        303
    );
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

/// `repowire dashboard` on a laptop: the daemon mints the link with the machine's key for a
/// person at a terminal, never for a command without one; the link signs a browser in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repowire_dashboard_gives_the_person_at_a_terminal_a_link_that_signs_in() {
    let data = tempfile::tempdir().expect("data");
    let dir = data.path().to_str().expect("utf8").to_owned();
    let relay = RelayProcess::start(
        &repowire_e2e::process::relay_bin(),
        &["--data-dir", &dir],
        &[],
    )
    .await;
    let key = relay.first_key.clone().expect("bootstrap key");
    let home = repowire_e2e::agents::Home::new(Some((relay.http.clone(), key.clone())));
    home.install_and_start();

    let detached = home.without_terminal(&["dashboard"]);
    assert!(!detached.status.success());
    let said = String::from_utf8_lossy(&detached.stderr);
    assert!(said.contains("not_a_person"), "{said}");

    let out = home.in_terminal(&["dashboard", "--json"]);
    let said = String::from_utf8_lossy(&out.stdout).replace('\r', "");
    assert!(
        out.status.success(),
        "{said} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let link: serde_json::Value = serde_json::from_str(&said).expect("JSON");
    let url = link["url"].as_str().expect("url");
    let path = url
        .strip_prefix(relay.http.as_str())
        .unwrap_or_else(|| panic!("{url} is not on {}", relay.http));
    assert!(!url.contains(&key), "the key is in the URL");

    let mut browser = Browser::new(&relay.http);
    let page = browser.get(path).await;
    let token = page.hidden("link").expect("the sign-in form");
    assert_eq!(
        browser
            .post("/dashboard/signin", &[("link", &token)])
            .await
            .status,
        303
    );
    let page = browser.get("/dashboard").await;
    assert_eq!(page.status, 200);
    assert!(page.body.contains("<h1>default"), "{}", page.body);
}

/// `repowire-relay admin ARGS` on an embedded relay's data directory.
fn embedded_admin(dir: &str, args: &[&str]) -> String {
    let out = std::process::Command::new(repowire_e2e::process::relay_bin())
        .args(["--data-dir", dir, "admin"])
        .args(args)
        .env_remove("DATABASE_URL")
        .output()
        .expect("repowire-relay admin");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The text between `before` and the next `"` in `body`.
fn attribute_after<'a>(body: &'a str, before: &str) -> Option<&'a str> {
    let start = body.find(before)? + before.len();
    let end = body[start..].find('"')? + start;
    Some(&body[start..end])
}

async fn token_status(relay: &RelayProcess, key: &str) -> u16 {
    repowire_e2e::http_json(
        reqwest::Method::POST,
        &format!("{}/v1/token", relay.http),
        None,
        Some(serde_json::json!({ "api_key": key })),
    )
    .await
    .0
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

/// Guessing links costs the guesser: unknown links count as failed sign-ins of their source
/// (`429` past the budget, for a real link too). A signed-in browser's requests are bounded
/// like a credential's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guessed_links_and_a_flood_of_page_requests_are_refused() {
    let data = tempfile::tempdir().expect("data");
    let dir = data.path().to_str().expect("utf8").to_owned();
    let relay = RelayProcess::start(
        &repowire_e2e::process::relay_bin(),
        &["--data-dir", &dir],
        &[
            ("REPOWIRE_FAILED_AUTH_PER_MINUTE", "1"),
            ("REPOWIRE_FAILED_AUTH_BURST", "2"),
            ("REPOWIRE_HTTP_REQUESTS_PER_MINUTE", "1"),
            ("REPOWIRE_HTTP_BURST", "6"),
        ],
    )
    .await;
    let key = relay.first_key.clone().expect("bootstrap key");

    // Signed in (the key's check spends one of its credential's requests), then pages until
    // the session's budget is spent.
    let mut reader = Browser::new(&relay.http);
    assert_eq!(
        reader
            .post("/dashboard/signin", &[("api_key", &key)])
            .await
            .status,
        303
    );
    let statuses: Vec<u16> = {
        let mut s = Vec::new();
        for _ in 0..8 {
            s.push(reader.get("/dashboard").await.status);
        }
        s
    };
    assert_eq!(statuses[0], 200, "{statuses:?}");
    assert_eq!(statuses.last(), Some(&429), "{statuses:?}");

    // Another source budget: links. Two unknown ones are taken as failures, the third refused.
    let real = link(&relay, &key).await;
    let mut guesser = Browser::new(&relay.http);
    let guess = format!("/dashboard/signin?link={}", "ab".repeat(32));
    assert_eq!(guesser.get(&guess).await.status, 410);
    assert_eq!(guesser.get(&guess).await.status, 410);
    assert_eq!(guesser.get(&guess).await.status, 429);
    // The same source is refused even with a real link now (its budget is spent).
    assert_eq!(guesser.get(&real).await.status, 429);
}
