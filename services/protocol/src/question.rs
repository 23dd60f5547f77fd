//! Structured questions: the typed question an ask can carry, the typed answer that closes it,
//! the audience `@approvers`, and the `list_questions` / `questions` frames that show a peer
//! the questions it may answer (protocol.md §7.4, §8.16, §9.13, §10.13).

use serde::{Deserialize, Serialize};

use crate::frame::{DeliveryState, PeerSummary};
use crate::ids::{CorrelationId, MessageId, PeerId};

/// The reserved recipient of an `ask` whose question any approver of the tenant may answer
/// (a peer of role `human`, `orchestrator` or `service`, never the asker). Not a name: `@`
/// is outside the name alphabet, so no peer can be called this.
pub const APPROVERS: &str = "@approvers";

/// The option id that answers an `acknowledge` question.
pub const ACK_OPTION: &str = "ack";

/// Shortest `timeout_ms` of a question (1 s).
pub const MIN_QUESTION_TIMEOUT_MS: u64 = 1_000;
/// Longest `timeout_ms` of a question (7 days).
pub const MAX_QUESTION_TIMEOUT_MS: u64 = 7 * 24 * 3_600_000;

/// Kind of a structured question.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::EnumIter,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum QuestionKind {
    /// Pick one of `options`.
    Choice,
    /// Free text.
    Text,
    /// Allow or deny a tool call; options are `allow` and `deny`; denies when unanswered.
    ToolPermission,
    /// Only an acknowledgement is asked for: answered with `option_id` `ack` (and an optional
    /// comment in `text`).
    Acknowledge,
}

impl QuestionKind {
    /// Wire spelling.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// One option of a choice question.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuestionOption {
    /// Option id, answered with `answer.option_id`.
    pub id: String,
    /// Label for humans.
    pub label: String,
}

/// A typed question riding on an ask.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Question {
    /// Kind.
    pub kind: QuestionKind,
    /// Options (choice and tool_permission).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<QuestionOption>,
    /// How long the question waits for an answer, counted from the relay's accept; then the
    /// relay closes it: answered with `default` when there is one (a `tool_permission`
    /// question's default is always `deny`), else `expired`. No answer is taken after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// The option taken when `timeout_ms` passes unanswered (`choice`: one of the options;
    /// `tool_permission`: only `deny`, which is also what it takes without one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
}

/// A recorded answer.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnswerValue {
    /// Chosen option.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub option_id: Option<String>,
    /// Free text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

impl Question {
    /// A question of `kind` with `options` (`(id, label)` pairs), no timeout.
    pub fn new(kind: QuestionKind, options: &[(&str, &str)]) -> Self {
        Self {
            kind,
            options: options
                .iter()
                .map(|(id, label)| QuestionOption {
                    id: (*id).to_owned(),
                    label: (*label).to_owned(),
                })
                .collect(),
            timeout_ms: None,
            default: None,
        }
    }

    /// A tool-permission question (options `allow` and `deny`) that denies after `timeout_ms`.
    pub fn tool_permission(timeout_ms: u64) -> Self {
        Self {
            timeout_ms: Some(timeout_ms),
            ..Self::new(
                QuestionKind::ToolPermission,
                &[("allow", "Allow"), ("deny", "Deny")],
            )
        }
    }

    /// The label of an option.
    pub fn label_of(&self, option_id: &str) -> Option<&str> {
        self.options
            .iter()
            .find(|o| o.id == option_id)
            .map(|o| o.label.as_str())
    }

    /// The option taken when the question times out unanswered: `default`, and for a
    /// `tool_permission` question always `deny`. `None`: it expires without an answer.
    pub fn timeout_option(&self) -> Option<&str> {
        match self.kind {
            QuestionKind::ToolPermission => Some("deny"),
            QuestionKind::Choice => self.default.as_deref(),
            QuestionKind::Text | QuestionKind::Acknowledge => None,
        }
    }

    /// Checks an answer against this question and renders it as reply text for the asker.
    pub fn check_answer(&self, answer: &AnswerValue) -> Result<String, String> {
        let text = answer
            .text
            .as_deref()
            .map(str::trim)
            .filter(|t| !t.is_empty());
        match self.kind {
            QuestionKind::Text => text
                .map(str::to_owned)
                .ok_or_else(|| "a text question needs a non-empty `text`".into()),
            QuestionKind::Acknowledge => match answer.option_id.as_deref() {
                None | Some(ACK_OPTION) => Ok(match text {
                    Some(t) => format!("acknowledged: {t}"),
                    None => "acknowledged".to_owned(),
                }),
                Some(other) => Err(format!(
                    "`{other}` is not an option; an acknowledge question is answered with `{ACK_OPTION}`"
                )),
            },
            QuestionKind::Choice | QuestionKind::ToolPermission => {
                let id = answer
                    .option_id
                    .as_deref()
                    .ok_or_else(|| "this question needs an `option_id`".to_string())?;
                let label = self.label_of(id).ok_or_else(|| {
                    let ids: Vec<&str> = self.options.iter().map(|o| o.id.as_str()).collect();
                    format!(
                        "`{id}` is not an option; the options are: {}",
                        ids.join(", ")
                    )
                })?;
                Ok(match text {
                    Some(t) => format!("{label}: {t}"),
                    None => label.to_owned(),
                })
            }
        }
    }
}

/// `list_questions`: the questions to `@approvers` this peer may see, open or closed.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListQuestions {
    /// The asking peer (registered on this connection); its role decides what is visible.
    pub peer_id: PeerId,
    /// Closed questions (answered, acked, timed out), newest first, instead of open ones.
    #[serde(default)]
    pub closed: bool,
    /// At most this many (1–200; default 50).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

/// Largest `list_questions.limit`.
pub const MAX_QUESTIONS_LISTED: u32 = 200;
/// `list_questions.limit` when absent.
pub const DEFAULT_QUESTIONS_LISTED: u32 = 50;

/// One question in `questions`.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuestionInfo {
    /// The ask's id (`ask-…`): what `answer` names.
    pub correlation_id: CorrelationId,
    /// The ask's message id.
    pub message_id: MessageId,
    /// Who asked, with its name and circle at ask time.
    pub from: PeerSummary,
    /// The audience: `@approvers`.
    pub to: String,
    /// The ask's text.
    pub text: String,
    /// The question.
    pub question: Question,
    /// When the relay accepted it.
    pub created_at_ms: i64,
    /// When it times out (`created_at_ms` + `timeout_ms`), if it has a timeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_ms: Option<i64>,
    /// `accepted` while open; then `answered`, `acked` or `expired`.
    pub state: DeliveryState,
    /// The typed answer, once answered (at a timeout: the default taken).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<AnswerValue>,
    /// The answer as the asker got it (the option's label, with the comment).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<String>,
    /// The peer whose `answer` closed it (absent when it timed out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answered_by: Option<PeerSummary>,
    /// When it was closed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closed_at_ms: Option<i64>,
    /// For a question closed by its timeout: what happened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `questions`: answer to `list_questions`.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Questions {
    /// The request this answers.
    pub re: MessageId,
    /// Open questions oldest first; closed ones newest first.
    pub questions: Vec<QuestionInfo>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(option: Option<&str>, text: Option<&str>) -> AnswerValue {
        AnswerValue {
            option_id: option.map(str::to_owned),
            text: text.map(str::to_owned),
        }
    }

    #[test]
    fn an_acknowledge_question_takes_ack_with_or_without_a_comment_and_nothing_else() {
        let q = Question::new(QuestionKind::Acknowledge, &[]);
        assert_eq!(
            q.check_answer(&answer(Some("ack"), None)),
            Ok("acknowledged".into())
        );
        assert_eq!(
            q.check_answer(&answer(None, Some(" seen "))),
            Ok("acknowledged: seen".into())
        );
        assert!(q.check_answer(&answer(Some("yes"), None)).is_err());
    }

    #[test]
    fn a_tool_permission_question_times_out_as_deny_whatever_its_default() {
        let q = Question::tool_permission(5_000);
        assert_eq!(q.timeout_option(), Some("deny"));
        let mut choice = Question::new(QuestionKind::Choice, &[("a", "A"), ("b", "B")]);
        assert_eq!(choice.timeout_option(), None);
        choice.default = Some("b".into());
        assert_eq!(choice.timeout_option(), Some("b"));
        assert_eq!(
            Question::new(QuestionKind::Text, &[]).timeout_option(),
            None
        );
    }
}
