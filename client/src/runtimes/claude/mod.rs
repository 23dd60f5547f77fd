//! Claude Code: its input box in tmux (docs/agents/claude-code.md), how its Stop hook hands
//! messages over ([`stop_form`]), and whether ~/.claude.json registers our MCP server.

use serde_json::Value;

use super::{InputBox, plain};

pub mod stop_form;

pub(super) async fn stop_output(text: &str, agent_pid: Option<i64>) -> Value {
    stop_form::for_agent(agent_pid).await.output(text)
}

/// ~/.claude.json, where Claude Code keeps its user-scope MCP servers.
pub fn claude_json_path() -> std::path::PathBuf {
    crate::config::user_home().join(".claude.json")
}

/// Whether ~/.claude.json registers our MCP server; read again only when the file changes
/// (it is large, and hooks run on every turn).
pub(super) fn mcp_registered() -> bool {
    super::registered_in(&claude_json_path(), &CLAUDE_SEEN, |text| {
        serde_json::from_str::<Value>(text).is_ok_and(|v| v["mcpServers"]["repowire"].is_object())
    })
}

static CLAUDE_SEEN: super::Seen = std::sync::Mutex::new(None);

/// The input box — the line starting with `❯` that sits between two horizontal rules, with
/// the lines wrapped under it — and its text with all whitespace removed (the UI wraps and
/// pads as it likes).
pub(super) fn input_box(screen: &str) -> InputBox {
    let screen = plain(screen);
    let lines: Vec<&str> = screen.lines().collect();
    let Some(prompt) = lines.iter().rposition(|l| l.trim_start().starts_with('❯')) else {
        return InputBox::Unknown;
    };
    if prompt == 0 || !is_rule(lines[prompt - 1]) {
        return InputBox::Unknown;
    }
    let Some(below) = lines[prompt + 1..].iter().position(|l| is_rule(l)) else {
        return InputBox::Unknown;
    };
    let bottom = prompt + 1 + below;
    let first = lines[prompt].trim_start().trim_start_matches('❯');
    InputBox::Text(
        std::iter::once(first)
            .chain(lines[prompt + 1..bottom].iter().copied())
            .flat_map(str::chars)
            .filter(|c| !c.is_whitespace())
            .collect(),
    )
}

/// A horizontal rule: at least ten `─` and nothing else but spaces.
fn is_rule(line: &str) -> bool {
    let line = line.trim();
    line.chars().count() >= 10 && line.chars().all(|c| c == '─')
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULE: &str = "────────────────────────────────────────";

    fn text(screen: &str) -> Option<String> {
        match input_box(screen) {
            InputBox::Text(t) => Some(t),
            _ => None,
        }
    }

    #[test]
    fn the_box_text_is_read_between_the_rules() {
        let empty = format!("● done\n\n{RULE}\n❯ \n{RULE}\n  ? for shortcuts\n");
        assert_eq!(text(&empty).as_deref(), Some(""));
        let draft = format!("{RULE}\n❯ fix the  build\n{RULE}\n");
        assert_eq!(text(&draft).as_deref(), Some("fixthebuild"));
        // Wrapped onto a second row; the last box on the screen counts.
        let wrapped =
            format!("{RULE}\n❯ old\n{RULE}\nout\n{RULE}\n❯ [repowire] 1 new\n  message\n{RULE}");
        assert_eq!(text(&wrapped).as_deref(), Some("[repowire]1newmessage"));
        // Colours (`capture-pane -e`) are not text.
        let coloured = format!("\x1b[2m{RULE}\x1b[0m\n\x1b[1m❯\x1b[0m fix\n{RULE}\n");
        assert_eq!(text(&coloured).as_deref(), Some("fix"));
    }

    #[test]
    fn no_box_no_text() {
        assert_eq!(input_box("$ ls\nfile\n$ "), InputBox::Unknown);
        assert_eq!(input_box(&format!("❯ text\n{RULE}")), InputBox::Unknown);
        assert_eq!(input_box(&format!("{RULE}\n❯ text\n")), InputBox::Unknown);
        assert_eq!(input_box(&format!("──\n❯ text\n{RULE}")), InputBox::Unknown);
    }
}
