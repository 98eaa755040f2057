//! `single_value(x)`: the value of a group's only row, NULL for no rows,
//! and Postgres's 21000 ("more than one row returned by a subquery used as
//! an expression") for more. A scalar subquery that does not aggregate is
//! planned as one that aggregates with it
//! ([`crate::rewrites::correlated_subqueries`]), which is what lets
//! DataFusion decorrelate it, with Postgres's cardinality rule kept.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, UInt64Array};
use arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::format_state_name;
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Signature, Volatility,
};

use crate::rewrites::correlated_subqueries::SINGLE_VALUE;

/// The aggregate.
pub fn udaf() -> Arc<AggregateUDF> {
    Arc::new(AggregateUDF::new_from_impl(SingleValue {
        signature: Signature::any(1, Volatility::Immutable),
    }))
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct SingleValue {
    signature: Signature,
}

impl AggregateUDFImpl for SingleValue {
    fn name(&self) -> &str {
        SINGLE_VALUE
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(arg_types.first().cloned().unwrap_or(DataType::Null))
    }

    fn accumulator(&self, acc_args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(SingleValueAccumulator {
            value: ScalarValue::try_from(acc_args.return_field.data_type())?,
            rows: 0,
        }))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(vec![
            Arc::new(
                args.return_field
                    .as_ref()
                    .clone()
                    .with_name(format_state_name(args.name, "value"))
                    .with_nullable(true),
            ),
            Arc::new(Field::new(
                format_state_name(args.name, "rows"),
                DataType::UInt64,
                true,
            )),
        ])
    }
}

#[derive(Debug)]
struct SingleValueAccumulator {
    value: ScalarValue,
    rows: u64,
}

impl SingleValueAccumulator {
    fn add(&mut self, value: ScalarValue, rows: u64) -> Result<()> {
        if rows == 0 {
            return Ok(());
        }
        self.rows += rows;
        if self.rows > 1 {
            return Err(crate::error::sqlstate_error(
                freshet_repr::sqlstate::CARDINALITY_VIOLATION,
                "more than one row returned by a subquery used as an expression",
            ));
        }
        self.value = value;
        Ok(())
    }
}

impl Accumulator for SingleValueAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let Some(values) = values.first() else {
            return Ok(());
        };
        for i in 0..values.len() {
            self.add(ScalarValue::try_from_array(values, i)?, 1)?;
        }
        Ok(())
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        Ok(self.value.clone())
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self) + self.value.size()
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![
            self.value.clone(),
            ScalarValue::UInt64(Some(self.rows)),
        ])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let (Some(values), Some(rows)) = (states.first(), states.get(1)) else {
            return Ok(());
        };
        let Some(rows) = rows.as_any().downcast_ref::<UInt64Array>() else {
            return Err(datafusion::common::internal_datafusion_err!(
                "single_value: row counts are not UInt64"
            ));
        };
        for i in 0..values.len() {
            let n = if rows.is_null(i) { 0 } else { rows.value(i) };
            self.add(ScalarValue::try_from_array(values, i)?, n)?;
        }
        Ok(())
    }
}
