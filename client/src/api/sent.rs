//! The typed replies of the sending requests (`send`, `ack`, `answer`): the daemon builds them,
//! the CLI and the MCP server read them, and the compiler checks both sides. Their JSON is what
//! `repowire peer ask|notify|broadcast|ack|answer --json` prints (a fixture test pins it).

use repowire_protocol::PeerSummary;
use serde::{Deserialize, Serialize};

/// What a send, ack or answer became, and the peer it went out as.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sent {
    /// Where the message is.
    #[serde(flatten)]
    pub outcome: SendOutcome,
    /// The local peer (session) it went out as.
    pub from: Sender,
}

/// Where a message is once the daemon has answered: `state` in JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum SendOutcome {
    /// The relay stored it.
    Accepted {
        /// The message's id.
        message_id: String,
        /// `ask-…` for an ask, `notif-…` for a notification or broadcast; for an ack or answer,
        /// the ask it closes.
        correlation_id: Option<String>,
        /// Who will receive it (empty for a bare ack, or a broadcast nobody was online for).
        recipients: Vec<PeerSummary>,
    },
    /// Kept in the daemon's outbox and sent when the relay takes it.
    Queued {
        /// The message's id.
        message_id: String,
        /// Why it waits.
        reason: String,
    },
    /// Sent once, and the relay did not answer in time: it may have it.
    Unknown {
        /// The message's id.
        message_id: String,
        /// What happened.
        reason: String,
    },
}

impl SendOutcome {
    /// The message's id, whatever became of it.
    pub fn message_id(&self) -> &str {
        match self {
            SendOutcome::Accepted { message_id, .. }
            | SendOutcome::Queued { message_id, .. }
            | SendOutcome::Unknown { message_id, .. } => message_id,
        }
    }

    /// The ask id (or notification id) the relay gave it, once accepted.
    pub fn correlation_id(&self) -> Option<&str> {
        match self {
            SendOutcome::Accepted { correlation_id, .. } => correlation_id.as_deref(),
            _ => None,
        }
    }

    /// `state` as JSON spells it.
    pub fn state(&self) -> &'static str {
        match self {
            SendOutcome::Accepted { .. } => "accepted",
            SendOutcome::Queued { .. } => "queued",
            SendOutcome::Unknown { .. } => "unknown",
        }
    }

    /// Why it is not accepted yet (empty when it is).
    pub fn reason(&self) -> &str {
        match self {
            SendOutcome::Accepted { .. } => "",
            SendOutcome::Queued { reason, .. } | SendOutcome::Unknown { reason, .. } => reason,
        }
    }
}

/// The local peer a message went out as.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sender {
    /// Its peer id (none before its session first registered).
    pub peer_id: Option<String>,
    /// Its display name (none before its session first registered).
    pub name: Option<String>,
    /// Its session.
    pub session_id: String,
}

/// A message this daemon sent (its `sent` row, which `peer status` shows).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
pub struct SentRow {
    /// The message's id.
    pub message_id: String,
    /// The local peer it went out as.
    pub peer_id: String,
    /// `ask`, `notify`, `broadcast`, `ack`, `answer` …
    pub kind: String,
    /// The recipient as named (none for a broadcast).
    pub to_name: Option<String>,
    /// What was sent.
    pub text: String,
    /// The ask or notification id (for an ack or answer: the ask it closes).
    pub correlation_id: Option<String>,
    /// `queued`, `accepted`, `delivered`, `acked` …
    pub state: String,
    /// Why it failed, if it did.
    pub error: Option<String>,
    /// The reply's text, once replied.
    pub reply: Option<String>,
    /// When it was sent (ms since the Unix epoch).
    pub created_at_ms: i64,
}

/// One delivery state the relay reported for a sent message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
pub struct SentEvent {
    /// The recipient's peer id (none for a state of the message as a whole).
    pub recipient: Option<String>,
    /// The state reached.
    pub state: String,
    /// Why (written by the recipient's daemon: remote text).
    pub reason: Option<String>,
    /// When (ms since the Unix epoch).
    pub at_ms: i64,
}

/// `message_status`: a sent message and its delivery history, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageStatus {
    /// The message.
    pub message: SentRow,
    /// What the relay reported.
    pub events: Vec<SentEvent>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The `--json` shapes of a send, as documented: the fields and their order.
    #[test]
    fn a_send_reads_and_writes_the_documented_json() {
        let from = json!({"peer_id": "peer-1", "name": "alpha", "session_id": "s-1"});
        let accepted = json!({
            "state": "accepted",
            "message_id": "0190a0f0-0000-7000-8000-000000000001",
            "correlation_id": "ask-k3x9",
            "recipients": [{"peer_id": "peer-2", "name": "beta", "circle": "default"}],
            "from": from,
        });
        let queued = json!({
            "state": "queued",
            "message_id": "0190a0f0-0000-7000-8000-000000000002",
            "reason": "the relay link is not up; kept in the outbox and sent when it is",
            "from": from,
        });
        let bare_ack = json!({
            "state": "accepted",
            "message_id": "0190a0f0-0000-7000-8000-000000000003",
            "correlation_id": null,
            "recipients": [],
            "from": {"peer_id": null, "name": null, "session_id": "s-2"},
        });
        for fixture in [accepted, queued, bare_ack] {
            let sent: Sent = serde_json::from_value(fixture.clone()).expect("reads");
            let written = serde_json::to_value(&sent).expect("writes");
            assert_eq!(written, fixture);
            // Field order too: `state` first, `from` last (serde_json keeps order here).
            let keys = |v: &serde_json::Value| {
                v.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>())
            };
            assert_eq!(keys(&written), keys(&fixture));
        }
        let sent: Sent = serde_json::from_value(json!({
            "state": "accepted", "message_id": "m", "correlation_id": "ask-1", "recipients": [],
            "from": {"peer_id": null, "name": null, "session_id": "s"},
        }))
        .expect("reads");
        assert_eq!(sent.outcome.correlation_id(), Some("ask-1"));
        assert_eq!(sent.outcome.state(), "accepted");
        assert_eq!(sent.outcome.message_id(), "m");
    }
}
