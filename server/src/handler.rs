//! The pgwire front end: startup, simple and extended query, COPY, cancel.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::Arc;

use arrow::datatypes::DataType;
use async_trait::async_trait;
use datafusion::common::ParamValues;
use freshet_planner::Plan;
use freshet_planner::parser::{Statement, parse};
use freshet_planner::statements::context::placeholder_types;
use freshet_repr::sqlstate;
use freshet_repr::{ColumnDesc, PgType, RelationDesc};
use futures::sink::{Sink, SinkExt};
use futures::stream;
use pgwire::api::auth::{
    ServerParameterProvider, StartupHandler, finish_authentication, protocol_negotiation,
    save_startup_parameters_to_metadata,
};
use pgwire::api::cancel::DefaultCancelHandler;
use pgwire::api::copy::CopyHandler;
use pgwire::api::portal::{Format, Portal};
use pgwire::api::query::{ExtendedQueryHandler, SimpleQueryHandler};
use pgwire::api::results::{
    CopyResponse, DataRowEncoder, DescribePortalResponse, DescribeStatementResponse, FieldInfo,
    QueryResponse, Response, Tag,
};
use pgwire::api::stmt::{QueryParser, StoredStatement};
use pgwire::api::store::{Entry, PortalStore};
use pgwire::api::{
    ClientInfo, ClientPortalStore, DEFAULT_NAME, PgWireServerHandlers, PidSecretKeyGenerator,
    RandomPidSecretKeyGenerator, Type,
};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::copy::{CopyData, CopyDone, CopyFail, CopyOutResponse};
use pgwire::messages::extendedquery::{Bind, BindComplete, Execute};
use pgwire::messages::response::TransactionStatus;
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};
use pgwire::types::format::FormatOptions;

use crate::coordinator::{Coordinator, ExecCtx, ExecuteResponse};
use crate::encode::{encode_batches, field_infos, wire_type};
use crate::error::AdapterError;
use crate::session::{Session, TxnStatus};
use crate::vars::{SERVER_VERSION, Vars};
use crate::watch::Sockets;

/// A connection's session, kept in pgwire's per-connection extensions.
pub struct SessionSlot(pub tokio::sync::Mutex<Session>);

/// A prepared statement: the parsed statement and what `Describe` reports.
#[derive(Clone, Debug)]
pub struct Prepared {
    /// The statement (`None`: empty).
    pub stmt: Option<Statement>,
    /// Parameter types inferred at `Parse`.
    pub param_types: Vec<Option<DataType>>,
    /// Result columns, if the statement returns rows.
    pub desc: Option<RelationDesc>,
}

/// Freshet's pgwire handlers.
#[derive(Debug)]
pub struct FreshetHandler {
    coord: Arc<Coordinator>,
    sockets: Arc<Sockets>,
    parser: Arc<FreshetParser>,
    pids: RandomPidSecretKeyGenerator,
    /// One permit per connection that has started up (`max_connections`).
    connection_slots: Arc<tokio::sync::Semaphore>,
    max_connections: usize,
}

/// A connection's place under `max_connections`, kept in its session
/// extensions and returned when the connection ends.
struct ConnectionPermit(#[allow(dead_code)] tokio::sync::OwnedSemaphorePermit);

/// Most rows one `Execute` may ask for at once. pgwire sizes a buffer by
/// the request before it has any row, so an `Execute` asking for 2^31 rows
/// would otherwise try to allocate tens of gigabytes and abort the
/// process. A larger request returns this many rows and `PortalSuspended`;
/// the client asks again (a result that fits is sent whole, see
/// `do_query`).
pub const MAX_ROWS_PER_EXECUTE: i32 = 1 << 20;

impl FreshetHandler {
    /// Handlers over a coordinator.
    pub fn new(coord: Arc<Coordinator>, sockets: Arc<Sockets>, max_connections: usize) -> Self {
        FreshetHandler {
            parser: Arc::new(FreshetParser {
                coord: Arc::clone(&coord),
            }),
            coord,
            sockets,
            pids: RandomPidSecretKeyGenerator::default(),
            connection_slots: Arc::new(tokio::sync::Semaphore::new(max_connections)),
            max_connections,
        }
    }
}

/// The set of handlers `process_socket` needs.
#[derive(Debug)]
pub struct Handlers {
    handler: Arc<FreshetHandler>,
    cancel: Arc<DefaultCancelHandler>,
}

impl Handlers {
    /// Handlers over a coordinator, serving at most `max_connections`
    /// clients at once.
    pub fn new(coord: Arc<Coordinator>, sockets: Arc<Sockets>, max_connections: usize) -> Self {
        Handlers {
            cancel: Arc::new(DefaultCancelHandler::new(Arc::clone(&coord.connections))),
            handler: Arc::new(FreshetHandler::new(coord, sockets, max_connections)),
        }
    }
}

impl PgWireServerHandlers for Handlers {
    fn simple_query_handler(&self) -> Arc<impl SimpleQueryHandler> {
        Arc::clone(&self.handler)
    }
    fn extended_query_handler(&self) -> Arc<impl ExtendedQueryHandler> {
        Arc::clone(&self.handler)
    }
    fn startup_handler(&self) -> Arc<impl StartupHandler> {
        Arc::clone(&self.handler)
    }
    fn copy_handler(&self) -> Arc<impl CopyHandler> {
        Arc::clone(&self.handler)
    }
    fn cancel_handler(&self) -> Arc<impl pgwire::api::cancel::CancelHandler> {
        Arc::clone(&self.cancel)
    }
}

fn session_slot<C: ClientInfo>(client: &C) -> PgWireResult<Arc<SessionSlot>> {
    client
        .session_extensions()
        .get::<SessionSlot>()
        .ok_or_else(|| {
            PgWireError::UserError(Box::new(ErrorInfo::new(
                "FATAL".into(),
                sqlstate::PROTOCOL_VIOLATION.into(),
                "no session for this connection".into(),
            )))
        })
}

fn notice(n: crate::coordinator::Notice) -> PgWireBackendMessage {
    PgWireBackendMessage::NoticeResponse(
        ErrorInfo::new(n.severity.into(), n.code.into(), n.message).into(),
    )
}

/// Format options for a session's values.
pub fn format_options(vars: &Vars) -> Arc<FormatOptions> {
    let mut o = FormatOptions::default();
    o.date_style = vars.datestyle.clone();
    o.interval_style = vars.intervalstyle.clone();
    o.time_zone = vars.timezone.clone();
    o.extra_float_digits = vars.extra_float_digits;
    Arc::new(o)
}

/// The session time zone as Arrow spells it.
pub fn arrow_time_zone(vars: &Vars) -> String {
    match vars.timezone.as_str() {
        "UTC" | "utc" | "Etc/UTC" | "GMT" | "Etc/GMT" => "+00:00".into(),
        other => other.into(),
    }
}

fn encode_rows(
    desc: &RelationDesc,
    fields: &Arc<Vec<FieldInfo>>,
    batches: &[arrow::array::RecordBatch],
    time_zone: &str,
) -> PgWireResult<Vec<pgwire::messages::data::DataRow>> {
    let mut rows = Vec::new();
    let mut encoder = DataRowEncoder::new(Arc::clone(fields));
    encode_batches(&mut encoder, desc, fields, batches, time_zone, |e| {
        rows.push(e.take_row())
    })?;
    Ok(rows)
}

/// Turn an execution result into a pgwire response.
fn to_response(resp: ExecuteResponse, vars: &Vars, format: &Format) -> PgWireResult<Response> {
    Ok(match resp {
        ExecuteResponse::Rows { desc, batches, tag } => {
            let options = format_options(vars);
            let fields = Arc::new(field_infos(&desc, format, &options));
            let rows = encode_rows(&desc, &fields, &batches, &arrow_time_zone(vars))?;
            let mut qr = QueryResponse::new(fields, stream::iter(rows.into_iter().map(Ok)));
            qr.set_command_tag(&tag);
            Response::Query(qr)
        }
        ExecuteResponse::Command(tag) => Response::Execution(Tag::new(&tag)),
        ExecuteResponse::TransactionStart(tag) => Response::TransactionStart(Tag::new(&tag)),
        ExecuteResponse::TransactionEnd(tag) => Response::TransactionEnd(Tag::new(&tag)),
        ExecuteResponse::CopyIn { columns } => {
            Response::CopyIn(CopyResponse::new(0, columns, stream::empty()))
        }
        ExecuteResponse::Subscribe { .. } => {
            // Subscribes stream through `FreshetHandler::stream_subscribe`.
            return Err(AdapterError::Internal("a subscribe reached to_response".into()).into());
        }
        ExecuteResponse::CopyOut {
            desc,
            batches,
            options,
        } => {
            let data = crate::copy::render(
                &desc,
                &batches,
                &options,
                &arrow_time_zone(vars),
                &format_options(vars),
            )?;
            Response::CopyOut(CopyResponse::new(
                0,
                desc.arity(),
                stream::iter(data.into_iter().map(Ok)),
            ))
        }
    })
}

impl FreshetHandler {
    /// Answer a statement: stream a subscribe, or turn any other result
    /// into its response.
    async fn respond<C>(
        &self,
        client: &mut C,
        session: &Session,
        resp: ExecuteResponse,
        format: &Format,
    ) -> PgWireResult<Response>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        match resp {
            ExecuteResponse::Subscribe { stream, options } => {
                self.stream_subscribe(client, session, stream, options)
                    .await
            }
            other => to_response(other, &session.vars, format),
        }
    }

    /// Stream a subscribe to the client as COPY data, flushing as each
    /// completed time's rows are written, until it completes, fails, or
    /// the client goes away (noticed even while no rows flow). Dropping
    /// this future (CancelRequest) ends the subscribe.
    async fn stream_subscribe<C>(
        &self,
        client: &mut C,
        session: &Session,
        mut stream: Box<crate::subscribe::SubscribeStream>,
        mut options: freshet_planner::CopyOptions,
    ) -> PgWireResult<Response>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let columns = stream.desc().arity();
        let arity = i16::try_from(columns)
            .map_err(|_| AdapterError::Unsupported("too many columns to COPY".into()))?;
        client
            .send(PgWireBackendMessage::CopyOutResponse(CopyOutResponse::new(
                0,
                arity,
                vec![0; columns],
            )))
            .await?;
        let watch = self.sockets.watch(&client.socket_addr());
        let time_zone = arrow_time_zone(&session.vars);
        let format_options = format_options(&session.vars);
        let mut sent = 0usize;
        loop {
            let next = match &watch {
                Some(w) => tokio::select! {
                    next = stream.next() => next,
                    _ = w.closed() => {
                        tracing::debug!("subscribe client went away");
                        return Err(AdapterError::ConnectionClosed.into());
                    }
                },
                None => stream.next().await,
            };
            let batch = match next {
                None => break,
                Some(Ok(batch)) => batch,
                Some(Err(e)) => return Ok(Response::Error(Box::new(e.to_error_info()))),
            };
            if batch.num_rows() == 0 && !options.header {
                continue;
            }
            let rows = batch.num_rows();
            let data = crate::copy::render(
                stream.desc(),
                &[batch],
                &options,
                &time_zone,
                &format_options,
            )?;
            options.header = false;
            for d in data {
                client.feed(PgWireBackendMessage::CopyData(d)).await?;
            }
            client.flush().await?;
            sent += rows;
        }
        client
            .send(PgWireBackendMessage::CopyDone(CopyDone::new()))
            .await?;
        Ok(Response::Execution(Tag::new("COPY").with_rows(sent)))
    }

    /// Execute one statement with the session's timeout, watching for the
    /// client going away.
    async fn run<C>(
        &self,
        client: &mut C,
        session: &mut Session,
        stmt: &Statement,
        params: Option<&ParamValues>,
    ) -> Result<ExecuteResponse, AdapterError>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if client.transaction_status() == TransactionStatus::Error
            && session.status == TxnStatus::InBlock
        {
            // A cancelled statement left the transaction failed.
            session.status = TxnStatus::Failed;
        }
        let timeout = session.vars.statement_timeout;
        let watch = self.sockets.watch(&client.socket_addr());
        let mut ctx = ExecCtx::default();
        let result = {
            let work = self.coord.execute(session, stmt, params, &mut ctx);
            let guarded = async {
                match &watch {
                    Some(w) => tokio::select! {
                        r = work => r,
                        _ = w.closed() => Err(AdapterError::ConnectionClosed),
                    },
                    None => work.await,
                }
            };
            if timeout.is_zero() {
                guarded.await
            } else {
                match tokio::time::timeout(timeout, guarded).await {
                    Ok(r) => r,
                    Err(_) => Err(AdapterError::StatementTimeout),
                }
            }
        };
        if result.is_err() && session.status == TxnStatus::InBlock {
            session.status = TxnStatus::Failed;
        }
        if let Err(e) = &result {
            if e.is_fenced() {
                tracing::error!("this process was fenced by a newer one; statements will fail");
            }
            tracing::debug!(error = %e, "statement failed");
        }
        for n in ctx.notices {
            let _ = client.feed(notice(n)).await;
        }
        result
    }
}

struct ParamProvider {
    params: HashMap<String, String>,
}

impl ServerParameterProvider for ParamProvider {
    fn server_parameters<C: ClientInfo>(&self, _client: &C) -> Option<HashMap<String, String>> {
        Some(self.params.clone())
    }
}

#[async_trait]
impl StartupHandler for FreshetHandler {
    async fn on_startup<C>(
        &self,
        client: &mut C,
        message: PgWireFrontendMessage,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let PgWireFrontendMessage::Startup(ref startup) = message else {
            return Ok(());
        };
        protocol_negotiation(client, startup).await?;
        let Ok(permit) = Arc::clone(&self.connection_slots).try_acquire_owned() else {
            tracing::warn!(
                max_connections = self.max_connections,
                "refused a connection: too many clients"
            );
            return Err(PgWireError::UserError(Box::new(ErrorInfo::new(
                "FATAL".into(),
                sqlstate::TOO_MANY_CONNECTIONS.into(),
                format!(
                    "sorry, too many clients already (max_connections is {})",
                    self.max_connections
                ),
            ))));
        };
        client.session_extensions().insert(ConnectionPermit(permit));
        save_startup_parameters_to_metadata(client, startup);
        let metadata = client.metadata().clone();
        let user = metadata
            .get(pgwire::api::METADATA_USER)
            .cloned()
            .unwrap_or_else(|| "freshet".into());
        let database = metadata
            .get(pgwire::api::METADATA_DATABASE)
            .cloned()
            .unwrap_or_else(|| user.clone());
        if self
            .coord
            .catalog_state()
            .database_by_name(&database)
            .is_none()
        {
            return Err(PgWireError::UserError(Box::new(ErrorInfo::new(
                "FATAL".into(),
                sqlstate::INVALID_CATALOG_NAME.into(),
                format!("database \"{database}\" does not exist"),
            ))));
        }
        let mut session = Session::new(user.clone(), database, self.coord.base_session_state());
        // Startup parameters act like SET; bad ones are refused like Postgres does.
        for (key, value) in &metadata {
            let name = key.to_lowercase();
            if matches!(
                name.as_str(),
                "user" | "database" | "options" | "replication"
            ) {
                continue;
            }
            let value = freshet_planner::SetValue::Values(vec![value.clone()]);
            let defaults = session.reset_vars.clone();
            match session.vars.set(&name, &value, &defaults) {
                Ok(()) | Err(AdapterError::UnknownVariable(_)) => {}
                Err(e) => {
                    let (code, message) = e.code_and_message();
                    return Err(PgWireError::UserError(Box::new(ErrorInfo::new(
                        "FATAL".into(),
                        code.into(),
                        message,
                    ))));
                }
            }
        }
        session.reset_vars = session.vars.clone();
        session.refresh_df();
        let (pid, key) = self.pids.generate(client);
        client.set_pid_and_secret_key(pid, key.clone());
        let (handle, guard) = self.coord.connections.register(pid, key);
        client.session_extensions().insert(handle);
        client.session_extensions().insert(guard);
        let mut params = HashMap::new();
        for (k, v) in [
            ("server_version", SERVER_VERSION.to_string()),
            ("server_encoding", "UTF8".into()),
            ("client_encoding", "UTF8".into()),
            ("DateStyle", session.vars.datestyle.clone()),
            ("IntervalStyle", session.vars.intervalstyle.clone()),
            ("TimeZone", session.vars.timezone.clone()),
            ("integer_datetimes", "on".into()),
            ("standard_conforming_strings", "on".into()),
            ("is_superuser", "off".into()),
            ("session_authorization", user),
            ("application_name", session.vars.application_name.clone()),
            ("default_transaction_read_only", "off".into()),
        ] {
            params.insert(k.to_string(), v);
        }
        client
            .session_extensions()
            .insert(SessionSlot(tokio::sync::Mutex::new(session)));
        finish_authentication(client, &ParamProvider { params }).await
    }
}

#[async_trait]
impl SimpleQueryHandler for FreshetHandler {
    async fn do_query<C>(&self, client: &mut C, query: &str) -> PgWireResult<Vec<Response>>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let slot = session_slot(client)?;
        let mut session = slot.0.lock().await;
        let stmts = match parse(query) {
            Ok(s) => s,
            Err(e) => {
                if session.status == TxnStatus::InBlock {
                    session.status = TxnStatus::Failed;
                }
                return Ok(vec![Response::Error(Box::new(
                    AdapterError::Plan(e).to_error_info(),
                ))]);
            }
        };
        if stmts.is_empty() {
            return Ok(vec![Response::EmptyQuery]);
        }
        let mut responses = Vec::with_capacity(stmts.len());
        for stmt in &stmts {
            match self.run(client, &mut session, stmt, None).await {
                Ok(resp) => {
                    let copy_in = matches!(resp, ExecuteResponse::CopyIn { .. });
                    let response = self
                        .respond(client, &session, resp, &Format::UnifiedText)
                        .await?;
                    let failed = matches!(response, Response::Error(_));
                    responses.push(response);
                    if failed {
                        break;
                    }
                    if copy_in {
                        // The rest of the query string waits for the COPY data,
                        // which this protocol flow cannot interleave.
                        break;
                    }
                }
                Err(e) => {
                    responses.push(Response::Error(Box::new(e.to_error_info())));
                    break;
                }
            }
        }
        Ok(responses)
    }
}

/// Parses statements for the extended protocol and describes them.
#[derive(Debug)]
pub struct FreshetParser {
    coord: Arc<Coordinator>,
}

async fn describe(
    coord: &Coordinator,
    session: &Session,
    stmt: &Statement,
) -> Result<(Vec<Option<DataType>>, Option<RelationDesc>), AdapterError> {
    let plan = coord.plan(session, stmt, None).await?;
    let text = |name: &str| {
        RelationDesc::new(vec![ColumnDesc {
            name: name.into(),
            ty: PgType::Text,
            nullable: false,
        }])
    };
    Ok(match plan {
        Plan::Select(q) => (placeholder_types(&q.logical)?, Some(q.desc)),
        Plan::SelectAt { query, .. } => (placeholder_types(&query.logical)?, Some(query.desc)),
        Plan::Write(w) => (
            placeholder_types(&w.source.logical)?,
            w.returning.map(|r| r.desc),
        ),
        Plan::Rows { desc, .. } => (vec![], Some(desc)),
        Plan::Explain(..) | Plan::ExplainPeek(_) => (vec![], Some(text("QUERY PLAN"))),
        Plan::Peek(p) => (vec![], Some(p.desc)),
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
        Plan::ShowVariable(name) => (vec![], Some(text(&name))),
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
    })
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
        let (param_types, desc) = describe(&self.coord, &session, &stmt).await?;
        Ok(Some(Prepared {
            stmt: Some(stmt),
            param_types,
            desc,
        }))
    }

    fn get_parameter_types(&self, stmt: &Prepared) -> PgWireResult<Vec<Type>> {
        Ok(stmt
            .param_types
            .iter()
            .map(|t| {
                t.as_ref()
                    .and_then(PgType::from_arrow)
                    .map(|pg| wire_type(&pg))
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
            .run(client, &mut session, stmt, params.as_ref())
            .await?;
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

#[async_trait]
impl CopyHandler for FreshetHandler {
    async fn on_copy_data<C>(&self, client: &mut C, copy_data: CopyData) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let slot = session_slot(client)?;
        let mut session = slot.0.lock().await;
        if let Some(copy) = session.copy_in.as_mut() {
            copy.push(&copy_data.data, self.coord.queries.per_query());
        }
        Ok(())
    }

    async fn on_copy_done<C>(&self, client: &mut C, _done: CopyDone) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let slot = session_slot(client)?;
        let mut session = slot.0.lock().await;
        let copy = session
            .copy_in
            .take()
            .ok_or_else(|| AdapterError::Protocol("no COPY in progress".into()))?;
        let n = self.coord.copy_in(&mut session, copy).await?;
        client
            .send(PgWireBackendMessage::CommandComplete(
                Tag::new("COPY").with_rows(n).into(),
            ))
            .await?;
        Ok(())
    }

    async fn on_copy_fail<C>(&self, client: &mut C, fail: CopyFail) -> PgWireError
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if let Ok(slot) = session_slot(client) {
            let mut session = slot.0.lock().await;
            session.copy_in = None;
            if session.status == TxnStatus::InBlock {
                session.status = TxnStatus::Failed;
            }
        }
        PgWireError::UserError(Box::new(ErrorInfo::new(
            "ERROR".into(),
            sqlstate::QUERY_CANCELED.into(),
            format!("COPY from stdin failed: {}", fail.message),
        )))
    }
}
