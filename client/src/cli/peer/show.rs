//! Reading peers and messages back: `peer list`, `peer describe`, `peer status`. Every field
//! from the relay is remote text, printed through [`t`] or the sanitizer.

use serde_json::Value;

use super::TIMEOUT;
use crate::api::Request;
use crate::api::text as s;
use crate::config::Config;

/// `peer describe ID`: one peer, and the work stream it executes (or last executed).
pub(super) fn describe(
    config: &Config,
    id: &str,
    json: bool,
    from: Option<String>,
) -> anyhow::Result<()> {
    let peers = crate::cli::call(
        config,
        &Request::Peers {
            from,
            include_offline: true,
            all_circles: true,
            circle: None,
        },
        TIMEOUT,
    )?;
    let matches: Vec<&Value> = peers
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|p| s(p, "peer_id") == id || s(p, "name") == id)
                .collect()
        })
        .unwrap_or_default();
    match matches.as_slice() {
        [] => anyhow::bail!("no peer `{id}`\nhint: `repowire peer list --all` shows every peer"),
        [one] => {
            // The work stream it executes (or last executed), if bound.
            let sessions = crate::cli::call(
                config,
                &Request::WorkSessions {
                    from: None,
                    all: true,
                },
                TIMEOUT,
            )?;
            let session = sessions.as_array().and_then(|l| {
                l.iter()
                    .find(|x| x["executor"]["peer_id"] == one["peer_id"])
                    .cloned()
            });
            if json {
                let mut shown = (*one).clone();
                shown["session"] = session.unwrap_or(Value::Null);
                println!("{}", serde_json::to_string_pretty(&shown)?);
            } else {
                for key in [
                    "name",
                    "peer_id",
                    "circle",
                    "backend",
                    "role",
                    "status",
                    "turn_state",
                    "path",
                    "machine",
                    "description",
                ] {
                    println!("{key:<12} {}", t(one, key));
                }
                if let Some(x) = session {
                    println!(
                        "{:<12} {} ({}), runtime {}",
                        "session",
                        t(&x, "session_id"),
                        t(&x, "status"),
                        x["runtime_session_ids"]
                            .as_array()
                            .and_then(|r| r.last())
                            .and_then(Value::as_str)
                            .map(crate::sanitize::for_terminal)
                            .unwrap_or("-".into())
                    );
                    println!("{:<12} {}", "transcript", t(&x["transcript"], "path"));
                }
            }
        }
        many => {
            let ids: Vec<String> = many
                .iter()
                .map(|p| format!("{} ({})", t(p, "peer_id"), t(p, "circle")))
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
    let status = crate::cli::call(config, &Request::MessageStatus { id }, TIMEOUT)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&status)?);
    } else {
        let m = status.get("message").cloned().unwrap_or(Value::Null);
        println!(
            "{} {} → {}  state: {}",
            s(&m, "kind"),
            s(&m, "message_id"),
            t(&m, "to_name"),
            s(&m, "state")
        );
        if let Some(cid) = m.get("correlation_id").and_then(Value::as_str) {
            println!("id       {cid}");
        }
        if let Some(reply) = m.get("reply").and_then(Value::as_str) {
            println!("reply    {}", crate::sanitize::for_context(reply));
        }
        for e in status
            .get("events")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
        {
            println!(
                "  {:<10} {} {}",
                s(&e, "state"),
                s(&e, "recipient"),
                // Written by the recipient's daemon: remote text.
                crate::sanitize::for_terminal(
                    e.get("reason").and_then(Value::as_str).unwrap_or("")
                )
            );
        }
    }
    Ok(())
}

/// A field from the relay (other peers' names, paths, descriptions), safe to print.
pub(super) fn t(v: &Value, key: &str) -> String {
    crate::sanitize::for_terminal(&s(v, key))
}

pub(super) fn print_peers(peers: &Value) {
    let list = peers.as_array().cloned().unwrap_or_default();
    if list.is_empty() {
        println!("no peers");
        return;
    }
    println!(
        "{:<20} {:<12} {:<8} {:<8} {:<12} {:<16} {:<22} PATH",
        "NAME", "CIRCLE", "STATUS", "TURN", "BACKEND", "MACHINE", "PEER ID"
    );
    for p in list {
        let machine = t(&p, "machine");
        let name = if p["you"] == true {
            format!("{} (you)", t(&p, "name"))
        } else {
            t(&p, "name")
        };
        println!(
            "{:<20} {:<12} {:<8} {:<8} {:<12} {:<16} {:<22} {}",
            name,
            t(&p, "circle"),
            t(&p, "status"),
            t(&p, "turn_state"),
            t(&p, "backend"),
            if machine.is_empty() {
                "-".to_owned()
            } else {
                machine
            },
            t(&p, "peer_id"),
            t(&p, "path")
        );
    }
}
