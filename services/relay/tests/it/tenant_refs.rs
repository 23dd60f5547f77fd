//! A `{tenant}` names one tenant, and only the one it says (issue 30, item 1). A tenant once
//! could be named with another tenant's id, and the store found tenants by `id = $1 OR name =
//! $1` with no order: the admin API then read, changed and minted keys for the wrong tenant,
//! and the limits enforcer held the victim's connections to the attacker's plan. Now a name
//! can never have an id's shape, and every lookup says whether it means an id or a name — so
//! even a row left from before (stored straight into the store here) cannot capture a route.

use crate::common;

use common::{Admin, Db, TestRelay};
use repowire_relay::ids::now_ms;
use repowire_relay::storage::store::{Limits, TenantKey, TenantRecord};
use serde_json::{Value, json};

both_backends!(
    a_tenant_name_with_the_shape_of_an_id_is_refused_and_nothing_is_stored,
    every_tenant_route_given_an_id_acts_on_that_tenant_only,
    the_limits_of_a_tenant_are_its_own_when_another_is_named_like_its_id,
);

/// The reproduction from the issue: `POST /tenants {"name": "<victim's id>"}` was 201.
async fn a_tenant_name_with_the_shape_of_an_id_is_refused_and_nothing_is_stored(db: Db) {
    let relay = TestRelay::start(&db).await;
    let admin = Admin::new(&relay);
    let (status, victim) = admin
        .post("/tenants", json!({"name": "victim", "plan": "team"}))
        .await;
    assert_eq!(status, 201, "{victim}");
    let victim_id = victim["id"].as_str().expect("id").to_owned();
    let before = admin.get("/tenants?limit=500").await.1["items"]
        .as_array()
        .expect("items")
        .len();

    for name in [
        victim_id.clone(),
        "tnt-0000000000000000".to_owned(),
        "TNT-anything".to_owned(),
        "Tnt-x".to_owned(),
    ] {
        let (status, body) = admin
            .post(
                "/tenants",
                json!({"name": name, "overrides": {"max_peers": 1}}),
            )
            .await;
        assert_eq!(status, 400, "{name}: {body}");
        assert_eq!(body["error"]["code"], "invalid_request", "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("tnt-")),
            "the refusal says why: {body}"
        );
    }
    // A name that merely contains the prefix later on is an ordinary name.
    assert_eq!(
        admin
            .post("/tenants", json!({"name": "my-tnt-team"}))
            .await
            .0,
        201
    );
    let after = admin.get("/tenants?limit=500").await.1["items"]
        .as_array()
        .expect("items")
        .len();
    assert_eq!(after, before + 1, "only the ordinary name was stored");
    relay.stop().await;
}

/// A row named with the victim's id, as an attacker made them before the fix (written
/// straight into the store: the API no longer takes such a name), on the `free` plan with
/// `max_peers = 1`. Returns (victim id, attacker id).
async fn victim_and_impostor(relay: &TestRelay, admin: &Admin) -> (String, String) {
    let (status, victim) = admin
        .post("/tenants", json!({"name": "victim", "plan": "team"}))
        .await;
    assert_eq!(status, 201, "{victim}");
    let victim_id = victim["id"].as_str().expect("id").to_owned();
    // Other tenants and changes move rows about (Postgres then returned either row for
    // `id = $1 OR name = $1`).
    for i in 0..10 {
        admin
            .post("/tenants", json!({"name": format!("t{i}")}))
            .await;
    }
    let impostor = TenantRecord {
        id: "tnt-impostor00000000".into(),
        name: victim_id.clone(),
        plan: "free".into(),
        created_at_ms: now_ms(),
        suspended_at_ms: None,
        deleted_at_ms: None,
        display_name: Some("impostor".into()),
        overrides: Limits {
            max_peers: Some(1),
            ..Default::default()
        },
    };
    relay
        .state
        .store
        .create_tenant(&impostor)
        .await
        .expect("store");
    for _ in 0..10 {
        admin
            .patch("/tenants/victim", json!({"display_name": "victim"}))
            .await;
    }
    (victim_id, impostor.id)
}

async fn every_tenant_route_given_an_id_acts_on_that_tenant_only(db: Db) {
    let relay = TestRelay::start(&db).await;
    let admin = Admin::new(&relay);
    let (victim, impostor) = victim_and_impostor(&relay, &admin).await;
    let at = |suffix: &str| format!("/tenants/{victim}{suffix}");

    // GET /tenants/{tenant}
    let (status, got) = admin.get(&at("")).await;
    assert_eq!((status, got["id"].as_str()), (200, Some(victim.as_str())));
    assert_eq!(got["plan"], "team", "{got}");
    // PATCH /tenants/{tenant}
    let (status, patched) = admin
        .patch(&at(""), json!({"display_name": "patched"}))
        .await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(patched["id"], victim.as_str());
    let impostor_row = |relay: &TestRelay| {
        let store = relay.state.store.clone();
        let id = impostor.clone();
        async move {
            store
                .find_tenant(TenantKey::Id(&id))
                .await
                .expect("db")
                .expect("impostor")
        }
    };
    assert_eq!(
        impostor_row(&relay).await.display_name.as_deref(),
        Some("impostor"),
        "the impostor's row is untouched"
    );
    // POST /tenants/{tenant}/keys and GET /tenants/{tenant}/keys
    let (status, key) = admin.post(&at("/keys"), json!({"label": "ops"})).await;
    assert_eq!(status, 201, "{key}");
    assert_eq!(key["key"]["tenant_id"], victim.as_str(), "{key}");
    let listed = admin.get(&at("/keys")).await.1;
    let tenants_of_keys: Vec<&Value> = listed["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|k| &k["tenant_id"])
        .collect();
    assert_eq!(tenants_of_keys, [&json!(victim)], "{listed}");
    assert_eq!(
        admin.get(&format!("/tenants/{impostor}/keys")).await.1["items"],
        json!([]),
        "no key was minted for the impostor"
    );
    // GET /tenants/{tenant}/usage
    let (status, usage) = admin.get(&at("/usage")).await;
    assert_eq!(status, 200, "{usage}");
    for period in usage["periods"].as_array().expect("periods") {
        assert_eq!(period["tenant_id"], victim.as_str(), "{usage}");
    }
    // GET /audit?tenant={tenant}
    let audit = admin.get(&format!("/audit?tenant={victim}")).await.1;
    let items = audit["items"].as_array().expect("items");
    assert!(!items.is_empty(), "{audit}");
    assert!(
        items.iter().all(|e| e["tenant_id"] == victim.as_str()),
        "{audit}"
    );
    // POST /tenants/{tenant}/suspend and /resume
    let (status, suspended) = admin.post(&at("/suspend"), json!({})).await;
    assert_eq!(status, 200, "{suspended}");
    assert_eq!(suspended["id"], victim.as_str());
    assert!(impostor_row(&relay).await.suspended_at_ms.is_none());
    let (status, resumed) = admin.post(&at("/resume"), json!({})).await;
    assert_eq!(
        (status, resumed["id"].as_str()),
        (200, Some(victim.as_str()))
    );
    // DELETE /tenants/{tenant} and POST /tenants/{tenant}/purge
    let (status, deleted) = admin.call(reqwest::Method::DELETE, &at(""), None).await;
    assert_eq!(status, 200, "{deleted}");
    assert_eq!(deleted["id"], victim.as_str());
    assert!(impostor_row(&relay).await.deleted_at_ms.is_none());
    let (status, purged) = admin.post(&at("/purge"), json!({})).await;
    assert!(status < 300, "{status} {purged}");
    assert_eq!(admin.get(&at("")).await.0, 404);
    assert_eq!(
        impostor_row(&relay).await.id,
        impostor,
        "the impostor's row is still there"
    );

    // By name, the row named `victim`'s old id is reached only as a name… which no route can
    // express, since such a text is an id: it answers 404 now that the victim is gone.
    let (status, body) = admin.get(&at("")).await;
    assert_eq!(status, 404, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("with id")),
        "{body}"
    );
    relay.stop().await;
}

async fn the_limits_of_a_tenant_are_its_own_when_another_is_named_like_its_id(db: Db) {
    let relay = TestRelay::start(&db).await;
    let admin = Admin::new(&relay);
    let (victim, _) = victim_and_impostor(&relay, &admin).await;
    let (_, key) = admin
        .post(&format!("/tenants/{victim}/keys"), json!({}))
        .await;
    let key = key["api_key"].as_str().expect("key text").to_owned();
    let mut c = relay.client(&key).await;
    // The impostor's `max_peers = 1` would refuse the second; the victim's team plan does not.
    c.peer("alice", "dev").await;
    c.peer("bob", "dev").await;
    let (_, limits) = admin.get(&format!("/tenants/{victim}")).await;
    assert_eq!(limits["plan"], "team", "{limits}");
    relay.stop().await;
}
