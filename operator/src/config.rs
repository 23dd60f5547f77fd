//! The operator's one configuration struct (flags and environment).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};

/// The command line.
#[derive(Debug, Parser)]
#[command(
    name = "repowire-operator",
    version,
    about = "Tenants and API keys of a Repowire relay as Kubernetes objects"
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the controllers.
    Run(Box<Config>),
    /// Print the CustomResourceDefinitions as YAML.
    Crdgen,
}

pub use repowire_logs::LogFormat;

/// `repowire-operator run`.
#[derive(Debug, Clone, clap::Args)]
pub struct Config {
    /// The relay's base URL for the admin API (e.g. `http://repowire-relay:8080`).
    #[arg(long, env = "REPOWIRE_OPERATOR_RELAY_URL")]
    pub relay_url: String,
    /// The relay URL written to API key Secrets for clients (default: --relay-url).
    #[arg(long, env = "REPOWIRE_OPERATOR_PUBLIC_RELAY_URL")]
    pub public_relay_url: Option<String>,
    /// A file holding the admin credential (a minted `rw_admin_…` token with `admin:read` and
    /// `admin:write`, or the bootstrap token).
    #[arg(
        long,
        env = "REPOWIRE_OPERATOR_ADMIN_TOKEN_FILE",
        conflicts_with = "admin_token"
    )]
    pub admin_token_file: Option<PathBuf>,
    /// The admin credential itself (prefer the file).
    #[arg(long, env = "REPOWIRE_OPERATOR_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
    /// Watch only this namespace (default: every namespace).
    #[arg(long, env = "REPOWIRE_OPERATOR_NAMESPACE")]
    pub namespace: Option<String>,
    /// How often an object in place is checked against the relay, seconds.
    #[arg(long, env = "REPOWIRE_OPERATOR_RESYNC_SECS", default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..))]
    pub resync_secs: u64,
    /// How often a tenant's usage is read into its status, seconds.
    #[arg(long, env = "REPOWIRE_OPERATOR_USAGE_INTERVAL_SECS", default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..))]
    pub usage_interval_secs: u64,
    /// How long a deletion keeps trying to reach the relay before it lets the object go, seconds.
    #[arg(
        long,
        env = "REPOWIRE_OPERATOR_DELETION_TIMEOUT_SECS",
        default_value_t = 300
    )]
    pub deletion_timeout_secs: u64,
    /// Timeout of one admin API call, seconds.
    #[arg(long, env = "REPOWIRE_OPERATOR_RELAY_TIMEOUT_SECS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub relay_timeout_secs: u64,
    /// Where `/metrics`, `/healthz` and `/readyz` are served.
    #[arg(long, env = "REPOWIRE_OPERATOR_LISTEN", default_value = "0.0.0.0:8080")]
    pub listen: SocketAddr,
    /// Elect a leader on a Lease, so that only one replica reconciles.
    #[arg(long, env = "REPOWIRE_OPERATOR_LEADER_ELECTION", default_value_t = true, action = clap::ArgAction::Set)]
    pub leader_election: bool,
    /// The Lease's name.
    #[arg(
        long,
        env = "REPOWIRE_OPERATOR_LEASE_NAME",
        default_value = "repowire-operator"
    )]
    pub lease_name: String,
    /// The Lease's namespace (default: the pod's, from POD_NAMESPACE).
    #[arg(long, env = "POD_NAMESPACE", default_value = "default")]
    pub lease_namespace: String,
    /// This replica's identity in the Lease (default: the pod's name, from POD_NAME).
    #[arg(long, env = "POD_NAME")]
    pub identity: Option<String>,
    /// How long a leader's Lease lasts without renewal, seconds.
    #[arg(long, env = "REPOWIRE_OPERATOR_LEASE_SECS", default_value_t = 15, value_parser = clap::value_parser!(u64).range(2..))]
    pub lease_secs: u64,
    /// Log format.
    #[arg(long, env = "REPOWIRE_OPERATOR_LOG_FORMAT", value_enum, ignore_case = true, default_value_t = LogFormat::Json)]
    pub log_format: LogFormat,
}

impl Config {
    /// The admin credential, from the file or the flag.
    pub fn admin_token(&self) -> anyhow::Result<String> {
        if let Some(path) = &self.admin_token_file {
            let text = std::fs::read_to_string(path).map_err(|e| {
                anyhow::anyhow!("cannot read the admin token file {}: {e}", path.display())
            })?;
            let token = text.trim().to_string();
            anyhow::ensure!(
                !token.is_empty(),
                "the admin token file {} is empty",
                path.display()
            );
            return Ok(token);
        }
        self.admin_token
            .clone()
            .filter(|t| !t.is_empty())
            .ok_or_else(|| anyhow::anyhow!("no admin credential: set --admin-token-file (REPOWIRE_OPERATOR_ADMIN_TOKEN_FILE)"))
    }

    /// Seconds as durations.
    pub fn settings(&self) -> crate::context::Settings {
        crate::context::Settings {
            resync: Duration::from_secs(self.resync_secs),
            usage_interval: Duration::from_secs(self.usage_interval_secs),
            deletion_timeout: Duration::from_secs(self.deletion_timeout_secs),
            public_relay_url: self
                .public_relay_url
                .clone()
                .unwrap_or_else(|| self.relay_url.clone()),
        }
    }
}
