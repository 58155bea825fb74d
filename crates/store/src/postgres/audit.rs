//! Reading the audit log (rule T5): one query, newest first, with the
//! filters of [`AuditQuery`]; never loaded into memory at start. The
//! records of power and scaling actions (rule A10) are read the same way.

use super::{Connection, PostgresError};
use crate::{
    AuditQuery, AuditRow, MAX_AUDIT_PAGE_ROWS, MAX_SCALING_ACTION_PAGE_ROWS, ScalingAction,
    ScalingActionQuery, StoreError,
};

impl Connection {
    pub(super) async fn audit(&mut self, q: &AuditQuery) -> Result<Vec<AuditRow>, StoreError> {
        self.recover().await?;
        let limit = q.limit.min(MAX_AUDIT_PAGE_ROWS) as i64;
        let rows = self
            .client
            .query(
                "SELECT id, record, count FROM audit_log
                 WHERE ($1::int8 IS NULL OR time_ms >= $1)
                   AND ($2::text IS NULL OR actor = $2)
                   AND ($3::text IS NULL OR host_pool = $3)
                   AND ($4::text[] IS NULL OR host_pool = ANY($4))
                   AND ($5::int8 IS NULL OR id < $5)
                   AND (NOT $7::bool OR (record::jsonb ->> 'end_reason') IS NOT NULL)
                 ORDER BY id DESC LIMIT $6",
                &[
                    &q.since_ms,
                    &q.actor,
                    &q.host_pool,
                    &q.within_pools,
                    &q.before_id,
                    &limit,
                    &q.ended_sessions,
                ],
            )
            .await
            .map_err(|e| PostgresError::query("cannot read the audit log", e))?;
        rows.iter()
            .map(|r| {
                Ok(AuditRow {
                    id: r.get(0),
                    entry: serde_json::from_str(r.get::<_, &str>(1))
                        .map_err(|e| StoreError::Corrupt(e.to_string()))?,
                    count: u64::try_from(r.get::<_, i64>(2)).unwrap_or(1),
                })
            })
            .collect()
    }

    /// Records of power and scaling actions (rule A10), newest first.
    pub(super) async fn scaling_actions(
        &mut self,
        q: &ScalingActionQuery,
    ) -> Result<Vec<ScalingAction>, StoreError> {
        self.recover().await?;
        let limit = q.limit.min(MAX_SCALING_ACTION_PAGE_ROWS) as i64;
        let rows = self
            .client
            .query(
                "SELECT record FROM scaling_actions
                 WHERE ($1::text IS NULL OR pool = $1)
                   AND (NOT $2::bool OR outcome = 'Pending')
                   AND ($3::text IS NULL OR id < $3)
                 ORDER BY id DESC LIMIT $4",
                &[&q.pool, &q.pending_only, &q.before_id, &limit],
            )
            .await
            .map_err(|e| PostgresError::query("cannot read the scaling actions", e))?;
        rows.iter()
            .map(|r| {
                serde_json::from_str(r.get::<_, &str>(0))
                    .map_err(|e| StoreError::Corrupt(e.to_string()))
            })
            .collect()
    }
}
