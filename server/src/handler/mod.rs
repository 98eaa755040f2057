//! The pgwire front end: startup (`startup.rs`), the simple query protocol
//! (`simple.rs`), the extended query protocol (`extended.rs`), COPY
//! (`copy.rs`) and cancel; this file holds the per-connection handler and
//! what every protocol shares (turning responses into pgwire results).

mod copy;
mod extended;
mod simple;
mod startup;

use std::fmt::Debug;
use std::sync::Arc;

use datafusion::common::ParamValues;
use freshet_planner::parser::Statement;
use freshet_repr::RelationDesc;
use freshet_repr::sqlstate;
use futures::sink::{Sink, SinkExt};
use futures::stream;
use pgwire::api::auth::StartupHandler;
use pgwire::api::cancel::DefaultCancelHandler;
use pgwire::api::copy::CopyHandler;
use pgwire::api::portal::Format;
use pgwire::api::query::{ExtendedQueryHandler, SimpleQueryHandler};
use pgwire::api::results::{CopyResponse, DataRowEncoder, FieldInfo, QueryResponse, Response, Tag};
use pgwire::api::store::PortalStore;
use pgwire::api::{ClientInfo, PgWireServerHandlers, RandomPidSecretKeyGenerator};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::PgWireBackendMessage;
use pgwire::messages::copy::{CopyDone, CopyOutResponse};
use pgwire::messages::response::TransactionStatus;
use pgwire::types::format::FormatOptions;

use crate::coordinator::{Coordinator, ExecCtx, ExecuteResponse};
use crate::encode::{encode_batches, field_infos};
use crate::error::AdapterError;
use crate::session::{Session, TxnStatus};
use crate::vars::Vars;
use crate::watch::Sockets;

/// A connection's session, kept in pgwire's per-connection extensions.
pub struct SessionSlot(pub tokio::sync::Mutex<Session>);

/// A prepared statement: the parsed statement and what `Describe` reports.
#[derive(Clone, Debug)]
pub struct Prepared {
    /// The statement (`None`: empty).
    pub stmt: Option<Statement>,
    /// Parameter types inferred at `Parse`, as fields carrying their
    /// Postgres type ([`freshet_repr::PgType::of_field`]).
    pub param_types: Vec<Option<arrow::datatypes::FieldRef>>,
    /// Result columns, if the statement returns rows.
    pub desc: Option<RelationDesc>,
    /// The statement's plan, decided at Parse, if it is one that is bound
    /// again at each Execute (a peek, an `INSERT ... VALUES`).
    pub plan: Option<Arc<crate::coordinator::PreparedPlan>>,
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

/// Finish a `DEALLOCATE`: SQL-prepared and protocol-level statements
/// share one namespace (as in PostgreSQL), so the name goes from the
/// connection's statement store too; unknown to both, it is 26000.
fn deallocate<S: PortalStore>(
    store: &S,
    resp: ExecuteResponse,
) -> Result<ExecuteResponse, AdapterError> {
    match resp {
        ExecuteResponse::Deallocate { name: None, .. } => {
            store.clear_statements();
            Ok(ExecuteResponse::Command("DEALLOCATE ALL".into()))
        }
        ExecuteResponse::Deallocate {
            name: Some(name),
            known,
        } => {
            let protocol = store.get_statement(&name).is_some();
            store.rm_statement(&name);
            if known || protocol {
                Ok(ExecuteResponse::Command("DEALLOCATE".into()))
            } else {
                Err(AdapterError::data(
                    freshet_repr::sqlstate::INVALID_SQL_STATEMENT_NAME,
                    format!("prepared statement \"{name}\" does not exist"),
                ))
            }
        }
        other => Ok(other),
    }
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
        ExecuteResponse::Deallocate { name, .. } => {
            Response::Execution(Tag::new(if name.is_some() {
                "DEALLOCATE"
            } else {
                "DEALLOCATE ALL"
            }))
        }
        ExecuteResponse::TransactionStart(tag) => Response::TransactionStart(Tag::new(&tag)),
        ExecuteResponse::TransactionEnd(tag) => Response::TransactionEnd(Tag::new(&tag)),
        ExecuteResponse::CopyIn { columns, binary } => Response::CopyIn(CopyResponse::new(
            i8::from(binary),
            columns,
            stream::empty(),
        )),
        ExecuteResponse::Subscribe { .. } => {
            // Subscribes stream through `FreshetHandler::stream_subscribe`.
            return Err(AdapterError::Internal("a subscribe reached to_response".into()).into());
        }
        ExecuteResponse::CopyOut { .. } => {
            // COPY TO streams through `FreshetHandler::send_copy_out`.
            return Err(AdapterError::Internal("a COPY TO reached to_response".into()).into());
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
            ExecuteResponse::CopyOut {
                desc,
                batches,
                options,
            } => {
                self.send_copy_out(client, session, &desc, &batches, &options)
                    .await
            }
            other => to_response(other, &session.vars, format),
        }
    }

    /// Send a `COPY ... TO STDOUT`'s data. Sent here rather than through
    /// pgwire's `CopyResponse`, which counts the messages it sends as rows
    /// (a CSV header or a binary header without rows would count as one).
    async fn send_copy_out<C>(
        &self,
        client: &mut C,
        session: &Session,
        desc: &RelationDesc,
        batches: &[arrow::array::RecordBatch],
        options: &freshet_planner::CopyOptions,
    ) -> PgWireResult<Response>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let data = crate::copy::render(
            desc,
            batches,
            options,
            &arrow_time_zone(&session.vars),
            &format_options(&session.vars),
        )?;
        let columns = desc.arity();
        let arity = i16::try_from(columns)
            .map_err(|_| AdapterError::Unsupported("too many columns to COPY".into()))?;
        let binary = i8::from(options.format == freshet_planner::CopyFormat::Binary);
        client
            .send(PgWireBackendMessage::CopyOutResponse(CopyOutResponse::new(
                binary,
                arity,
                vec![i16::from(binary); columns],
            )))
            .await?;
        for d in data {
            client.feed(PgWireBackendMessage::CopyData(d)).await?;
        }
        client
            .send(PgWireBackendMessage::CopyDone(CopyDone::new()))
            .await?;
        let rows = batches.iter().map(|b| b.num_rows()).sum();
        Ok(Response::Execution(Tag::new("COPY").with_rows(rows)))
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
        prepared_plan: Option<Arc<crate::coordinator::PreparedPlan>>,
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
        let mut ctx = ExecCtx {
            prepared_plan,
            ..ExecCtx::default()
        };
        let result = {
            let mut work = std::pin::pin!(self.coord.execute(session, stmt, params, &mut ctx));
            // A statement that finishes at its first poll (a peek of
            // published rows, a `SET`) cannot outlive its client or its
            // timeout: it needs neither the socket watch nor a timer.
            match futures::poll!(work.as_mut()) {
                std::task::Poll::Ready(r) => r,
                std::task::Poll::Pending => {
                    let watch = self.sockets.watch(&client.socket_addr());
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

pub use extended::FreshetParser;
