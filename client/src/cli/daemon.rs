//! `repowire daemon run|start|stop|status` and `repowire config show`.

use std::process::{ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Subcommand;

use crate::api::{self, LinkState, Request};
use crate::config::{Config, RelayTarget};

/// Daemon actions.
#[derive(Debug, Clone, Subcommand)]
pub enum Action {
    /// Run in the foreground (what a user service runs).
    Run,
    /// Start in the background and wait until it answers.
    Start,
    /// Stop a running daemon; returns once it has exited.
    Stop,
    /// Stop the running daemon (if any) and start a new one: `stop` then `start`.
    Restart,
    /// Show the daemon's state.
    Status {
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
}

/// Runs a daemon action.
pub fn run(config: &Config, action: Action) -> anyhow::Result<ExitCode> {
    match action {
        Action::Run => {
            let settings = config.settings()?;
            init_tracing(&settings.log);
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .context("starting the async runtime")?;
            match runtime.block_on(crate::daemon::run(settings)) {
                Ok(()) => Ok(ExitCode::SUCCESS),
                // Its own exit code, so that `daemon start` can tell a lost race for the lock
                // (wait and try again) from a daemon that cannot start.
                Err(e) if e.is::<crate::daemon::AlreadyRunning>() => {
                    eprintln!("error: {e}");
                    Ok(ExitCode::from(crate::daemon::EXIT_ALREADY_RUNNING as u8))
                }
                Err(e) => Err(e),
            }
        }
        Action::Start => start(config),
        Action::Stop => stop(config),
        Action::Restart => {
            stop(config)?;
            start(config)
        }
        Action::Status { json } => {
            let status = super::daemon_status(config, Duration::from_secs(5))?;
            if json {
                println!("{}", serde_json::to_string_pretty(&status)?);
            } else {
                print_status(&status);
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn init_tracing(filter: &str) {
    repowire_logs::init(
        repowire_logs::LogFormat::Text,
        repowire_logs::Stream::Stderr,
        repowire_logs::filter_or(filter, "info"),
    );
}

/// The pid of the daemon answering on this home's socket, if one answers.
fn running_pid(config: &Config) -> Option<u32> {
    super::daemon_status(config, Duration::from_secs(2))
        .ok()
        .map(|s| s.pid)
}

/// True while a process holds the daemon lock of `home`: a daemon runs there, or is still
/// finishing (its socket may be gone already). Probed with a shared lock taken and let go at
/// once, so nothing is written.
fn lock_held(home: &std::path::Path) -> bool {
    let Ok(file) = std::fs::File::open(home.join("daemon.lock")) else {
        return false;
    };
    match file.try_lock_shared() {
        Ok(()) => {
            let _ = file.unlock();
            false
        }
        Err(std::fs::TryLockError::WouldBlock) => true,
        Err(std::fs::TryLockError::Error(_)) => false,
    }
}

/// The live process the daemon lock file of `home` names, if any.
fn lock_holder(home: &std::path::Path) -> Option<u32> {
    let pid: u32 = std::fs::read_to_string(home.join("daemon.lock"))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    std::path::Path::new(&format!("/proc/{pid}"))
        .exists()
        .then_some(pid)
}

fn start(config: &Config) -> anyhow::Result<ExitCode> {
    use std::os::unix::process::CommandExt;
    let home = config.home();
    let socket = crate::config::socket_path(&home);
    if let Ok(answer) = api::call(&socket, &Request::Status, Duration::from_secs(2)) {
        // Any answer means a daemon runs; one whose status this build cannot read is another
        // build.
        let status = api::typed::<api::DaemonStatus>(answer).ok();
        let mut refused = crate::daemon::already_running(&home, status.as_ref().map(|s| s.pid));
        let drift = match &status {
            Some(status) => super::version_drift(status),
            None => Some(super::UNREADABLE_BUILD.to_owned()),
        };
        if let Some(daemon) = drift {
            refused.push_str(&format!(
                "\nit runs {}, not this binary's {}: `repowire daemon restart` runs this one",
                crate::sanitize::for_terminal(&daemon),
                crate::VERSION
            ));
        }
        anyhow::bail!("{refused}");
    }
    config.settings()?; // fail here, not in the background, on a bad configuration
    crate::config::ensure_home(&home)?;
    let log_path = home.join("daemon.log");
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .with_context(|| format!("opening {}", log_path.display()))?;
    let exe = std::env::current_exe().context("locating the repowire binary")?;
    let spawn = || -> anyhow::Result<std::process::Child> {
        std::process::Command::new(&exe)
            .arg("--home")
            .arg(&home)
            .args(["daemon", "run"])
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log.try_clone()?)
            .process_group(0)
            .spawn()
            .context("starting the daemon")
    };
    let deadline = Instant::now() + Duration::from_secs(15);
    // A daemon that is still finishing (stopped, its socket gone, its tasks ending) holds the
    // home's lock for a moment: wait for it rather than fail.
    while lock_held(&home) && running_pid(config).is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut child = spawn()?;
    while Instant::now() < deadline {
        match running_pid(config) {
            Some(pid) if pid == child.id() => {
                println!("daemon started (pid {pid}); log: {}", log_path.display());
                report_link(config);
                return Ok(ExitCode::SUCCESS);
            }
            // Another start won the race: ours stops at the lock.
            Some(pid) => anyhow::bail!("{}", crate::daemon::already_running(&home, Some(pid))),
            None => {}
        }
        if let Some(status) = child.try_wait()? {
            // Lost the race for the home's lock: to another start (whose daemon answers soon),
            // or to a daemon still finishing (which lets the lock go soon): ask again.
            if let Some(pid) = running_pid(config) {
                anyhow::bail!("{}", crate::daemon::already_running(&home, Some(pid)));
            }
            if status.code() == Some(crate::daemon::EXIT_ALREADY_RUNNING) {
                while lock_held(&home) && running_pid(config).is_none() && Instant::now() < deadline
                {
                    std::thread::sleep(Duration::from_millis(20));
                }
                if let Some(pid) = running_pid(config) {
                    anyhow::bail!("{}", crate::daemon::already_running(&home, Some(pid)));
                }
                if lock_held(&home) {
                    anyhow::bail!(
                        "{}",
                        crate::daemon::already_running(&home, lock_holder(&home))
                    );
                }
                child = spawn()?;
                continue;
            }
            anyhow::bail!(
                "the daemon exited at start ({status}); see {}",
                log_path.display()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    anyhow::bail!(
        "the daemon did not answer within 15 s; see {}",
        log_path.display()
    )
}

/// How long `daemon start` waits for the relay link before it returns: a command run right
/// after it then finds the daemon connected (the embedded relay takes milliseconds).
const LINK_WAIT: Duration = Duration::from_secs(5);

/// Waits (at most [`LINK_WAIT`]) until the started daemon's relay link is up or has given up,
/// and says which. A relay that cannot be reached yet is not a failure to start: the daemon
/// keeps trying, and hooks work meanwhile.
fn report_link(config: &Config) {
    let socket = crate::config::socket_path(&config.home());
    let deadline = Instant::now() + LINK_WAIT;
    let mut last_error = None;
    while Instant::now() < deadline {
        if let Ok(status) =
            api::call_as::<api::DaemonStatus>(&socket, &Request::Status, Duration::from_secs(2))
        {
            match &status.link {
                LinkState::Connected { tenant_id, .. } => {
                    println!(
                        "relay link connected (tenant {})",
                        crate::sanitize::for_terminal(tenant_id)
                    );
                    for line in super::refused_sessions(&status) {
                        eprintln!("warning: {line}");
                    }
                    return;
                }
                LinkState::Stopped { reason, .. } => {
                    eprintln!(
                        "warning: the relay refused this daemon: {}; `repowire doctor` says what to do",
                        crate::sanitize::for_terminal(reason)
                    );
                    return;
                }
                LinkState::Connecting { last_error: e } => last_error.clone_from(e),
                LinkState::Registering { .. } | LinkState::Unknown => {}
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let why = last_error
        .map(|e| format!(" (last attempt: {})", crate::sanitize::for_terminal(&e)))
        .unwrap_or_default();
    eprintln!(
        "warning: not connected to the relay yet{why}; the daemon keeps trying (`repowire daemon status`)"
    );
}

/// Asks the daemon to shut down and returns once it has exited: its socket is closed **and**
/// it has let go of the home's lock (it does so last, after its relay link and any embedded
/// relay have ended), so a `daemon start` right after finds the home free.
fn stop(config: &Config) -> anyhow::Result<ExitCode> {
    let home = config.home();
    let socket = crate::config::socket_path(&home);
    match api::call(&socket, &Request::Shutdown, Duration::from_secs(5)) {
        Err(api::CallError::NotRunning(_)) => {
            if !lock_held(&home) {
                println!("the daemon is not running");
                return Ok(ExitCode::SUCCESS);
            }
            // Already stopping: its socket is gone, its lock not yet.
        }
        other => {
            other?;
        }
    }
    let deadline = Instant::now() + Duration::from_secs(15);
    while Instant::now() < deadline {
        if std::os::unix::net::UnixStream::connect(&socket).is_err() && !lock_held(&home) {
            println!("daemon stopped");
            return Ok(ExitCode::SUCCESS);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    anyhow::bail!(
        "the daemon did not stop within 15 s{}",
        lock_holder(&home)
            .map(|pid| format!(
                " (pid {pid} still holds {})",
                home.join("daemon.lock").display()
            ))
            .unwrap_or_default()
    )
}

fn print_status(status: &api::DaemonStatus) {
    let t = |s: &str| crate::sanitize::for_terminal(s);
    let or_dash = |s: &Option<String>| t(s.as_deref().unwrap_or("-"));
    println!("daemon   pid {}", status.pid);
    match super::version_drift(status) {
        None => println!("version  {}", crate::VERSION),
        Some(daemon) => println!(
            "version  DIFFERS: the daemon runs {}, this binary is {}: {}",
            crate::sanitize::for_terminal(&daemon),
            crate::VERSION,
            super::RESTART_HINT
        ),
    }
    println!(
        "relay    {}{}",
        t(&status.relay),
        if status.embedded { " (embedded)" } else { "" }
    );
    match &status.link {
        LinkState::Connected { tenant_id, .. } => {
            println!("link     connected (tenant {})", t(tenant_id))
        }
        LinkState::Stopped {
            reason,
            key_refused,
        } => {
            println!("link     STOPPED: {}", t(reason));
            if *key_refused {
                println!(
                    "         key revoked or unknown: run `repowire setup --relay-url URL --api-key rw_live_…`, then restart the daemon"
                );
            }
        }
        LinkState::Unknown => println!("link     in a state this build does not know"),
        LinkState::Registering { .. } => println!("link     connecting"),
        LinkState::Connecting { last_error } => println!(
            "link     connecting{}",
            last_error
                .as_deref()
                .map(|e| format!(" (last error: {})", t(e)))
                .unwrap_or_default()
        ),
    }
    for line in super::refused_sessions(status) {
        println!("         REFUSED: {line}");
    }
    println!("outbox   {} unsent", status.outbox);
    println!("sessions {}", status.sessions.len());
    for x in &status.sessions {
        println!(
            "  {:<20} {:<22} {:<8} pane {:<5} {}",
            or_dash(&x.name),
            or_dash(&x.peer_id),
            t(&x.turn_state),
            or_dash(&x.pane),
            or_dash(&x.path),
        );
    }
}

/// `repowire mcp`: the MCP server on stdin/stdout; logs go to stderr only.
pub fn mcp(config: &Config) -> anyhow::Result<ExitCode> {
    init_tracing(&config.log);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(crate::mcp::serve(
        crate::config::socket_path(&config.home()),
        config.env.tmux_pane.clone(),
    ))?;
    Ok(ExitCode::SUCCESS)
}

/// `repowire config show`.
pub fn show_config(config: &Config, json: bool) -> anyhow::Result<ExitCode> {
    let settings = config.settings()?;
    let key_where = match &settings.relay {
        RelayTarget::Embedded => None,
        RelayTarget::Remote { .. } => {
            let file = crate::config::FileConfig::load(&settings.home)?;
            config
                .api_key_and_source(&file)?
                .map(|(_, source)| source.describe(&settings.home))
        }
    };
    // What the running daemon uses, which is what matters for messages.
    let daemon = super::daemon_status(config, Duration::from_secs(2)).ok();
    let drift = daemon.as_ref().and_then(|d| super::relay_drift(config, d));
    if json {
        let relay = match &settings.relay {
            RelayTarget::Embedded => serde_json::json!({ "embedded": true }),
            RelayTarget::Remote { url, api_key } => serde_json::json!({
                "embedded": false,
                "url": url,
                "api_key": format!("{}…", api_key.chars().take(12).collect::<String>()),
                "api_key_where": key_where,
            }),
        };
        let report = serde_json::json!({
            "home": settings.home,
            "relay": relay,
            "circle": settings.circle,
            "machine": settings.machine,
            "reconnect_max_ms": settings.reconnect_max.as_millis() as u64,
            "tmux_wake": settings.tmux_wake,
            "daemon": daemon.as_ref().map(|d| serde_json::json!({
                "relay": d.relay_label(),
                "differs": drift.is_some(),
            })),
        });
        println!("{report:#}");
        return Ok(ExitCode::SUCCESS);
    }
    println!("home        {}", settings.home.display());
    match &settings.relay {
        RelayTarget::Embedded => println!("relay       embedded (loopback, SQLite)"),
        RelayTarget::Remote { url, api_key } => {
            let shown: String = api_key.chars().take(12).collect();
            println!("relay       {url}");
            println!("api key     {shown}… (redacted)");
            if let Some(place) = &key_where {
                println!("            {place}");
            }
        }
    }
    println!("circle      {}", settings.circle);
    println!("machine     {}", settings.machine);
    println!("reconnect   ≤ {} ms", settings.reconnect_max.as_millis());
    println!("tmux wake   {}", settings.tmux_wake);
    match &daemon {
        Some(status) => {
            println!("daemon      running, uses {}", status.relay_label());
            if let Some((daemon, shell)) = drift {
                println!(
                    "            DIFFERS from the settings above ({shell} here, {daemon} there): {}",
                    super::RESTART_HINT
                );
            }
        }
        None => println!("daemon      not running"),
    }
    Ok(ExitCode::SUCCESS)
}
