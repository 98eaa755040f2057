//! The sequencer: sends each planned statement to the code for its kind,
//! and runs transaction control.

use std::sync::Arc;

use arrow::array::RecordBatch;
use datafusion::common::ParamValues;
use freshet_catalog::Op;
use freshet_planner::parser::Statement;
use freshet_planner::{CreateIndexPlan, Plan};
use freshet_repr::{RelationDesc, sqlstate};

use super::ddl::Ddl;
use super::explain::{query_plan_rows, show_variable};
use super::{Coordinator, ExecCtx, ExecuteResponse, Notice, command_tag};
use crate::error::{AdapterError, Result};
use crate::session::{PendingCopy, Session, TxnStatus};
use crate::vars::Isolation;

impl Coordinator {
    pub(super) async fn execute_inner(
        &self,
        session: &mut Session,
        stmt: &Statement,
        params: Option<&ParamValues>,
        ctx: &mut ExecCtx,
    ) -> Result<ExecuteResponse> {
        if session.status == TxnStatus::Failed && !is_txn_end(stmt) {
            return Err(AdapterError::TransactionAborted);
        }
        // `now()` and friends take their value from the statement's start.
        Arc::make_mut(&mut session.df).mark_start_execution();
        if super::temp::creates_temporary(stmt) {
            self.ensure_temp_schema(session, ctx).await?;
        }
        // A constant query's kept answer: a prepared one's from Prepare,
        // else (no prepared plan, or one made stale by a catalog or
        // setting change) the one its text's last run in this session kept.
        // The text is made only when the prepared answer cannot serve.
        let kept = |answer: Option<(RelationDesc, Vec<RecordBatch>)>| {
            answer.map(|(desc, batches)| ExecuteResponse::Rows {
                desc,
                batches,
                tag: "SELECT".into(),
            })
        };
        let prepared_answer = ctx
            .prepared_plan
            .as_ref()
            .and_then(|p| self.prepared_answer(session, p));
        if let Some(rows) = kept(prepared_answer) {
            return Ok(rows);
        }
        let constant = match (&ctx.prepared_plan, params) {
            (p, None) if p.as_ref().is_none_or(|p| p.is_constant()) => {
                super::read::constant_candidate(stmt)
            }
            _ => None,
        };
        let text_answer = constant
            .as_deref()
            .and_then(|text| session.constants.get(text))
            .and_then(|p| self.prepared_answer(session, p));
        if let Some(rows) = kept(text_answer) {
            return Ok(rows);
        }
        // Stamped before planning: a change meanwhile makes the kept
        // answer stale at once.
        let constant = constant.map(|text| (text, self.stamp(session)));
        let prepared = match &ctx.prepared_plan {
            Some(p) => self.prepared_plan(session, p, params),
            None if params.is_none() => self.templated_plan(session, stmt).await,
            None => None,
        };
        let plan = match prepared {
            Some(plan) => plan?,
            None => self.plan(session, stmt, params).await?,
        };
        let tag = command_tag(stmt);
        match plan {
            Plan::Empty => Ok(ExecuteResponse::Command(tag)),
            Plan::CreateDatabase {
                name,
                if_not_exists,
            } => {
                if session.status != TxnStatus::Idle {
                    // As in PostgreSQL.
                    return Err(AdapterError::InTransactionBlock(tag));
                }
                let op = Op::CreateDatabase { name: name.clone() };
                let ddl = Ddl::new(&tag, vec![op]).if_not_exists(if_not_exists, &name, "database");
                self.ddl(session, ddl, ctx).await
            }
            Plan::CreateSchema {
                database_id,
                name,
                if_not_exists,
            } => {
                let op = Op::CreateSchema {
                    database_id,
                    name: name.clone(),
                };
                let ddl = Ddl::new(&tag, vec![op]).if_not_exists(if_not_exists, &name, "schema");
                self.ddl(session, ddl, ctx).await
            }
            Plan::CreateItem {
                def,
                if_not_exists,
                replace,
            } => {
                let name = def.name.clone();
                let op = match replace {
                    Some(id) => Op::ReplaceItem { id, def },
                    None => Op::CreateItem(def),
                };
                let ddl = Ddl::new(&tag, vec![op]).if_not_exists(if_not_exists, &name, "relation");
                self.ddl(session, ddl, ctx).await
            }
            Plan::CreateIndex(create) => {
                let CreateIndexPlan {
                    def,
                    if_not_exists,
                    dataflow,
                } = *create;
                let name = def.name.clone();
                let mut ddl = Ddl::new(&tag, vec![Op::CreateItem(def)]).if_not_exists(
                    if_not_exists,
                    &name,
                    "relation",
                );
                ddl.dataflow = Some(dataflow);
                self.ddl(session, ddl, ctx).await
            }
            Plan::CreateMaterializedView(create) => {
                self.create_materialized_view(session, tag, *create, ctx)
                    .await
            }
            Plan::CreateConnection(create) => {
                self.validate_connection(&create).await?;
                let name = create.def.name.clone();
                let ddl = Ddl::new(&tag, vec![Op::CreateItem(create.def)]).if_not_exists(
                    create.if_not_exists,
                    &name,
                    "connection",
                );
                self.ddl(session, ddl, ctx).await
            }
            Plan::CreateSink(create) => self.create_sink(session, tag, *create, ctx).await,
            Plan::CreateSource(create) => {
                if session.status != TxnStatus::Idle {
                    // As in Materialize: a source starts ingesting when
                    // it is created, which a block could not undo.
                    return Err(AdapterError::InTransactionBlock(tag));
                }
                self.create_source(tag, *create, ctx).await
            }
            Plan::Drop { ids, notices } => {
                for n in notices {
                    ctx.notice(n);
                }
                if ids.is_empty() {
                    return Ok(ExecuteResponse::Command(tag));
                }
                self.ddl(session, Ddl::new(&tag, vec![Op::Drop(ids)]), ctx)
                    .await
            }
            Plan::Maintenance {
                in_block_allowed,
                warnings,
            } => {
                if !in_block_allowed && session.status != TxnStatus::Idle {
                    return Err(AdapterError::InTransactionBlock(tag));
                }
                for w in warnings {
                    ctx.warning(freshet_repr::sqlstate::WARNING, w);
                }
                Ok(ExecuteResponse::Command(tag))
            }
            Plan::AddKey(plan) => self.add_key(session, tag, *plan).await,
            Plan::Rename { id, new_name } => {
                let ddl = Ddl::new(&tag, vec![Op::RenameItem { id, new_name }]);
                self.ddl(session, ddl, ctx).await
            }
            Plan::Select(q) => {
                let batches = self.read(session, &q).await?;
                if let Some((text, stamp)) = constant {
                    session.constants.keep(text, &q, &batches, stamp);
                }
                Ok(ExecuteResponse::Rows {
                    desc: q.desc,
                    batches,
                    tag: "SELECT".into(),
                })
            }
            Plan::SelectAt {
                query,
                at_least,
                time,
            } => {
                let batches = self.read_as_of(session, &query, at_least, &time).await?;
                Ok(ExecuteResponse::Rows {
                    desc: query.desc,
                    batches,
                    tag: "SELECT".into(),
                })
            }
            Plan::UpdateDetails { id, details } => {
                let ddl = Ddl::new(&tag, vec![Op::UpdateDetails { id, details }]);
                self.ddl(session, ddl, ctx).await
            }
            Plan::SetOptions { ids, options } => {
                let ops = ids
                    .into_iter()
                    .map(|id| Op::SetOptions {
                        id,
                        options: options.clone(),
                    })
                    .collect();
                self.ddl(session, Ddl::new(&tag, ops), ctx).await
            }
            Plan::Explain(kind, q) => self.explain(session, kind, &q).await,
            Plan::ExplainDataflow(explain) => self.explain_dataflow(*explain),
            Plan::Peek(peek) => {
                let batches = self.peek(session, &peek).await?;
                Ok(ExecuteResponse::Rows {
                    desc: peek.desc,
                    batches,
                    tag: "SELECT".into(),
                })
            }
            Plan::ExplainPeek(peek) => {
                let mut lines = vec![format!("Fast path: {}", self.humanize_ids(&peek.explain))];
                if peek.columns.is_some() {
                    let names: Vec<&str> =
                        peek.desc.columns.iter().map(|c| c.name.as_str()).collect();
                    lines.push(format!("  then Project: {}", names.join(", ")));
                }
                if let Some(finish) = &peek.finish {
                    lines.extend(
                        finish
                            .describe(&session.df)
                            .into_iter()
                            .map(|l| format!("  then {l}")),
                    );
                }
                lines.push(
                    "  (answered from the index's arrangement, without a DataFusion plan)".into(),
                );
                query_plan_rows(lines)
            }
            Plan::Write(w) => self.write(session, *w).await,
            Plan::InsertValues(insert) => match insert.bind(params) {
                Some(rows) => self.insert_values(session, &insert, rows).await,
                None => self.insert_unbound(session, stmt, &insert, params).await,
            },
            Plan::ExplainKeyedWrite(w) => {
                let keyed = w
                    .keyed
                    .as_ref()
                    .ok_or_else(|| AdapterError::Internal("a keyed write without a key".into()))?;
                let names: Vec<String> = keyed
                    .key_columns
                    .iter()
                    .filter_map(|&i| w.table_desc.columns.get(i))
                    .map(|c| c.name.clone())
                    .collect();
                let mut lines = vec![format!(
                    "Fast path: {}",
                    keyed.explain(&self.table_name(w.table), &names)
                )];
                lines.extend(
                    keyed
                        .finish
                        .describe(&session.df)
                        .into_iter()
                        .map(|l| format!("  then {l}")),
                );
                lines.push(
                    "  (the row found in the table's rows by primary key, without a DataFusion plan)"
                        .into(),
                );
                query_plan_rows(lines)
            }
            Plan::ExplainInsertValues(insert) => {
                query_plan_rows(vec![insert.explain(&self.table_name(insert.table))])
            }
            Plan::Truncate(writes) => self.truncate(session, writes).await,
            Plan::CreateTableAs {
                def,
                query,
                if_not_exists,
            } => {
                self.create_table_as(session, *def, *query, if_not_exists, ctx)
                    .await
            }
            Plan::CopyFrom(plan) => {
                let columns = plan.columns.len();
                let binary = plan.options.format == freshet_planner::CopyFormat::Binary;
                session.copy_in = Some(PendingCopy::new(*plan));
                Ok(ExecuteResponse::CopyIn { columns, binary })
            }
            Plan::CopyTo(q, options) => {
                let batches = self.read(session, &q).await?;
                Ok(ExecuteResponse::CopyOut {
                    desc: q.desc,
                    batches,
                    options,
                })
            }
            Plan::Rows { desc, batch } => Ok(ExecuteResponse::Rows {
                desc,
                batches: vec![batch],
                tag: "SHOW".into(),
            }),
            Plan::SetVariable { name, value, local } => {
                if local && session.status == TxnStatus::Idle {
                    ctx.notices.push(Notice {
                        severity: "WARNING",
                        code: sqlstate::NO_ACTIVE_SQL_TRANSACTION,
                        message: "SET LOCAL can only be used in transaction blocks".into(),
                    });
                }
                session.set_var(&name, &value, local)?;
                Ok(ExecuteResponse::Command(tag))
            }
            Plan::ResetAll => {
                session.reset_all();
                Ok(ExecuteResponse::Command(tag))
            }
            Plan::ShowVariable(name) => show_variable(session, &name),
            Plan::StartTransaction { isolation } => {
                if session.status != TxnStatus::Idle {
                    ctx.warning(
                        sqlstate::ACTIVE_SQL_TRANSACTION,
                        "there is already a transaction in progress",
                    );
                } else {
                    session.begin();
                }
                if let Some(level) = isolation {
                    session.txn.isolation = Some(parse_isolation(&level));
                }
                Ok(ExecuteResponse::TransactionStart(tag))
            }
            Plan::SetTransaction { isolation } => {
                if session.status == TxnStatus::Idle {
                    ctx.warning(
                        sqlstate::NO_ACTIVE_SQL_TRANSACTION,
                        "SET TRANSACTION can only be used in transaction blocks",
                    );
                } else if let Some(level) = isolation {
                    session.txn.isolation = Some(parse_isolation(&level));
                }
                Ok(ExecuteResponse::Command(tag))
            }
            Plan::Savepoint(name) => {
                if session.status == TxnStatus::Idle {
                    return Err(AdapterError::data(
                        sqlstate::NO_ACTIVE_SQL_TRANSACTION,
                        "SAVEPOINT can only be used in transaction blocks",
                    ));
                }
                session.savepoint(name);
                Ok(ExecuteResponse::Command(tag))
            }
            Plan::ReleaseSavepoint(name) => {
                if session.status == TxnStatus::Idle {
                    return Err(AdapterError::data(
                        sqlstate::NO_ACTIVE_SQL_TRANSACTION,
                        "RELEASE SAVEPOINT can only be used in transaction blocks",
                    ));
                }
                if !session.release(&name) {
                    return Err(no_savepoint(&name));
                }
                Ok(ExecuteResponse::Command(tag))
            }
            Plan::RollbackToSavepoint(name) => {
                if session.status == TxnStatus::Idle {
                    return Err(AdapterError::data(
                        sqlstate::NO_ACTIVE_SQL_TRANSACTION,
                        "ROLLBACK TO SAVEPOINT can only be used in transaction blocks",
                    ));
                }
                if !session.rollback_to(&name) {
                    return Err(no_savepoint(&name));
                }
                // A transaction start for the front end: the failed state
                // (if it was) is over, the transaction goes on.
                Ok(ExecuteResponse::TransactionStart("ROLLBACK".into()))
            }
            Plan::Prepare {
                name,
                stmt,
                declared,
            } => {
                if session.prepared.contains_key(&name) {
                    return Err(AdapterError::data(
                        sqlstate::DUPLICATE_PREPARED_STATEMENT,
                        format!("prepared statement \"{name}\" already exists"),
                    ));
                }
                // Planned now, as PostgreSQL analyzes at PREPARE: a missing
                // table fails here, and the parameters get their types.
                let inferred = self.parameter_types(session, &stmt).await?;
                let n = inferred.len().max(declared.len());
                let param_types = (0..n)
                    .map(|i| {
                        declared
                            .get(i)
                            .cloned()
                            .or_else(|| inferred.get(i).cloned().flatten())
                    })
                    .collect();
                session.prepared.insert(
                    name,
                    crate::session::SqlPrepared {
                        stmt: *stmt,
                        param_types,
                    },
                );
                Ok(ExecuteResponse::Command(tag))
            }
            Plan::Execute { name, args } => {
                let prepared = session.prepared.get(&name).cloned().ok_or_else(|| {
                    AdapterError::data(
                        sqlstate::INVALID_SQL_STATEMENT_NAME,
                        format!("prepared statement \"{name}\" does not exist"),
                    )
                })?;
                let values = match args {
                    Some(q) => self.argument_row(session, &q).await?,
                    None => Vec::new(),
                };
                if values.len() != prepared.param_types.len() {
                    return Err(AdapterError::data(
                        sqlstate::SYNTAX_ERROR,
                        format!("wrong number of parameters for prepared statement \"{name}\"",),
                    )
                    .with_detail(format!(
                        "Expected {} parameters but got {}.",
                        prepared.param_types.len(),
                        values.len()
                    )));
                }
                let values = values
                    .into_iter()
                    .zip(&prepared.param_types)
                    .map(|(v, ty)| match ty {
                        Some(ty) if v.data_type() != *ty => v.cast_to(ty),
                        _ => Ok(v),
                    })
                    .collect::<datafusion::common::Result<Vec<_>>>()?;
                let params = ParamValues::List(values.into_iter().map(Into::into).collect());
                Box::pin(self.execute_inner(session, &prepared.stmt, Some(&params), ctx)).await
            }
            Plan::Deallocate(name) => {
                let known = match &name {
                    Some(n) => session.prepared.remove(n).is_some(),
                    None => {
                        session.prepared.clear();
                        true
                    }
                };
                Ok(ExecuteResponse::Deallocate { name, known })
            }
            Plan::Commit => self.end_transaction(session, true, ctx).await,
            Plan::Rollback => self.end_transaction(session, false, ctx).await,
            Plan::Subscribe(plan, options) => Ok(ExecuteResponse::Subscribe {
                stream: Box::new(self.subscribe(session, *plan).await?),
                options,
            }),
            Plan::Declare { name, plan } => {
                self.declare(session, name, *plan, stmt.to_string()).await
            }
            Plan::Fetch {
                name,
                count,
                timeout,
            } => self.fetch(session, &name, count, timeout).await,
            Plan::Close(None) => {
                session.txn.cursors.clear();
                Ok(ExecuteResponse::Command("CLOSE CURSOR ALL".into()))
            }
            Plan::Close(Some(name)) => match session.txn.cursors.remove(&name) {
                Some(_) => Ok(ExecuteResponse::Command("CLOSE CURSOR".into())),
                None => Err(AdapterError::UnknownCursor(name)),
            },
        }
    }

    pub(super) async fn end_transaction(
        &self,
        session: &mut Session,
        commit: bool,
        ctx: &mut ExecCtx,
    ) -> Result<ExecuteResponse> {
        let status = session.status;
        let txn = session.end_transaction(commit && status == TxnStatus::InBlock);
        match status {
            TxnStatus::Idle => {
                ctx.warning(
                    sqlstate::NO_ACTIVE_SQL_TRANSACTION,
                    "there is no transaction in progress",
                );
                Ok(ExecuteResponse::TransactionEnd(
                    if commit { "COMMIT" } else { "ROLLBACK" }.into(),
                ))
            }
            TxnStatus::Failed => Ok(ExecuteResponse::TransactionEnd("ROLLBACK".into())),
            TxnStatus::InBlock => {
                // The block's DDL first: its writes may be to tables it
                // created. (Two steps: a crash between them, or writes
                // that fail their checks, leave the DDL committed.)
                if commit && let Some(ddl) = txn.ddl {
                    self.commit_ddl(ddl).await?;
                }
                if commit && !txn.writes.is_empty() {
                    // Writes apply only if nothing the transaction read
                    // has changed since it read it (40001 otherwise).
                    let reads = match &txn.read {
                        Some(read) => txn.validate.iter().map(|id| (*id, read.ts)).collect(),
                        None => Vec::new(),
                    };
                    // The tables' write locks, as a write that reads
                    // before it writes holds them: keyed writes, which
                    // read rows by key, wait for this commit.
                    let tables: std::collections::BTreeSet<_> =
                        txn.writes.iter().map(|w| w.id).collect();
                    let mut locks = Vec::with_capacity(tables.len());
                    for id in tables {
                        locks.push(self.table_lock(id).write_owned().await);
                    }
                    let result = self.commit_writes(txn.writes, locks, reads).await;
                    drop(txn.read);
                    result?;
                }
                Ok(ExecuteResponse::TransactionEnd(
                    if commit { "COMMIT" } else { "ROLLBACK" }.into(),
                ))
            }
        }
    }
}

/// Statements a failed transaction still accepts: COMMIT, ROLLBACK and
/// ROLLBACK TO SAVEPOINT (which returns it to a working state).
fn is_txn_end(stmt: &Statement) -> bool {
    use datafusion::sql::sqlparser::ast::Statement as S;
    matches!(stmt, Statement::Sql(s) if matches!(s.as_ref(), S::Commit { .. } | S::Rollback { .. }))
}

fn no_savepoint(name: &str) -> AdapterError {
    AdapterError::data(
        sqlstate::INVALID_SAVEPOINT_SPECIFICATION,
        format!("savepoint \"{name}\" does not exist"),
    )
}

impl Coordinator {
    /// The types of a statement's parameters, as planning infers them.
    pub async fn parameter_types(
        &self,
        session: &Session,
        stmt: &Statement,
    ) -> Result<Vec<Option<arrow::datatypes::DataType>>> {
        use freshet_planner::statements::context::placeholder_types;
        if super::temp::creates_temporary(stmt) {
            // Planned when it runs, once its schema exists.
            return Ok(Vec::new());
        }
        Ok(match self.plan(session, stmt, None).await? {
            Plan::Select(q) => placeholder_types(&q.logical)?,
            Plan::SelectAt { query, .. } => placeholder_types(&query.logical)?,
            Plan::Write(w) => placeholder_types(&w.source.logical)?,
            Plan::InsertValues(insert) => insert.params.clone(),
            _ => Vec::new(),
        }
        .into_iter()
        .map(|f| f.map(|f| f.data_type().clone()))
        .collect())
    }

    /// `EXECUTE`'s arguments: the one row of their query.
    async fn argument_row(
        &self,
        session: &mut Session,
        q: &freshet_planner::QueryPlan,
    ) -> Result<Vec<datafusion::common::ScalarValue>> {
        let batches = self.read(session, q).await?;
        let Some(batch) = batches.iter().find(|b| b.num_rows() > 0) else {
            return Err(AdapterError::Internal(
                "EXECUTE arguments produced no row".into(),
            ));
        };
        (0..batch.num_columns())
            .map(|i| {
                Ok(datafusion::common::ScalarValue::try_from_array(
                    batch.column(i),
                    0,
                )?)
            })
            .collect()
    }
}

fn parse_isolation(level: &str) -> Isolation {
    match level {
        "strict serializable" => Isolation::StrictSerializable,
        _ => Isolation::Serializable,
    }
}
