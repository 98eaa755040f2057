//! The sequencer: sends each planned statement to the code for its kind,
//! and runs transaction control.

use std::sync::Arc;

use datafusion::common::ParamValues;
use freshet_catalog::Op;
use freshet_planner::parser::Statement;
use freshet_planner::{CreateIndexPlan, Plan};
use freshet_repr::sqlstate;

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
        let plan = self.plan(session, stmt, params).await?;
        let tag = command_tag(stmt);
        match plan {
            Plan::Empty => Ok(ExecuteResponse::Command(tag)),
            Plan::CreateDatabase {
                name,
                if_not_exists,
            } => {
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
            Plan::Rename { id, new_name } => {
                let ddl = Ddl::new(&tag, vec![Op::RenameItem { id, new_name }]);
                self.ddl(session, ddl, ctx).await
            }
            Plan::Select(q) => {
                let batches = self.read(session, &q).await?;
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
            Plan::SetOptions { id, options } => {
                let ddl = Ddl::new(&tag, vec![Op::SetOptions { id, options }]);
                self.ddl(session, ddl, ctx).await
            }
            Plan::Explain(kind, q) => self.explain(session, kind, &q).await,
            Plan::ExplainDataflow(explain) => self.explain_dataflow(*explain),
            Plan::Peek(peek) => {
                let batch = self.peek(session, &peek).await?;
                Ok(ExecuteResponse::Rows {
                    desc: peek.desc,
                    batches: vec![batch],
                    tag: "SELECT".into(),
                })
            }
            Plan::ExplainPeek(peek) => query_plan_rows(vec![
                format!("Fast path: {}", self.humanize_ids(&peek.explain)),
                "  (answered from the index's arrangement, without a DataFusion plan)".into(),
            ]),
            Plan::Write(w) => self.write(session, *w).await,
            Plan::CopyFrom(plan) => {
                let columns = plan.columns.len();
                session.copy_in = Some(PendingCopy::new(*plan));
                Ok(ExecuteResponse::CopyIn { columns })
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
            Plan::Commit => self.end_transaction(session, true, ctx).await,
            Plan::Rollback => self.end_transaction(session, false, ctx).await,
            Plan::Subscribe(plan, options) => Ok(ExecuteResponse::Subscribe {
                stream: Box::new(self.subscribe(session, *plan).await?),
                options,
            }),
            Plan::Declare { name, plan } => self.declare(session, name, *plan).await,
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
                if commit && !txn.writes.is_empty() {
                    self.commit_writes(txn.writes, None).await?;
                }
                drop(txn.read);
                Ok(ExecuteResponse::TransactionEnd(
                    if commit { "COMMIT" } else { "ROLLBACK" }.into(),
                ))
            }
        }
    }
}

fn is_txn_end(stmt: &Statement) -> bool {
    use datafusion::sql::sqlparser::ast::Statement as S;
    matches!(stmt, Statement::Sql(s) if matches!(s.as_ref(), S::Commit { .. } | S::Rollback { .. }))
}

fn parse_isolation(level: &str) -> Isolation {
    match level {
        "strict serializable" => Isolation::StrictSerializable,
        _ => Isolation::Serializable,
    }
}
