//! A steady stream of messages between two relay pods while the receiver's pod is lost, and the
//! check that nothing was: the cluster tests (a pod signalled) and the chart's render-and-run
//! (a container killed with `podman kill -s KILL`) share it.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use repowire_protocol::*;

use crate::client::TestClient;

/// How many messages the stream carries.
pub const MESSAGES: usize = 300;

/// What the receiver saw.
#[derive(Debug)]
pub struct StreamReport {
    /// Messages the relay accepted from the sender.
    pub accepted: usize,
    /// Distinct messages received.
    pub received: usize,
    /// Deliver frames on the wire (more than `received` when some were delivered again).
    pub on_the_wire: usize,
}

impl std::fmt::Display for StreamReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} accepted, {} distinct received, {} deliver frames on the wire",
            self.accepted, self.received, self.on_the_wire
        )
    }
}

/// A sender on pod `a` ((http, ws) URLs) streams [`MESSAGES`] notifications to a receiver on
/// pod `b`; once a third has arrived, `lose_b` takes pod b away; the receiver reconnects to pod
/// a and reclaims its peer. Every accepted message must reach it: nothing lost, and after
/// de-duplication by message id (which the protocol asks of every client) each exactly once,
/// and nothing that was not sent. Panics otherwise.
pub async fn across_a_lost_pod(
    a: (&str, &str),
    b: (&str, &str),
    key: &str,
    lose_b: impl FnOnce(),
) -> StreamReport {
    let mut sender = TestClient::connect(a.0, a.1, key).await;
    let mut receiver = TestClient::connect(b.0, b.1, key).await;
    let alice = sender.peer("alice", "dev").await;
    let bob = receiver.peer("bob", "dev").await;

    let to = bob.peer_id.to_string();
    let mut stream = Some(tokio::spawn(async move {
        let mut accepted = Vec::new();
        for i in 0..MESSAGES {
            let sent = sender
                .notify(&alice, &to, &format!("message {i}"))
                .await
                .expect("accepted");
            accepted.push(sent.message_id);
            tokio::time::sleep(Duration::from_millis(3)).await; // a steady stream, not a burst
        }
        accepted
    }));

    let mut lose_b = Some(lose_b);
    let mut seen = HashSet::new();
    let mut wire = 0usize;
    let mut reconnected = false;
    let mut lost_connection = false;
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut accepted: Option<Vec<MessageId>> = None;
    loop {
        if let Some(all) = &accepted
            && all.iter().all(|id| seen.contains(id))
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not everything arrived: {} of {}",
            seen.len(),
            MESSAGES
        );
        if stream.as_ref().is_some_and(|s| s.is_finished())
            && let Some(done) = stream.take()
        {
            accepted = Some(done.await.expect("sender"));
            continue;
        }
        if seen.len() >= MESSAGES / 3
            && let Some(lose) = lose_b.take()
        {
            lose();
        }
        match receiver.next_frame().await {
            Some(Frame {
                body: Body::Deliver(d),
                ..
            }) => {
                wire += 1;
                seen.insert(d.message.message_id);
                // The pod may be gone between the delivery and its receipt: then the message
                // stays unacknowledged and comes again after the move (counted once).
                if !receiver
                    .try_receipt(&bob.peer_id, d.message.message_id, ReceiptState::Delivered)
                    .await
                {
                    assert!(
                        lose_b.is_none(),
                        "the connection broke before pod b was lost"
                    );
                    lost_connection = true;
                }
            }
            Some(_) => {}
            None if lose_b.is_none() && !reconnected => lost_connection = true,
            None => {
                if let Some(done) = stream.take() {
                    accepted = Some(done.await.expect("sender"));
                }
            }
        }
        if lost_connection && !reconnected {
            // The pod is gone: reconnect to the other one and reclaim the same peer.
            receiver = TestClient::connect(a.0, a.1, key).await;
            let again = receiver
                .register(Register {
                    name: Some("bob".into()),
                    circle: Some("dev".into()),
                    backend: "claude-code".into(),
                    path: Some("/work/bob".into()),
                    reclaim: Some(bob.peer_id.clone()),
                    ..Default::default()
                })
                .await;
            assert!(again.reclaimed, "the peer keeps its id and inbox");
            reconnected = true;
        }
    }

    let accepted = accepted.expect("sender finished");
    assert_eq!(accepted.len(), MESSAGES);
    let unexpected: Vec<_> = seen.iter().filter(|id| !accepted.contains(id)).collect();
    assert!(
        unexpected.is_empty(),
        "received messages nobody sent: {unexpected:?}"
    );
    assert!(reconnected, "the receiver never had to move");
    StreamReport {
        accepted: accepted.len(),
        received: seen.len(),
        on_the_wire: wire,
    }
}
