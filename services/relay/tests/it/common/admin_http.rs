//! The admin HTTP API as a test calls it: JSON in, status and JSON out, with the admin token
//! that [`repowire_relay::RelayConfig::for_tests`] configures.

use serde_json::Value;

use super::TestRelay;

/// The admin token of a test relay.
pub const ADMIN: &str = "test-admin-token";

/// An admin API client for one relay.
pub struct Admin {
    pub http: reqwest::Client,
    pub base: String,
}

impl Admin {
    pub fn new(relay: &TestRelay) -> Self {
        Self {
            http: reqwest::Client::new(),
            base: format!("{}/admin/v1", relay.http),
        }
    }

    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let url = format!("{}{path}", self.base);
        repowire_e2e::http_json(method, &url, Some(ADMIN), body).await
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        self.call(reqwest::Method::GET, path, None).await
    }
    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.call(reqwest::Method::POST, path, Some(body)).await
    }
    pub async fn patch(&self, path: &str, body: Value) -> (u16, Value) {
        self.call(reqwest::Method::PATCH, path, Some(body)).await
    }

    /// `POST /tenants/{tenant}/keys` with an `Idempotency-Key`.
    pub async fn create_key(&self, tenant: &str, idempotency: &str, body: Value) -> (u16, Value) {
        let resp = self
            .http
            .post(format!("{}/tenants/{tenant}/keys", self.base))
            .bearer_auth(ADMIN)
            .header("idempotency-key", idempotency)
            .json(&body)
            .send()
            .await
            .expect("send");
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    pub async fn key_count(&self, tenant: &str) -> usize {
        self.get(&format!("/tenants/{tenant}/keys")).await.1["items"]
            .as_array()
            .map_or(0, Vec::len)
    }
}

/// Runs `repowire-relay admin …` in process on the relay's store; returns its standard output.
pub async fn admin_cli(relay: &TestRelay, json: bool, args: &[&str]) -> Result<String, String> {
    use clap::Parser;
    #[derive(clap::Parser)]
    struct Cli {
        #[command(subcommand)]
        command: repowire_relay::config::AdminCommand,
    }
    let parsed = Cli::try_parse_from(std::iter::once("admin").chain(args.iter().copied()))
        .map_err(|e| e.to_string())?;
    let (mut out, mut notes) = (Vec::new(), Vec::new());
    repowire_relay::tenancy::admin::cli::run(
        relay.state.store.as_ref(),
        parsed.command,
        json,
        &mut out,
        &mut notes,
    )
    .await
    .map_err(|e| e.to_string())?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}
