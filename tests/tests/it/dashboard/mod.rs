//! The web dashboard over HTTP, with a browser's cookie jar (`repowire_e2e::web::Browser`):
//! `signin` (links, keys, sessions, logout, what guessing costs, `repowire dashboard`) and
//! `pages` (the overview and the asks across two pods, the Keys page, the usage CSV, the tenant
//! wall), `events` (the live event log over SSE, across pods), `act` (sending and approving as a person), `signup` (self-serve sign-up), `operator` (the relay operator's pages). The helpers below are theirs. (dashboard_browser.rs drives the same pages in Chromium.)

mod act;
mod events;
mod oidc;
mod operator;
mod pages;
mod signin;
mod signup;

use repowire_e2e::process::{RelayProcess, TempDatabase};

/// Two relay pods on a fresh Postgres database and a Redis prefix of their own.
pub(super) async fn pods(db: &TempDatabase) -> (RelayProcess, RelayProcess) {
    let redis = repowire_e2e::redis_url();
    let prefix = repowire_e2e::redis_prefix();
    let a = RelayProcess::start_pod(&db.url(), &redis, &prefix, "pod-a", &[]).await;
    let b = RelayProcess::start_pod(&db.url(), &redis, &prefix, "pod-b", &[]).await;
    (a, b)
}

/// A key of `tenant` labelled `label` that may do `scopes` (the admin CLI on `db`).
pub(super) fn scoped_key(db: &TempDatabase, tenant: &str, label: &str, scopes: &[&str]) -> String {
    let mut args = vec!["key", "create", tenant, "--label", label];
    for scope in scopes {
        args.extend(["--scope", scope]);
    }
    repowire_e2e::process::admin(&db.url(), &args)
}

/// A browser signed in to the relay at `base` with `key`.
pub(super) async fn signed_in(base: &str, key: &str) -> repowire_e2e::web::Browser {
    let mut browser = repowire_e2e::web::Browser::new(base);
    let page = browser.post("/dashboard/signin", &[("api_key", key)]).await;
    assert_eq!(page.status, 303, "{}", page.body);
    browser
}

/// `POST /v1/dashboard/links` with `key` on `relay`: the link's path.
pub(super) async fn link(relay: &RelayProcess, key: &str) -> String {
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

/// `repowire-relay admin ARGS` on an embedded relay's data directory.
pub(super) fn embedded_admin(dir: &str, args: &[&str]) -> String {
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
pub(super) fn attribute_after<'a>(body: &'a str, before: &str) -> Option<&'a str> {
    let start = body.find(before)? + before.len();
    let end = body[start..].find('"')? + start;
    Some(&body[start..end])
}

pub(super) async fn token_status(relay: &RelayProcess, key: &str) -> u16 {
    repowire_e2e::http_json(
        reqwest::Method::POST,
        &format!("{}/v1/token", relay.http),
        None,
        Some(serde_json::json!({ "api_key": key })),
    )
    .await
    .0
}
