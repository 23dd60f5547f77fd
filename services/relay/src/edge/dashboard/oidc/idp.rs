//! The relay as an OpenID Connect client of one provider (the `openidconnect` crate): the
//! provider's discovery document and keys, fetched when first needed and kept an hour (fetched
//! again at once when an ID token's signature does not check, as after a key rotation); the
//! authorization URL of a code flow with PKCE, a `state` and a nonce; and the code exchange,
//! whose ID token is checked (signature, issuer, audience, expiry, nonce, and an issue time no
//! older than a sign-in may take). An email counts only when the provider says it verified it,
//! from the ID token or, when the provider keeps it there, the userinfo endpoint.
//!
//! Without the relay's `oidc` feature (a laptop's embedded relay) every call says so.

use std::time::{Duration, Instant};

use crate::config::OidcSettings;

/// How long the discovery document and keys are trusted before they are fetched again.
#[cfg_attr(not(feature = "oidc"), allow(dead_code))]
const METADATA_TTL: Duration = Duration::from_secs(3600);
/// An ID token issued longer ago than this is refused (a sign-in lasts at most as long).
#[cfg_attr(not(feature = "oidc"), allow(dead_code))]
const MAX_TOKEN_AGE_SECS: i64 = 600;
/// How long a call to the provider may take.
#[cfg_attr(not(feature = "oidc"), allow(dead_code))]
const HTTP_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a sign-in through the provider failed.
#[derive(Debug, thiserror::Error)]
pub enum IdpError {
    /// The provider could not be reached or answered nonsense: try later.
    #[error("the identity provider is unavailable: {0}")]
    Unavailable(String),
    /// The provider's answer does not prove who signed in.
    #[error("the identity provider's answer was refused: {0}")]
    Refused(String),
}

/// Where to send the browser, and what the callback must find again.
#[derive(Debug)]
pub struct Begun {
    /// The provider's authorization URL.
    pub url: String,
    /// The `state` it carries.
    pub state: String,
    /// The nonce the ID token must carry.
    pub nonce: String,
    /// The PKCE verifier.
    pub pkce_verifier: String,
}

/// Who signed in, as the provider vouches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The provider's issuer URL.
    pub issuer: String,
    /// The person's subject there.
    pub subject: String,
    /// The person's email, lower case, only if the provider verified it.
    pub verified_email: Option<String>,
}

impl Identity {
    /// How the dashboard names the person.
    pub fn display(&self) -> String {
        self.verified_email
            .clone()
            .unwrap_or_else(|| self.subject.clone())
    }
}

/// The relay's client of its provider.
#[derive(Debug)]
pub struct Idp {
    settings: OidcSettings,
    #[cfg(feature = "oidc")]
    http: openidconnect::reqwest::Client,
    #[cfg(feature = "oidc")]
    metadata: tokio::sync::Mutex<Option<(Instant, openidconnect::core::CoreProviderMetadata)>>,
}

impl Idp {
    /// A client of the provider `settings` name; nothing is fetched yet. Fails only when no
    /// HTTP client can be made (no TLS roots, say).
    pub fn new(settings: OidcSettings) -> Result<Self, String> {
        Ok(Self {
            settings,
            #[cfg(feature = "oidc")]
            http: openidconnect::reqwest::Client::builder()
                // Following redirects would let a provider's answer point the relay anywhere.
                .redirect(openidconnect::reqwest::redirect::Policy::none())
                .timeout(HTTP_TIMEOUT)
                .build()
                .map_err(|e| format!("cannot make the identity provider's HTTP client: {e}"))?,
            #[cfg(feature = "oidc")]
            metadata: tokio::sync::Mutex::new(None),
        })
    }

    /// Its settings.
    pub fn settings(&self) -> &OidcSettings {
        &self.settings
    }
}

#[cfg(not(feature = "oidc"))]
impl Idp {
    /// Without the `oidc` feature: unavailable.
    pub async fn begin(&self) -> Result<Begun, IdpError> {
        let _ = Instant::now();
        Err(IdpError::Unavailable(
            "this relay was built without OpenID Connect".into(),
        ))
    }

    /// Without the `oidc` feature: unavailable.
    pub async fn finish(
        &self,
        _code: &str,
        _nonce: &str,
        _pkce_verifier: &str,
    ) -> Result<Identity, IdpError> {
        Err(IdpError::Unavailable(
            "this relay was built without OpenID Connect".into(),
        ))
    }
}

#[cfg(feature = "oidc")]
mod client {
    use openidconnect::core::{
        CoreAuthenticationFlow, CoreClient, CoreProviderMetadata, CoreUserInfoClaims,
    };
    use openidconnect::{
        AuthorizationCode, ClientId, ClientSecret, CsrfToken, IssuerUrl, Nonce,
        OAuth2TokenResponse, PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, Scope,
        SubjectIdentifier, TokenResponse,
    };

    use super::*;

    impl Idp {
        /// The discovery document, fetched if it is missing, older than an hour, or `fresh`.
        async fn metadata(&self, fresh: bool) -> Result<CoreProviderMetadata, IdpError> {
            let mut cached = self.metadata.lock().await;
            if !fresh
                && let Some((at, md)) = cached.as_ref()
                && at.elapsed() < METADATA_TTL
            {
                return Ok(md.clone());
            }
            let issuer = IssuerUrl::new(self.settings.issuer.clone())
                .map_err(|e| IdpError::Unavailable(format!("bad issuer URL: {e}")))?;
            let md = CoreProviderMetadata::discover_async(issuer, &self.http)
                .await
                .map_err(|e| IdpError::Unavailable(format!("discovery failed: {e}")))?;
            *cached = Some((Instant::now(), md.clone()));
            Ok(md)
        }

        fn client(
            &self,
            md: CoreProviderMetadata,
        ) -> Result<
            CoreClient<
                openidconnect::EndpointSet,
                openidconnect::EndpointNotSet,
                openidconnect::EndpointNotSet,
                openidconnect::EndpointNotSet,
                openidconnect::EndpointMaybeSet,
                openidconnect::EndpointMaybeSet,
            >,
            IdpError,
        > {
            let redirect = RedirectUrl::new(self.settings.redirect_url.clone())
                .map_err(|e| IdpError::Unavailable(format!("bad redirect URL: {e}")))?;
            Ok(CoreClient::from_provider_metadata(
                md,
                ClientId::new(self.settings.client_id.clone()),
                self.settings.client_secret.clone().map(ClientSecret::new),
            )
            .set_redirect_uri(redirect))
        }

        /// Starts a sign-in: the URL to send the browser to, and what to keep for the callback.
        pub async fn begin(&self) -> Result<Begun, IdpError> {
            let client = self.client(self.metadata(false).await?)?;
            let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
            let (url, state, nonce) = client
                .authorize_url(
                    CoreAuthenticationFlow::AuthorizationCode,
                    CsrfToken::new_random,
                    Nonce::new_random,
                )
                .add_scope(Scope::new("email".into()))
                .set_pkce_challenge(challenge)
                .url();
            Ok(Begun {
                url: url.to_string(),
                state: state.secret().clone(),
                nonce: nonce.secret().clone(),
                pkce_verifier: verifier.secret().clone(),
            })
        }

        /// Finishes a sign-in: exchanges `code` and proves who signed in.
        pub async fn finish(
            &self,
            code: &str,
            nonce: &str,
            pkce_verifier: &str,
        ) -> Result<Identity, IdpError> {
            let client = self.client(self.metadata(false).await?)?;
            let response = client
                .exchange_code(AuthorizationCode::new(code.to_owned()))
                .map_err(|e| IdpError::Unavailable(format!("no token endpoint: {e}")))?
                .set_pkce_verifier(PkceCodeVerifier::new(pkce_verifier.to_owned()))
                .request_async(&self.http)
                .await
                .map_err(|e| match e {
                    // The provider was not reached (or its answer was cut off): try later.
                    openidconnect::RequestTokenError::Request(e) => {
                        IdpError::Unavailable(format!("the code exchange failed: {e}"))
                    }
                    e => IdpError::Refused(format!("the code exchange failed: {e}")),
                })?;
            let id_token = response
                .id_token()
                .ok_or_else(|| IdpError::Refused("no ID token in the answer".into()))?;
            let nonce = Nonce::new(nonce.to_owned());
            let now = chrono::Utc::now();
            let verify = |client: &CoreClient<_, _, _, _, _, _>| {
                let verifier = client.id_token_verifier().set_issue_time_verifier_fn(
                    move |iat: chrono::DateTime<chrono::Utc>| {
                        let age = (now - iat).num_seconds();
                        if (-60..=MAX_TOKEN_AGE_SECS).contains(&age) {
                            Ok(())
                        } else {
                            Err(format!("issued {age} s ago"))
                        }
                    },
                );
                id_token
                    .claims(&verifier, &nonce)
                    .map(|c| (c.subject().clone(), c.email().cloned(), c.email_verified()))
                    .map_err(|e| e.to_string())
            };
            let (subject, email, verified) = match verify(&client) {
                Ok(claims) => claims,
                Err(first) => {
                    // The provider may have rotated its keys since they were fetched.
                    let fresh = self.client(self.metadata(true).await?)?;
                    verify(&fresh).map_err(|_| {
                        IdpError::Refused(format!("the ID token does not check: {first}"))
                    })?
                }
            };
            let (email, verified) = match email {
                Some(email) => (Some(email), verified),
                // Some providers (and `openid email` with an access token, by default) give the
                // email at the userinfo endpoint only.
                None => match client.user_info(
                    response.access_token().clone(),
                    Some(SubjectIdentifier::new(subject.as_str().to_owned())),
                ) {
                    Ok(request) => {
                        let info: CoreUserInfoClaims = request
                            .request_async(&self.http)
                            .await
                            .map_err(|e| match e {
                                openidconnect::UserInfoError::Request(e) => {
                                    IdpError::Unavailable(format!("userinfo failed: {e}"))
                                }
                                e => IdpError::Refused(format!("userinfo failed: {e}")),
                            })?;
                        (info.email().cloned(), info.email_verified())
                    }
                    Err(_) => (None, None),
                },
            };
            Ok(Identity {
                issuer: self.settings.issuer.clone(),
                subject: subject.as_str().to_owned(),
                verified_email: email
                    .filter(|_| verified == Some(true))
                    .map(|e| e.as_str().to_lowercase()),
            })
        }
    }
}
