//! One WebSocket connection: `hello`/`welcome`, then a loop that reads frames, writes the
//! outbound queue, pings, and closes with a code that says why (1001 on shutdown, 4008 slow
//! consumer, 4001 key revoked, 4009 idle). On exit its peers go offline.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket};
use futures::{SinkExt, StreamExt};
use governor::clock::{Clock, DefaultClock};
use repowire_protocol::{
    Body, CloseCode, ErrorCode, ErrorFrame, Frame, Limits, Welcome, decode, limits,
};
use tokio::sync::OwnedSemaphorePermit;

use crate::metrics::TypeLabel;
use crate::routing::dispatch::frame_text;
use crate::routing::hub::{ConnHandle, ConnId, Kick, OutReceiver, Outbound};
use crate::routing::route::{self, Session};
use crate::state::AppState;
use crate::tenancy::limits::slots::ConnectionSlot;

type Limiter = governor::DefaultDirectRateLimiter;

/// The per-connection limit on message-creating frames; `None` when disabled (rate 0).
fn send_limiter(rate: u32, burst: u32) -> Option<Limiter> {
    let rate = std::num::NonZeroU32::new(rate)?;
    let burst = std::num::NonZeroU32::new(burst).unwrap_or(rate);
    Some(governor::RateLimiter::direct(
        governor::Quota::per_second(rate).allow_burst(burst),
    ))
}

/// Who the token says this connection is.
#[derive(Debug, Clone)]
pub struct Authed {
    /// Tenant.
    pub tenant_id: String,
    /// API key id.
    pub key_id: String,
    /// The key's scopes, space-separated (see [`crate::tenancy::apikey::ALL_SCOPES`]).
    pub scopes: String,
}

type Sink = futures::stream::SplitSink<WebSocket, Message>;

async fn close(sink: &mut Sink, code: u16, reason: &str) {
    let frame = CloseFrame {
        code,
        reason: Utf8Bytes::from(reason.to_owned()),
    };
    let _ = sink.send(Message::Close(Some(frame))).await;
    let _ = sink.close().await;
}

fn error_text(
    re: Option<repowire_protocol::MessageId>,
    code: ErrorCode,
    message: String,
) -> Utf8Bytes {
    String::from(frame_text(Body::Error(ErrorFrame::new(re, code, message)))).into()
}

/// Waits for a valid `hello`. On failure, answers with an error and the close code to use.
async fn hello(
    state: &AppState,
    stream: &mut futures::stream::SplitStream<WebSocket>,
) -> Result<Frame, HelloRefused> {
    let refuse = |re, code, message: &str| HelloRefused {
        error: Some(error_text(re, code, message.to_owned())),
        close: CloseCode::HELLO_REQUIRED,
        reason: "send a valid hello first",
    };
    let deadline =
        tokio::time::Instant::now() + Duration::from_secs(state.config.hello_timeout_secs);
    let first = loop {
        match tokio::time::timeout_at(deadline, stream.next()).await {
            Ok(Some(Ok(Message::Text(text)))) => break text,
            // Keep-alives before hello are harmless.
            Ok(Some(Ok(Message::Ping(_) | Message::Pong(_)))) => continue,
            Ok(Some(Ok(_))) => {
                return Err(refuse(
                    None,
                    ErrorCode::UnexpectedFrame,
                    "the first frame must be a `hello` text frame",
                ));
            }
            Ok(Some(Err(_))) => {
                return Err(HelloRefused {
                    error: None,
                    close: CloseCode::TOO_BIG,
                    reason: "unreadable or oversized message",
                });
            }
            Ok(None) => {
                return Err(HelloRefused {
                    error: None,
                    close: CloseCode::NORMAL,
                    reason: "",
                });
            }
            Err(_) => {
                return Err(refuse(
                    None,
                    ErrorCode::UnexpectedFrame,
                    "no `hello` within the hello timeout",
                ));
            }
        }
    };
    match decode(first.as_str()) {
        Ok(frame) if matches!(frame.body, Body::Hello(_)) => Ok(frame),
        Ok(frame) => Err(refuse(
            Some(frame.id),
            ErrorCode::UnexpectedFrame,
            "the first frame must be `hello`",
        )),
        Err(e) => {
            state.metrics.error(e.code);
            let mut refused = refuse(e.request_id, e.code, &e.message);
            if e.code == ErrorCode::UnsupportedVersion {
                refused.close = CloseCode::UNSUPPORTED_VERSION;
                refused.reason = "unsupported protocol version";
            }
            Err(refused)
        }
    }
}

/// Why the hello step failed: an optional error frame, then a close.
struct HelloRefused {
    error: Option<Utf8Bytes>,
    close: u16,
    reason: &'static str,
}

/// Serves one upgraded connection until it closes.
pub async fn serve(
    socket: WebSocket,
    state: AppState,
    auth: Authed,
    (conn, _slot): (ConnId, ConnectionSlot),
    _permit: OwnedSemaphorePermit,
) {
    let (mut sink, mut stream) = socket.split();
    // Only the hello's id outlives this step: whatever is alive across an await below is part
    // of every idle connection's task.
    // Before the halves start, every write has the same deadline as after.
    let write_timeout = Duration::from_secs(state.config.write_timeout_secs.max(1));
    let hello_id = match hello(&state, &mut stream).await {
        Ok(frame) => frame.id,
        Err(refused) => {
            let _ = tokio::time::timeout(write_timeout, async {
                if let Some(error) = refused.error {
                    let _ = sink.send(Message::Text(error)).await;
                }
                close(&mut sink, refused.close, refused.reason).await;
            })
            .await;
            return;
        }
    };
    let welcome = repowire_protocol::encode(&Frame::new(Body::Welcome(Welcome {
        re: hello_id,
        connection_id: format!("conn-{conn}"),
        tenant_id: auth.tenant_id.clone(),
        server: concat!("repowire-relay/", env!("CARGO_PKG_VERSION")).to_owned(),
        limits: announced_limits(&state.config),
    })));
    match tokio::time::timeout(write_timeout, sink.send(Message::Text(welcome.into()))).await {
        Ok(Ok(())) => {}
        _ => return,
    }

    let (tx, rx) = crate::routing::hub::queue(
        state.config.outbound_queue,
        state.config.outbound_queue_bytes,
        state.outbound_budget.clone(),
    );
    let kick = Arc::new(Kick::default());
    state.hub.add_conn(
        &auth.tenant_id,
        ConnHandle {
            id: conn,
            key_id: auth.key_id.clone(),
            tx,
            kick: kick.clone(),
        },
    );
    state.metrics.connections.inc();
    // The key was checked before the upgrade; a revocation in between found no connection to
    // close, so look again now that revocations can reach this one.
    if state.hub.is_revoked(&auth.key_id) {
        kick.kick(CloseCode::KEY_REVOKED, "API key revoked");
    }
    // Shutdown closes the connections the hub holds (`Hub::kick_all`); one added after that
    // closes itself.
    if state.shutdown.is_cancelled() {
        kick.kick(
            CloseCode::GOING_AWAY,
            "relay shutting down; reconnect and resume",
        );
    }
    tracing::debug!(tenant = %auth.tenant_id, conn, "connection open");
    let limiter = send_limiter(state.config.send_rate, state.config.send_burst);
    let approves = auth
        .scopes
        .split(' ')
        .any(|s| s == crate::tenancy::apikey::APPROVE);
    let session = Session::new(
        state.clone(),
        auth.tenant_id.clone(),
        (conn, auth.key_id.clone()),
        approves,
    );

    // Reading and writing are two halves of one task. The write half owns every close: a
    // peer that stopped reading blocks only its own socket write, which races the control
    // events (shutdown, a kick) and a deadline, so revocation, slow-consumer and shutdown
    // closes never wait for the peer to read again.
    let link = Link {
        kick: &kick,
        heard: Heard::new(),
    };
    let reading = read_half(&session, limiter.as_ref(), &mut stream, &link);
    let writing = write_half(&state, &auth.tenant_id, conn, &mut sink, rx, &link);
    tokio::join!(reading, writing);

    let gone = state.hub.remove_conn(&auth.tenant_id, conn);
    state.metrics.connections.dec();
    for record in gone {
        // Boxed: this state was the largest of the task's, so every idle connection paid for it.
        Box::pin(route::went_offline(&state, record)).await;
    }
    tracing::debug!(tenant = %auth.tenant_id, conn, "connection closed");
}

/// What the two halves of a connection share.
struct Link<'a> {
    /// Every way the connection ends goes through it: closes from outside (revocation, slow
    /// consumer, shutdown: [`crate::routing::hub::Hub::kick_all`]), the read half's (a bad frame, or
    /// [`ENDED`]: the peer left), and the write half's own end ([`ENDED`]), so either half
    /// stops when the other does. One token per connection: an idle connection is cheap.
    kick: &'a Kick,
    /// When the peer was last heard from, for the idle timeout.
    heard: Heard,
}

/// A kick that closes nothing (no close frame): the connection is over already (the peer
/// closed it, the socket failed, or the write half finished its close).
const ENDED: u16 = 0;

/// When the peer was last heard from, and whether a frame of it is being handled (then the
/// relay is the one not reading, and the idle timeout does not run).
struct Heard {
    start: Instant,
    last_ms: AtomicU64,
    handling: AtomicBool,
}

impl Heard {
    fn new() -> Self {
        Self {
            start: Instant::now(),
            last_ms: AtomicU64::new(0),
            handling: AtomicBool::new(false),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn touch(&self) {
        self.last_ms.store(self.now_ms(), Ordering::Relaxed);
    }

    fn idle_longer_than(&self, idle: Duration) -> bool {
        !self.handling.load(Ordering::Relaxed)
            && self
                .now_ms()
                .saturating_sub(self.last_ms.load(Ordering::Relaxed))
                > u64::try_from(idle.as_millis()).unwrap_or(u64::MAX)
    }
}

/// Reads and handles the client's frames, one at a time and in order: none is read while one
/// is being handled (a client that outruns its write permits is held back by TCP), while the
/// write half keeps draining the outbound queue. A frame being handled when the connection
/// ends is finished, as its write may be committed already.
async fn read_half(
    session: &Session,
    limiter: Option<&Limiter>,
    stream: &mut futures::stream::SplitStream<WebSocket>,
    link: &Link<'_>,
) {
    loop {
        let incoming = tokio::select! {
            biased;
            _ = link.kick.kicked() => break,
            incoming = stream.next() => incoming,
        };
        link.heard.touch();
        match incoming {
            Some(Ok(Message::Text(text))) => {
                link.heard.handling.store(true, Ordering::Relaxed);
                // Boxed: an idle connection's task keeps no room for a frame being handled.
                Box::pin(on_text(session, limiter, text.as_str())).await;
                link.heard.touch();
                link.heard.handling.store(false, Ordering::Relaxed);
            }
            Some(Ok(Message::Binary(_))) => session.refuse(
                None,
                route::Refusal::new(
                    ErrorCode::MalformedFrame,
                    "binary frames are not part of the protocol; send JSON text frames",
                ),
            ),
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
            Some(Ok(Message::Close(_))) | None => break,
            Some(Err(error)) => {
                tracing::debug!(%error, conn = session.conn, "connection read failed");
                link.kick
                    .kick(CloseCode::TOO_BIG, "unreadable or oversized message");
                break;
            }
        }
    }
    link.kick.kick(ENDED, "");
}

/// Writes the outbound queue and pings, and closes the connection when told to (shutdown, a
/// kick, the idle timeout) or when a write does not finish within the write timeout.
async fn write_half(
    state: &AppState,
    tenant_id: &str,
    conn: ConnId,
    sink: &mut Sink,
    mut rx: OutReceiver,
    link: &Link<'_>,
) {
    let write_timeout = Duration::from_secs(state.config.write_timeout_secs.max(1));
    let idle = Duration::from_secs(state.config.idle_timeout_secs);
    let mut ping =
        tokio::time::interval(Duration::from_secs(state.config.ping_interval_secs.max(1)));
    ping.tick().await;
    let closing: Option<(u16, String)> = loop {
        tokio::select! {
            biased;
            kicked = link.kick.kicked() => break (kicked.0 != ENDED).then_some(kicked),
            out = rx.recv() => {
                let Some(out) = out else { break None };
                // Boxed, the write and its race: an idle connection's task keeps no room for
                // a write in progress (a deadline's timer alone is ~100 bytes).
                let write = Box::pin(write_queued(&mut *sink, &mut rx, out));
                if let Err(closing) = Box::pin(race(link, write_timeout, write)).await {
                    break closing;
                }
            }
            _ = ping.tick() => {
                if link.heard.idle_longer_than(idle) {
                    break Some((CloseCode::IDLE_TIMEOUT, "no traffic within the idle timeout".to_owned()));
                }
                let write = Box::pin(sink.send(Message::Ping(Default::default())));
                if let Err(closing) = Box::pin(race(link, write_timeout, write)).await {
                    break closing;
                }
            }
        }
    };
    // Stops the read half (a close from outside stopped it already).
    link.kick.kick(ENDED, "");
    let Some((code, reason)) = closing else {
        return;
    };
    if code == CloseCode::SLOW_CONSUMER {
        state.metrics.slow_consumers.inc();
        tracing::info!(tenant = %tenant_id, conn, %reason, "closed as a slow consumer");
    }
    // A peer that does not read cannot take a close frame either: the socket is dropped once
    // the deadline passes, and the peer sees the connection end without one.
    let _ = Box::pin(tokio::time::timeout(
        write_timeout.min(CLOSE_DEADLINE),
        close(sink, code, &reason),
    ))
    .await;
}

/// Runs one socket write against the control events and a deadline: a peer that stopped
/// reading holds back nothing but its own frames. `Err` says how the connection closes: with
/// a close frame (shutdown, a kick, a stalled write), or at once (`None`: the socket failed).
async fn race<E>(
    link: &Link<'_>,
    deadline: Duration,
    write: impl std::future::Future<Output = Result<(), E>>,
) -> Result<(), Option<(u16, String)>> {
    tokio::select! {
        biased;
        kicked = link.kick.kicked() => Err((kicked.0 != ENDED).then_some(kicked)),
        written = tokio::time::timeout(deadline, write) => match written {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(None),
            Err(_) => Err(Some((
                CloseCode::SLOW_CONSUMER,
                "writes to this connection stalled; read frames faster, reconnect and resume"
                    .to_owned(),
            ))),
        },
    }
}

/// The longest a close frame may take to leave before the socket is dropped without it.
const CLOSE_DEADLINE: Duration = Duration::from_secs(1);

/// Writes `first` and whatever else is already queued for this connection (up to
/// [`WRITE_BATCH_BYTES`]) with one flush: under load a connection's frames leave in one system
/// call instead of one each.
async fn write_queued<S>(
    sink: &mut S,
    rx: &mut OutReceiver,
    first: Outbound,
) -> Result<(), S::Error>
where
    S: futures::Sink<Message> + Unpin,
{
    let mut bytes = first.len();
    sink.feed(Message::Text(String::from(first).into())).await?;
    while bytes < WRITE_BATCH_BYTES {
        let Some(next) = rx.try_recv() else { break };
        bytes += next.len();
        sink.feed(Message::Text(String::from(next).into())).await?;
    }
    sink.flush().await
}

/// How much a batch of queued frames may hold before it is flushed (the socket's write buffer
/// keeps this capacity afterwards, so it stays small).
pub(crate) const WRITE_BATCH_BYTES: usize = 16 * 1024;

async fn on_text(s: &Session, limiter: Option<&Limiter>, text: &str) {
    let started = Instant::now();
    match decode(text) {
        Err(e) => s.refuse(e.request_id, route::Refusal::new(e.code, e.message)),
        Ok(frame) => {
            s.state
                .metrics
                .frames_received
                .get_or_create(&TypeLabel {
                    r#type: frame.body.type_name(),
                })
                .inc();
            if frame.body.creates_message()
                && let Some(Err(not_until)) = limiter.map(|l| l.check())
            {
                let wait = not_until.wait_time_from(DefaultClock::default().now());
                let mut refusal = route::Refusal::new(
                    ErrorCode::RateLimited,
                    format!(
                        "this connection may send {} messages per second; nothing was accepted, retry later",
                        s.state.config.send_rate
                    ),
                );
                refusal.retry_after_ms =
                    Some(u64::try_from(wait.as_millis()).unwrap_or(u64::MAX).max(1));
                return s.refuse(Some(frame.id), refusal);
            }
            route::handle(s, frame, started).await;
        }
    }
}

/// What `welcome` announces: the limits and settings a client needs (protocol.md §9.1).
fn announced_limits(config: &crate::config::RelayConfig) -> Limits {
    let ms = |secs: u64| secs.saturating_mul(1000);
    Limits {
        max_frame_bytes: limits::MAX_FRAME_BYTES,
        max_text_bytes: limits::MAX_TEXT_BYTES,
        max_transport_bytes: Some(limits::MAX_TRANSPORT_BYTES),
        send_rate_per_sec: Some(config.send_rate),
        send_burst: Some(config.send_burst),
        inbox_cap: Some(u64::try_from(config.inbox_cap).unwrap_or(0)),
        message_ttl_ms: Some(ms(config.message_ttl_secs)),
        ping_interval_ms: Some(ms(config.ping_interval_secs)),
        idle_timeout_ms: Some(ms(config.idle_timeout_secs)),
    }
}
