//! Short-lived JWTs (HS256) exchanged for API keys and presented on the WebSocket upgrade.
//! Pods verify them locally; the key behind a token is looked up again on every upgrade, so a
//! token minted before a revocation is refused, and [`crate::tenancy::keycheck`] closes live
//! connections of keys revoked since.

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

/// An `Authorization` header that is not `Bearer <token>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed Authorization header: expected `Bearer <jwt>`, with exactly one space")]
pub struct MalformedAuthorization;

/// The token of an `Authorization` header, exactly as protocol.md §3.4 spells it: `Bearer`,
/// one space, then the token (no other whitespace). `Ok(None)` when there is no header; a header
/// of another shape is refused rather than read generously.
pub fn bearer(headers: &axum::http::HeaderMap) -> Result<Option<&str>, MalformedAuthorization> {
    let Some(value) = headers.get(axum::http::header::AUTHORIZATION) else {
        return Ok(None);
    };
    value
        .to_str()
        .ok()
        .and_then(|v| v.strip_prefix("Bearer "))
        .filter(|t| !t.is_empty() && !t.bytes().any(|b| b.is_ascii_whitespace()))
        .map(Some)
        .ok_or(MalformedAuthorization)
}

/// The one algorithm relay tokens use, as jsonwebtoken's crypto provider: HMAC-SHA256 from the
/// RustCrypto `hmac` and `sha2` crates, and nothing else (no RSA, no elliptic curves).
mod hs256 {
    use hmac::{Hmac, Mac};
    use jsonwebtoken::crypto::{CryptoProvider, JwtSigner, JwtVerifier, KeyUtils};
    use jsonwebtoken::errors::{ErrorKind, Result};
    use jsonwebtoken::signature::{self, Signer, Verifier};
    use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey, EncodingKey};
    use sha2::Sha256;

    struct Hs256(Hmac<Sha256>);

    impl Hs256 {
        fn new(algorithm: &Algorithm, family: AlgorithmFamily, key: &[u8]) -> Result<Self> {
            if *algorithm != Algorithm::HS256 || family != AlgorithmFamily::Hmac {
                return Err(ErrorKind::InvalidAlgorithm.into());
            }
            Hmac::new_from_slice(key)
                .map(Self)
                .map_err(|_| ErrorKind::InvalidKeyFormat.into())
        }
    }

    impl Signer<Vec<u8>> for Hs256 {
        fn try_sign(&self, msg: &[u8]) -> std::result::Result<Vec<u8>, signature::Error> {
            let mut mac = self.0.clone();
            mac.update(msg);
            Ok(mac.finalize().into_bytes().to_vec())
        }
    }

    impl Verifier<Vec<u8>> for Hs256 {
        fn verify(&self, msg: &[u8], sig: &Vec<u8>) -> std::result::Result<(), signature::Error> {
            let mut mac = self.0.clone();
            mac.update(msg);
            // Constant-time comparison (hmac's `verify_slice`).
            mac.verify_slice(sig).map_err(|_| signature::Error::new())
        }
    }

    impl JwtSigner for Hs256 {
        fn algorithm(&self) -> Algorithm {
            Algorithm::HS256
        }
    }

    impl JwtVerifier for Hs256 {
        fn algorithm(&self) -> Algorithm {
            Algorithm::HS256
        }
    }

    fn signer(algorithm: &Algorithm, key: &EncodingKey) -> Result<Box<dyn JwtSigner>> {
        Ok(Box::new(Hs256::new(
            algorithm,
            key.family(),
            key.as_bytes(),
        )?))
    }

    fn verifier(algorithm: &Algorithm, key: &DecodingKey) -> Result<Box<dyn JwtVerifier>> {
        Ok(Box::new(Hs256::new(
            algorithm,
            key.family(),
            key.try_get_as_bytes()?,
        )?))
    }

    static PROVIDER: CryptoProvider = CryptoProvider {
        signer_factory: signer,
        verifier_factory: verifier,
        key_utils: KeyUtils::new_unimplemented(),
    };

    /// Installs the provider for this process (once; later calls do nothing).
    pub(super) fn install() {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            // Fails only if another provider was installed first, which nothing here does.
            let _ = PROVIDER.install_default();
        });
    }
}

fn hmac_sha256(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    use hmac::{Hmac, Mac};
    // Invariant: HMAC takes keys of any length.
    let mut mac =
        Hmac::<sha2::Sha256>::new_from_slice(key).unwrap_or_else(|e| unreachable!("hmac key: {e}"));
    for p in parts {
        mac.update(p);
    }
    mac.finalize().into_bytes().into()
}

/// Issues and verifies tokens with one secret.
#[derive(Clone)]
pub struct Tokens {
    encoding: EncodingKey,
    decoding: DecodingKey,
    validation: Validation,
    ttl: Duration,
    /// HMAC-SHA256(secret, "repowire-relay derivation"): the key of [`Tokens::seed`], so that
    /// seeds never share a key with the signatures.
    derivation: [u8; 32],
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
        hs256::install();
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_issuer(&[ISSUER]);
        validation.set_required_spec_claims(&["exp", "iss", "sub"]);
        validation.leeway = 0;
        Self {
            encoding: EncodingKey::from_secret(secret),
            decoding: DecodingKey::from_secret(secret),
            validation,
            ttl,
            derivation: hmac_sha256(secret, &[b"repowire-relay derivation"]),
        }
    }

    /// A 32-byte seed for `purpose` and `parts`, derived from the relay's secret: the same on
    /// every pod and across restarts, unguessable without the secret. Each part is
    /// length-prefixed, so different splits never collide.
    pub fn seed(&self, purpose: &str, parts: &[&str]) -> [u8; 32] {
        let mut input: Vec<&[u8]> = vec![purpose.as_bytes()];
        let lens: Vec<[u8; 8]> = parts
            .iter()
            .map(|p| (p.len() as u64).to_be_bytes())
            .collect();
        for (p, len) in parts.iter().zip(&lens) {
            input.push(len);
            input.push(p.as_bytes());
        }
        hmac_sha256(&self.derivation, &input)
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

    /// Only HS256 is accepted: a token claiming another algorithm (even one signed correctly
    /// with the same secret under HS384) or `none` is refused.
    #[test]
    fn tokens_of_other_algorithms_are_refused() {
        use base64::Engine as _;
        let encode = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
        let (token, _) = tokens().issue("key-1", "tnt-1", crate::ids::now_ms());
        let claims = token.split('.').nth(1).expect("claims");
        for header in [
            r#"{"typ":"JWT","alg":"HS384"}"#,
            r#"{"typ":"JWT","alg":"none"}"#,
        ] {
            let forged = format!("{}.{claims}.", encode(header.as_bytes()));
            assert!(matches!(
                tokens().verify(&forged),
                Err(TokenError::Invalid(_))
            ));
        }
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
