//! Codex's `$CODEX_HOME/config.toml` as `setup` edits it (docs/agents/codex.md): our hook
//! groups (`[[hooks.<Event>]]`, Claude-compatible) and our MCP server (`[mcp_servers.repowire]`)
//! merged beside the user's own, every other key, comment and blank line kept as written
//! (`toml_edit`), and removed again exactly.
//!
//! Codex runs a hook only once a person trusted it in its TUI, and keys that trust by the hook's
//! position (`[hooks.state."<file>:<event>:<group>:<hook>"]`, with its own hash of the entry).
//! So our groups go after the user's (theirs keep their positions and their trust), an update
//! rewrites our group where it is, and a setup with nothing new leaves the file byte for byte.

use toml_edit::{Array, ArrayOfTables, DocumentMut, InlineTable, Item, Table, Value};

use super::claude_settings::split_program;

/// One hook group of ours: the event's Codex name, the command, and its timeout (seconds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookGroup {
    /// `SessionStart`, `PreToolUse` …
    pub event: &'static str,
    /// The command line.
    pub command: String,
    /// Seconds.
    pub timeout: u64,
    /// The tool-name regex (`PreToolUse` only).
    pub matcher: Option<String>,
}

/// Our MCP server entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServer {
    /// The program.
    pub command: String,
    /// `REPOWIRE_HOME` when not the default.
    pub home: Option<String>,
    /// Codex calls our tools without asking a person (`default_tools_approval_mode`).
    pub approve_tools: bool,
}

/// Codex's snake-case name of an event, as in its trust keys.
fn snake(event: &str) -> String {
    let mut out = String::new();
    for (i, c) in event.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

fn parse(text: &str) -> anyhow::Result<DocumentMut> {
    text.parse::<DocumentMut>().map_err(|e| {
        anyhow::anyhow!(
            "the Codex config is not valid TOML ({e}); fix it first (nothing was changed)"
        )
    })
}

/// The commands of a hook group, whichever TOML form it is written in.
fn commands(group: &dyn toml_edit::TableLike) -> Vec<String> {
    let mut out = Vec::new();
    match group.get("hooks") {
        Some(Item::ArrayOfTables(hooks)) => {
            for h in hooks.iter() {
                out.push(
                    h.get("command")
                        .and_then(Item::as_str)
                        .unwrap_or("")
                        .to_owned(),
                );
            }
        }
        Some(Item::Value(Value::Array(hooks))) => {
            for h in hooks.iter() {
                out.push(
                    h.as_inline_table()
                        .and_then(|t| t.get("command"))
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned(),
                );
            }
        }
        _ => {}
    }
    out
}

/// True for a group this program installed: every command is `<…/repowire> … hook …`.
fn is_ours(group: &dyn toml_edit::TableLike) -> bool {
    let commands = commands(group);
    !commands.is_empty()
        && commands.iter().all(|c| {
            let (program, rest) = split_program(c);
            (program.ends_with("/repowire") || program == "repowire")
                && rest.split_whitespace().any(|w| w == "hook")
        })
}

/// The groups of one event, as table-likes with their index in the list (which is what
/// Codex's trust keys count), whichever form.
fn groups(item: &Item) -> Vec<(usize, &dyn toml_edit::TableLike)> {
    match item {
        Item::ArrayOfTables(a) => a
            .iter()
            .enumerate()
            .map(|(i, t)| (i, t as &dyn toml_edit::TableLike))
            .collect(),
        Item::Value(Value::Array(a)) => a
            .iter()
            .enumerate()
            .filter_map(|(i, v)| Some((i, v.as_inline_table()? as &dyn toml_edit::TableLike)))
            .collect(),
        _ => Vec::new(),
    }
}

/// The indices of our groups in one event's list.
fn ours_at(item: &Item) -> Vec<usize> {
    groups(item)
        .into_iter()
        .filter(|(_, g)| is_ours(*g))
        .map(|(i, _)| i)
        .collect()
}

/// Codex's trust entries (`[hooks.state."<file>:<event>:<group>:<hook>"]`) of this file for
/// one event, with the group index they name.
fn trust_keys(doc: &DocumentMut, path: &str, event: &str) -> Vec<(String, usize)> {
    let prefix = format!("{path}:{}:", snake(event));
    doc.get("hooks")
        .and_then(|h| h.get("state"))
        .and_then(Item::as_table_like)
        .map(|state| {
            state
                .iter()
                .filter_map(|(k, _)| {
                    let (group, _hook) = k.strip_prefix(&prefix)?.split_once(':')?;
                    Some((k.to_owned(), group.parse().ok()?))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Removes the group at `index` of one event, with the trust Codex recorded for it; the
/// trust of the groups after it moves down with them, so a user's hook stays trusted.
fn remove_group(doc: &mut DocumentMut, path: &str, event: &str, index: usize) {
    let keys = trust_keys(doc, path, event);
    let Some(hooks) = doc.get_mut("hooks").and_then(Item::as_table_like_mut) else {
        return;
    };
    match hooks.get_mut(event) {
        Some(Item::ArrayOfTables(list)) if index < list.len() => {
            list.remove(index);
        }
        Some(Item::Value(Value::Array(list))) if index < list.len() => {
            list.remove(index);
        }
        _ => return,
    }
    let Some(state) = hooks.get_mut("state").and_then(Item::as_table_like_mut) else {
        return;
    };
    let prefix = format!("{path}:{}:", snake(event));
    for (key, group) in keys {
        if group < index {
            continue;
        }
        let Some(item) = state.remove(&key) else {
            continue;
        };
        if group > index {
            let hook = key.rsplit(':').next().unwrap_or("0");
            state.insert(&format!("{prefix}{}:{hook}", group - 1), item);
        }
    }
}

fn group_table(group: &HookGroup) -> Table {
    let mut hook = Table::new();
    hook.insert("type", toml_edit::value("command"));
    hook.insert("command", toml_edit::value(group.command.clone()));
    hook.insert("timeout", toml_edit::value(group.timeout as i64));
    let mut hooks = ArrayOfTables::new();
    hooks.push(hook);
    let mut table = Table::new();
    if let Some(m) = &group.matcher {
        table.insert("matcher", toml_edit::value(m.clone()));
    }
    table.insert("hooks", Item::ArrayOfTables(hooks));
    table
}

fn group_inline(group: &HookGroup) -> InlineTable {
    let mut hook = InlineTable::new();
    hook.insert("type", "command".into());
    hook.insert("command", group.command.clone().into());
    hook.insert("timeout", (group.timeout as i64).into());
    let mut hooks = Array::new();
    hooks.push(hook);
    let mut table = InlineTable::new();
    if let Some(m) = &group.matcher {
        table.insert("matcher", m.clone().into());
    }
    table.insert("hooks", Value::Array(hooks));
    table
}

/// The config with our hook groups and MCP server merged in, and with our groups for the
/// events in `drop` removed (approvals turned off). `text` is the file as it is (empty when
/// missing); `path` is where it lives, as Codex names it in its trust keys.
pub fn merge(
    text: &str,
    path: &str,
    ours: &[HookGroup],
    drop: &[&str],
    mcp: &McpServer,
) -> anyhow::Result<String> {
    let mut doc = parse(text)?;
    for key in ["hooks", "mcp_servers"] {
        if matches!(doc.get(key), Some(Item::Value(Value::InlineTable(_)))) {
            anyhow::bail!(
                "`{key}` in the Codex config is an inline table; write it as `[{key}]` tables first (nothing was changed)"
            );
        }
    }
    for group in ours {
        let hooks = top_table(&mut doc, "hooks")?;
        let item = hooks
            .entry(group.event)
            .or_insert(Item::ArrayOfTables(ArrayOfTables::new()));
        let at = ours_at(item);
        let same = at.first().is_some_and(|&i| {
            groups(item).into_iter().any(|(j, g)| {
                j == i
                    && commands(g) == [group.command.clone()]
                    && g.get("matcher").and_then(Item::as_str) == group.matcher.as_deref()
                    && g.get("hooks")
                        .is_some_and(|h| timeout_of(h) == Some(group.timeout))
            })
        });
        if !same {
            match item {
                Item::ArrayOfTables(list) => match at.first() {
                    Some(&i) => {
                        if let Some(t) = list.get_mut(i) {
                            *t = group_table(group);
                        }
                    }
                    None => list.push(group_table(group)),
                },
                Item::Value(Value::Array(list)) => match at.first() {
                    Some(&i) => {
                        list.replace(i, group_inline(group));
                    }
                    None => list.push(group_inline(group)),
                },
                _ => anyhow::bail!(
                    "`hooks.{}` in the Codex config is not a list of hook groups; nothing was changed",
                    group.event
                ),
            }
        }
        // A second group of ours (an older install under another home) would run twice.
        for &extra in at.iter().skip(1).rev() {
            remove_group(&mut doc, path, group.event, extra);
        }
    }
    for event in drop {
        remove_ours(&mut doc, path, event);
    }
    set_mcp(&mut doc, mcp)?;
    Ok(doc.to_string())
}

/// The timeout of a group's only hook.
fn timeout_of(hooks: &Item) -> Option<u64> {
    match hooks {
        Item::ArrayOfTables(a) if a.len() == 1 => a
            .get(0)
            .and_then(|h| h.get("timeout"))
            .and_then(Item::as_integer)
            .and_then(|t| u64::try_from(t).ok()),
        Item::Value(Value::Array(a)) if a.len() == 1 => a
            .get(0)
            .and_then(Value::as_inline_table)
            .and_then(|h| h.get("timeout"))
            .and_then(Value::as_integer)
            .and_then(|t| u64::try_from(t).ok()),
        _ => None,
    }
}

/// The top-level table `key`, made (implicit: no `[key]` header of its own) when missing.
fn top_table<'a>(
    doc: &'a mut DocumentMut,
    key: &str,
) -> anyhow::Result<&'a mut dyn toml_edit::TableLike> {
    doc.entry(key)
        .or_insert_with(|| {
            let mut t = Table::new();
            t.set_implicit(true);
            Item::Table(t)
        })
        .as_table_like_mut()
        .ok_or_else(|| {
            anyhow::anyhow!("`{key}` in the Codex config is not a table; nothing was changed")
        })
}

fn set_mcp(doc: &mut DocumentMut, mcp: &McpServer) -> anyhow::Result<()> {
    let servers = top_table(doc, "mcp_servers")?;
    let entry = servers
        .entry("repowire")
        .or_insert(Item::Table(Table::new()))
        .as_table_like_mut()
        .ok_or_else(|| {
            anyhow::anyhow!(
                "`mcp_servers.repowire` in the Codex config is not a table; nothing was changed"
            )
        })?;
    let set = |entry: &mut dyn toml_edit::TableLike, key: &str, v: Value| {
        let now = entry
            .get(key)
            .and_then(Item::as_value)
            .map(|x| x.to_string());
        let mut v = v;
        v.decor_mut().clear();
        if now.map(|n| n.trim().to_owned()) != Some(v.to_string().trim().to_owned()) {
            entry.insert(key, Item::Value(v));
        }
    };
    set(entry, "command", mcp.command.clone().into());
    let mut args = Array::new();
    args.push("mcp");
    set(entry, "args", Value::Array(args));
    if mcp.approve_tools {
        set(entry, "default_tools_approval_mode", "approve".into());
    }
    match &mcp.home {
        Some(home) => {
            let env = entry
                .entry("env")
                .or_insert(Item::Table(Table::new()))
                .as_table_like_mut()
                .ok_or_else(|| anyhow::anyhow!("`mcp_servers.repowire.env` in the Codex config is not a table; nothing was changed"))?;
            set(env, "REPOWIRE_HOME", home.clone().into());
        }
        None => {
            if let Some(env) = entry.get_mut("env").and_then(Item::as_table_like_mut) {
                env.remove("REPOWIRE_HOME");
            }
        }
    }
    Ok(())
}

/// Removes our groups of one event (and the trust Codex recorded for them); an event left
/// empty by that goes too, and so do `[hooks.state]` and `[hooks]` when that emptied them.
fn remove_ours(doc: &mut DocumentMut, path: &str, event: &str) {
    let at = doc
        .get("hooks")
        .and_then(|h| h.get(event))
        .map(ours_at)
        .unwrap_or_default();
    if at.is_empty() {
        return;
    }
    for &i in at.iter().rev() {
        remove_group(doc, path, event, i);
    }
    if let Some(hooks) = doc.get_mut("hooks").and_then(Item::as_table_like_mut) {
        let empty = match hooks.get(event) {
            Some(Item::ArrayOfTables(list)) => list.is_empty(),
            Some(Item::Value(Value::Array(list))) => list.is_empty(),
            _ => false,
        };
        if empty {
            hooks.remove(event);
        }
        if hooks
            .get("state")
            .and_then(Item::as_table_like)
            .is_some_and(|s| s.is_empty())
        {
            hooks.remove("state");
        }
    }
    drop_if_empty(doc, "hooks");
}

fn drop_if_empty(doc: &mut DocumentMut, key: &str) {
    if doc
        .get(key)
        .and_then(Item::as_table_like)
        .is_some_and(|t| t.is_empty())
    {
        doc.remove(key);
    }
}

/// The config without anything of ours: our hook groups (and their trust) and our MCP server.
pub fn remove(text: &str, path: &str) -> anyhow::Result<String> {
    let mut doc = parse(text)?;
    let events: Vec<String> = doc
        .get("hooks")
        .and_then(Item::as_table_like)
        .map(|h| {
            h.iter()
                .map(|(k, _)| k.to_owned())
                .filter(|k| k != "state")
                .collect()
        })
        .unwrap_or_default();
    for event in events {
        remove_ours(&mut doc, path, &event);
    }
    let removed = doc
        .get_mut("mcp_servers")
        .and_then(Item::as_table_like_mut)
        .and_then(|servers| servers.remove("repowire"))
        .is_some();
    if removed {
        drop_if_empty(&mut doc, "mcp_servers");
    }
    Ok(doc.to_string())
}

/// Our hook groups and whether Codex has trusted each: `(event, trusted)`. Codex keeps a hash
/// of each trusted entry; this says only whether it recorded trust for that position, not
/// whether the hash still matches (a changed command needs trusting again).
pub fn trust(text: &str, config_path: &str) -> Vec<(String, bool)> {
    let Ok(doc) = parse(text) else {
        return Vec::new();
    };
    let Some(hooks) = doc.get("hooks").and_then(Item::as_table_like) else {
        return Vec::new();
    };
    let state = hooks.get("state").and_then(Item::as_table_like);
    let mut out = Vec::new();
    for (event, item) in hooks.iter().filter(|(k, _)| *k != "state") {
        for (i, g) in groups(item) {
            if is_ours(g) {
                let key = format!("{config_path}:{}:{i}:0", snake(event));
                let trusted = state.is_some_and(|s| {
                    s.get(&key)
                        .and_then(Item::as_table_like)
                        .is_some_and(|t| t.contains_key("trusted_hash"))
                });
                out.push((event.to_owned(), trusted));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
