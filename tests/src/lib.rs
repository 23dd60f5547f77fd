//! The test support every crate's integration tests share (each crate has one test binary,
//! `tests/it/main.rs`), and the benchmark driver's: a protocol [`client`], [`process`] control
//! of real binaries and throwaway databases, and the loopback helpers below.

pub mod agents;
pub mod claude;
pub mod client;
pub mod fakekube;
pub mod gated;
pub mod gemini_api;
pub mod hookrun;
pub mod mockmodel;
pub mod offline;
pub mod oidc;
pub mod opencode_host;
pub mod otlp;
pub mod process;
pub mod rendered;
pub mod responses;
pub mod stream;
pub mod web;

use std::time::Duration;

/// Upper bound for any single wait in a test: a missing frame fails instead of hanging.
pub const WAIT: Duration = Duration::from_secs(10);

/// Upper bound for a wait on a whole process becoming ready (rendered pods, an operator winning
/// leader election), where [`WAIT`] bounds one frame or one answer.
pub const SLOW_WAIT: Duration = Duration::from_secs(30);

/// The Redis the tests use (`REDIS_URL`, which scripts/test sets; else the local default).
pub fn redis_url() -> String {
    std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

/// A Redis key prefix of its own for one test, so tests sharing a Redis never meet.
pub fn redis_prefix() -> String {
    format!("repowire-test-{}", uuid::Uuid::new_v4().simple())
}

/// A loopback port free a moment ago (for a process that cannot be told to bind port 0).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// One HTTP request with an optional bearer credential and JSON body: the status, and the body
/// as JSON (null when it is not JSON).
pub async fn http_json(
    method: reqwest::Method,
    url: &str,
    bearer: Option<&str>,
    body: Option<serde_json::Value>,
) -> (u16, serde_json::Value) {
    let mut request = reqwest::Client::new().request(method, url);
    if let Some(b) = bearer {
        request = request.bearer_auth(b);
    }
    if let Some(b) = body {
        request = request.json(&b);
    }
    let response = request.send().await.expect("send");
    let status = response.status().as_u16();
    let text = response.text().await.expect("body");
    (status, serde_json::from_str(&text).unwrap_or_default())
}
