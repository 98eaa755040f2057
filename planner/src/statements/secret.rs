//! `CREATE SECRET`, `ALTER SECRET ... AS`, `SHOW SECRETS`.
//!
//! A secret's value is any constant expression of type `text` or `bytea`
//! (`'hunter2'`, `decode('c2VjcmV0', 'base64')`). It is evaluated here and
//! kept only in the catalog item's details; what the catalog stores as the
//! statement holds a placeholder. Errors never quote the expression.

use datafusion::common::{DFSchema, ScalarValue};
use datafusion::logical_expr::Expr;
use datafusion::optimizer::simplify_expressions::{ExprSimplifier, SimplifyContext};
use datafusion::sql::sqlparser::ast::{self, ObjectName};
use freshet_catalog::{ItemDef, ItemDetails, ItemKind, SecretValue};
use freshet_repr::PgType;

use crate::error::{PlanError, Result};
use crate::parser::ObjectKind;
use crate::parser::secret::{AlterSecretStatement, CreateSecretStatement};
use crate::plan::Plan;
use crate::statements::context::StatementContext;
use crate::statements::lookup::{lookup_kind, missing_message};

/// Plan `CREATE SECRET`.
pub fn create_secret(cx: &StatementContext, stmt: &CreateSecretStatement) -> Result<Plan> {
    let (schema, name) = cx.resolver().create_target(&stmt.name)?;
    let value = secret_value(cx, &stmt.value)?;
    let canonical = CreateSecretStatement {
        if_not_exists: false,
        ..stmt.clone()
    };
    Ok(Plan::CreateItem {
        def: ItemDef {
            schema_id: schema.id,
            name,
            kind: ItemKind::Secret,
            create_sql: canonical.to_string(),
            desc: None,
            references: Vec::new(),
            details: ItemDetails::Secret(value),
            options: Default::default(),
        },
        if_not_exists: stmt.if_not_exists,
        replace: None,
    })
}

/// Plan `ALTER SECRET ... AS`: the secret's details replaced.
pub fn alter_secret(cx: &StatementContext, stmt: &AlterSecretStatement) -> Result<Plan> {
    let Some(id) = lookup_kind(cx, &stmt.name, ObjectKind::Secret)? else {
        if stmt.if_exists {
            return Ok(Plan::Empty);
        }
        return Err(missing_message(ObjectKind::Secret, &stmt.name));
    };
    Ok(Plan::UpdateDetails {
        id,
        details: ItemDetails::Secret(secret_value(cx, &stmt.value)?),
    })
}

/// `SHOW SECRETS [FROM schema]`: the names, never the values.
pub fn show_secrets(cx: &StatementContext, schema: Option<&ObjectName>) -> Result<Plan> {
    let schema = crate::statements::misc::schema_to_show(cx, schema)?;
    let mut names: Vec<String> = cx
        .catalog
        .items()
        .filter(|i| i.schema_id == schema && i.kind == ItemKind::Secret)
        .map(|i| i.name.clone())
        .collect();
    names.sort();
    crate::statements::misc::text_rows(
        &[("name", PgType::Text)],
        names.into_iter().map(|n| vec![Some(n)]).collect(),
    )
}

/// Evaluate a secret's value expression to its bytes (text as UTF-8).
fn secret_value(cx: &StatementContext, expr: &ast::Expr) -> Result<SecretValue> {
    let refused = || {
        PlanError::InvalidParameter(
            "a secret's value must be a constant expression of type text or bytea".into(),
        )
    };
    let planned = cx
        .planning()
        .plan_scalar_sql(&expr.to_string())
        .map_err(|_| refused())?;
    let simplifier = ExprSimplifier::new(
        SimplifyContext::builder()
            .with_config_options(std::sync::Arc::clone(cx.state.config_options()))
            .build(),
    );
    let schema = DFSchema::empty();
    let folded = simplifier
        .coerce(planned, &schema)
        .and_then(|e| simplifier.simplify(e))
        .map_err(|_| refused())?;
    match folded {
        Expr::Literal(
            ScalarValue::Utf8(Some(s))
            | ScalarValue::LargeUtf8(Some(s))
            | ScalarValue::Utf8View(Some(s)),
            _,
        ) => Ok(SecretValue::new(s.into_bytes())),
        Expr::Literal(
            ScalarValue::Binary(Some(b))
            | ScalarValue::LargeBinary(Some(b))
            | ScalarValue::BinaryView(Some(b)),
            _,
        ) => Ok(SecretValue::new(b)),
        _ => Err(refused()),
    }
}
