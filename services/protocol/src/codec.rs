//! Decoding and encoding frames.
//!
//! Decoding distinguishes, in this order: too large, not a JSON object, wrong version, unknown
//! type, invalid fields, failed validation. Each failure is a [`DecodeError`] carrying the error
//! code to send back and the frame id when it could be read, so the answer can name the request.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use crate::codes::ErrorCode;
use crate::frame::{FRAME_TYPES, Frame};
use crate::ids::MessageId;
use crate::limits::MAX_FRAME_BYTES;
use crate::validate;

/// Why a frame was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct DecodeError {
    /// Code for the error frame.
    pub code: ErrorCode,
    /// Explanation.
    pub message: String,
    /// The frame's id, when it could be read.
    pub request_id: Option<MessageId>,
}

impl DecodeError {
    pub(crate) fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            request_id: None,
        }
    }
}

/// What decoding needs before the typed parse: `v`, `type` and `id`, read in one pass that
/// also refuses a duplicate key in any object of the frame (protocol.md §4.1).
struct Header {
    v: Option<Value>,
    kind: Option<Value>,
    id: Option<Value>,
}

impl<'de> Deserialize<'de> for Header {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(HeaderVisitor)
    }
}

struct HeaderVisitor;

impl<'de> Visitor<'de> for HeaderVisitor {
    type Value = Header;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Header, A::Error> {
        let mut header = Header {
            v: None,
            kind: None,
            id: None,
        };
        let mut seen: Vec<Key<'de>> = Vec::new();
        while let Some(key) = map.next_key::<Key<'de>>()? {
            if seen.iter().any(|k| k.as_str() == key.as_str()) {
                return Err(de::Error::custom(format_args!(
                    "duplicate key `{}`",
                    key.as_str()
                )));
            }
            match key.as_str() {
                "v" => header.v = Some(map.next_value()?),
                "type" => header.kind = Some(map.next_value()?),
                "id" => header.id = Some(map.next_value()?),
                _ => {
                    map.next_value::<Unique>()?;
                }
            }
            seen.push(key);
        }
        Ok(header)
    }
}

/// An object key, borrowed from the input when it has no escapes.
enum Key<'de> {
    Borrowed(&'de str),
    Owned(String),
}

impl Key<'_> {
    fn as_str(&self) -> &str {
        match self {
            Key::Borrowed(s) => s,
            Key::Owned(s) => s,
        }
    }
}

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string key")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key::Borrowed(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key::Owned(v.to_owned()))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

/// Any JSON value, checked for duplicate keys in its objects and otherwise ignored.
struct Unique;

impl<'de> Deserialize<'de> for Unique {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(UniqueVisitor)
    }
}

struct UniqueVisitor;

impl<'de> Visitor<'de> for UniqueVisitor {
    type Value = Unique;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Unique, E> {
        Ok(Unique)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Unique, E> {
        Ok(Unique)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Unique, E> {
        Ok(Unique)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Unique, E> {
        Ok(Unique)
    }
    fn visit_str<E>(self, _: &str) -> Result<Unique, E> {
        Ok(Unique)
    }
    fn visit_unit<E>(self) -> Result<Unique, E> {
        Ok(Unique)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Unique, A::Error> {
        while seq.next_element::<Unique>()?.is_some() {}
        Ok(Unique)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Unique, A::Error> {
        let mut seen: Vec<Key<'de>> = Vec::new();
        while let Some(key) = map.next_key::<Key<'de>>()? {
            if seen.iter().any(|k| k.as_str() == key.as_str()) {
                return Err(de::Error::custom(format_args!(
                    "duplicate key `{}`",
                    key.as_str()
                )));
            }
            map.next_value::<Unique>()?;
            seen.push(key);
        }
        Ok(Unique)
    }
}

/// Decodes and validates one frame sent to the relay (at most [`MAX_FRAME_BYTES`]).
pub fn decode(text: &str) -> Result<Frame, DecodeError> {
    decode_with_limit(text, MAX_FRAME_BYTES)
}

/// Decodes and validates one frame sent by the relay: its answers may be larger than a client's
/// frames (a `peers` list of many peers), up to the transport limit (protocol.md §5).
pub fn decode_from_relay(text: &str) -> Result<Frame, DecodeError> {
    decode_with_limit(text, crate::limits::MAX_TRANSPORT_BYTES)
}

fn decode_with_limit(text: &str, limit: usize) -> Result<Frame, DecodeError> {
    if text.len() > limit {
        return Err(DecodeError::new(
            ErrorCode::FrameTooLarge,
            format!("frame is {} bytes; the limit is {limit}", text.len()),
        ));
    }
    // serde would read a JSON array positionally into `Header`: only objects are frames.
    if !text.trim_start().starts_with('{') {
        return Err(DecodeError::new(
            ErrorCode::MalformedFrame,
            "a frame is a JSON object",
        ));
    }
    let header: Header = serde_json::from_str(text).map_err(|e| {
        DecodeError::new(
            ErrorCode::MalformedFrame,
            format!("not a valid JSON object: {e}"),
        )
    })?;
    let request_id = header
        .id
        .as_ref()
        .and_then(Value::as_str)
        .and_then(MessageId::parse_canonical);
    let with_id = |code, message: String| DecodeError {
        code,
        message,
        request_id,
    };

    match header.v {
        None => return Err(with_id(ErrorCode::InvalidFrame, "missing field `v`".into())),
        Some(Value::Number(ref n)) if n.as_u64() == Some(u64::from(crate::PROTOCOL_VERSION)) => {}
        Some(other) => {
            return Err(with_id(
                ErrorCode::UnsupportedVersion,
                format!(
                    "protocol version {other} is not supported; this relay speaks v{}",
                    crate::PROTOCOL_VERSION
                ),
            ));
        }
    }
    let kind = match header.kind {
        Some(Value::String(kind)) => kind,
        Some(_) => {
            return Err(with_id(
                ErrorCode::InvalidFrame,
                "`type` must be a string".into(),
            ));
        }
        None => {
            return Err(with_id(
                ErrorCode::InvalidFrame,
                "missing field `type`".into(),
            ));
        }
    };
    if !FRAME_TYPES.contains(&kind.as_str()) {
        return Err(with_id(
            ErrorCode::UnknownType,
            format!("unknown frame type `{kind}`"),
        ));
    }
    match request_id {
        Some(id) if id.is_v7() => {}
        Some(_) => {
            return Err(with_id(
                ErrorCode::InvalidFrame,
                "`id` must be a UUIDv7".into(),
            ));
        }
        None => {
            return Err(with_id(
                ErrorCode::InvalidFrame,
                "missing or malformed `id` (a UUIDv7 in lowercase hyphenated form)".into(),
            ));
        }
    }
    if holds_escaped_nul(text) {
        return Err(with_id(
            ErrorCode::InvalidFrame,
            "a string in a frame may not hold U+0000 (NUL, `\\u0000`)".into(),
        ));
    }
    let frame: Frame = serde_json::from_str(text).map_err(|e| {
        with_id(
            ErrorCode::InvalidFrame,
            format!("invalid `{kind}` frame: {e}"),
        )
    })?;
    validate::frame(&frame).map_err(|mut e| {
        e.request_id = request_id;
        e
    })?;
    Ok(frame)
}

/// True if a JSON text holds the escape `\u0000` in any string. JSON cannot hold a raw NUL in
/// a string (control characters must be escaped) and has no backslash outside strings, so each
/// backslash starts an escape, which this walks over whole: `\\u0000` is a backslash and the
/// text `u0000`, not a NUL. Refused on every backend alike (Postgres text cannot hold NUL).
fn holds_escaped_nul(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut i = 0;
    while let Some(at) = bytes[i..].iter().position(|&b| b == b'\\') {
        let escape = i + at;
        if bytes.get(escape + 1) == Some(&b'u')
            && bytes.get(escape + 2..escape + 6) == Some(b"0000")
        {
            return true;
        }
        i = escape + 2;
        if i >= bytes.len() {
            return false;
        }
    }
    false
}

/// Encodes a frame. Frames built from this crate's types always serialize.
pub fn encode(frame: &Frame) -> String {
    // Invariant: every frame type is plain data (strings, numbers, enums, vectors) with no
    // maps keyed by non-strings, so serde_json cannot fail on it.
    serde_json::to_string(frame).unwrap_or_else(|e| unreachable!("frame serialization: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::*;

    fn code_of(text: &str) -> ErrorCode {
        decode(text).expect_err("frame should be refused").code
    }

    #[test]
    fn a_frame_round_trips_through_encode_and_decode() {
        let frame = Frame::new(Body::Notify(Notify {
            from: "peer-0000000000000000".into(),
            to: "bob".into(),
            circle: None,
            text: "build is green".into(),
        }));
        assert_eq!(decode(&encode(&frame)).expect("decodes"), frame);
    }

    #[test]
    fn a_nul_in_any_string_is_invalid_with_re_and_an_escaped_backslash_is_not_one() {
        let id = "019aa576-882a-7821-b3ab-48767734d7c1";
        let notify = |text: &str| {
            format!(
                r#"{{"v":1,"type":"notify","id":"{id}","from":"peer-0000000000000000","to":"bob","text":"{text}"}}"#
            )
        };
        for text in [r"a\u0000b", r"\u0000", r"x\\\u0000"] {
            let e = decode(&notify(text)).expect_err(text);
            assert_eq!(e.code, ErrorCode::InvalidFrame, "{text}");
            assert_eq!(e.request_id.map(|r| r.to_string()).as_deref(), Some(id));
        }
        // In a field the relay does not know, too: no string may hold one.
        let unknown = format!(
            r#"{{"v":1,"type":"notify","id":"{id}","from":"peer-0000000000000000","to":"bob","text":"t","x":"\u0000"}}"#
        );
        assert_eq!(code_of(&unknown), ErrorCode::InvalidFrame);
        // A backslash followed by the text `u0000` is no NUL; other escapes are fine.
        for text in [r"\\u0000", r"\u0001\n\\", r"\\\\u0000", r"\u00001"] {
            let expect_ok = !text.starts_with(r"\u0000");
            assert_eq!(decode(&notify(text)).is_ok(), expect_ok, "{text}");
        }
    }

    #[test]
    fn oversized_frames_are_refused_before_parsing() {
        let text = format!("{{\"pad\":\"{}\"}}", "x".repeat(MAX_FRAME_BYTES));
        assert_eq!(code_of(&text), ErrorCode::FrameTooLarge);
    }

    #[test]
    fn non_objects_are_malformed() {
        assert_eq!(code_of("not json"), ErrorCode::MalformedFrame);
        assert_eq!(code_of("[1,2]"), ErrorCode::MalformedFrame);
        assert_eq!(code_of("[1,\"hello\",\"x\"]"), ErrorCode::MalformedFrame);
        assert_eq!(code_of("{\"v\":1"), ErrorCode::MalformedFrame);
    }

    #[test]
    fn wrong_versions_are_named_and_keep_the_request_id() {
        let id = MessageId::new();
        let err = decode(&format!(
            r#"{{"v":2,"type":"hello","id":"{id}","client":"x"}}"#
        ))
        .expect_err("v2 refused");
        assert_eq!(err.code, ErrorCode::UnsupportedVersion);
        assert_eq!(err.request_id, Some(id));
    }

    #[test]
    fn unknown_types_are_told_apart_from_invalid_frames() {
        let id = MessageId::new();
        assert_eq!(
            code_of(&format!(r#"{{"v":1,"type":"teleport","id":"{id}"}}"#)),
            ErrorCode::UnknownType
        );
        assert_eq!(
            code_of(&format!(r#"{{"v":1,"type":"hello","id":"{id}"}}"#)),
            ErrorCode::InvalidFrame
        );
    }

    #[test]
    fn ids_must_be_uuid_v7() {
        let v4 = uuid::Uuid::new_v4();
        assert_eq!(
            code_of(&format!(
                r#"{{"v":1,"type":"hello","id":"{v4}","client":"x"}}"#
            )),
            ErrorCode::InvalidFrame
        );
        assert_eq!(
            code_of(r#"{"v":1,"type":"hello","id":"nope","client":"x"}"#),
            ErrorCode::InvalidFrame
        );
    }

    #[test]
    fn unknown_fields_are_ignored() {
        let id = MessageId::new();
        let frame = decode(&format!(
            r#"{{"v":1,"type":"hello","id":"{id}","client":"x","future":[1]}}"#
        ))
        .expect("decodes");
        assert_eq!(frame.body, Body::Hello(Hello { client: "x".into() }));
    }
}
