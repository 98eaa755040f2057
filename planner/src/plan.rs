//! What a statement means, ready for the sequencer to execute: [`Plan`]
//! and every payload type it carries, so the statement planners depend on
//! this module and never the other way round.

use std::collections::BTreeSet;
use std::sync::Arc;

use arrow::array::RecordBatch;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_expr::PhysicalExpr;
use freshet_catalog::ItemDef;
use freshet_compute_types::{Export, RelPlan};
use freshet_repr::{GlobalId, RelationDesc, Timestamp};

use crate::query::binding::QueryBinding;

/// A planned query: a DataFusion logical plan (analyzed, not yet optimized)
/// plus what the sequencer needs to run it under read holds.
#[derive(Debug, Clone)]
pub struct QueryPlan {
    /// The analyzed DataFusion plan.
    pub logical: LogicalPlan,
    /// Set with the read time before execution.
    pub binding: Arc<QueryBinding>,
    /// Catalog items named directly (before view expansion).
    pub references: BTreeSet<GlobalId>,
    /// Storage collections read, with views expanded through their
    /// definitions: the logical inputs that must be held.
    pub inputs: BTreeSet<GlobalId>,
    /// Output columns with Postgres names and types.
    pub desc: RelationDesc,
    /// Whether the query calls functions whose value depends on when it
    /// runs (`now()`, `random()`).
    pub volatile: bool,
}

impl QueryPlan {
    /// Whether the answer depends on nothing but the statement's text and
    /// the session's state when planned (`SELECT 1`, a connection pool's
    /// health check): no collection or catalog table is read, no
    /// parameter or subquery appears, and every function is immutable.
    /// Such an answer may be kept and given again while the catalog and
    /// the session's settings are those it was planned with.
    pub fn is_constant(&self) -> bool {
        use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
        use datafusion::logical_expr::{Expr, Volatility};
        if !self.inputs.is_empty() || self.volatile {
            return false;
        }
        let mut constant = true;
        let walked = self.logical.apply_with_subqueries(|node| {
            if matches!(
                node,
                LogicalPlan::TableScan(_)
                    | LogicalPlan::Subquery(_)
                    | LogicalPlan::Extension(_)
                    | LogicalPlan::RecursiveQuery(_)
            ) {
                constant = false;
                return Ok(TreeNodeRecursion::Stop);
            }
            for e in node.expressions() {
                let varies = e.exists(|e| {
                    Ok(match e {
                        Expr::Placeholder(_)
                        | Expr::ScalarSubquery(_)
                        | Expr::Exists(_)
                        | Expr::InSubquery(_)
                        | Expr::SetComparison(_)
                        | Expr::OuterReferenceColumn(..) => true,
                        Expr::ScalarFunction(f) => {
                            f.func.signature().volatility != Volatility::Immutable
                        }
                        _ => false,
                    })
                })?;
                if varies {
                    constant = false;
                    return Ok(TreeNodeRecursion::Stop);
                }
            }
            Ok(TreeNodeRecursion::Continue)
        });
        walked.is_ok() && constant
    }
}

/// The dataflow that maintains a materialized view or an index, as its
/// CREATE planned it: this is what the catalog commits as the item's
/// written plan and what compute installs.
#[derive(Debug, Clone)]
pub struct ItemDataflow {
    /// What to compute (reading indexes' arrangements where it can).
    pub plan: RelPlan,
    /// Where the output goes.
    pub export: Export,
    /// The same relation read from storage, when `plan` imports indexes
    /// (installed instead when an index cannot serve the start time).
    pub from_storage: Option<RelPlan>,
    /// Notices committed with the plan (e.g. that boot planned it again).
    pub notices: Vec<String>,
}

/// A planned `CREATE [OR REPLACE] MATERIALIZED VIEW`.
#[derive(Debug, Clone)]
pub struct CreateMaterializedViewPlan {
    /// The definition.
    pub def: ItemDef,
    /// Skip (with a notice) if the name exists.
    pub if_not_exists: bool,
    /// `OR REPLACE` of this existing materialized view (dropped and
    /// created anew in one catalog transaction).
    pub replace: Option<GlobalId>,
    /// The storage collections its dataflow reads: held at the chosen
    /// `as_of` before the catalog transaction commits.
    pub inputs: BTreeSet<GlobalId>,
    /// `WITH (REFRESH ...)`: its times are evaluated at creation.
    pub refresh: Option<RefreshPlan>,
    /// Its dataflow, planned once, here.
    pub dataflow: ItemDataflow,
}

/// A planned `CREATE [DEFAULT] INDEX`.
#[derive(Debug, Clone)]
pub struct CreateIndexPlan {
    /// The definition.
    pub def: ItemDef,
    /// Skip (with a notice) if the name exists.
    pub if_not_exists: bool,
    /// Its dataflow, planned once, here.
    pub dataflow: ItemDataflow,
}

/// `EXPLAIN` of a dataflow plan. How each operator is rendered (which
/// reduction strategy) is compute's to say, so the sequencer asks compute
/// and then [`crate::statements::explain::explain_dataflow_rows`] names the ids.
#[derive(Debug, Clone)]
pub struct ExplainDataflowPlan {
    /// The plan.
    pub plan: RelPlan,
    /// A first line, with the plan indented under it.
    pub head: Option<String>,
}

/// How `EXPLAIN` was asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExplainKind {
    /// The DataFusion plan.
    Plan,
    /// `EXPLAIN VERBOSE`: the DataFusion plan, then the physical plan a
    /// read would run now (its scans bound to the read's time, so each
    /// names the parts it reads of how many).
    Physical,
    /// The chosen timestamp and each input's frontiers.
    Timestamp,
}

/// Which write a [`WritePlan`] performs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteKind {
    /// The source yields rows to insert.
    Insert,
    /// The source yields old rows followed by new rows (2 × arity columns).
    Update,
    /// The source yields rows to retract.
    Delete,
}

/// INSERT, UPDATE or DELETE.
#[derive(Debug, Clone)]
pub struct WritePlan {
    /// The table written.
    pub table: GlobalId,
    /// The table's columns (constraints are checked against them).
    pub table_desc: RelationDesc,
    /// Insert, update or delete.
    pub kind: WriteKind,
    /// The query producing the rows to write (shared by the executions of
    /// a prepared keyed write, which do not run it).
    pub source: Arc<QueryPlan>,
    /// Whether the statement reads before it writes and so must hold the
    /// table's write lock from its read to its commit.
    pub read_then_write: bool,
    /// `RETURNING` over the rows written, if any.
    pub returning: Option<QueryPlan>,
    /// For an `UPDATE` or `DELETE` that fixes its table's primary key:
    /// how to read that one row instead of the table.
    pub keyed: Option<KeyedWrite>,
}

/// How an `UPDATE` or `DELETE` whose `WHERE` fixes every column of its
/// table's primary key finds its rows: the row with that key, looked up
/// in the table's rows by key, with the source query's steps applied to
/// it (see [`crate::statements::keyed_write`]).
#[derive(Debug, Clone)]
pub struct KeyedWrite {
    /// The key's values, in key order, as the key columns' types; `None`
    /// until the statement's `$n` are bound, or when a value is NULL or
    /// not exactly a value of its column's type (the general path runs).
    pub key: Option<Vec<ScalarValue>>,
    /// The primary key's column positions in the table.
    pub key_columns: Vec<usize>,
    /// The source query's steps (its whole `WHERE`, then the new values)
    /// applied to the row found; `finish.key` holds the key's constants.
    pub finish: PeekFinish,
}

/// COPY data formats.
#[derive(Debug, Clone, PartialEq, Eq, Copy)]
pub enum CopyFormat {
    /// Tab-separated text with backslash escapes.
    Text,
    /// Comma-separated values.
    Csv,
    /// PostgreSQL's binary COPY format: a signature, then each row as a
    /// field count and each field in its type's binary send format.
    Binary,
}

/// Options of a COPY.
#[derive(Debug, Clone)]
pub struct CopyOptions {
    /// Text, CSV or binary.
    pub format: CopyFormat,
    /// Field separator.
    pub delimiter: u8,
    /// How NULL is spelled.
    pub null: String,
    /// Whether the first line is a header (CSV).
    pub header: bool,
    /// CSV quote character.
    pub quote: u8,
    /// CSV escape character.
    pub escape: u8,
}

/// `COPY t [(cols)] FROM STDIN`.
#[derive(Debug, Clone)]
pub struct CopyFromPlan {
    /// The table.
    pub table: GlobalId,
    /// The table's columns.
    pub table_desc: RelationDesc,
    /// For each column in the data, the table column it fills.
    pub columns: Vec<usize>,
    /// Default values for table columns the data does not fill.
    pub defaults: QueryPlan,
    /// Format options.
    pub options: CopyOptions,
}

/// The value of a `SET`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetValue {
    /// `DEFAULT` / `RESET`.
    Default,
    /// One or more values, as text.
    Values(Vec<String>),
}

/// A planned statement.
#[derive(Debug, Clone)]
pub enum Plan {
    /// Nothing to do.
    Empty,
    /// `CREATE DATABASE`.
    CreateDatabase {
        /// Name.
        name: String,
        /// Skip if it exists.
        if_not_exists: bool,
    },
    /// `CREATE SCHEMA`.
    CreateSchema {
        /// Database.
        database_id: GlobalId,
        /// Name.
        name: String,
        /// Skip if it exists.
        if_not_exists: bool,
    },
    /// `CREATE TABLE`, `CREATE [OR REPLACE] VIEW`.
    CreateItem {
        /// The definition.
        def: ItemDef,
        /// Skip (with a notice) if the name exists.
        if_not_exists: bool,
        /// `OR REPLACE` of this existing item.
        replace: Option<GlobalId>,
    },
    /// `CREATE [OR REPLACE] MATERIALIZED VIEW`.
    CreateMaterializedView(Box<CreateMaterializedViewPlan>),
    /// `CREATE [DEFAULT] INDEX`.
    CreateIndex(Box<CreateIndexPlan>),
    /// `CREATE SOURCE`: checked; the server learns what it writes and
    /// makes its catalog items.
    CreateSource(Box<crate::statements::source::CreateSourcePlan>),
    /// `CREATE SINK`.
    CreateSink(Box<crate::statements::sink::CreateSinkPlan>),
    /// `CREATE CONNECTION`: checked; the server may connect once before
    /// committing it.
    CreateConnection(Box<crate::statements::connection::CreateConnectionPlan>),
    /// Replace an item's details (`ALTER SECRET ... AS`).
    UpdateDetails {
        /// The item.
        id: GlobalId,
        /// Its details from now on.
        details: freshet_catalog::ItemDetails,
    },
    /// `ALTER ... SET/RESET (RETAIN HISTORY ...)`.
    SetOptions {
        /// The items (a source with its subsources and progress
        /// relation, or one item).
        ids: Vec<GlobalId>,
        /// Its options from now on.
        options: freshet_catalog::ItemOptions,
    },
    /// `DROP ...`: objects to remove, dependents included.
    Drop {
        /// Everything to remove.
        ids: Vec<GlobalId>,
        /// Notices for names that did not exist (`IF EXISTS`).
        notices: Vec<String>,
    },
    /// `VACUUM` / `ANALYZE`: names checked, nothing to do.
    Maintenance {
        /// Whether it may run in a transaction block (`ANALYZE` may,
        /// `VACUUM` may not).
        in_block_allowed: bool,
        /// Relations skipped, for warnings.
        warnings: Vec<String>,
    },
    /// `ALTER TABLE ... ADD PRIMARY KEY / UNIQUE` on an existing table.
    AddKey(Box<crate::statements::alter_table::AddKeyPlan>),
    /// `ALTER ... RENAME TO`.
    Rename {
        /// The item.
        id: GlobalId,
        /// New name.
        new_name: String,
    },
    /// A query.
    Select(QueryPlan),
    /// `<query> AS OF [AT LEAST] <time>`.
    SelectAt {
        /// The query.
        query: Box<QueryPlan>,
        /// Any readable time at or after `time` will do.
        at_least: bool,
        /// The time.
        time: Box<TimeExpr>,
    },
    /// A query answered from an index.
    Peek(PeekPlan),
    /// `EXPLAIN` of a query answered from an index.
    ExplainPeek(PeekPlan),
    /// `EXPLAIN`.
    Explain(ExplainKind, QueryPlan),
    /// `EXPLAIN` of a dataflow (`EXPLAIN [CREATE] MATERIALIZED VIEW`,
    /// `EXPLAIN INDEX`).
    ExplainDataflow(Box<ExplainDataflowPlan>),
    /// A write.
    Write(Box<WritePlan>),
    /// An `INSERT ... VALUES` of constants and parameters, without a
    /// query plan.
    InsertValues(Arc<crate::statements::insert_values::InsertValuesPlan>),
    /// `EXPLAIN` of an [`Plan::InsertValues`].
    ExplainInsertValues(Arc<crate::statements::insert_values::InsertValuesPlan>),
    /// `EXPLAIN` of an `UPDATE` or `DELETE` by primary key.
    ExplainKeyedWrite(Box<WritePlan>),
    /// `COPY ... FROM STDIN`.
    CopyFrom(Box<CopyFromPlan>),
    /// `COPY (query) TO STDOUT`.
    CopyTo(QueryPlan, CopyOptions),
    /// Rows computed at planning time (`SHOW TABLES`, `SHOW CREATE`, ...).
    Rows {
        /// Column names and types.
        desc: RelationDesc,
        /// The rows.
        batch: RecordBatch,
    },
    /// `SET [LOCAL] name = value`.
    SetVariable {
        /// Lower-case variable name.
        name: String,
        /// New value.
        value: SetValue,
        /// Only for the current transaction.
        local: bool,
    },
    /// `RESET ALL` / `DISCARD ALL`.
    ResetAll,
    /// `SHOW name` / `SHOW ALL`.
    ShowVariable(String),
    /// `BEGIN` / `START TRANSACTION`.
    StartTransaction {
        /// Requested isolation level.
        isolation: Option<String>,
    },
    /// `SET TRANSACTION ...`.
    SetTransaction {
        /// Requested isolation level.
        isolation: Option<String>,
    },
    /// `COMMIT`.
    Commit,
    /// `ROLLBACK`.
    Rollback,
    /// `SAVEPOINT name`.
    Savepoint(String),
    /// `RELEASE [SAVEPOINT] name`.
    ReleaseSavepoint(String),
    /// `ROLLBACK TO [SAVEPOINT] name`.
    RollbackToSavepoint(String),
    /// `PREPARE name [(types)] AS statement`: kept in the session, planned
    /// again at each `EXECUTE` (against the catalog of that moment).
    Prepare {
        /// The statement's name.
        name: String,
        /// The statement.
        stmt: Box<crate::parser::Statement>,
        /// Declared parameter types (`PREPARE p(int, text)`), in order.
        declared: Vec<arrow::datatypes::DataType>,
    },
    /// `EXECUTE name [(args)]`: the arguments as one row of a query.
    Execute {
        /// The prepared statement's name.
        name: String,
        /// `SELECT arg1, arg2, ...`; `None` without arguments.
        args: Option<Box<QueryPlan>>,
    },
    /// `DEALLOCATE [PREPARE] name`; `None`: `DEALLOCATE ALL`.
    Deallocate(Option<String>),
    /// `TRUNCATE t1, t2, ...`: a `DELETE` of every row of each, committed
    /// together.
    Truncate(Vec<WritePlan>),
    /// `CREATE TABLE name AS query`: the table (its columns the query's),
    /// then the query's rows written into it.
    CreateTableAs {
        /// The table.
        def: Box<freshet_catalog::ItemDef>,
        /// Its rows.
        query: Box<QueryPlan>,
        /// `IF NOT EXISTS`.
        if_not_exists: bool,
    },
    /// `SUBSCRIBE` or `COPY (SUBSCRIBE ...) TO STDOUT`: streamed as COPY
    /// data in these options.
    Subscribe(Box<SubscribePlan>, CopyOptions),
    /// `DECLARE name CURSOR FOR ...`: the planned query or subscribe.
    Declare {
        /// The cursor's name.
        name: String,
        /// What it reads: `Select`, `Peek` or `Subscribe`.
        plan: Box<Plan>,
    },
    /// `FETCH`.
    Fetch {
        /// The cursor.
        name: String,
        /// Rows wanted (`None`: all available).
        count: Option<u64>,
        /// How long to wait for a first row (`None`: until one comes).
        timeout: Option<std::time::Duration>,
    },
    /// `CLOSE name` (`None`: `CLOSE ALL`).
    Close(Option<String>),
}

/// A `REFRESH` schedule whose times are still expressions.
#[derive(Debug, Clone, Default)]
pub struct RefreshPlan {
    /// `REFRESH AT CREATION`.
    pub at_creation: bool,
    /// `REFRESH AT <time>`.
    pub at: Vec<TimeExpr>,
    /// `REFRESH EVERY <interval> [ALIGNED TO <time>]`: milliseconds and
    /// the alignment (default: creation).
    pub every: Vec<(Timestamp, Option<TimeExpr>)>,
}

/// A time given as an expression (`mz_timestamp` milliseconds, a
/// `timestamp[tz]`, or text of either), planned as `SELECT <expr>`.
#[derive(Debug, Clone)]
pub struct TimeExpr {
    /// The one-row query.
    pub query: QueryPlan,
    /// The expression as written, for messages.
    pub text: String,
}

/// A read answered from an index.
#[derive(Debug, Clone)]
pub struct PeekPlan {
    /// The index read.
    pub index: GlobalId,
    /// Rows whose key equals these values (in key order); `None`: all rows.
    pub key: Option<Vec<ScalarValue>>,
    /// Without a key: the rows whose first key column lies in this range
    /// (`None`: all rows).
    pub range: Option<crate::query::index_scan::KeyRange>,
    /// Output columns.
    pub desc: RelationDesc,
    /// Which of the index's columns the query returns, in order, when the
    /// peek was decided on the SQL text (`None`: all, or see `finish`).
    pub columns: Option<Vec<usize>>,
    /// Storage collections behind the object: held for the read, as for
    /// any query.
    pub inputs: BTreeSet<GlobalId>,
    /// `EXPLAIN`'s description.
    pub explain: String,
    /// What the query does with the index's rows after the lookup, when
    /// it is more than `SELECT *` (see [`crate::statements::peek`]).
    pub finish: Option<Box<PeekFinish>>,
}

/// The part of a peeked query applied to the rows the index returns.
#[derive(Debug, Clone)]
pub struct PeekFinish {
    /// The query itself: its read binding (for `mz_now()`), and the
    /// general path when the transaction's own writes must show.
    pub query: Arc<QueryPlan>,
    /// Which of the index's columns the scan reads (`None`: all).
    pub columns: Option<Vec<usize>>,
    /// The scanned rows' schema, as the query's expressions name them.
    pub scan_schema: arrow::datatypes::SchemaRef,
    /// What happens to the scanned rows, in order.
    pub steps: Arc<Vec<PeekStep>>,
    /// The query's output schema.
    pub output: arrow::datatypes::SchemaRef,
    /// The constants (literals or `$n`) fixing the index's key columns,
    /// with each column's type, in key order; `None`: a read of all rows.
    pub key: Option<KeyConstants>,
    /// Without `key`: the constants bounding the index's first key
    /// column, whose values make the range a peek reads.
    pub range: Option<RangeConstants>,
    /// The steps made physical for one execution (by
    /// [`PeekFinish::bind`](crate::statements::peek)); `None`: made
    /// physical when applied.
    pub physical: Option<Arc<Vec<crate::statements::peek::PhysicalStep>>>,
    /// How each expression is made physical for an execution, decided
    /// at the plan's first execution and shared by its later ones.
    pub made: Arc<std::sync::OnceLock<MadeExprs>>,
    /// The steps without the equalities a keyed lookup already decides
    /// (see [`KeyedSteps`]), used by an execution whose key is known;
    /// `None` when no conjunct can be dropped, or once in use.
    pub keyed: Option<Arc<KeyedSteps>>,
    /// Indexes joined to the peeked rows by key, innermost join first
    /// (empty: the steps read the peeked rows themselves). With lookups,
    /// `scan_schema` is the last join's output.
    pub lookups: Arc<Vec<PeekLookup>>,
    /// Each lookup's key expressions made physical for one execution (by
    /// [`PeekFinish::bind`](crate::statements::peek)); `None`: made when
    /// the lookup runs.
    pub physical_lookups: Option<Arc<Vec<LookupKeyExprs>>>,
    /// The parameter values this execution was bound to (`None`: not
    /// bound; `query` was planned for this execution alone).
    pub params: Option<Arc<datafusion::common::ParamValues>>,
    /// The query's text, from which a bound peek's general path is
    /// planned with `params`: `query` is shared by every execution of a
    /// kept plan, and a plan's read time can be bound only once.
    pub source: Option<Arc<datafusion::sql::sqlparser::ast::Query>>,
}

/// The bounds a query's filters put on an index's first key column, as
/// constants (literals or `$n`, perhaps cast) whose values are known when
/// a peek runs: one range per conjunct, and the column's type.
#[derive(Debug, Clone)]
pub struct RangeConstants {
    /// Each conjunct's range, its bounds as expressions.
    pub bounds: Vec<crate::query::index_scan::KeyRange<datafusion::logical_expr::Expr>>,
    /// The column's type.
    pub ty: arrow::datatypes::DataType,
}

/// A peek's steps without the conjuncts `key_column = constant` that
/// its keyed lookup already decides: the lookup returns exactly the rows
/// whose key encodes equal to the constant's value, and for the key
/// types where encoded equality is SQL equality (integers, text, dates,
/// times, decimals of one scale, booleans, bytes; not floats, whose
/// encoding folds `-0` into `0`) such a conjunct is true for every row
/// it returns. Used only when the key's value is known: a NULL or
/// inexact key reads every row and needs the whole predicate.
#[derive(Debug)]
pub struct KeyedSteps {
    /// The steps, scan side first.
    pub steps: Arc<Vec<PeekStep>>,
    /// How their expressions are made physical (as [`PeekFinish::made`]
    /// for the full steps).
    pub made: Arc<std::sync::OnceLock<MadeExprs>>,
}

/// One lookup's key expressions, made physical, in key order.
pub type LookupKeyExprs = Vec<Arc<dyn PhysicalExpr>>;

/// An inner join of a peek's rows with the rows of another index whose
/// key equals expressions of each of them: an index nested-loop join,
/// one keyed read per distinct key (see
/// [`crate::statements::peek_join`]).
#[derive(Debug, Clone)]
pub struct PeekLookup {
    /// The index read.
    pub index: GlobalId,
    /// One expression over `input` per key column of the index, with the
    /// key column's type, in key order.
    pub key: KeyConstants,
    /// The rows the key expressions read (the join's left input).
    pub input: datafusion::common::DFSchemaRef,
    /// Which of the index's columns the join's right side reads (`None`:
    /// all).
    pub columns: Option<Vec<usize>>,
    /// The join's output: the left rows' columns, then the right's.
    pub output: arrow::datatypes::SchemaRef,
    /// `EXPLAIN`'s description.
    pub explain: String,
}

/// A peek's expressions in step order, each with how an execution gets
/// its physical form (see [`MadeExpr`]).
pub type MadeExprs = Vec<MadeExpr>;

/// A physical expression and the parameter values it was made with.
pub type MadeWith = (Vec<ScalarValue>, Arc<dyn PhysicalExpr>);

/// How one of a kept peek's expressions is made physical for an
/// execution: making it (DataFusion's physical planning of the
/// expression, after the parameters are put in) costs more than
/// evaluating it on the few rows a lookup finds.
#[derive(Debug)]
pub enum MadeExpr {
    /// No `$n` and no function whose value may change: made at the first
    /// execution, shared by the others.
    Fixed(Arc<dyn PhysicalExpr>),
    /// Reads the parameters `reads` and no function whose value may
    /// change (so its value is theirs alone): made again only when one of
    /// them has a new value. A statement template keeps every integer
    /// literal as a parameter, so `SET v = v + 1` stays one expression
    /// across executions that differ only in the key.
    ByParams {
        /// The `$n` ids it reads.
        reads: Vec<String>,
        /// The values it was last made with, and what was made.
        last: parking_lot::Mutex<Option<MadeWith>>,
    },
    /// Calls a function that is not immutable (`now()` takes each
    /// statement's time): made at every execution.
    PerExecution,
}

/// The constants of a peek's key, one per key column: an expression (a
/// literal or `$n`, perhaps cast) and the key column's type.
pub type KeyConstants = Vec<(datafusion::logical_expr::Expr, arrow::datatypes::DataType)>;

/// One step of a peeked query after the lookup; each evaluates its
/// expressions against its input's schema.
#[derive(Debug, Clone)]
pub enum PeekStep {
    /// Keep the rows where `predicate` is true.
    Filter {
        /// The condition.
        predicate: datafusion::logical_expr::Expr,
        /// The schema it reads.
        input: datafusion::common::DFSchemaRef,
    },
    /// Compute the output columns.
    Project {
        /// One expression per output column.
        exprs: Vec<datafusion::logical_expr::Expr>,
        /// The schema they read.
        input: datafusion::common::DFSchemaRef,
        /// The columns they make.
        output: arrow::datatypes::SchemaRef,
    },
    /// Order the rows (the first `fetch` of them, if given).
    Sort {
        /// Sort keys, most significant first.
        exprs: Vec<datafusion::logical_expr::SortExpr>,
        /// The schema they read.
        input: datafusion::common::DFSchemaRef,
        /// How many rows the sort must produce.
        fetch: Option<usize>,
    },
    /// `OFFSET skip LIMIT fetch`.
    Limit {
        /// Rows skipped.
        skip: usize,
        /// Rows kept after them.
        fetch: Option<usize>,
    },
}

/// How a subscribe's rows describe changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubscribeEnvelope {
    /// Each row with the change of its multiplicity (`mz_diff`).
    Diffs,
    /// Per changed key, its new value (`mz_state` `upsert`, `delete` or
    /// `key_violation`); `key` indexes the relation's columns.
    Upsert {
        /// Key column positions.
        key: Vec<usize>,
    },
    /// Per changed key, its value before and after (`mz_state` `insert`,
    /// `upsert`, `delete` or `key_violation`).
    Debezium {
        /// Key column positions.
        key: Vec<usize>,
    },
}

/// Where a subscribe's reads start: a time expression the sequencer
/// evaluates (with `mz_now()` bound to the time it would read at now).
#[derive(Debug, Clone)]
pub struct SubscribeAsOf {
    /// `AT LEAST`: this time or the earliest readable time after it;
    /// otherwise exactly this time (an error if no longer readable).
    pub at_least: bool,
    /// The time.
    pub time: TimeExpr,
}

/// A planned subscribe.
#[derive(Debug, Clone)]
pub struct SubscribePlan {
    /// The dataflow computing the relation (reading indexed views from
    /// their indexes' arrangements).
    pub plan: RelPlan,
    /// The same relation computed from storage alone, if `plan` imports
    /// indexes: used when they cannot serve the subscribe's start time.
    pub from_storage: Option<RelPlan>,
    /// The relation's columns (as the dataflow produces them).
    pub relation: RelationDesc,
    /// The columns clients receive.
    pub output: RelationDesc,
    /// Storage collections the dataflow reads (held while it runs).
    pub inputs: BTreeSet<GlobalId>,
    /// Every catalog item it depends on (dropping one ends it).
    pub depends_on: BTreeSet<GlobalId>,
    /// Send the contents at the start time first.
    pub snapshot: bool,
    /// Send `mz_progressed` rows as time advances.
    pub progress: bool,
    /// `AS OF`; `None`: the time a query would read at now.
    pub as_of: Option<SubscribeAsOf>,
    /// `UP TO` (exclusive), evaluated like `AS OF`.
    pub up_to: Option<TimeExpr>,
    /// The row shape.
    pub envelope: SubscribeEnvelope,
}
