//! Decoding and encoding frames.
//!
//! Decoding distinguishes, in this order: too large, not a JSON object, wrong version, unknown
//! type, invalid fields, failed validation. Each failure is a [`DecodeError`] carrying the error
//! code to send back and the frame id when it could be read, so the answer can name the request.

use serde::Deserialize;
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

#[derive(Deserialize)]
struct Header {
    v: Option<Value>,
    #[serde(rename = "type")]
    kind: Option<Value>,
    id: Option<Value>,
}

/// Decodes and validates one frame.
pub fn decode(text: &str) -> Result<Frame, DecodeError> {
    if text.len() > MAX_FRAME_BYTES {
        return Err(DecodeError::new(
            ErrorCode::FrameTooLarge,
            format!(
                "frame is {} bytes; the limit is {MAX_FRAME_BYTES}",
                text.len()
            ),
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
        DecodeError::new(ErrorCode::MalformedFrame, format!("not a JSON object: {e}"))
    })?;
    let request_id = header
        .id
        .as_ref()
        .and_then(Value::as_str)
        .and_then(|s| s.parse::<MessageId>().ok());
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
                "missing or malformed `id` (a UUIDv7 string)".into(),
            ));
        }
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
