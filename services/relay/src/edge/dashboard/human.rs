//! The signed-in person as a peer of the tenant: role `human` (it crosses circles), backend
//! `dashboard`, one per API key (its path is `dashboard:<key id>`, so only a session of that
//! key takes it back). What the person sends or answers from the dashboard goes through the
//! same routing as an agent's frames — validation, name resolution, the tenant's limits, the
//! writer, `accepted` only after commit — over a connection inside this relay process
//! ([`HumanConn`]): it is added to the hub like a WebSocket, registers the peer, and stays
//! open [`IDLE`] after its last use (the peer shows online meanwhile), then goes offline. A
//! reply to the person's ask that reaches it is receipted `delivered` (the Asks page shows it);
//! anything else is `failed` with a reason ([`NO_INBOX`]). A revoked key closes it like any.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use repowire_protocol::{
    Body, CloseCode, ErrorCode, ErrorFrame, Frame, MessageId, PeerId, Receipt, ReceiptState,
    Register, Role, decode, decode_from_relay, encode,
};
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::session::TenantSession;
use crate::routing::hub::{ConnHandle, Kick, OutReceiver};
use crate::routing::route::{self, Session};
use crate::state::AppState;
use crate::tenancy::apikey;

/// How long the person's connection stays after its last use.
pub const IDLE: Duration = Duration::from_secs(300);
/// How long an answer to a frame may take.
const ANSWER: Duration = Duration::from_secs(15);
/// The backend the person's peer registers with.
pub const BACKEND: &str = route::DASHBOARD_BACKEND;
/// The circle of a person's peer (a `human` crosses circles; this is where it shows).
pub const CIRCLE: &str = "humans";

/// The open person connections of this pod, by tenant, key and whether it may approve.
#[derive(Debug, Default)]
pub struct Humans {
    open: Mutex<HashMap<(String, String, bool), Arc<HumanConn>>>,
    /// One connection starts at a time on this pod: two first uses at once would register
    /// two peers for one person.
    starting: tokio::sync::Mutex<()>,
}

/// One person's connection inside this process.
#[derive(Debug)]
pub struct HumanConn {
    session: Session,
    /// The person's peer, once registered.
    peer_id: OnceLock<PeerId>,
    /// Frames waiting for their answer, by id.
    waiting: Mutex<HashMap<MessageId, oneshot::Sender<Body>>>,
    /// Moved forward on every use; the connection ends [`IDLE`] after it.
    used: Mutex<Instant>,
    kick: Arc<Kick>,
}

/// Why an action from the dashboard did not go through.
#[derive(Debug)]
pub enum Refused {
    /// The relay refused the frame (its `error`).
    Error(ErrorFrame),
    /// The frame itself is not valid (the protocol's validation).
    Invalid(String),
    /// No answer in time, or the connection ended.
    NoAnswer,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::Error(e) => write!(f, "{} ({})", e.message, e.code.as_str()),
            Refused::Invalid(why) => f.write_str(why),
            Refused::NoAnswer => f.write_str("the relay did not answer in time; try again"),
        }
    }
}

/// The person's display name: the key's label when it is a valid name, else `person`.
fn name_of(signed: &TenantSession) -> String {
    let label: String = signed
        .key_label
        .chars()
        .map(|c| if c == ' ' { '-' } else { c })
        .collect();
    if repowire_protocol::validate::is_valid_name(&label) {
        label
    } else {
        "person".to_owned()
    }
}

impl Humans {
    /// The person's connection on this pod, opened (and the peer registered) if needed.
    pub async fn open(
        &self,
        state: &AppState,
        signed: &TenantSession,
    ) -> Result<Arc<HumanConn>, Refused> {
        let key_id = signed.credential_id();
        let approves = signed.may(apikey::APPROVE);
        let slot = (signed.tenant_id().to_owned(), key_id.clone(), approves);
        if let Some(conn) = self.usable(state, &slot) {
            return Ok(conn);
        }
        let _starting = self.starting.lock().await;
        // Another request may have started it meanwhile.
        if let Some(conn) = self.usable(state, &slot) {
            return Ok(conn);
        }
        let conn = HumanConn::start(state, signed, key_id, approves).await?;
        #[allow(clippy::unwrap_used)] // a poisoned lock only follows a panic elsewhere
        let replaced = self.open.lock().unwrap().insert(slot, conn.clone());
        if let Some(old) = replaced {
            old.kick.kick(CloseCode::NORMAL, "");
        }
        Ok(conn)
    }

    /// The open connection of `slot` if it still holds its peer here (another pod may have
    /// taken the peer over, or it went idle), its idle time restarted. One that does not is
    /// closed.
    fn usable(&self, state: &AppState, slot: &(String, String, bool)) -> Option<Arc<HumanConn>> {
        #[allow(clippy::unwrap_used)] // a poisoned lock only follows a panic elsewhere
        let mut open = self.open.lock().unwrap();
        let conn = open.get(slot)?.clone();
        let holds = !conn.kick.is_kicked()
            && state
                .hub
                .owned_peer(&slot.0, conn.session.conn, conn.peer_id().as_str())
                .is_some();
        if holds {
            conn.touch();
            return Some(conn);
        }
        open.remove(slot);
        conn.kick.kick(CloseCode::NORMAL, "");
        None
    }

    fn forget(&self, conn: &Arc<HumanConn>) {
        #[allow(clippy::unwrap_used)] // a poisoned lock only follows a panic elsewhere
        self.open
            .lock()
            .unwrap()
            .retain(|_, c| !Arc::ptr_eq(c, conn));
    }
}

impl HumanConn {
    async fn start(
        state: &AppState,
        signed: &TenantSession,
        key_id: String,
        approves: bool,
    ) -> Result<Arc<Self>, Refused> {
        let tenant_id = signed.tenant_id().to_owned();
        let path = format!("dashboard:{key_id}");
        // The key's earlier peer, if it is still stored: the same peer, inbox and history.
        let reclaim = state
            .store
            .list_peers(&tenant_id)
            .await
            .ok()
            .and_then(|peers| {
                peers
                    .into_iter()
                    .find(|p| p.backend == BACKEND && p.path.as_deref() == Some(path.as_str()))
            })
            .map(|p| PeerId::from(p.peer_id));
        let id = state.hub.next_conn_id();
        let (tx, rx) = crate::routing::hub::queue(
            state.config.outbound_queue,
            state.config.outbound_queue_bytes,
            state.outbound_budget.clone(),
        );
        let kick = Arc::new(Kick::default());
        state.hub.add_conn(
            &tenant_id,
            ConnHandle {
                id,
                key_id: key_id.clone(),
                tx,
                kick: kick.clone(),
            },
        );
        if state.hub.is_revoked(&key_id) {
            kick.kick(CloseCode::KEY_REVOKED, "API key revoked");
        }
        let conn = Arc::new(Self {
            session: Session::new(state.clone(), tenant_id, (id, key_id), approves),
            peer_id: OnceLock::new(),
            waiting: Mutex::new(HashMap::new()),
            used: Mutex::new(Instant::now()),
            kick,
        });
        tokio::spawn(pump(conn.clone(), rx));
        let registered = conn
            .send(Body::Register(Register {
                name: Some(name_of(signed)),
                circle: Some(CIRCLE.to_owned()),
                backend: BACKEND.to_owned(),
                role: Some(Role::Human),
                path: Some(path),
                machine: None,
                reclaim,
            }))
            .await;
        let refused = match registered {
            Ok(Body::Registered(r)) => {
                let _ = conn.peer_id.set(r.peer.peer_id);
                return Ok(conn);
            }
            Ok(other) => Refused::Invalid(format!(
                "the relay answered the registration with `{}`",
                other.type_name()
            )),
            Err(refused) => refused,
        };
        conn.kick.kick(CloseCode::NORMAL, "");
        Err(refused)
    }

    /// The person's peer.
    pub fn peer_id(&self) -> PeerId {
        self.peer_id
            .get()
            .cloned()
            .unwrap_or_else(|| PeerId::from(String::new()))
    }

    fn touch(&self) {
        #[allow(clippy::unwrap_used)] // a poisoned lock only follows a panic elsewhere
        let mut used = self.used.lock().unwrap();
        *used = Instant::now();
    }

    fn idle_until(&self) -> Instant {
        #[allow(clippy::unwrap_used)] // a poisoned lock only follows a panic elsewhere
        let used = *self.used.lock().unwrap();
        used + IDLE
    }

    /// Sends a frame as the person and waits for its answer (`accepted`, `ok`, `registered` …).
    pub async fn send(&self, body: Body) -> Result<Body, Refused> {
        self.send_as(MessageId::new(), body).await
    }

    /// [`HumanConn::send`] with the frame's id given: a form sent twice (a reload) sends the
    /// same id, which the relay answers as a retry (one message).
    pub async fn send_as(&self, id: MessageId, body: Body) -> Result<Body, Refused> {
        self.touch();
        let mut frame = Frame::new(body);
        frame.id = id;
        // Through the codec: the same validation as a frame from a WebSocket.
        let frame = decode(&encode(&frame)).map_err(|e| Refused::Invalid(e.to_string()))?;
        let (tx, rx) = oneshot::channel();
        let id = frame.id;
        #[allow(clippy::unwrap_used)] // a poisoned lock only follows a panic elsewhere
        self.waiting.lock().unwrap().insert(id, tx);
        route::handle(&self.session, frame, std::time::Instant::now()).await;
        let answer = tokio::time::timeout(ANSWER, rx).await;
        #[allow(clippy::unwrap_used)] // a poisoned lock only follows a panic elsewhere
        self.waiting.lock().unwrap().remove(&id);
        match answer {
            Ok(Ok(Body::Error(e))) => Err(Refused::Error(e)),
            Ok(Ok(body)) => Ok(body),
            _ => Err(Refused::NoAnswer),
        }
    }

    fn answered(&self, re: MessageId, body: Body) {
        #[allow(clippy::unwrap_used)] // a poisoned lock only follows a panic elsewhere
        let waiting = self.waiting.lock().unwrap().remove(&re);
        if let Some(tx) = waiting {
            let _ = tx.send(body);
        }
    }
}

/// The request a frame from the relay answers, if it answers one.
fn re_of(body: &Body) -> Option<MessageId> {
    match body {
        Body::Accepted(a) => Some(a.re),
        Body::Registered(r) => Some(r.re),
        Body::Ok(r) => Some(r.re),
        Body::Error(e) => e.re,
        _ => None,
    }
}

/// Why a message to a person's peer is failed: the dashboard shows replies to the person's own
/// asks (the Asks page), and has no inbox for anything else yet.
pub const NO_INBOX: &str = "a person on the dashboard has no inbox for notifies and asks yet: \
     reach them another way (the dashboard shows replies to their own asks)";

/// What the person's connection says about a message it was handed: a reply to the person's
/// own ask is `delivered` (the Asks page shows it with the ask, to a session that may read
/// messages, which sending needs); anything else `failed` with [`NO_INBOX`], so its sender
/// knows at once instead of waiting for an expiry.
fn receipt_for(d: &repowire_protocol::Deliver) -> Receipt {
    let reply = d.message.kind == repowire_protocol::MessageKind::Reply;
    Receipt {
        peer_id: d.to.clone(),
        message_id: d.message.message_id,
        state: if reply {
            ReceiptState::Delivered
        } else {
            ReceiptState::Failed
        },
        reason: (!reply).then(|| NO_INBOX.to_owned()),
    }
}

/// Reads what the relay sends the person's connection: answers go to who waits for them,
/// deliveries are receipted ([`receipt_for`]). Ends the connection when it is kicked (a
/// revoked key, shutdown), idle past [`IDLE`], or told another connection took its peer (the
/// person used another pod), and the peer goes offline here.
async fn pump(conn: Arc<HumanConn>, mut rx: OutReceiver) {
    let state = conn.session.state.clone();
    loop {
        tokio::select! {
            _ = conn.kick.kicked() => break,
            () = tokio::time::sleep_until(conn.idle_until()) => {
                if Instant::now() >= conn.idle_until() {
                    break;
                }
            }
            frame = rx.recv() => {
                let Some(text) = frame else { break };
                let Ok(frame) = decode_from_relay(&text) else { continue };
                match &frame.body {
                    Body::Deliver(d) => {
                        let receipt = Frame::new(Body::Receipt(receipt_for(d)));
                        route::handle(&conn.session, receipt, std::time::Instant::now()).await;
                    }
                    Body::Error(e) if e.re.is_none() && e.code == ErrorCode::NotRegistered => break,
                    body => {
                        if let Some(re) = re_of(body) {
                            conn.answered(re, frame.body);
                        }
                    }
                }
            }
        }
    }
    // Closed first: an `open` that finds it from here on starts another.
    conn.kick.kick(CloseCode::NORMAL, "");
    state.humans.forget(&conn);
    let gone = state
        .hub
        .remove_conn(&conn.session.tenant_id, conn.session.conn);
    for record in gone {
        route::went_offline(&state, record).await;
    }
    tracing::debug!(tenant = %conn.session.tenant_id, "dashboard person connection closed");
}
