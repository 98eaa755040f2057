//! PostgreSQL's set-returning `jsonb` functions, called in `FROM`:
//!
//! | function                          | columns                            |
//! |-----------------------------------|------------------------------------|
//! | `jsonb_each(jsonb)`               | `key text`, `value jsonb`          |
//! | `jsonb_each_text(jsonb)`          | `key text`, `value text`           |
//! | `jsonb_array_elements(jsonb)`     | `value jsonb`                      |
//! | `jsonb_array_elements_text(jsonb)`| `value text`                       |
//! | `jsonb_object_keys(jsonb)`        | `jsonb_object_keys text`           |
//!
//! An object's fields come in the order `jsonb` stores them (shorter keys
//! first, then by bytes), an array's elements in order; the `_text` forms
//! give a string's contents and JSON `null` as SQL NULL. A NULL document
//! gives no rows; the wrong kind of document is Postgres's 22023.
//!
//! They are DataFusion table functions, which take arguments that fold to
//! constants (a literal, a cast of one, a call of immutable functions on
//! them): the document is read once while the statement is planned and
//! the rows are a small in-memory table.

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::common::{Result, ScalarValue};
use datafusion::datasource::MemTable;
use datafusion::logical_expr::Expr;
use freshet_repr::{PgType, sqlstate};
use serde_json::Value;

use crate::query::jsonb_ops::parse_jsonb;
use freshet_repr::jsonb::stored_order;

/// Which function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Each { text: bool },
    ArrayElements { text: bool },
    ObjectKeys,
}

/// One set-returning `jsonb` function (see the module docs).
#[derive(Debug)]
pub struct JsonbTableFunction {
    kind: Kind,
}

/// Every function of this module.
const KINDS: [Kind; 5] = [
    Kind::Each { text: false },
    Kind::Each { text: true },
    Kind::ArrayElements { text: false },
    Kind::ArrayElements { text: true },
    Kind::ObjectKeys,
];

/// Whether `name` is one of this module's functions (so a `FROM` item
/// calling it is planned as a table function, not a scalar one).
pub fn is_table_function(name: &str) -> bool {
    KINDS
        .into_iter()
        .any(|kind| JsonbTableFunction { kind }.name() == name)
}

/// Every function of this module with its name, for registration in the
/// session.
pub fn table_functions() -> Vec<(&'static str, Arc<dyn TableFunctionImpl>)> {
    KINDS
        .into_iter()
        .map(|kind| {
            let f = JsonbTableFunction { kind };
            (f.name(), Arc::new(f) as Arc<dyn TableFunctionImpl>)
        })
        .collect()
}

impl JsonbTableFunction {
    /// The function's SQL name.
    pub fn name(&self) -> &'static str {
        match self.kind {
            Kind::Each { text: false } => "jsonb_each",
            Kind::Each { text: true } => "jsonb_each_text",
            Kind::ArrayElements { text: false } => "jsonb_array_elements",
            Kind::ArrayElements { text: true } => "jsonb_array_elements_text",
            Kind::ObjectKeys => "jsonb_object_keys",
        }
    }

    /// The result columns.
    fn schema(&self) -> Schema {
        let value = |text: bool| {
            if text {
                Field::new("value", DataType::Utf8, true)
            } else {
                PgType::Jsonb.field("value", true)
            }
        };
        Schema::new(match self.kind {
            Kind::Each { text } => vec![Field::new("key", DataType::Utf8, true), value(text)],
            Kind::ArrayElements { text } => vec![value(text)],
            Kind::ObjectKeys => vec![Field::new("jsonb_object_keys", DataType::Utf8, true)],
        })
    }

    /// The document argument: its text, or `None` for NULL.
    fn document(&self, args: &[Expr]) -> Result<Option<String>> {
        let undefined = |types: &str| {
            crate::error::sqlstate_error(
                sqlstate::UNDEFINED_FUNCTION,
                format!("function {}({types}) does not exist", self.name()),
            )
        };
        let arg = match args {
            [arg] => arg,
            _ => {
                let types = vec!["unknown"; args.len()].join(", ");
                return Err(undefined(&types));
            }
        };
        let Expr::Literal(value, _) = arg else {
            return Err(crate::error::sqlstate_error(
                sqlstate::FEATURE_NOT_SUPPORTED,
                format!(
                    "the argument of {} in FROM must be a constant, not {arg}",
                    self.name()
                ),
            ));
        };
        match value {
            ScalarValue::Utf8(s) | ScalarValue::LargeUtf8(s) | ScalarValue::Utf8View(s) => {
                Ok(s.clone())
            }
            ScalarValue::Null => Ok(None),
            other => Err(undefined(
                &PgType::from_arrow(&other.data_type())
                    .map(|p| p.sql_name())
                    .unwrap_or_else(|| other.data_type().to_string()),
            )),
        }
    }

    /// The rows for `doc`, one column of text per result column.
    fn rows(&self, doc: &Value) -> Result<Vec<Vec<Option<String>>>> {
        let error = |message: String| {
            crate::error::sqlstate_error(sqlstate::INVALID_PARAMETER_VALUE, message)
        };
        let render = |v: &Value, text: bool| match v {
            Value::Null if text => None,
            Value::String(s) if text => Some(s.clone()),
            v => Some(crate::pg::text::jsonb_text(v)),
        };
        Ok(match (self.kind, doc) {
            (Kind::Each { text }, Value::Object(map)) => {
                let entries = stored_order(map);
                let keys = entries.iter().map(|(k, _)| Some((*k).clone())).collect();
                let values = entries.iter().map(|(_, v)| render(v, text)).collect();
                vec![keys, values]
            }
            (Kind::Each { .. }, _) => {
                return Err(error(format!(
                    "cannot call {} on a non-object",
                    self.name()
                )));
            }
            (Kind::ArrayElements { text }, Value::Array(items)) => {
                vec![items.iter().map(|v| render(v, text)).collect()]
            }
            (Kind::ArrayElements { .. }, Value::Object(_)) => {
                return Err(error("cannot extract elements from an object".into()));
            }
            (Kind::ArrayElements { .. }, _) => {
                return Err(error("cannot extract elements from a scalar".into()));
            }
            (Kind::ObjectKeys, Value::Object(map)) => vec![
                stored_order(map)
                    .into_iter()
                    .map(|(k, _)| Some(k.clone()))
                    .collect(),
            ],
            (Kind::ObjectKeys, Value::Array(_)) => {
                return Err(error(format!("cannot call {} on an array", self.name())));
            }
            (Kind::ObjectKeys, _) => {
                return Err(error(format!("cannot call {} on a scalar", self.name())));
            }
        })
    }
}

impl TableFunctionImpl for JsonbTableFunction {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let schema = Arc::new(self.schema());
        let columns: Vec<Vec<Option<String>>> = match self.document(args.exprs())? {
            Some(text) => self.rows(&parse_jsonb(&text)?)?,
            None => vec![Vec::new(); schema.fields().len()],
        };
        let arrays: Vec<ArrayRef> = columns
            .into_iter()
            .map(|c| Arc::new(StringArray::from(c)) as ArrayRef)
            .collect();
        let batch = RecordBatch::try_new(Arc::clone(&schema), arrays)?;
        Ok(Arc::new(MemTable::try_new(schema, vec![vec![batch]])?))
    }
}

#[cfg(test)]
mod tests {
    use datafusion::prelude::SessionContext;

    /// The rows of `sql` as text, one `|`-joined line per row.
    async fn rows(sql: &str) -> datafusion::common::Result<Vec<String>> {
        let ctx = SessionContext::new_with_state(crate::query::engine::new_session_state(1));
        let batches = ctx.sql(sql).await?.collect().await?;
        let mut out = Vec::new();
        for b in batches {
            for r in 0..b.num_rows() {
                let cells: Vec<String> = b
                    .columns()
                    .iter()
                    .map(|c| {
                        datafusion::arrow::util::display::array_value_to_string(c, r)
                            .unwrap_or_default()
                    })
                    .collect();
                out.push(cells.join("|"));
            }
        }
        Ok(out)
    }

    #[tokio::test]
    async fn table_functions_return_postgres_rows() {
        let doc = r#"'{"bb": 1, "a": "x", "ccc": null, "b": [1]}'"#;
        assert_eq!(
            rows(&format!("SELECT key, value FROM jsonb_each({doc})"))
                .await
                .unwrap(),
            ["a|\"x\"", "b|[1]", "bb|1", "ccc|null"]
        );
        assert_eq!(
            rows(&format!(
                "SELECT k, v IS NULL FROM jsonb_each_text({doc}) AS e(k, v)"
            ))
            .await
            .unwrap(),
            ["a|false", "b|false", "bb|false", "ccc|true"]
        );
        assert_eq!(
            rows(&format!("SELECT * FROM jsonb_object_keys({doc})"))
                .await
                .unwrap(),
            ["a", "b", "bb", "ccc"]
        );
        assert_eq!(
            rows(r#"SELECT value FROM jsonb_array_elements_text('[1, "a", [2]]')"#)
                .await
                .unwrap(),
            ["1", "a", "[2]"]
        );
        assert_eq!(
            rows("SELECT count(*) FROM jsonb_array_elements(NULL)")
                .await
                .unwrap(),
            ["0"]
        );
        let err = rows("SELECT * FROM jsonb_array_elements('{}')")
            .await
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("cannot extract elements from an object"),
            "{err}"
        );
        let err = rows("SELECT * FROM jsonb_each('{nope')").await.unwrap_err();
        assert!(
            err.to_string()
                .contains("invalid input syntax for type json"),
            "{err}"
        );
    }
}
