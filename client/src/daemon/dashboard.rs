//! `repowire dashboard`: a one-time sign-in link to the relay's dashboard, minted with this
//! daemon's key for the person at this terminal.
//!
//! A browser signed in with it acts with the machine's key, approvals included (when the key
//! has `approve`). So the link is given only as an approval from the command line would be
//! taken: to a command run at a terminal of its own, not by an agent session or a program one
//! started (the terminal rule of `repowire approvals allow|deny`). An agent cannot get a
//! browser session this way, and what a browser session does is a person's.

use std::time::Duration;

use repowire_protocol::http::{DashboardLinkResponse, HttpError};

use super::{CLI_SESSION, Daemon};
use crate::api::{ApiError, DaemonCode, DashboardLink};

/// How long the relay may take to mint a link.
const MINT_TIMEOUT: Duration = Duration::from_secs(10);

impl Daemon {
    /// Mints a sign-in link for the caller, who must be the person at this machine.
    pub async fn dashboard_link(&self, caller_pid: Option<u32>) -> Result<DashboardLink, ApiError> {
        let actor = self.actor(None, caller_pid).await?;
        if actor.session_id != CLI_SESSION {
            return Err(ApiError::new(
                DaemonCode::NotAPerson,
                format!(
                    "agent session @{} may not open the dashboard: a browser signed in acts as \
                     the person at this machine",
                    actor.name.as_deref().unwrap_or("?")
                ),
            )
            .hint("run `repowire dashboard` in a terminal of your own"));
        }
        self.person_at_terminal(caller_pid).await?;
        let endpoint = &self.endpoint;
        let response = reqwest::Client::new()
            .post(format!("{}/v1/dashboard/links", endpoint.base))
            .bearer_auth(&endpoint.api_key)
            .timeout(MINT_TIMEOUT)
            .send()
            .await
            .map_err(|e| {
                ApiError::new(
                    DaemonCode::RelayUnreachable,
                    format!(
                        "cannot reach the relay at {}: {}",
                        endpoint.base,
                        crate::causes::with_causes(&e.without_url())
                    ),
                )
            })?;
        let status = response.status();
        if !status.is_success() {
            let said: Option<HttpError> = response.json().await.ok();
            return Err(match said {
                Some(e) => ApiError::new(
                    e.error.code,
                    format!(
                        "the relay refused a dashboard link: {}",
                        crate::sanitize::for_terminal(&e.error.message)
                    ),
                ),
                None => ApiError::new(
                    DaemonCode::DaemonProtocol,
                    format!(
                        "the relay answered {status} to POST /v1/dashboard/links: is it older than this client?"
                    ),
                ),
            });
        }
        let minted: DashboardLinkResponse = response.json().await.map_err(|e| {
            ApiError::new(
                DaemonCode::DaemonProtocol,
                format!("the relay's dashboard link could not be read: {e}"),
            )
        })?;
        // It is printed to a terminal and opened in a browser: a path of this relay's
        // dashboard, in plain characters, or nothing.
        if !minted.path.starts_with("/dashboard/")
            || !minted.path.bytes().all(|b| b.is_ascii_graphic())
        {
            return Err(ApiError::new(
                DaemonCode::DaemonProtocol,
                "the relay's dashboard link is not a dashboard path",
            ));
        }
        Ok(DashboardLink {
            url: format!("{}{}", endpoint.base, minted.path),
            expires_at_ms: minted.expires_at_ms,
        })
    }
}
