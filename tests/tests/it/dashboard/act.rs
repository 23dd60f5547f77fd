//! Acting from the dashboard as a person (a `human` peer): sending a notify and an ask to an
//! agent on another pod (one message per form, however often it is sent), the reply reaching
//! the person's peer and receipted `delivered`, refusals shown as such; answering a tool
//! permission question to `@approvers` from the Approvals page, only as the user's own
//! doing and only with `approve`.

use repowire_e2e::client::TestClient;
use repowire_e2e::process::{TempDatabase, admin};
use repowire_e2e::web::Browser;
use repowire_protocol::{Ack, Ask, Body, DeliveryState, MessageKind, Question};

use super::{pods, scoped_key, signed_in};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_sends_asks_and_approves_from_the_dashboard_as_a_human_peer() {
    let db = TempDatabase::create("repowire_dashboard_act");
    let (a, b) = pods(&db).await;
    let person = scoped_key(
        &db,
        "default",
        "alice",
        &["connect", "usage:read", "messages:read", "approve"],
    );
    let agent_key = admin(&db.url(), &["key", "create", "default", "--label", "agent"]);
    let mut on_b = TestClient::connect(&b.http, &b.ws, &agent_key).await;
    let bob = on_b.peer("bob", "dev").await;

    let mut browser = signed_in(&a.http, &person).await;
    let form = browser.get("/dashboard/compose").await;
    assert_eq!(form.status, 200, "{}", form.body);
    assert!(form.body.contains(r#"href="/dashboard/approvals""#));
    let csrf = form.hidden("csrf").expect("csrf");
    let once = form.hidden("once").expect("a frame id");

    // A notify to an agent on the other pod, from the person's peer.
    let sent = browser
        .post(
            "/dashboard/compose",
            &[
                ("csrf", &csrf),
                ("once", &once),
                ("kind", "notify"),
                ("to", "bob"),
                ("circle", ""),
                ("text", "<b>standup in 5</b>"),
            ],
        )
        .await;
    assert_eq!(sent.status, 200, "{}", sent.body);
    assert!(sent.body.contains("Accepted for bob"), "{}", sent.body);
    let got = on_b.delivered_to(&bob.peer_id).await;
    assert_eq!(got.message.kind, MessageKind::Notify);
    assert_eq!(got.message.text, "<b>standup in 5</b>");
    assert_eq!(got.message.from.name, "alice");
    let me = got.message.from.peer_id.clone();
    let roster = on_b.list(&bob.peer_id, false).await;
    let alice = roster
        .iter()
        .find(|p| p.peer_id == me)
        .expect("the person is online");
    assert_eq!(alice.role, repowire_protocol::Role::Human);

    // An ask, its form sent twice (a reload): one ask; bob's reply reaches the person's peer,
    // which receipts it.
    let form = browser.get("/dashboard/compose").await;
    let once = form.hidden("once").expect("a frame id");
    let ask = [
        ("csrf", csrf.as_str()),
        ("once", once.as_str()),
        ("kind", "ask"),
        ("to", "bob"),
        ("circle", "dev"),
        ("text", "ready to ship?"),
    ];
    for _ in 0..2 {
        let sent = browser.post("/dashboard/compose", &ask).await;
        assert!(sent.body.contains("Accepted for bob"), "{}", sent.body);
    }
    let asked = on_b.delivered_to(&bob.peer_id).await;
    assert_eq!(asked.message.text, "ready to ship?");
    let reply = on_b
        .submit(Body::Ack(Ack {
            from: bob.peer_id.clone(),
            correlation_id: asked.message.correlation_id.clone().expect("an ask id"),
            reply: Some("yes".into()),
        }))
        .await
        .expect("reply accepted");
    let state = on_b.state_of(reply.message_id).await;
    assert_eq!(state.state, DeliveryState::Delivered, "{state:?}");
    let asks = browser.get("/dashboard/asks").await;
    assert_eq!(
        asks.body.matches("ready to ship?").count(),
        1,
        "one ask: {}",
        asks.body
    );
    assert!(asks.body.contains("yes"), "{}", asks.body);

    // Refusals are said, and nothing is sent: an unknown peer, a text past the protocol's
    // limit, a stale form, another site's post.
    let form = browser.get("/dashboard/compose").await;
    let once = form.hidden("once").expect("a frame id");
    let refused = browser
        .post(
            "/dashboard/compose",
            &[
                ("csrf", &csrf),
                ("once", &once),
                ("kind", "notify"),
                ("to", "nobody-here"),
                ("text", "hello?"),
            ],
        )
        .await;
    assert_eq!(refused.status, 422, "{}", refused.body);
    assert!(refused.body.contains("Not sent"), "{}", refused.body);
    assert!(
        refused.body.contains("hello?"),
        "the form keeps what was typed"
    );
    let long = "x".repeat(40 * 1024);
    let form = browser.get("/dashboard/compose").await;
    let once = form.hidden("once").expect("a frame id");
    let refused = browser
        .post(
            "/dashboard/compose",
            &[
                ("csrf", &csrf),
                ("once", &once),
                ("kind", "notify"),
                ("to", "bob"),
                ("text", &long),
            ],
        )
        .await;
    assert_eq!(refused.status, 422, "{}", &refused.body[..500]);
    let stale = browser
        .post(
            "/dashboard/compose",
            &[
                ("csrf", "nope"),
                ("once", &once),
                ("to", "bob"),
                ("text", "x"),
            ],
        )
        .await;
    assert_eq!(stale.status, 403);
    let theirs = browser
        .post_from(
            "/dashboard/compose",
            &[
                ("csrf", &csrf),
                ("once", &once),
                ("to", "bob"),
                ("text", "x"),
            ],
            Some("https://evil.example"),
        )
        .await;
    assert_eq!(theirs.status, 403);

    // A tool permission question from bob, answered on the other pod's Approvals page.
    let question = on_b
        .submit(Body::Ask(Ask {
            from: bob.peer_id.clone(),
            to: repowire_protocol::APPROVERS.into(),
            circle: None,
            text: "Bash: rm -rf <script>alert(1)</script> build/".into(),
            reply_to: None,
            question: Some(Question::tool_permission(600_000)),
        }))
        .await
        .expect("question accepted");
    let mut on_pod_b = Browser::new(&b.http);
    on_pod_b.cookie = browser.cookie.clone();
    let page = on_pod_b.get("/dashboard/approvals").await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(!page.body.contains("<script>alert"), "{}", page.body);
    assert!(
        page.body.contains("rm -rf &#60;script&#62;")
            || page.body.contains("rm -rf &lt;script&gt;")
    );
    let cid = question
        .correlation_id
        .clone()
        .expect("an ask id")
        .to_string();
    assert!(page.body.contains(&cid), "{}", page.body);
    let once = page.hidden("once").expect("a frame id");
    let allow = [
        ("csrf", csrf.as_str()),
        ("once", once.as_str()),
        ("correlation_id", cid.as_str()),
        ("option_id", "allow"),
    ];
    // Not marked by a browser as the user's own doing: refused, nothing answered.
    let unmarked = on_pod_b.post("/dashboard/approvals", &allow).await;
    assert_eq!(unmarked.status, 403, "{}", unmarked.body);
    assert!(
        unmarked.body.contains("a person&#39;s decision")
            || unmarked.body.contains("a person's decision")
    );
    on_pod_b
        .headers
        .push(("sec-fetch-user".into(), "?1".into()));
    let answered = on_pod_b.post("/dashboard/approvals", &allow).await;
    assert_eq!(answered.status, 200, "{}", answered.body);
    assert!(
        answered.body.contains("Answered `allow`"),
        "{}",
        answered.body
    );
    assert!(
        answered.body.contains("Nothing is waiting"),
        "{}",
        answered.body
    );
    let decision = on_b.delivered_to(&bob.peer_id).await;
    assert_eq!(
        decision
            .message
            .answer
            .as_ref()
            .and_then(|a| a.option_id.as_deref()),
        Some("allow")
    );
    assert_eq!(decision.message.from.peer_id, me, "the person answered");
    // The same form again (a reload) is the same answer; a new one for a closed question is
    // refused by the relay, and said.
    let again = on_pod_b.post("/dashboard/approvals", &allow).await;
    assert!(again.body.contains("Answered `allow`"), "{}", again.body);
    let fresh = repowire_protocol::MessageId::new().to_string();
    let deny = [
        ("csrf", csrf.as_str()),
        ("once", fresh.as_str()),
        ("correlation_id", cid.as_str()),
        ("option_id", "deny"),
    ];
    let late = on_pod_b.post("/dashboard/approvals", &deny).await;
    assert!(late.body.contains("Not answered"), "{}", late.body);
    assert!(late.body.contains("closed"), "{}", late.body);

    // Used on pod b, the person's peer moved there; pod a takes it back for the next send.
    let form = browser.get("/dashboard/compose").await;
    let once = form.hidden("once").expect("a frame id");
    let again = browser
        .post(
            "/dashboard/compose",
            &[
                ("csrf", &csrf),
                ("once", &once),
                ("kind", "notify"),
                ("to", "bob"),
                ("text", "back on pod a"),
            ],
        )
        .await;
    assert!(again.body.contains("Accepted for bob"), "{}", again.body);
    let got = on_b.delivered_to(&bob.peer_id).await;
    assert_eq!(got.message.text, "back on pod a");
    assert_eq!(got.message.from.peer_id, me, "the same peer");

    // A notify to the person is failed at once, with the reason (the dashboard has no inbox).
    let to_person = on_b
        .notify(&bob, me.as_str(), "lunch?")
        .await
        .expect("accepted");
    let state = on_b.state_of(to_person.message_id).await;
    assert_eq!(state.state, DeliveryState::Failed, "{state:?}");
    assert!(
        state
            .reason
            .as_deref()
            .is_some_and(|r| r.contains("no inbox")),
        "{state:?}"
    );

    // No other key's connection may become a person's peer.
    let id = on_b
        .send(Body::Register(repowire_protocol::Register {
            name: Some("alice".into()),
            circle: Some("humans".into()),
            backend: "dashboard".into(),
            role: Some(repowire_protocol::Role::Human),
            path: Some("dashboard:key-of-someone-else".into()),
            machine: None,
            reclaim: Some(me.clone()),
        }))
        .await;
    let refused = on_b.answer(id).await.expect_err("refused");
    assert_eq!(refused.code, repowire_protocol::ErrorCode::InvalidRequest);

    // A person whose key may not approve sees no Approvals page.
    let viewer = scoped_key(&db, "default", "viewer", &["connect", "usage:read"]);
    let mut viewer_browser = Browser::new(&a.http);
    viewer_browser
        .post("/dashboard/signin", &[("api_key", &viewer)])
        .await;
    let overview = viewer_browser.get("/dashboard").await;
    assert!(
        !overview.body.contains("/dashboard/approvals"),
        "{}",
        overview.body
    );
    assert_eq!(viewer_browser.get("/dashboard/approvals").await.status, 403);
}
