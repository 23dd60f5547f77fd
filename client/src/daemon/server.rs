//! The Unix-socket API (0600): one JSON request line in, one JSON response line out.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};

use super::Daemon;
use super::hooks::HookCall;
use crate::api::{ApiError, Request, Response};

/// Largest request line (a hook payload with a long prompt fits easily).
const MAX_REQUEST: u64 = 4 * 1024 * 1024;

/// Binds the socket with owner-only permissions.
pub fn bind(path: &Path) -> anyhow::Result<UnixListener> {
    use std::os::unix::fs::PermissionsExt;
    // Created under a restrictive umask, then tightened explicitly.
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// Serves until the daemon shuts down.
pub async fn serve(daemon: Arc<Daemon>, listener: UnixListener) {
    loop {
        tokio::select! {
            _ = daemon.shutdown.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => { tokio::spawn(connection(daemon.clone(), stream)); }
                Err(error) => tracing::warn!(%error, "accept on the daemon socket"),
            }
        }
    }
}

async fn connection(daemon: Arc<Daemon>, stream: UnixStream) {
    let pid = stream
        .peer_cred()
        .ok()
        .and_then(|c| c.pid())
        .and_then(|p| u32::try_from(p).ok());
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read.take(MAX_REQUEST));
    let mut line = String::new();
    let response = match reader.read_line(&mut line).await {
        Ok(0) => return,
        Ok(_) if !line.ends_with('\n') => Response::err(ApiError::new(
            "invalid_request",
            format!("request larger than {MAX_REQUEST} bytes or not newline-terminated"),
        )),
        Ok(_) => match serde_json::from_str::<Request>(&line) {
            Ok(request) => match handle(&daemon, request, pid).await {
                Ok(v) => Response::ok(v),
                Err(e) => Response::err(e),
            },
            Err(e) => Response::err(ApiError::new(
                "invalid_request",
                format!("bad request: {e}"),
            )),
        },
        Err(e) => Response::err(ApiError::new(
            "invalid_request",
            format!("reading request: {e}"),
        )),
    };
    let mut out = serde_json::to_vec(&response).unwrap_or_default();
    out.push(b'\n');
    let _ = write.write_all(&out).await;
}

async fn handle(
    daemon: &Arc<Daemon>,
    request: Request,
    pid: Option<u32>,
) -> Result<Value, ApiError> {
    match request {
        Request::Status => daemon.status().await,
        Request::Hook {
            event,
            payload,
            tmux,
            tmux_pane,
        } => {
            let output = daemon
                .hook(HookCall {
                    event: &event,
                    payload: &payload,
                    tmux: tmux.as_deref(),
                    tmux_pane: tmux_pane.as_deref(),
                    hook_pid: pid,
                })
                .await?;
            Ok(json!({ "output": output }))
        }
        Request::Peers {
            from,
            include_offline,
            all_circles,
            circle,
        } => {
            daemon
                .peers(from.as_deref(), pid, include_offline, all_circles, circle)
                .await
        }
        Request::Send(out) => daemon.send(out, pid).await,
        Request::Ack {
            from,
            correlation_id,
            reply,
        } => {
            daemon
                .ack(from.as_deref(), pid, correlation_id, reply)
                .await
        }
        Request::MessageStatus { id } => daemon.message_status(&id).await,
        Request::WaitReply {
            correlation_id,
            timeout_ms,
        } => {
            daemon
                .wait_reply(&correlation_id, Duration::from_millis(timeout_ms))
                .await
        }
        Request::Sessions => {
            let sessions = daemon
                .store
                .active_sessions()
                .await
                .map_err(super::ops::store_error)?;
            Ok(json!(sessions))
        }
        Request::Panes { tmux } => {
            daemon
                .panes(tmux.as_deref().and_then(crate::tmux::socket_of).as_deref())
                .await
        }
        Request::Link {
            pane,
            backend,
            tmux,
        } => {
            daemon
                .link(
                    &pane,
                    &backend,
                    tmux.as_deref().and_then(crate::tmux::socket_of).as_deref(),
                )
                .await
        }
        Request::Shutdown => {
            daemon.shutdown.cancel();
            Ok(json!({ "stopping": true }))
        }
    }
}
