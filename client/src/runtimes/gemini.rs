//! Gemini CLI (docs/agents/gemini-cli.md): where its settings live, whether they register our
//! MCP server, and its input box in tmux.

use std::path::PathBuf;

use serde_json::Value;

use super::{InputBox, plain};

/// `$GEMINI_CLI_HOME/.gemini`, else `~/.gemini`.
pub fn gemini_dir() -> PathBuf {
    std::env::var_os("GEMINI_CLI_HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(crate::config::user_home)
        .join(".gemini")
}

/// The user's `settings.json`: hooks, MCP servers and everything else.
pub fn settings_path() -> PathBuf {
    gemini_dir().join("settings.json")
}

static SEEN: super::Seen = std::sync::Mutex::new(None);

/// Whether settings.json has `mcpServers.repowire`.
pub(super) fn mcp_registered() -> bool {
    super::registered_in(&settings_path(), &SEEN, |text| {
        serde_json::from_str::<Value>(text).is_ok_and(|v| v["mcpServers"]["repowire"].is_object())
    })
}

/// Gemini's tools that change files or run commands, and the names Repowire's approvals use
/// for them (Claude Code's): what its BeforeTool hook is matched on and gated by.
pub(super) const GATED_TOOLS: [(&str, &str); 3] = [
    ("run_shell_command", "Bash"),
    ("write_file", "Write"),
    ("replace", "Edit"),
];

/// What the empty box shows.
const PLACEHOLDER: &str = "Type your message or @path/to/file";

/// Gemini's input box, at the bottom of the screen: a horizontal rule (with true colour, a bar
/// of `▄`), a hint line (`Shift+Tab to accept edits`), the ` > ` line with the text (wrapped
/// lines under it indented by three spaces; with true colour, a bar of `▀` under the box), and
/// the footer (`workspace (/directory) … /model` and its values) as the screen's last lines.
/// A turn in progress shows `… (esc to cancel, Ns)` above the rule, and prompts typed
/// meanwhile `Queued (press ↑ to edit)`: then the box counts as busy (Enter would queue
/// another prompt behind the running one).
pub(super) fn input_box(screen: &str) -> InputBox {
    let lines: Vec<String> = screen.lines().map(plain).collect();
    let Some(last) = lines.iter().rposition(|l| !l.trim().is_empty()) else {
        return InputBox::Unknown;
    };
    let Some(footer) = lines[..=last]
        .iter()
        .rposition(|l| l.contains("workspace (/directory)") && l.contains("/model"))
    else {
        return InputBox::Unknown;
    };
    if last > footer + 1 {
        return InputBox::Unknown;
    }
    let Some(at) = lines[..footer].iter().rposition(|l| l.starts_with(" > ")) else {
        return InputBox::Unknown;
    };
    // Between the box line and the footer: only its wrapped lines, blank lines and a bar.
    let under = &lines[at + 1..footer];
    if !under
        .iter()
        .all(|l| l.trim().is_empty() || is_rule(l) || l.starts_with("   "))
    {
        return InputBox::Unknown;
    }
    // Above it: the hint line, blank lines, then the rule, within four lines.
    let Some(rule) = lines[at.saturating_sub(4)..at]
        .iter()
        .rposition(|l| is_rule(l))
        .map(|i| at.saturating_sub(4) + i)
    else {
        return InputBox::Unknown;
    };
    let status_area = lines[..rule]
        .iter()
        .rev()
        .filter(|l| !l.trim().is_empty())
        .take(6);
    if status_area
        .clone()
        .any(|l| l.contains("esc to cancel") || l.contains("Queued (press ↑ to edit)"))
    {
        return InputBox::Busy;
    }
    let text: String = std::iter::once(&lines[at][3..])
        .chain(under.iter().map(String::as_str).filter(|l| !is_rule(l)))
        .flat_map(|l| l.chars())
        .filter(|c| !c.is_whitespace())
        .collect();
    if text == PLACEHOLDER.replace(' ', "") {
        return InputBox::Text(String::new());
    }
    InputBox::Text(text)
}

/// A horizontal rule: at least ten `─` (or the half blocks Gemini draws with true colour).
fn is_rule(line: &str) -> bool {
    let line = line.trim();
    line.chars().count() >= 10 && line.chars().all(|c| matches!(c, '─' | '▄' | '▀'))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Captured with `tmux capture-pane -e -p` from Gemini CLI 0.61.0 in a 120-column pane.
    const RULE: &str = "\x1b[2m\x1b[38;5;244m────────────────────────────────────────\x1b[0m";
    fn screen(above: &str, boxed: &str) -> String {
        format!(
            "{above}\n{RULE}\n\x1b[39m\x1b[49m \x1b[38;5;248mShift+Tab to accept edits\n\x1b[39m\x1b[48;5;240m\n {boxed}\n\x1b[49m \x1b[38;5;248mworkspace (/directory)\x1b[39m      \x1b[38;5;248msandbox\x1b[39m      \x1b[38;5;248m/model\n\x1b[39m \x1b[38;5;231m/tmp/gm/proj\x1b[39m    no sandbox     gemini-2.5-flash\n"
        )
    }
    const EMPTY: &str = "\x1b[38;5;183m> \x1b[7m\x1b[39m \x1b[0m\x1b[38;5;248m\x1b[48;5;240m Type your message or @path/to/file\x1b[39m";

    #[test]
    fn the_placeholder_is_empty_and_text_is_read() {
        assert_eq!(
            input_box(&screen(" > old prompt\n✦ MOCK-REPLY: hi", EMPTY)),
            InputBox::Text(String::new())
        );
        assert_eq!(
            input_box(&screen(
                "",
                "\x1b[38;5;183m> \x1b[38;5;231mpasted text here\x1b[39m"
            )),
            InputBox::Text("pastedtexthere".into())
        );
    }

    #[test]
    fn a_running_turn_is_busy() {
        let busy =
            " \x1b[38;5;194m⠼\x1b[39m \x1b[3mThinking...\x1b[0m \x1b[38;5;248m(esc to cancel, 1s)";
        assert_eq!(input_box(&screen(busy, EMPTY)), InputBox::Busy);
    }

    #[test]
    fn true_colour_bars_and_a_queue_are_read() {
        let bars = format!(
            "{}\n Shift+Tab to accept edits\n\n >   Type your message or @path/to/file\n{}\n workspace (/directory)   sandbox   /model\n ~/p   no sandbox   gemini-2.5-flash\n",
            "▄".repeat(60),
            "▀".repeat(60)
        );
        assert_eq!(input_box(&bars), InputBox::Text(String::new()));
        let queued =
            " ⠼ Thinking... (esc to cancel, 2s)\n Queued (press ↑ to edit):\n   next thing";
        assert_eq!(input_box(&screen(queued, EMPTY)), InputBox::Busy);
    }

    #[test]
    fn a_prompt_echo_in_history_is_not_the_box() {
        // In another mode the box line starts otherwise; the echo above must not pass for it.
        let other = screen(
            " > old prompt\n✦ reply",
            "\x1b[38;5;183m* \x1b[38;5;231mtext",
        );
        assert_eq!(input_box(&other), InputBox::Unknown);
    }

    #[test]
    fn no_footer_or_rule_is_no_box() {
        assert_eq!(input_box("$ ls\nfile\n$ "), InputBox::Unknown);
        let dialog = "Allow execution of [Shell]?\n > 1. Yes\n   2. No\n";
        assert_eq!(input_box(dialog), InputBox::Unknown);
        // Output below the box: not at the bottom.
        let below = format!("{}more\nand more\n", screen("", EMPTY));
        assert_eq!(input_box(&below), InputBox::Unknown);
    }
}
