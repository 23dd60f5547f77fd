//! The relay binary's first start and its local files, as an operator meets them: two pods of a
//! fresh install starting at once, where the first API key goes (a file, never a log), the
//! embedded data directory's permissions and lock, and the admin CLI.

use repowire_e2e::{redis_prefix, redis_url};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Output;
use std::time::Duration;

use repowire_e2e::client::{TestClient, token};
use repowire_e2e::process::{RelayProcess, TempDatabase, relay_bin};
use tokio::process::Command;

const JWT_SECRET: &str = "cluster-test-secret-cluster-test-secret";

/// `repowire-relay ARGS` with `env`, outside any relay's environment.
async fn relay_cli(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(relay_bin());
    cmd.args(args).env_remove("DATABASE_URL");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().await.expect("run repowire-relay")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

/// What a Deployment with two replicas does on first install: both pods start at the same
/// moment on an empty database (migrations and bootstrap race). Both must serve, exactly one
/// creates the first tenant, and its key works on both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_pods_started_together_on_an_empty_database_both_serve() {
    for round in 0..5 {
        let db = TempDatabase::create("repowire_startup");
        let prefix = redis_prefix();
        let (url, redis) = (db.url(), redis_url());
        let (a, b) = tokio::join!(
            RelayProcess::start_pod(&url, &redis, &prefix, "pod-a", &[]),
            RelayProcess::start_pod(&url, &redis, &prefix, "pod-b", &[]),
        );
        let keys: Vec<&String> = [&a.first_key, &b.first_key].into_iter().flatten().collect();
        assert_eq!(keys.len(), 1, "round {round}: exactly one pod bootstraps");
        let key = keys[0].clone();
        for pod in [&a, &b] {
            let t = token(&pod.http, &key).await.expect("the first key works");
            assert!(t.tenant_id.starts_with("tnt-"));
        }
        let tenants = relay_cli(
            &["admin", "tenant", "list", "--json"],
            &[("DATABASE_URL", db.url().as_str())],
        )
        .await;
        let list: serde_json::Value = serde_json::from_slice(&tenants.stdout).expect("json");
        assert_eq!(list.as_array().map(Vec::len), Some(1), "one tenant: {list}");
    }
}

/// A clustered relay creates no tenant unless asked, and says how to create one.
#[tokio::test]
async fn a_postgres_relay_bootstraps_nothing_unless_given_a_key_file() {
    let db = TempDatabase::create("repowire_startup");
    let relay = RelayProcess::start(
        &relay_bin(),
        &[],
        &[
            ("DATABASE_URL", db.url().as_str()),
            ("REPOWIRE_JWT_SECRET", JWT_SECRET),
            ("REPOWIRE_BOOTSTRAP_KEY_FILE", ""),
        ],
    )
    .await;
    assert_eq!(relay.first_key, None);
    assert!(
        relay.logs().contains("admin tenant create"),
        "says how to create a tenant:\n{}",
        relay.logs()
    );
    let out = relay_cli(
        &["admin", "tenant", "list", "--json"],
        &[("DATABASE_URL", db.url().as_str())],
    )
    .await;
    assert_eq!(text(&out.stdout).trim(), "[]");
}

/// Key material never reaches a log stream: not the bootstrap key, not a minted key, not a
/// token, not the JWT secret or the admin credential, whatever the relay is asked.
#[tokio::test]
async fn no_secret_reaches_the_relays_output() {
    let db = TempDatabase::create("repowire_startup");
    let admin_token = "admin-credential-that-must-not-be-logged";
    let relay = RelayProcess::start(
        &relay_bin(),
        &[],
        &[
            ("DATABASE_URL", db.url().as_str()),
            ("REPOWIRE_JWT_SECRET", JWT_SECRET),
            ("REPOWIRE_ADMIN_TOKEN", admin_token),
            ("RUST_LOG", "debug"),
        ],
    )
    .await;
    let key = relay.first_key.clone().expect("bootstrapped into the file");
    let http = reqwest::Client::new();

    // Everything that handles a secret: exchanges (good, mistyped, unknown), connections,
    // admin calls with good and bad credentials, a key minted over the API.
    let jwt = token(&relay.http, &key).await.expect("token").token;
    let mut typo = key.clone().into_bytes();
    typo[12] = if typo[12] == b'A' { b'B' } else { b'A' };
    let typo = String::from_utf8(typo).expect("ascii");
    assert!(token(&relay.http, &typo).await.is_err());
    let mut client = TestClient::connect(&relay.http, &relay.ws, &key).await;
    client.peer("logger", "dev").await;
    let minted: serde_json::Value = http
        .post(format!("{}/admin/v1/tenants/default/keys", relay.http))
        .bearer_auth(admin_token)
        .json(&serde_json::json!({"label": "ci"}))
        .send()
        .await
        .expect("mint")
        .json()
        .await
        .expect("json");
    let minted = minted["api_key"].as_str().expect("key").to_owned();
    let wrong = http
        .get(format!("{}/admin/v1/tenants", relay.http))
        .bearer_auth(format!("{admin_token}-wrong"))
        .send()
        .await
        .expect("admin");
    assert_eq!(wrong.status().as_u16(), 403);
    drop(client);
    relay.signal("TERM");
    let logs = relay.logs();
    assert!(
        logs.contains("repowire relay listening"),
        "the logs were captured"
    );
    for (what, secret) in [
        ("the bootstrap key", key.as_str()),
        ("the bootstrap key's body", &key[8..30]),
        ("a mistyped key", &typo[8..30]),
        ("a minted key", &minted[8..30]),
        ("a token's signature", jwt.rsplit('.').next().expect("jws")),
        ("the JWT secret", JWT_SECRET),
        ("the admin credential", admin_token),
    ] {
        assert!(!logs.contains(secret), "{what} reached the logs:\n{logs}");
    }
    assert!(!logs.contains("rw_live_"), "key text in the logs:\n{logs}");
}

/// The embedded relay keeps message bodies: its directory is the user's alone, its first key
/// is in a 0600 file (not on the terminal), and a second relay on the same directory refuses
/// to start instead of sharing the file.
#[tokio::test]
async fn the_embedded_data_dir_is_private_and_held_by_one_relay() {
    let base = tempfile::tempdir().expect("tmp");
    let data = base.path().join("relay-data");
    let data_arg = data.to_str().expect("utf8");
    let bin = relay_bin();
    let relay = RelayProcess::start(
        &bin,
        &["--data-dir", data_arg],
        &[("REPOWIRE_BOOTSTRAP_KEY_FILE", "")],
    )
    .await;
    let key_file = data.join("bootstrap-api-key");
    let key = std::fs::read_to_string(&key_file).expect("the first key is in the data dir");
    assert!(key.starts_with("rw_live_"));
    assert!(!relay.logs().contains(key.trim()));
    assert_eq!(mode(&data), 0o700, "data dir");
    for file in ["relay.db", "jwt-secret", "bootstrap-api-key"] {
        assert_eq!(mode(&data.join(file)), 0o600, "{file}");
    }
    token(&relay.http, key.trim()).await.expect("usable");

    let second = Command::new(&bin)
        .args(["--listen", "127.0.0.1:0", "--data-dir", data_arg])
        .env_remove("DATABASE_URL")
        .env_remove("REPOWIRE_BOOTSTRAP_KEY_FILE")
        .output();
    let second = tokio::time::timeout(Duration::from_secs(30), second)
        .await
        .expect("the second relay exits at once")
        .expect("run");
    assert!(!second.status.success());
    let said = text(&second.stderr);
    assert!(
        said.contains("another repowire-relay") && said.contains(&format!("pid {}", relay.pid())),
        "{said}"
    );
    relay.signal("TERM");
    assert!(relay.wait(Duration::from_secs(15)).await.success());

    // An older install's world-readable files are made private at the next start.
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let db = data.join("relay.db");
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let relay = RelayProcess::start(&bin, &["--data-dir", data_arg], &[]).await;
    assert_eq!((mode(&data), mode(&db)), (0o700, 0o600));
    assert_eq!(relay.first_key, None, "no second bootstrap");
    relay.signal("TERM");
    assert!(relay.wait(Duration::from_secs(15)).await.success());
}

/// The admin CLI works on an existing store only (unless asked to create one), prints tables
/// with headers or JSON, and its help lists only what it uses.
#[tokio::test]
async fn the_admin_cli_refuses_a_missing_store_and_prints_tables_and_json() {
    let base = tempfile::tempdir().expect("tmp");
    let data = base.path().join("nothing-here");
    let data_arg = data.to_str().expect("utf8");

    let out = relay_cli(&["admin", "tenant", "list", "--data-dir", data_arg], &[]).await;
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("--create"),
        "{}",
        text(&out.stderr)
    );
    assert!(!data.exists(), "nothing was created");

    let out = relay_cli(
        &[
            "admin",
            "--create",
            "tenant",
            "create",
            "acme",
            "--data-dir",
            data_arg,
        ],
        &[],
    )
    .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let listing = text(&out.stdout);
    assert!(listing.starts_with("ID "), "{listing}");
    assert!(listing.contains("acme"), "{listing}");
    assert_eq!(mode(&data), 0o700);

    let out = relay_cli(
        &[
            "admin",
            "key",
            "create",
            "acme",
            "--label",
            "ci",
            "--data-dir",
            data_arg,
        ],
        &[],
    )
    .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).trim().starts_with("rw_live_"));

    let out = relay_cli(
        &["admin", "key", "list", "acme", "--data-dir", data_arg],
        &[],
    )
    .await;
    let table = text(&out.stdout);
    let header = table.lines().next().expect("header");
    for column in [
        "ID",
        "KEY",
        "STATE",
        "LABEL",
        "CREATED",
        "EXPIRES",
        "LAST USED",
    ] {
        assert!(header.contains(column), "{header}");
    }
    assert!(table.lines().nth(1).expect("row").contains("active"));

    let out = relay_cli(
        &[
            "admin",
            "key",
            "list",
            "acme",
            "--json",
            "--data-dir",
            data_arg,
        ],
        &[],
    )
    .await;
    let keys: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(keys[0]["label"], "ci");
    assert!(keys[0].get("last_used_at_ms").is_some());
    assert!(keys[0].get("hash").is_none());

    let help = text(
        &relay_cli(&["admin", "key", "list", "--help"], &[])
            .await
            .stdout,
    );
    assert!(
        help.contains("--data-dir") && help.contains("--json"),
        "{help}"
    );
    for server_only in ["--listen", "--tls-cert", "--send-rate", "--redis-url"] {
        assert!(!help.contains(server_only), "{server_only} in:\n{help}");
    }
}
