//! The frame the real-CLI approval tests share: a person's `laptop` on relay pod A runs an
//! agent CLI with approvals on, and the same person's `desk` on pod B (one Postgres, one Redis)
//! allows one gated shell call and denies the next.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;
use tokio::task::JoinHandle;

use crate::agents::Home;
use crate::process::{RelayProcess, TempDatabase};

/// Two machines on two pods, `laptop` set up for one runtime with Bash gated for 60 s.
pub struct GatedPair {
    /// The machine whose agent's calls are gated; its daemon runs.
    pub laptop: Home,
    /// The machine where the person decides; installed and running.
    pub desk: Home,
    /// `app` in laptop's home: the agent's working directory (so its peer name is `app`).
    pub project: PathBuf,
    // Dropped after the daemons: the pods, then their database.
    _pods: [RelayProcess; 2],
    _db: TempDatabase,
}

impl GatedPair {
    /// Starts both pods on a database named after `db`; `prepare` writes the CLI's offline
    /// configuration into laptop's home (given the project) before `repowire setup --runtime
    /// RUNTIME --approvals --gated-tools Bash --approval-timeout 60 EXTRA…`, whose output is
    /// returned with the pair.
    pub async fn start(
        db: &str,
        runtime: &str,
        extra: &[&str],
        prepare: impl FnOnce(&Home, &Path),
    ) -> (Self, String) {
        let db = TempDatabase::create(db);
        let redis = crate::redis_url();
        let prefix = crate::redis_prefix();
        let pod_a = RelayProcess::start_pod(&db.url(), &redis, &prefix, "pod-a", &[]).await;
        let pod_b = RelayProcess::start_pod(&db.url(), &redis, &prefix, "pod-b", &[]).await;
        let key = pod_a
            .first_key
            .clone()
            .or(pod_b.first_key.clone())
            .expect("one pod bootstrapped a key");
        let laptop = Home::new(Some((pod_a.http.clone(), key.clone())));
        let desk = Home::new(Some((pod_b.http.clone(), key)));
        let project = laptop.path().join("app");
        std::fs::create_dir_all(&project).expect("project");
        prepare(&laptop, &project);
        let mut setup = vec![
            "setup",
            "--non-interactive",
            "--runtime",
            runtime,
            "--approvals",
            "--gated-tools",
            "Bash",
            "--approval-timeout",
            "60",
        ];
        setup.extend_from_slice(extra);
        let said = laptop.ok(&setup);
        laptop.ok(&["daemon", "start"]);
        desk.install_and_start();
        let pair = GatedPair {
            laptop,
            desk,
            project,
            _pods: [pod_a, pod_b],
            _db: db,
        };
        (pair, said)
    }

    /// `run(prompt)` starts the CLI on laptop with a prompt that makes the mock model call its
    /// shell tool. `RUN-SHELL touch allowed.txt` must wait on desk as a `Bash` approval from
    /// `app`, whose peer is a `backend` session, and run once desk allows it;
    /// `RUN-SHELL touch denied.txt` must not run once desk denies it "not today". Returns the
    /// denied run's output (the caller checks what its CLI told the model).
    pub async fn allow_then_deny(
        &self,
        backend: &str,
        run: impl Fn(&'static str) -> JoinHandle<Output>,
    ) -> Output {
        let allowed_run = run("RUN-SHELL touch allowed.txt");
        let q = self.desk.approvals_waiting(1).await.remove(0);
        assert_eq!(q["from"]["name"], "app", "{q}");
        let peers = self.desk.json(&["peer", "list"]);
        let app = peers
            .as_array()
            .and_then(|a| a.iter().find(|p| p["peer_id"] == q["from"]["peer_id"]))
            .cloned()
            .unwrap_or_default();
        assert_eq!(app["backend"], backend, "{peers}");
        // Asked by the name the approvals use, with the CLI's command.
        assert!(
            q["text"]
                .as_str()
                .is_some_and(|t| t.starts_with("Bash: touch allowed.txt\nin ")),
            "{q}"
        );
        assert!(
            !self.project.join("allowed.txt").exists(),
            "ran before a decision"
        );
        self.decide(&q, &["allow"]);
        let out = allowed_run.await.expect("the allowed run");
        assert!(out.status.success(), "{out:?}");
        assert!(
            self.project.join("allowed.txt").exists(),
            "the allowed call ran"
        );

        let denied_run = run("RUN-SHELL touch denied.txt");
        let q = self.desk.approvals_waiting(1).await.remove(0);
        self.decide(&q, &["deny", "--reason", "not today"]);
        let out = denied_run.await.expect("the denied run");
        assert!(
            !self.project.join("denied.txt").exists(),
            "the denied call ran"
        );
        out
    }

    /// `repowire approvals VERB ID ARGS…` on desk, as a person in a terminal.
    fn decide(&self, q: &Value, verb_and_args: &[&str]) {
        let cid = q["correlation_id"].as_str().expect("correlation id");
        let mut args = vec!["approvals", verb_and_args[0], cid];
        args.extend_from_slice(&verb_and_args[1..]);
        let out = self.desk.in_terminal(&args);
        assert!(out.status.success(), "{out:?}");
    }
}
