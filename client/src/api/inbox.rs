//! The typed reply of `inbox`: the local peer whose inbox it is and its messages. Its JSON is
//! what `repowire inbox --json` prints (with `--watch`, one [`InboxMessage`] per line); a fixture
//! test pins it.

use repowire_protocol::{PeerSummary, Question};
use serde::{Deserialize, Serialize};

/// `inbox`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InboxListing {
    /// Whose inbox.
    pub peer: InboxPeer,
    /// Unread messages first, then read ones newest first (with `read`).
    pub messages: Vec<InboxMessage>,
}

/// The local peer an inbox belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InboxPeer {
    /// Its peer id.
    pub peer_id: String,
    /// Its display name.
    pub name: Option<String>,
    /// Its circle.
    pub circle: String,
    /// The Repowire session (work stream) this peer executes now, if bound.
    pub repowire_session_id: Option<String>,
}

/// One received message. `unread` is its state before this listing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InboxMessage {
    /// The message's id.
    pub message_id: String,
    /// Its place in this daemon's inbox (`--after`).
    pub seq: i64,
    /// `notify`, `broadcast`, `ask`, `reply` …
    pub kind: String,
    /// What `peer ack` / `peer answer` take: the ask id (the message id works too).
    pub id: String,
    /// The ask or notification id.
    pub correlation_id: Option<String>,
    /// Not read before this listing.
    pub unread: bool,
    /// The local state (`queued`, `handed` …).
    pub state: String,
    /// An ask still waiting for a reply.
    pub open: bool,
    /// When this daemon received it (ms since the Unix epoch).
    pub received_at_ms: i64,
    /// When the sender's relay accepted it (a question's deadline counts from here); `None`
    /// for a stored body this build cannot read.
    #[serde(default)]
    pub created_at_ms: Option<i64>,
    /// The sender (`None`: unreadable body).
    pub from: Option<PeerSummary>,
    /// The text, as the sender wrote it (remote text: sanitize before showing it).
    pub text: Option<String>,
    /// A structured question (options, timeout, default).
    pub question: Option<Question>,
    /// The ask this replies to.
    pub reply_to: Option<String>,
    /// The sender's Repowire session, when the relay knew it.
    pub from_repowire_session_id: Option<String>,
    /// The recipient's Repowire session, when the relay knew it.
    pub to_repowire_session_id: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `repowire inbox --json` keeps its documented shape, key order included.
    #[test]
    fn inbox_json_keeps_its_shape() {
        let fixture = json!({
            "peer": {"peer_id": "peer-me", "name": "human", "circle": "default", "repowire_session_id": null},
            "messages": [{
                "message_id": "019aa576-88c9-79d2-a13f-fe7979cb9e86",
                "seq": 7,
                "kind": "ask",
                "id": "ask-1",
                "correlation_id": "ask-1",
                "unread": true,
                "state": "queued",
                "open": true,
                "received_at_ms": 1790000000500_i64,
                "created_at_ms": 1790000000000_i64,
                "from": {"peer_id": "peer-lead", "name": "lead", "circle": "default"},
                "text": "deploy now?",
                "question": {"kind": "choice", "options": [{"id": "yes", "label": "Yes"}], "timeout_ms": 90000, "default": "yes"},
                "reply_to": null,
                "from_repowire_session_id": "rs-1",
                "to_repowire_session_id": null,
            }],
        });
        let listing: InboxListing = serde_json::from_value(fixture.clone()).expect("reads");
        let written = serde_json::to_value(&listing).expect("writes");
        assert_eq!(written, fixture);
        let keys =
            |v: &serde_json::Value| v.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>());
        assert_eq!(keys(&written["messages"][0]), keys(&fixture["messages"][0]));
        assert_eq!(keys(&written), keys(&fixture));
    }
}
