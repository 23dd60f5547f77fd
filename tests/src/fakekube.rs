//! The in-memory fake Kubernetes API server (PyPI kmock with our glue,
//! `operator/tests/kmock/server.py`; scripts/test installs kmock and sets
//! `REPOWIRE_KMOCK_PYTHON`), as a process on loopback with a kubeconfig pointing at it.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// The fake API server; killed on drop.
#[derive(Debug)]
pub struct FakeKube {
    _child: Child,
    /// Its base URL (`http://127.0.0.1:PORT`).
    pub url: String,
    dir: tempfile::TempDir,
}

impl FakeKube {
    /// Starts one; its kubeconfig's default namespace is `namespace`.
    pub async fn start(namespace: &str) -> Self {
        let python = std::env::var("REPOWIRE_KMOCK_PYTHON").unwrap_or_else(|_| {
            let home = std::env::var("HOME").unwrap_or_default();
            format!("{home}/.cache/repowire/tools/kmock-0.8/bin/python")
        });
        assert!(
            std::path::Path::new(&python).exists(),
            "no kmock Python at {python}: run scripts/test once (it installs kmock), or set REPOWIRE_KMOCK_PYTHON"
        );
        let script =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../operator/tests/kmock/server.py");
        let mut child = Command::new(&python)
            .arg(&script)
            .arg("0")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("start the fake API server");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let first = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("the fake API server did not start")
            .expect("read")
            .expect("the fake API server exited");
        let url = first
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line: {first}"))
            .to_string();
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            dir.path().join("kubeconfig"),
            format!(
                "apiVersion: v1\nkind: Config\ncurrent-context: fake\n\
                 clusters: [{{name: fake, cluster: {{server: \"{url}\"}}}}]\n\
                 users: [{{name: test, user: {{token: test}}}}]\n\
                 contexts: [{{name: fake, context: {{cluster: fake, user: test, namespace: {namespace}}}}}]\n"
            ),
        )
        .expect("kubeconfig");
        Self {
            _child: child,
            url,
            dir,
        }
    }

    /// A kubeconfig pointing at it.
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("kubeconfig")
    }
}
