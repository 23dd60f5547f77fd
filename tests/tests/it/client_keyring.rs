//! Issue 35.10: the relay API key in the OS keyring. A real Secret Service — GNOME Keyring on a
//! D-Bus session bus of the test's own, its login keyring unlocked with a password, as a
//! desktop session has it — holds the key `setup` stores; `secret-tool` (libsecret, another
//! client) reads it back, so the key is in the keyring and not in some file of ours. Where no
//! keyring answers, the key goes to its 0600 file, and `--key-store` chooses either.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use repowire_e2e::agents::Home;
use repowire_e2e::process::{RelayProcess, relay_bin};

/// A session bus and GNOME Keyring's Secret Service on it, both stopped on drop.
struct SecretService {
    address: String,
    home: PathBuf,
    bus: Child,
    keyring: Child,
}

impl SecretService {
    /// Starts `dbus-daemon` on a socket under `dir`, then `gnome-keyring-daemon` with its
    /// login keyring unlocked (created, on the first start, with that password), for a user
    /// whose HOME is `home`; returns once the keyring owns `org.freedesktop.secrets`.
    fn start(dir: &Path, home: &Path) -> Self {
        for tool in [
            "dbus-daemon",
            "gnome-keyring-daemon",
            "secret-tool",
            "dbus-send",
        ] {
            assert!(
                Command::new("sh")
                    .args(["-c", &format!("command -v {tool}")])
                    .output()
                    .expect("sh")
                    .status
                    .success(),
                "{tool} is missing: scripts/test installs it (apt: dbus, gnome-keyring, libsecret-tools)"
            );
        }
        let socket = dir.join("bus");
        let address = format!("unix:path={}", socket.display());
        let bus = Command::new("dbus-daemon")
            .args(["--session", "--nofork", "--address", &address])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("dbus-daemon");
        wait_until("the session bus's socket", || socket.exists());
        let mut keyring = Command::new("gnome-keyring-daemon")
            .args(["--foreground", "--unlock", "--components=secrets"])
            .env("HOME", home)
            .env("DBUS_SESSION_BUS_ADDRESS", &address)
            .env_remove("XDG_RUNTIME_DIR")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("gnome-keyring-daemon");
        // The password on stdin, then end of input: what `--unlock` reads.
        let mut stdin = keyring.stdin.take().expect("stdin");
        stdin.write_all(b"keyring-password").expect("password");
        drop(stdin);
        let service = Self {
            address,
            home: home.to_path_buf(),
            bus,
            keyring,
        };
        wait_until("the Secret Service on the bus", || {
            service
                .run(
                    "dbus-send",
                    &[
                        "--session",
                        "--print-reply",
                        "--dest=org.freedesktop.DBus",
                        "/org/freedesktop/DBus",
                        "org.freedesktop.DBus.NameHasOwner",
                        "string:org.freedesktop.secrets",
                    ],
                )
                .is_ok_and(|said| said.contains("boolean true"))
        });
        service
    }

    /// Runs a tool as the user on this bus; its stdout when it succeeds.
    fn run(&self, program: &str, args: &[&str]) -> Result<String, Output> {
        let out = Command::new(program)
            .args(args)
            .env("HOME", &self.home)
            .env("DBUS_SESSION_BUS_ADDRESS", &self.address)
            .stdin(Stdio::null())
            .output()
            .expect(program);
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(out)
        }
    }

    /// What the keyring holds for a state directory, read by libsecret's `secret-tool`, not by
    /// our code (`None`: no such entry).
    fn lookup(&self, repowire_home: &Path) -> Option<String> {
        let user = format!("relay-api-key {}", repowire_home.display());
        self.run(
            "secret-tool",
            &["lookup", "service", "repowire", "username", &user],
        )
        .ok()
        .filter(|k| !k.is_empty())
    }
}

impl Drop for SecretService {
    fn drop(&mut self) {
        for child in [&mut self.keyring, &mut self.bus] {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Polls `ready` every 50 ms for up to 20 s.
fn wait_until(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !ready() {
        assert!(Instant::now() < deadline, "{what} did not come up in 20 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn config_toml(home: &Home) -> String {
    std::fs::read_to_string(home.repowire_home().join("config.toml")).expect("config.toml")
}

fn said(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_key_lives_in_the_os_keyring_where_one_answers_and_in_its_file_elsewhere() {
    let data = tempfile::tempdir().expect("data");
    let data_dir = data.path().to_str().expect("utf8").to_owned();
    let relay = RelayProcess::start(&relay_bin(), &["--data-dir", &data_dir], &[]).await;
    let key = relay.first_key.clone().expect("key");
    let bus_dir = tempfile::tempdir().expect("bus dir");
    let mut home = Home::new(None);
    let keyring = SecretService::start(bus_dir.path(), home.path());
    let key_file = home.repowire_home().join("relay-api-key");
    let setup = |home: &Home, store: Option<&str>| {
        let mut args = vec![
            "setup",
            "--non-interactive",
            "--relay-url",
            &relay.http,
            "--api-key",
            &key,
        ];
        if let Some(store) = store {
            args.extend(["--key-store", store]);
        }
        home.repowire(&args)
    };

    // With a keyring on the session bus, `setup` (auto) puts the key there and nowhere else.
    home.set_session_bus(Some(keyring.address.clone()));
    let out = setup(&home, None);
    assert!(out.status.success(), "{}", said(&out));
    assert!(
        said(&out).contains("the Secret Service keyring"),
        "{}",
        said(&out)
    );
    assert_eq!(
        keyring.lookup(&home.repowire_home()).as_deref(),
        Some(key.as_str())
    );
    assert!(!key_file.exists(), "the key was also written to a file");
    let config = config_toml(&home);
    assert!(
        config.contains("key_store = \"keyring\"") && !config.contains(&key),
        "{config}"
    );
    let shown = home.ok(&["config", "show"]);
    assert!(
        shown.contains("the Secret Service keyring") && !shown.contains(&key[12..]),
        "{shown}"
    );
    // The key read from the keyring is the one the relay takes: check-relay exchanges it, and
    // a daemon started from a shell without it in its environment connects with it.
    home.ok(&["check-relay"]);
    home.ok(&["daemon", "start"]);
    let status = home.json(&["daemon", "status"]);
    assert_eq!(status["relay"], relay.http.as_str(), "{status:#}");
    assert_eq!(status["embedded"], false, "{status:#}");
    home.ok(&["daemon", "stop"]);

    // The keyring gone (no session bus): a command that needs the key says where it is and
    // what to do, and changes nothing.
    home.set_session_bus(None);
    let out = home.repowire(&["check-relay"]);
    assert!(!out.status.success(), "{}", said(&out));
    assert!(
        said(&out).contains("the API key is in the OS keyring")
            && said(&out).contains("--key-store file"),
        "{}",
        said(&out)
    );
    assert_eq!(config_toml(&home), config);
    // `--key-store keyring` with none to reach fails and changes nothing either.
    let out = setup(&home, Some("keyring"));
    assert!(!out.status.success(), "{}", said(&out));
    assert!(said(&out).contains("nothing was changed"), "{}", said(&out));
    assert_eq!(config_toml(&home), config);
    assert!(!key_file.exists());
    assert_eq!(
        keyring.lookup(&home.repowire_home()).as_deref(),
        Some(key.as_str())
    );

    // `--key-store file` with the keyring back: the key moves to its 0600 file, and the
    // keyring's copy goes, so one copy is left.
    home.set_session_bus(Some(keyring.address.clone()));
    let out = setup(&home, Some("file"));
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(
        std::fs::read_to_string(&key_file).expect("key file").trim(),
        key
    );
    let mode = std::fs::metadata(&key_file)
        .expect("meta")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
    assert_eq!(keyring.lookup(&home.repowire_home()), None);
    assert!(config_toml(&home).contains("key_store = \"file\""));
    home.ok(&["check-relay"]);

    // A later setup that gives no key leaves the stored one where it is, keyring or not…
    home.ok(&["setup", "--non-interactive", "--circle", "backend"]);
    assert!(key_file.exists(), "setup --circle moved the key");
    assert_eq!(keyring.lookup(&home.repowire_home()), None);
    assert!(config_toml(&home).contains("key_store = \"file\""));
    // …and `--key-store` alone moves it.
    let moved = home.ok(&["setup", "--non-interactive", "--key-store", "keyring"]);
    assert!(moved.contains("the Secret Service keyring"), "{moved}");
    assert_eq!(
        keyring.lookup(&home.repowire_home()).as_deref(),
        Some(key.as_str())
    );
    assert!(!key_file.exists(), "the file copy stayed");
    assert!(config_toml(&home).contains("key_store = \"keyring\""));
    home.ok(&["check-relay"]);

    // Auto without a keyring (a server, SSH without a session bus): the file, and setup says
    // why the keyring was passed over.
    let other = Home::new(None);
    let out = setup(&other, None);
    assert!(out.status.success(), "{}", said(&out));
    assert!(
        said(&out).contains("no OS keyring was usable"),
        "{}",
        said(&out)
    );
    assert_eq!(
        std::fs::read_to_string(other.repowire_home().join("relay-api-key"))
            .expect("key file")
            .trim(),
        key
    );
    other.ok(&["check-relay"]);
}
