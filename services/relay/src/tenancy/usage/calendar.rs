//! UTC calendar arithmetic for usage periods, on milliseconds since the epoch (days from and to
//! civil dates: the well-known algorithm of Howard Hinnant's `chrono`-compatible date library).

const DAY_MS: i64 = 86_400_000;

/// (year, month 1–12, day 1–31) of a day number (days since 1970-01-01).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// The day number of a civil date.
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The start (ms) of the calendar month `at_ms` falls in.
pub fn month_start(at_ms: i64) -> i64 {
    let (y, m, _) = civil_from_days(at_ms.div_euclid(DAY_MS));
    days_from_civil(y, m, 1) * DAY_MS
}

/// The start (ms) of the calendar month after the one `at_ms` falls in.
pub fn next_month_start(at_ms: i64) -> i64 {
    let (y, m, _) = civil_from_days(at_ms.div_euclid(DAY_MS));
    let (ny, nm) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
    days_from_civil(ny, nm, 1) * DAY_MS
}

/// `YYYY-MM` → the month's start and end (ms); `None` when it is not a month.
pub fn parse_month(text: &str) -> Option<(i64, i64)> {
    let (y, m) = text.split_once('-')?;
    if y.len() != 4 || m.len() != 2 {
        return None;
    }
    let y: i64 = y.parse().ok()?;
    let m: u32 = m.parse().ok()?;
    if !(1..=12).contains(&m) {
        return None;
    }
    let start = days_from_civil(y, m, 1) * DAY_MS;
    let (ny, nm) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
    Some((start, days_from_civil(ny, nm, 1) * DAY_MS))
}

/// `YYYY-MM-DDTHH:MM:SSZ` of `at_ms` (UTC).
pub fn utc_string(at_ms: i64) -> String {
    let (y, m, d) = civil_from_days(at_ms.div_euclid(DAY_MS));
    let secs = at_ms.rem_euclid(DAY_MS) / 1000;
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_round_trip_across_leap_years_and_month_ends() {
        assert_eq!(utc_string(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc_string(951_782_400_000), "2000-02-29T00:00:00Z");
        assert_eq!(utc_string(1_796_083_199_000), "2026-11-30T23:59:59Z");
        for day in (-800_000..800_000).step_by(997) {
            let (y, m, d) = civil_from_days(day);
            assert_eq!(days_from_civil(y, m, d), day);
        }
        assert_eq!(
            parse_month("2024-02").map(|(a, b)| (utc_string(a), utc_string(b))),
            Some(("2024-02-01T00:00:00Z".into(), "2024-03-01T00:00:00Z".into()))
        );
        assert_eq!(
            parse_month("2026-12").map(|(_, b)| utc_string(b)),
            Some("2027-01-01T00:00:00Z".into())
        );
        for bad in [
            "2026-13",
            "2026-00",
            "26-11",
            "2026-1",
            "november",
            "2026-11-01",
        ] {
            assert_eq!(parse_month(bad), None, "{bad}");
        }
        assert_eq!(
            utc_string(month_start(1_796_083_199_000)),
            "2026-11-01T00:00:00Z"
        );
        assert_eq!(
            utc_string(next_month_start(1_796_083_199_000)),
            "2026-12-01T00:00:00Z"
        );
        assert_eq!(
            utc_string(next_month_start(1_796_083_200_000)),
            "2027-01-01T00:00:00Z",
            "December rolls over into the next year"
        );
    }
}
