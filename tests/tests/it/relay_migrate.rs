//! `repowire-relay migrate` (the chart's pre-install/pre-upgrade Job): it applies the schema
//! and exits; a schema newer than the relay knows is refused, by `migrate` and by `serve`, with
//! a line that says what to do, and nothing is changed.

use repowire_e2e::process::psql;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use repowire_e2e::process::{TempDatabase, relay_bin};

/// Runs the relay with `args` and `env` (nothing inherited but PATH) until it exits (at most
/// 30 s: a relay that serves instead of refusing fails the test).
fn relay(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut child = Command::new(relay_bin())
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!(
                "the relay did not exit: {:?}",
                child.wait_with_output().unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn migrate_applies_the_schema_and_a_newer_schema_is_refused() {
    let db = TempDatabase::create("repowire_migrate");
    let url = db.url();
    let env = [
        ("DATABASE_URL", url.as_str()),
        (
            "REPOWIRE_JWT_SECRET",
            "migrate-test-secret-migrate-test-secret",
        ),
        ("REPOWIRE_RELAY_LISTEN", "127.0.0.1:0"),
    ];
    let out = relay(&["migrate"], &env);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("database schema up to date"),
        "{}",
        text(&out)
    );
    let applied = psql(&url, "SELECT count(*) FROM _sqlx_migrations WHERE success");
    assert!(applied.parse::<u32>().unwrap() > 0);
    // It says what it applied: each migration, on an empty database.
    let said = text(&out);
    assert_eq!(
        said.matches("applied migration").count().to_string(),
        applied,
        "{said}"
    );
    // Again: nothing to do, still fine, and nothing applied; no NOTICE of Postgres at INFO.
    let again = relay(&["migrate"], &env);
    assert!(again.status.success(), "{}", text(&again));
    assert!(
        !text(&again).contains("applied migration"),
        "{}",
        text(&again)
    );
    assert!(!text(&again).contains("already exists"), "{}", text(&again));

    // A newer relay migrated this database.
    psql(
        &url,
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES (99990101000000, 'from a newer relay', true, '\\x00', 0)",
    );
    for args in [&["migrate"][..], &["serve"][..]] {
        let out = relay(args, &env);
        assert!(!out.status.success(), "{args:?} went ahead: {}", text(&out));
        let said = text(&out);
        assert!(
            said.contains("migration 99990101000000, which this relay does not know")
                && said.contains("run that version or a newer one"),
            "{args:?}: {said}"
        );
    }
    assert_eq!(
        psql(&url, "SELECT count(*) FROM _sqlx_migrations"),
        (applied.parse::<u32>().unwrap() + 1).to_string(),
        "nothing applied or removed"
    );
}

#[test]
fn migrate_creates_and_migrates_an_embedded_database() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let out = relay(&["migrate", "--data-dir", data.to_str().unwrap()], &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("database schema up to date"));
    assert!(
        std::fs::read_dir(&data).unwrap().count() > 0,
        "the database was created"
    );
}
