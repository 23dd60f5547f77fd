//! Reading peers and messages back: `peer list`, `peer describe`, `peer status`. Every field
//! from the relay is remote text, printed through [`t`] or the sanitizer.

use repowire_protocol::SessionInfo;

use super::TIMEOUT;
use crate::api::{ListedPeer, MessageStatus, Request};
use crate::config::Config;

/// `peer describe ID`: one peer, and the work stream it executes (or last executed).
pub(super) fn describe(
    config: &Config,
    id: &str,
    json: bool,
    from: Option<String>,
) -> anyhow::Result<()> {
    let peers: Vec<ListedPeer> = crate::cli::call_as(
        config,
        &Request::Peers {
            from,
            include_offline: true,
            all_circles: true,
            circle: None,
        },
        TIMEOUT,
    )?;
    let matches: Vec<&ListedPeer> = peers
        .iter()
        .filter(|p| p.peer.peer_id.as_str() == id || p.peer.name == id)
        .collect();
    match matches.as_slice() {
        [] => anyhow::bail!("no peer `{id}`\nhint: `repowire peer list --all` shows every peer"),
        [one] => {
            // The work stream it executes (or last executed), if bound.
            let sessions: Vec<SessionInfo> = crate::cli::call_as(
                config,
                &Request::WorkSessions {
                    from: None,
                    all: true,
                },
                TIMEOUT,
            )?;
            let session = sessions.into_iter().find(|x| {
                x.executor
                    .as_ref()
                    .is_some_and(|e| e.peer_id == one.peer.peer_id)
            });
            if json {
                let mut shown = serde_json::to_value(one)?;
                shown["session"] = serde_json::to_value(&session)?;
                println!("{}", serde_json::to_string_pretty(&shown)?);
            } else {
                let p = &one.peer;
                let or_dash = |v: &Option<String>| t(v.as_deref().unwrap_or("-"));
                for (key, value) in [
                    ("name", t(&p.name)),
                    ("peer_id", t(p.peer_id.as_str())),
                    ("circle", t(&p.circle)),
                    ("backend", t(&p.backend)),
                    ("role", p.role.as_str().to_owned()),
                    ("status", <&str>::from(p.status).to_owned()),
                    ("turn_state", p.turn_state.as_str().to_owned()),
                    ("path", or_dash(&p.path)),
                    ("machine", or_dash(&p.machine)),
                    ("description", or_dash(&p.description)),
                ] {
                    println!("{key:<12} {value}");
                }
                if let Some(x) = session {
                    println!(
                        "{:<12} {} ({}), runtime {}",
                        "session",
                        t(&x.session_id),
                        <&str>::from(x.status),
                        x.runtime_session_ids
                            .last()
                            .map(|r| t(r))
                            .unwrap_or("-".into())
                    );
                    println!(
                        "{:<12} {}",
                        "transcript",
                        t(x.transcript.as_ref().map_or("-", |tr| tr.path.as_str()))
                    );
                }
            }
        }
        many => {
            let ids: Vec<String> = many
                .iter()
                .map(|p| format!("{} ({})", t(p.peer.peer_id.as_str()), t(&p.peer.circle)))
                .collect();
            anyhow::bail!(
                "`{id}` names {} peers: {}\nhint: use the peer id",
                many.len(),
                ids.join(", ")
            );
        }
    }
    Ok(())
}

/// `peer status ID`: one of your messages and each recipient's state.
pub(super) fn status(config: &Config, id: String, json: bool) -> anyhow::Result<()> {
    let status: MessageStatus =
        crate::cli::call_as(config, &Request::MessageStatus { id }, TIMEOUT)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&status)?);
        return Ok(());
    }
    let m = &status.message;
    println!(
        "{} {} → {}  state: {}",
        m.kind,
        m.message_id,
        t(m.to_name.as_deref().unwrap_or("-")),
        m.state
    );
    if let Some(cid) = &m.correlation_id {
        println!("id       {cid}");
    }
    if let Some(reply) = &m.reply {
        println!("reply    {}", crate::sanitize::for_context(reply));
    }
    for e in &status.events {
        println!(
            "  {:<10} {} {}",
            e.state,
            e.recipient.as_deref().unwrap_or("-"),
            // Written by the recipient's daemon: remote text.
            t(e.reason.as_deref().unwrap_or(""))
        );
    }
    Ok(())
}

/// Text from the relay (other peers' names, paths, descriptions), safe to print.
pub(super) fn t(text: &str) -> String {
    crate::sanitize::for_terminal(text)
}

pub(super) fn print_peers(peers: &[ListedPeer]) {
    if peers.is_empty() {
        println!("no peers");
        return;
    }
    println!(
        "{:<20} {:<12} {:<8} {:<8} {:<12} {:<16} {:<22} PATH",
        "NAME", "CIRCLE", "STATUS", "TURN", "BACKEND", "MACHINE", "PEER ID"
    );
    for listed in peers {
        let p = &listed.peer;
        let name = if listed.you {
            format!("{} (you)", t(&p.name))
        } else {
            t(&p.name)
        };
        println!(
            "{:<20} {:<12} {:<8} {:<8} {:<12} {:<16} {:<22} {}",
            name,
            t(&p.circle),
            <&str>::from(p.status),
            p.turn_state.as_str(),
            t(&p.backend),
            t(p.machine
                .as_deref()
                .filter(|m| !m.is_empty())
                .unwrap_or("-")),
            t(p.peer_id.as_str()),
            t(p.path.as_deref().unwrap_or("-"))
        );
    }
}
