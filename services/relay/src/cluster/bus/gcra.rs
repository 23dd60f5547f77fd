//! The generic cell rate algorithm (GCRA) behind a tenant's messages-per-minute limit: the
//! same arithmetic as the Redis script of the cluster bus (`bus::redis::limits`), here for a
//! single process and as the reference the script is tested against.
//!
//! A bucket is one number, the theoretical arrival time (`tat`, µs): when the bucket would be
//! empty again if nothing more were taken. A token costs `interval` (60 s / limit); up to
//! `burst` tokens may be taken at once, then one per `interval`. In any window of `w` µs at most
//! `burst + w / interval` tokens are granted.

/// A rate: `per_minute` tokens a minute, up to `burst` at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    /// Tokens per minute (≥ 1).
    pub per_minute: u64,
    /// Tokens that may be taken at once (≥ 1).
    pub burst: u64,
}

impl Rate {
    /// A rate of `per_minute`, with a burst of `burst_secs` seconds' worth (at least 1).
    pub fn new(per_minute: u64, burst_secs: u64) -> Self {
        let per_minute = per_minute.max(1);
        Self {
            per_minute,
            burst: (per_minute.saturating_mul(burst_secs) / 60).max(1),
        }
    }

    /// The cost of one token, µs (may be fractional at high rates).
    pub fn interval_us(self) -> f64 {
        60_000_000.0 / self.per_minute as f64
    }
}

/// What one take returned.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Grant {
    /// Tokens granted (0 to the number asked for).
    pub granted: u64,
    /// When none were granted: µs until one would be.
    pub retry_after_us: u64,
}

/// Takes up to `want` tokens at `now_us` from a bucket whose theoretical arrival time is `tat`
/// (`None`: a full bucket). Returns the grant and the new `tat`.
pub fn take(tat: Option<f64>, now_us: f64, rate: Rate, want: u64) -> (Grant, f64) {
    let interval = rate.interval_us();
    let tat = tat.map_or(now_us, |t| t.max(now_us));
    // Room left in the bucket, in tokens: (now + burst·interval − tat) / interval.
    let room = ((now_us + rate.burst as f64 * interval - tat) / interval).floor();
    let granted = if room >= 1.0 {
        (room as u64).min(want)
    } else {
        0
    };
    if granted == 0 {
        let wait = tat + interval - rate.burst as f64 * interval - now_us;
        return (
            Grant {
                granted: 0,
                retry_after_us: wait.ceil().max(1.0) as u64,
            },
            tat,
        );
    }
    (
        Grant {
            granted,
            retry_after_us: 0,
        },
        tat + granted as f64 * interval,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_bucket_grants_the_burst_then_one_per_interval() {
        // 60 a minute: one a second, burst 5.
        let rate = Rate::new(60, 5);
        assert_eq!(rate.burst, 5);
        let (g, tat) = take(None, 0.0, rate, 10);
        assert_eq!(g.granted, 5, "the burst, not more");
        let (g, tat) = take(Some(tat), 0.0, rate, 1);
        assert_eq!(g.granted, 0);
        assert_eq!(
            g.retry_after_us, 1_000_000,
            "one interval until the next token"
        );
        let (g, tat) = take(Some(tat), 999_999.0, rate, 1);
        assert_eq!(g.granted, 0, "not a µs early");
        let (g, _) = take(Some(tat), 1_000_000.0, rate, 3);
        assert_eq!(g.granted, 1, "one token per interval, partial grants");
    }

    #[test]
    fn any_window_holds_at_most_burst_plus_its_length_in_tokens() {
        let rate = Rate::new(600, 2); // 10 a second, burst 20
        let mut tat = None;
        let mut granted_at = Vec::new();
        // Ask for 3 every 7 ms for 10 s: far more than the rate.
        let mut now = 0.0;
        while now < 10_000_000.0 {
            let (g, t) = take(tat, now, rate, 3);
            tat = Some(t);
            granted_at.extend(std::iter::repeat_n(now, g.granted as usize));
            now += 7_000.0;
        }
        for w in [1_000_000.0, 3_000_000.0] {
            let most = granted_at
                .iter()
                .map(|&start| {
                    granted_at
                        .iter()
                        .filter(|&&t| t >= start && t < start + w)
                        .count()
                })
                .max()
                .unwrap_or(0) as f64;
            assert!(most <= 20.0 + w / 100_000.0, "{most} in a window of {w} µs");
        }
        // Over the whole run: the burst plus the rate, and not fewer (an idle limiter passes
        // the first assertion too).
        let total = granted_at.len() as f64;
        assert!((119.0..=121.0).contains(&total), "{total}");
    }

    #[test]
    fn an_idle_bucket_refills_only_to_the_burst() {
        let rate = Rate::new(6000, 1); // 100 a second, burst 100
        let (_, tat) = take(None, 0.0, rate, 100);
        let (g, _) = take(Some(tat), 3_600_000_000.0, rate, 1000);
        assert_eq!(g.granted, 100);
    }
}
