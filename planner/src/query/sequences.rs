//! `nextval`: values of the sequences that number `serial` and identity
//! columns. The values come from a [`SequenceSource`] the server provides
//! (it reserves them durably in the catalog); the function only asks for
//! as many as its batch has rows, per sequence.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Int64Array};
use arrow::datatypes::DataType;
use datafusion::common::Result as DfResult;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, TypeSignature,
    Volatility,
};

/// Hands out sequence values.
pub trait SequenceSource: Send + Sync + std::fmt::Debug {
    /// `n` values of the sequence `oid`, in increasing order, each handed
    /// out once ever.
    fn next_values(&self, oid: u32, n: usize) -> DfResult<Vec<i64>>;
}

/// `nextval(regclass)` drawing from `source`.
pub fn nextval(source: Arc<dyn SequenceSource>) -> ScalarUDF {
    ScalarUDF::new_from_impl(NextVal {
        source,
        signature: Signature::one_of(
            vec![
                TypeSignature::Exact(vec![DataType::UInt32]),
                TypeSignature::Exact(vec![DataType::Int64]),
            ],
            Volatility::Volatile,
        ),
    })
}

#[derive(Debug)]
struct NextVal {
    source: Arc<dyn SequenceSource>,
    signature: Signature,
}

impl PartialEq for NextVal {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.source, &other.source)
    }
}

impl Eq for NextVal {}

impl std::hash::Hash for NextVal {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        "nextval".hash(state);
    }
}

impl ScalarUDFImpl for NextVal {
    fn name(&self) -> &str {
        "nextval"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Int64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let rows = args.number_rows;
        let oids = match &args.args[0] {
            ColumnarValue::Scalar(s) => s.to_array_of_size(rows)?,
            ColumnarValue::Array(a) => Arc::clone(a),
        };
        let oids = arrow::compute::cast(&oids, &DataType::Int64)?;
        let oids = oids
            .as_any()
            .downcast_ref::<Int64Array>()
            .ok_or_else(|| datafusion::common::internal_datafusion_err!("nextval: not int8"))?;
        // One request per sequence, handed out in row order.
        let mut wanted: HashMap<u32, usize> = HashMap::new();
        for oid in oids.iter().flatten() {
            *wanted.entry(oid as u32).or_default() += 1;
        }
        let mut values: HashMap<u32, std::vec::IntoIter<i64>> = HashMap::new();
        for (oid, n) in wanted {
            values.insert(oid, self.source.next_values(oid, n)?.into_iter());
        }
        let out: Int64Array = oids
            .iter()
            .map(|oid| oid.and_then(|o| values.get_mut(&(o as u32)).and_then(Iterator::next)))
            .collect();
        Ok(ColumnarValue::Array(Arc::new(out) as ArrayRef))
    }
}
