//! The Repowire client: daemon, agent hooks, setup, and peer commands, behind the `repowire`
//! binary.
//!
//! - [`config`]: the one configuration struct. [`api`]: the daemon's local API.
//! - [`daemon`]: the long-running daemon. [`cli`]: the commands people and hooks run.
//! - [`mcp`]: the stdio MCP server (`repowire mcp`) giving agents their tools.
//! - [`tmux`], [`sanitize`], [`procinfo`]: terminal delivery and its safety checks.
//! - [`relay_token`]: the API key → token exchange the daemon and the CLI share.
//! - `repowire_files` (its own crate): how the client writes the user's files (atomic, exclusive, modes kept).

/// `--version`: the crate version and the git revision it was built from.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("REPOWIRE_GIT_REV"),
    ")"
);

pub mod api;
pub mod apikey;
pub mod causes;
pub mod cli;
pub mod config;
pub mod daemon;
pub mod mcp;
pub mod procinfo;
pub mod relay_token;
pub mod replies;
pub mod runtimes;
pub mod sanitize;
pub mod tmux;
