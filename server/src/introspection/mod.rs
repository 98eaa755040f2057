//! Reading collections and built-in relations for queries.

mod dependencies;
mod pg_catalog;
mod sequences;
mod sources;

use std::sync::Arc;

use arrow::array::RecordBatch;
use datafusion::common::{DataFusionError, Result as DfResult};
use freshet_catalog::{CatalogState, ItemKind};
use freshet_compute::output::{CheckedSnapshotError, checked_snapshot};
use freshet_planner::query::part_scan::{CollectionScan, WholeScan};

use crate::collection_scan::StorageScan;
use freshet_planner::CollectionReader;
use freshet_planner::builtins::{
    BTREE_AM_OID, BUILTIN_OWNER_OID, Builtin, HEAP_AM_OID, SYSTEM_SCHEMAS, system_schema_oid,
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
    /// Source ingestions (for `freshet_internal.source_statuses`).
    pub sources: Arc<freshet_sources::Sources>,
    /// Sink exports (for `freshet_internal.sink_statuses`).
    pub sinks: Arc<freshet_sinks::Sinks>,
    /// The catalog version planned against.
    pub catalog: Arc<CatalogState>,
    /// The session's database.
    pub database: String,
    /// The writes the reading transaction has buffered, by table (data
    /// columns plus `diff`): its reads of those tables see them.
    pub pending: std::collections::BTreeMap<GlobalId, Vec<RecordBatch>>,
    /// Tables the reading transaction created: no collection holds them
    /// until COMMIT, so they read as empty (plus `pending`).
    pub created: std::collections::BTreeSet<GlobalId>,
    /// The reading session's open cursors: name, statement, creation time
    /// (microseconds since the epoch).
    pub cursors: Vec<(String, String, i64)>,
    /// The reading session's settings and what `RESET` returns them to
    /// (`pg_settings`, made into rows only when read).
    pub vars: (crate::vars::Vars, crate::vars::Vars),
}

fn external(e: impl std::error::Error + Send + Sync + 'static) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}

/// A row of text values (Postgres's text forms; arrays as `{a,b}`).
type Row = Vec<Option<String>>;

impl QueryReader {
    fn name_of(&self, id: GlobalId) -> Option<String> {
        self.catalog
            .full_name(id)
            .map(|(d, s, i)| format!("{d}.{s}.{i}"))
    }

    fn rows(&self, builtin: Builtin) -> DfResult<Vec<Row>> {
        let s = |v: &str| Some(v.to_string());
        let schemas = self.schemas_in_db();
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
                        Some(c.inline_parts.to_string()),
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
                .map(|sc| vec![Some(sc.oid.to_string()), s(&sc.name), s("10"), None])
                .chain(
                    SYSTEM_SCHEMAS
                        .iter()
                        .map(|n| vec![Some(system_schema_oid(n).to_string()), s(n), s("10"), None]),
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
                        s("c"),
                        s("f"),
                        s("t"),
                        s("-1"),
                        s("1663"),
                        s("C"),
                        s("C"),
                        None,
                        None,
                        None,
                    ]
                })
                .collect(),
            Builtin::PgClass => self.pg_class(),
            Builtin::PgAttribute => self.pg_attribute(),
            Builtin::PgType => self.pg_type(),
            Builtin::PgAm => vec![
                vec![
                    Some(HEAP_AM_OID.to_string()),
                    s("heap"),
                    s("heap_tableam_handler"),
                    s("t"),
                ],
                vec![
                    Some(BTREE_AM_OID.to_string()),
                    s("btree"),
                    s("bthandler"),
                    s("i"),
                ],
            ],
            Builtin::PgIndex => self.pg_index(),
            Builtin::PgCursors => self
                .cursors
                .iter()
                .map(|(name, statement, created)| {
                    vec![
                        s(name),
                        s(statement),
                        s("f"),
                        s("f"),
                        s("f"),
                        Some(
                            chrono::DateTime::from_timestamp_micros(*created)
                                .unwrap_or_default()
                                .format("%Y-%m-%d %H:%M:%S%.6f+00")
                                .to_string(),
                        ),
                    ]
                })
                .collect(),
            Builtin::PgSettings => self
                .vars
                .0
                .pg_settings(&self.vars.1)
                .iter()
                .map(|v| {
                    let source = if v.setting == v.boot_val {
                        "default"
                    } else {
                        "session"
                    };
                    vec![
                        s(v.name),
                        s(&v.setting),
                        v.unit.map(str::to_string),
                        s(if v.context == "internal" {
                            "Preset Options"
                        } else {
                            "Client Connection Defaults"
                        }),
                        s(""),
                        None,
                        s(v.context),
                        s(v.vartype),
                        s(source),
                        None,
                        None,
                        None,
                        s(&v.boot_val),
                        s(&v.reset_val),
                        None,
                        None,
                        s("f"),
                    ]
                })
                .collect(),
            Builtin::PgRewrite => self.pg_rewrite(),
            Builtin::PgDepend => self.pg_depend(),
            Builtin::PgSequence => self.pg_sequence(),
            Builtin::SourceStatuses => self.source_statuses(),
            Builtin::SinkStatuses => self.sink_statuses(),
            Builtin::PgAttrdef => self.pg_attrdef(),
            Builtin::PgConstraint => self.pg_constraint(),
            Builtin::KeyColumnUsage => self.key_column_usage(),
        })
    }
}

impl QueryReader {
    /// Whether this transaction wrote to (or created) a collection behind
    /// `index`: its own writes are in no index.
    fn wrote_behind(&self, index: GlobalId) -> bool {
        self.catalog
            .collections_behind(index)
            .iter()
            .any(|t| self.pending.contains_key(t) || self.created.contains(t))
    }
}

impl CollectionReader for QueryReader {
    fn index_rows(&self, index: GlobalId, as_of: Timestamp) -> DfResult<Vec<RecordBatch>> {
        if let Some(t) = self
            .catalog
            .collections_behind(index)
            .into_iter()
            .find(|t| self.pending.contains_key(t))
        {
            return Err(freshet_planner::error::sqlstate_error(
                freshet_repr::sqlstate::FEATURE_NOT_SUPPORTED,
                format!(
                    "{} cannot be read in this transaction after it wrote to {}: an index reflects only committed writes; COMMIT first",
                    self.catalog.describe(index),
                    self.catalog.describe(t)
                ),
            ));
        }
        let pending = self
            .compute
            .peek(index, as_of, None)
            .map_err(|e| DataFusionError::Execution(e.to_string()))?;
        // Scans are synchronous: wait for the workers.
        let answer = crate::query_exec::wait_here(pending.wait())
            .map_err(|e| DataFusionError::Execution(e.to_string()))?;
        Ok(vec![answer?])
    }

    fn index_seek(
        &self,
        index: GlobalId,
        as_of: Timestamp,
        keys: &[Vec<datafusion::common::ScalarValue>],
    ) -> DfResult<Option<Vec<RecordBatch>>> {
        if self.wrote_behind(index) {
            return Ok(None);
        }
        let mut pending = Vec::with_capacity(keys.len());
        for key in keys {
            match self.compute.peek(index, as_of, Some(key.clone())) {
                Ok(peek) => pending.push(peek.wait()),
                // Compacted past `as_of` (a serializable or transaction
                // read at an older time): storage still holds it.
                Err(freshet_compute::ComputeError::NotReadable { .. }) => return Ok(None),
                Err(e) => return Err(DataFusionError::Execution(e.to_string())),
            }
        }
        // Every key's workers are asked before waiting for any answer.
        let answers = crate::query_exec::wait_here(futures::future::join_all(pending));
        answers
            .into_iter()
            .map(|answer| {
                let rows = answer.map_err(|e| DataFusionError::Execution(e.to_string()))?;
                Ok(rows?)
            })
            .collect::<DfResult<Vec<_>>>()
            .map(Some)
    }

    fn index_range(
        &self,
        index: GlobalId,
        as_of: Timestamp,
        range: &freshet_planner::query::index_scan::KeyRange,
    ) -> DfResult<Option<Vec<RecordBatch>>> {
        if self.wrote_behind(index) {
            return Ok(None);
        }
        let pending =
            match self
                .compute
                .peek_range(index, as_of, range.lower.clone(), range.upper.clone())
            {
                Ok(peek) => peek,
                // Compacted past `as_of`: storage still holds it.
                Err(freshet_compute::ComputeError::NotReadable { .. }) => return Ok(None),
                Err(e) => return Err(DataFusionError::Execution(e.to_string())),
            };
        let answer = crate::query_exec::wait_here(pending.wait())
            .map_err(|e| DataFusionError::Execution(e.to_string()))?;
        Ok(Some(vec![answer?]))
    }

    fn snapshot(&self, id: GlobalId, as_of: Timestamp) -> DfResult<Vec<RecordBatch>> {
        if self.created.contains(&id) {
            let schema = self
                .catalog
                .item(id)
                .and_then(|i| i.desc.as_ref())
                .map(|d| d.arrow_schema())
                .ok_or_else(|| DataFusionError::Internal(format!("{id} has no columns")))?;
            let pending = self.pending.get(&id).map_or(&[][..], |p| p.as_slice());
            return crate::overlay::apply(&schema, Vec::new(), pending)
                .map_err(|e| DataFusionError::ArrowError(Box::new(e), None));
        }
        let batches = self.storage.snapshot(id, as_of).map_err(external)?;
        // A view's errors at `as_of` fail the read with their SQLSTATE.
        let batches = checked_snapshot(batches).map_err(|e| match e {
            CheckedSnapshotError::Query(e) => e.into(),
            CheckedSnapshotError::Arrow(e) => DataFusionError::ArrowError(Box::new(e), None),
        })?;
        match self.pending.get(&id) {
            Some(writes) => {
                let schema = self.storage.schema(id).map_err(external)?;
                crate::overlay::apply(&schema, batches, writes)
                    .map_err(|e| DataFusionError::ArrowError(Box::new(e), None))
            }
            None => Ok(batches),
        }
    }

    fn scan(&self, id: GlobalId, as_of: Timestamp) -> DfResult<Box<dyn CollectionScan>> {
        // The transaction's own writes are applied to the whole snapshot.
        if self.created.contains(&id) || self.pending.contains_key(&id) {
            return Ok(Box::new(WholeScan::new(self.snapshot(id, as_of)?)));
        }
        let scan = self.storage.scan(id, as_of).map_err(external)?;
        let errors = freshet_compute::output::error_column(scan.schema());
        match StorageScan::new(scan, errors) {
            Some(scan) => Ok(Box::new(scan)),
            None => Ok(Box::new(WholeScan::new(self.snapshot(id, as_of)?))),
        }
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
                match &c.ty {
                    PgType::Array(elem) => simple_array_column(&values, elem),
                    PgType::Int2Vector => simple_array_column(&values, &PgType::Int2),
                    PgType::OidVector => simple_array_column(&values, &PgType::Oid),
                    ty => parse_text_array(&values, ty),
                }
                .map_err(|e| DataFusionError::Internal(format!("{}: {e}", c.name)))
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

/// A list column from simple array text forms (`{a,b}`, no quoting):
/// what the catalog's array columns hold.
fn simple_array_column(
    values: &[Option<&str>],
    elem: &PgType,
) -> crate::error::Result<arrow::array::ArrayRef> {
    let mut offsets = vec![0i32];
    let mut items: Vec<Option<&str>> = Vec::new();
    let mut valid = Vec::with_capacity(values.len());
    for v in values {
        if let Some(text) = v {
            let inner = text.trim().trim_start_matches('{').trim_end_matches('}');
            items.extend(inner.split(',').filter(|p| !p.is_empty()).map(Some));
        }
        valid.push(v.is_some());
        offsets.push(items.len() as i32);
    }
    let items = parse_text_array(&items, elem)?;
    let field = Arc::new(arrow::datatypes::Field::new_list_field(
        elem.arrow_type(),
        true,
    ));
    Ok(Arc::new(arrow::array::ListArray::new(
        field,
        arrow::buffer::OffsetBuffer::new(offsets.into()),
        items,
        Some(arrow::buffer::NullBuffer::from(valid)),
    )))
}
