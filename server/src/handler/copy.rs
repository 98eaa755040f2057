//! `COPY ... FROM STDIN`: CopyData, CopyDone and CopyFail.

use std::fmt::Debug;

use async_trait::async_trait;
use freshet_repr::sqlstate;
use futures::sink::{Sink, SinkExt};
use pgwire::api::ClientInfo;
use pgwire::api::copy::CopyHandler;
use pgwire::api::results::Tag;
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::PgWireBackendMessage;
use pgwire::messages::copy::{CopyData, CopyDone, CopyFail};

use super::{FreshetHandler, session_slot};
use crate::error::AdapterError;
use crate::session::TxnStatus;

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
        self.coord.copy_data(&mut session, &copy_data.data).await;
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
