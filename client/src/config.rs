//! The client's one configuration struct: global flags and environment variables, merged over
//! `~/.repowire/config.toml`, and the rest of the process environment a command needs (what an
//! agent runtime or tmux sets, `PATH`, `XDG_CONFIG_HOME`) in [`Environment`]. Nothing below
//! `main` reads the environment: it is read here, when the command line is parsed.

use std::ffi::OsString;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use serde::{Deserialize, Serialize};

/// Global options of every `repowire` command.
#[derive(Debug, Clone, Args)]
pub struct Config {
    /// State directory (config.toml, state.db, the daemon socket).
    #[arg(long, env = "REPOWIRE_HOME", global = true)]
    pub home: Option<PathBuf>,
    /// Relay base URL (`https://relay.example.com`); overrides `relay.url` in config.toml.
    /// Without one the daemon runs a relay embedded, on loopback.
    #[arg(long, env = "REPOWIRE_RELAY_URL", global = true)]
    pub relay_url: Option<String>,
    /// API key for the relay; overrides the key `setup` stored (`~/.repowire/relay-api-key`).
    #[arg(long, env = "REPOWIRE_API_KEY", global = true, hide_env_values = true)]
    pub api_key: Option<String>,
    /// Circle new sessions join; overrides `daemon.circle`.
    #[arg(long, env = "REPOWIRE_CIRCLE", global = true)]
    pub circle: Option<String>,
    /// Upper bound of the reconnect backoff, in milliseconds; overrides
    /// `daemon.reconnect_max_ms`.
    #[arg(long, env = "REPOWIRE_RECONNECT_MAX_MS", global = true)]
    pub reconnect_max_ms: Option<u64>,
    /// Log filter for the daemon (tracing env-filter syntax).
    #[arg(long, env = "REPOWIRE_LOG", global = true, default_value = "info")]
    pub log: String,
    /// The rest of the process environment commands read (not options).
    #[arg(skip = Environment::from_process())]
    pub env: Environment,
}

/// What the process environment says besides the settings above, read once when the command
/// line is parsed.
#[derive(Debug, Clone, Default)]
pub struct Environment {
    /// `TMUX`: the tmux server (socket path, pid, session index) a command runs under.
    pub tmux: Option<String>,
    /// `TMUX_PANE`: the pane a command runs in.
    pub tmux_pane: Option<String>,
    /// `REPOWIRE_SESSION`: the Repowire session `repowire session resume` started this agent
    /// runtime to continue.
    pub repowire_session: Option<String>,
    /// An agent runtime started this process: Claude Code sets `CLAUDE_PROJECT_DIR` for hooks,
    /// and `CLAUDECODE` and `CLAUDE_CODE_ENTRYPOINT` for everything it starts.
    pub agent_runtime: bool,
    /// `XDG_CONFIG_HOME` (where the systemd user unit goes).
    pub xdg_config_home: Option<PathBuf>,
    /// `PATH` (to find `repowire` and `claude`).
    pub path: Option<OsString>,
}

/// Variables an agent runtime sets for the commands it runs (see [`Environment::agent_runtime`]).
const RUNTIME_ENV: &[&str] = &["CLAUDE_PROJECT_DIR", "CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT"];

impl Environment {
    /// This process's environment.
    pub fn from_process() -> Self {
        let text = |name: &str| std::env::var(name).ok();
        Self {
            tmux: text("TMUX"),
            tmux_pane: text("TMUX_PANE"),
            repowire_session: text("REPOWIRE_SESSION"),
            agent_runtime: RUNTIME_ENV.iter().any(|v| std::env::var_os(v).is_some()),
            xdg_config_home: std::env::var_os("XDG_CONFIG_HOME").map(PathBuf::from),
            path: std::env::var_os("PATH"),
        }
    }

    /// The directories of `PATH`, in order.
    pub fn path_dirs(&self) -> Vec<PathBuf> {
        self.path
            .as_ref()
            .map(|p| std::env::split_paths(p).collect())
            .unwrap_or_default()
    }
}

/// `config.toml`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FileConfig {
    /// The relay to connect to.
    pub relay: RelayFile,
    /// Daemon behaviour.
    pub daemon: DaemonFile,
    /// What peers may read from this machine's projects (`read_peer_file`).
    pub files: FilesFile,
    /// Remote approval of Claude Code tool calls (`repowire setup --approvals`).
    pub approvals: ApprovalsFile,
}

/// `[approvals]`: before a gated tool runs, the PreToolUse hook asks `@approvers` (a person on
/// any machine of the tenant) and waits; off unless enabled.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ApprovalsFile {
    /// Ask before gated tools run (default false).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// The gated tools (default Bash, Edit, Write, MultiEdit, NotebookEdit); read-only tools
    /// are never gated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// How long a tool call waits for an answer before it is denied (default 120, 5 to 3600).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
}

/// The tools gated when `[approvals] tools` is not set: the ones that change files or run
/// commands.
pub const DEFAULT_GATED_TOOLS: &[&str] = &["Bash", "Edit", "Write", "MultiEdit", "NotebookEdit"];

/// Claude Code tools that only read: never gated (every read would wait for a person).
pub const READ_ONLY_TOOLS: &[&str] = &[
    "Read",
    "Glob",
    "Grep",
    "LS",
    "NotebookRead",
    "TodoRead",
    "TodoWrite",
    "BashOutput",
];

/// How long a gated tool call waits for an approval by default.
pub const DEFAULT_APPROVAL_TIMEOUT: Duration = Duration::from_secs(120);

/// Resolved `[approvals]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalPolicy {
    /// Ask before gated tools run.
    pub enabled: bool,
    /// Gated tool names (exact, as Claude Code names them).
    pub tools: Vec<String>,
    /// How long a call waits before it is denied.
    pub timeout: Duration,
}

impl ApprovalsFile {
    /// Checks and resolves the section: tool names of the tool-name alphabet, none read-only,
    /// a timeout of 5 to 3600 s.
    pub fn resolve(&self) -> anyhow::Result<ApprovalPolicy> {
        let tools: Vec<String> = match &self.tools {
            Some(t) => t.clone(),
            None => DEFAULT_GATED_TOOLS
                .iter()
                .map(|t| (*t).to_owned())
                .collect(),
        };
        for t in &tools {
            if t.is_empty() || !t.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                bail!(
                    "[approvals] tools: `{t}` is not a tool name (letters, digits and _, e.g. Bash or mcp__github__create_issue)"
                );
            }
            if READ_ONLY_TOOLS.contains(&t.as_str()) {
                bail!(
                    "[approvals] tools: `{t}` only reads; read-only tools are never gated (every read would wait for a person)"
                );
            }
        }
        let seconds = self
            .timeout_seconds
            .unwrap_or(DEFAULT_APPROVAL_TIMEOUT.as_secs());
        if !(5..=3600).contains(&seconds) {
            bail!("[approvals] timeout_seconds must be 5 to 3600 (got {seconds})");
        }
        Ok(ApprovalPolicy {
            enabled: self.enabled.unwrap_or(false),
            tools,
            timeout: Duration::from_secs(seconds),
        })
    }
}

/// `[files]`: reading files of local projects on behalf of peers. Off unless a project is listed.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FilesFile {
    /// Project roots whose files peers may read.
    pub readable: Vec<PathBuf>,
    /// Largest file served, in bytes (default 262144).
    pub max_bytes: Option<u64>,
    /// Serve dotfiles and files under dot-directories (`.env`, `.git/…`) too (default false).
    pub allow_dotfiles: Option<bool>,
}

/// `[relay]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RelayFile {
    /// Base URL (`http(s)://host[:port]`).
    pub url: Option<String>,
    /// API key: read for compatibility; `setup` keeps it in the OS keyring or a file of its
    /// own instead ([`crate::apikey`]) and moves one found here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
    /// Where `setup` stored the API key: `keyring` or `file` (absent: the file).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_store: Option<crate::apikey::KeyStore>,
}

/// `[daemon]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DaemonFile {
    /// Circle for new sessions (default `default`).
    pub circle: Option<String>,
    /// Machine name shown to peers (default: the host name).
    pub machine: Option<String>,
    /// Cap of the reconnect backoff in milliseconds (default 30000).
    pub reconnect_max_ms: Option<u64>,
    /// Type a short wake-up prompt into idle agents' tmux panes (default true).
    pub tmux_wake: Option<bool>,
}

/// Where the relay is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RelayTarget {
    /// Run one in-process on loopback (SQLite under the home directory).
    Embedded,
    /// Connect to this relay.
    Remote {
        /// Base URL.
        url: String,
        /// API key.
        api_key: String,
    },
}

/// Everything resolved: flags and env over config.toml over defaults.
#[derive(Debug, Clone)]
pub struct Settings {
    /// State directory.
    pub home: PathBuf,
    /// The relay.
    pub relay: RelayTarget,
    /// Circle for new sessions.
    pub circle: String,
    /// Machine name.
    pub machine: String,
    /// Reconnect backoff cap.
    pub reconnect_max: Duration,
    /// Wake idle agents through tmux.
    pub tmux_wake: bool,
    /// Log filter.
    pub log: String,
    /// File reads for peers.
    pub files: FilePolicy,
    /// Remote tool approval.
    pub approvals: ApprovalPolicy,
}

/// Resolved `[files]`.
#[derive(Debug, Clone)]
pub struct FilePolicy {
    /// Project roots peers may read from.
    pub readable: Vec<PathBuf>,
    /// Largest file served.
    pub max_bytes: u64,
    /// Dotfiles allowed.
    pub allow_dotfiles: bool,
}

impl Config {
    /// The state directory: `--home`, else `~/.repowire`.
    pub fn home(&self) -> PathBuf {
        self.home
            .clone()
            .unwrap_or_else(|| user_home().join(".repowire"))
    }

    /// The relay: `--relay-url`/`REPOWIRE_RELAY_URL` over config.toml's `[relay] url`, and the
    /// key from `--api-key`/`REPOWIRE_API_KEY`, config.toml (an older setup's), or the key file.
    /// The one place this precedence is written (the daemon and `check-relay` both use it).
    pub fn relay_target(&self, file: &FileConfig) -> anyhow::Result<RelayTarget> {
        let home = self.home();
        let (url, key) = self.relay_url_and_key(file)?;
        Ok(match (url, key) {
            (None, _) => RelayTarget::Embedded,
            (Some(url), Some(api_key)) => RelayTarget::Remote {
                url: relay_url(&url)?,
                api_key,
            },
            (Some(_), None) => bail!(
                "a relay URL is configured but no API key: run `repowire setup --relay-url URL --api-key KEY` (it keeps the key in the OS keyring or in {}) or set REPOWIRE_API_KEY",
                crate::apikey::file::path(&home).display()
            ),
        })
    }

    /// The relay URL and API key as given, each by its precedence (see [`Self::relay_target`]),
    /// before they are checked together.
    pub fn relay_url_and_key(
        &self,
        file: &FileConfig,
    ) -> anyhow::Result<(Option<String>, Option<String>)> {
        let url = self.relay_url.clone().or(file.relay.url.clone());
        Ok((url, self.api_key_and_source(file)?.map(|(key, _)| key)))
    }

    /// The API key by its precedence, and where it came from (`config show` says where).
    pub fn api_key_and_source(
        &self,
        file: &FileConfig,
    ) -> anyhow::Result<Option<(String, crate::apikey::KeySource)>> {
        use crate::apikey::{KeySource, KeyStore};
        if let Some(key) = self.api_key.clone() {
            return Ok(Some((key, KeySource::Given)));
        }
        if let Some(key) = file.relay.api_key.clone() {
            return Ok(Some((key, KeySource::ConfigToml)));
        }
        let source = match file.relay.key_store {
            Some(KeyStore::Keyring) => KeySource::Keyring,
            Some(KeyStore::File) | None => KeySource::File,
        };
        Ok(crate::apikey::read(&self.home(), file.relay.key_store)?.map(|key| (key, source)))
    }

    /// The relay's URL as configured (`None`: the embedded relay), without reading the API key:
    /// the hooks and the status lines need only where the relay is, and the key may sit in a
    /// keyring that is slow to answer or locked.
    pub fn relay_url_only(&self) -> anyhow::Result<Option<String>> {
        let file = FileConfig::load(&self.home())?;
        self.relay_url
            .clone()
            .or(file.relay.url)
            .map(|url| relay_url(&url))
            .transpose()
    }

    /// The approvals policy of config.toml, without reading the API key (the PreToolUse hook
    /// runs at every tool call).
    pub fn approvals(&self) -> anyhow::Result<ApprovalPolicy> {
        FileConfig::load(&self.home())?.approvals.resolve()
    }

    /// Reads config.toml (if any) and resolves every setting, the API key included (from the
    /// keyring, when `setup` put it there).
    pub fn settings(&self) -> anyhow::Result<Settings> {
        let home = self.home();
        let file = FileConfig::load(&home)?;
        let relay = self.relay_target(&file)?;
        let circle = self
            .circle
            .clone()
            .or(file.daemon.circle)
            .unwrap_or_else(|| "default".into());
        if !repowire_protocol::validate::is_valid_name(&circle) {
            bail!("circle `{circle}` is not a valid name (1–64 of A-Z a-z 0-9 . _ -)");
        }
        Ok(Settings {
            home,
            relay,
            circle,
            machine: file.daemon.machine.unwrap_or_else(hostname),
            reconnect_max: Duration::from_millis(
                self.reconnect_max_ms
                    .or(file.daemon.reconnect_max_ms)
                    .unwrap_or(30_000)
                    .max(50),
            ),
            tmux_wake: file.daemon.tmux_wake.unwrap_or(true),
            log: self.log.clone(),
            files: FilePolicy {
                readable: file
                    .files
                    .readable
                    .iter()
                    .map(|p| readable_root(p))
                    .collect::<anyhow::Result<_>>()?,
                max_bytes: file.files.max_bytes.unwrap_or(256 * 1024),
                allow_dotfiles: file.files.allow_dotfiles.unwrap_or(false),
            },
            approvals: file.approvals.resolve()?,
        })
    }
}

impl FileConfig {
    /// Loads `home/config.toml`; a missing file is the default configuration.
    pub fn load(home: &Path) -> anyhow::Result<Self> {
        let path = home.join("config.toml");
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                toml::from_str(&text).with_context(|| format!("reading {}", path.display()))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
        }
    }
}

/// A `[files] readable` entry: `~/` expanded; anything else must be absolute (a relative
/// path would depend on where the daemon was started).
fn readable_root(p: &Path) -> anyhow::Result<PathBuf> {
    let text = p.to_string_lossy();
    let path = match text.strip_prefix("~/") {
        Some(rest) => user_home().join(rest),
        None => p.to_path_buf(),
    };
    if !path.is_absolute() {
        bail!(
            "[files] readable: `{}` is not an absolute path (write /… or ~/…)",
            p.display()
        );
    }
    Ok(path)
}

/// A relay URL as the client uses it: `http://` or `https://`, no trailing `/`. `ws://` and
/// `wss://` are read as `http://` and `https://` (the operator writes the public relay URL into
/// key Secrets, and a WebSocket URL is what a self-hoster may well give it; issue 32).
pub fn relay_url(given: &str) -> anyhow::Result<String> {
    let url = given.trim().trim_end_matches('/');
    let url = if let Some(rest) = url.strip_prefix("wss://") {
        format!("https://{rest}")
    } else if let Some(rest) = url.strip_prefix("ws://") {
        format!("http://{rest}")
    } else {
        url.to_owned()
    };
    let host = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"));
    match host {
        Some(h) if !h.is_empty() => Ok(url),
        _ => bail!(
            "the relay URL must start with http://, https://, ws:// or wss:// and name a host (got `{}`)",
            given.trim()
        ),
    }
}

/// Paths under the state directory.
pub fn socket_path(home: &Path) -> PathBuf {
    home.join("daemon.sock")
}

/// The user's home directory.
pub fn user_home() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/"))
}

fn hostname() -> String {
    let raw = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .unwrap_or_default();
    let name: String = raw
        .trim()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        .take(64)
        .collect();
    if name.is_empty() {
        "localhost".into()
    } else {
        name
    }
}

/// Writes a file only its owner can read (keys, secrets, scratch text for tmux): 0600 whether
/// it is new or not, written whole (see [`repowire_files`]).
pub fn write_private(path: &Path, contents: &str) -> std::io::Result<()> {
    repowire_files::replace(path, contents.as_bytes(), repowire_files::Mode::Private)
}

/// Creates the state directory with owner-only permissions.
pub fn ensure_home(home: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(home).with_context(|| format!("creating {}", home.display()))?;
    std::fs::set_permissions(home, std::fs::Permissions::from_mode(0o700))
        .with_context(|| format!("securing {}", home.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_websocket_relay_url_is_read_as_its_http_one() {
        assert_eq!(
            relay_url("wss://relay.example.com/").expect("wss"),
            "https://relay.example.com"
        );
        assert_eq!(
            relay_url("ws://127.0.0.1:8080").expect("ws"),
            "http://127.0.0.1:8080"
        );
        assert_eq!(
            relay_url(" https://r.example ").expect("https"),
            "https://r.example"
        );
        assert!(relay_url("relay.example.com").is_err());
        assert!(relay_url("ftp://relay.example.com").is_err());
        assert!(relay_url("https://").is_err());
    }
}
