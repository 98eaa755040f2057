//! `ALTER TABLE`: renames, and keys added to a table that already holds
//! rows (`ALTER TABLE t ADD [CONSTRAINT name] PRIMARY KEY (...)` /
//! `UNIQUE (...)`, as `pgbench -i` and schema migration tools run them).
//!
//! Adding a key changes only the table's details in the catalog: its
//! columns, collection and dependents stay as they are. The coordinator
//! checks the rows the table holds against the new key (with writes to
//! the table held back meanwhile) before the change commits.

use datafusion::sql::sqlparser::ast::{self, AlterTableOperation, TableConstraint};
use freshet_catalog::{CatalogError, ItemDetails, TableKeys, UniqueKey};
use freshet_repr::GlobalId;

use crate::error::{PlanError, Result};
use crate::parser::{ObjectKind, normalize_ident};
use crate::plan::Plan;
use crate::query::resolve::key_positions;
use crate::statements::context::StatementContext;
use crate::statements::ddl::{self, default_unique_name, key_columns};
use crate::statements::lookup::{lookup_kind, missing_message};

/// A key added to an existing table.
#[derive(Clone, Debug)]
pub struct AddKeyPlan {
    /// The table.
    pub table: GlobalId,
    /// The table's keys before (the coordinator refuses the change if the
    /// catalog no longer holds these).
    pub before: TableKeys,
    /// The table's keys with the new one.
    pub after: TableKeys,
    /// Which key is new (0: the primary key, 1..: the `UNIQUE`s).
    pub slot: usize,
}

/// Plan `ALTER TABLE`.
pub fn alter_table(cx: &StatementContext, at: &ast::AlterTable) -> Result<Plan> {
    match at.operations.as_slice() {
        [AlterTableOperation::RenameTable { table_name }] => {
            let new_name = match table_name {
                ast::RenameTableNameKind::To(n) | ast::RenameTableNameKind::As(n) => n,
            };
            let ident = new_name
                .0
                .last()
                .and_then(|p| p.as_ident())
                .cloned()
                .ok_or_else(|| PlanError::Syntax("invalid new name".into()))?;
            ddl::rename(cx, ObjectKind::Table, &at.name, &ident, at.if_exists)
        }
        [
            AlterTableOperation::AddConstraint {
                constraint,
                not_valid: false,
            },
        ] => add_key(cx, at, constraint),
        _ => Err(PlanError::unsupported(
            "ALTER TABLE other than RENAME TO, ADD PRIMARY KEY and ADD UNIQUE",
        )),
    }
}

/// `ADD [CONSTRAINT name] {PRIMARY KEY | UNIQUE [NULLS [NOT] DISTINCT]}
/// (columns)`.
fn add_key(
    cx: &StatementContext,
    at: &ast::AlterTable,
    constraint: &TableConstraint,
) -> Result<Plan> {
    let Some(table) = lookup_kind(cx, &at.name, ObjectKind::Table)? else {
        if at.if_exists {
            return Ok(Plan::Empty);
        }
        return Err(missing_message(ObjectKind::Table, &at.name));
    };
    let item = cx.catalog.get_item(table)?;
    let (ItemDetails::Table { keys, .. }, Some(desc)) = (&item.details, item.desc.as_ref()) else {
        return Err(missing_message(ObjectKind::Table, &at.name));
    };
    let before = keys.as_ref().clone();
    let mut after = before.clone();
    let slot = match constraint {
        TableConstraint::PrimaryKey(pk) if pk.characteristics.is_none() => {
            if !before.primary_key.is_empty() {
                return Err(PlanError::InvalidDefinition(format!(
                    "multiple primary keys for table \"{}\" are not allowed",
                    item.name
                )));
            }
            after.primary_key = key_positions(&desc.columns, key_columns(&pk.columns)?)?;
            0
        }
        TableConstraint::Unique(u) if u.characteristics.is_none() => {
            let names = key_columns(&u.columns)?;
            let columns = key_positions(&desc.columns, names.clone())?;
            let name = u
                .name
                .as_ref()
                .map(normalize_ident)
                .unwrap_or_else(|| default_unique_name(&item.name, &names));
            if before.unique.iter().any(|k| k.name == name) {
                return Err(PlanError::Catalog(CatalogError::AlreadyExists {
                    kind: "relation",
                    name,
                }));
            }
            after.unique.push(UniqueKey {
                name,
                columns,
                nulls_not_distinct: matches!(
                    u.nulls_distinct,
                    ast::NullsDistinctOption::NotDistinct
                ),
            });
            after.unique.len()
        }
        other => {
            return Err(PlanError::unsupported(format!(
                "ALTER TABLE ... ADD {other}"
            )));
        }
    };
    Ok(Plan::AddKey(Box::new(AddKeyPlan {
        table,
        before,
        after,
        slot,
    })))
}
