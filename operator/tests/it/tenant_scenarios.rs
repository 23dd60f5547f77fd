//! Tenant reconciles against a scripted API server (every call asserted) and a real relay.

use crate::support;

use std::sync::Arc;

use repowire_operator::crd::{Limits, ReclaimPolicy, Tenant};
use repowire_operator::reconcile::tenant;
use repowire_operator::relay::NewTenant;
use serde_json::json;
use support::*;

async fn reconcile(
    api: &ApiServer,
    ctx: &Arc<repowire_operator::context::Context>,
) -> Result<kube::runtime::controller::Action, repowire_operator::context::Error> {
    let t: Tenant = api.typed(&tenant_path("team-a"));
    tenant::reconcile(Arc::new(t), ctx.clone()).await
}

fn lines(calls: &[Call]) -> Vec<String> {
    calls.iter().map(Call::line).collect()
}

fn ready(api: &ApiServer) -> (String, String) {
    let t: Tenant = api.typed(&tenant_path("team-a"));
    let c = t
        .status
        .unwrap()
        .conditions
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    (c.status, c.reason)
}

#[tokio::test]
async fn a_tenant_gets_its_finalizer_then_is_created_on_its_plan() {
    let relay = Relay::start().await;
    let api = ApiServer::default();
    let mut spec = tenant_spec(Some("team"));
    spec.limits = Some(Limits {
        max_peers: Some(7),
        ..Limits::default()
    });
    api.put(&tenant_path("team-a"), tenant_object("team-a", spec, false));
    let ctx = context(&api, relay.admin.clone(), &relay.process.http);
    reconcile(&api, &ctx).await.expect("finalizer");
    assert_eq!(
        lines(&api.take_calls()),
        [format!("PATCH {}", tenant_path("team-a"))]
    );
    assert_eq!(relay.admin.calls(), 0);

    reconcile(&api, &ctx).await.expect("create");
    let calls = api.take_calls();
    assert_eq!(
        lines(&calls),
        [
            format!("PATCH {}/status", tenant_path("team-a")),
            format!("PATCH {}/status", tenant_path("team-a")),
            format!("POST {EVENTS}"),
        ]
    );
    assert!(
        calls[0].body["status"]["pendingCreate"]["since"].is_string(),
        "pending before the relay is asked"
    );
    assert!(calls[1].body["status"]["pendingCreate"].is_null());
    let relay_tenant = relay
        .admin
        .get_tenant("team-a")
        .await
        .expect("in the relay");
    assert_eq!(relay_tenant.plan, "team");
    assert_eq!(relay_tenant.overrides.max_peers, Some(7));
    assert_eq!(relay_tenant.display_name.as_deref(), Some("Team A"));
    assert_eq!(calls[1].body["status"]["tenantId"], relay_tenant.id);

    // Then Ready, with the effective limits and this month's usage.
    reconcile(&api, &ctx).await.expect("observe");
    assert_eq!(ready(&api), ("True".into(), "Reconciled".into()));
    let t: Tenant = api.typed(&tenant_path("team-a"));
    let status = t.status.unwrap();
    assert_eq!(status.effective_limits.unwrap().max_peers, Some(7));
    assert_eq!(status.usage.unwrap().messages, 0);

    // Everything in place: no relay call, no write.
    api.take_calls();
    let before = relay.admin.calls();
    reconcile(&api, &ctx).await.expect("again");
    assert_eq!(api.take_calls().len(), 0);
    assert_eq!(relay.admin.calls(), before);
}

#[tokio::test]
async fn spec_changes_reach_the_relay_and_suspension_follows() {
    let relay = Relay::start().await;
    let api = ApiServer::default();
    let created = relay
        .admin
        .create_tenant(&NewTenant {
            name: "team-a",
            plan: None,
            display_name: None,
            overrides: &Limits::default(),
        })
        .await
        .unwrap();
    let mut obj = ready_tenant("team-a", &created.id);
    obj["spec"]["plan"] = json!("team");
    obj["spec"]["suspended"] = json!(true);
    obj["spec"]["limits"] = json!({"messages_per_minute": 60});
    api.put(&tenant_path("team-a"), obj);
    let ctx = context(&api, relay.admin.clone(), &relay.process.http);
    reconcile(&api, &ctx).await.expect("update");
    let t = relay.admin.get_tenant(&created.id).await.unwrap();
    assert_eq!(
        (
            t.plan.as_str(),
            t.overrides.messages_per_minute,
            t.suspended_at_ms.is_some()
        ),
        ("team", Some(60), true)
    );
    let reasons: Vec<String> = api
        .take_calls()
        .into_iter()
        .filter(|c| c.path == EVENTS)
        .map(|c| c.body["reason"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(reasons, ["Updated", "Suspended"]);
    // An override left out of the spec returns to the plan's value; resuming.
    let mut obj = api.get(&tenant_path("team-a")).unwrap();
    obj["spec"]["limits"] = json!(null);
    obj["spec"]["suspended"] = json!(false);
    obj["metadata"]["generation"] = json!(2);
    api.put(&tenant_path("team-a"), obj);
    reconcile(&api, &ctx).await.expect("update");
    let t = relay.admin.get_tenant(&created.id).await.unwrap();
    assert_eq!(
        (t.overrides.messages_per_minute, t.suspended_at_ms.is_some()),
        (None, false)
    );
}

#[tokio::test]
async fn a_name_taken_by_someone_else_is_not_adopted() {
    let relay = Relay::start().await;
    relay
        .admin
        .create_tenant(&NewTenant {
            name: "team-a",
            plan: None,
            display_name: None,
            overrides: &Limits::default(),
        })
        .await
        .unwrap();
    let api = ApiServer::default();
    api.put(
        &tenant_path("team-a"),
        tenant_object("team-a", tenant_spec(None), true),
    );
    let ctx = context(&api, relay.admin.clone(), &relay.process.http);
    reconcile(&api, &ctx).await.expect("reconcile");
    assert_eq!(ready(&api), ("False".into(), "NameTaken".into()));
    let t: Tenant = api.typed(&tenant_path("team-a"));
    assert!(t.status.unwrap().tenant_id.is_none());

    // An earlier attempt that recorded no outcome: the operator stops rather than guess.
    let mut obj = api.get(&tenant_path("team-a")).unwrap();
    obj["status"]["pendingCreate"] = json!({"since": "2026-11-25T00:00:00Z"});
    api.put(&tenant_path("team-a"), obj);
    reconcile(&api, &ctx).await.expect("reconcile");
    assert_eq!(
        ready(&api),
        ("False".into(), "CannotDetermineCreation".into())
    );
}

#[tokio::test]
async fn deletion_detaches_or_deletes_per_reclaim_policy() {
    for policy in [ReclaimPolicy::Retain, ReclaimPolicy::Delete] {
        let relay = Relay::start().await;
        let api = ApiServer::default();
        let created = relay
            .admin
            .create_tenant(&NewTenant {
                name: "team-a",
                plan: None,
                display_name: None,
                overrides: &Limits::default(),
            })
            .await
            .unwrap();
        let mut obj = ready_tenant("team-a", &created.id);
        obj["spec"]["reclaimPolicy"] = serde_json::to_value(policy).unwrap();
        obj["metadata"]["deletionTimestamp"] = json!(repowire_operator::context::rfc3339(
            repowire_operator::context::now_ms()
        ));
        api.put(&tenant_path("team-a"), obj);
        let ctx = context(&api, relay.admin.clone(), &relay.process.http);
        reconcile(&api, &ctx).await.expect("cleanup");
        let calls = api.take_calls();
        assert_eq!(
            lines(&calls),
            [
                format!("POST {EVENTS}"),
                format!("PATCH {}", tenant_path("team-a"))
            ]
        );
        let t = relay.admin.get_tenant(&created.id).await.unwrap();
        assert_eq!(
            t.deleted_at_ms.is_some(),
            policy == ReclaimPolicy::Delete,
            "{policy:?}"
        );
        assert_eq!(
            calls[0].body["reason"],
            if policy == ReclaimPolicy::Delete {
                "Deleted"
            } else {
                "Detached"
            }
        );
    }
}

#[tokio::test]
async fn a_relay_that_is_down_is_reported_and_deletion_is_let_go_after_the_timeout() {
    let api = ApiServer::default();
    let mut obj = ready_tenant("team-a", "tnt-gone");
    obj["spec"]["reclaimPolicy"] = json!("delete");
    api.put(&tenant_path("team-a"), obj.clone());
    let down = repowire_operator::relay::AdminClient::new(
        "http://127.0.0.1:9",
        ADMIN.into(),
        std::time::Duration::from_secs(2),
    )
    .unwrap();
    let ctx = context(&api, down, "http://relay");
    let error = reconcile(&api, &ctx).await.expect_err("down");
    assert_eq!(error.reason(), "RelayUnreachable");
    let t: Tenant = api.typed(&tenant_path("team-a"));
    let synced = t
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

    obj["metadata"]["deletionTimestamp"] = json!(repowire_operator::context::rfc3339(
        repowire_operator::context::now_ms() - 301_000
    ));
    api.put(&tenant_path("team-a"), obj);
    api.take_calls();
    reconcile(&api, &ctx).await.expect("let go");
    let calls = api.take_calls();
    assert_eq!(calls[0].body["reason"], "DeletionAbandoned");
    assert_eq!(
        api.get(&tenant_path("team-a")).unwrap()["metadata"]["finalizers"],
        json!([])
    );
}

/// The controller's cache can lag behind the operator's own last write. A reconcile of such a
/// stale copy (still pending, no tenant id yet) must not write its older view over the newer
/// status: its write is conditional on the version it read, gets 409, and the recorded tenant
/// id stays. A conflict is retried at once, without backoff.
#[tokio::test]
async fn a_stale_copy_never_overwrites_newer_status() {
    let relay = Relay::start().await;
    let api = ApiServer::default();
    api.put(
        &tenant_path("team-a"),
        tenant_object("team-a", tenant_spec(None), true),
    );
    let ctx = context(&api, relay.admin.clone(), &relay.process.http);
    reconcile(&api, &ctx).await.expect("create");
    let fresh: Tenant = api.typed(&tenant_path("team-a"));
    let id = fresh.status.clone().unwrap().tenant_id.expect("recorded");
    api.take_calls();

    let mut stale = fresh.clone();
    stale.metadata.resource_version = Some("1".into());
    let mut old_status = stale.status.clone().unwrap();
    old_status.tenant_id = None;
    old_status.pending_create = Some(repowire_operator::crd::PendingCreate {
        since: "2026-01-01T00:00:00Z".into(),
    });
    stale.status = Some(old_status);
    let e = tenant::reconcile(Arc::new(stale.clone()), ctx.clone())
        .await
        .expect_err("a conflict");
    assert!(e.is_conflict(), "{e}");
    assert_eq!(
        lines(&api.take_calls()),
        [
            format!("PATCH {}/status", tenant_path("team-a")),
            format!("GET {}/status", tenant_path("team-a")),
        ],
        "one conditional write, refused; the newer status read; nothing more"
    );
    let now: Tenant = api.typed(&tenant_path("team-a"));
    let status = now.status.unwrap();
    assert_eq!(status.tenant_id.as_deref(), Some(id.as_str()));
    assert!(status.pending_create.is_none());
    let action = tenant::error_policy(Arc::new(stale), &e, ctx.clone());
    assert_eq!(
        action,
        kube::runtime::controller::Action::requeue(repowire_operator::context::CONFLICT_RETRY)
    );
}

/// A create the relay never answered (down, or a timeout after it committed) keeps its
/// pending marker beside the reported failure: the next attempt knows an earlier one may have
/// made the tenant (CannotDetermineCreation, not a false NameTaken).
#[tokio::test]
async fn a_failed_create_keeps_its_pending_marker() {
    let api = ApiServer::default();
    api.put(
        &tenant_path("team-a"),
        tenant_object("team-a", tenant_spec(None), true),
    );
    let down = repowire_operator::relay::AdminClient::new(
        "http://127.0.0.1:9",
        ADMIN.into(),
        std::time::Duration::from_secs(2),
    )
    .unwrap();
    let ctx = context(&api, down, "http://relay");
    let error = reconcile(&api, &ctx).await.expect_err("down");
    assert_eq!(error.reason(), "RelayUnreachable");
    let status = api.typed::<Tenant>(&tenant_path("team-a")).status.unwrap();
    assert!(status.pending_create.is_some(), "{status:?}");
    let synced = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Synced")
        .unwrap();
    assert_eq!(
        (synced.status.as_str(), synced.reason.as_str()),
        ("False", "RelayUnreachable")
    );
}
