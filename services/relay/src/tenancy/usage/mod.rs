//! Usage for billing: the hourly counts the write path stores (`store::metering`), summed into
//! hours, days or calendar months (UTC), as JSON or CSV. The admin API reads through here.

pub mod calendar;
pub mod meter;

use std::collections::BTreeMap;

use serde::Serialize;

pub use calendar::{month_start, parse_month, utc_string};

use crate::storage::store::metering::{HOUR_MS, metric};
use crate::storage::store::{StoreError, UsageRow, UsageStore};

/// How usage is summed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Granularity {
    /// Per hour.
    Hour,
    /// Per day (UTC).
    Day,
    /// Per calendar month (UTC).
    Month,
}

impl Granularity {
    fn as_str(self) -> &'static str {
        match self {
            Granularity::Hour => "hour",
            Granularity::Day => "day",
            Granularity::Month => "month",
        }
    }

    /// The start of the period `at_ms` falls in.
    pub fn period_of(self, at_ms: i64) -> i64 {
        match self {
            Granularity::Hour => at_ms.div_euclid(HOUR_MS) * HOUR_MS,
            Granularity::Day => at_ms.div_euclid(24 * HOUR_MS) * 24 * HOUR_MS,
            Granularity::Month => month_start(at_ms),
        }
    }
}

/// One period of one tenant: every metric, zeros included.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Period {
    /// The tenant.
    pub tenant_id: String,
    /// Start of the period (ms, UTC).
    pub start_ms: i64,
    /// The same, as `YYYY-MM-DDTHH:MM:SSZ`.
    pub start: String,
    /// Metric → value: counts summed over the period (`messages_ask`, `messages_notify`,
    /// `messages_broadcast`, `messages_reply`, `message_bytes`, `inbox_entries`, `deliveries`,
    /// `connection_ms`) and peaks, the period's highest hour (`peak_connections`,
    /// `peak_peers`).
    pub metrics: BTreeMap<String, i64>,
}

/// Usage summed by `granularity`: one [`Period`] per tenant and period that has any usage, by
/// tenant then time.
pub async fn report(
    store: &dyn UsageStore,
    tenant_id: Option<&str>,
    from_ms: i64,
    to_ms: i64,
    granularity: Granularity,
) -> Result<Vec<Period>, StoreError> {
    // Whole hours: an hour is counted where it starts.
    let rows = store
        .usage_rows(tenant_id, from_ms.div_euclid(HOUR_MS) * HOUR_MS, to_ms)
        .await?;
    Ok(sum(&rows, granularity))
}

fn sum(rows: &[UsageRow], granularity: Granularity) -> Vec<Period> {
    let mut periods: BTreeMap<(String, i64), BTreeMap<String, i64>> = BTreeMap::new();
    for r in rows {
        let metrics = periods
            .entry((r.tenant_id.clone(), granularity.period_of(r.hour_ms)))
            .or_insert_with(|| metric::ALL.iter().map(|m| ((*m).to_owned(), 0)).collect());
        let value = metrics.entry(r.metric.clone()).or_insert(0);
        if metric::is_peak(&r.metric) {
            *value = (*value).max(r.value);
        } else {
            *value += r.value;
        }
    }
    periods
        .into_iter()
        .map(|((tenant_id, start_ms), metrics)| Period {
            start: utc_string(start_ms),
            tenant_id,
            start_ms,
            metrics,
        })
        .collect()
}

/// The CSV header of [`csv`].
pub const CSV_HEADER: &str = "tenant_id,tenant_name,period_start,granularity,metric,value";

/// The periods as CSV: [`CSV_HEADER`], then one row per tenant, period and metric. Tenant
/// names are looked up in `names` (id → name); ids and names hold no commas or quotes (the name
/// rule), so no field needs quoting.
pub fn csv(
    periods: &[Period],
    granularity: Granularity,
    names: &BTreeMap<String, String>,
) -> String {
    let mut out = String::from(CSV_HEADER);
    out.push('\n');
    for p in periods {
        let name = csv_cell(names.get(&p.tenant_id).map_or("", String::as_str));
        let tenant = csv_cell(&p.tenant_id);
        for (metric, value) in &p.metrics {
            out.push_str(&format!(
                "{tenant},{name},{},{},{},{value}\n",
                p.start,
                granularity.as_str(),
                csv_cell(metric)
            ));
        }
    }
    out
}

/// One CSV field, safe to open in a spreadsheet (OWASP, "CSV Injection"): a field that starts
/// with `=`, `+`, `-`, `@`, a tab or a carriage return would be read as a formula, so it gets a
/// leading `'` and is quoted; a field holding a comma, a quote or a line break is quoted, with
/// its quotes doubled. Anything else is written as it is.
fn csv_cell(field: &str) -> std::borrow::Cow<'_, str> {
    let formula = field.starts_with(['=', '+', '-', '@', '\t', '\r']);
    if !formula && !field.contains([',', '"', '\n', '\r']) {
        return field.into();
    }
    let lead = if formula { "'" } else { "" };
    format!("\"{lead}{}\"", field.replace('"', "\"\"")).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_granularity_is_spelled_the_same_in_json_and_csv() {
        for g in [Granularity::Hour, Granularity::Day, Granularity::Month] {
            assert_eq!(serde_json::to_value(g).expect("json"), g.as_str());
            let back: Granularity = serde_json::from_value(g.as_str().into()).expect("parses");
            assert_eq!(back, g);
        }
    }

    #[test]
    fn a_csv_field_that_could_be_a_formula_is_neutralised_and_quoted() {
        assert_eq!(csv_cell("acme"), "acme");
        assert_eq!(csv_cell("tnt-14dr9gpqy77zxyyk"), "tnt-14dr9gpqy77zxyyk");
        for (field, cell) in [
            ("-2-1", "\"'-2-1\""),
            ("=HYPERLINK(\"x\")", "\"'=HYPERLINK(\"\"x\"\")\""),
            ("+1", "\"'+1\""),
            ("@SUM(A1)", "\"'@SUM(A1)\""),
            ("\tx", "\"'\tx\""),
            ("\rx", "\"'\rx\""),
            ("a,b", "\"a,b\""),
        ] {
            assert_eq!(csv_cell(field), cell, "{field:?}");
        }
    }

    fn row(tenant: &str, hour_ms: i64, metric: &str, value: i64) -> UsageRow {
        UsageRow {
            tenant_id: tenant.into(),
            hour_ms,
            metric: metric.into(),
            value,
        }
    }

    #[test]
    fn hours_sum_into_days_and_months_with_every_metric() {
        // 2026-11-30 23:00 and 2026-12-01 00:00 UTC: two days, two months.
        let nov30 = 1_796_079_600_000;
        let dec1 = nov30 + HOUR_MS;
        let rows = [
            row("t", nov30 - HOUR_MS, metric::NOTIFIES, 2),
            row("t", nov30, metric::NOTIFIES, 3),
            row("t", dec1, metric::ASKS, 1),
            row("t", nov30 - HOUR_MS, metric::PEAK_PEERS, 4),
            row("t", nov30, metric::PEAK_PEERS, 3),
        ];
        let days = sum(&rows, Granularity::Day);
        assert_eq!(days.len(), 2);
        assert_eq!(days[0].start, "2026-11-30T00:00:00Z");
        assert_eq!(days[0].metrics["messages_notify"], 5);
        assert_eq!(days[0].metrics["messages_ask"], 0, "zeros are listed");
        assert_eq!(
            days[0].metrics["peak_peers"], 4,
            "a peak is the highest hour, not a sum"
        );
        assert_eq!(days[1].start, "2026-12-01T00:00:00Z");
        let months = sum(&rows, Granularity::Month);
        assert_eq!(
            months.iter().map(|p| p.start.as_str()).collect::<Vec<_>>(),
            ["2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z"]
        );
        let text = csv(
            &months,
            Granularity::Month,
            &BTreeMap::from([("t".into(), "acme".into())]),
        );
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], CSV_HEADER);
        assert_eq!(lines.len(), 1 + 2 * metric::ALL.len());
        assert!(lines.contains(&"t,acme,2026-11-01T00:00:00Z,month,messages_notify,5"));
    }
}
