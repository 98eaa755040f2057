//! Kafka messages in `FORMAT JSON`: a change of the upsert or Debezium
//! envelope (one row of the sink's shaped batch) becomes a key, the JSON
//! object of the key's columns, and a value: for `UPSERT` the object of
//! the row the key now has (every column, in the relation's order) or no
//! value at all (a tombstone) when the key was deleted; for `DEBEZIUM`
//! `{"before": row | null, "after": row | null}`.
//!
//! Values are written as their JSON counterparts by `arrow-json`'s
//! encoders, except for two Postgres types Arrow cannot tell apart from
//! others: `jsonb` (text in Arrow) is nested as JSON, and unconstrained
//! `numeric` (a fixed scale in Arrow) loses its padding zeros, so that
//! `1.5` is sent as `1.5`, as `psql` shows it.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, DecimalType, FieldRef};
use arrow_json::writer::{EncoderOptions, NullableEncoder, make_encoder};
use freshet_catalog::{SinkDetails, SinkEnvelope};
use freshet_repr::{PgType, Timestamp};

use crate::error::{Result, SinkError};

/// One message for the topic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// The Freshet time of the change.
    pub time: Timestamp,
    /// The key's JSON object.
    pub key: Vec<u8>,
    /// The value (`None`: a tombstone).
    pub value: Option<Vec<u8>>,
}

/// Turns a sink's shaped batches (`mz_timestamp`, `mz_state`, the key
/// columns, then the value columns, twice for Debezium) into messages.
pub struct JsonEncoder {
    debezium: bool,
    /// Per relation column: where it is in a shaped row's key block (`Ok`)
    /// or value block (`Err`).
    layout: Vec<std::result::Result<usize, usize>>,
    key_len: usize,
    value_len: usize,
    fields: Vec<FieldRef>,
    key_fields: Vec<FieldRef>,
}

impl JsonEncoder {
    /// The encoder of sink `details` (an upsert or Debezium sink).
    pub fn new(details: &SinkDetails) -> Result<Self> {
        if details.envelope == SinkEnvelope::Diffs {
            return Err(SinkError::Internal(
                "a Kafka sink needs an envelope with a key".into(),
            ));
        }
        let schema = details.relation.arrow_schema();
        let values: Vec<usize> = (0..schema.fields().len())
            .filter(|i| !details.key.contains(i))
            .collect();
        let layout = (0..schema.fields().len())
            .map(|i| match details.key.iter().position(|k| *k == i) {
                Some(k) => Ok(k),
                None => Err(values.iter().position(|v| *v == i).unwrap_or_default()),
            })
            .collect();
        Ok(JsonEncoder {
            debezium: details.envelope == SinkEnvelope::Debezium,
            layout,
            key_len: details.key.len(),
            value_len: values.len(),
            fields: schema.fields().iter().cloned().collect(),
            key_fields: details
                .key
                .iter()
                .map(|&k| Arc::clone(&schema.fields()[k]))
                .collect(),
        })
    }

    /// The messages of `batch`, in its order.
    pub fn encode(&self, batch: &RecordBatch) -> Result<Vec<Message>> {
        let columns = batch.columns();
        let bad = |what: &str| SinkError::Internal(format!("a sink batch without {what}"));
        let times = columns
            .first()
            .and_then(|c| c.as_any().downcast_ref::<Int64Array>())
            .ok_or_else(|| bad("mz_timestamp"))?;
        let states = columns
            .get(1)
            .and_then(|c| c.as_string_opt::<i32>())
            .ok_or_else(|| bad("mz_state"))?;
        let blocks = if self.debezium { 2 } else { 1 };
        if columns.len() != 2 + self.key_len + blocks * self.value_len {
            return Err(bad("the envelope's columns"));
        }
        let key_block = &columns[2..2 + self.key_len];
        let value_block = |n: usize| {
            let start = 2 + self.key_len + n * self.value_len;
            &columns[start..start + self.value_len]
        };
        let row_columns = |values: &[ArrayRef]| -> Vec<ArrayRef> {
            self.layout
                .iter()
                .map(|at| match at {
                    Ok(k) => Arc::clone(&key_block[*k]),
                    Err(v) => Arc::clone(&values[*v]),
                })
                .collect()
        };
        let options = EncoderOptions::default();
        let mut keys = Objects::new(&self.key_fields, key_block, &options)?;
        let after_columns = row_columns(value_block(blocks - 1));
        let mut after = Objects::new(&self.fields, &after_columns, &options)?;
        let before_columns = self.debezium.then(|| row_columns(value_block(0)));
        let mut before = match &before_columns {
            Some(c) => Some(Objects::new(&self.fields, c, &options)?),
            None => None,
        };
        let mut messages = Vec::with_capacity(batch.num_rows());
        for i in 0..batch.num_rows() {
            let state = states.value(i);
            let time = Timestamp::try_from(times.value(i))
                .map_err(|_| SinkError::Internal(format!("time {}", times.value(i))))?;
            let key = keys.object(i);
            let value = match &mut before {
                None => (state != "delete").then(|| after.object(i)),
                Some(before) => {
                    let mut out = b"{\"before\":".to_vec();
                    if matches!(state, "upsert" | "delete") {
                        out.extend(before.object(i));
                    } else {
                        out.extend(b"null");
                    }
                    out.extend(b",\"after\":");
                    if state == "delete" {
                        out.extend(b"null");
                    } else {
                        out.extend(after.object(i));
                    }
                    out.push(b'}');
                    Some(out)
                }
            };
            messages.push(Message { time, key, value });
        }
        Ok(messages)
    }
}

/// Rows of some columns as JSON objects.
struct Objects<'a> {
    names: Vec<Vec<u8>>,
    encoders: Vec<ValueEncoder<'a>>,
}

enum ValueEncoder<'a> {
    Arrow(NullableEncoder<'a>),
    /// `jsonb`: the text is JSON already.
    Raw(&'a arrow::array::StringArray),
    /// Unconstrained `numeric`: the decimal without its padding zeros.
    Numeric(&'a arrow::array::Decimal128Array, i8),
}

impl<'a> Objects<'a> {
    fn new(
        fields: &'a [FieldRef],
        columns: &'a [ArrayRef],
        options: &'a EncoderOptions,
    ) -> Result<Self> {
        let names = fields
            .iter()
            .map(|f| {
                let mut name = serde_json::to_vec(f.name())
                    .map_err(|e| SinkError::Internal(format!("column name: {e}")))?;
                name.push(b':');
                Ok(name)
            })
            .collect::<Result<_>>()?;
        let encoders = fields
            .iter()
            .zip(columns)
            .map(|(field, column)| {
                let column = column.as_ref();
                Ok(match (PgType::of_field(field), column.data_type()) {
                    (PgType::Jsonb, DataType::Utf8) => ValueEncoder::Raw(column.as_string()),
                    (PgType::Numeric { typmod: None }, DataType::Decimal128(_, scale)) => {
                        ValueEncoder::Numeric(column.as_primitive(), *scale)
                    }
                    _ => ValueEncoder::Arrow(
                        make_encoder(field, column, options)
                            .map_err(|e| SinkError::Encode(format!("cannot write JSON: {e}")))?,
                    ),
                })
            })
            .collect::<Result<_>>()?;
        Ok(Objects { names, encoders })
    }

    fn object(&mut self, row: usize) -> Vec<u8> {
        let mut out = vec![b'{'];
        for (i, (name, encoder)) in self.names.iter().zip(&mut self.encoders).enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend(name);
            match encoder {
                ValueEncoder::Arrow(e) if e.is_null(row) => out.extend(b"null"),
                ValueEncoder::Arrow(e) => e.encode(row, &mut out),
                ValueEncoder::Raw(a) if a.is_null(row) => out.extend(b"null"),
                ValueEncoder::Raw(a) => out.extend(a.value(row).as_bytes()),
                ValueEncoder::Numeric(a, _) if a.is_null(row) => out.extend(b"null"),
                ValueEncoder::Numeric(a, scale) => {
                    out.extend(trimmed_decimal(a.value(row), *scale).as_bytes())
                }
            }
        }
        out.push(b'}');
        out
    }
}

/// `value` at `scale` as a JSON number, without trailing fractional
/// zeros.
pub(crate) fn trimmed_decimal(value: i128, scale: i8) -> String {
    let text = arrow::datatypes::Decimal128Type::format_decimal(value, 38, scale);
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Decimal128Array, Int32Array, StringArray};
    use arrow::datatypes::Schema;
    use freshet_catalog::{FileFormat, FilesSinkSpec, SinkConnector};
    use freshet_repr::{ColumnDesc, RelationDesc};

    fn details(envelope: SinkEnvelope) -> SinkDetails {
        let column = |name: &str, ty: PgType| ColumnDesc {
            name: name.into(),
            ty,
            nullable: true,
        };
        SinkDetails {
            from: freshet_repr::GlobalId::User(1),
            relation: RelationDesc::new(vec![
                column("v", PgType::Text),
                column("k", PgType::Int4),
                column("doc", PgType::Jsonb),
                column("n", PgType::Numeric { typmod: None }),
            ]),
            connector: SinkConnector::Files(FilesSinkSpec {
                url: "file:///x".into(),
                format: FileFormat::Json,
            }),
            envelope,
            key: vec![1],
            key_not_enforced: false,
            snapshot: true,
            as_of: 0,
            commit_interval_ms: None,
        }
    }

    fn batch(states: &[&str], blocks: usize) -> RecordBatch {
        let n = states.len();
        let numeric = PgType::Numeric { typmod: None }.arrow_type();
        let mut columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(vec![7; n])),
            Arc::new(StringArray::from(states.to_vec())),
            Arc::new(Int32Array::from((0..n as i32).collect::<Vec<_>>())),
        ];
        for b in 0..blocks {
            columns.push(Arc::new(StringArray::from(vec![
                Some(format!("x\"{b}"));
                n
            ])));
            columns.push(Arc::new(StringArray::from(vec![Some(r#"{"a":[1]}"#); n])));
            columns.push(Arc::new(
                Decimal128Array::from(vec![Some(15_000i128); n]).with_data_type(numeric.clone()),
            ));
        }
        let fields: Vec<arrow::datatypes::Field> = columns
            .iter()
            .enumerate()
            .map(|(i, c)| {
                arrow::datatypes::Field::new(format!("c{i}"), c.data_type().clone(), true)
            })
            .collect();
        RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
    }

    fn text(bytes: &Option<Vec<u8>>) -> Option<String> {
        bytes
            .as_ref()
            .map(|b| String::from_utf8(b.clone()).unwrap())
    }

    #[test]
    fn upserts_carry_the_row_and_deletes_are_tombstones() {
        let encoder = JsonEncoder::new(&details(SinkEnvelope::Upsert)).unwrap();
        let messages = encoder.encode(&batch(&["upsert", "delete"], 1)).unwrap();
        let scale = match (PgType::Numeric { typmod: None }).arrow_type() {
            DataType::Decimal128(_, s) => s,
            _ => unreachable!(),
        };
        let n = trimmed_decimal(15_000, scale);
        assert_eq!(messages[0].time, 7);
        assert_eq!(text(&Some(messages[0].key.clone())).unwrap(), r#"{"k":0}"#);
        assert_eq!(
            text(&messages[0].value).unwrap(),
            format!(r#"{{"v":"x\"0","k":0,"doc":{{"a":[1]}},"n":{n}}}"#)
        );
        assert_eq!(messages[1].value, None);
        let value: serde_json::Value =
            serde_json::from_slice(messages[0].value.as_ref().unwrap()).unwrap();
        assert_eq!(value["doc"]["a"][0], 1);
    }

    #[test]
    fn debezium_messages_say_what_was_and_what_is() {
        let encoder = JsonEncoder::new(&details(SinkEnvelope::Debezium)).unwrap();
        let messages = encoder
            .encode(&batch(&["insert", "upsert", "delete"], 2))
            .unwrap();
        let value = |i: usize| -> serde_json::Value {
            serde_json::from_slice(messages[i].value.as_ref().unwrap()).unwrap()
        };
        assert!(value(0)["before"].is_null());
        assert_eq!(value(0)["after"]["v"], "x\"1");
        assert_eq!(value(1)["before"]["v"], "x\"0");
        assert_eq!(value(1)["after"]["k"], 1);
        assert_eq!(value(2)["before"]["k"], 2);
        assert!(value(2)["after"].is_null());
    }

    #[test]
    fn numerics_lose_padding_zeros() {
        assert_eq!(trimmed_decimal(15_000, 4), "1.5");
        assert_eq!(trimmed_decimal(-20_000, 4), "-2");
        assert_eq!(trimmed_decimal(12, 0), "12");
    }
}
