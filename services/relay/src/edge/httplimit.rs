//! The request rate of the tenant-facing HTTP endpoints (`POST /v1/token`, `GET /v1/limits`,
//! `GET /v1/usage`), per credential, in this process: each of them reads the database, and a
//! client stuck in a loop must not take it from everyone else. Over the rate: `429
//! rate_limited` with `Retry-After`. GCRA (governor), keyed; idle keys are dropped by the
//! sweeper.
//!
//! Failed token exchanges are limited per source address as well ([`FailureLimiter`]): a
//! limit per credential cannot stop someone trying many different keys (each one a database
//! lookup). The source is the TCP peer, or — only when that peer is a configured proxy — the
//! client the proxy names in `X-Forwarded-For`; IPv6 sources count per /64.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::num::NonZeroU32;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::http::HeaderMap;
use ipnet::IpNet;

use axum::http::StatusCode;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use repowire_protocol::ErrorCode;

use crate::error::AppError;

/// The limiter; `None` inside when the rate is 0 (off).
#[derive(Debug)]
pub struct HttpLimiter(Option<DefaultKeyedRateLimiter<String>>);

impl HttpLimiter {
    /// `per_minute` requests a minute per key, `burst` at once; 0 per minute: no limit.
    pub fn new(per_minute: u32, burst: u32) -> Self {
        Self(NonZeroU32::new(per_minute).map(|rate| {
            let burst = NonZeroU32::new(burst).unwrap_or(NonZeroU32::MIN);
            RateLimiter::keyed(Quota::per_minute(rate).allow_burst(burst))
        }))
    }

    /// Spends one request of `key`, or refuses it with `429 rate_limited` and `Retry-After`.
    pub fn check(&self, key: &str) -> Result<(), AppError> {
        let Some(limiter) = &self.0 else {
            return Ok(());
        };
        limiter.check_key(&key.to_owned()).map_err(|not_until| {
            let wait = not_until.wait_time_from(DefaultClock::default().now());
            AppError::new(
                StatusCode::TOO_MANY_REQUESTS,
                ErrorCode::RateLimited,
                format!(
                    "too many requests with this credential; retry in {} ms",
                    wait.as_millis().max(1)
                ),
            )
            .with_retry_after(wait)
        })
    }

    /// Forgets keys whose buckets are full again (nothing to remember).
    pub fn prune(&self) {
        if let Some(limiter) = &self.0 {
            limiter.retain_recent();
            limiter.shrink_to_fit();
        }
    }
}

/// The TCP peer of a request, put in its extensions by the server (absent when a router is
/// driven without a socket, as in unit tests).
#[derive(Debug, Clone, Copy)]
pub struct ClientAddr(pub SocketAddr);

/// The address a request comes from: the TCP peer, unless that peer is one of the `trusted`
/// proxies; then the rightmost address in `X-Forwarded-For` that is not a trusted proxy
/// (addresses to its left are the client's own claims and are not believed).
pub fn source(peer: IpAddr, headers: &HeaderMap, trusted: &[IpNet]) -> IpAddr {
    let peer = peer.to_canonical();
    let is_trusted = |ip: &IpAddr| trusted.iter().any(|net| net.contains(ip));
    if !is_trusted(&peer) {
        return peer;
    }
    let hops: Vec<&str> = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .collect();
    // From the right: each trusted proxy appended the address it was reached from. The first
    // hop that is not a trusted proxy is the client; one that cannot be read ends the walk (to
    // its left is only what the client claimed) and the proxy's own address is the source.
    for hop in hops.into_iter().rev() {
        match forwarded_ip(hop.trim()) {
            Some(ip) if is_trusted(&ip) => continue,
            Some(ip) => return ip,
            None => return peer,
        }
    }
    peer
}

/// An address as proxies write it in `X-Forwarded-For`: `ip`, `ip:port`, `[v6]` or
/// `[v6]:port`.
fn forwarded_ip(hop: &str) -> Option<IpAddr> {
    if let Ok(ip) = hop.parse::<IpAddr>() {
        return Some(ip.to_canonical());
    }
    if let Ok(addr) = hop.parse::<SocketAddr>() {
        return Some(addr.ip().to_canonical());
    }
    hop.strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .and_then(|h| h.parse::<IpAddr>().ok())
}

/// The key a source is counted under: an IPv4 address, or the /64 of an IPv6 one (a single
/// host commonly holds a whole /64).
fn source_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

/// Failed credential checks per source address: `per_minute`, `burst` at once; past them the
/// source is refused (`429`, before any lookup) until its bucket has room again.
#[derive(Debug)]
pub struct FailureLimiter {
    failures: Option<DefaultKeyedRateLimiter<IpAddr>>,
    /// Sources out of failures, and until when; only those, so an attacker with many
    /// addresses fills it no faster than it is pruned.
    blocked: Mutex<HashMap<IpAddr, Instant>>,
}

impl FailureLimiter {
    /// 0 per minute: no limit.
    pub fn new(per_minute: u32, burst: u32) -> Self {
        Self {
            failures: NonZeroU32::new(per_minute).map(|rate| {
                let burst = NonZeroU32::new(burst).unwrap_or(NonZeroU32::MIN);
                RateLimiter::keyed(Quota::per_minute(rate).allow_burst(burst))
            }),
            blocked: Mutex::default(),
        }
    }

    fn blocked(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, Instant>> {
        self.blocked.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Refuses a source that has used up its failures (`429 rate_limited`, `Retry-After`).
    pub fn check(&self, ip: IpAddr) -> Result<(), AppError> {
        let until = self.blocked().get(&source_key(ip)).copied();
        match until {
            Some(until) if until > Instant::now() => Err(Self::refusal(until - Instant::now())),
            _ => Ok(()),
        }
    }

    /// Counts a failure of `ip`; the one past its budget is answered with the refusal instead.
    pub fn failed(&self, ip: IpAddr) -> Result<(), AppError> {
        let Some(limiter) = &self.failures else {
            return Ok(());
        };
        let key = source_key(ip);
        limiter.check_key(&key).map_err(|not_until| {
            let wait = not_until.wait_time_from(DefaultClock::default().now());
            self.blocked().insert(key, Instant::now() + wait);
            Self::refusal(wait)
        })
    }

    fn refusal(wait: Duration) -> AppError {
        AppError::new(
            StatusCode::TOO_MANY_REQUESTS,
            ErrorCode::RateLimited,
            format!(
                "too many failed attempts from this address; retry in {} ms",
                wait.as_millis().max(1)
            ),
        )
        .with_retry_after(wait)
    }

    /// Forgets sources whose block is over, and buckets that are full again.
    pub fn prune(&self) {
        let now = Instant::now();
        self.blocked().retain(|_, until| *until > now);
        if let Some(limiter) = &self.failures {
            limiter.retain_recent();
            limiter.shrink_to_fit();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    #[test]
    fn the_source_is_the_peer_unless_the_peer_is_a_trusted_proxy() {
        let trusted: Vec<IpNet> = vec!["10.0.0.0/8".parse().expect("net")];
        let mut headers = HeaderMap::new();
        headers.insert(
            "x-forwarded-for",
            "6.6.6.6, 203.0.113.7, 10.1.2.3".parse().expect("h"),
        );
        // An untrusted peer's header is not believed.
        assert_eq!(
            source(ip("198.51.100.1"), &headers, &trusted),
            ip("198.51.100.1")
        );
        // Through trusted proxies: the rightmost untrusted hop, not the client's own claim.
        assert_eq!(
            source(ip("10.9.9.9"), &headers, &trusted),
            ip("203.0.113.7")
        );
        // A trusted peer without a usable header is the source itself.
        assert_eq!(
            source(ip("10.9.9.9"), &HeaderMap::new(), &trusted),
            ip("10.9.9.9")
        );
        // Ports and brackets as proxies write them; an unreadable hop ends the walk there.
        for (header, expected) in [
            ("203.0.113.7:5555", "203.0.113.7"),
            ("[2001:db8::7]:443", "2001:db8::7"),
            ("[2001:db8::7]", "2001:db8::7"),
            ("6.6.6.6, unknown", "10.9.9.9"),
            ("6.6.6.6, garbage, 10.1.1.1", "10.9.9.9"),
        ] {
            let mut h = HeaderMap::new();
            h.insert("x-forwarded-for", header.parse().expect("h"));
            assert_eq!(
                source(ip("10.9.9.9"), &h, &trusted),
                ip(expected),
                "{header}"
            );
        }
        // A v4-mapped v6 peer is its v4 address.
        assert_eq!(
            source(ip("::ffff:10.9.9.9"), &headers, &trusted),
            ip("203.0.113.7")
        );
    }

    #[test]
    fn failures_past_the_burst_block_the_source_and_only_it() {
        let limiter = FailureLimiter::new(1, 3);
        let (a, b) = (ip("203.0.113.1"), ip("203.0.113.2"));
        for _ in 0..3 {
            assert!(limiter.check(a).is_ok());
            assert!(limiter.failed(a).is_ok());
        }
        let refused = limiter.failed(a).expect_err("the fourth failure");
        assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
        assert!(refused.retry_after.is_some());
        assert!(limiter.check(a).is_err(), "refused before any lookup now");
        assert!(
            limiter.check(b).is_ok() && limiter.failed(b).is_ok(),
            "sources are apart"
        );
        // IPv6 counts per /64.
        let limiter = FailureLimiter::new(1, 1);
        assert!(limiter.failed(ip("2001:db8::1")).is_ok());
        assert!(limiter.failed(ip("2001:db8::ffff")).is_err());
        assert!(limiter.check(ip("2001:db8:0:1::1")).is_ok());
    }

    #[test]
    fn a_key_past_its_burst_is_refused_with_retry_after_and_others_are_not() {
        let limiter = HttpLimiter::new(1, 2);
        assert!(limiter.check("a").is_ok());
        assert!(limiter.check("a").is_ok());
        let refused = limiter.check("a").expect_err("third within the minute");
        assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(refused.code, ErrorCode::RateLimited);
        let wait = refused.retry_after.expect("retry after");
        assert!(wait.as_secs() <= 60 && wait.as_millis() > 0, "{wait:?}");
        assert!(limiter.check("b").is_ok(), "keys are apart");
        let off = HttpLimiter::new(0, 0);
        assert!((0..1000).all(|_| off.check("a").is_ok()));
    }
}
