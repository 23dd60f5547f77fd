//! Value types frames in both directions share: a peer's role, status, turn state, and how a
//! peer is described and referred to.

use serde::{Deserialize, Serialize};

use crate::ids::PeerId;

/// What kind of peer this is. `agent` peers see their own circle; the others cross circles.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Default,
    Serialize,
    Deserialize,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::EnumIter,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Role {
    /// An agent session (default); scoped to its circle.
    #[default]
    Agent,
    /// A service (bot, CI); crosses circles.
    Service,
    /// A human surface (dashboard, phone); crosses circles.
    Human,
    /// An orchestrator session; crosses circles.
    Orchestrator,
}

impl Role {
    /// True for roles that resolve and are resolved across circles.
    pub fn crosses_circles(self) -> bool {
        !matches!(self, Role::Agent)
    }

    /// Wire spelling.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Presence as the relay computes it.
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
pub enum PeerStatus {
    /// Connected and not in a turn.
    Online,
    /// Connected and in a turn (`turn_state` is `working`).
    Busy,
    /// Not connected; messages queue in its inbox.
    Offline,
}

/// The agent's turn state, reported by the client from the runtime's hooks.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    Serialize,
    Deserialize,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::EnumIter,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum TurnState {
    /// Not known yet.
    #[default]
    Unknown,
    /// Waiting for a prompt.
    Idle,
    /// Processing a turn.
    Working,
}

impl TurnState {
    /// Wire spelling.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// A peer as the relay shows it.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeerInfo {
    /// Routing key.
    pub peer_id: PeerId,
    /// Display name, unique among live peers of its circle.
    pub name: String,
    /// Routing scope.
    pub circle: String,
    /// Agent runtime (`claude-code`, `codex` …).
    pub backend: String,
    /// Role.
    pub role: Role,
    /// Presence.
    pub status: PeerStatus,
    /// Turn state.
    pub turn_state: TurnState,
    /// Working directory, if reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Machine name, if reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
    /// Short task state; expires after a TTL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Last activity, milliseconds since the Unix epoch.
    pub last_seen_ms: i64,
}

/// A short reference to a peer (in messages, errors and recipient lists).
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerSummary {
    /// Routing key.
    pub peer_id: PeerId,
    /// Display name.
    pub name: String,
    /// Circle.
    pub circle: String,
}

/// A frame that names one peer of this connection.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerRef {
    /// The peer.
    pub peer_id: PeerId,
}
