//! ApiKey reconciles against a scripted API server (every call asserted) and a real relay.

use crate::support;

use std::sync::Arc;

use repowire_operator::crd::{ApiKey, Limits};
use repowire_operator::reconcile::apikey;
use repowire_operator::relay::NewTenant;
use serde_json::json;
use support::*;

/// A relay tenant, a Tenant object recording it, and an ApiKey object for it.
async fn setup(relay: &Relay, api: &ApiServer, spec: repowire_operator::crd::ApiKeySpec) -> String {
    let tenant = relay
        .admin
        .create_tenant(&NewTenant {
            name: "team-a",
            plan: None,
            display_name: None,
            overrides: &Limits::default(),
        })
        .await
        .expect("tenant");
    api.put(&tenant_path("team-a"), ready_tenant("team-a", &tenant.id));
    api.put(&key_path("agent"), key_object("agent", spec));
    tenant.id
}

async fn reconcile(
    api: &ApiServer,
    ctx: &Arc<repowire_operator::context::Context>,
) -> Result<kube::runtime::controller::Action, repowire_operator::context::Error> {
    let key: ApiKey = api.typed(&key_path("agent"));
    apikey::reconcile(Arc::new(key), ctx.clone()).await
}

fn lines(calls: &[Call]) -> Vec<String> {
    calls.iter().map(Call::line).collect()
}

#[tokio::test]
async fn a_new_api_key_gets_its_finalizer_first() {
    let relay = Relay::start().await;
    let api = ApiServer::default();
    setup(&relay, &api, key_spec("team-a")).await;
    let mut obj = api.get(&key_path("agent")).unwrap();
    obj["metadata"]["finalizers"] = json!(null);
    api.put(&key_path("agent"), obj);
    let ctx = context(&api, relay.admin.clone(), &relay.process.http);
    let before = relay.admin.calls();
    reconcile(&api, &ctx).await.expect("reconcile");
    let calls = api.take_calls();
    assert_eq!(lines(&calls), [format!("PATCH {}", key_path("agent"))]);
    assert!(calls[0].content_type.contains("json-patch"));
    assert_eq!(
        api.get(&key_path("agent")).unwrap()["metadata"]["finalizers"],
        json!(["repowire.io/api-key"])
    );
    assert_eq!(
        relay.admin.calls(),
        before,
        "no relay call before the finalizer is in place"
    );
}

#[tokio::test]
async fn a_key_is_minted_into_an_owned_secret_and_then_left_alone() {
    let relay = Relay::start().await;
    let api = ApiServer::default();
    let tenant_id = setup(&relay, &api, key_spec("team-a")).await;
    let ctx = context(&api, relay.admin.clone(), "https://relay.example");
    reconcile(&api, &ctx).await.expect("reconcile");
    let calls = api.take_calls();
    assert_eq!(
        lines(&calls),
        [
            format!("GET {}", tenant_path("team-a")),
            format!("GET {}", secret_path("agent-key")),
            format!("PATCH {}/status", key_path("agent")),
            format!("PATCH {}", secret_path("agent-key")),
            format!("PATCH {}/status", key_path("agent")),
            format!("POST {EVENTS}"),
        ]
    );
    // The pending marker is written before the relay is asked.
    let pending = &calls[2].body["status"]["pendingMint"];
    assert!(
        pending["idempotencyKey"]
            .as_str()
            .unwrap()
            .starts_with("k8s-uid-key-agent-g0-m1"),
        "{pending}"
    );
    assert!(
        calls[3].query.contains("fieldManager=repowire-operator")
            && calls[3].query.contains("force=true")
    );

    let secret = api.get(&secret_path("agent-key")).expect("secret");
    assert_eq!(secret["type"], "Opaque");
    let owner = &secret["metadata"]["ownerReferences"][0];
    assert_eq!(
        (
            owner["kind"].as_str(),
            owner["uid"].as_str(),
            owner["controller"].as_bool(),
            owner["blockOwnerDeletion"].as_bool()
        ),
        (
            Some("ApiKey"),
            Some("uid-key-agent"),
            Some(true),
            Some(true)
        )
    );
    let text = secret_value(&secret, "apiKey");
    assert_eq!(secret_value(&secret, "REPOWIRE_API_KEY"), text);
    assert_eq!(secret_value(&secret, "relayUrl"), "https://relay.example");
    assert_eq!(
        secret_value(&secret, "REPOWIRE_RELAY_URL"),
        "https://relay.example"
    );
    assert_eq!(
        relay.token_status(&text).await,
        200,
        "the minted key works at /v1/token"
    );

    let key: ApiKey = api.typed(&key_path("agent"));
    let status = key.status.clone().expect("status");
    assert_eq!(
        secret_value(&secret, "keyId"),
        status.key_id.clone().unwrap()
    );
    assert!(status.pending_mint.is_none());
    assert_eq!(
        status
            .conditions
            .iter()
            .find(|c| c.type_ == "Ready")
            .map(|c| c.status.as_str()),
        Some("True")
    );
    assert!(text.starts_with(status.prefix.as_deref().unwrap()));
    // The key never appears in a status or an event.
    for call in &calls {
        if !call.path.contains("/secrets/") {
            assert!(
                !call.body.to_string().contains(&text),
                "the key leaked into {}",
                call.line()
            );
        }
    }
    assert_eq!(relay.keys(&tenant_id).await.len(), 1);
    // An ApiKey that names no scopes gets the relay's default, which never approves.
    assert_eq!(relay.key_scopes(&tenant_id).await, ["connect usage:read"]);

    // Everything in place: the next reconcile reads, calls no relay and writes nothing.
    let before = relay.admin.calls();
    reconcile(&api, &ctx).await.expect("reconcile");
    assert_eq!(
        lines(&api.take_calls()),
        [
            format!("GET {}", tenant_path("team-a")),
            format!("GET {}", secret_path("agent-key"))
        ]
    );
    assert_eq!(relay.admin.calls(), before);
}

#[tokio::test]
async fn a_crash_between_mint_and_secret_write_makes_no_second_key() {
    let relay = Relay::start().await;
    let api = ApiServer::default();
    let tenant_id = setup(&relay, &api, key_spec("team-a")).await;
    let ctx = context(&api, relay.admin.clone(), &relay.process.http);
    // The Secret write fails after the relay made the key: the reconcile ends in error with the
    // pending marker on the object.
    api.fail_next("PATCH", &secret_path("agent-key"), 500);
    reconcile(&api, &ctx)
        .await
        .expect_err("the Secret write failed");
    let key: ApiKey = api.typed(&key_path("agent"));
    assert!(key.status.as_ref().unwrap().pending_mint.is_some());
    let made = relay.keys(&tenant_id).await;
    assert_eq!(made.len(), 1);
    api.take_calls();

    // A new operator process (fresh context) retries: the same key comes back.
    let ctx = context(&api, relay.admin.clone(), &relay.process.http);
    reconcile(&api, &ctx).await.expect("retry");
    let secret = api.get(&secret_path("agent-key")).expect("secret");
    assert_eq!(secret_value(&secret, "keyId"), made[0].0);
    assert_eq!(
        relay.token_status(&secret_value(&secret, "apiKey")).await,
        200
    );
    assert_eq!(relay.keys(&tenant_id).await, made, "still exactly one key");
    let key: ApiKey = api.typed(&key_path("agent"));
    assert_eq!(
        key.status.unwrap().key_id.as_deref(),
        Some(made[0].0.as_str())
    );
}

#[tokio::test]
async fn a_replay_after_the_window_revokes_the_undelivered_key_and_mints_another() {
    let relay = Relay::start_with(&[("REPOWIRE_KEY_REPLAY_WINDOW_SECS", "0")]).await;
    let api = ApiServer::default();
    let tenant_id = setup(&relay, &api, key_spec("team-a")).await;
    let ctx = context(&api, relay.admin.clone(), &relay.process.http);
    api.fail_next("PATCH", &secret_path("agent-key"), 500);
    reconcile(&api, &ctx)
        .await
        .expect_err("the Secret write failed");
    let first = relay.keys(&tenant_id).await;
    // The retry learns the key exists but its text is gone: that key is revoked.
    reconcile(&api, &ctx).await.expect("retry");
    let key: ApiKey = api.typed(&key_path("agent"));
    let ready = key
        .status
        .as_ref()
        .unwrap()
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .unwrap()
        .clone();
    assert_eq!(ready.reason, "MintOutcomeLost");
    assert_eq!(
        relay.keys(&tenant_id).await,
        vec![(first[0].0.clone(), false)]
    );
    // The next reconcile mints a fresh key under a new idempotency key.
    reconcile(&api, &ctx).await.expect("mint again");
    let keys = relay.keys(&tenant_id).await;
    assert_eq!(keys.len(), 2);
    assert_eq!(
        keys.iter().filter(|(_, usable)| *usable).count(),
        1,
        "never two live keys: {keys:?}"
    );
    let secret = api.get(&secret_path("agent-key")).expect("secret");
    assert_eq!(
        relay.token_status(&secret_value(&secret, "apiKey")).await,
        200
    );
}

#[tokio::test]
async fn rotation_replaces_the_key_and_revokes_the_old_one_after_the_grace_period() {
    let relay = Relay::start().await;
    let api = ApiServer::default();
    let mut spec = key_spec("team-a");
    spec.rotation.grace_period_seconds = 0;
    let tenant_id = setup(&relay, &api, spec).await;
    let ctx = context(&api, relay.admin.clone(), &relay.process.http);
    reconcile(&api, &ctx).await.expect("mint");
    let old_text = secret_value(&api.get(&secret_path("agent-key")).unwrap(), "apiKey");

    let mut obj = api.get(&key_path("agent")).unwrap();
    obj["spec"]["rotation"]["rotationGeneration"] = json!(1);
    obj["metadata"]["generation"] = json!(2);
    api.put(&key_path("agent"), obj);
    api.take_calls();
    reconcile(&api, &ctx).await.expect("rotate");
    let new_text = secret_value(&api.get(&secret_path("agent-key")).unwrap(), "apiKey");
    assert_ne!(new_text, old_text);
    let key: ApiKey = api.typed(&key_path("agent"));
    let status = key.status.unwrap();
    assert!(status.previous_key_id.is_some() && status.last_rotated_at.is_some());
    assert_eq!(status.rotation_generation, Some(1));
    let events: Vec<_> = api
        .take_calls()
        .into_iter()
        .filter(|c| c.path == EVENTS)
        .collect();
    assert_eq!(events[0].body["reason"], "KeyRotated");

    // The grace period (0 s) is over: the next reconcile revokes the old key.
    reconcile(&api, &ctx).await.expect("revoke the old key");
    assert_eq!(relay.token_status(&new_text).await, 200);
    assert_eq!(relay.token_status(&old_text).await, 401);
    let key: ApiKey = api.typed(&key_path("agent"));
    assert!(key.status.unwrap().previous_key_id.is_none());
    assert_eq!(
        relay
            .keys(&tenant_id)
            .await
            .iter()
            .filter(|(_, u)| *u)
            .count(),
        1
    );
}

async fn delete_and_reconcile(
    api: &ApiServer,
    ctx: &Arc<repowire_operator::context::Context>,
    deleted_at: &str,
) {
    let mut obj = api.get(&key_path("agent")).unwrap();
    obj["metadata"]["deletionTimestamp"] = json!(deleted_at);
    api.put(&key_path("agent"), obj);
    api.take_calls();
    reconcile(api, ctx).await.expect("cleanup");
}

#[tokio::test]
async fn deletion_revokes_the_key_unless_retained() {
    for retain in [false, true] {
        let relay = Relay::start().await;
        let api = ApiServer::default();
        let mut spec = key_spec("team-a");
        if retain {
            spec.reclaim_policy = repowire_operator::crd::ReclaimPolicy::Retain;
        }
        setup(&relay, &api, spec).await;
        let ctx = context(&api, relay.admin.clone(), &relay.process.http);
        reconcile(&api, &ctx).await.expect("mint");
        let text = secret_value(&api.get(&secret_path("agent-key")).unwrap(), "apiKey");
        delete_and_reconcile(
            &api,
            &ctx,
            &repowire_operator::context::rfc3339(repowire_operator::context::now_ms()),
        )
        .await;
        let calls = api.take_calls();
        assert_eq!(
            lines(&calls),
            [
                format!("POST {EVENTS}"),
                format!("PATCH {}", key_path("agent"))
            ],
            "retain={retain}"
        );
        assert_eq!(
            calls[0].body["reason"],
            if retain { "KeyRetained" } else { "KeyRevoked" }
        );
        assert_eq!(
            api.get(&key_path("agent")).unwrap()["metadata"]["finalizers"],
            json!([])
        );
        assert_eq!(
            relay.token_status(&text).await,
            if retain { 200 } else { 401 },
            "retain={retain}"
        );
    }
}

#[tokio::test]
async fn a_relay_that_is_down_degrades_and_does_not_wedge_deletion_forever() {
    let relay = Relay::start().await;
    let api = ApiServer::default();
    setup(&relay, &api, key_spec("team-a")).await;
    let down = repowire_operator::relay::AdminClient::new(
        "http://127.0.0.1:9",
        ADMIN.into(),
        std::time::Duration::from_secs(2),
    )
    .unwrap();
    let ctx = context(&api, down, &relay.process.http);
    let error = reconcile(&api, &ctx).await.expect_err("relay down");
    assert_eq!(error.reason(), "RelayUnreachable");
    let key: ApiKey = api.typed(&key_path("agent"));
    let synced = key
        .status
        .unwrap()
        .conditions
        .into_iter()
        .find(|c| c.type_ == "Synced")
        .unwrap();
    assert_eq!(
        (synced.status.as_str(), synced.reason.as_str()),
        ("False", "RelayUnreachable")
    );
    // The mint it started is kept pending beside the failure: a later attempt (or the
    // deletion) resolves it under the same idempotency key.
    let status = api.typed::<ApiKey>(&key_path("agent")).status.unwrap();
    assert!(status.pending_mint.is_some(), "{status:?}");
    let action = apikey::error_policy(Arc::new(api.typed(&key_path("agent"))), &error, ctx.clone());
    assert_eq!(
        action,
        kube::runtime::controller::Action::requeue(std::time::Duration::from_secs(5))
    );

    // Deleting within the timeout keeps the finalizer (the reconcile fails and is retried)...
    let mut obj = api.get(&key_path("agent")).unwrap();
    obj["status"]["keyId"] = json!("key-x");
    obj["metadata"]["deletionTimestamp"] = json!(repowire_operator::context::rfc3339(
        repowire_operator::context::now_ms()
    ));
    api.put(&key_path("agent"), obj.clone());
    reconcile(&api, &ctx).await.expect_err("cannot revoke yet");
    assert_eq!(
        api.get(&key_path("agent")).unwrap()["metadata"]["finalizers"],
        json!(["repowire.io/api-key"])
    );
    // ...and past it, the object is let go with a warning event.
    obj["metadata"]["deletionTimestamp"] = json!(repowire_operator::context::rfc3339(
        repowire_operator::context::now_ms() - 301_000
    ));
    api.put(&key_path("agent"), obj);
    api.take_calls();
    reconcile(&api, &ctx).await.expect("let go");
    let calls = api.take_calls();
    let event = calls
        .iter()
        .find(|c| c.line() == format!("POST {EVENTS}"))
        .expect("an event");
    assert_eq!(event.body["reason"], "RevocationAbandoned");
    assert_eq!(event.body["type"], "Warning");
    assert_eq!(
        api.get(&key_path("agent")).unwrap()["metadata"]["finalizers"],
        json!([])
    );
}

#[tokio::test]
async fn a_key_revoked_by_hand_in_the_relay_shows_as_degraded() {
    let relay = Relay::start().await;
    let api = ApiServer::default();
    setup(&relay, &api, key_spec("team-a")).await;
    let ctx = context(&api, relay.admin.clone(), &relay.process.http);
    reconcile(&api, &ctx).await.expect("mint");
    let key: ApiKey = api.typed(&key_path("agent"));
    relay
        .admin
        .revoke_key(key.status.unwrap().key_id.as_deref().unwrap())
        .await
        .unwrap();
    // A new process has verified nothing yet: it checks the relay.
    let ctx = context(&api, relay.admin.clone(), &relay.process.http);
    api.take_calls();
    reconcile(&api, &ctx).await.expect("observe");
    let key: ApiKey = api.typed(&key_path("agent"));
    let ready = key
        .status
        .unwrap()
        .conditions
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "Degraded")
    );
    let events: Vec<_> = api
        .take_calls()
        .into_iter()
        .filter(|c| c.path == EVENTS)
        .collect();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].body["type"], "Warning");

    // With remintIfRevoked the next reconcile mints a working key.
    let mut obj = api.get(&key_path("agent")).unwrap();
    obj["spec"]["remintIfRevoked"] = json!(true);
    api.put(&key_path("agent"), obj);
    reconcile(&api, &ctx).await.expect("remint");
    let text = secret_value(&api.get(&secret_path("agent-key")).unwrap(), "apiKey");
    assert_eq!(relay.token_status(&text).await, 200);
}

#[tokio::test]
async fn a_key_waits_for_its_tenant() {
    let relay = Relay::start().await;
    let api = ApiServer::default();
    api.put(&key_path("agent"), key_object("agent", key_spec("later")));
    let ctx = context(&api, relay.admin.clone(), &relay.process.http);
    let action = reconcile(&api, &ctx).await.expect("reconcile");
    assert_eq!(
        action,
        kube::runtime::controller::Action::requeue(std::time::Duration::from_secs(15))
    );
    let key: ApiKey = api.typed(&key_path("agent"));
    let ready = key
        .status
        .unwrap()
        .conditions
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert_eq!(ready.reason, "TenantNotReady");
    assert_eq!(relay.admin.calls(), 0);
}

/// `approve` is asked for by name (issue 35.11): the CRD can name it, and the request carries it.
#[test]
fn an_api_key_asks_for_approve_only_by_name() {
    use repowire_operator::crd::Scope;
    let mut spec = key_spec("team-a");
    let (body, _) = apikey::request(&ApiKey::new("agent", spec.clone()));
    assert!(body.get("scopes").is_none(), "{body}");
    spec.scopes = Some(vec![Scope::Connect, Scope::Approve]);
    let (body, _) = apikey::request(&ApiKey::new("person", spec));
    assert_eq!(body["scopes"], json!(["approve", "connect"]));
}
