//! What the catalog records of a connection (`CREATE CONNECTION`): how to
//! reach an external system, named once and used by any number of sources
//! (and, later, sinks). Credentials are not stored here: a connection
//! names the secret that holds them, so `ALTER SECRET` rotates a password
//! without touching anything that uses it.

use freshet_repr::GlobalId;
use serde::{Deserialize, Serialize};

/// An external system Freshet can connect to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConnectionSpec {
    /// `TO POSTGRES (...)`.
    Postgres(PostgresConnection),
    /// `TO KAFKA (...)`.
    Kafka(KafkaConnection),
}

impl ConnectionSpec {
    /// The connection type as `SHOW CONNECTIONS` names it.
    pub fn type_name(&self) -> &'static str {
        match self {
            ConnectionSpec::Postgres(_) => "postgres",
            ConnectionSpec::Kafka(_) => "kafka",
        }
    }

    /// The secrets it reads (dropping one needs `CASCADE`).
    pub fn secrets(&self) -> Vec<GlobalId> {
        match self {
            ConnectionSpec::Postgres(pg) => pg.password.into_iter().collect(),
            ConnectionSpec::Kafka(_) => Vec::new(),
        }
    }
}

/// How to reach a PostgreSQL database, as libpq's parameters name it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PostgresConnection {
    /// `HOST`.
    pub host: String,
    /// `PORT` (default 5432).
    pub port: u16,
    /// `USER`.
    pub user: String,
    /// `PASSWORD SECRET s`: the secret holding the password, if any.
    pub password: Option<GlobalId>,
    /// `DATABASE` (default `postgres`).
    pub database: String,
}

/// How to reach a Kafka cluster (any broker of it; the others are learnt
/// from its metadata).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KafkaConnection {
    /// `BROKER 'host:port'` or `BROKERS ('host:port', ...)`.
    pub brokers: Vec<String>,
}
