//! The API key → token exchange (`POST /v1/token`), written once for the daemon's link and for
//! the CLI (`setup --relay-url`, `check-relay`), with one classification of what can go wrong:
//! the daemon decides from it whether to retry, the CLI what to tell the person.

use std::time::Duration;

use repowire_protocol::ErrorCode;
use repowire_protocol::http::{HttpError, TokenRequest, TokenResponse};

use crate::sanitize::for_terminal;

/// How long one exchange may take.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// Why an exchange failed. The relay's own words (`message`) are remote text: [`Display`]
/// shows them through the terminal sanitizer.
///
/// [`Display`]: std::fmt::Display
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenError {
    /// Nothing answered, or not in time (`why` in plain words).
    Unreachable { why: String },
    /// Something answered, but not as a Repowire relay does (404 at `/v1/token`, or a success
    /// that is not a token).
    NotARelay { status: u16 },
    /// An HTTP failure without the relay's error body (a proxy's 502, a crashed relay's 500).
    Status { status: u16 },
    /// The relay knows the key, but its tenant is suspended: the same key works once the
    /// operator resumes it.
    TenantSuspended { message: String },
    /// The relay refused the key (401/403): unknown, revoked or expired.
    KeyRefused {
        status: u16,
        code: Option<ErrorCode>,
        message: String,
    },
    /// Any other refusal the relay explained (a limit, a relay fault).
    Refused {
        status: u16,
        code: ErrorCode,
        message: String,
    },
}

impl TokenError {
    /// True when trying again with the same key cannot help.
    pub fn key_refused(&self) -> bool {
        matches!(self, TokenError::KeyRefused { .. })
    }
}

impl std::fmt::Display for TokenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TokenError::Unreachable { why } => write!(f, "cannot reach the relay: {why}"),
            TokenError::NotARelay { status: 404 } => {
                f.write_str("it does not look like a Repowire relay (no /v1/token there)")
            }
            TokenError::NotARelay { status } => {
                write!(f, "it answered {status}, but not as a Repowire relay does")
            }
            TokenError::Status { status } => write!(f, "the relay answered HTTP {status}"),
            TokenError::TenantSuspended { message } => write!(
                f,
                "the key's tenant is suspended by the relay's operator: {} (tenant_suspended)",
                for_terminal(message)
            ),
            TokenError::KeyRefused {
                code: Some(code),
                message,
                ..
            } => write!(
                f,
                "the relay refused the API key: {} ({})",
                for_terminal(message),
                code.as_str()
            ),
            TokenError::KeyRefused { message, .. } => {
                write!(
                    f,
                    "the relay refused the API key: {}",
                    for_terminal(message)
                )
            }
            TokenError::Refused {
                status,
                code,
                message,
            } => write!(
                f,
                "the relay answered {status}: {} ({})",
                for_terminal(message),
                code.as_str()
            ),
        }
    }
}

/// Exchanges `key` for a token at the relay whose base URL (`http(s)://host[:port]`) is `base`.
pub async fn exchange(base: &str, key: &str) -> Result<TokenResponse, TokenError> {
    let response = reqwest::Client::new()
        .post(format!("{base}/v1/token"))
        .timeout(TIMEOUT)
        .json(&TokenRequest {
            api_key: key.to_owned(),
        })
        .send()
        .await
        .map_err(|e| TokenError::Unreachable {
            why: if e.is_timeout() {
                format!("no answer within {} s", TIMEOUT.as_secs())
            } else if e.is_connect() {
                format!(
                    "nothing answers there ({})",
                    crate::causes::with_causes(&e.without_url())
                )
            } else {
                crate::causes::with_causes(&e.without_url())
            },
        })?;
    let status = response.status().as_u16();
    if response.status().is_success() {
        return response
            .json()
            .await
            .map_err(|_| TokenError::NotARelay { status });
    }
    let said: Option<HttpError> = response.json().await.ok();
    Err(match said {
        Some(e) if e.error.code == ErrorCode::TenantSuspended => TokenError::TenantSuspended {
            message: e.error.message,
        },
        Some(e) if status == 401 || status == 403 => TokenError::KeyRefused {
            status,
            code: Some(e.error.code),
            message: e.error.message,
        },
        Some(e) => TokenError::Refused {
            status,
            code: e.error.code,
            message: e.error.message,
        },
        // A 401/403 without the relay's error body is still a refusal of the key.
        None if status == 401 || status == 403 => TokenError::KeyRefused {
            status,
            code: None,
            message: format!("HTTP {status}"),
        },
        None if status == 404 => TokenError::NotARelay { status },
        None => TokenError::Status { status },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_relays_words_are_shown_inert_and_only_a_refused_key_is_final() {
        let refused = TokenError::KeyRefused {
            status: 401,
            code: Some(ErrorCode::KeyRevoked),
            message: "revoked\u{1b}[2J\u{202e}".into(),
        };
        assert!(refused.key_refused());
        assert_eq!(
            refused.to_string(),
            "the relay refused the API key: revoked (key_revoked)"
        );
        let suspended = TokenError::TenantSuspended {
            message: "paused".into(),
        };
        assert!(
            !suspended.key_refused(),
            "a suspended tenant may be resumed"
        );
        assert!(!TokenError::NotARelay { status: 404 }.key_refused());
        assert!(
            !TokenError::Status { status: 502 }.key_refused(),
            "a proxy's 502 is not a verdict on the key"
        );
        assert_eq!(
            TokenError::Status { status: 502 }.to_string(),
            "the relay answered HTTP 502"
        );
        assert!(
            !TokenError::Unreachable { why: "x".into() }.key_refused(),
            "a relay that is down now may be up later"
        );
    }
}
