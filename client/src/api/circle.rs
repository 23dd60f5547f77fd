//! The typed replies of what a peer shares with its circle: its description (`describe`), the
//! circle's shared state (`state_set`, `state_get`) and a peer's project files (`read_file`).
//! Their JSON is the structured content of the MCP tools `set_description`,
//! `write_shared_state`, `read_shared_state` and `read_peer_file`.

use repowire_protocol::{PeerInfo, StateEntry};
use serde::{Deserialize, Serialize};

/// `describe`: the description now shown to peers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Described {
    /// The text (empty: cleared).
    pub description: String,
}

/// `state_set`: the key written (`value: None`: deleted).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateWritten {
    /// The key.
    pub key: String,
    /// Its value now.
    pub value: Option<String>,
}

/// `state_get`: a circle's shared state (one key, or every key).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CircleState {
    /// The circle.
    pub circle: String,
    /// The keys, each with its value, writer and time.
    pub entries: Vec<StateEntry>,
}

/// `read_file`: a text file of a peer's project.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileRead {
    /// The peer whose project it is.
    pub peer: PeerInfo,
    /// The path, relative to the project root.
    pub path: String,
    /// Its size.
    pub bytes: u64,
    /// Its text.
    pub content: String,
}
