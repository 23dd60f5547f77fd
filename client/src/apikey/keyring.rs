//! The OS keyring, through the keyring-rs crates (`keyring-core` with one store per OS): the
//! Secret Service over D-Bus on Linux (`zbus-secret-service-keyring-store`, pure Rust: no
//! libdbus to link), the login Keychain on macOS (`apple-native-keyring-store`). One entry per
//! state directory: service `repowire`, account `relay-api-key <home>` (Secret Service
//! attributes `service` and `username`), so two homes on one account (tests, a second
//! identity) keep two keys.
//!
//! Every call runs on a thread of its own with a deadline: a keyring that shows an unlock
//! prompt nobody sees (a locked collection over SSH) must not hang `setup` or the daemon's
//! start; it fails with words instead.

use std::path::Path;
use std::time::Duration;

/// The entry's service name.
const SERVICE: &str = "repowire";
/// How long one keyring call may take before it counts as unavailable.
const DEADLINE: Duration = Duration::from_secs(10);

/// The keyring of this OS, in words.
pub const NAME: &str = if cfg!(target_os = "macos") {
    "the macOS Keychain"
} else {
    "the Secret Service keyring"
};

/// The entry's user name for a state directory.
pub fn user(home: &Path) -> String {
    format!("relay-api-key {}", home.display())
}

/// Where the key is, in words (`config show`, `setup`).
pub fn describe(home: &Path) -> String {
    format!("{NAME} (service `{SERVICE}`, account `{}`)", user(home))
}

/// Why the keyring could not be used, in words.
#[derive(Debug, thiserror::Error)]
pub enum KeyringError {
    /// This build has no keyring for this OS.
    #[error("this build has no keyring support for this OS")]
    Unsupported,
    /// The keyring did not answer in time (a locked keyring waiting on a prompt, say).
    #[error("{NAME} did not answer within {}s (locked, waiting for an unlock prompt?)", DEADLINE.as_secs())]
    Timeout,
    /// The keyring answered with an error.
    #[error("{NAME}: {0}")]
    Failed(String),
}

/// The stored key, `None` when the entry does not exist.
pub fn read(home: &Path) -> Result<Option<String>, KeyringError> {
    let user = user(home);
    with_deadline(move || match os::entry(&user)?.get_password() {
        Ok(key) => Ok(Some(key.trim().to_owned()).filter(|k| !k.is_empty())),
        Err(keyring_core::Error::NoEntry) => Ok(None),
        Err(e) => Err(KeyringError::Failed(e.to_string())),
    })
}

/// Stores `key`, then reads it back: a keyring that takes a write but cannot give it back (a
/// store without persistence) does not count.
pub fn write(home: &Path, key: &str) -> Result<(), KeyringError> {
    let user = user(home);
    let key = key.to_owned();
    with_deadline(move || {
        let entry = os::entry(&user)?;
        entry
            .set_password(&key)
            .map_err(|e| KeyringError::Failed(e.to_string()))?;
        match entry.get_password() {
            Ok(back) if back == key => Ok(()),
            Ok(_) => Err(KeyringError::Failed(
                "the key read back differs from the key stored".into(),
            )),
            Err(e) => Err(KeyringError::Failed(e.to_string())),
        }
    })
}

/// Removes the entry; one that does not exist is removed already.
pub fn remove(home: &Path) -> Result<(), KeyringError> {
    let user = user(home);
    with_deadline(move || match os::entry(&user)?.delete_credential() {
        Ok(()) | Err(keyring_core::Error::NoEntry) => Ok(()),
        Err(e) => Err(KeyringError::Failed(e.to_string())),
    })
}

/// Runs `call` on a thread of its own and waits up to [`DEADLINE`] for it. A call past the
/// deadline is left to finish (or not) on its own; nothing waits for it.
fn with_deadline<T: Send + 'static>(
    call: impl FnOnce() -> Result<T, KeyringError> + Send + 'static,
) -> Result<T, KeyringError> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name("keyring".into())
        .spawn(move || {
            let _ = tx.send(call());
        })
        .map_err(|e| KeyringError::Failed(format!("starting a thread: {e}")))?;
    rx.recv_timeout(DEADLINE)
        .map_err(|_| KeyringError::Timeout)?
}

#[cfg(target_os = "linux")]
mod os {
    use super::{KeyringError, SERVICE};

    pub(super) fn entry(user: &str) -> Result<keyring_core::Entry, KeyringError> {
        let store: std::sync::Arc<keyring_core::CredentialStore> =
            zbus_secret_service_keyring_store::Store::new()
                .map_err(|e| KeyringError::Failed(e.to_string()))?;
        // The label is what a keyring manager (Seahorse, KWalletManager) lists.
        let label = format!("Repowire {user}");
        let modifiers = std::collections::HashMap::from([("label", label.as_str())]);
        keyring_core::Entry::new_in_store_with_modifiers(&store, SERVICE, user, &modifiers)
            .map_err(|e| KeyringError::Failed(e.to_string()))
    }
}

#[cfg(target_os = "macos")]
mod os {
    use super::{KeyringError, SERVICE};

    pub(super) fn entry(user: &str) -> Result<keyring_core::Entry, KeyringError> {
        let store: std::sync::Arc<keyring_core::CredentialStore> =
            apple_native_keyring_store::keychain::Store::new()
                .map_err(|e| KeyringError::Failed(e.to_string()))?;
        keyring_core::Entry::new_in_store(&store, SERVICE, user)
            .map_err(|e| KeyringError::Failed(e.to_string()))
    }
}

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
mod os {
    use super::KeyringError;

    pub(super) fn entry(_user: &str) -> Result<keyring_core::Entry, KeyringError> {
        Err(KeyringError::Unsupported)
    }
}
