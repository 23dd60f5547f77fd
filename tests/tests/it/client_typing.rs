//! A person at the pane (issue 22): a wake never mixes its prompt with a person's keys or
//! draft. The person is real tmux input: a client attached through a pseudo-terminal
//! (`script`), whose keystrokes tmux counts as a person's, or text left in the input box.

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use repowire_e2e::agents::{Agent, Home, Tmux, eventually};

/// A terminal attached to the tmux server, showing one pane; what is written to it arrives
/// as a person's keys.
struct Person {
    child: Child,
}

impl Person {
    fn attach(tmux: &Tmux, pane: &str) -> Self {
        let attach = format!(
            "stty cols 200 rows 50; exec tmux -S '{}' attach -t '{pane}'",
            tmux.socket.display()
        );
        let child = Command::new("script")
            .args(["-q", "-f", "-c", &attach, "/dev/null"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("script (util-linux) runs");
        Self { child }
    }

    fn keys(&mut self, bytes: &[u8]) {
        let stdin = self.child.stdin.as_mut().expect("stdin");
        stdin.write_all(bytes).expect("keys reach the terminal");
        stdin.flush().expect("flush");
    }
}

impl Drop for Person {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn prompts(agent: &Agent) -> Vec<String> {
    agent
        .events()
        .iter()
        .filter(|e| e["event"] == "prompt")
        .map(|e| e["text"].as_str().unwrap_or("").to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_typing_holds_the_wake_and_the_message_goes_with_their_own_prompt() {
    let tmux = Tmux::start();
    let home = Home::new(None);
    home.install_and_start();
    let alpha = home.agent(&tmux, "alpha");
    let beta = home.agent(&tmux, "beta");
    alpha.hook_done("SessionStart", 1).await;
    beta.hook_done("SessionStart", 1).await;
    let beta_session = beta.session_id();

    // A person attaches to beta's pane and keeps typing, a key every 150 ms.
    let person = Arc::new(std::sync::Mutex::new(Person::attach(&tmux, &beta.pane)));
    eventually("the person's client attached", || {
        let clients = tmux.run(&["list-clients", "-F", "#{pane_id}"]);
        clients.lines().any(|p| p == beta.pane).then_some(())
    })
    .await;
    let typing = Arc::new(AtomicBool::new(true));
    let typed = "please look at the flaky test";
    let keys = {
        let (person, typing) = (person.clone(), typing.clone());
        std::thread::spawn(move || {
            for (i, b) in typed.bytes().cycle().enumerate() {
                if !typing.load(Ordering::SeqCst) {
                    return i;
                }
                person.lock().expect("person").keys(&[b]);
                std::thread::sleep(Duration::from_millis(150));
            }
            unreachable!("cycle never ends")
        })
    };

    let cid = alpha.ask(&tmux, 1, "beta", "is the build green?").await;
    // The wake waits while the person types, then gives up: deferred, and says why.
    let wake = eventually("the wake deferred", || {
        home.wake_of(&beta_session)
            .filter(|w| w["outcome"] == "deferred")
    })
    .await;
    let reason = wake["reason"].as_str().unwrap_or("");
    assert!(reason.contains("a person is typing"), "{wake}");
    assert!(reason.contains("next turn"), "{wake}");
    // Nothing of the wake reached the pane or the agent; the sender sees `delivered`.
    assert!(!tmux.capture(&beta.pane).contains("[repowire]"));
    assert!(prompts(&beta).is_empty(), "{:?}", prompts(&beta));
    let states = home.states(&cid);
    assert!(states.contains(&"delivered".to_owned()), "{states:?}");
    assert!(!states.contains(&"injected".to_owned()), "{states:?}");

    // The person finishes and sends their own prompt: the ask goes with it, as context.
    typing.store(false, Ordering::SeqCst);
    let n = keys.join().expect("typist");
    let sent: String = typed.chars().cycle().take(n).collect();
    person.lock().expect("person").keys(b"\r");
    let prompt = beta
        .wait("the person's prompt", |e| e["event"] == "prompt")
        .await;
    // Only the person's keys, none of the wake's: exactly what they typed.
    assert_eq!(prompt["text"], sent.as_str(), "{prompt}");
    beta.wait("the ask in beta's context", |e| {
        e["event"] == "context" && e["text"].as_str().is_some_and(|t| t.contains(&cid))
    })
    .await;
    home.reaches_state(&cid, "injected").await;
    // The sender sees how: with the person's prompt, and why it was not typed.
    let how = home.reason_of(&cid, "injected").unwrap_or_default();
    assert!(
        how.contains("handed over with the next prompt typed in the pane")
            && how.contains("wake deferred: a person is typing"),
        "{how}"
    );
    assert_eq!(prompts(&beta).len(), 1, "{:?}", prompts(&beta));
    drop(tmux);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draft_in_the_input_box_is_never_sent_by_a_wake() {
    let tmux = Tmux::start();
    let home = Home::new(None);
    home.install_and_start();
    let alpha = home.agent(&tmux, "alpha");
    let beta = home.agent(&tmux, "beta");
    alpha.hook_done("SessionStart", 1).await;
    beta.hook_done("SessionStart", 1).await;
    let beta_session = beta.session_id();

    // Beta's box holds a half-written prompt; nobody is typing now. It even reads like the
    // wake's own prompt (as one a wake left in the box would): still a person's, when they send
    // it, so the sender is told how the message waited.
    let draft = "[repowire] half-written thought";
    tmux.type_text(&beta.pane, draft);
    eventually("the draft in the box", || {
        tmux.capture(&beta.pane)
            .contains(&format!("❯ {draft}"))
            .then_some(())
    })
    .await;

    let cid = alpha
        .ask(&tmux, 1, "beta", "can you review my branch?")
        .await;
    // The wake pastes, sees the draft in front of its prompt, takes the prompt back and
    // presses no Enter.
    let first = eventually("the wake deferred", || {
        home.wake_of(&beta_session)
            .filter(|w| w["outcome"] == "deferred")
    })
    .await;
    assert!(
        first["reason"]
            .as_str()
            .is_some_and(|r| r.contains("unsent text in its input box")),
        "{first}"
    );
    let box_line = |screen: String| {
        screen
            .lines()
            .find(|l| l.starts_with('❯'))
            .unwrap_or("")
            .trim_end()
            .to_owned()
    };
    assert_eq!(box_line(tmux.capture(&beta.pane)), format!("❯ {draft}"));
    // It tries again later, and does not paste into the same draft again.
    let again = eventually("the wake tried again", || {
        home.wake_of(&beta_session)
            .filter(|w| w["at_ms"] != first["at_ms"])
    })
    .await;
    assert_eq!(again["outcome"], "deferred", "{again}");
    assert!(
        again["reason"]
            .as_str()
            .is_some_and(|r| r.contains("still has unsent text")),
        "{again}"
    );
    assert_eq!(box_line(tmux.capture(&beta.pane)), format!("❯ {draft}"));
    assert!(prompts(&beta).is_empty(), "{:?}", prompts(&beta));
    assert!(!home.states(&cid).contains(&"injected".to_owned()));

    // The person sends the draft: exactly the draft, with the ask as context.
    tmux.enter(&beta.pane);
    let prompt = beta
        .wait("the person's prompt", |e| e["event"] == "prompt")
        .await;
    assert_eq!(prompt["text"], draft, "{prompt}");
    beta.wait("the ask in beta's context", |e| {
        e["event"] == "context" && e["text"].as_str().is_some_and(|t| t.contains(&cid))
    })
    .await;
    home.reaches_state(&cid, "injected").await;
    let how = home.reason_of(&cid, "injected").unwrap_or_default();
    assert!(how.contains("still has unsent text"), "{how}");
    drop(tmux);
}
