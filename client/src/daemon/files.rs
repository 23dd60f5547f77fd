//! `read_peer_file` for peers on this machine: a file of a local session's project, only if
//! the daemon's `[files] readable` lists that project, confined to its root (no `..`, no
//! absolute paths, no symlink escape, no dotfiles unless allowed), size-capped, text only.
//! Every refusal says why.

use std::path::{Component, Path};

use serde_json::{Value, json};

use super::{Daemon, ops};
use crate::api::ApiError;

fn refuse(message: String) -> ApiError {
    ApiError::new("file_refused", message)
}

/// Checks `relative` against the policy and reads it from `root`.
pub fn read_confined(
    root: &Path,
    relative: &str,
    max_bytes: u64,
    allow_dotfiles: bool,
) -> Result<(String, u64), ApiError> {
    let rel = Path::new(relative);
    if relative.is_empty() || rel.is_absolute() {
        return Err(refuse(format!(
            "`{relative}` must be a path relative to the project root"
        )));
    }
    for component in rel.components() {
        match component {
            Component::Normal(name) => {
                if !allow_dotfiles && name.to_string_lossy().starts_with('.') {
                    return Err(refuse(format!(
                        "`{relative}` is or is under a dotfile; those are not shared (secrets such as .env live there)"
                    )));
                }
            }
            Component::CurDir => {}
            _ => {
                return Err(refuse(format!(
                    "`{relative}` leaves the project root (`..` is not allowed)"
                )));
            }
        }
    }
    let root = std::fs::canonicalize(root)
        .map_err(|e| refuse(format!("the project root is not readable: {e}")))?;
    let full = std::fs::canonicalize(root.join(rel))
        .map_err(|e| refuse(format!("`{relative}` cannot be read: {e}")))?;
    if !full.starts_with(&root) {
        return Err(refuse(format!(
            "`{relative}` resolves outside the project root (a symlink escape)"
        )));
    }
    let meta = std::fs::metadata(&full).map_err(|e| refuse(format!("`{relative}`: {e}")))?;
    if !meta.is_file() {
        return Err(refuse(format!("`{relative}` is not a regular file")));
    }
    if meta.len() > max_bytes {
        return Err(refuse(format!(
            "`{relative}` is too big ({} bytes; the limit is {max_bytes})",
            meta.len()
        )));
    }
    let bytes = std::fs::read(&full).map_err(|e| refuse(format!("`{relative}`: {e}")))?;
    let text =
        String::from_utf8(bytes).map_err(|_| refuse(format!("`{relative}` is not UTF-8 text")))?;
    Ok((text, meta.len()))
}

impl Daemon {
    /// Reads `path` from the project of peer `peer` for the acting session.
    pub async fn read_peer_file(
        &self,
        from: Option<&str>,
        caller_pid: Option<u32>,
        peer: &str,
        path: &str,
    ) -> Result<Value, ApiError> {
        // Resolved by the relay (visibility, ambiguity) like any other recipient.
        let visible = self.peers(from, caller_pid, true, false, None).await?;
        let matches: Vec<&Value> = visible
            .as_array()
            .map(|a| {
                a.iter()
                    .filter(|p| p["peer_id"] == peer || p["name"] == peer)
                    .collect()
            })
            .unwrap_or_default();
        let target = match matches.as_slice() {
            [one] => (*one).clone(),
            [] => {
                return Err(ApiError::new(
                    "unknown_peer",
                    format!("no visible peer `{peer}`"),
                ));
            }
            many => {
                let mut e = ApiError::new(
                    "ambiguous_peer",
                    format!("`{peer}` names {} peers; use a peer id", many.len()),
                );
                e.candidates = many.iter().map(|p| (*p).clone()).collect();
                return Err(e);
            }
        };
        let peer_id = target["peer_id"].as_str().unwrap_or_default();
        let sessions = self
            .store
            .active_sessions()
            .await
            .map_err(ops::store_error)?;
        let Some(session) = sessions
            .iter()
            .find(|s| s.peer_id.as_deref() == Some(peer_id))
        else {
            return Err(refuse(format!(
                "@{} is on another machine; reading files across machines is not supported yet",
                target["name"].as_str().unwrap_or(peer)
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
                target["name"].as_str().unwrap_or(peer)
            )));
        }
        let (text, size) = read_confined(
            Path::new(root),
            path,
            policy.max_bytes,
            policy.allow_dotfiles,
        )?;
        Ok(json!({ "peer": target, "path": path, "bytes": size, "content": text }))
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

        let read = |p: &str| read_confined(&root, p, 1024, false);
        assert_eq!(read("src/lib.rs").expect("allowed").0, "fn main() {}");
        for (path, why) in [
            ("../outside.txt", "`..`"),
            ("/etc/passwd", "relative"),
            ("escape.txt", "symlink escape"),
            (".env", "dotfile"),
            ("big.txt", "too big"),
            ("missing.txt", "cannot be read"),
            ("src", "not a regular file"),
        ] {
            let e = read(path).expect_err(path);
            assert!(e.message.contains(why), "{path}: {}", e.message);
        }
        assert!(read_confined(&root, ".env", 1024, true).is_ok());
    }
}
