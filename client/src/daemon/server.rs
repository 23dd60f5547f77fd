//! The Unix-socket API (0600): one JSON request line in, one JSON response line out.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};

use super::Daemon;
use super::hooks::{AfterWrite, HookCall};
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
            repowire_protocol::ErrorCode::InvalidRequest,
            format!("request larger than {MAX_REQUEST} bytes or not newline-terminated"),
        )),
        Ok(_) => match serde_json::from_str::<Request>(&line) {
            Ok(request) => {
                // A caller that goes away (a killed hook, an interrupted `--wait`) cancels
                // its request: nothing it would have carried is marked handed over.
                let outcome = tokio::select! {
                    outcome = handle(&daemon, request, pid) => outcome,
                    _ = hung_up(&mut reader) => return,
                };
                match outcome {
                    Ok((value, after)) => {
                        if send(&mut write, &Response::ok(value)).await
                            && let Some(after) = after
                        {
                            daemon.commit_hand_over(after).await;
                        }
                        return;
                    }
                    Err(e) => Response::err(e),
                }
            }
            Err(e) => Response::err(ApiError::new(
                repowire_protocol::ErrorCode::InvalidRequest,
                format!("bad request: {e}"),
            )),
        },
        Err(e) => Response::err(ApiError::new(
            repowire_protocol::ErrorCode::InvalidRequest,
            format!("reading request: {e}"),
        )),
    };
    send(&mut write, &response).await;
}

/// Writes one response line; true if it was written.
async fn send(write: &mut tokio::net::unix::OwnedWriteHalf, response: &Response) -> bool {
    let mut out = serde_json::to_vec(response).unwrap_or_default();
    out.push(b'\n');
    write.write_all(&out).await.is_ok() && write.flush().await.is_ok()
}

/// Resolves when the caller closes its end (clients send one line and wait for the answer).
async fn hung_up<R: tokio::io::AsyncRead + Unpin>(reader: &mut R) {
    let mut byte = [0u8; 1];
    loop {
        match reader.read(&mut byte).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {} // bytes after the request line are ignored
        }
    }
}

async fn handle(
    daemon: &Arc<Daemon>,
    request: Request,
    pid: Option<u32>,
) -> Result<(Value, Option<AfterWrite>), ApiError> {
    // A typed reply, as the JSON the caller reads back with `api::typed`.
    fn typed(reply: impl serde::Serialize) -> (Value, Option<AfterWrite>) {
        let v = serde_json::to_value(reply).expect("a typed reply serializes (string keys only)");
        (v, None)
    }
    match request {
        Request::Status => daemon.status().await.map(typed),
        Request::Outbox => daemon.outbox().await.map(typed),
        Request::OutboxDrop { realm } => daemon.drop_outbox(&realm).await.map(typed),
        Request::Hook {
            event,
            runtime,
            payload,
            tmux,
            tmux_pane,
            approval_timeout_ms,
            repowire_session,
        } => {
            let (output, after) = daemon
                .hook(HookCall {
                    event,
                    runtime,
                    payload: &payload,
                    tmux: tmux.as_deref(),
                    tmux_pane: tmux_pane.as_deref(),
                    hook_pid: pid,
                    approval_timeout: approval_timeout_ms.map(Duration::from_millis),
                    repowire_session: repowire_session.as_deref(),
                })
                .await?;
            Ok((typed(crate::api::HookReply { output }).0, after))
        }
        Request::AskBlocking(out) => daemon
            .ask_blocking(out, pid)
            .await
            .map(|(blocked, after)| (typed(blocked).0, after)),
        Request::Questions {
            from,
            closed,
            limit,
        } => daemon
            .questions(from.as_deref(), pid, closed, limit)
            .await
            .map(typed),
        Request::LocalDecisions { from, limit } => daemon
            .local_decisions(from.as_deref(), pid, limit)
            .await
            .map(typed),
        Request::Decide {
            from,
            correlation_id,
            allow,
            reason,
        } => daemon
            .decide(from.as_deref(), pid, correlation_id, allow, reason)
            .await
            .map(typed),
        Request::Peers {
            from,
            include_offline,
            all_circles,
            circle,
        } => daemon
            .peers(from.as_deref(), pid, include_offline, all_circles, circle)
            .await
            .map(typed),
        Request::Send(out) => daemon.send(out, pid).await.map(typed),
        Request::Ack {
            from,
            correlation_id,
            reply,
        } => daemon
            .ack(from.as_deref(), pid, correlation_id, reply)
            .await
            .map(typed),
        Request::Answer {
            from,
            correlation_id,
            option_id,
            text,
        } => daemon
            .answer(from.as_deref(), pid, correlation_id, option_id, text)
            .await
            .map(typed),
        Request::Whoami { tmux_pane } => daemon.whoami(pid, tmux_pane.as_deref()).await.map(typed),
        Request::Identity { from } => daemon.identity(from.as_deref(), pid).await.map(typed),
        Request::Inbox(query) => daemon.inbox(query, pid).await.map(typed),
        Request::EndSession { session } => daemon.end_named_session(&session).await.map(typed),
        Request::Describe { from, text } => {
            daemon.describe(from.as_deref(), pid, text).await.map(typed)
        }
        Request::ReadFile { from, peer, path } => daemon
            .read_peer_file(from.as_deref(), pid, &peer, &path)
            .await
            .map(typed),
        Request::StateSet { from, key, value } => daemon
            .state_set(from.as_deref(), pid, key, value)
            .await
            .map(typed),
        Request::StateGet { from, key } => {
            daemon.state_get(from.as_deref(), pid, key).await.map(typed)
        }
        Request::MessageStatus { id } => daemon.message_status(&id).await.map(typed),
        Request::WaitReply {
            from,
            correlation_id,
            timeout_ms,
        } => daemon
            .wait_reply(
                from.as_deref(),
                pid,
                &correlation_id,
                Duration::from_millis(timeout_ms),
            )
            .await
            .map(|(outcome, after)| (typed(outcome).0, after)),
        Request::WorkSessions { from, all } => {
            let mut sessions = daemon.work_sessions(from.as_deref(), pid, all).await?;
            if !all {
                let here = daemon.settings.machine.as_str();
                sessions.retain(|s| s.machine.as_deref() == Some(here));
            }
            Ok(typed(sessions))
        }
        Request::ResumeSession {
            session,
            command,
            dry_run,
            tmux,
        } => daemon
            .resume_session(
                &session,
                command.as_deref(),
                dry_run,
                tmux.as_deref().and_then(crate::tmux::socket_of).as_deref(),
            )
            .await
            .map(typed),
        Request::DashboardLink => daemon.dashboard_link(pid).await.map(typed),
        Request::StartConversation {
            from,
            peers,
            circle,
            text,
        } => daemon
            .start_conversation(from.as_deref(), pid, peers, circle, text)
            .await
            .map(typed),
        Request::EndConversation {
            from,
            conversation_id,
            reason,
        } => daemon
            .end_conversation(from.as_deref(), pid, conversation_id, reason)
            .await
            .map(typed),
        Request::Conversations { from, ended } => daemon
            .conversations(from.as_deref(), pid, ended)
            .await
            .map(typed),
        Request::ConversationShow {
            from,
            conversation_id,
        } => daemon
            .conversation_show(from.as_deref(), pid, &conversation_id)
            .await
            .map(typed),
        Request::Sessions => {
            let sessions = daemon
                .store
                .active_sessions()
                .await
                .map_err(super::errors::store_error)?;
            Ok(typed(
                sessions
                    .into_iter()
                    .map(crate::api::LocalSession::from)
                    .collect::<Vec<_>>(),
            ))
        }
        Request::Panes { tmux } => daemon
            .panes(tmux.as_deref().and_then(crate::tmux::socket_of).as_deref())
            .await
            .map(typed),
        Request::Link {
            pane,
            backend,
            tmux,
        } => daemon
            .link(
                &pane,
                backend,
                tmux.as_deref().and_then(crate::tmux::socket_of).as_deref(),
            )
            .await
            .map(typed),
        Request::Shutdown => {
            daemon.shutdown.cancel();
            Ok(typed(crate::api::Stopping { stopping: true }))
        }
    }
}
