//! `repowire dashboard`: prints (or opens) a one-time link that signs a browser in to the
//! relay's dashboard as the person at this machine. The daemon mints it with its key, and only
//! for a command run at a terminal of its own (see `daemon::dashboard`).

use std::process::ExitCode;
use std::time::Duration;

use crate::api::{DashboardLink, Request};
use crate::config::Config;

/// How long to wait for the daemon and the relay.
const TIMEOUT: Duration = Duration::from_secs(15);

/// `repowire dashboard [--open] [--json]`.
pub fn run(config: &Config, open: bool, json: bool) -> anyhow::Result<ExitCode> {
    let link: DashboardLink = super::call_as(config, &Request::DashboardLink, TIMEOUT)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&link)?);
        return Ok(ExitCode::SUCCESS);
    }
    let secs = (link.expires_at_ms - repowire_relay::ids::now_ms()).max(0) / 1000;
    if open {
        match open_in_browser(&link.url) {
            Ok(()) => {
                println!(
                    "opened the dashboard's sign-in page in your browser (the link works once, for {secs} s)"
                );
                return Ok(ExitCode::SUCCESS);
            }
            Err(why) => eprintln!("could not open a browser ({why}); open the link yourself:"),
        }
    }
    println!(
        "Open this link in your browser within {secs} s; it signs one browser in, once:\n\n  {}\n",
        link.url
    );
    Ok(ExitCode::SUCCESS)
}

/// Opens `url` with the desktop's handler (`open` on macOS, `xdg-open` elsewhere).
fn open_in_browser(url: &str) -> Result<(), String> {
    let program = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    let status = std::process::Command::new(program)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .map_err(|e| format!("{program}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{program} exited with {status}"))
    }
}
