//! The tmux commands the client uses, built with `tmux_interface` and run asynchronously.
//! Every command addresses the tmux server the agent runs under (the socket from its `TMUX`
//! variable), so a session on a non-default server is reached correctly.

use std::path::Path;
use std::process::Stdio;

use tmux_interface::{
    DisplayMessage, ListPanes, LoadBuffer, PasteBuffer, SendKeys, Tmux, TmuxCommand,
};

/// Why a tmux command failed.
#[derive(Debug, thiserror::Error)]
pub enum TmuxError {
    /// tmux could not be started.
    #[error("cannot run tmux: {0}")]
    Spawn(#[from] std::io::Error),
    /// tmux ran and refused.
    #[error("tmux {command} failed: {stderr}")]
    Failed {
        /// Which command.
        command: &'static str,
        /// What tmux said.
        stderr: String,
    },
}

/// Facts about one pane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaneInfo {
    /// `%N`.
    pub pane_id: String,
    /// The process tmux started in the pane.
    pub pid: u32,
    /// In copy-mode (or another mode) right now.
    pub in_mode: bool,
    /// The pane's process has exited.
    pub dead: bool,
    /// Input is off (`select-pane -d`): keys sent to it are dropped.
    pub input_off: bool,
    /// The foreground command's name.
    pub command: String,
    /// The pane's working directory.
    pub path: String,
}

const PANE_FORMAT: &str = "#{pane_id}\t#{pane_pid}\t#{pane_in_mode}\t#{pane_dead}\t#{pane_input_off}\t#{pane_current_command}\t#{pane_current_path}";

fn parse_pane(line: &str) -> Option<PaneInfo> {
    let mut f = line.split('\t');
    Some(PaneInfo {
        pane_id: f.next()?.to_owned(),
        pid: f.next()?.parse().ok()?,
        in_mode: f.next()? == "1",
        dead: f.next()? == "1",
        input_off: f.next()? == "1",
        command: f.next()?.to_owned(),
        path: f.next().unwrap_or("").to_owned(),
    })
}

/// The socket path in a `TMUX` value (`/tmp/tmux-1000/default,1234,0`).
pub fn socket_of(tmux_env: &str) -> Option<String> {
    tmux_env
        .split(',')
        .next()
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

async fn run(
    socket: Option<&str>,
    name: &'static str,
    command: impl Into<TmuxCommand<'_>>,
) -> Result<String, TmuxError> {
    let mut tmux = Tmux::new();
    if let Some(s) = socket {
        tmux = tmux.socket_path(s.to_owned());
    }
    let mut cmd: std::process::Command = tmux.command(command).into();
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out = tokio::process::Command::from(cmd).output().await?;
    if !out.status.success() {
        return Err(TmuxError::Failed {
            command: name,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// One pane's facts.
pub async fn pane(socket: Option<&str>, pane: &str) -> Result<PaneInfo, TmuxError> {
    let out = run(
        socket,
        "display-message",
        DisplayMessage::new()
            .print()
            .target_pane(pane.to_owned())
            .message(PANE_FORMAT)
            .build(),
    )
    .await?;
    parse_pane(out.trim_end()).ok_or(TmuxError::Failed {
        command: "display-message",
        stderr: format!("unexpected answer `{}`", out.trim()),
    })
}

/// Every pane of the server.
pub async fn panes(socket: Option<&str>) -> Result<Vec<PaneInfo>, TmuxError> {
    let out = run(
        socket,
        "list-panes",
        ListPanes::new().all().format(PANE_FORMAT).build(),
    )
    .await?;
    Ok(out.lines().filter_map(parse_pane).collect())
}

/// Opens a window (in the background) running `shell_command` in `cwd`, with `env` set in it;
/// returns its pane id. The window joins the server's current session.
pub async fn new_window(
    socket: Option<&str>,
    cwd: &str,
    shell_command: &str,
    env: &[(&str, String)],
) -> Result<String, TmuxError> {
    let mut cmd = TmuxCommand::new_full("new-window");
    cmd.push_flag("-d")
        .push_flag("-P")
        .push_option("-F", "#{pane_id}")
        .push_option("-c", cwd.to_owned());
    for (k, v) in env {
        cmd.push_option("-e", format!("{k}={v}"));
    }
    cmd.push_param(shell_command.to_owned());
    run(socket, "new-window", cmd)
        .await
        .map(|out| out.trim().to_owned())
}

/// Leaves copy-mode (or any mode) so typed text reaches the program.
pub async fn leave_mode(socket: Option<&str>, pane: &str) -> Result<(), TmuxError> {
    // The one command not built with tmux_interface's builder: in 0.4 its `SendKeys` names
    // the two flags the wrong way round (`copy_mode()` emits -R, `reset()` emits -X), so it
    // is spelled out here as tmux reads it: send-keys -X -t PANE cancel.
    let mut cmd = TmuxCommand::new_full("send-keys");
    cmd.push_flag("-X")
        .push_option("-t", pane.to_owned())
        .push_param("cancel");
    run(socket, "send-keys -X cancel", cmd).await.map(drop)
}

/// Pastes `text` into the pane through a named buffer with bracketed paste, then deletes the
/// buffer. `file` is a private scratch file the text is loaded from.
pub async fn paste(
    socket: Option<&str>,
    pane: &str,
    buffer: &str,
    text: &str,
    file: &Path,
) -> Result<(), TmuxError> {
    crate::config::write_private(file, text)?;
    let loaded = run(
        socket,
        "load-buffer",
        LoadBuffer::new()
            .buffer_name(buffer.to_owned())
            .path(file.to_string_lossy().into_owned())
            .build(),
    )
    .await;
    let _ = std::fs::remove_file(file);
    loaded?;
    run(
        socket,
        "paste-buffer",
        PasteBuffer::new()
            .delete()
            .bracket_codes()
            .buffer_name(buffer.to_owned())
            .target_pane(pane.to_owned())
            .build(),
    )
    .await
    .map(drop)
}

/// A client attached to the server: a terminal a person may type into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientInfo {
    /// The pane the client shows (its window's active pane); keys typed there go to it.
    pub pane_id: String,
    /// When the client last sent a key (Unix seconds). `send-keys` does not move it.
    pub activity_secs: i64,
    /// `root`, or the table of a key binding half typed (`prefix` …).
    pub key_table: String,
}

const CLIENT_FORMAT: &str = "#{pane_id}\t#{client_activity}\t#{client_key_table}";

fn parse_client(line: &str) -> Option<ClientInfo> {
    let mut f = line.split('\t');
    Some(ClientInfo {
        pane_id: f.next()?.to_owned(),
        activity_secs: f.next()?.parse().ok()?,
        key_table: f.next()?.to_owned(),
    })
}

/// Every client of the server (all sessions, grouped ones too).
pub async fn clients(socket: Option<&str>) -> Result<Vec<ClientInfo>, TmuxError> {
    let mut cmd = TmuxCommand::new_full("list-clients");
    cmd.push_option("-F", CLIENT_FORMAT);
    let out = run(socket, "list-clients", cmd).await?;
    Ok(out.lines().filter_map(parse_client).collect())
}

/// The pane's visible text with its colours (`capture-pane -p -e`): Codex tells its
/// placeholder from typed text only by drawing it dim.
pub async fn capture(socket: Option<&str>, pane: &str) -> Result<String, TmuxError> {
    let mut cmd = TmuxCommand::new_full("capture-pane");
    cmd.push_flag("-p")
        .push_flag("-e")
        .push_option("-t", pane.to_owned());
    run(socket, "capture-pane", cmd).await
}

/// Presses Backspace `count` times in the pane (takes back text the daemon typed).
pub async fn backspace(socket: Option<&str>, pane: &str, count: usize) -> Result<(), TmuxError> {
    let mut cmd = TmuxCommand::new_full("send-keys");
    cmd.push_option("-N", count.to_string())
        .push_option("-t", pane.to_owned())
        .push_param("BSpace");
    run(socket, "send-keys BSpace", cmd).await.map(drop)
}

/// Shows `text` for `seconds` on the status line of the clients that show the pane's session
/// (none attached: nothing shown). Never keystrokes: the pane's program sees nothing. `#` is
/// doubled, so the text is never read as a tmux format (`#(…)` would run a command).
pub async fn display_message(
    socket: Option<&str>,
    pane: &str,
    text: &str,
    seconds: u32,
) -> Result<(), TmuxError> {
    let mut cmd = TmuxCommand::new_full("display-message");
    cmd.push_option("-t", pane.to_owned())
        .push_option("-d", (u64::from(seconds) * 1000).to_string())
        .push_param(literal(text));
    run(socket, "display-message", cmd).await.map(drop)
}

/// `text` as tmux shows it literally in a format: every `#` doubled.
fn literal(text: &str) -> String {
    text.replace('#', "##")
}

/// Presses Enter in the pane.
pub async fn enter(socket: Option<&str>, pane: &str) -> Result<(), TmuxError> {
    let keys = SendKeys::new()
        .target_pane(pane.to_owned())
        .key("Enter")
        .build();
    run(socket, "send-keys Enter", keys).await.map(drop)
}

/// The installed tmux's version (`tmux -V`), if tmux runs at all (for `doctor`).
pub fn version() -> Option<String> {
    let mut cmd: std::process::Command = Tmux::new().version().into();
    let out = cmd.stdin(Stdio::null()).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pane_lines_parse() {
        let p = parse_pane("%3\t4242\t1\t0\t0\tclaude\t/home/a/web").expect("parses");
        assert_eq!(p.pane_id, "%3");
        assert_eq!(p.pid, 4242);
        assert!(p.in_mode && !p.dead && !p.input_off);
        assert_eq!(p.command, "claude");
        assert!(parse_pane("garbage").is_none());
    }

    #[test]
    fn client_lines_parse() {
        let c = parse_client("%7\t1795577674\tprefix").expect("parses");
        assert_eq!(c.pane_id, "%7");
        assert_eq!(c.activity_secs, 1_795_577_674);
        assert_eq!(c.key_table, "prefix");
        assert!(parse_client("%7\tsoon\troot").is_none());
    }

    #[test]
    fn socket_comes_from_the_tmux_variable() {
        assert_eq!(
            socket_of("/tmp/tmux-0/default,99,0").as_deref(),
            Some("/tmp/tmux-0/default")
        );
        assert_eq!(socket_of(""), None);
    }

    #[test]
    fn a_status_line_notice_is_never_a_format() {
        assert_eq!(
            literal("a #(rm -rf ~) #{pane_id} ##"),
            "a ##(rm -rf ~) ##{pane_id} ####"
        );
    }
}
