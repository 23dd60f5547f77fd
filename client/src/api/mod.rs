//! The daemon's local API: one JSON request per line over a Unix socket (mode 0600), one JSON
//! response line back. Hooks, the CLI and the MCP server are its clients. The caller's process
//! id is taken from the socket (SO_PEERCRED), never from the request.
//!
//! Here: the requests. Typed replies: [`Sent`] (send, ack, answer, decide), [`LocalSession`]
//! (whoami), [`Identity`] (identity); the other requests still answer JSON values read by key
//! (issue 31, item 1, continues). The calls themselves are in `transport`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

mod approvals;
mod circle;
mod code;
mod conversation;
mod dashboard;
mod inbox;
mod outbox;
mod panes;
mod peers;
mod sent;
mod session;
mod status;
mod transport;
mod wait;

pub use approvals::{Approval, LocalAsker, LocalDenial};
pub use circle::{CircleState, Described, FileRead, StateWritten};
pub use code::{ApiCode, DaemonCode};
pub use conversation::{Conversation, ConversationLine, ConversationShown, ConversationStarted};
pub use dashboard::DashboardLink;
pub use inbox::{InboxListing, InboxMessage, InboxPeer};
pub use outbox::{OutboxDropped, OutboxRealm, OutboxReport};
pub use panes::{Pane, PaneState, Resumed};
pub use peers::ListedPeer;
pub use sent::{MessageStatus, SendOutcome, Sender, Sent, SentEvent, SentRow};
pub use session::{EndedSession, HookReply, Identity, LocalSession, Stopping};
pub use status::{DaemonStatus, LinkState, RealmQueue, RefusedSession, WakeRecord};
pub use transport::{CallError, call, call_as, call_async, typed};
pub use wait::{Blocked, Reply, WaitOutcome};

/// An agent runtime's hook event: the one table the hook command (`repowire hook <event>`),
/// setup (which writes the runtime's settings) and the daemon share. Serialized (in the local
/// API) and parsed (on the command line) in kebab-case: `session-start`, `pre-tool-use` ….
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum HookEvent {
    /// SessionStart: register the session, give it identity and peers.
    SessionStart,
    /// UserPromptSubmit: busy; hand over queued messages and reminders.
    PromptSubmit,
    /// Stop: idle; continue with waiting messages.
    Stop,
    /// Notification: idle prompt.
    Notification,
    /// SessionEnd: unregister.
    SessionEnd,
    /// PreToolUse (opt-in, `setup --approvals`): a gated tool waits for an approver.
    PreToolUse,
}

impl HookEvent {
    /// The events every `setup` installs (`pre-tool-use` only with `--approvals`).
    pub const ALWAYS: [HookEvent; 5] = [
        HookEvent::SessionStart,
        HookEvent::PromptSubmit,
        HookEvent::Stop,
        HookEvent::Notification,
        HookEvent::SessionEnd,
    ];

    /// Our name: the `repowire hook` argument and the local API's spelling.
    pub fn name(self) -> &'static str {
        match self {
            HookEvent::SessionStart => "session-start",
            HookEvent::PromptSubmit => "prompt-submit",
            HookEvent::Stop => "stop",
            HookEvent::Notification => "notification",
            HookEvent::SessionEnd => "session-end",
            HookEvent::PreToolUse => "pre-tool-use",
        }
    }

    /// The event's name in Claude Code's settings (`hooks.<name>`) and hook output
    /// (`hookEventName`).
    pub fn claude_name(self) -> &'static str {
        match self {
            HookEvent::SessionStart => "SessionStart",
            HookEvent::PromptSubmit => "UserPromptSubmit",
            HookEvent::Stop => "Stop",
            HookEvent::Notification => "Notification",
            HookEvent::SessionEnd => "SessionEnd",
            HookEvent::PreToolUse => "PreToolUse",
        }
    }
}

/// A request to the daemon.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// Daemon health, relay link, local sessions.
    Status,
    /// Queued messages per relay identity (`repowire outbox`).
    Outbox,
    /// Drops the messages queued for another relay identity (`repowire outbox drop`).
    OutboxDrop {
        /// The relay identity, as `repowire outbox` lists it.
        realm: String,
    },
    /// An agent runtime hook fired.
    Hook {
        /// Which hook fired.
        event: HookEvent,
        /// The runtime that ran it (`repowire hook --runtime`); Claude Code when left out, as
        /// hooks installed before there were others say nothing.
        #[serde(default)]
        runtime: crate::runtimes::Runtime,
        /// The JSON the runtime gave the hook on stdin.
        payload: Value,
        /// `TMUX` of the hook's environment (socket path, server pid, session index).
        #[serde(default)]
        tmux: Option<String>,
        /// `TMUX_PANE` of the hook's environment.
        #[serde(default)]
        tmux_pane: Option<String>,
        /// For `pre-tool-use`: how long the call waits for an approval (the hook command's
        /// `[approvals] timeout_seconds`, which its own deadline is made from).
        #[serde(default)]
        approval_timeout_ms: Option<u64>,
        /// `REPOWIRE_SESSION` of the hook's environment: the Repowire session that
        /// `repowire session resume` started this runtime to continue.
        #[serde(default)]
        repowire_session: Option<String>,
    },
    /// Peers visible to the acting peer.
    Peers {
        /// Act as this local peer (id or name); default: the caller's session, else the CLI peer.
        #[serde(default)]
        from: Option<String>,
        /// Include offline peers.
        #[serde(default)]
        include_offline: bool,
        /// Every circle of the tenant.
        #[serde(default)]
        all_circles: bool,
        /// Only this circle.
        #[serde(default)]
        circle: Option<String>,
    },
    /// Send an ask, notify or broadcast.
    Send(Outgoing),
    /// Close an ask, optionally with a reply.
    Ack {
        /// Act as this local peer.
        #[serde(default)]
        from: Option<String>,
        /// The ask.
        correlation_id: String,
        /// Reply text.
        #[serde(default)]
        reply: Option<String>,
    },
    /// Answer a structured ask with a typed answer.
    Answer {
        /// Act as this local peer.
        #[serde(default)]
        from: Option<String>,
        /// The ask.
        correlation_id: String,
        /// Chosen option.
        #[serde(default)]
        option_id: Option<String>,
        /// Free text.
        #[serde(default)]
        text: Option<String>,
    },
    /// The agent session the caller belongs to, proven by process ancestry (never a fallback):
    /// how the MCP server learns whose tools it serves.
    Whoami {
        /// `TMUX_PANE` of the caller, cross-checked against the session's pane.
        #[serde(default)]
        tmux_pane: Option<String>,
    },
    /// Which local session the caller acts as, and why (`repowire whoami`).
    Identity {
        /// As `--from` would name it.
        #[serde(default)]
        from: Option<String>,
    },
    /// What was delivered to the acting peer (`repowire inbox`).
    Inbox(InboxQuery),
    /// End a local session: its peer goes offline and what it was sent fails back to the
    /// senders (`repowire session end`).
    EndSession {
        /// Session id, peer id or name.
        session: String,
    },
    /// Set (or, with an empty text, clear) the acting peer's description.
    Describe {
        /// Act as this local peer.
        #[serde(default)]
        from: Option<String>,
        /// Short task state.
        text: String,
    },
    /// Read a file from a peer's project, if that peer's daemon allows it.
    ReadFile {
        /// Act as this local peer.
        #[serde(default)]
        from: Option<String>,
        /// The peer (name or id).
        peer: String,
        /// Path relative to the peer's project root.
        path: String,
    },
    /// Write (or, without a value, delete) a key of the acting peer's circle's shared state.
    StateSet {
        /// Act as this local peer.
        #[serde(default)]
        from: Option<String>,
        /// Key.
        key: String,
        /// Value; absent deletes.
        #[serde(default)]
        value: Option<String>,
    },
    /// Read the shared state of the acting peer's circle (one key, or all).
    StateGet {
        /// Act as this local peer.
        #[serde(default)]
        from: Option<String>,
        /// Only this key.
        #[serde(default)]
        key: Option<String>,
    },
    /// What happened to a message this daemon sent: by message id or correlation id.
    MessageStatus {
        /// Message id or correlation id.
        id: String,
    },
    /// Ask a structured question (with `question.timeout_ms`) and wait for its outcome: the
    /// typed answer, the default its timeout took, or why there is none.
    AskBlocking(Outgoing),
    /// The questions to `@approvers` the acting peer may see.
    Questions {
        /// Act as this local peer.
        #[serde(default)]
        from: Option<String>,
        /// Closed ones (the record of decisions), newest first, instead of open ones.
        #[serde(default)]
        closed: bool,
        /// At most this many.
        #[serde(default)]
        limit: Option<u32>,
    },
    /// The tool calls this machine denied without an approver's decision, as `Questions` with
    /// `closed` lists them beside the relay's record: for when the relay cannot be reached.
    LocalDecisions {
        /// Act as this local peer.
        #[serde(default)]
        from: Option<String>,
        /// At most this many.
        #[serde(default)]
        limit: Option<u32>,
    },
    /// Allow or deny a tool call waiting at `@approvers`, as the person at this terminal.
    Decide {
        /// Act as this local peer.
        #[serde(default)]
        from: Option<String>,
        /// The question (`ask-…`).
        correlation_id: String,
        /// Allow (else deny).
        allow: bool,
        /// Why, for the agent (it sees it).
        #[serde(default)]
        reason: Option<String>,
    },
    /// Wait until the ask is answered (or the timeout passes).
    WaitReply {
        /// Act as this local peer (the asker).
        #[serde(default)]
        from: Option<String>,
        /// The ask.
        correlation_id: String,
        /// How long to wait.
        timeout_ms: u64,
    },
    /// Open a direct conversation: an opening message to `peers`, then every finished turn of
    /// each participant goes to the others.
    StartConversation {
        /// Act as this local peer.
        #[serde(default)]
        from: Option<String>,
        /// The other participants: names, peer ids or `rs-…` session ids.
        peers: Vec<String>,
        /// Resolve the names in this circle.
        #[serde(default)]
        circle: Option<String>,
        /// The opening message.
        text: String,
    },
    /// End a conversation the acting peer takes part in; the others are told.
    EndConversation {
        /// Act as this local peer.
        #[serde(default)]
        from: Option<String>,
        /// `cv-…`.
        conversation_id: String,
        /// Why, for the others.
        #[serde(default)]
        reason: Option<String>,
    },
    /// The conversations the acting peer takes part in (with `ended`, also the ended ones).
    Conversations {
        /// Act as this local peer.
        #[serde(default)]
        from: Option<String>,
        /// Ended ones too.
        #[serde(default)]
        ended: bool,
    },
    /// One conversation the acting peer takes part in, with its messages as this daemon saw
    /// them.
    ConversationShow {
        /// Act as this local peer.
        #[serde(default)]
        from: Option<String>,
        /// `cv-…`.
        conversation_id: String,
    },
    /// The sessions this daemon hosts.
    Sessions,
    /// A one-time sign-in link to the relay's dashboard, for the person at this terminal.
    DashboardLink,
    /// Repowire sessions (work streams) as the relay keeps them.
    WorkSessions {
        /// Act as this local peer.
        #[serde(default)]
        from: Option<String>,
        /// Every circle and machine (else this machine's sessions).
        #[serde(default)]
        all: bool,
    },
    /// Resume a detached session of this machine in a new tmux window.
    ResumeSession {
        /// `rs-…`.
        session: String,
        /// The agent program (default: the runtime's own, `claude` or `codex`), called with
        /// the runtime's resume arguments (`--resume ID`, `resume ID`).
        #[serde(default)]
        command: Option<String>,
        /// Only say what would run.
        #[serde(default)]
        dry_run: bool,
        /// `TMUX` of the caller (selects the server); default server when absent.
        #[serde(default)]
        tmux: Option<String>,
    },
    /// Panes of a tmux server and which session each belongs to.
    Panes {
        /// `TMUX` of the caller (selects the server); default server when absent.
        #[serde(default)]
        tmux: Option<String>,
    },
    /// Adopt an agent running in a pane that never registered.
    Link {
        /// `%N`.
        pane: String,
        /// Agent runtime (`claude-code`, `codex`); left out, the one the pane runs.
        #[serde(default)]
        backend: Option<crate::runtimes::Runtime>,
        /// `TMUX` of the caller.
        #[serde(default)]
        tmux: Option<String>,
    },
    /// Stop the daemon.
    Shutdown,
}

/// An ask, notify or broadcast to send.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Outgoing {
    /// Act as this local peer.
    #[serde(default)]
    pub from: Option<String>,
    /// What to send.
    pub kind: SendKind,
    /// Recipient name or peer id (not for broadcast).
    #[serde(default)]
    pub to: Option<String>,
    /// Resolve `to` in this circle.
    #[serde(default)]
    pub circle: Option<String>,
    /// The text.
    pub text: String,
    /// Chain to (and close) this ask.
    #[serde(default)]
    pub reply_to: Option<String>,
    /// A typed question riding on an ask (`choice` or `text`; `tool_permission` is refused
    /// here: it comes only from the PreToolUse hook path).
    #[serde(default)]
    pub question: Option<repowire_protocol::Question>,
}

/// What `repowire inbox` asks for.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InboxQuery {
    /// Act as this local peer.
    #[serde(default)]
    pub from: Option<String>,
    /// Read messages too (newest first, after the unread ones).
    #[serde(default)]
    pub read: bool,
    /// Only messages after this inbox position (`seq`).
    #[serde(default)]
    pub after_seq: Option<i64>,
    /// At most this many read messages.
    #[serde(default = "default_inbox_limit")]
    pub limit: u32,
    /// Leave unread messages unread.
    #[serde(default)]
    pub peek: bool,
    /// Wait up to this long for an unread message when there is none.
    #[serde(default)]
    pub wait_ms: u64,
}

fn default_inbox_limit() -> u32 {
    20
}

/// Kinds of message `send` creates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SendKind {
    /// A tracked question.
    Ask,
    /// Fire-and-forget to one peer.
    Notify,
    /// To every online peer of the circle.
    Broadcast,
}

impl SendKind {
    /// The kind of message it creates, as the protocol names it (the one spelling table).
    pub fn message_kind(self) -> repowire_protocol::MessageKind {
        match self {
            SendKind::Ask => repowire_protocol::MessageKind::Ask,
            SendKind::Notify => repowire_protocol::MessageKind::Notify,
            SendKind::Broadcast => repowire_protocol::MessageKind::Broadcast,
        }
    }
}

/// A response line.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Response {
    /// Success flag.
    pub ok: bool,
    /// The result, on success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// The error, on failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ApiError>,
}

/// An error the daemon reports.
#[derive(Debug, Clone, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    /// Machine-readable code: a protocol error code, or one of the daemon's own.
    pub code: ApiCode,
    /// What went wrong.
    pub message: String,
    /// What to do about it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// Candidates of an ambiguous name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub candidates: Vec<Value>,
}

impl ApiError {
    /// An error with a code and message.
    pub fn new(code: impl Into<ApiCode>, message: impl Into<String>) -> Self {
        Self {
            code: code.into(),
            message: message.into(),
            hint: None,
            candidates: Vec::new(),
        }
    }

    /// Adds a hint.
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// The error as a person or an agent reads it (the CLI prints it, MCP tools return it):
    /// message and code, each candidate of an ambiguous name, then the hint. The message, the
    /// hint and the candidates may quote remote text (a relay's, a peer's name), so every part
    /// goes through the sanitizer: shown, never obeyed.
    pub fn describe(&self) -> String {
        use crate::sanitize::{for_context, for_terminal};
        let mut text = format!(
            "{} ({})",
            for_context(&self.message),
            for_terminal(self.code.as_str())
        );
        for c in &self.candidates {
            let field = |k: &str| for_terminal(c.get(k).and_then(Value::as_str).unwrap_or("?"));
            text.push_str(&format!(
                "\n  candidate: {} (peer {}, circle {})",
                field("name"),
                field("peer_id"),
                field("circle"),
            ));
        }
        if let Some(h) = &self.hint {
            text.push_str(&format!("\nhint: {}", for_context(h)));
        }
        text
    }
}

impl Response {
    /// Success.
    pub fn ok(result: Value) -> Self {
        Self {
            ok: true,
            result: Some(result),
            error: None,
        }
    }

    /// Failure.
    pub fn err(error: ApiError) -> Self {
        Self {
            ok: false,
            result: None,
            error: Some(error),
        }
    }
}
