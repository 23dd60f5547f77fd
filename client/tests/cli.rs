//! The `repowire` binary's own command-line behaviour, without a daemon: configuration is
//! resolved and shown with the key redacted, a broken config file is a clear error, and peer
//! commands say how to start the daemon. (Cross-process scenarios live in `tests/`.)

use std::process::{Command, Output};

fn repowire(home: &std::path::Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_repowire"))
        .args(args)
        .env("HOME", home)
        .env("REPOWIRE_HOME", home.join(".repowire"))
        .env_remove("REPOWIRE_RELAY_URL")
        .env_remove("REPOWIRE_API_KEY")
        .output()
        .expect("run repowire")
}

#[test]
fn config_show_resolves_file_and_environment_and_redacts_the_key() {
    let home = tempfile::tempdir().expect("home");
    std::fs::create_dir_all(home.path().join(".repowire")).expect("dir");
    std::fs::write(
        home.path().join(".repowire/config.toml"),
        "[relay]\nurl = \"https://relay.example.com/\"\napi_key = \"rw_live_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789ab\"\n[daemon]\ncircle = \"web\"\n",
    )
    .expect("config");
    let out = repowire(home.path(), &["config", "show"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("relay       https://relay.example.com"),
        "{text}"
    );
    assert!(text.contains("circle      web"), "{text}");
    assert!(
        !text.contains("QRSTUVWXYZ0123456789ab"),
        "the API key leaked: {text}"
    );

    let embedded = tempfile::tempdir().expect("home");
    let out = repowire(embedded.path(), &["config", "show"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("embedded"));
}

#[test]
fn a_broken_config_file_is_a_clear_error() {
    let home = tempfile::tempdir().expect("home");
    std::fs::create_dir_all(home.path().join(".repowire")).expect("dir");
    std::fs::write(
        home.path().join(".repowire/config.toml"),
        "[relay]\nurl = \n",
    )
    .expect("config");
    let out = repowire(home.path(), &["config", "show"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("config.toml"));

    std::fs::write(
        home.path().join(".repowire/config.toml"),
        "[relay]\nurl = \"https://r\"\n",
    )
    .expect("config");
    let out = repowire(home.path(), &["config", "show"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no API key"));

    std::fs::write(
        home.path().join(".repowire/config.toml"),
        "[files]\nreadable = [\"relative/dir\"]\n",
    )
    .expect("config");
    let out = repowire(home.path(), &["config", "show"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not an absolute path"));
}

#[test]
fn peer_commands_without_a_daemon_say_how_to_start_it() {
    let home = tempfile::tempdir().expect("home");
    let out = repowire(home.path(), &["peer", "list"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("daemon is not running") && err.contains("repowire daemon start"),
        "{err}"
    );
}

/// Issue 35.8: piping to `head` made `repowire` panic (exit 101) or print "Broken pipe" (exit
/// 1). A closed stdout now ends it quietly, as it ends every Unix tool: with the status a shell
/// reports for SIGPIPE (141), nothing on stderr.
#[test]
fn a_closed_stdout_ends_the_command_quietly() {
    let home = tempfile::tempdir().expect("home");
    for args in [
        &["man"][..],
        &["completions", "bash"],
        &["config", "show"],
        &["config", "show", "--json"],
    ] {
        // The read end is closed before the command runs: its first write fails.
        let (reader, writer) = std::io::pipe().expect("pipe");
        drop(reader);
        let out = Command::new(env!("CARGO_BIN_EXE_repowire"))
            .args(args)
            .env("HOME", home.path())
            .env("REPOWIRE_HOME", home.path().join(".repowire"))
            .env_remove("REPOWIRE_RELAY_URL")
            .env_remove("REPOWIRE_API_KEY")
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .output()
            .expect("run repowire");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(141), "{args:?}: {stderr}");
        assert!(stderr.is_empty(), "{args:?}: {stderr}");
    }
}

/// Issue 35.15: the man page refers to a page per subcommand (`repowire-daemon(1)` …);
/// `repowire man --dir` writes every one of them, so none is missing.
#[test]
fn every_man_page_the_man_page_refers_to_is_written() {
    let home = tempfile::tempdir().expect("home");
    let dir = home.path().join("man1");
    let out = repowire(home.path(), &["man", "--dir", dir.to_str().expect("utf8")]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pages: Vec<_> = std::fs::read_dir(&dir)
        .expect("dir")
        .map(|e| e.expect("entry").path())
        .collect();
    assert!(
        pages
            .iter()
            .any(|p| p.ends_with("repowire-daemon-restart.1")),
        "{pages:?}"
    );
    let mut references = 0;
    for page in &pages {
        let text = std::fs::read_to_string(page).expect("page");
        // A reference is a line `repowire\-daemon(1)` (roff escapes the hyphens).
        for line in text.lines() {
            if let Some(name) = line.trim().strip_suffix("(1)") {
                let file = format!(
                    "{}.1",
                    name.replace("\\-", "-")
                        .replace("\\fB", "")
                        .replace("\\fR", "")
                );
                assert!(
                    dir.join(&file).exists(),
                    "{} refers to {file}, which is missing",
                    page.display()
                );
                references += 1;
            }
        }
    }
    assert!(references > 10, "{references} references found");
    // On stdout: the same page as the file, so `repowire man | man -l -` refers to the same.
    let stdout = repowire(home.path(), &["man"]);
    assert_eq!(
        String::from_utf8_lossy(&stdout.stdout),
        std::fs::read_to_string(dir.join("repowire.1")).expect("main page")
    );
}
