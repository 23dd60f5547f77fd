//! Codex CLI (docs/agents/codex.md): where its configuration lives, whether it registers our
//! MCP server, and its composer in tmux.

use std::path::PathBuf;

use super::{InputBox, plain};

/// `$CODEX_HOME`, else `~/.codex`.
pub fn codex_home() -> PathBuf {
    std::env::var_os("CODEX_HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::config::user_home().join(".codex"))
}

/// `$CODEX_HOME/config.toml`: its hooks, MCP servers and everything else.
pub fn config_path() -> PathBuf {
    codex_home().join("config.toml")
}

static SEEN: super::Seen = std::sync::Mutex::new(None);

/// Whether config.toml has `[mcp_servers.repowire]`.
pub(super) fn mcp_registered() -> bool {
    super::registered_in(&config_path(), &SEEN, |text| {
        text.parse::<toml_edit::DocumentMut>().is_ok_and(|doc| {
            doc.get("mcp_servers")
                .and_then(|s| s.get("repowire"))
                .is_some_and(|r| r.is_table_like())
        })
    })
}

/// SGR "dim": Codex draws its composer's placeholder dim, typed text plain.
const DIM: &str = "\x1b[2m";

/// Codex's composer, at the bottom of the screen: a line starting with `›` at the left edge,
/// the lines wrapped under it indented by two spaces, a blank line, the status line (`model ·
/// path`, which no dialog's `› 1. Yes` option has under it), and at most two footer lines
/// before the end of the screen. A turn in progress shows `esc to interrupt` on the nearest
/// line above it: then the wake must not press Enter (it would steer the running turn), so the
/// box counts as busy.
pub(super) fn input_box(screen: &str) -> InputBox {
    let raw: Vec<&str> = screen.lines().collect();
    let lines: Vec<String> = raw.iter().map(|l| plain(l)).collect();
    // The screen's last line with something on it.
    let Some(last) = lines.iter().rposition(|l| !l.trim().is_empty()) else {
        return InputBox::Unknown;
    };
    let Some(at) = lines[..=last]
        .iter()
        .rposition(|l| l.starts_with("› ") || l == "›")
    else {
        return InputBox::Unknown;
    };
    // The block under the prompt line: wrapped text, up to the blank line.
    let mut end = at + 1;
    while end <= last && lines[end].starts_with("  ") && !lines[end].trim().is_empty() {
        end += 1;
    }
    let status = lines.get(end + 1).map(String::as_str).unwrap_or_default();
    if lines.get(end).is_none_or(|l| !l.trim().is_empty())
        || !status.starts_with("  ")
        || !status.contains(" · ")
        || last > end + 3
    {
        return InputBox::Unknown;
    }
    let above = lines[..at].iter().rev().find(|l| !l.trim().is_empty());
    if above.is_some_and(|l| l.contains("esc to interrupt")) {
        return InputBox::Busy;
    }
    let first_raw = raw[at].split_once('›').map(|(_, r)| r).unwrap_or_default();
    if strip_resets(first_raw).trim_start().starts_with(DIM) {
        return InputBox::Text(String::new());
    }
    let first = lines[at].trim_start_matches('›');
    InputBox::Text(
        std::iter::once(first)
            .chain(lines[at + 1..end].iter().map(String::as_str))
            .flat_map(str::chars)
            .filter(|c| !c.is_whitespace())
            .collect(),
    )
}

/// `s` without the colour resets Codex puts before the placeholder (`ESC[0m`, `ESC[39m`,
/// `ESC[49m`).
fn strip_resets(mut s: &str) -> &str {
    loop {
        let before = s;
        for reset in ["\x1b[0m", "\x1b[39m", "\x1b[49m"] {
            s = s.strip_prefix(reset).unwrap_or(s);
        }
        if s == before {
            return s;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Captured with `tmux capture-pane -e -p` from Codex 0.171.0 in a 120-column pane.
    const IDLE: &str = "\x1b[1m›\x1b[0m\x1b[39m\x1b[49m \x1b[2mAsk Codex to do anything\x1b[0m\x1b[39m\x1b[49m\n\n  \x1b[38;5;223mmock-model default\x1b[39m · \x1b[38;5;151m/tmp/cx/proj\n\x1b[39m  \x1b[1m←\x1b[0m\x1b[39m\x1b[49m for agents · \x1b[1m?\x1b[0m for shortcuts\n";
    const TYPED: &str = "  /review\x1b[2m - review any changes\n\n\x1b[1m›\x1b[0m\x1b[39m\x1b[49m a pasted line that is long enough to wrap\n  and twenty characters wide ok\n\n  \x1b[38;5;223mmock-model default\x1b[39m · /tmp/cx/proj\n";
    const BUSY: &str = "• \x1b[2mWorking\x1b[0m \x1b[2m(1s • esc to interrupt)\n\n\n\x1b[1m›\x1b[0m\x1b[39m\x1b[49m \x1b[2mAsk Codex to do anything\x1b[0m\n\n  mock-model default · /tmp/cx/proj\n";

    #[test]
    fn the_placeholder_is_an_empty_box_typed_text_is_read() {
        assert_eq!(input_box(IDLE), InputBox::Text(String::new()));
        assert_eq!(
            input_box(TYPED),
            InputBox::Text("apastedlinethatislongenoughtowrapandtwentycharacterswideok".into())
        );
    }

    #[test]
    fn a_running_turn_is_busy_old_output_is_not() {
        assert_eq!(input_box(BUSY), InputBox::Busy);
        let history = format!("• said: press esc to interrupt\n• done\n\n{IDLE}");
        assert_eq!(input_box(&history), InputBox::Text(String::new()));
    }

    #[test]
    fn the_composer_must_be_at_the_bottom() {
        // Output under an old composer line: not the composer.
        let scrolled = format!("{IDLE}• more output\n• and more\n• and more\n");
        assert_eq!(input_box(&scrolled), InputBox::Unknown);
    }

    #[test]
    fn a_dialog_or_a_shell_is_no_box() {
        assert_eq!(input_box("$ ls\nfile\n$ "), InputBox::Unknown);
        let dialog = "Would you like to run the following command?\n\n  $ touch x\n\n› 1. Yes, proceed (y)\n  2. Yes, and don't ask again (p)\n  3. No (esc)\n\n  Press enter to confirm\n";
        assert_eq!(input_box(dialog), InputBox::Unknown);
        // Claude Code's box is not Codex's.
        let rule = "─".repeat(40);
        assert_eq!(
            input_box(&format!("{rule}\n❯ \n{rule}\n")),
            InputBox::Unknown
        );
    }
}
