//! The request rate of the tenant-facing HTTP endpoints (`POST /v1/token`, `GET /v1/limits`,
//! `GET /v1/usage`), per credential, in this process: each of them reads the database, and a
//! client stuck in a loop must not take it from everyone else. Over the rate: `429
//! rate_limited` with `Retry-After`. GCRA (governor), keyed; idle keys are dropped by the
//! sweeper.

use std::num::NonZeroU32;

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

#[cfg(test)]
mod tests {
    use super::*;

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
