//! The Codex config edits on files a user could have written.

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

const PATH: &str = "/home/u/.codex/config.toml";

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
    let once = merge(USER, PATH, &hooks, &[], &mcp()).expect("merge");
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
    assert_eq!(
        merge(&once, PATH, &hooks, &[], &mcp()).expect("merge"),
        once
    );
    // The user's trust is where it was; removal gives the file back as it was.
    assert_eq!(remove(&once, PATH).expect("remove"), USER);
}

#[test]
fn an_update_rewrites_our_group_in_place() {
    let old = merge(
        USER,
        PATH,
        &[ours("Stop", "/old/repowire hook stop")],
        &[],
        &mcp(),
    )
    .expect("test");
    let new = merge(
        &old,
        PATH,
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
    let merged = merge(
        USER,
        PATH,
        &[ours("Stop", "repowire hook stop")],
        &[],
        &mcp(),
    )
    .expect("test");
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
    let removed = remove(&trusted, PATH).expect("test");
    assert!(removed.contains("stop:0:0"), "{removed}");
    assert!(!removed.contains("stop:1:0"), "{removed}");
    assert!(!removed.contains("repowire"), "{removed}");
}

#[test]
fn inline_groups_and_an_empty_file_work_and_bad_toml_is_refused() {
    let inline = "hooks.Stop = [{ hooks = [{ type = \"command\", command = \"say hi\" }] }]\n";
    let merged = merge(
        inline,
        PATH,
        &[ours("Stop", "repowire hook stop")],
        &[],
        &mcp(),
    )
    .expect("test");
    let doc: DocumentMut = merged.parse().expect("test");
    assert_eq!(doc["hooks"]["Stop"].as_array().map(Array::len), Some(2));
    assert_eq!(remove(&merged, PATH).expect("test"), inline);
    let fresh = merge("", PATH, &[ours("Stop", "repowire hook stop")], &[], &mcp()).expect("test");
    assert!(fresh.contains("[[hooks.Stop]]"), "{fresh}");
    assert_eq!(remove(&fresh, PATH).expect("test").trim(), "");
    assert!(merge("model = ", PATH, &[], &[], &mcp()).is_err());
    assert!(
        merge(
            "hooks = 3",
            PATH,
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
    let with = merge(USER, PATH, &[pre], &[], &mcp()).expect("test");
    assert!(with.contains("matcher = \"Bash\""));
    let without = merge(&with, PATH, &[], &["PreToolUse"], &mcp()).expect("test");
    assert!(!without.contains("PreToolUse"), "{without}");
}

/// Review findings: trust of another file is not ours to remove; the trust of a user's group
/// after ours moves with it; a second group of ours goes; an inline `hooks` table is refused;
/// empty tables of the user's stay.
#[test]
fn trust_follows_the_groups_and_only_ours_is_removed() {
    let text = r#"[[hooks.Stop]]
[[hooks.Stop.hooks]]
type = "command"
command = "repowire hook --runtime codex stop"

[[hooks.Stop]]
[[hooks.Stop.hooks]]
type = "command"
command = "notify-send done"

[hooks.state."/home/u/.codex/config.toml:stop:0:0"]
trusted_hash = "sha256:ours"

[hooks.state."/home/u/.codex/config.toml:stop:1:0"]
trusted_hash = "sha256:users"

[hooks.state."/proj/.codex/config.toml:stop:0:0"]
trusted_hash = "sha256:project"
"#;
    let removed = remove(text, PATH).expect("remove");
    let doc: DocumentMut = removed.parse().expect("toml");
    let state = doc["hooks"]["state"].as_table_like().expect("state");
    assert_eq!(
        state
            .get("/home/u/.codex/config.toml:stop:0:0")
            .and_then(|t| t.get("trusted_hash"))
            .and_then(Item::as_str),
        Some("sha256:users"),
        "{removed}"
    );
    assert!(state.get("/home/u/.codex/config.toml:stop:1:0").is_none());
    assert!(state.get("/proj/.codex/config.toml:stop:0:0").is_some());
    let stops = doc["hooks"]["Stop"].as_array_of_tables().expect("aot");
    assert_eq!(stops.len(), 1);

    // Two groups of ours: one stays, updated.
    let twice = format!(
        "{}\n[[hooks.Stop]]\n[[hooks.Stop.hooks]]\ntype = \"command\"\ncommand = \"/old/repowire --home /x hook stop\"\n",
        text
    );
    let merged = merge(
        &twice,
        PATH,
        &[ours("Stop", "repowire hook --runtime codex stop")],
        &[],
        &mcp(),
    )
    .expect("merge");
    let doc: DocumentMut = merged.parse().expect("toml");
    let stops = doc["hooks"]["Stop"].as_array_of_tables().expect("aot");
    assert_eq!(stops.len(), 2, "{merged}");
    assert!(!merged.contains("/old/repowire"), "{merged}");

    let inline = "hooks = { Stop = [] }\n";
    let err = merge(
        inline,
        PATH,
        &[ours("Stop", "repowire hook stop")],
        &[],
        &mcp(),
    )
    .expect_err("inline hooks");
    assert!(err.to_string().contains("inline table"), "{err}");

    // Nothing of ours: not a byte changes, empty tables included.
    let empty = "[hooks]\n# mine\n\n[hooks.state]\n\n[mcp_servers]\n";
    assert_eq!(remove(empty, PATH).expect("remove"), empty);
}
