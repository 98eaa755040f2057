//! The extended query protocol: Parse, Describe, Bind, Execute.

use std::fmt::Debug;
use std::sync::Arc;

use async_trait::async_trait;
use freshet_planner::Plan;
use freshet_planner::parser::{Statement, parse};
use freshet_planner::statements::context::placeholder_types;
use freshet_repr::{ColumnDesc, PgType, RelationDesc};
use futures::sink::{Sink, SinkExt};
use pgwire::api::portal::{Format, Portal};
use pgwire::api::query::ExtendedQueryHandler;
use pgwire::api::results::{
    DescribePortalResponse, DescribeResponse, DescribeStatementResponse, FieldInfo, Response, Tag,
};
use pgwire::api::stmt::{QueryParser, StoredStatement};
use pgwire::api::store::{Entry, PortalStore};
use pgwire::api::{ClientInfo, ClientPortalStore, DEFAULT_NAME, Type};
use pgwire::error::{PgWireError, PgWireResult};
use pgwire::messages::PgWireBackendMessage;
use pgwire::messages::data::{NoData, ParameterDescription, RowDescription};
use pgwire::messages::extendedquery::{
    Bind, BindComplete, Describe, Execute, TARGET_TYPE_BYTE_PORTAL, TARGET_TYPE_BYTE_STATEMENT,
};
use pgwire::types::format::FormatOptions;

use super::{
    FreshetHandler, MAX_ROWS_PER_EXECUTE, Prepared, arrow_time_zone, encode_rows, format_options,
    session_slot,
};
use crate::coordinator::{Coordinator, ExecuteResponse, PreparedPlan};
use crate::encode::{field_infos, wire_type};
use crate::error::AdapterError;
use crate::session::Session;

/// Parses statements for the extended protocol and describes them.
#[derive(Debug)]
pub struct FreshetParser {
    pub(super) coord: Arc<Coordinator>,
}

/// A statement's parameter types and result columns.
type Described = (
    Vec<Option<arrow::datatypes::FieldRef>>,
    Option<RelationDesc>,
);

/// Describe a statement, and keep its plan if it is one that can be bound
/// again at each execution.
async fn describe(
    coord: &Coordinator,
    session: &Session,
    stmt: &Statement,
) -> Result<(Described, Option<Arc<PreparedPlan>>), AdapterError> {
    let plan = coord.plan(session, stmt, None).await?;
    let text = |name: &str| {
        RelationDesc::new(vec![ColumnDesc {
            name: name.into(),
            ty: PgType::Text,
            nullable: false,
        }])
    };
    let prepared = match &plan {
        Plan::Select(q) => coord.prepare_constant(session, q).await,
        _ => coord.prepare_plan(session, &plan),
    };
    Ok((
        match plan {
            Plan::Select(q) => (placeholder_types(&q.logical)?, Some(q.desc)),
            Plan::SelectAt { query, .. } => (placeholder_types(&query.logical)?, Some(query.desc)),
            Plan::Write(w) => (
                placeholder_types(&w.source.logical)?,
                w.returning.map(|r| r.desc),
            ),
            Plan::InsertValues(insert) => (insert.params.clone(), None),
            Plan::ExplainInsertValues(insert) => (insert.params.clone(), Some(text("QUERY PLAN"))),
            Plan::ExplainKeyedWrite(w) => (
                placeholder_types(&w.source.logical)?,
                Some(text("QUERY PLAN")),
            ),
            Plan::Rows { desc, .. } => (vec![], Some(desc)),
            // `EXPLAIN` takes the parameters of the statement it explains.
            Plan::Explain(_, q) => (placeholder_types(&q.logical)?, Some(text("QUERY PLAN"))),
            Plan::ExplainPeek(p) => (
                match &p.finish {
                    Some(finish) => placeholder_types(&finish.query.logical)?,
                    None => vec![],
                },
                Some(text("QUERY PLAN")),
            ),
            Plan::Peek(p) => match &p.finish {
                Some(finish) => (placeholder_types(&finish.query.logical)?, Some(p.desc)),
                None => (vec![], Some(p.desc)),
            },
            Plan::ShowVariable(name) if name == "all" => (
                vec![],
                Some(RelationDesc::new(vec![
                    ColumnDesc {
                        name: "name".into(),
                        ty: PgType::Text,
                        nullable: false,
                    },
                    ColumnDesc {
                        name: "setting".into(),
                        ty: PgType::Text,
                        nullable: false,
                    },
                ])),
            ),
            Plan::ShowVariable(name) if name == crate::vars::SHOW_ISOLATION_LEVEL => {
                (vec![], Some(text("transaction_isolation")))
            }
            Plan::ShowVariable(name) => (vec![], Some(text(&name))),
            Plan::Execute { name, .. } => match session.prepared.get(&name) {
                // EXECUTE's own parameters are in its arguments; the result is
                // the prepared statement's.
                Some(p) => (
                    vec![],
                    Box::pin(describe(coord, session, &p.stmt)).await?.0.1,
                ),
                None => (vec![], None),
            },
            Plan::Fetch { name, .. } => (
                vec![],
                Some(
                    session
                        .txn
                        .cursors
                        .get(&name)
                        .map(|c| c.desc.clone())
                        .ok_or(AdapterError::UnknownCursor(name))?,
                ),
            ),
            _ => (vec![], None),
        },
        prepared,
    ))
}

/// Queue a Describe's answer (ParameterDescription for a statement, then
/// RowDescription or NoData) without flushing it: like PostgreSQL, the
/// answers to Parse/Bind/Describe/Execute reach the socket together at
/// `Sync` or `Flush`, in one write instead of one per message.
async fn feed_describe_response<C, R>(client: &mut C, response: &R) -> PgWireResult<()>
where
    C: Sink<PgWireBackendMessage> + Unpin,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    R: DescribeResponse,
{
    if let Some(types) = response.parameters() {
        client
            .feed(PgWireBackendMessage::ParameterDescription(
                ParameterDescription::new(types.iter().map(|t| t.oid()).collect()),
            ))
            .await?;
    }
    let message = if response.is_no_data() {
        PgWireBackendMessage::NoData(NoData::new())
    } else {
        PgWireBackendMessage::RowDescription(RowDescription::new(
            response.fields().iter().map(Into::into).collect(),
        ))
    };
    client.feed(message).await?;
    Ok(())
}

#[async_trait]
impl QueryParser for FreshetParser {
    type Statement = Prepared;

    async fn parse_sql<C>(
        &self,
        client: &C,
        sql: &str,
        _types: &[Option<Type>],
    ) -> PgWireResult<Option<Prepared>>
    where
        C: ClientInfo + Unpin + Send + Sync,
    {
        let mut stmts = parse(sql).map_err(AdapterError::Plan)?;
        if stmts.len() > 1 {
            return Err(AdapterError::Plan(freshet_planner::PlanError::Syntax(
                "cannot insert multiple commands into a prepared statement".into(),
            ))
            .into());
        }
        let Some(stmt) = stmts.pop() else {
            return Ok(None);
        };
        let slot = session_slot(client)?;
        let session = slot.0.lock().await;
        let ((param_types, desc), plan) = describe(&self.coord, &session, &stmt)
            .await
            .map_err(|e| e.at(sql, &stmt))?;
        Ok(Some(Prepared {
            stmt: Some(stmt),
            param_types,
            desc,
            plan,
        }))
    }

    fn get_parameter_types(&self, stmt: &Prepared) -> PgWireResult<Vec<Type>> {
        Ok(stmt
            .param_types
            .iter()
            .map(|f| {
                f.as_ref()
                    .map(|f| wire_type(&PgType::of_field(f)))
                    .unwrap_or(Type::TEXT)
            })
            .collect())
    }

    fn get_result_schema(
        &self,
        stmt: &Prepared,
        column_format: Option<&Format>,
    ) -> PgWireResult<Vec<FieldInfo>> {
        Ok(match &stmt.desc {
            Some(desc) => field_infos(
                desc,
                column_format.unwrap_or(&Format::UnifiedText),
                &Arc::new(FormatOptions::default()),
            ),
            None => vec![],
        })
    }
}

#[async_trait]
impl ExtendedQueryHandler for FreshetHandler {
    type Statement = Prepared;
    type QueryParser = FreshetParser;

    fn query_parser(&self) -> Arc<Self::QueryParser> {
        Arc::clone(&self.parser)
    }

    async fn do_describe_statement<C>(
        &self,
        _client: &mut C,
        target: &StoredStatement<Self::Statement>,
    ) -> PgWireResult<DescribeStatementResponse>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let parser = self.query_parser();
        let inferred = parser.get_parameter_types(&target.statement)?;
        let n = inferred.len().max(target.parameter_types.len());
        let params = (0..n)
            .map(|i| {
                target
                    .parameter_types
                    .get(i)
                    .cloned()
                    .flatten()
                    .filter(|t| *t != Type::UNKNOWN)
                    .or_else(|| inferred.get(i).cloned())
                    .unwrap_or(Type::TEXT)
            })
            .collect();
        Ok(DescribeStatementResponse::new(
            params,
            parser.get_result_schema(&target.statement, None)?,
        ))
    }

    async fn do_describe_portal<C>(
        &self,
        _client: &mut C,
        target: &Portal<Self::Statement>,
    ) -> PgWireResult<DescribePortalResponse>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        Ok(DescribePortalResponse::new(self.parser.get_result_schema(
            &target.statement.statement,
            Some(&target.result_column_format),
        )?))
    }

    /// Describe as the pgwire crate does, except that a portal name no
    /// Bind created may be a cursor opened with `DECLARE` (PostgreSQL
    /// keeps both in one namespace; psycopg's server-side cursors describe
    /// theirs this way), and that the response is queued for the `Sync`
    /// or `Flush` that follows, as `BindComplete` is.
    async fn on_describe<C>(&self, client: &mut C, message: Describe) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if message.target_type == TARGET_TYPE_BYTE_PORTAL
            && let Some(name) = message.name.as_deref()
            && client.portal_store().get_portal(name).is_none()
        {
            let slot = session_slot(client)?;
            let desc = {
                let session = slot.0.lock().await;
                session.txn.cursors.get(name).map(|c| c.desc.clone())
            };
            if let Some(desc) = desc {
                let fields = field_infos(
                    &desc,
                    &Format::UnifiedText,
                    &Arc::new(FormatOptions::default()),
                );
                return feed_describe_response(client, &DescribePortalResponse::new(fields)).await;
            }
        }
        let name = message.name.as_deref().unwrap_or(DEFAULT_NAME);
        match message.target_type {
            TARGET_TYPE_BYTE_STATEMENT => match client.portal_store().get_statement(name) {
                Some(Entry::Value(stmt)) => {
                    let response = self.do_describe_statement(client, &stmt).await?;
                    feed_describe_response(client, &response).await
                }
                Some(Entry::Empty) => {
                    feed_describe_response(client, &DescribeStatementResponse::no_data()).await
                }
                None => Err(PgWireError::StatementNotFound(name.to_owned())),
            },
            TARGET_TYPE_BYTE_PORTAL => match client.portal_store().get_portal(name) {
                Some(Entry::Value(portal)) => {
                    let response = self.do_describe_portal(client, &portal).await?;
                    feed_describe_response(client, &response).await
                }
                Some(Entry::Empty) => {
                    feed_describe_response(client, &DescribePortalResponse::no_data()).await
                }
                None => Err(PgWireError::PortalNotFound(name.to_owned())),
            },
            other => Err(PgWireError::InvalidTargetType(other)),
        }
    }

    /// Bind as the pgwire crate does, but queue `BindComplete` instead of
    /// flushing it: like PostgreSQL, the response reaches the socket at
    /// `Sync` (or `Flush`) in one write with the execution's.
    async fn on_bind<C>(&self, client: &mut C, message: Bind) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let statement = message.statement_name.as_deref().unwrap_or(DEFAULT_NAME);
        match client.portal_store().get_statement(statement) {
            Some(Entry::Value(stored)) => {
                let portal = Portal::try_new(&message, stored)?;
                client.portal_store().put_portal(Arc::new(portal));
            }
            Some(Entry::Empty) if message.parameters.is_empty() => client
                .portal_store()
                .put_empty_portal(message.portal_name.as_deref().unwrap_or(DEFAULT_NAME)),
            Some(Entry::Empty) => {
                return Err(AdapterError::Protocol(format!(
                    "bind message supplies {} parameters, but prepared statement \"{statement}\" requires 0",
                    message.parameters.len()
                ))
                .into());
            }
            None => return Err(PgWireError::StatementNotFound(statement.to_owned())),
        }
        client
            .feed(PgWireBackendMessage::BindComplete(BindComplete::new()))
            .await?;
        Ok(())
    }

    /// Execute as the pgwire crate does, after bounding the rows requested:
    /// a negative count means all rows (as in PostgreSQL), and a count above
    /// [`MAX_ROWS_PER_EXECUTE`] is lowered to it.
    async fn on_execute<C>(&self, client: &mut C, mut message: Execute) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        message.max_rows = message.max_rows.clamp(0, MAX_ROWS_PER_EXECUTE);
        self._on_execute(client, message).await
    }

    async fn do_query<C>(
        &self,
        client: &mut C,
        portal: &Portal<Self::Statement>,
        max_rows: usize,
    ) -> PgWireResult<Response>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let prepared = &portal.statement.statement;
        let Some(stmt) = &prepared.stmt else {
            return Ok(Response::EmptyQuery);
        };
        let params = crate::params::decode(
            &portal.parameters,
            &portal.parameter_format,
            &portal.statement.parameter_types,
            &prepared.param_types,
        )?;
        let slot = session_slot(client)?;
        let mut session = slot.0.lock().await;
        let resp = self
            .run(
                client,
                &mut session,
                stmt,
                params.as_ref(),
                prepared.plan.clone(),
            )
            .await?;
        let resp = super::deallocate(client.portal_store(), resp)?;
        if let ExecuteResponse::Rows { desc, batches, tag } = &resp
            && (max_rows == 0 || batches.iter().map(|b| b.num_rows()).sum::<usize>() <= max_rows)
        {
            // All rows at once (asked for, or all fit the limit): queue
            // them and answer with the tag, so the pgwire crate queues
            // CommandComplete too instead of flushing it (its portal path
            // would), and the Sync flushes once.
            let options = format_options(&session.vars);
            let fields = Arc::new(field_infos(desc, &portal.result_column_format, &options));
            let rows = encode_rows(desc, &fields, batches, &arrow_time_zone(&session.vars))?;
            let n = rows.len();
            for row in rows {
                client.feed(PgWireBackendMessage::DataRow(row)).await?;
            }
            return Ok(Response::Execution(Tag::new(tag).with_rows(n)));
        }
        self.respond(client, &session, resp, &portal.result_column_format)
            .await
    }
}
