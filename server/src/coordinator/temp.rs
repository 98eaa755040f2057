//! Temporary tables: each session's live in a schema of its own,
//! `pg_temp_<pid>`, an ordinary catalog schema created with the session's
//! first temporary table (in its transaction block, if it is in one) and
//! dropped, with everything in it, when the session ends. Boot drops any
//! such schema a crash left behind: no session survives a restart.
//!
//! They are ordinary tables otherwise (durable while they live, readable
//! by the views and indexes built on them, which go with them), which is
//! what PostgreSQL tools that stage data in temporary tables need (dbt's
//! incremental models, ETL scripts).

use std::sync::Arc;

use freshet_catalog::Op;
use freshet_planner::query::resolve::TEMP_SCHEMA_PREFIX;

use super::ddl::{Ddl, Prepared};
use super::{Coordinator, ExecCtx};
use crate::error::{AdapterError, Result};
use crate::session::Session;

/// Whether `stmt` creates a temporary table or sequence (its planning needs the
/// session's temporary schema).
pub(super) fn creates_temporary(stmt: &freshet_planner::parser::Statement) -> bool {
    use freshet_planner::parser::Statement;
    match stmt {
        Statement::Sql(s) => {
            matches!(
                s.as_ref(),
                datafusion::sql::sqlparser::ast::Statement::CreateTable(ct) if ct.temporary
            ) || matches!(
                s.as_ref(),
                datafusion::sql::sqlparser::ast::Statement::CreateSequence {
                    temporary: true,
                    ..
                }
            )
        }
        Statement::CreateWithOptions { stmt, .. } => creates_temporary(stmt),
        _ => false,
    }
}

/// Drops a session's temporary schema when the session ends.
pub struct TempSchemaGuard {
    coord: Arc<Coordinator>,
    database: String,
    schema: String,
}

impl TempSchemaGuard {
    /// A guard for `schema` in `database`.
    pub fn new(coord: Arc<Coordinator>, database: String, schema: String) -> Self {
        TempSchemaGuard {
            coord,
            database,
            schema,
        }
    }
}

impl Drop for TempSchemaGuard {
    fn drop(&mut self) {
        let state = self.coord.catalog_state();
        let exists = state
            .database_by_name(&self.database)
            .and_then(|db| state.schema_by_name(db.id, &self.schema))
            .is_some();
        if !exists {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return; // shutting down: boot drops it
        };
        let coord = Arc::clone(&self.coord);
        let database = std::mem::take(&mut self.database);
        let schema = std::mem::take(&mut self.schema);
        runtime.spawn(async move {
            if let Err(e) = coord
                .drop_temp_schemas(|db, s| db == database && s == schema)
                .await
            {
                tracing::warn!(error = %e, schema, "dropping a session's temporary tables failed");
            }
        });
    }
}

impl Coordinator {
    /// A name for a new session's temporary schema, `pg_temp_<n>`, never
    /// given twice by one server process (boot drops those of earlier
    /// ones).
    pub fn temp_schema_name(&self) -> String {
        let n = self
            .temp_sessions
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        format!("{TEMP_SCHEMA_PREFIX}{n}")
    }

    /// Create the session's temporary schema if it has none yet, so that a
    /// `CREATE TEMPORARY TABLE` can be planned into it.
    pub(super) async fn ensure_temp_schema(
        &self,
        session: &mut Session,
        ctx: &mut ExecCtx,
    ) -> Result<()> {
        let Some(name) = session.temp_schema.clone() else {
            return Err(AdapterError::Internal(
                "this session cannot hold temporary tables".into(),
            ));
        };
        let state = self.catalog_for(session);
        let db = state
            .database_by_name(&session.database)
            .ok_or_else(|| AdapterError::Internal("the session's database is gone".into()))?;
        if state.schema_by_name(db.id, &name).is_some() {
            return Ok(());
        }
        let op = Op::CreateSchema {
            database_id: db.id,
            name,
        };
        self.ddl(session, Ddl::new("CREATE SCHEMA", vec![op]), ctx)
            .await
            .map(|_| ())
    }

    /// Drop every temporary schema: at boot, those a crash left behind
    /// (no session survives a restart).
    pub async fn drop_leftover_temp_schemas(&self) -> Result<()> {
        self.drop_temp_schemas(|_, _| true).await
    }

    /// Drop the temporary schemas `which` picks (by database and schema
    /// name) and everything in them.
    pub(super) async fn drop_temp_schemas(&self, which: impl Fn(&str, &str) -> bool) -> Result<()> {
        let catalog = self.catalog.lock().await;
        let state = catalog.state();
        let schemas: Vec<_> = state
            .schemas()
            .filter(|s| s.name.starts_with(TEMP_SCHEMA_PREFIX))
            .filter(|s| {
                state
                    .database(s.database_id)
                    .is_some_and(|db| which(&db.name, &s.name))
            })
            .map(|s| s.id)
            .collect();
        if schemas.is_empty() {
            return Ok(());
        }
        let ids = state.transitive_dependents(&schemas).into_iter().collect();
        self.transact_locked(catalog, vec![Op::Drop(ids)], Vec::new(), Prepared::new())?;
        tracing::info!(count = schemas.len(), "dropped temporary schemas");
        Ok(())
    }
}
