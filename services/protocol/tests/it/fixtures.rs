//! The JSON fixtures are the protocol's examples (docs/protocol.md shows the same shapes):
//! every valid fixture decodes and re-encodes to the same JSON value, and every invalid fixture
//! is refused with the error code its file name starts with (`<code>__<case>.json`).

use std::path::Path;

use repowire_protocol::{FRAME_TYPES, decode, encode, limits::MAX_FRAME_BYTES};

fn fixtures(dir: &str) -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(dir);
    let mut out: Vec<_> = std::fs::read_dir(&dir)
        .expect("fixture dir")
        .map(|e| {
            let path = e.expect("entry").path();
            let name = path
                .file_stem()
                .expect("stem")
                .to_string_lossy()
                .into_owned();
            (
                name,
                std::fs::read_to_string(&path)
                    .expect("read")
                    .trim_end()
                    .to_owned(),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn every_valid_fixture_round_trips_to_the_same_json() {
    let valid = fixtures("valid");
    for (name, text) in &valid {
        let frame = decode(text).unwrap_or_else(|e| panic!("{name}: {e}"));
        let original: serde_json::Value = serde_json::from_str(text).expect("json");
        let encoded: serde_json::Value = serde_json::from_str(&encode(&frame)).expect("json");
        assert_eq!(encoded, original, "{name} does not round-trip");
    }
    let covered: std::collections::HashSet<String> = valid
        .iter()
        .filter_map(|(_, t)| {
            serde_json::from_str::<serde_json::Value>(t).ok()?["type"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    for t in FRAME_TYPES {
        assert!(
            covered.contains(*t),
            "no valid fixture for frame type `{t}`"
        );
    }
}

#[test]
fn every_invalid_fixture_is_refused_with_its_code() {
    let invalid = fixtures("invalid");
    assert!(!invalid.is_empty());
    for (name, text) in &invalid {
        let want = name.split("__").next().expect("code prefix");
        let err = decode(text).expect_err(name);
        assert_eq!(err.code.as_str(), want, "{name}: {}", err.message);
    }
}

#[test]
fn frames_at_the_limit_decode_and_one_byte_over_is_refused() {
    let head =
        r#"{"v":1,"type":"hello","id":"0193a4c2-7b10-7c3e-9a51-0f6e2d1b8a01","client":"x","pad":""#;
    let fill = MAX_FRAME_BYTES - head.len() - 2;
    let at_limit = format!("{head}{}\"}}", "p".repeat(fill));
    assert_eq!(at_limit.len(), MAX_FRAME_BYTES);
    decode(&at_limit).expect("a frame of exactly the limit is accepted");
    let over = format!("{head}{}\"}}", "p".repeat(fill + 1));
    assert_eq!(
        decode(&over).expect_err("over").code.as_str(),
        "frame_too_large"
    );
}
