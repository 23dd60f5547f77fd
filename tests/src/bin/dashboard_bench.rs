//! `repowire-dashboard-bench`: the dashboard's event stream under load. A real relay (a pod on
//! Postgres + Redis, or embedded) carries a steady stream of notifies between agent pairs, each
//! receipted `delivered` by its recipient: two tenant events per message, `--rate` events/s in
//! all. For each number of browsers in `--browsers`, that many signed-in sessions follow
//! `/dashboard/events/stream` for `--seconds` while the load runs, and the run reports:
//!
//! - what each stream got (rows/s; every id the next number: a gap fails the run);
//! - the lag from a notify's send to its row at a browser (the text carries the send time);
//! - how responsive the page is meanwhile (`GET /dashboard/events`, 5 times a second);
//! - the relay's CPU (user + system, /proc) and RSS over the phase, and per browser against
//!   the phase with no browser.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use clap::Parser;
use hdrhistogram::Histogram;
use repowire_e2e::client::TestClient;
use repowire_e2e::process::{RelayProcess, relay_bin};
use repowire_e2e::web::Browser;
use repowire_protocol::ReceiptState;
use tokio::sync::Mutex;

#[derive(Debug, Parser)]
struct Args {
    /// Postgres URL of an empty database; with `--redis-url`, the relay runs as a pod (the
    /// event log on Redis). Without both, embedded (the log in memory).
    #[arg(long)]
    database_url: Option<String>,
    /// Redis for the pod.
    #[arg(long)]
    redis_url: Option<String>,
    /// Tenant events per second (half notifies, half their `delivered` receipts).
    #[arg(long, default_value_t = 1000)]
    rate: u64,
    /// Sender/receiver pairs carrying the load.
    #[arg(long, default_value_t = 8)]
    pairs: usize,
    /// Length of each phase.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Browsers per phase, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "0,1,10,40")]
    browsers: Vec<usize>,
}

fn now_us() -> u64 {
    u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_micros(),
    )
    .unwrap_or(0)
}

/// CPU seconds (user + system) and RSS (KiB) of a process.
fn spent(pid: u32) -> anyhow::Result<(f64, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| -> f64 { fields.get(i).and_then(|v| v.parse().ok()).unwrap_or(0.0) };
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .context("no VmRSS")?;
    // CLK_TCK is 100 on Linux.
    Ok(((ticks(11) + ticks(12)) / 100.0, rss))
}

fn ms(h: &Histogram<u64>, q: f64) -> f64 {
    h.value_at_quantile(q) as f64 / 1000.0
}

/// A browser signed in with `key`, and the log's place its page ends at.
async fn browser(http: &str, key: &str) -> anyhow::Result<(Browser, u64)> {
    let mut b = Browser::new(http);
    let signed = b.post("/dashboard/signin", &[("api_key", key)]).await;
    if signed.status != 303 {
        bail!("sign-in answered {}: {}", signed.status, signed.body);
    }
    let page = b.get("/dashboard/events").await;
    let after = page
        .body
        .split("data-after=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .and_then(|n| n.parse().ok())
        .context("the events page has no place")?;
    Ok((b, after))
}

/// What one phase measured.
struct Phase {
    browsers: usize,
    events_per_s: f64,
    rows_min_per_s: f64,
    lag: Histogram<u64>,
    page: Histogram<u64>,
    cpu_s: f64,
    rss_kib: u64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let data = tempfile::tempdir()?;
    let data_s = data.path().to_string_lossy().into_owned();
    let env = [
        ("REPOWIRE_SEND_RATE", "0"),
        ("REPOWIRE_HTTP_REQUESTS_PER_MINUTE", "1000000"),
        ("REPOWIRE_HTTP_BURST", "100000"),
    ];
    let relay = match (&args.database_url, &args.redis_url) {
        (Some(db), Some(redis)) => {
            let prefix = format!("repowire-dashbench-{}", std::process::id());
            RelayProcess::start_pod(db, redis, &prefix, "pod-a", &env).await
        }
        _ => RelayProcess::start(&relay_bin(), &["--data-dir", &data_s], &env).await,
    };
    let key = relay
        .first_key
        .clone()
        .context("the relay printed no first key: give an empty database")?;
    println!(
        "relay: {} ({}), {} events/s ({} pairs), {} s per phase",
        relay.http,
        if args.redis_url.is_some() {
            "pod on Postgres + Redis: the event log on Redis"
        } else {
            "embedded: the event log in memory"
        },
        args.rate,
        args.pairs,
        args.seconds
    );

    // The load: each sender notifies its receiver at its share of the rate; each receiver
    // receipts every delivery `delivered`. Text: `t=<send time, µs>`.
    let mut pairs = Vec::new();
    for i in 0..args.pairs {
        let mut tx = TestClient::connect(&relay.http, &relay.ws, &key).await;
        let from = tx.peer(&format!("sender-{i}"), "load").await;
        let mut rx = TestClient::connect(&relay.http, &relay.ws, &key).await;
        let to = rx.peer(&format!("receiver-{i}"), "load").await;
        pairs.push((tx, from, rx, to));
    }
    let mut phases = Vec::new();
    for &n in &args.browsers {
        phases.push(phase(&args, &relay, &key, &mut pairs, n).await?);
    }
    let base = phases.iter().find(|p| p.browsers == 0).map(|p| p.cpu_s);
    println!();
    println!(
        "| browsers | events/s made | rows/s per browser (min) | lag p50 / p99 ms | page p50 / p99 ms | relay CPU % | CPU per browser (ms/s) | RSS MiB |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for p in &phases {
        let cpu_pct = p.cpu_s / args.seconds as f64 * 100.0;
        let per_browser = match (base, p.browsers) {
            (Some(b), n) if n > 0 => format!(
                "{:.2}",
                (p.cpu_s - b) / args.seconds as f64 / n as f64 * 1000.0
            ),
            _ => "—".into(),
        };
        let lag = if p.lag.is_empty() {
            "—".into()
        } else {
            format!("{:.1} / {:.1}", ms(&p.lag, 0.5), ms(&p.lag, 0.99))
        };
        println!(
            "| {} | {:.0} | {} | {lag} | {:.1} / {:.1} | {cpu_pct:.0} | {per_browser} | {:.1} |",
            p.browsers,
            p.events_per_s,
            if p.browsers == 0 {
                "—".into()
            } else {
                format!("{:.0}", p.rows_min_per_s)
            },
            ms(&p.page, 0.5),
            ms(&p.page, 0.99),
            p.rss_kib as f64 / 1024.0,
        );
    }
    Ok(())
}

type Pair = (
    TestClient,
    repowire_protocol::PeerInfo,
    TestClient,
    repowire_protocol::PeerInfo,
);

async fn phase(
    args: &Args,
    relay: &RelayProcess,
    key: &str,
    pairs: &mut Vec<Pair>,
    n: usize,
) -> anyhow::Result<Phase> {
    let run = Duration::from_secs(args.seconds);
    let mut streams = Vec::new();
    for _ in 0..n {
        let (mut b, after) = browser(&relay.http, key).await?;
        let stream = b
            .events(&format!("/dashboard/events/stream?after={after}"), None)
            .await
            .map_err(|p| anyhow::anyhow!("stream refused: {} {}", p.status, p.body))?;
        streams.push((stream, after));
    }
    let lag = Arc::new(Mutex::new(Histogram::<u64>::new(3)?));
    let deadline = Instant::now() + run;
    // Browsers: read rows until the phase ends (and a little after, for what is in flight).
    let mut readers = Vec::new();
    for (mut stream, mut after) in streams {
        let lag = lag.clone();
        readers.push(tokio::spawn(async move {
            let mut rows = 0u64;
            let until = deadline + Duration::from_secs(2);
            while Instant::now() < until {
                let left = until.saturating_duration_since(Instant::now());
                let Ok(Some(event)) = tokio::time::timeout(left, async {
                    stream.next(left + Duration::from_secs(60)).await
                })
                .await
                else {
                    break;
                };
                if event.event != "row" {
                    anyhow::bail!("the stream said {event:?}");
                }
                let id: u64 = event.id.as_deref().unwrap_or("0").parse()?;
                if id != after + 1 {
                    anyhow::bail!("a gap in the stream: {after} then {id}");
                }
                after = id;
                rows += 1;
                let row: serde_json::Value = serde_json::from_str(&event.data)?;
                if let Some(sent) = row["what"]
                    .as_str()
                    .and_then(|w| w.strip_prefix("t="))
                    .and_then(|t| t.parse::<u64>().ok())
                {
                    let _ = lag.lock().await.record(now_us().saturating_sub(sent));
                }
            }
            Ok(rows)
        }));
    }
    // The page, probed 5 times a second by one more browser.
    let (mut prober, _) = browser(&relay.http, key).await?;
    let page = tokio::spawn(async move {
        let mut h = Histogram::<u64>::new(3).expect("histogram");
        while Instant::now() < deadline {
            let t = Instant::now();
            let answer = prober.get("/dashboard/events").await;
            assert_eq!(answer.status, 200, "{}", answer.body);
            let _ = h.record(u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX));
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        h
    });
    let (cpu0, _) = spent(relay.pid())?;
    let made = Arc::new(AtomicU64::new(0));
    let per_sender = Duration::from_secs_f64(args.pairs as f64 * 2.0 / args.rate as f64);
    let mut load = Vec::new();
    for (mut tx, from, mut rx, to) in pairs.drain(..) {
        let made = made.clone();
        let to_name = to.name.clone();
        load.push(tokio::spawn(async move {
            let receiving = tokio::spawn(async move {
                while Instant::now() < deadline + Duration::from_secs(1) {
                    let Ok(got) =
                        tokio::time::timeout(Duration::from_secs(2), rx.delivered_to(&to.peer_id))
                            .await
                    else {
                        break;
                    };
                    rx.receipt(&to.peer_id, got.message.message_id, ReceiptState::Delivered)
                        .await;
                }
                (rx, to)
            });
            let mut tick = tokio::time::interval(per_sender);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            while Instant::now() < deadline {
                tick.tick().await;
                tx.notify(&from, &to_name, &format!("t={}", now_us()))
                    .await
                    .expect("accepted");
                made.fetch_add(2, Ordering::Relaxed);
            }
            let (rx, to) = receiving.await.expect("receiver");
            (tx, from, rx, to)
        }));
    }
    for l in load {
        pairs.push(l.await?);
    }
    let (cpu1, rss) = spent(relay.pid())?;
    let page = page.await?;
    let mut min_rows = u64::MAX;
    for r in readers {
        min_rows = min_rows.min(r.await??);
    }
    let lag = Arc::try_unwrap(lag)
        .map_err(|_| anyhow::anyhow!("lag still shared"))?
        .into_inner();
    Ok(Phase {
        browsers: n,
        events_per_s: made.load(Ordering::Relaxed) as f64 / args.seconds as f64,
        rows_min_per_s: if n == 0 {
            0.0
        } else {
            min_rows as f64 / args.seconds as f64
        },
        lag,
        page,
        cpu_s: cpu1 - cpu0,
        rss_kib: rss,
    })
}
