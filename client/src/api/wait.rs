//! The typed replies of the waits: `wait_reply` (an ask's outcome, whenever it comes) and
//! `ask_blocking` (ask a question and park until its outcome). The approval gate reads the
//! same outcome. Their JSON is what `repowire peer ask --wait --json` and `repowire question
//! --json` print and what the MCP `wait_on_ack` tool returns as structured content; a fixture
//! test pins every kind.

use repowire_protocol::{AnswerValue, PeerSummary};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::Sender;

/// How a wait for an ask ended: `state` in JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum WaitOutcome {
    /// A reply message closed the ask: an ack with text, or an answer.
    Replied {
        /// `answered` (it carries an answer) or `acked`.
        outcome: String,
        /// The ask.
        correlation_id: String,
        /// The reply as it arrived (`None`: its stored body could not be read).
        reply: Option<Reply>,
    },
    /// Closed without a reply message: a bare ack, a chained ask, or its question's timeout
    /// (with the default it took, if any).
    Closed {
        /// The ask's final state (`acked`, `answered`, `expired` …).
        outcome: String,
        /// The ask.
        correlation_id: String,
        /// Its question's timeout closed it.
        timed_out: bool,
        /// The answer recorded (a timeout's default).
        answer: Option<AnswerValue>,
        /// The text recorded with it.
        reply_text: Option<String>,
        /// Why, as the relay said.
        reason: Option<String>,
    },
    /// It will never be answered: refused, expired undelivered, or failed.
    Failed {
        /// `failed`, `expired` or `rejected`.
        outcome: String,
        /// Why.
        reason: String,
        /// The ask.
        correlation_id: String,
    },
    /// The wait ran out; the ask stays open.
    Waiting {
        /// The ask.
        correlation_id: String,
        /// In words.
        message: String,
    },
    /// A blocking question got no word from the relay in time: nothing is known of its outcome.
    NoVerdict {
        /// The question's message id, once it was sent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message_id: Option<String>,
        /// Its ask id, once the relay gave one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        correlation_id: Option<String>,
        /// Why.
        reason: String,
    },
}

/// The reply that closed an ask: its sender, answer and text, and the rest of the message as
/// it arrived (kept as JSON: nothing here reads it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    /// Who replied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<PeerSummary>,
    /// The answer to a structured question.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<AnswerValue>,
    /// The reply's text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The message's other fields.
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

/// `ask_blocking`: the outcome, with the local peer the question was asked as.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Blocked {
    /// How it ended.
    #[serde(flatten)]
    pub outcome: WaitOutcome,
    /// The local peer (session) it was asked as.
    pub from: Sender,
}

impl WaitOutcome {
    /// The ask, if it has an id.
    pub fn correlation_id(&self) -> Option<&str> {
        match self {
            WaitOutcome::Replied { correlation_id, .. }
            | WaitOutcome::Closed { correlation_id, .. }
            | WaitOutcome::Failed { correlation_id, .. }
            | WaitOutcome::Waiting { correlation_id, .. } => Some(correlation_id),
            WaitOutcome::NoVerdict { correlation_id, .. } => correlation_id.as_deref(),
        }
    }

    /// The typed answer the outcome carries: a reply's answer (and who gave it), or the default
    /// a timeout took. `None`: no answer (failed, expired, bare ack, no verdict, still waiting).
    pub fn answer(&self) -> Option<(&AnswerValue, Option<&PeerSummary>)> {
        match self {
            WaitOutcome::Replied {
                reply: Some(reply), ..
            } => reply.answer.as_ref().map(|a| (a, reply.from.as_ref())),
            WaitOutcome::Closed {
                answer: Some(a), ..
            } => Some((a, None)),
            _ => None,
        }
    }

    /// A reply or an answer came (also the default a question's timeout took): what `peer ask
    /// --wait` exits 0 for.
    pub fn answered(&self) -> bool {
        match self {
            WaitOutcome::Replied { .. } => true,
            WaitOutcome::Closed {
                timed_out, answer, ..
            } => *timed_out && answer.is_some(),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Every way a wait ends keeps its JSON shape (key order included) and is read back as its
    /// kind.
    #[test]
    fn each_outcome_keeps_its_json_shape() {
        let fixtures = [
            json!({"state": "replied", "outcome": "answered", "correlation_id": "ask-1",
                   "reply": {"from": {"peer_id": "peer-b", "name": "beta", "circle": "dev"},
                             "answer": {"option_id": "b"}, "text": "B",
                             "message_id": "0190b2a4-0000-7000-8000-000000000001", "kind": "answer"}}),
            json!({"state": "closed", "outcome": "answered", "correlation_id": "ask-1", "timed_out": true,
                   "answer": {"option_id": "no"}, "reply_text": "No", "reason": "timeout: the default was taken"}),
            json!({"state": "failed", "outcome": "expired", "reason": "nobody read it", "correlation_id": "ask-1"}),
            json!({"state": "waiting", "correlation_id": "ask-1", "message": "no reply within 5 s; the ask stays open"}),
            json!({"state": "no_verdict", "reason": "the relay did not take the question in time"}),
            json!({"state": "no_verdict", "message_id": "0190b2a4-0000-7000-8000-000000000002",
                   "correlation_id": "ask-2", "reason": "no outcome"}),
        ];
        let keys = |v: &Value| v.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>());
        for fixture in fixtures {
            let outcome: WaitOutcome = serde_json::from_value(fixture.clone()).expect("reads");
            let written = serde_json::to_value(&outcome).expect("writes");
            assert_eq!(written, fixture);
            assert_eq!(keys(&written), keys(&fixture));
        }
        let blocked = json!({"state": "waiting", "correlation_id": "ask-1", "message": "m",
                             "from": {"peer_id": "peer-a", "name": "app", "session_id": "s1"}});
        let read: Blocked = serde_json::from_value(blocked.clone()).expect("reads");
        assert_eq!(serde_json::to_value(&read).expect("writes"), blocked);
    }

    #[test]
    fn an_answer_is_a_replys_or_a_timeouts_default_and_nothing_else() {
        let replied: WaitOutcome = serde_json::from_value(json!({"state": "replied", "outcome": "answered",
            "correlation_id": "c", "reply": {"from": {"peer_id": "p", "name": "ana", "circle": "dev"},
            "answer": {"option_id": "allow"}}})).expect("reads");
        let (a, by) = replied.answer().expect("an answer");
        assert_eq!(a.option_id.as_deref(), Some("allow"));
        assert_eq!(by.map(|b| b.name.as_str()), Some("ana"));
        assert!(replied.answered());
        let bare: WaitOutcome = serde_json::from_value(json!({"state": "closed", "outcome": "acked",
            "correlation_id": "c", "timed_out": false, "answer": null, "reply_text": null, "reason": null}))
            .expect("reads");
        assert!(bare.answer().is_none() && !bare.answered());
        let waiting = WaitOutcome::Waiting {
            correlation_id: "c".into(),
            message: "m".into(),
        };
        assert!(waiting.answer().is_none() && !waiting.answered());
    }
}
