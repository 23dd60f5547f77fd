//! What a wake reads off the pane before it types (docs/agents/claude-code.md): whether a
//! person is typing through a tmux client, and how the agent's input box (read by its
//! runtime: [`crate::runtimes::Runtime::input_box`]) compares with the wake prompt. Pure
//! functions over what tmux printed, so every rule is unit-tested.

use crate::tmux::ClientInfo;

/// A key through a client this many seconds ago (or less) means a person is typing. tmux
/// counts whole seconds, so the quiet window is 2–3 s in practice.
pub(super) const QUIET_SECS: i64 = 2;

/// Why the pane's person counts as typing right now, or `None` when nobody does: no client
/// shows the pane, or each one that does had no key for more than [`QUIET_SECS`] and is not
/// half-way through a key binding.
pub(super) fn typing(clients: &[ClientInfo], pane: &str, now_secs: i64) -> Option<String> {
    let on_pane = clients.iter().filter(|c| c.pane_id == pane);
    let mut newest: Option<i64> = None;
    for client in on_pane {
        if client.key_table != "root" {
            return Some(format!(
                "a person is half-way through a tmux key binding (key table `{}`) on pane {pane}",
                client.key_table
            ));
        }
        newest = newest.max(Some(client.activity_secs));
    }
    let newest = newest?;
    let ago = now_secs - newest;
    (ago <= QUIET_SECS).then(|| {
        format!(
            "a person is typing in pane {pane} (last key {}s ago)",
            ago.max(0)
        )
    })
}

/// `text` with all whitespace removed, to compare with the box's text.
pub(super) fn squeezed(text: &str) -> String {
    text.chars().filter(|c| !c.is_whitespace()).collect()
}

/// What the box shows after the wake prompt was pasted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Landed {
    /// Exactly the wake prompt: Enter submits it and nothing else.
    Exact,
    /// Not there yet.
    Pending,
    /// The prompt after other text (given, without whitespace): a person's unsent draft,
    /// which Enter would send too.
    AfterDraft(String),
    /// The prompt with text after it (a key arrived during the paste), or something else.
    Mixed,
}

/// Compares the box's text (from the runtime's [`crate::runtimes::InputBox`]) with the pasted
/// prompt.
pub(super) fn landed(box_text: &str, prompt: &str) -> Landed {
    let prompt = squeezed(prompt);
    if box_text == prompt {
        Landed::Exact
    } else if let Some(draft) = box_text.strip_suffix(&prompt) {
        Landed::AfterDraft(draft.to_owned())
    } else if box_text.contains(&prompt) {
        Landed::Mixed
    } else {
        Landed::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(pane: &str, activity: i64, table: &str) -> ClientInfo {
        ClientInfo {
            pane_id: pane.into(),
            activity_secs: activity,
            key_table: table.into(),
        }
    }

    #[test]
    fn nobody_types_without_a_client_on_the_pane() {
        assert_eq!(typing(&[], "%1", 100), None);
        // A client on another pane typing right now does not type into this one.
        assert_eq!(typing(&[client("%2", 100, "root")], "%1", 100), None);
    }

    #[test]
    fn a_recent_key_on_the_pane_is_typing_an_old_one_is_not() {
        let reason = typing(&[client("%1", 99, "root")], "%1", 100).expect("typing");
        assert!(reason.contains("last key 1s ago"), "{reason}");
        assert!(typing(&[client("%1", 98, "root")], "%1", 100).is_some());
        assert_eq!(typing(&[client("%1", 97, "root")], "%1", 100), None);
        // The newest of several clients counts.
        let two = [client("%1", 50, "root"), client("%1", 100, "root")];
        assert!(typing(&two, "%1", 100).is_some());
    }

    #[test]
    fn a_half_typed_key_binding_is_typing_however_old() {
        let reason = typing(&[client("%1", 10, "prefix")], "%1", 100).expect("typing");
        assert!(reason.contains("prefix"), "{reason}");
    }

    #[test]
    fn the_prompt_lands_exact_after_a_draft_or_mixed() {
        let prompt = "[repowire] 1 new message from @a";
        assert_eq!(landed("[repowire]1newmessagefrom@a", prompt), Landed::Exact);
        assert_eq!(landed("", prompt), Landed::Pending);
        assert_eq!(
            landed("draft[repowire]1newmessagefrom@a", prompt),
            Landed::AfterDraft("draft".into())
        );
        assert_eq!(
            landed("[repowire]1newmessagefrom@ax", prompt),
            Landed::Mixed
        );
    }
}
