//! OpenID Connect sign-in in a real browser: Debian's Chromium driven by npm playwright-core
//! (tests/browser/oidc.mjs says what it checks) against a relay at `http://localhost:P` and npm
//! oidc-provider at `http://127.0.0.1:Q`, two sites as in production, so the provider's
//! redirect back is cross-site. Skipped, saying why, without `PLAYWRIGHT_CORE` or
//! `OIDC_PROVIDER` unless scripts/test requires them.

use repowire_e2e::oidc::{self, Provider, free_port};
use repowire_e2e::process::{RelayProcess, relay_bin};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_signs_in_through_the_provider_in_chromium() {
    let Some(playwright) = std::env::var_os("PLAYWRIGHT_CORE") else {
        assert!(
            std::env::var_os("REPOWIRE_REQUIRE_BROWSER").is_none(),
            "REPOWIRE_REQUIRE_BROWSER is set but PLAYWRIGHT_CORE is not"
        );
        eprintln!("skipped: PLAYWRIGHT_CORE is not set (scripts/test installs playwright-core)");
        return;
    };
    let Some(dir) = oidc::available() else { return };
    let port = free_port();
    let base = format!("http://localhost:{port}");
    let idp = Provider::start(
        &dir,
        &[format!("{base}/dashboard/oidc/callback")],
        serde_json::json!({}),
    )
    .await;
    let settings = idp.relay_env(&base);
    let env: Vec<(&str, &str)> = settings
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let data = tempfile::tempdir().expect("data");
    let relay = RelayProcess::start_on(
        &relay_bin(),
        &format!("127.0.0.1:{port}"),
        &["--data-dir", data.path().to_str().expect("utf8")],
        &env,
    )
    .await;
    let owner_key = relay.first_key.clone().expect("the first key");
    let mut owner = crate::dashboard::signed_in(&relay.http, &owner_key).await;
    let members = owner.get("/dashboard/members").await;
    let csrf = members.hidden("csrf").expect("csrf");
    let invited = owner
        .post(
            "/dashboard/members",
            &[
                ("csrf", &csrf),
                ("email", "alice@example.test"),
                ("scope", "usage:read"),
                ("scope", "keys:manage"),
            ],
        )
        .await;
    assert_eq!(invited.status, 303, "{}", invited.body);

    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the repository")
        .to_path_buf();
    let shots = repo.join("target/dashboard-screenshots");
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(120),
        tokio::process::Command::new("node")
            .arg(repo.join("tests/browser/oidc.mjs"))
            .arg(&base)
            .arg(&shots)
            .env("PLAYWRIGHT_CORE", playwright)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the browser finished within 120 s")
    .expect("run node");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("OK signed in"),
        "oidc.mjs failed:\n{stdout}\n{}\nrelay:\n{}",
        String::from_utf8_lossy(&out.stderr),
        relay.logs()
    );
}
