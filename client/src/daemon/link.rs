//! The daemon's one WebSocket link to the relay: token exchange, `hello`/`welcome`, a writer
//! task, the read loop, request/answer matching by `re`, and reconnection with capped,
//! jittered exponential backoff (protocol.md §13.2).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use repowire_protocol::http::{HttpError, TokenResponse};
use repowire_protocol::{Body, CloseCode, Frame, Hello, MessageId};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_util::sync::CancellationToken;

use super::Daemon;

/// How often the daemon pings the relay.
const PING_EVERY: Duration = Duration::from_secs(20);
/// Nothing received for this long: the connection is dead.
const SILENCE_IS_DEAD: Duration = Duration::from_secs(60);

/// Why a request over the link did not get an answer.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LinkError {
    /// Not connected to the relay right now.
    #[error("not connected to the relay")]
    Down,
    /// No answer in time (the link may have dropped).
    #[error("the relay did not answer in time")]
    Timeout,
}

/// Where to connect.
#[derive(Clone)]
pub struct Endpoint {
    /// `http(s)://host:port`.
    pub base: String,
    /// API key.
    pub api_key: String,
}

/// Never the key: a daemon's state may be logged with `{:?}`.
impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("base", &self.base)
            .field("api_key", &"…")
            .finish()
    }
}

impl Endpoint {
    fn ws_url(&self) -> String {
        let rest = self
            .base
            .strip_prefix("https://")
            .map(|r| format!("wss://{r}"))
            .or_else(|| {
                self.base
                    .strip_prefix("http://")
                    .map(|r| format!("ws://{r}"))
            })
            .unwrap_or_else(|| self.base.clone());
        format!("{rest}/v1/ws")
    }
}

/// The link's shared half: send frames, await answers, watch the state.
#[derive(Debug)]
pub struct Link {
    out: Mutex<Option<mpsc::UnboundedSender<String>>>,
    pending: Mutex<HashMap<MessageId, oneshot::Sender<Frame>>>,
    state: watch::Sender<LinkState>,
    epoch: std::sync::atomic::AtomicU64,
}

pub use crate::api::LinkState;

impl Default for Link {
    fn default() -> Self {
        Self {
            out: Mutex::new(None),
            pending: Mutex::new(HashMap::new()),
            state: watch::Sender::new(LinkState::Connecting { last_error: None }),
            epoch: std::sync::atomic::AtomicU64::new(0),
        }
    }
}

#[allow(clippy::unwrap_used)] // a poisoned lock means a panic elsewhere already broke the daemon
impl Link {
    /// The current state.
    pub fn state(&self) -> LinkState {
        self.state.borrow().clone()
    }

    /// True once the sessions are registered after connecting: message frames may go out.
    pub fn is_ready(&self) -> bool {
        matches!(*self.state.borrow(), LinkState::Connected { .. })
    }

    /// This daemon's number for the current connection, while connected. (The relay's
    /// connection ids restart with the relay, so they cannot tell connections apart.)
    pub fn epoch(&self) -> Option<u64> {
        match &*self.state.borrow() {
            LinkState::Registering { .. } | LinkState::Connected { .. } => {
                Some(self.epoch.load(std::sync::atomic::Ordering::SeqCst))
            }
            _ => None,
        }
    }

    /// Registration after connecting is done.
    pub fn set_ready(&self) {
        self.state.send_modify(|s| {
            if let LinkState::Registering {
                connection_id,
                tenant_id,
            } = s
            {
                *s = LinkState::Connected {
                    connection_id: connection_id.clone(),
                    tenant_id: tenant_id.clone(),
                };
            }
        });
    }

    /// Queues a frame for sending; false when not connected.
    pub fn send(&self, frame: &Frame) -> bool {
        let text = repowire_protocol::encode(frame);
        match self.out.lock().unwrap().as_ref() {
            Some(tx) => tx.send(text).is_ok(),
            None => false,
        }
    }

    /// Sends a request and waits for the frame answering it (`re` = its id).
    pub async fn request(&self, frame: Frame, timeout: Duration) -> Result<Frame, LinkError> {
        let (tx, rx) = oneshot::channel();
        self.pending.lock().unwrap().insert(frame.id, tx);
        if !self.send(&frame) {
            self.pending.lock().unwrap().remove(&frame.id);
            return Err(LinkError::Down);
        }
        let answer = tokio::time::timeout(timeout, rx).await;
        self.pending.lock().unwrap().remove(&frame.id);
        match answer {
            Ok(Ok(frame)) => Ok(frame),
            Ok(Err(_)) => Err(LinkError::Down),
            Err(_) => Err(LinkError::Timeout),
        }
    }

    /// Hands an answer to its waiter; returns the frame when nobody waits for it (a late
    /// answer after a timeout, or an unprompted frame).
    fn complete(&self, frame: Frame) -> Option<Frame> {
        let waiter = answer_to(&frame).and_then(|re| self.pending.lock().unwrap().remove(&re));
        match waiter {
            Some(tx) => tx.send(frame).err(),
            None => Some(frame),
        }
    }

    fn attach(&self, tx: mpsc::UnboundedSender<String>, connection_id: String, tenant_id: String) {
        *self.out.lock().unwrap() = Some(tx);
        self.epoch.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.state.send_replace(LinkState::Registering {
            connection_id,
            tenant_id,
        });
    }

    fn detach(&self, next: LinkState) {
        *self.out.lock().unwrap() = None;
        // Waiters learn at once that no answer will come on this connection.
        self.pending.lock().unwrap().clear();
        self.state.send_replace(next);
    }
}

/// The request a frame answers.
pub fn answer_to(frame: &Frame) -> Option<MessageId> {
    match &frame.body {
        Body::Welcome(w) => Some(w.re),
        Body::Registered(r) => Some(r.re),
        Body::Ok(r) => Some(r.re),
        Body::Peers(p) => Some(p.re),
        Body::Accepted(a) => Some(a.re),
        Body::ReplayDone(r) => Some(r.re),
        Body::Status(s) => Some(s.re),
        Body::State(s) => Some(s.re),
        Body::Questions(q) => Some(q.re),
        Body::SessionBound(b) => Some(b.re),
        Body::Sessions(l) => Some(l.re),
        Body::Error(e) => e.re,
        _ => None,
    }
}

/// How one connection ended.
enum Ended {
    /// Reconnect after a backoff.
    Retry(String),
    /// Do not reconnect.
    Stop(String),
    /// Do not reconnect: the relay refused the API key (a new one is needed).
    KeyRefused(String),
}

/// Keeps the link up until `shutdown`.
pub async fn run(daemon: Arc<Daemon>, endpoint: Endpoint, shutdown: CancellationToken) {
    let mut attempt: u32 = 0;
    let mut token: Option<TokenResponse> = None;
    loop {
        let started = Instant::now();
        let ended = tokio::select! {
            _ = shutdown.cancelled() => break,
            ended = connect_and_serve(&daemon, &endpoint, &mut token) => ended,
        };
        match ended {
            Ended::Stop(reason) => {
                tracing::error!(%reason, "relay link stopped");
                daemon.link.detach(LinkState::Stopped {
                    reason,
                    key_refused: false,
                });
                return;
            }
            Ended::KeyRefused(reason) => {
                tracing::error!(%reason, "relay link stopped: the API key is refused");
                daemon.link.detach(LinkState::Stopped {
                    reason,
                    key_refused: true,
                });
                return;
            }
            Ended::Retry(reason) => {
                tracing::warn!(%reason, "relay link down");
                daemon.link.detach(LinkState::Connecting {
                    last_error: Some(reason),
                });
            }
        }
        if started.elapsed() > Duration::from_secs(60) {
            attempt = 0;
        }
        let cap = daemon
            .settings
            .reconnect_max
            .min(Duration::from_millis(500).saturating_mul(1 << attempt.min(16)));
        attempt = attempt.saturating_add(1);
        let delay = cap.mul_f64(rand::random::<f64>());
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep(delay) => {}
        }
    }
    daemon
        .link
        .detach(LinkState::Connecting { last_error: None });
}

async fn fetch_token(endpoint: &Endpoint) -> Result<TokenResponse, Ended> {
    crate::relay_token::exchange(&endpoint.base, &endpoint.api_key)
        .await
        .map_err(|e| {
            if e.key_refused() {
                Ended::KeyRefused(e.to_string())
            } else {
                // A relay that is down, a suspended tenant (the operator may resume it), a
                // relay fault: keep trying, with backoff.
                Ended::Retry(format!("token exchange: {e}"))
            }
        })
}

async fn connect_and_serve(
    daemon: &Arc<Daemon>,
    endpoint: &Endpoint,
    cached: &mut Option<TokenResponse>,
) -> Ended {
    let fresh = cached
        .as_ref()
        .is_some_and(|t| t.expires_at_ms - super::store::now_ms() > 60_000);
    if !fresh {
        match fetch_token(endpoint).await {
            Ok(t) => *cached = Some(t),
            Err(e) => return e,
        }
    }
    let Some(token) = cached.as_ref() else {
        return Ended::Retry("no token".into());
    };
    let mut request = match endpoint.ws_url().into_client_request() {
        Ok(r) => r,
        Err(e) => return Ended::Stop(format!("bad relay URL {}: {e}", endpoint.base)),
    };
    if let Ok(value) = format!("Bearer {}", token.token).parse() {
        request.headers_mut().insert("authorization", value);
    }
    let ws = match tokio_tungstenite::connect_async_with_config(request, None, true).await {
        Ok((ws, _)) => ws,
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => {
            if resp.status().as_u16() == 401 {
                *cached = None; // expired or unknown token: exchange the key again
            }
            // The relay says why in a JSON body (a full tenant, a suspended one …).
            let why = resp
                .body()
                .as_deref()
                .and_then(|b| serde_json::from_slice::<HttpError>(b).ok())
                .map(|b| format!("{} ({})", b.error.message, b.error.code.as_str()))
                .unwrap_or_else(|| resp.status().to_string());
            return Ended::Retry(format!("websocket upgrade refused: {why}"));
        }
        Err(e) => {
            return Ended::Retry(format!(
                "websocket connect: {}",
                crate::causes::with_causes(&e)
            ));
        }
    };
    let (mut sink, mut stream) = ws.split();

    // hello → welcome, before anything else.
    let hello = Frame::new(Body::Hello(Hello {
        client: format!("repowire/{}", env!("CARGO_PKG_VERSION")),
    }));
    if let Err(e) = sink
        .send(WsMessage::text(repowire_protocol::encode(&hello)))
        .await
    {
        return Ended::Retry(format!("sending hello: {e}"));
    }
    let welcome = loop {
        match tokio::time::timeout(Duration::from_secs(10), stream.next()).await {
            Ok(Some(Ok(WsMessage::Text(text)))) => {
                match repowire_protocol::decode_from_relay(&text) {
                    Ok(Frame {
                        body: Body::Welcome(w),
                        ..
                    }) => break w,
                    Ok(Frame {
                        body: Body::Error(e),
                        ..
                    }) => return Ended::Stop(format!("relay refused hello: {}", e.message)),
                    Ok(_) | Err(_) => continue,
                }
            }
            Ok(Some(Ok(WsMessage::Close(close)))) => return ended_by_close(close),
            Ok(Some(Ok(_))) => continue,
            Ok(Some(Err(e))) => return Ended::Retry(format!("reading welcome: {e}")),
            Ok(None) => return Ended::Retry("closed before welcome".into()),
            Err(_) => return Ended::Retry("no welcome within 10 s".into()),
        }
    };

    // The realm (which tenant's rows this daemon works in) is settled before the link can
    // carry anything: a registration sent meanwhile (a hook arriving during the first
    // connect) would store its identity under the realm being replaced, and lose it.
    if let Err(error) = daemon
        .store
        .learn_tenant(
            &daemon.relay_identity,
            &daemon.key_fingerprint,
            &welcome.tenant_id,
        )
        .await
    {
        tracing::error!(%error, "recording the relay's tenant; not using this connection");
        return Ended::Retry(format!("recording the relay's tenant: {error}"));
    }

    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    let writer = tokio::spawn(async move {
        // Our own Pings keep NATs and proxies from dropping a quiet connection.
        let mut ping = tokio::time::interval(PING_EVERY);
        ping.tick().await;
        loop {
            let message = tokio::select! {
                next = rx.recv() => match next {
                    Some(text) => WsMessage::text(text),
                    None => break,
                },
                _ = ping.tick() => WsMessage::Ping(Vec::new().into()),
            };
            if sink.send(message).await.is_err() {
                break;
            }
        }
        let _ = sink.close().await;
    });
    daemon
        .link
        .attach(tx, welcome.connection_id.clone(), welcome.tenant_id.clone());
    tracing::info!(connection = %welcome.connection_id, tenant = %welcome.tenant_id, "connected to the relay");
    let resume = tokio::spawn(daemon.clone().on_connected());

    let ended = loop {
        // The relay pings every 20 s: silence this long means the connection is dead (§6.3).
        let Ok(next) = tokio::time::timeout(SILENCE_IS_DEAD, stream.next()).await else {
            break Ended::Retry(format!(
                "nothing received for {} s",
                SILENCE_IS_DEAD.as_secs()
            ));
        };
        match next {
            Some(Ok(WsMessage::Text(text))) => match repowire_protocol::decode_from_relay(&text) {
                Ok(frame) => {
                    daemon.on_frame(&frame).await;
                    if let Some(unclaimed) = daemon.link.complete(frame) {
                        daemon.on_unclaimed(&unclaimed).await;
                    }
                }
                Err(e) => tracing::warn!(error = %e.message, "unreadable frame from the relay"),
            },
            Some(Ok(WsMessage::Close(close))) => break ended_by_close(close),
            Some(Ok(_)) => {}
            Some(Err(e)) => break Ended::Retry(format!("connection error: {e}")),
            None => break Ended::Retry("connection closed".into()),
        }
    };
    resume.abort();
    writer.abort();
    ended
}

fn ended_by_close(close: Option<tokio_tungstenite::tungstenite::protocol::CloseFrame>) -> Ended {
    let Some(close) = close else {
        return Ended::Retry("closed without a code".into());
    };
    let code = u16::from(close.code);
    let why = format!("closed by the relay ({code}: {})", close.reason);
    if code == CloseCode::KEY_REVOKED {
        Ended::KeyRefused(format!("the API key was revoked ({why})"))
    } else if code == CloseCode::TENANT_SUSPENDED {
        Ended::Retry(format!(
            "the relay's operator suspended this tenant; retrying until it is resumed ({why})"
        ))
    } else if matches!(
        code,
        CloseCode::HELLO_REQUIRED | CloseCode::UNSUPPORTED_VERSION
    ) {
        Ended::Stop(why)
    } else {
        Ended::Retry(why)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn websocket_url_follows_the_base_scheme() {
        let e = |base: &str| Endpoint {
            base: base.into(),
            api_key: String::new(),
        };
        assert_eq!(
            e("http://127.0.0.1:8080").ws_url(),
            "ws://127.0.0.1:8080/v1/ws"
        );
        assert_eq!(
            e("https://relay.example").ws_url(),
            "wss://relay.example/v1/ws"
        );
    }
}
