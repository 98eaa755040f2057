//! PostgreSQL's `jsonb` containment and existence operators and its scalar
//! `jsonb` functions:
//!
//! | operator / function                     | function behind it    | result    |
//! |-----------------------------------------|-----------------------|-----------|
//! | `jsonb @> jsonb`                        | `jsonb_contains`      | `boolean` |
//! | `jsonb <@ jsonb`                        | `jsonb_contained`     | `boolean` |
//! | `jsonb ? text`                          | `jsonb_exists`        | `boolean` |
//! | `jsonb ?\| text[]`                      | `jsonb_exists_any`    | `boolean` |
//! | `jsonb ?& text[]`                       | `jsonb_exists_all`    | `boolean` |
//! | `jsonb_typeof(jsonb)`                   |                       | `text`    |
//! | `jsonb_array_length(jsonb)`             |                       | `integer` |
//! | `jsonb_strip_nulls(jsonb)`              |                       | `jsonb`   |
//! | `jsonb_pretty(jsonb)`                   |                       | `text`    |
//! | `jsonb_set(jsonb, text[], jsonb [, boolean])` |                 | `jsonb`   |
//!
//! Like the access operators ([`crate::query::jsonb_ops`]), each function
//! parses the stored canonical text, computes on the document and prints
//! `jsonb` results canonically again, so a result is exactly the text it
//! would be stored as; `jsonb` results carry the `jsonb` field metadata so
//! they print (and chain) as `jsonb`. All are strict (a NULL argument gives
//! NULL) and immutable, so materialized views that use them are maintained
//! like any other expression. The operators are planned into calls of
//! these functions by [`crate::query::jsonb_ops::JsonbOperatorPlanner`].

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray, GenericListArray, Int32Array, StringArray};
use arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::{Result, exec_datafusion_err};
use datafusion::error::DataFusionError;
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};
use freshet_repr::{PgType, SqlStateError, sqlstate};
use serde_json::Value;

use crate::query::jsonb_ops::{as_text, parse_jsonb, text_array_type, texty, type_name};
use freshet_repr::jsonb::stored_order;

/// The `jsonb` operators that are planned as calls of this module's
/// functions (see [`operator_udf`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JsonbOperator {
    /// `@>`: the left document contains the right one.
    Contains,
    /// `<@`: the left document is contained in the right one.
    ContainedIn,
    /// `?`: the text is a top-level key or string element.
    Exists,
    /// `?|`: any of the texts is a top-level key or string element.
    ExistsAny,
    /// `?&`: all of the texts are top-level keys or string elements.
    ExistsAll,
}

/// What one function of this module computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Operator(JsonbOperator),
    Typeof,
    ArrayLength,
    StripNulls,
    Pretty,
    Set,
    /// `jsonb || jsonb`.
    Concat,
    /// `jsonb - text`, `jsonb - integer`, `jsonb - text[]`.
    Delete,
}

/// Every function of this module, for registration in the session (where
/// dataflow plans of materialized views also find them by name).
pub fn functions() -> Vec<Arc<ScalarUDF>> {
    [
        Kind::Operator(JsonbOperator::Contains),
        Kind::Operator(JsonbOperator::ContainedIn),
        Kind::Operator(JsonbOperator::Exists),
        Kind::Operator(JsonbOperator::ExistsAny),
        Kind::Operator(JsonbOperator::ExistsAll),
        Kind::Typeof,
        Kind::ArrayLength,
        Kind::StripNulls,
        Kind::Pretty,
        Kind::Set,
        Kind::Concat,
        Kind::Delete,
    ]
    .into_iter()
    .map(udf)
    .collect()
}

/// The function `jsonb || jsonb` is planned as.
pub fn concat_udf() -> Arc<ScalarUDF> {
    udf(Kind::Concat)
}

/// The function `jsonb - text|integer|text[]` is planned as.
pub fn delete_udf() -> Arc<ScalarUDF> {
    udf(Kind::Delete)
}

/// The function an operator is planned as, so the planner need not look it
/// up by name.
pub fn operator_udf(op: JsonbOperator) -> Arc<ScalarUDF> {
    udf(Kind::Operator(op))
}

fn udf(kind: Kind) -> Arc<ScalarUDF> {
    Arc::new(ScalarUDF::new_from_impl(JsonbFunction {
        kind,
        signature: Signature::user_defined(Volatility::Immutable),
    }))
}

/// One function of this module (see the module docs).
#[derive(Debug, PartialEq, Eq, Hash)]
struct JsonbFunction {
    kind: Kind,
    signature: Signature,
}

/// Whether `t` is `text[]` (or something Postgres would read as one: an
/// untyped literal or NULL).
fn text_array_like(t: &DataType) -> bool {
    match t {
        DataType::List(item) | DataType::LargeList(item) => texty(item.data_type()),
        t => texty(t),
    }
}

/// An error with a Postgres SQLSTATE.
fn pg_error(code: &'static str, message: impl Into<String>) -> DataFusionError {
    crate::error::sqlstate_error(code, message)
}

/// Whether `v` is a scalar (not an object or array).
fn is_scalar(v: &Value) -> bool {
    !matches!(v, Value::Object(_) | Value::Array(_))
}

/// Postgres's equality of two `jsonb` scalars: same kind and equal value,
/// numbers compared by value (`1.0` equals `1`).
fn scalar_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::Bool(a), Value::Bool(b)) => a == b,
        (Value::String(a), Value::String(b)) => a == b,
        (Value::Number(a), Value::Number(b)) => {
            if let (Some(a), Some(b)) = (a.as_i64(), b.as_i64()) {
                a == b
            } else if let (Some(a), Some(b)) = (a.as_u64(), b.as_u64()) {
                a == b
            } else {
                a.as_f64() == b.as_f64()
            }
        }
        _ => false,
    }
}

/// `val @> sub` as Postgres defines it (`JsonbDeepContains`): an object
/// contains an object whose every key it has with a contained value; an
/// array contains an array each of whose elements equals (scalars) or is
/// contained in (containers) some element of it, regardless of order and
/// repetition. At the top level only, an array also contains a scalar
/// that is one of its elements, and a scalar contains an equal scalar.
pub(crate) fn contains(val: &Value, sub: &Value) -> bool {
    match (val, sub) {
        (Value::Array(items), s) if is_scalar(s) => items.iter().any(|i| scalar_eq(i, s)),
        (a, b) if is_scalar(a) && is_scalar(b) => scalar_eq(a, b),
        _ => deep_contains(val, sub),
    }
}

/// Containment of containers of the same kind, below the top level.
fn deep_contains(val: &Value, sub: &Value) -> bool {
    match (val, sub) {
        (Value::Object(have), Value::Object(want)) => {
            have.len() >= want.len()
                && want.iter().all(|(k, w)| match have.get(k) {
                    Some(h) if is_scalar(h) && is_scalar(w) => scalar_eq(h, w),
                    Some(h) if !is_scalar(h) && !is_scalar(w) => deep_contains(h, w),
                    _ => false,
                })
        }
        (Value::Array(have), Value::Array(want)) => want.iter().all(|w| {
            if is_scalar(w) {
                have.iter().any(|h| scalar_eq(h, w))
            } else {
                have.iter().any(|h| !is_scalar(h) && deep_contains(h, w))
            }
        }),
        _ => false,
    }
}

/// `v ? key`: a top-level key of an object, a string element of an array,
/// or (a scalar document being a one-element array to Postgres) the string
/// itself.
pub(crate) fn exists(v: &Value, key: &str) -> bool {
    match v {
        Value::Object(map) => map.contains_key(key),
        Value::Array(items) => items.iter().any(|i| i.as_str() == Some(key)),
        Value::String(s) => s == key,
        _ => false,
    }
}

/// `jsonb_typeof`'s name for the kind of `v`.
fn type_of(v: &Value) -> &'static str {
    match v {
        Value::Object(_) => "object",
        Value::Array(_) => "array",
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Bool(_) => "boolean",
        Value::Null => "null",
    }
}

/// `jsonb_strip_nulls`: object fields whose value is `null` removed, at
/// every depth (array elements that are `null` stay).
fn strip_nulls(v: &Value) -> Value {
    match v {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), strip_nulls(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(strip_nulls).collect()),
        other => other.clone(),
    }
}

/// `jsonb_pretty`: Postgres's indented form (four spaces a level, one
/// element or field a line, an empty container's brackets on two lines).
fn pretty(v: &Value) -> String {
    let mut out = String::new();
    write_pretty(v, 0, &mut out);
    out
}

fn newline(level: usize, out: &mut String) {
    out.push('\n');
    out.push_str(&"    ".repeat(level));
}

fn write_pretty(v: &Value, level: usize, out: &mut String) {
    let (open, close) = match v {
        Value::Object(_) => ('{', '}'),
        Value::Array(_) => ('[', ']'),
        scalar => {
            out.push_str(&crate::pg::text::jsonb_text(scalar));
            return;
        }
    };
    out.push(open);
    match v {
        Value::Object(map) => {
            for (i, (k, v)) in stored_order(map).into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(level + 1, out);
                out.push_str(&crate::pg::text::jsonb_text(&Value::String(k.clone())));
                out.push_str(": ");
                write_pretty(v, level + 1, out);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(level + 1, out);
                write_pretty(item, level + 1, out);
            }
        }
        _ => {}
    }
    newline(level, out);
    out.push(close);
}

/// A path element as an array position, read as Postgres's `strtoint`
/// reads it: leading white space and a sign allowed, nothing after the
/// digits, within `integer`.
fn path_position(text: &str) -> Option<i32> {
    text.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c'])
        .parse::<i32>()
        .ok()
}

/// `jsonb_set(target, path, new_value, create_if_missing)` on a parsed
/// target, as Postgres's `setPath` does it: the value at the path is
/// replaced; a missing last key is added and a last position before the
/// start or past the end prepends or appends, when `create`; a missing
/// (or scalar) intermediate step leaves the document as it is. A NULL
/// path element reached is 22004, a non-integer one used on an array
/// 22P02.
fn set_path(
    v: &mut Value,
    path: &[Option<&str>],
    level: usize,
    new: &Value,
    create: bool,
) -> Result<()> {
    let Some(step) = path.get(level).copied() else {
        return Ok(());
    };
    let Some(step) = step else {
        return Err(pg_error(
            sqlstate::NULL_VALUE_NOT_ALLOWED,
            format!("path element at position {} is null", level + 1),
        ));
    };
    let last = level + 1 == path.len();
    match v {
        Value::Object(map) => {
            if let Some(child) = map.get_mut(step) {
                if last {
                    *child = new.clone();
                } else {
                    set_path(child, path, level + 1, new, create)?;
                }
            } else if last && create {
                map.insert(step.to_string(), new.clone());
            }
        }
        Value::Array(items) => {
            let position = path_position(step).ok_or_else(|| {
                pg_error(
                    sqlstate::INVALID_TEXT_REPRESENTATION,
                    format!(
                        "path element at position {} is not an integer: \"{step}\"",
                        level + 1
                    ),
                )
            })?;
            let len = items.len();
            // Before the start: `None` (Postgres's INT_MIN).
            let index = if position < 0 {
                len.checked_sub(position.unsigned_abs() as usize)
            } else {
                Some((position as usize).min(len))
            };
            match index {
                // Before the start, or into an empty array: prepend.
                _ if (index.is_none() || len == 0) && last && create => {
                    items.insert(0, new.clone());
                }
                Some(i) if i < len => {
                    if last {
                        items[i] = new.clone();
                    } else {
                        set_path(&mut items[i], path, level + 1, new, create)?;
                    }
                }
                Some(_) if last && create => items.push(new.clone()),
                _ => {}
            }
        }
        // A scalar on the way: nothing to set.
        _ => {}
    }
    Ok(())
}

/// `a || b` as Postgres's `jsonb_concat`: two objects merge (the right
/// one's fields win); otherwise both sides are arrays, a scalar or object
/// standing for the one-element array holding it, and the arrays are
/// concatenated.
fn concat(a: Value, b: Value) -> Value {
    match (a, b) {
        (Value::Object(mut left), Value::Object(right)) => {
            left.extend(right);
            Value::Object(left)
        }
        (a, b) => {
            let items = |v: Value| match v {
                Value::Array(items) => items,
                other => vec![other],
            };
            let mut out = items(a);
            out.extend(items(b));
            Value::Array(out)
        }
    }
}

/// What `jsonb - x` removes.
enum Removal<'a> {
    /// A key of an object, or the string elements equal to it of an array.
    Key(&'a str),
    /// Several such keys (`- text[]`; NULL elements are skipped).
    Keys(Vec<Option<&'a str>>),
    /// The array element at a position (negative from the end).
    Index(i64),
}

/// `doc - removal` as Postgres's `jsonb_delete` variants compute it.
fn delete(doc: Value, removal: &Removal) -> Result<Value> {
    let removes = |k: &str| match removal {
        Removal::Key(key) => *key == k,
        Removal::Keys(keys) => keys.iter().flatten().any(|key| *key == k),
        Removal::Index(_) => false,
    };
    match (doc, removal) {
        (doc, _) if is_scalar(&doc) => Err(pg_error(
            sqlstate::INVALID_PARAMETER_VALUE,
            "cannot delete from scalar",
        )),
        (Value::Object(_), Removal::Index(_)) => Err(pg_error(
            sqlstate::INVALID_PARAMETER_VALUE,
            "cannot delete from object using integer index",
        )),
        (Value::Object(mut map), _) => {
            map.retain(|k, _| !removes(k));
            Ok(Value::Object(map))
        }
        (Value::Array(mut items), Removal::Index(i)) => {
            let len = items.len() as i64;
            let at = if *i < 0 { len + i } else { *i };
            if (0..len).contains(&at) {
                items.remove(at as usize);
            }
            Ok(Value::Array(items))
        }
        (Value::Array(mut items), _) => {
            items.retain(|item| !item.as_str().is_some_and(removes));
            Ok(Value::Array(items))
        }
        (doc, _) => Ok(doc),
    }
}

/// `jsonb_set` on one row's arguments.
fn jsonb_set(target: &str, path: &[Option<&str>], new: &str, create: bool) -> Result<String> {
    let mut doc = parse_jsonb(target)?;
    let new = parse_jsonb(new)?;
    if is_scalar(&doc) {
        return Err(pg_error(
            sqlstate::INVALID_PARAMETER_VALUE,
            "cannot set path in scalar",
        ));
    }
    let empty = match &doc {
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    };
    // An empty container with nothing to create, or no path: unchanged.
    if (!empty || create) && !path.is_empty() {
        set_path(&mut doc, path, 0, &new, create)?;
    }
    Ok(crate::pg::text::jsonb_text(&doc))
}

/// One row's result.
enum Out {
    Bool(Option<bool>),
    Int(Option<i32>),
    Text(Option<String>),
}

/// The arguments of one call, as arrays of the call's rows.
struct Args {
    /// Text (and `jsonb`) arguments, by position (`None` where the
    /// argument is not text).
    text: Vec<Option<StringArray>>,
    /// The `text[]` argument, if the function has one.
    path: Option<GenericListArray<i32>>,
    /// The `boolean` argument, if the function has one.
    flag: Option<BooleanArray>,
    /// The integer argument (`jsonb - integer`), if the function has one.
    index: Option<arrow::array::Int64Array>,
}

impl Args {
    fn text(&self, i: usize, row: usize) -> Option<&str> {
        let a = self.text.get(i)?.as_ref()?;
        (!a.is_null(row)).then(|| a.value(row))
    }

    /// Row `row` of the `text[]` argument (NULL elements as `None`).
    fn path(&self, row: usize) -> Result<Option<Vec<Option<&str>>>> {
        let Some(paths) = &self.path else {
            return Ok(None);
        };
        if paths.is_null(row) {
            return Ok(None);
        }
        let offsets = paths.value_offsets();
        let (start, end) = (offsets[row] as usize, offsets[row + 1] as usize);
        let items = paths
            .values()
            .as_any()
            .downcast_ref::<StringArray>()
            .ok_or_else(|| exec_datafusion_err!("a jsonb path is text[]"))?;
        Ok(Some(
            (start..end)
                .map(|i| (!items.is_null(i)).then(|| items.value(i)))
                .collect(),
        ))
    }
}

/// `a` as `text[]`.
fn as_text_array(a: &ArrayRef) -> Result<GenericListArray<i32>> {
    let cast = arrow::compute::cast(a, &text_array_type())?;
    cast.as_any()
        .downcast_ref::<GenericListArray<i32>>()
        .cloned()
        .ok_or_else(|| exec_datafusion_err!("text[] argument expected"))
}

impl JsonbFunction {
    /// 42883, as Postgres answers a call no signature of the function takes.
    fn no_such_function(&self, arg_types: &[DataType]) -> DataFusionError {
        let types: Vec<String> = arg_types.iter().map(type_name).collect();
        DataFusionError::External(Box::new(SqlStateError {
            code: sqlstate::UNDEFINED_FUNCTION,
            message: format!(
                "function {}({}) does not exist",
                self.name(),
                types.join(", ")
            ),
        }))
    }

    /// One row's result; `None` arguments are SQL NULL.
    fn row(&self, args: &Args, row: usize) -> Result<Out> {
        let doc = args.text(0, row);
        Ok(match self.kind {
            Kind::Operator(op) => Out::Bool(match op {
                JsonbOperator::Contains | JsonbOperator::ContainedIn => {
                    match (doc, args.text(1, row)) {
                        (Some(a), Some(b)) => {
                            let (a, b) = (parse_jsonb(a)?, parse_jsonb(b)?);
                            Some(if op == JsonbOperator::Contains {
                                contains(&a, &b)
                            } else {
                                contains(&b, &a)
                            })
                        }
                        _ => None,
                    }
                }
                JsonbOperator::Exists => match (doc, args.text(1, row)) {
                    (Some(a), Some(key)) => Some(exists(&parse_jsonb(a)?, key)),
                    _ => None,
                },
                JsonbOperator::ExistsAny | JsonbOperator::ExistsAll => {
                    match (doc, args.path(row)?) {
                        (Some(a), Some(keys)) => {
                            let a = parse_jsonb(a)?;
                            // NULL keys are skipped, as in Postgres.
                            let mut keys = keys.into_iter().flatten();
                            Some(if op == JsonbOperator::ExistsAny {
                                keys.any(|k| exists(&a, k))
                            } else {
                                keys.all(|k| exists(&a, k))
                            })
                        }
                        _ => None,
                    }
                }
            }),
            Kind::Typeof => Out::Text(
                doc.map(|d| parse_jsonb(d).map(|v| type_of(&v).to_string()))
                    .transpose()?,
            ),
            Kind::ArrayLength => Out::Int(
                doc.map(|d| match parse_jsonb(d)? {
                    Value::Array(items) => i32::try_from(items.len()).map_err(|_| {
                        pg_error(sqlstate::NUMERIC_VALUE_OUT_OF_RANGE, "integer out of range")
                    }),
                    Value::Object(_) => Err(pg_error(
                        sqlstate::INVALID_PARAMETER_VALUE,
                        "cannot get array length of a non-array",
                    )),
                    _ => Err(pg_error(
                        sqlstate::INVALID_PARAMETER_VALUE,
                        "cannot get array length of a scalar",
                    )),
                })
                .transpose()?,
            ),
            Kind::StripNulls => Out::Text(
                doc.map(|d| parse_jsonb(d).map(|v| crate::pg::text::jsonb_text(&strip_nulls(&v))))
                    .transpose()?,
            ),
            Kind::Pretty => Out::Text(
                doc.map(|d| parse_jsonb(d).map(|v| pretty(&v)))
                    .transpose()?,
            ),
            Kind::Concat => Out::Text(match (doc, args.text(1, row)) {
                (Some(a), Some(b)) => Some(crate::pg::text::jsonb_text(&concat(
                    parse_jsonb(a)?,
                    parse_jsonb(b)?,
                ))),
                _ => None,
            }),
            Kind::Delete => {
                let removal = if let Some(index) = &args.index {
                    (!index.is_null(row)).then(|| Removal::Index(index.value(row)))
                } else if args.path.is_some() {
                    args.path(row)?.map(Removal::Keys)
                } else {
                    args.text(1, row).map(Removal::Key)
                };
                Out::Text(match (doc, removal) {
                    (Some(d), Some(removal)) => Some(crate::pg::text::jsonb_text(&delete(
                        parse_jsonb(d)?,
                        &removal,
                    )?)),
                    _ => None,
                })
            }
            Kind::Set => {
                let create = match &args.flag {
                    None => Some(true),
                    Some(flags) => (!flags.is_null(row)).then(|| flags.value(row)),
                };
                Out::Text(match (doc, args.path(row)?, args.text(2, row), create) {
                    (Some(target), Some(path), Some(new), Some(create)) => {
                        Some(jsonb_set(target, &path, new, create)?)
                    }
                    _ => None,
                })
            }
        })
    }
}

impl ScalarUDFImpl for JsonbFunction {
    fn name(&self) -> &str {
        match self.kind {
            Kind::Operator(JsonbOperator::Contains) => "jsonb_contains",
            Kind::Operator(JsonbOperator::ContainedIn) => "jsonb_contained",
            Kind::Operator(JsonbOperator::Exists) => "jsonb_exists",
            Kind::Operator(JsonbOperator::ExistsAny) => "jsonb_exists_any",
            Kind::Operator(JsonbOperator::ExistsAll) => "jsonb_exists_all",
            Kind::Typeof => "jsonb_typeof",
            Kind::ArrayLength => "jsonb_array_length",
            Kind::StripNulls => "jsonb_strip_nulls",
            Kind::Pretty => "jsonb_pretty",
            Kind::Set => "jsonb_set",
            Kind::Concat => "jsonb_concat",
            Kind::Delete => "jsonb_delete",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    /// Documents and keys are text (`jsonb` is stored as text); key lists
    /// and paths `text[]` (a string literal is read as one, as Postgres
    /// reads an untyped literal); `create_if_missing` boolean.
    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let text = DataType::Utf8;
        let coerced = match (self.kind, arg_types) {
            (
                Kind::Operator(
                    JsonbOperator::Contains | JsonbOperator::ContainedIn | JsonbOperator::Exists,
                ),
                [a, b],
            ) if texty(a) && texty(b) => Some(vec![text.clone(), text]),
            (Kind::Operator(JsonbOperator::ExistsAny | JsonbOperator::ExistsAll), [a, keys])
                if texty(a) && text_array_like(keys) =>
            {
                Some(vec![text, text_array_type()])
            }
            (Kind::Typeof | Kind::ArrayLength | Kind::StripNulls | Kind::Pretty, [a])
                if texty(a) =>
            {
                Some(vec![text])
            }
            (Kind::Concat, [a, b]) if texty(a) && texty(b) => Some(vec![text.clone(), text]),
            (Kind::Delete, [a, b]) if texty(a) && texty(b) => Some(vec![text.clone(), text]),
            (Kind::Delete, [a, b]) if texty(a) && b.is_integer() => {
                Some(vec![text, DataType::Int64])
            }
            (Kind::Delete, [a, b]) if texty(a) && text_array_like(b) => {
                Some(vec![text, text_array_type()])
            }
            (Kind::Set, [a, path, new]) if texty(a) && text_array_like(path) && texty(new) => {
                Some(vec![text.clone(), text_array_type(), text])
            }
            (Kind::Set, [a, path, new, create])
                if texty(a)
                    && text_array_like(path)
                    && texty(new)
                    && matches!(create, DataType::Boolean | DataType::Null) =>
            {
                Some(vec![
                    text.clone(),
                    text_array_type(),
                    text,
                    DataType::Boolean,
                ])
            }
            _ => None,
        };
        coerced.ok_or_else(|| self.no_such_function(arg_types))
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(match self.kind {
            Kind::Operator(_) => DataType::Boolean,
            Kind::ArrayLength => DataType::Int32,
            Kind::Typeof
            | Kind::StripNulls
            | Kind::Pretty
            | Kind::Set
            | Kind::Concat
            | Kind::Delete => DataType::Utf8,
        })
    }

    /// `jsonb` results are marked as such, so they print and chain as
    /// `jsonb`.
    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        let types: Vec<DataType> = args
            .arg_fields
            .iter()
            .map(|f| f.data_type().clone())
            .collect();
        Ok(Arc::new(match self.kind {
            Kind::StripNulls | Kind::Set | Kind::Concat | Kind::Delete => {
                PgType::Jsonb.field(self.name(), true)
            }
            _ => Field::new(self.name(), self.return_type(&types)?, true),
        }))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let scalar = crate::udf::all_scalar(&args);
        // All-scalar calls (constant folding) compute one row.
        let rows = if scalar { 1 } else { args.number_rows };
        let arrays: Vec<ArrayRef> = args
            .args
            .iter()
            .map(|a| a.to_array(rows))
            .collect::<Result<_>>()?;
        let path_at = match self.kind {
            Kind::Operator(JsonbOperator::ExistsAny | JsonbOperator::ExistsAll) | Kind::Set => {
                Some(1)
            }
            Kind::Delete if matches!(arrays[1].data_type(), DataType::List(_)) => Some(1),
            _ => None,
        };
        let index_at =
            (self.kind == Kind::Delete && arrays[1].data_type().is_integer()).then_some(1);
        let flag_at = (self.kind == Kind::Set).then_some(3);
        let mut call = Args {
            text: Vec::with_capacity(arrays.len()),
            path: None,
            flag: None,
            index: None,
        };
        for (i, a) in arrays.iter().enumerate() {
            if Some(i) == path_at {
                call.path = Some(as_text_array(a)?);
                call.text.push(None);
            } else if Some(i) == index_at {
                let index = arrow::compute::cast(a, &DataType::Int64)?;
                call.index = index
                    .as_any()
                    .downcast_ref::<arrow::array::Int64Array>()
                    .cloned();
                call.text.push(None);
            } else if Some(i) == flag_at {
                let flags = arrow::compute::cast(a, &DataType::Boolean)?;
                call.flag = flags.as_any().downcast_ref::<BooleanArray>().cloned();
                call.text.push(None);
            } else {
                call.text.push(Some(as_text(a, self.name())?));
            }
        }
        let results: Vec<Out> = (0..rows)
            .map(|row| self.row(&call, row))
            .collect::<Result<_>>()?;
        let result: ArrayRef = match self.return_type(&[])? {
            DataType::Boolean => Arc::new(
                results
                    .into_iter()
                    .map(|r| match r {
                        Out::Bool(b) => b,
                        _ => None,
                    })
                    .collect::<BooleanArray>(),
            ),
            DataType::Int32 => Arc::new(
                results
                    .into_iter()
                    .map(|r| match r {
                        Out::Int(i) => i,
                        _ => None,
                    })
                    .collect::<Int32Array>(),
            ),
            _ => Arc::new(
                results
                    .into_iter()
                    .map(|r| match r {
                        Out::Text(t) => t,
                        _ => None,
                    })
                    .collect::<StringArray>(),
            ),
        };
        crate::udf::to_columnar(result, scalar)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn j(s: &str) -> Value {
        serde_json::from_str(s).unwrap()
    }

    #[test]
    fn containment_follows_postgres() {
        let c = |a: &str, b: &str| contains(&j(a), &j(b));
        assert!(c("[1, 2]", "1"));
        assert!(!c("1", "[1]"));
        assert!(c("1", "1"));
        assert!(!c(r#"{"a": [1, 2]}"#, r#"{"a": 1}"#));
        assert!(!c("[[1, 2], [3]]", "[[1, 3]]"));
        assert!(c("[1, [2]]", "[[2]]"));
        assert!(c(r#"{"a": 1.0}"#, r#"{"a": 1}"#));
        assert!(c("[1, 1, 2]", "[1, 1, 1]"));
        assert!(c("{}", "{}"));
        assert!(c("[]", "[]"));
        assert!(!c(r#"{"a": 1}"#, "[]"));
        assert!(!c("[]", "{}"));
        assert!(c(
            r#"{"a": {"b": [1, {"c": 2, "d": 3}]}, "e": null}"#,
            r#"{"a": {"b": [{"c": 2}]}, "e": null}"#
        ));
    }

    #[test]
    fn set_follows_postgres() {
        let set = |t: &str, p: &[Option<&str>], n: &str, c: bool| jsonb_set(t, p, n, c).unwrap();
        assert_eq!(set(r#"{"a": 1}"#, &[], "2", true), r#"{"a": 1}"#);
        assert_eq!(
            set(r#"{"a": 1}"#, &[Some("a"), Some("b")], "2", true),
            r#"{"a": 1}"#
        );
        assert_eq!(
            set(r#"{"a": {}}"#, &[Some("a"), Some("b")], "2", true),
            r#"{"a": {"b": 2}}"#
        );
        assert_eq!(set("[1, 2, 3]", &[Some("-1")], "9", true), "[1, 2, 9]");
        assert_eq!(set("[1, 2, 3]", &[Some("-5")], "9", true), "[9, 1, 2, 3]");
        assert_eq!(set("[1, 2, 3]", &[Some("10")], "9", true), "[1, 2, 3, 9]");
        assert_eq!(set("[]", &[Some("5")], "9", true), "[9]");
        assert_eq!(set("[1, 2, 3]", &[Some("-5")], "9", false), "[1, 2, 3]");
        assert_eq!(set("[1]", &[Some("5"), Some("x")], "1", true), "[1]");
        assert_eq!(
            set(r#"{"a": 1}"#, &[Some("b"), None], "1", true),
            r#"{"a": 1}"#
        );
        assert!(jsonb_set(r#"{"a": 1}"#, &[Some("a"), None], "1", true).is_err());
        assert!(jsonb_set("[1]", &[Some("1x")], "1", true).is_err());
        assert!(jsonb_set(r#""x""#, &[Some("a")], "1", true).is_err());
    }

    #[test]
    fn pretty_follows_postgres() {
        assert_eq!(
            pretty(&j(r#"{"a": 1, "b": [1, {"c": []}], "d": {}}"#)),
            "{\n    \"a\": 1,\n    \"b\": [\n        1,\n        {\n            \"c\": [\n            ]\n        }\n    ],\n    \"d\": {\n    }\n}"
        );
        assert_eq!(pretty(&j("[[]]")), "[\n    [\n    ]\n]");
        assert_eq!(pretty(&j(r#""x""#)), r#""x""#);
    }
}
