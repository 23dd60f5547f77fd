//! Error codes (in `error` frames and HTTP error bodies) and WebSocket close codes.

use serde::{Deserialize, Serialize};

/// Why a request failed. Serialized as a snake_case string; clients must treat unknown codes
/// as generic failures.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::EnumIter,
)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum ErrorCode {
    /// Not JSON, or not a JSON object.
    MalformedFrame,
    /// Valid JSON, but a field is missing, mistyped or fails validation.
    InvalidFrame,
    /// `type` is not a frame type of this protocol version.
    UnknownType,
    /// A frame type that is not allowed in this direction or at this point of the session.
    UnexpectedFrame,
    /// `v` is not a supported protocol version.
    UnsupportedVersion,
    /// The frame is larger than the frame limit.
    FrameTooLarge,
    /// A text field is larger than its limit.
    TextTooLarge,
    /// No or bad credentials (HTTP 401).
    Unauthorized,
    /// The token has expired; exchange the API key again.
    TokenExpired,
    /// The API key was revoked or has expired.
    KeyRevoked,
    /// The admin credential is missing or wrong.
    Forbidden,
    /// The named peer is not registered on this connection.
    NotRegistered,
    /// No peer with that name or id is visible to the caller.
    UnknownPeer,
    /// The name matches more than one peer; the error carries `candidates`.
    AmbiguousPeer,
    /// No ask with that correlation id is visible to the caller.
    UnknownCorrelation,
    /// The ask is already closed.
    AskClosed,
    /// Only the recipient of an ask may ack or answer it.
    NotRecipient,
    /// The answer does not fit the question (wrong option, plain ask, missing text).
    InvalidAnswer,
    /// The recipient's inbox is full; the message was not accepted.
    InboxFull,
    /// The message id was already used for a different message.
    DuplicateId,
    /// Too many requests; retry later.
    RateLimited,
    /// No message with that id is visible to the caller.
    UnknownMessage,
    /// An HTTP request body or parameter is invalid (HTTP 400).
    InvalidRequest,
    /// The request conflicts with existing state, e.g. a tenant name that is taken (HTTP 409).
    Conflict,
    /// Storage is unavailable; the request was not accepted and may be retried.
    Unavailable,
    /// The relay is shutting down; reconnect to another instance.
    ShuttingDown,
    /// An internal error; nothing internal is disclosed.
    Internal,
    /// Not found (HTTP 404).
    NotFound,
    /// A size or count limit other than the text limit (e.g. keys of a circle's shared state).
    LimitExceeded,
    /// The tenant is suspended by the relay's operator (HTTP 403): nothing is served until it is
    /// resumed.
    TenantSuspended,
    /// The tenant's plan allows no more messages this calendar month (UTC); `retry_after_ms`
    /// says when the next month starts. A quota, not a rate: retrying sooner fails the same way.
    QuotaExceeded,
    /// No conversation with that id in this tenant.
    UnknownConversation,
    /// The peer is not a participant of the conversation.
    NotParticipant,
    /// The conversation has ended; nothing more is relayed in it.
    ConversationEnded,
    /// The conversation is paused (its loop guard tripped); a turn a person's prompt started
    /// resumes it.
    ConversationPaused,
}

impl ErrorCode {
    /// The wire spelling, also used as a metrics label.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// WebSocket close codes used by the relay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CloseCode;

impl CloseCode {
    /// Normal close.
    pub const NORMAL: u16 = 1000;
    /// The relay is going away (shutdown, drain): reconnect, possibly elsewhere, and resume.
    pub const GOING_AWAY: u16 = 1001;
    /// A policy violation that is not covered by a more specific code.
    pub const POLICY: u16 = 1008;
    /// A WebSocket message over the transport limit (beyond the frame limit's slack).
    pub const TOO_BIG: u16 = 1009;
    /// An internal error.
    pub const INTERNAL: u16 = 1011;
    /// The API key behind this connection was revoked: do not reconnect with it.
    pub const KEY_REVOKED: u16 = 4001;
    /// The first frame was not a valid `hello`, or did not arrive in time.
    pub const HELLO_REQUIRED: u16 = 4002;
    /// The `hello` asked for a protocol version this relay does not speak.
    pub const UNSUPPORTED_VERSION: u16 = 4003;
    /// The connection could not keep up with its outbound frames; reconnect and resume.
    pub const SLOW_CONSUMER: u16 = 4008;
    /// No traffic (not even a pong) within the idle timeout.
    pub const IDLE_TIMEOUT: u16 = 4009;
    /// The tenant was suspended by the relay's operator: reconnecting fails with
    /// `403 tenant_suspended` until it is resumed (retry rarely, or wait to be told).
    pub const TENANT_SUSPENDED: u16 = 4010;
}
