//! `EXPLAIN` of queries and timestamps, and `SHOW` of session variables.

use std::sync::Arc;

use arrow::array::RecordBatch;
use freshet_compute::ComputeController;
use freshet_planner::{ExplainDataflowPlan, ExplainKind, QueryPlan};
use freshet_repr::RelationDesc;

use super::{Coordinator, ExecuteResponse};
use crate::error::{AdapterError, Result};
use crate::session::{Session, TxnStatus};

impl Coordinator {
    /// `EXPLAIN` of a dataflow: compute's rendering of the plan (each
    /// reduction with the strategy that maintains it), with ids named.
    pub(super) fn explain_dataflow(&self, explain: ExplainDataflowPlan) -> Result<ExecuteResponse> {
        let explained = ComputeController::explain(&explain.plan)?;
        let (desc, batch) = freshet_planner::statements::explain::explain_dataflow_rows(
            &self.catalog_state(),
            &explain.plan,
            &explained,
            explain.head,
        )?;
        Ok(ExecuteResponse::Rows {
            desc,
            batches: vec![batch],
            tag: "SHOW".into(),
        })
    }

    pub(super) async fn explain(
        &self,
        session: &mut Session,
        kind: ExplainKind,
        q: &QueryPlan,
    ) -> Result<ExecuteResponse> {
        let lines: Vec<String> = match kind {
            ExplainKind::Plan | ExplainKind::Physical => {
                let optimized = session.df.optimize(&q.logical)?;
                let text = self.humanize_ids(&optimized.display_indent().to_string());
                let mut lines = vec!["Optimized logical plan:".to_string()];
                lines.extend(text.lines().map(|l| format!("  {l}")));
                let seeks = freshet_planner::query::provider::index_seeks(&optimized);
                if !seeks.is_empty() {
                    lines.push("Index seeks:".to_string());
                    for (table, seek) in seeks {
                        lines.push(self.humanize_ids(&format!("  {table}: {seek}")));
                    }
                }
                if kind == ExplainKind::Physical {
                    match self.physical_plan(session, q).await {
                        Ok(text) => {
                            lines.push("Physical plan:".to_string());
                            let text = self.humanize_ids(&text);
                            lines.extend(text.lines().map(|l| format!("  {l}")));
                        }
                        // The plan above still explains the query; say
                        // why this part is missing rather than fail.
                        Err(e) => lines.push(format!("Physical plan: not available ({e})")),
                    }
                }
                lines
            }
            ExplainKind::Timestamp => {
                let isolation = session.isolation();
                let (ts, holds) = match &session.txn.read {
                    Some(r) if session.status == TxnStatus::InBlock => (r.ts, vec![]),
                    _ => self.choose_and_hold(&q.inputs, isolation)?,
                };
                let mut lines = vec![
                    format!("                query timestamp: {ts}"),
                    format!("                      isolation: {}", isolation.name()),
                    format!(
                        "          oracle read timestamp: {}",
                        self.storage.read_ts()
                    ),
                ];
                let all_holds = self.storage.read_holds();
                for id in &q.inputs {
                    let (since, upper) = self.storage.frontiers(*id)?;
                    let held: Vec<String> = all_holds
                        .iter()
                        .filter(|h| h.id == *id)
                        .map(|h| format!("{}x{}", h.count, h.time))
                        .collect();
                    lines.push(format!("input {} ({id}):", self.describe(*id)));
                    lines.push(format!(
                        "                          since: {:?}",
                        since.elements()
                    ));
                    lines.push(format!(
                        "                          upper: {:?}",
                        upper.elements()
                    ));
                    lines.push(format!(
                        "                     read holds: [{}]",
                        held.join(", ")
                    ));
                }
                drop(holds);
                lines
            }
        };
        query_plan_rows(lines)
    }
}

impl Coordinator {
    /// The physical plan a read of `q` would run now: at the time and
    /// under the holds the read would take, with its scans bound there (so
    /// each names the parts it would read of how many).
    async fn physical_plan(&self, session: &mut Session, q: &QueryPlan) -> Result<String> {
        let (ts, holds) = self.read_time(session, &q.inputs, true)?;
        self.bind_at(session, q, ts).await?;
        let text = self.queries.explain(&session.df, q.logical.clone()).await?;
        drop(holds);
        Ok(text)
    }
}

pub(super) fn show_variable(session: &Session, name: &str) -> Result<ExecuteResponse> {
    use freshet_repr::{ColumnDesc, PgType};
    let text = |n: &str| ColumnDesc {
        name: n.into(),
        ty: PgType::Text,
        nullable: false,
    };
    if name == "all" {
        let all = session.vars.all();
        let desc = RelationDesc::new(vec![text("name"), text("setting")]);
        let batch = RecordBatch::try_new(
            desc.arrow_schema(),
            vec![
                Arc::new(arrow::array::StringArray::from(
                    all.iter().map(|(n, _)| n.to_string()).collect::<Vec<_>>(),
                )),
                Arc::new(arrow::array::StringArray::from(
                    all.iter().map(|(_, v)| v.clone()).collect::<Vec<_>>(),
                )),
            ],
        )
        .map_err(|e| AdapterError::Internal(e.to_string()))?;
        return Ok(ExecuteResponse::Rows {
            desc,
            batches: vec![batch],
            tag: "SHOW".into(),
        });
    }
    let (value, name) = if name == crate::vars::SHOW_ISOLATION_LEVEL {
        (
            session.isolation().postgres_name().to_string(),
            "transaction_isolation",
        )
    } else if name == "transaction_isolation" {
        (session.isolation().name().to_string(), name)
    } else {
        let value = session
            .vars
            .get(name)
            .ok_or_else(|| AdapterError::UnknownVariable(name.to_string()))?;
        (value, name)
    };
    let display = session
        .vars
        .all()
        .into_iter()
        .map(|(n, _)| n)
        .find(|n| n.eq_ignore_ascii_case(name))
        .unwrap_or(name)
        .to_string();
    let desc = RelationDesc::new(vec![text(&display)]);
    let batch = RecordBatch::try_new(
        desc.arrow_schema(),
        vec![Arc::new(arrow::array::StringArray::from(vec![value]))],
    )
    .map_err(|e| AdapterError::Internal(e.to_string()))?;
    Ok(ExecuteResponse::Rows {
        desc,
        batches: vec![batch],
        tag: "SHOW".into(),
    })
}

/// A one-column `QUERY PLAN` result of `lines`.
pub(super) fn query_plan_rows(lines: Vec<String>) -> Result<ExecuteResponse> {
    let desc = RelationDesc::new(vec![freshet_repr::ColumnDesc {
        name: "QUERY PLAN".into(),
        ty: freshet_repr::PgType::Text,
        nullable: false,
    }]);
    let batch = RecordBatch::try_new(
        desc.arrow_schema(),
        vec![Arc::new(arrow::array::StringArray::from(lines))],
    )
    .map_err(|e| AdapterError::Internal(e.to_string()))?;
    Ok(ExecuteResponse::Rows {
        desc,
        batches: vec![batch],
        tag: "EXPLAIN".into(),
    })
}
