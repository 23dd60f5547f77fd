//! What every dashboard page shares: the layout's data ([`Chrome`]), errors shown as pages
//! ([`PageError`]), and the headers every response gets ([`headers`]).

use askama::Template;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Redirect, Response};

use crate::error::AppError;
use crate::storage::store::StoreError;

/// The layout's data: who is signed in (for the header), which section is shown.
#[derive(Debug, Clone)]
pub struct Chrome {
    /// Cache-busting version of the stylesheet's URL.
    pub asset_version: &'static str,
    /// The section shown (`overview`, …); the header marks it.
    pub section: &'static str,
    /// The signed-in browser, if any.
    pub signed_in: Option<SignedIn>,
}

/// What the header shows of a signed-in browser.
#[derive(Debug, Clone)]
pub struct SignedIn {
    /// The tenant's name.
    pub tenant_name: String,
    /// Who signed in (`key:<id> (<label>)`).
    pub subject: String,
    /// The session's CSRF token, for the logout form.
    pub csrf: String,
    /// The session may manage keys (the header links the Keys page).
    pub manages_keys: bool,
    /// The session may read the tenant's messages (the header links the Asks page).
    pub reads_messages: bool,
    /// The session may send as a peer (the header links the Send page).
    pub sends: bool,
    /// The session may answer approvals (the header links the Approvals page).
    pub approves: bool,
}

impl Chrome {
    /// The session's CSRF token, for a page's forms ("" when nobody is signed in).
    pub fn csrf(&self) -> &str {
        self.signed_in.as_ref().map_or("", |s| s.csrf.as_str())
    }

    /// The layout of a page nobody is signed in to.
    pub fn anonymous() -> Self {
        Self {
            asset_version: env!("CARGO_PKG_VERSION"),
            section: "",
            signed_in: None,
        }
    }
}

/// Renders a template as a page (a template that fails to render is a 500 that says nothing
/// internal; the failure is logged).
pub fn render(template: &impl Template) -> Response {
    match template.render() {
        Ok(html) => Html(html).into_response(),
        Err(error) => {
            tracing::error!(%error, "a dashboard template failed to render");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "the page could not be rendered",
            )
                .into_response()
        }
    }
}

#[derive(Template)]
#[template(path = "dashboard/problem.html")]
struct Problem<'a> {
    chrome: Chrome,
    title: &'a str,
    message: &'a str,
    next_href: &'a str,
    next_label: &'a str,
}

/// A page that could not be shown.
#[derive(Debug)]
pub enum PageError {
    /// Not signed in (or the session ended): to the sign-in page.
    SignIn,
    /// To another page (the operator's sign-in).
    Redirect(&'static str),
    /// Shown as a page with this status and message.
    Shown(StatusCode, String),
    /// `429`, shown as a page with `Retry-After` (whole seconds, rounded up).
    Limited(String, std::time::Duration),
}

impl From<AppError> for PageError {
    fn from(e: AppError) -> Self {
        match e.retry_after {
            Some(wait) if e.status == StatusCode::TOO_MANY_REQUESTS => {
                PageError::Limited(e.message, wait)
            }
            _ => PageError::Shown(e.status, e.message),
        }
    }
}

impl From<StoreError> for PageError {
    fn from(e: StoreError) -> Self {
        AppError::from(e).into()
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        match self {
            PageError::SignIn => Redirect::to("/dashboard/signin").into_response(),
            PageError::Redirect(to) => Redirect::to(to).into_response(),
            PageError::Limited(message, wait) => {
                let mut response =
                    PageError::Shown(StatusCode::TOO_MANY_REQUESTS, message).into_response();
                let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(secs.max(1)));
                response
            }
            PageError::Shown(status, message) => {
                let title = match status {
                    StatusCode::FORBIDDEN => "Not allowed",
                    StatusCode::NOT_FOUND => "Not found",
                    StatusCode::TOO_MANY_REQUESTS => "Too many requests",
                    s if s.is_server_error() => "The relay could not do that",
                    _ => "That did not work",
                };
                let mut response = render(&Problem {
                    chrome: Chrome::anonymous(),
                    title,
                    message: &message,
                    next_href: "/dashboard",
                    next_label: "Back to the dashboard",
                });
                *response.status_mut() = status;
                response
            }
        }
    }
}

/// Headers of every dashboard response: a strict Content-Security-Policy (no inline script or
/// style, nothing from elsewhere, no framing, forms only to this relay), no MIME sniffing, a
/// referrer only to this relay's own pages (a sign-in link's token never leaves in one; not
/// `no-referrer`, under which browsers send `Origin: null` with every form post and the
/// same-origin check could not tell a page of ours), and pages never cached.
pub async fn headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; style-src 'self'; img-src 'self'; script-src 'self'; \
             connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    if !h.contains_key(header::CACHE_CONTROL) {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}
