//! Session bindings (protocol.md §8.17, §8.18, §9.14, §9.15, §10.14): a durable Repowire
//! session id (`rs-…`) for one work stream, joining the runtime's own session ids (kept across
//! `/clear` and a resume), the peer that executes it now, and a pointer into the runtime's
//! transcript (a path and a cursor, never its text).

use serde::{Deserialize, Serialize};

use crate::frame::PeerSummary;
use crate::ids::{MessageId, PeerId};

/// Prefix of Repowire session ids.
pub const SESSION_ID_PREFIX: &str = "rs-";
/// Longest runtime session id.
pub const MAX_RUNTIME_SESSION_ID_BYTES: usize = 128;
/// Runtime session ids a session remembers (the newest).
pub const MAX_RUNTIME_SESSION_IDS: usize = 16;

/// True for a Repowire session id as the relay mints them: `rs-` and 16 characters of the
/// peer-id alphabet.
pub fn looks_like_session_id(s: &str) -> bool {
    crate::ids::looks_like_relay_id(SESSION_ID_PREFIX, s)
}

/// A new session id from 80 random bits (16 characters of base 32).
pub fn session_id_from_random(bits: u128) -> String {
    crate::ids::relay_id_from_random(SESSION_ID_PREFIX, bits)
}

/// True for a runtime session id: 1–128 bytes of letters, digits, `.`, `_`, `:`, `-`, the
/// first a letter or digit (so that it never reads as an option where a command line takes it).
pub fn is_runtime_session_id(s: &str) -> bool {
    s.len() <= MAX_RUNTIME_SESSION_ID_BYTES
        && s.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
}

/// Where the runtime keeps the session's history: a file and how far it was read. Repowire
/// keeps this pointer, never the history itself.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TranscriptLocator {
    /// The transcript file on the executor's machine (≤ 4096 bytes, no control characters).
    pub path: String,
    /// Its length in bytes when last observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<u64>,
}

/// `bind_session`: the peer executes this work stream now.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BindSession {
    /// The executing peer (registered on this connection).
    pub peer_id: PeerId,
    /// The Repowire session the client knows this work stream as, if it knows one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The runtime's own id of the session it runs now (Claude Code's `session_id`).
    pub runtime_session_id: String,
    /// Where the runtime keeps its history.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transcript: Option<TranscriptLocator>,
    /// Why it binds: `startup`, `resume`, `clear`, `compact` (as the runtime said), or
    /// `reconnect`; informative.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// A session's state: attached to a live executor, or not.
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
pub enum SessionStatus {
    /// Its executor peer is live: messages to the session reach it now.
    Active,
    /// No live executor: messages to the session wait in its last executor's inbox until the
    /// session is resumed (or they expire).
    Detached,
}

/// One session as the relay keeps it.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionInfo {
    /// `rs-…`: what `to` of an ask or notify may name, and what session controls target.
    pub session_id: String,
    /// Agent runtime (`claude-code` …).
    pub backend: String,
    /// The circle of its executor.
    pub circle: String,
    /// Working directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_path: Option<String>,
    /// Machine of its executor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
    /// Active or detached.
    pub status: SessionStatus,
    /// The current (or last) executor peer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executor: Option<PeerSummary>,
    /// The runtime's session ids, oldest first (the last is the current one); at most 16.
    pub runtime_session_ids: Vec<String>,
    /// Where the runtime keeps the history.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transcript: Option<TranscriptLocator>,
    /// When it was first bound.
    pub created_at_ms: i64,
    /// When it was last bound.
    pub last_seen_ms: i64,
}

/// `session_bound`: answer to `bind_session`.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionBound {
    /// The request this answers.
    pub re: MessageId,
    /// The session as bound now.
    pub session: SessionInfo,
}

/// `list_sessions`: the sessions a peer may see.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListSessions {
    /// The asking peer (registered on this connection); its circle and role decide what is
    /// visible, as for `list_peers`.
    pub peer_id: PeerId,
    /// Every circle of the tenant, not just the visible scope.
    #[serde(default)]
    pub all_circles: bool,
}

/// `sessions`: answer to `list_sessions`.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sessions {
    /// The request this answers.
    pub re: MessageId,
    /// Visible sessions, most recently bound first.
    pub sessions: Vec<SessionInfo>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minted_session_ids_are_recognised_and_names_are_not() {
        let id = session_id_from_random(0x0123_4567_89ab_cdef_0123);
        assert!(looks_like_session_id(&id), "{id}");
        assert_eq!(id.len(), 19);
        assert!(!looks_like_session_id("rs-short"));
        assert!(!looks_like_session_id("api"));
        assert!(!looks_like_session_id("RS-0123456789abcdef"));
        assert!(
            !looks_like_session_id("rs-0123456789abcdei"),
            "i is not in the alphabet"
        );
    }

    #[test]
    fn runtime_ids_allow_uuids_and_rollout_names_only() {
        assert!(is_runtime_session_id(
            "3f1c2a9e-7b7d-4c1e-9f00-1a2b3c4d5e6f"
        ));
        assert!(is_runtime_session_id("rollout-2026-11-25T10:00:00-abc"));
        assert!(!is_runtime_session_id(""));
        assert!(!is_runtime_session_id("has space"));
        assert!(!is_runtime_session_id("--dangerously-skip-permissions"));
        assert!(!is_runtime_session_id(&"a".repeat(129)));
    }
}
