//! A signed-in browser: the session cookie (`repowire_dashboard`: HttpOnly, Secure,
//! SameSite=Strict, Path=/dashboard, only its SHA-256 stored), the CSRF token every form
//! carries, the same-origin rule for form posts, and what the session may do.
//!
//! A session opened with an API key acts with that key's scopes, and only while the key is
//! usable: each request reads the key again, so revoking it (or suspending the tenant) ends the
//! browser's access at its next request. A member's session (signed in through the relay's
//! OpenID Connect provider) acts with the member's scopes while the member stays: removing the
//! member ends it the same way.

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use rand::Rng;

use super::page::{Chrome, PageError, SignedIn};
use crate::ids::now_ms;
use crate::state::AppState;
use crate::storage::store::{DashboardSession, TenantKey, TenantRecord};
use crate::tenancy::apikey;

/// The cookie's name.
pub const COOKIE: &str = "repowire_dashboard";

/// A secret for a cookie, a sign-in link or a CSRF token: 32 random bytes, hex.
pub fn new_secret() -> String {
    let bytes: [u8; 32] = rand::rng().random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// What is stored of a secret.
pub fn hash(secret: &str) -> String {
    apikey::hash(secret)
}

/// A kind of session cookie: its name and the path it is sent to (HttpOnly, Secure,
/// SameSite=Strict, always).
#[derive(Debug, Clone, Copy)]
pub struct CookieKind {
    /// Its name.
    pub name: &'static str,
    /// The path the browser sends it to.
    pub path: &'static str,
}

/// A tenant's session.
pub const TENANT_COOKIE: CookieKind = CookieKind {
    name: COOKIE,
    path: "/dashboard",
};

impl CookieKind {
    /// `Set-Cookie` for a new session of `max_age_secs`.
    pub fn set(self, secret: &str, max_age_secs: u64) -> HeaderValue {
        let Self { name, path } = self;
        HeaderValue::from_str(&format!(
            "{name}={secret}; Path={path}; Max-Age={max_age_secs}; HttpOnly; Secure; SameSite=Strict"
        ))
        .unwrap_or_else(|_| self.clear())
    }

    /// `Set-Cookie` that removes it.
    pub fn clear(self) -> HeaderValue {
        let Self { name, path } = self;
        HeaderValue::from_str(&format!(
            "{name}=; Path={path}; Max-Age=0; HttpOnly; Secure; SameSite=Strict"
        ))
        .unwrap_or_else(|_| HeaderValue::from_static("Max-Age=0"))
    }

    /// `Set-Cookie` that removes a SameSite=Lax cookie of this name and path.
    pub fn clear_lax(self) -> HeaderValue {
        let Self { name, path } = self;
        HeaderValue::from_str(&format!(
            "{name}=; Path={path}; Max-Age=0; HttpOnly; Secure; SameSite=Lax"
        ))
        .unwrap_or_else(|_| HeaderValue::from_static("Max-Age=0"))
    }

    /// Its value, if the request carries it.
    pub fn read(self, headers: &HeaderMap) -> Option<&str> {
        headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .find(|(name, _)| *name == self.name)
            .map(|(_, value)| value)
            .filter(|v| !v.is_empty())
    }
}

/// `Set-Cookie` for a new tenant session of `max_age_secs`.
pub fn set_cookie(secret: &str, max_age_secs: u64) -> HeaderValue {
    TENANT_COOKIE.set(secret, max_age_secs)
}

/// `Set-Cookie` that removes the tenant session cookie.
pub fn clear_cookie() -> HeaderValue {
    TENANT_COOKIE.clear()
}

/// The tenant session cookie's value, if the request carries one.
pub fn cookie(headers: &HeaderMap) -> Option<&str> {
    TENANT_COOKIE.read(headers)
}

/// A form post must come from a page of this relay: when the browser names the page's origin
/// (`Origin`, sent with every cross-site and same-site POST by current browsers), its host must
/// be the one the request was sent to. With SameSite=Strict cookies and the CSRF token this is
/// the third wall; for sign-in (no session yet) it keeps another site from signing a browser in
/// to the other site's tenant.
pub fn same_origin(headers: &HeaderMap) -> Result<(), PageError> {
    // A browser that says the request comes from another site (Fetch Metadata) is believed,
    // whatever `Origin` says or leaves out.
    if headers
        .get("sec-fetch-site")
        .is_some_and(|v| v.as_bytes() == b"cross-site")
    {
        return Err(PageError::Shown(
            StatusCode::FORBIDDEN,
            "this form was sent from another site's page".into(),
        ));
    }
    let Some(origin) = headers.get(header::ORIGIN) else {
        return Ok(());
    };
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    let origin_host = origin
        .to_str()
        .ok()
        .and_then(|o| o.split_once("://"))
        .map(|(_, rest)| rest);
    match (origin_host, host) {
        (Some(o), Some(h)) if o.eq_ignore_ascii_case(h) => Ok(()),
        _ => Err(PageError::Shown(
            StatusCode::FORBIDDEN,
            "this form was sent from another site's page".into(),
        )),
    }
}

/// Compares two secrets in time that does not depend on where they differ.
pub fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// A tenant's signed-in browser, as of this request.
#[derive(Debug, Clone)]
pub struct TenantSession {
    /// The stored session.
    pub session: DashboardSession,
    /// Its tenant.
    pub tenant: TenantRecord,
    /// What it may do now: the session's scopes that its key still holds.
    pub scopes: Vec<String>,
    /// The key's label, for the header.
    pub key_label: String,
    /// When the session's key expires (ms), if it does: no key it makes outlives it.
    pub key_expires_at_ms: Option<i64>,
}

impl TenantSession {
    /// The tenant's id.
    pub fn tenant_id(&self) -> &str {
        &self.tenant.id
    }

    /// What the session acts with: its key's id, or `member:<id>` for a member. The person's
    /// peer and revocation (closing its connection) are keyed by it.
    pub fn credential_id(&self) -> String {
        match (&self.session.key_id, &self.session.member_id) {
            (Some(key), _) => key.clone(),
            (None, Some(member)) => member_credential(member),
            (None, None) => String::new(),
        }
    }

    /// Whether it may do what `scope` allows.
    pub fn may(&self, scope: &str) -> bool {
        self.scopes.iter().any(|s| s == scope)
    }

    /// The layout data of a page of `section`.
    pub fn chrome(&self, section: &'static str) -> Chrome {
        let subject = if self.key_label.is_empty() {
            self.session.subject.clone()
        } else {
            format!("{} ({})", self.session.subject, self.key_label)
        };
        Chrome {
            section,
            signed_in: Some(SignedIn {
                tenant_name: self
                    .tenant
                    .display_name
                    .clone()
                    .unwrap_or_else(|| self.tenant.name.clone()),
                subject,
                csrf: self.session.csrf.clone(),
                manages_keys: self.may(apikey::KEYS_MANAGE),
                reads_messages: self.may(apikey::MESSAGES_READ),
                sends: super::compose::may_send(self),
                approves: self.may(apikey::APPROVE),
            }),
            ..Chrome::anonymous()
        }
    }

    /// Refuses a form whose CSRF token is not this session's.
    pub fn check_csrf(&self, given: &str) -> Result<(), PageError> {
        if same_secret(given, &self.session.csrf) {
            Ok(())
        } else {
            Err(PageError::Shown(
                StatusCode::FORBIDDEN,
                "this form is stale or was not made by this dashboard: reload the page and try again"
                    .into(),
            ))
        }
    }
}

/// The credential id of a member (see [`TenantSession::credential_id`]).
pub fn member_credential(member_id: &str) -> String {
    format!("member:{member_id}")
}

/// The tenant session of the request, if it has a usable one.
pub async fn current(
    state: &AppState,
    headers: &HeaderMap,
) -> Result<Option<TenantSession>, PageError> {
    let Some(secret) = cookie(headers) else {
        return Ok(None);
    };
    let now = now_ms();
    let id_hash = hash(secret);
    // A signed-in browser's requests are bounded like a credential's (`--http-requests-per-minute`):
    // every page reads the store. Per session first (a cookie that finds nothing spends only
    // its own), then per key below: many sessions of one key share its budget.
    state.http_limit.check(&id_hash)?;
    let Some(session) = state.store.find_dashboard_session(&id_hash, now).await? else {
        return Ok(None);
    };
    let Some(tenant_id) = session
        .tenant_id
        .clone()
        .filter(|_| session.audience == "tenant")
    else {
        return Ok(None);
    };
    let mut scopes: Vec<String> = session.scopes.split(' ').map(str::to_owned).collect();
    let mut key_label = String::new();
    let mut key_expires_at_ms = None;
    if let Some(key_id) = &session.key_id {
        let key = state.store.get_api_key(key_id).await?;
        let Some(key) = key.filter(|k| k.tenant_id == tenant_id && k.usable_at(now)) else {
            // The key was revoked or expired: so is every session opened with it.
            state.store.end_dashboard_session(&id_hash, now).await?;
            return Ok(None);
        };
        if key.tenant_suspended {
            return Err(PageError::Shown(
                StatusCode::FORBIDDEN,
                "this tenant is suspended by the relay's operator".into(),
            ));
        }
        // The key's own request budget (the one its token exchanges spend: keyed by its hash).
        state.http_limit.check(&key.hash)?;
        scopes.retain(|s| key.has(s));
        key_label = key.label;
        key_expires_at_ms = key.expires_at_ms;
    }
    if let Some(member_id) = &session.member_id {
        // A member's session: the membership read again each request, so removing the member
        // ends it at once, on every pod.
        let member = state.store.get_member(member_id).await?;
        let Some(member) = member.filter(|m| m.tenant_id == tenant_id && m.removed_at_ms.is_none())
        else {
            state.store.end_dashboard_session(&id_hash, now).await?;
            return Ok(None);
        };
        // The member's own request budget, shared by its sessions.
        state.http_limit.check(&member_credential(member_id))?;
        scopes.retain(|s| member.has(s));
        key_label = member
            .email
            .as_deref()
            .and_then(|e| e.split('@').next())
            .unwrap_or_default()
            .to_owned();
    }
    let Some(tenant) = state.store.find_tenant(TenantKey::Id(&tenant_id)).await? else {
        return Ok(None);
    };
    if tenant.deleted_at_ms.is_some() {
        return Ok(None);
    }
    if session.member_id.is_some() && tenant.suspended_at_ms.is_some() {
        return Err(PageError::Shown(
            StatusCode::FORBIDDEN,
            "this tenant is suspended by the relay's operator".into(),
        ));
    }
    Ok(Some(TenantSession {
        session,
        tenant,
        scopes,
        key_label,
        key_expires_at_ms,
    }))
}

/// The tenant session of the request; without one, to the sign-in page.
pub async fn required(state: &AppState, headers: &HeaderMap) -> Result<TenantSession, PageError> {
    current(state, headers).await?.ok_or(PageError::SignIn)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (name, value) in pairs {
            h.append(*name, HeaderValue::from_str(value).expect("header"));
        }
        h
    }

    #[test]
    fn the_cookie_is_found_among_others_and_an_empty_one_is_none() {
        let h = headers(&[("cookie", "a=1; repowire_dashboard=abc; b=2")]);
        assert_eq!(cookie(&h), Some("abc"));
        let h = headers(&[("cookie", "a=1"), ("cookie", "repowire_dashboard=x")]);
        assert_eq!(cookie(&h), Some("x"));
        assert_eq!(cookie(&headers(&[("cookie", "repowire_dashboard=")])), None);
        assert_eq!(
            cookie(&headers(&[("cookie", "xrepowire_dashboard=1")])),
            None
        );
    }

    #[test]
    fn a_post_from_another_origin_is_refused() {
        let ours = headers(&[
            ("host", "relay.example"),
            ("origin", "https://relay.example"),
        ]);
        assert!(same_origin(&ours).is_ok());
        assert!(same_origin(&headers(&[("host", "relay.example")])).is_ok());
        for origin in ["https://evil.example", "null", "https://relay.example.evil"] {
            let theirs = headers(&[("host", "relay.example"), ("origin", origin)]);
            assert!(same_origin(&theirs).is_err(), "{origin} was taken");
        }
        let fetched = headers(&[("host", "relay.example"), ("sec-fetch-site", "cross-site")]);
        assert!(
            same_origin(&fetched).is_err(),
            "a cross-site fetch without Origin was taken"
        );
        let own = headers(&[("host", "relay.example"), ("sec-fetch-site", "same-origin")]);
        assert!(same_origin(&own).is_ok());
    }

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abc", "abd"));
        assert!(!same_secret("abc", "ab"));
        assert_eq!(new_secret().len(), 64);
        assert_ne!(new_secret(), new_secret());
    }
}
