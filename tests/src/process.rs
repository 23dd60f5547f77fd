//! Starting and stopping real `repowire-relay` processes on loopback.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// The relay binary beside the running executable (`target/<profile>/repowire-relay`), or
/// `REPOWIRE_RELAY_BIN`.
pub fn relay_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("REPOWIRE_RELAY_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("current exe");
    let mut dir = exe.parent().expect("exe dir").to_path_buf();
    if dir.ends_with("deps") {
        dir.pop();
    }
    let bin = dir.join("repowire-relay");
    assert!(
        bin.exists(),
        "{} is missing: build it with `cargo build -p repowire-relay`",
        bin.display()
    );
    bin
}

/// A running relay process.
pub struct RelayProcess {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub http: String,
    /// `ws://127.0.0.1:PORT/v1/ws`.
    pub ws: String,
    /// The API key printed on first start, if it printed one.
    pub first_key: Option<String>,
}

impl RelayProcess {
    /// Starts `repowire-relay` with `--listen 127.0.0.1:0` and extra args/env, and waits for it
    /// to log its address.
    pub async fn start(bin: &Path, args: &[&str], env: &[(&str, &str)]) -> Self {
        Self::start_on(bin, "127.0.0.1:0", args, env).await
    }

    /// Like [`RelayProcess::start`], on a given address (to restart on the same port).
    pub async fn start_on(bin: &Path, listen: &str, args: &[&str], env: &[(&str, &str)]) -> Self {
        let mut cmd = Command::new(bin);
        cmd.args(["--listen", listen, "--log-format", "json"])
            .args(args)
            .env_remove("DATABASE_URL")
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn repowire-relay");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let mut first_key = None;
        let addr = tokio::time::timeout(Duration::from_secs(30), async {
            while let Some(line) = lines.next_line().await.expect("read stdout") {
                let trimmed = line.trim();
                if trimmed.starts_with("rw_live_") {
                    first_key = Some(trimmed.to_owned());
                }
                if let Ok(json) = serde_json::from_str::<serde_json::Value>(trimmed)
                    && let Some(addr) = json.get("addr").and_then(|a| a.as_str())
                {
                    return addr.to_owned();
                }
            }
            panic!("repowire-relay exited before listening");
        })
        .await
        .expect("relay did not start within 30 s");
        // Keep draining stdout so the relay never blocks on a full pipe; with
        // REPOWIRE_RELAY_LOG=path the lines are kept there for debugging.
        let mut keep = std::env::var_os("REPOWIRE_RELAY_LOG").and_then(|p| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .ok()
        });
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(f) = keep.as_mut() {
                    use std::io::Write;
                    let _ = writeln!(f, "{line}");
                }
            }
        });
        Self {
            child,
            http: format!("http://{addr}"),
            ws: format!("ws://{addr}/v1/ws"),
            first_key,
        }
    }

    /// One pod of a cluster: the relay on a shared Postgres database and Redis (`prefix`
    /// scopes its keys), named `pod`, with a JWT secret every pod of the tests shares.
    pub async fn start_pod(
        database_url: &str,
        redis_url: &str,
        prefix: &str,
        pod: &str,
        extra_env: &[(&str, &str)],
    ) -> Self {
        let mut env = vec![
            ("DATABASE_URL", database_url),
            ("REDIS_URL", redis_url),
            ("REPOWIRE_REDIS_PREFIX", prefix),
            ("REPOWIRE_POD_ID", pod),
            (
                "REPOWIRE_JWT_SECRET",
                "cluster-test-secret-cluster-test-secret",
            ),
        ];
        env.extend_from_slice(extra_env);
        Self::start(&relay_bin(), &[], &env).await
    }

    /// Process id.
    pub fn pid(&self) -> u32 {
        self.child.id().expect("running")
    }

    /// Sends a signal (`TERM`, `KILL` …).
    pub fn signal(&self, name: &str) {
        let status = std::process::Command::new("kill")
            .args([format!("-{name}"), self.pid().to_string()])
            .status()
            .expect("kill");
        assert!(status.success(), "kill -{name} failed");
    }

    /// Waits for the process to exit.
    pub async fn wait(mut self, within: Duration) -> std::process::ExitStatus {
        tokio::time::timeout(within, self.child.wait())
            .await
            .expect("relay did not exit in time")
            .expect("wait")
    }
}

/// A fresh Postgres database on the machine's server (127.0.0.1:5432, user postgres), dropped
/// when this is dropped.
pub struct TempDatabase(String);

impl TempDatabase {
    /// Creates it, named `{prefix}_<random>`.
    pub fn create(prefix: &str) -> Self {
        let name = format!("{prefix}_{}", uuid::Uuid::new_v4().simple());
        let out = std::process::Command::new("psql")
            .args(["-h", "127.0.0.1", "-U", "postgres", "-d", "postgres", "-qc"])
            .arg(format!("CREATE DATABASE {name}"))
            .output()
            .expect("psql");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        Self(name)
    }

    /// Its URL.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:5432/{}", self.0)
    }
}

impl Drop for TempDatabase {
    fn drop(&mut self) {
        let _ = std::process::Command::new("psql")
            .args(["-h", "127.0.0.1", "-U", "postgres", "-d", "postgres", "-qc"])
            .arg(format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.0))
            .output();
    }
}
