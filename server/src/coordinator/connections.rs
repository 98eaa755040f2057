//! Connections as the coordinator uses them: resolved (with the password
//! read from its secret) when a source is created or its ingestion starts,
//! and checked once at `CREATE CONNECTION`.

use freshet_catalog::{CatalogState, ConnectionSpec, ItemDetails, PostgresConnection};
use freshet_planner::statements::connection::CreateConnectionPlan;
use freshet_repr::GlobalId;
use freshet_sources::{PostgresEndpoint, SourceError};

use super::Coordinator;
use crate::error::{AdapterError, Result};

/// Where PostgreSQL connection `id` points, with its password.
pub(super) fn postgres_endpoint(catalog: &CatalogState, id: GlobalId) -> Result<PostgresEndpoint> {
    let item = catalog.get_item(id)?;
    let ItemDetails::Connection(spec) = &item.details else {
        return Err(AdapterError::Internal(format!("{id} is not a connection")));
    };
    let ConnectionSpec::Postgres(pg) = spec.as_ref() else {
        return Err(AdapterError::Internal(format!(
            "{id} is not a PostgreSQL connection"
        )));
    };
    endpoint(catalog, &item.name, pg)
}

/// The brokers of Kafka connection `id`.
pub(super) fn kafka_brokers(catalog: &CatalogState, id: GlobalId) -> Result<Vec<String>> {
    match &catalog.get_item(id)?.details {
        ItemDetails::Connection(spec) => match spec.as_ref() {
            ConnectionSpec::Kafka(k) => Ok(k.brokers.clone()),
            _ => Err(AdapterError::Internal(format!(
                "{id} is not a Kafka connection"
            ))),
        },
        _ => Err(AdapterError::Internal(format!("{id} is not a connection"))),
    }
}

/// A PostgreSQL connection's endpoint, its password read from the
/// catalog's secret.
fn endpoint(
    catalog: &CatalogState,
    name: &str,
    pg: &PostgresConnection,
) -> Result<PostgresEndpoint> {
    let password = match pg.password {
        Some(secret) => match &catalog.get_item(secret)?.details {
            ItemDetails::Secret(value) => {
                Some(String::from_utf8(value.expose().to_vec()).map_err(|_| {
                    AdapterError::Source(SourceError::Invalid(format!(
                        "the password secret of connection \"{name}\" is not UTF-8"
                    )))
                })?)
            }
            _ => return Err(AdapterError::Internal(format!("{secret} is not a secret"))),
        },
        None => None,
    };
    Ok(PostgresEndpoint {
        host: pg.host.clone(),
        port: pg.port,
        user: pg.user.clone(),
        password,
        database: pg.database.clone(),
    })
}

impl Coordinator {
    /// Check that a new connection's system can be reached and can serve
    /// sources (unless `VALIDATE = false`).
    pub(super) async fn validate_connection(&self, plan: &CreateConnectionPlan) -> Result<()> {
        if !plan.validate {
            return Ok(());
        }
        let ItemDetails::Connection(spec) = &plan.def.details else {
            return Err(AdapterError::Internal(
                "a connection without details".into(),
            ));
        };
        match spec.as_ref() {
            ConnectionSpec::Postgres(pg) => {
                let endpoint = endpoint(&self.catalog_state(), &plan.def.name, pg)?;
                freshet_sources::validate(&endpoint).await?;
            }
            ConnectionSpec::Kafka(k) => freshet_sources::validate_kafka(&k.brokers).await?,
        }
        Ok(())
    }
}
