//! Accumulable aggregates: count, sum, avg, variance, stddev, bool_and and
//! bool_or keep their state in the *difference* of a differential update.
//!
//! Each input row becomes one update `(group key, ())` whose diff is an
//! [`Accum`]: the row's contribution to every aggregate of the reduction
//! (a count, a sum, a sum of squares...). Differential dataflow adds diffs
//! as it consolidates, so the group's accumulated diff *is* its aggregate
//! state, and a change costs O(1) per group however large the group is.
//! The final values are computed from that state by DataFusion's own
//! accumulators (`merge_batch` + `evaluate`) where their result types or
//! rounding matter (avg, variance), so views agree with ad hoc queries.
//!
//! Integer and decimal sums accumulate exactly in `i128` (decimals as
//! unscaled integers), with the range of the result type checked when the
//! value is produced. Float sums accumulate in `f64`: like any float sum
//! maintained under retractions, a long history can leave rounding noise
//! that a recomputation would not have.

use std::cmp::Ordering;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Decimal128Array, Float64Array, RecordBatch, UInt64Array,
};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Decimal128Type, DecimalType};
use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::error::DataFusionError;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::aggregate::AggregateFunctionExpr;
use differential_dataflow::difference::{IsZero, Multiply, Semigroup};
use freshet_repr::sqlstate;
use serde::{Deserialize, Serialize};

/// One component of an aggregate state.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub(crate) enum Slot {
    /// Counts, integer and decimal sums.
    Int(i128),
    /// Float sums and sums of squares.
    Float(f64),
}

impl Slot {
    fn int(&self) -> i128 {
        match self {
            Slot::Int(v) => *v,
            Slot::Float(f) => *f as i128,
        }
    }

    fn float(&self) -> f64 {
        match self {
            Slot::Int(v) => *v as f64,
            Slot::Float(f) => *f,
        }
    }

    fn is_zero(&self) -> bool {
        match self {
            Slot::Int(v) => *v == 0,
            Slot::Float(f) => *f == 0.0,
        }
    }

    fn add(&mut self, other: &Slot) {
        match (self, other) {
            (Slot::Int(a), Slot::Int(b)) => *a = a.wrapping_add(*b),
            (Slot::Float(a), b) => *a += b.float(),
            (a @ Slot::Int(_), Slot::Float(b)) => *a = Slot::Float(a.float() + b),
        }
    }

    fn scale(&mut self, by: i64) {
        match self {
            Slot::Int(v) => *v = v.wrapping_mul(by as i128),
            Slot::Float(f) => *f *= by as f64,
        }
    }

    fn cmp_total(&self, other: &Slot) -> Ordering {
        match (self, other) {
            (Slot::Int(a), Slot::Int(b)) => a.cmp(b),
            (Slot::Float(a), Slot::Float(b)) => a.total_cmp(b),
            (Slot::Int(_), Slot::Float(_)) => Ordering::Less,
            (Slot::Float(_), Slot::Int(_)) => Ordering::Greater,
        }
    }
}

/// The accumulated state of all aggregates of one group, as a difference:
/// `rows` counts the group's rows, `slots` hold each aggregate's parts.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct Accum {
    pub rows: i64,
    pub slots: Vec<Slot>,
}

impl PartialEq for Accum {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Accum {}
impl PartialOrd for Accum {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Accum {
    fn cmp(&self, other: &Self) -> Ordering {
        self.rows.cmp(&other.rows).then_with(|| {
            let mut a = self.slots.iter();
            let mut b = other.slots.iter();
            loop {
                match (a.next(), b.next()) {
                    (None, None) => return Ordering::Equal,
                    (None, Some(_)) => return Ordering::Less,
                    (Some(_), None) => return Ordering::Greater,
                    (Some(x), Some(y)) => match x.cmp_total(y) {
                        Ordering::Equal => {}
                        o => return o,
                    },
                }
            }
        })
    }
}

impl IsZero for Accum {
    fn is_zero(&self) -> bool {
        self.rows == 0 && self.slots.iter().all(Slot::is_zero)
    }
}

impl Semigroup for Accum {
    fn plus_equals(&mut self, rhs: &Self) {
        self.rows += rhs.rows;
        if self.slots.len() < rhs.slots.len() {
            self.slots.resize(rhs.slots.len(), Slot::Int(0));
        }
        for (a, b) in self.slots.iter_mut().zip(&rhs.slots) {
            a.add(b);
        }
    }
}

impl Multiply<i64> for Accum {
    type Output = Accum;
    fn multiply(mut self, rhs: &i64) -> Accum {
        self.rows *= rhs;
        for s in &mut self.slots {
            s.scale(*rhs);
        }
        self
    }
}

/// How an input value is summed.
#[derive(Clone, Copy, Debug)]
enum Numeric {
    /// Integers, exactly in i128.
    Int,
    /// Decimal128 unscaled values at the input's scale.
    Decimal,
    /// Floats.
    Float,
}

/// Which accumulable aggregate.
#[derive(Clone, Copy, Debug)]
enum Kind {
    /// `[non-null count]`
    Count,
    /// `[non-null count, sum]`
    Sum(Numeric),
    /// `[non-null count, sum]`, finished by DataFusion's avg.
    Avg(Numeric),
    /// `[n, sum, sum of squares]`, finished by DataFusion's variance.
    Variance,
    /// `[non-null count, true count]`
    BoolAnd,
    /// `[non-null count, true count]`
    BoolOr,
}

impl Kind {
    fn width(&self) -> usize {
        match self {
            Kind::Count => 1,
            Kind::Sum(_) | Kind::Avg(_) | Kind::BoolAnd | Kind::BoolOr => 2,
            Kind::Variance => 3,
        }
    }
}

/// One accumulable aggregate with its evaluators.
pub(crate) struct AccumAgg {
    kind: Kind,
    agg: Arc<AggregateFunctionExpr>,
    filter: Option<Arc<dyn PhysicalExpr>>,
    arg: Arc<dyn PhysicalExpr>,
}

impl AccumAgg {
    /// The accumulable form of an aggregate, if it has one.
    pub fn new(
        agg: &Arc<AggregateFunctionExpr>,
        filter: &Option<Arc<dyn PhysicalExpr>>,
        args: &[Arc<dyn PhysicalExpr>],
        input: &arrow::datatypes::Schema,
    ) -> Option<AccumAgg> {
        if agg.is_distinct() || args.len() != 1 {
            return None;
        }
        let arg_type = args[0].data_type(input).ok()?;
        let numeric = match arg_type {
            DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::UInt64 => Some(Numeric::Int),
            DataType::Decimal32(..) | DataType::Decimal64(..) | DataType::Decimal128(..) => {
                Some(Numeric::Decimal)
            }
            DataType::Float16 | DataType::Float32 | DataType::Float64 => Some(Numeric::Float),
            _ => None,
        };
        let output = agg.field().data_type().clone();
        let kind = match agg.fun().name() {
            "count" => Kind::Count,
            "sum" => {
                let n = numeric?;
                // The result type must hold what we accumulate.
                let fits = matches!(
                    (n, &output),
                    (Numeric::Int, DataType::Int64 | DataType::UInt64)
                        | (Numeric::Decimal, DataType::Decimal128(..))
                        | (Numeric::Float, DataType::Float64)
                );
                if !fits {
                    return None;
                }
                Kind::Sum(n)
            }
            "avg" => Kind::Avg(numeric?),
            "var" | "var_pop" | "stddev" | "stddev_pop" => {
                numeric?;
                Kind::Variance
            }
            "bool_and" if arg_type == DataType::Boolean => Kind::BoolAnd,
            "bool_or" if arg_type == DataType::Boolean => Kind::BoolOr,
            _ => return None,
        };
        Some(AccumAgg {
            kind,
            agg: Arc::clone(agg),
            filter: filter.clone(),
            arg: Arc::clone(&args[0]),
        })
    }

    /// Append each row's contribution to `out` (one slot vector per row).
    fn contribute(&self, batch: &RecordBatch, out: &mut [Vec<Slot>]) -> DfResult<()> {
        let n = batch.num_rows();
        let arg = self.arg.evaluate(batch)?.into_array(n)?;
        let keep = match &self.filter {
            Some(f) => Some(super::compile::predicate(f, batch)?),
            None => None,
        };
        let included = |i: usize| arg.is_valid(i) && keep.as_ref().is_none_or(|k| k.value(i));
        let one = |i: usize| Slot::Int(i128::from(included(i)));
        match self.kind {
            Kind::Count => {
                for (i, slots) in out.iter_mut().enumerate() {
                    slots.push(one(i));
                }
            }
            Kind::Sum(num) | Kind::Avg(num) => {
                let values = numeric_values(&arg, num)?;
                for (i, slots) in out.iter_mut().enumerate() {
                    slots.push(one(i));
                    slots.push(if included(i) { values[i] } else { zero(num) });
                }
            }
            Kind::Variance => {
                let floats = cast(&arg, &DataType::Float64)?;
                let floats = floats.as_primitive::<arrow::datatypes::Float64Type>();
                for (i, slots) in out.iter_mut().enumerate() {
                    let x = if included(i) { floats.value(i) } else { 0.0 };
                    slots.push(one(i));
                    slots.push(Slot::Float(x));
                    slots.push(Slot::Float(x * x));
                }
            }
            Kind::BoolAnd | Kind::BoolOr => {
                let bools = arg.as_any().downcast_ref::<BooleanArray>().ok_or_else(|| {
                    DataFusionError::Internal("bool aggregate of non-bool".into())
                })?;
                for (i, slots) in out.iter_mut().enumerate() {
                    slots.push(one(i));
                    slots.push(Slot::Int(i128::from(included(i) && bools.value(i))));
                }
            }
        }
        Ok(())
    }

    /// The aggregate's value from its slots.
    fn finish(&self, slots: &[Slot]) -> DfResult<ScalarValue> {
        let output = self.agg.field().data_type().clone();
        let nonnull = slots[0].int();
        match self.kind {
            Kind::Count => Ok(ScalarValue::Int64(Some(nonnull as i64))),
            _ if nonnull == 0 => ScalarValue::try_from(&output),
            Kind::Sum(_) => sum_value(&slots[1], &output),
            Kind::Avg(_) | Kind::Variance => self.finish_with_datafusion(slots),
            Kind::BoolAnd => Ok(ScalarValue::Boolean(Some(slots[1].int() == nonnull))),
            Kind::BoolOr => Ok(ScalarValue::Boolean(Some(slots[1].int() > 0))),
        }
    }

    /// Rebuild DataFusion's intermediate state from the slots, merge it
    /// into a fresh accumulator and evaluate: the same result types and
    /// rounding as the query computes ad hoc.
    fn finish_with_datafusion(&self, slots: &[Slot]) -> DfResult<ScalarValue> {
        let fields = self.agg.state_fields()?;
        let n = slots[0].int();
        let count: ArrayRef = Arc::new(UInt64Array::from(vec![n as u64]));
        let state: Vec<ArrayRef> = match self.kind {
            Kind::Avg(_) => {
                let sum_type = fields
                    .get(1)
                    .map(|f| f.data_type().clone())
                    .ok_or_else(|| DataFusionError::Internal("avg state".into()))?;
                let sum: ArrayRef = match sum_type {
                    DataType::Decimal128(p, s) => Arc::new(
                        Decimal128Array::from(vec![slots[1].int()])
                            .with_precision_and_scale(p, s)?,
                    ),
                    DataType::Float64 => Arc::new(Float64Array::from(vec![slots[1].float()])),
                    other => {
                        return Err(DataFusionError::Internal(format!(
                            "unexpected avg state type {other}"
                        )));
                    }
                };
                vec![count, sum]
            }
            Kind::Variance => {
                let nf = n as f64;
                let sum = slots[1].float();
                let mean = sum / nf;
                // Sum of squared deviations from the mean.
                let m2 = (slots[2].float() - sum * mean).max(0.0);
                vec![
                    count,
                    Arc::new(Float64Array::from(vec![mean])),
                    Arc::new(Float64Array::from(vec![m2])),
                ]
            }
            _ => return Err(DataFusionError::Internal("not a merged aggregate".into())),
        };
        let mut acc = self.agg.create_accumulator()?;
        acc.merge_batch(&state)?;
        acc.evaluate()
    }
}

fn zero(num: Numeric) -> Slot {
    match num {
        Numeric::Float => Slot::Float(0.0),
        _ => Slot::Int(0),
    }
}

/// Input values as slots (invalid entries are read but never used).
fn numeric_values(arg: &ArrayRef, num: Numeric) -> DfResult<Vec<Slot>> {
    Ok(match num {
        Numeric::Int => {
            let d = cast(arg, &DataType::Decimal128(38, 0))?;
            d.as_primitive::<Decimal128Type>()
                .values()
                .iter()
                .map(|v| Slot::Int(*v))
                .collect()
        }
        Numeric::Decimal => {
            let scale = match arg.data_type() {
                DataType::Decimal32(_, s)
                | DataType::Decimal64(_, s)
                | DataType::Decimal128(_, s) => *s,
                _ => 0,
            };
            let d = cast(arg, &DataType::Decimal128(38, scale))?;
            d.as_primitive::<Decimal128Type>()
                .values()
                .iter()
                .map(|v| Slot::Int(*v))
                .collect()
        }
        Numeric::Float => {
            let f = cast(arg, &DataType::Float64)?;
            f.as_primitive::<arrow::datatypes::Float64Type>()
                .values()
                .iter()
                .map(|v| Slot::Float(*v))
                .collect()
        }
    })
}

/// A sum as a value of the aggregate's result type, range-checked.
fn sum_value(slot: &Slot, output: &DataType) -> DfResult<ScalarValue> {
    let overflow = |what: &str| {
        DataFusionError::External(Box::new(freshet_repr::SqlStateError {
            code: sqlstate::NUMERIC_VALUE_OUT_OF_RANGE,
            message: format!("{what} out of range"),
        }))
    };
    match output {
        DataType::Int64 => i64::try_from(slot.int())
            .map(|v| ScalarValue::Int64(Some(v)))
            .map_err(|_| overflow("bigint")),
        DataType::UInt64 => u64::try_from(slot.int())
            .map(|v| ScalarValue::UInt64(Some(v)))
            .map_err(|_| overflow("bigint")),
        DataType::Decimal128(p, s) => {
            let v = slot.int();
            Decimal128Type::validate_decimal_precision(v, *p, *s)
                .map_err(|_| overflow("numeric field"))?;
            Ok(ScalarValue::Decimal128(Some(v), *p, *s))
        }
        DataType::Float64 => Ok(ScalarValue::Float64(Some(slot.float()))),
        other => Err(DataFusionError::Internal(format!(
            "unexpected sum type {other}"
        ))),
    }
}

/// All aggregates of a reduction, when every one is accumulable.
pub(crate) struct Accumulable {
    aggs: Vec<AccumAgg>,
}

impl Accumulable {
    /// Accumulable form of these aggregates, if all have one.
    pub fn new(aggs: Vec<Option<AccumAgg>>) -> Option<Self> {
        Some(Accumulable {
            aggs: aggs.into_iter().collect::<Option<Vec<_>>>()?,
        })
    }

    /// Each row's contribution to the group state.
    pub fn contributions(&self, batch: &RecordBatch) -> DfResult<Vec<Accum>> {
        let width: usize = self.aggs.iter().map(|a| a.kind.width()).sum();
        let mut slots: Vec<Vec<Slot>> = (0..batch.num_rows())
            .map(|_| Vec::with_capacity(width))
            .collect();
        for a in &self.aggs {
            a.contribute(batch, &mut slots)?;
        }
        Ok(slots
            .into_iter()
            .map(|slots| Accum { rows: 1, slots })
            .collect())
    }

    /// The aggregate values of a group's accumulated state.
    pub fn finish(&self, accum: &Accum) -> DfResult<Vec<ScalarValue>> {
        let mut at = 0;
        let mut out = Vec::with_capacity(self.aggs.len());
        let empty: Vec<Slot>;
        let slots = if accum.slots.is_empty() {
            // A global aggregate over no rows.
            let width: usize = self.aggs.iter().map(|a| a.kind.width()).sum();
            empty = vec![Slot::Int(0); width];
            &empty
        } else {
            &accum.slots
        };
        for a in &self.aggs {
            let w = a.kind.width();
            let part = slots
                .get(at..at + w)
                .ok_or_else(|| DataFusionError::Internal("short aggregate state".into()))?;
            out.push(a.finish(part)?);
            at += w;
        }
        Ok(out)
    }
}

impl super::arranged::HeapSize for Accum {
    fn heap_size(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<Slot>()
    }
}
