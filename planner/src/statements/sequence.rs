//! `CREATE SEQUENCE`: a catalog item whose values `nextval` hands out
//! (see [`freshet_catalog::SequenceDef`]), with PostgreSQL's defaults and
//! checks.

use datafusion::sql::sqlparser::ast::{self, DataType, Expr, ObjectName, SequenceOptions};
use freshet_catalog::{ItemDef, ItemDetails, ItemKind, SequenceDef};

use crate::error::{PlanError, Result};
use crate::plan::Plan;
use crate::statements::context::StatementContext;

/// `CREATE [TEMPORARY] SEQUENCE [IF NOT EXISTS] name [AS type] [options]
/// [OWNED BY NONE]`.
pub fn create_sequence(
    cx: &StatementContext,
    temporary: bool,
    if_not_exists: bool,
    name: &ObjectName,
    data_type: Option<&DataType>,
    options: &[SequenceOptions],
    owned_by: Option<&ObjectName>,
) -> Result<Plan> {
    if let Some(owner) = owned_by
        && !owner.to_string().eq_ignore_ascii_case("none")
    {
        return Err(PlanError::unsupported(
            "CREATE SEQUENCE ... OWNED BY a column (use a serial or identity column)",
        ));
    }
    let def = sequence_def(data_type, options)?;
    let resolver = cx.resolver();
    let (schema, name) = if temporary {
        resolver.create_temp_target(name)?
    } else {
        resolver.create_target(name)?
    };
    let create_sql = format!(
        "CREATE SEQUENCE {} AS {} INCREMENT BY {} MINVALUE {} MAXVALUE {} START WITH {} CACHE {}{}",
        crate::parser::quote_if_needed(&name),
        def.type_name(),
        def.increment,
        def.min,
        def.max,
        def.start,
        def.cache,
        if def.cycle { " CYCLE" } else { " NO CYCLE" }
    );
    Ok(Plan::CreateItem {
        def: ItemDef {
            schema_id: schema.id,
            name,
            kind: ItemKind::Sequence,
            create_sql,
            desc: None,
            references: Vec::new(),
            details: ItemDetails::Sequence(Box::new(def)),
            options: Default::default(),
        },
        if_not_exists,
        replace: None,
    })
}

/// The options with PostgreSQL's defaults filled in, checked as
/// PostgreSQL checks them (22023 with its messages).
fn sequence_def(data_type: Option<&DataType>, options: &[SequenceOptions]) -> Result<SequenceDef> {
    let (width, type_min, type_max) = match data_type {
        None => (8, i64::MIN, i64::MAX),
        Some(t) => match crate::pg::types::pg_type_of(t) {
            Ok(freshet_repr::PgType::Int2) => (2, i64::from(i16::MIN), i64::from(i16::MAX)),
            Ok(freshet_repr::PgType::Int4) => (4, i64::from(i32::MIN), i64::from(i32::MAX)),
            Ok(freshet_repr::PgType::Int8) => (8, i64::MIN, i64::MAX),
            _ => {
                return Err(PlanError::InvalidParameter(
                    "sequence type must be smallint, integer, or bigint".into(),
                ));
            }
        },
    };
    let mut increment = None;
    let mut min = None;
    let mut max = None;
    let mut start = None;
    let mut cache = None;
    let mut cycle = None;
    let conflicting = || PlanError::Syntax("conflicting or redundant options".into());
    let set = |slot: &mut Option<Option<i64>>, value: Option<i64>| -> Result<()> {
        if slot.is_some() {
            return Err(conflicting());
        }
        *slot = Some(value);
        Ok(())
    };
    for option in options {
        match option {
            SequenceOptions::IncrementBy(e, _) => set(&mut increment, Some(integer(e)?))?,
            SequenceOptions::MinValue(e) => set(&mut min, e.as_ref().map(integer).transpose()?)?,
            SequenceOptions::MaxValue(e) => set(&mut max, e.as_ref().map(integer).transpose()?)?,
            SequenceOptions::StartWith(e, _) => set(&mut start, Some(integer(e)?))?,
            SequenceOptions::Cache(e) => set(&mut cache, Some(integer(e)?))?,
            SequenceOptions::Cycle(no) => {
                if cycle.replace(!no).is_some() {
                    return Err(conflicting());
                }
            }
        }
    }
    let increment = increment.flatten().unwrap_or(1);
    if increment == 0 {
        return Err(PlanError::InvalidParameter(
            "INCREMENT must not be zero".into(),
        ));
    }
    let ascending = increment > 0;
    let min = min
        .flatten()
        .unwrap_or(if ascending { 1 } else { type_min });
    let max = max
        .flatten()
        .unwrap_or(if ascending { type_max } else { -1 });
    let type_name = match width {
        2 => "smallint",
        4 => "integer",
        _ => "bigint",
    };
    for (what, v) in [("MINVALUE", min), ("MAXVALUE", max)] {
        if v < type_min || v > type_max {
            return Err(PlanError::InvalidParameter(format!(
                "{what} ({v}) is out of range for sequence data type {type_name}"
            )));
        }
    }
    if min >= max {
        return Err(PlanError::InvalidParameter(format!(
            "MINVALUE ({min}) must be less than MAXVALUE ({max})"
        )));
    }
    let start = start.flatten().unwrap_or(if ascending { min } else { max });
    if start < min {
        return Err(PlanError::InvalidParameter(format!(
            "START value ({start}) cannot be less than MINVALUE ({min})"
        )));
    }
    if start > max {
        return Err(PlanError::InvalidParameter(format!(
            "START value ({start}) cannot be greater than MAXVALUE ({max})"
        )));
    }
    let cache = cache.flatten().unwrap_or(1);
    if cache < 1 {
        return Err(PlanError::InvalidParameter(format!(
            "CACHE ({cache}) must be greater than zero"
        )));
    }
    Ok(SequenceDef {
        width,
        increment,
        min,
        max,
        start,
        cache,
        cycle: cycle.unwrap_or(false),
        next: Some(start),
        called: false,
    })
}

/// An integer option value (`5`, `-5`, `+5`).
fn integer(e: &Expr) -> Result<i64> {
    let bad = || PlanError::Syntax(format!("invalid sequence option value: {e}"));
    match e {
        Expr::Value(v) => match &v.value {
            ast::Value::Number(n, _) => n.parse::<i64>().map_err(|_| bad()),
            _ => Err(bad()),
        },
        Expr::UnaryOp {
            op: ast::UnaryOperator::Minus,
            expr,
        } => integer(expr)?.checked_neg().ok_or_else(bad),
        Expr::UnaryOp {
            op: ast::UnaryOperator::Plus,
            expr,
        } => integer(expr),
        Expr::Nested(inner) => integer(inner),
        _ => Err(bad()),
    }
}

/// Refuse dropping a sequence some column default still draws from
/// (`DEFAULT nextval('s')`): without CASCADE with PostgreSQL's 2BP01 and
/// its DETAIL; with CASCADE too, since PostgreSQL would then drop only the
/// default, which Freshet cannot yet (0A000). A dropped table's defaults
/// do not count.
pub(crate) fn check_sequence_drop(
    cx: &StatementContext,
    dropped: &[freshet_repr::GlobalId],
    cascade: bool,
) -> Result<()> {
    let sequences: Vec<&freshet_catalog::Item> = dropped
        .iter()
        .filter_map(|id| cx.catalog.get_item(*id).ok())
        .filter(|i| i.kind == ItemKind::Sequence)
        .collect();
    if sequences.is_empty() {
        return Ok(());
    }
    let resolver = cx.resolver();
    let by_name = crate::query::catalog_functions::relation_oids(&resolver);
    for seq in sequences {
        let mut users = Vec::new();
        for table in cx.catalog.items().filter(|i| !dropped.contains(&i.id)) {
            let ItemDetails::Table { defaults, .. } = &table.details else {
                continue;
            };
            let Some(desc) = &table.desc else { continue };
            for (column, default) in desc.columns.iter().zip(defaults) {
                if default.as_deref().is_some_and(|sql| {
                    sequences_named(sql)
                        .iter()
                        .any(|n| by_name.get(n) == Some(&seq.oid))
                }) {
                    users.push(format!(
                        "default value for column {} of table {} depends on sequence {}",
                        column.name, table.name, seq.name
                    ));
                }
            }
        }
        if users.is_empty() {
            continue;
        }
        if cascade {
            // PostgreSQL would drop just the defaults.
            return Err(PlanError::unsupported(format!(
                "DROP SEQUENCE ... CASCADE of a sequence a column default uses ({})",
                users.join("; ")
            )));
        }
        return Err(PlanError::Catalog(
            freshet_catalog::CatalogError::DependentObjects {
                what: format!("sequence {}", seq.name),
                detail: users.join("\n"),
            },
        ));
    }
    Ok(())
}

/// The `regclass` texts naming the sequences a default expression's
/// `nextval('...')` calls draw from.
fn sequences_named(sql: &str) -> Vec<String> {
    use datafusion::sql::sqlparser::ast::{Visit, Visitor};
    use std::ops::ControlFlow;
    struct Calls(Vec<String>);
    impl Visitor for Calls {
        type Break = ();
        fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<()> {
            if let Expr::Function(f) = expr
                && f.name
                    .0
                    .last()
                    .and_then(|p| p.as_ident())
                    .is_some_and(|i| i.value.eq_ignore_ascii_case("nextval"))
                && let ast::FunctionArguments::List(list) = &f.args
                && let Some(ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(arg))) =
                    list.args.first()
            {
                let mut arg = arg;
                while let Expr::Cast { expr, .. } = arg {
                    arg = expr;
                }
                if let Expr::Value(v) = arg
                    && let ast::Value::SingleQuotedString(text) = &v.value
                {
                    self.0.push(text.clone());
                }
            }
            ControlFlow::Continue(())
        }
    }
    let dialect = datafusion::sql::sqlparser::dialect::PostgreSqlDialect {};
    let Ok(expr) = datafusion::sql::sqlparser::parser::Parser::new(&dialect)
        .try_with_sql(sql)
        .and_then(|mut p| p.parse_expr())
    else {
        return Vec::new();
    };
    let mut calls = Calls(Vec::new());
    let _ = expr.visit(&mut calls);
    calls.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(sql: &str) -> Result<SequenceDef> {
        let stmts = crate::parser::parse(sql).unwrap();
        let crate::parser::Statement::Sql(s) = &stmts[0] else {
            panic!("{sql}")
        };
        let ast::Statement::CreateSequence {
            data_type,
            sequence_options,
            ..
        } = s.as_ref()
        else {
            panic!("{sql}")
        };
        sequence_def(data_type.as_ref(), sequence_options)
    }

    #[test]
    fn defaults_follow_postgres() {
        let d = def("CREATE SEQUENCE s").unwrap();
        assert_eq!((d.min, d.max, d.start, d.increment), (1, i64::MAX, 1, 1));
        let d = def("CREATE SEQUENCE s AS integer INCREMENT BY -2").unwrap();
        assert_eq!((d.min, d.max, d.start), (i64::from(i32::MIN), -1, -1));
        let d = def("CREATE SEQUENCE s START 10 MINVALUE 5 MAXVALUE 12 CYCLE").unwrap();
        assert_eq!((d.min, d.max, d.start, d.cycle), (5, 12, 10, true));
    }

    #[test]
    fn refuses_what_postgres_refuses() {
        for sql in [
            "CREATE SEQUENCE s INCREMENT 0",
            "CREATE SEQUENCE s MINVALUE 5 MAXVALUE 5",
            "CREATE SEQUENCE s START 0",
            "CREATE SEQUENCE s AS smallint MAXVALUE 40000",
            "CREATE SEQUENCE s CACHE 0",
            "CREATE SEQUENCE s AS text",
            "CREATE SEQUENCE s START 1 START 2",
        ] {
            assert!(def(sql).is_err(), "{sql}");
        }
    }

    #[test]
    fn reserves_in_order_and_wraps_when_cycling() {
        let mut d = def("CREATE SEQUENCE s MINVALUE 1 MAXVALUE 3 START 2 CYCLE").unwrap();
        assert_eq!(d.reserve(5), vec![2, 3, 1, 2, 3]);
        let mut d = def("CREATE SEQUENCE s MAXVALUE 3").unwrap();
        assert_eq!(d.reserve(5), vec![1, 2, 3]);
        assert!(d.reserve(1).is_empty());
        let mut d = def("CREATE SEQUENCE s INCREMENT -5 MINVALUE -12 MAXVALUE 0").unwrap();
        assert_eq!(d.reserve(4), vec![0, -5, -10]);
    }
}
