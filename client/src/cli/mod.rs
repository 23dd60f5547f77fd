//! The commands: each module owns one command family.

pub mod approvals;
pub mod approvals_setup;
pub mod check_relay;
pub mod claude_settings;
pub mod codex_config;
mod config_write;
pub mod conversation;
pub mod daemon;
pub mod dashboard;
pub mod doctor;
pub mod hook;
pub mod inbox;
pub mod outbox;
pub mod peer;
pub mod permissions;
pub mod question;
pub mod relay_setup;
pub mod session;
pub mod setup;
mod setup_claude;
mod setup_codex;
mod setup_gemini;
mod setup_opencode;

use std::time::Duration;

use serde_json::Value;

use crate::api::{self, CallError, Request};
use crate::config::Config;

/// The running daemon's status.
pub fn daemon_status(config: &Config, timeout: Duration) -> anyhow::Result<api::DaemonStatus> {
    call_as(config, &Request::Status, timeout)
}

/// When the running daemon uses another relay than this shell's settings name (the daemon was
/// started with another environment or config.toml changed since): `(daemon's, shell's)`.
pub fn relay_drift(config: &Config, status: &api::DaemonStatus) -> Option<(String, String)> {
    let shell = config
        .relay_url_only()
        .ok()?
        .unwrap_or_else(|| "the embedded relay".to_owned());
    let daemon = status.relay_label();
    (daemon != shell).then_some((daemon, shell))
}

/// When the running daemon is another build than this binary (the binary was upgraded while it
/// ran): the daemon's version. A daemon from before daemons reported one is another build too.
/// The daemon and the hooks, CLI and MCP server that talk to it then speak different versions
/// of the local API, and an older daemon ignores what it does not know.
pub fn version_drift(status: &api::DaemonStatus) -> Option<String> {
    let daemon = status
        .version
        .as_deref()
        .unwrap_or("an older build that does not report its version");
    (daemon != crate::VERSION).then(|| daemon.to_owned())
}

/// The sessions the relay refused to register (from the daemon's status), each as a line that
/// says which, why in the relay's words, and what to do (issue 35.4: a daemon over its tenant's
/// peer limit said only "link connected").
pub fn refused_sessions(status: &api::DaemonStatus) -> Vec<String> {
    status
        .refused
        .iter()
        .map(|r| {
            let todo = match r.code.as_str() {
                "limit_exceeded" => {
                    "the tenant is at its plan's limit: end sessions you no longer need (`repowire session end ID`) or ask the relay's operator for a larger plan"
                }
                _ => "see `repowire daemon status` and the daemon's log",
            };
            format!(
                "the relay refused session {}: {} ({}); {todo}. It is registered again at its next hook or when the daemon reconnects",
                crate::sanitize::for_terminal(&r.session_id),
                crate::sanitize::for_terminal(&r.message),
                crate::sanitize::for_terminal(&r.code),
            )
        })
        .collect()
}

/// The build of a daemon whose status this binary cannot read.
pub const UNREADABLE_BUILD: &str = "a build whose status this binary cannot read";

/// What to do about a drift.
pub const RESTART_HINT: &str = "restart it from this shell to use them: `repowire daemon restart`";

/// Calls the daemon, turning "not running" into an error with a hint.
pub fn call(config: &Config, request: &Request, timeout: Duration) -> anyhow::Result<Value> {
    let socket = crate::config::socket_path(&config.home());
    api::call(&socket, request, timeout).map_err(call_error)
}

/// [`call`], with the answer read as the request's typed reply.
pub fn call_as<T: serde::de::DeserializeOwned>(
    config: &Config,
    request: &Request,
    timeout: Duration,
) -> anyhow::Result<T> {
    let socket = crate::config::socket_path(&config.home());
    api::call_as(&socket, request, timeout).map_err(call_error)
}

/// A failed daemon call as the CLI says it: remote text made safe, with the daemon's hint.
pub fn call_error(e: CallError) -> anyhow::Error {
    match e {
        CallError::NotRunning(why) => anyhow::anyhow!(
            "the repowire daemon is not running ({why})\nhint: start it with `repowire daemon start`"
        ),
        CallError::Api(e) => anyhow::anyhow!(e.describe()),
        e => e.into(),
    }
}
