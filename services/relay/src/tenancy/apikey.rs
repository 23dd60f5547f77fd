//! API keys: `rw_live_` / `rw_test_` + 32 random base-62 characters + a 6-character checksum.
//!
//! The checksum (CRC-32 of prefix and body) lets the relay refuse mistyped or truncated keys
//! without a database lookup. Only the SHA-256 of the whole key is stored; the key text is
//! shown once, when minted. Keys carry 190 random bits, so a fast hash is the right one.

use sha2::{Digest, Sha256};

use crate::storage::store::ApiKeyRecord;

const ALPHABET: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const BODY_LEN: usize = 32;
const CHECK_LEN: usize = 6;
/// Prefix of live keys.
pub const LIVE_PREFIX: &str = "rw_live_";

/// Scope: exchange the key for a token (`POST /v1/token`) and connect agents with it.
pub const CONNECT: &str = "connect";
/// Scope: read the tenant's own limits and usage (`GET /v1/limits`, `GET /v1/usage`).
pub const USAGE_READ: &str = "usage:read";
/// Scope: answer questions to `@approvers` (allow or deny agents' tool calls), for a peer whose
/// role approves. A team gives agent machines keys without it, so that nothing holding such a
/// key (an agent that read it) can approve.
pub const APPROVE: &str = "approve";
/// Scope: list, create and revoke the tenant's API keys (the dashboard's Keys page). A key
/// made with it holds at most the scopes of the credential that made it.
pub const KEYS_MANAGE: &str = "keys:manage";
/// Scope: read the tenant's messages across every circle (the dashboard's Asks page: every
/// ask's text and reply, questions to `@approvers` with their tool inputs included). Not for
/// agent machines: an agent sees only what is addressed to it.
pub const MESSAGES_READ: &str = "messages:read";
/// Every scope, in their stored order.
pub const ALL_SCOPES: [&str; 5] = [CONNECT, USAGE_READ, APPROVE, KEYS_MANAGE, MESSAGES_READ];
/// What a key made without a choice of scopes may do: connect and read its usage, never
/// approve. A key that approves tool calls can run code on other machines, so it is asked for
/// by name (issue 35.11); only a relay's first key (its owner's, [`crate::tenancy::admin::default_tenant`])
/// has it unasked.
pub const DEFAULT_SCOPES: [&str; 2] = [CONNECT, USAGE_READ];

/// The stored form of a choice of scopes: known ones only, each once, in [`ALL_SCOPES`]
/// order, space-separated; `Err` names what is wrong.
pub fn scopes(given: &[String]) -> Result<String, String> {
    if given.is_empty() {
        return Err(format!(
            "scopes is empty; give some of `{CONNECT}`, `{USAGE_READ}`, `{APPROVE}`, `{KEYS_MANAGE}` and `{MESSAGES_READ}` (leave it out for `{CONNECT}` and `{USAGE_READ}`)"
        ));
    }
    if let Some(unknown) = given.iter().find(|s| !ALL_SCOPES.contains(&s.as_str())) {
        return Err(format!(
            "unknown scope `{unknown}`; the scopes are `{CONNECT}`, `{USAGE_READ}`, `{APPROVE}`, `{KEYS_MANAGE}` and `{MESSAGES_READ}`"
        ));
    }
    Ok(ALL_SCOPES
        .iter()
        .filter(|s| given.iter().any(|g| g == *s))
        .copied()
        .collect::<Vec<_>>()
        .join(" "))
}
/// Prefix of test keys.
pub const TEST_PREFIX: &str = "rw_test_";

/// Live or test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyMode {
    /// `rw_live_`.
    Live,
    /// `rw_test_`.
    Test,
}

impl KeyMode {
    /// Stored spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            KeyMode::Live => "live",
            KeyMode::Test => "test",
        }
    }

    fn prefix(self) -> &'static str {
        match self {
            KeyMode::Live => LIVE_PREFIX,
            KeyMode::Test => TEST_PREFIX,
        }
    }
}

/// Why a string is not an API key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyFormatError {
    /// Wrong prefix.
    #[error("an API key starts with rw_live_ or rw_test_")]
    Prefix,
    /// Wrong length or characters.
    #[error("an API key has {} characters after its prefix, letters and digits only", BODY_LEN + CHECK_LEN)]
    Shape,
    /// Checksum mismatch: mistyped or truncated.
    #[error("the API key's checksum does not match; it was probably mistyped or truncated")]
    Checksum,
}

fn base62(mut n: u64, len: usize) -> String {
    let mut out = vec![b'0'; len];
    for slot in out.iter_mut().rev() {
        *slot = ALPHABET[(n % 62) as usize];
        n /= 62;
    }
    String::from_utf8(out).unwrap_or_default()
}

fn checksum(prefix: &str, body: &str) -> String {
    let mut h = crc32fast::Hasher::new();
    h.update(prefix.as_bytes());
    h.update(body.as_bytes());
    base62(u64::from(h.finalize()), CHECK_LEN)
}

/// Checks a key's shape and checksum.
pub fn parse(text: &str) -> Result<KeyMode, KeyFormatError> {
    let (mode, rest) = if let Some(rest) = text.strip_prefix(LIVE_PREFIX) {
        (KeyMode::Live, rest)
    } else if let Some(rest) = text.strip_prefix(TEST_PREFIX) {
        (KeyMode::Test, rest)
    } else {
        return Err(KeyFormatError::Prefix);
    };
    if rest.len() != BODY_LEN + CHECK_LEN || !rest.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err(KeyFormatError::Shape);
    }
    let (body, check) = rest.split_at(BODY_LEN);
    if checksum(mode.prefix(), body) != check {
        return Err(KeyFormatError::Checksum);
    }
    Ok(mode)
}

/// SHA-256 of the key text, hex: the only thing stored.
pub fn hash(text: &str) -> String {
    format!("{:x}", Sha256::digest(text.as_bytes()))
}

/// A freshly minted key: the text (show once) and the record to store.
#[derive(Debug, Clone)]
pub struct MintedKey {
    /// The key text.
    pub text: String,
    /// What is stored.
    pub record: ApiKeyRecord,
}

/// Mints a key for a tenant.
pub fn mint(
    tenant_id: &str,
    mode: KeyMode,
    label: &str,
    now_ms: i64,
    expires_at_ms: Option<i64>,
) -> MintedKey {
    mint_with(
        &mut rand::rng(),
        tenant_id,
        mode,
        label,
        now_ms,
        expires_at_ms,
    )
}

/// Mints the key a 32-byte `seed` determines (text and id): how a retried idempotent creation
/// finds the same key text without it ever being stored. The seed must be secret
/// ([`crate::tenancy::token::Tokens::seed`]).
pub fn mint_seeded(
    seed: [u8; 32],
    tenant_id: &str,
    mode: KeyMode,
    label: &str,
    now_ms: i64,
    expires_at_ms: Option<i64>,
) -> MintedKey {
    use rand::SeedableRng;
    let mut rng = rand::rngs::StdRng::from_seed(seed);
    mint_with(&mut rng, tenant_id, mode, label, now_ms, expires_at_ms)
}

fn mint_with(
    rng: &mut impl rand::Rng,
    tenant_id: &str,
    mode: KeyMode,
    label: &str,
    now_ms: i64,
    expires_at_ms: Option<i64>,
) -> MintedKey {
    let body: String = (0..BODY_LEN)
        .map(|_| ALPHABET[rng.random_range(0..62)] as char)
        .collect();
    let text = format!("{}{body}{}", mode.prefix(), checksum(mode.prefix(), &body));
    let record = ApiKeyRecord {
        id: format!(
            "key-{}",
            repowire_protocol::PeerId::from_random(rng.random())
                .0
                .trim_start_matches(repowire_protocol::ids::PEER_ID_PREFIX)
        ),
        tenant_id: tenant_id.to_owned(),
        hash: hash(&text),
        display: format!("{}{}…", mode.prefix(), &body[..4]),
        label: label.to_owned(),
        mode: mode.as_str().to_owned(),
        created_at_ms: now_ms,
        expires_at_ms,
        revoked_at_ms: None,
        last_used_at_ms: None,
        scopes: DEFAULT_SCOPES.join(" "),
        tenant_suspended: false,
    };
    MintedKey { text, record }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minted_keys_parse_and_hash_stably() {
        let k = mint("tnt-1", KeyMode::Live, "laptop", 0, None);
        assert!(k.text.starts_with(LIVE_PREFIX));
        assert_eq!(parse(&k.text), Ok(KeyMode::Live));
        assert_eq!(k.record.hash, hash(&k.text));
        assert!(
            !k.record.display.contains(&k.text[12..]),
            "display must not leak the key"
        );
        let t = mint("tnt-1", KeyMode::Test, "", 0, None);
        assert_eq!(parse(&t.text), Ok(KeyMode::Test));
    }

    #[test]
    fn scopes_are_known_ones_each_once_in_order() {
        let s = |v: &[&str]| scopes(&v.iter().map(|x| (*x).to_owned()).collect::<Vec<_>>());
        assert_eq!(
            s(&["usage:read", "connect", "usage:read"]).as_deref(),
            Ok("connect usage:read")
        );
        assert_eq!(s(&["usage:read"]).as_deref(), Ok("usage:read"));
        assert!(s(&[]).is_err());
        assert!(
            s(&["admin:write"])
                .expect_err("unknown")
                .contains("admin:write")
        );
        assert_eq!(s(&["approve", "connect"]).as_deref(), Ok("connect approve"));
        assert_eq!(
            s(&["keys:manage", "usage:read"]).as_deref(),
            Ok("usage:read keys:manage")
        );
        assert_eq!(
            mint("t", KeyMode::Live, "", 0, None).record.scopes,
            "connect usage:read",
            "approve is never given unasked"
        );
    }

    #[test]
    fn a_single_changed_character_fails_the_checksum() {
        let k = mint("tnt-1", KeyMode::Live, "", 0, None).text;
        let mut bytes = k.into_bytes();
        bytes[10] = if bytes[10] == b'a' { b'b' } else { b'a' };
        let typo = String::from_utf8(bytes).expect("ascii");
        assert_eq!(parse(&typo), Err(KeyFormatError::Checksum));
    }

    #[test]
    fn wrong_prefixes_and_shapes_are_refused() {
        assert_eq!(parse("sk_live_abc"), Err(KeyFormatError::Prefix));
        assert_eq!(parse("rw_live_short"), Err(KeyFormatError::Shape));
        let k = mint("t", KeyMode::Live, "", 0, None).text;
        assert_eq!(parse(&k[..k.len() - 1]), Err(KeyFormatError::Shape));
    }
}
