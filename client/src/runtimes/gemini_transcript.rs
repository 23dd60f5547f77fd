//! The final text of a Gemini CLI turn, read from its session transcript at AfterAgent.
//!
//! AfterAgent's own `prompt_response` is not the reply when the model streamed it in several
//! chunks (docs/agents/gemini-cli.md: the whole text, a space, then the last chunk again). The
//! transcript (`transcript_path`: `<gemini dir>/tmp/<project>/chats/session-….jsonl`) already
//! holds the reply whole when AfterAgent fires (`gemini_facts.rs` checks it on every run): one
//! JSON line per message, `{"id", "type": "user" | "gemini", "content", …}`, between `$set`
//! lines. The turn's final text is the content of the last `gemini` message after the last
//! `user` one (a continuation's reason is a `user` message too, so a continued turn's segment
//! ends with its own reply).

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use serde_json::Value;

/// How much of the transcript's end is read: a reply is at most this long (the relay's text
/// limit is 32 KiB; the rest is a margin for tool calls after the prompt).
const TAIL_BYTES: u64 = 4 * 1024 * 1024;

/// The final text of the turn segment the transcript at `path` ends with; `None` when the
/// path is not a Gemini transcript under `gemini_dir`, cannot be read, or the segment has no
/// text after its prompt.
pub(crate) fn last_reply(path: &Path, gemini_dir: &Path) -> Option<String> {
    let Some(path) = transcript(path, gemini_dir) else {
        // A Gemini CLI run with another GEMINI_CLI_HOME than the daemon's: its turns are not
        // relayed, and the log says why.
        tracing::warn!(path = %path.display(), gemini_dir = %gemini_dir.display(),
            "not a Gemini CLI transcript under the daemon's Gemini directory; the turn is not relayed");
        return None;
    };
    let mut file = std::fs::File::open(&path).ok()?;
    let len = file.metadata().ok()?.len();
    let start = len.saturating_sub(TAIL_BYTES);
    file.seek(SeekFrom::Start(start)).ok()?;
    let mut tail = Vec::new();
    file.read_to_end(&mut tail).ok()?;
    let text = String::from_utf8_lossy(&tail);
    // A cut first line is not a message.
    let lines = text.lines().skip(usize::from(start > 0));
    reply_in(lines)
}

/// The last `gemini` message's text after the last `user` message.
fn reply_in<'a>(lines: impl Iterator<Item = &'a str>) -> Option<String> {
    let mut reply: Option<String> = None;
    for line in lines {
        let Ok(record) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        match record["type"].as_str() {
            Some("user") => reply = None,
            Some("gemini") => reply = Some(content_text(&record["content"])),
            _ => {}
        }
    }
    reply.filter(|t| !t.trim().is_empty())
}

/// A message's content: a string, or parts whose `text` are joined.
fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

/// `path` when it is a `.jsonl` file under `<gemini_dir>/tmp` (after resolving links): the
/// payload names the file, and only Gemini's own transcripts are read.
fn transcript(path: &Path, gemini_dir: &Path) -> Option<PathBuf> {
    let real = path.canonicalize().ok()?;
    let root = gemini_dir.join("tmp").canonicalize().ok()?;
    (real.starts_with(&root) && real.extension().is_some_and(|e| e == "jsonl")).then_some(real)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    // As Gemini CLI 0.61.0 wrote it for a reply streamed in two chunks (checked by hand; the
    // facts test checks it on every run).
    const SEEN: &str = r#"{"sessionId":"b845","projectHash":"dec1","startTime":"t","lastUpdated":"t","kind":"main"}
{"$set":{"messages":[{"id":"d049","timestamp":"t","type":"user","content":[{"text":"<session_context>…</session_context>"}]}],"lastUpdated":"t"}}
{"id":"484b","timestamp":"t","type":"user","content":[{"text":"hello there"}]}
{"$set":{"lastUpdated":"t"}}
{"id":"70f4","timestamp":"t","type":"gemini","content":"First part of the reply, and the second part.\nLine two.","thoughts":[],"model":"gemini-2.5-flash"}
{"$set":{"lastUpdated":"t"}}"#;

    #[test]
    fn the_last_reply_after_the_last_prompt_is_the_turns_text() {
        assert_eq!(
            reply_in(SEEN.lines()).as_deref(),
            Some("First part of the reply, and the second part.\nLine two.")
        );
        // A continuation's prompt after it: nothing said since.
        let continued = format!(
            "{SEEN}\n{}",
            r#"{"id":"9","type":"user","content":[{"text":"[repowire] …"}]}"#
        );
        assert_eq!(reply_in(continued.lines()), None);
        // A tool call's message, then the final one: the final one.
        let tools = format!(
            "{continued}\n{}\n{}",
            r#"{"id":"a","type":"gemini","content":"","toolCalls":[{"name":"x"}]}"#,
            r#"{"id":"b","type":"gemini","content":[{"text":"done "},{"text":"now"}]}"#
        );
        assert_eq!(reply_in(tools.lines()).as_deref(), Some("done now"));
    }

    #[test]
    fn only_a_jsonl_file_under_the_gemini_dir_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let gemini = dir.path().join(".gemini");
        let chats = gemini.join("tmp/proj/chats");
        std::fs::create_dir_all(&chats).unwrap();
        let file = chats.join("session-x.jsonl");
        std::fs::write(&file, SEEN).unwrap();
        assert!(last_reply(&file, &gemini).is_some());
        let outside = dir.path().join("secret.jsonl");
        std::fs::write(&outside, SEEN).unwrap();
        assert_eq!(last_reply(&outside, &gemini), None);
        let linked = chats.join("link.jsonl");
        std::os::unix::fs::symlink(&outside, &linked).unwrap();
        assert_eq!(
            last_reply(&linked, &gemini),
            None,
            "a link out is not followed"
        );
        let not_jsonl = chats.join("notes.txt");
        std::fs::write(&not_jsonl, SEEN).unwrap();
        assert_eq!(last_reply(&not_jsonl, &gemini), None);
    }
}
