//! The key in a file of its own, `~/.repowire/relay-api-key`, readable by this user only
//! (0600): where no OS keyring answers, or where `setup --key-store file` puts it.

use std::path::{Path, PathBuf};

use anyhow::Context;

/// The key file of a state directory.
pub fn path(home: &Path) -> PathBuf {
    home.join("relay-api-key")
}

/// The stored key, if there is one (surrounding whitespace dropped).
pub fn read(home: &Path) -> anyhow::Result<Option<String>> {
    let path = path(home);
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok(Some(text.trim().to_owned()).filter(|k| !k.is_empty())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// Stores `key` (0600, written whole).
pub fn write(home: &Path, key: &str) -> anyhow::Result<()> {
    crate::config::ensure_home(home)?;
    let path = path(home);
    crate::config::write_private(&path, &format!("{key}\n"))
        .with_context(|| format!("writing {}", path.display()))
}

/// Removes the key file; a missing one is removed already.
pub fn remove(home: &Path) -> anyhow::Result<()> {
    let path = path(home);
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("removing {}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_written_for_its_owner_only_and_read_back() {
        use std::os::unix::fs::PermissionsExt;
        let home = tempfile::tempdir().expect("home");
        assert_eq!(read(home.path()).expect("read"), None);
        write(home.path(), "rw_live_abc").expect("write");
        assert_eq!(
            read(home.path()).expect("read").as_deref(),
            Some("rw_live_abc")
        );
        let mode = std::fs::metadata(path(home.path()))
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
