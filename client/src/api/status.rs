//! The typed reply of `status`: what the daemon is, where its relay link stands, what waits in
//! its outbox and which sessions it hosts. Its JSON is what `repowire daemon status --json`
//! prints (a fixture test pins it); `doctor`, `daemon start|status` and the drift checks read it.
//!
//! Fields a daemon gained later default when absent, so a CLI can still read an older daemon's
//! status and say that it runs another build.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::LocalSession;

/// `status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DaemonStatus {
    /// The daemon's process id.
    pub pid: u32,
    /// Its build (`cli::version_drift` compares it with the CLI's own); absent from daemons
    /// older than the field.
    #[serde(default)]
    pub version: Option<String>,
    /// Its home directory.
    pub home: PathBuf,
    /// The relay's base URL (the embedded relay's loopback address when `embedded`).
    pub relay: String,
    /// The relay identity its outbox is kept under (absent from older daemons).
    #[serde(default)]
    pub realm: String,
    /// It runs the relay in-process.
    pub embedded: bool,
    /// The relay link.
    pub link: LinkState,
    /// Frames waiting in the outbox for this relay identity.
    pub outbox: i64,
    /// Frames waiting for other relay identities (kept when the daemon was switched away).
    #[serde(default)]
    pub queued_elsewhere: Vec<RealmQueue>,
    /// The sessions it hosts now.
    pub sessions: Vec<LocalSession>,
    /// How each session's last wake attempt ended, by session id.
    #[serde(default)]
    pub wakes: BTreeMap<String, WakeRecord>,
    /// Sessions the relay refused to register.
    #[serde(default)]
    pub refused: Vec<RefusedSession>,
}

/// What the relay link is doing: `state` in JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum LinkState {
    /// Trying to connect; `last_error` says why the previous attempt failed.
    Connecting {
        /// The previous failure.
        last_error: Option<String>,
    },
    /// Connected; re-registering this daemon's sessions before anything else is sent.
    Registering {
        /// The relay's connection id (absent from older daemons).
        #[serde(default)]
        connection_id: String,
        /// The tenant.
        tenant_id: String,
    },
    /// Connected and registered: messages flow.
    Connected {
        /// The relay's connection id (absent from older daemons).
        #[serde(default)]
        connection_id: String,
        /// The tenant.
        tenant_id: String,
    },
    /// Gave up: the relay refused this client for good (revoked key, version mismatch).
    Stopped {
        /// Why.
        reason: String,
        /// The relay refused the API key (unknown, revoked, expired): only a new key helps
        /// (absent from older daemons).
        #[serde(default)]
        key_refused: bool,
    },
    /// A state this build does not know (a newer daemon's).
    #[serde(other)]
    Unknown,
}

/// Queued messages of one relay identity (`repowire outbox`, `status`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RealmQueue {
    /// The relay identity.
    pub realm: String,
    /// Frames waiting.
    pub messages: i64,
    /// The oldest of them (ms since the Unix epoch).
    pub oldest_ms: i64,
}

/// How a session's last wake attempt ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WakeRecord {
    /// When it ended, milliseconds since the Unix epoch.
    pub at_ms: i64,
    /// `woken`, `refused` (the pane may not be typed into), `deferred` (a person is typing or
    /// has a draft in the input box, or Codex is working: the messages wait for the agent's
    /// next turn boundary), `cannot_wake` (the screen shows no input box of the agent's runtime
    /// the wake can read: nothing was typed), `unconfirmed` (no prompt-submit followed) or
    /// `failed` (tmux failed).
    pub outcome: String,
    /// Why, for anything but `woken`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A session the relay refused to register, and why in its words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefusedSession {
    /// The runtime session id.
    pub session_id: String,
    /// The relay's error code (`limit_exceeded` …).
    pub code: String,
    /// The relay's message.
    pub message: String,
}

impl LinkState {
    /// Its name, as `state` in JSON: `connecting`, `registering`, `connected`, `stopped`.
    pub fn name(&self) -> &'static str {
        match self {
            LinkState::Connecting { .. } => "connecting",
            LinkState::Registering { .. } => "registering",
            LinkState::Connected { .. } => "connected",
            LinkState::Stopped { .. } => "stopped",
            LinkState::Unknown => "unknown",
        }
    }
}

impl DaemonStatus {
    /// The relay as people read it.
    pub fn relay_label(&self) -> String {
        if self.embedded {
            "the embedded relay".to_owned()
        } else {
            self.relay.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `repowire daemon status --json` keeps its documented shape, key order included.
    #[test]
    fn status_json_keeps_its_shape() {
        let fixture = json!({
            "pid": 4242,
            "version": "0.1.0",
            "home": "/home/u/.repowire",
            "relay": "https://relay.example",
            "realm": "relay.example/tnt-1",
            "embedded": false,
            "link": {"state": "connected", "connection_id": "conn-1", "tenant_id": "tnt-1"},
            "outbox": 0,
            "queued_elsewhere": [{"realm": "old.example/tnt-9", "messages": 2, "oldest_ms": 1790000000000_i64}],
            "sessions": [],
            "wakes": {"9f0c": {"at_ms": 1790000000001_i64, "outcome": "deferred", "reason": "a person is typing"}},
            "refused": [{"session_id": "ab12", "code": "limit_exceeded", "message": "the tenant has 5 live peers"}],
        });
        let status: DaemonStatus = serde_json::from_value(fixture.clone()).expect("reads");
        let written = serde_json::to_value(&status).expect("writes");
        assert_eq!(written, fixture);
        let keys =
            |v: &serde_json::Value| v.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>());
        assert_eq!(keys(&written), keys(&fixture));
        assert_eq!(keys(&written["link"]), keys(&fixture["link"]));
    }

    /// A daemon from before `version`, `refused`, `wakes` and `queued_elsewhere` is still read
    /// (and then found to be another build).
    #[test]
    fn an_older_daemons_status_is_read() {
        let old = json!({
            "pid": 1, "home": "/h", "relay": "http://127.0.0.1:1", "embedded": true,
            "link": {"state": "connected", "tenant_id": "tnt-local"}, "outbox": 3, "sessions": [],
        });
        let status: DaemonStatus = serde_json::from_value(old).expect("reads");
        assert_eq!(status.version, None);
        assert_eq!(status.realm, "");
        let stopped: LinkState =
            serde_json::from_value(json!({"state": "stopped", "reason": "revoked"}))
                .expect("reads");
        assert_eq!(
            stopped,
            LinkState::Stopped {
                reason: "revoked".into(),
                key_refused: false
            }
        );
        let newer: LinkState =
            serde_json::from_value(json!({"state": "draining", "until_ms": 5})).expect("reads");
        assert_eq!(newer.name(), "unknown");
        assert_eq!(status.relay_label(), "the embedded relay");
        assert!(status.refused.is_empty() && status.wakes.is_empty());
    }
}
