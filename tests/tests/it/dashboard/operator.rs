//! The relay operator's pages: off without an admin token; signed in with the admin token or a
//! minted admin token (never a tenant's key), in a cookie of their own that no tenant session
//! replaces; every tenant with its plan and usage; suspend and resume (only with
//! `admin:write`), which takes effect on the tenant's keys and is audited; the plans.

use repowire_e2e::process::{RelayProcess, TempDatabase, admin};
use repowire_e2e::web::Browser;

use super::token_status;

const ADMIN: &str = "operator-secret-token";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_sees_every_tenant_and_suspends_one_with_an_admin_credential_only() {
    let db = TempDatabase::create("repowire_dashboard_operator");
    let redis = repowire_e2e::redis_url();
    let prefix = repowire_e2e::redis_prefix();
    let without = RelayProcess::start_pod(&db.url(), &redis, &prefix, "pod-a", &[]).await;
    let relay = RelayProcess::start_pod(
        &db.url(),
        &redis,
        &prefix,
        "pod-b",
        &[("REPOWIRE_ADMIN_TOKEN", ADMIN)],
    )
    .await;
    assert_eq!(
        Browser::new(&without.http)
            .get("/dashboard/operator/signin")
            .await
            .status,
        404,
        "off without an admin token"
    );
    admin(&db.url(), &["tenant", "create", "acme", "--plan", "team"]);
    let acme_key = admin(
        &db.url(),
        &["key", "create", "acme", "--label", "acme-agent"],
    );
    assert_eq!(token_status(&relay, &acme_key).await, 200);

    // Not signed in: to the operator's sign-in; a tenant key or a wrong token does not open it.
    let mut browser = Browser::new(&relay.http);
    let page = browser.get("/dashboard/operator").await;
    assert_eq!(page.location(), Some("/dashboard/operator/signin"));
    for wrong in [acme_key.as_str(), "not-the-token"] {
        let refused = browser
            .post("/dashboard/operator/signin", &[("admin_token", wrong)])
            .await;
        assert_eq!(refused.status, 401, "{}", refused.body);
        assert!(
            !refused.body.contains(wrong),
            "the credential is not echoed"
        );
    }
    // A tenant's session does not open the operator's pages.
    let mut tenant = Browser::new(&relay.http);
    let signed = tenant
        .post(
            "/dashboard/signin",
            &[(
                "api_key",
                &admin(&db.url(), &["key", "create", "acme", "--label", "person"]),
            )],
        )
        .await;
    assert_eq!(signed.status, 303);
    assert_eq!(
        tenant.get("/dashboard/operator").await.location(),
        Some("/dashboard/operator/signin")
    );

    let signed = browser
        .post("/dashboard/operator/signin", &[("admin_token", ADMIN)])
        .await;
    assert_eq!(signed.status, 303, "{}", signed.body);
    assert!(browser.operator_cookie.is_some());
    assert!(browser.cookie.is_none(), "no tenant session");
    let page = browser.get("/dashboard/operator").await;
    assert_eq!(page.status, 200, "{}", page.body);
    for shown in ["acme", "default", ">team<", "Free", "Suspend acme"] {
        assert!(
            page.body.contains(shown) || page.body.to_lowercase().contains(&shown.to_lowercase()),
            "{shown}: {}",
            page.body
        );
    }
    // A relay whose admin token changed (here: a pod started with another) does not take a
    // session opened with the old one.
    let rotated = RelayProcess::start_pod(
        &db.url(),
        &redis,
        &prefix,
        "pod-c",
        &[("REPOWIRE_ADMIN_TOKEN", "a-rotated-admin-token")],
    )
    .await;
    let mut stale = Browser::new(&rotated.http);
    stale.operator_cookie = browser.operator_cookie.clone();
    assert_eq!(
        stale.get("/dashboard/operator").await.location(),
        Some("/dashboard/operator/signin"),
        "a session of the old admin token"
    );
    drop(rotated);
    // The operator's session opens no tenant page.
    assert_eq!(
        browser.get("/dashboard").await.location(),
        Some("/dashboard/signin")
    );

    // Suspend acme: its key is refused; resume: it works again. Both audited.
    let csrf = page.hidden("csrf").expect("csrf");
    let acme_id = page
        .body
        .split("name=\"tenant_id\" value=\"")
        .skip(1)
        .map(|rest| rest.split('"').next().unwrap_or_default())
        .find(|id| {
            page.body.contains(&format!("<code>{id}</code>")) && {
                let row = page
                    .body
                    .split(&format!("<code>{id}</code>"))
                    .next()
                    .unwrap_or_default();
                row.rsplit("<tr>")
                    .next()
                    .is_some_and(|r| r.contains("acme"))
            }
        })
        .expect("acme's id")
        .to_owned();
    let stale = browser
        .post(
            "/dashboard/operator/tenants",
            &[
                ("csrf", "nope"),
                ("tenant_id", &acme_id),
                ("action", "suspend"),
            ],
        )
        .await;
    assert_eq!(stale.status, 403);
    let done = browser
        .post(
            "/dashboard/operator/tenants",
            &[
                ("csrf", &csrf),
                ("tenant_id", &acme_id),
                ("action", "suspend"),
            ],
        )
        .await;
    assert_eq!(done.status, 200, "{}", done.body);
    assert!(done.body.contains("acme is suspended"), "{}", done.body);
    assert_eq!(token_status(&relay, &acme_key).await, 403);
    let done = browser
        .post(
            "/dashboard/operator/tenants",
            &[
                ("csrf", &csrf),
                ("tenant_id", &acme_id),
                ("action", "resume"),
            ],
        )
        .await;
    assert!(done.body.contains("acme is active again"), "{}", done.body);
    assert_eq!(token_status(&relay, &acme_key).await, 200);
    let (status, audit) = repowire_e2e::http_json(
        reqwest::Method::GET,
        &format!("{}/admin/v1/audit", relay.http),
        Some(ADMIN),
        None,
    )
    .await;
    assert_eq!(status, 200, "{audit}");
    let text = audit.to_string();
    assert!(
        text.contains("tenant.suspend") && text.contains("tenant.resume"),
        "{text}"
    );
    assert!(text.contains("dashboard:admin-token"), "{text}");

    // A minted admin token that may only read sees the tenants, not the buttons, and its post
    // is refused.
    let (status, minted) = repowire_e2e::http_json(
        reqwest::Method::POST,
        &format!("{}/admin/v1/admin-tokens", relay.http),
        Some(ADMIN),
        Some(serde_json::json!({"label": "support", "scopes": ["admin:read"]})),
    )
    .await;
    assert_eq!(status, 201, "{minted}");
    let reader_token = minted["token"].as_str().expect("token").to_owned();
    let mut reader = Browser::new(&relay.http);
    let signed = reader
        .post(
            "/dashboard/operator/signin",
            &[("admin_token", &reader_token)],
        )
        .await;
    assert_eq!(signed.status, 303, "{}", signed.body);
    let page = reader.get("/dashboard/operator").await;
    assert!(page.body.contains("acme"), "{}", page.body);
    assert!(!page.body.contains("Suspend acme"), "{}", page.body);
    let csrf = page.hidden("csrf").expect("csrf");
    let refused = reader
        .post(
            "/dashboard/operator/tenants",
            &[
                ("csrf", &csrf),
                ("tenant_id", &acme_id),
                ("action", "suspend"),
            ],
        )
        .await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert_eq!(token_status(&relay, &acme_key).await, 200, "not suspended");

    // Revoking the minted token ends its session; logging out ends the admin token's.
    let id = minted["admin_token"]["id"].as_str().expect("id");
    let (status, _) = repowire_e2e::http_json(
        reqwest::Method::DELETE,
        &format!("{}/admin/v1/admin-tokens/{id}", relay.http),
        Some(ADMIN),
        None,
    )
    .await;
    assert_eq!(status, 204);
    assert_eq!(
        reader.get("/dashboard/operator").await.location(),
        Some("/dashboard/operator/signin")
    );
    let page = browser.get("/dashboard/operator").await;
    let csrf = page.hidden("csrf").expect("csrf");
    let out = browser
        .post("/dashboard/operator/logout", &[("csrf", &csrf)])
        .await;
    assert_eq!(out.status, 303);
    assert!(browser.operator_cookie.is_none());
    assert_eq!(
        browser.get("/dashboard/operator").await.location(),
        Some("/dashboard/operator/signin")
    );
}
