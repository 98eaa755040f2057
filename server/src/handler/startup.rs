//! Startup: parameters, authentication, and the session it opens.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::Arc;

use async_trait::async_trait;
use freshet_repr::sqlstate;
use futures::sink::Sink;
use pgwire::api::auth::{
    ServerParameterProvider, StartupHandler, finish_authentication, protocol_negotiation,
    save_startup_parameters_to_metadata,
};
use pgwire::api::{ClientInfo, PidSecretKeyGenerator};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};

use super::{ConnectionPermit, FreshetHandler, SessionSlot};
use crate::error::AdapterError;
use crate::session::Session;
use crate::vars::SERVER_VERSION;

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
        session.add_functions(self.coord.session_sequence_functions());
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
        let (pid, key) = self.pids.generate(client);
        client.set_pid_and_secret_key(pid, key.clone());
        let temp_schema = self.coord.temp_schema_name();
        session.temp_guard = Some(crate::coordinator::TempSchemaGuard::new(
            Arc::clone(&self.coord),
            session.database.clone(),
            temp_schema.clone(),
        ));
        session.temp_schema = Some(temp_schema);
        session.pid = pid;
        // Session functions (`pg_backend_pid()`, `version()`, settings)
        // are registered once everything they answer is known.
        session.refresh_df();
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
