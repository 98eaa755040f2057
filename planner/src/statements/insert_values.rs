//! `INSERT ... VALUES` of constants and parameters, planned without
//! DataFusion.
//!
//! The commonest write, a row of literals or of `$n` parameters, needs no
//! query plan: each literal is converted to its column's type here, once,
//! each parameter takes its column's type (so Bind decodes it straight into
//! that type), and the sequencer builds the rows at execution and checks
//! them as it checks every written row. DataFusion's planning, optimizing
//! and executing of a one-row `VALUES` cost several times the write itself.
//!
//! Only what converts exactly as the general path converts is taken here:
//! an expression, a cast, a function default (`nextval`), a `RETURNING`,
//! or a literal this module does not convert (timestamps, whose input
//! depends on the session's zone, or a literal whose conversion fails, so
//! that the general path reports the error) makes [`plan`] return `None`,
//! and the statement is planned as a query.

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, FieldRef, Schema, SchemaRef};
use datafusion::common::{ParamValues, ScalarValue};
use datafusion::sql::sqlparser::ast::{self, Expr, SetExpr, UnaryOperator, Value};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;
use freshet_repr::{GlobalId, PgType, RelationDesc};

use crate::parser::complexity::MAX_PARAMETERS;
use crate::pg::text::{parse_bool, parse_bytea, parse_date};

/// One value of a row to insert.
#[derive(Debug, Clone, PartialEq)]
pub enum InsertCell {
    /// A constant, already of its column's Arrow type.
    Value(ScalarValue),
    /// The `$n` parameter with this index (0-based), of its column's type.
    Param(usize),
}

/// An `INSERT ... VALUES` of constants and parameters: the rows, one cell
/// per table column, bound to each execution's parameters by [`bind`].
///
/// [`bind`]: InsertValuesPlan::bind
#[derive(Debug, Clone)]
pub struct InsertValuesPlan {
    /// The table written.
    pub table: GlobalId,
    /// The table's columns (the rows are checked against them).
    pub table_desc: RelationDesc,
    /// The rows, each with one cell per table column.
    pub rows: Vec<Vec<InsertCell>>,
    /// The type of each parameter (`$1` first): its column's.
    pub params: Vec<Option<FieldRef>>,
    /// The table's columns, all nullable (NOT NULL is the row check's to
    /// report, with its SQLSTATE).
    schema: SchemaRef,
}

impl InsertValuesPlan {
    /// The rows with the parameters' values in place, or `None` when a
    /// parameter has no value or one not of its column's type (the
    /// statement is then planned as a query, which casts or reports it).
    pub fn bind(&self, params: Option<&ParamValues>) -> Option<RecordBatch> {
        let param = |i: usize| -> Option<&ScalarValue> {
            match params? {
                ParamValues::List(values) => values.get(i).map(|v| &v.value),
                ParamValues::Map(_) => None,
            }
        };
        let columns = self
            .schema
            .fields()
            .iter()
            .enumerate()
            .map(|(c, field)| {
                let values = self
                    .rows
                    .iter()
                    .map(|row| match row.get(c)? {
                        InsertCell::Value(v) => Some(v.clone()),
                        InsertCell::Param(i) => param(*i)
                            .filter(|v| v.data_type() == *field.data_type())
                            .cloned(),
                    })
                    .collect::<Option<Vec<_>>>()?;
                ScalarValue::iter_to_array(values).ok()
            })
            .collect::<Option<Vec<_>>>()?;
        RecordBatch::try_new(Arc::clone(&self.schema), columns).ok()
    }

    /// Whether any cell is a parameter.
    pub fn has_params(&self) -> bool {
        self.rows
            .iter()
            .flatten()
            .any(|c| matches!(c, InsertCell::Param(_)))
    }

    /// `EXPLAIN`'s account of the statement.
    pub fn explain(&self, table: &str) -> String {
        let rows = self.rows.len();
        format!(
            "Fast path: Insert {rows} row{} into {table} (constants and parameters, no query plan)",
            if rows == 1 { "" } else { "s" }
        )
    }
}

/// What [`plan`] needs of the INSERT beyond its source.
pub struct InsertTarget<'a> {
    /// The table.
    pub table: GlobalId,
    /// Its columns.
    pub desc: &'a RelationDesc,
    /// Each column's default expression (SQL), if it has one.
    pub defaults: &'a [Option<String>],
    /// The table column each source position fills.
    pub targets: &'a [usize],
    /// Whether the statement named its columns (then every row must give
    /// a value for each).
    pub named_columns: bool,
}

/// Plan `source` (the INSERT's query, `DEFAULT`s not yet replaced) as rows
/// of cells, or `None` when it is not a plain `VALUES` of constants and
/// parameters that convert exactly; `params`, when the statement's
/// parameters are already known, must bind.
pub fn plan(
    target: &InsertTarget<'_>,
    source: &ast::Query,
    params: Option<&ParamValues>,
) -> Option<InsertValuesPlan> {
    let plain = source.with.is_none()
        && source.order_by.is_none()
        && source.limit_clause.is_none()
        && source.fetch.is_none()
        && source.locks.is_empty()
        && source.for_clause.is_none()
        && source.settings.is_none()
        && source.format_clause.is_none()
        && source.pipe_operators.is_empty();
    let SetExpr::Values(values) = source.body.as_ref() else {
        return None;
    };
    if !plain || values.rows.is_empty() {
        return None;
    }
    let width = values.rows[0].content.len();
    if width > target.targets.len()
        || (target.named_columns && width < target.targets.len())
        || values.rows.iter().any(|r| r.content.len() != width)
    {
        // The general path reports these.
        return None;
    }
    let columns = &target.desc.columns;
    let mut param_types: Vec<Option<FieldRef>> = Vec::new();
    let mut rows = Vec::with_capacity(values.rows.len());
    for row in &values.rows {
        // Unnamed columns take their defaults.
        let mut cells: Vec<Option<InsertCell>> = vec![None; columns.len()];
        for (expr, &column) in row.content.iter().zip(target.targets) {
            let ty = &columns.get(column)?.ty;
            let cell = if is_default(expr) {
                default_cell(default_of(target.defaults, column), ty)?
            } else {
                literal_cell(expr, ty)?
            };
            if let InsertCell::Param(i) = cell {
                let field: FieldRef = Arc::new(ty.field(&columns[column].name, true));
                if param_types.len() <= i {
                    param_types.resize(i + 1, None);
                }
                match &param_types[i] {
                    // One parameter filling columns of two types: the
                    // general path decides its type.
                    Some(seen) if seen.data_type() != field.data_type() => return None,
                    _ => param_types[i] = Some(field),
                }
            }
            cells[column] = Some(cell);
        }
        let cells = cells
            .into_iter()
            .enumerate()
            .map(|(column, cell)| match cell {
                Some(cell) => Some(cell),
                None => default_cell(default_of(target.defaults, column), &columns[column].ty),
            })
            .collect::<Option<Vec<_>>>()?;
        rows.push(cells);
    }
    let schema = Arc::new(Schema::new(
        columns
            .iter()
            .map(|c| c.ty.field(&c.name, true))
            .collect::<Vec<_>>(),
    ));
    let plan = InsertValuesPlan {
        table: target.table,
        table_desc: target.desc.clone(),
        rows,
        params: param_types,
        schema,
    };
    if params.is_some() && plan.bind(params).is_none() {
        return None;
    }
    Some(plan)
}

/// Most rows an INSERT may have to be planned on the caller's thread.
const INLINE_ROWS: usize = 64;

/// Whether `stmt` is an `INSERT ... VALUES` of a few rows of plain
/// literals, parameters and `DEFAULT`s, with no `RETURNING`: planning it
/// takes microseconds and recurses over nothing, so the sequencer plans it
/// where it runs instead of handing it to a planning thread (a hand-off
/// costs about as much as the plan). Should [`plan`] still decline it, the
/// general path plans a handful of constants.
pub fn plans_inline(stmt: &crate::parser::Statement) -> bool {
    let crate::parser::Statement::Sql(sql) = stmt else {
        return false;
    };
    let ast::Statement::Insert(ins) = sql.as_ref() else {
        return false;
    };
    let Some(source) = &ins.source else {
        return false;
    };
    let SetExpr::Values(values) = source.body.as_ref() else {
        return false;
    };
    ins.returning.is_none()
        && ins.on.is_none()
        && values.rows.len() <= INLINE_ROWS
        && values
            .rows
            .iter()
            .flat_map(|r| &r.content)
            .all(|e| match e {
                Expr::Value(_) => true,
                Expr::UnaryOp {
                    op: UnaryOperator::Minus,
                    expr,
                } => matches!(expr.as_ref(), Expr::Value(_)),
                other => is_default(other),
            })
}

/// Column `column`'s default expression (a table created before it had
/// defaults recorded for every column has none for the rest).
fn default_of(defaults: &[Option<String>], column: usize) -> Option<&str> {
    defaults.get(column).and_then(|d| d.as_deref())
}

/// Whether `expr` is the keyword `DEFAULT`.
fn is_default(expr: &Expr) -> bool {
    matches!(expr, Expr::Identifier(i)
        if i.quote_style.is_none() && i.value.eq_ignore_ascii_case("default"))
}

/// A column's default: NULL without one, else its expression if that is
/// a constant this module converts.
fn default_cell(default: Option<&str>, ty: &PgType) -> Option<InsertCell> {
    let Some(sql) = default else {
        return Some(InsertCell::Value(null_of(ty)?));
    };
    let expr = Parser::new(&PostgreSqlDialect {})
        .try_with_sql(sql)
        .and_then(|mut p| p.parse_expr())
        .ok()?;
    match literal_cell(&expr, ty)? {
        InsertCell::Param(_) => None,
        cell => Some(cell),
    }
}

fn null_of(ty: &PgType) -> Option<ScalarValue> {
    ScalarValue::try_from(&ty.arrow_type()).ok()
}

/// A literal or parameter as a value of column type `ty`.
fn literal_cell(expr: &Expr, ty: &PgType) -> Option<InsertCell> {
    let value = match expr {
        Expr::Value(v) => &v.value,
        Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr,
        } => {
            let Expr::Value(v) = expr.as_ref() else {
                return None;
            };
            let Value::Number(n, _) = &v.value else {
                return None;
            };
            return number(&format!("-{n}"), ty).map(InsertCell::Value);
        }
        Expr::Nested(inner) => return literal_cell(inner, ty),
        _ => return None,
    };
    Some(match value {
        Value::Placeholder(p) => {
            let n: usize = p.strip_prefix('$')?.parse().ok()?;
            if n == 0 || n > MAX_PARAMETERS {
                return None;
            }
            InsertCell::Param(n - 1)
        }
        Value::Null => InsertCell::Value(null_of(ty)?),
        Value::Boolean(b) if *ty == PgType::Bool => {
            InsertCell::Value(ScalarValue::Boolean(Some(*b)))
        }
        Value::Number(n, _) => InsertCell::Value(number(n, ty)?),
        Value::SingleQuotedString(s) => InsertCell::Value(text(s, ty)?),
        _ => return None,
    })
}

/// A numeric literal (as written, with its sign) as a value of `ty`: an
/// integer into an integer column (in range), any number into `float8`
/// or `numeric`.
fn number(n: &str, ty: &PgType) -> Option<ScalarValue> {
    let integer = || -> Option<i64> {
        let digits = n.strip_prefix('-').unwrap_or(n);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        n.parse().ok()
    };
    match ty {
        PgType::Int2 => Some(ScalarValue::Int16(Some(i16::try_from(integer()?).ok()?))),
        PgType::Int4 => Some(ScalarValue::Int32(Some(i32::try_from(integer()?).ok()?))),
        PgType::Int8 => Some(ScalarValue::Int64(Some(integer()?))),
        // A numeric literal has no negative zero (`-0.0` is 0).
        PgType::Float8 => {
            finite(n.parse::<f64>().ok()?).map(|f| ScalarValue::Float64(Some(f + 0.0)))
        }
        PgType::Numeric { .. } => decimal(n, ty),
        _ => None,
    }
}

fn finite(f: f64) -> Option<f64> {
    f.is_finite().then_some(f)
}

/// `s` through `ty`'s input function, for the types whose input does not
/// depend on the session.
fn text(s: &str, ty: &PgType) -> Option<ScalarValue> {
    let t = s.trim();
    Some(match ty {
        // Length, padding and canonical forms are the row check's.
        PgType::Text
        | PgType::Varchar { .. }
        | PgType::Char { .. }
        | PgType::Uuid
        | PgType::Jsonb => ScalarValue::Utf8(Some(s.to_string())),
        PgType::Bool => ScalarValue::Boolean(Some(parse_bool(s)?)),
        PgType::Int2 => ScalarValue::Int16(Some(t.parse().ok()?)),
        PgType::Int4 => ScalarValue::Int32(Some(t.parse().ok()?)),
        PgType::Int8 => ScalarValue::Int64(Some(t.parse().ok()?)),
        PgType::Float4 => {
            ScalarValue::Float32(Some(t.parse::<f32>().ok().filter(|f| f.is_finite())?))
        }
        PgType::Float8 => ScalarValue::Float64(Some(finite(t.parse().ok()?)?)),
        PgType::Numeric { .. } => decimal(t, ty)?,
        PgType::Date => ScalarValue::Date32(Some(parse_date(s)?)),
        PgType::Bytea => ScalarValue::Binary(Some(parse_bytea(s)?)),
        _ => return None,
    })
}

/// A decimal number as `numeric` of `ty`'s precision and scale, rounded
/// as COPY and text parameters round.
fn decimal(n: &str, ty: &PgType) -> Option<ScalarValue> {
    let target = ty.arrow_type();
    if !matches!(target, DataType::Decimal128(..)) {
        return None;
    }
    let options = arrow::compute::CastOptions {
        safe: false,
        ..Default::default()
    };
    ScalarValue::Utf8(Some(n.to_string()))
        .cast_to_with_options(&target, &options)
        .ok()
        .filter(|v| !v.is_null())
}

#[cfg(test)]
mod tests {
    use super::*;
    use freshet_repr::ColumnDesc;

    fn desc() -> RelationDesc {
        let col = |name: &str, ty| ColumnDesc {
            name: name.into(),
            ty,
            nullable: true,
        };
        RelationDesc::new(vec![
            col("k", PgType::Int8),
            col("v", PgType::Int4),
            col("s", PgType::Text),
        ])
    }

    fn query(sql: &str) -> ast::Query {
        match Parser::parse_sql(&PostgreSqlDialect {}, sql).unwrap().pop() {
            Some(ast::Statement::Query(q)) => *q,
            other => panic!("not a query: {other:?}"),
        }
    }

    fn planned(
        sql: &str,
        defaults: &[Option<String>],
        named: &[usize],
    ) -> Option<InsertValuesPlan> {
        let desc = desc();
        let all: Vec<usize> = (0..desc.arity()).collect();
        plan(
            &InsertTarget {
                table: GlobalId::User(1),
                desc: &desc,
                defaults,
                targets: if named.is_empty() { &all } else { named },
                named_columns: !named.is_empty(),
            },
            &query(sql),
            None,
        )
    }

    #[test]
    fn constants_and_parameters_take_their_columns_types() {
        let p = planned("VALUES (1, -2, 'x'), ($2, $1, NULL)", &[], &[]).unwrap();
        assert_eq!(p.rows[0][0], InsertCell::Value(ScalarValue::Int64(Some(1))));
        assert_eq!(
            p.rows[0][1],
            InsertCell::Value(ScalarValue::Int32(Some(-2)))
        );
        assert_eq!(p.rows[1][0], InsertCell::Param(1));
        assert_eq!(p.params[0].as_ref().unwrap().data_type(), &DataType::Int32);
        assert_eq!(p.params[1].as_ref().unwrap().data_type(), &DataType::Int64);
        let params = ParamValues::List(vec![
            ScalarValue::Int32(Some(7)).into(),
            ScalarValue::Int64(Some(8)).into(),
        ]);
        let batch = p.bind(Some(&params)).unwrap();
        assert_eq!(batch.num_rows(), 2);
        // A parameter of another type is the general path's to cast.
        let wrong = ParamValues::List(vec![
            ScalarValue::Utf8(Some("7".into())).into(),
            ScalarValue::Int64(Some(8)).into(),
        ]);
        assert!(p.bind(Some(&wrong)).is_none());
        assert!(p.bind(None).is_none());
    }

    #[test]
    fn defaults_fill_unnamed_columns_and_expressions_are_not_taken() {
        let defaults = vec![None, Some("42".to_string()), Some("'d'".to_string())];
        let p = planned("VALUES (1)", &defaults, &[0]).unwrap();
        assert_eq!(
            p.rows[0][1],
            InsertCell::Value(ScalarValue::Int32(Some(42)))
        );
        assert_eq!(
            p.rows[0][2],
            InsertCell::Value(ScalarValue::Utf8(Some("d".into())))
        );
        let serial = vec![Some("nextval('s')".to_string()), None, None];
        assert!(planned("VALUES (DEFAULT, 1, 'x')", &serial, &[]).is_none());
        assert!(planned("VALUES (1 + 1, 1, 'x')", &[], &[]).is_none());
        assert!(planned("VALUES (1, 1.5, 'x')", &[], &[]).is_none());
        // Out of range, or not an integer: the general path's error.
        assert!(planned("VALUES (1, 3000000000, 'x')", &[], &[]).is_none());
        assert!(planned("VALUES (1, 'x', 'x')", &[], &[]).is_none());
        // Fewer values than named columns, rows of different widths.
        assert!(planned("VALUES (1)", &[], &[0, 1]).is_none());
        assert!(planned("VALUES (1, 2), (1)", &[], &[]).is_none());
        // One parameter filling columns of two types.
        assert!(planned("VALUES ($1, $1, 'x')", &[], &[]).is_none());
    }
}
