//! What the stand-in draws: Claude Code's `❯` box between two rules, Codex's composer (a bold
//! `›`, a dim placeholder, the status line) or Gemini CLI's box (a rule, a hint, ` > `, the
//! footer); for the last two, the working line above it while a turn runs, and an approval
//! dialog instead of it.

use std::io::Write;

use super::{Agent, Runtime};

impl Agent {
    /// Draws the input box as Claude Code does — a `❯` line holding the typed (or pasted)
    /// text between two rules — at the top of a cleared screen, so a redraw after every key
    /// is exact however the text wraps.
    pub(super) fn draw_box(&self, line: &[u8]) {
        let text = String::from_utf8_lossy(line);
        match (self.runtime, self.dialog) {
            (Runtime::Claude, _) => {
                let rule = "─".repeat(60);
                print!("\x1b[H\x1b[2J{rule}\r\n❯ {text}\r\n{rule}");
            }
            (Runtime::Codex, true) => print!(
                "\x1b[H\x1b[2JWould you like to run the following command?\r\n\r\n  $ touch x\r\n\r\n\x1b[1m›\x1b[0m 1. Yes, proceed (y)\r\n  2. No (esc)\r\n\r\n  Press enter to confirm"
            ),
            (Runtime::Gemini, true) => print!(
                "\x1b[H\x1b[2J ? Shell touch x\r\n Allow execution of [Shell]?\r\n > 1. Allow once\r\n   2. No (esc)\r\n"
            ),
            (Runtime::Gemini, false) => {
                // Gemini shows a wrapped or multi-line prompt on lines of its own.
                let text = if line.is_empty() {
                    "\x1b[7m \x1b[0m\x1b[38;5;248m Type your message or @path/to/file\x1b[39m"
                        .to_owned()
                } else {
                    format!("\x1b[38;5;231m{}\x1b[39m", text.replace('\n', "\r\n   "))
                };
                print!(
                    "\x1b[H\x1b[2J{}\r\n Shift+Tab to accept edits\r\n\r\n \x1b[38;5;183m> {text}\r\n workspace (/directory)      sandbox      /model\r\n {}   no sandbox   gemini-2.5-flash",
                    "─".repeat(60),
                    self.cwd
                );
            }
            (Runtime::Codex, false) => {
                let text = if line.is_empty() {
                    "\x1b[2mAsk Codex to do anything\x1b[0m".to_owned()
                } else {
                    text.into_owned()
                };
                print!(
                    "\x1b[H\x1b[2J\x1b[1m›\x1b[0m {text}\r\n\r\n  standin default · {}",
                    self.cwd
                );
            }
        }
        let _ = std::io::stdout().flush();
    }

    /// Codex and Gemini CLI draw a working line above the box while a turn runs.
    pub(super) fn draw_busy(&self) {
        if self.runtime == Runtime::Gemini {
            print!(
                "\x1b[H\x1b[2J ⠼ Thinking... (esc to cancel, 0s)\r\n{}\r\n Shift+Tab to accept edits\r\n\r\n \x1b[38;5;183m> \x1b[7m \x1b[0m\x1b[38;5;248m Type your message or @path/to/file\x1b[39m\r\n workspace (/directory)      sandbox      /model\r\n {}   no sandbox   gemini-2.5-flash",
                "─".repeat(60),
                self.cwd
            );
            let _ = std::io::stdout().flush();
        }
        if self.runtime == Runtime::Codex {
            print!(
                "\x1b[H\x1b[2J• \x1b[2mWorking (0s • esc to interrupt)\x1b[0m\r\n\r\n\x1b[1m›\x1b[0m \x1b[2mAsk Codex to do anything\x1b[0m\r\n\r\n  standin default · {}",
                self.cwd
            );
            let _ = std::io::stdout().flush();
        }
    }
}
