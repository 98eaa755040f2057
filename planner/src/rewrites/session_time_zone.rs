//! `timestamptz` operations that PostgreSQL performs in the session's
//! `TimeZone` and Arrow performs in UTC.
//!
//! Freshet holds `timestamptz` as UTC instants. Arrow drops the zone when
//! casting to `timestamp` (keeping the UTC wall clock), reads a
//! `timestamp` cast to `timestamptz` as UTC, takes a `timestamptz`'s date,
//! fields and truncation in UTC, and adds `'1 day'` as 24 hours. PostgreSQL
//! does each of these in local time. This rule (after type coercion)
//! rewrites them through two conversions that read the session zone when
//! the plan runs:
//!
//! - `tstz_local(x)`: the wall-clock `timestamp` of the instant `x`;
//! - `local_tstz(t)`: the instant of the wall-clock time `t`, with
//!   PostgreSQL's reading of repeated and skipped local times
//!   ([`crate::pg::time_zone`]).
//!
//! | expression | becomes |
//! |---|---|
//! | `x::timestamp` / `::date` / `::time` | `tstz_local(x)::…` |
//! | `t::timestamptz` | `local_tstz(t)` |
//! | `date_trunc(u, x)` | `local_tstz(date_trunc(u, tstz_local(x)))` |
//! | `date_part(f, x)` (`extract`) | `date_part(f, tstz_local(x))`, except `epoch` |
//! | `x ± interval` with months or days | `local_tstz(tstz_local(x) ± months/days) ± time` |
//!
//! Under UTC (the default, and what materialized views are maintained
//! under) the conversions are the identity.

use std::sync::Arc;

use arrow::array::{Array, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, IntervalMonthDayNano, TimeUnit};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{DFSchema, Result, ScalarValue, exec_datafusion_err};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::{
    BinaryExpr, ColumnarValue, Expr, ExprSchemable, LogicalPlan, Operator, ScalarFunctionArgs,
    ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::optimizer::AnalyzerRule;

use crate::pg::time_zone::{local_to_utc_micros, session_tz, utc_to_local_micros};
use crate::rewrites::expr_rewrite::rewrite_expressions_up;
use crate::udf;

/// The analyzer rule (see the module documentation).
#[derive(Debug)]
pub struct SessionTimeZone {
    to_local: Arc<ScalarUDF>,
    to_instant: Arc<ScalarUDF>,
}

impl Default for SessionTimeZone {
    fn default() -> Self {
        let udf = |to_local| {
            Arc::new(ScalarUDF::new_from_impl(Conversion {
                to_local,
                signature: Signature::any(1, Volatility::Stable),
            }))
        };
        SessionTimeZone {
            to_local: udf(true),
            to_instant: udf(false),
        }
    }
}

fn is_zoned(t: &DataType) -> bool {
    matches!(t, DataType::Timestamp(_, Some(_)))
}

fn is_naive(t: &DataType) -> bool {
    matches!(t, DataType::Timestamp(_, None))
}

impl SessionTimeZone {
    /// The conversion functions, for registration (dataflow plans decode
    /// them by name).
    pub fn functions(&self) -> Vec<Arc<ScalarUDF>> {
        vec![Arc::clone(&self.to_local), Arc::clone(&self.to_instant)]
    }

    fn local(&self, e: Expr, schema: &DFSchema) -> Result<Expr> {
        let e = e.cast_to(
            &DataType::Timestamp(TimeUnit::Microsecond, Some(freshet_repr::UTC_TZ.into())),
            schema,
        )?;
        Ok(Expr::ScalarFunction(ScalarFunction::new_udf(
            Arc::clone(&self.to_local),
            vec![e],
        )))
    }

    fn instant(&self, e: Expr, schema: &DFSchema) -> Result<Expr> {
        let e = e.cast_to(&DataType::Timestamp(TimeUnit::Microsecond, None), schema)?;
        Ok(Expr::ScalarFunction(ScalarFunction::new_udf(
            Arc::clone(&self.to_instant),
            vec![e],
        )))
    }

    fn rewrite(&self, e: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
        let type_of = |e: &Expr| e.get_type(schema).ok();
        match &e {
            Expr::Cast(c) => {
                let (Some(source), target) = (type_of(&c.expr), c.field.data_type()) else {
                    return Ok(Transformed::no(e));
                };
                let to_local_form = matches!(
                    target,
                    DataType::Timestamp(_, None) | DataType::Date32 | DataType::Time64(_)
                );
                if is_zoned(&source) && to_local_form {
                    let local = self.local(c.expr.as_ref().clone(), schema)?;
                    return Ok(Transformed::yes(local.cast_to(target, schema)?));
                }
                if is_naive(&source) && is_zoned(target) {
                    let instant = self.instant(c.expr.as_ref().clone(), schema)?;
                    return Ok(Transformed::yes(instant.cast_to(target, schema)?));
                }
                Ok(Transformed::no(e))
            }
            Expr::ScalarFunction(f)
                if f.func.name() == "date_trunc"
                    && f.args.len() == 2
                    && type_of(&f.args[1]).is_some_and(|t| is_zoned(&t)) =>
            {
                let zoned = type_of(&f.args[1]).unwrap_or(DataType::Null);
                let mut args = f.args.clone();
                args[1] = self.local(args[1].clone(), schema)?;
                let truncated =
                    Expr::ScalarFunction(ScalarFunction::new_udf(Arc::clone(&f.func), args));
                Ok(Transformed::yes(
                    self.instant(truncated, schema)?.cast_to(&zoned, schema)?,
                ))
            }
            Expr::ScalarFunction(f)
                if f.func.name() == "date_part"
                    && f.args.len() == 2
                    && type_of(&f.args[1]).is_some_and(|t| is_zoned(&t))
                    && !is_epoch(&f.args[0]) =>
            {
                let mut args = f.args.clone();
                args[1] = self.local(args[1].clone(), schema)?;
                Ok(Transformed::yes(Expr::ScalarFunction(
                    ScalarFunction::new_udf(Arc::clone(&f.func), args),
                )))
            }
            Expr::BinaryExpr(b) if matches!(b.op, Operator::Plus | Operator::Minus) => {
                let (left, right) = (type_of(&b.left), type_of(&b.right));
                let (ts, interval, ts_left) = match (&left, &right) {
                    (Some(l), Some(DataType::Interval(_))) if is_zoned(l) => {
                        (b.left.as_ref(), b.right.as_ref(), true)
                    }
                    (Some(DataType::Interval(_)), Some(r))
                        if is_zoned(r) && b.op == Operator::Plus =>
                    {
                        (b.right.as_ref(), b.left.as_ref(), false)
                    }
                    _ => return Ok(Transformed::no(e)),
                };
                let zoned = if ts_left { left } else { right }.unwrap_or(DataType::Null);
                let (calendar, clock) = match interval {
                    Expr::Literal(ScalarValue::IntervalMonthDayNano(Some(v)), _) => {
                        if v.months == 0 && v.days == 0 {
                            return Ok(Transformed::no(e));
                        }
                        (
                            Expr::Literal(
                                ScalarValue::IntervalMonthDayNano(Some(IntervalMonthDayNano::new(
                                    v.months, v.days, 0,
                                ))),
                                None,
                            ),
                            (v.nanoseconds != 0).then(|| {
                                Expr::Literal(
                                    ScalarValue::IntervalMonthDayNano(Some(
                                        IntervalMonthDayNano::new(0, 0, v.nanoseconds),
                                    )),
                                    None,
                                )
                            }),
                        )
                    }
                    Expr::Literal(..) => return Ok(Transformed::no(e)),
                    // A computed interval: all of it in local time.
                    other => (other.clone(), None),
                };
                let local = self.local(ts.clone(), schema)?;
                let moved =
                    Expr::BinaryExpr(BinaryExpr::new(Box::new(local), b.op, Box::new(calendar)));
                let mut out = self.instant(moved, schema)?.cast_to(&zoned, schema)?;
                if let Some(clock) = clock {
                    out = Expr::BinaryExpr(BinaryExpr::new(Box::new(out), b.op, Box::new(clock)));
                }
                Ok(Transformed::yes(out))
            }
            _ => Ok(Transformed::no(e)),
        }
    }
}

/// Whether a `date_part` field is `epoch` (an instant's, not a local
/// time's, property).
fn is_epoch(field: &Expr) -> bool {
    matches!(field, Expr::Literal(ScalarValue::Utf8(Some(f)), _) if f.eq_ignore_ascii_case("epoch"))
}

impl AnalyzerRule for SessionTimeZone {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        rewrite_expressions_up(plan, |e, schema| self.rewrite(e, schema))
    }

    fn name(&self) -> &str {
        "freshet_session_time_zone"
    }
}

/// `tstz_local` (`to_local`) or `local_tstz`.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Conversion {
    to_local: bool,
    signature: Signature,
}

impl ScalarUDFImpl for Conversion {
    fn name(&self) -> &str {
        if self.to_local {
            "tstz_local"
        } else {
            "local_tstz"
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Timestamp(
            TimeUnit::Microsecond,
            (!self.to_local).then(|| freshet_repr::UTC_TZ.into()),
        ))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let tz = session_tz(&args.config_options);
        let input = udf::arg_array(&args, 0)?;
        let input =
            arrow::compute::cast(&input, &DataType::Timestamp(TimeUnit::Microsecond, None))?;
        let input = input
            .as_any()
            .downcast_ref::<TimestampMicrosecondArray>()
            .ok_or_else(|| exec_datafusion_err!("{} takes a timestamp", self.name()))?;
        let out: TimestampMicrosecondArray = input
            .iter()
            .map(|v| {
                v.and_then(|v| {
                    if self.to_local {
                        utc_to_local_micros(&tz, v)
                    } else {
                        local_to_utc_micros(&tz, v)
                    }
                })
            })
            .collect();
        let out = if self.to_local {
            out
        } else {
            out.with_timezone(freshet_repr::UTC_TZ)
        };
        udf::to_columnar(udf::array(out), udf::all_scalar(&args))
    }
}
