//! How `setup` writes the agent runtimes' own files: only when they changed, atomically, after
//! a timestamped backup (the newest few kept), and never over a change the runtime made
//! meanwhile.

use std::path::Path;

use anyhow::Context;

/// Backups of one file kept beside it; older ones are removed when a new one is made.
const KEPT_BACKUPS: usize = 5;

/// Removes all but the `keep` newest `<file>.repowire-backup-<ms>` files beside `path` (best
/// effort: a backup that cannot be removed stays).
fn prune_backups(path: &Path, keep: usize) {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) else {
        return;
    };
    let prefix = format!("{name}.repowire-backup-");
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut backups: Vec<(u64, std::path::PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let stamp = e
                .file_name()
                .to_str()?
                .strip_prefix(&prefix)?
                .parse()
                .ok()?;
            Some((stamp, e.path()))
        })
        .collect();
    backups.sort();
    let excess = backups.len().saturating_sub(keep);
    for (_, old) in backups.into_iter().take(excess) {
        let _ = std::fs::remove_file(old);
    }
}

/// Writes `text` to `path`: backup first (when the file `existed`), then the new content
/// staged beside it and renamed over it (see [`repowire_files`]), the mode kept. Gives up,
/// changing nothing, when `unchanged` says the file changed since it was read (`runtime` is
/// who may have written it).
pub(super) fn write_text(
    path: &Path,
    existed: bool,
    text: &str,
    runtime: &str,
    unchanged: impl Fn(&Path) -> anyhow::Result<bool>,
) -> anyhow::Result<()> {
    // A symlinked file (dotfile managers) is updated where it lives; the link stays.
    let staged = repowire_files::stage(path, text.as_bytes(), repowire_files::Mode::Keep)
        .with_context(|| format!("writing {}", path.display()))?;
    let path = staged.target().to_path_buf();
    let path = path.as_path();
    if existed {
        let stamp = crate::daemon::store::now_ms();
        let backup = path.with_file_name(format!(
            "{}.repowire-backup-{stamp}",
            path.file_name().and_then(|n| n.to_str()).unwrap_or("file")
        ));
        std::fs::copy(path, &backup).with_context(|| format!("backing up {}", path.display()))?;
        prune_backups(path, KEPT_BACKUPS);
    }
    // Dropping `staged` removes its file.
    if !unchanged(path)? {
        anyhow::bail!(
            "{} changed while it was being updated (is {runtime} writing it?); nothing was changed — run the command again",
            path.display()
        );
    }
    staged
        .commit()
        .with_context(|| format!("replacing {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 35.9: every setup change left a backup and none was ever removed.
    #[test]
    fn only_the_newest_backups_are_kept() {
        let dir = tempfile::tempdir().expect("dir");
        let file = dir.path().join("settings.json");
        std::fs::write(&file, "{}").expect("file");
        for stamp in [5_u64, 1, 30, 4, 2, 100, 7] {
            std::fs::write(
                dir.path()
                    .join(format!("settings.json.repowire-backup-{stamp}")),
                "{}",
            )
            .expect("backup");
        }
        std::fs::write(dir.path().join("other.json.repowire-backup-1"), "{}").expect("other");
        prune_backups(&file, 3);
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .expect("dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                "other.json.repowire-backup-1",
                "settings.json",
                "settings.json.repowire-backup-100",
                "settings.json.repowire-backup-30",
                "settings.json.repowire-backup-7",
            ]
        );
    }
}
