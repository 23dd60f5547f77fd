//! `repowire-relay check`: does a relay take this key and open a WebSocket? The chart's
//! `helm test` Pod runs it, so the image needs no client binary. It does what an agent's
//! daemon does first — `POST /v1/token` with the key, the WebSocket upgrade with the token,
//! `hello` — and waits for `welcome`. Changes nothing on the relay but the key's last-used time
//! (as any token exchange does). What the relay says is
//! printed with control characters removed (it reaches a terminal or a pod log).

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use repowire_protocol::http::{HttpError, TokenRequest, TokenResponse};
use repowire_protocol::{Body, ErrorCode, Frame, Hello};
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

/// How long each step may take.
const STEP: Duration = Duration::from_secs(10);

/// What the relay said when it took the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    /// The relay's base URL (`http(s)://…`).
    pub url: String,
    /// The key's tenant.
    pub tenant_id: String,
    /// The connection the relay opened.
    pub connection_id: String,
}

/// Why the check failed, in words for whoever reads the pod's log.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// The URL is not one the relay serves on.
    #[error(
        "the relay URL must start with http://, https://, ws:// or wss:// and name a host (got `{0}`)"
    )]
    BadUrl(String),
    /// Nothing answered, or not in time.
    #[error("cannot reach the relay at {url}: {why}")]
    Unreachable {
        /// The base URL.
        url: String,
        /// What failed.
        why: String,
    },
    /// The relay refused the key.
    #[error("the relay at {url} refused the key ({status} {code}): {message}")]
    KeyRefused {
        /// The base URL.
        url: String,
        /// HTTP status.
        status: u16,
        /// The relay's error code.
        code: String,
        /// The relay's explanation.
        message: String,
    },
    /// Something answered that is not a relay.
    #[error("{url} answered {status}, but not as a Repowire relay does")]
    NotARelay {
        /// The base URL.
        url: String,
        /// HTTP status.
        status: u16,
    },
    /// The WebSocket did not open or did not say `welcome`.
    #[error("the relay at {url} took the key, but its WebSocket failed: {why}")]
    WebSocket {
        /// The base URL.
        url: String,
        /// What failed.
        why: String,
    },
}

/// The base URL as the relay serves HTTP on it: `ws(s)://` is read as `http(s)://` (the
/// operator may hand out a `wss://` public URL), a trailing `/` is dropped.
pub fn base_url(url: &str) -> Result<String, CheckError> {
    let trimmed = url.trim().trim_end_matches('/');
    let (scheme, rest) = trimmed
        .split_once("://")
        .ok_or_else(|| CheckError::BadUrl(printable(url)))?;
    let scheme = match scheme.to_ascii_lowercase().as_str() {
        "http" | "ws" => "http",
        "https" | "wss" => "https",
        _ => return Err(CheckError::BadUrl(printable(url))),
    };
    if rest.is_empty() || rest.starts_with('/') {
        return Err(CheckError::BadUrl(printable(url)));
    }
    Ok(format!("{scheme}://{rest}"))
}

/// Runs the check against the relay at `url` with `api_key`.
pub async fn check(url: &str, api_key: &str) -> Result<Checked, CheckError> {
    let url = base_url(url)?;
    let token = exchange(&url, api_key).await?;
    let welcome = open(&url, &token.token).await?;
    Ok(Checked {
        url,
        tenant_id: printable(&welcome.tenant_id),
        connection_id: printable(&welcome.connection_id),
    })
}

async fn exchange(url: &str, api_key: &str) -> Result<TokenResponse, CheckError> {
    let unreachable = |why: String| CheckError::Unreachable {
        url: url.to_owned(),
        why,
    };
    let response = reqwest::Client::new()
        .post(format!("{url}/v1/token"))
        .timeout(STEP)
        .json(&TokenRequest {
            api_key: api_key.to_owned(),
        })
        .send()
        .await
        .map_err(|e| {
            unreachable(if e.is_timeout() {
                format!("no answer within {} s", STEP.as_secs())
            } else {
                causes(&e.without_url())
            })
        })?;
    let status = response.status().as_u16();
    if response.status().is_success() {
        return response.json().await.map_err(|_| CheckError::NotARelay {
            url: url.to_owned(),
            status,
        });
    }
    match response.json::<HttpError>().await {
        Ok(said) => Err(CheckError::KeyRefused {
            url: url.to_owned(),
            status,
            code: error_code(said.error.code),
            message: printable(&said.error.message),
        }),
        Err(_) => Err(CheckError::NotARelay {
            url: url.to_owned(),
            status,
        }),
    }
}

async fn open(url: &str, token: &str) -> Result<repowire_protocol::Welcome, CheckError> {
    let failed = |why: String| CheckError::WebSocket {
        url: url.to_owned(),
        why,
    };
    let ws_url = format!("{}/v1/ws", url.replacen("http", "ws", 1));
    let mut request = ws_url
        .as_str()
        .into_client_request()
        .map_err(|e| failed(e.to_string()))?;
    request.headers_mut().insert(
        "authorization",
        format!("Bearer {token}")
            .parse()
            .map_err(|_| failed("the token is not a header value".into()))?,
    );
    let (ws, _) = tokio::time::timeout(
        STEP,
        tokio_tungstenite::connect_async_with_config(request, None, true),
    )
    .await
    .map_err(|_| failed(format!("it did not open within {} s", STEP.as_secs())))?
    .map_err(|e| failed(causes(&e)))?;
    let (mut sink, mut stream) = ws.split();
    let hello = Frame::new(Body::Hello(Hello {
        client: format!("repowire-relay/{} check", env!("CARGO_PKG_VERSION")),
    }));
    sink.send(WsMessage::text(repowire_protocol::encode(&hello)))
        .await
        .map_err(|e| failed(format!("sending hello: {e}")))?;
    let welcome = loop {
        let next = tokio::time::timeout(STEP, stream.next())
            .await
            .map_err(|_| failed(format!("no welcome within {} s", STEP.as_secs())))?;
        match next {
            Some(Ok(WsMessage::Text(text))) => match repowire_protocol::decode_from_relay(&text) {
                Ok(Frame {
                    body: Body::Welcome(w),
                    ..
                }) => break w,
                Ok(Frame {
                    body: Body::Error(e),
                    ..
                }) => return Err(failed(format!("hello refused: {}", printable(&e.message)))),
                _ => continue,
            },
            Some(Ok(WsMessage::Close(close))) => {
                let reason = close.map(|c| c.reason.to_string()).unwrap_or_default();
                return Err(failed(format!("closed: {}", printable(&reason))));
            }
            Some(Ok(_)) => continue,
            Some(Err(e)) => return Err(failed(format!("reading welcome: {e}"))),
            None => return Err(failed("closed before welcome".into())),
        }
    };
    // The check is done either way; a failed close changes nothing it found.
    let _ = sink.close().await;
    Ok(welcome)
}

/// The relay's error code as it is on the wire (`"key_revoked"`).
fn error_code(code: ErrorCode) -> String {
    serde_json::to_value(code)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| "unknown".into())
}

/// An error and its causes, `a: b: c`.
fn causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    printable(&text)
}

/// Text from the network with its control characters (escape sequences, newlines) removed.
fn printable(text: &str) -> String {
    text.chars().filter(|c| !c.is_control()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_url_reads_websocket_schemes_as_http_and_refuses_others() {
        assert_eq!(
            base_url("wss://relay.example/").expect("wss"),
            "https://relay.example"
        );
        assert_eq!(
            base_url("ws://10.0.0.1:8080").expect("ws"),
            "http://10.0.0.1:8080"
        );
        assert_eq!(
            base_url("HTTPS://relay.example").expect("https"),
            "https://relay.example"
        );
        for bad in [
            "relay.example",
            "ftp://relay.example",
            "http://",
            "https:///x",
        ] {
            assert!(
                matches!(base_url(bad), Err(CheckError::BadUrl(_))),
                "{bad} was taken"
            );
        }
    }

    #[test]
    fn printable_removes_escape_sequences_and_newlines() {
        assert_eq!(printable("a\u{1b}[2Jb\nc"), "a[2Jbc");
    }
}
