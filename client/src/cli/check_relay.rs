//! `repowire check-relay`: is the relay reachable with this key? Exchanges the API key for a
//! token (`POST /v1/token`), opens the WebSocket with it and waits for `welcome` to its
//! `hello`, then says which tenant and connection it got. Changes nothing but the key's
//! last-used time (the relay's own
//! `repowire-relay check` does the same in the Helm chart's `helm test` Pod). What the relay
//! says is shown through the terminal sanitizer.

use std::time::Duration;

use anyhow::{Context, bail};
use futures::{SinkExt, StreamExt};
use repowire_protocol::{Body, Frame, Hello};
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::config::Config;

/// What the relay said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    /// The relay's base URL.
    pub url: String,
    /// The key's tenant.
    pub tenant_id: String,
    /// The connection the relay opened.
    pub connection_id: String,
}

/// Runs the check with the relay URL and key of the flags, environment or config.toml.
pub fn check(config: &Config) -> anyhow::Result<Checked> {
    let file = crate::config::FileConfig::load(&config.home())?;
    let crate::config::RelayTarget::Remote { url, api_key: key } = config.relay_target(&file)?
    else {
        bail!(
            "no relay configured: this machine uses its own embedded relay, which `repowire doctor` \
             checks; check-relay checks a shared relay: give --relay-url URL (REPOWIRE_RELAY_URL) \
             and --api-key KEY, or join one with `repowire setup --relay-url URL --api-key KEY`"
        );
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async {
        let token = super::relay_setup::exchange(&url, &key).await?;
        let ws_url = format!("{}/v1/ws", url.replacen("http", "ws", 1));
        let mut request = ws_url
            .as_str()
            .into_client_request()
            .with_context(|| format!("bad relay URL {url}"))?;
        request.headers_mut().insert(
            "authorization",
            format!("Bearer {}", token.token)
                .parse()
                .context("the token is not a header value")?,
        );
        let (ws, _) = tokio::time::timeout(
            Duration::from_secs(10),
            tokio_tungstenite::connect_async_with_config(request, None, true),
        )
        .await
        .map_err(|_| anyhow::anyhow!("the WebSocket at {ws_url} did not open within 10 s"))?
        .map_err(|e| anyhow::anyhow!("the WebSocket at {ws_url} did not open: {e}"))?;
        let (mut sink, mut stream) = ws.split();
        let hello = Frame::new(Body::Hello(Hello {
            client: format!("repowire/{} check-relay", env!("CARGO_PKG_VERSION")),
        }));
        sink.send(WsMessage::text(repowire_protocol::encode(&hello)))
            .await
            .context("sending hello")?;
        let welcome = loop {
            let next = tokio::time::timeout(Duration::from_secs(10), stream.next())
                .await
                .map_err(|_| anyhow::anyhow!("no welcome within 10 s"))?;
            match next {
                Some(Ok(WsMessage::Text(text))) => {
                    match repowire_protocol::decode_from_relay(&text) {
                        Ok(Frame {
                            body: Body::Welcome(w),
                            ..
                        }) => break w,
                        Ok(Frame {
                            body: Body::Error(e),
                            ..
                        }) => bail!(
                            "the relay refused hello: {}",
                            crate::sanitize::for_terminal(&e.message)
                        ),
                        _ => continue,
                    }
                }
                Some(Ok(WsMessage::Close(close))) => bail!(
                    "the relay closed the connection: {}",
                    crate::sanitize::for_terminal(
                        &close.map(|c| c.reason.to_string()).unwrap_or_default()
                    )
                ),
                Some(Ok(_)) => continue,
                Some(Err(e)) => bail!("reading welcome: {e}"),
                None => bail!("the relay closed the connection before welcome"),
            }
        };
        let _ = sink.close().await;
        Ok(Checked {
            url: url.clone(),
            tenant_id: crate::sanitize::for_terminal(&welcome.tenant_id),
            connection_id: crate::sanitize::for_terminal(&welcome.connection_id),
        })
    })
}

/// `repowire check-relay [--json]`: exit 0 when the relay takes the key and the WebSocket.
pub fn run(config: &Config, json: bool) -> anyhow::Result<std::process::ExitCode> {
    let checked = check(config)?;
    if json {
        println!(
            "{}",
            serde_json::json!({
                "relay": checked.url,
                "tenant_id": checked.tenant_id,
                "connection_id": checked.connection_id,
            })
        );
    } else {
        println!(
            "ok: {} took the key (tenant {}) and opened a WebSocket (connection {})",
            checked.url, checked.tenant_id, checked.connection_id
        );
    }
    Ok(std::process::ExitCode::SUCCESS)
}
