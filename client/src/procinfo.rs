//! Process facts from /proc: parents, names, liveness. Used as identity proof (the agent
//! process that ran a hook, the pane that runs it), never as a hint to guess from.

use std::path::Path;

/// True if the process exists.
pub fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Fields of /proc/PID/stat after `(comm)`: index 0 is field 3 (`state`).
fn stat_field(pid: u32, field: usize) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid …`; comm may itself contain spaces and parentheses.
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(field - 3)?.parse().ok()
}

/// The parent of `pid`.
pub fn parent(pid: u32) -> Option<u32> {
    stat_field(pid, 4).and_then(|p| u32::try_from(p).ok())
}

/// When `pid` started (clock ticks since boot): with the pid, it names one process even after
/// the pid is reused.
pub fn start_time(pid: u32) -> Option<i64> {
    stat_field(pid, 22).and_then(|t| i64::try_from(t).ok())
}

/// True if `pid` is alive and is the process that started at `start` (when known).
pub fn same_process(pid: u32, start: Option<i64>) -> bool {
    match start {
        Some(start) => start_time(pid) == Some(start),
        None => alive(pid),
    }
}

/// True if `pid`'s process group is the foreground group of its terminal: keystrokes into its
/// terminal reach it (and not a shell that took the foreground, e.g. after Ctrl-Z).
pub fn in_foreground(pid: u32) -> bool {
    match (stat_field(pid, 5), stat_field(pid, 8)) {
        (Some(pgrp), Some(tpgid)) => pgrp == tpgid,
        _ => false,
    }
}

/// The controlling terminal of `pid` (its device number), or `None` when it has none.
pub fn tty(pid: u32) -> Option<u64> {
    stat_field(pid, 7).filter(|&t| t != 0)
}

/// The short command name of `pid`.
pub fn comm(pid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|s| s.trim().to_owned())
}

/// `pid`'s ancestors, nearest first, excluding `pid` and pid 1.
pub fn ancestors(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut current = pid;
    while let Some(p) = parent(current) {
        if p <= 1 || out.contains(&p) || out.len() > 64 {
            break;
        }
        out.push(p);
        current = p;
    }
    out
}

const SHELLS: &[&str] = &["sh", "bash", "dash", "zsh", "fish", "ksh"];

/// The agent process behind a hook: the hook's nearest ancestor that is not a shell (runtimes
/// run hook commands through `sh -c`).
pub fn agent_of_hook(hook_pid: u32) -> Option<u32> {
    ancestors(hook_pid)
        .into_iter()
        .find(|&p| comm(p).is_none_or(|c| !SHELLS.contains(&c.as_str())))
}

/// Programs that host terminals and are never the agent behind a hook: a hook whose nearest
/// non-shell ancestor is one of them was run by hand in a terminal.
const TERMINAL_HOSTS: &[&str] = &["tmux", "screen", "sshd", "login", "mosh-server", "systemd"];

/// True if `pid` is a terminal host (tmux's server calls itself `tmux: server`).
pub fn is_terminal_host(pid: u32) -> bool {
    comm(pid).is_some_and(|c| {
        TERMINAL_HOSTS
            .iter()
            .any(|h| c == *h || c.starts_with(&format!("{h}:")))
    })
}

/// `pid` and its descendants, breadth first (from a scan of /proc).
pub fn tree(pid: u32) -> Vec<u32> {
    let mut parents: Vec<(u32, u32)> = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for entry in dir.flatten() {
            if let Some(p) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
                && let Some(pp) = parent(p)
            {
                parents.push((p, pp));
            }
        }
    }
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() {
        let current = out[i];
        out.extend(
            parents
                .iter()
                .filter(|(_, pp)| *pp == current)
                .map(|(p, _)| *p),
        );
        i += 1;
    }
    out
}

/// The first process of `pid`'s tree that is not a shell: the program a pane runs.
pub fn program_in(pid: u32) -> Option<u32> {
    tree(pid)
        .into_iter()
        .find(|&p| comm(p).is_some_and(|c| !SHELLS.contains(&c.as_str())))
}

/// The command line of `pid` (its arguments), if it is readable.
pub fn cmdline(pid: u32) -> Option<Vec<String>> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(
        raw.split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect(),
    )
}

/// True if `ancestor` is `pid` or one of its ancestors.
pub fn is_self_or_ancestor(ancestor: u32, pid: u32) -> bool {
    ancestor == pid || ancestors(pid).contains(&ancestor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_own_process_has_a_live_parent_chain() {
        let me = std::process::id();
        assert!(alive(me));
        let parent = parent(me).expect("a parent");
        assert!(ancestors(me).first() == Some(&parent));
        assert!(is_self_or_ancestor(parent, me));
        assert!(is_self_or_ancestor(me, me));
        assert!(!is_self_or_ancestor(me, parent));
    }

    #[test]
    fn start_time_names_one_process() {
        let me = std::process::id();
        let start = start_time(me);
        assert!(start.is_some());
        assert!(same_process(me, start));
        assert!(!same_process(me, start.map(|s| s + 1)));
    }

    #[test]
    fn a_missing_process_is_not_alive_and_has_no_parent() {
        assert!(!alive(u32::MAX - 1));
        assert_eq!(parent(u32::MAX - 1), None);
    }
}
