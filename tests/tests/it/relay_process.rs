//! The real `repowire-relay` binary, as a newcomer runs it: embedded storage, first-start key,
//! admin subcommands, SIGTERM drain, restart on the same data dir.

use std::time::Duration;

use repowire_e2e::client::{TestClient, token};
use repowire_e2e::process::{RelayProcess, relay_bin};
use repowire_protocol::*;
use tokio::process::Command;

#[tokio::test]
async fn the_embedded_relay_serves_drains_on_sigterm_and_keeps_its_data() {
    let dir = tempfile::tempdir().expect("tmp");
    let data = dir.path().to_str().expect("utf8");
    let bin = relay_bin();
    let relay = RelayProcess::start(&bin, &["--data-dir", data], &[]).await;
    let key = relay
        .first_key
        .clone()
        .expect("first start prints the default tenant's key");

    let mut a = TestClient::connect(&relay.http, &relay.ws, &key).await;
    let mut b = TestClient::connect(&relay.http, &relay.ws, &key).await;
    let alice = a.peer("alice", "dev").await;
    let bob = b.peer("bob", "dev").await;
    let sent = a
        .notify(&alice, "bob", "hello over a real process")
        .await
        .expect("accepted");
    assert_eq!(
        b.delivered_to(&bob.peer_id).await.message.message_id,
        sent.message_id
    );

    // The admin subcommand works against the same data dir while the relay runs.
    let out = Command::new(&bin)
        .args(["--data-dir", data, "admin", "tenant", "create", "beta"])
        .env_remove("DATABASE_URL")
        .output()
        .await
        .expect("admin");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new(&bin)
        .args([
            "--data-dir",
            data,
            "admin",
            "key",
            "create",
            "beta",
            "--label",
            "ci",
        ])
        .env_remove("DATABASE_URL")
        .output()
        .await
        .expect("admin");
    let beta_key = String::from_utf8(out.stdout)
        .expect("utf8")
        .trim()
        .to_owned();
    assert!(beta_key.starts_with("rw_live_"), "{beta_key}");
    assert_ne!(
        token(&relay.http, &beta_key)
            .await
            .expect("usable")
            .tenant_id,
        a.tenant_id
    );

    relay.signal("TERM");
    let close = a.closed().await.expect("close frame on drain");
    assert_eq!(u16::from(close.code), CloseCode::GOING_AWAY);
    let status = relay.wait(Duration::from_secs(15)).await;
    assert!(status.success(), "drained and exited cleanly: {status}");

    // Restart: no new key (keys are shown once), the old key and the peer identity still work.
    let relay = RelayProcess::start(&bin, &["--data-dir", data], &[]).await;
    assert_eq!(relay.first_key, None);
    let mut b = TestClient::connect(&relay.http, &relay.ws, &key).await;
    let back = b
        .register(Register {
            backend: "claude-code".into(),
            path: Some("/work/bob".into()),
            reclaim: Some(bob.peer_id.clone()),
            ..Default::default()
        })
        .await;
    assert!(back.reclaimed);
    relay.signal("TERM");
    assert!(relay.wait(Duration::from_secs(15)).await.success());
}

#[tokio::test]
async fn the_relay_refuses_to_start_on_postgres_without_a_shared_jwt_secret() {
    let out = Command::new(relay_bin())
        .args(["--listen", "127.0.0.1:0"])
        .env(
            "DATABASE_URL",
            std::env::var("DATABASE_URL")
                .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into()),
        )
        .env_remove("REPOWIRE_JWT_SECRET")
        .output()
        .await
        .expect("run");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("REPOWIRE_JWT_SECRET"));
}
