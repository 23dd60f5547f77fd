//! A `repowire` binary upgraded while its daemon runs: the CLI names the daemon's build and
//! says how to restart it, instead of talking past it (an older daemon ignores request fields
//! it does not know). The older build is played by a socket in the daemon's place that
//! answers `status` as daemons did before they reported their version; a real daemon of this
//! build is the counter-check.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;

use repowire_e2e::agents::Home;

/// Answers every request on `home`'s daemon socket with an older daemon's `status`.
fn older_daemon(home: &Home) -> std::thread::JoinHandle<()> {
    std::fs::create_dir_all(home.repowire_home()).expect("home");
    let listener = UnixListener::bind(home.repowire_home().join("daemon.sock")).expect("socket");
    let status = serde_json::json!({ "ok": true, "result": {
        "pid": std::process::id(),
        "home": home.repowire_home(),
        "relay": "http://127.0.0.1:9",
        "embedded": true,
        "link": { "state": "connected", "tenant_id": "tnt-local" },
        "outbox": 0,
        "queued_elsewhere": [],
        "sessions": [],
        "wakes": {},
    }});
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut line = String::new();
            if BufReader::new(&stream).read_line(&mut line).is_ok() {
                let _ = writeln!(stream, "{status}");
            }
        }
    })
}

fn text(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn a_daemon_of_another_build_is_named_with_the_restart_that_fixes_it() {
    let home = Home::new(None);
    let _daemon = older_daemon(&home);
    let restart = "repowire daemon restart";

    let status = home.ok(&["daemon", "status"]);
    assert!(
        status.contains("version  DIFFERS: the daemon runs an older build")
            && status.contains(restart),
        "{status}"
    );
    let overview = home.ok(&["status"]);
    assert!(overview.contains("version  DIFFERS"), "{overview}");
    let json = home.json(&["status"]);
    assert!(json["version_drift"]["daemon"].is_string(), "{json}");

    let start = home.repowire(&["daemon", "start"]);
    assert!(!start.status.success());
    let said = text(&start);
    assert!(
        said.contains("already running")
            && said.contains("not this binary's")
            && said.contains(restart),
        "{said}"
    );

    let doctor = text(&home.repowire(&["doctor"]));
    assert!(
        doctor.contains("the running daemon is this binary's version") && doctor.contains(restart),
        "{doctor}"
    );
}

#[test]
fn a_daemon_of_this_build_reports_the_version_the_binary_reports() {
    let home = Home::new(None);
    home.install_and_start();
    let version = home.ok(&["--version"]);
    let status = home.json(&["daemon", "status"]);
    let daemon = status["version"].as_str().expect("version reported");
    assert_eq!(version.trim(), format!("repowire {daemon}"));
    let printed = home.ok(&["daemon", "status"]);
    assert!(printed.contains(&format!("version  {daemon}")), "{printed}");
    assert!(!home.ok(&["status"]).contains("DIFFERS"));
    home.ok(&["daemon", "stop"]);
}
