//! Postgres functions tools call that depend on nothing but their
//! arguments: `format_type`, `pg_get_expr`, the `*_description` and
//! privilege inquiries (Freshet has no comments and one all-powerful role),
//! `quote_ident`, `array_lower`/`array_upper`, `to_regtype` and the
//! `regtype`/`regproc` output functions the `::regtype` cast becomes.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray, Int32Array, StringArray, UInt32Array};
use arrow::datatypes::DataType;
use datafusion::logical_expr::ScalarUDF;
use freshet_repr::PgType;

use crate::query::bound_function::{BoundFunction, ints, oids, rows, texts};

/// Privilege inquiries: every one is granted (Freshet has one superuser
/// role).
const PRIVILEGE_FUNCTIONS: &[&str] = &[
    "has_table_privilege",
    "has_schema_privilege",
    "has_database_privilege",
    "has_column_privilege",
    "has_any_column_privilege",
    "has_function_privilege",
    "has_sequence_privilege",
    "has_type_privilege",
    "has_tablespace_privilege",
    "pg_has_role",
];

/// The function `name` (unqualified), if this module provides it.
pub fn pg_function(name: &str) -> Option<Arc<ScalarUDF>> {
    if let Some(p) = PRIVILEGE_FUNCTIONS.iter().find(|p| **p == name) {
        return Some(BoundFunction::udf(
            p,
            &[2, 3, 4],
            DataType::Boolean,
            |args| Ok(Arc::new(BooleanArray::from(vec![true; rows(args)])) as ArrayRef),
        ));
    }
    if name == "pg_expandarray" {
        return Some(Arc::new(ScalarUDF::new_from_impl(ExpandArray {
            signature: datafusion::logical_expr::Signature::any(
                1,
                datafusion::logical_expr::Volatility::Immutable,
            ),
        })));
    }
    Some(match name {
        "format_type" => BoundFunction::udf("format_type", &[2], DataType::Utf8, |args| {
            let n = rows(args);
            let typmods = ints(args, 1, n)?;
            let out: StringArray = oids(args, 0)?
                .into_iter()
                .zip(typmods)
                .map(|(oid, typmod)| {
                    let oid = oid?;
                    let typmod = typmod.and_then(|t| i32::try_from(t).ok()).unwrap_or(-1);
                    Some(match PgType::from_oid(oid, typmod) {
                        Some(t) => t.sql_name(),
                        None if oid == 0 => "-".to_string(),
                        None => "???".to_string(),
                    })
                })
                .collect();
            Ok(Arc::new(out) as ArrayRef)
        }),
        "regtypeout" => BoundFunction::udf("regtypeout", &[1], DataType::Utf8, |args| {
            let out: StringArray = oids(args, 0)?
                .into_iter()
                .map(|oid| {
                    let oid = oid?;
                    Some(match PgType::from_oid(oid, -1) {
                        Some(t) => t.sql_name(),
                        None if oid == 0 => "-".to_string(),
                        None => oid.to_string(),
                    })
                })
                .collect();
            Ok(Arc::new(out) as ArrayRef)
        }),
        // Freshet has no catalog functions that `regproc` could name.
        "regprocout" => BoundFunction::udf("regprocout", &[1], DataType::Utf8, |args| {
            let out: StringArray = oids(args, 0)?
                .into_iter()
                .map(|oid| oid.map(|o| if o == 0 { "-".into() } else { o.to_string() }))
                .collect();
            Ok(Arc::new(out) as ArrayRef)
        }),
        "to_regtype" => BoundFunction::udf("to_regtype", &[1], DataType::UInt32, |args| {
            let out: UInt32Array = texts(args, 0)?
                .into_iter()
                .map(|name| {
                    let ty = crate::pg::types::parse_type_name(&name?).ok()?;
                    Some(ty.oid())
                })
                .collect();
            Ok(Arc::new(out) as ArrayRef)
        }),
        // `adbin`, `indexprs`, `indpred` hold SQL text already.
        "pg_get_expr" => BoundFunction::udf("pg_get_expr", &[2, 3], DataType::Utf8, |args| {
            Ok(arrow::compute::cast(&args[0], &DataType::Utf8)?)
        }),
        "obj_description" | "col_description" | "shobj_description" => {
            BoundFunction::udf(name, &[1, 2], DataType::Utf8, |args| {
                Ok(arrow::array::new_null_array(&DataType::Utf8, rows(args)))
            })
        }
        "pg_size_pretty" => BoundFunction::udf("pg_size_pretty", &[1], DataType::Utf8, |args| {
            let out: StringArray = ints(args, 0, rows(args))?
                .into_iter()
                .map(|b| b.map(size_pretty))
                .collect();
            Ok(Arc::new(out) as ArrayRef)
        }),
        // Storage sizes are not known to the planner; NULL is Postgres's
        // answer for a size it cannot tell.
        "pg_table_size" | "pg_relation_size" | "pg_total_relation_size" | "pg_indexes_size" => {
            BoundFunction::udf(name, &[1, 2], DataType::Int64, |args| {
                Ok(arrow::array::new_null_array(&DataType::Int64, rows(args)))
            })
        }
        "pg_database_size" => BoundFunction::udf(name, &[1], DataType::Int64, |args| {
            Ok(arrow::array::new_null_array(&DataType::Int64, rows(args)))
        }),
        // No table is partitioned.
        "pg_get_partkeydef" => BoundFunction::udf(name, &[1], DataType::Utf8, |args| {
            Ok(arrow::array::new_null_array(&DataType::Utf8, rows(args)))
        }),
        // Access statistics are not kept: zero, as after a stats reset.
        "pg_stat_get_numscans" | "pg_stat_get_tuples_returned" | "pg_stat_get_tuples_fetched" => {
            BoundFunction::udf(name, &[1], DataType::Int64, |args| {
                Ok(Arc::new(arrow::array::Int64Array::from(vec![0; rows(args)])) as ArrayRef)
            })
        }
        // Freshet has no functions in `pg_proc` for these to describe.
        "pg_function_is_visible" => {
            BoundFunction::udf("pg_function_is_visible", &[1], DataType::Boolean, |args| {
                Ok(Arc::new(BooleanArray::from(vec![true; rows(args)])) as ArrayRef)
            })
        }
        "pg_get_function_result"
        | "pg_get_function_arguments"
        | "pg_get_function_identity_arguments"
        | "pg_get_functiondef" => BoundFunction::udf(name, &[1], DataType::Utf8, |args| {
            Ok(arrow::array::new_null_array(&DataType::Utf8, rows(args)))
        }),
        "pg_get_statisticsobjdef_columns" => BoundFunction::udf(
            "pg_get_statisticsobjdef_columns",
            &[1],
            DataType::Utf8,
            |args| Ok(arrow::array::new_null_array(&DataType::Utf8, rows(args))),
        ),
        "pg_relation_is_publishable" => BoundFunction::udf(
            "pg_relation_is_publishable",
            &[1],
            DataType::Boolean,
            |args| Ok(Arc::new(BooleanArray::from(vec![false; rows(args)])) as ArrayRef),
        ),
        // Every type Freshet has lives in pg_catalog.
        "pg_type_is_visible" => {
            BoundFunction::udf("pg_type_is_visible", &[1], DataType::Boolean, |args| {
                let out: BooleanArray = oids(args, 0)?
                    .into_iter()
                    .map(|o| o.map(|o| PgType::from_oid(o, -1).is_some()))
                    .collect();
                Ok(Arc::new(out) as ArrayRef)
            })
        }
        // Freshet grants no advisory locks, so a session holds none to
        // release (pools call this when they take a connection back). It
        // returns `void`, which clients read as an empty string.
        "pg_advisory_unlock_all" => {
            BoundFunction::udf("pg_advisory_unlock_all", &[0], DataType::Utf8, |args| {
                Ok(Arc::new(StringArray::from(vec![""; rows(args).max(1)])) as ArrayRef)
            })
        }
        "quote_ident" => BoundFunction::udf("quote_ident", &[1], DataType::Utf8, |args| {
            let out: StringArray = texts(args, 0)?
                .into_iter()
                .map(|s| s.map(|s| crate::parser::quote_if_needed(&s).to_string()))
                .collect();
            Ok(Arc::new(out) as ArrayRef)
        }),
        // PostgreSQL's `like_escape(pattern, escape)`: the pattern with
        // `escape` as its escape character rewritten to use backslash
        // (the only escape DataFusion's LIKE knows), so `LIKE p ESCAPE
        // '/'` runs as `LIKE like_escape(p, '/')`.
        "like_escape" => BoundFunction::udf("like_escape", &[2], DataType::Utf8, |args| {
            let escapes = texts(args, 1)?;
            let out = texts(args, 0)?
                .into_iter()
                .zip(escapes)
                .map(|(p, e)| match (p, e) {
                    (Some(p), Some(e)) => like_escape(&p, &e).map(Some),
                    _ => Ok(None),
                })
                .collect::<datafusion::common::Result<Vec<_>>>()?;
            Ok(Arc::new(StringArray::from(out)) as ArrayRef)
        }),
        "array_lower" | "array_upper" => {
            let upper = name == "array_upper";
            BoundFunction::udf(name, &[2], DataType::Int32, move |args| {
                let n = rows(args);
                let dims = ints(args, 1, n)?;
                let lengths = list_lengths(&args[0])?;
                let out: Int32Array = lengths
                    .into_iter()
                    .zip(dims)
                    .map(|(len, dim)| match (len, dim) {
                        (Some(len), Some(1)) if len > 0 => Some(if upper { len as i32 } else { 1 }),
                        _ => None,
                    })
                    .collect();
                Ok(Arc::new(out) as ArrayRef)
            })
        }
        other => return crate::query::text_functions::text_function(other),
    })
}

/// The length of each list (NULL for a NULL list or a non-list argument).
fn list_lengths(a: &ArrayRef) -> datafusion::common::Result<Vec<Option<usize>>> {
    use arrow::array::AsArray;
    Ok(match a.data_type() {
        DataType::List(_) => {
            let l = a.as_list::<i32>();
            (0..l.len())
                .map(|i| l.is_valid(i).then(|| l.value_length(i) as usize))
                .collect()
        }
        DataType::LargeList(_) => {
            let l = a.as_list::<i64>();
            (0..l.len())
                .map(|i| l.is_valid(i).then(|| l.value_length(i) as usize))
                .collect()
        }
        _ => vec![None; a.len()],
    })
}

/// Postgres's `pg_size_pretty`: bytes below 10 kB, then kB, MB, GB, TB,
/// each unit used while the value is below 10240 of it, rounded half away
/// from zero (Postgres keeps one extra bit for the rounding).
fn size_pretty(bytes: i64) -> String {
    const LIMIT: i64 = 10 * 1024;
    const LIMIT2: i64 = LIMIT * 2 - 1;
    let half_rounded = |x: i64| (x + if x < 0 { -1 } else { 1 }) / 2;
    if bytes.abs() < LIMIT {
        return format!("{bytes} bytes");
    }
    let mut size = bytes >> 9;
    for unit in ["kB", "MB", "GB"] {
        if size.abs() < LIMIT2 {
            return format!("{} {unit}", half_rounded(size));
        }
        size >>= 10;
    }
    format!("{} TB", half_rounded(size))
}

#[cfg(test)]
mod tests {
    use super::size_pretty;

    /// The boundaries Postgres's own `pg_size_pretty` prints.
    #[test]
    fn sizes_print_as_postgres_prints_them() {
        assert_eq!(size_pretty(0), "0 bytes");
        assert_eq!(size_pretty(10239), "10239 bytes");
        assert_eq!(size_pretty(10240), "10 kB");
        assert_eq!(size_pretty(8192 * 1024), "8192 kB");
        assert_eq!(size_pretty(10 * 1024 * 1024), "10 MB");
    }
}

/// `pattern` with escape character `escape` ('' for none) rewritten to use
/// backslash: `escape c` becomes `\c`, a literal backslash `\\`.
fn like_escape(pattern: &str, escape: &str) -> datafusion::common::Result<String> {
    let mut chars = escape.chars();
    let escape = match (chars.next(), chars.next()) {
        (None, _) => None,
        (Some(c), None) => Some(c),
        _ => {
            return Err(crate::error::sqlstate_error(
                freshet_repr::sqlstate::INVALID_ESCAPE_SEQUENCE,
                "invalid escape string",
            ));
        }
    };
    let mut out = String::with_capacity(pattern.len() + 2);
    let mut it = pattern.chars();
    while let Some(c) = it.next() {
        if Some(c) == escape {
            match it.next() {
                Some(next) => {
                    out.push('\\');
                    out.push(next);
                }
                None => {
                    return Err(crate::error::sqlstate_error(
                        freshet_repr::sqlstate::INVALID_ESCAPE_SEQUENCE,
                        "LIKE pattern must not end with escape character",
                    ));
                }
            }
        } else if c == '\\' {
            out.push_str("\\\\");
        } else {
            out.push(c);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod like_escape_tests {
    use super::like_escape;

    #[test]
    fn rewrites_the_escape_character_to_backslash() {
        assert_eq!(like_escape("pg/_%", "/").unwrap(), "pg\\_%");
        assert_eq!(like_escape("a\\b", "/").unwrap(), "a\\\\b");
        assert_eq!(like_escape("//", "/").unwrap(), "\\/");
        assert!(like_escape("a/", "/").is_err());
        assert_eq!(like_escape("a_b", "").unwrap(), "a_b");
    }
}

/// `pg_expandarray(a)`: `a`'s elements as a list of `(x, n)` structs, `n`
/// the 1-based position, for `information_schema._pg_expandarray(a)`
/// (`unnest` of this; see `rewrites::pg_syntax`).
#[derive(Debug, PartialEq, Eq, Hash)]
struct ExpandArray {
    signature: datafusion::logical_expr::Signature,
}

impl ExpandArray {
    fn fields(element: &DataType) -> arrow::datatypes::Fields {
        arrow::datatypes::Fields::from(vec![
            arrow::datatypes::Field::new("x", element.clone(), true),
            arrow::datatypes::Field::new("n", DataType::Int32, false),
        ])
    }
}

impl datafusion::logical_expr::ScalarUDFImpl for ExpandArray {
    fn name(&self) -> &str {
        "pg_expandarray"
    }

    fn signature(&self) -> &datafusion::logical_expr::Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> datafusion::common::Result<DataType> {
        match arg_types.first() {
            Some(DataType::List(f)) => Ok(DataType::List(Arc::new(
                arrow::datatypes::Field::new_list_field(
                    DataType::Struct(Self::fields(f.data_type())),
                    true,
                ),
            ))),
            _ => datafusion::common::plan_err!("_pg_expandarray takes an array"),
        }
    }

    fn invoke_with_args(
        &self,
        args: datafusion::logical_expr::ScalarFunctionArgs,
    ) -> datafusion::common::Result<datafusion::logical_expr::ColumnarValue> {
        use arrow::array::{AsArray, StructArray};
        let scalar = crate::udf::all_scalar(&args);
        let input = crate::udf::arg_array(&args, 0)?;
        let lists = input.as_list::<i32>();
        let DataType::List(element) = lists.data_type() else {
            return datafusion::common::exec_err!("_pg_expandarray takes an array");
        };
        // Positions restart at 1 in each list.
        let offsets = lists.value_offsets();
        let mut positions = Vec::with_capacity(lists.values().len());
        for w in offsets.windows(2) {
            let len = (w[1] - w[0]).max(0);
            positions.extend(1..=len);
        }
        let values = lists.values().slice(
            offsets[0] as usize,
            (offsets[offsets.len() - 1] - offsets[0]).max(0) as usize,
        );
        let structs = StructArray::try_new(
            Self::fields(element.data_type()),
            vec![values, Arc::new(Int32Array::from(positions)) as ArrayRef],
            None,
        )?;
        let rebased: Vec<i32> = offsets.iter().map(|o| o - offsets[0]).collect();
        let out = arrow::array::ListArray::try_new(
            Arc::new(arrow::datatypes::Field::new_list_field(
                structs.data_type().clone(),
                true,
            )),
            arrow::buffer::OffsetBuffer::new(rebased.into()),
            Arc::new(structs),
            lists.nulls().cloned(),
        )?;
        crate::udf::to_columnar(Arc::new(out), scalar)
    }
}
