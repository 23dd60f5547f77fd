//! `repowire setup --relay-url URL --api-key KEY [--circle C]`: point this machine at a relay.
//! The key is checked with the relay (exchanged for a token) before anything is written; then
//! `~/.repowire/config.toml` gets the relay, and the key goes to the OS keyring or a file of its
//! own ([`crate::apikey`]), so the daemon uses them whatever the environment of the shell that
//! starts it.

use anyhow::{Context, bail};
use repowire_protocol::http::TokenResponse;

use crate::apikey::{KeyStore, KeyStoreChoice};
use crate::config::{Config, FileConfig};

/// Where setup pointed this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Configured {
    /// The relay's base URL.
    pub url: String,
    /// The tenant the key belongs to.
    pub tenant_id: String,
    /// Where the key went, in words.
    pub key_where: String,
}

/// Verifies and records the relay settings given to `setup` (flags or environment). `None`
/// when none were given: the configuration is left as it is, but for the API key, which moves
/// out of an older setup's config.toml, or to the place `--key-store` names.
///
/// The key is stored again only when it is given (`--api-key`, `REPOWIRE_API_KEY`, an older
/// config.toml) or `--key-store` names a place: `setup --circle C` leaves a stored key where
/// it is.
pub fn configure(
    config: &Config,
    store: Option<KeyStoreChoice>,
) -> anyhow::Result<Option<Configured>> {
    let home = config.home();
    let mut file = FileConfig::load(&home)?;
    let previous = file.relay.key_store;
    let legacy = file.relay.api_key.is_some();
    if config.relay_url.is_none() && config.api_key.is_none() && config.circle.is_none() {
        let key = match (file.relay.api_key.clone(), store) {
            (Some(key), _) => Some(key),
            (None, Some(_)) => crate::apikey::read(&home, previous)?,
            (None, None) => None,
        };
        match key {
            Some(key) => {
                let key_where = store_key(&home, &mut file, previous, &key, store)?;
                if legacy {
                    println!("moved the API key out of config.toml into {key_where}");
                } else {
                    println!("the API key is now in {key_where}");
                }
            }
            None if store.is_some() => bail!(
                "there is no stored API key to move: `repowire setup --relay-url URL --api-key KEY --key-store …` stores one"
            ),
            None => {}
        }
        return Ok(None);
    }
    if let Some(circle) = &config.circle {
        if !repowire_protocol::validate::is_valid_name(circle) {
            bail!("circle `{circle}` is not a valid name (1–64 of A-Z a-z 0-9 . _ -)");
        }
        file.daemon.circle = Some(circle.clone());
    }
    let (url, key) = config.relay_url_and_key(&file)?;
    let configured = match (url, key) {
        (None, None) => None,
        (None, Some(_)) => bail!("an API key needs the relay it belongs to: add --relay-url URL"),
        (Some(_), None) => bail!("a relay needs an API key: add --api-key rw_live_…"),
        (Some(url), Some(key)) => {
            let url = crate::config::relay_url(&url)?;
            let tenant_id = verify(&url, &key)?;
            file.relay.url = Some(url.clone());
            let key_where = if config.api_key.is_some() || legacy || store.is_some() {
                // Stored, then config.toml written, then the old copy removed.
                return Ok(Some(Configured {
                    key_where: store_key(&home, &mut file, previous, &key, store)?,
                    url,
                    tenant_id,
                }));
            } else {
                crate::apikey::KeySource::from(previous)
                    .describe(&home)
                    .trim_start_matches("in ")
                    .to_owned()
            };
            Some(Configured {
                url,
                tenant_id,
                key_where,
            })
        }
    };
    write_config(&home, &file)?;
    Ok(configured)
}

/// Stores the key as `choice` says (default `auto`), writes config.toml naming the place, then
/// removes the copy in the previous place; says where the key is in words (with why the
/// keyring was passed over, when it was).
fn store_key(
    home: &std::path::Path,
    file: &mut FileConfig,
    previous: Option<KeyStore>,
    key: &str,
    choice: Option<KeyStoreChoice>,
) -> anyhow::Result<String> {
    let saved = crate::apikey::save(home, key, choice.unwrap_or_default())?;
    file.relay.key_store = Some(saved.store);
    file.relay.api_key = None;
    write_config(home, file)?;
    if let Some(warning) = crate::apikey::remove_previous(home, previous, saved.store) {
        eprintln!("warning: {}", crate::sanitize::for_terminal(&warning));
    }
    let mut said = crate::apikey::KeySource::from(Some(saved.store))
        .describe(home)
        .trim_start_matches("in ")
        .to_owned();
    if let Some(why) = saved.keyring_unavailable {
        said.push_str(&format!(
            "; no OS keyring was usable ({})",
            crate::sanitize::for_terminal(&why)
        ));
    }
    Ok(said)
}

/// Writes config.toml (0600: it may name private paths).
fn write_config(home: &std::path::Path, file: &FileConfig) -> anyhow::Result<()> {
    let path = home.join("config.toml");
    crate::config::ensure_home(home)?;
    let text = toml::to_string(file).context("writing config.toml")?;
    repowire_files::replace(&path, text.as_bytes(), repowire_files::Mode::Private)
        .with_context(|| format!("writing {}", path.display()))
}

/// Exchanges the key for a token: the relay is there, is a Repowire relay, and takes the key.
/// Returns the key's tenant. Every failure is said in plain words.
fn verify(url: &str, key: &str) -> anyhow::Result<String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime
        .block_on(exchange(url, key))
        .map(|token| token.tenant_id)
        .map_err(|e| anyhow::anyhow!("{e:#} (nothing was changed)"))
}

/// `POST /v1/token` with the key; every failure said in plain words, with what to do.
pub(crate) async fn exchange(url: &str, key: &str) -> anyhow::Result<TokenResponse> {
    use crate::relay_token::TokenError;
    crate::relay_token::exchange(url, key)
        .await
        .map_err(|e| match e {
            TokenError::Unreachable { why } => anyhow::anyhow!(
                "cannot reach the relay at {url}: {why}; check the URL and that the relay runs"
            ),
            TokenError::NotARelay { status: 404 } => anyhow::anyhow!(
                "{url} does not look like a Repowire relay (no /v1/token there); check the URL"
            ),
            TokenError::NotARelay { status } => {
                anyhow::anyhow!("{url} answered {status}, but not as a Repowire relay does")
            }
            TokenError::Status { status } => anyhow::anyhow!("{url} answered {status}"),
            TokenError::TenantSuspended { message } => anyhow::anyhow!(
                "the relay at {url} knows the key, but its operator suspended the key's tenant: \
                 ask them to resume it (the same key works again then): {}",
                crate::sanitize::for_terminal(&message)
            ),
            e => anyhow::anyhow!("{e} (relay {url})"),
        })
}
