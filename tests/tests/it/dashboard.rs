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

    // The peer on pod b goes offline: the overview on pod a says so.
    drop(on_b);
    let deadline = tokio::time::Instant::now() + repowire_e2e::SLOW_WAIT;
    loop {
        let page = browser.get("/dashboard").await;
        if page.body.contains("1 online of 2")
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
    let listed: serde_json::Value =
        serde_json::from_str(&embedded_admin(&dir, &["key", "list", "acme", "--json"]))
            .expect("JSON");
    let their_id = listed[0]["id"].as_str().expect("their key's id").to_owned();

    // The owner's key may manage keys: the header links the page.
    let mut browser = Browser::new(&relay.http);
    assert_eq!(
        browser
            .post("/dashboard/signin", &[("api_key", &owner)])
            .await
            .status,
        303
    );
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

    // Without the page's token nothing is made.
    let form = [
        ("label", "ci"),
        ("expires_in_days", "30"),
        ("scope", "connect"),
    ];
    assert_eq!(browser.post("/dashboard/keys", &form).await.status, 403);
    let mut with_csrf = form.to_vec();
    with_csrf.push(("csrf", &csrf));
    let made = browser.post("/dashboard/keys", &with_csrf).await;
    assert_eq!(made.status, 200, "{}", made.body);
    let text = attribute_after(&made.body, r#"id="made-key" type="text" readonly value=""#)
        .expect("the key's text, once")
        .to_owned();
    assert!(text.starts_with("rw_live_"), "{text}");
    assert_eq!(
        token_status(&relay, &text).await,
        200,
        "the new key connects"
    );
    let listed = browser.get("/dashboard/keys").await;
    assert!(
        !listed.body.contains(&text),
        "the key's text was shown again"
    );
    assert!(listed.body.contains(">ci"), "{}", listed.body);
    // It may only connect: it opens no dashboard.
    let mut narrow = Browser::new(&relay.http);
    assert_eq!(
        narrow
            .post("/dashboard/signin", &[("api_key", &text)])
            .await
            .status,
        403
    );

    // A key that manages keys but does not approve cannot make one that approves.
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
        ],
    );
    let mut limited = Browser::new(&relay.http);
    assert_eq!(
        limited
            .post("/dashboard/signin", &[("api_key", &manager)])
            .await
            .status,
        303
    );
    let page = limited.get("/dashboard/keys").await;
    assert!(
        !page.body.contains(r#"value="approve""#),
        "offered a scope it lacks"
    );
    let limited_csrf = page.hidden("csrf").expect("csrf");
    let page = limited
        .post(
            "/dashboard/keys",
            &[
                ("label", "sneaky"),
                ("scope", "approve"),
                ("csrf", &limited_csrf),
            ],
        )
        .await;
    assert_eq!(page.status, 403, "{}", page.body);
    // A key without `keys:manage` sees no Keys page.
    let reader = embedded_admin(&dir, &["key", "create", "default", "--label", "reader"]);
    let mut reading = Browser::new(&relay.http);
    reading
        .post("/dashboard/signin", &[("api_key", &reader)])
        .await;
    assert!(
        !reading
            .get("/dashboard")
            .await
            .body
            .contains("/dashboard/keys")
    );
    assert_eq!(reading.get("/dashboard/keys").await.status, 403);

    // Another tenant's key id is unknown here, and stays usable.
    let page = browser
        .post(
            "/dashboard/keys/revoke",
            &[("key_id", &their_id), ("csrf", &csrf)],
        )
        .await;
    assert_eq!(page.status, 404);
    assert_eq!(token_status(&relay, &theirs).await, 200);

    // Revoking the new key: it stops working at once.
    let made_id = attribute_after(&listed.body, r#"name="key_id" value=""#)
        .expect("the newest key's id")
        .to_owned();
    let page = browser
        .post(
            "/dashboard/keys/revoke",
            &[("key_id", &made_id), ("csrf", &csrf)],
        )
        .await;
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
        assert!(
            events
                .iter()
                .any(|(a, actor)| a == action && actor.starts_with("dashboard:key:key-")),
            "{action} not audited as the dashboard's: {events:?}"
        );
    }

    // Usage as a CSV download, for a signed-in browser only.
    let csv = browser.get("/dashboard/usage.csv?granularity=hour").await;
    assert_eq!(csv.status, 200, "{}", csv.body);
    assert!(
        csv.headers["content-type"]
            .to_str()
            .unwrap_or_default()
            .starts_with("text/csv")
    );
    assert!(
        csv.headers["content-disposition"]
            .to_str()
            .unwrap_or_default()
            .starts_with("attachment; filename=\"repowire-usage-default-"),
    );
    assert!(
        csv.body
            .starts_with("tenant_id,tenant_name,period_start,granularity,metric,value"),
        "{}",
        csv.body
    );
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
