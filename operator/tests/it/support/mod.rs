//! Test harness: a scripted Kubernetes API server on a tower-test mock channel (it keeps the
//! objects it is given and records every request, so a test asserts the exact calls), and a
//! real `repowire-relay` process on loopback with embedded storage.

#![allow(dead_code, unreachable_pub)]

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Request, Response};
use kube::client::Body;
use repowire_e2e::process::{RelayProcess, relay_bin};
use repowire_operator::context::{Context, Settings};
use repowire_operator::crd::{
    ApiKey, ApiKeySpec, ReclaimPolicy, Rotation, Tenant, TenantRef, TenantSpec,
};
use repowire_operator::metrics::Metrics;
use repowire_operator::relay::AdminClient;
use serde_json::{Value, json};

pub const NS: &str = "team-a";
pub const ADMIN: &str = "operator-test-admin-token-0123456789";

/// One request the operator made.
#[derive(Debug, Clone)]
pub struct Call {
    pub method: String,
    pub path: String,
    pub query: String,
    pub content_type: String,
    pub body: Value,
}

impl Call {
    /// `METHOD /path`.
    pub fn line(&self) -> String {
        format!("{} {}", self.method, self.path)
    }
}

#[derive(Default)]
struct State {
    objects: BTreeMap<String, Value>,
    calls: Vec<Call>,
    /// `METHOD path` → statuses to answer instead, in order.
    failures: HashMap<String, Vec<u16>>,
    version: u64,
}

/// The fake API server.
#[derive(Clone, Default)]
pub struct ApiServer {
    state: Arc<Mutex<State>>,
}

pub fn tenant_path(name: &str) -> String {
    format!("/apis/repowire.io/v1alpha1/namespaces/{NS}/tenants/{name}")
}
pub fn key_path(name: &str) -> String {
    format!("/apis/repowire.io/v1alpha1/namespaces/{NS}/apikeys/{name}")
}
pub fn secret_path(name: &str) -> String {
    format!("/api/v1/namespaces/{NS}/secrets/{name}")
}
pub const EVENTS: &str = "/apis/events.k8s.io/v1/namespaces/team-a/events";

fn status_body(code: u16, reason: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": reason, "reason": reason, "code": code})
}

impl ApiServer {
    /// A client talking to this server.
    pub fn client(&self) -> kube::Client {
        let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let me = self.clone();
        tokio::spawn(async move {
            while let Some((request, send)) = handle.next_request().await {
                let (status, body) = me.answer(request).await;
                let response = Response::builder()
                    .status(status)
                    .header("content-type", "application/json")
                    .body(Body::from(serde_json::to_vec(&body).expect("json")))
                    .expect("response");
                send.send_response(response);
            }
        });
        kube::Client::new(service, NS)
    }

    /// Stores an object at its path.
    pub fn put(&self, path: &str, object: Value) {
        self.state
            .lock()
            .unwrap()
            .objects
            .insert(path.to_string(), object);
    }

    /// The object at `path`.
    pub fn get(&self, path: &str) -> Option<Value> {
        self.state.lock().unwrap().objects.get(path).cloned()
    }

    /// The object at `path`, typed.
    pub fn typed<K: serde::de::DeserializeOwned>(&self, path: &str) -> K {
        serde_json::from_value(
            self.get(path)
                .unwrap_or_else(|| panic!("no object at {path}")),
        )
        .expect("object")
    }

    /// Every call so far, and forgets them.
    pub fn take_calls(&self) -> Vec<Call> {
        std::mem::take(&mut self.state.lock().unwrap().calls)
    }

    /// Answers the next `METHOD path` with `status` instead.
    pub fn fail_next(&self, method: &str, path: &str, status: u16) {
        self.state
            .lock()
            .unwrap()
            .failures
            .entry(format!("{method} {path}"))
            .or_default()
            .push(status);
    }

    async fn answer(&self, request: Request<Body>) -> (u16, Value) {
        let method = request.method().to_string();
        let path = request.uri().path().to_string();
        let query = request.uri().query().unwrap_or_default().to_string();
        let content_type = request
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let bytes = request.into_body().collect_bytes().await.expect("body");
        let body: Value = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).expect("json body")
        };
        let mut state = self.state.lock().unwrap();
        state.calls.push(Call {
            method: method.clone(),
            path: path.clone(),
            query,
            content_type: content_type.clone(),
            body: body.clone(),
        });
        if let Some(list) = state.failures.get_mut(&format!("{method} {path}"))
            && !list.is_empty()
        {
            let code = list.remove(0);
            return (code, status_body(code, "InternalError"));
        }
        state.version += 1;
        let version = state.version.to_string();
        match method.as_str() {
            "GET" => match state
                .objects
                .get(path.strip_suffix("/status").unwrap_or(&path))
            {
                Some(o) => (200, o.clone()),
                None => (404, status_body(404, "NotFound")),
            },
            "POST" => {
                let mut o = body;
                o["metadata"]["resourceVersion"] = json!(version);
                (201, o)
            }
            "PATCH" => {
                let (target, is_status) = match path.strip_suffix("/status") {
                    Some(p) => (p.to_string(), true),
                    None => (path.clone(), false),
                };
                let mut current = state.objects.get(&target).cloned();
                let updated = if content_type.contains("json-patch") {
                    let Some(mut doc) = current.take() else {
                        return (404, status_body(404, "NotFound"));
                    };
                    let patch: json_patch::Patch =
                        serde_json::from_value(body).expect("json patch");
                    if json_patch::patch(&mut doc, &patch).is_err() {
                        return (422, status_body(422, "Invalid"));
                    }
                    doc
                } else if is_status {
                    let Some(mut doc) = current.take() else {
                        return (404, status_body(404, "NotFound"));
                    };
                    // A version in the body is a precondition.
                    let wanted = &body["metadata"]["resourceVersion"];
                    if !wanted.is_null() && *wanted != doc["metadata"]["resourceVersion"] {
                        return (409, status_body(409, "Conflict"));
                    }
                    // Server-side apply of the whole status: what is left out goes.
                    doc["status"] = body["status"].clone();
                    doc
                } else {
                    // Server-side apply of a whole object (a Secret): what the operator owns.
                    let mut doc = body;
                    if let Some(old) = current {
                        doc["metadata"]["uid"] = old["metadata"]["uid"].clone();
                    }
                    doc
                };
                let mut updated = updated;
                updated["metadata"]["resourceVersion"] = json!(version);
                state.objects.insert(target, updated.clone());
                (200, updated)
            }
            _ => (405, status_body(405, "MethodNotAllowed")),
        }
    }
}

/// A real relay on loopback, embedded storage, with an admin credential.
pub struct Relay {
    pub process: RelayProcess,
    pub admin: AdminClient,
    _dir: tempfile::TempDir,
}

impl Relay {
    pub async fn start() -> Self {
        Self::start_with(&[]).await
    }

    pub async fn start_with(env: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().expect("data dir");
        let data_dir = dir.path().to_str().expect("utf-8").to_string();
        let mut all = vec![
            ("REPOWIRE_ADMIN_TOKEN", ADMIN),
            (
                "REPOWIRE_JWT_SECRET",
                "operator-test-secret-operator-test-secret",
            ),
        ];
        all.extend_from_slice(env);
        let process = RelayProcess::start(&relay_bin(), &["--data-dir", &data_dir], &all).await;
        let admin =
            AdminClient::new(&process.http, ADMIN.into(), Duration::from_secs(5)).expect("client");
        Self {
            process,
            admin,
            _dir: dir,
        }
    }

    /// What `POST /v1/token` answers for a key: its status.
    pub async fn token_status(&self, api_key: &str) -> u16 {
        match repowire_e2e::client::token(&self.process.http, api_key).await {
            Ok(_) => 200,
            Err((status, _)) => status,
        }
    }

    /// The relay's page of a tenant's keys (`GET /admin/v1/tenants/{tenant}/keys`).
    async fn key_items(&self, tenant: &str) -> Vec<Value> {
        let body: Value = reqwest::Client::new()
            .get(format!(
                "{}/admin/v1/tenants/{tenant}/keys",
                self.process.http
            ))
            .bearer_auth(ADMIN)
            .send()
            .await
            .expect("keys")
            .json()
            .await
            .expect("json");
        body["items"].as_array().expect("items").clone()
    }

    /// The scopes of each key of a tenant, as the relay stores them.
    pub async fn key_scopes(&self, tenant: &str) -> Vec<String> {
        self.key_items(tenant)
            .await
            .iter()
            .map(|k| k["scopes"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// The ids of a tenant's keys, and which are usable now.
    pub async fn keys(&self, tenant: &str) -> Vec<(String, bool)> {
        let now = repowire_operator::context::now_ms();
        self.key_items(tenant)
            .await
            .iter()
            .map(|k| {
                let usable = k["revoked_at_ms"].is_null()
                    && k["expires_at_ms"].as_i64().is_none_or(|e| e > now);
                (k["id"].as_str().unwrap_or_default().to_string(), usable)
            })
            .collect()
    }
}

pub fn settings(public_url: &str) -> Settings {
    Settings {
        resync: Duration::from_secs(300),
        usage_interval: Duration::from_secs(300),
        deletion_timeout: Duration::from_secs(300),
        public_relay_url: public_url.to_string(),
    }
}

/// A context on the fake API server and the given relay client.
pub fn context(api: &ApiServer, relay: AdminClient, public_url: &str) -> Arc<Context> {
    Arc::new(Context::new(
        api.client(),
        relay,
        settings(public_url),
        Arc::new(Metrics::default()),
        kube::runtime::events::Reporter {
            controller: "repowire-operator".into(),
            instance: Some("test".into()),
        },
    ))
}

pub fn tenant_object(name: &str, spec: TenantSpec, finalizer: bool) -> Value {
    let mut t = Tenant::new(name, spec);
    t.metadata.namespace = Some(NS.into());
    t.metadata.uid = Some(format!("uid-tenant-{name}"));
    t.metadata.generation = Some(1);
    if finalizer {
        t.metadata.finalizers = Some(vec!["repowire.io/tenant".into()]);
    }
    let mut v = serde_json::to_value(t).expect("tenant");
    if !finalizer {
        // As the API server shows an object without finalizers to a JSON-patch `test`.
        v["metadata"]["finalizers"] = Value::Null;
    }
    v
}

pub fn tenant_spec(plan: Option<&str>) -> TenantSpec {
    TenantSpec {
        tenant_name: None,
        display_name: Some("Team A".into()),
        plan: plan.map(str::to_string),
        limits: None,
        suspended: false,
        reclaim_policy: ReclaimPolicy::Retain,
    }
}

pub fn key_spec(tenant: &str) -> ApiKeySpec {
    ApiKeySpec {
        tenant_ref: TenantRef {
            name: tenant.into(),
        },
        label: None,
        scopes: None,
        expires_at: None,
        secret_name: "agent-key".into(),
        secret_metadata: None,
        rotation: Rotation::default(),
        remint_if_revoked: false,
        reclaim_policy: ReclaimPolicy::Delete,
    }
}

pub fn key_object(name: &str, spec: ApiKeySpec) -> Value {
    let mut k = ApiKey::new(name, spec);
    k.metadata.namespace = Some(NS.into());
    k.metadata.uid = Some(format!("uid-key-{name}"));
    k.metadata.generation = Some(1);
    k.metadata.finalizers = Some(vec!["repowire.io/api-key".into()]);
    serde_json::to_value(k).expect("api key")
}

/// A Tenant object (with a finalizer) whose status records relay tenant `tenant_id`.
pub fn ready_tenant(name: &str, tenant_id: &str) -> Value {
    let mut t = tenant_object(name, tenant_spec(None), true);
    t["status"] = json!({"tenantId": tenant_id, "conditions": []});
    t
}

/// A data value of a stored Secret.
pub fn secret_value(secret: &Value, key: &str) -> String {
    use base64::Engine;
    let b64 = secret["data"][key]
        .as_str()
        .unwrap_or_else(|| panic!("no {key} in the Secret"));
    String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(b64)
            .expect("base64"),
    )
    .expect("utf-8")
}
