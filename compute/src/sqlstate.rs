//! Postgres SQLSTATEs for DataFusion and Arrow errors.
//!
//! Both ad hoc queries and dataflows evaluate DataFusion expressions, and a
//! failure must read the same either way (a materialized view's error is
//! the error its defining query would raise), so the mapping lives here,
//! beside the evaluation code, and the server reuses it.

use datafusion::arrow::error::ArrowError;
use datafusion::common::SchemaError;
use datafusion::error::DataFusionError;
use freshet_repr::SqlStateError;
use freshet_repr::sqlstate;

/// Classify a DataFusion error as Postgres would report the same failure.
pub fn datafusion_sqlstate(e: &DataFusionError) -> (&'static str, String) {
    match e {
        DataFusionError::External(inner) => {
            if let Some(s) = inner.downcast_ref::<SqlStateError>() {
                return (s.code, s.message.clone());
            }
            if let Some(d) = inner.downcast_ref::<DataFusionError>() {
                return datafusion_sqlstate(d);
            }
            if let Some(a) = inner.downcast_ref::<ArrowError>() {
                return arrow_code(a);
            }
            (sqlstate::INTERNAL_ERROR, inner.to_string())
        }
        DataFusionError::ArrowError(a, _) => arrow_code(a),
        DataFusionError::Context(_, inner) => datafusion_sqlstate(inner),
        DataFusionError::Diagnostic(_, inner) => datafusion_sqlstate(inner),
        DataFusionError::Shared(inner) => datafusion_sqlstate(inner),
        DataFusionError::Collection(errors) => errors
            .first()
            .map(datafusion_sqlstate)
            .unwrap_or((sqlstate::INTERNAL_ERROR, "unknown error".into())),
        DataFusionError::SchemaError(s, _) => match s.as_ref() {
            SchemaError::FieldNotFound { field, .. } => (
                sqlstate::UNDEFINED_COLUMN,
                format!("column \"{}\" does not exist", field.name),
            ),
            SchemaError::AmbiguousReference { field } => (
                sqlstate::AMBIGUOUS_COLUMN,
                format!("column reference \"{}\" is ambiguous", field.name),
            ),
            SchemaError::DuplicateQualifiedField { .. }
            | SchemaError::DuplicateUnqualifiedField { .. } => {
                (sqlstate::DUPLICATE_ALIAS, strip(&s.to_string()))
            }
        },
        DataFusionError::NotImplemented(m) => (
            sqlstate::FEATURE_NOT_SUPPORTED,
            format!("{} is not supported", strip(m)),
        ),
        DataFusionError::Plan(m) => {
            let m = strip(m);
            if let Some(call) = no_function(&m) {
                return (
                    sqlstate::UNDEFINED_FUNCTION,
                    format!("function {call} does not exist"),
                );
            }
            if let Some(operands) = no_operator(&m) {
                return (
                    sqlstate::UNDEFINED_FUNCTION,
                    format!("operator does not exist: {operands}"),
                );
            }
            let code = if m.contains("does not exist") || m.contains("not found") {
                if m.starts_with("relation") || m.starts_with("table") {
                    sqlstate::UNDEFINED_TABLE
                } else {
                    sqlstate::UNDEFINED_FUNCTION
                }
            } else if m.contains("Invalid function") || m.contains("No function matches") {
                sqlstate::UNDEFINED_FUNCTION
            } else if m.contains("coerc") || m.contains("Cannot infer") || m.contains("type") {
                sqlstate::DATATYPE_MISMATCH
            } else if m.contains("must appear in the GROUP BY") || m.contains("GROUP BY") {
                sqlstate::GROUPING_ERROR
            } else {
                sqlstate::SYNTAX_ERROR_OR_ACCESS_RULE_VIOLATION
            };
            (code, m)
        }
        DataFusionError::Execution(m) => {
            let m = strip(m);
            if m.contains("Divide by zero") || m.contains("divide by zero") {
                (sqlstate::DIVISION_BY_ZERO, "division by zero".into())
            } else if let Some(i) = m
                .find("Can't cast value")
                .or_else(|| m.find("Cannot cast string"))
            {
                cast_error(&m[i..])
            } else if m.to_lowercase().contains("cast") {
                cast_error(&m)
            } else {
                (sqlstate::INTERNAL_ERROR, m)
            }
        }
        DataFusionError::ResourcesExhausted(m) => (sqlstate::OUT_OF_MEMORY, strip(m)),
        other => (sqlstate::INTERNAL_ERROR, strip(&other.to_string())),
    }
}

/// `lower(integer)` for DataFusion's "no signature of this function takes
/// these types" errors (`... argument types 'lower(Int32)'. You might
/// need ...`), in PostgreSQL's type names.
fn no_function(m: &str) -> Option<String> {
    let (_, rest) = m.split_once("No function matches the given name and argument types '")?;
    let (call, _) = rest.split_once("'.")?;
    let (name, args) = call.split_once('(')?;
    let args = args.strip_suffix(')')?;
    let mut types = Vec::new();
    let mut depth = 0usize;
    let mut current = String::new();
    for c in args.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                types.push(pg_type_name(&current).to_owned());
                current.clear();
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    if !current.trim().is_empty() {
        types.push(pg_type_name(&current).to_owned());
    }
    Some(format!("{name}({})", types.join(", ")))
}

/// `integer + text` for DataFusion's "no common type for these operands"
/// errors, which PostgreSQL reports as an operator that does not exist.
fn no_operator(m: &str) -> Option<String> {
    let operands = [
        "Cannot coerce arithmetic expression ",
        "Cannot infer common argument type for comparison operation ",
        "Cannot infer common argument type for operation ",
        "Cannot infer common argument type for regex operation ",
        "Cannot infer common type for bitwise operation ",
    ]
    .iter()
    .find_map(|prefix| m.strip_prefix(prefix))?;
    let operands = operands.strip_suffix(" to valid types").unwrap_or(operands);
    // `<lhs> <op> <rhs>`: the operator is the first word made of operator
    // characters outside parentheses (type names like `Decimal128(10, 2)`
    // hold spaces).
    let words: Vec<&str> = operands.split(' ').collect();
    let mut depth = 0usize;
    for (i, word) in words.iter().enumerate() {
        if i > 0
            && depth == 0
            && !word.is_empty()
            && word.chars().all(|c| "+-*/<>=~!@#%^&|`?".contains(c))
        {
            let lhs = words[..i].join(" ");
            let rhs = words[i + 1..].join(" ");
            return Some(format!(
                "{} {word} {}",
                pg_type_name(&lhs),
                pg_type_name(&rhs)
            ));
        }
        depth += word.matches('(').count();
        depth = depth.saturating_sub(word.matches(')').count());
    }
    None
}

/// The Postgres name for an Arrow type named in an Arrow error message.
fn pg_type_name(arrow: &str) -> &str {
    match arrow.trim() {
        "Utf8" | "LargeUtf8" | "Utf8View" => "text",
        "Binary" | "LargeBinary" | "BinaryView" => "bytea",
        "Int16" => "smallint",
        "Int32" => "integer",
        "Int64" => "bigint",
        "Float32" => "real",
        "Float64" => "double precision",
        "Boolean" => "boolean",
        "Date32" => "date",
        t if t.starts_with("Decimal") => "numeric",
        t if t.starts_with("Timestamp") => "timestamp",
        t if t.starts_with("Time") => "time",
        t if t.starts_with("Interval") => "interval",
        other => other,
    }
}

/// Turn Arrow cast messages into Postgres's.
pub(crate) fn cast_error(m: &str) -> (&'static str, String) {
    // "Can't cast value 40000 to type Int16"
    if let Some(rest) = m.strip_prefix("Can't cast value ")
        && let Some((_, ty)) = rest.split_once(" to type ")
    {
        return (
            sqlstate::NUMERIC_VALUE_OUT_OF_RANGE,
            format!("{} out of range", pg_type_name(ty)),
        );
    }
    // "Cannot cast string 'abc' to value of Int32 type"
    if let Some(rest) = m.strip_prefix("Cannot cast string '")
        && let Some((value, tail)) = rest.split_once("' to value of ")
    {
        let ty = tail.trim_end_matches(" type");
        return (
            sqlstate::INVALID_TEXT_REPRESENTATION,
            format!(
                "invalid input syntax for type {}: \"{value}\"",
                pg_type_name(ty)
            ),
        );
    }
    if m.contains("too large to store in a Decimal") || m.contains("Overflowing") {
        return (
            sqlstate::NUMERIC_VALUE_OUT_OF_RANGE,
            "numeric field overflow".into(),
        );
    }
    if m.contains("Overflow") || m.contains("out of range") {
        return (sqlstate::NUMERIC_VALUE_OUT_OF_RANGE, m.to_string());
    }
    (sqlstate::INVALID_TEXT_REPRESENTATION, m.to_string())
}

fn arrow_code(a: &ArrowError) -> (&'static str, String) {
    match a {
        ArrowError::DivideByZero => (sqlstate::DIVISION_BY_ZERO, "division by zero".into()),
        ArrowError::ArithmeticOverflow(_) => (
            sqlstate::NUMERIC_VALUE_OUT_OF_RANGE,
            "value out of range".into(),
        ),
        ArrowError::CastError(m) | ArrowError::ParseError(m) => cast_error(m),
        ArrowError::InvalidArgumentError(m) if m.contains("too large to store") => (
            sqlstate::NUMERIC_VALUE_OUT_OF_RANGE,
            "numeric field overflow".into(),
        ),
        ArrowError::InvalidArgumentError(m) => (sqlstate::INVALID_PARAMETER_VALUE, m.clone()),
        other => (sqlstate::INTERNAL_ERROR, other.to_string()),
    }
}

/// Drop DataFusion's "Error during planning: " style prefixes.
fn strip(m: &str) -> String {
    let mut s = m.trim();
    for prefix in [
        "Error during planning: ",
        "Execution error: ",
        "This feature is not implemented: ",
        "Arrow error: ",
        "Schema error: ",
        "Invalid argument error: ",
        "Cast error: ",
    ] {
        if let Some(rest) = s.strip_prefix(prefix) {
            s = rest;
        }
    }
    s.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_cast_messages() {
        assert_eq!(
            cast_error("Can't cast value 40000 to type Int16"),
            (
                sqlstate::NUMERIC_VALUE_OUT_OF_RANGE,
                "smallint out of range".into()
            )
        );
        assert_eq!(
            cast_error("Cannot cast string 'abc' to value of Int32 type"),
            (
                sqlstate::INVALID_TEXT_REPRESENTATION,
                "invalid input syntax for type integer: \"abc\"".into()
            )
        );
        assert_eq!(
            cast_error("123.40 is too large to store in a Decimal128 of precision 4. Max is 99.99")
                .0,
            sqlstate::NUMERIC_VALUE_OUT_OF_RANGE
        );
        assert_eq!(
            datafusion_sqlstate(&DataFusionError::ArrowError(
                Box::new(ArrowError::DivideByZero),
                None
            )),
            (sqlstate::DIVISION_BY_ZERO, "division by zero".into())
        );
    }

    #[test]
    fn names_calls_nothing_matches_in_postgres_types() {
        assert_eq!(
            no_operator(
                "Cannot coerce arithmetic expression Decimal128(10, 2) + Utf8 to valid types"
            ),
            Some("numeric + text".into())
        );
        assert_eq!(
            no_operator(
                "Cannot infer common argument type for comparison operation Int32 >= Boolean"
            ),
            Some("integer >= boolean".into())
        );
        assert_eq!(
            no_function(
                "Function 'lower' requires String. No function matches the given name and \
                 argument types 'lower(Int32, Decimal128(5, 1))'. You might need to add explicit type casts."
            ),
            Some("lower(integer, numeric)".into())
        );
        assert_eq!(no_operator("Cannot coerce arithmetic expression"), None);
    }
}
