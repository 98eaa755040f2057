//! The dataflow plan: the intermediate representation the planner lowers
//! DataFusion plans into and compute renders as differential dataflow.
//!
//! Expressions stay DataFusion logical expressions over the node's input
//! schema; rendering turns them into physical expressions evaluated over
//! Arrow batches of rows, so scalar semantics are exactly those of ad hoc
//! queries.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use datafusion::common::DFSchemaRef;
use datafusion::logical_expr::{Expr, SortExpr};
use freshet_repr::{GlobalId, Timestamp};

/// Join flavours the renderer maintains.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JoinKind {
    /// Matching pairs.
    Inner,
    /// Matching pairs plus unmatched left rows padded with NULLs.
    LeftOuter,
    /// Matching pairs plus unmatched right rows padded with NULLs.
    RightOuter,
    /// Matching pairs plus unmatched rows of both sides.
    FullOuter,
    /// Left rows with a match (each once per left occurrence).
    LeftSemi,
    /// Left rows without a match.
    LeftAnti,
}

/// How a temporal filter compares the logical time with a bound:
/// `mz_now() <op> bound`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeOp {
    /// `mz_now() = bound`
    Eq,
    /// `mz_now() < bound`
    Lt,
    /// `mz_now() <= bound`
    LtEq,
    /// `mz_now() > bound`
    Gt,
    /// `mz_now() >= bound`
    GtEq,
}

impl TimeOp {
    /// The SQL operator.
    pub fn symbol(&self) -> &'static str {
        match self {
            TimeOp::Eq => "=",
            TimeOp::Lt => "<",
            TimeOp::LtEq => "<=",
            TimeOp::Gt => ">",
            TimeOp::GtEq => ">=",
        }
    }
}

/// One conjunct of a temporal filter: `mz_now() · units <op> expr`, with
/// `expr` over the input row and `units` its units per millisecond of
/// logical time (1 when it compares with `mz_now()` itself, 1000 when
/// with a timestamp's microseconds).
#[derive(Clone, Debug, PartialEq)]
pub struct TimeBound {
    /// The comparison.
    pub op: TimeOp,
    /// The bound, over the input row.
    pub expr: Expr,
    /// Units of `expr` per millisecond.
    pub units: i64,
}

/// A relational operator.
#[derive(Clone)]
pub enum RelPlan {
    /// A storage collection: its snapshot at the dataflow's `as_of`, then
    /// its updates.
    Get {
        /// The collection.
        id: GlobalId,
        /// Its columns.
        schema: SchemaRef,
    },
    /// The rows of an index's arrangement, imported into this dataflow
    /// instead of recomputing what the index maintains (a view's query).
    ArrangedGet {
        /// The index.
        index: GlobalId,
        /// The storage collections behind it: held like a `Get`'s, so
        /// the dataflow could also be rebuilt from storage.
        inputs: Vec<GlobalId>,
        /// Its rows' columns.
        schema: SchemaRef,
    },
    /// Rows fixed at planning time (VALUES, empty relations).
    Constant {
        /// Columns.
        schema: SchemaRef,
        /// The rows (each with multiplicity one).
        batches: Vec<RecordBatch>,
    },
    /// Filter, then compute new columns.
    Mfp {
        /// Input.
        input: Box<RelPlan>,
        /// The input's schema as the expressions name it.
        input_schema: DFSchemaRef,
        /// Keep rows for which this is true.
        filter: Option<Expr>,
        /// Output columns.
        projection: Vec<Expr>,
        /// Output schema.
        schema: SchemaRef,
    },
    /// An equi-join on key expressions; no keys is a cross join.
    Join {
        /// Left input.
        left: Box<RelPlan>,
        /// Right input.
        right: Box<RelPlan>,
        /// Left schema as the key expressions name it.
        left_schema: DFSchemaRef,
        /// Right schema as the key expressions name it.
        right_schema: DFSchemaRef,
        /// Left keys.
        left_keys: Vec<Expr>,
        /// Right keys (same length and types as the left keys).
        right_keys: Vec<Expr>,
        /// Which join.
        kind: JoinKind,
        /// Whether NULL keys match each other (`IS NOT DISTINCT FROM`).
        nulls_equal: bool,
        /// A residual predicate over the concatenated left and right
        /// columns, part of the match condition (so outer joins pad rows
        /// whose matches it rejects).
        filter: Option<Expr>,
        /// Left and right columns concatenated, as `filter` names them.
        pair_schema: DFSchemaRef,
        /// Output schema.
        schema: SchemaRef,
    },
    /// GROUP BY with aggregates (group columns first, then aggregates).
    Reduce {
        /// Input.
        input: Box<RelPlan>,
        /// The input schema as the expressions name it.
        input_schema: DFSchemaRef,
        /// Grouping expressions (empty for a global aggregate).
        group: Vec<Expr>,
        /// Aggregate expressions.
        aggregates: Vec<Expr>,
        /// Output schema.
        schema: SchemaRef,
    },
    /// A temporal filter: each input row is in the output from the first
    /// time every bound holds until the first time one fails (`WHERE
    /// mz_now() <= ts + INTERVAL '5 minutes'`): inserted and retracted at
    /// those times, without the input changing.
    TemporalFilter {
        /// Input.
        input: Box<RelPlan>,
        /// The input schema as the bounds name it.
        input_schema: DFSchemaRef,
        /// The conjuncts, all of which must hold.
        bounds: Vec<TimeBound>,
    },
    /// Each distinct row once.
    Distinct {
        /// Input.
        input: Box<RelPlan>,
    },
    /// Window functions: the input's columns plus one column per window
    /// expression, all sharing one PARTITION BY. A change recomputes the
    /// partitions it touches.
    Window {
        /// Input.
        input: Box<RelPlan>,
        /// The input schema as the expressions name it.
        input_schema: DFSchemaRef,
        /// `fn(...) OVER (PARTITION BY .. ORDER BY .. frame)` expressions.
        window_exprs: Vec<Expr>,
        /// Output schema.
        schema: SchemaRef,
    },
    /// `ORDER BY .. OFFSET .. LIMIT ..`: the rows at those positions of
    /// the input in that order, maintained hierarchically (a change costs
    /// O(limit) per level of a small tree of buckets, not O(input)).
    TopK {
        /// Input.
        input: Box<RelPlan>,
        /// The input schema as the sort expressions name it.
        input_schema: DFSchemaRef,
        /// Per-group top-k: the grouping expressions (empty: one group).
        group: Vec<Expr>,
        /// Append each kept row's position (the `row_number() <= k`
        /// pattern), making the output schema `schema`.
        number: bool,
        /// Output schema (the input's, plus the position if numbered).
        schema: SchemaRef,
        /// Sort order (empty: any order).
        order: Vec<SortExpr>,
        /// Rows skipped.
        offset: usize,
        /// Rows kept after the offset (`None`: all).
        limit: Option<usize>,
    },
    /// The multiset union of the inputs.
    Union {
        /// Inputs (same schema).
        inputs: Vec<RelPlan>,
        /// Output schema.
        schema: SchemaRef,
    },
}

impl RelPlan {
    /// The output schema.
    pub fn schema(&self) -> SchemaRef {
        match self {
            RelPlan::Get { schema, .. }
            | RelPlan::ArrangedGet { schema, .. }
            | RelPlan::Constant { schema, .. }
            | RelPlan::Mfp { schema, .. }
            | RelPlan::Join { schema, .. }
            | RelPlan::Reduce { schema, .. }
            | RelPlan::Window { schema, .. }
            | RelPlan::TopK { schema, .. }
            | RelPlan::Union { schema, .. } => Arc::clone(schema),
            RelPlan::Distinct { input } | RelPlan::TemporalFilter { input, .. } => input.schema(),
        }
    }

    /// The storage collections the plan reads (directly, or behind the
    /// indexes it imports).
    pub fn inputs(&self) -> BTreeSet<GlobalId> {
        let mut out = BTreeSet::new();
        self.visit(&mut |p| match p {
            RelPlan::Get { id, .. } => {
                out.insert(*id);
            }
            RelPlan::ArrangedGet { inputs, .. } => out.extend(inputs.iter().copied()),
            _ => {}
        });
        out
    }

    /// The indexes whose arrangements the plan imports.
    pub fn imported_indexes(&self) -> BTreeSet<GlobalId> {
        let mut out = BTreeSet::new();
        self.visit(&mut |p| {
            if let RelPlan::ArrangedGet { index, .. } = p {
                out.insert(*index);
            }
        });
        out
    }

    pub(crate) fn visit(&self, f: &mut impl FnMut(&RelPlan)) {
        f(self);
        match self {
            RelPlan::Get { .. } | RelPlan::ArrangedGet { .. } | RelPlan::Constant { .. } => {}
            RelPlan::Mfp { input, .. }
            | RelPlan::Reduce { input, .. }
            | RelPlan::Window { input, .. }
            | RelPlan::TopK { input, .. }
            | RelPlan::TemporalFilter { input, .. }
            | RelPlan::Distinct { input } => input.visit(f),
            RelPlan::Join { left, right, .. } => {
                left.visit(f);
                right.visit(f);
            }
            RelPlan::Union { inputs, .. } => inputs.iter().for_each(|i| i.visit(f)),
        }
    }

    fn fmt_indent(&self, f: &mut fmt::Formatter<'_>, depth: usize) -> fmt::Result {
        let pad = "  ".repeat(depth);
        let list = |exprs: &[Expr]| {
            exprs
                .iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        match self {
            RelPlan::Get { id, .. } => writeln!(f, "{pad}Get {id}"),
            RelPlan::ArrangedGet { index, .. } => {
                writeln!(f, "{pad}Get {index} (the index's arrangement, reused)")
            }
            RelPlan::Constant { batches, .. } => writeln!(
                f,
                "{pad}Constant ({} rows)",
                batches.iter().map(|b| b.num_rows()).sum::<usize>()
            ),
            RelPlan::Mfp {
                input,
                filter,
                projection,
                ..
            } => {
                match filter {
                    Some(p) => writeln!(f, "{pad}Map/Filter [{}] where {p}", list(projection))?,
                    None => writeln!(f, "{pad}Map [{}]", list(projection))?,
                }
                input.fmt_indent(f, depth + 1)
            }
            RelPlan::TemporalFilter { input, bounds, .. } => {
                let conjuncts: Vec<String> = bounds
                    .iter()
                    .map(|b| {
                        let now = if b.units == 1 {
                            "mz_now()".to_string()
                        } else {
                            format!("mz_now() * {}", b.units)
                        };
                        format!("{now} {} {}", b.op.symbol(), b.expr)
                    })
                    .collect();
                writeln!(f, "{pad}TemporalFilter {}", conjuncts.join(" AND "))?;
                input.fmt_indent(f, depth + 1)
            }
            RelPlan::Join {
                left,
                right,
                left_keys,
                right_keys,
                kind,
                filter,
                ..
            } => {
                if left_keys.is_empty() {
                    write!(f, "{pad}CrossJoin {kind:?} (arranged by unit key)")?;
                } else {
                    write!(
                        f,
                        "{pad}Join {kind:?} on [{}] = [{}] (arranged by key)",
                        list(left_keys),
                        list(right_keys)
                    )?;
                }
                match filter {
                    Some(p) => writeln!(f, " filter {p}")?,
                    None => writeln!(f)?,
                }
                left.fmt_indent(f, depth + 1)?;
                right.fmt_indent(f, depth + 1)
            }
            RelPlan::Reduce {
                input,
                group,
                aggregates,
                ..
            } => {
                writeln!(
                    f,
                    "{pad}Reduce group=[{}] aggregates=[{}]",
                    list(group),
                    list(aggregates)
                )?;
                input.fmt_indent(f, depth + 1)
            }
            RelPlan::Distinct { input } => {
                writeln!(f, "{pad}Distinct")?;
                input.fmt_indent(f, depth + 1)
            }
            RelPlan::Window {
                input,
                window_exprs,
                ..
            } => {
                writeln!(
                    f,
                    "{pad}Window [{}] (recomputes changed partitions)",
                    list(window_exprs)
                )?;
                input.fmt_indent(f, depth + 1)
            }
            RelPlan::TopK {
                input,
                group,
                order,
                offset,
                limit,
                number,
                ..
            } => {
                let order: Vec<String> = order.iter().map(|s| s.to_string()).collect();
                write!(f, "{pad}TopK")?;
                if !group.is_empty() {
                    write!(f, " group=[{}]", list(group))?;
                }
                write!(f, " order=[{}]", order.join(", "))?;
                if *number {
                    write!(f, " numbered")?;
                }
                if *offset > 0 {
                    write!(f, " offset={offset}")?;
                }
                match limit {
                    Some(l) => writeln!(f, " limit={l} (hierarchical)")?,
                    None => writeln!(f)?,
                }
                input.fmt_indent(f, depth + 1)
            }
            RelPlan::Union { inputs, .. } => {
                writeln!(f, "{pad}Union")?;
                inputs.iter().try_for_each(|i| i.fmt_indent(f, depth + 1))
            }
        }
    }
}

impl fmt::Display for RelPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.fmt_indent(f, 0)
    }
}

impl fmt::Debug for RelPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

/// Where a dataflow's output goes.
#[derive(Clone, Debug)]
pub enum Export {
    /// The materialized view's shard (rows and errors), through the
    /// self-correcting sink.
    Shard,
    /// An index: the output arranged in memory by `keys`, read by peeks.
    Index {
        /// Key expressions over the output.
        keys: Vec<Expr>,
        /// The output schema as the key expressions name it.
        schema: DFSchemaRef,
    },
    /// A subscribe: consolidated updates per completed time, sent to the
    /// session that asked (see `freshet_compute::subscribe`).
    Subscribe {
        /// Whether the contents at `as_of` are sent first (otherwise only
        /// changes after it).
        snapshot: bool,
        /// Stop before this time (exclusive).
        up_to: Option<Timestamp>,
    },
}

/// Everything needed to install one maintained dataflow.
#[derive(Clone, Debug)]
pub struct DataflowDesc {
    /// The object maintained (a materialized view's output collection, or
    /// an index, has this id).
    pub id: GlobalId,
    /// What to compute.
    pub plan: RelPlan,
    /// Where the output goes.
    pub export: Export,
    /// Inputs are read as of this time.
    pub as_of: Timestamp,
    /// Output updates start at this time (`>= as_of`); earlier input
    /// times are advanced to it.
    pub start: Timestamp,
    /// A materialized view's `REFRESH` schedule: its output changes only
    /// at these times (`None`: on every commit).
    pub refresh: Option<freshet_repr::RefreshSchedule>,
}

impl DataflowDesc {
    /// `plan` exported as `export`, not yet placed in time: how a written
    /// plan stores it and how validation checks it (`as_of` and `start`
    /// are chosen at install, the refresh schedule comes from the
    /// catalog item).
    pub fn unscheduled(id: GlobalId, plan: RelPlan, export: Export) -> Self {
        DataflowDesc {
            id,
            plan,
            export,
            as_of: 0,
            start: 0,
            refresh: None,
        }
    }
}
