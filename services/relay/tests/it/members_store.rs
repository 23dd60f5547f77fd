//! A tenant's members and the sign-ins through the provider in storage, on SQLite and on
//! Postgres: an invitation is claimed only with a verified email, once, in each tenant it was
//! made in; a tenant holds one open invitation per email; removing a member ends its sessions
//! and its email's open invitations, and finds nothing in another tenant; a sign-in under way is taken once and never after it
//! expires.

use crate::common;

use common::Db;
use repowire_relay::storage::store::{
    DashboardSession, MemberRecord, OidcAttempt, Store, TenantRecord,
};

both_backends!(
    invitations_are_claimed_with_a_verified_email_once_per_tenant,
    a_sign_in_under_way_is_taken_once_and_not_after_it_expires,
);

const NOW: i64 = 1_800_000_000_000;
const ISSUER: &str = "https://idp.example";

async fn tenant(store: &dyn Store, id: &str) {
    store
        .create_tenant(&TenantRecord {
            id: id.into(),
            name: id.into(),
            plan: "free".into(),
            created_at_ms: 1,
            suspended_at_ms: None,
            deleted_at_ms: None,
            display_name: None,
            overrides: Default::default(),
        })
        .await
        .expect("tenant");
}

fn invitation(id: &str, tenant_id: &str, email: &str) -> MemberRecord {
    MemberRecord {
        id: id.into(),
        tenant_id: tenant_id.into(),
        issuer: None,
        subject: None,
        email: Some(email.into()),
        scopes: "usage:read".into(),
        owner: false,
        invited_by: Some("key:key-a".into()),
        created_at_ms: NOW,
        joined_at_ms: None,
        last_seen_at_ms: None,
        removed_at_ms: None,
    }
}

async fn invitations_are_claimed_with_a_verified_email_once_per_tenant(db: Db) {
    let store = db.store().await;
    tenant(store.as_ref(), "tnt-a").await;
    tenant(store.as_ref(), "tnt-b").await;
    assert!(
        store
            .add_member(&invitation("mem-a", "tnt-a", "ann@example.test"))
            .await
            .unwrap()
    );
    assert!(
        store
            .add_member(&invitation("mem-b", "tnt-b", "ann@example.test"))
            .await
            .unwrap()
    );
    assert!(
        !store
            .add_member(&invitation("mem-a2", "tnt-a", "ann@example.test"))
            .await
            .unwrap(),
        "one open invitation per email and tenant"
    );

    // Without a verified email nothing is claimed.
    let none = store
        .sign_in_member(ISSUER, "sub-ann", None, NOW + 1)
        .await
        .unwrap();
    assert!(none.is_empty(), "{none:?}");
    // With it, both invitations.
    let both = store
        .sign_in_member(ISSUER, "sub-ann", Some("ann@example.test"), NOW + 2)
        .await
        .unwrap();
    let ids: Vec<&str> = both.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["mem-a", "mem-b"]);
    assert!(both.iter().all(|m| m.subject.as_deref() == Some("sub-ann")
        && m.joined_at_ms == Some(NOW + 2)
        && m.last_seen_at_ms == Some(NOW + 2)));
    // Another identity with the same email finds them claimed.
    let other = store
        .sign_in_member(ISSUER, "sub-impostor", Some("ann@example.test"), NOW + 3)
        .await
        .unwrap();
    assert!(other.is_empty(), "{other:?}");
    // A new invitation of the same email in a tenant Ann is in already is not claimed twice.
    assert!(
        store
            .add_member(&invitation("mem-a3", "tnt-a", "ann@example.test"))
            .await
            .unwrap()
    );
    let again = store
        .sign_in_member(ISSUER, "sub-ann", Some("ann@example.test"), NOW + 4)
        .await
        .unwrap();
    assert_eq!(again.len(), 2, "{again:?}");
    assert_eq!(
        store.get_member("mem-a3").await.unwrap().unwrap().issuer,
        None
    );

    // Removing: not from another tenant; then the member and its sessions end.
    store
        .create_dashboard_session(&DashboardSession {
            id_hash: "ann-session".into(),
            audience: "tenant".into(),
            tenant_id: Some("tnt-a".into()),
            key_id: None,
            member_id: Some("mem-a".into()),
            subject: "oidc:ann@example.test".into(),
            scopes: "usage:read".into(),
            csrf: "c".repeat(64),
            created_at_ms: NOW,
            expires_at_ms: NOW + 3_600_000,
        })
        .await
        .unwrap();
    assert!(
        !store
            .remove_member("tnt-b", "mem-a", NOW + 5)
            .await
            .unwrap()
    );
    assert!(
        store
            .find_dashboard_session("ann-session", NOW + 5)
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        store
            .remove_member("tnt-a", "mem-a", NOW + 5)
            .await
            .unwrap()
    );
    assert!(
        !store
            .remove_member("tnt-a", "mem-a", NOW + 6)
            .await
            .unwrap(),
        "once"
    );
    assert_eq!(
        store
            .find_dashboard_session("ann-session", NOW + 6)
            .await
            .unwrap(),
        None
    );
    let left = store.list_members("tnt-a").await.unwrap();
    assert!(
        left.is_empty(),
        "the removed member and the open invitation for its email are gone: {left:?}"
    );
    let after = store
        .sign_in_member(ISSUER, "sub-ann", Some("ann@example.test"), NOW + 7)
        .await
        .unwrap();
    let tenants: Vec<&str> = after.iter().map(|m| m.tenant_id.as_str()).collect();
    assert_eq!(
        tenants,
        ["tnt-b"],
        "removed from tnt-a, nothing brings her back"
    );
}

fn attempt(state_hash: &str, expires_at_ms: i64) -> OidcAttempt {
    OidcAttempt {
        state_hash: state_hash.into(),
        browser_hash: "b".repeat(64),
        purpose: "signin".into(),
        nonce: "n".into(),
        pkce_verifier: "v".into(),
        signup_team: None,
        created_at_ms: expires_at_ms - 600_000,
        expires_at_ms,
    }
}

async fn a_sign_in_under_way_is_taken_once_and_not_after_it_expires(db: Db) {
    let store = db.store().await;
    store
        .create_oidc_attempt(&attempt("once", NOW + 600_000))
        .await
        .unwrap();
    assert_eq!(store.take_oidc_attempt("other", NOW).await.unwrap(), None);
    assert_eq!(
        store.take_oidc_attempt("once", NOW).await.unwrap(),
        Some(attempt("once", NOW + 600_000))
    );
    assert_eq!(
        store.take_oidc_attempt("once", NOW + 1).await.unwrap(),
        None
    );
    store
        .create_oidc_attempt(&attempt("late", NOW + 600_000))
        .await
        .unwrap();
    assert_eq!(
        store
            .take_oidc_attempt("late", NOW + 600_000)
            .await
            .unwrap(),
        None,
        "dead at its expiry"
    );
}
