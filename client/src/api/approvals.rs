//! The typed reply of `questions` and `local_decisions`: approvals (questions to `@approvers`)
//! as the relay lists them, and the record of decisions with the calls this machine denied by
//! itself merged in. Its JSON is what `repowire approvals list|show|history --json` prints (a
//! fixture test pins both kinds of entry).

use repowire_protocol::{DeliveryState, QuestionInfo};
use serde::{Deserialize, Serialize};

/// One approval: asked through the relay, or denied on this machine without asking anyone.
/// In JSON the two read alike; a local denial has `"local": true` and state `denied_here`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Approval {
    /// A call this machine denied without an approver's decision (the relay could not be
    /// reached, or the gate could not ask).
    Local(LocalDenial),
    /// A question to `@approvers`, as the relay lists it.
    Asked(Box<QuestionInfo>),
}

/// A call this machine denied by itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocalDenial {
    /// The ask id, if the question was asked before it was denied here.
    pub correlation_id: Option<String>,
    /// The session that asked, as far as it had a peer.
    pub from: LocalAsker,
    /// The runtime session that asked.
    pub session_id: String,
    /// What was asked (the tool call).
    pub text: String,
    /// Always `denied_here`.
    pub state: String,
    /// Why it was denied here.
    pub reason: String,
    /// When.
    pub closed_at_ms: i64,
    /// Always true: what tells a local denial from the relay's record.
    pub local: bool,
}

/// The peer of a session that was denied locally (none of it when it had no peer yet).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocalAsker {
    /// Its peer id.
    pub peer_id: Option<String>,
    /// Its display name.
    pub name: Option<String>,
    /// Its circle.
    pub circle: Option<String>,
}

impl Approval {
    /// The ask id (none for a call denied before it was asked).
    pub fn correlation_id(&self) -> Option<&str> {
        match self {
            Approval::Local(d) => d.correlation_id.as_deref(),
            Approval::Asked(q) => Some(q.correlation_id.as_str()),
        }
    }

    /// What was asked.
    pub fn text(&self) -> &str {
        match self {
            Approval::Local(d) => &d.text,
            Approval::Asked(q) => &q.text,
        }
    }

    /// When it was decided (or closed); `None` while it waits.
    pub fn closed_at_ms(&self) -> Option<i64> {
        match self {
            Approval::Local(d) => Some(d.closed_at_ms),
            Approval::Asked(q) => q.closed_at_ms,
        }
    }

    /// Still waiting for a decision (`accepted`, `delivered` or `injected` on the wire).
    pub fn is_open(&self) -> bool {
        matches!(
            self,
            Approval::Asked(q) if matches!(
                q.state,
                DeliveryState::Accepted | DeliveryState::Delivered | DeliveryState::Injected
            )
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `repowire approvals history --json` keeps its shape for both kinds of entry, and each
    /// is read back as its kind.
    #[test]
    fn both_kinds_of_entry_keep_their_json_shape() {
        let fixture = json!([
            {
                "correlation_id": null,
                "from": {"peer_id": "peer-a", "name": "app", "circle": "dev"},
                "session_id": "s1",
                "text": "Bash: ls",
                "state": "denied_here",
                "reason": "could not ask",
                "closed_at_ms": 30,
                "local": true,
            },
            {
                "correlation_id": "ask-1",
                "message_id": "0190b2a4-0000-7000-8000-000000000001",
                "from": {"peer_id": "peer-a", "name": "app", "circle": "dev"},
                "to": "@approvers",
                "text": "Bash: make",
                "question": {"kind": "tool_permission", "options": [
                    {"id": "allow", "label": "Allow"}, {"id": "deny", "label": "Deny"}]},
                "created_at_ms": 1,
                "state": "answered",
                "answer": {"option_id": "allow"},
                "answered_by": {"peer_id": "peer-h", "name": "ana", "circle": "dev"},
                "closed_at_ms": 20,
            },
        ]);
        let all: Vec<Approval> = serde_json::from_value(fixture.clone()).expect("reads");
        assert!(matches!(all[0], Approval::Local(_)));
        assert!(matches!(all[1], Approval::Asked(_)));
        assert_eq!(all[0].correlation_id(), None);
        assert_eq!(all[1].correlation_id(), Some("ask-1"));
        assert!(!all[1].is_open());
        let written = serde_json::to_value(&all).expect("writes");
        assert_eq!(written, fixture);
        let keys =
            |v: &serde_json::Value| v.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>());
        assert_eq!(keys(&written[0]), keys(&fixture[0]));
        assert_eq!(keys(&written[1]), keys(&fixture[1]));
    }
}
