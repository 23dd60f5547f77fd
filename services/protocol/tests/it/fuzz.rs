//! Mutation fuzzing of the decoder, seeded so a failure reproduces: every valid fixture is
//! mutated thousands of times (byte flips, deletions, duplications, JSON fragments spliced in).
//! The decoder must never panic, must refuse with a decode error code, and anything it accepts
//! must re-encode to a frame that decodes to the same value.

use std::path::Path;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use repowire_protocol::{ErrorCode, decode, encode};

const SPLICES: &[&str] = &[
    "null",
    "{",
    "}",
    "[",
    "]",
    "\"",
    ",",
    ":",
    "1e999",
    "-1",
    "18446744073709551616",
    "true",
    "[]",
    "{}",
    "\\u0000",
    "\\ud800",
    "\u{1b}[2J",
    "\"v\":2",
    "\"type\":\"ask\"",
    "\"id\":\"x\"",
    "\u{202e}",
    "🦀",
];

fn mutate(rng: &mut StdRng, text: &str) -> String {
    let mut bytes = text.as_bytes().to_vec();
    for _ in 0..rng.random_range(1..4) {
        let len = bytes.len().max(1);
        let at = rng.random_range(0..len).min(bytes.len());
        match rng.random_range(0..5) {
            0 if !bytes.is_empty() => {
                let i = at.min(bytes.len() - 1);
                bytes[i] = rng.random_range(0x20..0x7f);
            }
            1 => {
                let end = (at + rng.random_range(1..16)).min(bytes.len());
                bytes.drain(at..end);
            }
            2 => {
                let end = (at + rng.random_range(1..32)).min(bytes.len());
                let copy = bytes[at..end].to_vec();
                bytes.splice(at..at, copy);
            }
            3 => {
                let s = SPLICES[rng.random_range(0..SPLICES.len())];
                bytes.splice(at..at, s.bytes());
            }
            _ => bytes.truncate(at),
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

#[test]
fn mutated_frames_never_panic_and_accepted_ones_round_trip() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/valid");
    let mut rng = StdRng::seed_from_u64(0x5eed_2026);
    let decode_codes = [
        ErrorCode::MalformedFrame,
        ErrorCode::InvalidFrame,
        ErrorCode::UnknownType,
        ErrorCode::UnsupportedVersion,
        ErrorCode::FrameTooLarge,
        ErrorCode::TextTooLarge,
    ];
    let (mut accepted, mut refused) = (0u32, 0u32);
    for entry in std::fs::read_dir(dir).expect("fixtures") {
        let text = std::fs::read_to_string(entry.expect("entry").path()).expect("read");
        for _ in 0..2_000 {
            let input = mutate(&mut rng, &text);
            match decode(&input) {
                Ok(frame) => {
                    accepted += 1;
                    let again = decode(&encode(&frame))
                        .unwrap_or_else(|e| panic!("re-encoded frame refused: {e}\n{input}"));
                    assert_eq!(again, frame, "round trip changed the frame\n{input}");
                }
                Err(e) => {
                    refused += 1;
                    assert!(
                        decode_codes.contains(&e.code),
                        "unexpected code {:?} for\n{input}",
                        e.code
                    );
                    assert!(!e.message.is_empty());
                }
            }
        }
    }
    // Both sides must be exercised, or the mutations say nothing.
    assert!(
        accepted > 100 && refused > 1_000,
        "accepted {accepted}, refused {refused}"
    );
}
