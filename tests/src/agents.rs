//! Harness for client end-to-end tests: a private tmux server, stand-in agents in its panes,
//! per-user homes with their own `repowire` daemon, and transcript polling.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// How long any one expected event may take (tmux, hooks and the relay on a loaded CI box).
pub const AGENT_WAIT: Duration = Duration::from_secs(30);

/// A binary beside the running test executable (`target/<profile>/NAME`).
pub fn bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let mut dir = exe.parent().expect("exe dir").to_path_buf();
    if dir.ends_with("deps") {
        dir.pop();
    }
    let path = dir.join(name);
    assert!(
        path.exists(),
        "{} is missing: build the workspace binaries first",
        path.display()
    );
    path
}

fn unique() -> String {
    format!(
        "{}-{}",
        std::process::id(),
        uuid::Uuid::new_v4()
            .simple()
            .to_string()
            .get(..8)
            .unwrap_or("x")
    )
}

/// A private tmux server (its own socket), killed on drop.
pub struct Tmux {
    /// Socket path.
    pub socket: PathBuf,
    _dir: tempfile::TempDir,
}

impl Tmux {
    /// Starts a server with one idle window.
    pub fn start() -> Self {
        let dir = tempfile::tempdir().expect("tmpdir");
        let socket = dir.path().join(format!("tmux-{}", unique()));
        let t = Self { socket, _dir: dir };
        t.run(&[
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "e2e",
            "-x",
            "200",
            "-y",
            "50",
        ]);
        t
    }

    fn command(&self) -> Command {
        let mut c = Command::new("tmux");
        c.arg("-S").arg(&self.socket);
        // The agents in its panes use the test's HOME, never the developer's own runtime
        // homes (the server keeps the environment of the command that started it).
        for var in RUNTIME_HOMES {
            c.env_remove(var);
        }
        // Nor `CI` (CI sets it; a person's terminal does not): under it Gemini CLI does not
        // open its interactive UI at all.
        c.env_remove("CI");
        c
    }

    /// Runs a tmux command; panics on failure.
    pub fn run(&self, args: &[&str]) -> String {
        let out = self
            .command()
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("tmux");
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// Opens a window running `command` in `cwd` with `env`; returns its pane id.
    pub fn spawn(&self, cwd: &Path, env: &[(&str, String)], command: &[String]) -> String {
        let mut args: Vec<String> = vec![
            "new-window".into(),
            "-d".into(),
            "-P".into(),
            "-F".into(),
            "#{pane_id}".into(),
            "-c".into(),
            cwd.to_string_lossy().into_owned(),
        ];
        for (k, v) in env {
            args.push("-e".into());
            args.push(format!("{k}={v}"));
        }
        args.extend(command.iter().cloned());
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        self.run(&refs)
    }

    /// Types literal text (no Enter).
    pub fn type_text(&self, pane: &str, text: &str) {
        self.run(&["send-keys", "-t", pane, "-l", "--", text]);
    }

    /// Pastes text as a terminal does (bracketed paste; no Enter).
    pub fn paste(&self, pane: &str, text: &str) {
        self.run(&["set-buffer", "-b", "test-paste", "--", text]);
        self.run(&["paste-buffer", "-p", "-d", "-b", "test-paste", "-t", pane]);
    }

    /// Presses Enter.
    pub fn enter(&self, pane: &str) {
        self.run(&["send-keys", "-t", pane, "Enter"]);
    }

    /// The pane's visible text.
    pub fn capture(&self, pane: &str) -> String {
        self.run(&["capture-pane", "-p", "-t", pane])
    }

    /// The `TMUX` value a process inside this server would see.
    pub fn tmux_env(&self) -> String {
        format!("{},0,0", self.socket.display())
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        // Some agents outlive their tmux server (Gemini CLI's node processes ignore the
        // hang-up): every process of every pane goes first.
        let pids = self
            .command()
            .args(["list-panes", "-a", "-F", "#{pane_pid}"])
            .stdin(Stdio::null())
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        for pid in pids.lines().filter_map(|p| p.trim().parse::<u32>().ok()) {
            for p in descendants(pid).into_iter().rev() {
                let _ = Command::new("kill").args(["-9", &p.to_string()]).output();
            }
        }
        let _ = self
            .command()
            .arg("kill-server")
            .stdin(Stdio::null())
            .output();
    }
}

/// `pid` and every process under it, parents first (from /proc).
fn descendants(pid: u32) -> Vec<u32> {
    let mut parents: Vec<(u32, u32)> = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(p) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        // `pid (comm) state ppid …`: comm may hold spaces and parentheses.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|pp| pp.parse::<u32>().ok());
        if let Some(pp) = ppid {
            parents.push((p, pp));
        }
    }
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() {
        let parent = out[i];
        out.extend(
            parents
                .iter()
                .filter(|(_, pp)| *pp == parent)
                .map(|(p, _)| *p),
        );
        i += 1;
    }
    out
}

/// Variables that would point a runtime's settings outside a test's HOME (OpenCode keeps its
/// configuration, sessions and state in the XDG directories).
const RUNTIME_HOMES: [&str; 6] = [
    "CODEX_HOME",
    "GEMINI_CLI_HOME",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "XDG_CACHE_HOME",
];

/// One user's machine: a HOME with `~/.repowire` and `~/.claude`, and its daemon.
pub struct Home {
    dir: tempfile::TempDir,
    relay: Option<(String, String)>,
    program: Option<PathBuf>,
    session_bus: Option<String>,
}

impl Home {
    /// A fresh home; `relay` is `(base_url, api_key)`, or `None` for the embedded relay.
    pub fn new(relay: Option<(String, String)>) -> Self {
        Self {
            dir: tempfile::tempdir().expect("home"),
            relay,
            program: None,
            session_bus: None,
        }
    }

    /// Gives this user a D-Bus session bus (its address), where an OS keyring may answer; by
    /// default a user has none, as on a server, so no test reaches the keyring of whoever runs
    /// it and the API key goes to its file.
    pub fn set_session_bus(&mut self, address: Option<String>) {
        self.session_bus = address;
    }

    /// Runs this `repowire` binary instead of the one beside the test executable (the
    /// benchmarks compare builds).
    pub fn with_program(mut self, program: PathBuf) -> Self {
        self.program = Some(program);
        self
    }

    /// Points this user's commands (and the daemon they start) at another relay, or the
    /// embedded one with `None`.
    pub fn set_relay(&mut self, relay: Option<(String, String)>) {
        self.relay = relay;
    }

    /// HOME.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `~/.repowire`.
    pub fn repowire_home(&self) -> PathBuf {
        self.path().join(".repowire")
    }

    /// Environment for anything running as this user.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        let mut env = vec![
            ("HOME", self.path().to_string_lossy().into_owned()),
            (
                "REPOWIRE_HOME",
                self.repowire_home().to_string_lossy().into_owned(),
            ),
            ("REPOWIRE_RECONNECT_MAX_MS", "300".into()),
            ("REPOWIRE_LOG", "info,repowire=debug".into()),
            (
                "DBUS_SESSION_BUS_ADDRESS",
                self.session_bus.clone().unwrap_or_else(|| {
                    format!("unix:path={}/no-session-bus", self.path().display())
                }),
            ),
        ];
        if let Some((url, key)) = &self.relay {
            env.push(("REPOWIRE_RELAY_URL", url.clone()));
            env.push(("REPOWIRE_API_KEY", key.clone()));
        }
        env
    }

    /// Runs `repowire ARGS` as this user.
    pub fn repowire(&self, args: &[&str]) -> Output {
        self.repowire_in(None, args)
    }

    /// Runs `repowire ARGS` as this user, inside `tmux` (its `TMUX` set) when given.
    pub fn repowire_in(&self, tmux: Option<&Tmux>, args: &[&str]) -> Output {
        let mut c = self.command(args);
        if let Some(t) = tmux {
            c.env("TMUX", t.tmux_env());
        }
        c.output().expect("repowire")
    }

    /// `repowire ARGS` as this user, not started yet (for commands that block).
    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(self.program.clone().unwrap_or_else(|| bin("repowire")));
        c.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .env_remove("TMUX")
            .env_remove("TMUX_PANE");
        for var in RUNTIME_HOMES {
            c.env_remove(var);
        }
        for (k, v) in self.env() {
            c.env(k, v);
        }
        c
    }

    /// Runs `repowire ARGS` as this user on a terminal of its own, as a person typing it
    /// would (`script(1)` gives it a pseudo-terminal).
    pub fn in_terminal(&self, args: &[&str]) -> Output {
        let program = self.program.clone().unwrap_or_else(|| bin("repowire"));
        let line: Vec<String> = std::iter::once(program.to_string_lossy().into_owned())
            .chain(args.iter().map(|a| (*a).to_owned()))
            .map(|w| format!("'{}'", w.replace('\'', "'\\''")))
            .collect();
        let mut c = Command::new("script");
        c.args(["-q", "-e", "-c", &line.join(" "), "/dev/null"])
            .stdin(Stdio::null())
            .env_remove("TMUX")
            .env_remove("TMUX_PANE");
        for var in RUNTIME_HOMES {
            c.env_remove(var);
        }
        for (k, v) in self.env() {
            c.env(k, v);
        }
        c.output().expect("script")
    }

    /// Runs `repowire ARGS` as this user with no controlling terminal at all (`setsid`).
    pub fn without_terminal(&self, args: &[&str]) -> Output {
        let mut c = Command::new("setsid");
        c.arg("-w")
            .arg(self.program.clone().unwrap_or_else(|| bin("repowire")))
            .args(args)
            .stdin(Stdio::null())
            .env_remove("TMUX")
            .env_remove("TMUX_PANE");
        for var in RUNTIME_HOMES {
            c.env_remove(var);
        }
        for (k, v) in self.env() {
            c.env(k, v);
        }
        c.output().expect("setsid")
    }

    /// Runs `repowire ARGS`, asserting success; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.repowire(args);
        assert!(
            out.status.success(),
            "repowire {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The open approvals this user sees, once there are `n`.
    pub async fn approvals_waiting(&self, n: usize) -> Vec<Value> {
        eventually(&format!("{n} approval(s) waiting"), || {
            let list = self.json(&["approvals", "list"]);
            let items = list.as_array().cloned().unwrap_or_default();
            (items.len() == n).then_some(items)
        })
        .await
    }

    /// Runs `repowire ARGS --json`, asserting success.
    pub fn json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.push("--json");
        let out = self.ok(&all);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
    }

    /// `repowire setup` then `repowire daemon start`.
    pub fn install_and_start(&self) {
        self.ok(&["setup", "--non-interactive"]);
        self.ok(&["daemon", "start"]);
    }

    /// The states recorded for a message this user's daemon sent (`peer status`), in order.
    pub fn states(&self, id: &str) -> Vec<String> {
        self.json(&["peer", "status", id])["events"]
            .as_array()
            .map(|e| {
                e.iter()
                    .map(|x| x["state"].as_str().unwrap_or("").to_owned())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The `reason` recorded with the first `state` event of a message this user's daemon
    /// sent, if any.
    pub fn reason_of(&self, id: &str, state: &str) -> Option<String> {
        self.json(&["peer", "status", id])["events"]
            .as_array()?
            .iter()
            .find(|e| e["state"] == state)?["reason"]
            .as_str()
            .map(str::to_owned)
    }

    /// Waits until the message `id` this user's daemon sent has reached `state`.
    pub async fn reaches_state(&self, id: &str, state: &str) {
        eventually(&format!("{id} {state}"), || {
            self.states(id).iter().any(|s| s == state).then_some(())
        })
        .await;
    }

    /// The daemon's relay link state (`connected`, `connecting` …).
    pub fn link_state(&self) -> String {
        self.json(&["daemon", "status"])["link"]["state"]
            .as_str()
            .unwrap_or("")
            .to_owned()
    }

    /// The daemon log so far (for failure messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.repowire_home().join("daemon.log")).unwrap_or_default()
    }

    /// Starts a stand-in agent in a new pane, in `HOME/<project>`; returns the agent.
    pub fn agent(&self, tmux: &Tmux, project: &str) -> Agent {
        self.agent_with(tmux, project, &[])
    }

    /// [`Self::agent`] with more stand-in arguments (`--runtime codex`).
    pub fn agent_with(&self, tmux: &Tmux, project: &str, args: &[&str]) -> Agent {
        self.agent_program(tmux, project, &bin("repowire-standin"), args)
    }

    /// [`Self::agent_with`] running the stand-in from `program` (a copy named as the runtime's
    /// own binary, so its process looks like one).
    pub fn agent_program(
        &self,
        tmux: &Tmux,
        project: &str,
        program: &Path,
        args: &[&str],
    ) -> Agent {
        let cwd = self.path().join(project);
        std::fs::create_dir_all(&cwd).expect("project dir");
        let transcript = self.path().join(format!("{project}.jsonl"));
        let pane = tmux.spawn(
            &cwd,
            &self.env(),
            &[
                program.to_string_lossy().into_owned(),
                "--transcript".into(),
                transcript.to_string_lossy().into_owned(),
            ]
            .into_iter()
            .chain(args.iter().map(|a| a.to_string()))
            .collect::<Vec<_>>(),
        );
        Agent { pane, transcript }
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        // Never panic here: a panic during a failing test's unwinding aborts the whole run.
        if std::env::current_exe().is_ok_and(|e| {
            e.parent()
                .map(|d| d.join("../repowire").exists() || d.join("repowire").exists())
                .unwrap_or(false)
        }) {
            let _ = self.repowire(&["daemon", "stop"]);
        }
    }
}

/// A stand-in agent in a pane.
pub struct Agent {
    /// Its pane.
    pub pane: String,
    /// Its JSONL transcript.
    pub transcript: PathBuf,
}

impl Agent {
    /// Every transcript event so far.
    pub fn events(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.transcript)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Waits for the `n`-th (1-based) event matching `pred`, counting from the start.
    pub async fn wait_nth(&self, n: usize, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + AGENT_WAIT;
        loop {
            let matching: Vec<Value> = self.events().into_iter().filter(|e| pred(e)).collect();
            if matching.len() >= n {
                return matching[n - 1].clone();
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what} in {}; transcript:\n{}",
                self.transcript.display(),
                std::fs::read_to_string(&self.transcript).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Waits for the first event matching `pred`.
    pub async fn wait(&self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        self.wait_nth(1, what, pred).await
    }

    /// Waits for the `n`-th completed hook of `hook`.
    pub async fn hook_done(&self, hook: &str, n: usize) {
        self.wait_nth(n, &format!("{hook} hook #{n}"), |e| {
            e["event"] == "hook_done" && e["hook"] == hook
        })
        .await;
    }

    /// Every context text handed over so far, joined.
    pub fn context(&self) -> String {
        self.events()
            .iter()
            .filter(|e| e["event"] == "context" || e["event"] == "continue")
            .map(|e| {
                e.get("text")
                    .or(e.get("reason"))
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned()
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Submits a prompt by typing it and pressing Enter, as a person would.
    pub fn submit(&self, tmux: &Tmux, text: &str) {
        tmux.type_text(&self.pane, text);
        tmux.enter(&self.pane);
    }

    /// Lets a `/busy` turn finish.
    pub fn release(&self) {
        std::fs::write(format!("{}.release", self.transcript.display()), b"").expect("release");
    }
}

impl Agent {
    /// The runtime session id the stand-in started with.
    pub fn session_id(&self) -> String {
        self.events()
            .iter()
            .find(|e| e["event"] == "start")
            .and_then(|e| e["session_id"].as_str())
            .expect("the stand-in recorded its session id")
            .to_owned()
    }

    /// Asks `peer` `question` through the CLI, as this agent's tool call (its `n`-th); returns
    /// the correlation id.
    pub async fn ask(&self, tmux: &Tmux, n: usize, peer: &str, question: &str) -> String {
        let repowire = bin("repowire").to_string_lossy().into_owned();
        self.submit(
            tmux,
            &format!("/run {repowire} peer ask {peer} '{question}' --json"),
        );
        let tool = self
            .wait_nth(n, "the ask tool call", |e| e["event"] == "tool")
            .await;
        assert_eq!(tool["exit"], 0, "{tool}");
        let sent: Value =
            serde_json::from_str(tool["stdout"].as_str().unwrap_or("")).expect("json");
        sent["correlation_id"].as_str().expect("cid").to_owned()
    }
}

impl Home {
    /// The last wake outcome of a local session, if a wake was tried.
    pub fn wake_of(&self, session: &str) -> Option<Value> {
        let wake = self.json(&["daemon", "status"])["wakes"][session].clone();
        (!wake.is_null()).then_some(wake)
    }
}

/// Polls `f` until it returns `Some`, or fails with `what`.
pub async fn eventually<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + AGENT_WAIT;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Spawns a program this test has just written (a copy of the stand-in under an agent's name).
/// While the copy was open for writing, another test's thread may have forked: its child holds
/// the file open until it execs, and spawning the copy meanwhile fails with `ETXTBSY` (Linux).
/// That child execs within milliseconds, so the spawn is tried again, for up to 5 s, as Go's
/// os/exec does.
pub fn spawn_written(command: &mut Command) -> std::io::Result<std::process::Child> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match command.spawn() {
            Err(e)
                if e.kind() == std::io::ErrorKind::ExecutableFileBusy
                    && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            other => return other,
        }
    }
}
