//! The relay's one configuration struct. Every field has a flag and an environment variable;
//! nothing below `main` reads the environment.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

/// `repowire-relay`: the Repowire relay.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "repowire-relay",
    version = crate::VERSION,
    about,
    propagate_version = true
)]
pub struct Config {
    /// What to do; with none, serve.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Relay settings.
    #[command(flatten)]
    pub relay: RelayConfig,
}

/// Subcommands.
#[derive(Debug, Clone, Subcommand)]
pub enum Command {
    /// Serve (the default). Applies pending migrations first.
    Serve,
    /// Apply pending database migrations and exit (the chart runs it as a pre-install and
    /// pre-upgrade Job, so pods never start on a half-migrated schema). Fails, changing
    /// nothing, when the schema is newer than this relay.
    Migrate,
    /// Manage tenants and API keys directly in the database (`--data-dir` or `DATABASE_URL`),
    /// also while relays serve it. Changes reach every running relay within
    /// `--key-check-secs` (revocations close the key's live connections).
    Admin(AdminArgs),
    /// Check that a relay takes an API key and opens a WebSocket for it (token exchange,
    /// upgrade, `hello` → `welcome`), then exit 0; changes nothing but the key's last-used
    /// time. The chart's `helm test`
    /// runs it against the relay's Service.
    Check(CheckArgs),
}

/// `repowire-relay check`: only these options apply.
#[derive(Debug, Clone, Args)]
pub struct CheckArgs {
    /// The relay's URL: `http(s)://host[:port]` (`ws(s)://` is read as `http(s)://`).
    #[arg(long, env = "REPOWIRE_RELAY_URL")]
    pub relay_url: String,
    /// The API key to check. Give it in the environment: a flag shows it to `ps`.
    #[arg(long, env = "REPOWIRE_API_KEY", hide_env_values = true)]
    pub api_key: String,
    /// Print JSON (`relay`, `tenant_id`, `connection_id`) instead of a sentence.
    #[arg(long)]
    pub json: bool,
}

/// `repowire-relay admin …`: only the storage options of the relay apply.
#[derive(Debug, Clone, Args)]
pub struct AdminArgs {
    /// Create the embedded database if it does not exist yet (without it, a missing database
    /// is an error rather than a new empty one).
    #[arg(long, global = true)]
    pub create: bool,
    /// Print JSON instead of a table.
    #[arg(long, global = true)]
    pub json: bool,
    /// What to manage.
    #[command(subcommand)]
    pub command: AdminCommand,
}

/// `repowire-relay admin …`
#[derive(Debug, Clone, Subcommand)]
pub enum AdminCommand {
    /// Tenants.
    #[command(subcommand)]
    Tenant(TenantCommand),
    /// API keys.
    #[command(subcommand)]
    Key(KeyCommand),
    /// Every tenant's usage for one month (the billing export), as the admin API's `GET /usage`.
    Usage {
        /// The month, `YYYY-MM` (UTC).
        #[arg(long)]
        period: String,
        /// CSV (`tenant_id,tenant_name,period_start,granularity,metric,value`) instead of a
        /// table.
        #[arg(long)]
        csv: bool,
    },
}

/// `admin tenant …`
#[derive(Debug, Clone, Subcommand)]
pub enum TenantCommand {
    /// Create a tenant.
    Create {
        /// Unique tenant name.
        name: String,
        /// Its plan [default: free].
        #[arg(long)]
        plan: Option<String>,
    },
    /// List tenants.
    List,
    /// One tenant with the limits in effect.
    Show {
        /// Tenant id or name.
        tenant: String,
    },
    /// Suspend a tenant: its tokens are refused and its connections closed (4010) until resumed.
    Suspend {
        /// Tenant id or name.
        tenant: String,
    },
    /// Resume a suspended tenant.
    Resume {
        /// Tenant id or name.
        tenant: String,
    },
    /// Delete a tenant: every key revoked; its data is purged after the retention period.
    Delete {
        /// Tenant id or name.
        tenant: String,
    },
}

/// `admin key …`
#[derive(Debug, Clone, Subcommand)]
pub enum KeyCommand {
    /// Create an API key; it is printed once and never stored.
    Create {
        /// Tenant id or name.
        tenant: String,
        /// A label to recognise the key by.
        #[arg(long, default_value = "")]
        label: String,
        /// Make an `rw_test_` key instead of `rw_live_`.
        #[arg(long)]
        test: bool,
        /// Expire the key after this many days.
        #[arg(long)]
        expires_in_days: Option<u32>,
        /// What the key may do, repeatable: `connect` (exchange it for a token and connect
        /// agents), `usage:read` (read the tenant's own limits and usage), `approve` (answer
        /// agents' tool approvals as a person; give it only to keys of people's machines),
        /// `keys:manage` (list, create and revoke the tenant's keys in the dashboard),
        /// `messages:read` (read the tenant's asks and replies in the dashboard).
        /// Default: `connect` and `usage:read`, never `approve`.
        #[arg(long)]
        scope: Vec<String>,
    },
    /// List a tenant's keys (never their text).
    List {
        /// Tenant id or name.
        tenant: String,
    },
    /// Revoke a key: new tokens and connections are refused at once, and every relay closes
    /// the key's live connections within `--key-check-secs`.
    Revoke {
        /// Key id (`key-…`).
        key_id: String,
    },
}

/// Settings of a relay process.
#[derive(Debug, Clone, Args)]
pub struct RelayConfig {
    /// Address to listen on.
    #[arg(long, env = "REPOWIRE_RELAY_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Directory for the embedded SQLite database and generated secrets
    /// [default: $XDG_DATA_HOME/repowire-relay or ~/.local/share/repowire-relay].
    #[arg(long, env = "REPOWIRE_DATA_DIR", global = true)]
    pub data_dir: Option<PathBuf>,
    /// Postgres URL (`postgres://…`); without it the relay runs embedded on SQLite.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true, global = true)]
    pub database_url: Option<String>,
    /// PEM certificate chain: serve TLS (wss://, https://) directly. Leave unset behind an
    /// ingress or load balancer that terminates TLS.
    #[arg(long, env = "REPOWIRE_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key for `--tls-cert`.
    #[arg(long, env = "REPOWIRE_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Postgres pool size (requests, catch-up, admin); the writer has two more of its own.
    #[arg(long, env = "REPOWIRE_DB_POOL", default_value_t = 16)]
    pub db_pool: u32,
    /// HMAC secret for JWTs (required with Postgres so every pod verifies the same tokens;
    /// embedded mode generates one in the data dir).
    #[arg(long, env = "REPOWIRE_JWT_SECRET", hide_env_values = true)]
    pub jwt_secret: Option<String>,
    /// Bearer credential of the admin API; without it the admin HTTP API is disabled.
    #[arg(long, env = "REPOWIRE_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
    /// On first start with an empty database, create a `default` tenant and write its first
    /// API key to this file (mode 0600; never to the log). Embedded relays do so by default, to
    /// `<data-dir>/bootstrap-api-key`; a Postgres relay only when this is set.
    #[arg(long, env = "REPOWIRE_BOOTSTRAP_KEY_FILE")]
    pub bootstrap_key_file: Option<PathBuf>,
    /// How often each relay checks the API keys of its live connections against the database,
    /// seconds: a key revoked or expired by any path (admin CLI, another pod) has its
    /// connections closed within this time.
    #[arg(long, env = "REPOWIRE_KEY_CHECK_SECS", default_value_t = 1)]
    pub key_check_secs: u64,
    /// How long a key creation retried with the same Idempotency-Key shows the key text again,
    /// seconds (after it, only the key's record).
    #[arg(long, env = "REPOWIRE_KEY_REPLAY_WINDOW_SECS", default_value_t = 600)]
    pub key_replay_window_secs: u64,
    /// Days a deleted tenant's data is kept before the relay purges it (an explicit purge
    /// through the admin API does it sooner).
    #[arg(long, env = "REPOWIRE_TENANT_RETENTION_DAYS", default_value_t = 30)]
    pub tenant_retention_days: u64,
    /// How often a relay process reads a tenant's limits (and the month's message count) again,
    /// milliseconds; a change through the admin API also reaches every process at once over the
    /// bus, this bounds it when that notice is lost.
    #[arg(long, env = "REPOWIRE_LIMITS_REFRESH_MS", default_value_t = 1000)]
    pub limits_refresh_ms: u64,
    /// A tenant's `messages_per_minute` allows a burst of this many seconds' worth at once,
    /// then the steady rate.
    #[arg(long, env = "REPOWIRE_RATE_BURST_SECS", default_value_t = 10)]
    pub rate_burst_secs: u64,
    /// How often this process adds the connection time and peaks it measured to the usage
    /// rows, in milliseconds: a process killed without a clean stop loses at most this much
    /// of them (message counts are stored with the messages and never lost).
    #[arg(long, env = "REPOWIRE_USAGE_FLUSH_MS", default_value_t = 10_000)]
    pub usage_flush_ms: u64,
    /// Requests a minute each credential may make to `POST /v1/token`, `GET /v1/limits`,
    /// `GET /v1/usage`, `POST /v1/dashboard/links` and the dashboard's pages (per session and
    /// per key) on this process (more get `429` with `Retry-After`); 0: no limit.
    #[arg(long, env = "REPOWIRE_HTTP_REQUESTS_PER_MINUTE", default_value_t = 600)]
    pub http_requests_per_minute: u32,
    /// Of those, how many at once (a burst).
    #[arg(long, env = "REPOWIRE_HTTP_BURST", default_value_t = 120)]
    pub http_burst: u32,
    /// Failed sign-ins a minute from one source address (an IPv6 /64): `401` from `POST
    /// /v1/token` and `POST /v1/dashboard/links`, a wrong key on the dashboard's sign-in, a
    /// link that cannot be used (not counted from loopback); past them that source gets `429`
    /// before any lookup. 0: no limit.
    #[arg(long, env = "REPOWIRE_FAILED_AUTH_PER_MINUTE", default_value_t = 60)]
    pub failed_auth_per_minute: u32,
    /// Of those, how many at once (a burst).
    #[arg(long, env = "REPOWIRE_FAILED_AUTH_BURST", default_value_t = 20)]
    pub failed_auth_burst: u32,
    /// Proxies (CIDRs, comma-separated) whose `X-Forwarded-For` names the client; from any
    /// other peer the header is ignored. Empty: the TCP peer is the source.
    #[arg(long, env = "REPOWIRE_TRUSTED_PROXIES", value_delimiter = ',')]
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// Lifetime of issued JWTs, seconds.
    #[arg(long, env = "REPOWIRE_TOKEN_TTL_SECS", default_value_t = 900)]
    pub token_ttl_secs: u64,
    /// How long a dashboard sign-in lasts, seconds (it also ends at logout, and when the API
    /// key it was opened with is revoked or expires).
    #[arg(long, env = "REPOWIRE_DASHBOARD_SESSION_SECS", default_value_t = 12 * 3600)]
    pub dashboard_session_secs: u64,
    /// Self-serve sign-up on the dashboard (`/dashboard/signup`): anyone who reaches the relay
    /// may create a tenant on `--signup-plan` with its first key. Off unless set.
    #[arg(long, env = "REPOWIRE_SIGNUP", default_value_t = false)]
    pub signup: bool,
    /// A code sign-up asks for (give it to the people you invite); unset: none is asked.
    #[arg(long, env = "REPOWIRE_SIGNUP_INVITE_CODE", hide_env_values = true)]
    pub signup_invite_code: Option<String>,
    /// The plan a signed-up tenant starts on.
    #[arg(long, env = "REPOWIRE_SIGNUP_PLAN", default_value = "free")]
    pub signup_plan: String,
    /// Sign-ups one source address may try per hour (0: no limit).
    #[arg(long, env = "REPOWIRE_SIGNUPS_PER_HOUR", default_value_t = 5)]
    pub signups_per_hour: u32,
    /// OpenID Connect sign-in for the dashboard: the provider's issuer URL (exactly as its
    /// discovery document says it, no trailing slash). With it, a tenant's members sign in as
    /// themselves (invited by email on the Members page), sign-up goes through the provider,
    /// and `--operator-staff` reach the operator's pages. Needs the three settings below.
    #[arg(long, env = "REPOWIRE_OIDC_ISSUER")]
    pub oidc_issuer: Option<String>,
    /// The relay's client id at the provider.
    #[arg(long, env = "REPOWIRE_OIDC_CLIENT_ID")]
    pub oidc_client_id: Option<String>,
    /// The relay's client secret at the provider (unset: a public client, PKCE only).
    #[arg(long, env = "REPOWIRE_OIDC_CLIENT_SECRET", hide_env_values = true)]
    pub oidc_client_secret: Option<String>,
    /// Where the provider sends the browser back: this relay's public address followed by
    /// `/dashboard/oidc/callback` (registered at the provider; never taken from a request).
    #[arg(long, env = "REPOWIRE_OIDC_REDIRECT_URL")]
    pub oidc_redirect_url: Option<String>,
    /// The provider's name on the sign-in button ("Sign in with …").
    #[arg(long, env = "REPOWIRE_OIDC_NAME", default_value = "single sign-on")]
    pub oidc_name: String,
    /// The service's staff who may open the operator's pages by signing in through the
    /// provider: `EMAIL=admin:read` or `EMAIL=admin:write` (comma-separated), matched on an
    /// email the provider has verified.
    #[arg(long, env = "REPOWIRE_OPERATOR_STAFF", value_delimiter = ',')]
    pub operator_staff: Vec<String>,
    /// Entries each tenant's event log keeps at least (the dashboard's live view: messages,
    /// delivery states, presence); a browser that reconnects is told how many it missed past
    /// them. 0: no event log.
    #[arg(long, env = "REPOWIRE_EVENT_LOG_LEN", default_value_t = 10_000)]
    pub event_log_len: u64,
    /// Undelivered entries a peer's inbox may hold; more are refused with `inbox_full`.
    #[arg(long, env = "REPOWIRE_INBOX_CAP", default_value_t = 10_000)]
    pub inbox_cap: i64,
    /// Most participants of one direct conversation, the opener included (2-32).
    #[arg(long, env = "REPOWIRE_CONVERSATION_PARTICIPANTS", default_value_t = 8,
          value_parser = clap::value_parser!(u32).range(2..=32))]
    pub conversation_participants: u32,
    /// A direct conversation's loop guard: after this many turns in a row that no person's
    /// prompt started, it pauses and every participant is told (1-1000).
    #[arg(long, env = "REPOWIRE_CONVERSATION_LOOP_TURNS", default_value_t = 20,
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub conversation_loop_turns: u32,
    /// The loop guard's second count: a turn no person's prompt started that would take the
    /// text relayed since a person's turn past this many bytes pauses the conversation
    /// (32768-67108864: at least one turn of the longest text).
    #[arg(long, env = "REPOWIRE_CONVERSATION_LOOP_BYTES", default_value_t = 262_144,
          value_parser = clap::value_parser!(u64).range(32_768..=67_108_864))]
    pub conversation_loop_bytes: u64,
    /// A direct conversation's own rate: this many turns a minute sustained, after a burst of
    /// up to as many at once (so a 60 s window can hold up to twice as many); a turn past it is refused with `rate_limited` and a `retry_after_ms`, and sent
    /// again by its daemon (1-6000). Bounds what one conversation can spend of its tenant's
    /// plan however often people prompt it.
    #[arg(long, env = "REPOWIRE_CONVERSATION_TURNS_PER_MINUTE", default_value_t = 60,
          value_parser = clap::value_parser!(u32).range(1..=6000))]
    pub conversation_turns_per_minute: u32,
    /// A direct conversation with no turn for this long ends, and every participant is told,
    /// seconds (60-604800).
    #[arg(long, env = "REPOWIRE_CONVERSATION_IDLE_SECS", default_value_t = 3600,
          value_parser = clap::value_parser!(u64).range(60..=604_800))]
    pub conversation_idle_secs: u64,
    /// How long an undelivered message waits before it expires, seconds.
    #[arg(long, env = "REPOWIRE_MESSAGE_TTL_SECS", default_value_t = 7 * 24 * 3600)]
    pub message_ttl_secs: u64,
    /// Descriptions older than this are cleared when read, seconds.
    #[arg(long, env = "REPOWIRE_DESCRIPTION_TTL_SECS", default_value_t = 900)]
    pub description_ttl_secs: u64,
    /// Redis for a cluster of relay pods (presence, cross-pod delivery). Used together with a
    /// Postgres `DATABASE_URL`; embedded (SQLite) relays keep everything in one process.
    #[arg(long, env = "REDIS_URL")]
    pub redis_url: Option<String>,
    /// Prefix of every Redis key and channel (one deployment per prefix).
    #[arg(long, env = "REPOWIRE_REDIS_PREFIX", default_value = "repowire")]
    pub redis_prefix: String,
    /// This pod's name on the bus [default: a random one].
    #[arg(long, env = "REPOWIRE_POD_ID")]
    pub pod_id: Option<String>,
    /// How long a pod's record of a live peer lasts unless refreshed, seconds: a pod that dies
    /// leaves its peers online at most this long.
    #[arg(long, env = "REPOWIRE_PRESENCE_TTL_SECS", default_value_t = 30)]
    pub presence_ttl_secs: u64,
    /// How long shutdown waits for connections and writes to drain, seconds.
    #[arg(long, env = "REPOWIRE_DRAIN_TIMEOUT_SECS", default_value_t = 10)]
    pub drain_timeout_secs: u64,
    /// Maximum concurrent WebSocket connections.
    #[arg(long, env = "REPOWIRE_MAX_CONNECTIONS", default_value_t = 20_000)]
    pub max_connections: usize,
    /// Outbound frames queued per connection before it is closed as a slow consumer.
    #[arg(long, env = "REPOWIRE_OUTBOUND_QUEUE", default_value_t = 1024)]
    pub outbound_queue: usize,
    /// Outbound bytes queued per connection before it is closed as a slow consumer (a frame
    /// may be ~1 MiB, so frames alone do not bound memory); 0: no byte cap.
    #[arg(long, env = "REPOWIRE_OUTBOUND_QUEUE_BYTES", default_value_t = 4 << 20)]
    pub outbound_queue_bytes: usize,
    /// Outbound bytes queued across every connection of this process; a push past it closes
    /// the connection it was for as a slow consumer. 0: unbounded.
    #[arg(long, env = "REPOWIRE_OUTBOUND_BUDGET_BYTES", default_value_t = 256 << 20)]
    pub outbound_budget_bytes: usize,
    /// A write to a connection's socket that does not finish within this many seconds (the
    /// peer stopped reading) closes the connection as a slow consumer.
    #[arg(long, env = "REPOWIRE_WRITE_TIMEOUT_SECS", default_value_t = 10)]
    pub write_timeout_secs: u64,
    /// A tenant at its plan's `max_stored_peers` makes room for a new peer by forgetting its
    /// longest-offline peer that holds nothing; a peer seen within this many seconds is never
    /// forgotten (it may be coming back, or registering through another relay process).
    #[arg(
        long,
        env = "REPOWIRE_FORGET_OFFLINE_PEERS_AFTER_SECS",
        default_value_t = 600
    )]
    pub forget_offline_peers_after_secs: u64,
    /// Time a client has to send a request's headers, and the longest an HTTP connection may
    /// sit idle before its first or next request (slow-loris and silent sockets), seconds.
    #[arg(long, env = "REPOWIRE_HEADER_TIMEOUT_SECS", default_value_t = 10)]
    pub header_timeout_secs: u64,
    /// Time a client has to send a request's body once its headers are in, seconds.
    #[arg(long, env = "REPOWIRE_BODY_TIMEOUT_SECS", default_value_t = 10)]
    pub body_timeout_secs: u64,
    /// Connections that have not become an authenticated WebSocket yet (plain HTTP, upgrades
    /// in progress); past it a new connection is closed at once. Keep it and
    /// `--max-connections` together below the process's file-descriptor limit.
    #[arg(long, env = "REPOWIRE_MAX_PENDING_CONNECTIONS", default_value_t = 1024)]
    pub max_pending_connections: usize,
    /// Message-creating frames (ask, notify, broadcast, ack, answer) one connection may send
    /// per second, sustained; 0 disables the limit. Over it: `rate_limited` with a retry time.
    #[arg(long, env = "REPOWIRE_SEND_RATE", default_value_t = 2000)]
    pub send_rate: u32,
    /// Burst allowance for `--send-rate`.
    #[arg(long, env = "REPOWIRE_SEND_BURST", default_value_t = 4000)]
    pub send_burst: u32,
    /// Writes one connection may have waiting for commit; beyond it the relay stops reading
    /// from that connection until some commit (backpressure). Keep well below the outbound queue.
    #[arg(long, env = "REPOWIRE_INFLIGHT_WRITES", default_value_t = 256)]
    pub inflight_writes: usize,
    /// Interval of relay pings, seconds.
    #[arg(long, env = "REPOWIRE_PING_INTERVAL_SECS", default_value_t = 20)]
    pub ping_interval_secs: u64,
    /// A connection silent for this long is closed, seconds.
    #[arg(long, env = "REPOWIRE_IDLE_TIMEOUT_SECS", default_value_t = 60)]
    pub idle_timeout_secs: u64,
    /// Time a new connection has to send `hello`, seconds.
    #[arg(long, env = "REPOWIRE_HELLO_TIMEOUT_SECS", default_value_t = 10)]
    pub hello_timeout_secs: u64,
    /// Interval of the expiry sweep, seconds.
    #[arg(long, env = "REPOWIRE_SWEEP_INTERVAL_SECS", default_value_t = 30)]
    pub sweep_interval_secs: u64,
    /// How often asks whose question timed out are closed (and their askers told),
    /// milliseconds; at least 100. A late answer is refused at its deadline whatever this is.
    #[arg(long, env = "REPOWIRE_QUESTION_SWEEP_MS", default_value_t = 1000)]
    pub question_sweep_ms: u64,
    /// Most writes committed in one transaction.
    #[arg(long, env = "REPOWIRE_WRITE_BATCH", default_value_t = 512)]
    pub write_batch: usize,
    /// OTLP/gRPC collector for traces (e.g. `http://otel-collector:4317`); unset: no export.
    /// The standard `OTEL_*` variables (service name, sampler, batch delays) apply as well.
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT")]
    pub otlp_endpoint: Option<String>,
    /// Serve `/metrics` only to the admin credential (the admin token, or a minted admin token
    /// with `admin:read`); with no admin token configured it then answers 404. For a relay on a
    /// machine other users share (the daemon's embedded relay sets it); a cluster's Prometheus
    /// scrapes over the pod network and leaves it off.
    #[arg(long, env = "REPOWIRE_METRICS_AUTH", default_value_t = false)]
    pub metrics_auth: bool,
    /// Log format: `json` or `text` (anything else is refused at start).
    #[arg(
        long,
        env = "REPOWIRE_LOG_FORMAT",
        value_enum,
        ignore_case = true,
        default_value_t = LogFormat::Json
    )]
    pub log_format: LogFormat,
}

pub use repowire_logs::LogFormat;

/// The dashboard's OpenID Connect settings, checked ([`RelayConfig::oidc`]). Its `Debug` leaves
/// the client secret out.
#[derive(Clone)]
pub struct OidcSettings {
    /// The issuer URL.
    pub issuer: String,
    /// The relay's client id.
    pub client_id: String,
    /// Its secret, if a confidential client.
    pub client_secret: Option<String>,
    /// The callback URL.
    pub redirect_url: String,
    /// The button's name.
    pub name: String,
    /// Staff emails (lower case) and whether each may act (`admin:write`).
    pub staff: Vec<(String, bool)>,
}

impl std::fmt::Debug for OidcSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OidcSettings")
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret.as_ref().map(|_| "…"))
            .field("redirect_url", &self.redirect_url)
            .field("name", &self.name)
            .field("staff", &self.staff)
            .finish()
    }
}

impl RelayConfig {
    /// The OpenID Connect settings: `None` without an issuer; an error naming what is wrong
    /// when they are incomplete or malformed.
    pub fn oidc(&self) -> Result<Option<OidcSettings>, String> {
        let Some(issuer) = self.oidc_issuer.clone().filter(|i| !i.is_empty()) else {
            if !self.operator_staff.is_empty() {
                return Err(
                    "--operator-staff needs --oidc-issuer (staff sign in through it)".into(),
                );
            }
            return Ok(None);
        };
        let client_id = self
            .oidc_client_id
            .clone()
            .filter(|c| !c.is_empty())
            .ok_or("--oidc-issuer needs --oidc-client-id")?;
        let redirect_url = self
            .oidc_redirect_url
            .clone()
            .filter(|r| !r.is_empty())
            .ok_or("--oidc-issuer needs --oidc-redirect-url (…/dashboard/oidc/callback)")?;
        for (flag, url) in [
            ("--oidc-issuer", &issuer),
            ("--oidc-redirect-url", &redirect_url),
        ] {
            // Over plain HTTP anyone on the path could forge an identity (the provider's keys
            // and the code exchange travel in the clear): only on this machine.
            let loopback = ["http://127.0.0.1", "http://localhost", "http://[::1]"]
                .iter()
                .any(|prefix| {
                    url.strip_prefix(prefix)
                        .is_some_and(|rest| rest.is_empty() || rest.starts_with([':', '/']))
                });
            if !(url.starts_with("https://") || loopback) {
                return Err(format!(
                    "{flag} must be an https:// URL (http:// only on 127.0.0.1 or localhost), not `{url}`"
                ));
            }
        }
        if !redirect_url.ends_with("/dashboard/oidc/callback") {
            return Err(format!(
                "--oidc-redirect-url must end with /dashboard/oidc/callback, not `{redirect_url}`"
            ));
        }
        let mut staff = Vec::new();
        for entry in &self.operator_staff {
            let (email, scope) = entry.trim().split_once('=').ok_or_else(|| {
                format!("--operator-staff `{entry}`: write EMAIL=admin:read or EMAIL=admin:write")
            })?;
            let writes = match scope.trim() {
                "admin:read" => false,
                "admin:write" => true,
                other => {
                    return Err(format!(
                        "--operator-staff `{entry}`: `{other}` is neither admin:read nor admin:write"
                    ));
                }
            };
            if !email.contains('@') {
                return Err(format!(
                    "--operator-staff `{entry}`: `{email}` is not an email"
                ));
            }
            staff.push((email.trim().to_lowercase(), writes));
        }
        Ok(Some(OidcSettings {
            issuer,
            client_id,
            client_secret: self.oidc_client_secret.clone().filter(|s| !s.is_empty()),
            redirect_url,
            name: self.oidc_name.clone(),
            staff,
        }))
    }

    /// Settings suited to tests: embedded defaults, a fixed secret, short timeouts.
    pub fn for_tests() -> Self {
        let mut c = Config::parse_from(["repowire-relay"]).relay;
        c.listen = SocketAddr::from(([127, 0, 0, 1], 0));
        c.jwt_secret = Some("test-secret-test-secret-test-secret".into());
        c.admin_token = Some("test-admin-token".into());
        c.drain_timeout_secs = 5;
        c.redis_url = None;
        c
    }

    /// Duration helpers.
    pub fn token_ttl(&self) -> Duration {
        Duration::from_secs(self.token_ttl_secs)
    }
    /// Message TTL.
    pub fn message_ttl(&self) -> Duration {
        Duration::from_secs(self.message_ttl_secs)
    }
    /// Description TTL.
    pub fn description_ttl(&self) -> Duration {
        Duration::from_secs(self.description_ttl_secs)
    }
    /// Presence TTL.
    pub fn presence_ttl(&self) -> Duration {
        Duration::from_secs(self.presence_ttl_secs.max(3))
    }

    /// This pod's name on the bus.
    pub fn pod(&self) -> String {
        self.pod_id.clone().unwrap_or_else(|| {
            format!(
                "pod-{}",
                uuid::Uuid::new_v4()
                    .simple()
                    .to_string()
                    .get(..12)
                    .unwrap_or("x")
            )
        })
    }

    /// Drain timeout.
    pub fn drain_timeout(&self) -> Duration {
        Duration::from_secs(self.drain_timeout_secs)
    }

    /// Interval of the live-key check.
    pub fn key_check(&self) -> Duration {
        Duration::from_secs(self.key_check_secs.max(1))
    }
}
