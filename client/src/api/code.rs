//! What kind of failure a daemon error is: a protocol error code (the relay's, or one the
//! daemon uses with the protocol's meaning, like `invalid_request`), or one of the daemon's
//! own. Typed on both sides: the daemon cannot mistype a code, a caller matches on variants.

use std::fmt;
use std::str::FromStr;

use repowire_protocol::ErrorCode;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The daemon's own error codes (the protocol's are [`ErrorCode`]).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::EnumIter,
)]
#[strum(serialize_all = "snake_case")]
pub enum DaemonCode {
    /// The daemon's state database failed.
    DaemonStorage,
    /// An answer the daemon could not read (a relay bug, another version).
    DaemonProtocol,
    /// A peer file read was refused (not shared, outside the project, too large …).
    FileRefused,
    /// The caller's agent session could not be proven (process ancestry, pane).
    IdentityUnproven,
    /// The caller claims a session its process does not belong to.
    IdentityMismatch,
    /// Only a person at a terminal may do this (not an agent, not a script).
    NotAPerson,
    /// The process is not an agent session's.
    NotAnAgent,
    /// The session cannot be resumed.
    NotResumable,
    /// The relay refused this daemon (its key, its version): the link stopped.
    RelayRefused,
    /// The relay link is down for now.
    RelayUnreachable,
    /// The relay did not answer in time.
    RelayTimeout,
    /// tmux failed.
    Tmux,
    /// No such tmux pane.
    UnknownPane,
    /// No such local session.
    UnknownSession,
}

/// An [`ApiError`](super::ApiError)'s code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiCode {
    /// A protocol error code.
    Protocol(ErrorCode),
    /// One of the daemon's own.
    Daemon(DaemonCode),
    /// A code this build does not know (a newer daemon's): shown as it came.
    Other(String),
}

impl ApiCode {
    /// Its spelling.
    pub fn as_str(&self) -> &str {
        match self {
            ApiCode::Protocol(c) => c.as_str(),
            ApiCode::Daemon(c) => c.into(),
            ApiCode::Other(c) => c,
        }
    }

    /// The relay link failed or refused (the request may not have reached the relay).
    pub fn is_link_failure(&self) -> bool {
        matches!(
            self,
            ApiCode::Daemon(
                DaemonCode::RelayRefused | DaemonCode::RelayUnreachable | DaemonCode::RelayTimeout
            )
        )
    }
}

impl fmt::Display for ApiCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<ErrorCode> for ApiCode {
    fn from(c: ErrorCode) -> Self {
        ApiCode::Protocol(c)
    }
}

impl From<DaemonCode> for ApiCode {
    fn from(c: DaemonCode) -> Self {
        ApiCode::Daemon(c)
    }
}

impl From<&str> for ApiCode {
    fn from(s: &str) -> Self {
        ErrorCode::from_str(s)
            .map(ApiCode::Protocol)
            .or_else(|_| DaemonCode::from_str(s).map(ApiCode::Daemon))
            .unwrap_or_else(|_| ApiCode::Other(s.to_owned()))
    }
}

impl Serialize for ApiCode {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ApiCode {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(ApiCode::from(String::deserialize(d)?.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strum::IntoEnumIterator;

    #[test]
    fn every_code_reads_back_as_itself_and_none_shadows_a_protocol_code() {
        for c in DaemonCode::iter() {
            let code = ApiCode::from(c);
            assert_eq!(ApiCode::from(code.as_str()), code);
            assert!(
                ErrorCode::from_str(code.as_str()).is_err(),
                "{code} is a protocol code: use ErrorCode"
            );
        }
        for c in ErrorCode::iter() {
            let json = serde_json::to_value(ApiCode::from(c)).expect("json");
            assert_eq!(json, c.as_str());
            let back: ApiCode = serde_json::from_value(json).expect("reads");
            assert_eq!(back, ApiCode::Protocol(c));
        }
        let newer: ApiCode = serde_json::from_value("daemon_future".into()).expect("reads");
        assert_eq!(newer, ApiCode::Other("daemon_future".into()));
        assert_eq!(newer.to_string(), "daemon_future");
    }
}
