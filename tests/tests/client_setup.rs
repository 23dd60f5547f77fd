//! `repowire setup` / `uninstall` on a Claude Code configuration that already has the user's
//! own hooks and settings.

use std::path::Path;

use repowire_e2e::agents::Home;
use serde_json::{Value, json};

fn read(path: &Path) -> (String, Value) {
    let text = std::fs::read_to_string(path).expect("read");
    let value = serde_json::from_str(&text).expect("json");
    (text, value)
}

fn backups(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .expect("dir")
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .contains(".repowire-backup-")
        })
        .count()
}

#[test]
fn setup_twice_changes_nothing_keeps_user_entries_and_uninstall_restores_them() {
    let home = Home::new(None);
    let claude = home.path().join(".claude");
    std::fs::create_dir_all(&claude).expect("dir");
    let user_settings = json!({
        "model": "opus",
        "permissions": { "allow": ["Bash(ls:*)"] },
        "hooks": {
            "Stop": [{ "matcher": "*", "hooks": [{ "type": "command", "command": "notify-send 'done'" }] }],
            "PreToolUse": [{ "matcher": "Bash", "hooks": [{ "type": "command", "command": "/usr/local/bin/guard" }] }]
        },
        "someFutureKey": { "a": [1, 2, { "b": null }] }
    });
    let user_claude_json = json!({
        "numStartups": 42,
        "projects": { "/home/me/web": { "mcpServers": { "local": { "command": "x" } } } },
        "mcpServers": { "other": { "type": "stdio", "command": "other-mcp", "args": [] } }
    });
    let settings = claude.join("settings.json");
    let claude_json = home.path().join(".claude.json");
    std::fs::write(
        &settings,
        serde_json::to_string_pretty(&user_settings).expect("json"),
    )
    .expect("write");
    std::fs::write(
        &claude_json,
        serde_json::to_string(&user_claude_json).expect("json"),
    )
    .expect("write");

    home.ok(&["setup", "--non-interactive", "--service"]);
    let unit_path = home.path().join(".config/systemd/user/repowire.service");
    let unit = std::fs::read_to_string(&unit_path).expect("service unit");
    assert!(
        unit.contains("daemon run") && unit.contains("WantedBy=default.target"),
        "{unit}"
    );
    let (first_text, first) = read(&settings);
    let (first_mcp_text, first_mcp) = read(&claude_json);
    assert_eq!(backups(&claude), 1);
    assert_eq!(backups(home.path()), 1);

    // Ours added, the user's kept, unknown keys untouched.
    for event in [
        "SessionStart",
        "UserPromptSubmit",
        "Stop",
        "Notification",
        "SessionEnd",
    ] {
        let list = first["hooks"][event].as_array().expect(event);
        assert!(
            list.iter().any(|e| e["hooks"][0]["command"]
                .as_str()
                .is_some_and(|c| c.contains(" hook "))),
            "{event}: {list:?}"
        );
    }
    assert_eq!(first["hooks"]["Stop"][0], user_settings["hooks"]["Stop"][0]);
    assert_eq!(
        first["hooks"]["PreToolUse"],
        user_settings["hooks"]["PreToolUse"]
    );
    assert_eq!(first["someFutureKey"], user_settings["someFutureKey"]);
    assert_eq!(first["permissions"], user_settings["permissions"]);
    assert_eq!(
        first_mcp["mcpServers"]["other"],
        user_claude_json["mcpServers"]["other"]
    );
    assert_eq!(first_mcp["projects"], user_claude_json["projects"]);
    assert_eq!(first_mcp["numStartups"], 42);
    assert_eq!(first_mcp["mcpServers"]["repowire"]["args"], json!(["mcp"]));

    // Second run: byte-for-byte the same, no new backups.
    let again = home.ok(&["setup", "--non-interactive", "--service"]);
    assert_eq!(std::fs::read_to_string(&unit_path).expect("unit"), unit);
    assert!(again.contains("already up to date"), "{again}");
    assert_eq!(read(&settings).0, first_text);
    assert_eq!(read(&claude_json).0, first_mcp_text);
    assert_eq!(backups(&claude), 1);

    let status = home.ok(&["status"]);
    assert!(status.contains("5/5 installed"), "{status}");

    home.ok(&["uninstall"]);
    assert!(!unit_path.exists());
    assert_eq!(read(&settings).1, user_settings);
    assert_eq!(read(&claude_json).1, user_claude_json);
}

#[test]
fn setup_refuses_to_touch_a_settings_file_that_is_not_json() {
    let home = Home::new(None);
    let claude = home.path().join(".claude");
    std::fs::create_dir_all(&claude).expect("dir");
    std::fs::write(claude.join("settings.json"), "{ not json").expect("write");
    let out = home.repowire(&["setup", "--non-interactive"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not valid JSON"));
    assert_eq!(
        std::fs::read_to_string(claude.join("settings.json")).expect("read"),
        "{ not json"
    );
}
