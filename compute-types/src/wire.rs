//! The wire form of dataflow plans: protobuf, with DataFusion's own
//! messages (`datafusion-proto`) for expressions and schemas.
//!
//! Workers receive plans only in this form and each builds its own
//! physical expressions from it, as a worker in another process would;
//! the same bytes are what a catalog can commit beside a view. The
//! format carries [`format_version`], which names the DataFusion release
//! whose expression encoding it embeds, so a reader can tell a plan
//! written by another release and re-plan it from SQL instead.

use std::io::Cursor;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::{Schema, SchemaRef};
use arrow::ipc::reader::StreamReader;
use arrow::ipc::writer::StreamWriter;
use datafusion::common::{DFSchema, DFSchemaRef};
use datafusion::execution::TaskContext;
use datafusion_proto::logical_plan::LogicalExtensionCodec;
use datafusion_proto::logical_plan::from_proto::{parse_expr, parse_exprs, parse_sorts};
use datafusion_proto::logical_plan::to_proto::{serialize_expr, serialize_exprs, serialize_sorts};
use datafusion_proto::protobuf;
use freshet_repr::GlobalId;
use prost::Message;

use crate::error::{Result, WireError};
use crate::plan::{DataflowDesc, Export, JoinKind, RelPlan, TimeBound, TimeOp};

/// The version of the messages below; bump it on an incompatible change.
const PLAN_FORMAT: u32 = 1;

/// The plan format a reader must match: ours, and the DataFusion release
/// whose expression encoding the plan embeds.
pub fn format_version() -> String {
    format!(
        "freshet-plan-{PLAN_FORMAT}/datafusion-{}",
        datafusion::DATAFUSION_VERSION
    )
}

/// Encodes plans, and decodes them against the functions they call.
///
/// Expressions name functions; decoding looks them up in `functions` (the
/// session's registry), then asks `extension` for those the planner
/// creates without registering (e.g. its scalar-subquery check).
#[derive(Clone)]
pub struct PlanCodec {
    functions: Arc<TaskContext>,
    extension: Arc<dyn LogicalExtensionCodec>,
}

impl std::fmt::Debug for PlanCodec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlanCodec")
            .field("extension", &self.extension)
            .finish_non_exhaustive()
    }
}

impl PlanCodec {
    /// A codec resolving functions in `functions`, then `extension`.
    pub fn new(functions: Arc<TaskContext>, extension: Arc<dyn LogicalExtensionCodec>) -> Self {
        PlanCodec {
            functions,
            extension,
        }
    }

    /// The bytes of `desc`.
    pub fn encode(&self, desc: &DataflowDesc) -> Result<Vec<u8>> {
        let proto = DataflowProto {
            format: format_version(),
            id: Some(id_to_proto(desc.id)),
            as_of: desc.as_of,
            start: desc.start,
            plan: Some(self.encode_plan(&desc.plan)?),
            index: match &desc.export {
                Export::Shard | Export::Subscribe { .. } => None,
                Export::Index { keys, schema } => Some(IndexProto {
                    keys: serialize_exprs(keys, self.extension.as_ref())?,
                    schema: Some(dfschema_to_proto(schema)?),
                }),
            },
            subscribe: match &desc.export {
                Export::Subscribe { snapshot, up_to } => Some(SubscribeProto {
                    snapshot: *snapshot,
                    up_to: *up_to,
                }),
                _ => None,
            },
            refresh: desc.refresh.as_ref().map(|r| RefreshProto {
                at: r.at.clone(),
                every_interval: r.every.iter().map(|e| e.interval).collect(),
                every_aligned_to: r.every.iter().map(|e| e.aligned_to).collect(),
            }),
        };
        Ok(proto.encode_to_vec())
    }

    /// The plan `bytes` encode. Fails on another format version.
    pub fn decode(&self, bytes: &[u8]) -> Result<DataflowDesc> {
        let proto = DataflowProto::decode(bytes).map_err(|e| wire_error(e.to_string()))?;
        let expected = format_version();
        if proto.format != expected {
            return Err(WireError::Format {
                found: proto.format,
                expected,
            });
        }
        Ok(DataflowDesc {
            id: id_from_proto(required(proto.id.as_ref(), "id")?),
            as_of: proto.as_of,
            start: proto.start,
            plan: self.decode_plan(required(proto.plan.as_ref(), "plan")?)?,
            export: match (&proto.index, &proto.subscribe) {
                (Some(index), _) => Export::Index {
                    keys: parse_exprs(&index.keys, &self.functions, self.extension.as_ref())?,
                    schema: dfschema_from_proto(&index.schema)?,
                },
                (None, Some(s)) => Export::Subscribe {
                    snapshot: s.snapshot,
                    up_to: s.up_to,
                },
                (None, None) => Export::Shard,
            },
            refresh: proto.refresh.map(|r| freshet_repr::RefreshSchedule {
                at: r.at,
                every: r
                    .every_interval
                    .into_iter()
                    .zip(r.every_aligned_to)
                    .map(|(interval, aligned_to)| freshet_repr::RefreshEvery {
                        interval,
                        aligned_to,
                    })
                    .collect(),
            }),
        })
    }

    fn encode_plan(&self, plan: &RelPlan) -> Result<RelProto> {
        let ext = self.extension.as_ref();
        let boxed = |p: &RelPlan| self.encode_plan(p).map(Box::new).map(Some);
        let node = match plan {
            RelPlan::Get { id, schema } => Node::Get(GetProto {
                id: Some(id_to_proto(*id)),
                schema: Some(schema_to_proto(schema)?),
            }),
            RelPlan::ArrangedGet {
                index,
                inputs,
                schema,
            } => Node::ArrangedGet(ArrangedGetProto {
                index: Some(id_to_proto(*index)),
                inputs: inputs.iter().map(|i| id_to_proto(*i)).collect(),
                schema: Some(schema_to_proto(schema)?),
            }),
            RelPlan::Constant { schema, batches } => Node::Constant(ConstantProto {
                schema: Some(schema_to_proto(schema)?),
                ipc: batches_to_ipc(schema, batches)?,
            }),
            RelPlan::Mfp {
                input,
                input_schema,
                filter,
                projection,
                schema,
            } => Node::Mfp(Box::new(MfpProto {
                input: boxed(input)?,
                input_schema: Some(dfschema_to_proto(input_schema)?),
                filter: filter
                    .as_ref()
                    .map(|f| serialize_expr(f, ext))
                    .transpose()?,
                projection: serialize_exprs(projection, ext)?,
                schema: Some(schema_to_proto(schema)?),
            })),
            RelPlan::TemporalFilter {
                input,
                input_schema,
                bounds,
            } => Node::TemporalFilter(Box::new(TemporalFilterProto {
                input: boxed(input)?,
                input_schema: Some(dfschema_to_proto(input_schema)?),
                bounds: bounds
                    .iter()
                    .map(|b| {
                        Ok(TimeBoundProto {
                            op: time_op_to_proto(b.op),
                            expr: Some(serialize_expr(&b.expr, ext)?),
                            units: b.units,
                        })
                    })
                    .collect::<Result<_>>()?,
            })),
            RelPlan::Join {
                left,
                right,
                left_schema,
                right_schema,
                left_keys,
                right_keys,
                kind,
                nulls_equal,
                filter,
                pair_schema,
                schema,
            } => Node::Join(Box::new(JoinProto {
                left: boxed(left)?,
                right: boxed(right)?,
                left_schema: Some(dfschema_to_proto(left_schema)?),
                right_schema: Some(dfschema_to_proto(right_schema)?),
                left_keys: serialize_exprs(left_keys, ext)?,
                right_keys: serialize_exprs(right_keys, ext)?,
                kind: join_kind_to_proto(*kind),
                nulls_equal: *nulls_equal,
                filter: filter
                    .as_ref()
                    .map(|f| serialize_expr(f, ext))
                    .transpose()?,
                pair_schema: Some(dfschema_to_proto(pair_schema)?),
                schema: Some(schema_to_proto(schema)?),
            })),
            RelPlan::Reduce {
                input,
                input_schema,
                group,
                aggregates,
                schema,
            } => Node::Reduce(Box::new(ReduceProto {
                input: boxed(input)?,
                input_schema: Some(dfschema_to_proto(input_schema)?),
                group: serialize_exprs(group, ext)?,
                aggregates: serialize_exprs(aggregates, ext)?,
                schema: Some(schema_to_proto(schema)?),
            })),
            RelPlan::Distinct { input } => Node::Distinct(Box::new(DistinctProto {
                input: boxed(input)?,
            })),
            RelPlan::Window {
                input,
                input_schema,
                window_exprs,
                schema,
            } => Node::Window(Box::new(WindowProto {
                input: boxed(input)?,
                input_schema: Some(dfschema_to_proto(input_schema)?),
                window_exprs: serialize_exprs(window_exprs, ext)?,
                schema: Some(schema_to_proto(schema)?),
            })),
            RelPlan::TopK {
                input,
                input_schema,
                group,
                number,
                schema,
                order,
                offset,
                limit,
            } => Node::TopK(Box::new(TopKProto {
                input: boxed(input)?,
                input_schema: Some(dfschema_to_proto(input_schema)?),
                group: serialize_exprs(group, ext)?,
                number: *number,
                schema: Some(schema_to_proto(schema)?),
                order: serialize_sorts(order, ext)?,
                offset: *offset as u64,
                limit: limit.map(|l| l as u64),
            })),
            RelPlan::Union { inputs, schema } => Node::Union(UnionProto {
                inputs: inputs
                    .iter()
                    .map(|i| self.encode_plan(i))
                    .collect::<Result<_>>()?,
                schema: Some(schema_to_proto(schema)?),
            }),
        };
        Ok(RelProto { node: Some(node) })
    }

    fn decode_plan(&self, proto: &RelProto) -> Result<RelPlan> {
        let ctx = self.functions.as_ref();
        let ext = self.extension.as_ref();
        let input = |p: &Option<Box<RelProto>>| {
            self.decode_plan(required(p.as_deref(), "input")?)
                .map(Box::new)
        };
        let expr = |e: &Option<protobuf::LogicalExprNode>| {
            e.as_ref()
                .map(|e| parse_expr(e, ctx, ext))
                .transpose()
                .map_err(WireError::from)
        };
        Ok(match required(proto.node.as_ref(), "node")? {
            Node::Get(g) => RelPlan::Get {
                id: id_from_proto(required(g.id.as_ref(), "id")?),
                schema: schema_from_proto(&g.schema)?,
            },
            Node::ArrangedGet(g) => RelPlan::ArrangedGet {
                index: id_from_proto(required(g.index.as_ref(), "index")?),
                inputs: g.inputs.iter().map(id_from_proto).collect(),
                schema: schema_from_proto(&g.schema)?,
            },
            Node::Constant(c) => {
                let schema = schema_from_proto(&c.schema)?;
                RelPlan::Constant {
                    batches: batches_from_ipc(&c.ipc)?,
                    schema,
                }
            }
            Node::Mfp(m) => RelPlan::Mfp {
                input: input(&m.input)?,
                input_schema: dfschema_from_proto(&m.input_schema)?,
                filter: expr(&m.filter)?,
                projection: parse_exprs(&m.projection, ctx, ext)?,
                schema: schema_from_proto(&m.schema)?,
            },
            Node::Join(j) => RelPlan::Join {
                left: input(&j.left)?,
                right: input(&j.right)?,
                left_schema: dfschema_from_proto(&j.left_schema)?,
                right_schema: dfschema_from_proto(&j.right_schema)?,
                left_keys: parse_exprs(&j.left_keys, ctx, ext)?,
                right_keys: parse_exprs(&j.right_keys, ctx, ext)?,
                kind: join_kind_from_proto(j.kind)?,
                nulls_equal: j.nulls_equal,
                filter: expr(&j.filter)?,
                pair_schema: dfschema_from_proto(&j.pair_schema)?,
                schema: schema_from_proto(&j.schema)?,
            },
            Node::Reduce(r) => RelPlan::Reduce {
                input: input(&r.input)?,
                input_schema: dfschema_from_proto(&r.input_schema)?,
                group: parse_exprs(&r.group, ctx, ext)?,
                aggregates: parse_exprs(&r.aggregates, ctx, ext)?,
                schema: schema_from_proto(&r.schema)?,
            },
            Node::Distinct(d) => RelPlan::Distinct {
                input: input(&d.input)?,
            },
            Node::TemporalFilter(t) => RelPlan::TemporalFilter {
                input: input(&t.input)?,
                input_schema: dfschema_from_proto(&t.input_schema)?,
                bounds: t
                    .bounds
                    .iter()
                    .map(|b| {
                        Ok(TimeBound {
                            op: time_op_from_proto(b.op)?,
                            expr: expr(&b.expr)?
                                .ok_or_else(|| wire_error("a bound without its expression"))?,
                            units: b.units,
                        })
                    })
                    .collect::<Result<_>>()?,
            },
            Node::Window(w) => RelPlan::Window {
                input: input(&w.input)?,
                input_schema: dfschema_from_proto(&w.input_schema)?,
                window_exprs: parse_exprs(&w.window_exprs, ctx, ext)?,
                schema: schema_from_proto(&w.schema)?,
            },
            Node::TopK(t) => RelPlan::TopK {
                input: input(&t.input)?,
                input_schema: dfschema_from_proto(&t.input_schema)?,
                group: parse_exprs(&t.group, ctx, ext)?,
                number: t.number,
                schema: schema_from_proto(&t.schema)?,
                order: parse_sorts(&t.order, ctx, ext)?,
                offset: usize_from_proto(t.offset)?,
                limit: t.limit.map(usize_from_proto).transpose()?,
            },
            Node::Union(u) => RelPlan::Union {
                inputs: u
                    .inputs
                    .iter()
                    .map(|i| self.decode_plan(i))
                    .collect::<Result<_>>()?,
                schema: schema_from_proto(&u.schema)?,
            },
        })
    }
}

fn wire_error(message: impl Into<String>) -> WireError {
    WireError::Decode(message.into())
}

fn required<'a, T>(field: Option<&'a T>, name: &str) -> Result<&'a T> {
    field.ok_or_else(|| wire_error(format!("missing field {name}")))
}

fn usize_from_proto(n: u64) -> Result<usize> {
    usize::try_from(n).map_err(|_| wire_error(format!("{n} does not fit in usize")))
}

fn id_to_proto(id: GlobalId) -> IdProto {
    let (system, transient, value) = match id {
        GlobalId::System(n) => (true, false, n),
        GlobalId::User(n) => (false, false, n),
        GlobalId::Transient(n) => (false, true, n),
    };
    IdProto {
        system,
        value,
        transient,
    }
}

fn id_from_proto(id: &IdProto) -> GlobalId {
    match (id.system, id.transient) {
        (true, _) => GlobalId::System(id.value),
        (false, true) => GlobalId::Transient(id.value),
        (false, false) => GlobalId::User(id.value),
    }
}

fn time_op_to_proto(op: TimeOp) -> i32 {
    match op {
        TimeOp::Eq => 0,
        TimeOp::Lt => 1,
        TimeOp::LtEq => 2,
        TimeOp::Gt => 3,
        TimeOp::GtEq => 4,
    }
}

fn time_op_from_proto(op: i32) -> Result<TimeOp> {
    Ok(match op {
        0 => TimeOp::Eq,
        1 => TimeOp::Lt,
        2 => TimeOp::LtEq,
        3 => TimeOp::Gt,
        4 => TimeOp::GtEq,
        other => return Err(wire_error(format!("unknown time comparison {other}"))),
    })
}

fn join_kind_to_proto(kind: JoinKind) -> i32 {
    match kind {
        JoinKind::Inner => 0,
        JoinKind::LeftOuter => 1,
        JoinKind::RightOuter => 2,
        JoinKind::FullOuter => 3,
        JoinKind::LeftSemi => 4,
        JoinKind::LeftAnti => 5,
    }
}

fn join_kind_from_proto(kind: i32) -> Result<JoinKind> {
    Ok(match kind {
        0 => JoinKind::Inner,
        1 => JoinKind::LeftOuter,
        2 => JoinKind::RightOuter,
        3 => JoinKind::FullOuter,
        4 => JoinKind::LeftSemi,
        5 => JoinKind::LeftAnti,
        other => return Err(wire_error(format!("unknown join kind {other}"))),
    })
}

fn schema_to_proto(schema: &SchemaRef) -> Result<protobuf::Schema> {
    protobuf::Schema::try_from(schema.as_ref()).map_err(|e| wire_error(e.to_string()))
}

fn schema_from_proto(schema: &Option<protobuf::Schema>) -> Result<SchemaRef> {
    let schema = required(schema.as_ref(), "schema")?;
    Schema::try_from(schema)
        .map(Arc::new)
        .map_err(|e| wire_error(e.to_string()))
}

fn dfschema_to_proto(schema: &DFSchemaRef) -> Result<protobuf::DfSchema> {
    protobuf::DfSchema::try_from(schema.as_ref()).map_err(|e| wire_error(e.to_string()))
}

fn dfschema_from_proto(schema: &Option<protobuf::DfSchema>) -> Result<DFSchemaRef> {
    let schema = required(schema.as_ref(), "input schema")?;
    DFSchema::try_from(schema)
        .map(Arc::new)
        .map_err(|e| wire_error(e.to_string()))
}

fn batches_to_ipc(schema: &SchemaRef, batches: &[RecordBatch]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut writer = StreamWriter::try_new(&mut out, schema)?;
    for b in batches {
        writer.write(b)?;
    }
    writer.finish()?;
    drop(writer);
    Ok(out)
}

fn batches_from_ipc(bytes: &[u8]) -> Result<Vec<RecordBatch>> {
    let reader = StreamReader::try_new(Cursor::new(bytes), None)?;
    Ok(reader.collect::<std::result::Result<_, _>>()?)
}

use rel_proto::Node;

/// A dataflow to install.
#[derive(Clone, PartialEq, Message)]
struct DataflowProto {
    /// [`format_version`] of the writer.
    #[prost(string, tag = "1")]
    format: String,
    #[prost(message, optional, tag = "2")]
    id: Option<IdProto>,
    #[prost(uint64, tag = "3")]
    as_of: u64,
    #[prost(uint64, tag = "4")]
    start: u64,
    #[prost(message, optional, tag = "5")]
    plan: Option<RelProto>,
    /// Set for an index; a materialized view writes its shard.
    #[prost(message, optional, tag = "6")]
    index: Option<IndexProto>,
    /// Set for a subscribe.
    #[prost(message, optional, tag = "7")]
    subscribe: Option<SubscribeProto>,
    /// Set for a materialized view with a `REFRESH` schedule.
    #[prost(message, optional, tag = "8")]
    refresh: Option<RefreshProto>,
}

#[derive(Clone, PartialEq, Message)]
struct RefreshProto {
    #[prost(uint64, repeated, tag = "1")]
    at: Vec<u64>,
    #[prost(uint64, repeated, tag = "2")]
    every_interval: Vec<u64>,
    #[prost(uint64, repeated, tag = "3")]
    every_aligned_to: Vec<u64>,
}

#[derive(Clone, PartialEq, Message)]
struct SubscribeProto {
    #[prost(bool, tag = "1")]
    snapshot: bool,
    #[prost(uint64, optional, tag = "2")]
    up_to: Option<u64>,
}

#[derive(Clone, PartialEq, Message)]
struct IndexProto {
    #[prost(message, repeated, tag = "1")]
    keys: Vec<protobuf::LogicalExprNode>,
    #[prost(message, optional, tag = "2")]
    schema: Option<protobuf::DfSchema>,
}

#[derive(Clone, PartialEq, Message)]
struct IdProto {
    #[prost(bool, tag = "1")]
    system: bool,
    #[prost(uint64, tag = "2")]
    value: u64,
    #[prost(bool, tag = "3")]
    transient: bool,
}

/// One relational operator.
#[derive(Clone, PartialEq, Message)]
struct RelProto {
    #[prost(oneof = "Node", tags = "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11")]
    node: Option<Node>,
}

mod rel_proto {
    use super::*;

    /// The operator's kind and fields.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub(super) enum Node {
        #[prost(message, tag = "1")]
        Get(GetProto),
        #[prost(message, tag = "2")]
        Constant(ConstantProto),
        #[prost(message, tag = "3")]
        Mfp(Box<MfpProto>),
        #[prost(message, tag = "4")]
        Join(Box<JoinProto>),
        #[prost(message, tag = "5")]
        Reduce(Box<ReduceProto>),
        #[prost(message, tag = "6")]
        Distinct(Box<DistinctProto>),
        #[prost(message, tag = "7")]
        Window(Box<WindowProto>),
        #[prost(message, tag = "8")]
        TopK(Box<TopKProto>),
        #[prost(message, tag = "9")]
        Union(UnionProto),
        #[prost(message, tag = "10")]
        ArrangedGet(ArrangedGetProto),
        #[prost(message, tag = "11")]
        TemporalFilter(Box<TemporalFilterProto>),
    }
}

#[derive(Clone, PartialEq, Message)]
struct GetProto {
    #[prost(message, optional, tag = "1")]
    id: Option<IdProto>,
    #[prost(message, optional, tag = "2")]
    schema: Option<protobuf::Schema>,
}

#[derive(Clone, PartialEq, Message)]
struct ArrangedGetProto {
    #[prost(message, optional, tag = "1")]
    index: Option<IdProto>,
    #[prost(message, repeated, tag = "2")]
    inputs: Vec<IdProto>,
    #[prost(message, optional, tag = "3")]
    schema: Option<protobuf::Schema>,
}

#[derive(Clone, PartialEq, Message)]
struct ConstantProto {
    #[prost(message, optional, tag = "1")]
    schema: Option<protobuf::Schema>,
    /// The rows as an Arrow IPC stream.
    #[prost(bytes = "vec", tag = "2")]
    ipc: Vec<u8>,
}

#[derive(Clone, PartialEq, Message)]
struct MfpProto {
    #[prost(message, optional, boxed, tag = "1")]
    input: Option<Box<RelProto>>,
    #[prost(message, optional, tag = "2")]
    input_schema: Option<protobuf::DfSchema>,
    #[prost(message, optional, tag = "3")]
    filter: Option<protobuf::LogicalExprNode>,
    #[prost(message, repeated, tag = "4")]
    projection: Vec<protobuf::LogicalExprNode>,
    #[prost(message, optional, tag = "5")]
    schema: Option<protobuf::Schema>,
}

#[derive(Clone, PartialEq, Message)]
struct JoinProto {
    #[prost(message, optional, boxed, tag = "1")]
    left: Option<Box<RelProto>>,
    #[prost(message, optional, boxed, tag = "2")]
    right: Option<Box<RelProto>>,
    #[prost(message, optional, tag = "3")]
    left_schema: Option<protobuf::DfSchema>,
    #[prost(message, optional, tag = "4")]
    right_schema: Option<protobuf::DfSchema>,
    #[prost(message, repeated, tag = "5")]
    left_keys: Vec<protobuf::LogicalExprNode>,
    #[prost(message, repeated, tag = "6")]
    right_keys: Vec<protobuf::LogicalExprNode>,
    #[prost(int32, tag = "7")]
    kind: i32,
    #[prost(bool, tag = "8")]
    nulls_equal: bool,
    #[prost(message, optional, tag = "9")]
    filter: Option<protobuf::LogicalExprNode>,
    #[prost(message, optional, tag = "10")]
    pair_schema: Option<protobuf::DfSchema>,
    #[prost(message, optional, tag = "11")]
    schema: Option<protobuf::Schema>,
}

#[derive(Clone, PartialEq, Message)]
struct ReduceProto {
    #[prost(message, optional, boxed, tag = "1")]
    input: Option<Box<RelProto>>,
    #[prost(message, optional, tag = "2")]
    input_schema: Option<protobuf::DfSchema>,
    #[prost(message, repeated, tag = "3")]
    group: Vec<protobuf::LogicalExprNode>,
    #[prost(message, repeated, tag = "4")]
    aggregates: Vec<protobuf::LogicalExprNode>,
    #[prost(message, optional, tag = "5")]
    schema: Option<protobuf::Schema>,
}

#[derive(Clone, PartialEq, Message)]
struct TemporalFilterProto {
    #[prost(message, optional, boxed, tag = "1")]
    input: Option<Box<RelProto>>,
    #[prost(message, optional, tag = "2")]
    input_schema: Option<protobuf::DfSchema>,
    #[prost(message, repeated, tag = "3")]
    bounds: Vec<TimeBoundProto>,
}

#[derive(Clone, PartialEq, Message)]
struct TimeBoundProto {
    #[prost(int32, tag = "1")]
    op: i32,
    #[prost(message, optional, tag = "2")]
    expr: Option<protobuf::LogicalExprNode>,
    #[prost(int64, tag = "3")]
    units: i64,
}

#[derive(Clone, PartialEq, Message)]
struct DistinctProto {
    #[prost(message, optional, boxed, tag = "1")]
    input: Option<Box<RelProto>>,
}

#[derive(Clone, PartialEq, Message)]
struct WindowProto {
    #[prost(message, optional, boxed, tag = "1")]
    input: Option<Box<RelProto>>,
    #[prost(message, optional, tag = "2")]
    input_schema: Option<protobuf::DfSchema>,
    #[prost(message, repeated, tag = "3")]
    window_exprs: Vec<protobuf::LogicalExprNode>,
    #[prost(message, optional, tag = "4")]
    schema: Option<protobuf::Schema>,
}

#[derive(Clone, PartialEq, Message)]
struct TopKProto {
    #[prost(message, optional, boxed, tag = "1")]
    input: Option<Box<RelProto>>,
    #[prost(message, optional, tag = "2")]
    input_schema: Option<protobuf::DfSchema>,
    #[prost(message, repeated, tag = "3")]
    group: Vec<protobuf::LogicalExprNode>,
    #[prost(bool, tag = "4")]
    number: bool,
    #[prost(message, optional, tag = "5")]
    schema: Option<protobuf::Schema>,
    #[prost(message, repeated, tag = "6")]
    order: Vec<protobuf::SortExprNode>,
    #[prost(uint64, tag = "7")]
    offset: u64,
    #[prost(uint64, optional, tag = "8")]
    limit: Option<u64>,
}

#[derive(Clone, PartialEq, Message)]
struct UnionProto {
    #[prost(message, repeated, tag = "1")]
    inputs: Vec<RelProto>,
    #[prost(message, optional, tag = "2")]
    schema: Option<protobuf::Schema>,
}

#[cfg(test)]
mod tests {
    use arrow::array::Int64Array;
    use arrow::datatypes::{DataType, Field};
    use datafusion::functions_aggregate::expr_fn::sum;
    use datafusion::logical_expr::{col, lit};
    use datafusion::prelude::SessionContext;
    use datafusion_proto::logical_plan::DefaultLogicalExtensionCodec;

    use super::*;

    fn codec() -> PlanCodec {
        PlanCodec::new(
            SessionContext::new().task_ctx(),
            Arc::new(DefaultLogicalExtensionCodec {}),
        )
    }

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, true),
            Field::new("v", DataType::Int64, true),
        ]))
    }

    /// Every operator, with expressions, schemas and constants.
    fn plan() -> RelPlan {
        let schema = schema();
        let df = Arc::new(DFSchema::try_from(schema.as_ref().clone()).expect("schema"));
        let get = RelPlan::Get {
            id: GlobalId::User(7),
            schema: Arc::clone(&schema),
        };
        let rows = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(Int64Array::from(vec![Some(1), None])),
                Arc::new(Int64Array::from(vec![Some(10), Some(20)])),
            ],
        )
        .expect("batch");
        let constant = RelPlan::Constant {
            schema: Arc::clone(&schema),
            batches: vec![rows],
        };
        let union = RelPlan::Union {
            inputs: vec![get.clone(), constant],
            schema: Arc::clone(&schema),
        };
        let mfp = RelPlan::Mfp {
            input: Box::new(union),
            input_schema: Arc::clone(&df),
            filter: Some(col("v").gt(lit(3_i64))),
            projection: vec![col("k"), col("v") + lit(1_i64)],
            schema: Arc::clone(&schema),
        };
        let qualified = |q: &str| {
            Arc::new(DFSchema::try_from_qualified_schema(q, schema.as_ref()).expect("schema"))
        };
        let (l, r) = (qualified("l"), qualified("r"));
        let pair = Arc::new(l.join(&r).expect("pair schema"));
        let temporal = RelPlan::TemporalFilter {
            input: Box::new(get),
            input_schema: Arc::clone(&df),
            bounds: vec![
                TimeBound {
                    op: TimeOp::GtEq,
                    expr: col("v"),
                    units: 1,
                },
                TimeBound {
                    op: TimeOp::Lt,
                    expr: col("v") + lit(5_000_i64),
                    units: 1_000,
                },
            ],
        };
        let join = RelPlan::Join {
            left: Box::new(mfp),
            right: Box::new(RelPlan::Distinct {
                input: Box::new(temporal),
            }),
            left_schema: l,
            right_schema: r,
            left_keys: vec![col("l.k")],
            right_keys: vec![col("r.k")],
            kind: JoinKind::LeftAnti,
            nulls_equal: true,
            filter: Some(col("l.v").lt(col("r.v"))),
            pair_schema: pair,
            schema: Arc::clone(&schema),
        };
        let reduce = RelPlan::Reduce {
            input: Box::new(join),
            input_schema: Arc::clone(&df),
            group: vec![col("k")],
            aggregates: vec![sum(col("v"))],
            schema: Arc::clone(&schema),
        };
        RelPlan::TopK {
            input: Box::new(reduce),
            input_schema: df,
            group: vec![],
            number: false,
            schema,
            order: vec![col("v").sort(false, true)],
            offset: 2,
            limit: Some(5),
        }
    }

    #[test]
    fn plans_round_trip() {
        let desc = DataflowDesc {
            id: GlobalId::User(9),
            export: Export::Shard,
            plan: plan(),
            as_of: 41,
            start: 42,
            refresh: Some(freshet_repr::RefreshSchedule {
                at: vec![50],
                every: vec![freshet_repr::RefreshEvery {
                    interval: 10,
                    aligned_to: 3,
                }],
            }),
        };
        let codec = codec();
        let decoded = codec
            .decode(&codec.encode(&desc).expect("encode"))
            .expect("decode");
        assert_eq!(decoded.id, desc.id);
        assert_eq!((decoded.as_of, decoded.start), (41, 42));
        assert_eq!(decoded.refresh, desc.refresh);
        assert_eq!(decoded.plan.to_string(), desc.plan.to_string());
        assert_eq!(decoded.plan.schema(), desc.plan.schema());
        assert_eq!(decoded.plan.inputs(), desc.plan.inputs());
        // Constants keep their rows.
        let constants = |p: &RelPlan| {
            let mut out = Vec::new();
            p.visit(&mut |n| {
                if let RelPlan::Constant { batches, .. } = n {
                    out.extend(batches.iter().cloned());
                }
            });
            out
        };
        assert_eq!(constants(&decoded.plan), constants(&desc.plan));
    }

    #[test]
    fn other_formats_and_garbage_are_refused() {
        let codec = codec();
        let mut proto = DataflowProto::decode(
            codec
                .encode(&DataflowDesc {
                    id: GlobalId::User(1),
                    export: Export::Shard,
                    plan: plan(),
                    as_of: 0,
                    start: 0,
                    refresh: None,
                })
                .expect("encode")
                .as_slice(),
        )
        .expect("decode proto");
        proto.format = "freshet-plan-0/datafusion-1.0.0".into();
        assert!(matches!(
            codec.decode(&proto.encode_to_vec()),
            Err(WireError::Format { .. })
        ));
        assert!(matches!(
            codec.decode(&[0xff, 0xff, 0xff]),
            Err(WireError::Decode(_))
        ));
    }
}
