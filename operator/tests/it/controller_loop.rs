//! The loop test: real `repowire-operator run` processes (kube-runtime controllers, leader
//! election, health server) against an in-memory fake Kubernetes API server over HTTP (PyPI
//! kmock with our glue, `tests/kmock/server.py`; scripts/test installs it and sets
//! `REPOWIRE_KMOCK_PYTHON`) and a real relay on loopback. Objects are applied the way `kubectl`
//! would; what the test checks is what a user sees: a Secret appears holding a key that works
//! at `/v1/token`, and deleting the object revokes it.

use crate::support;

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client};
use repowire_e2e::fakekube::FakeKube;
use repowire_operator::crd::{ApiKey, ReclaimPolicy, Tenant};
use support::{ADMIN, NS, Relay, key_spec, tenant_spec};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::time::Instant;

const WAIT: Duration = repowire_e2e::SLOW_WAIT;

/// Polls `check` until it holds, for at most [`WAIT`].
async fn until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + WAIT;
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A kube client of the fake API server.
async fn client(fake: &FakeKube) -> Client {
    let config = kube::Config::from_custom_kubeconfig(
        Kubeconfig::read_from(fake.kubeconfig()).unwrap(),
        &KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    assert!(config.cluster_url.to_string().starts_with(&fake.url));
    Client::try_from(config).unwrap()
}

/// One `repowire-operator run` process.
struct Replica {
    child: Child,
    identity: String,
    listen: String,
    logs: Arc<Mutex<Vec<String>>>,
}

impl Replica {
    async fn start(kube: &FakeKube, relay: &Relay, identity: &str) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_repowire-operator"))
            .arg("run")
            .env("KUBECONFIG", kube.kubeconfig())
            .env("REPOWIRE_OPERATOR_RELAY_URL", &relay.process.http)
            .env("REPOWIRE_OPERATOR_ADMIN_TOKEN", ADMIN)
            .env("REPOWIRE_OPERATOR_NAMESPACE", NS)
            .env("REPOWIRE_OPERATOR_LISTEN", "127.0.0.1:0")
            // Renewed 2 s before expiry: room for a loaded machine; a takeover after a clean
            // stop waits at most this long.
            .env("REPOWIRE_OPERATOR_LEASE_SECS", "6")
            .env("POD_NAMESPACE", NS)
            .env("POD_NAME", identity)
            .env("RUST_LOG", "info,repowire_operator=debug,kube_client=debug")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start repowire-operator");
        let logs = Arc::new(Mutex::new(Vec::new()));
        let (listen_tx, listen_rx) = tokio::sync::oneshot::channel();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let (kept, name) = (logs.clone(), identity.to_string());
        tokio::spawn(async move {
            let mut listen_tx = Some(listen_tx);
            while let Ok(Some(line)) = lines.next_line().await {
                eprintln!("[{name}] {line}");
                if let Some(listen) = serde_json::from_str::<serde_json::Value>(&line)
                    .ok()
                    .and_then(|v| v["listen"].as_str().map(str::to_string))
                    && let Some(tx) = listen_tx.take()
                {
                    let _ = tx.send(listen);
                }
                kept.lock().unwrap().push(line);
            }
        });
        let listen = tokio::time::timeout(WAIT, listen_rx)
            .await
            .expect("the operator did not start")
            .expect("the operator exited before listening");
        Self {
            child,
            identity: identity.to_string(),
            listen,
            logs,
        }
    }

    async fn get(&self, path: &str) -> Option<(u16, String)> {
        let response = reqwest::get(format!("http://{}{path}", self.listen))
            .await
            .ok()?;
        let status = response.status().as_u16();
        Some((status, response.text().await.ok()?))
    }

    /// The sum of a metric's samples (`None` if the replica does not answer).
    async fn metric(&self, name: &str) -> Option<f64> {
        let (_, text) = self.get("/metrics").await?;
        Some(
            text.lines()
                .filter(|l| l.starts_with(name) && !l.starts_with('#'))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum(),
        )
    }

    async fn leads(&self) -> bool {
        self.metric("repowire_operator_leader").await == Some(1.0)
    }

    /// Says it does not lead (it answers, with the gauge at 0).
    async fn follows(&self) -> bool {
        self.metric("repowire_operator_leader").await == Some(0.0)
    }

    /// Reconciles so far (`None` if it does not answer).
    async fn reconciles(&self) -> Option<f64> {
        self.metric("repowire_operator_reconciles_total").await
    }

    /// SIGTERM, then the exit status.
    async fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().expect("running").to_string();
        let killed = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .await
            .unwrap();
        assert!(killed.success());
        tokio::time::timeout(WAIT, self.child.wait())
            .await
            .expect("the operator did not stop on SIGTERM")
            .unwrap()
    }

    fn logged(&self, needle: &str) -> bool {
        self.logs.lock().unwrap().iter().any(|l| l.contains(needle))
    }
}

fn tenant(name: &str, reclaim: ReclaimPolicy) -> Tenant {
    let mut spec = tenant_spec(Some("team"));
    spec.reclaim_policy = reclaim;
    Tenant::new(name, spec)
}

/// The API key in a Secret, once it holds one.
async fn secret_key(secrets: &Api<Secret>, name: &str) -> Option<String> {
    let secret = secrets.get_opt(name).await.ok()??;
    let bytes = secret.data?.get("apiKey")?.0.clone();
    String::from_utf8(bytes).ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn applied_objects_get_a_working_key_in_a_secret_and_deleting_revokes_it() {
    let kube = FakeKube::start(NS).await;
    let relay = Relay::start().await;
    let replica = Replica::start(&kube, &relay, "operator-0").await;
    // Health first: alive at once, ready once it has joined the election.
    assert_eq!(replica.get("/healthz").await.map(|r| r.0), Some(200));
    until("ready", || async {
        replica.get("/readyz").await.map(|r| r.0) == Some(200)
    })
    .await;

    let client = client(&kube).await;
    let tenants: Api<Tenant> = Api::namespaced(client.clone(), NS);
    let keys: Api<ApiKey> = Api::namespaced(client.clone(), NS);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    tenants
        .create(
            &PostParams::default(),
            &tenant("team-a", ReclaimPolicy::Delete),
        )
        .await
        .unwrap();
    keys.create(
        &PostParams::default(),
        &ApiKey::new("agent", key_spec("team-a")),
    )
    .await
    .unwrap();

    // A Secret appears, owned by the ApiKey, holding a key the relay accepts.
    until("the Secret", || async {
        secret_key(&secrets, "agent-key").await.is_some()
    })
    .await;
    let key = secret_key(&secrets, "agent-key").await.unwrap();
    assert!(key.starts_with("rw_"), "not an API key");
    assert_eq!(relay.token_status(&key).await, 200);
    let secret = secrets.get("agent-key").await.unwrap();
    let owner = &secret.metadata.owner_references.unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("ApiKey", "agent")
    );
    until("the ApiKey Ready", || async {
        keys.get("agent")
            .await
            .ok()
            .and_then(|k| k.status)
            .is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
            })
    })
    .await;
    let status = keys.get("agent").await.unwrap().status.unwrap();
    let prefix = status.prefix.clone().expect("prefix in status");
    assert!(key.starts_with(&prefix) && prefix.len() < key.len());
    let tenant_id = tenants
        .get("team-a")
        .await
        .unwrap()
        .status
        .and_then(|s| s.tenant_id)
        .expect("tenant id in status");
    // The key never shows up in status or events.
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), NS);
    let listed = || async {
        serde_json::to_string(&events.list(&Default::default()).await.unwrap()).unwrap()
    };
    until("events about the key", || async {
        listed().await.contains("KeyMinted")
    })
    .await;
    assert!(!listed().await.contains(&key));
    assert!(!serde_json::to_string(&status).unwrap().contains(&key));

    // Delete the ApiKey: the finalizer revokes the key, then the object (and its Secret) go.
    keys.delete("agent", &DeleteParams::default())
        .await
        .unwrap();
    until("the ApiKey gone", || async {
        keys.get_opt("agent").await.unwrap().is_none()
    })
    .await;
    assert_eq!(relay.token_status(&key).await, 401, "revoked");
    until("the Secret collected", || async {
        secrets.get_opt("agent-key").await.unwrap().is_none()
    })
    .await;

    // Delete the Tenant (reclaimPolicy delete): gone in the relay too.
    tenants
        .delete("team-a", &DeleteParams::default())
        .await
        .unwrap();
    until("the Tenant gone", || async {
        tenants.get_opt("team-a").await.unwrap().is_none()
    })
    .await;
    let deleted = relay.admin.get_tenant(&tenant_id).await.unwrap();
    assert!(deleted.deleted_at_ms.is_some(), "{deleted:?}");

    assert!(!replica.logged(&key), "the key reached the logs");
    assert!(
        replica.terminate().await.success(),
        "a clean exit on SIGTERM"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_share_one_lease_only_the_leader_reconciles_and_the_other_takes_over() {
    let kube = FakeKube::start(NS).await;
    let relay = Relay::start().await;
    let a = Replica::start(&kube, &relay, "operator-a").await;
    let b = Replica::start(&kube, &relay, "operator-b").await;
    let client = client(&kube).await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), NS);
    let holder = || async {
        leases
            .get_opt("repowire-operator")
            .await
            .unwrap()
            .and_then(|l| l.spec?.holder_identity)
    };
    until("a leader", || async { a.leads().await || b.leads().await }).await;
    let (leader, follower) = if a.leads().await { (a, b) } else { (b, a) };
    assert_eq!(holder().await.as_deref(), Some(leader.identity.as_str()));
    assert!(follower.follows().await, "both lead");
    // Both are ready: the follower can take over at any time.
    assert_eq!(follower.get("/readyz").await.map(|r| r.0), Some(200));

    let tenants: Api<Tenant> = Api::namespaced(client.clone(), NS);
    let keys: Api<ApiKey> = Api::namespaced(client.clone(), NS);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    tenants
        .create(
            &PostParams::default(),
            &tenant("team-a", ReclaimPolicy::Retain),
        )
        .await
        .unwrap();
    keys.create(
        &PostParams::default(),
        &ApiKey::new("agent", key_spec("team-a")),
    )
    .await
    .unwrap();
    until("the Secret", || async {
        secret_key(&secrets, "agent-key").await.is_some()
    })
    .await;
    let first = secret_key(&secrets, "agent-key").await.unwrap();
    assert_eq!(relay.token_status(&first).await, 200);
    assert!(leader.reconciles().await.is_some_and(|n| n > 0.0));
    assert_eq!(
        follower.reconciles().await,
        Some(0.0),
        "the follower reconciled"
    );
    assert!(follower.follows().await);
    assert_eq!(relay.keys("team-a").await.len(), 1, "one key minted");

    // The leader stops (SIGTERM: it finishes, releases the Lease, exits 0); the other takes
    // over and reconciles what changes next: a rotation.
    assert!(leader.terminate().await.success());
    until("the takeover", || async { follower.leads().await }).await;
    assert_eq!(holder().await.as_deref(), Some(follower.identity.as_str()));
    let patch = serde_json::json!({"spec": {"rotation": {"rotationGeneration": 1, "gracePeriodSeconds": 0}}});
    keys.patch("agent", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    until("the rotated key", || async {
        secret_key(&secrets, "agent-key")
            .await
            .is_some_and(|k| k != first)
    })
    .await;
    let second = secret_key(&secrets, "agent-key").await.unwrap();
    assert_eq!(relay.token_status(&second).await, 200);
    until("the old key revoked", || async {
        relay.token_status(&first).await == 401
    })
    .await;
    assert!(follower.reconciles().await.is_some_and(|n| n > 0.0));
    assert!(follower.logged("leading: starting the controllers"));
    assert!(follower.terminate().await.success());
}
