//! Identifiers on the wire.
//!
//! - [`MessageId`]: a UUIDv7 minted by whoever creates a frame; receivers de-duplicate by it,
//!   so any hop may retry.
//! - [`PeerId`]: minted by the relay when a peer registers; the routing key.
//! - [`CorrelationId`]: the human id of an ask thread (`ask-…`) or a notification (`notif-…`),
//!   minted by the relay.

use std::fmt;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// A UUIDv7 frame/message id. On the wire only the canonical form is read: lowercase,
/// hyphenated (`8-4-4-4-12`), because ids are echoed and compared as strings (protocol.md §4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct MessageId(pub Uuid);

impl<'de> Deserialize<'de> for MessageId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Self::parse_canonical(&s).ok_or_else(|| {
            serde::de::Error::custom(format_args!(
                "`{s}` is not a UUID in lowercase hyphenated form"
            ))
        })
    }
}

#[cfg(feature = "schema")]
impl schemars::JsonSchema for MessageId {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "MessageId".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "A UUID in lowercase hyphenated form; version 7 for ids a sender mints.",
            "pattern": "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
        })
    }
}

impl MessageId {
    /// The id written as `s`, if `s` is a UUID in its canonical form (lowercase, hyphenated).
    /// [`str::parse`] also reads the other spellings (upper case, braces, `urn:uuid:`, no
    /// hyphens), for ids a person types.
    pub fn parse_canonical(s: &str) -> Option<Self> {
        if s.len() != 36 || s.bytes().any(|b| b.is_ascii_uppercase()) {
            return None;
        }
        Uuid::parse_str(s).ok().map(Self)
    }

    /// A fresh UUIDv7.
    pub fn new() -> Self {
        Self(Uuid::now_v7())
    }

    /// True when the id is a version-7 UUID, as the protocol requires.
    pub fn is_v7(&self) -> bool {
        self.0.get_version_num() == 7
    }
}

impl Default for MessageId {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Display for MessageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl std::str::FromStr for MessageId {
    type Err = uuid::Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Uuid::parse_str(s).map(Self)
    }
}

macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
        #[serde(transparent)]
        pub struct $name(pub String);

        impl $name {
            /// The id as a string slice.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                Self(s.to_owned())
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                Self(s)
            }
        }
    };
}

string_id!(
    /// A relay-minted peer id: `peer-` followed by 16 lowercase base-32 characters.
    PeerId
);
string_id!(
    /// `ask-` + 12 base-36 characters for asks, `notif-` + 12 hex digits for notifications.
    CorrelationId
);

/// Prefix of peer ids.
pub const PEER_ID_PREFIX: &str = "peer-";
/// Prefix of ask correlation ids.
pub const ASK_ID_PREFIX: &str = "ask-";
/// Prefix of notification ids.
pub const NOTIF_ID_PREFIX: &str = "notif-";

impl PeerId {
    /// Builds a peer id from 80 random bits.
    pub fn from_random(bits: u128) -> Self {
        Self(relay_id_from_random(PEER_ID_PREFIX, bits))
    }

    /// True when the string has the shape of a peer id (it may still be unknown).
    pub fn looks_like(s: &str) -> bool {
        looks_like_relay_id(PEER_ID_PREFIX, s)
    }
}

/// A relay-minted id (peer, Repowire session, conversation): `prefix` and 16 characters of
/// base 32 from 80 random bits (no `i`, `l`, `o`, `u`).
pub(crate) fn relay_id_from_random(prefix: &str, bits: u128) -> String {
    format!("{prefix}{}", digits(bits, 16, BASE32))
}

/// True for a relay-minted id with `prefix` (see [`relay_id_from_random`]).
pub(crate) fn looks_like_relay_id(prefix: &str, s: &str) -> bool {
    s.strip_prefix(prefix)
        .is_some_and(|rest| rest.len() == 16 && rest.bytes().all(|b| BASE32.contains(&b)))
}

impl CorrelationId {
    /// An ask id from random bits.
    pub fn ask_from_random(bits: u128) -> Self {
        Self(format!("{ASK_ID_PREFIX}{}", digits(bits, 12, BASE36)))
    }

    /// A notification id from random bits.
    pub fn notif_from_random(bits: u128) -> Self {
        Self(format!("{NOTIF_ID_PREFIX}{:012x}", bits & 0xffff_ffff_ffff))
    }

    /// True for `ask-…` ids.
    pub fn is_ask(&self) -> bool {
        self.0.starts_with(ASK_ID_PREFIX)
    }
}

const BASE32: &[u8; 32] = b"0123456789abcdefghjkmnpqrstvwxyz";
const BASE36: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";

/// `len` digits of `bits` in `alphabet`, least significant first (the ids are random, so the
/// order carries no meaning; fixed length is what matters).
fn digits(mut bits: u128, len: usize, alphabet: &[u8]) -> String {
    let base = alphabet.len() as u128;
    (0..len)
        .map(|_| {
            let c = alphabet[(bits % base) as usize] as char;
            bits /= base;
            c
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_message_ids_are_uuid_v7_and_ordered_by_time() {
        let a = MessageId::new();
        let b = MessageId::new();
        assert!(a.is_v7() && b.is_v7());
        assert!(a < b, "v7 ids minted later sort later");
    }

    #[test]
    fn peer_ids_have_the_documented_shape() {
        let id = PeerId::from_random(u128::MAX / 3);
        assert!(PeerId::looks_like(id.as_str()), "{id}");
        assert!(!PeerId::looks_like("peer-short"));
        assert!(!PeerId::looks_like("alice"));
    }

    #[test]
    fn correlation_ids_carry_their_kind_prefix() {
        let ask = CorrelationId::ask_from_random(123_456_789);
        assert!(ask.is_ask());
        assert_eq!(ask.as_str().len(), ASK_ID_PREFIX.len() + 12);
        let notif = CorrelationId::notif_from_random(0xdead_beef);
        assert_eq!(notif.as_str(), "notif-0000deadbeef");
        assert!(!notif.is_ask());
    }
}
