//! Issue 15.10: machine-readable output where people and scripts both look (`status`,
//! `doctor`, `config show`), completions and a man page from the same definitions as the
//! commands, and `--version` with the git revision everywhere.

use repowire_e2e::agents::Home;
use repowire_e2e::process::relay_bin;
use serde_json::Value;

fn json_of(out: &std::process::Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[test]
fn status_doctor_and_config_show_speak_json() {
    let home = Home::new(None);
    home.ok(&["setup", "--non-interactive"]);
    home.ok(&["daemon", "start"]);
    let status = json_of(&home.repowire(&["status", "--json"]));
    assert_eq!(
        status["hooks"]["installed"].as_array().map(Vec::len),
        Some(5)
    );
    assert_eq!(status["mcp_registered"], true);
    assert_eq!(status["daemon"]["relay"], "the embedded relay");
    assert!(status["relay_drift"].is_null());

    let doctor = home.repowire(&["doctor", "--json"]);
    let report = json_of(&doctor);
    let checks = report["checks"].as_array().expect("checks");
    assert!(checks.iter().all(|c| c["check"].is_string()));
    assert_eq!(report["ok"], doctor.status.success());

    let config = json_of(&home.repowire(&["config", "show", "--json"]));
    assert_eq!(config["relay"]["embedded"], true);
    assert_eq!(config["daemon"]["differs"], false);
    home.ok(&["daemon", "stop"]);
}

#[test]
fn completions_man_page_and_versions_come_from_the_commands() {
    let home = Home::new(None);
    let bash = home.ok(&["completions", "bash"]);
    assert!(
        bash.contains("_repowire()") && bash.contains("outbox"),
        "{bash}"
    );
    for shell in ["zsh", "fish"] {
        assert!(home.ok(&["completions", shell]).contains("repowire"));
    }
    let man = home.ok(&["man"]);
    assert!(
        man.contains(".TH repowire") && man.contains("setup"),
        "{man}"
    );

    let revision = |text: &str| {
        let inside = text
            .split_once('(')
            .and_then(|(_, r)| r.split_once(')'))
            .map(|(r, _)| r.to_owned())
            .unwrap_or_default();
        assert!(
            inside == "unknown revision"
                || (inside.len() == 12 && inside.chars().all(|c| c.is_ascii_hexdigit())),
            "{text}"
        );
    };
    revision(&home.ok(&["--version"]));
    revision(&home.ok(&["peer", "--version"]));
    let relay = std::process::Command::new(relay_bin())
        .arg("--version")
        .output()
        .expect("relay");
    revision(&String::from_utf8_lossy(&relay.stdout));
}
