//! Minted admin tokens (issue 16): scopes, audit attribution, revocation, and the wall between
//! admin and tenant credentials.

use crate::common;

use common::{Db, TestRelay};
use serde_json::{Value, json};

const BOOTSTRAP: &str = "test-admin-token";

async fn call(
    relay: &TestRelay,
    bearer: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    repowire_e2e::http_json(method, &format!("{}{path}", relay.http), Some(bearer), body).await
}

async fn get(relay: &TestRelay, bearer: &str, path: &str) -> (u16, Value) {
    call(relay, bearer, reqwest::Method::GET, path, None).await
}

async fn post(relay: &TestRelay, bearer: &str, path: &str, body: Value) -> (u16, Value) {
    call(relay, bearer, reqwest::Method::POST, path, Some(body)).await
}

async fn mint(relay: &TestRelay, scopes: &[&str]) -> (String, String) {
    let (status, minted) = post(
        relay,
        BOOTSTRAP,
        "/admin/v1/admin-tokens",
        json!({"label": "ops", "scopes": scopes}),
    )
    .await;
    assert_eq!(status, 201, "{minted}");
    let text = minted["token"]
        .as_str()
        .expect("text shown once")
        .to_owned();
    assert!(text.starts_with("rw_admin_"), "{text}");
    (
        minted["admin_token"]["id"].as_str().expect("id").to_owned(),
        text,
    )
}

async fn tenant_count(relay: &TestRelay) -> usize {
    let (_, page) = get(relay, BOOTSTRAP, "/admin/v1/tenants").await;
    page["items"].as_array().expect("items").len()
}

async fn minted_admin_tokens_have_scopes_and_stop_when_revoked(db: Db) {
    let relay = TestRelay::start(&db).await;
    let (_, reader) = mint(&relay, &["admin:read"]).await;
    let (writer_id, writer) = mint(&relay, &["admin:read", "admin:write"]).await;

    // Read-only: reads, and is refused every write, which changes nothing.
    assert_eq!(get(&relay, &reader, "/admin/v1/plans").await.0, 200);
    let before = tenant_count(&relay).await;
    let (status, refused) = post(
        &relay,
        &reader,
        "/admin/v1/tenants",
        json!({"name": "beta"}),
    )
    .await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(refused["error"]["code"], "forbidden");
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("admin:write")),
        "{refused}"
    );
    assert_eq!(tenant_count(&relay).await, before);

    // Read-write: writes, and the audit log names the token.
    let (status, beta) = post(
        &relay,
        &writer,
        "/admin/v1/tenants",
        json!({"name": "beta"}),
    )
    .await;
    assert_eq!(status, 201, "{beta}");
    let (_, audit) = get(&relay, BOOTSTRAP, "/admin/v1/audit").await;
    let created = audit["items"]
        .as_array()
        .expect("items")
        .iter()
        .find(|e| e["action"] == "tenant.create")
        .cloned()
        .expect("audited");
    assert_eq!(created["actor"], format!("admin-token:{writer_id}"));

    // Listed without their text or hash; the use is recorded.
    let (_, listed) = get(&relay, BOOTSTRAP, "/admin/v1/admin-tokens").await;
    let listed = listed.as_array().expect("array").clone();
    assert_eq!(listed.len(), 2);
    for t in &listed {
        assert!(t.get("hash").is_none() && t.get("token").is_none(), "{t}");
        assert!(
            t["display"]
                .as_str()
                .is_some_and(|d| d.starts_with("rw_admin_"))
        );
    }
    let used = listed
        .iter()
        .find(|t| t["id"] == writer_id.as_str())
        .expect("listed");
    assert!(used["last_used_at_ms"].is_i64(), "{used}");

    // Bad requests mint nothing.
    for bad in [
        json!({"scopes": []}),
        json!({"scopes": ["root"]}),
        json!({"scopes": ["admin:read"], "expires_in_days": 0}),
        json!({"scopes": ["admin:read"], "role": "x"}),
        json!({"label": "no scopes"}),
    ] {
        let (status, body) = post(&relay, BOOTSTRAP, "/admin/v1/admin-tokens", bad.clone()).await;
        assert_eq!(status, 400, "{bad}: {body}");
    }
    // A token with only the read scope cannot mint a writer.
    let (status, _) = post(
        &relay,
        &reader,
        "/admin/v1/admin-tokens",
        json!({"scopes": ["admin:write"]}),
    )
    .await;
    assert_eq!(status, 403);
    let (_, listed) = get(&relay, BOOTSTRAP, "/admin/v1/admin-tokens").await;
    assert_eq!(listed.as_array().map(Vec::len), Some(2));

    // Revoked: refused from the next request on; revoking again is 404.
    let path = format!("/admin/v1/admin-tokens/{writer_id}");
    assert_eq!(
        call(&relay, BOOTSTRAP, reqwest::Method::DELETE, &path, None)
            .await
            .0,
        204
    );
    assert_eq!(get(&relay, &writer, "/admin/v1/plans").await.0, 403);
    assert_eq!(
        call(&relay, BOOTSTRAP, reqwest::Method::DELETE, &path, None)
            .await
            .0,
        404
    );

    // An admin token is no tenant credential.
    let (status, _) = get(&relay, &reader, "/v1/limits").await;
    assert_eq!(status, 401);
    relay.stop().await;
}

/// Issue 30 item 6: an `admin:write` token minted itself an `admin:read` token, read the audit
/// log and revoked other admins' tokens. The whole matrix: who may mint, list and revoke, and
/// which scopes each may give.
async fn admin_tokens_give_only_scopes_they_hold_and_only_admin_tokens_manages_them(db: Db) {
    let relay = TestRelay::start(&db).await;
    let all = ["admin:read", "admin:write", "admin:tokens"];
    let (victim_id, victim) = mint(&relay, &["admin:read"]).await;
    let (writer_id, writer) = mint(&relay, &["admin:write"]).await;
    let (_, read_write) = mint(&relay, &["admin:read", "admin:write"]).await;
    let (_, manager) = mint(&relay, &["admin:tokens", "admin:write"]).await;
    let (_, root) = mint(&relay, &all).await;
    let count = |relay: &TestRelay| {
        let relay = relay.http.clone();
        async move {
            reqwest::Client::new()
                .get(format!("{relay}/admin/v1/admin-tokens"))
                .bearer_auth(BOOTSTRAP)
                .send()
                .await
                .expect("send")
                .json::<Value>()
                .await
                .expect("json")
                .as_array()
                .map_or(0, Vec::len)
        }
    };
    let before = count(&relay).await;

    // Without admin:tokens nothing under /admin-tokens is allowed, whatever the method.
    for token in [&victim, &writer, &read_write] {
        for scopes in [
            vec!["admin:read"],
            vec!["admin:write"],
            vec!["admin:tokens"],
        ] {
            let (status, body) = post(
                &relay,
                token,
                "/admin/v1/admin-tokens",
                json!({ "scopes": scopes }),
            )
            .await;
            assert_eq!(status, 403, "{scopes:?}: {body}");
            assert!(
                body["error"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("admin:tokens")),
                "{body}"
            );
        }
        assert_eq!(get(&relay, token, "/admin/v1/admin-tokens").await.0, 403);
        let path = format!("/admin/v1/admin-tokens/{victim_id}");
        assert_eq!(
            call(&relay, token, reqwest::Method::DELETE, &path, None)
                .await
                .0,
            403
        );
    }
    // The reproduction: a write-only token cannot reach the audit log by any path.
    assert_eq!(get(&relay, &writer, "/admin/v1/audit").await.0, 403);

    // admin:tokens gives only what its holder has: write and tokens, never read.
    for (scopes, allowed) in [
        (vec!["admin:write"], true),
        (vec!["admin:tokens"], true),
        (vec!["admin:write", "admin:tokens"], true),
        (vec!["admin:read"], false),
        (vec!["admin:read", "admin:write"], false),
    ] {
        let (status, body) = post(
            &relay,
            &manager,
            "/admin/v1/admin-tokens",
            json!({ "scopes": scopes }),
        )
        .await;
        assert_eq!(status == 201, allowed, "{scopes:?}: {status} {body}");
        if !allowed {
            assert_eq!(status, 403, "{body}");
            assert!(
                body["error"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("admin:read")),
                "the refusal names the missing scope: {body}"
            );
        }
    }
    assert_eq!(
        count(&relay).await,
        before + 3,
        "only the allowed ones were stored"
    );
    // A token holding every scope gives every scope; the bootstrap token too.
    let (status, body) = post(
        &relay,
        &root,
        "/admin/v1/admin-tokens",
        json!({ "scopes": all }),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        body["admin_token"]["scopes"], "admin:read admin:write admin:tokens",
        "{body}"
    );
    // admin:tokens lists, and revokes only tokens whose scopes it holds.
    assert_eq!(get(&relay, &manager, "/admin/v1/admin-tokens").await.0, 200);
    let (root_id, _) = mint(&relay, &all).await;
    let path = format!("/admin/v1/admin-tokens/{root_id}");
    assert_eq!(
        call(&relay, &manager, reqwest::Method::DELETE, &path, None)
            .await
            .0,
        403,
        "a token with admin:read is above one without it"
    );
    assert_eq!(
        call(&relay, &root, reqwest::Method::DELETE, &path, None)
            .await
            .0,
        204
    );
    let path = format!("/admin/v1/admin-tokens/{writer_id}");
    assert_eq!(
        call(&relay, &manager, reqwest::Method::DELETE, &path, None)
            .await
            .0,
        204
    );
    assert_eq!(
        call(
            &relay,
            &writer,
            reqwest::Method::POST,
            "/admin/v1/tenants",
            Some(json!({"name": "x"}))
        )
        .await
        .0,
        403,
        "the revoked token is refused"
    );
    assert_eq!(
        get(&relay, &victim, "/admin/v1/plans").await.0,
        200,
        "untouched"
    );
    relay.stop().await;
}

both_backends!(
    minted_admin_tokens_have_scopes_and_stop_when_revoked,
    admin_tokens_give_only_scopes_they_hold_and_only_admin_tokens_manages_them,
);
