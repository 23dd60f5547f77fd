//! The runtimes' JSON settings (Claude Code's, Gemini CLI's) as `setup` edits them: recognising our hook entries, merging them
//! beside the user's own (kept in place, with every unknown key), removing exactly ours, and
//! writing a file only when it changed — atomically, after a timestamped backup, and never over
//! a change made meanwhile (Claude Code rewrites `~/.claude.json` while it runs).

use std::path::Path;

use anyhow::Context;
use serde_json::{Map, Value, json};

/// True for a hook entry this program installed: every command is `<…/repowire> [--home H] hook <event>`.
pub(crate) fn is_ours(entry: &Value) -> bool {
    let Some(hooks) = entry.get("hooks").and_then(Value::as_array) else {
        return false;
    };
    !hooks.is_empty()
        && hooks.iter().all(|h| {
            h.get("command").and_then(Value::as_str).is_some_and(|c| {
                let (program, rest) = split_program(c);
                (program.ends_with("/repowire") || program == "repowire")
                    && rest.split_whitespace().any(|w| w == "hook")
            })
        })
}

/// The program of a POSIX shell command line (its first word, with quotes and backslash
/// escapes resolved) and the rest of the line.
pub(super) fn split_program(command: &str) -> (String, &str) {
    let c = command.trim_start();
    let mut word = String::new();
    let mut chars = c.char_indices();
    let mut quote: Option<char> = None;
    while let Some((i, ch)) = chars.next() {
        match (quote, ch) {
            (None, c0) if c0.is_whitespace() => return (word, &c[i..]),
            (None, '\'') | (None, '"') => quote = Some(ch),
            (Some(q), c0) if c0 == q => quote = None,
            (None, '\\') | (Some('"'), '\\') => {
                if let Some((_, next)) = chars.next() {
                    word.push(next);
                }
            }
            (_, c0) => word.push(c0),
        }
    }
    (word, "")
}

/// Settings with our hooks merged in (replacing our earlier entry in place).
pub fn merge_hooks(settings: Value, commands: &[(&str, String)]) -> anyhow::Result<Value> {
    let entries: Vec<(&str, Value)> = commands
        .iter()
        .map(|(event, command)| {
            let ours = json!({ "matcher": "*", "hooks": [{ "type": "command", "command": command, "timeout": 15 }] });
            (*event, ours)
        })
        .collect();
    merge_entries(settings, &entries)
}

/// Settings with our hook entries merged in, one per event (replacing our earlier entry in
/// place, and dropping a second one of ours).
pub fn merge_entries(mut settings: Value, entries: &[(&str, Value)]) -> anyhow::Result<Value> {
    let root = settings
        .as_object_mut()
        .context("settings.json is not a JSON object")?;
    let hooks = root
        .entry("hooks")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .context("`hooks` in settings.json is not an object")?;
    for (event, ours) in entries {
        let ours = ours.clone();
        let list = hooks
            .entry(event.to_string())
            .or_insert_with(|| Value::Array(Vec::new()))
            .as_array_mut()
            .with_context(|| format!("`hooks.{event}` in settings.json is not an array"))?;
        match list.iter().position(is_ours) {
            Some(i) => list[i] = ours,
            None => list.push(ours),
        }
        // A second entry of ours (from an older install) would run the hook twice.
        let mut seen = false;
        list.retain(|e| !is_ours(e) || !std::mem::replace(&mut seen, true));
    }
    Ok(settings)
}

/// Settings without our entry for one event (dropped when nothing else is left in it).
pub(super) fn remove_event(mut settings: Value, event: &str) -> Value {
    if let Some(hooks) = settings.get_mut("hooks").and_then(Value::as_object_mut)
        && let Some(list) = hooks.get_mut(event).and_then(Value::as_array_mut)
    {
        let before = list.len();
        list.retain(|e| !is_ours(e));
        if list.is_empty() && before > 0 {
            hooks.remove(event);
        }
    }
    settings
}

/// Settings without our hooks; events left empty by the removal are dropped.
pub fn remove_hooks(mut settings: Value) -> Value {
    let mut removed = false;
    if let Some(hooks) = settings.get_mut("hooks").and_then(Value::as_object_mut) {
        let events: Vec<String> = hooks.keys().cloned().collect();
        for event in events {
            if let Some(list) = hooks.get_mut(&event).and_then(Value::as_array_mut) {
                let before = list.len();
                list.retain(|e| !is_ours(e));
                removed |= list.len() < before;
                if list.is_empty() && before > 0 {
                    hooks.remove(&event);
                }
            }
        }
        // A `hooks` the user left empty stays; one emptied by removing ours goes.
        if removed
            && hooks.is_empty()
            && let Some(root) = settings.as_object_mut()
        {
            root.remove("hooks");
        }
    }
    settings
}

pub(crate) fn read_json(path: &Path) -> anyhow::Result<Option<Value>> {
    match std::fs::read_to_string(path) {
        Ok(text) if text.trim().is_empty() => Ok(Some(json!({}))),
        Ok(text) => serde_json::from_str(&text).map(Some).with_context(|| {
            format!(
                "{} is not valid JSON; fix it first (nothing was changed)",
                path.display()
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// Writes `value` to `path` if it differs from what is there (see
/// [`super::config_write::write_text`]); true when written.
pub(super) fn write_if_changed(
    path: &Path,
    before: Option<&Value>,
    value: &Value,
    runtime: &str,
) -> anyhow::Result<bool> {
    if before == Some(value) {
        return Ok(false);
    }
    let mut text = serde_json::to_string_pretty(value)?;
    text.push('\n');
    // Claude Code rewrites ~/.claude.json while it runs (`runtime` is who may write it): if
    // the file changed since it was read, give up rather than drop its changes.
    super::config_write::write_text(path, before.is_some(), &text, runtime, |p| {
        Ok(read_json(p)?.as_ref() == before)
    })?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ours(event: &str) -> (&str, String) {
        ("Stop", format!("/usr/local/bin/repowire hook {event}"))
    }

    #[test]
    fn merging_twice_is_identical_and_keeps_user_entries() {
        let user = json!({
            "model": "opus",
            "hooks": { "Stop": [{ "matcher": "*", "hooks": [{ "type": "command", "command": "notify-send done" }] }] },
            "unknown": { "nested": [1, 2, 3] }
        });
        let once = merge_hooks(user.clone(), &[ours("stop")]).expect("merge");
        let twice = merge_hooks(once.clone(), &[ours("stop")]).expect("merge");
        assert_eq!(once, twice);
        let stops = once["hooks"]["Stop"].as_array().expect("array");
        assert_eq!(stops.len(), 2);
        assert_eq!(stops[0], user["hooks"]["Stop"][0]);
        assert_eq!(once["unknown"], user["unknown"]);
        assert_eq!(remove_hooks(once), user);
    }

    #[test]
    fn removing_from_settings_without_hooks_changes_nothing() {
        let plain = json!({ "theme": "dark" });
        assert_eq!(remove_hooks(plain.clone()), plain);
        let empty = json!({ "hooks": {} });
        assert_eq!(remove_hooks(empty.clone()), empty);
    }

    #[test]
    fn a_user_hook_that_merely_mentions_repowire_is_not_ours() {
        let entry =
            json!({ "hooks": [{ "type": "command", "command": "echo repowire hook stop" }] });
        assert!(!is_ours(&entry));
        let entry = json!({ "hooks": [{ "type": "command", "command": "'/opt/my tools/repowire' hook stop" }] });
        assert!(is_ours(&entry));
        let entry = json!({ "hooks": [{ "type": "command", "command": "'/home/o'\\''neil/bin/repowire' --home '/x y' hook stop" }] });
        assert!(is_ours(&entry));
        assert_eq!(
            split_program("'/a/it'\\''s/repowire' hook").0,
            "/a/it's/repowire"
        );
        assert_eq!(
            split_program("/usr/bin/repowire hook stop"),
            ("/usr/bin/repowire".into(), " hook stop")
        );
    }
}
