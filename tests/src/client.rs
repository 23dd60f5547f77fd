//! A protocol client for tests and benchmarks: real HTTP token exchange, real WebSocket.
//! It panics on anything unexpected, which is what a test wants.

use std::collections::VecDeque;

use futures::{SinkExt, StreamExt};
use repowire_protocol::http::{TokenRequest, TokenResponse};
use repowire_protocol::*;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::{self, Message as WsMessage};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::WAIT;

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

pub struct TestClient {
    ws: Ws,
    buffered: VecDeque<Frame>,
    pub tenant_id: String,
    /// The relay's `welcome`, once connected.
    pub welcome: Option<Welcome>,
    /// How long a read waits for a frame ([`WAIT`] unless changed with [`TestClient::patience`]).
    wait: std::time::Duration,
}

/// A `notify` frame from `from` to the name `to`, in the sender's own circle.
pub fn notify_frame(from: &PeerInfo, to: &str, text: impl Into<String>) -> Frame {
    Frame::new(Body::Notify(Notify {
        from: from.peer_id.clone(),
        to: to.into(),
        circle: None,
        text: text.into(),
    }))
}

/// Exchanges an API key for a token.
pub async fn token(http: &str, api_key: &str) -> Result<TokenResponse, (u16, serde_json::Value)> {
    let resp = reqwest::Client::new()
        .post(format!("{http}/v1/token"))
        .json(&TokenRequest {
            api_key: api_key.to_owned(),
        })
        .send()
        .await
        .expect("token request");
    let status = resp.status().as_u16();
    let body: serde_json::Value = resp.json().await.expect("json body");
    if status == 200 {
        Ok(serde_json::from_value(body).expect("token response"))
    } else {
        Err((status, body))
    }
}

/// Opens the WebSocket with a bearer token; `Err` carries the HTTP status of a refusal.
pub async fn open(ws_url: &str, token: Option<&str>) -> Result<Ws, u16> {
    open_with_authorization(ws_url, token.map(|t| format!("Bearer {t}")).as_deref()).await
}

/// Opens the WebSocket with this exact `Authorization` header value (or none).
pub async fn open_with_authorization(ws_url: &str, authorization: Option<&str>) -> Result<Ws, u16> {
    let mut request = ws_url.into_client_request().expect("request");
    if let Some(value) = authorization {
        request
            .headers_mut()
            .insert("authorization", value.parse().expect("header"));
    }
    match tokio_tungstenite::connect_async_with_config(request, None, true).await {
        Ok((ws, _)) => Ok(ws),
        Err(tungstenite::Error::Http(resp)) => Err(resp.status().as_u16()),
        Err(e) => panic!("websocket connect failed: {e}"),
    }
}

/// Opens the WebSocket over a socket whose receive buffer is `recv_buffer` bytes (as small as
/// the kernel allows), so a client that stops reading stalls the relay's writes soon.
pub async fn open_small_window(ws_url: &str, token: &str, recv_buffer: u32) -> Ws {
    let mut request = ws_url.into_client_request().expect("request");
    request.headers_mut().insert(
        "authorization",
        format!("Bearer {token}").parse().expect("header"),
    );
    let host = request.uri().authority().expect("authority").to_string();
    let addr = tokio::net::lookup_host(host)
        .await
        .expect("resolve")
        .next()
        .expect("an address");
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket.set_recv_buffer_size(recv_buffer).expect("SO_RCVBUF");
    let stream = socket.connect(addr).await.expect("connect");
    let (ws, _) = tokio_tungstenite::client_async(request, MaybeTlsStream::Plain(stream))
        .await
        .expect("upgrade");
    ws
}

impl TestClient {
    pub async fn connect(http: &str, ws_url: &str, api_key: &str) -> Self {
        let token = token(http, api_key).await.expect("token");
        let ws = open(ws_url, Some(&token.token)).await.expect("upgrade");
        Self::hello(ws, token).await
    }

    /// Like [`TestClient::connect`], over a socket with a receive buffer of `recv_buffer`
    /// bytes (see [`open_small_window`]).
    pub async fn connect_small_window(
        http: &str,
        ws_url: &str,
        api_key: &str,
        recv_buffer: u32,
    ) -> Self {
        let token = token(http, api_key).await.expect("token");
        let ws = open_small_window(ws_url, &token.token, recv_buffer).await;
        Self::hello(ws, token).await
    }

    async fn hello(ws: Ws, token: TokenResponse) -> Self {
        let mut c = Self {
            ws,
            buffered: VecDeque::new(),
            tenant_id: token.tenant_id,
            welcome: None,
            wait: WAIT,
        };
        let id = c
            .send(Body::Hello(Hello {
                client: "repowire-tests/0".into(),
            }))
            .await;
        let welcome = c
            .expect(|f| match &f.body {
                Body::Welcome(w) if w.re == id => Some(w.clone()),
                _ => None,
            })
            .await;
        c.welcome = Some(welcome);
        c
    }

    /// Wraps an already upgraded socket (for tests of the hello step).
    pub fn from_ws(ws: Ws) -> Self {
        Self {
            ws,
            buffered: VecDeque::new(),
            tenant_id: String::new(),
            welcome: None,
            wait: WAIT,
        }
    }

    pub async fn send(&mut self, body: Body) -> MessageId {
        let frame = Frame::new(body);
        self.send_frame(&frame).await;
        frame.id
    }

    pub async fn send_frame(&mut self, frame: &Frame) {
        self.send_raw(encode(frame)).await;
    }

    pub async fn send_raw(&mut self, text: String) {
        self.ws
            .send(WsMessage::Text(text.into()))
            .await
            .expect("send");
    }

    /// The next frame from the socket (not the buffer). Panics on close or after [`WAIT`].
    async fn read(&mut self) -> Frame {
        loop {
            let msg = tokio::time::timeout(self.wait, self.ws.next())
                .await
                .expect("timed out waiting for a frame")
                .expect("connection closed")
                .expect("read");
            match msg {
                WsMessage::Text(t) => {
                    return serde_json::from_str(t.as_str()).expect("relay sent a valid frame");
                }
                WsMessage::Close(c) => panic!("connection closed: {c:?}"),
                _ => continue,
            }
        }
    }

    /// Waits for the first frame `pick` accepts; frames it passes over stay buffered in order.
    pub async fn expect<T>(&mut self, mut pick: impl FnMut(&Frame) -> Option<T>) -> T {
        if let Some(pos) = self.buffered.iter().position(|f| pick(f).is_some()) {
            let f = self.buffered.remove(pos).expect("position is valid");
            return pick(&f).expect("matched before");
        }
        loop {
            let f = self.read().await;
            if let Some(t) = pick(&f) {
                return t;
            }
            self.buffered.push_back(f);
        }
    }

    /// Waits up to `wait` for each frame from now on (for answers that depend on a dependency's
    /// timeout, such as a database outage).
    pub fn patience(&mut self, wait: std::time::Duration) {
        self.wait = wait;
    }

    /// The next frame (buffered first), or `None` once the connection is closed, broken, or
    /// silent for [`WAIT`] — for tests that expect the relay to go away.
    pub async fn next_frame(&mut self) -> Option<Frame> {
        if let Some(f) = self.buffered.pop_front() {
            return Some(f);
        }
        loop {
            match tokio::time::timeout(WAIT, self.ws.next()).await {
                Ok(Some(Ok(WsMessage::Text(t)))) => {
                    return serde_json::from_str(t.as_str()).ok();
                }
                Ok(Some(Ok(WsMessage::Close(_)))) | Ok(Some(Err(_))) | Ok(None) | Err(_) => {
                    return None;
                }
                Ok(Some(Ok(_))) => continue,
            }
        }
    }

    /// Frames received so far and not consumed.
    pub fn buffered(&self) -> impl Iterator<Item = &Frame> {
        self.buffered.iter()
    }

    /// The answer to request `re`: `Ok(body)` or the error frame.
    pub async fn answer(&mut self, re: MessageId) -> Result<Body, ErrorFrame> {
        self.expect(|f| match &f.body {
            Body::Error(e) if e.re == Some(re) => Some(Err(e.clone())),
            Body::Registered(r) if r.re == re => Some(Ok(f.body.clone())),
            Body::Ok(r) if r.re == re => Some(Ok(f.body.clone())),
            Body::Peers(r) if r.re == re => Some(Ok(f.body.clone())),
            Body::Accepted(r) if r.re == re => Some(Ok(f.body.clone())),
            Body::ReplayDone(r) if r.re == re => Some(Ok(f.body.clone())),
            Body::Status(r) if r.re == re => Some(Ok(f.body.clone())),
            Body::State(r) if r.re == re => Some(Ok(f.body.clone())),
            Body::Questions(r) if r.re == re => Some(Ok(f.body.clone())),
            Body::SessionBound(r) if r.re == re => Some(Ok(f.body.clone())),
            Body::Sessions(r) if r.re == re => Some(Ok(f.body.clone())),
            _ => None,
        })
        .await
    }

    pub async fn register(&mut self, reg: Register) -> Registered {
        let id = self.send(Body::Register(reg)).await;
        match self.answer(id).await {
            Ok(Body::Registered(r)) => r,
            other => panic!("register failed: {other:?}"),
        }
    }

    /// Registers an agent peer with a name in a circle.
    pub async fn peer(&mut self, name: &str, circle: &str) -> PeerInfo {
        self.register(Register {
            name: Some(name.into()),
            circle: Some(circle.into()),
            backend: "claude-code".into(),
            path: Some(format!("/work/{name}")),
            ..Default::default()
        })
        .await
        .peer
    }

    /// Registers a peer with a role (orchestrator, service, human cross circles).
    pub async fn peer_with_role(&mut self, name: &str, circle: &str, role: Role) -> PeerInfo {
        self.register(Register {
            name: Some(name.into()),
            circle: Some(circle.into()),
            backend: "claude-code".into(),
            path: Some(format!("/work/{name}")),
            role: Some(role),
            ..Default::default()
        })
        .await
        .peer
    }

    /// Sends a message-creating body and returns its `accepted` (or the error).
    pub async fn submit(&mut self, body: Body) -> Result<Accepted, ErrorFrame> {
        let id = self.send(body).await;
        match self.answer(id).await? {
            Body::Accepted(a) => Ok(a),
            other => panic!("expected accepted, got {other:?}"),
        }
    }

    pub async fn ask(
        &mut self,
        from: &PeerInfo,
        to: &str,
        text: &str,
    ) -> Result<Accepted, ErrorFrame> {
        self.submit(Body::Ask(Ask {
            from: from.peer_id.clone(),
            to: to.into(),
            circle: None,
            text: text.into(),
            reply_to: None,
            question: None,
        }))
        .await
    }

    pub async fn notify(
        &mut self,
        from: &PeerInfo,
        to: &str,
        text: &str,
    ) -> Result<Accepted, ErrorFrame> {
        self.submit(Body::Notify(Notify {
            from: from.peer_id.clone(),
            to: to.into(),
            circle: None,
            text: text.into(),
        }))
        .await
    }

    /// The questions to `@approvers` visible to `as_peer` (open ones, or closed ones).
    pub async fn questions(&mut self, as_peer: &PeerId, closed: bool) -> Vec<QuestionInfo> {
        let id = self
            .send(Body::ListQuestions(ListQuestions {
                peer_id: as_peer.clone(),
                closed,
                limit: None,
            }))
            .await;
        match self.answer(id).await {
            Ok(Body::Questions(q)) => q.questions,
            other => panic!("list_questions failed: {other:?}"),
        }
    }

    /// Binds `peer` to a work stream (a Repowire session) for runtime session `runtime`.
    pub async fn bind(
        &mut self,
        peer: &PeerId,
        session: Option<&str>,
        runtime: &str,
    ) -> SessionInfo {
        let id = self
            .send(Body::BindSession(BindSession {
                peer_id: peer.clone(),
                session_id: session.map(str::to_owned),
                runtime_session_id: runtime.to_owned(),
                transcript: Some(TranscriptLocator {
                    path: format!("/transcripts/{runtime}.jsonl"),
                    cursor: Some(runtime.len() as u64),
                }),
                source: None,
            }))
            .await;
        match self.answer(id).await {
            Ok(Body::SessionBound(b)) => b.session,
            other => panic!("bind_session failed: {other:?}"),
        }
    }

    /// The sessions `as_peer` sees.
    pub async fn sessions(&mut self, as_peer: &PeerId, all_circles: bool) -> Vec<SessionInfo> {
        let id = self
            .send(Body::ListSessions(ListSessions {
                peer_id: as_peer.clone(),
                all_circles,
            }))
            .await;
        match self.answer(id).await {
            Ok(Body::Sessions(l)) => l.sessions,
            other => panic!("list_sessions failed: {other:?}"),
        }
    }

    /// Waits for a delivery to `to`.
    pub async fn delivered_to(&mut self, to: &PeerId) -> Deliver {
        self.expect(|f| match &f.body {
            Body::Deliver(d) if &d.to == to => Some(d.clone()),
            _ => None,
        })
        .await
    }

    /// The next error frame.
    pub async fn error(&mut self) -> ErrorFrame {
        self.expect(|f| match &f.body {
            Body::Error(e) => Some(e.clone()),
            _ => None,
        })
        .await
    }

    /// Reports a receipt (no answer on success).
    pub async fn receipt(&mut self, peer: &PeerId, message: MessageId, state: ReceiptState) {
        self.send(Body::Receipt(Receipt {
            peer_id: peer.clone(),
            message_id: message,
            state,
            reason: None,
        }))
        .await;
    }

    /// Reports a receipt; `false` when the connection is gone (a relay killed under it), for
    /// tests that expect that.
    pub async fn try_receipt(
        &mut self,
        peer: &PeerId,
        message: MessageId,
        state: ReceiptState,
    ) -> bool {
        let frame = Frame::new(Body::Receipt(Receipt {
            peer_id: peer.clone(),
            message_id: message,
            state,
            reason: None,
        }));
        self.ws
            .send(WsMessage::Text(encode(&frame).into()))
            .await
            .is_ok()
    }

    /// Waits for a delivery-state update of `message`.
    pub async fn state_of(&mut self, message: MessageId) -> Delivery {
        self.expect(|f| match &f.body {
            Body::Delivery(d) if d.message_id == message => Some(d.clone()),
            _ => None,
        })
        .await
    }

    /// Reads until the relay closes; returns the close frame.
    pub async fn closed(&mut self) -> Option<CloseFrame> {
        loop {
            match tokio::time::timeout(WAIT, self.ws.next())
                .await
                .expect("timed out waiting for close")
            {
                Some(Ok(WsMessage::Close(c))) => return c,
                Some(Ok(WsMessage::Text(t))) => {
                    if let Ok(f) = serde_json::from_str(t.as_str()) {
                        self.buffered.push_back(f);
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(_)) | None => return None,
            }
        }
    }

    pub async fn list(&mut self, as_peer: &PeerId, include_offline: bool) -> Vec<PeerInfo> {
        let id = self
            .send(Body::ListPeers(ListPeers {
                peer_id: as_peer.clone(),
                circle: None,
                include_offline,
                all_circles: false,
                limit: None,
                cursor: None,
            }))
            .await;
        match self.answer(id).await {
            Ok(Body::Peers(p)) => p.peers,
            other => panic!("list_peers failed: {other:?}"),
        }
    }
}
