//! Postgres spellings DataFusion does not plan, rewritten to what it does,
//! as tools write them (psql's `\d` queries use all of these):
//!
//! - `a OPERATOR(pg_catalog.~) b` → `a ~ b` (any operator DataFusion has);
//! - `x COLLATE "C"` / `"POSIX"` / `pg_catalog.default` → `x` (Freshet
//!   compares text bytewise, which is the C collation); other collations
//!   are 42704, as Postgres answers a collation it lacks;
//! - `pg_catalog.`-qualified type names in casts and table functions →
//!   the bare name;
//! - `x::regclass` (`regtype`, `regnamespace`, `regproc`, `regrole`): a
//!   literal becomes the oid it names, resolved when the statement is
//!   planned (an unknown name is Postgres's error); any other operand
//!   becomes the type's output function (`regclassout(x)`), which prints
//!   the name as `regclass` values print;
//! - `ARRAY(subquery)` → `(SELECT array_or_empty(array_agg(...)) FROM
//!   (subquery))` (`{}`, not NULL, over zero rows);
//! - `(e).f`, a field of a composite value → `(e)['f']`, DataFusion's
//!   struct field access;
//! - `information_schema._pg_expandarray(a)` (pgJDBC's key and index
//!   metadata) → `unnest(pg_expandarray(a))`, a set of `(x, n)`: each
//!   element and its 1-based position.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    self, AccessExpr, BinaryOperator, DataType, Expr, Function, FunctionArg, FunctionArgExpr,
    FunctionArgumentList, FunctionArguments, Ident, ObjectName, ObjectNamePart, Subscript, Value,
    VisitMut, VisitorMut,
};

use crate::error::{PlanError, Result};

/// The function a `$n::regclass` becomes: the relation's oid, looked up
/// when the parameter's value is known.
pub const REGCLASS_IN: &str = "regclassin";

/// What a `'name'::reg*` literal is resolved against.
pub trait RegNames {
    /// The oid of the relation a (possibly qualified) name denotes, or
    /// `None` if there is none.
    fn relation_oid(&self, name: &ObjectName) -> Result<Option<u32>>;
    /// The oid of a schema.
    fn namespace_oid(&self, name: &str) -> Option<u32>;
    /// The oid of a role.
    fn role_oid(&self, name: &str) -> Option<u32>;
}

/// The `reg*` types.
#[derive(Clone, Copy, PartialEq, Eq)]
enum RegType {
    Class,
    Type,
    Namespace,
    Proc,
    Role,
}

impl RegType {
    fn of(data_type: &DataType) -> Option<RegType> {
        if matches!(data_type, DataType::Regclass) {
            return Some(RegType::Class);
        }
        let DataType::Custom(name, mods) = data_type else {
            return None;
        };
        if !mods.is_empty() {
            return None;
        }
        let last = name.0.last()?.as_ident()?.value.to_lowercase();
        if name.0.len() == 2
            && !name.0[0]
                .as_ident()
                .is_some_and(|i| i.value.eq_ignore_ascii_case("pg_catalog"))
        {
            return None;
        }
        Some(match last.as_str() {
            "regclass" => RegType::Class,
            "regtype" => RegType::Type,
            "regnamespace" => RegType::Namespace,
            "regproc" | "regprocedure" => RegType::Proc,
            "regrole" => RegType::Role,
            _ => return None,
        })
    }

    fn output_function(self) -> &'static str {
        match self {
            RegType::Class => "regclassout",
            RegType::Type => "regtypeout",
            RegType::Namespace => "regnamespaceout",
            RegType::Proc => "regprocout",
            RegType::Role => "regroleout",
        }
    }
}

/// Rewrite the Postgres spellings this module covers, anywhere in `node`.
pub fn rewrite<V: VisitMut>(node: &mut V, names: &dyn RegNames) -> Result<()> {
    struct Rewriter<'n> {
        names: &'n dyn RegNames,
    }
    impl VisitorMut for Rewriter<'_> {
        type Break = PlanError;
        fn pre_visit_table_factor(
            &mut self,
            factor: &mut ast::TableFactor,
        ) -> ControlFlow<PlanError> {
            // Table functions (`pg_catalog.generate_series(...)`) are
            // looked up by their bare name.
            if let ast::TableFactor::Table {
                name,
                args: Some(_),
                ..
            } = factor
                && name.0.len() == 2
                && name.0[0]
                    .as_ident()
                    .is_some_and(|i| i.value.eq_ignore_ascii_case("pg_catalog"))
            {
                name.0.remove(0);
            }
            function_in_from(factor);
            ControlFlow::Continue(())
        }
        fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<PlanError> {
            // Unquoted names fold to lower case, qualified ones too
            // (`PG_CATALOG.PG_GET_EXPR(...)`, as Metabase writes).
            if let Expr::Function(f) = expr
                && f.name.0.len() > 1
            {
                for part in &mut f.name.0 {
                    if let ObjectNamePart::Identifier(i) = part
                        && i.quote_style.is_none()
                    {
                        i.value = i.value.to_lowercase();
                    }
                }
            }
            // `'t'::regclass::text` is the name, as a `regclass` prints.
            if let Expr::Cast {
                expr: operand,
                data_type: outer,
                ..
            } = expr
                && is_text_type(outer)
                && let Expr::Cast {
                    expr: literal,
                    data_type,
                    ..
                } = operand.as_mut()
                && let Some(reg) = RegType::of(data_type)
                && string_literal(literal).is_some()
            {
                match reg_cast(reg, literal, self.names) {
                    Ok(oid) => *expr = call(reg.output_function(), vec![oid]),
                    Err(e) => return ControlFlow::Break(e),
                }
            }
            ControlFlow::Continue(())
        }
        fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<PlanError> {
            match rewrite_expr(expr, self.names) {
                Ok(()) => ControlFlow::Continue(()),
                Err(e) => ControlFlow::Break(e),
            }
        }
    }
    match node.visit(&mut Rewriter { names }) {
        ControlFlow::Break(e) => Err(e),
        ControlFlow::Continue(()) => Ok(()),
    }
}

fn rewrite_expr(expr: &mut Expr, names: &dyn RegNames) -> Result<()> {
    match expr {
        Expr::AnyOp { .. } => crate::rewrites::any_array::rewrite(expr),
        Expr::BinaryOp { op, .. } => {
            if let BinaryOperator::PGCustomBinaryOperator(parts) = op
                && let Some(plain) = plain_operator(parts)
            {
                *op = plain;
            }
        }
        Expr::Collate {
            expr: inner,
            collation,
        } => {
            let name = collation
                .0
                .last()
                .and_then(|p| p.as_ident())
                .map(|i| i.value.clone())
                .unwrap_or_default();
            if !matches!(
                name.to_lowercase().as_str(),
                "c" | "posix" | "default" | "ucs_basic"
            ) {
                return Err(PlanError::DataFusion(crate::error::sqlstate_error(
                    freshet_repr::sqlstate::UNDEFINED_OBJECT,
                    format!("collation \"{name}\" for encoding \"UTF8\" does not exist"),
                )));
            }
            let inner = std::mem::replace(inner.as_mut(), Expr::value(Value::Null));
            *expr = inner;
        }
        Expr::Cast {
            expr: operand,
            data_type,
            ..
        } => {
            if let Some(reg) = RegType::of(data_type) {
                *expr = reg_cast(reg, operand, names)?;
            } else {
                strip_catalog_schema(data_type);
            }
        }
        // `generate_subscripts(a, d)` in a select list (SQLAlchemy pairs it
        // with `unnest(a)` to number an array's elements): the subscripts
        // 1..n as a set, which DataFusion's `unnest` zips with the other.
        // `LIKE p ESCAPE c`: DataFusion's LIKE escapes with backslash only.
        Expr::Like {
            pattern,
            escape_char,
            ..
        }
        | Expr::ILike {
            pattern,
            escape_char,
            ..
        } if escape_char
            .as_ref()
            .is_some_and(|c| !matches!(&c.value, Value::SingleQuotedString(s) if s == "\\")) =>
        {
            if let Some(c) = escape_char.take() {
                let p = std::mem::replace(pattern.as_mut(), Expr::value(Value::Null));
                **pattern = call("like_escape", vec![p, Expr::value(c.value)]);
            }
        }
        // `nextval('name')`, `currval('name')`, `setval('name', ...)`: the
        // text names the sequence (an implicit cast to regclass in
        // Postgres).
        Expr::Function(f)
            if ["nextval", "currval", "setval"]
                .iter()
                .any(|name| is_function(f, name)) =>
        {
            if let Some(args) = plain_args(f)
                && let Some(first) = args.first()
                && string_literal(first).is_some()
            {
                let mut first = first.clone();
                let oid = reg_cast(RegType::Class, &mut first, names)?;
                let name = f
                    .name
                    .0
                    .last()
                    .and_then(|p| p.as_ident())
                    .map(|i| i.value.to_lowercase())
                    .unwrap_or_default();
                let mut rest = args;
                rest[0] = oid;
                *expr = call(&name, rest);
            }
        }
        Expr::Function(f) if is_function(f, "generate_subscripts") => {
            if let Some(args) = plain_args(f)
                && let [array, dim] = args.as_slice()
            {
                let length = call("array_length", vec![array.clone(), dim.clone()]);
                let series = call(
                    "generate_series",
                    vec![Expr::value(Value::Number("1".into(), false)), length],
                );
                *expr = call("unnest", vec![series]);
            }
        }
        Expr::CompoundFieldAccess { root, access_chain }
            if matches!(root.as_ref(), Expr::Nested(_)) =>
        {
            for access in access_chain.iter_mut() {
                if let AccessExpr::Dot(Expr::Identifier(field)) = access {
                    let name = crate::parser::normalize_ident(field);
                    *access = AccessExpr::Subscript(Subscript::Index {
                        index: Expr::value(Value::SingleQuotedString(name)),
                    });
                }
            }
        }
        Expr::Function(f) if is_expandarray(f) => {
            if let Some(args) = plain_args(f)
                && let [array] = args.as_slice()
            {
                *expr = call("unnest", vec![call("pg_expandarray", vec![array.clone()])]);
            }
        }
        Expr::Function(f) if is_array_subquery(f) => {
            if let FunctionArguments::Subquery(query) = &f.args {
                *expr = array_of_subquery(query.as_ref().clone());
            }
        }
        _ => {}
    }
    Ok(())
}

/// Table functions DataFusion (and Freshet) register; any other function
/// in `FROM` is a scalar one.
const TABLE_FUNCTIONS: &[&str] = &["generate_series", "range", "pg_get_keywords"];

/// Functions in `FROM` as PostgreSQL treats them:
///
/// - `generate_series(...) AS s` and `unnest(a) AS s` name their one
///   column `s`, as PostgreSQL names a one-column function's column after
///   its alias;
/// - `FROM generate_series(a, (SELECT ...)) [AS] s(n)` →
///   `FROM (SELECT unnest(generate_series(a, (SELECT ...))) AS
///   generate_series) [AS] s(n)`: DataFusion's table functions take only
///   arguments that fold to constants, and a subquery does not (pgJDBC's
///   key metadata bounds a series by `(SELECT setting FROM pg_settings
///   ...)`). The scalar `generate_series` takes any expression; series with
///   constant bounds stay table functions, which stream;
/// - a scalar function, `FROM string_to_array(x, ',') [AS] s` (Grafana's
///   `search_path` expansion) → `FROM (SELECT string_to_array(x, ',') AS
///   s) AS s`: one row, its column named after the alias.
fn function_in_from(factor: &mut ast::TableFactor) {
    // `unnest(a) AS e` names its one column `e`, like generate_series.
    if let ast::TableFactor::UNNEST {
        alias: Some(alias),
        array_exprs,
        with_offset: false,
        with_ordinality: false,
        ..
    } = factor
        && array_exprs.len() == 1
        && alias.columns.is_empty()
    {
        alias.columns = vec![ast::TableAliasColumnDef::from_name(
            alias.name.value.clone(),
        )];
        return;
    }
    let ast::TableFactor::Table {
        name,
        args: Some(args),
        alias,
        ..
    } = factor
    else {
        return;
    };
    let [ObjectNamePart::Identifier(fname)] = name.0.as_slice() else {
        return;
    };
    if args.settings.is_some() {
        return;
    }
    let fname = fname.value.to_lowercase();
    let table_function = TABLE_FUNCTIONS.contains(&fname.as_str())
        || crate::query::jsonb_table_functions::is_table_function(&fname);
    let mut has_subquery = false;
    let _ = ast::visit_expressions(&args.args, |e| {
        if matches!(
            e,
            Expr::Subquery(_) | Expr::Exists { .. } | Expr::InSubquery { .. }
        ) {
            has_subquery = true;
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    });
    if table_function && !has_subquery {
        if fname == "generate_series"
            && let Some(a) = alias.as_mut()
            && a.columns.is_empty()
        {
            a.columns = vec![ast::TableAliasColumnDef::from_name(a.name.value.clone())];
        }
        return;
    }
    if table_function && fname != "generate_series" {
        return;
    }
    let Some(values) = args
        .args
        .iter()
        .map(|a| match a {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(e.clone()),
            _ => None,
        })
        .collect::<Option<Vec<Expr>>>()
    else {
        return;
    };
    let args: Vec<String> = values.iter().map(|e| e.to_string()).collect();
    let call = format!("{fname}({})", args.join(", "));
    let call = if table_function {
        format!("unnest({call})")
    } else {
        call
    };
    let column = alias
        .as_ref()
        .map_or_else(|| Ident::new(fname.clone()), |a| a.name.clone());
    let sql = format!(
        "SELECT {call} AS {}",
        Ident::with_quote('"', column.value.clone())
    );
    let dialect = datafusion::sql::sqlparser::dialect::PostgreSqlDialect {};
    let Ok(subquery) = datafusion::sql::sqlparser::parser::Parser::new(&dialect)
        .try_with_sql(&sql)
        .and_then(|mut p| p.parse_query())
    else {
        return;
    };
    let Ok(mut derived) = datafusion::sql::sqlparser::parser::Parser::new(&dialect)
        .try_with_sql(&format!(
            "(SELECT 1) AS {}",
            Ident::with_quote('"', fname.clone())
        ))
        .and_then(|mut p| p.parse_table_factor())
    else {
        return;
    };
    if let ast::TableFactor::Derived {
        subquery: q,
        alias: a,
        ..
    } = &mut derived
    {
        *q = subquery;
        if let Some(given) = alias.take() {
            *a = Some(given);
        }
    }
    *factor = derived;
}

/// Whether `f` calls `name` (bare or `pg_catalog.`-qualified).
fn is_function(f: &Function, name: &str) -> bool {
    let parts = &f.name.0;
    let last = parts.last().and_then(|p| p.as_ident());
    last.is_some_and(|i| i.value.eq_ignore_ascii_case(name))
        && (parts.len() == 1
            || (parts.len() == 2
                && parts[0]
                    .as_ident()
                    .is_some_and(|i| i.value.eq_ignore_ascii_case("pg_catalog"))))
}

/// Whether `f` is `_pg_expandarray`, bare or `information_schema.`-qualified.
fn is_expandarray(f: &Function) -> bool {
    let parts = &f.name.0;
    let ident = |i: usize| parts.get(i).and_then(|p| p.as_ident());
    match parts.len() {
        1 => ident(0).is_some_and(|i| i.value.eq_ignore_ascii_case("_pg_expandarray")),
        2 => {
            ident(0).is_some_and(|i| i.value.eq_ignore_ascii_case("information_schema"))
                && ident(1).is_some_and(|i| i.value.eq_ignore_ascii_case("_pg_expandarray"))
        }
        _ => false,
    }
}

/// A call's arguments, when they are all plain unnamed expressions.
fn plain_args(f: &Function) -> Option<Vec<Expr>> {
    let FunctionArguments::List(list) = &f.args else {
        return None;
    };
    if list.duplicate_treatment.is_some() || !list.clauses.is_empty() {
        return None;
    }
    list.args
        .iter()
        .map(|a| match a {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(e.clone()),
            _ => None,
        })
        .collect()
}

fn is_text_type(data_type: &DataType) -> bool {
    match data_type {
        DataType::Text => true,
        DataType::Custom(name, mods) if mods.is_empty() => {
            name.to_string()
                .to_lowercase()
                .trim_start_matches("pg_catalog.")
                == "text"
        }
        _ => false,
    }
}

/// The plain operator `OPERATOR(pg_catalog.op)` (or `OPERATOR(op)`) names.
fn plain_operator(parts: &[String]) -> Option<BinaryOperator> {
    let op = match parts {
        [schema, op] if schema.eq_ignore_ascii_case("pg_catalog") => op,
        [op] => op,
        _ => return None,
    };
    Some(match op.as_str() {
        "~" => BinaryOperator::PGRegexMatch,
        "~*" => BinaryOperator::PGRegexIMatch,
        "!~" => BinaryOperator::PGRegexNotMatch,
        "!~*" => BinaryOperator::PGRegexNotIMatch,
        "~~" => BinaryOperator::PGLikeMatch,
        "~~*" => BinaryOperator::PGILikeMatch,
        "!~~" => BinaryOperator::PGNotLikeMatch,
        "!~~*" => BinaryOperator::PGNotILikeMatch,
        "=" => BinaryOperator::Eq,
        "<>" | "!=" => BinaryOperator::NotEq,
        "<" => BinaryOperator::Lt,
        "<=" => BinaryOperator::LtEq,
        ">" => BinaryOperator::Gt,
        ">=" => BinaryOperator::GtEq,
        "+" => BinaryOperator::Plus,
        "-" => BinaryOperator::Minus,
        "*" => BinaryOperator::Multiply,
        "/" => BinaryOperator::Divide,
        "%" => BinaryOperator::Modulo,
        "||" => BinaryOperator::StringConcat,
        "@>" => BinaryOperator::AtArrow,
        "<@" => BinaryOperator::ArrowAt,
        _ => return None,
    })
}

/// `pg_catalog.int4` → `int4`, also inside array types.
fn strip_catalog_schema(data_type: &mut DataType) {
    match data_type {
        DataType::Custom(name, _) if name.0.len() == 2 => {
            let is_catalog = name.0[0]
                .as_ident()
                .is_some_and(|i| i.value.eq_ignore_ascii_case("pg_catalog"));
            if is_catalog {
                name.0.remove(0);
            }
        }
        DataType::Array(ast::ArrayElemTypeDef::SquareBracket(inner, _))
        | DataType::Array(ast::ArrayElemTypeDef::AngleBracket(inner))
        | DataType::Array(ast::ArrayElemTypeDef::Parenthesis(inner)) => strip_catalog_schema(inner),
        _ => {}
    }
}

fn string_literal(expr: &Expr) -> Option<&str> {
    match expr {
        Expr::Value(v) => match &v.value {
            Value::SingleQuotedString(s) => Some(s),
            _ => None,
        },
        Expr::Nested(inner) => string_literal(inner),
        _ => None,
    }
}

fn oid_literal(oid: u32) -> Expr {
    Expr::Cast {
        kind: ast::CastKind::DoubleColon,
        expr: Box::new(Expr::value(Value::Number(oid.to_string(), false))),
        data_type: DataType::Custom(
            ObjectName(vec![ObjectNamePart::Identifier(Ident::new("oid"))]),
            vec![],
        ),
        array: false,
        format: None,
    }
}

fn reg_cast(reg: RegType, operand: &mut Expr, names: &dyn RegNames) -> Result<Expr> {
    // A parameter's name is known only at bind time: `regclassin` looks it
    // up then, in the names the statement was planned against. (Turning it
    // into the output function would compare an oid with a name.)
    if let Expr::Value(v) = operand
        && matches!(v.value, Value::Placeholder(_))
    {
        if reg != RegType::Class {
            return Err(PlanError::unsupported(
                "a parameter cast to a reg* type other than regclass (write the name as a literal, or compare with the oid)",
            ));
        }
        let operand = std::mem::replace(operand, Expr::value(Value::Null));
        return Ok(call(REGCLASS_IN, vec![operand]));
    }
    let Some(text) = string_literal(operand) else {
        let operand = std::mem::replace(operand, Expr::value(Value::Null));
        return Ok(call(reg.output_function(), vec![operand]));
    };
    let text = text.trim().to_string();
    // A number names the oid itself.
    if let Ok(oid) = text.parse::<u32>() {
        return Ok(oid_literal(oid));
    }
    let oid = match reg {
        RegType::Class => {
            let name = parse_object_name(&text)?;
            names
                .relation_oid(&name)?
                .ok_or_else(|| PlanError::UnknownRelation(text.clone()))?
        }
        RegType::Type => crate::pg::types::parse_type_name(&text)?.oid(),
        RegType::Namespace => names
            .namespace_oid(&text)
            .ok_or_else(|| PlanError::UnknownSchema(text.clone()))?,
        RegType::Role => names.role_oid(&text).ok_or_else(|| {
            PlanError::DataFusion(crate::error::sqlstate_error(
                freshet_repr::sqlstate::UNDEFINED_OBJECT,
                format!("role \"{text}\" does not exist"),
            ))
        })?,
        // Freshet's catalog names functions only in pg_type's I/O columns
        // (`typinput = 'int4in'`, text): a type's input, output, receive
        // or send function is its name, so `typinput =
        // 'pg_catalog.array_in'::regproc` (pgJDBC) compares names.
        RegType::Proc if is_type_io_function(&text) => {
            let name = parse_object_name(&text)?;
            let bare = name
                .0
                .last()
                .and_then(|p| p.as_ident())
                .map(crate::parser::normalize_ident)
                .unwrap_or_default();
            return Ok(Expr::value(Value::SingleQuotedString(bare)));
        }
        RegType::Proc => {
            return Err(PlanError::DataFusion(crate::error::sqlstate_error(
                freshet_repr::sqlstate::UNDEFINED_FUNCTION,
                format!("function \"{text}\" does not exist"),
            )));
        }
    };
    Ok(oid_literal(oid))
}

/// Whether `text` names (bare or `pg_catalog.`-qualified) a type I/O
/// function pg_type lists: `array_in`, or `<type>[_]in` / `out` / `recv`
/// / `send` for one of Freshet's types.
fn is_type_io_function(text: &str) -> bool {
    let lower = text.trim().to_lowercase();
    let bare = lower.strip_prefix("pg_catalog.").unwrap_or(&lower);
    let types = freshet_repr::PgType::scalar_types();
    ["in", "out", "recv", "send"].iter().any(|suffix| {
        bare.strip_suffix(suffix).is_some_and(|stem| {
            // `int4in`, `date_in`, `array_in`.
            let stem = stem.strip_suffix('_').unwrap_or(stem);
            stem == "array" || types.iter().any(|t| t.typname() == stem)
        })
    })
}

fn parse_object_name(text: &str) -> Result<ObjectName> {
    datafusion::sql::sqlparser::parser::Parser::new(
        &datafusion::sql::sqlparser::dialect::PostgreSqlDialect {},
    )
    .try_with_sql(text)
    .and_then(|mut p| p.parse_object_name(false))
    .map_err(|_| PlanError::Syntax(format!("invalid name syntax: \"{text}\"")))
}

fn call(name: &str, args: Vec<Expr>) -> Expr {
    Expr::Function(Function {
        name: ObjectName(vec![ObjectNamePart::Identifier(Ident::new(name))]),
        uses_odbc_syntax: false,
        parameters: FunctionArguments::None,
        args: FunctionArguments::List(FunctionArgumentList {
            duplicate_treatment: None,
            args: args
                .into_iter()
                .map(|a| FunctionArg::Unnamed(FunctionArgExpr::Expr(a)))
                .collect(),
            clauses: vec![],
        }),
        filter: None,
        null_treatment: None,
        over: None,
        within_group: vec![],
    })
}

fn is_array_subquery(f: &Function) -> bool {
    matches!(f.args, FunctionArguments::Subquery(_))
        && f.name.0.len() == 1
        && f.name.0[0]
            .as_ident()
            .is_some_and(|i| i.value.eq_ignore_ascii_case("array"))
}

/// `(SELECT array_agg(_array.elem) FROM (query) AS _array(elem))`.
fn array_of_subquery(query: ast::Query) -> Expr {
    let sql = format!(
        "SELECT {}(array_agg(_array.elem)) FROM ({query}) AS _array(elem)",
        crate::query::array_functions::ARRAY_OR_EMPTY
    );
    match datafusion::sql::sqlparser::parser::Parser::new(
        &datafusion::sql::sqlparser::dialect::PostgreSqlDialect {},
    )
    .try_with_sql(&sql)
    .and_then(|mut p| p.parse_query())
    {
        Ok(q) => Expr::Subquery(q),
        // The query came from the parser, so it prints in a form that
        // parses; should it not, DataFusion reports the original.
        Err(_) => Expr::Function(Function {
            name: ObjectName(vec![ObjectNamePart::Identifier(Ident::new("array"))]),
            uses_odbc_syntax: false,
            parameters: FunctionArguments::None,
            args: FunctionArguments::Subquery(Box::new(query)),
            filter: None,
            null_treatment: None,
            over: None,
            within_group: vec![],
        }),
    }
}
