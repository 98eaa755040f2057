//! The simple query protocol.

use std::fmt::Debug;

use async_trait::async_trait;
use freshet_planner::parser::parse;
use freshet_planner::statements::shapes::Shape;
use futures::sink::Sink;
use pgwire::api::portal::Format;
use pgwire::api::query::SimpleQueryHandler;
use pgwire::api::results::Response;
use pgwire::api::store::PortalStore;
use pgwire::api::{ClientInfo, ClientPortalStore};
use pgwire::error::{PgWireError, PgWireResult};
use pgwire::messages::PgWireBackendMessage;

use super::{FreshetHandler, session_slot};
use crate::coordinator::ExecuteResponse;
use crate::error::AdapterError;
use crate::session::TxnStatus;

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
        session.templates.forget_learned();
        let shape = match session.status {
            TxnStatus::Idle => Shape::of(query),
            _ => None,
        };
        if let Some(shaped) = shape
            .as_ref()
            .and_then(|shape| self.coord.shaped(&session, shape, query))
        {
            // A statement of a template planned before: run as Bind and
            // Execute of the template would, without parsing the text.
            let result = self
                .run(
                    client,
                    &mut session,
                    &shaped.template,
                    Some(&shaped.params),
                    Some(shaped.plan),
                )
                .await;
            let response = match result {
                Ok(resp) => {
                    self.respond(client, &session, resp, &Format::UnifiedText)
                        .await?
                }
                // The template's spans are the first text's: where an
                // error points is found in this text's own parse.
                Err(e) => {
                    let e = match parse(query).as_deref() {
                        Ok([stmt]) => e.at(query, stmt),
                        _ => e,
                    };
                    Response::Error(Box::new(e.to_error_info()))
                }
            };
            return Ok(vec![response]);
        }
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
            let result = self
                .run(client, &mut session, stmt, None, None)
                .await
                .and_then(|resp| super::deallocate(client.portal_store(), resp));
            match result {
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
                    responses.push(Response::Error(Box::new(e.at(query, stmt).to_error_info())));
                    break;
                }
            }
        }
        if let [stmt] = stmts.as_slice() {
            self.coord.learn_shape(&mut session, shape, query, stmt);
        }
        Ok(responses)
    }
}
