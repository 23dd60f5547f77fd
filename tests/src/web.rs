//! A browser's HTTP side for dashboard tests: one cookie jar of its own (the session cookie,
//! sent back only to the path it was set for, as a browser would), no redirects followed (a
//! test reads where it was sent), and forms posted with the page's `Origin`.

use reqwest::header::{self, HeaderMap};

/// One HTTP answer: status, headers and body text.
#[derive(Debug)]
pub struct Page {
    /// Status code.
    pub status: u16,
    /// Headers.
    pub headers: HeaderMap,
    /// Body.
    pub body: String,
}

impl Page {
    /// Where a redirect sends the browser.
    pub fn location(&self) -> Option<&str> {
        self.headers
            .get(header::LOCATION)
            .and_then(|v| v.to_str().ok())
    }

    /// The `Set-Cookie` headers.
    pub fn set_cookies(&self) -> Vec<String> {
        self.headers
            .get_all(header::SET_COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok().map(str::to_owned))
            .collect()
    }

    /// The value of the hidden form field `name` (the first one).
    pub fn hidden(&self, name: &str) -> Option<String> {
        let marker = format!("name=\"{name}\" value=\"");
        let start = self.body.find(&marker)? + marker.len();
        let end = self.body[start..].find('"')? + start;
        Some(self.body[start..end].to_owned())
    }
}

/// A browser talking to one relay.
#[derive(Debug)]
pub struct Browser {
    base: String,
    http: reqwest::Client,
    /// The dashboard session cookie's value, as last set.
    pub cookie: Option<String>,
    /// Headers sent with every request (a proxy's `X-Forwarded-For`, say).
    pub headers: Vec<(String, String)>,
}

impl Browser {
    /// A browser with no cookies, for the relay at `base` (`http://127.0.0.1:PORT`).
    pub fn new(base: &str) -> Self {
        Self {
            base: base.trim_end_matches('/').to_owned(),
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .expect("an HTTP client"),
            cookie: None,
            headers: Vec::new(),
        }
    }

    fn host(&self) -> &str {
        self.base.trim_start_matches("http://")
    }

    fn keep(&mut self, page: &Page) {
        for set in page.set_cookies() {
            let Some(value) = set
                .split(';')
                .next()
                .and_then(|pair| pair.trim().strip_prefix("repowire_dashboard="))
            else {
                continue;
            };
            let removed = set.contains("Max-Age=0");
            self.cookie = (!removed && !value.is_empty()).then(|| value.to_owned());
        }
    }

    async fn send(&mut self, request: reqwest::RequestBuilder, path: &str) -> Page {
        let request = self
            .headers
            .iter()
            .fold(request, |r, (name, value)| r.header(name, value));
        let request = match &self.cookie {
            Some(c) if path.starts_with("/dashboard") => {
                request.header(header::COOKIE, format!("repowire_dashboard={c}"))
            }
            _ => request,
        };
        let response = request.send().await.expect("the relay answers");
        let page = Page {
            status: response.status().as_u16(),
            headers: response.headers().clone(),
            body: response.text().await.expect("a body"),
        };
        self.keep(&page);
        page
    }

    /// `GET path`.
    pub async fn get(&mut self, path: &str) -> Page {
        let request = self.http.get(format!("{}{path}", self.base));
        self.send(request, path).await
    }

    /// `POST path` with a form, from a page of this relay (`Origin` its own).
    pub async fn post(&mut self, path: &str, form: &[(&str, &str)]) -> Page {
        let origin = self.base.clone();
        self.post_from(path, form, Some(&origin)).await
    }

    /// `POST path` with a form and the given `Origin` (none: no header).
    pub async fn post_from(
        &mut self,
        path: &str,
        form: &[(&str, &str)],
        origin: Option<&str>,
    ) -> Page {
        let mut request = self
            .http
            .post(format!("{}{path}", self.base))
            .header(header::HOST, self.host().to_owned())
            .form(form);
        if let Some(o) = origin {
            request = request.header(header::ORIGIN, o);
        }
        self.send(request, path).await
    }
}
