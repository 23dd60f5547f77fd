//! API key scopes (issue 16): `connect` (token exchange, agents) and `usage:read` (the tenant's
//! own limits and usage), both by default, and `approve` only when asked for (issue 35.11), on
//! every path that makes a key; a key without a scope is refused `403 forbidden` where that
//! scope is needed, whichever credential form (key or token) it comes in; rotation keeps the
//! scopes; bad scopes store nothing.

use crate::common;

use common::{Db, TestRelay, admin_cli};
use serde_json::{Value, json};

const ADMIN: &str = "test-admin-token";

async fn call(
    relay: &TestRelay,
    method: reqwest::Method,
    path: &str,
    bearer: &str,
    body: Option<Value>,
) -> (u16, Value) {
    repowire_e2e::http_json(method, &format!("{}{path}", relay.http), Some(bearer), body).await
}

async fn make_key(relay: &TestRelay, body: Value) -> (u16, Value) {
    call(
        relay,
        reqwest::Method::POST,
        "/admin/v1/tenants/acme/keys",
        ADMIN,
        Some(body),
    )
    .await
}

async fn exchange(relay: &TestRelay, key: &str) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(format!("{}/v1/token", relay.http))
        .json(&json!({ "api_key": key }))
        .send()
        .await
        .expect("send");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn limits(relay: &TestRelay, credential: &str) -> u16 {
    call(relay, reqwest::Method::GET, "/v1/limits", credential, None)
        .await
        .0
}

async fn keys_scoped_connect_or_usage_read_do_only_that(db: Db) {
    let relay = TestRelay::start(&db).await;
    relay.tenant("acme").await;

    let (status, both) = make_key(&relay, json!({ "label": "default" })).await;
    assert_eq!(status, 201, "{both}");
    assert_eq!(
        both["key"]["scopes"], "connect usage:read",
        "a key that may approve tool calls is asked for, never given"
    );
    let (status, approver) = make_key(
        &relay,
        json!({ "scopes": ["connect", "usage:read", "approve"] }),
    )
    .await;
    assert_eq!(status, 201, "{approver}");
    assert_eq!(approver["key"]["scopes"], "connect usage:read approve");
    // The admin CLI: the same default, and `--scope approve` to ask for it.
    let listed = admin_cli(&relay, true, &["key", "create", "acme", "--label", "cli"])
        .await
        .expect("cli");
    let made: Value = serde_json::from_str(&listed).expect("json");
    assert_eq!(made["key"]["scopes"], "connect usage:read", "{made}");
    let listed = admin_cli(
        &relay,
        true,
        &[
            "key", "create", "acme", "--scope", "connect", "--scope", "approve",
        ],
    )
    .await
    .expect("cli");
    let made: Value = serde_json::from_str(&listed).expect("json");
    assert_eq!(made["key"]["scopes"], "connect approve", "{made}");
    // A relay's first key is its owner's: it approves and manages keys.
    let (_, first) = repowire_relay::tenancy::admin::default_tenant();
    assert_eq!(
        first.record.scopes,
        "connect usage:read approve keys:manage messages:read"
    );
    let both_text = both["api_key"].as_str().expect("text");
    assert_eq!(exchange(&relay, both_text).await.0, 200);
    assert_eq!(limits(&relay, both_text).await, 200);

    let (status, reader) = make_key(&relay, json!({ "scopes": ["usage:read"] })).await;
    assert_eq!(status, 201, "{reader}");
    assert_eq!(reader["key"]["scopes"], "usage:read");
    let reader_text = reader["api_key"].as_str().expect("text");
    let (status, refused) = exchange(&relay, reader_text).await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(refused["error"]["code"], "forbidden");
    assert_eq!(limits(&relay, reader_text).await, 200);

    let (status, agent) = make_key(&relay, json!({ "scopes": ["connect", "connect"] })).await;
    assert_eq!(status, 201, "{agent}");
    assert_eq!(agent["key"]["scopes"], "connect");
    let agent_text = agent["api_key"].as_str().expect("text");
    let (status, token) = exchange(&relay, agent_text).await;
    assert_eq!(status, 200, "{token}");
    let jwt = token["token"].as_str().expect("jwt");
    assert_eq!(limits(&relay, agent_text).await, 403, "the key itself");
    assert_eq!(limits(&relay, jwt).await, 403, "a token from it");
    let mut client = relay.client(agent_text).await;
    client.peer("alice", "dev").await;

    // Rotation keeps what the key may do.
    let reader_id = reader["key"]["id"].as_str().expect("id");
    let (status, rotated) = call(
        &relay,
        reqwest::Method::POST,
        &format!("/admin/v1/keys/{reader_id}/rotate"),
        ADMIN,
        Some(json!({ "grace_seconds": 0 })),
    )
    .await;
    assert_eq!(status, 201, "{rotated}");
    let new_text = rotated["api_key"].as_str().expect("text");
    assert_eq!(exchange(&relay, new_text).await.0, 403);
    assert_eq!(limits(&relay, new_text).await, 200);

    // Bad scopes: a clear error and no key.
    let (_, listed) = call(
        &relay,
        reqwest::Method::GET,
        "/admin/v1/tenants/acme/keys",
        ADMIN,
        None,
    )
    .await;
    let before = listed["items"].as_array().expect("items").len();
    for bad in [
        json!({ "scopes": [] }),
        json!({ "scopes": ["admin:write"] }),
        json!({ "scopes": "connect" }),
    ] {
        let (status, said) = make_key(&relay, bad.clone()).await;
        assert_eq!(status, 400, "{bad}: {said}");
        assert_eq!(said["error"]["code"], "invalid_request", "{bad}: {said}");
    }
    let (_, listed) = call(
        &relay,
        reqwest::Method::GET,
        "/admin/v1/tenants/acme/keys",
        ADMIN,
        None,
    )
    .await;
    assert_eq!(listed["items"].as_array().expect("items").len(), before);
    relay.stop().await;
}

both_backends!(keys_scoped_connect_or_usage_read_do_only_that);
