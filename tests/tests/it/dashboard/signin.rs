//! Signing in and out: a one-time link minted on one pod and used on the other, once, and
//! what its page says first; an API key as the fallback; the cookie's attributes; CSRF and
//! same-origin refusals; logout; a session ending with its key, with a new sign-in, and for a
//! suspended tenant; `repowire dashboard` for a person at a terminal only; what guessing links
//! and flooding pages cost.

use repowire_e2e::process::{RelayProcess, TempDatabase, admin, key_id_labelled};
use repowire_e2e::web::Browser;

use super::{link, pods, scoped_key, signed_in};

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
    let agent_key = scoped_key(&db, "default", "agent", &["connect"]);
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

/// Guessing links costs the guesser: unknown links count as failed sign-ins of their (remote)
/// source (`429` past the budget, for a real link too), while this machine reloading a used
/// link spends nothing. A signed-in browser's requests are bounded like a credential's.
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
            // This machine is the proxy: `X-Forwarded-For` names a remote source.
            ("REPOWIRE_TRUSTED_PROXIES", "127.0.0.1/32"),
        ],
    )
    .await;
    let key = relay.first_key.clone().expect("bootstrap key");

    // A real link, minted before the pages below spend the key's budget.
    let real = link(&relay, &key).await;

    // Signed in (the key's check spends one of its credential's requests), then pages until
    // the budget is spent (each page spends the session's and the key's).
    let mut reader = signed_in(&relay.http, &key).await;
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
    let mut guesser = Browser::new(&relay.http);
    guesser
        .headers
        .push(("x-forwarded-for".into(), "203.0.113.7".into()));
    let guess = format!("/dashboard/signin?link={}", "ab".repeat(32));
    assert_eq!(guesser.get(&guess).await.status, 410);
    assert_eq!(guesser.get(&guess).await.status, 410);
    let limited = guesser.get(&guess).await;
    assert_eq!(limited.status, 429);
    let retry: u64 = limited.headers["retry-after"]
        .to_str()
        .ok()
        .and_then(|s| s.parse().ok())
        .expect("a Retry-After in whole seconds");
    assert!((1..=60).contains(&retry), "Retry-After: {retry}");
    // The same source is refused even with a real link now (its budget is spent).
    assert_eq!(guesser.get(&real).await.status, 429);
    // From this machine (loopback), a used link reloaded spends nothing: the daemon's token
    // exchanges from the same address keep their budget.
    let mut local = Browser::new(&relay.http);
    for _ in 0..5 {
        assert_eq!(local.get(&guess).await.status, 410);
    }
    assert_eq!(local.get(&real).await.status, 200);
}

/// On a laptop with no shared relay, the daemon's own embedded relay serves the dashboard:
/// `repowire dashboard` gives a link to it, which signs in to the machine's `default` tenant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repowire_dashboard_opens_the_laptops_own_relay() {
    let home = repowire_e2e::agents::Home::new(None);
    home.install_and_start();
    let out = home.in_terminal(&["dashboard", "--json"]);
    let said = String::from_utf8_lossy(&out.stdout).replace('\r', "");
    assert!(
        out.status.success(),
        "{said} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let link: serde_json::Value = serde_json::from_str(&said).expect("JSON");
    let url = link["url"].as_str().expect("url");
    let (base, path) = url
        .split_once("/dashboard/")
        .map(|(b, p)| (b.to_owned(), format!("/dashboard/{p}")))
        .expect("a dashboard URL");
    assert!(base.starts_with("http://127.0.0.1:"), "{url}");
    let mut browser = Browser::new(&base);
    let page = browser.get(&path).await;
    let token = page.hidden("link").expect("the sign-in form");
    let signed = browser.post("/dashboard/signin", &[("link", &token)]).await;
    assert_eq!(signed.status, 303, "{}", signed.body);
    let page = browser.get("/dashboard").await;
    assert_eq!(page.status, 200);
    assert!(page.body.contains("<h1>default"), "{}", page.body);
    // The machine's own key is its owner's: it manages keys.
    assert!(
        page.body.contains(r#"href="/dashboard/keys""#),
        "{}",
        page.body
    );
}
