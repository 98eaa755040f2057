//! Talking to the upstream PostgreSQL outside replication: connecting,
//! checking that it can replicate, and reading a publication's tables
//! (what `CREATE SOURCE` learns before it commits anything).

use std::time::Duration;

use freshet_catalog::{PostgresSourceTable, PostgresUpstreamColumn, SourceShape};
use freshet_repr::{ColumnDesc, PgType, RelationDesc};
use tokio_postgres::{Client, NoTls};

use crate::error::{Result, SourceError};

/// How long connecting to the upstream may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Where a PostgreSQL source's upstream is, with the password read from
/// its secret (never printed).
#[derive(Clone, PartialEq, Eq)]
pub struct PostgresEndpoint {
    /// Host name or address.
    pub host: String,
    /// Port.
    pub port: u16,
    /// User.
    pub user: String,
    /// Password, if the connection names a secret.
    pub password: Option<String>,
    /// Database.
    pub database: String,
}

impl std::fmt::Debug for PostgresEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "postgres://{}@{}:{}/{}",
            self.user, self.host, self.port, self.database
        )
    }
}

impl PostgresEndpoint {
    /// Connect for ordinary queries; the connection's task runs on the
    /// current runtime until the client is dropped.
    pub(crate) async fn connect(&self) -> Result<Client> {
        let mut config = tokio_postgres::Config::new();
        config
            .host(&self.host)
            .port(self.port)
            .user(&self.user)
            .dbname(&self.database)
            .application_name("freshet")
            .connect_timeout(CONNECT_TIMEOUT);
        if let Some(p) = &self.password {
            config.password(p);
        }
        let (client, connection) = tokio::time::timeout(CONNECT_TIMEOUT, config.connect(NoTls))
            .await
            .map_err(|_| SourceError::Upstream(format!("connecting to {self:?} timed out")))?
            .map_err(|e| upstream_error(&format!("connecting to {self:?}"), &e))?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "upstream PostgreSQL connection ended");
            }
        });
        Ok(client)
    }
}

/// An upstream error as a source error, with PostgreSQL's own message.
pub(crate) fn upstream_error(context: &str, e: &tokio_postgres::Error) -> SourceError {
    match e.as_db_error() {
        Some(db) => SourceError::Upstream(format!("{context}: {}", db.message())),
        None => SourceError::Upstream(format!("{context}: {e}")),
    }
}

/// Connect and check that the upstream can serve a source: logical
/// replication on, and a user allowed to replicate. What `CREATE
/// CONNECTION` checks (unless `VALIDATE = false`) and every source
/// re-checks.
pub async fn validate(endpoint: &PostgresEndpoint) -> Result<()> {
    let client = endpoint.connect().await?;
    check_replication(&client).await
}

async fn check_replication(client: &Client) -> Result<()> {
    let row = client
        .query_one("SELECT current_setting('wal_level')", &[])
        .await
        .map_err(|e| upstream_error("reading wal_level", &e))?;
    let wal_level: String = row.get(0);
    if wal_level != "logical" {
        return Err(SourceError::Invalid(format!(
            "the upstream's wal_level is {wal_level}; logical replication needs wal_level = logical (set it in postgresql.conf and restart PostgreSQL)"
        )));
    }
    let row = client
        .query_one(
            "SELECT current_user::text, rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user",
            &[],
        )
        .await
        .map_err(|e| upstream_error("reading the user's privileges", &e))?;
    let (user, may): (String, bool) = (row.get(0), row.get(1));
    if !may {
        return Err(SourceError::Invalid(format!(
            "upstream user \"{user}\" may not replicate (ALTER ROLE {user} REPLICATION)"
        )));
    }
    Ok(())
}

/// Which tables of a publication a source asks for.
#[derive(Clone, Debug)]
pub struct TableRequest {
    /// `FOR TABLES`: `[schema.]table` and the subsource name; `None`: all
    /// of the publication's tables.
    pub tables: Option<Vec<(Vec<String>, Option<String>)>>,
    /// `TEXT COLUMNS`: `[schema.]table.column`.
    pub text_columns: Vec<Vec<String>>,
}

/// Look up what a new source ingests: the publication's tables (all, or
/// those asked for), their columns and how Freshet types them. Refuses a
/// missing publication, a table outside it, a table without `REPLICA
/// IDENTITY FULL` and a column of a type Freshet lacks (unless listed in
/// `TEXT COLUMNS`).
pub async fn purify(
    endpoint: &PostgresEndpoint,
    publication: &str,
    request: &TableRequest,
) -> Result<(Vec<PostgresSourceTable>, SourceShape)> {
    let client = endpoint.connect().await?;
    check_replication(&client).await?;
    let exists = client
        .query_opt(
            "SELECT 1 FROM pg_publication WHERE pubname = $1",
            &[&publication],
        )
        .await
        .map_err(|e| upstream_error("reading pg_publication", &e))?;
    if exists.is_none() {
        return Err(SourceError::Invalid(format!(
            "publication \"{publication}\" does not exist upstream (CREATE PUBLICATION {publication} FOR TABLE ... in the upstream database)"
        )));
    }
    let rows = client
        .query(
            "SELECT c.oid, n.nspname::text, c.relname::text, c.relreplident::text \
             FROM pg_publication_tables p \
             JOIN pg_namespace n ON n.nspname = p.schemaname \
             JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = p.tablename \
             WHERE p.pubname = $1 ORDER BY 2, 3",
            &[&publication],
        )
        .await
        .map_err(|e| upstream_error("reading the publication's tables", &e))?;
    let published: Vec<(u32, String, String, String)> = rows
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect();
    let chosen = choose_tables(publication, &published, request)?;
    if chosen.is_empty() {
        return Err(SourceError::Invalid(format!(
            "publication \"{publication}\" has no tables"
        )));
    }
    let mut tables = Vec::new();
    let mut outputs = Vec::new();
    let mut text_used = vec![false; request.text_columns.len()];
    for ((oid, schema, name, identity), output) in chosen {
        let qualified = format!("{schema}.{name}");
        if identity != "f" {
            return Err(SourceError::Invalid(format!(
                "upstream table {qualified} must have REPLICA IDENTITY FULL to be ingested (ALTER TABLE {qualified} REPLICA IDENTITY FULL)"
            )));
        }
        let rows = client
            .query(
                "SELECT attname::text, atttypid, atttypmod, attnotnull FROM pg_attribute \
                 WHERE attrelid = $1 AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
                &[&oid],
            )
            .await
            .map_err(|e| upstream_error("reading a table's columns", &e))?;
        let mut columns = Vec::new();
        let mut descs = Vec::new();
        for r in rows {
            let (column, type_oid, type_modifier, not_null): (String, u32, i32, bool) =
                (r.get(0), r.get(1), r.get(2), r.get(3));
            let as_text = request.text_columns.iter().enumerate().any(|(i, t)| {
                let hit = names_column(t, &schema, &name, &column);
                if hit {
                    text_used[i] = true;
                }
                hit
            });
            let ty = if as_text {
                PgType::Text
            } else {
                freshet_type(type_oid, type_modifier).ok_or_else(|| {
                    SourceError::Invalid(format!(
                        "column {qualified}.{column} has a type Freshet does not support (oid {type_oid}); list it in TEXT COLUMNS to ingest its text form"
                    ))
                })?
            };
            descs.push(ColumnDesc {
                name: column.clone(),
                ty,
                nullable: !not_null,
            });
            columns.push(PostgresUpstreamColumn {
                name: column,
                type_oid,
                type_modifier,
                as_text,
            });
        }
        outputs.push((output.clone(), RelationDesc::new(descs)));
        tables.push(PostgresSourceTable {
            oid,
            schema,
            name,
            output,
            columns,
        });
    }
    if let Some(i) = text_used.iter().position(|used| !used) {
        return Err(SourceError::Invalid(format!(
            "TEXT COLUMNS entry {} names no column of an ingested table",
            request.text_columns[i].join(".")
        )));
    }
    let progress = RelationDesc::new(vec![ColumnDesc {
        name: "lsn".into(),
        ty: PgType::Int8,
        nullable: true,
    }]);
    Ok((tables, SourceShape { outputs, progress }))
}

/// The Freshet type of an upstream column: the same type where Freshet
/// has it (`json` becomes `jsonb`, as in Materialize); `None` otherwise.
pub(crate) fn freshet_type(type_oid: u32, type_modifier: i32) -> Option<PgType> {
    const JSON: u32 = 114;
    if type_oid == JSON {
        return Some(PgType::Jsonb);
    }
    match PgType::from_oid(type_oid, type_modifier)? {
        // Arrays and catalog vectors are not ingested yet.
        PgType::Array(_) | PgType::Int2Vector | PgType::OidVector => None,
        // Beyond Decimal128's 38 digits.
        PgType::Numeric { .. } if type_modifier > 4 && ((type_modifier - 4) >> 16) > 38 => None,
        t => Some(t),
    }
}

/// Whether `TEXT COLUMNS` entry `entry` (`[schema.]table.column`) names
/// `schema.table.column`.
fn names_column(entry: &[String], schema: &str, table: &str, column: &str) -> bool {
    match entry {
        [t, c] => t == table && c == column,
        [s, t, c] => s == schema && t == table && c == column,
        _ => false,
    }
}

/// A published table: oid, schema, name, `relreplident`.
type Published = (u32, String, String, String);

/// The published tables a source ingests, each with its subsource's name.
fn choose_tables(
    publication: &str,
    published: &[Published],
    request: &TableRequest,
) -> Result<Vec<(Published, String)>> {
    let Some(asked) = &request.tables else {
        let chosen: Vec<(Published, String)> =
            published.iter().map(|p| (p.clone(), p.2.clone())).collect();
        if let Some(dup) = chosen
            .iter()
            .enumerate()
            .find(|(i, (_, n))| chosen[..*i].iter().any(|(_, m)| m == n))
        {
            return Err(SourceError::Invalid(format!(
                "publication \"{publication}\" has two tables named {}; use FOR TABLES (schema.table AS name, ...)",
                dup.1.1
            )));
        }
        return Ok(chosen);
    };
    let mut chosen: Vec<(Published, String)> = Vec::new();
    for (name, local) in asked {
        let matches: Vec<&Published> = published
            .iter()
            .filter(|p| match name.as_slice() {
                [t] => &p.2 == t,
                [s, t] => &p.1 == s && &p.2 == t,
                _ => false,
            })
            .collect();
        let found = match matches.as_slice() {
            [one] => (*one).clone(),
            [] => {
                return Err(SourceError::Invalid(format!(
                    "table {} is not in publication \"{publication}\"",
                    name.join(".")
                )));
            }
            _ => {
                return Err(SourceError::Invalid(format!(
                    "table name {} is ambiguous in publication \"{publication}\"; qualify it with its schema",
                    name.join(".")
                )));
            }
        };
        let output = local.clone().unwrap_or_else(|| found.2.clone());
        if chosen.iter().any(|(p, o)| p.0 == found.0 || *o == output) {
            return Err(SourceError::Invalid(format!(
                "table {} or subsource name {output} is listed twice",
                name.join(".")
            )));
        }
        chosen.push((found, output));
    }
    Ok(chosen)
}

/// A name for a new source's replication slot: random, so that no two
/// sources (of this process, or of another Freshet on the same upstream)
/// share one.
pub fn new_slot_name() -> String {
    format!("freshet_{:016x}", rand::random::<u64>())
}

/// Drop replication slot `slot` upstream if it exists: when its source
/// is dropped, or before a source makes it again after a crash during
/// its snapshot. Waits a little for a walsender still holding it to let
/// go.
pub async fn drop_slot(endpoint: &PostgresEndpoint, slot: &str) -> Result<()> {
    let client = endpoint.connect().await?;
    drop_slot_with(&client, slot).await
}

pub(crate) async fn drop_slot_with(client: &Client, slot: &str) -> Result<()> {
    for attempt in 0..50 {
        let row = client
            .query_opt(
                "SELECT active FROM pg_replication_slots WHERE slot_name = $1",
                &[&slot],
            )
            .await
            .map_err(|e| upstream_error("reading pg_replication_slots", &e))?;
        match row {
            None => return Ok(()),
            Some(r) if r.get::<_, bool>(0) && attempt < 49 => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Some(_) => {
                client
                    .execute("SELECT pg_drop_replication_slot($1)", &[&slot])
                    .await
                    .map_err(|e| {
                        upstream_error(&format!("dropping replication slot {slot}"), &e)
                    })?;
                tracing::info!(%slot, "dropped upstream replication slot");
                return Ok(());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn published() -> Vec<Published> {
        vec![
            (1, "public".into(), "t".into(), "f".into()),
            (2, "public".into(), "u".into(), "f".into()),
            (3, "other".into(), "t".into(), "f".into()),
        ]
    }

    #[test]
    fn chooses_tables_by_name_and_refuses_ambiguity() {
        let all = TableRequest {
            tables: None,
            text_columns: vec![],
        };
        let err = choose_tables("p", &published(), &all).unwrap_err();
        assert!(err.to_string().contains("two tables named t"), "{err}");
        let some = TableRequest {
            tables: Some(vec![
                (vec!["other".into(), "t".into()], Some("t2".into())),
                (vec!["u".into()], None),
            ]),
            text_columns: vec![],
        };
        let chosen = choose_tables("p", &published(), &some).unwrap();
        assert_eq!(
            chosen
                .iter()
                .map(|(p, o)| (p.0, o.as_str()))
                .collect::<Vec<_>>(),
            vec![(3, "t2"), (2, "u")]
        );
        let ambiguous = TableRequest {
            tables: Some(vec![(vec!["t".into()], None)]),
            text_columns: vec![],
        };
        let err = choose_tables("p", &published(), &ambiguous).unwrap_err();
        assert!(err.to_string().contains("ambiguous"), "{err}");
        let missing = TableRequest {
            tables: Some(vec![(vec!["nope".into()], None)]),
            text_columns: vec![],
        };
        let err = choose_tables("p", &published(), &missing).unwrap_err();
        assert!(err.to_string().contains("not in publication"), "{err}");
    }

    #[test]
    fn types_upstream_columns() {
        assert_eq!(freshet_type(23, -1), Some(PgType::Int4));
        assert_eq!(freshet_type(114, -1), Some(PgType::Jsonb));
        assert_eq!(
            freshet_type(1700, ((12 << 16) | 2) + 4),
            Some(PgType::Numeric {
                typmod: Some((12, 2))
            })
        );
        assert_eq!(freshet_type(1700, ((60 << 16) | 2) + 4), None);
        assert_eq!(freshet_type(1007, -1), None, "int4[] is not ingested yet");
        assert_eq!(freshet_type(600, -1), None, "point");
    }
}
