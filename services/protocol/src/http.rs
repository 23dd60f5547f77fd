//! JSON bodies of the relay's HTTP endpoints.

use serde::{Deserialize, Serialize};

use crate::codes::ErrorCode;

/// `POST /v1/token` request: exchange an API key for a short-lived JWT.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TokenRequest {
    /// The API key (`rw_live_…` or `rw_test_…`).
    pub api_key: String,
}

/// `POST /v1/token` response.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TokenResponse {
    /// The JWT to present as `Authorization: Bearer …` on the WebSocket upgrade.
    pub token: String,
    /// Expiry, milliseconds since the Unix epoch.
    pub expires_at_ms: i64,
    /// The tenant the key belongs to.
    pub tenant_id: String,
}

/// `POST /v1/dashboard/links` response: a one-time sign-in link to the relay's dashboard.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DashboardLinkResponse {
    /// The path to open on the relay (`/dashboard/signin?link=…`); the caller adds the relay's
    /// base URL.
    pub path: String,
    /// When it stops working, milliseconds since the Unix epoch.
    pub expires_at_ms: i64,
}

/// Every HTTP error body: `{"error": {"code": "...", "message": "..."}}`.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HttpError {
    /// The error.
    pub error: HttpErrorBody,
}

/// The inner error object.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HttpErrorBody {
    /// Machine-readable code.
    pub code: ErrorCode,
    /// Human-readable explanation.
    pub message: String,
}
