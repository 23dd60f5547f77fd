//! The Repowire client: daemon, agent hooks, setup, and peer commands, behind the `repowire`
//! binary.
//!
//! - [`config`]: the one configuration struct. [`api`]: the daemon's local API.
//! - [`daemon`]: the long-running daemon. [`cli`]: the commands people and hooks run.
//! - [`mcp`]: the stdio MCP server (`repowire mcp`) giving agents their tools.
//! - [`tmux`], [`sanitize`], [`procinfo`]: terminal delivery and its safety checks.

pub mod api;
pub mod cli;
pub mod config;
pub mod daemon;
pub mod mcp;
pub mod procinfo;
pub mod sanitize;
pub mod tmux;
