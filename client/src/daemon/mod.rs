//! The daemon: hosts the local agent sessions as peers on one relay link, keeps the durable
//! local state, serves the local API, and gets messages to agents (hook context at turn
//! boundaries, a tmux wake-up when an agent is idle).
//!
//! - [`link`]: the relay connection. [`frames`]: what each relay frame does here.
//!   [`store`]: state.db. [`server`]: the Unix-socket API.
//! - [`hooks`]: what each runtime hook does. [`ops`]: peer commands (send, ack, list, status).
//! - [`identity`]: which session a request acts as. [`inbox`]: `repowire inbox`.
//! - [`wake`]: waking idle agents through tmux. [`render`]: how messages read in an agent's
//!   context. [`questions`]: waiting for answers, blocking questions, `@approvers`.
//!   [`approval`]: the PreToolUse gate. [`embedded`]: the in-process relay used when none is
//!   configured.
//! - [`errors`]: failures as API errors. `outbox`: frames sent again, re-minted, refreshed.

pub mod approval;
mod approval_text;
pub mod bindings;
mod conversation_show;
mod conversations;
mod dashboard;
pub mod embedded;
pub mod errors;
pub mod files;
pub mod frames;
mod history;
pub mod hooks;
pub mod identity;
pub mod inbox;
pub mod link;
pub mod ops;
mod outbox;
pub mod panes;
pub mod questions;
pub mod reaper;
pub mod render;
pub mod server;
pub mod store;
pub mod wake;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use repowire_protocol::{
    Body, ErrorCode, Frame, PeerId, ReceiptState, Register, Role, TurnState, UpdatePeer,
};
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use crate::config::{RelayTarget, Settings};
use link::{Endpoint, Link};
use store::{SessionRow, Store};

/// The session id of the daemon's own peer, used by people at the command line.
pub const CLI_SESSION: &str = "cli";

/// How long a request to the relay may take before the caller is told it is queued.
pub const RELAY_TIMEOUT: Duration = Duration::from_secs(5);

/// The daemon's shared state.
#[derive(Debug)]
pub struct Daemon {
    /// Resolved settings.
    pub settings: Settings,
    /// state.db.
    pub store: Store,
    /// The relay link.
    pub link: Link,
    /// Wakes `wait_reply` callers when a reply arrives.
    pub replies: Notify,
    /// Bumped whenever a new message is stored in the inbox (`repowire inbox --watch`).
    pub inbox_arrivals: watch::Sender<u64>,
    /// Per session: a counter bumped at every prompt-submit hook (verifies tmux wakes).
    prompts: Mutex<HashMap<String, watch::Sender<u64>>>,
    /// Sessions with a wake in progress.
    waking: Mutex<HashSet<String>>,
    /// When each session's transcript cursor was last sent to the relay (at most once a
    /// minute: it is a pointer for tools, not a live position).
    pub(crate) cursors_sent: Mutex<HashMap<String, std::time::Instant>>,
    /// Sessions whose wake has pressed Enter and waits for the submit: a prompt submitted now
    /// is the wake's own (any other is a person's, even one that sends a prompt a wake left).
    entering: Mutex<HashSet<String>>,
    /// One registration at a time per session.
    registration: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Which connection each session is registered on.
    registered_on: Mutex<HashMap<String, u64>>,
    /// Sessions the relay refused to register, with its code and words (a tenant at its
    /// plan's peer limit): `status` and `doctor` say so instead of only "link connected".
    refused: Mutex<HashMap<String, (String, String)>>,
    /// The last wake attempt per session, for `status` (why an agent was or was not woken).
    wakes: Mutex<HashMap<String, wake::WakeOutcome>>,
    /// Stops everything.
    pub shutdown: CancellationToken,
    /// Base URL of the relay in use (embedded or configured).
    pub relay_base: String,
    /// The relay as realms name it: its configured URL, or `embedded`.
    pub relay_identity: String,
    /// SHA-256 of the API key in use, shortened: tells keys apart without storing them.
    pub key_fingerprint: String,
    /// The relay and key in use (its `Debug` never shows the key).
    pub(crate) endpoint: Endpoint,
}

/// A key's fingerprint: the first 16 hex digits of its SHA-256.
pub fn key_fingerprint(api_key: &str) -> String {
    repowire_relay::tenancy::apikey::hash(api_key)
        .chars()
        .take(16)
        .collect()
}

/// Runs the daemon in the foreground until `shutdown` (or a `shutdown` request).
pub async fn run(settings: Settings) -> anyhow::Result<()> {
    crate::config::ensure_home(&settings.home)?;
    let shutdown = CancellationToken::new();
    let socket = crate::config::socket_path(&settings.home);
    // One daemon per home: the lock is taken before the socket is touched, so a second daemon
    // started at the same moment can never unlink the first one's socket.
    let _held =
        match repowire_relay::storage::datadir::lock_file(&settings.home.join("daemon.lock")) {
            Ok(held) => held,
            Err(repowire_relay::storage::datadir::LockError::Held { pid }) => {
                return Err(AlreadyRunning(already_running(&settings.home, pid)).into());
            }
            Err(e) => return Err(e).context("locking the daemon's home"),
        };
    // Ours: a socket left there is a dead daemon's.
    let _ = std::fs::remove_file(&socket);
    let store = Store::open(&settings.home.join("state.db"))
        .await
        .context("opening state.db")?;
    let (endpoint, relay_task) = match &settings.relay {
        RelayTarget::Remote { url, api_key } => (
            Endpoint {
                base: url.clone(),
                api_key: api_key.clone(),
            },
            None,
        ),
        RelayTarget::Embedded => {
            let relay = embedded::start(&settings.home, shutdown.clone()).await?;
            (relay.endpoint, Some(relay.task))
        }
    };
    // The tenant wall: everything relay-bound is tied to this relay identity, and nothing
    // queued under another one goes out here.
    let relay_identity = match &settings.relay {
        RelayTarget::Remote { url, .. } => url.clone(),
        RelayTarget::Embedded => "embedded".to_owned(),
    };
    let key_fingerprint = key_fingerprint(&endpoint.api_key);
    let realm = store
        .known_realm(&relay_identity, &key_fingerprint)
        .await
        .context("reading state.db")?;
    store
        .enter_realm(&realm)
        .await
        .context("updating state.db")?;
    let daemon = Arc::new(Daemon {
        settings,
        store,
        link: Link::default(),
        replies: Notify::new(),
        inbox_arrivals: watch::channel(0).0,
        prompts: Mutex::new(HashMap::new()),
        waking: Mutex::new(HashSet::new()),
        cursors_sent: Mutex::new(HashMap::new()),
        entering: Mutex::new(HashSet::new()),
        wakes: Mutex::new(HashMap::new()),
        registration: Mutex::new(HashMap::new()),
        registered_on: Mutex::new(HashMap::new()),
        refused: Mutex::new(HashMap::new()),
        shutdown: shutdown.clone(),
        relay_base: endpoint.base.clone(),
        relay_identity,
        key_fingerprint,
        endpoint: endpoint.clone(),
    });
    let listener = server::bind(&socket)?;
    tracing::info!(socket = %socket.display(), relay = %endpoint.base, "repowire daemon running");
    let link_task = tokio::spawn(link::run(daemon.clone(), endpoint, shutdown.clone()));
    let reaper = tokio::spawn(reaper::run(daemon.clone(), shutdown.clone()));
    let signals = tokio::spawn(signals(shutdown.clone()));
    server::serve(daemon.clone(), listener).await;
    let _ = std::fs::remove_file(&socket);
    signals.abort();
    let _ = reaper.await;
    let _ = link_task.await;
    if let Some(task) = relay_task {
        let _ = task.await;
    }
    tracing::info!("daemon stopped");
    Ok(())
}

/// The exit code of a `daemon run` that found another daemon holding its home (EX_TEMPFAIL).
pub const EXIT_ALREADY_RUNNING: i32 = 75;

/// Another daemon holds this home's lock (it runs, or it is still finishing).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct AlreadyRunning(pub String);

/// What a second daemon for the same home says.
pub fn already_running(home: &std::path::Path, pid: Option<u32>) -> String {
    format!(
        "a repowire daemon{} is already running for {}; stop it with `repowire daemon stop`",
        pid.map(|p| format!(" (pid {p})")).unwrap_or_default(),
        home.display()
    )
}

async fn signals(shutdown: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut term) = signal(SignalKind::terminate()) else {
        return;
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    shutdown.cancel();
}

/// A session's peer identity (peer id and how to reach its agent).
pub fn role_of(row: &SessionRow) -> Role {
    row.role.parse().unwrap_or(Role::Agent)
}

#[allow(clippy::unwrap_used)] // poisoned locks only follow a panic elsewhere
impl Daemon {
    /// After (re)connecting (the link has already settled the realm by the relay's tenant):
    /// register every active session, end those whose agent is gone, deliver receipts ended
    /// sessions still owe, then open the gate for messages, resend the outbox in order, and
    /// ask for outcomes missed while away.
    pub async fn on_connected(self: Arc<Self>) {
        let sessions = match self.store.active_sessions().await {
            Ok(s) => s,
            Err(error) => {
                tracing::error!(%error, "reading sessions");
                return;
            }
        };
        for session in &sessions {
            if let Err(error) = self.register(session, RELAY_TIMEOUT).await {
                tracing::warn!(session = %session.session_id, %error, "could not register");
            }
        }
        for session in sessions {
            if let Some(pid) = session.agent_pid
                && !crate::procinfo::same_process(pid as u32, session.agent_start)
            {
                tracing::info!(session = %session.session_id, pid, "agent process gone; ending its session");
                let _ = self.end_session(&session).await;
            }
        }
        if let Ok(ended) = self.store.ended_with_pending_receipts().await {
            for session in ended {
                // Reclaimed just long enough to deliver what it owes its senders.
                if let Ok(row) = self.register(&session, RELAY_TIMEOUT).await
                    && let Some(peer) = row.peer_id
                {
                    self.unregister(&row.session_id, &peer).await;
                }
            }
        }
        self.link.set_ready();
        self.resend_outbox(None).await;
        self.refresh_sent().await;
    }

    fn registration_lock(&self, session_id: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.registration
            .lock()
            .unwrap()
            .entry(session_id.to_owned())
            .or_default()
            .clone()
    }

    /// Registers (or reclaims) a session's peer on the current connection and stores the
    /// identity. One registration per session at a time; a session already registered on this
    /// connection is returned as it is.
    pub async fn register(
        &self,
        session: &SessionRow,
        timeout: Duration,
    ) -> Result<SessionRow, crate::api::ApiError> {
        let lock = self.registration_lock(&session.session_id);
        let _guard = lock.lock().await;
        let session = self
            .store
            .session(&session.session_id)
            .await
            .map_err(errors::store_error)?
            .unwrap_or_else(|| session.clone());
        let connection = self.link.epoch();
        if session.peer_id.is_some()
            && connection.is_some()
            && self.registered_on.lock().unwrap().get(&session.session_id) == connection.as_ref()
        {
            return Ok(session);
        }
        let frame = Frame::new(Body::Register(Register {
            name: None,
            circle: Some(session.circle.clone()),
            backend: session.backend.clone(),
            role: Some(role_of(&session)),
            path: session.path.clone(),
            machine: Some(self.settings.machine.clone()),
            reclaim: session.peer_id.clone().map(PeerId),
        }));
        let answer = self
            .link
            .request(frame, timeout)
            .await
            .map_err(|e| self.link_failure(&e))?;
        let registered = match answer.body {
            Body::Registered(r) => r,
            Body::Error(e) => {
                self.refused.lock().unwrap().insert(
                    session.session_id.clone(),
                    (e.code.as_str().to_owned(), e.message.clone()),
                );
                return Err(errors::relay_error(&e));
            }
            other => return Err(errors::unexpected(&other)),
        };
        self.refused.lock().unwrap().remove(&session.session_id);
        let peer = registered.peer;
        self.store
            .set_identity(
                &session.session_id,
                peer.peer_id.as_str(),
                &peer.name,
                &peer.circle,
            )
            .await
            .map_err(errors::store_error)?;
        if let Some(conn) = connection {
            self.registered_on
                .lock()
                .unwrap()
                .insert(session.session_id.clone(), conn);
        }
        if let Some(old) = session
            .peer_id
            .clone()
            .filter(|o| o != peer.peer_id.as_str())
        {
            tracing::warn!(session = %session.session_id, %old, new = %peer.peer_id, "reclaim refused; new peer id");
            self.remint_outbox(&old, &peer.peer_id).await;
        }
        let turn = match session.turn_state.as_str() {
            "idle" => Some(TurnState::Idle),
            "working" => Some(TurnState::Working),
            _ => None,
        };
        if let Some(turn) = turn {
            self.set_turn_remote(peer.peer_id.as_str(), turn);
        }
        self.send_pending_receipts(peer.peer_id.as_str()).await;
        if self.link.is_ready() {
            self.resend_outbox(Some(peer.peer_id.as_str())).await;
        }
        let mut row = session.clone();
        row.peer_id = Some(peer.peer_id.0.clone());
        row.name = Some(peer.name.clone());
        row.circle = peer.circle.clone();
        tracing::info!(session = %row.session_id, peer = %peer.peer_id, name = %peer.name, reclaimed = registered.reclaimed, "registered");
        // Its work stream: the Repowire session it had (after a reconnect, a `/clear`, a
        // resume), or a new one.
        self.bind_session(&row, peer.peer_id.as_str(), true).await;
        if let Ok(Some(bound)) = self.store.session(&row.session_id).await {
            row.repowire_session_id = bound.repowire_session_id;
        }
        Ok(row)
    }

    /// Takes a session's peer off this connection (best effort).
    async fn unregister(&self, session_id: &str, peer_id: &str) {
        let _ = self
            .link
            .request(
                Frame::new(Body::Unregister(repowire_protocol::PeerRef {
                    peer_id: PeerId(peer_id.to_owned()),
                })),
                RELAY_TIMEOUT,
            )
            .await;
        self.registered_on.lock().unwrap().remove(session_id);
    }

    /// Reports a turn state to the relay (best effort; re-sent at the next registration).
    pub fn set_turn_remote(&self, peer_id: &str, turn: TurnState) {
        self.link.send(&Frame::new(Body::UpdatePeer(UpdatePeer {
            peer_id: PeerId(peer_id.to_owned()),
            turn_state: Some(turn),
            description: None,
        })));
    }

    /// The sessions the relay refused to register: `(session id, code, the relay's words)`.
    pub fn refused_sessions(&self) -> Vec<(String, String, String)> {
        let mut refused: Vec<_> = self
            .refused
            .lock()
            .unwrap()
            .iter()
            .map(|(s, (code, message))| (s.clone(), code.clone(), message.clone()))
            .collect();
        refused.sort();
        refused
    }

    /// Ends a session: unregisters its peer and fails what can no longer reach its agent.
    pub async fn end_session(&self, session: &SessionRow) -> Result<(), crate::api::ApiError> {
        self.refused.lock().unwrap().remove(&session.session_id);
        // Ended first: a message arriving from now on is refused at once (`on_deliver`).
        self.store
            .end_session(&session.session_id)
            .await
            .map_err(errors::store_error)?;
        let Some(peer) = &session.peer_id else {
            return Ok(());
        };
        // While the peer is still registered here, its senders learn what will not arrive.
        let reason = "the agent session ended before the message reached it";
        for id in self
            .store
            .fail_queued(peer, reason)
            .await
            .map_err(errors::store_error)?
        {
            self.receipt(peer, &id, ReceiptState::Failed, Some(reason.into()), None)
                .await;
        }
        for id in self
            .store
            .drop_outbox_of(peer)
            .await
            .map_err(errors::store_error)?
        {
            let _ = self
                .store
                .sent_rejected(
                    &id,
                    "the sending session ended before the relay accepted the message",
                )
                .await;
        }
        self.end_conversations_of(session, peer).await;
        self.unregister(&session.session_id, peer).await;
        Ok(())
    }

    /// Signals a prompt-submit for a session (tmux wake verification).
    pub fn prompt_seen(&self, session_id: &str) {
        let mut map = self.prompts.lock().unwrap();
        let tx = map
            .entry(session_id.to_owned())
            .or_insert_with(|| watch::Sender::new(0));
        tx.send_modify(|n| *n += 1);
    }

    /// True while a wake of this session has pressed Enter and waits for the submit.
    pub fn wake_entering(&self, session_id: &str) -> bool {
        self.entering
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(session_id)
    }

    /// Marks a session's wake as pressing Enter until the returned guard is dropped.
    pub(crate) fn entering(&self, session_id: &str) -> Entering<'_> {
        self.entering
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(session_id.to_owned());
        Entering {
            daemon: self,
            session_id: session_id.to_owned(),
        }
    }

    /// Subscribes to a session's prompt-submit counter.
    pub fn watch_prompts(&self, session_id: &str) -> watch::Receiver<u64> {
        let mut map = self.prompts.lock().unwrap();
        map.entry(session_id.to_owned())
            .or_insert_with(|| watch::Sender::new(0))
            .subscribe()
    }
}

/// A wake pressing Enter (see [`Daemon::entering`]); the mark goes with it.
pub(crate) struct Entering<'a> {
    daemon: &'a Daemon,
    session_id: String,
}

impl Drop for Entering<'_> {
    fn drop(&mut self) {
        self.daemon
            .entering
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.session_id);
    }
}

/// Errors after which the same frame may succeed later.
pub fn retryable(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::Unavailable
            | ErrorCode::InboxFull
            | ErrorCode::RateLimited
            | ErrorCode::ShuttingDown
            | ErrorCode::Internal
    )
}
