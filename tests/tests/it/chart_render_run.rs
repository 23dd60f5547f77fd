//! Render-and-run: the Helm chart's objects, rendered by `helm template`, started as the
//! kubelet would start them (tests/src/rendered.rs) — on this machine as processes, and in
//! scripts/test also in the container image under podman (`REPOWIRE_TEST_IMAGE`), with the
//! rendered user, read-only root filesystem and dropped capabilities. The migration Job runs
//! to completion; two relay pods on Postgres and Redis answer their rendered probes and carry
//! a message between two clients; the `helm test` Pod checks the relay; the operator turns a
//! Tenant and an ApiKey into a Secret whose key a laptop daemon on this machine connects with;
//! then one relay pod is killed mid-stream (`podman kill -s KILL`) and nothing is lost. A chart
//! whose variable names, commands, probes, ports or security settings do not match the binary
//! or the image fails here, which `helm lint` cannot see. helm comes from scripts/check-chart
//! (`--install`), run by scripts/test before the tests.

use std::time::Duration;

use repowire_e2e::agents::Home;
use repowire_e2e::client::TestClient;
use repowire_e2e::fakekube::FakeKube;
use repowire_e2e::process::TempDatabase;
use repowire_e2e::rendered::{
    Cluster, Runner, Running, deployment, launch, pod_spec, render, repo,
};
use serde_json::Value;
use tokio::time::Instant;

const WAIT: Duration = repowire_e2e::SLOW_WAIT;

/// One container of a rendered Deployment, running, with its rendered probes.
struct Pod {
    running: Running,
    port: u16,
    readiness: String,
    liveness: String,
}

impl Pod {
    /// [`launch`]es a Deployment's container; its probes are those rendered.
    fn start(d: &Value, name: &str, cluster: &Cluster, runner: &Runner) -> Self {
        let c = &pod_spec(d)["containers"][0];
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
        Self {
            running: launch(d, name, cluster, runner),
            port,
            readiness,
            liveness,
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
            if let Ok(Some(exit)) = self.running.child.try_wait() {
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
async fn the_chart_as_rendered_runs_the_ring_and_a_killed_relay_pod_loses_nothing() {
    let runner = Runner::from_env();
    eprintln!("running the rendered containers on: {runner:?}");
    let db = TempDatabase::create("repowire_chart");
    let redis = repowire_e2e::redis_url();
    let prefix = format!("chart-{}", uuid::Uuid::new_v4().simple());
    let admin_token = format!("chart-admin-{}", uuid::Uuid::new_v4().simple());
    let mut cluster = Cluster {
        secrets: [
            (("repowire-db", "url"), db.url()),
            (("repowire-redis", "url"), redis),
            (
                ("repowire-jwt", "secret"),
                "chart-test-secret-chart-test-secret".into(),
            ),
            (("repowire-admin", "token"), admin_token.clone()),
        ]
        .into(),
        files: Vec::new(),
    };
    let values = repo().join("charts/repowire/ci/run-values.yaml");
    let values = values.to_str().unwrap();

    // The pre-install hook first: the migration Job, run as rendered, to completion.
    let objects = render(&["-f", values]);
    let job = objects
        .iter()
        .find(|o| o["kind"] == "Job")
        .expect("a migration Job with Postgres");
    assert_eq!(
        job["metadata"]["annotations"]["helm.sh/hook"],
        "pre-install,pre-upgrade"
    );
    let mut migrate = launch(job, "rw-relay-migrate", &cluster, &runner);
    let done = tokio::time::timeout(WAIT, migrate.wait())
        .await
        .expect("the migration Job did not finish");
    assert!(done.success(), "the migration Job failed: {done}");

    // One render per pod: on one machine (one network) the two pods need two ports.
    let mut pods = Vec::new();
    for name in ["rw-relay-a", "rw-relay-b"] {
        let port = repowire_e2e::free_port().to_string();
        let objects = render(&[
            "-f",
            values,
            "--set",
            &format!("relay.port={port}"),
            "--set",
            &format!("relay.settings.redisPrefix={prefix}"),
        ]);
        let relay = deployment(&objects, "relay");
        assert_eq!(relay["spec"]["replicas"], 2);
        let mut pod = Pod::start(relay, name, &cluster, &runner);
        pod.ready().await;
        pods.push(pod);
    }

    // The admin API (its token from the referenced Secret): a tenant and a key.
    let http = reqwest::Client::new();
    let admin = |path: &str| format!("{}/admin/v1{path}", pods[0].http());
    let created = http
        .post(admin("/tenants"))
        .bearer_auth(&admin_token)
        .json(&serde_json::json!({"name": "chart", "plan": "unlimited"}))
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
    {
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
    }

    // `helm test`: the rendered test Pod (its relay URL pointed at pod b) checks the relay
    // with the key, from its referenced Secret.
    cluster
        .secrets
        .insert(("repowire-test-key", "key"), key.clone());
    let objects = render(&[
        "-f",
        values,
        "--set",
        "helmTest.enabled=true,helmTest.apiKey.secretName=repowire-test-key,helmTest.apiKey.key=key",
        "--set",
        &format!("helmTest.relayUrl={}", pods[1].http()),
    ]);
    let test_pod = objects
        .iter()
        .find(|o| o["kind"] == "Pod" && o["metadata"]["annotations"]["helm.sh/hook"] == "test")
        .expect("the helm test Pod");
    let mut check = launch(test_pod, "rw-relay-check", &cluster, &runner);
    let done = tokio::time::timeout(WAIT, check.wait())
        .await
        .expect("the helm test did not finish");
    assert!(done.success(), "helm test failed: {done}");

    // The operator as rendered, against a fake API server (see operator/tests/kmock), pointed
    // at pod a (a Service name does not resolve here), with the admin token file from the
    // referenced Secret, and the public relay URL given as a WebSocket URL (what a
    // self-hoster may well write; the client reads it as http://).
    let kube = FakeKube::start("repowire").await;
    cluster.files.push(("KUBECONFIG", kube.kubeconfig()));
    let op_port = repowire_e2e::free_port().to_string();
    let objects = render(&[
        "-f",
        values,
        "--set",
        "operator.enabled=true",
        "--set",
        "operator.adminToken.secretName=repowire-admin,operator.adminToken.key=token",
        "--set",
        &format!("operator.relayUrl={}", pods[0].http()),
        "--set",
        &format!("operator.publicRelayUrl=ws://127.0.0.1:{}", pods[1].port),
        "--set",
        "operator.watchNamespace=team-a",
        "--set",
        &format!("operator.port={op_port}"),
    ]);
    let mut operator = Pod::start(
        deployment(&objects, "operator"),
        "rw-operator-0",
        &cluster,
        &runner,
    );
    operator.ready().await;
    let laptop_key = operator_mints_a_key(&kube, &http, &admin_token, &admin("")).await;

    // The laptop: a daemon on this machine, set up with exactly what the Secret holds.
    let home = Home::new(None);
    home.ok(&[
        "setup",
        "--non-interactive",
        "--relay-url",
        &laptop_key.url,
        "--api-key",
        &laptop_key.key,
    ]);
    home.ok(&["daemon", "start"]);
    let deadline = Instant::now() + WAIT;
    loop {
        let status = home.json(&["daemon", "status"]);
        if status["link"]["state"] == "connected" {
            break;
        }
        assert!(Instant::now() < deadline, "never connected: {status:#}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    home.ok(&["daemon", "stop"]);

    // Pod b killed mid-stream, as a node failure would: every accepted message still arrives.
    let (a, b) = (&pods[0], &pods[1]);
    let (a_http, a_ws, b_http, b_ws) = (a.http(), ws(a), b.http(), ws(b));
    let victim = &mut pods[1].running;
    let report =
        repowire_e2e::stream::across_a_lost_pod((&a_http, &a_ws), (&b_http, &b_ws), &key, || {
            victim.kill()
        })
        .await;
    eprintln!("pod b killed ({runner:?}): {report}");
}

/// What a key Secret the operator wrote gives a laptop.
struct LaptopKey {
    url: String,
    key: String,
}

/// Applies a Tenant and an ApiKey in namespace team-a, as `kubectl apply` would; waits for the
/// tenant on the relay (checked through the admin API at `admin`) and for the key's Secret;
/// returns what the Secret holds.
async fn operator_mints_a_key(
    kube: &FakeKube,
    http: &reqwest::Client,
    admin_token: &str,
    admin: &str,
) -> LaptopKey {
    use base64::Engine;
    let namespaced = |kind: &str| {
        format!(
            "{}/apis/repowire.io/v1alpha1/namespaces/team-a/{kind}",
            kube.url
        )
    };
    let apply = |kind: &str, body: Value| {
        let url = namespaced(kind);
        async move {
            let posted = http.post(&url).json(&body).send().await.unwrap();
            assert!(posted.status().is_success(), "{:?}", posted.text().await);
        }
    };
    apply(
        "tenants",
        serde_json::json!({
            "apiVersion": "repowire.io/v1alpha1", "kind": "Tenant",
            "metadata": {"name": "from-k8s"}, "spec": {"plan": "team"}
        }),
    )
    .await;
    apply(
        "apikeys",
        serde_json::json!({
            "apiVersion": "repowire.io/v1alpha1", "kind": "ApiKey",
            "metadata": {"name": "laptop"},
            "spec": {"tenantRef": {"name": "from-k8s"}, "secretName": "laptop-key"}
        }),
    )
    .await;
    let get = |url: String| async move {
        http.get(url)
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap()
    };
    let deadline = Instant::now() + WAIT;
    let id = loop {
        let t = get(format!("{}/from-k8s", namespaced("tenants"))).await;
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
        .get(format!("{admin}/tenants/{id}"))
        .bearer_auth(admin_token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(relay_tenant["name"], "from-k8s");
    assert_eq!(relay_tenant["plan"], "team");
    let secret_url = format!("{}/api/v1/namespaces/team-a/secrets/laptop-key", kube.url);
    let secret = loop {
        let s = get(secret_url.clone()).await;
        if s["data"]["REPOWIRE_API_KEY"].is_string() {
            break s;
        }
        assert!(Instant::now() < deadline, "no key Secret: {s}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let field = |name: &str| {
        let encoded = secret["data"][name]
            .as_str()
            .unwrap_or_else(|| panic!("no {name}"));
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .expect("base64");
        String::from_utf8(bytes).expect("utf8")
    };
    LaptopKey {
        url: field("REPOWIRE_RELAY_URL"),
        key: field("REPOWIRE_API_KEY"),
    }
}
