//! Session bindings: finding the work stream a
//! binding continues (the id the client knows, else the runtime's session id), binding a peer
//! to it (or to a new one), and reading them back. Not on the message write path: one small transaction per binding.

use super::*;

impl This {
    pub(super) async fn bind_session_sql(
        pool: &sqlx::Pool<Db>,
        b: &SessionBind,
    ) -> Result<SessionWithRuntimes> {
        const COLS: &str = "tenant_id, session_id, backend, circle, project_path, machine, executor_peer_id, \
                            transcript_path, transcript_cursor, created_at_ms, last_seen_ms";
        let mut tx = pool.begin().await?;
        // Continue the found session only if its executor is still the one the caller
        // judged replaceable: two binders that found it at once do not both get it.
        let mut claim_runtime = b.claim_runtime;
        let continued = match &b.session_id {
            Some(found) => {
                let done = sqlx::query(
                    "UPDATE work_sessions SET circle = $3, \
                     project_path = COALESCE($4, project_path), machine = COALESCE($5, machine), \
                     executor_peer_id = $6, transcript_path = COALESCE($7, transcript_path), \
                     transcript_cursor = CASE WHEN CAST($7 AS TEXT) IS NULL THEN transcript_cursor ELSE $8 END, \
                     last_seen_ms = $9 \
                     WHERE tenant_id = $1 AND session_id = $2 AND executor_peer_id = $10",
                )
                .bind(&b.tenant_id)
                .bind(found)
                .bind(&b.circle)
                .bind(&b.project_path)
                .bind(&b.machine)
                .bind(&b.peer_id)
                .bind(&b.transcript_path)
                .bind(b.transcript_cursor)
                .bind(b.now_ms)
                .bind(&b.expected_executor)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                if done == 0 {
                    claim_runtime = false;
                    tracing::warn!(
                        tenant = %b.tenant_id,
                        peer = %b.peer_id,
                        session = %found,
                        "the session got another executor meanwhile; binding a new one"
                    );
                }
                (done == 1).then(|| found.clone())
            }
            None => None,
        };
        let session_id = match continued {
            Some(found) => found,
            None => {
                sqlx::query(
                    "INSERT INTO work_sessions (tenant_id, session_id, backend, circle, project_path, machine, \
                     executor_peer_id, transcript_path, transcript_cursor, created_at_ms, last_seen_ms) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10)",
                )
                .bind(&b.tenant_id)
                .bind(&b.new_session_id)
                .bind(&b.backend)
                .bind(&b.circle)
                .bind(&b.project_path)
                .bind(&b.machine)
                .bind(&b.peer_id)
                .bind(&b.transcript_path)
                .bind(b.transcript_cursor)
                .bind(b.now_ms)
                .execute(&mut *tx)
                .await?;
                b.new_session_id.clone()
            }
        };
        // The current runtime id is the newest of the session's, also when binds come
        // within one millisecond (the session's row is written, and locked, above).
        let newest: Option<i64> = sqlx::query_scalar(
            "SELECT MAX(seen_at_ms) FROM work_session_runtimes WHERE tenant_id = $1 AND session_id = $2",
        )
        .bind(&b.tenant_id)
        .bind(&session_id)
        .fetch_one(&mut *tx)
        .await?;
        let seen_at = newest.map_or(b.now_ms, |n| b.now_ms.max(n.saturating_add(1)));
        // The runtime id leads here from now on (also one that led elsewhere before), unless
        // the binder was refused that other session.
        let on_conflict = if claim_runtime {
            "DO UPDATE SET session_id = excluded.session_id, seen_at_ms = excluded.seen_at_ms"
        } else {
            "DO NOTHING"
        };
        sqlx::query(&format!(
            "INSERT INTO work_session_runtimes (tenant_id, runtime_session_id, session_id, seen_at_ms) \
             VALUES ($1, $2, $3, $4) ON CONFLICT (tenant_id, runtime_session_id) {on_conflict}"
        ))
        .bind(&b.tenant_id)
        .bind(&b.runtime_session_id)
        .bind(&session_id)
        .bind(seen_at)
        .execute(&mut *tx)
        .await?;
        // The newest ones are kept; older runtime sessions of a long work stream go.
        let keep = i64::try_from(repowire_protocol::MAX_RUNTIME_SESSION_IDS).unwrap_or(16);
        sqlx::query(
            "DELETE FROM work_session_runtimes WHERE tenant_id = $1 AND session_id = $2 \
             AND runtime_session_id NOT IN (SELECT runtime_session_id FROM work_session_runtimes \
             WHERE tenant_id = $1 AND session_id = $2 ORDER BY seen_at_ms DESC, runtime_session_id LIMIT $3)",
        )
        .bind(&b.tenant_id)
        .bind(&session_id)
        .bind(keep)
        .execute(&mut *tx)
        .await?;
        let record: SessionRecord = sqlx::query_as(&format!(
            "SELECT {COLS} FROM work_sessions WHERE tenant_id = $1 AND session_id = $2"
        ))
        .bind(&b.tenant_id)
        .bind(&session_id)
        .fetch_one(&mut *tx)
        .await?;
        let runtimes = Self::runtimes_of(&mut tx, &b.tenant_id, &session_id).await?;
        tx.commit().await?;
        Ok((record, runtimes))
    }

    pub(super) async fn find_session_sql(
        pool: &sqlx::Pool<Db>,
        tenant_id: &str,
        named: Option<&str>,
        runtime_session_id: &str,
        backend: &str,
    ) -> Result<Option<SessionRecord>> {
        const COLS: &str = "s.tenant_id, s.session_id, s.backend, s.circle, s.project_path, s.machine, \
                            s.executor_peer_id, s.transcript_path, s.transcript_cursor, s.created_at_ms, s.last_seen_ms";
        if let Some(id) = named {
            let found: Option<SessionRecord> = sqlx::query_as(&format!(
                "SELECT {COLS} FROM work_sessions s WHERE s.tenant_id = $1 AND s.session_id = $2 AND s.backend = $3"
            ))
            .bind(tenant_id)
            .bind(id)
            .bind(backend)
            .fetch_optional(pool)
            .await?;
            if found.is_some() {
                return Ok(found);
            }
        }
        Ok(sqlx::query_as(&format!(
            "SELECT {COLS} FROM work_session_runtimes r JOIN work_sessions s \
             ON s.tenant_id = r.tenant_id AND s.session_id = r.session_id \
             WHERE r.tenant_id = $1 AND r.runtime_session_id = $2 AND s.backend = $3"
        ))
        .bind(tenant_id)
        .bind(runtime_session_id)
        .bind(backend)
        .fetch_optional(pool)
        .await?)
    }

    /// A session's runtime ids, oldest first.
    pub(super) async fn runtimes_of(
        conn: &mut Conn,
        tenant_id: &str,
        session_id: &str,
    ) -> Result<Vec<String>> {
        Ok(sqlx::query_scalar(
            "SELECT runtime_session_id FROM work_session_runtimes WHERE tenant_id = $1 AND session_id = $2 \
             ORDER BY seen_at_ms, runtime_session_id",
        )
        .bind(tenant_id)
        .bind(session_id)
        .fetch_all(&mut *conn)
        .await?)
    }

    pub(super) async fn list_sessions_sql(
        pool: &sqlx::Pool<Db>,
        tenant_id: &str,
    ) -> Result<Vec<SessionWithRuntimes>> {
        let records: Vec<SessionRecord> = sqlx::query_as(
            "SELECT tenant_id, session_id, backend, circle, project_path, machine, executor_peer_id, \
             transcript_path, transcript_cursor, created_at_ms, last_seen_ms FROM work_sessions \
             WHERE tenant_id = $1 ORDER BY last_seen_ms DESC, session_id",
        )
        .bind(tenant_id)
        .fetch_all(pool)
        .await?;
        let pairs: Vec<(String, String)> = sqlx::query_as(
            "SELECT session_id, runtime_session_id FROM work_session_runtimes WHERE tenant_id = $1 \
             ORDER BY seen_at_ms, runtime_session_id",
        )
        .bind(tenant_id)
        .fetch_all(pool)
        .await?;
        let mut by_session: HashMap<String, Vec<String>> = HashMap::new();
        for (session, runtime) in pairs {
            by_session.entry(session).or_default().push(runtime);
        }
        Ok(records
            .into_iter()
            .map(|r| {
                let runtimes = by_session.remove(&r.session_id).unwrap_or_default();
                (r, runtimes)
            })
            .collect())
    }

    pub(super) async fn get_session_sql(
        pool: &sqlx::Pool<Db>,
        tenant_id: &str,
        session_id: &str,
    ) -> Result<Option<SessionRecord>> {
        Ok(sqlx::query_as(
            "SELECT tenant_id, session_id, backend, circle, project_path, machine, executor_peer_id, \
             transcript_path, transcript_cursor, created_at_ms, last_seen_ms FROM work_sessions \
             WHERE tenant_id = $1 AND session_id = $2",
        )
        .bind(tenant_id)
        .bind(session_id)
        .fetch_optional(pool)
        .await?)
    }
}

#[async_trait::async_trait]
impl SessionStore for This {
    async fn find_session(
        &self,
        tenant_id: &str,
        named: Option<&str>,
        runtime_session_id: &str,
        backend: &str,
    ) -> Result<Option<SessionRecord>> {
        Self::find_session_sql(&self.pool, tenant_id, named, runtime_session_id, backend).await
    }

    async fn bind_session(&self, bind: &SessionBind) -> Result<SessionWithRuntimes> {
        Self::bind_session_sql(&self.pool, bind).await
    }

    async fn list_sessions(&self, tenant_id: &str) -> Result<Vec<SessionWithRuntimes>> {
        Self::list_sessions_sql(&self.pool, tenant_id).await
    }

    async fn get_session(
        &self,
        tenant_id: &str,
        session_id: &str,
    ) -> Result<Option<SessionRecord>> {
        Self::get_session_sql(&self.pool, tenant_id, session_id).await
    }
}
