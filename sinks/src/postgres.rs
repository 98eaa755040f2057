//! The PostgreSQL target: a table holding each key's current row. Every
//! commit of the sink is one upstream transaction: the keys the range of
//! timestamps changed are deleted, the rows they now have are inserted
//! (both as one statement over arrays, `unnest`ed, so a commit costs two
//! statements whatever its size), and the sink's row in the progress table
//! is set to the range's end. PostgreSQL commits all of it or none, so the
//! table and the record of what reached it cannot disagree: a restart
//! reads the progress row and resumes exactly after it.
//!
//! Values travel as PostgreSQL text and are cast to the column's type in
//! the statement, so every type Freshet has (but arrays) needs no binary
//! encoding of its own. A table that does not exist is created with the
//! relation's columns and its key (`PRIMARY KEY`, or `UNIQUE NULLS NOT
//! DISTINCT` when a key column can be NULL); an existing one must have
//! the relation's columns.

use std::collections::HashMap;
use std::time::Duration;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::datatypes::DataType;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use freshet_catalog::{PostgresSinkSpec, SinkDetails};
use freshet_repr::{PgType, Timestamp};
use tokio_postgres::{Client, NoTls, Statement};

use crate::error::{Result, SinkError};
use crate::{Committed, SinkTarget};

/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A PostgreSQL sink's table, connected.
pub struct PostgresTarget {
    client: Client,
    identity: String,
    key: Vec<usize>,
    types: Vec<PgType>,
    delete: Statement,
    insert: Statement,
    progress: Statement,
    read_progress: Statement,
    table: String,
    /// The key columns, quoted, with their types' names.
    key_columns: Vec<(String, String)>,
}

impl PostgresTarget {
    /// Connect with `config`, create the tables if missing, and prepare
    /// the statements of a commit.
    pub async fn open(
        target: &SinkTarget,
        spec: &PostgresSinkSpec,
        config: &tokio_postgres::Config,
    ) -> Result<Self> {
        let details = &target.details;
        let client = connect(config).await?;
        ensure_tables(&client, details, spec).await?;
        let columns = &details.relation.columns;
        let table = qualified(&spec.table);
        let key_columns: Vec<&freshet_repr::ColumnDesc> =
            details.key.iter().map(|&k| &columns[k]).collect();
        let arrays = |n: usize| {
            (1..=n)
                .map(|i| format!("${i}::text[]"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let aliases = |n: usize| (0..n).map(|i| format!("c{i}")).collect::<Vec<_>>();
        // `=` (not `IS NOT DISTINCT FROM`, which no index serves): keys
        // with a NULL are deleted by statements of their own.
        let matches: Vec<String> = key_columns
            .iter()
            .enumerate()
            .map(|(i, c)| format!("t.{} = d.c{i}::{}", ident(&c.name), c.ty.sql_name()))
            .collect();
        let delete = format!(
            "DELETE FROM {table} AS t USING unnest({}) AS d({}) WHERE {}",
            arrays(key_columns.len()),
            aliases(key_columns.len()).join(", "),
            matches.join(" AND ")
        );
        let names: Vec<String> = columns.iter().map(|c| ident(&c.name)).collect();
        let casts: Vec<String> = columns
            .iter()
            .enumerate()
            .map(|(i, c)| format!("c{i}::{}", c.ty.sql_name()))
            .collect();
        let insert = format!(
            "INSERT INTO {table} ({}) SELECT {} FROM unnest({}) AS u({})",
            names.join(", "),
            casts.join(", "),
            arrays(columns.len()),
            aliases(columns.len()).join(", ")
        );
        let progress_table = qualified(&spec.progress_table);
        let progress = format!(
            "INSERT INTO {progress_table} (sink, frontier) VALUES ($1, $2) \
             ON CONFLICT (sink) DO UPDATE SET frontier = EXCLUDED.frontier"
        );
        let read_progress = format!("SELECT frontier FROM {progress_table} WHERE sink = $1");
        let prepare = |sql: String| {
            let client = &client;
            async move {
                client
                    .prepare(&sql)
                    .await
                    .map_err(|e| upstream("preparing", &e))
            }
        };
        Ok(PostgresTarget {
            identity: target.identity(),
            key: details.key.clone(),
            types: columns.iter().map(|c| c.ty.clone()).collect(),
            delete: prepare(delete).await?,
            insert: prepare(insert).await?,
            progress: prepare(progress).await?,
            read_progress: prepare(read_progress).await?,
            key_columns: key_columns
                .iter()
                .map(|c| (ident(&c.name), c.ty.sql_name()))
                .collect(),
            table,
            client,
        })
    }

    /// The sink's progress row: the frontier to resume from.
    pub async fn recover(&mut self) -> Result<Option<Timestamp>> {
        let rows = self
            .client
            .query(&self.read_progress, &[&self.identity])
            .await
            .map_err(|e| upstream("reading the sink's progress", &e))?;
        rows.first()
            .map(|r| {
                let f: i64 = r.get(0);
                Timestamp::try_from(f).map_err(|_| {
                    SinkError::Fatal(format!("the sink's progress row holds frontier {f}"))
                })
            })
            .transpose()
    }

    /// Apply the changes at times in `[lower, upper)` (shaped upsert rows:
    /// `mz_timestamp`, `mz_state`, key columns, value columns) and move
    /// the progress row to `upper`, in one transaction.
    pub async fn commit(
        &mut self,
        _lower: Timestamp,
        upper: Timestamp,
        batches: &[RecordBatch],
    ) -> Result<Committed> {
        // Each key's last change in the range decides what the table holds.
        let width = self.types.len();
        let key_len = self.key.len();
        let mut last: HashMap<Vec<Option<String>>, Option<Vec<Option<String>>>> = HashMap::new();
        let mut bytes = 0u64;
        for batch in batches {
            let states = batch
                .column(1)
                .as_string_opt::<i32>()
                .ok_or_else(|| SinkError::Internal("a sink batch without mz_state".into()))?;
            let texts: Vec<Vec<Option<String>>> = batch
                .columns()
                .iter()
                .skip(2)
                .zip(self.shaped_types())
                .map(|(c, ty)| text_column(c, ty))
                .collect::<Result<_>>()?;
            if texts.len() != width {
                return Err(SinkError::Internal(format!(
                    "a sink batch with {} columns for a table of {width}",
                    texts.len()
                )));
            }
            for i in 0..batch.num_rows() {
                let key: Vec<Option<String>> =
                    texts[..key_len].iter().map(|c| c[i].clone()).collect();
                let row = (states.value(i) != "delete").then(|| {
                    let values = &texts[key_len..];
                    let mut row = vec![None; width];
                    let mut v = 0;
                    for (pos, slot) in row.iter_mut().enumerate() {
                        *slot = match self.key.iter().position(|k| *k == pos) {
                            Some(k) => key[k].clone(),
                            None => {
                                v += 1;
                                values[v - 1][i].clone()
                            }
                        };
                    }
                    row
                });
                bytes += row
                    .iter()
                    .flatten()
                    .flatten()
                    .map(|s| s.len() as u64)
                    .sum::<u64>();
                last.insert(key, row);
            }
        }
        let mut keys: Vec<Vec<Option<String>>> = vec![Vec::new(); key_len];
        // Keys with NULLs, by which of their columns are NULL: the columns
        // that are not.
        let mut with_nulls: HashMap<Vec<bool>, Vec<Vec<Option<String>>>> = HashMap::new();
        let mut rows: Vec<Vec<Option<String>>> = vec![Vec::new(); width];
        for (key, row) in last {
            if let Some(row) = row {
                for (column, value) in rows.iter_mut().zip(row) {
                    column.push(value);
                }
            }
            if key.iter().any(Option::is_none) {
                let pattern: Vec<bool> = key.iter().map(Option::is_none).collect();
                let columns = with_nulls
                    .entry(pattern)
                    .or_insert_with_key(|p| vec![Vec::new(); p.iter().filter(|n| !**n).count()]);
                for (column, value) in columns.iter_mut().zip(key.into_iter().flatten()) {
                    column.push(Some(value));
                }
                continue;
            }
            for (column, value) in keys.iter_mut().zip(key) {
                column.push(value);
            }
        }
        let frontier =
            i64::try_from(upper).map_err(|_| SinkError::Internal(format!("frontier {upper}")))?;
        let null_deletes: Vec<(String, Vec<Vec<Option<String>>>)> = with_nulls
            .into_iter()
            .map(|(pattern, columns)| (self.delete_with_nulls(&pattern), columns))
            .collect();
        let txn = self
            .client
            .transaction()
            .await
            .map_err(|e| upstream("beginning a transaction", &e))?;
        if keys.first().is_some_and(|k| !k.is_empty()) {
            let params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> =
                keys.iter().map(|k| k as _).collect();
            txn.execute(&self.delete, &params)
                .await
                .map_err(|e| upstream("deleting changed keys", &e))?;
        }
        for (sql, columns) in &null_deletes {
            let params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> =
                columns.iter().map(|k| k as _).collect();
            txn.execute(sql.as_str(), &params)
                .await
                .map_err(|e| upstream("deleting changed keys", &e))?;
        }
        if rows.first().is_some_and(|r| !r.is_empty()) {
            let params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> =
                rows.iter().map(|r| r as _).collect();
            txn.execute(&self.insert, &params)
                .await
                .map_err(|e| upstream("inserting rows", &e))?;
        }
        let began = std::time::Instant::now();
        txn.execute(&self.progress, &[&self.identity, &frontier])
            .await
            .map_err(|e| upstream("recording the sink's progress", &e))?;
        let progress = began.elapsed();
        txn.commit().await.map_err(|e| upstream("committing", &e))?;
        Ok(Committed { bytes, progress })
    }

    /// The statement deleting keys whose columns are NULL where `nulls`
    /// says (`IS NULL`, which the key's index serves), given the other
    /// columns' values as arrays.
    fn delete_with_nulls(&self, nulls: &[bool]) -> String {
        let mut conditions = Vec::new();
        let mut arrays = Vec::new();
        for ((name, ty), null) in self.key_columns.iter().zip(nulls) {
            if *null {
                conditions.push(format!("t.{name} IS NULL"));
            } else {
                let i = arrays.len();
                conditions.push(format!("t.{name} = d.c{i}::{ty}"));
                arrays.push(i);
            }
        }
        let table = &self.table;
        if arrays.is_empty() {
            return format!(
                "DELETE FROM {table} AS t WHERE {}",
                conditions.join(" AND ")
            );
        }
        let params: Vec<String> = arrays
            .iter()
            .map(|i| format!("${}::text[]", i + 1))
            .collect();
        let aliases: Vec<String> = arrays.iter().map(|i| format!("c{i}")).collect();
        format!(
            "DELETE FROM {table} AS t USING unnest({}) AS d({}) WHERE {}",
            params.join(", "),
            aliases.join(", "),
            conditions.join(" AND ")
        )
    }

    /// The types of a shaped row's key columns, then value columns.
    fn shaped_types(&self) -> Vec<&PgType> {
        let keys = self.key.iter().map(|&k| &self.types[k]);
        let values = (0..self.types.len())
            .filter(|i| !self.key.contains(i))
            .map(|i| &self.types[i]);
        keys.chain(values).collect()
    }
}

/// Check at `CREATE SINK` that PostgreSQL answers and the tables exist
/// (created if missing) with the relation's columns.
pub async fn check_target(
    details: &SinkDetails,
    spec: &PostgresSinkSpec,
    config: &tokio_postgres::Config,
) -> Result<()> {
    let client = connect(config).await?;
    ensure_tables(&client, details, spec).await
}

async fn connect(config: &tokio_postgres::Config) -> Result<Client> {
    let mut config = config.clone();
    config
        .application_name("freshet-sink")
        .connect_timeout(CONNECT_TIMEOUT);
    let (client, connection) = tokio::time::timeout(CONNECT_TIMEOUT, config.connect(NoTls))
        .await
        .map_err(|_| SinkError::Target("connecting to PostgreSQL timed out".into()))?
        .map_err(|e| upstream("connecting to PostgreSQL", &e))?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!(error = %e, "a PostgreSQL sink's connection ended");
        }
    });
    Ok(client)
}

/// Create the progress table and the sink's table if missing; an
/// existing table must have every column of the relation.
async fn ensure_tables(
    client: &Client,
    details: &SinkDetails,
    spec: &PostgresSinkSpec,
) -> Result<()> {
    let columns = &details.relation.columns;
    let table = qualified(&spec.table);
    client
        .batch_execute(&format!(
            "CREATE TABLE IF NOT EXISTS {} (sink text PRIMARY KEY, frontier bigint NOT NULL)",
            qualified(&spec.progress_table)
        ))
        .await
        .map_err(|e| upstream("creating the progress table", &e))?;
    let key: Vec<String> = details
        .key
        .iter()
        .map(|&k| ident(&columns[k].name))
        .collect();
    let unique = if details.key.iter().all(|&k| !columns[k].nullable) {
        "PRIMARY KEY"
    } else {
        "UNIQUE NULLS NOT DISTINCT"
    };
    let definitions: Vec<String> = columns
        .iter()
        .map(|c| format!("{} {}", ident(&c.name), c.ty.sql_name()))
        .collect();
    client
        .batch_execute(&format!(
            "CREATE TABLE IF NOT EXISTS {table} ({}, {unique} ({}))",
            definitions.join(", "),
            key.join(", ")
        ))
        .await
        .map_err(|e| upstream(&format!("creating table {table}"), &e))?;
    let existing: Vec<String> = client
        .query(
            "SELECT attname::text FROM pg_attribute \
             WHERE attrelid = $1::text::regclass AND attnum > 0 AND NOT attisdropped",
            &[&table],
        )
        .await
        .map_err(|e| upstream(&format!("reading the columns of {table}"), &e))?
        .iter()
        .map(|r| r.get(0))
        .collect();
    if let Some(missing) = columns.iter().find(|c| !existing.contains(&c.name)) {
        return Err(SinkError::Fatal(format!(
            "table {table} has no column \"{}\", which the sink writes",
            missing.name
        )));
    }
    Ok(())
}

/// A column's values as PostgreSQL text (NULL as `None`).
fn text_column(column: &ArrayRef, ty: &PgType) -> Result<Vec<Option<String>>> {
    let column = column.as_ref();
    let n = column.len();
    if let (PgType::Numeric { typmod: None }, DataType::Decimal128(_, scale)) =
        (ty, column.data_type())
    {
        let a = column.as_primitive::<arrow::datatypes::Decimal128Type>();
        return Ok((0..n)
            .map(|i| {
                a.is_valid(i)
                    .then(|| crate::json::trimmed_decimal(a.value(i), *scale))
            })
            .collect());
    }
    if let DataType::Binary = column.data_type() {
        let a = column.as_binary::<i32>();
        return Ok((0..n)
            .map(|i| {
                a.is_valid(i).then(|| {
                    let mut s = String::from("\\x");
                    for b in a.value(i) {
                        s.push_str(&format!("{b:02x}"));
                    }
                    s
                })
            })
            .collect());
    }
    let options = FormatOptions::default();
    let formatter = ArrayFormatter::try_new(column, &options)
        .map_err(|e| SinkError::Encode(format!("cannot write {}: {e}", ty.sql_name())))?;
    Ok((0..n)
        .map(|i| column.is_valid(i).then(|| formatter.value(i).to_string()))
        .collect())
}

/// An identifier, always quoted (names are kept exactly as Freshet has
/// them).
fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

fn qualified((schema, table): &(String, String)) -> String {
    format!("{}.{}", ident(schema), ident(table))
}

/// A PostgreSQL error as a target error, with PostgreSQL's own message.
fn upstream(context: &str, e: &tokio_postgres::Error) -> SinkError {
    match e.as_db_error() {
        Some(db) => SinkError::Target(format!("PostgreSQL, {context}: {}", db.message())),
        None => SinkError::Target(format!("PostgreSQL, {context}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn values_become_postgres_text() {
        let bytes: ArrayRef = Arc::new(arrow::array::BinaryArray::from(vec![
            Some(&b"\x01\xff"[..]),
            None,
        ]));
        assert_eq!(
            text_column(&bytes, &PgType::Bytea).unwrap(),
            vec![Some("\\x01ff".to_string()), None]
        );
        let numeric = PgType::Numeric { typmod: None };
        let decimals: ArrayRef = Arc::new(
            arrow::array::Decimal128Array::from(vec![Some(15i128), None])
                .with_data_type(DataType::Decimal128(38, 1)),
        );
        assert_eq!(
            text_column(&decimals, &numeric).unwrap(),
            vec![Some("1.5".to_string()), None]
        );
        assert_eq!(ident("a\"b"), "\"a\"\"b\"");
    }
}
