//! PostgreSQL's `jsonb` access operators and the functions behind them:
//!
//! | operator            | function                         | result              |
//! |---------------------|----------------------------------|---------------------|
//! | `jsonb -> text`     | `jsonb_object_field`             | the field, `jsonb`  |
//! | `jsonb ->> text`    | `jsonb_object_field_text`        | the field, `text`   |
//! | `jsonb -> integer`  | `jsonb_array_element`            | the element, `jsonb`|
//! | `jsonb ->> integer` | `jsonb_array_element_text`       | the element, `text` |
//! | `jsonb #> text[]`   | `jsonb_extract_path(j, VARIADIC)`| the value, `jsonb`  |
//! | `jsonb #>> text[]`  | `jsonb_extract_path_text`        | the value, `text`   |
//!
//! Freshet stores `jsonb` as its canonical text in a `Utf8` column (the
//! Postgres type is in the field's metadata, see [`PgType::field`]), so each
//! function parses the document, takes the part asked for and prints it
//! canonically again ([`crate::pg::text::jsonb_text`]): the result is exactly
//! the text the part would be stored as. A missing key or index, the wrong
//! kind of container and NULL arguments all give NULL; the `text` forms
//! give a JSON string without its quotes and JSON `null` as SQL NULL.
//!
//! [`JsonbOperatorPlanner`] also plans the containment and existence
//! operators `@>`, `<@`, `?`, `?|` and `?&` with a `jsonb` operand, as
//! calls of the functions of [`crate::query::jsonb_functions`].
//!
//! DataFusion parses the operators but cannot type them ("Operator ->> is
//! not yet supported"); [`JsonbOperatorPlanner`] turns them into calls of
//! these functions while the SQL is planned, choosing the function by the
//! right operand's type as PostgreSQL's operator resolution does (for a
//! parameter, whose type is bound only after planning, by the type bound:
//! `jsonb_field_or_element[_text]`). The functions are ordinary registered,
//! immutable UDFs, so materialized views that use the operators are lowered
//! and maintained like any other expression. Freshet has no separate `json` type (`::json` is refused and
//! `json_build_object` returns `jsonb`), so the `json` variants are not
//! needed.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, GenericListArray, Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::{DFSchema, Result, ScalarValue, exec_datafusion_err};
use datafusion::error::DataFusionError;
use datafusion::logical_expr::expr::{Placeholder, ScalarFunction};
use datafusion::logical_expr::planner::{ExprPlanner, PlannerResult, RawBinaryExpr};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ExprSchemable, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF,
    ScalarUDFImpl, Signature, Volatility,
};
use datafusion::sql::sqlparser::ast::BinaryOperator;
use freshet_repr::{PgType, SqlStateError, sqlstate};
use serde_json::Value;

use crate::query::jsonb_functions::{JsonbOperator, operator_udf};

/// How a function reaches into the document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Access {
    /// By object key (`-> text`).
    Field,
    /// By array position (`-> integer`), negative counting from the end.
    Element,
    /// By a path of keys and positions (`#> text[]`).
    Path,
    /// `->` with a parameter (`b -> $1`): Freshet plans a statement before
    /// its parameters' types are known (`PREPARE p (int) AS ...` binds
    /// them after), so key or position is decided by the type bound.
    FieldOrElement,
}

/// Every function of this module, for registration in the session (which
/// is also where dataflow plans of materialized views find them by name).
pub fn functions() -> Vec<Arc<ScalarUDF>> {
    [
        Access::Field,
        Access::Element,
        Access::Path,
        Access::FieldOrElement,
    ]
    .into_iter()
    .flat_map(|access| [udf(access, false), udf(access, true)])
    .collect()
}

/// The function for `access`, returning `text` when `as_text`.
fn udf(access: Access, as_text: bool) -> Arc<ScalarUDF> {
    Arc::new(ScalarUDF::new_from_impl(JsonbAccess {
        access,
        as_text,
        signature: Signature::user_defined(Volatility::Immutable),
    }))
}

/// One of the six access functions (see the module docs).
#[derive(Debug, PartialEq, Eq, Hash)]
struct JsonbAccess {
    access: Access,
    as_text: bool,
    signature: Signature,
}

/// Whether values of `t` are text (or an untyped NULL, which Postgres
/// would resolve to text).
pub(crate) fn texty(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8 | DataType::Null
    )
}

/// The Postgres name of an argument type, for errors (`unknown` for an
/// untyped NULL, as Postgres says).
pub(crate) fn type_name(t: &DataType) -> String {
    match t {
        DataType::Null => "unknown".into(),
        t => PgType::from_arrow(t)
            .map(|p| p.sql_name())
            .unwrap_or_else(|| t.to_string()),
    }
}

/// The Arrow type of `text[]`, which `#>` paths are.
pub(crate) fn text_array_type() -> DataType {
    PgType::Array(Box::new(PgType::Text)).arrow_type()
}

impl JsonbAccess {
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
}

impl ScalarUDFImpl for JsonbAccess {
    fn name(&self) -> &str {
        match (self.access, self.as_text) {
            (Access::Field, false) => "jsonb_object_field",
            (Access::Field, true) => "jsonb_object_field_text",
            (Access::Element, false) => "jsonb_array_element",
            (Access::Element, true) => "jsonb_array_element_text",
            (Access::Path, false) => "jsonb_extract_path",
            (Access::Path, true) => "jsonb_extract_path_text",
            (Access::FieldOrElement, false) => "jsonb_field_or_element",
            (Access::FieldOrElement, true) => "jsonb_field_or_element_text",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    /// The document is text; the key text, the position `bigint`; a path
    /// is either one `text[]` (what `#>` passes) or one or more text
    /// arguments (Postgres's `VARIADIC text[]` as it is usually called).
    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let Some((doc, rest)) = arg_types.split_first() else {
            return Err(self.no_such_function(arg_types));
        };
        if !texty(doc) {
            return Err(self.no_such_function(arg_types));
        }
        let rest: Option<Vec<DataType>> = match (self.access, rest) {
            (Access::Field | Access::FieldOrElement, [key]) if texty(key) => {
                Some(vec![DataType::Utf8])
            }
            (Access::Element, [index]) if index.is_integer() || index.is_null() => {
                Some(vec![DataType::Int64])
            }
            (Access::FieldOrElement, [index]) if index.is_integer() => Some(vec![DataType::Int64]),
            // The operator was written, not this function: say so.
            (Access::FieldOrElement, [other]) => {
                return Err(DataFusionError::External(Box::new(SqlStateError {
                    code: sqlstate::UNDEFINED_FUNCTION,
                    message: format!(
                        "operator does not exist: jsonb {} {}",
                        if self.as_text { "->>" } else { "->" },
                        type_name(other)
                    ),
                })));
            }
            (Access::Path, [DataType::List(item)]) if texty(item.data_type()) => {
                Some(vec![text_array_type()])
            }
            (Access::Path, path) if !path.is_empty() && path.iter().all(texty) => {
                Some(vec![DataType::Utf8; path.len()])
            }
            _ => None,
        };
        let rest = rest.ok_or_else(|| self.no_such_function(arg_types))?;
        Ok(std::iter::once(DataType::Utf8).chain(rest).collect())
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    /// `jsonb` results are marked as such, so they print and chain (`b ->
    /// 'a' ->> 'c'`) as `jsonb`; the `_text` forms are plain text.
    fn return_field_from_args(&self, _args: ReturnFieldArgs) -> Result<FieldRef> {
        Ok(Arc::new(if self.as_text {
            Field::new(self.name(), DataType::Utf8, true)
        } else {
            PgType::Jsonb.field(self.name(), true)
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
        let Some((doc, rest)) = arrays.split_first() else {
            return Err(exec_datafusion_err!(
                "{} takes a jsonb argument",
                self.name()
            ));
        };
        let docs = as_text(doc, self.name())?;
        let steps = Steps::new(self.access, rest, self.name())?;
        let mut out: Vec<Option<String>> = Vec::with_capacity(rows);
        let mut path: Vec<Step<'_>> = Vec::new();
        for row in 0..rows {
            if docs.is_null(row) || !steps.row(row, &mut path)? {
                out.push(None);
                continue;
            }
            let document = parse_jsonb(docs.value(row))?;
            let found = path.iter().try_fold(&document, |v, step| step.apply(v));
            out.push(found.and_then(|v| render(v, self.as_text)));
        }
        crate::udf::to_columnar(crate::udf::array(StringArray::from(out)), scalar)
    }
}

/// `a` as text (it is `Utf8` after [`JsonbAccess::coerce_types`]).
pub(crate) fn as_text(a: &ArrayRef, function: &str) -> Result<StringArray> {
    let cast = arrow::compute::cast(a, &DataType::Utf8)?;
    cast.as_any()
        .downcast_ref::<StringArray>()
        .cloned()
        .ok_or_else(|| exec_datafusion_err!("{function}: text argument expected"))
}

/// Parse a stored document. Stored `jsonb` is valid JSON; text given to
/// the functions directly may not be, which Postgres reports as 22P02.
pub(crate) fn parse_jsonb(text: &str) -> Result<Value> {
    serde_json::from_str(text).map_err(|_| {
        crate::error::sqlstate_error(
            sqlstate::INVALID_TEXT_REPRESENTATION,
            format!("invalid input syntax for type json: \"{text}\""),
        )
    })
}

/// The result for a value found: canonical `jsonb` text, or for the text
/// forms a string's contents and SQL NULL for JSON `null`.
fn render(v: &Value, as_text: bool) -> Option<String> {
    match v {
        Value::Null if as_text => None,
        Value::String(s) if as_text => Some(s.clone()),
        v => Some(crate::pg::text::jsonb_text(v)),
    }
}

/// One step into a document.
#[derive(Debug, Clone, Copy)]
enum Step<'a> {
    /// An object's field.
    Key(&'a str),
    /// An array's element; negative counts from the end.
    Index(i64),
    /// A `#>` path element: a key into an object, or into an array a
    /// position written as an integer.
    Either(&'a str),
}

impl Step<'_> {
    /// The value this step reaches from `v`, if there is one.
    fn apply<'v>(&self, v: &'v Value) -> Option<&'v Value> {
        match (*self, v) {
            (Step::Key(k) | Step::Either(k), Value::Object(map)) => map.get(k),
            (Step::Index(i), Value::Array(items)) => element(items, i),
            // Postgres stores a scalar document as a one-element array, and
            // `->` / `->>` with an integer see it as one: `'"s"'::jsonb -> 0`
            // and `-> -1` are `"s"`. (Index steps only ever start at the
            // value given to the operator, which is where Postgres does
            // this; `#>` paths do not.)
            (Step::Index(i), scalar) if !scalar.is_object() => {
                element(std::slice::from_ref(scalar), i)
            }
            (Step::Either(text), Value::Array(items)) => element(items, path_index(text)?),
            _ => None,
        }
    }
}

/// `items[i]`, with negative `i` counting from the end.
fn element(items: &[Value], i: i64) -> Option<&Value> {
    let len = i64::try_from(items.len()).ok()?;
    let i = if i < 0 { len.checked_add(i)? } else { i };
    items.get(usize::try_from(i).ok()?)
}

/// A `#>` path element as an array position, read as Postgres reads it
/// (`strtoint`: leading white space and a sign allowed, nothing after the
/// digits, within `integer`); not a position gives NULL.
fn path_index(text: &str) -> Option<i64> {
    let digits = text.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    digits.parse::<i32>().ok().map(i64::from)
}

/// The steps of every row: a key, a position or a path per row.
enum Steps {
    Key(StringArray),
    Index(Int64Array),
    /// `#> text[]`: one path per row.
    PathArray(GenericListArray<i32>),
    /// `jsonb_extract_path(j, 'a', 'b')`: one column per path element.
    PathElements(Vec<StringArray>),
}

impl Steps {
    /// The steps given by the arguments after the document.
    fn new(access: Access, rest: &[ArrayRef], function: &str) -> Result<Steps> {
        let missing = || exec_datafusion_err!("{function}: missing argument");
        Ok(match access {
            Access::FieldOrElement if rest.first().is_some_and(|a| a.data_type().is_integer()) => {
                Steps::new(Access::Element, rest, function)?
            }
            Access::Field | Access::FieldOrElement => {
                Steps::Key(as_text(rest.first().ok_or_else(missing)?, function)?)
            }
            Access::Element => {
                let index =
                    arrow::compute::cast(rest.first().ok_or_else(missing)?, &DataType::Int64)?;
                Steps::Index(
                    index
                        .as_any()
                        .downcast_ref::<Int64Array>()
                        .cloned()
                        .ok_or_else(|| exec_datafusion_err!("{function}: integer expected"))?,
                )
            }
            Access::Path => match rest {
                [list] if matches!(list.data_type(), DataType::List(_)) => Steps::PathArray(
                    list.as_any()
                        .downcast_ref::<GenericListArray<i32>>()
                        .cloned()
                        .ok_or_else(|| exec_datafusion_err!("{function}: text[] expected"))?,
                ),
                _ => Steps::PathElements(
                    rest.iter()
                        .map(|a| as_text(a, function))
                        .collect::<Result<_>>()?,
                ),
            },
        })
    }

    /// Fill `path` with the steps of `row`. False if a step is NULL (the
    /// result is then NULL, as in Postgres).
    fn row<'a>(&'a self, row: usize, path: &mut Vec<Step<'a>>) -> Result<bool> {
        path.clear();
        match self {
            Steps::Key(keys) => {
                if keys.is_null(row) {
                    return Ok(false);
                }
                path.push(Step::Key(keys.value(row)));
            }
            Steps::Index(indexes) => {
                if indexes.is_null(row) {
                    return Ok(false);
                }
                path.push(Step::Index(indexes.value(row)));
            }
            Steps::PathArray(paths) => {
                if paths.is_null(row) {
                    return Ok(false);
                }
                let offsets = paths.value_offsets();
                let (start, end) = (offsets[row] as usize, offsets[row + 1] as usize);
                let items = paths
                    .values()
                    .as_any()
                    .downcast_ref::<StringArray>()
                    .ok_or_else(|| exec_datafusion_err!("a jsonb path is text[]"))?;
                for i in start..end {
                    if items.is_null(i) {
                        return Ok(false);
                    }
                    path.push(Step::Either(items.value(i)));
                }
            }
            Steps::PathElements(columns) => {
                for column in columns {
                    if column.is_null(row) {
                        return Ok(false);
                    }
                    path.push(Step::Either(column.value(row)));
                }
            }
        }
        Ok(true)
    }
}

/// Plans `->`, `->>`, `#>` and `#>>` as calls of this module's functions.
///
/// DataFusion would plan them as binary expressions it cannot type. The
/// function is chosen the way Postgres resolves the operator: `->` with an
/// integer on the right is array access, with text (or an untyped literal
/// or NULL) object access; the right of `#>` is `text[]`, and a string
/// literal there (`'{a,b}'`) is read as one, as Postgres reads an untyped
/// literal. A left operand must be `jsonb`; since `coalesce` and `CASE`
/// lose the `jsonb` mark of their text, only a column or cast known to be
/// of another type (or a non-text value) is refused, with Postgres's
/// 42883; other text is read as JSON.
#[derive(Debug, Default)]
pub struct JsonbOperatorPlanner;

impl ExprPlanner for JsonbOperatorPlanner {
    fn plan_binary_op(
        &self,
        expr: RawBinaryExpr,
        schema: &DFSchema,
    ) -> Result<PlannerResult<RawBinaryExpr>> {
        if let Some((symbol, op)) = containment_or_existence(&expr.op) {
            return plan_containment_or_existence(expr, symbol, op, schema);
        }
        if matches!(
            expr.op,
            BinaryOperator::StringConcat | BinaryOperator::Minus
        ) {
            return plan_concat_or_delete(expr, schema);
        }
        // `b->-1` is lexed as one operator `->-`; Postgres's lexer never
        // ends an operator like this one in `-` or `+` (only operators
        // holding one of `~!@#%^&|`?` may), so it reads `b -> -1`.
        let (symbol, path, as_text, sign) = match &expr.op {
            BinaryOperator::Arrow => ("->", false, false, None),
            BinaryOperator::LongArrow => ("->>", false, true, None),
            BinaryOperator::HashArrow => ("#>", true, false, None),
            BinaryOperator::HashLongArrow => ("#>>", true, true, None),
            BinaryOperator::Custom(op) => match op.as_str() {
                "->-" => ("->", false, false, Some(true)),
                "->+" => ("->", false, false, Some(false)),
                "->>-" => ("->>", false, true, Some(true)),
                "->>+" => ("->>", false, true, Some(false)),
                _ => return Ok(PlannerResult::Original(expr)),
            },
            _ => return Ok(PlannerResult::Original(expr)),
        };
        let RawBinaryExpr { left, right, .. } = expr;
        let right = match sign {
            Some(true) => Expr::Negative(Box::new(right)),
            _ => right,
        };
        let (_, left_field) = left.to_field(schema)?;
        let right_type = right.get_type(schema)?;
        let operand_name = |e: &Expr, t: &DataType, field: Option<&Field>| match e {
            Expr::Literal(ScalarValue::Utf8(_) | ScalarValue::Null, _) => "unknown".to_string(),
            _ => field.map_or_else(|| type_name(t), |f| PgType::of_field(f).sql_name()),
        };
        let refuse = || {
            DataFusionError::External(Box::new(SqlStateError {
                code: sqlstate::UNDEFINED_FUNCTION,
                message: format!(
                    "operator does not exist: {} {symbol} {}",
                    operand_name(&left, left_field.data_type(), Some(&left_field)),
                    operand_name(&right, &right_type, None),
                ),
            }))
        };
        let left_ok = match left_field.data_type() {
            DataType::Null => true,
            // A column or a cast states its type; other text (`coalesce`,
            // `CASE`) may be `jsonb` that lost its mark.
            t if texty(t) => {
                !matches!(left, Expr::Column(_) | Expr::Cast(_) | Expr::TryCast(_))
                    || PgType::of_field(&left_field) == PgType::Jsonb
            }
            _ => false,
        };
        if !left_ok {
            return Err(refuse());
        }
        let (access, right) = if path {
            match &right_type {
                DataType::List(item) if texty(item.data_type()) => (Access::Path, right),
                t if texty(t) => (Access::Path, right.cast_to(&text_array_type(), schema)?),
                _ => return Err(refuse()),
            }
        } else if matches!(right, Expr::Placeholder(Placeholder { field: None, .. })) {
            (Access::FieldOrElement, right)
        } else if right_type.is_integer() {
            (Access::Element, right)
        } else if texty(&right_type) {
            (Access::Field, right)
        } else {
            return Err(refuse());
        };
        Ok(PlannerResult::Planned(Expr::ScalarFunction(
            ScalarFunction::new_udf(udf(access, as_text), vec![left, right]),
        )))
    }
}

/// `jsonb || jsonb` (an untyped operand read as `jsonb`, as Postgres
/// resolves it) and `jsonb - text|integer|text[]` as calls of
/// [`crate::query::jsonb_functions`]; any other `||` and `-` is left to
/// DataFusion.
fn plan_concat_or_delete(
    expr: RawBinaryExpr,
    schema: &DFSchema,
) -> Result<PlannerResult<RawBinaryExpr>> {
    let (_, left_field) = expr.left.to_field(schema)?;
    let (_, right_field) = expr.right.to_field(schema)?;
    let l = operand_kind(&expr.left, &left_field);
    let r = operand_kind(&expr.right, &right_field);
    let udf = match expr.op {
        BinaryOperator::StringConcat
            if (l == Operand::Jsonb && r != Operand::Other)
                || (r == Operand::Jsonb && l != Operand::Other) =>
        {
            crate::query::jsonb_functions::concat_udf()
        }
        BinaryOperator::Minus
            if l == Operand::Jsonb
                && (texty(right_field.data_type())
                    || right_field.data_type().is_integer()
                    || matches!(right_field.data_type(), DataType::List(item) if texty(item.data_type()))) =>
        {
            crate::query::jsonb_functions::delete_udf()
        }
        _ => return Ok(PlannerResult::Original(expr)),
    };
    Ok(PlannerResult::Planned(Expr::ScalarFunction(
        ScalarFunction::new_udf(udf, vec![expr.left, expr.right]),
    )))
}

/// The containment and existence operators, with their spelling.
fn containment_or_existence(op: &BinaryOperator) -> Option<(&'static str, JsonbOperator)> {
    Some(match op {
        BinaryOperator::AtArrow => ("@>", JsonbOperator::Contains),
        BinaryOperator::ArrowAt => ("<@", JsonbOperator::ContainedIn),
        BinaryOperator::Question => ("?", JsonbOperator::Exists),
        BinaryOperator::QuestionPipe => ("?|", JsonbOperator::ExistsAny),
        BinaryOperator::QuestionAnd => ("?&", JsonbOperator::ExistsAll),
        _ => return None,
    })
}

/// How an operand stands to `jsonb`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Operand {
    /// Known `jsonb`: its field says so.
    Jsonb,
    /// Text that may be `jsonb`: an untyped literal or NULL, or a computed
    /// text (`coalesce`, `CASE`) that lost the `jsonb` mark.
    Untyped,
    /// A column, cast or value known to be of another type.
    Other,
}

/// What `e` (of field `field`) is to a `jsonb` operator.
fn operand_kind(e: &Expr, field: &Field) -> Operand {
    match field.data_type() {
        DataType::Null => Operand::Untyped,
        _ if PgType::of_field(field) == PgType::Jsonb => Operand::Jsonb,
        t if texty(t) => {
            if matches!(e, Expr::Column(_) | Expr::Cast(_) | Expr::TryCast(_)) {
                Operand::Other
            } else {
                Operand::Untyped
            }
        }
        _ => Operand::Other,
    }
}

/// Plans `@>`, `<@`, `?`, `?|` and `?&` with a `jsonb` operand as calls of
/// [`crate::query::jsonb_functions`]. Arrays keep DataFusion's `@>` and
/// `<@` (planned before this planner is asked, and left alone here when
/// either side is an array); other operands are refused with Postgres's
/// 42883. The right of `?|` and `?&` is `text[]`, a string literal there
/// read as one.
fn plan_containment_or_existence(
    expr: RawBinaryExpr,
    symbol: &str,
    op: JsonbOperator,
    schema: &DFSchema,
) -> Result<PlannerResult<RawBinaryExpr>> {
    let (_, left_field) = expr.left.to_field(schema)?;
    let (_, right_field) = expr.right.to_field(schema)?;
    let is_list = |t: &DataType| matches!(t, DataType::List(_) | DataType::LargeList(_));
    let containment = matches!(op, JsonbOperator::Contains | JsonbOperator::ContainedIn);
    if containment && (is_list(left_field.data_type()) || is_list(right_field.data_type())) {
        return Ok(PlannerResult::Original(expr));
    }
    let RawBinaryExpr { left, right, .. } = expr;
    let operand_name = |e: &Expr, f: &Field| match e {
        Expr::Literal(ScalarValue::Utf8(_) | ScalarValue::Null, _) => "unknown".to_string(),
        _ => PgType::of_field(f).sql_name(),
    };
    let refuse = || {
        DataFusionError::External(Box::new(SqlStateError {
            code: sqlstate::UNDEFINED_FUNCTION,
            message: format!(
                "operator does not exist: {} {symbol} {}",
                operand_name(&left, &left_field),
                operand_name(&right, &right_field),
            ),
        }))
    };
    let l = operand_kind(&left, &left_field);
    let r = operand_kind(&right, &right_field);
    let literal = |e: &Expr| {
        matches!(
            e,
            Expr::Literal(ScalarValue::Utf8(_) | ScalarValue::Null, _)
        )
    };
    if containment && literal(&left) && literal(&right) {
        // Postgres has `@>` for several types and cannot choose.
        return Err(DataFusionError::External(Box::new(SqlStateError {
            code: "42725",
            message: format!("operator is not unique: unknown {symbol} unknown"),
        })));
    }
    let right = match op {
        // Both sides are documents; at least one must be (or may be) jsonb.
        JsonbOperator::Contains | JsonbOperator::ContainedIn => match (l, r) {
            (Operand::Other, _) | (_, Operand::Other) => return Err(refuse()),
            _ => right,
        },
        JsonbOperator::Exists => {
            if l == Operand::Other || r == Operand::Jsonb || !texty(right_field.data_type()) {
                return Err(refuse());
            }
            right
        }
        JsonbOperator::ExistsAny | JsonbOperator::ExistsAll => {
            if l == Operand::Other {
                return Err(refuse());
            }
            match right_field.data_type() {
                DataType::List(item) if texty(item.data_type()) => right,
                // An untyped literal is read as `text[]`; a text column is
                // not one.
                t if texty(t) && r == Operand::Untyped => {
                    right.cast_to(&text_array_type(), schema)?
                }
                _ => return Err(refuse()),
            }
        }
    };
    Ok(PlannerResult::Planned(Expr::ScalarFunction(
        ScalarFunction::new_udf(operator_udf(op), vec![left, right]),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get<'v>(doc: &'v Value, steps: &[Step<'_>]) -> Option<&'v Value> {
        steps.iter().try_fold(doc, |v, s| s.apply(v))
    }

    #[test]
    fn steps_follow_postgres() {
        let doc: Value =
            serde_json::from_str(r#"{"a": {"b": [1, {"c": "d"}, null]}, "s": "x\"y"}"#).unwrap();
        let text = |steps: &[Step<'_>]| get(&doc, steps).and_then(|v| render(v, true));
        let json = |steps: &[Step<'_>]| get(&doc, steps).and_then(|v| render(v, false));
        assert_eq!(
            json(&[Step::Key("a"), Step::Key("b"), Step::Index(1)]).as_deref(),
            Some(r#"{"c": "d"}"#)
        );
        assert_eq!(text(&[Step::Key("s")]).as_deref(), Some("x\"y"));
        assert_eq!(json(&[Step::Key("s")]).as_deref(), Some(r#""x\"y""#));
        // Negative positions count from the end; past either end is NULL.
        let b = [Step::Key("a"), Step::Key("b")];
        assert_eq!(json(&[b[0], b[1], Step::Index(-3)]).as_deref(), Some("1"));
        assert_eq!(json(&[b[0], b[1], Step::Index(-4)]), None);
        assert_eq!(json(&[b[0], b[1], Step::Index(3)]), None);
        // JSON null: jsonb `null` for `->`, SQL NULL for `->>`.
        assert_eq!(json(&[b[0], b[1], Step::Index(2)]).as_deref(), Some("null"));
        assert_eq!(text(&[b[0], b[1], Step::Index(2)]), None);
        // The wrong kind of container is NULL, not an error.
        assert_eq!(json(&[Step::Index(0)]), None);
        assert_eq!(json(&[Step::Key("s"), Step::Key("x")]), None);
        assert_eq!(json(&[Step::Key("s"), Step::Either("0")]), None);
        // Except that an integer step sees a scalar as a one-element
        // array, as Postgres does.
        let scalar = Value::String("s".into());
        assert_eq!(get(&scalar, &[Step::Index(-1)]), Some(&scalar));
        assert_eq!(get(&scalar, &[Step::Index(1)]), None);
        // Path elements index arrays when they read as integers.
        assert_eq!(
            text(&[
                Step::Either("a"),
                Step::Either("b"),
                Step::Either(" -2"),
                Step::Either("c")
            ])
            .as_deref(),
            Some("d")
        );
        assert_eq!(
            json(&[Step::Either("a"), Step::Either("b"), Step::Either("1x")]),
            None
        );
        assert_eq!(
            json(&[]).as_deref(),
            Some(r#"{"a": {"b": [1, {"c": "d"}, null]}, "s": "x\"y"}"#)
        );
    }

    /// The operators planned, analyzed and run by a Freshet session over
    /// a table with a `jsonb` column.
    #[tokio::test]
    async fn operators_plan_and_run() {
        use datafusion::catalog::{CatalogProvider, MemoryCatalogProvider, MemorySchemaProvider};
        use datafusion::prelude::SessionContext;

        let schema = Arc::new(arrow::datatypes::Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            PgType::Jsonb.field("b", true),
            Field::new("t", DataType::Utf8, true),
        ]));
        let docs = [
            Some(r#"{"a": {"c": "x"}, "n": 2.5, "l": [1, 2, 3]}"#),
            Some(r#"[10, 20]"#),
            None,
        ];
        let batch = arrow::record_batch::RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(Int64Array::from(vec![1, 2, 3])),
                Arc::new(StringArray::from(docs.to_vec())),
                Arc::new(StringArray::from(vec![Some("{}"), None, None])),
            ],
        )
        .unwrap();
        let ctx = SessionContext::new_with_state(crate::query::engine::new_session_state(1));
        let catalog = MemoryCatalogProvider::new();
        catalog
            .register_schema("public", Arc::new(MemorySchemaProvider::new()))
            .unwrap();
        ctx.register_catalog("datafusion", Arc::new(catalog));
        ctx.register_batch("j", batch).unwrap();

        let rows = |sql: &'static str| {
            let ctx = ctx.clone();
            async move {
                let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
                let mut out = Vec::new();
                for b in batches {
                    for c in 0..b.num_columns() {
                        let col = as_text(b.column(c), "test").unwrap();
                        out.extend(col.iter().map(|v| v.map(str::to_owned)));
                    }
                }
                out
            }
        };
        let s = |v: &str| Some(v.to_owned());
        assert_eq!(
            rows("SELECT b->'a'->>'c' FROM j ORDER BY id").await,
            vec![s("x"), None, None]
        );
        assert_eq!(
            rows("SELECT b->-1, b -> -1 FROM j ORDER BY id").await,
            vec![None, s("20"), None, None, s("20"), None]
        );
        assert_eq!(
            rows("SELECT b #>> '{l,-1}' FROM j ORDER BY id").await,
            vec![s("3"), None, None]
        );
        // A parameter is a key or a position by the type bound to it.
        for (param, expected) in [
            (ScalarValue::Int32(Some(-2)), vec![None, s("10"), None]),
            (ScalarValue::from("n"), vec![s("2.5"), None, None]),
        ] {
            let frame = ctx.sql("SELECT b->>$1 FROM j ORDER BY id").await.unwrap();
            let batches = frame
                .with_param_values(vec![param])
                .unwrap()
                .collect()
                .await
                .unwrap();
            let got: Vec<Option<String>> = batches
                .iter()
                .flat_map(|b| {
                    let col = as_text(b.column(0), "test").unwrap();
                    col.iter().map(|v| v.map(str::to_owned)).collect::<Vec<_>>()
                })
                .collect();
            assert_eq!(got, expected);
        }
        assert_eq!(
            rows("SELECT jsonb_extract_path_text(b, 'n') FROM j ORDER BY id").await,
            vec![s("2.5"), None, None]
        );
        // A text column is not jsonb.
        let err = ctx.sql("SELECT t->'a' FROM j").await.unwrap_err();
        assert!(
            err.to_string()
                .contains("operator does not exist: text -> unknown"),
            "{err}"
        );
    }
}
