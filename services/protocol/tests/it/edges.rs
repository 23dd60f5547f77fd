//! The edges protocol.md §4 and §5 now state, beyond what the fixtures show: which refusals
//! carry `re`, what is tolerated around the JSON value, relay-minted ids as opaque strings, and
//! the frame limit against the worst JSON escaping of a frame within every field limit.

use repowire_protocol::limits::{
    MAX_FRAME_BYTES, MAX_NAME_BYTES, MAX_QUESTION_OPTIONS, MAX_REASON_BYTES, MAX_TEXT_BYTES,
};
use repowire_protocol::{
    Ask, Body, ConversationEvent, ConversationRef, CorrelationId, Deliver, ErrorCode, Frame,
    MAX_CONVERSATION_PARTICIPANTS, Message, MessageId, MessageKind, PeerId, PeerSummary, Question,
    QuestionKind, QuestionOption, conversation_id_from_random, decode, encode,
    session_id_from_random,
};

const ID: &str = "0193a4c2-7b10-7c3e-9a51-0f6e2d1b8a01";

#[test]
fn duplicate_keys_and_non_canonical_ids_are_refused_without_re() {
    for text in [
        format!(r#"{{"v":1,"type":"hello","id":"{ID}","client":"x","client":"y"}}"#),
        format!(r#"{{"v":1,"type":"hello","id":"{ID}","id":"{ID}","client":"x"}}"#),
        format!(
            r#"{{"v":1,"type":"hello","id":"{}","client":"x"}}"#,
            ID.to_uppercase()
        ),
        format!(r#"{{"v":1,"type":"hello","id":"urn:uuid:{ID}","client":"x"}}"#),
    ] {
        let err = decode(&text).expect_err(&text);
        assert_eq!(err.request_id, None, "{text}: {err}");
    }
    // A key spelled with an escape is the same key.
    let escaped = format!(r#"{{"v":1,"type":"hello","id":"{ID}","client":"x","\u0063lient":"y"}}"#);
    assert_eq!(
        decode(&escaped).expect_err("duplicate").code,
        ErrorCode::MalformedFrame
    );
    // A field error after a readable id keeps `re`.
    let err = decode(&format!(r#"{{"v":1,"type":"hello","id":"{ID}"}}"#)).expect_err("no client");
    assert_eq!(err.request_id.map(|i| i.to_string()).as_deref(), Some(ID));
}

/// One rule for `v` (protocol.md §1, §4.3): absent is `invalid_frame`; present with any other
/// value than the integer 1, `null` included, is `unsupported_version`. Both keep `re`.
#[test]
fn a_null_version_is_present_and_unsupported_and_a_missing_one_is_invalid() {
    for (v, want) in [
        ("null", ErrorCode::UnsupportedVersion),
        ("2", ErrorCode::UnsupportedVersion),
        ("\"1\"", ErrorCode::UnsupportedVersion),
    ] {
        let err = decode(&format!(
            r#"{{"v":{v},"type":"hello","id":"{ID}","client":"x"}}"#
        ))
        .expect_err(v);
        assert_eq!(err.code, want, "v = {v}");
        assert_eq!(err.request_id.map(|i| i.to_string()).as_deref(), Some(ID));
    }
    let err = decode(&format!(r#"{{"type":"hello","id":"{ID}","client":"x"}}"#)).expect_err("no v");
    assert_eq!(err.code, ErrorCode::InvalidFrame);
    assert_eq!(err.request_id.map(|i| i.to_string()).as_deref(), Some(ID));
}

/// A message id inside a frame in another spelling (protocol.md §4.1): `invalid_frame`, and
/// the frame's own id was read, so the answer carries `re` (only a non-canonical frame id
/// loses it).
#[test]
fn a_non_canonical_message_id_inside_a_frame_keeps_re() {
    for message_id in [
        "0193A4C2-7B10-7C3E-9A51-0F6E2D1B8A02",
        "{0193a4c2-7b10-7c3e-9a51-0f6e2d1b8a02}",
        "0193a4c27b107c3e9a510f6e2d1b8a02",
    ] {
        let err = decode(&format!(
            r#"{{"v":1,"type":"receipt","id":"{ID}","peer_id":"peer-7kq2m9x4t8v1b3cz","message_id":"{message_id}","state":"delivered"}}"#
        ))
        .expect_err(message_id);
        assert_eq!(err.code, ErrorCode::InvalidFrame, "{message_id}");
        assert_eq!(
            err.request_id.map(|i| i.to_string()).as_deref(),
            Some(ID),
            "{message_id}"
        );
    }
}

#[test]
fn whitespace_around_the_value_is_tolerated_and_nothing_else() {
    let frame = format!(r#"{{"v":1,"type":"hello","id":"{ID}","client":"x"}}"#);
    decode(&format!(" \n\t{frame} \r\n")).expect("surrounding whitespace");
    for trailing in ["x", "{}", ",", "\u{0}"] {
        assert_eq!(
            decode(&format!("{frame}{trailing}"))
                .expect_err(trailing)
                .code,
            ErrorCode::MalformedFrame,
            "{trailing:?}"
        );
    }
}

#[test]
fn relay_minted_ids_are_opaque_to_the_decoder() {
    // Upper case is another id, not a malformed one: the relay answers it as unknown
    // (`not_registered`, `unknown_ask` …) when it handles the frame.
    let text = format!(
        r#"{{"v":1,"type":"ack","id":"{ID}","from":"PEER-7KQ2M9X4T8V1B3CZ","correlation_id":"ASK-0K3J5H7G9F1D"}}"#
    );
    let frame = decode(&text).expect("decodes");
    let Body::Ack(ack) = frame.body else {
        panic!("not an ack")
    };
    assert_eq!(ack.from.as_str(), "PEER-7KQ2M9X4T8V1B3CZ");
    assert_eq!(ack.correlation_id.as_str(), "ASK-0K3J5H7G9F1D");
}

/// JSON as an encoder that escapes every character writes it (`\uXXXX`, surrogate pairs
/// above the BMP): the largest standard encoding of a value.
fn escape_everything(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(s) => {
            let mut out = String::from("\"");
            for unit in s.encode_utf16() {
                out.push_str(&format!("\\u{unit:04x}"));
            }
            out.push('"');
            out
        }
        serde_json::Value::Array(items) => format!(
            "[{}]",
            items
                .iter()
                .map(escape_everything)
                .collect::<Vec<_>>()
                .join(",")
        ),
        serde_json::Value::Object(map) => format!(
            "{{{}}}",
            map.iter()
                .map(|(k, v)| format!("\"{k}\":{}", escape_everything(v)))
                .collect::<Vec<_>>()
                .join(",")
        ),
        other => other.to_string(),
    }
}

/// An ask at every limit: the largest frame §5 allows.
fn largest_ask(text_char: char) -> Frame {
    let text: String =
        std::iter::repeat_n(text_char, MAX_TEXT_BYTES / text_char.len_utf8()).collect();
    let label: String = std::iter::repeat_n(text_char, 512 / text_char.len_utf8()).collect();
    Frame::with_id(
        MessageId::new(),
        Body::Ask(Ask {
            from: PeerId("peer-7kq2m9x4t8v1b3cz".into()),
            to: "b".repeat(MAX_NAME_BYTES),
            circle: Some("c".repeat(MAX_NAME_BYTES)),
            text,
            reply_to: Some(CorrelationId("ask-0k3j5h7g9f1d".into())),
            question: Some(Question {
                kind: QuestionKind::Choice,
                options: (0..MAX_QUESTION_OPTIONS)
                    .map(|i| QuestionOption {
                        id: format!("{i:0>64}"),
                        label: label.clone(),
                    })
                    .collect(),
                timeout_ms: Some(repowire_protocol::MAX_QUESTION_TIMEOUT_MS),
                default: Some(format!("{:0>64}", 0)),
            }),
        }),
    )
    .traced(Some(
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into(),
    ))
}

#[test]
fn every_frame_within_the_field_limits_fits_the_frame_limit_however_it_is_escaped() {
    // 1-byte control characters (6 bytes escaped by everyone), 2-byte `é` (Python's default
    // writes `\u00e9`), 4-byte emoji (a surrogate pair of two escapes).
    for c in ['\u{1}', 'é', '😀', '<'] {
        let frame = largest_ask(c);
        let value: serde_json::Value = serde_json::from_str(&encode(&frame)).expect("json");
        let escaped = escape_everything(&value);
        assert!(
            escaped.len() <= MAX_FRAME_BYTES,
            "{c:?}: {} bytes over the limit of {MAX_FRAME_BYTES}",
            escaped.len()
        );
        println!("{c:?}: {} bytes escaped", escaped.len());
        let back = decode(&escaped).unwrap_or_else(|e| panic!("{c:?}: {e}"));
        assert_eq!(back, frame, "{c:?}");
    }
}

#[test]
fn the_deliver_of_the_largest_message_fits_the_frame_limit() {
    let Body::Ask(ask) = largest_ask('\u{1}').body else {
        unreachable!()
    };
    let deliver = Frame::new(Body::Deliver(Deliver {
        to: PeerId("peer-kznwj47tan9zt24m".into()),
        seq: u64::MAX,
        redelivery: true,
        message: Message {
            message_id: MessageId::new(),
            kind: MessageKind::Ask,
            from: PeerSummary {
                peer_id: ask.from,
                name: "n".repeat(MAX_NAME_BYTES),
                circle: "c".repeat(MAX_NAME_BYTES),
            },
            text: ask.text,
            correlation_id: Some(CorrelationId("ask-0k3j5h7g9f1d".into())),
            reply_to: ask.reply_to,
            question: ask.question,
            answer: None,
            from_session_id: Some(session_id_from_random(u128::MAX)),
            to_session_id: Some(session_id_from_random(u128::MAX)),
            // No relay puts a conversation on an ask; the bound holds even if one did.
            conversation: Some(ConversationRef {
                id: conversation_id_from_random(u128::MAX),
                seq: u64::MAX,
                event: ConversationEvent::Resumed,
                participants: (0..MAX_CONVERSATION_PARTICIPANTS)
                    .map(|i| PeerSummary {
                        peer_id: PeerId::from_random(i as u128),
                        name: "n".repeat(MAX_NAME_BYTES),
                        circle: "c".repeat(MAX_NAME_BYTES),
                    })
                    .collect(),
                reason: Some("r".repeat(MAX_REASON_BYTES)),
            }),
            created_at_ms: i64::MAX,
            expires_at_ms: i64::MAX,
        },
    }));
    let encoded = encode(&deliver);
    assert!(encoded.len() <= MAX_FRAME_BYTES, "{} bytes", encoded.len());
    assert_eq!(decode(&encoded).expect("decodes"), deliver);
}

/// The session pointers go out under the seed's names, and their first spelling
/// (`from_session_id` / `to_session_id`, relays of 2026-11-25) is read as the same fields.
#[test]
fn session_pointers_use_the_seeds_names_and_read_their_first_spelling() {
    let now = include_str!("../fixtures/valid/deliver_with_sessions.json");
    let Body::Deliver(d) = decode(now).expect("decodes").body else {
        panic!("a deliver")
    };
    assert_eq!(
        d.message.from_session_id.as_deref(),
        Some("rs-4m8q2w6e0r3tp5vk")
    );
    assert_eq!(
        d.message.to_session_id.as_deref(),
        Some("rs-9z7x5c3v1b8nq2wd")
    );
    let encoded = encode(&decode(now).expect("decodes"));
    assert!(
        encoded.contains("\"from_repowire_session_id\":\"rs-4m8q2w6e0r3tp5vk\""),
        "{encoded}"
    );
    assert!(!encoded.contains("\"from_session_id\""), "{encoded}");
    let first = now
        .replace("from_repowire_session_id", "from_session_id")
        .replace("to_repowire_session_id", "to_session_id");
    let Body::Deliver(old) = decode(&first).expect("the first spelling decodes").body else {
        panic!("a deliver")
    };
    assert_eq!(old.message, d.message);
}
