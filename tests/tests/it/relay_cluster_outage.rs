//! Redis goes away under a two-pod cluster and comes back: the pods report not ready while it
//! is gone, keep accepting (messages are in Postgres), and once it is back they record presence
//! again and push what could not be forwarded — without a restart. Uses a private Redis server
//! on its own port, so the machine's Redis (and other tests) are untouched.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use repowire_e2e::client::TestClient;
use repowire_e2e::process::{RelayProcess, TempDatabase};
use repowire_protocol::*;

struct Redis {
    port: u16,
    child: Option<Child>,
}

impl Redis {
    fn start(port: u16) -> Self {
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server (scripts/test installs it)");
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "redis did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Self {
            port,
            child: Some(child),
        }
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.stop();
    }
}

async fn readyz(http: &str) -> u16 {
    reqwest::get(format!("{http}/readyz"))
        .await
        .map(|r| r.status().as_u16())
        .unwrap_or(0)
}

async fn until(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_recover_by_themselves_when_redis_comes_back() {
    let db = TempDatabase::create("repowire_outage");
    let port = repowire_e2e::free_port();
    let mut redis = Redis::start(port);
    let url = db.url();
    let redis_url = redis.url();
    let pod = |name: &'static str| {
        RelayProcess::start_pod(
            &url,
            &redis_url,
            "outage",
            name,
            &[("REPOWIRE_PRESENCE_TTL_SECS", "3")],
        )
    };
    let a_pod = pod("pod-a").await;
    let key = a_pod.first_key.clone().expect("key");
    let b_pod = pod("pod-b").await;
    let mut a = TestClient::connect(&a_pod.http, &a_pod.ws, &key).await;
    let mut b = TestClient::connect(&b_pod.http, &b_pod.ws, &key).await;
    let alice = a.peer("alice", "dev").await;
    let bob = b.peer("bob", "dev").await;
    // A second key, in use on pod b, is revoked while Redis is down (below).
    let admin = |args: &[&str]| repowire_e2e::process::admin(&url, args);
    let created = admin(&["key", "create", "default", "--label", "carol"]);
    let carol_key = created
        .lines()
        .find(|l| l.starts_with("rw_"))
        .unwrap_or_else(|| panic!("no key printed: {created}"))
        .to_owned();
    let carol_key_id = repowire_e2e::process::key_id_labelled(&url, "default", "carol");
    let mut c = TestClient::connect(&b_pod.http, &b_pod.ws, &carol_key).await;
    c.peer("carol", "dev").await;
    let first = a
        .notify(&alice, bob.peer_id.as_str(), "before")
        .await
        .expect("accepted");
    assert_eq!(
        b.delivered_to(&bob.peer_id).await.message.message_id,
        first.message_id
    );

    // Redis goes away: both pods say so on /readyz; sends are still accepted (persisted).
    redis.stop();
    until("pod a not ready", async || readyz(&a_pod.http).await == 503).await;
    until("pod b not ready", async || readyz(&b_pod.http).await == 503).await;
    // A broadcast's recipients on other pods are unknown without Redis: refused, not shrunk.
    let refused = a
        .submit(Body::Broadcast(Broadcast {
            from: alice.peer_id.clone(),
            text: "to whom?".into(),
        }))
        .await
        .expect_err("a broadcast needs the cluster's presence");
    assert_eq!(refused.code, ErrorCode::Unavailable, "{refused:?}");
    let mut during = Vec::new();
    for i in 0..5 {
        let sent = a
            .notify(&alice, bob.peer_id.as_str(), &format!("during {i}"))
            .await
            .expect("accepted");
        during.push(sent.message_id);
    }

    // Carol's key is revoked now: no pod can hear about it over Redis.
    admin(&["key", "revoke", &carol_key_id]);

    // It comes back (empty: it keeps nothing on disk). Without any restart the pods are ready
    // again and bob, still connected to pod b, gets every message sent meanwhile.
    let _redis = Redis::start(port);
    until("pod a ready", async || readyz(&a_pod.http).await == 200).await;
    until("pod b ready", async || readyz(&b_pod.http).await == 200).await;
    let mut got = std::collections::HashSet::new();
    while !during.iter().all(|id| got.contains(id)) {
        let d = b.delivered_to(&bob.peer_id).await;
        got.insert(d.message.message_id);
        b.receipt(&bob.peer_id, d.message.message_id, ReceiptState::Delivered)
            .await;
    }
    // Pod b checked its connections' keys when the bus came back: carol's is closed.
    let close = c.closed().await.expect("a close frame");
    assert_eq!(u16::from(close.code), CloseCode::KEY_REVOKED, "{close:?}");
    // And live forwarding works again.
    let after = a
        .notify(&alice, bob.peer_id.as_str(), "after")
        .await
        .expect("accepted");
    loop {
        let d = b.delivered_to(&bob.peer_id).await;
        if d.message.message_id == after.message_id {
            break;
        }
    }
}

/// A private Postgres cluster on its own port (initdb + pg_ctl), so stopping it disturbs nothing
/// else. As root the server runs as the `postgres` user, as Postgres requires.
struct PrivatePostgres {
    dir: tempfile::TempDir,
    port: u16,
}

impl PrivatePostgres {
    fn bin(name: &str) -> String {
        let mut versions: Vec<String> = std::fs::read_dir("/usr/lib/postgresql")
            .expect("Postgres server binaries (scripts/test installs them)")
            .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect();
        versions.sort_by_key(|v| v.parse::<u32>().unwrap_or(0));
        format!(
            "/usr/lib/postgresql/{}/bin/{name}",
            versions.last().expect("a version")
        )
    }

    fn run(&self, program: &str, args: &[&str]) {
        let root = Command::new("id")
            .arg("-u")
            .output()
            .map(|o| o.stdout == b"0\n")
            .unwrap_or(false);
        let mut cmd = if root {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--", &Self::bin(program)]);
            c
        } else {
            Command::new(Self::bin(program))
        };
        let out = cmd.args(args).output().expect(program);
        assert!(
            out.status.success(),
            "{program}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn create() -> Self {
        let dir = tempfile::tempdir().expect("dir");
        let _ = Command::new("chown")
            .args(["postgres", &dir.path().to_string_lossy()])
            .status();
        let pg = Self {
            port: repowire_e2e::free_port(),
            dir,
        };
        let data = pg.data();
        pg.run("initdb", &["-D", &data, "-A", "trust", "-U", "postgres"]);
        pg.start();
        pg
    }

    fn data(&self) -> String {
        self.dir.path().join("data").to_string_lossy().into_owned()
    }

    fn start(&self) {
        let opts = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1",
            self.port,
            self.dir.path().display()
        );
        let log = self.dir.path().join("log").to_string_lossy().into_owned();
        self.run(
            "pg_ctl",
            &["-D", &self.data(), "-o", &opts, "-l", &log, "-w", "start"],
        );
    }

    fn stop(&self) {
        self.run(
            "pg_ctl",
            &["-D", &self.data(), "-m", "immediate", "-w", "stop"],
        );
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        let data = self.data();
        let _ = std::panic::catch_unwind(|| {
            self.run("pg_ctl", &["-D", &data, "-m", "immediate", "-w", "stop"])
        });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_refuse_explicitly_while_postgres_is_down_and_recover() {
    let pg = PrivatePostgres::create();
    let redis = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let prefix = format!("repowire-test-{}", uuid::Uuid::new_v4().simple());
    let url = pg.url();
    let pod = |name: &'static str| RelayProcess::start_pod(&url, &redis, &prefix, name, &[]);
    let a_pod = pod("pod-a").await;
    let key = a_pod.first_key.clone().expect("key");
    let b_pod = pod("pod-b").await;
    let mut a = TestClient::connect(&a_pod.http, &a_pod.ws, &key).await;
    let mut b = TestClient::connect(&b_pod.http, &b_pod.ws, &key).await;
    let alice = a.peer("alice", "dev").await;
    let bob = b.peer("bob", "dev").await;
    let before = a
        .notify(&alice, bob.peer_id.as_str(), "before")
        .await
        .expect("accepted");
    assert_eq!(
        b.delivered_to(&bob.peer_id).await.message.message_id,
        before.message_id
    );

    // Postgres goes away: not ready, and a send is refused with `unavailable` — never accepted.
    pg.stop();
    until("pod a not ready", async || readyz(&a_pod.http).await == 503).await;
    until("pod b not ready", async || readyz(&b_pod.http).await == 503).await;
    let frame = Frame::new(Body::Notify(Notify {
        from: alice.peer_id.clone(),
        to: bob.peer_id.to_string(),
        circle: None,
        text: "during".into(),
    }));
    a.send_frame(&frame).await;
    // The refusal comes once the pool gives up reaching the database (its acquire timeout,
    // possibly twice: the handler's lookup, then the write).
    a.patience(Duration::from_secs(60));
    let refused = a
        .answer(frame.id)
        .await
        .expect_err("not accepted while the database is down");
    assert_eq!(refused.code, ErrorCode::Unavailable, "{refused:?}");

    // It comes back: ready again without a restart, and the same frame (same id) is accepted
    // and delivered once.
    pg.start();
    until("pod a ready", async || readyz(&a_pod.http).await == 200).await;
    until("pod b ready", async || readyz(&b_pod.http).await == 200).await;
    a.send_frame(&frame).await;
    match a.answer(frame.id).await {
        Ok(Body::Accepted(acc)) => assert_eq!(acc.message_id, frame.id),
        other => panic!("the retry was not accepted: {other:?}"),
    }
    assert_eq!(
        b.delivered_to(&bob.peer_id).await.message.message_id,
        frame.id
    );
}
