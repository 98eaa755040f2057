//! Name resolution.
//!
//! Relation names in a statement are resolved against the catalog (through
//! the session's database and `search_path`, scoped around CTE names) and
//! rewritten into an **id form**, `"[id]"."u5" AS t`, before DataFusion sees
//! the statement. Stored definitions keep that form, so boot never
//! re-resolves names and renames never break dependents; `SHOW CREATE`
//! turns ids back into current names.

use std::collections::BTreeSet;
use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    Ident, ObjectName, ObjectNamePart, Query, TableAlias, TableFactor, VisitMut, VisitorMut,
};
use freshet_catalog::{CatalogState, Database, Item, ItemKind, Schema};
use freshet_repr::GlobalId;

use crate::builtins::{self, BuiltinRelation, SYSTEM_SCHEMAS};
use crate::error::{PlanError, Result};
use crate::parser::{normalize_ident, normalize_name, quote_if_needed};

/// Schema part of the reference to rows bound at execution (RETURNING).
pub const ROWS_SCHEMA: &str = "[rows]";

/// Schema part of an id-form reference to a catalog item.
pub const ID_SCHEMA: &str = "[id]";
/// Schema part of an id-form reference to a built-in relation.
pub const SYS_SCHEMA: &str = "[sys]";

/// What a session contributes to name resolution.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionInfo {
    /// The database connected to.
    pub database: String,
    /// Schemas searched for unqualified names, in order.
    pub search_path: Vec<String>,
    /// The user name.
    pub user: String,
    /// The name of the session's schema for temporary tables
    /// (`pg_temp_<pid>`), created with its first temporary table and
    /// dropped with the session; `pg_temp` names it, and unqualified names
    /// find its relations before any other.
    pub temp_schema: Option<String>,
}

/// The prefix of the schemas that hold sessions' temporary tables.
pub const TEMP_SCHEMA_PREFIX: &str = "pg_temp_";

/// A resolved relation name.
#[derive(Clone, Copy, Debug)]
pub enum Resolved {
    /// A catalog item.
    Item(GlobalId),
    /// A built-in relation.
    System(&'static BuiltinRelation),
}

/// An id-form object name for a catalog item.
pub fn id_name(id: GlobalId) -> ObjectName {
    ObjectName(vec![
        ObjectNamePart::Identifier(Ident::with_quote('"', ID_SCHEMA)),
        ObjectNamePart::Identifier(Ident::with_quote('"', id.to_string())),
    ])
}

fn sys_name(rel: &BuiltinRelation) -> ObjectName {
    ObjectName(vec![
        ObjectNamePart::Identifier(Ident::with_quote('"', SYS_SCHEMA)),
        ObjectNamePart::Identifier(Ident::with_quote('"', rel.qualified_name())),
    ])
}

/// Decode an id-form name.
pub fn parse_id_form(parts: &[String]) -> Option<Result<Resolved>> {
    match parts {
        [schema, id] if schema == ID_SCHEMA => Some(
            id.parse::<GlobalId>()
                .map(Resolved::Item)
                .map_err(|_| PlanError::UnknownRelation(id.clone())),
        ),
        [schema, name] if schema == SYS_SCHEMA => Some(
            builtins::lookup_qualified(name)
                .map(Resolved::System)
                .ok_or_else(|| PlanError::UnknownRelation(name.clone())),
        ),
        _ => None,
    }
}

/// Resolves names for one session against one catalog version.
#[derive(Clone, Copy)]
pub struct NameResolver<'a> {
    /// The catalog.
    pub catalog: &'a CatalogState,
    /// The session.
    pub session: &'a SessionInfo,
}

impl<'a> NameResolver<'a> {
    /// A resolver.
    pub fn new(catalog: &'a CatalogState, session: &'a SessionInfo) -> Self {
        NameResolver { catalog, session }
    }

    /// The session's database.
    pub fn database(&self) -> Result<&'a Database> {
        self.catalog
            .database_by_name(&self.session.database)
            .ok_or_else(|| PlanError::UnknownDatabase(self.session.database.clone()))
    }

    /// Resolve a schema name (`schema` or `database.schema`).
    pub fn resolve_schema(&self, name: &ObjectName) -> Result<&'a Schema> {
        let parts = normalize_name(name)?;
        let (db, schema) = match parts.as_slice() {
            [schema] => (self.database()?, schema),
            [db, schema] => (
                self.catalog
                    .database_by_name(db)
                    .ok_or_else(|| PlanError::UnknownDatabase(db.clone()))?,
                schema,
            ),
            _ => {
                return Err(PlanError::Syntax(format!(
                    "improper qualified name: {name}"
                )));
            }
        };
        let schema = self.schema_alias(schema);
        self.catalog
            .schema_by_name(db.id, schema)
            .ok_or_else(|| PlanError::UnknownSchema(schema.to_string()))
    }

    /// `pg_temp` is the session's temporary schema.
    fn schema_alias<'s>(&'s self, schema: &'s str) -> &'s str {
        match &self.session.temp_schema {
            Some(temp) if schema == "pg_temp" => temp,
            _ => schema,
        }
    }

    /// The session's temporary schema, if it has one yet.
    pub fn temp_schema(&self) -> Option<&'a Schema> {
        let db = self.database().ok()?;
        self.catalog
            .schema_by_name(db.id, self.session.temp_schema.as_deref()?)
    }

    /// Resolve a relation name, or `None` if nothing by that name exists.
    pub fn lookup_relation(&self, name: &ObjectName) -> Result<Option<Resolved>> {
        let parts = normalize_name(name)?;
        if let Some(r) = parse_id_form(&parts) {
            return r.map(Some);
        }
        match parts.as_slice() {
            [item] => {
                // Postgres searches the session's temporary tables first,
                // then pg_catalog, then the search path.
                if let Some(temp) = self.temp_schema()
                    && let Some(i) = self.catalog.item_by_name(temp.id, item)
                {
                    return Ok(Some(Resolved::Item(i.id)));
                }
                if let Some(rel) = builtins::lookup("pg_catalog", item) {
                    return Ok(Some(Resolved::System(rel)));
                }
                let db = self.database()?;
                for schema in &self.session.search_path {
                    if let Some(s) = self.catalog.schema_by_name(db.id, schema)
                        && let Some(i) = self.catalog.item_by_name(s.id, item)
                    {
                        return Ok(Some(Resolved::Item(i.id)));
                    }
                }
                Ok(None)
            }
            [schema, item] => self.lookup_in(self.database()?, schema, item),
            [db, schema, item] => {
                let db = self
                    .catalog
                    .database_by_name(db)
                    .ok_or_else(|| PlanError::UnknownDatabase(db.clone()))?;
                self.lookup_in(db, schema, item)
            }
            _ => Err(PlanError::Syntax(format!(
                "improper qualified name (too many dotted names): {name}"
            ))),
        }
    }

    fn lookup_in(&self, db: &Database, schema: &str, item: &str) -> Result<Option<Resolved>> {
        let schema = self.schema_alias(schema);
        if SYSTEM_SCHEMAS.contains(&schema) {
            return Ok(builtins::lookup(schema, item).map(Resolved::System));
        }
        // A missing schema is reported as a missing relation, as in Postgres.
        Ok(self
            .catalog
            .schema_by_name(db.id, schema)
            .and_then(|s| self.catalog.item_by_name(s.id, item))
            .map(|i| Resolved::Item(i.id)))
    }

    /// Resolve a relation name that must exist.
    pub fn resolve_relation(&self, name: &ObjectName) -> Result<Resolved> {
        self.lookup_relation(name)?
            .ok_or_else(|| PlanError::UnknownRelation(name.to_string()))
    }

    /// Resolve a name that must be a catalog item (not a built-in relation).
    pub fn resolve_item(&self, name: &ObjectName) -> Result<&'a Item> {
        match self.resolve_relation(name)? {
            Resolved::Item(id) => Ok(self.catalog.get_item(id)?),
            Resolved::System(rel) => Err(PlanError::Catalog(
                freshet_catalog::CatalogError::SystemObject(rel.qualified_name()),
            )),
        }
    }

    /// Resolve a name that must be an item holding rows a dataflow can
    /// read (a table, view, materialized view or source): what indexes
    /// and subscribes name.
    pub fn resolve_readable_item(&self, name: &ObjectName) -> Result<&'a Item> {
        let item = self.resolve_item(name)?;
        if !matches!(
            item.kind,
            freshet_catalog::ItemKind::Table
                | freshet_catalog::ItemKind::View
                | freshet_catalog::ItemKind::MaterializedView
                | freshet_catalog::ItemKind::Source
        ) {
            return Err(PlanError::WrongObjectType {
                name: item.name.clone(),
                expected: "a table, view, materialized view or source",
            });
        }
        Ok(item)
    }

    /// Where `CREATE` puts an object named `name`: its schema and bare name.
    pub fn create_target(&self, name: &ObjectName) -> Result<(&'a Schema, String)> {
        let parts = normalize_name(name)?;
        if let [schema, item] = parts.as_slice()
            && schema == "pg_temp"
        {
            return Ok((self.create_temp_target(name)?.0, item.clone()));
        }
        match parts.as_slice() {
            [item] => {
                let db = self.database()?;
                for schema in &self.session.search_path {
                    if let Some(s) = self.catalog.schema_by_name(db.id, schema) {
                        return Ok((s, item.clone()));
                    }
                }
                Err(PlanError::InvalidParameter(
                    "no schema has been selected to create in".into(),
                ))
            }
            [schema, item] | [_, schema, item] => {
                if SYSTEM_SCHEMAS.contains(&schema.as_str()) {
                    return Err(PlanError::Catalog(
                        freshet_catalog::CatalogError::SystemObject(format!("schema {schema}")),
                    ));
                }
                let schema_name = ObjectName(name.0[..name.0.len() - 1].to_vec());
                Ok((self.resolve_schema(&schema_name)?, item.clone()))
            }
            _ => Err(PlanError::Syntax(format!(
                "improper qualified name: {name}"
            ))),
        }
    }

    /// Where `CREATE TEMPORARY ... name` creates: the session's temporary
    /// schema (which the coordinator creates before planning such a
    /// statement). A name may be qualified only with that schema.
    pub fn create_temp_target(&self, name: &ObjectName) -> Result<(&'a Schema, String)> {
        let parts = normalize_name(name)?;
        let item = match parts.as_slice() {
            [item] => item,
            [schema, item]
                if self.schema_alias(schema)
                    == self.session.temp_schema.as_deref().unwrap_or("pg_temp") =>
            {
                item
            }
            _ => {
                return Err(PlanError::InvalidDefinition(
                    "cannot create temporary relation in non-temporary schema".into(),
                ));
            }
        };
        let schema = self.temp_schema().ok_or_else(|| {
            PlanError::Internal("the session's temporary schema does not exist".into())
        })?;
        Ok((schema, item.clone()))
    }

    /// Rewrite every relation reference in `node` into id form, returning
    /// the catalog items and built-in relations it names directly.
    pub fn rewrite<V: VisitMut>(&self, node: &mut V) -> Result<References> {
        let mut rewriter = Rewriter {
            resolver: *self,
            ctes: vec![],
            refs: References::default(),
            error: None,
        };
        let _ = node.visit(&mut rewriter);
        match rewriter.error {
            Some(e) => Err(e),
            None => Ok(rewriter.refs),
        }
    }

    /// The current fully qualified name of an item, for display.
    pub fn display_name(&self, id: GlobalId) -> ObjectName {
        match self.catalog.full_name(id) {
            Some((db, schema, item)) => ObjectName(
                [db, schema, item]
                    .into_iter()
                    .map(|p| ObjectNamePart::Identifier(quote_if_needed(&p)))
                    .collect(),
            ),
            None => id_name(id),
        }
    }

    /// Replace id-form references by current names (for `SHOW CREATE`).
    pub fn humanize<V: VisitMut>(&self, node: &mut V) {
        struct Humanizer<'r, 'a>(&'r NameResolver<'a>);
        impl VisitorMut for Humanizer<'_, '_> {
            type Break = ();
            fn pre_visit_relation(&mut self, name: &mut ObjectName) -> ControlFlow<()> {
                if let Ok(parts) = normalize_name(name)
                    && let Some(Ok(resolved)) = parse_id_form(&parts)
                {
                    *name = match resolved {
                        Resolved::Item(id) => self.0.display_name(id),
                        Resolved::System(rel) => ObjectName(vec![
                            ObjectNamePart::Identifier(Ident::new(rel.schema)),
                            ObjectNamePart::Identifier(Ident::new(rel.name)),
                        ]),
                    };
                }
                ControlFlow::Continue(())
            }
        }
        let _ = node.visit(&mut Humanizer(self));
    }

    /// Logical inputs of a set of direct references: views are expanded
    /// through their stored references until storage collections remain.
    pub fn collection_inputs(&self, direct: &BTreeSet<GlobalId>) -> BTreeSet<GlobalId> {
        let mut out = BTreeSet::new();
        let mut stack: Vec<GlobalId> = direct.iter().copied().collect();
        let mut seen = BTreeSet::new();
        while let Some(id) = stack.pop() {
            if !seen.insert(id) {
                continue;
            }
            match self.catalog.item(id) {
                Some(item) if item.kind == ItemKind::View => stack.extend(&item.references),
                Some(item) if item.has_collection() => {
                    out.insert(id);
                }
                _ => {}
            }
        }
        out
    }
}

/// Replace id-form references (`[id].u5`) in plan text by qualified names.
pub fn humanize_ids(catalog: &CatalogState, text: &str) -> String {
    let mut ids: Vec<GlobalId> = catalog.items().map(|i| i.id).collect();
    // Longer ids first, so `u1` does not clobber `u12`.
    ids.sort_by_key(|id| std::cmp::Reverse(id.to_string().len()));
    let mut out = text.to_string();
    for id in ids {
        let needle = format!("{ID_SCHEMA}.{id}");
        if out.contains(&needle)
            && let Some((db, schema, item)) = catalog.full_name(id)
        {
            out = out.replace(&needle, &format!("{db}.{schema}.{item}"));
        }
    }
    out
}

/// Positions of the columns `names` in `columns`, each named once: the
/// key of a constraint or of a subscribe envelope.
pub(crate) fn key_positions(
    columns: &[freshet_repr::ColumnDesc],
    names: impl IntoIterator<Item = String>,
) -> crate::error::Result<Vec<usize>> {
    let mut positions = Vec::new();
    for name in names {
        let i = columns
            .iter()
            .position(|c| c.name == name)
            .ok_or_else(|| crate::error::PlanError::UnknownColumn(name.clone()))?;
        if positions.contains(&i) {
            return Err(crate::error::PlanError::DuplicateColumn(name));
        }
        positions.push(i);
    }
    Ok(positions)
}

/// Relations a statement names directly.
#[derive(Clone, Debug, Default)]
pub struct References {
    /// Catalog items.
    pub items: BTreeSet<GlobalId>,
    /// Built-in relations, by qualified name.
    pub system: BTreeSet<&'static str>,
}

struct Rewriter<'a> {
    resolver: NameResolver<'a>,
    ctes: Vec<Vec<String>>,
    refs: References,
    error: Option<PlanError>,
}

impl VisitorMut for Rewriter<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        let names = query
            .with
            .as_ref()
            .map(|w| {
                w.cte_tables
                    .iter()
                    .map(|c| normalize_ident(&c.alias.name))
                    .collect()
            })
            .unwrap_or_default();
        self.ctes.push(names);
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _query: &mut Query) -> ControlFlow<()> {
        self.ctes.pop();
        ControlFlow::Continue(())
    }

    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        let TableFactor::Table {
            name,
            alias,
            args: None,
            ..
        } = factor
        else {
            return ControlFlow::Continue(());
        };
        if let [part] = name.0.as_slice()
            && let Some(ident) = part.as_ident()
        {
            let n = normalize_ident(ident);
            if self.ctes.iter().any(|scope| scope.contains(&n)) {
                return ControlFlow::Continue(());
            }
        }
        // Rows bound at execution (RETURNING) are not catalog relations.
        if let Some(first) = name.0.first().and_then(|p| p.as_ident())
            && first.quote_style.is_some()
            && first.value == ROWS_SCHEMA
        {
            return ControlFlow::Continue(());
        }
        let written = name
            .0
            .last()
            .and_then(|p| p.as_ident())
            .cloned()
            .unwrap_or_else(|| Ident::new("?"));
        match self.resolver.resolve_relation(name) {
            Ok(Resolved::Item(id)) => {
                self.refs.items.insert(id);
                *name = id_name(id);
            }
            Ok(Resolved::System(rel)) => {
                self.refs.system.insert(rel.name);
                *name = sys_name(rel);
            }
            Err(e) => {
                self.error = Some(e);
                return ControlFlow::Break(());
            }
        }
        if alias.is_none() && !is_id_alias(&written) {
            *alias = Some(TableAlias {
                explicit: true,
                name: written,
                columns: vec![],
                at: None,
            });
        }
        ControlFlow::Continue(())
    }
}

fn is_id_alias(ident: &Ident) -> bool {
    ident.quote_style.is_some() && ident.value.parse::<GlobalId>().is_ok()
}

impl crate::rewrites::pg_syntax::RegNames for NameResolver<'_> {
    fn relation_oid(&self, name: &ObjectName) -> Result<Option<u32>> {
        Ok(match self.lookup_relation(name)? {
            Some(Resolved::Item(id)) => self.catalog.item(id).map(|i| i.oid),
            Some(Resolved::System(rel)) => Some(rel.oid()),
            // A key's index (`t_pkey`) is a relation to Postgres but not a
            // catalog item here.
            None => {
                let key = crate::parser::normalize_name(name)?.join(".");
                crate::query::catalog_functions::relation_oids(self)
                    .get(&key)
                    .copied()
            }
        })
    }

    fn namespace_oid(&self, name: &str) -> Option<u32> {
        if SYSTEM_SCHEMAS.contains(&name) {
            return Some(builtins::system_schema_oid(name));
        }
        let db = self.database().ok()?;
        self.catalog.schema_by_name(db.id, name).map(|s| s.oid)
    }

    fn role_oid(&self, name: &str) -> Option<u32> {
        (name == self.session.user).then_some(builtins::BUILTIN_OWNER_OID)
    }
}
