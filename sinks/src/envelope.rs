//! Shaping a relation's changes into envelopes: each update as it is
//! (`mz_diff`), or per key what it became (`UPSERT`) or was and became
//! (`DEBEZIUM`). Subscribes and sinks shape their rows the same way.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanArray, Decimal128Array, RecordBatch, StringArray, UInt32Array, new_null_array,
};
use arrow::datatypes::SchemaRef;
use arrow::error::ArrowError;
use arrow::row::{OwnedRow, RowConverter, SortField};
use freshet_compute::SubscribeBatch;
use freshet_repr::{RelationDesc, Timestamp};

type Result<T> = std::result::Result<T, ArrowError>;

/// `mz_timestamp` values.
pub fn timestamps(times: &[Timestamp]) -> Result<ArrayRef> {
    let array = Decimal128Array::from(times.iter().map(|t| i128::from(*t)).collect::<Vec<_>>())
        .with_precision_and_scale(20, 0)?;
    Ok(Arc::new(array))
}

/// `columns` as a batch of `schema`, casting where the dataflow's types
/// differ only in representation.
pub fn rebatch(schema: &SchemaRef, columns: Vec<ArrayRef>) -> Result<RecordBatch> {
    let columns = columns
        .into_iter()
        .zip(schema.fields())
        .map(|(c, f)| {
            if c.data_type() == f.data_type() {
                Ok(c)
            } else {
                arrow::compute::cast(&c, f.data_type())
            }
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    RecordBatch::try_new(Arc::clone(schema), columns)
}

/// What one key did at one time.
pub struct KeyChange {
    /// When.
    pub time: Timestamp,
    /// `upsert`, `insert`, `delete` or `key_violation`.
    pub state: &'static str,
    key: OwnedRow,
    before: Option<OwnedRow>,
    after: Option<OwnedRow>,
}

/// The rows of each key, for the upsert and Debezium envelopes.
pub struct KeyedState {
    key: Vec<usize>,
    values: Vec<usize>,
    keys: RowConverter,
    rows: RowConverter,
    /// Per key: its distinct rows with multiplicities.
    current: HashMap<OwnedRow, Vec<(OwnedRow, i64)>>,
}

impl KeyedState {
    /// No key has rows yet; `key` are column positions in `relation`.
    pub fn new(relation: &RelationDesc, key: &[usize]) -> Result<Self> {
        let schema = relation.arrow_schema();
        let field = |i: usize| SortField::new(schema.field(i).data_type().clone());
        Ok(KeyedState {
            key: key.to_vec(),
            values: (0..schema.fields().len())
                .filter(|i| !key.contains(i))
                .collect(),
            keys: RowConverter::new(key.iter().map(|&i| field(i)).collect())?,
            rows: RowConverter::new((0..schema.fields().len()).map(field).collect())?,
            current: HashMap::new(),
        })
    }

    /// Apply `batch` and say, per time and changed key, what it became.
    pub fn apply(&mut self, batch: &SubscribeBatch, debezium: bool) -> Result<Vec<KeyChange>> {
        let key_columns: Vec<ArrayRef> = self
            .key
            .iter()
            .map(|&i| Arc::clone(batch.rows.column(i)))
            .collect();
        let key_rows = self.keys.convert_columns(&key_columns)?;
        let full_rows = self.rows.convert_columns(batch.rows.columns())?;
        let mut changes = Vec::new();
        let mut start = 0;
        while start < batch.times.len() {
            let time = batch.times[start];
            let end = batch.times[start..]
                .iter()
                .position(|t| *t != time)
                .map_or(batch.times.len(), |n| start + n);
            let mut before: HashMap<OwnedRow, Vec<(OwnedRow, i64)>> = HashMap::new();
            let mut touched = Vec::new();
            for i in start..end {
                let key = key_rows.row(i).owned();
                let rows = self.current.entry(key.clone()).or_default();
                if !before.contains_key(&key) {
                    before.insert(key.clone(), rows.clone());
                    touched.push(key);
                }
                let row = full_rows.row(i);
                match rows.iter_mut().find(|(r, _)| r.row() == row) {
                    Some((_, n)) => *n += batch.diffs[i],
                    None => rows.push((row.owned(), batch.diffs[i])),
                }
                rows.retain(|(_, n)| *n != 0);
            }
            for key in touched {
                let after = self.current.get(&key).cloned().unwrap_or_default();
                if after.is_empty() {
                    self.current.remove(&key);
                }
                let was = before.remove(&key).unwrap_or_default();
                let count = |rows: &[(OwnedRow, i64)]| rows.iter().map(|(_, n)| *n).sum::<i64>();
                let single = |rows: &[(OwnedRow, i64)]| match rows {
                    [(r, 1)] => Some(r.clone()),
                    _ => None,
                };
                let (n_before, n_after) = (count(&was), count(&after));
                let state = if (debezium && n_before > 1) || n_after > 1 {
                    "key_violation"
                } else if n_after == 0 {
                    if n_before == 0 {
                        continue;
                    }
                    "delete"
                } else if debezium && n_before == 0 {
                    "insert"
                } else {
                    "upsert"
                };
                let violation = state == "key_violation";
                changes.push(KeyChange {
                    time,
                    state,
                    key,
                    before: if violation { None } else { single(&was) },
                    after: if violation { None } else { single(&after) },
                });
            }
            start = end;
        }
        Ok(changes)
    }

    /// The envelope's rows for `changes`.
    pub fn rows(
        &self,
        changes: &[KeyChange],
        debezium: bool,
        progress: bool,
        schema: &SchemaRef,
    ) -> Result<RecordBatch> {
        let times: Vec<Timestamp> = changes.iter().map(|c| c.time).collect();
        let mut columns: Vec<ArrayRef> = vec![timestamps(&times)?];
        if progress {
            columns.push(Arc::new(BooleanArray::from(vec![false; changes.len()])));
        }
        columns.push(Arc::new(StringArray::from(
            changes.iter().map(|c| Some(c.state)).collect::<Vec<_>>(),
        )));
        columns.extend(
            self.keys
                .convert_rows(changes.iter().map(|c| c.key.row()))?,
        );
        if debezium {
            columns.extend(self.value_columns(changes.iter().map(|c| c.before.as_ref()))?);
        }
        columns.extend(self.value_columns(changes.iter().map(|c| c.after.as_ref()))?);
        rebatch(schema, columns)
    }

    /// The key of `change` as text, for messages: `(1, 'a')`.
    pub fn describe_key(&self, change: &KeyChange) -> String {
        let Ok(columns) = self.keys.convert_rows([change.key.row()]) else {
            return "(?)".into();
        };
        let options = arrow::util::display::FormatOptions::default().with_null("NULL");
        let values: Vec<String> = columns
            .iter()
            .map(|c| {
                arrow::util::display::ArrayFormatter::try_new(c.as_ref(), &options)
                    .map(|f| f.value(0).to_string())
                    .unwrap_or_else(|_| "?".into())
            })
            .collect();
        format!("({})", values.join(", "))
    }

    /// The value columns of `rows`, NULL where a row is absent.
    fn value_columns<'a>(
        &self,
        rows: impl Iterator<Item = Option<&'a OwnedRow>>,
    ) -> Result<Vec<ArrayRef>> {
        let rows: Vec<Option<&OwnedRow>> = rows.collect();
        let present: Vec<_> = rows.iter().flatten().map(|r| r.row()).collect();
        let mut next = 0u32;
        let indices = UInt32Array::from(
            rows.iter()
                .map(|r| {
                    r.map(|_| {
                        next += 1;
                        next - 1
                    })
                })
                .collect::<Vec<_>>(),
        );
        let full = self.rows.convert_rows(present)?;
        self.values
            .iter()
            .map(|&v| {
                if next == 0 {
                    Ok(new_null_array(full[v].data_type(), rows.len()))
                } else {
                    Ok(arrow::compute::take(full[v].as_ref(), &indices, None)?)
                }
            })
            .collect()
    }
}
