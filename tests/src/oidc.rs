//! A real OpenID Connect provider for the dashboard's sign-in tests: npm `oidc-provider` run by
//! `tests/oidc/provider.mjs` on 127.0.0.1 (`OIDC_PROVIDER` names its install; `scripts/test`
//! sets it), and a person signing in there with its development login pages.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};

use crate::web::{Browser, Page};

/// The provider's client secret for the relay under test.
pub const CLIENT_SECRET: &str = "relay-test-secret";
/// The relay's client id.
pub const CLIENT_ID: &str = "repowire-relay";

/// The provider, running.
#[derive(Debug)]
pub struct Provider {
    /// Its issuer URL (`http://127.0.0.1:PORT`).
    pub issuer: String,
    _child: Child,
    _stdin: ChildStdin,
}

/// `None` (the tests skip, saying why) when `OIDC_PROVIDER` is unset and
/// `REPOWIRE_REQUIRE_OIDC` is not; panics when it is required but missing.
pub fn available() -> Option<String> {
    match std::env::var("OIDC_PROVIDER") {
        Ok(dir) if !dir.is_empty() => Some(dir),
        _ => {
            assert!(
                std::env::var_os("REPOWIRE_REQUIRE_OIDC").is_none(),
                "REPOWIRE_REQUIRE_OIDC is set but OIDC_PROVIDER is not"
            );
            eprintln!(
                "skipped: OIDC_PROVIDER is not set (scripts/test installs npm oidc-provider)"
            );
            None
        }
    }
}

/// A free port on 127.0.0.1 (for a relay whose callback URL must be known before it starts).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

impl Provider {
    /// Starts the provider from the install in `dir`; its one client is the relay, allowed to
    /// return to each of `redirect_uris`. `accounts`: login name → claims that differ from the
    /// defaults (`<name>@example.test`, verified unless the name starts with `unverified`).
    pub async fn start(dir: &str, redirect_uris: &[String], accounts: serde_json::Value) -> Self {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/oidc/provider.mjs");
        let mut child = Command::new("node")
            .arg(script)
            .env("OIDC_PROVIDER", dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("node runs tests/oidc/provider.mjs");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let mut stdin = child.stdin.take().expect("stdin");
        let next = async |lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>| {
            tokio::time::timeout(Duration::from_secs(30), lines.next_line())
                .await
                .expect("the provider answers within 30 s")
                .expect("its output")
                .expect("a line before it exits")
        };
        let port = next(&mut lines).await;
        let port = port
            .strip_prefix("PORT ")
            .unwrap_or_else(|| panic!("PORT first, not {port}"))
            .to_owned();
        let setup = serde_json::json!({
            "clients": [{
                "client_id": CLIENT_ID,
                "client_secret": CLIENT_SECRET,
                "redirect_uris": redirect_uris,
            }],
            "accounts": accounts,
        });
        stdin
            .write_all(format!("{setup}\n").as_bytes())
            .await
            .expect("the setup line");
        assert_eq!(next(&mut lines).await, "READY");
        // Anything it prints later is drained, so it never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Self {
            issuer: format!("http://127.0.0.1:{port}"),
            _child: child,
            _stdin: stdin,
        }
    }

    /// The relay's settings for this provider, with its callback at `relay_base`.
    pub fn relay_env(&self, relay_base: &str) -> Vec<(String, String)> {
        vec![
            ("REPOWIRE_OIDC_ISSUER".into(), self.issuer.clone()),
            ("REPOWIRE_OIDC_CLIENT_ID".into(), CLIENT_ID.into()),
            ("REPOWIRE_OIDC_CLIENT_SECRET".into(), CLIENT_SECRET.into()),
            (
                "REPOWIRE_OIDC_REDIRECT_URL".into(),
                format!("{relay_base}/dashboard/oidc/callback"),
            ),
            ("REPOWIRE_OIDC_NAME".into(), "Test IdP".into()),
        ]
    }
}

/// The provider's side of a browser: cookies by name with their paths.
#[derive(Debug, Default)]
pub struct ProviderJar(BTreeMap<String, (String, String)>);

impl ProviderJar {
    fn keep(&mut self, headers: &reqwest::header::HeaderMap) {
        for set in headers.get_all(reqwest::header::SET_COOKIE) {
            let set = set.to_str().unwrap_or_default();
            let mut parts = set.split(';');
            let Some((name, value)) = parts.next().and_then(|p| p.trim().split_once('=')) else {
                continue;
            };
            let path = parts
                .filter_map(|p| p.trim().split_once('='))
                .find(|(k, _)| k.eq_ignore_ascii_case("path"))
                .map(|(_, v)| v.to_owned())
                .unwrap_or_else(|| "/".into());
            let expired = set
                .to_ascii_lowercase()
                .contains("expires=thu, 01 jan 1970");
            if value.is_empty() || expired {
                self.0.remove(name);
            } else {
                self.0.insert(name.to_owned(), (value.to_owned(), path));
            }
        }
    }

    fn header(&self, path: &str) -> String {
        self.0
            .iter()
            .filter(|(_, (_, p))| path.starts_with(p.as_str()))
            .map(|(n, (v, _))| format!("{n}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// Signs in at the provider as `login` from the provider URL the relay sent the browser to
/// (`authorize`), through its login and consent pages, and returns where the provider sends the
/// browser back (the relay's callback URL with `code`, `state` and `iss`).
pub async fn consent(jar: &mut ProviderJar, authorize: &str, login: &str) -> String {
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("a client");
    let origin = {
        let rest = authorize.split_once("://").expect("a URL").1;
        let host = rest.split('/').next().expect("a host");
        format!("http://{host}")
    };
    let mut url = authorize.to_owned();
    let mut form: Option<Vec<(String, String)>> = None;
    for _ in 0..12 {
        let path = url.strip_prefix(&origin).unwrap_or(&url).to_owned();
        let path_only = path.split('?').next().unwrap_or_default().to_owned();
        let request = match form.take() {
            Some(fields) => http.post(&url).form(&fields),
            None => http.get(&url),
        };
        let response = request
            .header(reqwest::header::COOKIE, jar.header(&path_only))
            .send()
            .await
            .expect("the provider answers");
        jar.keep(response.headers());
        let status = response.status().as_u16();
        if (300..400).contains(&status) {
            let location = response.headers()[reqwest::header::LOCATION]
                .to_str()
                .expect("a location")
                .to_owned();
            if !location.starts_with('/') && !location.starts_with(&origin) {
                return location;
            }
            url = if location.starts_with('/') {
                format!("{origin}{location}")
            } else {
                location
            };
            continue;
        }
        let body = response.text().await.expect("a page");
        assert_eq!(status, 200, "the provider's page at {url}: {body}");
        let action = body
            .split("action=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .unwrap_or_else(|| panic!("a form at {url}: {body}"))
            .to_owned();
        form = Some(if body.contains("name=\"login\"") {
            vec![
                ("prompt".into(), "login".into()),
                ("login".into(), login.into()),
                ("password".into(), "any".into()),
            ]
        } else {
            vec![("prompt".into(), "consent".into())]
        });
        url = if action.starts_with('/') {
            format!("{origin}{action}")
        } else {
            action
        };
    }
    panic!("the provider did not send the browser back within 12 steps");
}

/// Where a relay page that moves on by itself (`<meta http-equiv="refresh">`) goes.
pub fn refresh_target(page: &Page) -> Option<String> {
    let start = page.body.find(r#"http-equiv="refresh" content="0; url="#)?;
    let rest = &page.body[start + r#"http-equiv="refresh" content="0; url="#.len()..];
    let url = &rest[..rest.find('"')?];
    Some(
        url.replace("&#38;", "&")
            .replace("&#x2f;", "/")
            .replace("&#47;", "/")
            .replace("&#x27;", "'")
            .replace("&#39;", "'")
            .replace("&quot;", "\"")
            .replace("&#34;", "\"")
            .replace("&amp;", "&"),
    )
}

/// `POST /dashboard/oidc/start` with `form`: the provider's authorization URL the relay's page
/// moves on to (it must answer 200 with a binding cookie).
pub async fn start(browser: &mut Browser, form: &[(&str, &str)]) -> String {
    let started = browser.post("/dashboard/oidc/start", form).await;
    assert_eq!(started.status, 200, "{}", started.body);
    assert!(browser.oidc_cookie.is_some(), "a binding cookie");
    refresh_target(&started).expect("on to the provider")
}

/// The whole sign-in of a relay browser: posts `form` to `/dashboard/oidc/start`, signs in at
/// the provider as `login`, and returns the relay's answer to the callback.
pub async fn sign_in(browser: &mut Browser, form: &[(&str, &str)], login: &str) -> Page {
    let authorize = start(browser, form).await;
    let mut jar = ProviderJar::default();
    let back = consent(&mut jar, &authorize, login).await;
    browser.get_url(&back).await
}
