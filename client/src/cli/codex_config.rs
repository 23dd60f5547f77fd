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

/// The groups of one event, as table-likes, whichever form.
fn groups(item: &Item) -> Vec<&dyn toml_edit::TableLike> {
    match item {
        Item::ArrayOfTables(a) => a.iter().map(|t| t as &dyn toml_edit::TableLike).collect(),
        Item::Value(Value::Array(a)) => a
            .iter()
            .filter_map(|v| v.as_inline_table())
            .map(|t| t as &dyn toml_edit::TableLike)
            .collect(),
        _ => Vec::new(),
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
/// missing).
pub fn merge(
    text: &str,
    ours: &[HookGroup],
    drop: &[&str],
    mcp: &McpServer,
) -> anyhow::Result<String> {
    let mut doc = parse(text)?;
    let hooks = doc
        .entry("hooks")
        .or_insert_with(|| {
            let mut t = Table::new();
            t.set_implicit(true);
            Item::Table(t)
        })
        .as_table_like_mut()
        .ok_or_else(|| {
            anyhow::anyhow!("`hooks` in the Codex config is not a table; nothing was changed")
        })?;
    for group in ours {
        let item = hooks
            .entry(group.event)
            .or_insert(Item::ArrayOfTables(ArrayOfTables::new()));
        let at = groups(item).iter().position(|g| is_ours(*g));
        let same = at.is_some_and(|i| {
            let g = groups(item)[i];
            commands(g) == [group.command.clone()]
                && g.get("matcher").and_then(Item::as_str) == group.matcher.as_deref()
                && g.get("hooks")
                    .is_some_and(|h| timeout_of(h) == Some(group.timeout))
        });
        if same {
            continue;
        }
        match item {
            Item::ArrayOfTables(list) => match at {
                Some(i) => {
                    if let Some(t) = list.get_mut(i) {
                        *t = group_table(group);
                    }
                }
                None => list.push(group_table(group)),
            },
            Item::Value(Value::Array(list)) => match at {
                Some(i) => {
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
    for event in drop {
        remove_ours(&mut doc, event);
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

fn set_mcp(doc: &mut DocumentMut, mcp: &McpServer) -> anyhow::Result<()> {
    let servers = doc
        .entry("mcp_servers")
        .or_insert_with(|| {
            let mut t = Table::new();
            t.set_implicit(true);
            Item::Table(t)
        })
        .as_table_like_mut()
        .ok_or_else(|| {
            anyhow::anyhow!("`mcp_servers` in the Codex config is not a table; nothing was changed")
        })?;
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
/// empty goes too.
fn remove_ours(doc: &mut DocumentMut, event: &str) {
    let mut removed: Vec<usize> = Vec::new();
    if let Some(hooks) = doc.get_mut("hooks").and_then(Item::as_table_like_mut) {
        if let Some(item) = hooks.get_mut(event) {
            removed = groups(item)
                .iter()
                .enumerate()
                .filter(|(_, g)| is_ours(**g))
                .map(|(i, _)| i)
                .collect();
            for &i in removed.iter().rev() {
                match item {
                    Item::ArrayOfTables(list) => {
                        list.remove(i);
                    }
                    Item::Value(Value::Array(list)) => {
                        list.remove(i);
                    }
                    _ => {}
                }
            }
            let empty = match item {
                Item::ArrayOfTables(list) => list.is_empty(),
                Item::Value(Value::Array(list)) => list.is_empty(),
                _ => false,
            };
            if empty && !removed.is_empty() {
                hooks.remove(event);
            }
        }
        // The trust of a removed group: `<file>:<event>:<group>:<hook>`.
        if let Some(state) = hooks.get_mut("state").and_then(Item::as_table_like_mut) {
            let snake = snake(event);
            let stale: Vec<String> = state
                .iter()
                .map(|(k, _)| k.to_owned())
                .filter(|k| {
                    let mut parts = k.rsplitn(4, ':');
                    let (_hook, group, ev) = (parts.next(), parts.next(), parts.next());
                    ev == Some(snake.as_str())
                        && group
                            .and_then(|g| g.parse::<usize>().ok())
                            .is_some_and(|g| removed.contains(&g))
                })
                .collect();
            for k in stale {
                state.remove(&k);
            }
            if state.is_empty() {
                hooks.remove("state");
            }
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
pub fn remove(text: &str) -> anyhow::Result<String> {
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
        remove_ours(&mut doc, &event);
    }
    if let Some(servers) = doc.get_mut("mcp_servers").and_then(Item::as_table_like_mut) {
        servers.remove("repowire");
    }
    drop_if_empty(&mut doc, "mcp_servers");
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
        for (i, g) in groups(item).iter().enumerate() {
            if is_ours(*g) {
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
mod tests {
    use super::*;

    fn ours(event: &'static str, command: &str) -> HookGroup {
        HookGroup {
            event,
            command: command.into(),
            timeout: 15,
            matcher: None,
        }
    }

    fn mcp() -> McpServer {
        McpServer {
            command: "repowire".into(),
            home: None,
            approve_tools: true,
        }
    }

    const USER: &str = r#"# my Codex settings
model = "gpt-5"   # the model

[[hooks.Stop]]
[[hooks.Stop.hooks]]
type = "command"
command = "notify-send done"

[hooks.state."/home/u/.codex/config.toml:stop:0:0"]
trusted_hash = "sha256:abc"

[mcp_servers.docs]
command = "docs-mcp"
"#;

    #[test]
    fn merging_keeps_the_users_bytes_and_appends_after_them() {
        let hooks = [
            ours("Stop", "repowire hook --runtime codex stop"),
            ours(
                "SessionStart",
                "repowire hook --runtime codex session-start",
            ),
        ];
        let once = merge(USER, &hooks, &[], &mcp()).expect("merge");
        assert!(once.starts_with("# my Codex settings\nmodel = \"gpt-5\"   # the model\n"));
        let doc: DocumentMut = once.parse().expect("toml");
        let stops = doc["hooks"]["Stop"].as_array_of_tables().expect("aot");
        assert_eq!(stops.len(), 2);
        assert_eq!(
            stops.get(0).expect("test")["hooks"][0]["command"].as_str(),
            Some("notify-send done")
        );
        assert_eq!(
            stops.get(1).expect("test")["hooks"][0]["command"].as_str(),
            Some("repowire hook --runtime codex stop")
        );
        assert_eq!(
            doc["mcp_servers"]["repowire"]["args"][0].as_str(),
            Some("mcp")
        );
        assert_eq!(
            doc["mcp_servers"]["repowire"]["default_tools_approval_mode"].as_str(),
            Some("approve")
        );
        // Twice: not a byte changes.
        assert_eq!(merge(&once, &hooks, &[], &mcp()).expect("merge"), once);
        // The user's trust is where it was; removal gives the file back as it was.
        assert_eq!(remove(&once).expect("remove"), USER);
    }

    #[test]
    fn an_update_rewrites_our_group_in_place() {
        let old = merge(
            USER,
            &[ours("Stop", "/old/repowire hook stop")],
            &[],
            &mcp(),
        )
        .expect("test");
        let new = merge(
            &old,
            &[ours("Stop", "repowire hook --runtime codex stop")],
            &[],
            &mcp(),
        )
        .expect("test");
        let doc: DocumentMut = new.parse().expect("test");
        let stops = doc["hooks"]["Stop"].as_array_of_tables().expect("test");
        assert_eq!(stops.len(), 2);
        assert_eq!(
            stops.get(1).expect("test")["hooks"][0]["command"].as_str(),
            Some("repowire hook --runtime codex stop")
        );
    }

    #[test]
    fn removal_takes_our_trust_with_it_and_leaves_the_users() {
        let merged = merge(USER, &[ours("Stop", "repowire hook stop")], &[], &mcp()).expect("test");
        let trusted = merged.replace(
            "[mcp_servers.docs]",
            "[hooks.state.\"/home/u/.codex/config.toml:stop:1:0\"]\ntrusted_hash = \"sha256:def\"\n\n[mcp_servers.docs]",
        );
        assert_eq!(
            trust(&trusted, "/home/u/.codex/config.toml"),
            [("Stop".to_owned(), true)]
        );
        assert_eq!(
            trust(&merged, "/home/u/.codex/config.toml"),
            [("Stop".to_owned(), false)]
        );
        let removed = remove(&trusted).expect("test");
        assert!(removed.contains("stop:0:0"), "{removed}");
        assert!(!removed.contains("stop:1:0"), "{removed}");
        assert!(!removed.contains("repowire"), "{removed}");
    }

    #[test]
    fn inline_groups_and_an_empty_file_work_and_bad_toml_is_refused() {
        let inline = "hooks.Stop = [{ hooks = [{ type = \"command\", command = \"say hi\" }] }]\n";
        let merged =
            merge(inline, &[ours("Stop", "repowire hook stop")], &[], &mcp()).expect("test");
        let doc: DocumentMut = merged.parse().expect("test");
        assert_eq!(doc["hooks"]["Stop"].as_array().map(Array::len), Some(2));
        assert_eq!(remove(&merged).expect("test"), inline);
        let fresh = merge("", &[ours("Stop", "repowire hook stop")], &[], &mcp()).expect("test");
        assert!(fresh.contains("[[hooks.Stop]]"), "{fresh}");
        assert_eq!(remove(&fresh).expect("test").trim(), "");
        assert!(merge("model = ", &[], &[], &mcp()).is_err());
        assert!(
            merge(
                "hooks = 3",
                &[ours("Stop", "repowire hook stop")],
                &[],
                &mcp()
            )
            .is_err()
        );
    }

    #[test]
    fn dropping_an_event_removes_only_our_group() {
        let pre = HookGroup {
            matcher: Some("Bash".into()),
            ..ours("PreToolUse", "repowire hook --runtime codex pre-tool-use")
        };
        let with = merge(USER, &[pre], &[], &mcp()).expect("test");
        assert!(with.contains("matcher = \"Bash\""));
        let without = merge(&with, &[], &["PreToolUse"], &mcp()).expect("test");
        assert!(!without.contains("PreToolUse"), "{without}");
    }
}
