//! OpenCode (docs/agents/opencode.md): where its configuration lives, whether it registers our
//! MCP server, and its input box in tmux. OpenCode has no command hooks: `repowire setup`
//! writes a plugin (client/src/cli/opencode_plugin.js) that runs `repowire hook --runtime
//! opencode` at its events and hands the answers back.

use std::path::PathBuf;

use serde_json::Value;

use super::{InputBox, plain};

/// `$XDG_CONFIG_HOME/opencode`, else `~/.config/opencode`: the global configuration and
/// plugins.
pub fn config_dir() -> PathBuf {
    std::env::var_os("XDG_CONFIG_HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::config::user_home().join(".config"))
        .join("opencode")
}

/// The global `opencode.json`: MCP servers, providers and everything else.
pub fn config_path() -> PathBuf {
    config_dir().join("opencode.json")
}

/// Our plugin, among the user's global plugins.
pub fn plugin_path() -> PathBuf {
    config_dir().join("plugins").join("repowire.js")
}

static SEEN: super::Seen = std::sync::Mutex::new(None);

/// Whether opencode.json has `mcp.repowire`.
pub(super) fn mcp_registered() -> bool {
    super::registered_in(&config_path(), &SEEN, |text| {
        serde_json::from_str::<Value>(text).is_ok_and(|v| v["mcp"]["repowire"].is_object())
    })
}

/// The colour (256-colour grey) OpenCode draws its box's placeholder in; typed text is white.
const PLACEHOLDER_FG: &str = "38;5;8";

/// OpenCode's input box: lines starting with `┃` (the text, with a blank line above and below,
/// then the agent and model line, `Build · Mock Model`), closed by a bar `╹▀▀▀…` whose width
/// is the box's (a session's sidebar is drawn to its right, on the same lines). Under the bar
/// only the footer: `⬝■■⬝  esc interrupt` there while a turn runs (Enter would queue a prompt
/// behind it), the directory and hints otherwise. A permission dialog replaces the box (its
/// `┃` lines have no bar under them, and Enter would answer it): unknown.
pub(super) fn input_box(screen: &str) -> InputBox {
    let raw: Vec<&str> = screen.lines().collect();
    let lines: Vec<String> = raw.iter().map(|l| plain(l)).collect();
    let Some(bottom) = lines.iter().rposition(|l| l.trim_start().starts_with("╹▀")) else {
        return InputBox::Unknown;
    };
    if lines[bottom + 1..]
        .iter()
        .any(|l| l.contains(['┃', '╹', '│']))
    {
        return InputBox::Unknown;
    }
    let indent = lines[bottom].chars().take_while(|c| *c == ' ').count();
    let width = 1 + lines[bottom]
        .chars()
        .skip(indent + 1)
        .take_while(|c| *c == '▀')
        .count();
    // The box's column of each line above the bar, while it is the box's edge.
    let inside = |l: &str| -> Option<String> {
        let mut chars = l.chars().skip(indent);
        (chars.next() == Some('┃')).then(|| chars.take(width - 1).collect())
    };
    let mut top = bottom;
    while top > 0 && inside(&lines[top - 1]).is_some() {
        top -= 1;
    }
    // At least the text line, the blank lines around it and the agent line.
    if bottom - top < 4 {
        return InputBox::Unknown;
    }
    let agent = inside(&lines[bottom - 1]).unwrap_or_default();
    if !agent.contains(" · ") {
        return InputBox::Unknown;
    }
    // `esc interrupt` (and, after one Esc, the same line asking again), or the progress bar.
    if lines[bottom + 1..]
        .iter()
        .any(|l| l.contains("interrupt") || l.contains(['⬝', '■']))
    {
        return InputBox::Busy;
    }
    let text: String = (top..bottom - 1)
        .filter(|&i| !placeholder(raw[i]))
        .filter_map(|i| inside(&lines[i]))
        .flat_map(|l| l.chars().collect::<Vec<_>>())
        .filter(|c| !c.is_whitespace())
        .collect();
    InputBox::Text(text)
}

/// Whether a line of the box is the start screen's placeholder: `Ask anything…` in grey
/// (other grey text there, a paste's summary say, is a draft).
fn placeholder(raw: &str) -> bool {
    plain(raw)
        .trim_start_matches([' ', '┃'])
        .starts_with("Ask anything")
        && grey_first(raw)
}

/// Whether the first thing written after a line's `┃` is in the placeholder's colour.
fn grey_first(raw: &str) -> bool {
    let Some((_, rest)) = raw.split_once('┃') else {
        return false;
    };
    let mut fg = "";
    let mut s = rest;
    loop {
        if let Some(after) = s.strip_prefix("\x1b[") {
            let end = after
                .find(|c: char| ('@'..='~').contains(&c))
                .unwrap_or(after.len());
            let params = &after[..end];
            if params.starts_with("38;") || params == "39" || params == "0" {
                fg = params;
            }
            s = after.get(end + 1..).unwrap_or("");
        } else if let Some(after) = s.strip_prefix(' ') {
            s = after;
        } else {
            return !s.is_empty() && fg == PLACEHOLDER_FG;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The bottom of `tmux capture-pane -e -p` from OpenCode 1.18.33 (160×50; the start screen
    // 100×30), against a mock model.
    const START: &str = include_str!("screens/start.txt");
    const EMPTY: &str = include_str!("screens/session_empty.txt");
    const DRAFT: &str = include_str!("screens/draft.txt");
    const BUSY: &str = include_str!("screens/busy.txt");
    const DIALOG: &str = include_str!("screens/dialog.txt");

    #[test]
    fn the_placeholder_and_an_empty_box_read_as_empty() {
        assert_eq!(input_box(START), InputBox::Text(String::new()));
        assert_eq!(input_box(EMPTY), InputBox::Text(String::new()));
    }

    #[test]
    fn a_draft_reads_without_the_sidebar() {
        assert_eq!(
            input_box(DRAFT),
            InputBox::Text("adrafttypedbyaperson".into())
        );
    }

    #[test]
    fn a_running_turn_is_busy_and_a_permission_dialog_unknown() {
        assert_eq!(input_box(BUSY), InputBox::Busy);
        assert_eq!(input_box(DIALOG), InputBox::Unknown);
        assert_eq!(input_box(""), InputBox::Unknown);
    }

    #[test]
    fn grey_text_that_is_not_the_placeholder_is_a_draft() {
        let grey = DRAFT.replace("\x1b[38;5;255ma draft", "\x1b[38;5;8ma draft");
        assert_ne!(grey, DRAFT);
        assert_eq!(
            input_box(&grey),
            InputBox::Text("adrafttypedbyaperson".into())
        );
        let asked_again = BUSY
            .replace("esc \x1b[38;5;8minterrupt", "esc again to interrupt")
            .replace(['⬝', '■'], " ");
        assert_ne!(asked_again, BUSY);
        assert_eq!(input_box(&asked_again), InputBox::Busy);
    }

    #[test]
    fn text_wrapped_over_lines_is_joined() {
        let screen = "  ┃\n  ┃  first half of a\n  ┃  wrapped prompt\n  ┃\n  ┃  Build · Model   ~/x\n  ╹▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀\n   ~/x   ctrl+p commands\n";
        assert_eq!(
            input_box(screen),
            InputBox::Text("firsthalfofawrappedprompt".into())
        );
    }
}
