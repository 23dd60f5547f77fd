//! The script's direct-conversation part (issue 34): agents that talk through their turns'
//! final texts, which the daemons relay, rather than through a tool per message.
//!
//! - a prompt containing `CONVERSE-START <peer> <turns>` → call `start_conversation` with
//!   `<peer>` and the opening `CONV 1/<turns>`;
//! - a turn whose input holds `CONV N/T` (the last one: the relayed turn that woke it) → end the
//!   turn saying `CONV N+1/T`, or, once N is T, call `end_conversation` on the conversation the
//!   input names (`conversation #cv-…`).

use serde_json::{Value, json};

use super::{Reply, Step, call, turn_after};

/// The markers that make a text this part's instruction (after a tool search, the latest text
/// holding one is what the model acts on).
pub(super) fn is_instruction(text: &str) -> bool {
    text.contains("CONVERSE-START ") || text.contains("CONV ")
}

/// The reply to `text` when it is this part's, and the steps it records.
pub(super) fn decide(request: &Value, text: &str, searched: bool) -> Option<(Vec<Step>, Reply)> {
    if let Some((_, rest)) = text.rsplit_once("CONVERSE-START ") {
        let mut words = rest.split_whitespace();
        let peer = words.next().unwrap_or("").to_owned();
        let turns: u32 = words.next().and_then(|w| w.parse().ok()).unwrap_or(2);
        let input = json!({"peer_names": [peer], "message": format!("CONV 1/{turns}")});
        let steps = if searched { vec![] } else { vec![Step::Start] };
        return Some((
            steps,
            call(request, "start_conversation", input, Step::Said(1)),
        ));
    }
    let (n, t, _) = turn_after(text, "CONV ")?;
    if n < t {
        return Some((
            vec![Step::Said(n + 1)],
            Reply::Text(format!("CONV {}/{t}", n + 1)),
        ));
    }
    let Some(id) = conversation_id(text) else {
        return Some((
            vec![Step::Other(format!(
                "CONV {n}/{t} without a conversation id"
            ))],
            Reply::Text("no conversation id".into()),
        ));
    };
    let input = json!({"conversation_id": id, "reason": "all turns done"});
    Some((
        vec![],
        call(request, "end_conversation", input, Step::EndedConversation),
    ))
}

/// The last conversation id a delivered message names (`conversation #cv-…`).
fn conversation_id(text: &str) -> Option<String> {
    let at = text.rfind("conversation #cv-")? + "conversation #".len();
    let id: String = text[at..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    (id.len() > 3).then_some(id)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn req(text: &str) -> Value {
        json!({"tools": [{"name": "mcp__repowire__start_conversation"},
                         {"name": "mcp__repowire__end_conversation"}],
               "messages": [{"role": "user", "content": text}]})
    }

    #[test]
    fn the_opener_starts_then_each_relayed_turn_is_answered_until_the_last_ends_it() {
        let (steps, r) = decide(&req(""), "CONVERSE-START beta 3", false).unwrap();
        assert_eq!(steps, vec![Step::Start]);
        let Reply::Tool { name, input, .. } = r else {
            panic!("no call")
        };
        assert_eq!(name, "mcp__repowire__start_conversation");
        assert_eq!(input["peer_names"][0], "beta");
        assert_eq!(input["message"], "CONV 1/3");

        let relayed = "--- conversation #cv-ab12 with @beta ---\n[alpha] (1):\n\n> CONV 1/3\n";
        let (steps, r) = decide(&req(relayed), relayed, false).unwrap();
        assert_eq!(steps, vec![Step::Said(2)]);
        assert!(matches!(r, Reply::Text(t) if t == "CONV 2/3"));

        let last = "--- conversation #cv-ab12 with @alpha ---\n[beta] (3):\n\n> CONV 3/3\n";
        let (_, r) = decide(&req(last), last, false).unwrap();
        let Reply::Tool { name, input, .. } = r else {
            panic!("no call")
        };
        assert_eq!(name, "mcp__repowire__end_conversation");
        assert_eq!(input["conversation_id"], "cv-ab12");
        assert!(decide(&req("hello"), "hello", false).is_none());
    }
}
