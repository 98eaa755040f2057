//! Rows of the base `pg_catalog` relations, derived from the catalog
//! version a query was planned against. Everything else in `pg_catalog`
//! and `information_schema` is a SQL view over these (see
//! `freshet_planner::builtins`).
//!
//! What Freshet's kinds look like to Postgres tools: tables are `r`, views
//! `v`, materialized views `m`, indexes `i` (Freshet's arrangements, shown
//! as `btree`, on tables, views and materialized views alike); a table's
//! primary key and `UNIQUE` constraints appear as a constraint in
//! `pg_constraint` and a unique index in `pg_class`/`pg_index`, as Postgres
//! would build them, with oids derived from the table's.

use freshet_catalog::{Item, ItemDetails, ItemKind};
use freshet_planner::builtins::keys::{index_keys, key_constraints};
use freshet_planner::builtins::{
    BTREE_AM_OID, BUILTIN_OWNER_OID, BUILTINS, HEAP_AM_OID, PG_CATALOG_OID, key_constraint_oid,
    system_schema_oid,
};
use freshet_repr::PgType;

use super::{QueryReader, Row};

fn s(v: &str) -> Option<String> {
    Some(v.to_string())
}

fn n(v: impl ToString) -> Option<String> {
    Some(v.to_string())
}

fn b(v: bool) -> Option<String> {
    s(if v { "t" } else { "f" })
}

/// A Postgres array's text form of simple elements.
fn array<T: ToString>(values: impl IntoIterator<Item = T>) -> Option<String> {
    let parts: Vec<String> = values.into_iter().map(|v| v.to_string()).collect();
    Some(format!("{{{}}}", parts.join(",")))
}

/// `pg_class.relkind` of an item.
pub(super) fn relkind(kind: ItemKind) -> &'static str {
    match kind {
        ItemKind::Table | ItemKind::Source => "r",
        ItemKind::View => "v",
        ItemKind::MaterializedView => "m",
        ItemKind::Index => "i",
        ItemKind::Sequence => "S",
        // Not listed (`items_in_db`): secrets, connections and sinks are
        // no relations.
        ItemKind::Secret | ItemKind::Connection | ItemKind::Sink => "",
    }
}

/// `pg_class.relam`: the access method Postgres would show (views have
/// none).
fn relam(kind: ItemKind) -> u32 {
    match kind {
        ItemKind::View
        | ItemKind::Sequence
        | ItemKind::Secret
        | ItemKind::Connection
        | ItemKind::Sink => 0,
        ItemKind::Index => BTREE_AM_OID,
        _ => HEAP_AM_OID,
    }
}

impl QueryReader {
    /// The schemas of the session's database.
    pub(super) fn schemas_in_db(&self) -> Vec<&freshet_catalog::Schema> {
        let db = self.catalog.database_by_name(&self.database);
        self.catalog
            .schemas()
            .filter(|sc| Some(sc.database_id) == db.map(|d| d.id))
            .collect()
    }

    /// Items of the session's database, with their schema's oid.
    pub(super) fn items_in_db(&self) -> Vec<(&Item, u32)> {
        let schemas = self.schemas_in_db();
        self.catalog
            .items()
            .filter_map(|i| {
                if matches!(
                    i.kind,
                    freshet_catalog::ItemKind::Secret
                        | freshet_catalog::ItemKind::Connection
                        | freshet_catalog::ItemKind::Sink
                ) {
                    return None;
                }
                let sc = schemas.iter().find(|sc| sc.id == i.schema_id)?;
                Some((i, sc.oid))
            })
            .collect()
    }

    pub(super) fn pg_class(&self) -> Vec<Row> {
        let items = self.items_in_db();
        let temp_nsps: std::collections::HashSet<u32> = self
            .catalog
            .schemas()
            .filter(|s| {
                s.name
                    .starts_with(freshet_planner::query::resolve::TEMP_SCHEMA_PREFIX)
            })
            .map(|s| s.oid)
            .collect();
        let has_index = |i: &Item| {
            !key_constraints(i).is_empty() || self.catalog.indexes_on(i.id).next().is_some()
        };
        #[allow(clippy::too_many_arguments)]
        let row = |oid: u32,
                   name: &str,
                   nsp: u32,
                   kind: &str,
                   am: u32,
                   natts: usize,
                   hasindex: bool,
                   replident: &str| {
            // Temporary tables (and their indexes) live in `pg_temp_<n>`.
            let persistence = if temp_nsps.contains(&nsp) { "t" } else { "p" };
            vec![
                n(oid),
                s(name),
                n(nsp),
                n(0),
                n(0),
                n(BUILTIN_OWNER_OID),
                n(am),
                n(if kind == "v" { 0 } else { oid }),
                n(0),
                n(0),
                n(-1),
                n(0),
                n(0),
                b(hasindex),
                b(false),
                s(persistence),
                s(kind),
                n(natts),
                n(0),
                b(false),
                b(false),
                b(false),
                b(false),
                b(false),
                b(true),
                s(replident),
                b(false),
                n(0),
                None,
                None,
                None,
            ]
        };
        let mut rows = Vec::new();
        for (i, nsp) in &items {
            let kind = relkind(i.kind);
            let natts = match &i.details {
                ItemDetails::Index { keys, .. } => keys.len(),
                _ => i.desc.as_ref().map_or(0, |d| d.arity()),
            };
            let replident = if kind == "r" || kind == "m" { "d" } else { "n" };
            rows.push(row(
                i.oid,
                &i.name,
                *nsp,
                kind,
                relam(i.kind),
                natts,
                has_index(i),
                replident,
            ));
            for key in key_constraints(i) {
                rows.push(row(
                    key.oid,
                    &key.name,
                    *nsp,
                    "i",
                    BTREE_AM_OID,
                    key.columns.len(),
                    false,
                    "n",
                ));
            }
        }
        for rel in BUILTINS {
            rows.push(row(
                rel.oid(),
                rel.name,
                system_schema_oid(rel.schema),
                "v",
                0,
                rel.columns.len(),
                false,
                "n",
            ));
        }
        rows
    }

    pub(super) fn pg_attribute(&self) -> Vec<Row> {
        #[allow(clippy::too_many_arguments)]
        let row = |rel: u32,
                   name: &str,
                   ty: &PgType,
                   num: usize,
                   notnull: bool,
                   hasdef: bool,
                   identity: &str| {
            let len = ty.typlen();
            let collatable = matches!(
                ty,
                PgType::Text | PgType::Varchar { .. } | PgType::Char { .. }
            );
            vec![
                n(rel),
                s(name),
                n(ty.oid()),
                n(-1),
                n(len),
                n(num),
                n(if matches!(ty, PgType::Array(_)) { 1 } else { 0 }),
                n(-1),
                n(ty.typmod()),
                b(len > 0 && len <= 8),
                s(type_facts(ty).align),
                s(if len > 0 { "p" } else { "x" }),
                s(""),
                b(notnull),
                b(hasdef),
                b(false),
                s(identity),
                s(""),
                b(false),
                b(true),
                n(0),
                n(if collatable { 100 } else { 0 }),
                None,
                None,
                None,
            ]
        };
        let mut rows = Vec::new();
        for (i, _) in self.items_in_db() {
            match &i.details {
                ItemDetails::Index { on, keys, .. } => {
                    let Some(on) = self.catalog.item(*on) else {
                        continue;
                    };
                    for (k, (_, name, ty)) in index_keys(on, keys).iter().enumerate() {
                        rows.push(row(i.oid, name, ty, k + 1, false, false, ""));
                    }
                }
                details => {
                    let defaults = shown_defaults(details);
                    let (serials, primary_key) = match details {
                        ItemDetails::Table { serials, keys, .. } => {
                            (serials.as_slice(), keys.primary_key.as_slice())
                        }
                        _ => (&[][..], &[][..]),
                    };
                    for (k, c) in i.desc.iter().flat_map(|d| d.columns.iter()).enumerate() {
                        let hasdef = defaults.get(k).is_some_and(|d| d.is_some());
                        let identity = match serials.iter().find(|s| s.column == k) {
                            Some(s) => match s.identity {
                                Some(freshet_catalog::Identity::Always) => "a",
                                Some(freshet_catalog::Identity::ByDefault) => "d",
                                None => "",
                            },
                            None => "",
                        };
                        rows.push(row(
                            i.oid,
                            &c.name,
                            &c.ty,
                            k + 1,
                            // A key added later leaves the declared
                            // nullability; its columns are NOT NULL still.
                            !c.nullable || primary_key.contains(&k),
                            hasdef,
                            identity,
                        ));
                    }
                    let columns = i.desc.as_ref().map(|d| d.columns.as_slice()).unwrap_or(&[]);
                    for key in key_constraints(i) {
                        for (k, c) in key.columns.iter().enumerate() {
                            if let Some(col) = columns.get(*c) {
                                rows.push(row(
                                    key.oid,
                                    &col.name,
                                    &col.ty,
                                    k + 1,
                                    false,
                                    false,
                                    "",
                                ));
                            }
                        }
                    }
                }
            }
        }
        for rel in BUILTINS {
            for (k, (name, ty)) in rel.columns.iter().enumerate() {
                rows.push(row(rel.oid(), name, &ty.pg(), k + 1, false, false, ""));
            }
        }
        rows
    }

    pub(super) fn pg_type(&self) -> Vec<Row> {
        let mut rows = Vec::new();
        for t in PgType::scalar_types() {
            let arr = PgType::Array(Box::new(t.clone()));
            let f = type_facts(&t);
            rows.push(type_row(
                t.oid(),
                t.typname(),
                t.typlen(),
                f.category,
                f.preferred,
                0,
                arr.oid(),
                f.io,
                f.align,
                f.collatable,
            ));
            rows.push(type_row(
                arr.oid(),
                &format!("_{}", t.typname()),
                -1,
                "A",
                false,
                t.oid(),
                0,
                "array_",
                f.align,
                f.collatable,
            ));
        }
        // The catalog's vector types (`pg_index.indkey`, `indclass`).
        for (t, elem) in [
            (PgType::Int2Vector, PgType::Int2),
            (PgType::OidVector, PgType::Oid),
        ] {
            let f = type_facts(&t);
            rows.push(type_row(
                t.oid(),
                t.typname(),
                t.typlen(),
                f.category,
                f.preferred,
                elem.oid(),
                0,
                f.io,
                f.align,
                f.collatable,
            ));
        }
        rows
    }

    pub(super) fn pg_index(&self) -> Vec<Row> {
        // Each key's operator class: the default btree class of its type,
        // which `pg_opclass` lists under the type's oid.
        #[allow(clippy::too_many_arguments)]
        let row = |index: u32,
                   on: u32,
                   attnums: &[usize],
                   classes: Vec<u32>,
                   unique: bool,
                   nnd: bool,
                   primary: bool,
                   exprs: Option<String>| {
            vec![
                n(index),
                n(on),
                n(attnums.len()),
                n(attnums.len()),
                b(unique),
                b(nnd),
                b(primary),
                b(false),
                b(true),
                b(false),
                b(true),
                b(false),
                b(true),
                b(true),
                b(false),
                array(attnums.iter()),
                array(attnums.iter().map(|_| 0)),
                array(classes.iter()),
                array(attnums.iter().map(|_| 0)),
                exprs,
                None,
            ]
        };
        let mut rows = Vec::new();
        for (i, _) in self.items_in_db() {
            if let ItemDetails::Index { on, keys, .. } = &i.details {
                let Some(on) = self.catalog.item(*on) else {
                    continue;
                };
                let keys_info = index_keys(on, keys);
                let attnums: Vec<usize> = keys_info.iter().map(|(a, _, _)| *a).collect();
                let classes = keys_info
                    .iter()
                    .map(|(a, _, ty)| if *a == 0 { 0 } else { ty.oid() })
                    .collect();
                let exprs: Vec<&String> = keys_info
                    .iter()
                    .zip(keys)
                    .filter(|((a, _, _), _)| *a == 0)
                    .map(|(_, k)| k)
                    .collect();
                let exprs = (!exprs.is_empty()).then(|| {
                    exprs
                        .iter()
                        .map(|e| e.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                });
                rows.push(row(
                    i.oid, on.oid, &attnums, classes, false, false, false, exprs,
                ));
            }
            for key in key_constraints(i) {
                let attnums: Vec<usize> = key.columns.iter().map(|c| c + 1).collect();
                let columns = i.desc.as_ref().map(|d| d.columns.as_slice()).unwrap_or(&[]);
                let classes = key
                    .columns
                    .iter()
                    .map(|c| columns.get(*c).map_or(0, |col| col.ty.oid()))
                    .collect();
                rows.push(row(
                    key.oid,
                    i.oid,
                    &attnums,
                    classes,
                    true,
                    key.nulls_not_distinct,
                    key.primary,
                    None,
                ));
            }
        }
        rows
    }

    pub(super) fn pg_attrdef(&self) -> Vec<Row> {
        let mut rows = Vec::new();
        for (i, _) in self.items_in_db() {
            if let ItemDetails::Table { .. } = &i.details {
                for (k, d) in shown_defaults(&i.details).iter().enumerate() {
                    if let Some(sql) = d {
                        // The default's oid: derived from the table's and
                        // the column's, like the key constraints'.
                        let oid = key_constraint_oid(i.oid, 0) | 0x0400_0000 | k as u32;
                        rows.push(vec![n(oid), n(i.oid), n(k + 1), s(sql)]);
                    }
                }
            }
        }
        rows
    }

    pub(super) fn pg_constraint(&self) -> Vec<Row> {
        let mut rows = Vec::new();
        for (i, nsp) in self.items_in_db() {
            for key in key_constraints(i) {
                let conkey: Vec<usize> = key.columns.iter().map(|c| c + 1).collect();
                rows.push(vec![
                    n(key.oid),
                    s(&key.name),
                    n(nsp),
                    s(if key.primary { "p" } else { "u" }),
                    b(false),
                    b(false),
                    b(true),
                    n(i.oid),
                    n(0),
                    n(key.oid),
                    n(0),
                    n(0),
                    s(" "),
                    s(" "),
                    s(" "),
                    b(true),
                    n(0),
                    b(true),
                    array(conkey),
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                ]);
            }
        }
        rows
    }

    pub(super) fn key_column_usage(&self) -> Vec<Row> {
        let db = &self.database;
        let mut rows = Vec::new();
        for (i, _) in self.items_in_db() {
            let Some((_, schema, table)) = self.catalog.full_name(i.id) else {
                continue;
            };
            let columns = i.desc.as_ref().map(|d| d.columns.as_slice()).unwrap_or(&[]);
            for key in key_constraints(i) {
                for (k, c) in key.columns.iter().enumerate() {
                    rows.push(vec![
                        s(db),
                        s(&schema),
                        s(&key.name),
                        s(db),
                        s(&schema),
                        s(&table),
                        columns.get(*c).map(|c| c.name.clone()),
                        n(k + 1),
                        None,
                    ]);
                }
            }
        }
        rows
    }
}

/// A table's column defaults as PostgreSQL shows them: an identity
/// column has none (its `nextval` is how Freshet fills it; Postgres shows
/// `attidentity` instead), and a serial's names its sequence unqualified
/// (Freshet stores it qualified, to resolve under any search path).
fn shown_defaults(details: &ItemDetails) -> Vec<Option<String>> {
    let ItemDetails::Table {
        defaults, serials, ..
    } = details
    else {
        return Vec::new();
    };
    let mut shown = defaults.clone();
    for serial in serials {
        if let Some(d) = shown.get_mut(serial.column) {
            *d = match serial.identity {
                Some(_) => None,
                // As Postgres prints it for a sequence on the search path.
                None => Some(format!(
                    "nextval('{}'::regclass)",
                    freshet_planner::parser::quote_if_needed(&serial.sequence)
                        .to_string()
                        .replace('\'', "''")
                )),
            };
        }
    }
    shown
}

/// What `pg_type` says about a type beyond what [`PgType`] knows.
struct TypeFacts {
    category: &'static str,
    preferred: bool,
    /// The stem of its input/output functions (`int4` → `int4in`).
    io: &'static str,
    align: &'static str,
    collatable: bool,
}

fn type_facts(t: &PgType) -> TypeFacts {
    let f = |category, preferred, io, align, collatable| TypeFacts {
        category,
        preferred,
        io,
        align,
        collatable,
    };
    match t {
        PgType::Bool => f("B", true, "bool", "c", false),
        PgType::Int2 => f("N", false, "int2", "s", false),
        PgType::Int4 => f("N", false, "int4", "i", false),
        PgType::Int8 => f("N", false, "int8", "d", false),
        PgType::Float4 => f("N", false, "float4", "i", false),
        PgType::Float8 => f("N", true, "float8", "d", false),
        PgType::Numeric { .. } => f("N", false, "numeric", "i", false),
        PgType::Text => f("S", true, "text", "i", true),
        PgType::Varchar { .. } => f("S", false, "varchar", "i", true),
        PgType::Char { .. } => f("S", false, "bpchar", "i", true),
        PgType::Bytea => f("U", false, "bytea", "i", false),
        PgType::Date => f("D", false, "date_", "i", false),
        PgType::Time => f("D", false, "time_", "d", false),
        PgType::Timestamp => f("D", false, "timestamp_", "d", false),
        PgType::TimestampTz => f("D", true, "timestamptz_", "d", false),
        PgType::Interval => f("T", true, "interval_", "d", false),
        PgType::Uuid => f("U", false, "uuid_", "c", false),
        PgType::Jsonb => f("U", false, "jsonb_", "i", false),
        PgType::Oid => f("N", true, "oid", "i", false),
        PgType::Array(_) => f("A", false, "array_", "i", false),
        PgType::Int2Vector => f("A", false, "int2vector", "i", false),
        PgType::OidVector => f("A", false, "oidvector", "i", false),
    }
}

#[allow(clippy::too_many_arguments)]
fn type_row(
    oid: u32,
    name: &str,
    len: i16,
    category: &str,
    preferred: bool,
    elem: u32,
    array_oid: u32,
    io: &str,
    align: &str,
    collatable: bool,
) -> Row {
    vec![
        n(oid),
        s(name),
        n(PG_CATALOG_OID),
        n(BUILTIN_OWNER_OID),
        n(len),
        b(len > 0 && len <= 8),
        s("b"),
        s(category),
        b(preferred),
        b(true),
        s(","),
        n(0),
        s(if elem != 0 {
            "array_subscript_handler"
        } else {
            "-"
        }),
        n(elem),
        n(array_oid),
        s(&format!("{io}in")),
        s(&format!("{io}out")),
        s(&format!("{io}recv")),
        s(&format!("{io}send")),
        s("-"),
        s("-"),
        s("-"),
        s(align),
        s(if len > 0 { "p" } else { "x" }),
        b(false),
        n(0),
        n(-1),
        n(0),
        n(if collatable { 100 } else { 0 }),
        None,
        None,
        None,
    ]
}
