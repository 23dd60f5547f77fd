//! The embedded relay's data directory and the secret files a relay writes: the directory is
//! private to its user (0700), secrets are 0600 and written whole (a temporary file renamed into
//! place), and one serving process holds the directory at a time (an exclusive lock), because
//! two relays on one SQLite file would each believe they own its peers.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Why the data directory cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum DataDirError {
    /// Another process serves this directory.
    #[error(
        "another repowire-relay{holder} is serving {dir}; stop it first, or give this one another --data-dir"
    )]
    Busy {
        /// The directory.
        dir: PathBuf,
        /// ` (pid N)` when the lock file names it.
        holder: String,
    },
    /// A filesystem error.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// On which path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

fn io<'p>(what: &'static str, path: &'p Path) -> impl FnOnce(std::io::Error) -> DataDirError + 'p {
    move |source| DataDirError::Io {
        what,
        path: path.to_owned(),
        source,
    }
}

/// Creates `dir` (and missing parents) private to this user, or makes an existing one private.
pub fn ensure_private_dir(dir: &Path) -> Result<(), DataDirError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io("creating", dir))?;
    let mode = std::fs::metadata(dir)
        .map_err(io("reading", dir))?
        .permissions()
        .mode();
    if mode & 0o077 != 0 {
        match std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)) {
            Ok(()) => {
                tracing::info!(dir = %dir.display(), "data directory made private to its user (0700)");
            }
            // A mounted volume (a Kubernetes emptyDir or PVC, a container volume) belongs to
            // root, with this user's group at most: it cannot be made private, and need not
            // be, since nothing else runs in the pod and every file the relay writes in it is
            // 0600. Seen with the image run read-only as uid 10001 (scripts/image).
            Err(e)
                if e.kind() == std::io::ErrorKind::PermissionDenied && !owned_by_this_user(dir) =>
            {
                tracing::warn!(
                    dir = %dir.display(),
                    mode = format!("{:o}", mode & 0o777),
                    "the data directory belongs to another user (a mounted volume) and is left as it is; the files the relay writes in it are private (0600)"
                );
            }
            Err(e) => return Err(io("making private", dir)(e)),
        }
    }
    Ok(())
}

/// Whether `path` is owned by this process's user (`/proc/self` is owned by it).
fn owned_by_this_user(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(path), std::fs::metadata("/proc/self")) {
        (Ok(p), Ok(me)) => p.uid() == me.uid(),
        _ => true,
    }
}

/// An exclusive hold of a lock file; released when dropped (or when the process ends, however
/// it ends).
#[derive(Debug)]
pub struct FileLock {
    _file: File,
}

/// Why a lock file could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another process holds it.
    #[error("held by another process{}", .pid.map(|p| format!(" (pid {p})")).unwrap_or_default())]
    Held {
        /// The holder, as it recorded itself in the file.
        pid: Option<u32>,
    },
    /// A filesystem error.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Takes `path` (created 0600 if missing) for this process, recording its pid in it, or says
/// which process holds it. The relay holds its data directory this way, the client daemon its
/// home.
pub fn lock_file(path: &Path) -> Result<FileLock, LockError> {
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            // The kernel knows the holder even before it has written its pid into the file.
            let pid = flock_holder(&file).or_else(|| {
                let mut pid = String::new();
                let _ = file.read_to_string(&mut pid);
                pid.trim().parse().ok()
            });
            return Err(LockError::Held { pid });
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(e.into()),
    }
    // Ours now: record who holds it, for the message the next one prints.
    file.set_len(0)?;
    file.rewind()?;
    write!(file, "{}", std::process::id())?;
    file.sync_all()?;
    Ok(FileLock { _file: file })
}

/// The process holding an exclusive `flock` on `file`, from `/proc/locks` (Linux), matched by
/// device and inode.
fn flock_holder(file: &File) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let meta = file.metadata().ok()?;
    let dev = meta.dev();
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    let id = format!("{major:02x}:{minor:02x}:{}", meta.ino());
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    locks.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // `1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF` (a blocked waiter has `->` first).
        (fields.get(1) == Some(&"FLOCK") && fields.get(5) == Some(&id.as_str()))
            .then(|| fields.get(4)?.parse().ok())
            .flatten()
    })
}

/// Takes the data directory for this process, or says which process holds it.
pub fn lock(dir: &Path) -> Result<FileLock, DataDirError> {
    let path = dir.join("relay.lock");
    lock_file(&path).map_err(|e| match e {
        LockError::Held { pid } => DataDirError::Busy {
            dir: dir.to_owned(),
            holder: pid.map(|p| format!(" (pid {p})")).unwrap_or_default(),
        },
        LockError::Io(source) => DataDirError::Io {
            what: "locking",
            path,
            source,
        },
    })
}

/// Writes a secret file: 0600 from its first byte, complete or not at all (a temporary file
/// beside it, synced, then renamed over `path`).
pub fn write_secret(path: &Path, contents: &str) -> Result<(), DataDirError> {
    repowire_files::replace_exact(path, contents.as_bytes(), repowire_files::Mode::Private)
        .map_err(io("writing", path))
}

/// The JWT signing secret of a relay on embedded storage (the relay binary without
/// `REPOWIRE_JWT_SECRET`, and the daemon's in-process relay): 48 random bytes, hex, generated
/// once into `dir/jwt-secret` (0600) and read back on every later start, so tokens outlive a
/// restart. One implementation for both, so both get the same strength.
pub fn embedded_jwt_secret(dir: &Path) -> Result<Vec<u8>, DataDirError> {
    let path = dir.join("jwt-secret");
    if let Ok(existing) = std::fs::read_to_string(&path) {
        return Ok(existing.trim().as_bytes().to_vec());
    }
    let secret: String = (0..48)
        .map(|_| format!("{:02x}", rand::random::<u8>()))
        .collect();
    write_secret(&path, &secret)?;
    Ok(secret.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_on_the_same_directory_is_refused_with_the_holders_pid() {
        let dir = tempfile::tempdir().expect("tmp");
        let held = lock(dir.path()).expect("first");
        let err = lock(dir.path()).expect_err("second");
        let text = err.to_string();
        assert!(
            text.contains(&format!("pid {}", std::process::id())),
            "{text}"
        );
        drop(held);
        lock(dir.path()).expect("free again once the holder is gone");
    }

    #[test]
    fn the_data_directory_and_secrets_are_private() {
        let base = tempfile::tempdir().expect("tmp");
        let dir = base.path().join("data");
        std::fs::create_dir(&dir).expect("dir");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        ensure_private_dir(&dir).expect("private");
        let mode = |p: &Path| std::fs::metadata(p).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        let secret = dir.join("key");
        std::fs::write(&secret, "old").expect("write");
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        write_secret(&secret, "new").expect("secret");
        assert_eq!(mode(&secret), 0o600);
        assert_eq!(std::fs::read_to_string(&secret).expect("read"), "new");
        let left: Vec<_> = std::fs::read_dir(&dir).expect("ls").collect();
        assert_eq!(left.len(), 1, "no temporary file is left behind");
    }
}
