//! Starting and stopping real `repowire-relay` processes on loopback.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
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
    /// The API key this process bootstrapped on an empty database (written to its bootstrap
    /// key file, never printed), if it did.
    pub first_key: Option<String>,
    logs: Arc<Mutex<Vec<String>>>,
    _scratch: tempfile::TempDir,
}

impl RelayProcess {
    /// Starts `repowire-relay` with `--listen 127.0.0.1:0` and extra args/env, and waits for it
    /// to log its address. Unless `env` names one, the relay gets a bootstrap key file of its
    /// own, read into [`RelayProcess::first_key`].
    pub async fn start(bin: &Path, args: &[&str], env: &[(&str, &str)]) -> Self {
        Self::start_on(bin, "127.0.0.1:0", args, env).await
    }

    /// Like [`RelayProcess::start`], on a given address (to restart on the same port).
    pub async fn start_on(bin: &Path, listen: &str, args: &[&str], env: &[(&str, &str)]) -> Self {
        let scratch = tempfile::tempdir().expect("scratch dir");
        let key_file = scratch.path().join("bootstrap-api-key");
        let mut cmd = Command::new(bin);
        cmd.args(["--listen", listen, "--log-format", "json"])
            .args(args)
            .env_remove("DATABASE_URL")
            .env("RUST_LOG", "info")
            .env("REPOWIRE_BOOTSTRAP_KEY_FILE", &key_file)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        for (k, v) in env {
            // An empty value unsets the variable (clap refuses an empty path).
            if v.is_empty() {
                cmd.env_remove(k);
            } else {
                cmd.env(k, v);
            }
        }
        let mut child = cmd.spawn().expect("spawn repowire-relay");
        let logs = Arc::new(Mutex::new(Vec::new()));
        // Every line is kept (for tests that read the logs); stderr is echoed to the test's, so a
        // failing test shows what the relay said. With REPOWIRE_RELAY_LOG=path the lines are
        // kept there too.
        let keep_file = std::env::var_os("REPOWIRE_RELAY_LOG").and_then(|p| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .ok()
        });
        let keep = Arc::new(Mutex::new(keep_file));
        let (addr_tx, addr_rx) = tokio::sync::oneshot::channel();
        let stdout = BufReader::new(child.stdout.take().expect("stdout")).lines();
        tokio::spawn(drain(stdout, logs.clone(), keep.clone(), Some(addr_tx)));
        let stderr = BufReader::new(child.stderr.take().expect("stderr")).lines();
        tokio::spawn(drain(stderr, logs.clone(), keep, None));
        let addr = tokio::time::timeout(Duration::from_secs(30), addr_rx)
            .await
            .expect("relay did not start within 30 s")
            .unwrap_or_else(|_| {
                panic!(
                    "repowire-relay exited before listening:\n{}",
                    logs.lock().expect("logs").join("\n")
                )
            });
        let first_key = std::fs::read_to_string(&key_file)
            .ok()
            .map(|k| k.trim().to_owned());
        Self {
            child,
            http: format!("http://{addr}"),
            ws: format!("ws://{addr}/v1/ws"),
            first_key,
            logs,
            _scratch: scratch,
        }
    }

    /// Everything the process printed so far, stdout and stderr, one line each.
    pub fn logs(&self) -> String {
        self.logs.lock().expect("logs").join("\n")
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
        Self::start_pod_on(
            "127.0.0.1:0",
            database_url,
            redis_url,
            prefix,
            pod,
            extra_env,
        )
        .await
    }

    /// Like [`RelayProcess::start_pod`], on a given address (to restart a pod on its port).
    pub async fn start_pod_on(
        listen: &str,
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
        Self::start_on(&relay_bin(), listen, &[], &env).await
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

/// Runs `repowire-relay admin ARGS` on the Postgres database at `database_url` and returns
/// its standard output, trimmed; panics with its standard error if it fails.
pub fn admin(database_url: &str, args: &[&str]) -> String {
    let out = std::process::Command::new(relay_bin())
        .arg("admin")
        .args(args)
        .env("DATABASE_URL", database_url)
        .output()
        .expect("run repowire-relay admin");
    assert!(
        out.status.success(),
        "repowire-relay admin {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The id of the key labelled `label` among a tenant's keys (`admin key list --json`).
pub fn key_id_labelled(database_url: &str, tenant: &str, label: &str) -> String {
    let listed: serde_json::Value =
        serde_json::from_str(&admin(database_url, &["key", "list", tenant, "--json"]))
            .expect("key list as JSON");
    listed
        .as_array()
        .and_then(|keys| keys.iter().find(|k| k["label"] == label))
        .and_then(|k| k["id"].as_str())
        .unwrap_or_else(|| panic!("no key labelled {label}: {listed}"))
        .to_owned()
}

/// Reads a relay's output lines into `logs` (and `keep`), and sends the address it logs it
/// listens on through `addr`.
async fn drain<R: tokio::io::AsyncBufRead + Unpin>(
    mut lines: tokio::io::Lines<R>,
    logs: Arc<Mutex<Vec<String>>>,
    keep: Arc<Mutex<Option<std::fs::File>>>,
    mut addr: Option<tokio::sync::oneshot::Sender<String>>,
) {
    let echo = addr.is_none();
    while let Ok(Some(line)) = lines.next_line().await {
        if echo {
            eprintln!("[relay] {line}");
        }
        if let Some(f) = keep.lock().expect("keep").as_mut() {
            use std::io::Write;
            let _ = writeln!(f, "{line}");
        }
        if let Some(found) = serde_json::from_str::<serde_json::Value>(line.trim())
            .ok()
            .and_then(|json| json.get("addr").and_then(|a| a.as_str()).map(str::to_owned))
            && let Some(tx) = addr.take()
        {
            let _ = tx.send(found);
        }
        logs.lock().expect("logs").push(line);
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

    /// Runs SQL in it with `psql`: the output, trimmed (asserts that psql succeeded).
    pub fn psql(&self, sql: &str) -> String {
        psql(&self.url(), sql)
    }
}

/// Runs SQL against a database URL with `psql -Atq`: the output, trimmed (asserts success).
pub fn psql(url: &str, sql: &str) -> String {
    let out = std::process::Command::new("psql")
        .args([url, "-Atqc", sql])
        .output()
        .expect("psql");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

impl Drop for TempDatabase {
    fn drop(&mut self) {
        let _ = std::process::Command::new("psql")
            .args(["-h", "127.0.0.1", "-U", "postgres", "-d", "postgres", "-qc"])
            .arg(format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.0))
            .output();
    }
}
