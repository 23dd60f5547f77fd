//! Usage rows: what a write batch adds (in its own
//! transaction), what a pod's meter adds (connection time, peaks), and the reads behind the
//! usage reports and the monthly quota.

use super::*;

impl This {
    /// Adds counts to the hourly rows (inside the caller's transaction): `value` is
    /// added, or for a peak metric the larger value kept.
    pub(super) async fn upsert_usage(
        conn: &mut <Db as sqlx::Database>::Connection,
        tenant_id: &str,
        hour_ms: i64,
        metric: &str,
        value: i64,
    ) -> Result<()> {
        // Postgres spells the two-argument maximum GREATEST, SQLite MAX.
        let merge = if !crate::storage::store::metering::metric::is_peak(metric) {
            "usage_hourly.value + excluded.value"
        } else if BACKEND == "postgres" {
            "GREATEST(usage_hourly.value, excluded.value)"
        } else {
            "MAX(usage_hourly.value, excluded.value)"
        };
        let sql = format!(
            "INSERT INTO usage_hourly (tenant_id, hour_ms, metric, value) \
             VALUES ($1, $2, $3, $4) ON CONFLICT (tenant_id, hour_ms, metric) \
             DO UPDATE SET value = {merge}"
        );
        sqlx::query(&sql)
            .bind(tenant_id)
            .bind(hour_ms)
            .bind(metric)
            .bind(value)
            .execute(&mut *conn)
            .await?;
        Ok(())
    }

    pub(super) async fn add_usage_sql(&self, rows: &[UsageAdd]) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let mut tx = self.pool.begin().await?;
        for r in rows {
            Self::upsert_usage(&mut tx, &r.tenant_id, r.hour_ms, r.metric, r.value).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    pub(super) async fn messages_counted_sql(
        &self,
        tenant_id: &str,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<i64> {
        // SUM of BIGINT is NUMERIC in Postgres: cast back.
        let sql = "SELECT CAST(COALESCE(SUM(value), 0) AS BIGINT) FROM usage_hourly \
             WHERE tenant_id = $1 AND hour_ms >= $2 AND hour_ms < $3 \
             AND metric IN ('messages_ask', 'messages_notify', 'messages_broadcast', 'messages_reply')";
        Ok(sqlx::query_scalar(sql)
            .bind(tenant_id)
            .bind(from_ms)
            .bind(to_ms)
            .fetch_one(&self.pool)
            .await?)
    }

    pub(super) async fn usage_rows_sql(
        &self,
        tenant_id: Option<&str>,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<UsageRow>> {
        let sql = "SELECT tenant_id, hour_ms, metric, value FROM usage_hourly \
             WHERE (CAST($1 AS TEXT) IS NULL OR tenant_id = $1) AND hour_ms >= $2 AND hour_ms < $3 \
             ORDER BY tenant_id, hour_ms, metric";
        Ok(sqlx::query_as(sql)
            .bind(tenant_id)
            .bind(from_ms)
            .bind(to_ms)
            .fetch_all(&self.pool)
            .await?)
    }
}

#[async_trait::async_trait]
impl UsageStore for This {
    async fn usage_rows(
        &self,
        tenant_id: Option<&str>,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<UsageRow>> {
        self.usage_rows_sql(tenant_id, from_ms, to_ms).await
    }

    async fn add_usage(&self, rows: &[UsageAdd]) -> Result<()> {
        self.add_usage_sql(rows).await
    }

    async fn messages_counted(&self, tenant_id: &str, from_ms: i64, to_ms: i64) -> Result<i64> {
        self.messages_counted_sql(tenant_id, from_ms, to_ms).await
    }
}
