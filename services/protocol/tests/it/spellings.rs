//! One source for every wire spelling: the `as_str`/`FromStr` of the protocol's enums (strum)
//! must say exactly what serde writes and reads, for every variant, and a frame's `type_name`
//! must be its JSON `type`.

use std::fmt::Debug;
use std::str::FromStr;

use repowire_protocol::*;
use serde::Serialize;
use strum::IntoEnumIterator;

fn spelled_like_serde<T>()
where
    T: IntoEnumIterator + Serialize + Into<&'static str> + FromStr + PartialEq + Debug + Copy,
    <T as FromStr>::Err: Debug,
{
    let mut seen = 0;
    for v in T::iter() {
        let serde = serde_json::to_value(v).expect("serialize");
        let ours: &'static str = v.into();
        assert_eq!(serde.as_str(), Some(ours), "{v:?}");
        assert_eq!(T::from_str(ours).expect("parse"), v);
        seen += 1;
    }
    assert!(seen > 1);
}

#[test]
fn every_enum_spells_its_variants_as_serde_does() {
    spelled_like_serde::<Role>();
    spelled_like_serde::<PeerStatus>();
    spelled_like_serde::<TurnState>();
    spelled_like_serde::<QuestionKind>();
    spelled_like_serde::<ReceiptState>();
    spelled_like_serde::<MessageKind>();
    spelled_like_serde::<DeliveryState>();
    spelled_like_serde::<PresenceEvent>();
    spelled_like_serde::<SessionStatus>();
    spelled_like_serde::<ConversationEvent>();
    spelled_like_serde::<ErrorCode>();
}

#[test]
fn every_valid_fixtures_type_is_its_frames_type_name_and_known() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/valid");
    let mut types = std::collections::BTreeSet::new();
    for entry in std::fs::read_dir(dir).expect("fixtures") {
        let text = std::fs::read_to_string(entry.expect("entry").path()).expect("read");
        let json: serde_json::Value = serde_json::from_str(&text).expect("json");
        let frame = decode(&text).expect("valid fixture");
        assert_eq!(Some(frame.body.type_name()), json["type"].as_str());
        assert!(FRAME_TYPES.contains(&frame.body.type_name()));
        types.insert(frame.body.type_name());
    }
    let unique: std::collections::BTreeSet<_> = FRAME_TYPES.iter().collect();
    assert_eq!(unique.len(), FRAME_TYPES.len(), "no type listed twice");
    assert!(
        types.len() >= 20,
        "the fixtures cover the frame types: {types:?}"
    );
}

/// Every error code is explained in docs/protocol.md §11, the table a client author reads.
#[test]
fn every_error_code_is_in_the_protocol_documents_table() {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/protocol.md"),
    )
    .expect("docs/protocol.md");
    let table = doc
        .split("## 11. Error codes")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("section 11");
    for code in ErrorCode::iter() {
        let row = format!("| `{}` |", code.as_str());
        assert!(table.contains(&row), "{row} is missing from §11");
    }
}

/// The Changes table of docs/protocol.md reads newest first and, within a date, in the order of
/// the first section each row touched; every section a row names is a heading of the document.
#[test]
fn the_changes_table_is_ordered_and_names_real_sections() {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/protocol.md"),
    )
    .expect("docs/protocol.md");
    let headings: std::collections::HashSet<String> = doc
        .lines()
        .filter(|l| l.starts_with('#'))
        .filter_map(|l| {
            let number = l.trim_start_matches('#').split_whitespace().next()?;
            Some(number.trim_end_matches('.').to_owned())
        })
        .collect();
    let table = doc
        .split("## Changes")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("the Changes section");
    let section = |s: &str| -> Vec<u32> { s.split('.').map(|n| n.parse().expect(s)).collect() };
    let mut rows = Vec::new();
    for line in table.lines().filter(|l| l.starts_with("| 20")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let (date, sections) = (cells[1].to_owned(), cells[2]);
        let named: Vec<&str> = sections
            .split(',')
            .map(|s| s.trim().trim_start_matches('§'))
            .collect();
        for n in &named {
            assert!(headings.contains(*n), "{date}: §{n} is not a section");
        }
        rows.push((date, section(named[0])));
    }
    assert!(rows.len() > 20, "{} rows", rows.len());
    for pair in rows.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        assert!(
            a.0 > b.0 || (a.0 == b.0 && a.1 <= b.1),
            "out of order: {a:?} before {b:?}"
        );
    }
}
