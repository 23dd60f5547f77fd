//! The dashboard in a real browser: Debian's Chromium driven by npm playwright-core
//! (tests/browser/dashboard.mjs says what it checks), against a relay with a peer whose
//! description is hostile HTML. scripts/test installs both and sets `PLAYWRIGHT_CORE` and
//! `REPOWIRE_REQUIRE_BROWSER=1`; without them (a plain `cargo test`) the test says it is
//! skipped. Screenshots land in `target/dashboard-screenshots/`.

use std::path::PathBuf;
use std::process::Command;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use repowire_e2e::client::TestClient;
use repowire_e2e::process::{RelayProcess, relay_bin};
use repowire_protocol::{Ask, Body, Question, ReceiptState, UpdatePeer};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the repository")
        .to_path_buf()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_works_in_chromium_with_the_keyboard_on_a_phone_and_without_javascript() {
    let Some(playwright) = std::env::var_os("PLAYWRIGHT_CORE") else {
        assert!(
            std::env::var_os("REPOWIRE_REQUIRE_BROWSER").is_none(),
            "REPOWIRE_REQUIRE_BROWSER is set but PLAYWRIGHT_CORE is not"
        );
        eprintln!("skipped: PLAYWRIGHT_CORE is not set (scripts/test installs playwright-core)");
        return;
    };
    let data = tempfile::tempdir().expect("data");
    let dir = data.path().to_str().expect("utf8").to_owned();
    let relay = RelayProcess::start(&relay_bin(), &["--data-dir", &dir], &[]).await;
    // A tenant on the free plan (the bootstrapped one is unlimited: it would draw no meters).
    let admin = |args: &[&str]| {
        let out = Command::new(relay_bin())
            .args(["--data-dir", &dir, "admin"])
            // The embedded store of this relay (scripts/test exports a Postgres URL).
            .env_remove("DATABASE_URL")
            .args(args)
            .output()
            .expect("repowire-relay admin");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    admin(&["tenant", "create", "web", "--plan", "free"]);
    let key = admin(&[
        "key",
        "create",
        "web",
        "--label",
        "browser",
        "--scope",
        "connect",
        "--scope",
        "usage:read",
        "--scope",
        "keys:manage",
        "--scope",
        "messages:read",
        "--scope",
        "approve",
    ]);
    let mut agent = TestClient::connect(&relay.http, &relay.ws, &key).await;
    let builder = agent.peer("builder", "dev").await;
    let id = agent
        .send(Body::UpdatePeer(UpdatePeer {
            peer_id: builder.peer_id.clone(),
            turn_state: None,
            description: Some("<img src=x onerror=window.__pwned=true> building".into()),
        }))
        .await;
    agent.answer(id).await.expect("described");
    let (status, minted) = repowire_e2e::http_json(
        reqwest::Method::POST,
        &format!("{}/v1/dashboard/links", relay.http),
        Some(&key),
        None,
    )
    .await;
    assert_eq!(status, 200, "{minted}");
    let path = minted["path"].as_str().expect("path");

    let agent_key = key.clone();
    let mut watchers = Vec::new();
    let mut question = None;
    let shots = repo().join("target/dashboard-screenshots");
    let script = repo().join("tests/browser/dashboard.mjs");
    let http = relay.http.clone();
    let shots_arg = shots.to_str().expect("utf8").to_owned();
    let path = path.to_owned();
    let mut node = tokio::process::Command::new("node")
        .arg(script)
        .args([&http, &path, &key, &shots_arg])
        .env("PLAYWRIGHT_CORE", playwright)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("run node");
    // The script says READY <step> where the test makes something happen, and waits for it.
    let mut go = node.stdin.take().expect("stdin");
    let mut lines = BufReader::new(node.stdout.take().expect("stdout")).lines();
    let mut said = String::new();
    let mut steps = Vec::new();
    // A run that hangs fails here instead of holding CI (the script itself takes ~20 s).
    tokio::time::timeout(std::time::Duration::from_secs(300), async {
        while let Some(line) = lines.next_line().await.expect("the script's output") {
            let Some(step) = line.strip_prefix("READY ") else {
                said.push_str(&line);
                said.push('\n');
                continue;
            };
            match step {
                // A peer joins and says something hostile while the event log is open.
                "events" => {
                    let mut watcher = TestClient::connect(&relay.http, &relay.ws, &agent_key).await;
                    let me = watcher.peer("watcher", "ops").await;
                    watcher
                        .notify(
                            &me,
                            builder.peer_id.as_str(),
                            "<img src=x onerror=window.__pwned=true> are you there?",
                        )
                        .await
                        .expect("accepted");
                    watchers.push(watcher);
                }
                // The person's notify reached the agent, which takes it in.
                "sent" => {
                    let got = loop {
                        let got = agent.delivered_to(&builder.peer_id).await;
                        if got.message.text == "please rebase on main" {
                            break got;
                        }
                    };
                    assert_eq!(got.message.from.name, "browser");
                    agent
                        .receipt(
                            &builder.peer_id,
                            got.message.message_id,
                            ReceiptState::Injected,
                        )
                        .await;
                }
                // The agent's tool call waits for an approver.
                "question" => {
                    let asked = agent
                        .submit(Body::Ask(Ask {
                            from: builder.peer_id.clone(),
                            to: repowire_protocol::APPROVERS.into(),
                            circle: None,
                            text: "Bash: cargo publish --dry-run".into(),
                            reply_to: None,
                            question: Some(Question::tool_permission(600_000)),
                        }))
                        .await
                        .expect("the question is accepted");
                    question = asked.correlation_id;
                }
                // The person allowed it: the agent has the decision, and runs the tool.
                "answered" => {
                    let decision = agent.delivered_to(&builder.peer_id).await;
                    assert_eq!(decision.message.correlation_id, question);
                    assert_eq!(
                        decision
                            .message
                            .answer
                            .as_ref()
                            .and_then(|a| a.option_id.as_deref()),
                        Some("allow")
                    );
                }
                other => panic!("the script waits for an unknown step {other}"),
            }
            steps.push(step.to_owned());
            go.write_all(b"go\n").await.expect("the script reads");
        }
    })
    .await
    .unwrap_or_else(|_| panic!("the browser run hung; it said:\n{said}"));
    assert_eq!(steps, ["events", "sent", "question", "answered"]);
    drop(go);
    let out = tokio::time::timeout(std::time::Duration::from_secs(60), node.wait_with_output())
        .await
        .expect("the browser run ends")
        .expect("the browser run");
    assert!(
        out.status.success(),
        "the browser checks failed:\n{said}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_str(said.trim()).expect("the report");
    assert_eq!(report["ok"], true);
    assert!(
        report["checked"].as_array().is_some_and(|c| c.len() >= 14),
        "{report}"
    );
    for shot in [
        "overview-1280x800-light.png",
        "overview-1280x800-dark.png",
        "overview-390x844-nojs.png",
        "keys-1280x800.png",
        "events-1280x800.png",
        "approvals-1280x800.png",
    ] {
        assert!(shots.join(shot).is_file(), "no {shot}");
    }
}
