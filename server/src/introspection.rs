//! Reading collections and built-in relations for queries.

use std::sync::Arc;

use arrow::array::RecordBatch;
use datafusion::common::{DataFusionError, Result as DfResult};
use freshet_catalog::{CatalogState, ItemKind};
use freshet_compute::output::{CheckedSnapshotError, checked_snapshot};
use freshet_planner::CollectionReader;
use freshet_planner::builtins::{
    BTREE_AM_OID, BUILTIN_OWNER_OID, BUILTINS, Builtin, HEAP_AM_OID, SYSTEM_SCHEMAS,
};
use freshet_repr::{GlobalId, PgType, Timestamp};
use freshet_storage::{CollectionKind, Storage};

use crate::values::parse_text_array;

/// Serves one query's reads: storage snapshots, and built-in relations
/// computed from the catalog version and storage state the query sees.
#[derive(Debug)]
pub struct QueryReader {
    /// Storage.
    pub storage: Arc<Storage>,
    /// Compute (for `freshet_internal.dataflows`).
    pub compute: Arc<freshet_compute::ComputeController>,
    /// The catalog version planned against.
    pub catalog: Arc<CatalogState>,
    /// The session's database.
    pub database: String,
}

fn external(e: impl std::error::Error + Send + Sync + 'static) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}

/// OIDs of the built-in schemas.
fn system_schema_oid(name: &str) -> u32 {
    match name {
        "pg_catalog" => 11,
        "information_schema" => 12,
        _ => 13,
    }
}

fn relkind(kind: ItemKind) -> &'static str {
    match kind {
        ItemKind::Table => "r",
        ItemKind::View => "v",
        ItemKind::MaterializedView => "m",
        ItemKind::Index => "i",
        ItemKind::Source => "r",
        ItemKind::Sink => "r",
    }
}

/// `pg_class.relam`: the access method Postgres would show (views have
/// none).
fn relam(kind: ItemKind) -> u32 {
    match kind {
        ItemKind::View => 0,
        ItemKind::Index => BTREE_AM_OID,
        _ => HEAP_AM_OID,
    }
}

type Row = Vec<Option<String>>;

impl QueryReader {
    fn name_of(&self, id: GlobalId) -> Option<String> {
        self.catalog
            .full_name(id)
            .map(|(d, s, i)| format!("{d}.{s}.{i}"))
    }

    fn rows(&self, builtin: Builtin) -> DfResult<Vec<Row>> {
        let s = |v: &str| Some(v.to_string());
        let db = self.catalog.database_by_name(&self.database);
        let schemas: Vec<_> = self
            .catalog
            .schemas()
            .filter(|sc| Some(sc.database_id) == db.map(|d| d.id))
            .collect();
        let in_db = |schema_id: GlobalId| schemas.iter().find(|sc| sc.id == schema_id);
        Ok(match builtin {
            Builtin::ReadHolds => self
                .storage
                .read_holds()
                .into_iter()
                .map(|h| {
                    vec![
                        Some(h.id.to_string()),
                        self.name_of(h.id),
                        Some(h.time.to_string()),
                        Some(h.count.to_string()),
                    ]
                })
                .collect(),
            Builtin::Dataflows => self
                .compute
                .dataflows()
                .into_iter()
                .map(|d| {
                    vec![
                        Some(d.id.to_string()),
                        self.name_of(d.id),
                        Some(d.as_of.to_string()),
                        Some(d.upper().to_string()),
                        s(if d.hydrated() { "t" } else { "f" }),
                        Some(d.error_count().to_string()),
                        Some(self.compute.workers().to_string()),
                        Some(d.arranged_records().to_string()),
                        Some(d.arranged_bytes().to_string()),
                        freshet_planner::statements::written_plan::format_of(&self.catalog, d.id),
                        d.failure().map(|e| format!("{}: {}", e.code, e.message)),
                    ]
                })
                .collect(),
            Builtin::Collections => self
                .storage
                .collections()
                .into_iter()
                .map(|c| {
                    vec![
                        Some(c.id.to_string()),
                        self.name_of(c.id),
                        s(match c.kind {
                            CollectionKind::Table => "table",
                            CollectionKind::Materialized => "materialized",
                        }),
                        c.since.as_option().map(|t| t.to_string()),
                        c.upper.as_option().map(|t| t.to_string()),
                        Some(c.parts.to_string()),
                        c.permission.map(|t| t.to_string()),
                    ]
                })
                .collect(),
            Builtin::MaterializedViewRefreshes => self
                .catalog
                .items()
                .filter(|i| i.kind == ItemKind::MaterializedView)
                .map(|i| {
                    let upper = self
                        .storage
                        .frontiers(i.id)
                        .ok()
                        .map(|(_, u)| u.as_option().copied());
                    let (last, next) = match (&i.options.refresh, upper) {
                        (Some(schedule), Some(upper)) => (
                            schedule
                                .round_down(upper.map_or(Timestamp::MAX, |u| u.saturating_sub(1))),
                            upper.and_then(|u| schedule.round_up(u)),
                        ),
                        _ => (None, None),
                    };
                    // Refreshes before the view existed never happened.
                    let created = match &i.details {
                        freshet_catalog::ItemDetails::MaterializedView { as_of, .. } => {
                            as_of.unwrap_or(0)
                        }
                        _ => 0,
                    };
                    let last = last.filter(|t| *t >= created);
                    vec![
                        Some(i.id.to_string()),
                        self.name_of(i.id),
                        s(match &i.options.refresh {
                            Some(_) => "scheduled",
                            None => "on commit",
                        }),
                        last.map(|t| t.to_string()),
                        next.map(|t| t.to_string()),
                    ]
                })
                .collect(),
            Builtin::PgNamespace => schemas
                .iter()
                .map(|sc| vec![Some(sc.oid.to_string()), s(&sc.name), s("10")])
                .chain(
                    SYSTEM_SCHEMAS
                        .iter()
                        .map(|n| vec![Some(system_schema_oid(n).to_string()), s(n), s("10")]),
                )
                .collect(),
            Builtin::PgDatabase => self
                .catalog
                .databases()
                .map(|d| {
                    vec![
                        Some(d.oid.to_string()),
                        s(&d.name),
                        Some(BUILTIN_OWNER_OID.to_string()),
                        Some(freshet_planner::query::functions::UTF8_ENCODING.to_string()),
                        s("C"),
                        s("C"),
                        None,
                        s("c"),
                        None,
                    ]
                })
                .collect(),
            Builtin::PgClass => {
                let mut rows: Vec<Row> = self
                    .catalog
                    .items()
                    .filter_map(|i| {
                        let sc = in_db(i.schema_id)?;
                        Some(vec![
                            Some(i.oid.to_string()),
                            s(&i.name),
                            Some(sc.oid.to_string()),
                            s(relkind(i.kind)),
                            Some(i.desc.as_ref().map_or(0, |d| d.arity()).to_string()),
                            Some(BUILTIN_OWNER_OID.to_string()),
                            Some(relam(i.kind).to_string()),
                        ])
                    })
                    .collect();
                for rel in BUILTINS {
                    rows.push(vec![
                        Some(rel.oid().to_string()),
                        s(rel.name),
                        Some(system_schema_oid(rel.schema).to_string()),
                        s("v"),
                        Some(rel.columns.len().to_string()),
                        Some(BUILTIN_OWNER_OID.to_string()),
                        Some("0".into()),
                    ]);
                }
                rows
            }
            Builtin::PgAttribute => self
                .catalog
                .items()
                .filter(|i| in_db(i.schema_id).is_some())
                .flat_map(|i| {
                    let oid = i.oid;
                    i.desc
                        .iter()
                        .flat_map(|d| d.columns.iter().enumerate())
                        .map(move |(n, c)| {
                            vec![
                                Some(oid.to_string()),
                                Some(c.name.clone()),
                                Some(c.ty.oid().to_string()),
                                Some((n + 1).to_string()),
                                Some(c.ty.typmod().to_string()),
                                Some((!c.nullable).to_string()),
                                Some("false".into()),
                            ]
                        })
                        .collect::<Vec<_>>()
                })
                .collect(),
            Builtin::PgType => PgType::scalar_types()
                .iter()
                .map(|t| {
                    vec![
                        Some(t.oid().to_string()),
                        s(t.typname()),
                        Some(t.typlen().to_string()),
                    ]
                })
                .collect(),
            Builtin::PgTables | Builtin::PgViews | Builtin::Tables => self
                .catalog
                .items()
                .filter_map(|i| {
                    let sc = in_db(i.schema_id)?;
                    match builtin {
                        Builtin::PgTables if i.kind == ItemKind::Table => {
                            Some(vec![s(&sc.name), s(&i.name)])
                        }
                        Builtin::PgViews if i.kind == ItemKind::View => {
                            Some(vec![s(&sc.name), s(&i.name), s(&i.create_sql)])
                        }
                        Builtin::Tables
                            if matches!(
                                i.kind,
                                ItemKind::Table | ItemKind::View | ItemKind::MaterializedView
                            ) =>
                        {
                            Some(vec![
                                s(&self.database),
                                s(&sc.name),
                                s(&i.name),
                                s(if i.kind == ItemKind::Table {
                                    "BASE TABLE"
                                } else {
                                    "VIEW"
                                }),
                            ])
                        }
                        _ => None,
                    }
                })
                .collect(),
            Builtin::PgAm => vec![
                vec![Some(HEAP_AM_OID.to_string()), s("heap"), s("t")],
                vec![Some(BTREE_AM_OID.to_string()), s("btree"), s("i")],
            ],
            Builtin::PgIndex => self
                .catalog
                .items()
                .filter(|i| in_db(i.schema_id).is_some())
                .filter_map(|i| match &i.details {
                    freshet_catalog::ItemDetails::Index { on, keys, .. } => Some(vec![
                        Some(i.oid.to_string()),
                        self.catalog.get_item(*on).ok().map(|on| on.oid.to_string()),
                        Some(keys.len().to_string()),
                        s("false"),
                        s("false"),
                    ]),
                    _ => None,
                })
                .collect(),
            Builtin::Schemata => schemas
                .iter()
                .map(|sc| vec![s(&self.database), s(&sc.name)])
                .chain(SYSTEM_SCHEMAS.iter().map(|n| vec![s(&self.database), s(n)]))
                .collect(),
            Builtin::Columns => self
                .catalog
                .items()
                // Index rows are not columns of a relation.
                .filter(|i| i.kind != ItemKind::Index)
                .filter_map(|i| Some((i, in_db(i.schema_id)?)))
                .flat_map(|(i, sc)| {
                    let defaults = match &i.details {
                        freshet_catalog::ItemDetails::Table { defaults, .. } => defaults.clone(),
                        _ => vec![],
                    };
                    i.desc
                        .iter()
                        .flat_map(|d| d.columns.iter().enumerate())
                        .map(|(n, c)| {
                            vec![
                                Some(self.database.clone()),
                                Some(sc.name.clone()),
                                Some(i.name.clone()),
                                Some(c.name.clone()),
                                Some((n + 1).to_string()),
                                defaults.get(n).cloned().flatten(),
                                Some(if c.nullable { "YES" } else { "NO" }.into()),
                                Some(c.ty.sql_name()),
                            ]
                        })
                        .collect::<Vec<_>>()
                })
                .collect(),
        })
    }
}

impl CollectionReader for QueryReader {
    fn index_rows(&self, index: GlobalId, as_of: Timestamp) -> DfResult<Vec<RecordBatch>> {
        let pending = self
            .compute
            .peek(index, as_of, None)
            .map_err(|e| DataFusionError::Execution(e.to_string()))?;
        // Scans are synchronous: wait for the workers without starving
        // the runtime's other tasks where the runtime allows it.
        let answer = match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
            Ok(tokio::runtime::RuntimeFlavor::MultiThread) => {
                tokio::task::block_in_place(|| futures::executor::block_on(pending.wait()))
            }
            _ => futures::executor::block_on(pending.wait()),
        }
        .map_err(|e| DataFusionError::Execution(e.to_string()))?;
        Ok(vec![answer?])
    }

    fn snapshot(&self, id: GlobalId, as_of: Timestamp) -> DfResult<Vec<RecordBatch>> {
        let batches = self.storage.snapshot(id, as_of).map_err(external)?;
        // A view's errors at `as_of` fail the read with their SQLSTATE.
        checked_snapshot(batches).map_err(|e| match e {
            CheckedSnapshotError::Query(e) => e.into(),
            CheckedSnapshotError::Arrow(e) => DataFusionError::ArrowError(Box::new(e), None),
        })
    }

    fn builtin_rows(&self, builtin: Builtin) -> DfResult<Vec<RecordBatch>> {
        let rows = self.rows(builtin)?;
        let desc = builtin.relation().desc();
        let columns = desc
            .columns
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let values: Vec<Option<&str>> = rows.iter().map(|r| r[i].as_deref()).collect();
                parse_text_array(&values, &c.ty)
                    .map_err(|e| DataFusionError::Internal(e.to_string()))
            })
            .collect::<DfResult<Vec<_>>>()?;
        Ok(vec![
            RecordBatch::try_new_with_options(
                desc.arrow_schema(),
                columns,
                &arrow::array::RecordBatchOptions::new().with_row_count(Some(rows.len())),
            )
            .map_err(|e| DataFusionError::ArrowError(Box::new(e), None))?,
        ])
    }
}
