//! The relay's admin API (`/admin/v1`, docs/admin.md): the only way the operator reaches the
//! relay. Errors are data: unreachable, or an answer with a status and the relay's error code.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::crd::Limits;

/// Why an admin call failed.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    /// No answer (connection refused, timeout, TLS).
    #[error("the relay is unreachable: {0}")]
    Unreachable(String),
    /// An answer other than success.
    #[error("the relay answered {status} {code}: {message}")]
    Status {
        /// HTTP status.
        status: u16,
        /// The relay's error code (`not_found`, `conflict`, …).
        code: String,
        /// The relay's message.
        message: String,
    },
    /// A success whose body is not what the admin API documents.
    #[error("the relay's answer could not be read: {0}")]
    Decode(String),
}

impl RelayError {
    /// The HTTP status, if the relay answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// A short reason for metrics and conditions.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Unreachable(_) => "RelayUnreachable",
            Self::Status { status: 404, .. } => "RelayNotFound",
            Self::Status { status: 409, .. } => "RelayConflict",
            Self::Status { status: 400, .. } => "RelayRefused",
            Self::Status { status: 403, .. } => "RelayForbidden",
            Self::Status { .. } => "RelayError",
            Self::Decode(_) => "RelayAnswerUnreadable",
        }
    }
}

/// Limits from a relay's answer, keeping the fields this operator knows: a newer relay's
/// limits (the relay is often upgraded first) are left out rather than making every answer
/// unreadable.
fn limits_from(map: serde_json::Map<String, Value>) -> Result<Limits, serde_json::Error> {
    let known = Limits::default().as_patch();
    let kept = map
        .into_iter()
        .filter(|(k, _)| known.get(k).is_some())
        .collect();
    serde_json::from_value(Value::Object(kept))
}

fn known_limits<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Limits, D::Error> {
    let map = serde_json::Map::<String, Value>::deserialize(d)?;
    limits_from(map).map_err(serde::de::Error::custom)
}

fn known_limits_opt<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Limits>, D::Error> {
    Option::<serde_json::Map<String, Value>>::deserialize(d)?
        .map(limits_from)
        .transpose()
        .map_err(serde::de::Error::custom)
}

/// A tenant as the admin API shows it.
#[derive(Debug, Clone, Deserialize)]
pub struct RelayTenant {
    /// `tnt-…`.
    pub id: String,
    /// Unique name.
    pub name: String,
    /// Plan name.
    pub plan: String,
    /// Display name.
    #[serde(default)]
    pub display_name: Option<String>,
    /// Overrides.
    #[serde(default, deserialize_with = "known_limits")]
    pub overrides: Limits,
    /// Limits in effect (on `GET`/`PATCH` answers).
    #[serde(default, deserialize_with = "known_limits_opt")]
    pub effective_limits: Option<Limits>,
    /// Suspension time (ms).
    #[serde(default)]
    pub suspended_at_ms: Option<i64>,
    /// Deletion time (ms).
    #[serde(default)]
    pub deleted_at_ms: Option<i64>,
}

/// A key record (never its text).
#[derive(Debug, Clone, Deserialize)]
pub struct RelayKey {
    /// `key-…`.
    pub id: String,
    /// Tenant id.
    pub tenant_id: String,
    /// The key's first characters (`display` in the admin API).
    #[serde(rename = "display", deserialize_with = "without_ellipsis")]
    pub prefix: String,
    /// Expiry (ms).
    #[serde(default)]
    pub expires_at_ms: Option<i64>,
    /// Revocation time (ms).
    #[serde(default)]
    pub revoked_at_ms: Option<i64>,
}

/// The relay shows a key as its first characters and `…`; the operator keeps the characters.
fn without_ellipsis<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let shown = String::deserialize(d)?;
    Ok(shown.trim_end_matches('…').to_string())
}

impl RelayKey {
    /// Neither revoked nor expired at `now_ms`.
    pub fn usable_at(&self, now_ms: i64) -> bool {
        self.revoked_at_ms.is_none() && self.expires_at_ms.is_none_or(|e| e > now_ms)
    }
}

/// `POST /tenants/{tenant}/keys` answer.
#[derive(Debug, Deserialize)]
pub struct KeyCreated {
    /// The key text; `null` on a replay after the relay's replay window.
    pub api_key: Option<String>,
    /// The record.
    pub key: RelayKey,
    /// A retry's answer.
    pub replayed: bool,
}

/// `POST /tenants`.
#[derive(Debug, Serialize)]
pub struct NewTenant<'a> {
    /// Name.
    pub name: &'a str,
    /// Plan.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan: Option<&'a str>,
    /// Display name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub display_name: Option<&'a str>,
    /// Overrides.
    pub overrides: &'a Limits,
}

/// One month's usage of a tenant, from `GET /tenants/{tenant}/usage?granularity=month`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MonthUsage {
    /// Messages of every kind.
    pub messages: i64,
    /// Peak peers online at once.
    pub peak_peers: i64,
}

/// An admin API client: base URL and credential.
#[derive(Clone)]
pub struct AdminClient {
    http: reqwest::Client,
    base: String,
    token: String,
    calls: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl std::fmt::Debug for AdminClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token is a secret: never in a log line.
        f.debug_struct("AdminClient")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

impl AdminClient {
    /// A client of the relay at `base` (`https://relay.example`, no path), with an admin
    /// credential. Every call times out after `timeout`.
    pub fn new(base: &str, token: String, timeout: Duration) -> Result<Self, RelayError> {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            // The relay closes an HTTP connection idle for its header timeout (10 s by
            // default): let pooled ones go before that, so no request races the close.
            .pool_idle_timeout(Duration::from_secs(5))
            .build()
            .map_err(|e| RelayError::Unreachable(e.to_string()))?;
        Ok(Self {
            http,
            base: base.trim_end_matches('/').to_string(),
            token,
            calls: std::sync::Arc::default(),
        })
    }

    /// The relay's base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// How many admin calls this client (and its clones) made.
    pub fn calls(&self) -> u64 {
        self.calls.load(std::sync::atomic::Ordering::Relaxed)
    }

    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
        idempotency_key: Option<&str>,
    ) -> Result<(u16, Value), RelayError> {
        self.calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let url = format!("{}/admin/v1{path}", self.base);
        let mut request = self
            .http
            .request(method, &url)
            .bearer_auth(&self.token)
            .header("accept", "application/json");
        if let Some(body) = body {
            request = request.json(body);
        }
        if let Some(key) = idempotency_key {
            request = request.header("idempotency-key", key);
        }
        let response = request
            .send()
            .await
            .map_err(|e| RelayError::Unreachable(e.without_url().to_string()))?;
        let status = response.status().as_u16();
        let text = response
            .text()
            .await
            .map_err(|e| RelayError::Unreachable(e.without_url().to_string()))?;
        if (200..300).contains(&status) {
            let value = if text.is_empty() {
                Value::Null
            } else {
                serde_json::from_str(&text).map_err(|e| RelayError::Decode(e.to_string()))?
            };
            return Ok((status, value));
        }
        let error: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let field = |name: &str| {
            error
                .pointer(&format!("/error/{name}"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        Err(RelayError::Status {
            status,
            code: field("code"),
            message: field("message"),
        })
    }

    fn decode<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, RelayError> {
        serde_json::from_value(value).map_err(|e| RelayError::Decode(e.to_string()))
    }

    /// `POST /tenants`.
    pub async fn create_tenant(&self, new: &NewTenant<'_>) -> Result<RelayTenant, RelayError> {
        let body = serde_json::to_value(new).map_err(|e| RelayError::Decode(e.to_string()))?;
        let (_, v) = self
            .call(reqwest::Method::POST, "/tenants", Some(&body), None)
            .await?;
        Self::decode(v)
    }

    /// `GET /tenants/{tenant}`: a `tnt-…` text is looked up as an id, anything else as a name.
    /// An answer for another tenant than the id asked for is refused, never acted on.
    pub async fn get_tenant(&self, tenant: &str) -> Result<RelayTenant, RelayError> {
        let (_, v) = self
            .call(
                reqwest::Method::GET,
                &format!("/tenants/{tenant}"),
                None,
                None,
            )
            .await?;
        let found: RelayTenant = Self::decode(v)?;
        if tenant.starts_with("tnt-") && found.id != tenant {
            return Err(RelayError::Decode(format!(
                "asked for tenant {tenant}, the relay answered with tenant {}",
                found.id
            )));
        }
        Ok(found)
    }

    /// `PATCH /tenants/{tenant}`.
    pub async fn patch_tenant(
        &self,
        tenant: &str,
        body: &Value,
    ) -> Result<RelayTenant, RelayError> {
        let (_, v) = self
            .call(
                reqwest::Method::PATCH,
                &format!("/tenants/{tenant}"),
                Some(body),
                None,
            )
            .await?;
        Self::decode(v)
    }

    /// `POST /tenants/{tenant}/suspend` or `/resume`.
    pub async fn set_suspended(&self, tenant: &str, suspended: bool) -> Result<(), RelayError> {
        let verb = if suspended { "suspend" } else { "resume" };
        self.call(
            reqwest::Method::POST,
            &format!("/tenants/{tenant}/{verb}"),
            None,
            None,
        )
        .await
        .map(drop)
    }

    /// `DELETE /tenants/{tenant}`: gone already (404) or deleted already (409) count as done.
    pub async fn delete_tenant(&self, tenant: &str) -> Result<(), RelayError> {
        match self
            .call(
                reqwest::Method::DELETE,
                &format!("/tenants/{tenant}"),
                None,
                None,
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(RelayError::Status { status: 404, .. }) => Ok(()),
            Err(e @ RelayError::Status { status: 409, .. }) => {
                match self.get_tenant(tenant).await {
                    Ok(t) if t.deleted_at_ms.is_some() => Ok(()),
                    _ => Err(e),
                }
            }
            Err(e) => Err(e),
        }
    }

    /// This month's usage of a tenant.
    pub async fn month_usage(&self, tenant: &str) -> Result<MonthUsage, RelayError> {
        let (_, v) = self
            .call(
                reqwest::Method::GET,
                &format!("/tenants/{tenant}/usage?granularity=month"),
                None,
                None,
            )
            .await?;
        let mut usage = MonthUsage::default();
        for period in v
            .get("periods")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let metric = |name: &str| {
                period
                    .pointer(&format!("/metrics/{name}"))
                    .and_then(Value::as_i64)
                    .unwrap_or(0)
            };
            usage.messages += [
                "messages_ask",
                "messages_notify",
                "messages_broadcast",
                "messages_reply",
            ]
            .iter()
            .map(|m| metric(m))
            .sum::<i64>();
            usage.peak_peers = usage.peak_peers.max(metric("peak_peers"));
        }
        Ok(usage)
    }

    /// `POST /tenants/{tenant}/keys` with an `Idempotency-Key` and an exact JSON body.
    pub async fn create_key(
        &self,
        tenant: &str,
        body: &Value,
        idempotency_key: &str,
    ) -> Result<KeyCreated, RelayError> {
        let (_, v) = self
            .call(
                reqwest::Method::POST,
                &format!("/tenants/{tenant}/keys"),
                Some(body),
                Some(idempotency_key),
            )
            .await?;
        Self::decode(v)
    }

    /// `GET /keys/{id}`.
    pub async fn get_key(&self, key_id: &str) -> Result<RelayKey, RelayError> {
        let (_, v) = self
            .call(reqwest::Method::GET, &format!("/keys/{key_id}"), None, None)
            .await?;
        Self::decode(v)
    }

    /// `DELETE /keys/{id}`: a key the relay no longer has counts as revoked.
    pub async fn revoke_key(&self, key_id: &str) -> Result<(), RelayError> {
        match self
            .call(
                reqwest::Method::DELETE,
                &format!("/keys/{key_id}"),
                None,
                None,
            )
            .await
        {
            Ok(_) | Err(RelayError::Status { status: 404, .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_with_limits_this_operator_does_not_know_is_still_read() {
        let answer = serde_json::json!({
            "id": "tnt-0000000000000000", "name": "acme", "plan": "team",
            "overrides": {"max_peers": 3, "a_limit_from_the_future": 1},
            "effective_limits": {"max_peers": 3, "inbox_cap": 10, "a_limit_from_the_future": 1},
        });
        let tenant: RelayTenant = serde_json::from_value(answer).expect("readable");
        assert_eq!(tenant.overrides.max_peers, Some(3));
        assert_eq!(tenant.effective_limits.and_then(|l| l.inbox_cap), Some(10));
        // A known field of the wrong type is still an error.
        let bad = serde_json::json!({
            "id": "tnt-0000000000000000", "name": "acme", "plan": "team",
            "overrides": {"max_peers": "three"},
        });
        assert!(serde_json::from_value::<RelayTenant>(bad).is_err());
    }
}
