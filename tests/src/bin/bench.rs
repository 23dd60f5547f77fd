//! `repowire-bench`: measures a real `repowire-relay` process on loopback.
//!
//! 1. latency: one sender, one receiver; each notify is sent only after the previous one was
//!    delivered; the time from send to `deliver` at the receiver is recorded (the relay has
//!    persisted it by then). The receiver answers each with a `delivered` receipt, as a daemon
//!    does.
//! 2. throughput: N sender/receiver pairs; senders pipeline notifies with a window; receivers
//!    send receipts. Reports accepted and delivered messages per second, the durable-accept
//!    latency under that load, and checks that every accepted message was delivered once.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;
use futures::{SinkExt, StreamExt};
use hdrhistogram::Histogram;
use repowire_e2e::client::{open, token};
use repowire_e2e::process::{RelayProcess, relay_bin};
use repowire_protocol::*;
use tokio::sync::{Mutex, Semaphore, mpsc};
use tokio_tungstenite::tungstenite::Message as WsMessage;

#[derive(Debug, Parser)]
struct Args {
    /// Postgres URL of an empty database for the relay; without it the relay runs embedded.
    #[arg(long)]
    database_url: Option<String>,
    /// Sequential notifies for the latency run.
    #[arg(long, default_value_t = 2000)]
    latency_count: u32,
    /// Sender/receiver pairs for the throughput run.
    #[arg(long, default_value_t = 16)]
    pairs: usize,
    /// Unacknowledged notifies per sender.
    #[arg(long, default_value_t = 256)]
    window: usize,
    /// Duration of the throughput run.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Total rate of the paced run (messages/s), well below saturation: it measures the
    /// durable-accept latency a sender sees under steady load.
    #[arg(long, default_value_t = 1000)]
    paced_rate: u64,
    /// Duration of the paced run.
    #[arg(long, default_value_t = 5)]
    paced_seconds: u64,
    /// Receivers send no receipts (analysis only: shows what per-message receipts cost).
    #[arg(long)]
    no_receipts: bool,
    /// Redis for a cross-pod phase (two pods on `--database-url`).
    #[arg(long)]
    redis_url: Option<String>,
    /// Authenticated idle connections for the memory measurement (0 skips it).
    #[arg(long, default_value_t = 10_000)]
    idle_connections: usize,
    /// Give the tenant every limit, set far above what the load reaches, so each check runs
    /// (the cluster-wide rate on Redis with `--redis-url`, the monthly quota, peers,
    /// connections) and none refuses; without it the tenant is on the `unlimited` plan and
    /// the checks have nothing to do. Compare the two, back to back.
    #[arg(long)]
    limited: bool,
}

/// The limits `--limited` gives the `default` tenant: each the highest the admin API takes,
/// far above what any phase sends.
const BENCH_LIMITS: &str = r#"{"overrides": {"max_peers": 1000000, "max_connections": 1000000,
    "max_message_bytes": 32768, "inbox_cap": 1000000, "messages_per_minute": 100000000,
    "messages_per_month": 1000000000000}}"#;

/// Sets [`BENCH_LIMITS`] on the `default` tenant through the admin API.
async fn set_limits(http: &str, admin: &str) -> anyhow::Result<()> {
    let body: serde_json::Value = serde_json::from_str(BENCH_LIMITS)?;
    let response = reqwest::Client::new()
        .patch(format!("{http}/admin/v1/tenants/default"))
        .bearer_auth(admin)
        .json(&body)
        .send()
        .await?;
    if !response.status().is_success() {
        bail!("setting the tenant's limits: {}", response.text().await?);
    }
    Ok(())
}

/// Resident memory of a process, from /proc.
fn rss_kib(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .context("no VmRSS in /proc status")
}

/// A relay process the throughput phase reports the cost of: its pid and its HTTP address.
type Observed<'a> = (u32, &'a str);

/// What a relay had spent at one moment: CPU seconds (user + system, from /proc: time the
/// process ran, whatever the machine's steal), and its writer lanes' totals from `/metrics`.
#[derive(Default, Clone)]
struct Spent {
    cpu_s: f64,
    lanes: Vec<Lane>,
}

/// One writer lane's totals: time in transactions, writes, batches.
#[derive(Default, Clone)]
struct Lane {
    name: String,
    apply_s: f64,
    writes: f64,
    batches: f64,
}

impl Spent {
    async fn of((pid, http): Observed<'_>) -> anyhow::Result<Self> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
        // Fields after the command name (which may hold spaces): utime and stime are 14 and 15.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.split_whitespace().collect())
            .unwrap_or_default();
        let ticks = |i: usize| -> f64 { fields.get(i).and_then(|v| v.parse().ok()).unwrap_or(0.0) };
        let metrics = reqwest::get(format!("{http}/metrics"))
            .await?
            .text()
            .await?;
        // `name{lane="x"} value` for each lane, in the order the relay lists them.
        let by_lane = |name: &str| -> Vec<(String, f64)> {
            metrics
                .lines()
                .filter_map(|l| {
                    let rest = l.strip_prefix(name)?.strip_prefix("{lane=\"")?;
                    let (lane, value) = rest.split_once("\"} ")?;
                    Some((lane.to_owned(), value.trim().parse().ok()?))
                })
                .collect()
        };
        let (seconds, writes, batches) = (
            by_lane("repowire_write_batch_seconds_sum"),
            by_lane("repowire_write_batch_size_sum"),
            by_lane("repowire_write_batch_size_count"),
        );
        let of = |v: &[(String, f64)], lane: &str| {
            v.iter().find(|(l, _)| l == lane).map_or(0.0, |(_, x)| *x)
        };
        Ok(Self {
            cpu_s: (ticks(11) + ticks(12)) / clock_ticks_per_second(),
            lanes: seconds
                .iter()
                .map(|(lane, apply_s)| Lane {
                    name: lane.clone(),
                    apply_s: *apply_s,
                    writes: of(&writes, lane),
                    batches: of(&batches, lane),
                })
                .collect(),
        })
    }
}

/// The kernel's clock tick (`getconf CLK_TCK`), 100 where it cannot be read.
fn clock_ticks_per_second() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(100.0)
    })
}

/// Opens `n` authenticated connections (hello answered with welcome), measures the relay's RSS
/// growth, then closes them.
async fn idle_memory(http: &str, ws: &str, key: &str, pid: u32, n: usize) -> anyhow::Result<()> {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
    let token = token(http, key)
        .await
        .map_err(|(s, b)| anyhow::anyhow!("token: {s} {b}"))?
        .token;
    let before = rss_kib(pid)?;
    let started = Instant::now();
    let open = |_: usize| {
        let (ws, token) = (ws.to_owned(), token.clone());
        async move {
            let mut request = ws.into_client_request()?;
            request
                .headers_mut()
                .insert("authorization", format!("Bearer {token}").parse()?);
            // Small client buffers: 10 000 default ones would cost the load generator 1.3 GB.
            let config = WebSocketConfig::default()
                .read_buffer_size(4096)
                .write_buffer_size(0);
            let (mut socket, _) =
                tokio_tungstenite::connect_async_with_config(request, Some(config), true).await?;
            let hello = Frame::new(Body::Hello(Hello {
                client: "repowire-bench-idle".into(),
            }));
            socket.send(WsMessage::Text(encode(&hello).into())).await?;
            loop {
                match socket.next().await {
                    Some(Ok(WsMessage::Text(t))) if t.as_str().contains("\"welcome\"") => {
                        return anyhow::Ok(socket);
                    }
                    Some(Ok(_)) => continue,
                    other => bail!("no welcome: {other:?}"),
                }
            }
        }
    };
    let mut sockets = Vec::with_capacity(n);
    let mut pending = futures::stream::iter(0..n).map(open).buffer_unordered(256);
    while let Some(socket) = pending.next().await {
        sockets.push(socket?);
    }
    let opened = started.elapsed();
    // Let the relay finish its per-connection setup before reading RSS.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = rss_kib(pid)?;
    let per = (after.saturating_sub(before)) as f64 * 1024.0 / n as f64;
    println!(
        "idle     {n} authenticated connections opened in {:.1} s: relay RSS {before} KiB -> {after} KiB, {:.0} bytes ({:.1} KiB) per connection",
        opened.as_secs_f64(),
        per,
        per / 1024.0
    );
    drop(sockets);
    // Wait for the relay to finish closing them, so the next phase measures a quiet relay.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let metrics = reqwest::get(format!("{http}/metrics"))
            .await?
            .text()
            .await?;
        let open = metrics
            .lines()
            .find_map(|l| l.strip_prefix("repowire_connections "))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or(0.0);
        if open < 1.0 {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("the relay still holds {open} connections a minute after they were closed");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

struct Conn {
    tx: mpsc::UnboundedSender<String>,
    rx: mpsc::UnboundedReceiver<Frame>,
}

async fn connect(http: &str, ws: &str, key: &str) -> anyhow::Result<Conn> {
    let token = token(http, key)
        .await
        .map_err(|(s, b)| anyhow::anyhow!("token: {s} {b}"))?;
    let socket = open(ws, Some(&token.token))
        .await
        .map_err(|s| anyhow::anyhow!("upgrade: {s}"))?;
    let (mut sink, mut stream) = socket.split();
    let (tx, mut out) = mpsc::unbounded_channel::<String>();
    let (inc, rx) = mpsc::unbounded_channel::<Frame>();
    // Whatever is queued leaves with one flush (as the relay writes): the load generator shares
    // the machine's cores with the relay and Postgres, so a send system call per frame would be
    // measured as the relay's slowness.
    tokio::spawn(async move {
        while let Some(text) = out.recv().await {
            let mut next = Some(text);
            while let Some(text) = next.take() {
                if sink.feed(WsMessage::Text(text.into())).await.is_err() {
                    return;
                }
                next = out.try_recv().ok();
            }
            if sink.flush().await.is_err() {
                return;
            }
        }
    });
    tokio::spawn(async move {
        while let Some(msg) = stream.next().await {
            match msg {
                Ok(WsMessage::Text(t)) => {
                    if let Ok(f) = serde_json::from_str::<Frame>(t.as_str())
                        && inc.send(f).is_err()
                    {
                        return;
                    }
                }
                // The relay closing a connection mid-run is worth knowing whatever follows
                // (a slow-consumer kick, a storage error): say so, with its code.
                Ok(WsMessage::Close(c)) => {
                    eprintln!("bench: the relay closed a connection: {c:?}");
                    return;
                }
                Ok(_) => {}
                Err(e) => {
                    eprintln!("bench: a connection broke: {e}");
                    return;
                }
            }
        }
    });
    let mut c = Conn { tx, rx };
    c.send(Body::Hello(Hello {
        client: "repowire-bench".into(),
    }));
    c.until(|b| matches!(b, Body::Welcome(_))).await?;
    Ok(c)
}

impl Conn {
    fn send(&self, body: Body) -> MessageId {
        let f = Frame::new(body);
        let _ = self.tx.send(encode(&f));
        f.id
    }

    async fn until(&mut self, pick: impl Fn(&Body) -> bool) -> anyhow::Result<Frame> {
        loop {
            let f = tokio::time::timeout(Duration::from_secs(30), self.rx.recv())
                .await
                .context("timed out")?
                .context("connection closed")?;
            if let Body::Error(e) = &f.body {
                bail!("relay error: {:?} {}", e.code, e.message);
            }
            if pick(&f.body) {
                return Ok(f);
            }
        }
    }

    async fn register(&mut self, name: &str) -> anyhow::Result<PeerId> {
        self.send(Body::Register(Register {
            name: Some(name.into()),
            circle: Some("bench".into()),
            backend: "bench".into(),
            ..Default::default()
        }));
        let f = self.until(|b| matches!(b, Body::Registered(_))).await?;
        match f.body {
            Body::Registered(r) => Ok(r.peer.peer_id),
            _ => unreachable!(),
        }
    }
}

fn notify(from: &PeerId, to: &str, text: &str) -> Body {
    Body::Notify(Notify {
        from: from.clone(),
        to: to.into(),
        circle: None,
        text: text.into(),
    })
}

/// A quantile of a histogram recorded in microseconds, in milliseconds.
fn millis(h: &Histogram<u64>, q: f64) -> f64 {
    h.value_at_quantile(q) as f64 / 1000.0
}

/// A relay's HTTP base and WebSocket URL.
type Endpoint<'a> = (&'a str, &'a str);

/// Peers are named after `tag`, distinct per phase: every phase runs in the same tenant, and a
/// name with several stored peers (an earlier phase's, offline) costs a presence lookup per
/// candidate in a cluster, which is name resolution, not the hop measured here.
async fn latency(
    sender: Endpoint<'_>,
    receiver: Endpoint<'_>,
    tag: &str,
    key: &str,
    count: u32,
    label: &str,
) -> anyhow::Result<()> {
    let mut a = connect(sender.0, sender.1, key).await?;
    let mut b = connect(receiver.0, receiver.1, key).await?;
    let to = format!("{tag}lat-b");
    let alice = a.register(&format!("{tag}lat-a")).await?;
    let bob = b.register(&to).await?;
    let atx = a.tx.clone();
    // The sender's own frames (accepted, delivery updates) are drained and ignored here.
    tokio::spawn(async move { while a.rx.recv().await.is_some() {} });
    let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
    for i in 0..count + 200 {
        let frame = Frame::new(notify(&alice, &to, "ping"));
        let id = frame.id;
        let started = Instant::now();
        atx.send(encode(&frame))?;
        let got = b
            .until(|body| matches!(body, Body::Deliver(d) if d.message.message_id == id))
            .await?;
        let elapsed = started.elapsed();
        if let Body::Deliver(d) = got.body {
            b.send(Body::Receipt(Receipt {
                peer_id: bob.clone(),
                message_id: d.message.message_id,
                state: ReceiptState::Delivered,
                reason: None,
            }));
        }
        if i >= 200 {
            // The first 200 warm up connections, caches and the pool.
            h.record(elapsed.as_micros().max(1) as u64)?;
        }
    }
    println!(
        "latency  notify {label} (persisted before delivery), {count} sequential: p50 {:.2} ms  p90 {:.2} ms  p99 {:.2} ms  max {:.2} ms",
        millis(&h, 0.5),
        millis(&h, 0.9),
        millis(&h, 0.99),
        h.max() as f64 / 1000.0
    );
    Ok(())
}

/// Load shape: saturating (window-bound) or paced at a total rate.
#[derive(Clone, Copy)]
enum Load {
    Saturate { window: usize },
    Paced { rate: u64 },
}

/// Pairs of (sender's relay, receiver's relay); pair `p` uses `sides[p % sides.len()]`.
type Sides<'a> = &'a [(Endpoint<'a>, Endpoint<'a>)];

#[allow(clippy::too_many_arguments)] // one benchmark phase's knobs
async fn throughput(
    sides: Sides<'_>,
    observed: &[Observed<'_>],
    name: &str,
    key: &str,
    pairs: usize,
    load: Load,
    seconds: u64,
    receipts: bool,
) -> anyhow::Result<()> {
    let (window, tag) = match load {
        Load::Saturate { window } => (window, format!("{name}sat")),
        Load::Paced { .. } => (1 << 20, format!("{name}paced")),
    };
    let stop = Arc::new(AtomicBool::new(false));
    let accepted = Arc::new(AtomicU64::new(0));
    let delivered = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let accept_latency = Arc::new(Mutex::new(Histogram::<u64>::new_with_bounds(
        1, 60_000_000, 3,
    )?));
    let seen = Arc::new(Mutex::new(HashSet::<MessageId>::new()));
    let duplicates = Arc::new(AtomicU64::new(0));
    let codes = Arc::new(std::sync::Mutex::new(std::collections::BTreeMap::<
        &'static str,
        u64,
    >::new()));
    let mut senders = Vec::new();
    // Senders wait for every pair to be set up: started one by one, the first would load the
    // relay while the last connect, and what they sent meanwhile would count as sent within the
    // measured time.
    let (go, ready) = tokio::sync::watch::channel(false);
    // Accepted and delivered per pair, to say which receivers fell behind if any did.
    let mut per_pair = Vec::new();
    for p in 0..pairs {
        let (pair_acc, pair_del) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        per_pair.push((pair_acc.clone(), pair_del.clone()));
        let ((s_http, s_ws), (r_http, r_ws)) = sides[p % sides.len()];
        let mut s = connect(s_http, s_ws, key).await?;
        let mut r = connect(r_http, r_ws, key).await?;
        let from = s.register(&format!("{tag}-tx-{p}")).await?;
        let to_id = r.register(&format!("{tag}-rx-{p}")).await?;
        // Receiver: count, de-duplicate, receipt.
        {
            let (delivered, seen, duplicates, pair_del) = (
                delivered.clone(),
                seen.clone(),
                duplicates.clone(),
                pair_del.clone(),
            );
            let tx = r.tx.clone();
            tokio::spawn(async move {
                while let Some(f) = r.rx.recv().await {
                    if let Body::Deliver(d) = f.body {
                        if seen.lock().await.insert(d.message.message_id) {
                            delivered.fetch_add(1, Ordering::Relaxed);
                            pair_del.fetch_add(1, Ordering::Relaxed);
                        } else {
                            duplicates.fetch_add(1, Ordering::Relaxed);
                        }
                        let receipt = Frame::new(Body::Receipt(Receipt {
                            peer_id: to_id.clone(),
                            message_id: d.message.message_id,
                            state: ReceiptState::Delivered,
                            reason: None,
                        }));
                        if receipts {
                            let _ = tx.send(encode(&receipt));
                        }
                    }
                }
            });
        }
        // Sender: pipelined notifies bounded by a window; its reader releases the window.
        let permits = Arc::new(Semaphore::new(window));
        let sent_at = Arc::new(std::sync::Mutex::new(HashMap::<MessageId, Instant>::new()));
        {
            let (permits, sent_at, accepted, errors, hist, codes) = (
                permits.clone(),
                sent_at.clone(),
                accepted.clone(),
                errors.clone(),
                accept_latency.clone(),
                codes.clone(),
            );
            tokio::spawn(async move {
                while let Some(f) = s.rx.recv().await {
                    let re = match &f.body {
                        Body::Accepted(a) => {
                            accepted.fetch_add(1, Ordering::Relaxed);
                            pair_acc.fetch_add(1, Ordering::Relaxed);
                            Some(a.re)
                        }
                        Body::Error(e) => {
                            errors.fetch_add(1, Ordering::Relaxed);
                            if let Ok(mut by) = codes.lock() {
                                *by.entry(e.code.as_str()).or_insert(0u64) += 1;
                            }
                            e.re
                        }
                        _ => None,
                    };
                    if let Some(re) = re {
                        let started = sent_at.lock().ok().and_then(|mut m| m.remove(&re));
                        if let Some(t) = started {
                            let _ = hist
                                .lock()
                                .await
                                .record(t.elapsed().as_micros().max(1) as u64);
                        }
                        permits.add_permits(1);
                    }
                }
                // The connection is gone (the relay closed it: said on stderr): stop sending on
                // it rather than wait for answers that cannot come.
                permits.close();
            });
        }
        let (stop, tx, to) = (stop.clone(), s.tx.clone(), format!("{tag}-rx-{p}"));
        let mut pace = match load {
            Load::Paced { rate } => {
                let period = Duration::from_secs_f64(pairs as f64 / rate.max(1) as f64);
                Some(tokio::time::interval(period))
            }
            Load::Saturate { .. } => None,
        };
        let mut ready = ready.clone();
        senders.push(tokio::spawn(async move {
            let mut n = 0u64;
            if ready.wait_for(|&go| go).await.is_err() {
                return n;
            }
            if let Some(p) = pace.as_mut() {
                p.reset(); // no burst for the ticks missed while waiting
            }
            while !stop.load(Ordering::Relaxed) {
                if let Some(p) = pace.as_mut() {
                    p.tick().await;
                }
                let Ok(permit) = permits.acquire().await else {
                    break;
                };
                permit.forget();
                let frame = Frame::new(notify(&from, &to, "throughput"));
                if let Ok(mut m) = sent_at.lock() {
                    m.insert(frame.id, Instant::now());
                }
                if tx.send(encode(&frame)).is_err() {
                    break;
                }
                n += 1;
            }
            n
        }));
    }
    let started = Instant::now();
    go.send_replace(true);
    let acc_at_start = accepted.load(Ordering::Relaxed);
    let mut before = Vec::with_capacity(observed.len());
    for &o in observed {
        before.push(Spent::of(o).await?);
    }
    let sampled = Instant::now();
    tokio::time::sleep(Duration::from_secs(seconds)).await; // the measurement window itself
    let mut after = Vec::with_capacity(observed.len());
    for &o in observed {
        after.push(Spent::of(o).await?);
    }
    let acc_in_window = accepted.load(Ordering::Relaxed) - acc_at_start;
    let between = sampled.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let active = started.elapsed();
    let acc_at_stop = accepted.load(Ordering::Relaxed);
    let del_at_stop = delivered.load(Ordering::Relaxed);
    let mut sent = 0;
    for s in senders {
        sent += s.await?;
    }
    // Drain: everything sent must be answered, everything accepted delivered.
    let deadline = Instant::now() + Duration::from_secs(60);
    while (accepted.load(Ordering::Relaxed) + errors.load(Ordering::Relaxed) < sent
        || delivered.load(Ordering::Relaxed) < accepted.load(Ordering::Relaxed))
        && Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (acc, del, err, dup) = (
        accepted.load(Ordering::Relaxed),
        delivered.load(Ordering::Relaxed),
        errors.load(Ordering::Relaxed),
        duplicates.load(Ordering::Relaxed),
    );
    let h = accept_latency.lock().await;
    let mode = if receipts {
        "each with a delivered receipt"
    } else {
        "NO receipts: analysis only"
    };
    let shape = match load {
        Load::Saturate { window } => format!("throughput {pairs} pairs, window {window}"),
        Load::Paced { rate } => format!("paced {pairs} pairs at {rate} msg/s"),
    };
    println!(
        "{shape}, {:.1} s: accepted {:.0} msg/s, delivered {:.0} msg/s ({mode})",
        active.as_secs_f64(),
        acc_at_stop as f64 / active.as_secs_f64(),
        del_at_stop as f64 / active.as_secs_f64()
    );
    println!(
        "durable accept (send -> accepted): p50 {:.2} ms  p99 {:.2} ms  max {:.2} ms",
        h.value_at_quantile(0.5) as f64 / 1000.0,
        h.value_at_quantile(0.99) as f64 / 1000.0,
        h.max() as f64 / 1000.0
    );
    // Where the time went, per relay process: what one accepted message cost it in CPU, and how
    // busy each writer lane was (one transaction at a time; a lane busy all the time is the limit).
    for ((&(_, http), b), a) in observed.iter().zip(&before).zip(&after) {
        let lanes: Vec<String> = a
            .lanes
            .iter()
            .map(|la| {
                let lb = b.lanes.iter().find(|l| l.name == la.name).cloned().unwrap_or_default();
                let (writes, batches) = (la.writes - lb.writes, la.batches - lb.batches);
                let apply_s = la.apply_s - lb.apply_s;
                format!(
                    "writer lane {} in a transaction {:.0} % of the time, {:.0} batches/s of {:.0} writes, {:.1} us per write",
                    la.name,
                    apply_s / between * 100.0,
                    batches / between,
                    writes / batches.max(1.0),
                    apply_s / writes.max(1.0) * 1e6,
                )
            })
            .collect();
        println!(
            "cost     {http}: CPU {:.1} us per accepted message; {}",
            (a.cpu_s - b.cpu_s) / acc_in_window.max(1) as f64 * 1e6,
            lanes.join("; "),
        );
    }
    let by_code = codes.lock().map(|c| format!("{c:?}")).unwrap_or_default();
    // Sent but neither accepted nor refused: the answer never came (the connection was closed).
    let unanswered = sent.saturating_sub(acc + err);
    let unanswered = if unanswered > 0 {
        format!(", unanswered {unanswered}")
    } else {
        String::new()
    };
    println!(
        "integrity: sent {sent}, accepted {acc}, refused {err} {by_code}, delivered {del}, lost {}, duplicates {dup}{unanswered}",
        acc.saturating_sub(del)
    );
    if acc != del || dup != 0 || !unanswered.is_empty() {
        for (p, (a, d)) in per_pair.iter().enumerate() {
            let (a, d) = (a.load(Ordering::Relaxed), d.load(Ordering::Relaxed));
            if a != d {
                println!("  pair {p} ({tag}-rx-{p}): accepted {a}, delivered {d}");
            }
        }
        bail!("lost, duplicated or unanswered messages");
    }
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let data = std::env::temp_dir().join(format!("repowire-bench-{}", std::process::id()));
    let data_s = data.to_string_lossy().into_owned();
    let admin = "bench-admin-token";
    let start = || async {
        match &args.database_url {
            Some(url) => {
                let env = [
                    // The load generator's 16 senders are served unevenly and some exceed the
                    // per-connection send limit; the benchmark measures the relay's capacity.
                    ("REPOWIRE_SEND_RATE", "0"),
                    ("DATABASE_URL", url.as_str()),
                    (
                        "REPOWIRE_JWT_SECRET",
                        "bench-secret-bench-secret-bench-secret",
                    ),
                    ("REPOWIRE_ADMIN_TOKEN", admin),
                ];
                RelayProcess::start(&relay_bin(), &[], &env).await
            }
            None => {
                RelayProcess::start(
                    &relay_bin(),
                    &["--data-dir", &data_s],
                    &[("REPOWIRE_SEND_RATE", "0"), ("REPOWIRE_ADMIN_TOKEN", admin)],
                )
                .await
            }
        }
    };
    let mut relay = start().await;
    let key = match relay.first_key.clone() {
        Some(k) => k,
        None => bail!("the relay did not print a first key: give an empty database"),
    };
    let storage = if args.database_url.is_some() {
        "postgres"
    } else {
        "sqlite (embedded)"
    };
    println!(
        "relay: {} storage {storage}, tenant limits {}",
        relay.http,
        if args.limited {
            "on (every limit set, none reached)"
        } else {
            "off (unlimited plan)"
        }
    );
    if args.limited {
        set_limits(&relay.http, admin).await?;
    }
    if args.idle_connections > 0 {
        idle_memory(
            &relay.http,
            &relay.ws,
            &key,
            relay.pid(),
            args.idle_connections,
        )
        .await?;
        // The traffic phases get a fresh process: one that held and freed 10 000 connections
        // measurably answers slower (allocator state), which is not what they measure.
        relay.signal("TERM");
        relay.wait(Duration::from_secs(30)).await;
        relay = start().await;
    }
    latency(
        (&relay.http, &relay.ws),
        (&relay.http, &relay.ws),
        "",
        &key,
        args.latency_count,
        "peer->relay->peer",
    )
    .await?;
    let one = [(
        (relay.http.as_str(), relay.ws.as_str()),
        (relay.http.as_str(), relay.ws.as_str()),
    )];
    throughput(
        &one,
        &[(relay.pid(), relay.http.as_str())],
        "",
        &key,
        args.pairs,
        Load::Paced {
            rate: args.paced_rate,
        },
        args.paced_seconds,
        !args.no_receipts,
    )
    .await?;
    throughput(
        &one,
        &[(relay.pid(), relay.http.as_str())],
        "",
        &key,
        args.pairs,
        Load::Saturate {
            window: args.window,
        },
        args.seconds,
        !args.no_receipts,
    )
    .await?;
    relay.signal("TERM");
    relay.wait(Duration::from_secs(30)).await;
    if let (Some(db), Some(redis)) = (&args.database_url, &args.redis_url) {
        cross_pod(db, redis, &key, &args).await?;
    }
    let _ = std::fs::remove_dir_all(&data);
    Ok(())
}

/// Two pods on the same database and Redis: idle memory of a clustered pod, then the latency
/// with the sender on one pod and the receiver on the other, then throughput with every pair
/// split across the pods (half of them each way), so every message crosses through Redis.
async fn cross_pod(db: &str, redis: &str, key: &str, args: &Args) -> anyhow::Result<()> {
    let prefix = format!("repowire-bench-{}", std::process::id());
    let pod = |name: &'static str| {
        RelayProcess::start_pod(db, redis, &prefix, name, &[("REPOWIRE_SEND_RATE", "0")])
    };
    let mut a = pod("bench-a").await;
    let b = pod("bench-b").await;
    println!("cluster: pods {} and {} (Postgres + Redis)", a.http, b.http);
    if args.idle_connections > 0 {
        idle_memory(&a.http, &a.ws, key, a.pid(), args.idle_connections).await?;
        // As above: the traffic phases get a fresh process.
        a.signal("TERM");
        a.wait(Duration::from_secs(30)).await;
        a = pod("bench-a").await;
    }
    latency(
        (&a.http, &a.ws),
        (&b.http, &b.ws),
        "x",
        key,
        args.latency_count,
        "peer->pod a->Redis->pod b->peer",
    )
    .await?;
    let (ea, eb) = (
        (a.http.as_str(), a.ws.as_str()),
        (b.http.as_str(), b.ws.as_str()),
    );
    throughput(
        &[(ea, eb), (eb, ea)],
        &[(a.pid(), a.http.as_str()), (b.pid(), b.http.as_str())],
        "x",
        key,
        args.pairs,
        Load::Saturate {
            window: args.window,
        },
        args.seconds,
        !args.no_receipts,
    )
    .await?;
    for p in [a, b] {
        p.signal("TERM");
        p.wait(Duration::from_secs(30)).await;
    }
    Ok(())
}
