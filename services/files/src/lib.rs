//! The one way Repowire writes a file someone else must not see half-written or redirect: the
//! client's user files (Claude Code's settings.json and ~/.claude.json, the systemd unit, key
//! and secret files) and the relay's data-directory secrets (JWT secret, bootstrap key), so that a crash, a concurrent reader or another local user can never
//! see or cause a half-written or misdirected file:
//! - the new content goes to a temporary file created exclusively (`O_EXCL`, an unpredictable
//!   name) in the target's own directory, so a symlink planted where a temporary file will be is
//!   never followed;
//! - its mode is set before any content is written: the target's current mode, or 0600 for
//!   secrets whatever the target had;
//! - file and directory are synced, and the file is renamed over the target: readers see the old
//!   content or the new, never a mix;
//! - a target that is a symlink (dotfile managers) is written where it points; the link stays.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The mode the written file gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The target's current mode; 0600 for a new file.
    Keep,
    /// 0600, whatever the target had (keys, secrets).
    Private,
}

/// New content, written and synced beside its target, not yet in place. Dropping it removes
/// the temporary file.
#[derive(Debug)]
pub struct Staged {
    file: tempfile::NamedTempFile,
    target: PathBuf,
}

/// Writes `contents` to a temporary file beside `path` (see the module docs).
pub fn stage(path: &Path, contents: &[u8], mode: Mode) -> std::io::Result<Staged> {
    let target = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    stage_at(target, contents, mode, true)
}

/// Replaces the file at `path` itself with `contents` in one step: a symlink there is
/// replaced, never followed, and the directory must exist. For a service's own files in a
/// directory it made private (the relay's secrets): a link planted at the path cannot send
/// the content elsewhere.
pub fn replace_exact(path: &Path, contents: &[u8], mode: Mode) -> std::io::Result<()> {
    stage_at(path.to_path_buf(), contents, mode, false)?.commit()
}

fn stage_at(
    target: PathBuf,
    contents: &[u8],
    mode: Mode,
    create_dirs: bool,
) -> std::io::Result<Staged> {
    let dir = target
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if create_dirs {
        std::fs::create_dir_all(dir)?;
    }
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let bits = match mode {
        Mode::Private => 0o600,
        Mode::Keep => std::fs::metadata(&target)
            .map(|m| m.permissions().mode() & 0o7777)
            .unwrap_or(0o600),
    };
    let mut file = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".repowire-tmp")
        .permissions(std::fs::Permissions::from_mode(0o600))
        .tempfile_in(dir)?;
    file.as_file()
        .set_permissions(std::fs::Permissions::from_mode(bits))?;
    file.write_all(contents)?;
    file.as_file().sync_all()?;
    Ok(Staged { file, target })
}

impl Staged {
    /// Where it goes.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Renames it over the target and syncs the directory.
    pub fn commit(self) -> std::io::Result<()> {
        let dir = self
            .target
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        self.file.persist(&self.target).map_err(|e| e.error)?;
        std::fs::File::open(dir)?.sync_all()
    }
}

/// Replaces `path`'s content with `contents` in one step (see the module docs).
pub fn replace(path: &Path, contents: &[u8], mode: Mode) -> std::io::Result<()> {
    stage(path, contents, mode)?.commit()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode_of(p: &Path) -> u32 {
        std::fs::metadata(p).expect("meta").permissions().mode() & 0o777
    }

    /// The old writer used `.NAME.repowire-tmp-PID` and followed whatever was there: a link
    /// planted at that name made it write into the link's target.
    #[test]
    fn an_exact_replace_replaces_a_planted_symlink_and_leaves_its_target_alone() {
        let dir = tempfile::tempdir().expect("test setup");
        let elsewhere = dir.path().join("elsewhere");
        std::fs::write(&elsewhere, "theirs").expect("test setup");
        let secret = dir.path().join("bootstrap-key");
        std::os::unix::fs::symlink(&elsewhere, &secret).expect("test setup");
        replace_exact(&secret, b"rw_live_x", Mode::Private).expect("test setup");
        assert_eq!(
            std::fs::read_to_string(&elsewhere).expect("test setup"),
            "theirs"
        );
        let meta = std::fs::symlink_metadata(&secret).expect("test setup");
        assert!(meta.is_file(), "the link itself was replaced by a file");
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(
            std::fs::read_to_string(&secret).expect("test setup"),
            "rw_live_x"
        );
        let missing = dir.path().join("no-such-dir").join("secret");
        assert!(replace_exact(&missing, b"x", Mode::Private).is_err());
    }

    #[test]
    fn a_symlink_planted_at_the_old_temporary_name_is_not_followed() {
        let dir = tempfile::tempdir().expect("tmp");
        let settings = dir.path().join("settings.json");
        std::fs::write(&settings, "{}").expect("settings");
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "untouched").expect("victim");
        let planted = dir.path().join(format!(
            ".settings.json.repowire-tmp-{}",
            std::process::id()
        ));
        std::os::unix::fs::symlink(&victim, &planted).expect("plant");

        replace(&settings, b"{\"new\": true}", Mode::Keep).expect("write");
        assert_eq!(std::fs::read_to_string(&victim).expect("read"), "untouched");
        assert_eq!(
            std::fs::read_to_string(&settings).expect("read"),
            "{\"new\": true}"
        );
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .expect("ls")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(left.len(), 3, "no temporary file left behind: {left:?}");
    }

    #[test]
    fn a_key_file_that_was_world_readable_is_0600_after_a_write() {
        let dir = tempfile::tempdir().expect("tmp");
        let key = dir.path().join("api-key");
        std::fs::write(&key, "old").expect("key");
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        replace(&key, b"rw_live_new", Mode::Private).expect("write");
        assert_eq!(mode_of(&key), 0o600);
        assert_eq!(std::fs::read_to_string(&key).expect("read"), "rw_live_new");
    }

    #[test]
    fn the_targets_mode_is_kept_and_a_symlinked_target_is_written_where_it_lives() {
        let dir = tempfile::tempdir().expect("tmp");
        let real = dir.path().join("dotfiles-settings.json");
        std::fs::write(&real, "{}").expect("real");
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o640)).expect("chmod");
        let link = dir.path().join("settings.json");
        std::os::unix::fs::symlink(&real, &link).expect("link");
        replace(&link, b"[1]", Mode::Keep).expect("write");
        assert!(
            std::fs::symlink_metadata(&link)
                .expect("meta")
                .file_type()
                .is_symlink(),
            "the link stays"
        );
        assert_eq!(std::fs::read_to_string(&real).expect("read"), "[1]");
        assert_eq!(mode_of(&real), 0o640);
    }

    #[test]
    fn an_abandoned_write_leaves_the_target_and_no_temporary_file() {
        let dir = tempfile::tempdir().expect("tmp");
        let target = dir.path().join("claude.json");
        std::fs::write(&target, "before").expect("target");
        let staged = stage(&target, b"after", Mode::Keep).expect("stage");
        drop(staged);
        assert_eq!(std::fs::read_to_string(&target).expect("read"), "before");
        assert_eq!(std::fs::read_dir(dir.path()).expect("ls").count(), 1);
    }
}
