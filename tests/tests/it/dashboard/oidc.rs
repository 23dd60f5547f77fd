//! Sign-in through a real OpenID Connect provider (npm `oidc-provider` on 127.0.0.1, its
//! development login pages; `repowire_e2e::oidc`): a tenant's members are identities invited by
//! email, started on one pod and finished on another; removal ends a member's session; an
//! unverified email claims nothing; a member of two tenants chooses; the callback refuses
//! another browser, a replay, a made-up state and another issuer; sign-up through the provider
//! makes the team's owner; staff open the operator's pages with what the relay names; a provider
//! that is down fails the sign-in, not the relay.

use repowire_e2e::oidc::{self, Provider, free_port};
use repowire_e2e::process::{RelayProcess, TempDatabase};
use repowire_e2e::web::{Browser, Page};

use super::{scoped_key, signed_in};

const ALL: &[&str] = &[
    "connect",
    "usage:read",
    "approve",
    "keys:manage",
    "messages:read",
];

fn env_of(pairs: &[(String, String)]) -> Vec<(&str, &str)> {
    pairs
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect()
}

/// The done page of a callback: 200, a session cookie, the binding cookie cleared, and a
/// same-site move on to `next`.
fn assert_done(page: &Page, browser: &Browser, next: &str) {
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(
        page.body
            .contains(&format!(r#"http-equiv="refresh" content="0; url={next}""#)),
        "{}",
        page.body
    );
    assert!(
        browser.cookie.is_some(),
        "a session cookie: {:?}",
        page.set_cookies()
    );
    assert!(
        browser.oidc_cookie.is_none(),
        "the binding cookie is cleared"
    );
}

/// An embedded relay (SQLite) on a port chosen first, and the provider it signs in with.
struct Embedded {
    idp: Provider,
    relay: RelayProcess,
    /// The relay's address (`http://127.0.0.1:PORT`).
    base: String,
    _data: tempfile::TempDir,
}

/// Starts the provider, then an embedded relay using it with `extra` settings.
async fn embedded(dir: &str, extra: &[(&str, &str)]) -> Embedded {
    let data = tempfile::tempdir().expect("dir");
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let idp = Provider::start(
        dir,
        &[format!("{base}/dashboard/oidc/callback")],
        serde_json::json!({}),
    )
    .await;
    let settings = idp.relay_env(&base);
    let mut env = env_of(&settings);
    env.extend_from_slice(extra);
    let relay = RelayProcess::start_on(
        &repowire_e2e::process::relay_bin(),
        &format!("127.0.0.1:{port}"),
        &["--data-dir", data.path().to_str().expect("path")],
        &env,
    )
    .await;
    Embedded {
        idp,
        relay,
        base,
        _data: data,
    }
}

async fn invite(owner: &mut Browser, email: &str, scopes: &[&str]) -> Page {
    let page = owner.get("/dashboard/members").await;
    assert_eq!(page.status, 200, "{}", page.body);
    let csrf = page.hidden("csrf").expect("csrf");
    let mut form = vec![("csrf", csrf.as_str()), ("email", email)];
    form.extend(scopes.iter().map(|s| ("scope", *s)));
    owner.post("/dashboard/members", &form).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_sign_in_as_themselves_across_pods_until_removed() {
    let Some(dir) = oidc::available() else { return };
    let db = TempDatabase::create("repowire_dashboard_oidc");
    // One public address for both pods, as behind a load balancer: pod B's.
    let port_b = free_port();
    let base_b = format!("http://127.0.0.1:{port_b}");
    let idp = Provider::start(
        &dir,
        &[format!("{base_b}/dashboard/oidc/callback")],
        serde_json::json!({ "dave": { "email": "Dave@Example.test", "email_verified": true } }),
    )
    .await;
    let mut settings = idp.relay_env(&base_b);
    settings.push(("REPOWIRE_ADMIN_TOKEN".into(), "oidc-test-admin".into()));
    let env = env_of(&settings);
    let redis = repowire_e2e::redis_url();
    let prefix = repowire_e2e::redis_prefix();
    let a = RelayProcess::start_pod(&db.url(), &redis, &prefix, "pod-a", &env).await;
    let b = RelayProcess::start_pod_on(
        &format!("127.0.0.1:{port_b}"),
        &db.url(),
        &redis,
        &prefix,
        "pod-b",
        &env,
    )
    .await;
    assert_eq!(b.http, base_b);
    // A tenant to suspend and resume (which runs a pod's key check at once).
    repowire_e2e::process::admin(&db.url(), &["tenant", "create", "bystander"]);

    // The sign-in page offers the provider.
    let page = Browser::new(&a.http).get("/dashboard/signin").await;
    assert!(page.body.contains("Sign in with Test IdP"), "{}", page.body);

    // The owner (a key with every scope) invites Alice to read asks, not to manage keys.
    let owner_key = scoped_key(&db, "default", "owner", ALL);
    let mut owner = signed_in(&a.http, &owner_key).await;
    let invited = invite(
        &mut owner,
        "Alice@Example.test",
        &["usage:read", "messages:read"],
    )
    .await;
    assert_eq!(invited.status, 303, "{}", invited.body);
    let again = invite(&mut owner, "alice@example.test", &["usage:read"]).await;
    assert_eq!(
        again.status, 409,
        "one open invitation per email: {}",
        again.body
    );
    let beyond = invite(&mut owner, "x@example.test", &["usage:read", "operator"]).await;
    assert_eq!(beyond.status, 403, "{}", beyond.body);
    let bad = invite(&mut owner, "not an email", &["usage:read"]).await;
    assert_eq!(bad.status, 400, "{}", bad.body);

    // Alice starts on pod A and the provider sends her back to pod B.
    let mut alice = Browser::new(&a.http);
    let authorize = oidc::start(&mut alice, &[("purpose", "signin")]).await;
    assert!(authorize.starts_with(&idp.issuer), "{authorize}");
    assert!(
        authorize.contains("code_challenge_method=S256"),
        "PKCE: {authorize}"
    );
    let mut jar = oidc::ProviderJar::default();
    let back = oidc::consent(&mut jar, &authorize, "alice").await;
    assert!(back.starts_with(&base_b), "{back}");
    assert!(
        back.contains(&format!("iss={}", urlencode(&idp.issuer))),
        "{back}"
    );
    let done = alice.get_url(&back).await;
    assert_done(&done, &alice, "/dashboard");
    let overview = alice.get("/dashboard").await;
    assert_eq!(overview.status, 200, "{}", overview.body);
    assert!(
        overview.body.contains("oidc:alice@example.test"),
        "{}",
        overview.body
    );
    assert_eq!(alice.get("/dashboard/asks").await.status, 200);
    let keys = alice.get("/dashboard/keys").await;
    assert_eq!(
        keys.status, 403,
        "Alice was not given keys:manage: {}",
        keys.body
    );

    // The callback works once.
    let replay = alice.get_url(&back).await;
    assert_eq!(replay.status, 400, "{}", replay.body);

    // Dave's provider gives his email in capitals: it still claims his invitation.
    assert_eq!(
        invite(
            &mut owner,
            "dave@example.test",
            &["usage:read", "connect", "messages:read"]
        )
        .await
        .status,
        303
    );
    let mut dave = Browser::new(&b.http);
    let done = oidc::sign_in(&mut dave, &[("purpose", "signin")], "dave").await;
    assert_done(&done, &dave, "/dashboard");
    let again = invite(&mut owner, "dave@example.test", &["usage:read"]).await;
    assert_eq!(
        again.status, 409,
        "a member is not invited again: {}",
        again.body
    );

    // Dave sends as a person, and still can after the live-key check ran on his pod (it checks
    // his membership, not an API key).
    let agent_key = scoped_key(&db, "default", "agent", &["connect"]);
    let mut agents = repowire_e2e::client::TestClient::connect(&a.http, &a.ws, &agent_key).await;
    let bob = agents.peer("bob", "dev").await;
    for round in ["before", "after"] {
        if round == "after" {
            // Suspending and resuming another tenant runs the pod's key check at once.
            for action in ["suspend", "resume"] {
                let (status, body) = repowire_e2e::http_json(
                    reqwest::Method::POST,
                    &format!("{}/admin/v1/tenants/bystander/{action}", b.http),
                    Some("oidc-test-admin"),
                    None,
                )
                .await;
                assert_eq!(status, 200, "{action}: {body}");
            }
        }
        let form = dave.get("/dashboard/compose").await;
        assert_eq!(form.status, 200, "{}", form.body);
        let (csrf, once) = (
            form.hidden("csrf").expect("csrf"),
            form.hidden("once").expect("once"),
        );
        let text = format!("from dave, {round} the key check");
        let sent = dave
            .post(
                "/dashboard/compose",
                &[
                    ("csrf", &csrf),
                    ("once", &once),
                    ("kind", "notify"),
                    ("to", "bob"),
                    ("circle", ""),
                    ("text", &text),
                ],
            )
            .await;
        assert!(
            sent.body.contains("Accepted for bob"),
            "{round}: {}",
            sent.body
        );
        let got = agents.delivered_to(&bob.peer_id).await;
        assert_eq!(got.message.text, text);
        assert_eq!(got.message.from.name, "dave");
    }

    // An email the provider has not verified claims nothing.
    assert_eq!(
        invite(&mut owner, "unverified-eve@example.test", &["usage:read"])
            .await
            .status,
        303
    );
    let mut eve = Browser::new(&a.http);
    let refused = oidc::sign_in(&mut eve, &[("purpose", "signin")], "unverified-eve").await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert!(refused.body.contains("not verified"), "{}", refused.body);
    assert!(eve.cookie.is_none());

    // The Members page lists them; removing Alice ends her session on every pod.
    let members = owner.get("/dashboard/members").await;
    assert!(
        members.body.contains("alice@example.test"),
        "{}",
        members.body
    );
    assert!(members.body.contains("signed in"), "{}", members.body);
    let alice_id = member_id(&members.body, "alice@example.test");
    let csrf = members.hidden("csrf").expect("csrf");
    let removed = owner
        .post(
            "/dashboard/members/remove",
            &[("csrf", &csrf), ("member_id", &alice_id)],
        )
        .await;
    assert_eq!(removed.status, 303, "{}", removed.body);
    let mut alice_b = Browser::new(&b.http);
    alice_b.cookie = alice.cookie.clone();
    assert_eq!(
        alice_b.get("/dashboard").await.status,
        303,
        "her session ended"
    );
    assert_eq!(alice.get("/dashboard").await.status, 303);
    // And her next sign-in finds no team.
    let mut alice = Browser::new(&a.http);
    let refused = oidc::sign_in(&mut alice, &[("purpose", "signin")], "alice").await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert!(refused.body.contains("No team"), "{}", refused.body);
}

fn urlencode(text: &str) -> String {
    text.replace(':', "%3A").replace('/', "%2F")
}

/// The member id on the Members page's remove button for `email`.
fn member_id(body: &str, email: &str) -> String {
    let row = body
        .split("<tr>")
        .find(|r| r.contains(email))
        .expect("a row");
    super::attribute_after(row, r#"name="member_id" value=""#)
        .expect("a remove button")
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_callback_refuses_another_browser_a_made_up_state_and_another_issuer() {
    let Some(dir) = oidc::available() else { return };
    let Embedded {
        idp,
        relay,
        base: _,
        _data,
    } = embedded(&dir, &[]).await;
    let owner_key = relay.first_key.clone().expect("the first key");
    let mut owner = signed_in(&relay.http, &owner_key).await;
    assert_eq!(
        invite(&mut owner, "mallory@example.test", &["usage:read"])
            .await
            .status,
        303
    );

    // Mallory starts a sign-in and lures a victim's browser to her callback URL (login CSRF):
    // the victim's browser lacks her binding cookie.
    let mut mallory = Browser::new(&relay.http);
    let authorize = oidc::start(&mut mallory, &[("purpose", "signin")]).await;
    let mut jar = oidc::ProviderJar::default();
    let back = oidc::consent(&mut jar, &authorize, "mallory").await;
    let mut victim = Browser::new(&relay.http);
    let refused = victim.get_url(&back).await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert!(victim.cookie.is_none());
    // The attempt was used up by that try: even Mallory's own browser cannot finish it now.
    assert_eq!(mallory.get_url(&back).await.status, 400);

    // A state nobody started.
    let made_up = mallory
        .get("/dashboard/oidc/callback?code=x&state=made-up")
        .await;
    assert_eq!(made_up.status, 400, "{}", made_up.body);

    // An answer naming another issuer (RFC 9207 mix-up defence).
    let authorize = oidc::start(&mut mallory, &[("purpose", "signin")]).await;
    let mut jar = oidc::ProviderJar::default();
    let back = oidc::consent(&mut jar, &authorize, "mallory").await;
    let forged = back.replace(&urlencode(&idp.issuer), &urlencode("http://127.0.0.1:1"));
    assert_ne!(forged, back);
    let refused = mallory.get_url(&forged).await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert!(mallory.cookie.is_none());

    // A start from another site's page is refused before anything is stored.
    let cross = mallory
        .post_from(
            "/dashboard/oidc/start",
            &[("purpose", "signin")],
            Some("https://evil.example"),
        )
        .await;
    assert_eq!(cross.status, 403);

    // With the provider gone between the consent and the callback, the sign-in fails with a
    // clear page (503, not a refusal); the relay stays ready.
    let authorize = oidc::start(&mut mallory, &[("purpose", "signin")]).await;
    let mut jar = oidc::ProviderJar::default();
    let back = oidc::consent(&mut jar, &authorize, "mallory").await;
    drop(idp);
    let down = mallory.get_url(&back).await;
    assert_eq!(down.status, 503, "{}", down.body);
    assert!(down.body.contains("unavailable"), "{}", down.body);
    assert!(mallory.cookie.is_none());
    let relay_ready = reqwest::get(format!("{}/readyz", relay.http))
        .await
        .expect("readyz");
    assert_eq!(relay_ready.status().as_u16(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_up_through_the_provider_makes_the_owner_and_a_member_of_two_teams_chooses() {
    let Some(dir) = oidc::available() else { return };
    let Embedded {
        idp: _idp,
        relay,
        base,
        _data,
    } = embedded(
        &dir,
        &[
            ("REPOWIRE_SIGNUP", "true"),
            ("REPOWIRE_SIGNUP_INVITE_CODE", "let-me-in"),
        ],
    )
    .await;

    // A wrong invite code stops the sign-up before the provider.
    let mut carol = Browser::new(&relay.http);
    let form = carol.get("/dashboard/signup").await;
    assert!(
        form.body.contains("Create the team with Test IdP"),
        "{}",
        form.body
    );
    let wrong = carol
        .post(
            "/dashboard/oidc/start",
            &[
                ("purpose", "signup"),
                ("team", "rocket"),
                ("invite_code", "guess"),
            ],
        )
        .await;
    assert_eq!(wrong.status, 403, "{}", wrong.body);

    let welcome = oidc::sign_in(
        &mut carol,
        &[
            ("purpose", "signup"),
            ("team", "rocket"),
            ("invite_code", "let-me-in"),
        ],
        "carol",
    )
    .await;
    assert_eq!(welcome.status, 200, "{}", welcome.body);
    assert!(
        welcome.body.contains("Team rocket is ready"),
        "{}",
        welcome.body
    );
    let key = super::attribute_after(
        &welcome.body,
        r#"id="made-key" type="text" readonly value=""#,
    )
    .expect("the first key, shown once")
    .to_owned();
    assert!(
        welcome.body.contains(&format!(
            "repowire setup --relay-url {base} --api-key {key}"
        )),
        "{}",
        welcome.body
    );
    assert_eq!(
        super::token_status(&relay, &key).await,
        200,
        "the key works"
    );
    let members = carol.get("/dashboard/members").await;
    assert_eq!(
        members.status, 200,
        "the owner manages members: {}",
        members.body
    );
    assert!(
        members.body.contains("carol@example.test"),
        "{}",
        members.body
    );
    assert!(members.body.contains("(owner)"), "{}", members.body);
    let owner_row = members
        .body
        .split("<tr>")
        .find(|r| r.contains("carol@example.test"))
        .expect("her row");
    assert!(
        !owner_row.contains("member_id"),
        "no Remove for the owner: {owner_row}"
    );

    // Carol also joins the relay's first team by invitation: her next sign-in asks which.
    let default_key = relay.first_key.clone().expect("the first key");
    let mut default_owner = signed_in(&relay.http, &default_key).await;
    assert_eq!(
        invite(&mut default_owner, "carol@example.test", &["usage:read"])
            .await
            .status,
        303
    );
    let mut again = Browser::new(&relay.http);
    let done = oidc::sign_in(&mut again, &[("purpose", "signin")], "carol").await;
    assert_done(&done, &again, "/dashboard/choose");
    // The chooser reaches only its page.
    assert_eq!(again.get("/dashboard").await.status, 303);
    let choose = again.get("/dashboard/choose").await;
    assert_eq!(choose.status, 200, "{}", choose.body);
    assert!(
        choose.body.contains("rocket") && choose.body.contains("default"),
        "{}",
        choose.body
    );
    let csrf = choose.hidden("csrf").expect("csrf");
    // Someone else's real membership (Erin's invitation in `default`) is not hers to pick.
    assert_eq!(
        invite(&mut default_owner, "erin@example.test", &["usage:read"])
            .await
            .status,
        303
    );
    let listed = default_owner.get("/dashboard/members").await;
    let erins = member_id(&listed.body, "erin@example.test");
    let stranger = again
        .post(
            "/dashboard/choose",
            &[("csrf", &csrf), ("member_id", &erins)],
        )
        .await;
    assert_eq!(stranger.status, 403, "{}", stranger.body);
    let row = choose
        .body
        .split("<li>")
        .find(|r| r.contains(">default<"))
        .expect("default");
    let pick = super::attribute_after(row, r#"name="member_id" value=""#)
        .expect("an id")
        .to_owned();
    let picked = again
        .post(
            "/dashboard/choose",
            &[("csrf", &csrf), ("member_id", &pick)],
        )
        .await;
    assert_eq!(picked.status, 303, "{}", picked.body);
    let overview = again.get("/dashboard").await;
    assert_eq!(overview.status, 200, "{}", overview.body);
    assert!(overview.body.contains("default"), "{}", overview.body);
    assert_eq!(
        again.get("/dashboard/members").await.status,
        403,
        "in `default` Carol may only read usage"
    );
    // Not even the owner herself removes the owner (her membership id, from the chooser).
    let rocket_row = choose
        .body
        .split("<li>")
        .find(|r| r.contains(">rocket<"))
        .expect("rocket");
    let owner_id = super::attribute_after(rocket_row, r#"name="member_id" value=""#)
        .expect("an id")
        .to_owned();
    let csrf = carol
        .get("/dashboard/members")
        .await
        .hidden("csrf")
        .expect("csrf");
    let refused = carol
        .post(
            "/dashboard/members/remove",
            &[("csrf", &csrf), ("member_id", &owner_id)],
        )
        .await;
    assert_eq!(refused.status, 403, "{}", refused.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn staff_open_the_operator_pages_with_what_the_relay_names() {
    let Some(dir) = oidc::available() else { return };
    // No admin token: the operator's pages are on for the staff alone.
    let Embedded {
        idp: _idp,
        relay,
        base: _,
        _data,
    } = embedded(
        &dir,
        &[(
            "REPOWIRE_OPERATOR_STAFF",
            "ops@example.test=admin:read,boss@example.test=admin:write",
        )],
    )
    .await;
    let signin = Browser::new(&relay.http)
        .get("/dashboard/operator/signin")
        .await;
    assert_eq!(signin.status, 200, "{}", signin.body);
    assert!(
        signin.body.contains("Sign in with Test IdP"),
        "{}",
        signin.body
    );
    assert!(
        !signin.body.contains("name=\"admin_token\""),
        "no admin token to type"
    );

    let mut ops = Browser::new(&relay.http);
    let done = oidc::sign_in(&mut ops, &[("purpose", "operator")], "ops").await;
    assert_eq!(done.status, 200, "{}", done.body);
    assert!(ops.operator_cookie.is_some(), "the operator's own cookie");
    assert!(ops.cookie.is_none(), "no tenant session");
    let page = ops.get("/dashboard/operator").await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("default"), "{}", page.body);
    assert!(
        !page.body.contains(">Suspend<"),
        "read-only staff see no Suspend: {}",
        page.body
    );
    let csrf = page.hidden("csrf").expect("csrf");
    let refused = ops
        .post(
            "/dashboard/operator/tenants",
            &[
                ("csrf", &csrf),
                ("tenant_id", "tnt-any"),
                ("action", "suspend"),
            ],
        )
        .await;
    assert_eq!(
        refused.status, 403,
        "admin:read cannot suspend: {}",
        refused.body
    );

    let mut boss = Browser::new(&relay.http);
    oidc::sign_in(&mut boss, &[("purpose", "operator")], "boss").await;
    let page = boss.get("/dashboard/operator").await;
    assert!(page.body.contains(">Suspend<"), "{}", page.body);

    // Someone the relay does not name gets nothing.
    let mut mallory = Browser::new(&relay.http);
    let refused = oidc::sign_in(&mut mallory, &[("purpose", "operator")], "mallory").await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert!(mallory.operator_cookie.is_none());
    // And a tenant sign-in does not open the operator's pages, nor the other way round.
    assert_eq!(mallory.get("/dashboard/operator").await.status, 303);
    let mut ops_tenant = Browser::new(&relay.http);
    ops_tenant.cookie = ops.operator_cookie.clone();
    assert_eq!(ops_tenant.get("/dashboard").await.status, 303);
}
