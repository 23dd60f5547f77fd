//! How messages are shown to an agent in its hook context: each one framed with who sent it
//! to whom (`--- @from → @to [ask #cid] ---`), its body quoted so it cannot pass itself off as
//! another message's header, control characters made visible, and, for an ask, how to close it
//! (through our MCP tools when they are registered, else the CLI).

use repowire_protocol::{ConversationEvent, ConversationRef, Message, MessageKind, QuestionKind};

use super::store::InboxRow;
use crate::runtimes::Runtime;
use crate::sanitize;

/// `s` cut to at most `max` bytes, at a character boundary, marked with `…` when cut.
pub(super) fn clip(s: String, max: usize) -> String {
    if s.len() <= max {
        return s;
    }
    let mut end = max - '…'.len_utf8();
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// A peer name from the relay, checked here too: names go into text the agent reads.
pub fn display_name(name: &str) -> &str {
    if repowire_protocol::validate::is_valid_name(name) {
        name
    } else {
        "(invalid name)"
    }
}

pub(super) fn first_line(s: &str) -> String {
    let line = s.lines().next().unwrap_or("");
    if line.chars().count() > 120 {
        format!("{}…", line.chars().take(120).collect::<String>())
    } else {
        line.to_owned()
    }
}

/// How agents are told to act on a message: through our MCP tools (no permission prompt, the
/// exact arguments given), or, when the agent's runtime does not register our MCP server, the CLI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tools {
    /// Our MCP tools.
    Mcp,
    /// `repowire peer …`.
    Cli,
}

impl Tools {
    /// Our MCP tools when `runtime` registers our MCP server, else the CLI.
    pub(super) fn of(runtime: Runtime) -> Self {
        if runtime.mcp_registered() {
            Tools::Mcp
        } else {
            Tools::Cli
        }
    }
}

/// One message, framed so the agent sees who sent it (`@from → @to [ask #cid]`), with every
/// line of the body quoted so a body cannot pass itself off as another message's header.
pub(super) fn render(row: &InboxRow, me: &str, tools: Tools) -> String {
    let Ok(m) = serde_json::from_str::<Message>(&row.body) else {
        return format!("--- message {} (unreadable) ---\n", row.message_id);
    };
    if let Some(c) = &m.conversation {
        return conversation(&m, c, &row.peer_id, tools);
    }
    let cid = m.correlation_id.as_ref().map(|c| c.as_str()).unwrap_or("");
    let tag = match m.kind {
        MessageKind::Ask => format!("[ask #{cid}]"),
        MessageKind::Notify => "[notify]".to_owned(),
        MessageKind::Broadcast => "[broadcast]".to_owned(),
        MessageKind::Reply => format!("[reply to #{cid}]"),
    };
    let body: String = sanitize::for_context(&m.text)
        .lines()
        .map(|l| format!("> {l}\n"))
        .collect();
    let mut out = format!(
        "--- @{} → @{me} {tag} (peer {}, circle {}) ---\n{body}",
        display_name(&m.from.name),
        m.from.peer_id,
        display_name(&m.from.circle),
    );
    match (&m.kind, &m.question) {
        (MessageKind::Ask, Some(q)) => {
            let kind = match q.kind {
                QuestionKind::Choice => "choose one option",
                QuestionKind::Text => "answer with text",
                QuestionKind::ToolPermission => "allow or deny",
                QuestionKind::Acknowledge => "acknowledge it",
            };
            out.push_str(&format!("(A structured question: {kind}."));
            if !q.options.is_empty() {
                let options: Vec<String> = q
                    .options
                    .iter()
                    .map(|o| format!("`{}` = {}", o.id, sanitize::for_context(&o.label)))
                    .collect();
                out.push_str(&format!(" Options: {}.", options.join(", ")));
            }
            if let Some(t) = q.timeout_ms {
                out.push_str(&format!(" Answer within {} s", t.div_ceil(1000)));
                match q.timeout_option() {
                    Some(d) => out.push_str(&format!(", or `{d}` is taken.")),
                    None => out.push_str(", or it closes unanswered."),
                }
            }
            let option = match q.kind {
                QuestionKind::Acknowledge => "ack",
                _ => "ID",
            };
            out.push_str(&match (tools, q.kind) {
                (Tools::Mcp, QuestionKind::Text) => format!(
                    " Answer with the MCP tool `answer`: correlation_id \"{cid}\", text \"your answer\".)\n"
                ),
                (Tools::Mcp, _) => format!(
                    " Answer with the MCP tool `answer`: correlation_id \"{cid}\", option_id \"{option}\" (and text for a comment).)\n"
                ),
                (Tools::Cli, QuestionKind::Text) => format!(
                    " Answer with: repowire peer answer {cid} --text \"your answer\")\n"
                ),
                (Tools::Cli, _) => format!(
                    " Answer with: repowire peer answer {cid} --option {option} [--text TEXT])\n"
                ),
            });
        }
        (MessageKind::Ask, None) => out.push_str(&match tools {
            Tools::Mcp => format!(
                "(Answer with the MCP tool `ack`: correlation_id \"{cid}\", message \"your reply\")\n"
            ),
            Tools::Cli => format!("(Answer with: repowire peer ack {cid} -m \"your reply\")\n"),
        }),
        _ => {}
    }
    out
}

/// A conversation's message: `[speaker] (n):` and the words, quoted line by line like every
/// body. The opening also says what the conversation is, so a receiving agent needs nothing
/// else to take part.
fn conversation(m: &Message, c: &ConversationRef, me: &str, tools: Tools) -> String {
    // `me`: the recipient's peer id.
    let others: Vec<String> = c
        .participants
        .iter()
        .filter(|p| p.peer_id.as_str() != me)
        .map(|p| format!("@{}", display_name(&p.name)))
        .collect();
    if matches!(
        c.event,
        ConversationEvent::Paused | ConversationEvent::Ended
    ) {
        // The relay's notice, not the speaker's words.
        let (what, then) = match c.event {
            ConversationEvent::Paused => (
                "paused",
                "Nothing you say is relayed until a person prompts one of you.",
            ),
            _ => ("ended", "Nothing you say is relayed any more."),
        };
        return format!(
            "--- conversation #{} with {}: {what} ({}) ---\n({}) {then}\n",
            sanitize::for_context(&c.id),
            others.join(", "),
            c.seq,
            sanitize::for_context(c.reason.as_deref().unwrap_or("no reason given")),
        );
    }
    let body: String = sanitize::for_context(&m.text)
        .lines()
        .map(|l| format!("> {l}\n"))
        .collect();
    let mut out = format!(
        "--- conversation #{} with {} ---\n[{}] ({}):\n\n{body}",
        sanitize::for_context(&c.id),
        others.join(", "),
        display_name(&m.from.name),
        c.seq,
    );
    if c.event == ConversationEvent::Open {
        let id = sanitize::for_context(&c.id);
        let end = match tools {
            Tools::Mcp => format!("the MCP tool `end_conversation` (conversation_id \"{id}\")"),
            Tools::Cli => format!("`repowire conversation end {id}`"),
        };
        out.push_str(&format!(
            "(@{} opened a direct conversation: what you say at the end of each of your turns \
             is relayed to {} as your part of it; answer in your reply, no tool needed. End it \
             with {end} when it has served its purpose.)\n",
            display_name(&m.from.name),
            others.join(", "),
        ));
    }
    out
}

#[cfg(test)]
mod clip_tests {
    use super::clip;

    #[test]
    fn a_long_reason_is_cut_at_a_character_boundary_within_the_limit() {
        assert_eq!(clip("short".into(), 512), "short");
        let long = "é".repeat(400); // 800 bytes
        let cut = clip(long, 512);
        assert!(cut.len() <= 512, "{}", cut.len());
        assert!(cut.ends_with('…'));
        assert!(cut.trim_end_matches('…').chars().all(|c| c == 'é'));
    }
}

/// The MCP tools the session-start text names, with the parameters it names: each is read
/// from the MCP server's own tool list ([`crate::mcp::RepowireMcp::signature`]), so a renamed
/// tool or parameter cannot leave agents told about one that does not exist.
const NAMED_TOOLS: [(&str, &[&str]); 4] = [
    ("ask", &["peer_name", "query"]),
    ("notify_peer", &["peer_name", "message"]),
    ("ack", &["correlation_id", "message"]),
    ("answer", &["correlation_id", "option_id"]),
];

/// "`name` (parameters)" for one of [`NAMED_TOOLS`], from the MCP server's tool list.
pub(super) fn mcp_tool(name: &str) -> String {
    NAMED_TOOLS
        .iter()
        .find(|(n, _)| *n == name)
        .and_then(|(n, params)| crate::mcp::RepowireMcp::signature(n, params))
        .unwrap_or_else(|| format!("`{name}`"))
}

/// How the agent talks to peers: our MCP tools when they are registered, else the CLI.
pub(super) fn tools_text(runtime: Runtime) -> String {
    match Tools::of(runtime) {
        Tools::Mcp => {
            let [ask, notify, ack, answer] = NAMED_TOOLS.map(|(name, _)| mcp_tool(name));
            format!(
                "Talk to them with the repowire MCP tools: {ask} and {notify}; close each ask \
                 you receive with {ack}, or a structured question with {answer}."
            )
        }
        Tools::Cli => format!(
            "Talk to them with `repowire peer ask NAME \"question\"`, `repowire peer notify NAME \"text\"`, \
             and close asks you receive with `repowire peer ack ASK_ID -m \"reply\"` (the repowire MCP \
             server is not registered for {}; `repowire setup` registers it).",
            runtime.display()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 35.3: the session-start context named `notify`, a tool that does not exist.
    #[test]
    fn every_tool_the_session_start_text_names_exists_with_those_parameters() {
        let tools = crate::mcp::RepowireMcp::tool_names();
        for (name, params) in NAMED_TOOLS {
            assert!(
                tools.iter().any(|t| t == name),
                "no MCP tool `{name}`: {tools:?}"
            );
            let signature = crate::mcp::RepowireMcp::signature(name, params)
                .unwrap_or_else(|| panic!("`{name}` takes no parameter of {params:?}"));
            assert_eq!(signature, format!("`{name}` ({})", params.join(", ")));
        }
        assert!(crate::mcp::RepowireMcp::signature("answer", &["text"]).is_some());
        // Every tool the texts an agent reads name by hand ("MCP tool `x`") exists too.
        for source in [include_str!("hooks.rs"), include_str!("render.rs")] {
            let code = source.split("#[cfg(test)]").next().unwrap_or_default();
            for mention in code.split("MCP tool `").skip(1) {
                let name = mention.split('`').next().unwrap_or_default();
                assert!(tools.iter().any(|t| t == name), "no MCP tool `{name}`");
            }
        }
        assert!(crate::mcp::RepowireMcp::signature("notify", &["peer_name"]).is_none());
        assert!(crate::mcp::RepowireMcp::signature("ask", &["peer"]).is_none());
    }
}
