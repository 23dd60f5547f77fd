//! The JSON Schema of every frame (`docs/protocol.schema.json`), generated from this crate's
//! types: the committed file must be what the types say (run with `REPOWIRE_BLESS=1` to
//! rewrite it after a change), and every valid fixture must validate against it while the
//! invalid ones that are wrong in shape must not.

use std::path::PathBuf;

use repowire_protocol::Frame;
use repowire_protocol::http::{HttpError, TokenRequest, TokenResponse};
use schemars::generate::SchemaSettings;

fn committed() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/protocol.schema.json")
}

fn generated() -> String {
    let mut generator = SchemaSettings::draft2020_12().into_generator();
    for _ in [
        generator.subschema_for::<TokenRequest>(),
        generator.subschema_for::<TokenResponse>(),
        generator.subschema_for::<HttpError>(),
    ] {}
    let mut root = generator.root_schema_for::<Frame>();
    root.insert(
        "title".into(),
        "Repowire wire protocol v1: one frame (docs/protocol.md); HTTP bodies in $defs".into(),
    );
    let mut text = serde_json::to_string_pretty(&root).expect("schema serializes");
    text.push('\n');
    text
}

#[test]
fn the_committed_schema_is_what_the_types_say() {
    let now = generated();
    if std::env::var_os("REPOWIRE_BLESS").is_some() {
        std::fs::write(committed(), &now).expect("write the schema");
    }
    let on_disk = std::fs::read_to_string(committed()).unwrap_or_default();
    assert!(
        on_disk == now,
        "docs/protocol.schema.json is not what the protocol types generate; \
         run `REPOWIRE_BLESS=1 cargo test -p repowire-protocol --test schema` and commit it"
    );
}

fn fixtures(dir: &str) -> Vec<(String, serde_json::Value)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(dir);
    let mut out: Vec<_> = std::fs::read_dir(&dir)
        .expect("fixture dir")
        .filter_map(|e| {
            let path = e.expect("entry").path();
            let name = path.file_stem()?.to_string_lossy().into_owned();
            // Fixtures that are not JSON at all (or not one value) have no schema question.
            let value = serde_json::from_str(&std::fs::read_to_string(&path).ok()?).ok()?;
            Some((name, value))
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
fn every_valid_fixture_validates_and_shape_errors_do_not() {
    let schema: serde_json::Value = serde_json::from_str(&generated()).expect("json");
    let validator = jsonschema::draft202012::new(&schema).expect("a valid JSON Schema");
    for (name, frame) in fixtures("valid") {
        let errors: Vec<String> = validator
            .iter_errors(&frame)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{name}: {errors:?}");
    }
    // Refusals about shape (a wrong type, a missing field, an unknown enum value, a version
    // other than 1) are visible to the schema; limits in bytes and cross-field rules are not.
    for (name, frame) in fixtures("invalid") {
        let shape = name.contains("missing_field")
            || name.contains("missing_type")
            || name.contains("bad_enum")
            || (name.starts_with("unsupported_version") && !name.ends_with("float"))
            || name.starts_with("unknown_type");
        // `1.0` is the integer 1 to JSON Schema; protocol.md §2 requires integers written
        // without a fraction, which the decoder checks and the schema cannot express.
        if shape {
            assert!(!validator.is_valid(&frame), "{name} passes the schema");
        }
    }
}
