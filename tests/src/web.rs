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
    /// The operator session cookie's value (`repowire_operator`, sent only under
    /// `/dashboard/operator`), as last set.
    pub operator_cookie: Option<String>,
    /// The binding cookie of a sign-in through the identity provider (`repowire_oidc`, sent
    /// only under `/dashboard/oidc`), as last set.
    pub oidc_cookie: Option<String>,
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
            operator_cookie: None,
            oidc_cookie: None,
            headers: Vec::new(),
        }
    }

    fn host(&self) -> &str {
        self.base.trim_start_matches("http://")
    }

    fn keep(&mut self, page: &Page) {
        for set in page.set_cookies() {
            let pair = set.split(';').next().unwrap_or_default().trim();
            let removed = set.contains("Max-Age=0");
            let kept = |value: &str| (!removed && !value.is_empty()).then(|| value.to_owned());
            if let Some(value) = pair.strip_prefix("repowire_dashboard=") {
                self.cookie = kept(value);
            } else if let Some(value) = pair.strip_prefix("repowire_operator=") {
                assert!(
                    set.contains("Path=/dashboard/operator;"),
                    "the operator's cookie is for its pages only: {set}"
                );
                self.operator_cookie = kept(value);
            } else if let Some(value) = pair.strip_prefix("repowire_oidc=") {
                assert!(
                    set.contains("Path=/dashboard/oidc;") && set.contains("SameSite=Lax"),
                    "the binding cookie is for the callback only, and follows its cross-site redirect: {set}"
                );
                self.oidc_cookie = kept(value);
            }
        }
    }

    /// The `Cookie` header a browser sends to `path`.
    fn cookies_for(&self, path: &str) -> Option<String> {
        let mut pairs = Vec::new();
        if let Some(c) = self
            .cookie
            .as_ref()
            .filter(|_| path.starts_with("/dashboard"))
        {
            pairs.push(format!("repowire_dashboard={c}"));
        }
        if let Some(c) = self
            .operator_cookie
            .as_ref()
            .filter(|_| path.starts_with("/dashboard/operator"))
        {
            pairs.push(format!("repowire_operator={c}"));
        }
        if let Some(c) = self
            .oidc_cookie
            .as_ref()
            .filter(|_| path.starts_with("/dashboard/oidc"))
        {
            pairs.push(format!("repowire_oidc={c}"));
        }
        (!pairs.is_empty()).then(|| pairs.join("; "))
    }

    async fn send(&mut self, request: reqwest::RequestBuilder, path: &str) -> Page {
        let request = self
            .headers
            .iter()
            .fold(request, |r, (name, value)| r.header(name, value));
        let request = match self.cookies_for(path) {
            Some(c) => request.header(header::COOKIE, c),
            None => request,
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

    /// `GET url`, an absolute URL of this relay (or of another pod behind the same address, as
    /// a provider's redirect back may reach): the cookies its path gets.
    pub async fn get_url(&mut self, url: &str) -> Page {
        let rest = url.split_once("://").map(|(_, r)| r).unwrap_or(url);
        let path = rest.find('/').map(|i| &rest[i..]).unwrap_or("/");
        let path = path.split('?').next().unwrap_or("/").to_owned();
        let request = self.http.get(url);
        self.send(request, &path).await
    }

    /// `GET path` as an `EventSource` would (`Accept: text/event-stream`, `Last-Event-ID` when
    /// given): the stream when the relay answers 200, else the page it answered.
    pub async fn events(
        &mut self,
        path: &str,
        last_event_id: Option<&str>,
    ) -> Result<EventStream, Page> {
        let mut request = self
            .http
            .get(format!("{}{path}", self.base))
            .header(header::ACCEPT, "text/event-stream");
        if let Some(id) = last_event_id {
            request = request.header("last-event-id", id);
        }
        if let Some(c) = &self.cookie {
            request = request.header(header::COOKIE, format!("repowire_dashboard={c}"));
        }
        let response = request.send().await.expect("the relay answers");
        if response.status().as_u16() != 200 {
            return Err(Page {
                status: response.status().as_u16(),
                headers: response.headers().clone(),
                body: response.text().await.expect("a body"),
            });
        }
        Ok(EventStream {
            headers: response.headers().clone(),
            response,
            buffer: String::new(),
        })
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

/// One Server-Sent Event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// Its `id:`, if it had one.
    pub id: Option<String>,
    /// Its `event:` (`message` when none).
    pub event: String,
    /// Its `data:` lines, joined with newlines.
    pub data: String,
}

/// An open Server-Sent Events response, read event by event.
#[derive(Debug)]
pub struct EventStream {
    /// The response's headers.
    pub headers: HeaderMap,
    response: reqwest::Response,
    buffer: String,
}

impl EventStream {
    /// The next event (comments, such as keep-alives, skipped); `None` when the relay ends
    /// the stream. Panics if nothing comes within `wait`.
    pub async fn next(&mut self, wait: std::time::Duration) -> Option<SseEvent> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let mut event = SseEvent {
                    id: None,
                    event: "message".into(),
                    data: String::new(),
                };
                let mut data = Vec::new();
                for line in block.lines() {
                    let (field, value) = line.split_once(':').unwrap_or((line, ""));
                    let value = value.strip_prefix(' ').unwrap_or(value);
                    match field {
                        "id" => event.id = Some(value.to_owned()),
                        "event" => event.event = value.to_owned(),
                        "data" => data.push(value.to_owned()),
                        _ => {}
                    }
                }
                if data.is_empty() && event.id.is_none() {
                    continue; // a comment
                }
                event.data = data.join("\n");
                return Some(event);
            }
            let chunk = tokio::time::timeout_at(deadline, self.response.chunk())
                .await
                .unwrap_or_else(|_| panic!("no event within {wait:?}; buffered: {:?}", self.buffer))
                .expect("the stream reads");
            match chunk {
                Some(bytes) => self.buffer.push_str(&String::from_utf8_lossy(&bytes)),
                None => return None,
            }
        }
    }
}
