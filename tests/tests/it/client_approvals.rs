//! Remote approval of tool calls and blocking questions, end to end: real relay processes, two
//! machines (two HOMEs and daemons), a stand-in agent in real tmux whose Bash tool calls go
//! through the PreToolUse hook `repowire setup --approvals` installs, and the person at the
//! other machine answering with `repowire approvals` on a terminal of their own.

use std::path::Path;
use std::time::{Duration, Instant};

use repowire_e2e::agents::{Agent, Home, Tmux, eventually};
use repowire_e2e::process::{RelayProcess, TempDatabase, relay_bin};
use serde_json::Value;

/// `laptop` runs the agent `app` with approvals on (`timeout` seconds); `desk` is a person's
/// machine on the same tenant.
async fn machines(
    relay: &RelayProcess,
    other: &RelayProcess,
    timeout: u64,
) -> (Tmux, Home, Home, Agent) {
    let key = relay
        .first_key
        .clone()
        .or(other.first_key.clone())
        .expect("key");
    let tmux = Tmux::start();
    let laptop = Home::new(Some((relay.http.clone(), key.clone())));
    let desk = Home::new(Some((other.http.clone(), key)));
    let t = timeout.to_string();
    laptop.ok(&[
        "setup",
        "--non-interactive",
        "--approvals",
        "--approval-timeout",
        &t,
    ]);
    laptop.ok(&["daemon", "start"]);
    desk.install_and_start();
    let app = laptop.agent(&tmux, "app");
    app.hook_done("SessionStart", 1).await;
    (tmux, laptop, desk, app)
}

/// The agent's n-th permission decision.
async fn permission(agent: &Agent, n: usize) -> Value {
    agent
        .wait_nth(n, "a permission decision", |e| e["event"] == "permission")
        .await
}

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn ran(agent: &Agent, command: &str) -> bool {
    agent
        .events()
        .iter()
        .any(|e| e["event"] == "tool" && e["command"] == command)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gated_call_runs_when_a_person_on_another_machine_allows_it_and_not_when_denied() {
    let data = tempfile::tempdir().expect("data");
    let dir = data.path().to_str().expect("utf8").to_owned();
    let relay = RelayProcess::start(&relay_bin(), &["--data-dir", &dir], &[]).await;
    let (tmux, laptop, desk, app) = machines(&relay, &relay, 60).await;
    let project = laptop.path().join("app");

    app.submit(&tmux, "/run touch allowed.txt");
    let q = desk.approvals_waiting(1).await.remove(0);
    assert_eq!(q["from"]["name"], "app");
    assert_eq!(q["question"]["kind"], "tool_permission");
    let text = q["text"].as_str().unwrap_or("");
    assert!(
        text.starts_with("Bash: touch allowed.txt\nin "),
        "what the person sees: {text}"
    );
    // Nothing runs before the decision.
    assert!(!ran(&app, "touch allowed.txt"));
    assert!(!project.join("allowed.txt").exists());
    let cid = q["correlation_id"].as_str().expect("cid").to_owned();
    // Shown as what it is to a person: waiting, not the wire's `accepted` (issue 35.5).
    let shown = desk.ok(&["approvals", "show", &cid]);
    assert!(
        shown.contains("(waiting for a decision)") && !shown.contains("(accepted)"),
        "{shown}"
    );
    let allowed = desk.in_terminal(&["approvals", "allow", &cid]);
    assert!(
        allowed.status.success(),
        "{}{}",
        stdout(&allowed),
        stderr(&allowed)
    );
    let decided = permission(&app, 1).await;
    assert_eq!(decided["decision"], "allow", "{decided}");
    let reason = decided["reason"].as_str().unwrap_or("");
    assert!(reason.contains("approved by @"), "{reason}");
    app.wait("the allowed call ran", |e| {
        e["event"] == "tool" && e["command"] == "touch allowed.txt" && e["exit"] == 0
    })
    .await;
    assert!(project.join("allowed.txt").exists());

    // Denied with a reason: the call does not run and the agent reads why.
    app.submit(&tmux, "/run touch denied.txt");
    let q = desk.approvals_waiting(1).await.remove(0);
    let cid2 = q["correlation_id"].as_str().expect("cid").to_owned();
    let denied = desk.in_terminal(&["approvals", "deny", &cid2, "--reason", "not on a Friday"]);
    assert!(
        denied.status.success(),
        "{}{}",
        stdout(&denied),
        stderr(&denied)
    );
    let decided = permission(&app, 2).await;
    assert_eq!(decided["decision"], "deny");
    let reason = decided["reason"].as_str().unwrap_or("");
    assert!(
        reason.contains("denied by @") && reason.ends_with(": not on a Friday"),
        "{reason}"
    );
    app.wait("the denial shown", |e| {
        e["event"] == "reply"
            && e["text"]
                .as_str()
                .is_some_and(|t| t.starts_with("denied: "))
    })
    .await;
    assert!(!ran(&app, "touch denied.txt"));
    assert!(!project.join("denied.txt").exists());

    // A second answer is refused and names the first.
    let again = desk.in_terminal(&["approvals", "allow", &cid2]);
    assert!(!again.status.success());
    let said = format!("{}{}", stdout(&again), stderr(&again));
    assert!(said.contains("option `deny`"), "{said}");

    // Every decision is on record, on every machine of the tenant, newest first.
    for home in [&desk, &laptop] {
        let history = home.json(&["approvals", "history"]);
        let items = history.as_array().cloned().unwrap_or_default();
        assert_eq!(items.len(), 2, "{history}");
        assert_eq!(items[0]["correlation_id"], cid2.as_str());
        assert_eq!(items[0]["answer"]["option_id"], "deny");
        assert_eq!(items[0]["answer"]["text"], "not on a Friday");
        assert_eq!(items[1]["correlation_id"], cid.as_str());
        assert_eq!(items[1]["answer"]["option_id"], "allow");
        assert!(items[1]["answered_by"]["peer_id"].is_string());
        assert!(items[1]["closed_at_ms"].as_i64().is_some());
    }
    let printed = stdout(&desk.in_terminal(&["approvals", "history"]));
    assert!(printed.contains("denied by @"), "{printed}");
    drop(app);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_call_is_denied_at_its_timeout_and_a_late_allow_is_refused() {
    let data = tempfile::tempdir().expect("data");
    let dir = data.path().to_str().expect("utf8").to_owned();
    let relay = RelayProcess::start(&relay_bin(), &["--data-dir", &dir], &[]).await;
    let (tmux, laptop, desk, app) = machines(&relay, &relay, 8).await;

    let asked = Instant::now();
    app.submit(&tmux, "/run touch late.txt");
    let q = desk.approvals_waiting(1).await.remove(0);
    let cid = q["correlation_id"].as_str().expect("cid").to_owned();
    let decided = permission(&app, 1).await;
    let waited = asked.elapsed();
    assert_eq!(decided["decision"], "deny");
    let reason = decided["reason"].as_str().unwrap_or("");
    assert!(reason.contains("nobody answered within 8 s"), "{reason}");
    assert!(
        waited >= Duration::from_secs(8) && waited < Duration::from_secs(25),
        "denied after {waited:?}"
    );
    assert!(!ran(&app, "touch late.txt"));
    assert!(!laptop.path().join("app/late.txt").exists());
    let late = desk.in_terminal(&["approvals", "allow", &cid]);
    assert!(!late.status.success());
    let said = format!("{}{}", stdout(&late), stderr(&late));
    assert!(said.contains("default `deny`"), "{said}");
    let history = desk.json(&["approvals", "history"]);
    assert_eq!(history[0]["correlation_id"], cid.as_str());
    assert_eq!(history[0]["answer"]["option_id"], "deny");
    assert!(history[0]["answered_by"].is_null());
    assert!(
        history[0]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("no answer within 8 s")),
        "{history}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_daemon_stopped_a_gated_call_is_denied_at_once() {
    let data = tempfile::tempdir().expect("data");
    let dir = data.path().to_str().expect("utf8").to_owned();
    let relay = RelayProcess::start(&relay_bin(), &["--data-dir", &dir], &[]).await;
    let (tmux, laptop, _desk, app) = machines(&relay, &relay, 60).await;
    laptop.ok(&["daemon", "stop"]);
    app.submit(&tmux, "/run touch nodaemon.txt");
    let decided = permission(&app, 1).await;
    assert_eq!(decided["decision"], "deny");
    assert!(
        decided["reason"]
            .as_str()
            .is_some_and(|r| r.contains("daemon is not running")),
        "{decided}"
    );
    let hook = app
        .wait("the PreToolUse hook", |e| {
            e["event"] == "hook" && e["hook"] == "PreToolUse"
        })
        .await;
    assert!(
        hook["ms"].as_u64().is_some_and(|ms| ms < 2_000),
        "the hook took {hook}"
    );
    assert!(!ran(&app, "touch nodaemon.txt"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_and_commands_without_a_person_at_a_terminal_cannot_approve() {
    let data = tempfile::tempdir().expect("data");
    let dir = data.path().to_str().expect("utf8").to_owned();
    let relay = RelayProcess::start(&relay_bin(), &["--data-dir", &dir], &[]).await;
    let (tmux, laptop, desk, app) = machines(&relay, &relay, 60).await;
    let ops = desk.agent(&tmux, "ops");
    ops.hook_done("SessionStart", 1).await;

    app.submit(&tmux, "/run touch never.txt");
    let q = desk.approvals_waiting(1).await.remove(0);
    let cid = q["correlation_id"].as_str().expect("cid").to_owned();
    // Another agent of the tenant, through its MCP tool: not an approver.
    ops.submit(
        &tmux,
        &format!(r#"/mcp answer {{"correlation_id": "{cid}", "option_id": "allow"}}"#),
    );
    let refused = ops
        .wait("the refused answer", |e| e["event"] == "mcp")
        .await;
    assert_eq!(refused["is_error"], true, "{refused}");
    assert!(
        refused["text"]
            .as_str()
            .is_some_and(|t| t.contains("`agent`")),
        "{refused}"
    );
    // A command with no terminal (as a detached program would be) is not the person.
    let detached = desk.without_terminal(&["approvals", "allow", &cid]);
    assert!(!detached.status.success());
    assert!(
        stderr(&detached).contains("not_a_person"),
        "{}",
        stderr(&detached)
    );
    // The question is still open; the person denies it.
    assert_eq!(
        laptop.approvals_waiting(1).await[0]["correlation_id"],
        cid.as_str()
    );
    let denied = desk.in_terminal(&["approvals", "deny", &cid]);
    assert!(denied.status.success(), "{}", stderr(&denied));
    assert_eq!(permission(&app, 1).await["decision"], "deny");
    assert!(!ran(&app, "touch never.txt"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_work_across_two_daemons_on_two_relay_pods() {
    let db = TempDatabase::create("repowire_approvals");
    let redis = repowire_e2e::redis_url();
    let prefix = repowire_e2e::redis_prefix();
    let pod_a = RelayProcess::start_pod(&db.url(), &redis, &prefix, "pod-a", &[]).await;
    let pod_b = RelayProcess::start_pod(&db.url(), &redis, &prefix, "pod-b", &[]).await;
    let (tmux, laptop, desk, app) = machines(&pod_a, &pod_b, 60).await;

    app.submit(&tmux, "/run touch across.txt");
    let q = desk.approvals_waiting(1).await.remove(0);
    let cid = q["correlation_id"].as_str().expect("cid").to_owned();
    let allowed = desk.in_terminal(&["approvals", "allow", &cid, "--reason", "go ahead"]);
    assert!(allowed.status.success(), "{}", stderr(&allowed));
    let decided = permission(&app, 1).await;
    assert_eq!(decided["decision"], "allow");
    assert!(
        decided["reason"]
            .as_str()
            .is_some_and(|r| r.ends_with(": go ahead")),
        "{decided}"
    );
    app.wait("the allowed call ran", |e| {
        e["event"] == "tool" && e["command"] == "touch across.txt"
    })
    .await;
    assert!(Path::new(&laptop.path().join("app/across.txt")).exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allow_given_while_the_asking_daemon_is_cut_off_reaches_its_hook_after_reconnecting() {
    let db = TempDatabase::create("repowire_approvals_away");
    let redis = repowire_e2e::redis_url();
    let prefix = repowire_e2e::redis_prefix();
    let pod_a = RelayProcess::start_pod(&db.url(), &redis, &prefix, "pod-a", &[]).await;
    let pod_b = RelayProcess::start_pod(&db.url(), &redis, &prefix, "pod-b", &[]).await;
    let (tmux, laptop, desk, app) = machines(&pod_a, &pod_b, 120).await;

    app.submit(&tmux, "/run touch away.txt");
    let q = desk.approvals_waiting(1).await.remove(0);
    let cid = q["correlation_id"].as_str().expect("cid").to_owned();

    // The laptop's pod dies: its daemon, whose hook waits, cannot hear anything now.
    let addr = pod_a.http.trim_start_matches("http://").to_owned();
    pod_a.signal("KILL");
    let _ = pod_a.wait(Duration::from_secs(10)).await;
    eventually("the laptop's link down", || {
        (laptop.link_state() != "connected").then_some(())
    })
    .await;

    // The person allows it meanwhile, on the other pod: the relay keeps the answer.
    let allowed = desk.in_terminal(&["approvals", "allow", &cid, "--reason", "while away"]);
    assert!(allowed.status.success(), "{}", stderr(&allowed));
    assert!(
        !app.events().iter().any(|e| e["event"] == "permission"),
        "decided while its daemon was cut off"
    );

    // The pod comes back: the daemon reconnects, learns the outcome, and the hook allows.
    let _pod_a = RelayProcess::start_pod_on(&addr, &db.url(), &redis, &prefix, "pod-a", &[]).await;
    let decided = permission(&app, 1).await;
    assert_eq!(decided["decision"], "allow", "{decided}");
    assert!(
        decided["reason"]
            .as_str()
            .is_some_and(|r| r.ends_with(": while away")),
        "{decided}\n--- laptop daemon log ---\n{}",
        laptop.log()
    );
    app.wait("the allowed call ran", |e| {
        e["event"] == "tool" && e["command"] == "touch away.txt"
    })
    .await;
    assert!(laptop.path().join("app/away.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_denied_while_the_relay_is_unreachable_is_on_that_machines_record() {
    let db = TempDatabase::create("repowire_approvals_local");
    let redis = repowire_e2e::redis_url();
    let prefix = repowire_e2e::redis_prefix();
    let pod = RelayProcess::start_pod(&db.url(), &redis, &prefix, "pod-a", &[]).await;
    let (tmux, laptop, desk, app) = machines(&pod, &pod, 60).await;

    // The relay goes away: nobody can be asked, so the call is denied without waiting.
    let addr = pod.http.trim_start_matches("http://").to_owned();
    pod.signal("KILL");
    let _ = pod.wait(Duration::from_secs(10)).await;
    eventually("the laptop's link down", || {
        (laptop.link_state() != "connected").then_some(())
    })
    .await;
    app.submit(&tmux, "/run touch offline.txt");
    let decided = permission(&app, 1).await;
    assert_eq!(decided["decision"], "deny", "{decided}");
    assert!(
        decided["reason"]
            .as_str()
            .is_some_and(|r| r.contains("could not ask for approval")),
        "{decided}"
    );
    assert!(!ran(&app, "touch offline.txt"));

    // Meanwhile the laptop's history shows its own denials, says the relay's record is
    // missing, and fails.
    let partial = laptop.repowire(&["approvals", "history", "--json"]);
    assert_eq!(partial.status.code(), Some(1), "{}", stderr(&partial));
    assert!(
        stderr(&partial).contains("record of decisions is not available"),
        "{}",
        stderr(&partial)
    );
    let listed: Value = serde_json::from_slice(&partial.stdout).expect("a JSON list");
    assert_eq!(listed[0]["state"], "denied_here", "{listed}");

    // Back online, the laptop's record of decisions has it; the relay never heard of it, so
    // the desk's record has not.
    let _pod = RelayProcess::start_pod_on(&addr, &db.url(), &redis, &prefix, "pod-a", &[]).await;
    eventually("the laptop's link up", || {
        (laptop.link_state() == "connected").then_some(())
    })
    .await;
    let history = laptop.json(&["approvals", "history"]);
    let here = &history[0];
    assert_eq!(here["state"], "denied_here", "{history}");
    assert_eq!(here["local"], true, "{history}");
    assert!(here["correlation_id"].is_null(), "{history}");
    assert!(here["from"]["peer_id"].is_string(), "{history}");
    assert!(
        here["text"]
            .as_str()
            .is_some_and(|t| t.contains("touch offline.txt")),
        "{history}"
    );
    assert_eq!(
        here["reason"],
        decided["reason"]
            .as_str()
            .unwrap_or("")
            .trim_start_matches("Repowire approvals: ")
    );
    let printed = stdout(&laptop.in_terminal(&["approvals", "history"]));
    assert!(printed.contains("denied on this machine"), "{printed}");
    // The desk's daemon lost the same pod and reconnects on its own backoff.
    eventually("the desk's link up", || {
        (desk.link_state() == "connected").then_some(())
    })
    .await;
    let elsewhere = desk.json(&["approvals", "history"]);
    assert!(
        elsewhere
            .as_array()
            .is_some_and(|a| a.iter().all(|q| q["local"] != true)),
        "{elsewhere}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_blocks_on_a_question_until_the_agent_answers_or_the_default_is_taken() {
    let data = tempfile::tempdir().expect("data");
    let dir = data.path().to_str().expect("utf8").to_owned();
    let relay = RelayProcess::start(&relay_bin(), &["--data-dir", &dir], &[]).await;
    let (tmux, _laptop, desk, app) = machines(&relay, &relay, 60).await;

    let asking = desk
        .command(&[
            "question",
            "ask-blocking",
            "app",
            "ship it?",
            "--choice",
            "yes=Ship it",
            "--choice",
            "no=Wait",
            "--timeout",
            "60",
        ])
        .spawn()
        .expect("ask-blocking");
    let shown = app
        .wait("the question in the agent's context", |e| {
            e["event"] == "context" && e["text"].as_str().is_some_and(|t| t.contains("ship it?"))
        })
        .await;
    let text = shown["text"].as_str().unwrap_or("");
    assert!(
        text.contains("`yes` = Ship it") && text.contains("Answer within 60 s"),
        "{text}"
    );
    let cid = text
        .split("[ask #")
        .nth(1)
        .and_then(|r| r.split(']').next())
        .expect("ask id in the context")
        .to_owned();
    app.submit(
        &tmux,
        &format!(r#"/mcp answer {{"correlation_id": "{cid}", "option_id": "yes"}}"#),
    );
    let out = asking.wait_with_output().expect("ask-blocking ends");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "yes");

    // Nobody answers: the default is the answer (exit 0); without one, exit 2.
    let defaulted = desk.repowire(&[
        "question",
        "ask-blocking",
        "app",
        "rollback?",
        "--choice",
        "yes",
        "--choice",
        "no",
        "--timeout",
        "1",
        "--default",
        "no",
    ]);
    assert!(defaulted.status.success(), "{}", stderr(&defaulted));
    assert_eq!(stdout(&defaulted).trim(), "no");
    let unanswered = desk.repowire(&[
        "question",
        "ask-blocking",
        "app",
        "why?",
        "--text-answer",
        "--timeout",
        "1",
    ]);
    assert_eq!(unanswered.status.code(), Some(2), "{}", stderr(&unanswered));
    assert!(
        stderr(&unanswered).contains("no answer within 1 s"),
        "{}",
        stderr(&unanswered)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_installs_the_gate_with_its_cap_and_removes_it_and_refuses_read_only_tools() {
    let home = Home::new(None);
    let settings = home.path().join(".claude/settings.json");
    let config = home.repowire_home().join("config.toml");
    let hooks = |event: &str| -> Vec<Value> {
        let v: Value =
            serde_json::from_str(&std::fs::read_to_string(&settings).unwrap_or_default())
                .unwrap_or(Value::Null);
        v["hooks"][event].as_array().cloned().unwrap_or_default()
    };
    home.ok(&["setup", "--non-interactive"]);
    assert!(hooks("PreToolUse").is_empty(), "no gate unless asked");

    let refused = home.repowire(&[
        "setup",
        "--non-interactive",
        "--approvals",
        "--gated-tools",
        "Bash,Read",
    ]);
    assert!(!refused.status.success());
    assert!(
        stderr(&refused).contains("`Read` only reads"),
        "{}",
        stderr(&refused)
    );
    assert!(hooks("PreToolUse").is_empty(), "nothing written");

    home.ok(&[
        "setup",
        "--non-interactive",
        "--approvals",
        "--gated-tools",
        "Bash,Write",
        "--approval-timeout",
        "90",
    ]);
    let gate = hooks("PreToolUse");
    assert_eq!(gate.len(), 1, "{gate:?}");
    assert_eq!(gate[0]["matcher"], "Bash|Write");
    let command = gate[0]["hooks"][0]["command"].as_str().unwrap_or("");
    assert!(
        command.ends_with("hook pre-tool-use --approval-timeout 90"),
        "{command}"
    );
    assert_eq!(gate[0]["hooks"][0]["timeout"], 120);
    let toml = std::fs::read_to_string(&config).expect("config.toml");
    assert!(
        toml.contains("enabled = true") && toml.contains("timeout_seconds = 90"),
        "{toml}"
    );
    // A second run changes nothing; --no-approvals takes the gate away.
    let before = std::fs::read_to_string(&settings).expect("settings");
    home.ok(&["setup", "--non-interactive"]);
    assert_eq!(
        std::fs::read_to_string(&settings).expect("settings"),
        before
    );
    // Doctor and status say what is gated (issue 35.7).
    let approvals_check = |home: &Home| -> Value {
        let out = home.repowire(&["doctor", "--json"]);
        let report: Value = serde_json::from_slice(&out.stdout).expect("doctor json");
        report
            .as_array()
            .or(report["checks"].as_array())
            .expect("checks")
            .iter()
            .find(|c| {
                c["check"]
                    .as_str()
                    .is_some_and(|t| t.starts_with("approvals"))
            })
            .cloned()
            .expect("an approvals line")
    };
    let on = approvals_check(&home);
    assert_eq!(on["ok"], true, "{on}");
    assert!(
        on["check"]
            .as_str()
            .unwrap_or("")
            .contains("approvals on: Bash, Write wait up to 90 s"),
        "{on}"
    );
    assert!(home.ok(&["status"]).contains("approvals on: Bash, Write"));
    home.ok(&["setup", "--non-interactive", "--no-approvals"]);
    assert!(hooks("PreToolUse").is_empty());
    assert!(
        std::fs::read_to_string(&config)
            .expect("config.toml")
            .contains("enabled = false")
    );
    // On in config.toml, but no hook in Claude Code: nothing is gated, and doctor says so.
    let toml = std::fs::read_to_string(&config).expect("config.toml");
    std::fs::write(&config, toml.replace("enabled = false", "enabled = true")).expect("write");
    let off = approvals_check(&home);
    assert_eq!(off["ok"], false, "{off}");
    assert!(
        off["fix"]
            .as_str()
            .unwrap_or("")
            .contains("no Repowire PreToolUse hook")
            && off["fix"]
                .as_str()
                .unwrap_or("")
                .contains("setup --approvals"),
        "{off}"
    );
    let status = home.ok(&["status"]);
    assert!(status.contains("NOT GATED AS CONFIGURED"), "{status}");
}
