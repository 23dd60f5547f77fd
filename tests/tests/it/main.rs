//! End-to-end tests: the real binaries (relay, daemon, CLI, MCP server, operator, the Helm
//! chart) on loopback, with Postgres, Redis, tmux and the real Claude Code CLI. One binary,
//! one module per area; the harness is this crate's library (`repowire_e2e`).

#![allow(clippy::unwrap_used)] // a test's unwrap is its assertion

mod chart_render_run;
mod claude_code_real;
mod claude_facts;
mod client_approvals;
mod client_check_relay;
mod client_codex;
mod client_conversations;
mod client_daemon;
mod client_gemini;
mod client_hostile;
mod client_inbox;
mod client_keyring;
mod client_local;
mod client_mixed;
mod client_opencode;
mod client_outputs;
mod client_polish;
mod client_remote;
mod client_sessions;
mod client_setup;
mod client_tenant_wall;
mod client_typing;
mod client_versions;
mod codex_facts;
mod codex_real;
mod conversation_real;
mod dashboard;
mod dashboard_browser;
mod dashboard_oidc_browser;
mod gemini_facts;
mod gemini_real;
mod mcp;
mod opencode_real;
mod relay_check;
mod relay_cluster;
mod relay_cluster_outage;
mod relay_metering;
mod relay_migrate;
mod relay_process;
mod relay_startup;
