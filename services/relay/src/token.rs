//! Short-lived JWTs (HS256) exchanged for API keys and presented on the WebSocket upgrade.
//! Pods verify them locally; revocation is checked against the key record on connect (and again
//! once the connection can be reached), and a revoke over the admin API closes that process's
//! live connections. Other processes learn of it only at their next connect until the
//! cross-pod bus exists (scale-out issue).

use std::time::Duration;

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation, errors::ErrorKind};
use serde::{Deserialize, Serialize};

const ISSUER: &str = "repowire-relay";

/// Claims of a relay token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// API key id.
    pub sub: String,
    /// Tenant id.
    pub tid: String,
    /// Issuer.
    pub iss: String,
    /// Issued at (s).
    pub iat: i64,
    /// Expires (s).
    pub exp: i64,
}

/// Why a token was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// Past its expiry.
    #[error("the token has expired; exchange the API key for a new one at POST /v1/token")]
    Expired,
    /// Bad signature, wrong issuer, malformed.
    #[error("the token is not valid: {0}")]
    Invalid(String),
}

/// Issues and verifies tokens with one secret.
#[derive(Clone)]
pub struct Tokens {
    encoding: EncodingKey,
    decoding: DecodingKey,
    validation: Validation,
    ttl: Duration,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokens")
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

impl Tokens {
    /// Tokens signed with `secret`, valid for `ttl`.
    pub fn new(secret: &[u8], ttl: Duration) -> Self {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_issuer(&[ISSUER]);
        validation.set_required_spec_claims(&["exp", "iss", "sub"]);
        validation.leeway = 0;
        Self {
            encoding: EncodingKey::from_secret(secret),
            decoding: DecodingKey::from_secret(secret),
            validation,
            ttl,
        }
    }

    /// Issues a token for a key, as of `now_ms`. Returns the token and its expiry (ms).
    pub fn issue(&self, key_id: &str, tenant_id: &str, now_ms: i64) -> (String, i64) {
        let iat = now_ms / 1000;
        let exp = iat + i64::try_from(self.ttl.as_secs()).unwrap_or(i64::MAX / 2);
        let claims = Claims {
            sub: key_id.to_owned(),
            tid: tenant_id.to_owned(),
            iss: ISSUER.to_owned(),
            iat,
            exp,
        };
        // Invariant: HS256 with an in-memory key and plain claims cannot fail to encode.
        let token = jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &self.encoding)
            .unwrap_or_else(|e| unreachable!("jwt encode: {e}"));
        (token, exp * 1000)
    }

    /// Verifies a token's signature, issuer and expiry.
    pub fn verify(&self, token: &str) -> Result<Claims, TokenError> {
        jsonwebtoken::decode::<Claims>(token, &self.decoding, &self.validation)
            .map(|data| data.claims)
            .map_err(|e| match e.kind() {
                ErrorKind::ExpiredSignature => TokenError::Expired,
                other => TokenError::Invalid(format!("{other:?}")),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens() -> Tokens {
        Tokens::new(
            b"secret-secret-secret-secret-secret",
            Duration::from_secs(60),
        )
    }

    #[test]
    fn an_issued_token_verifies_with_its_claims() {
        let (token, exp_ms) = tokens().issue("key-1", "tnt-1", crate::ids::now_ms());
        let claims = tokens().verify(&token).expect("valid");
        assert_eq!(
            (claims.sub.as_str(), claims.tid.as_str()),
            ("key-1", "tnt-1")
        );
        assert_eq!(claims.exp * 1000, exp_ms);
    }

    #[test]
    fn an_expired_token_is_refused_as_expired() {
        let issued_long_ago = crate::ids::now_ms() - 3_600_000;
        let (token, _) = tokens().issue("key-1", "tnt-1", issued_long_ago);
        assert_eq!(tokens().verify(&token), Err(TokenError::Expired));
    }

    #[test]
    fn a_token_signed_with_another_secret_is_invalid() {
        let other = Tokens::new(b"another-secret-another-secret!!", Duration::from_secs(60));
        let (token, _) = other.issue("key-1", "tnt-1", crate::ids::now_ms());
        assert!(matches!(
            tokens().verify(&token),
            Err(TokenError::Invalid(_))
        ));
        assert!(matches!(
            tokens().verify("not.a.jwt"),
            Err(TokenError::Invalid(_))
        ));
    }
}
