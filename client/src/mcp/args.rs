//! The arguments of the MCP tools, with their JSON schemas (what `tools/list` shows agents:
//! the doc comments are the descriptions; `tests/fixtures/mcp_tools.json` pins them).

use rmcp::schemars;
use serde::Deserialize;

/// `list_peers` arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ListPeersArgs {
    /// Include peers that are offline (their messages wait in their inbox). Default false.
    #[serde(default)]
    pub show_offline: Option<bool>,
    /// Include yourself in the list. Default false.
    #[serde(default)]
    pub include_self: Option<bool>,
    /// Only peers of this circle (default: your circle plus circle-crossing roles).
    #[serde(default)]
    pub circle: Option<String>,
}

/// `set_description` arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct DescriptionArgs {
    /// A brief summary of what you are working on (empty to clear). It expires after a while.
    pub text: String,
}

/// `ask` arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct AskArgs {
    /// The peer to ask: its display name (e.g. `backend`) or peer id (`peer-…`).
    pub peer_name: String,
    /// The question. The peer replies with `ack`; fetch the reply with `wait_on_ack`.
    pub query: String,
    /// An ask you received that this one answers and closes (chains the threads).
    #[serde(default)]
    pub reply_to: Option<String>,
    /// Resolve `peer_name` in this circle instead of your own.
    #[serde(default)]
    pub circle: Option<String>,
    /// Make it a typed question the peer closes with `answer` instead of `ack`.
    #[serde(default)]
    pub question: Option<QuestionArgs>,
}

/// A typed question on an ask.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct QuestionArgs {
    /// `choice` (the peer picks one of `options`), `text` (the peer answers in free text) or
    /// `acknowledge` (the peer only confirms it read it: it answers with option id `ack`).
    pub kind: String,
    /// For `choice`: at least two options; the peer answers with an option's `id`.
    #[serde(default)]
    pub options: Vec<OptionArgs>,
    /// Close the question after this many seconds (1 to 604800) if nobody answered: with
    /// `default` as the answer when given, else as expired. `wait_on_ack` then reports it.
    #[serde(default)]
    pub timeout_seconds: Option<u64>,
    /// For `choice` with a timeout: the option id taken when the timeout passes.
    #[serde(default)]
    pub default: Option<String>,
}

/// One option of a choice question.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct OptionArgs {
    /// What the peer answers with (letters, digits, `-`, `_`, `.`).
    pub id: String,
    /// What the peer reads.
    pub label: String,
}

impl QuestionArgs {
    pub(super) fn to_question(&self) -> Result<repowire_protocol::Question, String> {
        use repowire_protocol::{Question, QuestionKind, QuestionOption};
        let kind = match self.kind.as_str() {
            "choice" => QuestionKind::Choice,
            "text" => QuestionKind::Text,
            "acknowledge" => QuestionKind::Acknowledge,
            // Refused by the daemon with the reason (only the PreToolUse hook asks these).
            "tool_permission" => QuestionKind::ToolPermission,
            other => {
                return Err(format!(
                    "unknown question kind `{other}`; use `choice`, `text` or `acknowledge`"
                ));
            }
        };
        Ok(Question {
            kind,
            options: self
                .options
                .iter()
                .map(|o| QuestionOption {
                    id: o.id.clone(),
                    label: o.label.clone(),
                })
                .collect(),
            timeout_ms: self.timeout_seconds.map(|s| s.saturating_mul(1000)),
            default: self.default.clone(),
        })
    }
}

/// `wait_on_ack` arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct WaitArgs {
    /// The ask's correlation id (`ask-…`), as returned by `ask`.
    pub correlation_id: String,
    /// How long to wait, in seconds (default 50, at most 600).
    #[serde(default)]
    pub timeout_seconds: Option<u64>,
}

/// `ack` arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct AckArgs {
    /// The correlation id (`ask-…`) of an ask you received.
    pub correlation_id: String,
    /// Your reply, delivered to the asker. Omit to just close the ask.
    #[serde(default)]
    pub message: Option<String>,
}

/// `answer` arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct AnswerArgs {
    /// The correlation id (`ask-…`) of a structured question you received.
    pub correlation_id: String,
    /// The chosen option's id (choice and tool-permission questions).
    #[serde(default)]
    pub option_id: Option<String>,
    /// Free text (text questions; an optional comment otherwise).
    #[serde(default)]
    pub text: Option<String>,
}

/// `notify_peer` arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct NotifyArgs {
    /// The peer: display name or peer id.
    pub peer_name: String,
    /// The message (fire-and-forget: no reply is expected).
    pub message: String,
    /// Resolve `peer_name` in this circle instead of your own.
    #[serde(default)]
    pub circle: Option<String>,
}

/// `start_conversation` arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct StartConversationArgs {
    /// The other participants: display names or peer ids (1 to 7).
    pub peer_names: Vec<String>,
    /// The opening message: what the conversation is about.
    pub message: String,
    /// Resolve `peer_names` in this circle instead of your own.
    #[serde(default)]
    pub circle: Option<String>,
}

/// `end_conversation` arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct EndConversationArgs {
    /// The conversation (`cv-…`).
    pub conversation_id: String,
    /// Why, for the other participants.
    #[serde(default)]
    pub reason: Option<String>,
}

/// `broadcast` arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct BroadcastArgs {
    /// The message, for every online peer of your circle.
    pub message: String,
}

/// `read_peer_file` arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ReadFileArgs {
    /// The peer whose project the file belongs to: display name or peer id.
    pub peer_name: String,
    /// Path relative to that peer's project root (no `..`, no dotfiles).
    pub path: String,
}

/// `write_shared_state` arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct StateWriteArgs {
    /// Key: 1–64 of letters, digits, `.`, `_`, `-`.
    pub key: String,
    /// Value (at most 8 KiB). An empty value deletes the key.
    pub value: String,
}

/// `read_shared_state` arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct StateReadArgs {
    /// Only this key (default: every key of your circle).
    #[serde(default)]
    pub key: Option<String>,
}
