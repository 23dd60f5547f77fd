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

/// Issue 15.2: `setup --relay-url … --api-key … --circle …` checks the key with the relay, says
/// which relay and tenant the machine is on, and writes them to config.toml (0600), so a daemon
/// started from a shell without the environment uses them. A wrong URL or key is said in plain
/// words at setup time, and nothing is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_with_a_relay_verifies_the_key_and_writes_it_or_changes_nothing() {
    use std::os::unix::fs::PermissionsExt;

    use repowire_e2e::process::{RelayProcess, relay_bin};

    let data = tempfile::tempdir().expect("data");
    let data_dir = data.path().to_str().expect("utf8").to_owned();
    let relay = RelayProcess::start(&relay_bin(), &["--data-dir", &data_dir], &[]).await;
    let key = relay.first_key.clone().expect("key");
    let home = Home::new(None);
    let config = home.repowire_home().join("config.toml");
    let settings = home.path().join(".claude/settings.json");
    let setup = |url: &str, key: &str| {
        home.repowire(&[
            "setup",
            "--non-interactive",
            "--relay-url",
            url,
            "--api-key",
            key,
            "--circle",
            "backend",
        ])
    };
    let refused = |out: &std::process::Output, words: &str| {
        let said = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!out.status.success(), "{said}");
        assert!(said.contains(words), "{said}");
        assert!(!config.exists(), "config.toml written after: {said}");
        assert!(!settings.exists(), "settings.json written after: {said}");
    };

    let mut wrong = key.clone().into_bytes();
    wrong[12] = if wrong[12] == b'A' { b'B' } else { b'A' };
    refused(
        &setup(&relay.http, &String::from_utf8(wrong).expect("ascii")),
        "refused the API key",
    );
    // A port nothing listens on (the relay's, once it is gone, is not reliably free).
    let nobody = format!("http://127.0.0.1:{}", repowire_e2e::free_port());
    refused(&setup(&nobody, &key), "cannot reach the relay");
    refused(&setup("relay.example.com", &key), "must start with http");

    let out = setup(&relay.http, &key);
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let token = repowire_e2e::client::token(&relay.http, &key)
        .await
        .expect("token");
    assert!(
        said.contains(&relay.http) && said.contains(&token.tenant_id),
        "{said}"
    );
    // The key is kept in a file of its own, never in config.toml (issue 35.10).
    let written = std::fs::read_to_string(&config).expect("config.toml");
    assert!(
        !written.contains(&key) && written.contains("backend") && written.contains(&relay.http),
        "{written}"
    );
    let key_file = home.repowire_home().join("relay-api-key");
    assert_eq!(
        std::fs::read_to_string(&key_file).expect("key file").trim(),
        key
    );
    assert!(said.contains("relay-api-key"), "{said}");
    for path in [&config, &key_file] {
        let mode = std::fs::metadata(path).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", path.display());
    }
    let shown = home.ok(&["config", "show"]);
    assert!(
        !shown.contains(&key[12..]),
        "config show printed the key: {shown}"
    );
    // A key an older setup left in config.toml moves to its own file at the next setup.
    std::fs::remove_file(&key_file).expect("rm");
    std::fs::write(
        &config,
        format!("{written}\n").replace(
            &format!("url = \"{}\"", relay.http),
            &format!("url = \"{}\"\napi_key = \"{key}\"", relay.http),
        ),
    )
    .expect("legacy config");
    assert!(
        std::fs::read_to_string(&config)
            .expect("config")
            .contains(&key)
    );
    let moved = home.ok(&["setup", "--non-interactive"]);
    assert!(
        moved.contains("moved the API key out of config.toml"),
        "{moved}"
    );
    assert!(
        !std::fs::read_to_string(&config)
            .expect("config")
            .contains(&key)
    );
    assert_eq!(
        std::fs::read_to_string(&key_file).expect("key file").trim(),
        key
    );

    // A daemon started with no relay in its environment uses what setup wrote.
    home.ok(&["daemon", "start"]);
    let status = home.json(&["daemon", "status"]);
    assert_eq!(status["relay"], relay.http.as_str(), "{status:#}");
    assert_eq!(status["embedded"], false);
    home.ok(&["daemon", "stop"]);
}

/// Issue 15.3: `status`, `doctor` and `config show` say what the running daemon uses and flag a
/// difference from this shell's settings; a revoked key shows as such, and a send then says it
/// was not sent (and why), instead of promising to send "when the link is up".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_running_daemons_relay_and_a_revoked_key_are_what_status_shows() {
    use repowire_e2e::agents::eventually;
    use repowire_e2e::process::{RelayProcess, relay_bin};

    let data = tempfile::tempdir().expect("data");
    let data_dir = data.path().to_str().expect("utf8").to_owned();
    let relay = RelayProcess::start(&relay_bin(), &["--data-dir", &data_dir], &[]).await;
    let key = relay.first_key.clone().expect("key");

    // The daemon is started from a shell with the relay in its environment ...
    let mut home = Home::new(Some((relay.http.clone(), key.clone())));
    home.ok(&["daemon", "start"]);
    eventually("connected", || {
        (home.link_state() == "connected").then_some(())
    })
    .await;
    home.json(&["peer", "list"]);
    assert!(!home.ok(&["status"]).contains("DIFFERS"));

    // ... and looked at from one without it.
    home.set_relay(None);
    let status = home.ok(&["status"]);
    assert!(
        status.contains("DIFFERS")
            && status.contains(&relay.http)
            && status.contains("daemon restart"),
        "{status}"
    );
    let shown = home.ok(&["config", "show"]);
    assert!(
        shown.contains("DIFFERS") && shown.contains(&relay.http),
        "{shown}"
    );
    let doctor = home.repowire(&["doctor"]);
    let said = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        said.contains("this shell's settings say the embedded relay"),
        "{said}"
    );

    // The key is revoked (with the relay's admin CLI, on its data dir).
    home.set_relay(Some((relay.http.clone(), key.clone())));
    let keys = std::process::Command::new(relay_bin())
        .args([
            "admin",
            "key",
            "list",
            "default",
            "--json",
            "--data-dir",
            &data_dir,
        ])
        .env_remove("DATABASE_URL")
        .output()
        .expect("admin");
    let keys: serde_json::Value = serde_json::from_slice(&keys.stdout).expect("json");
    let key_id = keys[0]["id"].as_str().expect("id").to_owned();
    let revoked = std::process::Command::new(relay_bin())
        .args(["admin", "key", "revoke", &key_id, "--data-dir", &data_dir])
        .env_remove("DATABASE_URL")
        .output()
        .expect("admin");
    assert!(revoked.status.success());
    eventually("the daemon sees the revocation", || {
        let status = home.json(&["daemon", "status"]);
        (status["link"]["key_refused"] == true).then_some(())
    })
    .await;
    let status = home.ok(&["status"]);
    assert!(
        status.contains("REVOKED") && status.contains("repowire setup"),
        "{status}"
    );
    let sent = home.repowire(&["peer", "notify", "anyone", "hello?"]);
    let said = String::from_utf8_lossy(&sent.stderr);
    assert!(!sent.status.success(), "{said}");
    assert!(
        said.contains("not sent") && said.contains("repowire setup"),
        "{said}"
    );
    assert!(!said.contains("when the link is up"), "{said}");
    // Reads say so too, not that the link comes back by itself (issue 35.5).
    for args in [&["peer", "list"][..], &["session", "list"]] {
        let out = home.repowire(args);
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}: {said}");
        assert!(
            said.contains("revoked") && !said.contains("reconnects by itself"),
            "{args:?}: {said}"
        );
    }
    assert_eq!(
        home.json(&["daemon", "status"])["outbox"],
        0,
        "nothing kept to send later"
    );
    home.ok(&["daemon", "stop"]);
}

/// Issue 15.4: the hook commands `setup` writes resolve: `repowire` when that name on PATH is
/// this binary, else its absolute path; and when the program is gone (a moved checkout, a
/// `cargo clean`), `doctor` and `status` say so instead of reporting every hook installed.
#[test]
fn hook_commands_resolve_and_broken_ones_are_reported() {
    use std::process::Command;

    use repowire_e2e::agents::bin;

    let home = Home::new(None);
    let settings = home.path().join(".claude/settings.json");
    let commands = || -> Vec<String> {
        let (_, v) = read(&settings);
        v["hooks"]["SessionStart"][0]["hooks"]
            .as_array()
            .expect("our hook")
            .iter()
            .map(|h| h["command"].as_str().expect("command").to_owned())
            .collect()
    };
    let run = |program: &Path, path_var: Option<&Path>, args: &[&str]| {
        let mut c = Command::new(program);
        c.args(args).envs(home.env());
        if let Some(dir) = path_var {
            let path = std::env::var_os("PATH").unwrap_or_default();
            let mut dirs = vec![dir.to_path_buf()];
            dirs.extend(std::env::split_paths(&path));
            c.env("PATH", std::env::join_paths(dirs).expect("PATH"));
        }
        c.output().expect("run")
    };

    // On PATH as `repowire` (a symlink to this very binary): the hook runs `repowire`.
    let on_path = tempfile::tempdir().expect("dir");
    std::os::unix::fs::symlink(bin("repowire"), on_path.path().join("repowire")).expect("link");
    let out = run(
        &bin("repowire"),
        Some(on_path.path()),
        &["setup", "--non-interactive"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(commands()[0].starts_with("repowire "), "{:?}", commands());

    // A copy not on PATH: its absolute path is written ...
    let elsewhere = tempfile::tempdir().expect("dir");
    let copy = elsewhere.path().join("repowire");
    // Copied by `cp`, not `std::fs::copy`: a copy written by this process can be executed
    // while another test thread's fork still holds the write descriptor (ETXTBSY).
    let copied = Command::new("cp")
        .arg(bin("repowire"))
        .arg(&copy)
        .status()
        .expect("cp");
    assert!(copied.success(), "cp failed");
    let out = run(&copy, None, &["setup", "--non-interactive"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let copy_real = std::fs::canonicalize(&copy).expect("real");
    assert!(
        commands()[0].starts_with(copy_real.to_str().expect("utf8")),
        "{:?}",
        commands()
    );
    assert!(!home.ok(&["status"]).contains("BROKEN"));

    // ... and once it is gone, doctor and status say which hooks are broken.
    std::fs::remove_file(&copy).expect("remove");
    let doctor = home.repowire(&["doctor"]);
    let said = String::from_utf8_lossy(&doctor.stdout);
    assert!(!doctor.status.success(), "{said}");
    assert!(
        said.contains("SessionStart runs") && said.contains("does not exist"),
        "{said}"
    );
    let status = home.ok(&["status"]);
    assert!(status.contains("BROKEN"), "{status}");
}

/// `setup --allow-tools` adds exactly our MCP tools to `permissions.allow` (the user's rules
/// kept), once; `doctor` flags their absence and what it costs; `uninstall` takes exactly ours
/// away. A non-interactive setup without the flag, or with `--no-allow-tools`, leaves the
/// permissions alone and says what that costs.
#[test]
fn allow_tools_adds_only_our_tools_and_uninstall_removes_only_them() {
    let home = Home::new(None);
    let claude = home.path().join(".claude");
    std::fs::create_dir_all(&claude).expect("dir");
    let settings = claude.join("settings.json");
    let user = json!({ "allow": ["Bash(ls:*)"], "deny": ["Read(.env)"] });
    std::fs::write(
        &settings,
        serde_json::to_string(&json!({ "permissions": user })).expect("json"),
    )
    .expect("write");

    for flags in [&["--non-interactive"][..], &["--no-allow-tools"][..]] {
        let mut args = vec!["setup"];
        args.extend_from_slice(flags);
        let said = home.ok(&args);
        assert!(said.contains("`repowire setup --allow-tools`"), "{said}");
        assert_eq!(read(&settings).1["permissions"], user, "{flags:?}");
    }
    let doctor = doctor_says(&home);
    assert!(
        doctor.contains("✗ Repowire's MCP tools are allowed without a permission prompt")
            && doctor.contains("waits for a person"),
        "{doctor}"
    );

    let said = home.ok(&["setup", "--allow-tools"]);
    assert!(said.contains("Repowire's tools allowed"), "{said}");
    let allow: Vec<String> =
        serde_json::from_value(read(&settings).1["permissions"]["allow"].clone())
            .expect("allow list");
    assert_eq!(allow[0], "Bash(ls:*)", "the user's rule stays first");
    let ours = &allow[1..];
    for tool in ["ask", "ack", "answer", "notify_peer", "list_peers"] {
        assert!(ours.contains(&format!("mcp__repowire__{tool}")), "{ours:?}");
    }
    assert!(
        ours.iter()
            .all(|e| e.starts_with("mcp__repowire__") && !e.contains('*')),
        "only our own tools, no wildcard: {ours:?}"
    );
    assert_eq!(
        read(&settings).1["permissions"]["deny"],
        json!(["Read(.env)"])
    );
    let backups_before = backups(&claude);
    let again = home.ok(&["setup", "--allow-tools"]);
    assert!(again.contains("already up to date"), "{again}");
    assert_eq!(
        backups(&claude),
        backups_before,
        "nothing written the second time"
    );
    let doctor = doctor_says(&home);
    assert!(
        doctor.contains("✓ Repowire's MCP tools are allowed without a permission prompt"),
        "{doctor}"
    );

    let both = home.repowire(&["setup", "--allow-tools", "--no-allow-tools"]);
    assert!(!both.status.success(), "contradictory flags accepted");

    home.ok(&["uninstall"]);
    assert_eq!(
        read(&settings).1["permissions"],
        user,
        "exactly ours removed"
    );
}

/// At a terminal (a real tmux pane) and without a flag, setup shows the exact entries and asks;
/// the answer decides.
#[test]
fn at_a_terminal_setup_asks_before_allowing_the_tools() {
    use repowire_e2e::agents::{Tmux, bin};
    let home = Home::new(None);
    let settings = home.path().join(".claude/settings.json");
    let tmux = Tmux::start();
    let run = |answer: &str| {
        let pane = tmux.spawn(
            home.path(),
            &home.env(),
            &[
                "sh".into(),
                "-c".into(),
                format!("{} setup; sleep 30", bin("repowire").display()),
            ],
        );
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !tmux.capture(&pane).contains("Allow them? [Y/n]") {
            assert!(
                std::time::Instant::now() < deadline,
                "no question: {}",
                tmux.capture(&pane)
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let screen = tmux.capture(&pane);
        assert!(screen.contains("mcp__repowire__ack"), "{screen}");
        tmux.type_text(&pane, answer);
        tmux.enter(&pane);
        while !tmux.capture(&pane).contains("repowire doctor") {
            assert!(
                std::time::Instant::now() < deadline,
                "{}",
                tmux.capture(&pane)
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        tmux.run(&["kill-pane", "-t", &pane]);
    };
    run("n");
    assert!(read(&settings).1.get("permissions").is_none(), "declined");
    run("y");
    let allow = read(&settings).1["permissions"]["allow"].clone();
    assert!(
        allow
            .as_array()
            .is_some_and(|a| a.contains(&json!("mcp__repowire__answer"))),
        "{allow}"
    );
}

/// Issue 35.2: with `repowire` installed on PATH (as `cargo install` puts it in ~/.cargo/bin),
/// `setup --service` wrote `ExecStart="repowire" daemon run`, which systemd cannot start: it
/// does not search the user's PATH. The unit names the binary by its absolute path (the hooks
/// keep the bare name), and systemd itself accepts it.
#[test]
fn the_service_unit_names_the_binary_by_its_absolute_path_and_systemd_accepts_it() {
    let home = Home::new(None);
    let bin = repowire_e2e::agents::bin("repowire");
    let dir = bin.parent().expect("dir").to_owned();
    let path = std::env::join_paths(std::iter::once(dir).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .expect("PATH");
    let out = home
        .command(&["setup", "--non-interactive", "--service"])
        .env("PATH", &path)
        .output()
        .expect("setup");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let settings =
        std::fs::read_to_string(home.path().join(".claude/settings.json")).expect("settings");
    assert!(
        settings.contains("\"command\": \"repowire "),
        "the hooks keep the bare name on PATH: {settings}"
    );
    let unit_path = home.path().join(".config/systemd/user/repowire.service");
    let unit = std::fs::read_to_string(&unit_path).expect("service unit");
    let exec = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("ExecStart");
    assert!(
        exec.starts_with(&format!("\"{}\"", bin.display())),
        "ExecStart={exec}"
    );
    let verify = std::process::Command::new("systemd-analyze")
        .arg("verify")
        .arg(&unit_path)
        .output()
        .expect("systemd-analyze (scripts/test installs it)");
    assert!(
        verify.status.success(),
        "systemd-analyze verify: {}{}",
        String::from_utf8_lossy(&verify.stdout),
        String::from_utf8_lossy(&verify.stderr)
    );
}

/// Codex (docs/agents/codex.md): setup finds `~/.codex`, adds its hooks after the user's and
/// its MCP server, keeps every byte of the user's file, changes nothing the second time, and
/// uninstall gives the file back byte for byte. A config.toml that is not TOML stops setup
/// before any file (Claude Code's included) is written; `--runtime claude-code` leaves Codex
/// alone.
#[test]
fn setup_wires_codex_beside_the_users_config_and_uninstall_restores_it() {
    let home = Home::new(None);
    let codex = home.path().join(".codex");
    std::fs::create_dir_all(&codex).expect("dir");
    let config = codex.join("config.toml");
    let user = "# mine\nmodel = \"gpt-5\"  # keep\n\n[[hooks.Stop]]\n[[hooks.Stop.hooks]]\ntype = \"command\"\ncommand = \"notify-send done\"\n\n[hooks.state.\"/x/config.toml:stop:0:0\"]\ntrusted_hash = \"sha256:1\"\n";

    // Not TOML: nothing is written anywhere.
    std::fs::write(&config, "model = \n").expect("write");
    let out = home.repowire(&["setup", "--non-interactive"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not valid TOML"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!home.path().join(".claude/settings.json").exists());
    assert_eq!(
        std::fs::read_to_string(&config).expect("read"),
        "model = \n"
    );

    // Named runtimes only.
    std::fs::write(&config, user).expect("write");
    home.ok(&["setup", "--non-interactive", "--runtime", "claude-code"]);
    assert_eq!(std::fs::read_to_string(&config).expect("read"), user);

    let said = home.ok(&["setup", "--non-interactive", "--allow-tools"]);
    assert!(said.contains("Trust all and continue"), "{said}");
    let wired = std::fs::read_to_string(&config).expect("read");
    // The user's lines stay as written; ours come after theirs in each list.
    let (head, state) = user.split_at(user.find("\n[hooks.state").expect("state"));
    assert!(wired.starts_with(head), "{wired}");
    assert!(wired.contains(state.trim()), "{wired}");
    let doc: toml::Table = wired.parse().expect("toml");
    let stops = doc["hooks"]["Stop"].as_array().expect("Stop groups");
    assert_eq!(stops.len(), 2);
    assert!(
        stops[1]["hooks"][0]["command"]
            .as_str()
            .is_some_and(|c| c.ends_with("hook --runtime codex stop")),
        "{wired}"
    );
    assert!(
        doc["hooks"].get("Notification").is_none(),
        "Codex has no Notification"
    );
    assert_eq!(
        doc["mcp_servers"]["repowire"]["args"][0].as_str(),
        Some("mcp")
    );
    assert_eq!(
        doc["mcp_servers"]["repowire"]["default_tools_approval_mode"].as_str(),
        Some("approve")
    );
    let status = home.ok(&["status"]);
    assert!(
        status.contains("codex    4 hooks in")
            && status.contains("(4 not yet trusted in Codex); MCP server registered"),
        "{status}"
    );
    // Doctor says Codex has not trusted them yet.
    let doctor = doctor_says(&home);
    assert!(
        doctor.contains("✗ Codex has trusted Repowire's hooks"),
        "{doctor}"
    );

    let again = home.ok(&["setup", "--non-interactive", "--allow-tools"]);
    assert!(
        again.contains(&format!("{} already up to date", config.display())),
        "{again}"
    );
    assert_eq!(std::fs::read_to_string(&config).expect("read"), wired);

    home.ok(&["uninstall"]);
    assert_eq!(std::fs::read_to_string(&config).expect("read"), user);
}

/// Gemini CLI (docs/agents/gemini-cli.md): setup finds `~/.gemini`, adds one hook group per
/// event with no matcher (a matcher keeps SessionStart and SessionEnd from firing) and
/// timeouts in milliseconds, and the MCP server, trusted only when our tools are allowed;
/// keeps the user's keys; with approvals, a BeforeTool group matched on Gemini's names for the
/// gated tools; uninstall restores it.
#[test]
fn setup_wires_gemini_beside_the_users_settings_and_uninstall_restores_them() {
    let home = Home::new(None);
    let dir = home.path().join(".gemini");
    std::fs::create_dir_all(&dir).expect("dir");
    let settings = dir.join("settings.json");
    let user = json!({
        "model": {"name": "gemini-2.5-pro"},
        "hooks": {"AfterAgent": [{"hooks": [{"type": "command", "command": "notify-send done"}]}]},
        "mcpServers": {"docs": {"command": "docs-mcp"}}
    });
    std::fs::write(&settings, serde_json::to_vec_pretty(&user).expect("json")).expect("write");

    let said = home.ok(&["setup", "--non-interactive", "--approvals"]);
    assert!(said.contains("not trusted in Gemini CLI"), "{said}");
    assert!(
        said.contains("Gemini CLI's run_shell_command, write_file and replace calls wait"),
        "{said}"
    );
    let (_, wired) = read(&settings);
    assert_eq!(wired["model"], user["model"]);
    assert_eq!(wired["mcpServers"]["docs"], user["mcpServers"]["docs"]);
    let after = wired["hooks"]["AfterAgent"].as_array().expect("AfterAgent");
    assert_eq!(after.len(), 2);
    assert_eq!(after[0], user["hooks"]["AfterAgent"][0]);
    for event in ["SessionStart", "BeforeAgent", "AfterAgent", "SessionEnd"] {
        let ours = wired["hooks"][event]
            .as_array()
            .and_then(|a| a.last())
            .unwrap_or_else(|| panic!("no {event}: {wired}"));
        assert!(ours.get("matcher").is_none(), "{event}: {ours}");
        assert_eq!(ours["hooks"][0]["timeout"], 15_000, "{event}");
        assert!(
            ours["hooks"][0]["command"]
                .as_str()
                .is_some_and(|c| c.contains("hook --runtime gemini ")),
            "{ours}"
        );
    }
    let gate = &wired["hooks"]["BeforeTool"][0];
    assert_eq!(gate["matcher"], "run_shell_command|write_file|replace");
    // The default approval timeout (120 s) and 30 s more, in milliseconds.
    assert_eq!(gate["hooks"][0]["timeout"], 150_000);
    assert!(
        gate["hooks"][0]["command"].as_str().is_some_and(
            |c| c.ends_with("hook --runtime gemini pre-tool-use --approval-timeout 120")
        ),
        "{gate}"
    );
    assert!(wired["hooks"].get("Notification").is_none(), "{wired}");
    assert!(wired["mcpServers"]["repowire"].get("trust").is_none());

    let status = home.ok(&["status"]);
    assert!(status.contains("gemini   5 hooks in"), "{status}");
    let doctor = doctor_says(&home);
    assert!(
        doctor.contains("✓ Gemini CLI gates tool calls as config.toml's [approvals] says"),
        "{doctor}"
    );
    // Approvals off: the gate goes; on again for Claude Code alone: doctor says Gemini is not.
    home.ok(&["setup", "--non-interactive", "--no-approvals"]);
    assert!(read(&settings).1["hooks"].get("BeforeTool").is_none());
    home.ok(&[
        "setup",
        "--non-interactive",
        "--runtime",
        "claude-code",
        "--approvals",
    ]);
    let doctor = doctor_says(&home);
    assert!(
        doctor.contains("✗ Gemini CLI gates tool calls as config.toml's [approvals] says"),
        "{doctor}"
    );

    home.ok(&["setup", "--non-interactive", "--allow-tools"]);
    assert!(read(&settings).1["hooks"]["BeforeTool"].is_array());
    let (_, trusted) = read(&settings);
    assert_eq!(trusted["mcpServers"]["repowire"]["trust"], true);
    let again = home.ok(&["setup", "--non-interactive"]);
    assert!(
        again.contains(&format!("{} already up to date", settings.display())),
        "{again}"
    );

    home.ok(&["uninstall"]);
    let (_, restored) = read(&settings);
    assert_eq!(restored, user);
    assert!(
        !std::fs::read_to_string(&settings)
            .expect("read")
            .contains("repowire")
    );
}

/// OpenCode (docs/agents/opencode.md): setup finds its opencode.json, writes our plugin beside
/// the user's plugins and `mcp.repowire` beside the user's servers, and keeps everything else;
/// the plugin gates tool calls only when approvals are on (and doctor says when it does not
/// though they are); a file of that name that is not ours is refused; uninstall restores it.
#[test]
fn setup_wires_opencode_with_a_plugin_and_uninstall_restores_it() {
    let home = Home::new(None);
    let dir = home.path().join(".config/opencode");
    std::fs::create_dir_all(dir.join("plugins")).expect("dir");
    let config = dir.join("opencode.json");
    let plugin = dir.join("plugins/repowire.js");
    let mine = dir.join("plugins/mine.js");
    let user = json!({
        "$schema": "https://opencode.ai/config.json",
        "model": "anthropic/claude-sonnet",
        "plugin": ["opencode-wakatime"],
        "mcp": {"docs": {"type": "local", "command": ["docs-mcp"]}}
    });
    std::fs::write(&config, serde_json::to_vec_pretty(&user).expect("json")).expect("write");
    std::fs::write(&mine, "export const Mine = async () => ({});\n").expect("write");

    let said = home.ok(&["setup", "--non-interactive"]);
    assert!(said.contains(&plugin.display().to_string()), "{said}");
    let (_, wired) = read(&config);
    for key in ["$schema", "model", "plugin"] {
        assert_eq!(wired[key], user[key], "{key}");
    }
    assert_eq!(wired["mcp"]["docs"], user["mcp"]["docs"]);
    let ours = &wired["mcp"]["repowire"];
    assert_eq!(ours["type"], "local");
    assert_eq!(ours["enabled"], true);
    assert_eq!(ours["command"][1], "mcp");
    assert!(
        ours["command"][0]
            .as_str()
            .is_some_and(|c| c.ends_with("/repowire")),
        "{ours}"
    );
    assert_eq!(
        ours["environment"]["REPOWIRE_HOME"],
        home.repowire_home().to_string_lossy().as_ref()
    );
    let source = std::fs::read_to_string(&plugin).expect("our plugin");
    assert!(source.starts_with("// Repowire's OpenCode plugin."));
    assert!(source.contains(r#""approvals":null"#), "{source}");
    assert!(
        source.contains(r#""hook","--runtime","opencode"]"#),
        "{source}"
    );
    assert_eq!(
        std::fs::read_to_string(&mine).expect("mine"),
        "export const Mine = async () => ({});\n"
    );
    let status = home.ok(&["status"]);
    assert!(status.contains("opencode plugin "), "{status}");

    // Approvals turned on for Claude Code alone leave the plugin ungated: doctor says so.
    home.ok(&[
        "setup",
        "--non-interactive",
        "--runtime",
        "claude-code",
        "--approvals",
    ]);
    let doctor = doctor_says(&home);
    assert!(
        doctor.contains("✗ OpenCode gates tool calls as config.toml's [approvals] says"),
        "{doctor}"
    );
    let said = home.ok(&["setup", "--non-interactive"]);
    assert!(
        said.contains("OpenCode's bash, edit and write calls wait"),
        "{said}"
    );
    let gated = std::fs::read_to_string(&plugin).expect("our plugin");
    assert!(
        gated.contains(r#""approvals":{"timeout_seconds":"#),
        "{gated}"
    );
    let doctor = doctor_says(&home);
    assert!(
        doctor.contains("✓ OpenCode gates tool calls as config.toml's [approvals] says"),
        "{doctor}"
    );
    let again = home.ok(&["setup", "--non-interactive"]);
    assert!(
        again.contains(&format!("{} already up to date", config.display())),
        "{again}"
    );
    assert_eq!(std::fs::read_to_string(&plugin).expect("plugin"), gated);

    home.ok(&["uninstall"]);
    let (_, restored) = read(&config);
    assert_eq!(restored, user);
    assert!(!plugin.exists(), "our plugin stays after uninstall");
    assert!(mine.exists(), "the user's plugin went");

    // A plugins/repowire.js that is not ours stops setup with nothing changed.
    std::fs::write(&plugin, "export const Other = async () => ({});\n").expect("write");
    let before = std::fs::read(&config).expect("config");
    let refused = home.repowire(&["setup", "--non-interactive", "--runtime", "opencode"]);
    assert!(!refused.status.success(), "{refused:?}");
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("is not Repowire's plugin"), "{err}");
    assert_eq!(std::fs::read(&config).expect("config"), before);
    assert_eq!(
        std::fs::read_to_string(&plugin).expect("theirs"),
        "export const Other = async () => ({});\n"
    );
}

/// An opencode.json that setup cannot edit any more (OpenCode allows comments in it) does not
/// keep uninstall from removing our plugin, which would otherwise gate tools with nobody to ask
/// once `repowire` is gone; the file itself is left as it is, and uninstall says so.
#[test]
fn uninstall_removes_the_opencode_plugin_even_when_opencode_json_has_comments() {
    let home = Home::new(None);
    let dir = home.path().join(".config/opencode");
    std::fs::create_dir_all(&dir).expect("dir");
    let config = dir.join("opencode.json");
    std::fs::write(&config, "{}\n").expect("write");
    home.ok(&[
        "setup",
        "--non-interactive",
        "--runtime",
        "opencode",
        "--approvals",
    ]);
    let plugin = dir.join("plugins/repowire.js");
    assert!(plugin.exists());
    let commented = "// the user's own notes\n{\"mcp\": {}}\n";
    std::fs::write(&config, commented).expect("write");
    let said = home.ok(&["uninstall"]);
    assert!(
        said.contains("OpenCode's MCP entry `repowire` left in place"),
        "{said}"
    );
    assert!(!plugin.exists(), "our plugin stays");
    assert_eq!(std::fs::read_to_string(&config).expect("read"), commented);
}

/// What `repowire doctor` printed for `home`.
fn doctor_says(home: &Home) -> String {
    String::from_utf8_lossy(&home.repowire(&["doctor"]).stdout).into_owned()
}
