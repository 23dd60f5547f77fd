//! How failures reach a local API caller: relay errors, a link that is down or refused, and
//! state.db errors, each as an [`ApiError`] with a code the caller can act on.

use repowire_protocol::{Body, ErrorFrame};

use super::link::LinkError;
use crate::api::ApiError;

/// An error from the relay as an API error (keeps the protocol code and the candidates).
pub fn relay_error(e: &ErrorFrame) -> ApiError {
    let mut err = ApiError::new(e.code, e.message.clone());
    err.candidates = e
        .candidates
        .iter()
        .filter_map(|c| serde_json::to_value(c).ok())
        .collect();
    if !e.candidates.is_empty() {
        err.hint = Some("address the peer by its peer id, or pass --circle".into());
    } else if e.code == repowire_protocol::ErrorCode::UnknownPeer {
        err.hint = Some(
            "`repowire peer list --all` shows the peers you can reach; a name is looked up in your circle unless you pass --circle, a peer id anywhere".into(),
        );
    }
    err
}

/// A link failure as an API error.
pub fn link_error(e: &LinkError) -> ApiError {
    match e {
        LinkError::Down => ApiError::new(crate::api::DaemonCode::RelayUnreachable, e.to_string())
            .hint("`repowire daemon status` shows the relay link; it reconnects by itself"),
        LinkError::Timeout => ApiError::new(
            crate::api::DaemonCode::RelayTimeout,
            "the relay did not answer in time: the request may or may not have taken effect",
        )
        .hint("check with a read (e.g. `repowire peer list`) before repeating it"),
    }
}

impl super::Daemon {
    /// A link failure as the caller should read it: a link that gave up (a revoked key, a
    /// version the relay refuses) says why and what to do, since it will not reconnect by
    /// itself; one that is down for now does.
    pub(super) fn link_failure(&self, e: &LinkError) -> ApiError {
        match (e, self.link.state()) {
            (
                LinkError::Down,
                super::link::LinkState::Stopped {
                    reason,
                    key_refused,
                },
            ) => stopped_error(&reason, key_refused),
            _ => link_error(e),
        }
    }
}

/// An answer of the wrong type (a relay bug) as an API error.
pub(super) fn unexpected(body: &Body) -> ApiError {
    ApiError::new(
        crate::api::DaemonCode::DaemonProtocol,
        format!("unexpected answer: {}", body.type_name()),
    )
}

/// What a request that needs the relay answers once the link has given up for good.
pub fn stopped_error(reason: &str, key_refused: bool) -> ApiError {
    let error = ApiError::new(
        crate::api::DaemonCode::RelayRefused,
        format!("not sent: {reason}"),
    );
    if key_refused {
        error.hint(
            "the API key is revoked or unknown: get a new one, run `repowire setup --relay-url URL --api-key rw_live_…`, then `repowire daemon restart`",
        )
    } else {
        error.hint("see `repowire daemon status`; restart the daemon once fixed")
    }
}

/// A state.db failure as an API error.
pub fn store_error(e: sqlx::Error) -> ApiError {
    ApiError::new(
        crate::api::DaemonCode::DaemonStorage,
        format!("local state database: {e}"),
    )
}
