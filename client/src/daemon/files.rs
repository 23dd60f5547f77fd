//! `read_peer_file` for peers on this machine: a file of a local session's project, only if
//! the daemon's `[files] readable` lists that project, confined to its root (no `..`, no
//! absolute paths, no symlink escape, no dotfiles unless allowed), size-capped, text only.
//! Every refusal says why.

use std::path::{Component, Path};

use super::{Daemon, errors};
use crate::api::ApiError;

fn refuse(message: String) -> ApiError {
    ApiError::new(crate::api::DaemonCode::FileRefused, message)
}

fn has_dot_component(path: &Path) -> bool {
    path.components().any(|c| match c {
        Component::Normal(name) => name.to_string_lossy().starts_with('.'),
        _ => false,
    })
}

/// Checks `relative` against the policy and reads it from `root` (already canonical).
///
/// The file is opened without following a final symlink and without blocking (a FIFO cannot
/// stall the daemon), and the path the open file really has (`/proc/self/fd`) is checked
/// again, so swapping a path component for a symlink between the checks and the open cannot
/// leak anything outside the root. Files with other hard links are refused: a hard link to a
/// file outside the project looks like a project file otherwise.
pub fn read_confined(
    root: &Path,
    relative: &str,
    max_bytes: u64,
    allow_dotfiles: bool,
) -> Result<(String, u64), ApiError> {
    use std::io::Read;
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let rel = Path::new(relative);
    if relative.is_empty() || rel.is_absolute() {
        return Err(refuse(format!(
            "`{relative}` must be a path relative to the project root"
        )));
    }
    for component in rel.components() {
        match component {
            Component::Normal(_) | Component::CurDir => {}
            _ => {
                return Err(refuse(format!(
                    "`{relative}` leaves the project root (`..` is not allowed)"
                )));
            }
        }
    }
    let dotfile = || {
        refuse(format!(
            "`{relative}` is or is under a dotfile; those are not shared (secrets such as .env live there)"
        ))
    };
    if !allow_dotfiles && has_dot_component(rel) {
        return Err(dotfile());
    }
    // One answer for "missing" and "outside": nothing about paths outside the root leaks.
    let unavailable = || refuse(format!("`{relative}` was not found in the project"));
    let inside = |p: &Path| -> Result<(), ApiError> {
        let within = p.strip_prefix(root).map_err(|_| unavailable())?;
        if !allow_dotfiles && has_dot_component(within) {
            return Err(dotfile());
        }
        Ok(())
    };
    let full = std::fs::canonicalize(root.join(rel)).map_err(|_| unavailable())?;
    inside(&full)?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(&full)
        .map_err(|_| unavailable())?;
    let opened = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
        .map_err(|_| unavailable())?;
    inside(&opened)?;
    let meta = file.metadata().map_err(|_| unavailable())?;
    if !meta.is_file() {
        return Err(refuse(format!("`{relative}` is not a regular file")));
    }
    if meta.nlink() > 1 {
        return Err(refuse(format!(
            "`{relative}` has other hard links; such files are not shared"
        )));
    }
    if meta.len() > max_bytes {
        return Err(refuse(format!(
            "`{relative}` is too big ({} bytes; the limit is {max_bytes})",
            meta.len()
        )));
    }
    let mut bytes = Vec::new();
    file.take(max_bytes + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| refuse(format!("`{relative}`: {e}")))?;
    if bytes.len() as u64 > max_bytes {
        return Err(refuse(format!(
            "`{relative}` is too big (it grew past the limit of {max_bytes} bytes)"
        )));
    }
    let size = bytes.len() as u64;
    let text =
        String::from_utf8(bytes).map_err(|_| refuse(format!("`{relative}` is not UTF-8 text")))?;
    Ok((text, size))
}

impl Daemon {
    /// Reads `path` from the project of peer `peer` for the acting session.
    pub async fn read_peer_file(
        &self,
        from: Option<&str>,
        caller_pid: Option<u32>,
        peer: &str,
        path: &str,
    ) -> Result<crate::api::FileRead, ApiError> {
        // Resolved by the relay (visibility, ambiguity) like any other recipient.
        let visible = self.peers(from, caller_pid, true, false, None).await?;
        let matches: Vec<&repowire_protocol::PeerInfo> = visible
            .iter()
            .map(|p| &p.peer)
            .filter(|p| p.peer_id.as_str() == peer || p.name == peer)
            .collect();
        let target = match matches.as_slice() {
            [one] => *one,
            [] => {
                return Err(ApiError::new(
                    repowire_protocol::ErrorCode::UnknownPeer,
                    format!("no visible peer `{peer}`"),
                ));
            }
            many => {
                let mut e = ApiError::new(
                    repowire_protocol::ErrorCode::AmbiguousPeer,
                    format!("`{peer}` names {} peers; use a peer id", many.len()),
                );
                e.candidates = many.iter().map(|p| serde_json::json!(p)).collect();
                return Err(e);
            }
        };
        let peer_id = target.peer_id.as_str();
        let sessions = self
            .store
            .active_sessions()
            .await
            .map_err(errors::store_error)?;
        let Some(session) = sessions
            .iter()
            .find(|s| s.peer_id.as_deref() == Some(peer_id))
        else {
            return Err(refuse(format!(
                "@{} is on another machine; reading files across machines is not supported yet",
                target.name
            )));
        };
        let root = session
            .path
            .as_deref()
            .ok_or_else(|| refuse("that peer has no project directory".into()))?;
        let policy = &self.settings.files;
        let canonical_root = std::fs::canonicalize(root).ok();
        let allowed = policy.readable.iter().any(|r| {
            std::fs::canonicalize(r)
                .ok()
                .is_some_and(|r| Some(&r) == canonical_root.as_ref())
        });
        if !allowed {
            return Err(refuse(format!(
                "@{}'s daemon does not share files of {root} (add it to `[files] readable` in its config.toml)",
                target.name
            )));
        }
        let Some(canonical_root) = canonical_root else {
            return Err(refuse("the project directory is gone".into()));
        };
        let (path_owned, max, dots) = (path.to_owned(), policy.max_bytes, policy.allow_dotfiles);
        let read = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            tokio::task::spawn_blocking(move || {
                read_confined(&canonical_root, &path_owned, max, dots)
            }),
        )
        .await
        .map_err(|_| refuse(format!("reading `{path}` took too long")))?
        .map_err(|e| refuse(format!("reading `{path}` failed: {e}")))?;
        let (text, size) = read?;
        Ok(crate::api::FileRead {
            peer: target.clone(),
            path: path.to_owned(),
            bytes: size,
            content: text,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confinement_refuses_every_escape_and_reads_the_allowed() {
        let dir = tempfile::tempdir().expect("tmp");
        let root = dir.path().join("proj");
        std::fs::create_dir_all(root.join("src")).expect("dir");
        std::fs::write(root.join("src/lib.rs"), "fn main() {}").expect("write");
        std::fs::write(root.join(".env"), "SECRET=1").expect("write");
        std::fs::write(dir.path().join("outside.txt"), "no").expect("write");
        std::os::unix::fs::symlink(dir.path().join("outside.txt"), root.join("escape.txt"))
            .expect("symlink");
        std::fs::write(root.join("big.txt"), "x".repeat(2048)).expect("write");

        std::os::unix::fs::symlink(".env", root.join("notes.txt")).expect("symlink");
        std::fs::write(dir.path().join("secret"), "outside").expect("write");
        std::fs::hard_link(dir.path().join("secret"), root.join("hard.txt")).expect("hard link");
        let fifo = std::process::Command::new("mkfifo")
            .arg(root.join("pipe"))
            .status()
            .expect("mkfifo");
        assert!(fifo.success());
        let root = std::fs::canonicalize(&root).expect("root");
        let read = |p: &str| read_confined(&root, p, 1024, false);
        assert_eq!(read("src/lib.rs").expect("allowed").0, "fn main() {}");
        for (path, why) in [
            ("../outside.txt", "`..`"),
            ("/etc/passwd", "relative"),
            ("escape.txt", "not found in the project"),
            (".env", "dotfile"),
            ("notes.txt", "dotfile"),
            ("hard.txt", "hard links"),
            ("big.txt", "too big"),
            ("missing.txt", "not found in the project"),
            ("src", "not a regular file"),
            ("pipe", "not a regular file"),
        ] {
            let e = read(path).expect_err(path);
            assert!(e.message.contains(why), "{path}: {}", e.message);
        }
        assert!(read_confined(&root, ".env", 1024, true).is_ok());
    }
}
