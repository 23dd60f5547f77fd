//! Where this machine keeps its relay API key (issue 35.10: the Repowire plan says keys are not
//! stored in plain-text config). Two places, and config.toml's `[relay] key_store` says which
//! one `setup` chose:
//!
//! - **the OS keyring** ([`keyring`]): the Secret Service (GNOME Keyring, KWallet) on a Linux
//!   desktop, the login Keychain on macOS; `setup` uses it when one answers;
//! - **a file of its own** ([`file`]), `~/.repowire/relay-api-key`, readable by this user only
//!   (0600): on a server, in a container, over SSH without a session bus.
//!
//! `--api-key`/`REPOWIRE_API_KEY` wins over both, and a key an older `setup` left in config.toml
//! (`[relay] api_key`) is still read until the next `setup` moves it. `config show` says where
//! the key is and never prints it.

pub mod file;
pub mod keyring;

use std::path::Path;

use serde::{Deserialize, Serialize};

/// Where `setup` stored the key (config.toml's `[relay] key_store`; absent means the file, as
/// before there was a choice).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyStore {
    /// The OS keyring.
    Keyring,
    /// `~/.repowire/relay-api-key` (0600).
    File,
}

/// `setup --key-store`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum KeyStoreChoice {
    /// The OS keyring when one answers, else the file.
    #[default]
    Auto,
    /// The OS keyring, or fail.
    Keyring,
    /// The file, even where a keyring answers.
    File,
}

/// Where a key in use came from (`config show`, `doctor`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// `--api-key` or `REPOWIRE_API_KEY`.
    Given,
    /// config.toml's `[relay] api_key`, written by an older `setup`.
    ConfigToml,
    /// The OS keyring.
    Keyring,
    /// The key file.
    File,
}

impl KeySource {
    /// Where, in words.
    pub fn describe(&self, home: &Path) -> String {
        match self {
            Self::Given => "given by --api-key or REPOWIRE_API_KEY".into(),
            Self::ConfigToml => {
                "in config.toml (an older setup's; `repowire setup` moves it out)".into()
            }
            Self::Keyring => format!("in {}", keyring::describe(home)),
            Self::File => format!("in {} (readable only by you)", file::path(home).display()),
        }
    }
}

/// The stored key (`None` when `setup` stored none), read from where config.toml says.
pub fn read(home: &Path, store: Option<KeyStore>) -> anyhow::Result<Option<String>> {
    match store {
        Some(KeyStore::Keyring) => keyring::read(home).map_err(|e| {
            anyhow::anyhow!(
                "{e}; the API key is in the OS keyring (config.toml says `key_store = \"keyring\"`): unlock it, or store the key in a file instead with `repowire setup --relay-url URL --api-key KEY --key-store file`"
            )
        }),
        Some(KeyStore::File) | None => file::read(home),
    }
}

/// What [`save`] did.
#[derive(Debug)]
pub struct Saved {
    /// Where the key is now.
    pub store: KeyStore,
    /// Why the keyring was not used, when `auto` fell back to the file.
    pub keyring_unavailable: Option<String>,
}

/// Stores `key` where `choice` says. The copy in the other place, if any, stays until
/// [`remove_previous`] (called once config.toml names the new place, so that an interruption
/// never leaves config.toml pointing at a removed copy).
pub fn save(home: &Path, key: &str, choice: KeyStoreChoice) -> anyhow::Result<Saved> {
    let keyring_error = match choice {
        KeyStoreChoice::File => None,
        KeyStoreChoice::Auto | KeyStoreChoice::Keyring => match keyring::write(home, key) {
            Ok(()) => {
                return Ok(Saved {
                    store: KeyStore::Keyring,
                    keyring_unavailable: None,
                });
            }
            Err(e) if choice == KeyStoreChoice::Keyring => {
                anyhow::bail!(
                    "could not store the API key in the OS keyring: {e} (nothing was changed; `--key-store file` keeps it in a file readable only by you)"
                )
            }
            Err(e) => Some(e.to_string()),
        },
    };
    file::write(home, key)?;
    Ok(Saved {
        store: KeyStore::File,
        keyring_unavailable: keyring_error,
    })
}

/// Removes the copy a previous `setup` left in the other place (`previous`: config.toml's
/// `key_store` before), so one copy is left. A keyring copy that cannot be removed is said, not
/// fatal: the new place is already in use.
pub fn remove_previous(home: &Path, previous: Option<KeyStore>, now: KeyStore) -> Option<String> {
    match now {
        KeyStore::Keyring => file::remove(home).err().map(|e| format!("{e:#}")),
        KeyStore::File if previous == Some(KeyStore::Keyring) => {
            keyring::remove(home).err().map(|e| {
                format!(
                    "the old copy in {} could not be removed ({e}); remove it with `secret-tool clear service repowire username '{}'`",
                    keyring::NAME,
                    keyring::user(home)
                )
            })
        }
        KeyStore::File => None,
    }
}

impl From<Option<KeyStore>> for KeySource {
    /// Where a stored key is, by config.toml's `key_store`.
    fn from(store: Option<KeyStore>) -> Self {
        match store {
            Some(KeyStore::Keyring) => Self::Keyring,
            Some(KeyStore::File) | None => Self::File,
        }
    }
}
