//! Two real agent CLIs (Claude Code, or Codex, Gemini CLI or OpenCode beside it), each on its
//! own machine (HOME and daemon), both on one real relay process, driven offline by
//! [`MockModel`] through one scripted ask/ack conversation. The CLIs come from npm;
//! `scripts/test` and `scripts/bench` install them into a cache and name the binaries in
//! `REPOWIRE_CLAUDE_BIN`, `REPOWIRE_CODEX_BIN`, `REPOWIRE_GEMINI_BIN` and
//! `REPOWIRE_OPENCODE_BIN`; [`crate::offline`] keeps each of them off the network.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::agents::{Home, Tmux};
use crate::mockmodel::{MockModel, Seen, Step};
use crate::offline::{OPENCODE_OFFLINE, prepare_codex, prepare_gemini, prepare_opencode};
use crate::process::{RelayProcess, relay_bin};

/// The Claude Code binary named by `REPOWIRE_CLAUDE_BIN`, or why there is none.
pub fn claude_bin() -> Result<PathBuf, String> {
    let Some(path) = std::env::var_os("REPOWIRE_CLAUDE_BIN") else {
        return Err(
            "REPOWIRE_CLAUDE_BIN is not set (scripts/test sets it when the npm package \
                    @anthropic-ai/claude-code installs)"
                .into(),
        );
    };
    let path = PathBuf::from(path);
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "REPOWIRE_CLAUDE_BIN={} is not a file",
            path.display()
        ))
    }
}

/// The Claude Code binary, or `None` after printing why the test that wanted it is skipped.
pub fn claude_or_skip() -> Option<PathBuf> {
    match claude_bin() {
        Ok(p) => Some(p),
        Err(why) => {
            eprintln!("skipped: the real Claude Code CLI is not available: {why}");
            None
        }
    }
}

/// An agent CLI and its binary.
#[derive(Debug, Clone)]
pub enum Cli {
    /// Claude Code (`REPOWIRE_CLAUDE_BIN`).
    Claude(PathBuf),
    /// Codex (`REPOWIRE_CODEX_BIN`), against the same mock through its Responses API.
    Codex(PathBuf),
    /// Gemini CLI (`REPOWIRE_GEMINI_BIN`), against the same mock through the Gemini API.
    Gemini(PathBuf),
    /// OpenCode (`REPOWIRE_OPENCODE_BIN`), against the same mock through Chat Completions.
    OpenCode(PathBuf),
}

impl Cli {
    /// Whether `screen` shows the CLI's input box, ready for keys.
    fn ready(&self, screen: &str) -> bool {
        match self {
            Cli::Claude(_) => screen.lines().any(|l| l.starts_with('❯')),
            Cli::Codex(_) => screen.lines().any(|l| l.starts_with("› ")),
            Cli::Gemini(_) => screen.contains("Type your message"),
            Cli::OpenCode(_) => screen.contains("ctrl+p commands"),
        }
    }
}

/// The Codex CLI binary (`REPOWIRE_CODEX_BIN`), or `None` after printing why the test is
/// skipped (unless `REPOWIRE_REQUIRE_CODEX` makes its absence a failure).
pub fn codex_or_skip() -> Option<PathBuf> {
    crate::hookrun::cli_from_env(
        "REPOWIRE_CODEX_BIN",
        "REPOWIRE_REQUIRE_CODEX",
        "scripts/install-codex",
    )
}

/// The Gemini CLI binary, as [`codex_or_skip`].
pub fn gemini_or_skip() -> Option<PathBuf> {
    crate::hookrun::cli_from_env(
        "REPOWIRE_GEMINI_BIN",
        "REPOWIRE_REQUIRE_GEMINI",
        "scripts/install-gemini-cli",
    )
}

/// The OpenCode binary, as [`codex_or_skip`].
pub fn opencode_or_skip() -> Option<PathBuf> {
    crate::hookrun::cli_from_env(
        "REPOWIRE_OPENCODE_BIN",
        "REPOWIRE_REQUIRE_OPENCODE",
        "scripts/install-opencode",
    )
}

/// One agent: its machine and the pane its CLI runs in.
pub struct Member {
    /// The CLI.
    pub cli: Cli,
    /// The machine.
    pub home: Home,
    /// The pane.
    pub pane: String,
    /// Its peer name (the project directory's name).
    pub name: String,
}

/// Two Claude Code sessions, `alpha` (asks) and `beta` (acks), on two daemons and one relay.
pub struct ClaudeTeam {
    /// The scripted model both sessions call.
    pub model: MockModel,
    /// The tmux server both panes run in.
    pub tmux: Tmux,
    /// The asker.
    pub alpha: Member,
    /// The answerer.
    pub beta: Member,
    _relay: RelayProcess,
    _data: tempfile::TempDir,
}

/// Marks onboarding done and the project trusted, so the CLI opens straight at its prompt.
fn prepare_claude_json(home: &Home, project: &Path) -> anyhow::Result<()> {
    let config = serde_json::json!({
        "hasCompletedOnboarding": true,
        "theme": "dark",
        "projects": { project.to_string_lossy(): {
            "hasTrustDialogAccepted": true,
            "hasCompletedProjectOnboarding": true
        }}
    });
    std::fs::write(
        home.path().join(".claude.json"),
        serde_json::to_vec_pretty(&config)?,
    )?;
    Ok(())
}

/// Claude Code's manual permission mode in the user's settings (kept beside our hooks). Auto
/// mode is disabled too: with `defaultMode: default` alone, 2.1.331 opens a dialog offering to
/// make auto mode the default, and keys typed into the prompt would answer it.
fn default_permission_mode(home: &Home) -> anyhow::Result<()> {
    let path = home.path().join(".claude/settings.json");
    let mut settings: serde_json::Value = serde_json::from_slice(&std::fs::read(&path)?)?;
    settings["permissions"] =
        serde_json::json!({"defaultMode": "default", "disableAutoMode": "disable"});
    std::fs::write(&path, serde_json::to_vec_pretty(&settings)?)?;
    Ok(())
}

impl ClaudeTeam {
    /// Starts the relay, the model, both machines (`repowire setup`, daemon) and both CLIs,
    /// and waits until each session has registered with its daemon. `program` is the
    /// `repowire` binary to use (default: the one beside this executable). With `allow_tools`
    /// setup allows our MCP tools; without, it leaves permissions alone and the CLIs run in
    /// Claude Code's `default` permission mode, which asks a person before each call.
    pub async fn start(
        claude: &Path,
        program: Option<PathBuf>,
        allow_tools: bool,
    ) -> anyhow::Result<Self> {
        let claude = Cli::Claude(claude.to_owned());
        Self::start_with([claude.clone(), claude], program, allow_tools).await
    }

    /// [`Self::start`] with any CLI for each of `[alpha, beta]`. A Codex session registers at
    /// its first prompt (docs/agents/codex.md), so each Codex member is sent `hello` first, as
    /// a person starting work would.
    pub async fn start_with(
        clis: [Cli; 2],
        program: Option<PathBuf>,
        allow_tools: bool,
    ) -> anyhow::Result<Self> {
        let data = tempfile::tempdir()?;
        let data_dir = data.path().to_string_lossy().into_owned();
        let relay = RelayProcess::start(&relay_bin(), &["--data-dir", &data_dir], &[]).await;
        let key = relay
            .first_key
            .clone()
            .ok_or_else(|| anyhow::anyhow!("the relay bootstrapped no key"))?;
        let model = MockModel::start().await?;
        let tmux = Tmux::start();
        let mut members = Vec::new();
        for (name, cli) in ["alpha", "beta"].into_iter().zip(clis) {
            let mut home = Home::new(Some((relay.http.clone(), key.clone())));
            if let Some(p) = &program {
                home = home.with_program(p.clone());
            }
            let project = home.path().join(name);
            std::fs::create_dir_all(&project)?;
            prepare_claude_json(&home, &project)?;
            match cli {
                Cli::Codex(_) => prepare_codex(&home, &model.url)?,
                Cli::Gemini(_) => prepare_gemini(&home, &project)?,
                Cli::OpenCode(_) => prepare_opencode(&home, &model.url)?,
                Cli::Claude(_) => {}
            }
            if allow_tools {
                home.ok(&["setup", "--non-interactive", "--allow-tools"]);
            } else {
                home.ok(&["setup", "--non-interactive", "--no-allow-tools"]);
                default_permission_mode(&home)?;
            }
            home.ok(&["daemon", "start"]);
            let mut env = home.env();
            env.extend([
                ("ANTHROPIC_BASE_URL", model.url.clone()),
                ("ANTHROPIC_AUTH_TOKEN", "offline-mock".into()),
                ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
                ("DISABLE_AUTOUPDATER", "1".into()),
            ]);
            let command: Vec<String> = match &cli {
                Cli::Claude(bin) => vec![bin.to_string_lossy().into_owned()],
                Cli::Codex(bin) => {
                    env.push(("MOCK_API_KEY", "offline-mock".into()));
                    // The hooks `repowire setup` wrote are trusted in a test by this flag; a
                    // person trusts them once in the TUI.
                    [
                        &bin.to_string_lossy(),
                        "--no-daemon",
                        "--dangerously-bypass-hook-trust",
                        "-s",
                        "workspace-write",
                    ]
                    .map(|s| s.to_string())
                    .to_vec()
                }
                Cli::Gemini(bin) => {
                    env.push(("GEMINI_API_KEY", "offline-mock".into()));
                    env.push(("GOOGLE_GEMINI_BASE_URL", model.url.clone()));
                    vec![bin.to_string_lossy().into_owned()]
                }
                Cli::OpenCode(bin) => {
                    env.extend(OPENCODE_OFFLINE.map(|(k, v)| (k, v.to_owned())));
                    vec![bin.to_string_lossy().into_owned()]
                }
            };
            let pane = tmux.spawn(&project, &env, &command);
            members.push(Member {
                cli,
                home,
                pane,
                name: name.into(),
            });
        }
        let beta = members.pop().ok_or_else(|| anyhow::anyhow!("no beta"))?;
        let alpha = members.pop().ok_or_else(|| anyhow::anyhow!("no alpha"))?;
        let team = Self {
            model,
            tmux,
            alpha,
            beta,
            _relay: relay,
            _data: data,
        };
        // Keys typed before the CLI draws its input box are lost.
        team.until(Duration::from_secs(60), "both input boxes", |t| {
            [&t.alpha, &t.beta]
                .iter()
                .all(|m| m.cli.ready(&t.tmux.capture(&m.pane)))
        })
        .await?;
        for member in [&team.alpha, &team.beta] {
            if let Cli::Codex(_) | Cli::OpenCode(_) = member.cli {
                team.submit(member, "hello").await?;
                // Its answer on the screen: the turn is over (the session is `idle` for a
                // moment between registering and its first prompt, and OpenCode drops keys
                // that arrive while it moves from its start screen to the session's).
                team.until(Duration::from_secs(60), "the answer to hello", |t| {
                    t.tmux.capture(&member.pane).contains("nothing to do")
                })
                .await?;
            }
        }
        // Each session registers at SessionStart; alpha must see beta to ask it.
        team.until(Duration::from_secs(60), "beta online for alpha", |t| {
            let peers = t.alpha.home.json(&["peer", "list"]);
            peers.as_array().is_some_and(|a| {
                a.iter()
                    .any(|p| p["name"] == "beta" && p["status"] == "online")
                    && a.iter().any(|p| p["name"] == "alpha")
            })
        })
        .await?;
        // And be between turns (a Codex member answers its `hello` first).
        team.until(Duration::from_secs(60), "both sessions idle", |t| {
            Self::idle(&t.alpha) && Self::idle(&t.beta)
        })
        .await?;
        Ok(team)
    }

    /// Waits until `ok` holds, or fails with both panes and what the model saw.
    pub async fn until(
        &self,
        within: Duration,
        what: &str,
        mut ok: impl FnMut(&Self) -> bool,
    ) -> anyhow::Result<()> {
        let deadline = Instant::now() + within;
        while !ok(self) {
            if Instant::now() > deadline {
                return Err(self.stuck(what));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(())
    }

    /// A timeout error with both panes and what the model saw.
    fn stuck(&self, what: &str) -> anyhow::Error {
        // The model's steps first and the panes trimmed: a CI log keeps only so much.
        anyhow::anyhow!(
            "timed out waiting for {what}\n--- model saw: {:?}\n--- alpha pane:\n{}\n--- beta pane:\n{}",
            self.model
                .seen()
                .iter()
                .map(|s| &s.step)
                .collect::<Vec<_>>(),
            trimmed(&self.tmux.capture(&self.alpha.pane)),
            trimmed(&self.tmux.capture(&self.beta.pane)),
        )
    }

    /// Submits `text` as a person would in `member`'s CLI: typed into Claude Code; pasted into
    /// Codex and Gemini CLI (typed text followed at once by Enter is taken for a paste whose
    /// Enter is a newline), with Enter once the box shows it — for Gemini, also once its paste
    /// window has passed (docs/agents/gemini-cli.md).
    pub async fn submit(&self, member: &Member, text: &str) -> anyhow::Result<()> {
        match member.cli {
            Cli::Claude(_) => self.tmux.type_text(&member.pane, text),
            Cli::Codex(_) | Cli::Gemini(_) | Cli::OpenCode(_) => {
                self.tmux.paste(&member.pane, text);
                self.until(Duration::from_secs(10), "the prompt in the box", |t| {
                    t.tmux.capture(&member.pane).contains(text)
                })
                .await?;
                // Gemini takes an Enter within its paste window as part of the paste. As the
                // daemon's wake does, the window is counted from when the paste is seen drawn:
                // a loaded machine reads and draws it late, and counted from the paste the
                // Enter landed inside it (the prompt stayed in the box, nothing was sent).
                if matches!(member.cli, Cli::Gemini(_)) {
                    tokio::time::sleep(repowire::runtimes::Runtime::Gemini.paste_settle()).await;
                    return self.enter_until_sent(member, text).await;
                }
            }
        }
        self.tmux.enter(&member.pane);
        Ok(())
    }

    /// Presses Enter in a Gemini pane until the model is called, at most three times, as the
    /// daemon's wake does (a verify window, then Enter again). On a loaded machine Gemini can
    /// still take the first Enter for part of the paste (CI, 2026-11-28: the prompt stayed in
    /// the box and the model saw nothing); an Enter in an empty box or during a turn does
    /// nothing.
    async fn enter_until_sent(&self, member: &Member, text: &str) -> anyhow::Result<()> {
        const VERIFY: Duration = Duration::from_secs(5);
        let before = self.model.requests().len();
        for _ in 0..3 {
            self.tmux.enter(&member.pane);
            // A request that carries the prompt: not the other pane's, nor a background call.
            let sent = self
                .until(VERIFY, "a model request with the prompt", |t| {
                    t.model.requests()[before..]
                        .iter()
                        .any(|r| r.to_string().contains(text))
                })
                .await;
            if sent.is_ok() {
                return Ok(());
            }
        }
        Err(self.stuck("a model request after three Enters"))
    }

    /// Whether `member`'s daemon reports its session between turns.
    fn idle(member: &Member) -> bool {
        member
            .home
            .json(&["peer", "list"])
            .as_array()
            .is_some_and(|a| {
                a.iter()
                    .any(|p| p["name"] == member.name.as_str() && p["turn_state"] == "idle")
            })
    }

    /// Types `BENCH-START beta TURNS` into alpha's prompt and waits until the conversation
    /// has finished; returns what the model saw.
    pub async fn converse(&self, turns: u32, within: Duration) -> anyhow::Result<Vec<Seen>> {
        // Alpha can finish (it saw the last reply) before beta's model has seen its last `ack`
        // return: wait for both, or a busy machine reads the conversation one step short.
        self.converse_until(turns, within, "the conversation to finish", |seen| {
            seen.iter().any(|s| s.step == Step::Finished)
                && seen.iter().any(|s| s.step == Step::AckReturned(turns))
        })
        .await
    }

    /// Types `BENCH-START beta TURNS` into alpha's prompt and waits until `done` holds for what
    /// the model saw. A session whose MCP server was not connected yet when its turn came (it
    /// connects in the background) is prompted again once that turn has ended.
    pub async fn converse_until(
        &self,
        turns: u32,
        within: Duration,
        what: &str,
        done: impl Fn(&[Seen]) -> bool,
    ) -> anyhow::Result<Vec<Seen>> {
        let start = format!("BENCH-START {} {turns}", self.beta.name);
        self.run_until(&start, within, what, done).await
    }

    /// Submits `start` to alpha and waits until `done` holds of what the model saw; prompts
    /// again when our MCP server's tools were not offered yet.
    pub async fn run_until(
        &self,
        start: &str,
        within: Duration,
        what: &str,
        done: impl Fn(&[Seen]) -> bool,
    ) -> anyhow::Result<Vec<Seen>> {
        self.submit(&self.alpha, start).await?;
        let mut not_ready = 0;
        let deadline = Instant::now() + within;
        loop {
            let seen = self.model.seen();
            if done(&seen) {
                return Ok(seen);
            }
            let now_not_ready = seen.iter().filter(|s| s.step == Step::NotReady).count();
            if now_not_ready > not_ready {
                not_ready = now_not_ready;
                anyhow::ensure!(not_ready < 20, "our MCP server never connected");
                if seen.iter().any(|s| s.step == Step::AskCalled(1)) {
                    // Beta's tools were missing when the ask came: prompt it again once its
                    // turn ended; the open-ask reminder of that prompt holds the ask.
                    self.until(Duration::from_secs(30), "beta idle", |t| {
                        Self::idle(&t.beta)
                    })
                    .await?;
                    self.submit(&self.beta, "BENCH-RETRY").await?;
                } else {
                    self.until(Duration::from_secs(30), "alpha idle", |t| {
                        Self::idle(&t.alpha)
                    })
                    .await?;
                    self.submit(&self.alpha, start).await?;
                }
            }
            if Instant::now() > deadline {
                return Err(self.stuck(what));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl ClaudeTeam {
    /// Checks that every ask of a finished `turns`-turn conversation was acked by the model and
    /// that the asker's daemon reports each one `injected` into the answerer and `acked`;
    /// returns the ask ids.
    pub fn asks_closed(&self, seen: &[Seen], turns: u32) -> Vec<String> {
        let acked: Vec<String> = seen
            .iter()
            .filter(|s| matches!(s.step, Step::AckCalled(_)))
            .map(|s| s.detail.clone())
            .collect();
        assert_eq!(acked.len(), turns as usize, "{acked:?}");
        for id in &acked {
            let states = self.alpha.home.states(id);
            assert!(
                states.iter().any(|s| s == "injected") && states.iter().any(|s| s == "acked"),
                "{id}: {states:?}"
            );
        }
        acked
    }
}

/// The checks the real-CLI tests of every runtime share.
impl ClaudeTeam {
    /// The backend beta registered with, as alpha's daemon lists it.
    pub fn beta_backend(&self) -> String {
        let peers = self.alpha.home.json(&["peer", "list"]);
        peers
            .as_array()
            .and_then(|a| a.iter().find(|p| p["name"] == "beta"))
            .and_then(|p| p["backend"].as_str())
            .unwrap_or_default()
            .to_owned()
    }

    /// A conversation of `turns` asks from alpha to beta, within two minutes: each hop seen
    /// (`hops`) and each ask acked and closed (`asks_closed`). What the model saw, and the
    /// asks' ids.
    pub async fn asks_answered(&self, turns: u32) -> anyhow::Result<(Vec<Seen>, Vec<String>)> {
        let seen = self.converse(turns, Duration::from_secs(120)).await?;
        hops(&seen, turns)?;
        let asks = self.asks_closed(&seen, turns);
        Ok((seen, asks))
    }

    /// Checks that beta was woken, and that each wake was confirmed by its own hook.
    pub fn beta_woken_every_time(&self) {
        let status = self.beta.home.json(&["daemon", "status"]);
        let wakes = status["wakes"].as_object().cloned().unwrap_or_default();
        assert!(
            !wakes.is_empty() && wakes.values().all(|w| w["outcome"] == "woken"),
            "{status}"
        );
    }
}

/// Per-hop delays of one conversation, in milliseconds.
#[derive(Debug, Default)]
pub struct Hops {
    /// Tool result seen by the model (the `ask`/`ack` call has returned) → the other agent's
    /// first model request holding the message. One per hop, both directions.
    pub from_return: Vec<f64>,
    /// The model's tool call sent → the other agent's model request: also counts the CLI
    /// running the tool and our MCP server's round trip to its daemon.
    pub from_call: Vec<f64>,
}

fn ms(later: Instant, earlier: Instant) -> f64 {
    if later >= earlier {
        later.duration_since(earlier).as_secs_f64() * 1000.0
    } else {
        -(earlier.duration_since(later).as_secs_f64() * 1000.0)
    }
}

/// The hops of a finished `turns`-turn conversation; an error names a missing step.
pub fn hops(seen: &[Seen], turns: u32) -> anyhow::Result<Hops> {
    let first = |step: Step| {
        seen.iter()
            .find(|s| s.step == step)
            .map(|s| s.at)
            .ok_or_else(|| anyhow::anyhow!("the model never saw {step:?}"))
    };
    let mut out = Hops::default();
    for n in 1..=turns {
        let asked = first(Step::AskSeen(n))?;
        out.from_return
            .push(ms(asked, first(Step::AskReturned(n))?));
        out.from_call.push(ms(asked, first(Step::AskCalled(n))?));
        let replied = first(Step::ReplySeen(n))?;
        out.from_return
            .push(ms(replied, first(Step::AckReturned(n))?));
        out.from_call.push(ms(replied, first(Step::AckCalled(n))?));
    }
    Ok(out)
}

/// The `p`-th percentile (0–100) of `values`, nearest rank.
pub fn percentile(values: &[f64], p: f64) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}

/// A pane's capture without trailing blanks on each line or blank lines at its end.
fn trimmed(screen: &str) -> String {
    let lines: Vec<&str> = screen.lines().map(str::trim_end).collect();
    let end = lines
        .iter()
        .rposition(|l| !l.is_empty())
        .map_or(0, |i| i + 1);
    lines[..end].join("\n")
}
