//! The one prompt a wake types, and telling it apart from a person's.

/// How every wake prompt ends.
const ENDING: &str = " - read them in your context and respond.";

/// The wake's prompt for `count` queued messages from `senders` (`@name`s, in order).
pub(super) fn wake_prompt(count: usize, senders: Vec<String>) -> String {
    format!(
        "[repowire] {count} new message{} from {}{ENDING}",
        if count == 1 { "" } else { "s" },
        senders_text(dedup(senders))
    )
}

/// Whether a submitted prompt is a wake's own (its last line: Gemini CLI puts hook context
/// before the prompt in its payload). A wake's submit is normally known by its Enter; this
/// catches one whose hook fired after the wake stopped waiting for it, so that the loop guard
/// of a direct conversation never takes it for a person's.
pub(in crate::daemon) fn is_wake_prompt(prompt: &str) -> bool {
    prompt
        .trim_end()
        .lines()
        .last()
        .is_some_and(|l| l.starts_with("[repowire] ") && l.ends_with(ENDING))
}

/// The senders a wake prompt names: the first three, then how many more, so the prompt stays
/// one short line (Codex shows a paste of over 1 000 characters as a placeholder, which the
/// wake would not recognise).
fn senders_text(senders: Vec<String>) -> String {
    const NAMED: usize = 3;
    if senders.len() <= NAMED + 1 {
        return senders.join(", ");
    }
    format!(
        "{} and {} others",
        senders[..NAMED].join(", "),
        senders.len() - NAMED
    )
}

fn dedup(mut v: Vec<String>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    v.retain(|s| seen.insert(s.clone()));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wake_prompt_is_known_as_ours_and_a_persons_is_not() {
        let ours = wake_prompt(2, vec!["@a".into(), "@b".into(), "@a".into()]);
        assert_eq!(
            ours,
            "[repowire] 2 new messages from @a, @b - read them in your context and respond."
        );
        assert!(is_wake_prompt(&ours));
        assert!(is_wake_prompt(&format!(
            "<hook_context>x</hook_context>\n\n{ours}\n"
        )));
        assert!(!is_wake_prompt("please review the diff"));
        assert!(!is_wake_prompt(&format!("{ours}\nand also fix the tests")));
        assert!(!is_wake_prompt(""));
    }

    #[test]
    fn many_senders_are_named_three_then_counted() {
        let senders = (1..=6).map(|n| format!("@p{n}")).collect();
        assert_eq!(
            wake_prompt(6, senders),
            "[repowire] 6 new messages from @p1, @p2, @p3 and 3 others - read them in your context and respond."
        );
    }
}
