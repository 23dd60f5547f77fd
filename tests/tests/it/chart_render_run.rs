//! Render-and-run: the Helm chart's relay Deployment, rendered by `helm template`, started as
//! the kubelet would start it — the rendered command, args and environment, nothing else
//! (Secret references resolved from the test's values, `fieldRef`s from the pod, volume mount
//! paths mapped to temporary directories) — then probed on its rendered readiness and liveness
//! paths and port, and used: two such pods on Postgres and Redis carry a message between two
//! clients, after the rendered migration Job has run to completion. A chart whose variable
//! names, commands, probes or ports do not match the binary fails here,
//! which `helm lint` cannot see. helm comes from scripts/check-chart (`--install`), run by
//! scripts/test before the tests.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use repowire_e2e::client::TestClient;
use repowire_e2e::fakekube::FakeKube;
use repowire_e2e::process::{TempDatabase, relay_bin};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::time::Instant;

const WAIT: Duration = repowire_e2e::SLOW_WAIT;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn helm() -> PathBuf {
    let path = std::env::var_os("REPOWIRE_HELM")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME").unwrap_or_default();
            PathBuf::from(home).join(".cache/repowire/tools/helm-v4.2.3/helm")
        });
    assert!(
        path.exists(),
        "no helm at {}: run scripts/check-chart --install (scripts/test does)",
        path.display()
    );
    path
}

/// `helm template` of the chart with `args`; every object.
fn render(args: &[&str]) -> Vec<Value> {
    let chart = repo().join("charts/repowire");
    let out = std::process::Command::new(helm())
        .args([
            "template",
            "rw",
            chart.to_str().unwrap(),
            "--namespace",
            "repowire",
        ])
        .args(args)
        .output()
        .expect("helm");
    assert!(
        out.status.success(),
        "helm template failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    serde_yaml::Deserializer::from_str(&text)
        .map(|doc| serde::Deserialize::deserialize(doc).expect("yaml"))
        .filter(|v: &Value| !v.is_null())
        .collect()
}

fn deployment<'a>(objects: &'a [Value], component: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| {
            o["kind"] == "Deployment"
                && o["metadata"]["labels"]["app.kubernetes.io/component"] == component
        })
        .unwrap_or_else(|| panic!("no {component} Deployment rendered"))
}

/// One container of a rendered Deployment, run as a process.
struct Pod {
    child: Child,
    port: u16,
    readiness: String,
    liveness: String,
    _volumes: Vec<tempfile::TempDir>,
}

/// Starts the first container of a rendered pod (a Deployment's, a Job's, or a Pod) as pod
/// `name`, with `secrets` as the cluster's Secrets ((name, key) → value) and `cluster` as what
/// the kubelet adds (access to the API server).
fn launch(
    d: &Value,
    name: &str,
    secrets: &HashMap<(&str, &str), String>,
    cluster: &[(&str, String)],
) -> (Child, Vec<tempfile::TempDir>) {
    let spec = if d["kind"] == "Pod" {
        &d["spec"]
    } else {
        &d["spec"]["template"]["spec"]
    };
    let c = &spec["containers"][0];
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| a.iter().map(|s| s.as_str().unwrap().to_string()).collect())
            .unwrap_or_default()
    };
    let command = strings(&c["command"]);
    assert_eq!(command.len(), 1, "one executable: {command:?}");
    // The kubelet mounts each volume at its path; here each path is a fresh directory.
    let mut volumes = Vec::new();
    let mut mounts = Vec::new();
    for m in c["volumeMounts"].as_array().into_iter().flatten() {
        let dir = tempfile::tempdir().unwrap();
        // A Secret volume holds one file per key of the Secret.
        let volume = spec["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == m["name"])
            .expect("the mount's volume");
        if let Some(secret) = volume["secret"]["secretName"].as_str() {
            for ((s, k), v) in secrets {
                if *s == secret {
                    std::fs::write(dir.path().join(k), v).unwrap();
                }
            }
        }
        mounts.push((
            m["mountPath"].as_str().unwrap().to_string(),
            dir.path().to_str().unwrap().to_string(),
        ));
        volumes.push(dir);
    }
    let mut env = Vec::new();
    for e in c["env"].as_array().unwrap() {
        let key = e["name"].as_str().unwrap().to_string();
        let value = if let Some(v) = e["value"].as_str() {
            let mut v = v.to_string();
            for (path, dir) in &mounts {
                if v == *path || v.starts_with(&format!("{path}/")) {
                    v = v.replacen(path.as_str(), dir, 1);
                }
            }
            v
        } else if let Some(r) = e["valueFrom"].get("secretKeyRef") {
            let (s, k) = (r["name"].as_str().unwrap(), r["key"].as_str().unwrap());
            secrets
                .get(&(s, k))
                .unwrap_or_else(|| {
                    panic!("the chart reads Secret {s}/{k}, which the values did not name")
                })
                .clone()
        } else {
            match e["valueFrom"]["fieldRef"]["fieldPath"].as_str() {
                Some("metadata.name") => name.to_string(),
                Some("metadata.namespace") => "repowire".to_string(),
                other => panic!("unexpected env source {other:?} for {key}"),
            }
        };
        env.push((key, value));
    }
    let bin = relay_bin().parent().unwrap().join(&command[0]);
    let mut child = Command::new(&bin)
        .args(strings(&c["args"]))
        .env_clear()
        .envs(env)
        // What the kubelet gives every pod besides: access to the API server.
        .envs(cluster.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("start {}: {e}", bin.display()));
    for out in [
        Box::new(child.stdout.take().unwrap()) as Box<dyn tokio::io::AsyncRead + Unpin + Send>,
        Box::new(child.stderr.take().unwrap()),
    ] {
        let name = name.to_string();
        tokio::spawn(async move {
            let mut lines = BufReader::new(out).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                eprintln!("[{name}] {line}");
            }
        });
    }
    (child, volumes)
}

impl Pod {
    /// [`launch`]es a Deployment's container; its probes are those rendered.
    fn start(
        d: &Value,
        name: &str,
        secrets: &HashMap<(&str, &str), String>,
        cluster: &[(&str, String)],
    ) -> Self {
        let c = &d["spec"]["template"]["spec"]["containers"][0];
        let named_port = |probe: &Value| -> (String, u16) {
            let get = &probe["httpGet"];
            let port = match &get["port"] {
                Value::String(n) => c["ports"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|p| p["name"] == *n)
                    .and_then(|p| p["containerPort"].as_u64())
                    .unwrap_or_else(|| panic!("probe port {n} is not a container port")),
                other => other.as_u64().unwrap(),
            };
            (get["path"].as_str().unwrap().to_string(), port as u16)
        };
        let (readiness, port) = named_port(&c["readinessProbe"]);
        let (liveness, live_port) = named_port(&c["livenessProbe"]);
        assert_eq!(port, live_port);
        let (child, volumes) = launch(d, name, secrets, cluster);
        Self {
            child,
            port,
            readiness,
            liveness,
            _volumes: volumes,
        }
    }

    fn http(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    async fn status(&self, path: &str) -> Option<u16> {
        let r = reqwest::get(format!("{}{path}", self.http())).await.ok()?;
        Some(r.status().as_u16())
    }

    /// Waits until the rendered readiness probe passes; then the liveness probe must too.
    async fn ready(&mut self) {
        let deadline = Instant::now() + WAIT;
        while self.status(&self.readiness).await != Some(200) {
            if let Ok(Some(exit)) = self.child.try_wait() {
                panic!("the pod exited: {exit}");
            }
            assert!(
                Instant::now() < deadline,
                "never ready on {}",
                self.readiness
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(self.status(&self.liveness).await, Some(200), "liveness");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_relay_pods_as_rendered_carry_a_message() {
    let db = TempDatabase::create("repowire_chart");
    let redis = repowire_e2e::redis_url();
    let prefix = format!("chart-{}", uuid::Uuid::new_v4().simple());
    let admin_token = format!("chart-admin-{}", uuid::Uuid::new_v4().simple());
    let mut secrets: HashMap<(&str, &str), String> = HashMap::from([
        (("repowire-db", "url"), db.url()),
        (("repowire-redis", "url"), redis),
        (
            ("repowire-jwt", "secret"),
            "chart-test-secret-chart-test-secret".into(),
        ),
        (("repowire-admin", "token"), admin_token.clone()),
    ]);
    let values = repo().join("charts/repowire/ci/run-values.yaml");

    // The pre-install hook first: the migration Job, run as rendered, to completion.
    let objects = render(&["-f", values.to_str().unwrap()]);
    let job = objects
        .iter()
        .find(|o| o["kind"] == "Job")
        .expect("a migration Job with Postgres");
    assert_eq!(
        job["metadata"]["annotations"]["helm.sh/hook"],
        "pre-install,pre-upgrade"
    );
    let (mut migrate, _volumes) = launch(job, "rw-relay-migrate", &secrets, &[]);
    let done = tokio::time::timeout(WAIT, migrate.wait())
        .await
        .expect("the migration Job did not finish")
        .unwrap();
    assert!(done.success(), "the migration Job failed: {done}");
    // One render per pod: on one machine the two pods need two ports.
    let mut pods = Vec::new();
    for name in ["rw-relay-a", "rw-relay-b"] {
        let port = repowire_e2e::free_port().to_string();
        let objects = render(&[
            "-f",
            values.to_str().unwrap(),
            "--set",
            &format!("relay.port={port}"),
            "--set",
            &format!("relay.settings.redisPrefix={prefix}"),
        ]);
        let relay = deployment(&objects, "relay");
        assert_eq!(relay["spec"]["replicas"], 2);
        let mut pod = Pod::start(relay, name, &secrets, &[]);
        pod.ready().await;
        pods.push(pod);
    }

    // The admin API (its token from the referenced Secret): a tenant and a key.
    let http = reqwest::Client::new();
    let admin = |path: &str| format!("{}/admin/v1{path}", pods[0].http());
    let created = http
        .post(admin("/tenants"))
        .bearer_auth(&admin_token)
        .json(&serde_json::json!({"name": "chart"}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status().as_u16(), 201, "{:?}", created.text().await);
    let key: Value = http
        .post(admin("/tenants/chart/keys"))
        .bearer_auth(&admin_token)
        .json(&serde_json::json!({"label": "chart test"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let key = key["api_key"].as_str().expect("the key text").to_string();

    // A message from a client on pod a to a client on pod b.
    let ws = |p: &Pod| format!("ws://127.0.0.1:{}/v1/ws", p.port);
    let mut a = TestClient::connect(&pods[0].http(), &ws(&pods[0]), &key).await;
    let mut b = TestClient::connect(&pods[1].http(), &ws(&pods[1]), &key).await;
    let alice = a.peer("alice", "dev").await;
    let bob = b.peer("bob", "dev").await;
    let sent = a
        .notify(&alice, bob.peer_id.as_str(), "through the chart")
        .await
        .expect("accepted");
    let got = b.delivered_to(&bob.peer_id).await;
    assert_eq!(got.message.message_id, sent.message_id);
    assert_eq!(got.message.text, "through the chart");

    // `helm test`: the rendered test Pod (its relay URL pointed at pod b) checks the relay
    // with the key, from its referenced Secret.
    secrets.insert(("repowire-test-key", "key"), key.clone());
    let objects = render(&[
        "-f",
        values.to_str().unwrap(),
        "--set",
        "helmTest.enabled=true,helmTest.apiKey.secretName=repowire-test-key,helmTest.apiKey.key=key",
        "--set",
        &format!("helmTest.relayUrl={}", pods[1].http()),
    ]);
    let test_pod = objects
        .iter()
        .find(|o| o["kind"] == "Pod" && o["metadata"]["annotations"]["helm.sh/hook"] == "test")
        .expect("the helm test Pod");
    let (mut check, _home) = launch(test_pod, "rw-relay-check", &secrets, &[]);
    let done = tokio::time::timeout(WAIT, check.wait())
        .await
        .expect("the helm test did not finish")
        .unwrap();
    assert!(done.success(), "helm test failed: {done}");

    // The operator as rendered, against a fake API server (see operator/tests/kmock), pointed
    // at pod a (a Service name does not resolve here), with the admin token file from the
    // referenced Secret: ready, and a Tenant object becomes a relay tenant.
    let kube = FakeKube::start("repowire").await;
    let op_port = repowire_e2e::free_port().to_string();
    let objects = render(&[
        "-f",
        values.to_str().unwrap(),
        "--set",
        "operator.enabled=true",
        "--set",
        "operator.adminToken.secretName=repowire-admin,operator.adminToken.key=token",
        "--set",
        &format!("operator.relayUrl={}", pods[0].http()),
        "--set",
        "operator.watchNamespace=team-a",
        "--set",
        &format!("operator.port={op_port}"),
    ]);
    let mut operator = Pod::start(
        deployment(&objects, "operator"),
        "rw-operator-0",
        &secrets,
        &[(
            "KUBECONFIG",
            kube.kubeconfig().to_string_lossy().into_owned(),
        )],
    );
    operator.ready().await;
    let tenants = format!(
        "{}/apis/repowire.io/v1alpha1/namespaces/team-a/tenants",
        kube.url
    );
    let posted = http
        .post(&tenants)
        .json(&serde_json::json!({
            "apiVersion": "repowire.io/v1alpha1", "kind": "Tenant",
            "metadata": {"name": "from-k8s"}, "spec": {"plan": "team"}
        }))
        .send()
        .await
        .unwrap();
    assert!(posted.status().is_success());
    let deadline = Instant::now() + WAIT;
    let id = loop {
        let t: Value = http
            .get(format!("{tenants}/from-k8s"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if let Some(id) = t["status"]["tenantId"].as_str() {
            break id.to_string();
        }
        assert!(
            Instant::now() < deadline,
            "the Tenant was never created: {t}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let relay_tenant: Value = http
        .get(admin(&format!("/tenants/{id}")))
        .bearer_auth(&admin_token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(relay_tenant["name"], "from-k8s");
    assert_eq!(relay_tenant["plan"], "team");
}
