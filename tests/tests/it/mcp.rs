//! `repowire mcp` driven by real MCP clients: an rmcp client here (schemas, no daemon, no
//! proven identity, a clean stdout), and the stand-in agents' own rmcp clients for the flows
//! an agent runs (ask → ack → wait_on_ack, read_peer_file).

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use repowire_e2e::agents::{Agent, Home, Tmux, bin, eventually};
use rmcp::ServiceExt;
use serde_json::{Value, json};

fn mcp_command(home: &Home) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(bin("repowire"));
    cmd.arg("mcp").envs(home.env()).env_remove("TMUX_PANE");
    cmd
}

async fn client(home: &Home) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
    let (transport, _) = rmcp::transport::TokioChildProcess::builder(mcp_command(home))
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn repowire mcp");
    ().serve(transport).await.expect("initialize")
}

fn text_of(r: &rmcp::model::CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

async fn call(
    c: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    tool: &str,
    args: Value,
) -> rmcp::model::CallToolResult {
    let params = rmcp::model::CallToolRequestParams::new(tool.to_owned())
        .with_arguments(args.as_object().cloned().unwrap_or_default());
    c.call_tool(params).await.expect("tools/call")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_and_schemas_match_the_fixture_and_work_without_a_daemon() {
    let home = Home::new(None);
    let c = client(&home).await;
    let info = c.peer_info().expect("server info");
    assert_eq!(
        info.server_info.as_ref().map(|s| s.name.as_str()),
        Some("repowire")
    );
    let tools = c.list_all_tools().await.expect("tools/list");
    let actual: Value = serde_json::to_value(&tools).expect("json");
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/mcp_tools.json");
    if std::env::var_os("UPDATE_FIXTURES").is_some() {
        std::fs::write(
            &path,
            serde_json::to_string_pretty(&actual).expect("json") + "\n",
        )
        .expect("write");
    }
    let expected: Value = serde_json::from_str(&std::fs::read_to_string(&path).expect("fixture"))
        .expect("fixture json");
    assert_eq!(
        actual, expected,
        "tool schemas changed: review, then UPDATE_FIXTURES=1"
    );
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    for n in [
        "list_peers",
        "whoami",
        "set_description",
        "ask",
        "wait_on_ack",
        "ack",
        "answer",
        "notify_peer",
        "broadcast",
        "start_conversation",
        "read_peer_file",
    ] {
        assert!(names.contains(&n), "{n} missing: {names:?}");
    }

    // No daemon: every tool answers with a tool error that says how to start it.
    for (tool, args) in [
        ("whoami", json!({})),
        ("ask", json!({"peer_name": "x", "query": "q"})),
    ] {
        let r = call(&c, tool, args).await;
        assert_eq!(r.is_error, Some(true), "{tool}");
        assert!(
            text_of(&r).contains("repowire daemon start"),
            "{tool}: {}",
            text_of(&r)
        );
    }
    // Bad arguments are a clear error, not a crash; the server keeps serving.
    let bad = c
        .call_tool(
            rmcp::model::CallToolRequestParams::new("ask").with_arguments(serde_json::Map::new()),
        )
        .await;
    assert!(bad.is_err() || bad.as_ref().is_ok_and(|r| r.is_error == Some(true)));
    assert!(c.list_all_tools().await.is_ok());
    c.cancel().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_cannot_prove_its_agent_refuses_outbound_tools() {
    let home = Home::new(None);
    home.ok(&["daemon", "start"]);
    // Spawned by this test process, which is no agent session of the daemon.
    let c = client(&home).await;
    let r = call(
        &c,
        "notify_peer",
        json!({"peer_name": "anyone", "message": "hi"}),
    )
    .await;
    assert_eq!(r.is_error, Some(true));
    let text = text_of(&r);
    assert!(text.contains("cannot prove which agent session"), "{text}");
    assert!(
        text.contains("does not descend from an agent session"),
        "{text}"
    );
    // Nothing was sent on its behalf.
    assert_eq!(
        home.json(&["daemon", "status"])["sessions"]
            .as_array()
            .map(Vec::len),
        Some(0)
    );
    c.cancel().await.expect("close");
}

#[test]
fn stdout_carries_only_the_protocol_and_logs_go_to_stderr() {
    let home = Home::new(None);
    let mut child = Command::new(bin("repowire"))
        .arg("mcp")
        .envs(home.env())
        .env("REPOWIRE_LOG", "debug")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut lines = Vec::new();
    let mut ask = |msg: Value, lines: &mut Vec<String>| {
        writeln!(stdin, "{msg}").expect("write");
        stdin.flush().expect("flush");
        if msg.get("id").is_some() {
            let mut line = String::new();
            stdout.read_line(&mut line).expect("read");
            lines.push(line);
        }
    };
    ask(
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}),
        &mut lines,
    );
    ask(
        json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
        &mut lines,
    );
    ask(
        json!({"jsonrpc":"2.0","id":2,"method":"tools/list"}),
        &mut lines,
    );
    ask(
        json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"whoami","arguments":{}}}),
        &mut lines,
    );
    drop(stdin);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).expect("rest");
    let out = child.wait_with_output().expect("wait");
    lines.extend(rest.lines().map(str::to_owned));
    for line in lines.iter().filter(|l| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not JSON-RPC on stdout ({e}): {line}"));
        assert_eq!(v["jsonrpc"], "2.0", "{line}");
    }
    assert_eq!(lines.iter().filter(|l| !l.trim().is_empty()).count(), 3);
    assert!(!out.stderr.is_empty(), "debug logs should go to stderr");
}

fn last_mcp(agent: &Agent, n: usize) -> Value {
    agent
        .events()
        .into_iter()
        .filter(|e| e["event"] == "mcp")
        .nth(n - 1)
        .expect("mcp event")
}

async fn mcp(tmux: &Tmux, agent: &Agent, n: usize, tool: &str, args: Value) -> Value {
    agent.submit(tmux, &format!("/mcp {tool} {args}"));
    agent
        .wait_nth(n, &format!("mcp call #{n} ({tool})"), |e| {
            e["event"] == "mcp"
        })
        .await;
    last_mcp(agent, n)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_agents_ask_ack_and_wait_on_ack_through_their_mcp_servers() {
    let tmux = Tmux::start();
    let home = Home::new(None);
    home.install_and_start();
    let a = home.agent(&tmux, "alpha");
    let b = home.agent(&tmux, "beta");
    a.hook_done("SessionStart", 1).await;
    b.hook_done("SessionStart", 1).await;

    let me = mcp(&tmux, &a, 1, "whoami", json!({})).await;
    assert_eq!(me["is_error"], false, "{me}");
    assert_eq!(me["structured"]["name"], "alpha");
    let peers = mcp(&tmux, &a, 2, "list_peers", json!({})).await;
    let names: Vec<&str> = peers["structured"]["peers"]
        .as_array()
        .expect("peers")
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert_eq!(names, ["beta"], "{peers}");

    let asked = mcp(
        &tmux,
        &a,
        3,
        "ask",
        json!({"peer_name": "beta", "query": "what is 6 x 7?"}),
    )
    .await;
    assert_eq!(asked["is_error"], false, "{asked}");
    let cid = asked["structured"]["correlation_id"]
        .as_str()
        .expect("cid")
        .to_owned();
    b.wait("the ask", |e| {
        e["event"] == "context" && e["text"].as_str().is_some_and(|t| t.contains(&cid))
    })
    .await;

    // Alpha waits in-turn; beta acks meanwhile; the reply comes back through wait_on_ack.
    a.submit(
        &tmux,
        &format!(
            "/mcp wait_on_ack {}",
            json!({"correlation_id": cid, "timeout_seconds": 60})
        ),
    );
    a.wait("alpha waiting", |e| {
        e["event"] == "prompt"
            && e["text"]
                .as_str()
                .is_some_and(|t| t.contains("wait_on_ack"))
    })
    .await;
    let acked = mcp(
        &tmux,
        &b,
        1,
        "ack",
        json!({"correlation_id": cid, "message": "forty-two, final"}),
    )
    .await;
    assert_eq!(acked["is_error"], false, "{acked}");
    a.wait_nth(4, "wait_on_ack result", |e| e["event"] == "mcp")
        .await;
    let waited = last_mcp(&a, 4);
    assert_eq!(waited["structured"]["state"], "replied", "{waited}");
    assert!(
        waited["text"]
            .as_str()
            .unwrap_or("")
            .contains("forty-two, final"),
        "{waited}"
    );

    // The reply was handed over by wait_on_ack: it is not pushed again as a message.
    a.hook_done("Stop", 4).await;
    assert!(
        !a.context().contains("forty-two, final"),
        "the reply was delivered twice: {}",
        a.context()
    );
    let status = home.json(&["peer", "status", &cid]);
    assert_eq!(status["message"]["state"], "acked", "{status}");

    // A bare ack ends a wait too (no reply is coming); and only the asker may wait on an ask.
    let bare = mcp(
        &tmux,
        &b,
        2,
        "ask",
        json!({"peer_name": "alpha", "query": "ping?"}),
    )
    .await;
    let bare_cid = bare["structured"]["correlation_id"]
        .as_str()
        .expect("cid")
        .to_owned();
    // Alpha is woken with the ask; nothing else is typed into its pane meanwhile.
    a.wait("the ping ask", |e| {
        e["event"] == "context" && e["text"].as_str().is_some_and(|t| t.contains(&bare_cid))
    })
    .await;
    a.hook_done("Stop", 5).await;
    let stolen = mcp(
        &tmux,
        &a,
        5,
        "wait_on_ack",
        json!({"correlation_id": bare_cid, "timeout_seconds": 5}),
    )
    .await;
    assert_eq!(stolen["is_error"], true, "{stolen}");
    assert!(
        stolen["text"]
            .as_str()
            .unwrap_or("")
            .contains("not an ask this session sent"),
        "{stolen}"
    );
    home.ok(&["peer", "ack", &bare_cid, "--from", "alpha"]);
    let closed = mcp(
        &tmux,
        &b,
        3,
        "wait_on_ack",
        json!({"correlation_id": bare_cid, "timeout_seconds": 30}),
    )
    .await;
    assert_eq!(closed["structured"]["state"], "closed", "{closed}");

    // An agent's own tool call may not speak as another session.
    let repowire = bin("repowire").to_string_lossy().into_owned();
    a.submit(
        &tmux,
        &format!("/run {repowire} peer notify beta hi --from beta"),
    );
    let spoof = a
        .wait("the spoofing attempt", |e| e["event"] == "tool")
        .await;
    assert_ne!(spoof["exit"], 0, "{spoof}");
    assert!(
        spoof["stderr"]
            .as_str()
            .unwrap_or("")
            .contains("may not act as"),
        "{spoof}"
    );
    // The refusal says what to do (issue 15.7).
    assert!(
        spoof["stderr"]
            .as_str()
            .unwrap_or("")
            .contains("repowire session end"),
        "{spoof}"
    );

    // Shared state of the circle, durable in the relay: written by one, read by the other.
    let wrote = mcp(
        &tmux,
        &a,
        6,
        "write_shared_state",
        json!({"key": "api.port", "value": "8080"}),
    )
    .await;
    assert_eq!(wrote["is_error"], false, "{wrote}");
    let read = mcp(
        &tmux,
        &b,
        4,
        "read_shared_state",
        json!({"key": "api.port"}),
    )
    .await;
    let entries = read["structured"]["entries"]
        .as_array()
        .expect("entries")
        .clone();
    assert_eq!(entries.len(), 1, "{read}");
    assert_eq!(entries[0]["value"], "8080");
    assert_eq!(entries[0]["updated_by"], me["structured"]["peer_id"]);
    let bad = mcp(
        &tmux,
        &b,
        5,
        "write_shared_state",
        json!({"key": "has space", "value": "x"}),
    )
    .await;
    assert_eq!(bad["is_error"], true, "{bad}");
    assert!(bad["text"].as_str().unwrap_or("").contains("key"), "{bad}");
    let deleted = mcp(
        &tmux,
        &b,
        6,
        "write_shared_state",
        json!({"key": "api.port", "value": ""}),
    )
    .await;
    assert_eq!(deleted["is_error"], false, "{deleted}");
    let empty = mcp(&tmux, &a, 7, "read_shared_state", json!({})).await;
    assert_eq!(empty["structured"]["entries"], json!([]), "{empty}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_peer_file_refuses_every_escape_and_reads_what_is_shared() {
    let tmux = Tmux::start();
    let home = Home::new(None);
    let shared = home.path().join("shared");
    let private = home.path().join("private");
    for d in [&shared, &private] {
        std::fs::create_dir_all(d).expect("dir");
    }
    std::fs::write(shared.join("README.md"), "# shared project\n").expect("write");
    std::fs::write(shared.join(".env"), "SECRET=1\n").expect("write");
    std::fs::write(shared.join("big.log"), "x".repeat(4096)).expect("write");
    std::fs::write(home.path().join("outside.txt"), "outside\n").expect("write");
    std::os::unix::fs::symlink(home.path().join("outside.txt"), shared.join("link.txt"))
        .expect("symlink");
    std::fs::write(private.join("notes.md"), "private\n").expect("write");
    std::fs::create_dir_all(home.repowire_home()).expect("home");
    std::fs::write(
        home.repowire_home().join("config.toml"),
        format!(
            "[files]\nreadable = [\"{}\"]\nmax_bytes = 1024\n",
            shared.display()
        ),
    )
    .expect("config");
    home.install_and_start();
    let reader = home.agent(&tmux, "reader");
    let s = home.agent(&tmux, "shared");
    let p = home.agent(&tmux, "private");
    for x in [&reader, &s, &p] {
        x.hook_done("SessionStart", 1).await;
    }
    let cases = [
        ("shared", "README.md", None),
        ("shared", "../outside.txt", Some("`..`")),
        ("shared", "/etc/passwd", Some("relative")),
        ("shared", "link.txt", Some("not found in the project")),
        ("shared", ".env", Some("dotfile")),
        ("shared", "big.log", Some("too big")),
        ("private", "notes.md", Some("does not share files")),
    ];
    for (i, (peer, path, refusal)) in cases.iter().enumerate() {
        let r = mcp(
            &tmux,
            &reader,
            i + 1,
            "read_peer_file",
            json!({"peer_name": peer, "path": path}),
        )
        .await;
        match refusal {
            None => {
                assert_eq!(r["is_error"], false, "{r}");
                assert_eq!(r["text"], "# shared project\n");
            }
            Some(why) => {
                assert_eq!(r["is_error"], true, "{path}: {r}");
                assert!(
                    r["text"].as_str().unwrap_or("").contains(why),
                    "{path}: {r}"
                );
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_notify_broadcast_and_answer_a_structured_question() {
    let tmux = Tmux::start();
    let home = Home::new(None);
    home.install_and_start();
    let a = home.agent(&tmux, "alpha");
    let b = home.agent(&tmux, "beta");
    a.hook_done("SessionStart", 1).await;
    b.hook_done("SessionStart", 1).await;

    let described = mcp(
        &tmux,
        &a,
        1,
        "set_description",
        json!({"text": "refactoring auth"}),
    )
    .await;
    assert_eq!(described["is_error"], false, "{described}");
    let peers = mcp(&tmux, &b, 1, "list_peers", json!({})).await;
    let alpha = peers["structured"]["peers"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["name"] == "alpha").cloned())
        .expect("alpha listed");
    assert_eq!(alpha["description"], "refactoring auth", "{peers}");

    let notified = mcp(
        &tmux,
        &a,
        2,
        "notify_peer",
        json!({"peer_name": "beta", "message": "build is green"}),
    )
    .await;
    assert!(
        notified["structured"]["correlation_id"]
            .as_str()
            .unwrap_or("")
            .starts_with("notif-"),
        "{notified}"
    );
    // Injected as context into a turn, or handed over at the end of the turn that was running
    // when it arrived (the Stop hook's `continue`): either is a delivery.
    b.wait("the notification", |e| {
        let text = match e["event"].as_str() {
            Some("context") => &e["text"],
            Some("continue") => &e["reason"],
            _ => return false,
        };
        text.as_str().is_some_and(|t| t.contains("build is green"))
    })
    .await;
    b.hook_done("Stop", 2).await;
    let broadcast = mcp(
        &tmux,
        &a,
        3,
        "broadcast",
        json!({"message": "standup in 5"}),
    )
    .await;
    assert_eq!(broadcast["is_error"], false, "{broadcast}");
    b.wait("the broadcast", |e| {
        e["event"] == "context"
            && e["text"]
                .as_str()
                .is_some_and(|t| t.contains("standup in 5"))
    })
    .await;

    // A structured question from another kind of client (a protocol client on the same relay).
    let status = home.json(&["daemon", "status"]);
    let http = status["relay"].as_str().expect("relay url").to_owned();
    let ws = format!("{}/v1/ws", http.replacen("http://", "ws://", 1));
    let key = std::fs::read_to_string(home.repowire_home().join("relay/api-key")).expect("key");
    let mut lead = repowire_e2e::client::TestClient::connect(&http, &ws, key.trim()).await;
    let me = lead.peer("lead", "default").await;
    let id = lead
        .send(repowire_protocol::Body::Ask(repowire_protocol::Ask {
            from: me.peer_id.clone(),
            to: "alpha".into(),
            circle: None,
            text: "Which store for sessions?".into(),
            reply_to: None,
            question: Some(repowire_protocol::Question::new(
                repowire_protocol::QuestionKind::Choice,
                &[("pg", "Postgres"), ("redis", "Redis")],
            )),
        }))
        .await;
    let accepted = match lead.answer(id).await {
        Ok(repowire_protocol::Body::Accepted(a)) => a,
        other => panic!("ask not accepted: {other:?}"),
    };
    let cid = accepted.correlation_id.expect("cid").as_str().to_owned();
    let ctx = a
        .wait("the question", |e| {
            e["event"] == "context" && e["text"].as_str().is_some_and(|t| t.contains(&cid))
        })
        .await;
    assert!(
        ctx["text"]
            .as_str()
            .unwrap_or("")
            .contains("`pg` = Postgres"),
        "{ctx}"
    );
    a.hook_done("Stop", 4).await;

    let wrong = mcp(
        &tmux,
        &a,
        4,
        "answer",
        json!({"correlation_id": cid, "option_id": "mysql"}),
    )
    .await;
    assert_eq!(wrong["is_error"], true, "{wrong}");
    assert!(
        wrong["text"]
            .as_str()
            .unwrap_or("")
            .contains("invalid_answer"),
        "{wrong}"
    );
    let right = mcp(
        &tmux,
        &a,
        5,
        "answer",
        json!({"correlation_id": cid, "option_id": "pg", "text": "we run it already"}),
    )
    .await;
    assert_eq!(right["is_error"], false, "{right}");
    let reply = lead.delivered_to(&me.peer_id).await.message;
    assert_eq!(reply.kind, repowire_protocol::MessageKind::Reply);
    assert_eq!(
        reply.answer.and_then(|v| v.option_id).as_deref(),
        Some("pg")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_asks_a_choice_question_and_wait_on_ack_returns_the_typed_answer() {
    let tmux = Tmux::start();
    let home = Home::new(None);
    home.install_and_start();
    let a = home.agent(&tmux, "alpha");
    let b = home.agent(&tmux, "beta");
    a.hook_done("SessionStart", 1).await;
    b.hook_done("SessionStart", 1).await;

    // Questions an MCP caller may not ask are refused before anything is sent.
    let refused = [
        (
            json!({"kind": "tool_permission", "options": [
                {"id": "allow", "label": "Allow"}, {"id": "deny", "label": "Deny"}]}),
            "PreToolUse hook",
        ),
        (
            json!({"kind": "choice", "options": [{"id": "only", "label": "Only"}]}),
            "at least two options",
        ),
        (json!({"kind": "poll"}), "unknown question kind `poll`"),
    ];
    for (n, (question, why)) in refused.iter().enumerate() {
        let r = mcp(
            &tmux,
            &a,
            n + 1,
            "ask",
            json!({"peer_name": "beta", "query": "refused?", "question": question}),
        )
        .await;
        assert_eq!(r["is_error"], true, "{r}");
        assert!(r["text"].as_str().unwrap_or("").contains(why), "{r}");
    }

    let asked = mcp(
        &tmux,
        &a,
        4,
        "ask",
        json!({"peer_name": "beta", "query": "Which store for sessions?", "question": {
            "kind": "choice",
            "options": [{"id": "pg", "label": "Postgres"}, {"id": "redis", "label": "Redis"}]}}),
    )
    .await;
    assert_eq!(asked["is_error"], false, "{asked}");
    let cid = asked["structured"]["correlation_id"]
        .as_str()
        .expect("cid")
        .to_owned();
    // Beta sees the question with its options and how to answer; nothing refused reached it.
    let ctx = b
        .wait("the question", |e| {
            e["event"] == "context" && e["text"].as_str().is_some_and(|t| t.contains(&cid))
        })
        .await;
    let text = ctx["text"].as_str().unwrap_or("");
    assert!(text.contains("`redis` = Redis"), "{text}");
    assert!(!b.context().contains("refused?"), "{}", b.context());
    b.hook_done("Stop", 1).await;

    // An option that does not exist, and an ack, are refused; the typed answer is taken once.
    let wrong = mcp(
        &tmux,
        &b,
        1,
        "answer",
        json!({"correlation_id": cid, "option_id": "mysql"}),
    )
    .await;
    assert_eq!(wrong["is_error"], true, "{wrong}");
    assert!(
        wrong["text"].as_str().unwrap_or("").contains("pg, redis"),
        "{wrong}"
    );
    let answered = mcp(
        &tmux,
        &b,
        2,
        "answer",
        json!({"correlation_id": cid, "option_id": "redis", "text": "sessions are short-lived"}),
    )
    .await;
    assert_eq!(answered["is_error"], false, "{answered}");
    let again = mcp(
        &tmux,
        &b,
        3,
        "answer",
        json!({"correlation_id": cid, "option_id": "pg"}),
    )
    .await;
    assert_eq!(again["is_error"], true, "{again}");

    // The answer wakes alpha (it is idle). Its woken turn ends before anything is typed into its
    // pane: typed while the wake pastes, the call and the wake's prompt run together (CI,
    // 2026-11-28: send-keys does not count as a person typing, which the wake waits for).
    let handed = |e: &Value| {
        e["event"] == "context"
            && e["text"]
                .as_str()
                .is_some_and(|t| t.contains("sessions are short-lived"))
    };
    a.wait("beta's answer handed to alpha by the wake", handed)
        .await;
    eventually("alpha's woken turn ended", || {
        let events = a.events();
        let at = events.iter().rposition(handed)?;
        events[at..]
            .iter()
            .any(|e| e["event"] == "hook_done" && e["hook"] == "Stop")
            .then_some(())
    })
    .await;

    // Alpha gets the typed answer back from `wait_on_ack`.
    let waited = mcp(
        &tmux,
        &a,
        5,
        "wait_on_ack",
        json!({"correlation_id": cid, "timeout_seconds": 20}),
    )
    .await;
    assert_eq!(waited["is_error"], false, "{waited}");
    let said = waited["text"].as_str().unwrap_or("");
    assert!(said.contains("@beta answered"), "{said}");
    assert!(said.contains("option `redis`"), "{said}");
    assert!(said.contains("sessions are short-lived"), "{said}");
    assert_eq!(
        waited["structured"]["reply"]["answer"]["option_id"], "redis",
        "{waited}"
    );
    home.reaches_state(&cid, "answered").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_asks_typed_questions_and_refuses_bad_ones() {
    let tmux = Tmux::start();
    let home = Home::new(None);
    home.install_and_start();
    let a = home.agent(&tmux, "alpha");
    let b = home.agent(&tmux, "beta");
    a.hook_done("SessionStart", 1).await;
    b.hook_done("SessionStart", 1).await;

    let one = home.repowire(&[
        "peer",
        "ask",
        "beta",
        "Ship?",
        "--choice",
        "yes=Ship it",
        "--from",
        "alpha",
    ]);
    assert!(!one.status.success());
    let err = String::from_utf8_lossy(&one.stderr);
    assert!(err.contains("at least two options"), "{err}");

    let asked = home.json(&[
        "peer",
        "ask",
        "beta",
        "Ship?",
        "--choice",
        "yes=Ship it",
        "--choice",
        "no=Hold",
        "--from",
        "alpha",
    ]);
    let cid = asked["correlation_id"].as_str().expect("cid").to_owned();
    let plain = home.json(&["peer", "ask", "beta", "Lunch?", "--from", "alpha"]);
    let plain_cid = plain["correlation_id"].as_str().expect("cid").to_owned();
    let texted = home.json(&[
        "peer",
        "ask",
        "beta",
        "Release name?",
        "--text-answer",
        "--from",
        "alpha",
    ]);
    let text_cid = texted["correlation_id"].as_str().expect("cid").to_owned();
    for id in [&cid, &plain_cid, &text_cid] {
        home.reaches_state(id, "delivered").await;
    }

    // A plain ask closes only with ack; a text question needs text.
    let on_plain = home.repowire(&[
        "peer", "answer", &plain_cid, "--option", "yes", "--from", "beta",
    ]);
    assert!(!on_plain.status.success());
    let no_text = home.repowire(&["peer", "answer", &text_cid, "--from", "beta"]);
    assert!(!no_text.status.success());
    home.ok(&[
        "peer", "answer", &text_cid, "--text", "Aurora", "--from", "beta",
    ]);
    home.ok(&["peer", "answer", &cid, "--option", "no", "--from", "beta"]);

    home.reaches_state(&cid, "answered").await;

    // The asker's --wait prints the typed answer.
    let waiting = tokio::process::Command::new(bin("repowire"))
        .args([
            "peer",
            "ask",
            "beta",
            "Again?",
            "--choice",
            "a",
            "--choice",
            "b",
            "--from",
            "alpha",
            "--wait",
            "--timeout",
            "20",
        ])
        .envs(home.env())
        .env_remove("TMUX")
        .env_remove("TMUX_PANE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("repowire peer ask --wait");
    let ctx = b
        .wait("the second question", |e| {
            e["event"] == "context" && e["text"].as_str().is_some_and(|t| t.contains("Again?"))
        })
        .await;
    let text = ctx["text"].as_str().unwrap_or("");
    // The id in the header of the message block holding "Again?" (reminders list others).
    let block = &text[..text.find("Again?").expect("question")];
    let at = block.rfind("[ask #").expect("ask id in context") + "[ask #".len();
    let again: String = block[at..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    home.ok(&["peer", "answer", &again, "--option", "b", "--from", "beta"]);
    let out = waiting.wait_with_output().await.expect("waiting ask");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains(&format!("@beta answered {again}: option `b`")),
        "{said}"
    );
    home.reaches_state(&text_cid, "answered").await;
    home.reaches_state(&plain_cid, "delivered").await;
    assert!(!home.states(&plain_cid).contains(&"answered".to_owned()));
    drop(tmux);
}
