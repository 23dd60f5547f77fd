//! What the stand-in draws: Claude Code's `❯` box between two rules, or Codex's composer (a
//! bold `›`, a dim placeholder, the status line; the working line above it while a turn runs;
//! an approval dialog instead of it).

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

    /// Codex draws its working line above the composer while a turn runs.
    pub(super) fn draw_busy(&self) {
        if self.runtime == Runtime::Codex {
            print!(
                "\x1b[H\x1b[2J• \x1b[2mWorking (0s • esc to interrupt)\x1b[0m\r\n\r\n\x1b[1m›\x1b[0m \x1b[2mAsk Codex to do anything\x1b[0m\r\n\r\n  standin default · {}",
                self.cwd
            );
            let _ = std::io::stdout().flush();
        }
    }
}
