//! Remote text is untrusted. Two renderings:
//! - [`for_terminal`]: what may be typed into a terminal — printable characters only, on one
//!   line. Control characters, escape sequences, bidi overrides and line breaks are removed.
//! - [`for_context`]: what is handed to the agent as text — every character kept, but control
//!   characters (other than newline and tab) made visible as `\xNN` / `\u{NNNN}` so nothing
//!   in the text can act on a terminal that displays it, and nothing disappears silently.

/// Printable, single-line text for typing into a pane.
pub fn for_terminal(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            skip_escape(&mut chars);
            continue;
        }
        if c.is_whitespace() {
            if !out.ends_with(' ') {
                out.push(' ');
            }
            continue;
        }
        if is_dangerous(c) {
            continue;
        }
        out.push(c);
    }
    out.trim().to_owned()
}

/// The full text with control characters made visible.
pub fn for_context(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' | '\t' => out.push(c),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if is_dangerous(c) => out.push_str(&format!("\\u{{{:04x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// C0/C1 controls, DEL, bidi embedding/override/isolate controls, line/paragraph separators,
/// and the invisible zero-width characters (space, joiners, word joiner, BOM) that can hide a
/// part of a text from the person reading it.
fn is_dangerous(c: char) -> bool {
    let u = c as u32;
    u < 0x20
        || (0x7f..=0x9f).contains(&u)
        || (0x202a..=0x202e).contains(&u)
        || (0x2066..=0x2069).contains(&u)
        || (0x200b..=0x200f).contains(&u)
        || u == 0x2028
        || u == 0x2029
        || u == 0x2060
        || u == 0xfeff
}

/// Consumes the rest of an escape sequence (CSI, OSC, DCS/SOS/PM/APC, or a two-byte escape).
fn skip_escape(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    match chars.next() {
        Some('[') => {
            // CSI: parameters and intermediates, then one final byte 0x40–0x7e.
            for c in chars.by_ref() {
                if ('\u{40}'..='\u{7e}').contains(&c) {
                    break;
                }
            }
        }
        Some(']') | Some('P') | Some('X') | Some('^') | Some('_') => {
            // String sequences end with BEL or ST (ESC \).
            while let Some(c) = chars.next() {
                if c == '\u{7}' {
                    break;
                }
                if c == '\u{1b}' {
                    if chars.peek() == Some(&'\\') {
                        chars.next();
                    }
                    break;
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_text_loses_every_control_and_escape() {
        let hostile = "hi\u{1b}[2J\u{1b}]0;title\u{7}\u{3}\r\nrm -rf ~\u{1b}[201~\u{202e}x\u{9b}1m";
        let clean = for_terminal(hostile);
        assert_eq!(clean, "hi rm -rf ~x1m");
        assert!(clean.chars().all(|c| !c.is_control()));
    }

    #[test]
    fn bracketed_paste_end_marker_cannot_survive() {
        assert_eq!(for_terminal("a\u{1b}[201~b"), "ab");
    }

    #[test]
    fn context_keeps_everything_visible() {
        assert_eq!(
            for_context("a\u{1b}[31mb\u{3}\nc\td"),
            "a\\x1b[31mb\\x03\nc\td"
        );
        assert_eq!(for_context("x\u{202e}y"), "x\\u{202e}y");
        assert_eq!(for_context("plain ✓ text"), "plain ✓ text");
    }
}
