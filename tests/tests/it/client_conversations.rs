//! Direct conversations end to end (issue 34): two machines (two daemons), one relay process,
//! real tmux, a Claude Code stand-in on one machine and a Codex stand-in on the other, each
//! replying with numbered text so every turn can be told apart.

use std::collections::BTreeMap;

use repowire_e2e::agents::{Agent, Home, Tmux, eventually};
use repowire_e2e::process::{RelayProcess, relay_bin};
use serde_json::Value;

/// `(seq, speaker, first line of the body)` of every conversation turn in `context`, in the
/// order it was handed over: the `[name] (n):` header and the quoted line after it.
fn turns_in(context: &str) -> Vec<(u64, String, String)> {
    let lines: Vec<&str> = context.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(rest) = line.strip_prefix('[') else {
            continue;
        };
        let Some((name, tail)) = rest.split_once("] (") else {
            continue;
        };
        let Some(seq) = tail.strip_suffix("):").and_then(|n| n.parse().ok()) else {
            continue;
        };
        // The header, a blank line, then the body quoted line by line.
        let body = lines
            .get(i + 2)
            .and_then(|l| l.strip_prefix("> "))
            .unwrap_or("")
            .to_owned();
        out.push((seq, name.to_owned(), body));
    }
    out
}

/// Every context the agent's hooks handed over, joined, each once (`Agent::context` also
/// holds a Stop continuation's reason, the same text again).
fn handed(agent: &Agent) -> String {
    agent
        .events()
        .iter()
        .filter(|e| e["event"] == "context")
        .filter_map(|e| e["text"].as_str().map(str::to_owned))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The texts the agent's Stop hooks reported (its replies), in order.
fn replies(agent: &Agent) -> Vec<String> {
    agent
        .events()
        .iter()
        .filter(|e| e["event"] == "reply")
        .filter_map(|e| e["text"].as_str().map(str::to_owned))
        .collect()
}

/// One relay process (embedded storage) and a machine (a home with its daemon running) per
/// entry of `machines`, each prepared by its function before setup, sharing one tmux server.
struct Machines {
    // Dropped in this order: the daemons' homes, tmux, the relay, then its data.
    homes: Vec<Home>,
    tmux: Tmux,
    _relay: RelayProcess,
    _data: tempfile::TempDir,
}

impl Machines {
    async fn start(machines: &[fn(&Home)]) -> Self {
        let data = tempfile::tempdir().expect("data");
        let dir = data.path().to_str().expect("utf8").to_owned();
        let relay = RelayProcess::start(&relay_bin(), &["--data-dir", &dir], &[]).await;
        let key = relay.first_key.clone().expect("key");
        let homes = machines
            .iter()
            .map(|prepare| {
                let home = Home::new(Some((relay.http.clone(), key.clone())));
                prepare(&home);
                home.install_and_start();
                home
            })
            .collect();
        Self {
            homes,
            tmux: Tmux::start(),
            _relay: relay,
            _data: data,
        }
    }
}

/// A machine with nothing more than setup does.
fn plain(_: &Home) {}

/// Opens a conversation from the CLI as `home`'s session `from` with `peers`; its id.
fn open(home: &Home, from: &str, peers: &[&str], text: &str) -> String {
    let mut args = vec!["conversation", "start"];
    args.extend_from_slice(peers);
    args.extend_from_slice(&["-m", text, "--from", from]);
    home.json(&args)["conversation_id"]
        .as_str()
        .expect("a conversation id")
        .to_owned()
}

/// The one conversation `home`'s session `from` takes part in, as `conversation list` shows it.
fn conversation(home: &Home, from: &str) -> Option<Value> {
    let list = home.json(&["conversation", "list", "--all", "--from", from]);
    list.as_array().and_then(|l| l.first().cloned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claude_code_and_a_codex_session_converse_across_two_machines_until_the_loop_guard() {
    let m = Machines::start(&[plain, |desk| {
        std::fs::create_dir_all(desk.path().join(".codex")).expect("~/.codex");
    }])
    .await;
    let (tmux, [laptop, desk]) = (&m.tmux, &m.homes[..]) else {
        unreachable!()
    };

    let alpha = laptop.agent_with(tmux, "alpha", &["--reply", "alpha says {n}"]);
    let beta = desk.agent_with(
        tmux,
        "beta",
        &["--runtime", "codex", "--reply", "beta says {n}"],
    );
    alpha.hook_done("SessionStart", 1).await;
    // Codex registers at its first prompt; that turn is before the conversation.
    beta.wait("the composer drawn", |e| e["event"] == "start")
        .await;
    beta.submit(tmux, "hello");
    beta.hook_done("Stop", 1).await;

    alpha.submit(
        tmux,
        r#"/mcp start_conversation {"peer_names": ["beta"], "message": "let us agree on the API"}"#,
    );
    let opened = alpha
        .wait("the tool's answer", |e| e["event"] == "mcp")
        .await;
    assert_eq!(opened["is_error"], false, "{opened}");
    let id = opened["structured"]["conversation_id"]
        .as_str()
        .expect("a conversation id")
        .to_owned();
    assert!(id.starts_with("cv-"), "{id}");

    // Nobody prompts either agent from now on: each is woken by the other's turns until the
    // loop guard (20 turns without a person's prompt) pauses the conversation.
    for (home, from) in [(laptop, "alpha"), (desk, "beta")] {
        // The speaker the guard refused learns of the pause from the refusal (its daemon then
        // knows seq 21) before the notice (22) reaches it: wait for the notice.
        let c = eventually(&format!("{from}'s daemon sees the pause notice"), || {
            conversation(home, from).filter(|c| c["state"] == "paused" && c["last_seq"] == 22)
        })
        .await;
        assert_eq!(c["conversation_id"], id.as_str());
        let names: Vec<&str> = c["participants"]
            .as_array()
            .expect("participants")
            .iter()
            .filter_map(|p| p["name"].as_str())
            .collect();
        assert_eq!(names, ["alpha", "beta"], "the opener first");
    }

    // What each side was handed: the other's turns, each exactly once, in the conversation's
    // order, attributed, and each exactly the text one of the other's Stop hooks reported.
    let alpha_got = turns_in(&alpha.context());
    let beta_got = turns_in(&beta.context());
    assert_eq!(
        beta_got.first().map(|t| t.0),
        Some(1),
        "beta got the opening"
    );
    assert_eq!(
        beta_got[0],
        (1, "alpha".to_owned(), "let us agree on the API".to_owned())
    );
    let beta_turns: Vec<(u64, String)> = (0..10)
        .map(|k| (2 + 2 * k, format!("beta says {}", k + 2)))
        .collect();
    let alpha_turns: Vec<(u64, String)> = (0..10)
        .map(|k| (3 + 2 * k, format!("alpha says {}", k + 1)))
        .collect();
    let strip = |got: &[(u64, String, String)], who: &str| -> Vec<(u64, String)> {
        got.iter()
            .filter(|(seq, _, _)| *seq > 1)
            .map(|(seq, name, body)| {
                assert_eq!(name, who, "turn {seq} attributed to its speaker");
                (*seq, body.clone())
            })
            .collect()
    };
    assert_eq!(strip(&alpha_got, "beta"), beta_turns, "alpha's view");
    assert_eq!(strip(&beta_got, "alpha"), alpha_turns, "beta's view");
    // Relayed texts are the Stop hooks' own: beta's first reply ("beta says 1") answered the
    // person's "hello" before the conversation, alpha's "called" ended the turn that opened it.
    let said_by_beta = replies(&beta);
    assert_eq!(said_by_beta[0], "beta says 1");
    for (_, text) in &beta_turns {
        assert!(said_by_beta.contains(text), "{text} was never said");
    }
    assert!(replies(&alpha).contains(&"called".to_owned()));
    let mut seen = BTreeMap::new();
    for (seq, _, _) in alpha_got.iter().chain(&beta_got) {
        *seen.entry(*seq).or_insert(0) += 1;
    }
    assert!(
        seen.values().all(|n| *n == 1),
        "a seq handed over twice: {seen:?}"
    );
    // Nothing came back to its speaker.
    assert!(
        !alpha.context().contains("alpha says"),
        "alpha's words echoed back"
    );
    assert!(
        !beta.context().contains("beta says"),
        "beta's words echoed back"
    );
    assert!(
        beta_got.iter().all(|(_, _, body)| body != "called"),
        "the opener's own turn was relayed"
    );

    // The pause notice waits for a person: alpha was not woken for it, so the prompt a person
    // types now hands it over, and that turn (a person's) resumes the conversation.
    let prompts_before = alpha
        .events()
        .iter()
        .filter(|e| e["event"] == "prompt")
        .count();
    alpha.submit(tmux, "please go on");
    let context = alpha
        .wait_nth(prompts_before + 1, "the person's prompt", |e| {
            e["event"] == "prompt"
        })
        .await;
    assert_eq!(context["text"], "please go on", "no wake came before it");
    eventually("the notice handed over with the person's prompt", || {
        alpha
            .context()
            .contains(&format!(
                "--- conversation #{id} with @beta: paused (22) ---"
            ))
            .then_some(())
    })
    .await;
    eventually("beta gets alpha's next turn, a person's", || {
        turns_in(&beta.context())
            .into_iter()
            .find(|(seq, _, _)| *seq == 23)
    })
    .await;
    let resumed = turns_in(&beta.context())
        .into_iter()
        .find(|(seq, _, _)| *seq == 23)
        .expect("turn 23");
    assert_eq!(
        resumed,
        (23, "alpha".to_owned(), "alpha says 11".to_owned()),
        "the refused turn took no seq, the notice took 22"
    );
}

/// Ending: a person ends a conversation from the CLI as one participant, and a participant's
/// session ends (`repowire session end`) in another. Each time the other side's daemon learns it
/// from the relay's notice (its agent gets it at its next turn), and no turn after the end
/// reaches anyone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_ends_from_the_cli_and_when_a_participants_session_ends() {
    let m = Machines::start(&[plain, plain]).await;
    let (tmux, [laptop, desk]) = (&m.tmux, &m.homes[..]) else {
        unreachable!()
    };
    let alpha = laptop.agent_with(tmux, "alpha", &["--reply", "alpha says {n}"]);
    let beta = desk.agent_with(tmux, "beta", &["--reply", "beta says {n}"]);
    alpha.hook_done("SessionStart", 1).await;
    beta.hook_done("SessionStart", 1).await;

    // 1. A person on the laptop opens one as alpha and, once beta has answered, ends it.
    let first = open(laptop, "alpha", &["beta"], "short one");
    eventually("beta's first turn reaches alpha", || {
        turns_in(&alpha.context())
            .into_iter()
            .find(|(seq, _, _)| *seq == 2)
    })
    .await;
    let ended = laptop.json(&[
        "conversation",
        "end",
        &first,
        "--reason",
        "enough for today",
        "--from",
        "alpha",
    ]);
    assert_eq!(ended["state"], "accepted", "{ended}");
    for (home, from) in [(laptop, "alpha"), (desk, "beta")] {
        let c = eventually(&format!("{from}'s daemon sees the end"), || {
            conversation(home, from).filter(|c| c["state"] == "ended")
        })
        .await;
        assert_eq!(c["conversation_id"], first.as_str());
    }
    let end_seq = conversation(desk, "beta").expect("beta's")["last_seq"]
        .as_u64()
        .expect("seq");
    // beta's agent gets the notice at its next turn: handed over at the Stop of a turn that was
    // under way, or waiting unread (it is not woken for it).
    let notice = "@alpha ended the conversation: enough for today";
    let header = format!("--- conversation #{first} with @alpha: ended ({end_seq}) ---");
    eventually("the end notice handed over or waiting for beta", || {
        let inbox = desk.json(&["inbox", "--from", "beta", "--peek"]);
        let waiting = inbox["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|m| m["unread"] == true && m["text"] == notice);
        (waiting || beta.context().contains(&header)).then_some(())
    })
    .await;
    // Turns that were under way are refused by the relay; none after the end was handed over.
    for (who, agent) in [("alpha", &alpha), ("beta", &beta)] {
        let late: Vec<_> = turns_in(&agent.context())
            .into_iter()
            .filter(|(seq, _, _)| *seq > end_seq)
            .collect();
        assert!(late.is_empty(), "{who} got turns after the end: {late:?}");
    }

    // 2. beta opens another; beta's session is ended on the desk: alpha learns it.
    let second = open(desk, "beta", &["alpha"], "one more");
    eventually("alpha takes part", || {
        conversation(laptop, "alpha").filter(|c| c["conversation_id"] == second.as_str())
    })
    .await;
    desk.ok(&["session", "end", "beta"]);
    let c = eventually("alpha's daemon sees the second end", || {
        conversation(laptop, "alpha")
            .filter(|c| c["conversation_id"] == second.as_str() && c["state"] == "ended")
    })
    .await;
    assert_eq!(c["reason"], "the session of @beta ended", "{c}");
}

/// A turn that answered something else is not the conversation's: alpha, in a conversation with
/// beta, is woken by an unrelated notification and answers it; that answer is not relayed.
/// Only what alpha says after being handed one of the conversation's messages is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_to_an_unrelated_message_is_not_relayed_into_a_conversation() {
    let m = Machines::start(&[plain, plain]).await;
    let (tmux, [laptop, desk]) = (&m.tmux, &m.homes[..]) else {
        unreachable!()
    };
    let alpha = laptop.agent_with(tmux, "alpha", &["--reply", "alpha says {n}"]);
    let beta = desk.agent_with(tmux, "beta", &["--reply", "beta says {n}"]);
    alpha.hook_done("SessionStart", 1).await;
    beta.hook_done("SessionStart", 1).await;
    // beta is busy: the opening waits for the end of its turn.
    beta.submit(tmux, "/busy");
    beta.wait("busy", |e| e["event"] == "busy").await;
    laptop.json(&[
        "conversation",
        "start",
        "beta",
        "-m",
        "when you are free",
        "--from",
        "alpha",
    ]);
    // A person on the laptop notifies alpha about something else: alpha is woken and answers.
    laptop.ok(&["peer", "notify", "alpha", "unrelated: how is the build?"]);
    alpha.hook_done("Stop", 1).await;
    assert_eq!(replies(&alpha), ["alpha says 1"]);
    beta.release();
    let first = eventually("alpha's first relayed turn reaches beta", || {
        turns_in(&beta.context())
            .into_iter()
            .find(|(seq, _, _)| *seq > 1)
    })
    .await;
    assert_eq!(
        first,
        (3, "alpha".to_owned(), "alpha says 2".to_owned()),
        "alpha's first turn in it answers beta's turn 2"
    );
    let got = turns_in(&beta.context());
    assert_eq!(got[0], (1, "alpha".into(), "when you are free".into()));
    assert!(
        got.iter().all(|(_, _, body)| body != "alpha says 1"),
        "the answer to the notification was relayed: {got:?}"
    );
    desk.ok(&["session", "end", "beta"]);
}

/// Three participants on three machines, and one daemon restarted mid-conversation. Alpha opens
/// a conversation with beta and gamma; nobody prompts them, so they talk until the loop guard
/// pauses it (20 turns without a person's prompt; then a notice). Gamma's daemon is then
/// stopped; a person's prompt to alpha resumes the conversation and alpha and beta talk on until
/// the guard pauses it again, their turns piling up in gamma's inbox at the relay. Gamma's daemon
/// starts again and loses nothing: every participant was handed every turn of the others, once
/// each, in the conversation's order, never its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_participants_converse_and_a_restarted_daemon_loses_nothing() {
    let m = Machines::start(&[plain, plain, plain]).await;
    let (tmux, [laptop, desk, attic]) = (&m.tmux, &m.homes[..]) else {
        unreachable!()
    };
    let alpha = laptop.agent_with(tmux, "alpha", &["--reply", "alpha says {n}"]);
    let beta = desk.agent_with(tmux, "beta", &["--reply", "beta says {n}"]);
    let gamma = attic.agent_with(tmux, "gamma", &["--reply", "gamma says {n}"]);
    for agent in [&alpha, &beta, &gamma] {
        agent.hook_done("SessionStart", 1).await;
    }
    let machines = [(laptop, "alpha"), (desk, "beta"), (attic, "gamma")];
    let agents = [("alpha", &alpha), ("beta", &beta), ("gamma", &gamma)];
    // The seq a machine's daemon last saw the conversation paused at, once paused after `after`.
    let paused_after = |(home, from): &(&Home, &str), after: u64| {
        conversation(home, from)
            .filter(|c| c["state"] == "paused")
            .and_then(|c| c["last_seq"].as_u64())
            .filter(|seq| *seq > after)
    };
    // Whether every turn up to `upto` (but the notices) was handed to each of `to` that did not
    // say it.
    let handed_all = |upto: u64, notices: &[u64], to: &[&str]| {
        let views: Vec<Vec<(u64, String, String)>> =
            agents.iter().map(|(_, a)| turns_in(&handed(a))).collect();
        let speakers: BTreeMap<u64, String> = views
            .iter()
            .flatten()
            .map(|(seq, who, _)| (*seq, who.clone()))
            .collect();
        (2..=upto)
            .filter(|s| !notices.contains(s))
            .all(|s| {
                speakers.get(&s).is_some_and(|who| {
                    agents
                        .iter()
                        .zip(&views)
                        .filter(|((me, _), _)| to.contains(me) && me != who)
                        .all(|(_, view)| view.iter().any(|(seq, _, _)| *seq == s))
                })
            })
            .then_some(())
    };

    let id = open(laptop, "alpha", &["beta", "gamma"], "the three of us");
    // A speaker refused by the guard learns of the pause before the notice reaches it: wait
    // until every daemon has the notice.
    let p1 = eventually("every daemon sees the first pause", || {
        let seqs: Vec<u64> = machines
            .iter()
            .map(|m| paused_after(m, 0))
            .collect::<Option<_>>()?;
        seqs.iter().all(|s| *s == seqs[0]).then(|| seqs[0])
    })
    .await;
    for (home, from) in &machines {
        let c = conversation(home, from).expect("cached");
        assert_eq!(c["conversation_id"], id.as_str());
        let names: Vec<&str> = c["participants"]
            .as_array()
            .expect("participants")
            .iter()
            .filter_map(|p| p["name"].as_str())
            .collect();
        assert_eq!(names, ["alpha", "beta", "gamma"], "the opener first");
    }
    assert!(p1 >= 22, "at least 20 turns before the guard: {p1}");
    eventually("every turn of the first part handed over", || {
        handed_all(p1 - 1, &[], &["alpha", "beta", "gamma"])
    })
    .await;
    eventually("gamma idle", || {
        attic
            .json(&["peer", "list"])
            .as_array()
            .into_iter()
            .flatten()
            .any(|p| p["name"] == "gamma" && p["turn_state"] == "idle")
            .then_some(())
    })
    .await;
    let stops = |a: &Agent| {
        a.events()
            .iter()
            .filter(|e| e["event"] == "hook_done" && e["hook"] == "Stop")
            .count()
    };
    // The daemon calls gamma idle when its Stop hook ran; the stand-in records the hook done
    // once the hook process has exited: wait for that too.
    let gamma_stops = eventually("gamma's last Stop hook done", || {
        let events = gamma.events();
        let begun = events
            .iter()
            .filter(|e| e["event"] == "hook" && e["hook"] == "Stop")
            .count();
        (begun == stops(&gamma)).then_some(begun)
    })
    .await;
    attic.ok(&["daemon", "stop"]);

    alpha.submit(tmux, "a person: go on, you two");
    let p2 = eventually("alpha's and beta's daemons see the second pause", || {
        let seqs: Vec<u64> = machines[..2]
            .iter()
            .map(|m| paused_after(m, p1))
            .collect::<Option<_>>()?;
        (seqs[0] == seqs[1]).then(|| seqs[0])
    })
    .await;
    assert!(p2 >= p1 + 22, "a person's turn, then 20 more: {p1} {p2}");
    eventually("alpha and beta handed each other's turns", || {
        handed_all(p2 - 1, &[p1], &["alpha", "beta"])
    })
    .await;
    assert_eq!(stops(&gamma), gamma_stops, "gamma had no turn meanwhile");

    attic.ok(&["daemon", "start"]);
    eventually("gamma's daemon sees the second pause", || {
        paused_after(&machines[2], p1).filter(|p| *p == p2)
    })
    .await;
    eventually("every turn handed to gamma after the restart", || {
        handed_all(p2 - 1, &[p1], &["alpha", "beta", "gamma"])
    })
    .await;
    for (me, agent) in &agents {
        let view = turns_in(&handed(agent));
        let seqs: Vec<u64> = view.iter().map(|(seq, _, _)| *seq).collect();
        assert!(
            seqs.windows(2).all(|w| w[0] < w[1]),
            "{me}: not once each in order: {seqs:?}"
        );
        for (seq, who, body) in view.iter().filter(|(seq, _, _)| *seq > 1) {
            assert_ne!(who, me, "{me} was handed its own turn {seq}");
            let (_, speaker) = agents
                .iter()
                .find(|(n, _)| n == who)
                .expect("a participant");
            assert!(
                replies(speaker).contains(body),
                "{me}: turn {seq} of {who} ({body}) was never said by {who}"
            );
        }
    }
    let resumed = turns_in(&handed(&beta))
        .into_iter()
        .find(|(seq, _, _)| *seq == p1 + 1)
        .expect("the turn after the first pause");
    assert_eq!(resumed.1, "alpha", "the person's prompt resumed it");

    // `conversation show`: what gamma's machine received, in the conversation's order (both
    // notices too), and what gamma said in it.
    let shown = attic.json(&["conversation", "show", &id, "--from", "gamma"]);
    assert_eq!(shown["conversation"]["state"], "paused", "{shown}");
    let lines = shown["messages"].as_array().expect("messages");
    let received: Vec<u64> = lines.iter().filter_map(|l| l["seq"].as_u64()).collect();
    let mut expected: Vec<u64> = turns_in(&handed(&gamma))
        .iter()
        .map(|(seq, _, _)| *seq)
        .chain([p1, p2])
        .collect();
    expected.sort();
    assert_eq!(
        received, expected,
        "every message gamma received, once, in order"
    );
    let said = replies(&gamma);
    let sent: Vec<&str> = lines
        .iter()
        .filter(|l| l["event"] == "sent")
        .filter_map(|l| l["text"].as_str())
        .collect();
    assert!(!sent.is_empty(), "{shown}");
    assert!(sent.iter().all(|t| said.iter().any(|r| r == t)), "{sent:?}");
    let text = attic.ok(&["conversation", "show", &id, "--from", "gamma"]);
    assert!(text.contains("#1 open @alpha\n  the three of us"), "{text}");
    // The opener's own opening comes first in its view, then what it sent and received.
    let opener = laptop.json(&["conversation", "show", &id, "--from", "alpha"]);
    let first = &opener["messages"][0];
    assert_eq!(
        (&first["seq"], &first["event"], &first["text"]),
        (
            &Value::from(1),
            &Value::from("open"),
            &Value::from("the three of us")
        ),
        "{opener}"
    );
    let unknown = attic.repowire(&[
        "conversation",
        "show",
        "cv-0000000000000000",
        "--from",
        "gamma",
    ]);
    assert!(!unknown.status.success());
    assert!(
        String::from_utf8_lossy(&unknown.stderr).contains("no conversation"),
        "{unknown:?}"
    );
}

/// Two agents that echo what they hear (issue 34: "no feedback loop"): each repeats the last
/// line it was handed. Only what an agent says is relayed, never what the daemon handed it, so
/// every relayed turn is the opening's words exactly (no header, quote or notice grows into
/// it), each seq reaches the other side once, and the loop guard ends the echo.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_agents_that_echo_each_other_relay_only_their_own_words_until_the_guard() {
    let m = Machines::start(&[plain, plain]).await;
    let (tmux, [laptop, desk]) = (&m.tmux, &m.homes[..]) else {
        unreachable!()
    };
    let alpha = laptop.agent_with(tmux, "alpha", &["--reply", "{heard}"]);
    let beta = desk.agent_with(tmux, "beta", &["--reply", "{heard}"]);
    alpha.hook_done("SessionStart", 1).await;
    beta.hook_done("SessionStart", 1).await;
    let id = open(laptop, "alpha", &["beta"], "echo me");
    let paused = eventually("the guard pauses the echo", || {
        [(laptop, "alpha"), (desk, "beta")]
            .iter()
            .map(|(home, from)| {
                conversation(home, from)
                    .filter(|c| c["state"] == "paused")
                    .and_then(|c| c["last_seq"].as_u64())
            })
            .collect::<Option<Vec<u64>>>()
            .filter(|seqs| seqs[0] == seqs[1])
    })
    .await;
    let notice = paused[0];
    assert!(notice >= 22, "at least 20 echoes: {notice}");
    let views = eventually("every echo handed over", || {
        let views = [turns_in(&handed(&alpha)), turns_in(&handed(&beta))];
        let seqs = views.iter().map(Vec::len).sum::<usize>();
        // The opening to beta, then every turn before the notice to the other side.
        (seqs as u64 == notice - 1).then_some(views)
    })
    .await;
    for (me, view) in ["alpha", "beta"].iter().zip(&views) {
        let seqs: Vec<u64> = view.iter().map(|(seq, _, _)| *seq).collect();
        assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{me}: {seqs:?}");
        for (seq, who, body) in view {
            assert_ne!(who, me, "{me} was handed its own echo {seq}");
            assert_eq!(
                body, "echo me",
                "{me}: turn {seq} is not the opening's words"
            );
        }
    }
    // Each side's whole handed-over text holds the words once per turn it was handed: nothing
    // of the daemon's own text was sent back and quoted again.
    for (me, agent, view) in [("alpha", &alpha, &views[0]), ("beta", &beta, &views[1])] {
        let text = handed(agent);
        assert_eq!(
            text.matches("> echo me").count(),
            view.len(),
            "{me}: {text}"
        );
        assert!(
            !text.contains("> > "),
            "{me}: a quote was quoted again: {text}"
        );
    }
    assert_eq!(
        conversation(laptop, "alpha").expect("alpha's")["conversation_id"],
        id.as_str()
    );
}
