//! The typed reply of `dashboard_link` (`repowire dashboard`).

use serde::{Deserialize, Serialize};

/// A one-time sign-in link to the relay's dashboard.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DashboardLink {
    /// The whole URL to open (it carries the one-time token: it signs in once).
    pub url: String,
    /// When it stops working, milliseconds since the Unix epoch.
    pub expires_at_ms: i64,
}
