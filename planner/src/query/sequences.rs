//! Sequence functions: `nextval`, `currval`, `lastval`, `setval`, over the
//! sequences of `serial` and identity columns and those `CREATE SEQUENCE`
//! makes. The values come from a [`SequenceSource`] the server provides
//! (it reserves them durably in the catalog); `nextval` only asks for as
//! many as its batch has rows, per sequence. What `currval` and `lastval`
//! answer is the session's own ([`SessionSequences`]), as in PostgreSQL.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray, Int64Array};
use arrow::datatypes::DataType;
use datafusion::common::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, TypeSignature,
    Volatility,
};
use freshet_repr::{SqlStateError, sqlstate};

/// Hands out sequence values.
pub trait SequenceSource: Send + Sync + std::fmt::Debug {
    /// `n` values of the sequence `oid`, in the order the sequence gives
    /// them, each handed out once ever (until `setval` or a cycle comes
    /// back to it).
    fn next_values(&self, oid: u32, n: usize) -> DfResult<Vec<i64>>;

    /// `setval`: the next value is `value` (`is_called` false) or the one
    /// after it.
    fn set_value(&self, oid: u32, value: i64, is_called: bool) -> DfResult<()>;

    /// The sequence's name as messages show it.
    fn name(&self, oid: u32) -> String;
}

/// What one session's `nextval`/`setval` calls returned last, per
/// sequence, for `currval` and `lastval`.
#[derive(Debug, Default)]
pub struct SessionSequences {
    state: std::sync::Mutex<LastValues>,
}

#[derive(Debug, Default)]
struct LastValues {
    by_sequence: HashMap<u32, i64>,
    last: Option<u32>,
}

impl SessionSequences {
    fn lock(&self) -> std::sync::MutexGuard<'_, LastValues> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn record(&self, oid: u32, value: i64) {
        let mut s = self.lock();
        s.by_sequence.insert(oid, value);
        s.last = Some(oid);
    }
}

/// The session's sequence functions (`nextval` recording what it hands
/// out, `currval`, `lastval`, `setval`), registered on its state.
pub fn session_functions(
    source: Arc<dyn SequenceSource>,
    session: Arc<SessionSequences>,
) -> Vec<ScalarUDF> {
    vec![
        nextval_recording(Arc::clone(&source), Some(Arc::clone(&session))),
        ScalarUDF::new_from_impl(CurrVal {
            source: Arc::clone(&source),
            session: Arc::clone(&session),
            signature: oid_signature(),
        }),
        ScalarUDF::new_from_impl(LastVal {
            session: Arc::clone(&session),
            signature: Signature::exact(vec![], Volatility::Volatile),
        }),
        ScalarUDF::new_from_impl(SetVal {
            source,
            session,
            signature: Signature::user_defined(Volatility::Volatile),
        }),
    ]
}

fn oid_signature() -> Signature {
    Signature::one_of(
        vec![
            TypeSignature::Exact(vec![DataType::UInt32]),
            TypeSignature::Exact(vec![DataType::Int64]),
        ],
        Volatility::Volatile,
    )
}

/// An error with PostgreSQL's SQLSTATE, from inside a function.
fn sql_error(code: &'static str, message: String) -> DataFusionError {
    DataFusionError::External(Box::new(SqlStateError { code, message }))
}

/// The oids argument `i` holds, one per row.
fn oids_of(args: &ScalarFunctionArgs, i: usize) -> DfResult<Int64Array> {
    let rows = args.number_rows;
    let oids = match &args.args[i] {
        ColumnarValue::Scalar(s) => s.to_array_of_size(rows)?,
        ColumnarValue::Array(a) => Arc::clone(a),
    };
    let oids = arrow::compute::cast(&oids, &DataType::Int64)?;
    oids.as_any()
        .downcast_ref::<Int64Array>()
        .cloned()
        .ok_or_else(|| datafusion::common::internal_datafusion_err!("sequence oid: not int8"))
}

/// `nextval(regclass)` drawing from `source` (for plans outside any
/// session: `currval` then has nothing to report).
pub fn nextval(source: Arc<dyn SequenceSource>) -> ScalarUDF {
    nextval_recording(source, None)
}

fn nextval_recording(
    source: Arc<dyn SequenceSource>,
    session: Option<Arc<SessionSequences>>,
) -> ScalarUDF {
    ScalarUDF::new_from_impl(NextVal {
        source,
        session,
        signature: oid_signature(),
    })
}

#[derive(Debug)]
struct NextVal {
    source: Arc<dyn SequenceSource>,
    session: Option<Arc<SessionSequences>>,
    signature: Signature,
}

impl PartialEq for NextVal {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.source, &other.source)
            && match (&self.session, &other.session) {
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                (None, None) => true,
                _ => false,
            }
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
        let oids = oids_of(&args, 0)?;
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
            .map(|oid| {
                let oid = oid? as u32;
                let v = values.get_mut(&oid).and_then(Iterator::next)?;
                if let Some(session) = &self.session {
                    session.record(oid, v);
                }
                Some(v)
            })
            .collect();
        Ok(ColumnarValue::Array(Arc::new(out) as ArrayRef))
    }
}

/// Identity for the function structs: one per session, compared by the
/// state they share.
macro_rules! session_function_identity {
    ($t:ident, $name:literal) => {
        impl PartialEq for $t {
            fn eq(&self, other: &Self) -> bool {
                Arc::ptr_eq(&self.session, &other.session)
            }
        }
        impl Eq for $t {}
        impl std::hash::Hash for $t {
            fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
                $name.hash(state);
            }
        }
    };
}

/// `currval(regclass)`: what this session's last `nextval` of the
/// sequence returned (55000 before there is one).
#[derive(Debug)]
struct CurrVal {
    source: Arc<dyn SequenceSource>,
    session: Arc<SessionSequences>,
    signature: Signature,
}

session_function_identity!(CurrVal, "currval");

impl ScalarUDFImpl for CurrVal {
    fn name(&self) -> &str {
        "currval"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Int64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let oids = oids_of(&args, 0)?;
        let state = self.session.lock();
        let mut out = Vec::with_capacity(oids.len());
        for oid in oids.iter() {
            out.push(match oid {
                None => None,
                Some(oid) => {
                    let oid = oid as u32;
                    match state.by_sequence.get(&oid) {
                        Some(v) => Some(*v),
                        None => {
                            return Err(sql_error(
                                sqlstate::OBJECT_NOT_IN_PREREQUISITE_STATE,
                                format!(
                                    "currval of sequence \"{}\" is not yet defined in this session",
                                    self.source.name(oid)
                                ),
                            ));
                        }
                    }
                }
            });
        }
        Ok(ColumnarValue::Array(
            Arc::new(Int64Array::from(out)) as ArrayRef
        ))
    }
}

/// `lastval()`: what this session's last `nextval` of any sequence
/// returned.
#[derive(Debug)]
struct LastVal {
    session: Arc<SessionSequences>,
    signature: Signature,
}

session_function_identity!(LastVal, "lastval");

impl ScalarUDFImpl for LastVal {
    fn name(&self) -> &str {
        "lastval"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Int64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let state = self.session.lock();
        let value = state
            .last
            .and_then(|oid| state.by_sequence.get(&oid).copied())
            .ok_or_else(|| {
                sql_error(
                    sqlstate::OBJECT_NOT_IN_PREREQUISITE_STATE,
                    "lastval is not yet defined in this session".into(),
                )
            })?;
        Ok(ColumnarValue::Array(
            Arc::new(Int64Array::from(vec![value; args.number_rows])) as ArrayRef,
        ))
    }
}

/// `setval(regclass, value [, is_called])`: where the sequence goes on
/// from; returns `value`. With `is_called` (the default) `value` counts as
/// handed out: `nextval` returns the one after it, and this session's
/// `currval` is `value`.
#[derive(Debug)]
struct SetVal {
    source: Arc<dyn SequenceSource>,
    session: Arc<SessionSequences>,
    signature: Signature,
}

session_function_identity!(SetVal, "setval");

impl ScalarUDFImpl for SetVal {
    fn name(&self) -> &str {
        "setval"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> DfResult<Vec<DataType>> {
        match arg_types {
            [seq, _] | [seq, _, _] => {
                let mut out = vec![
                    if *seq == DataType::UInt32 {
                        DataType::UInt32
                    } else {
                        DataType::Int64
                    },
                    DataType::Int64,
                ];
                if arg_types.len() == 3 {
                    out.push(DataType::Boolean);
                }
                Ok(out)
            }
            _ => Err(sql_error(
                sqlstate::UNDEFINED_FUNCTION,
                format!(
                    "function setval({}) does not exist",
                    arg_types
                        .iter()
                        .map(|t| freshet_repr::PgType::from_arrow(t)
                            .map_or_else(|| t.to_string(), |p| p.sql_name()))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )),
        }
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Int64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let rows = args.number_rows;
        let oids = oids_of(&args, 0)?;
        let values = oids_of(&args, 1)?;
        let called = match args.args.get(2) {
            None => None,
            Some(c) => {
                let c = match c {
                    ColumnarValue::Scalar(s) => s.to_array_of_size(rows)?,
                    ColumnarValue::Array(a) => Arc::clone(a),
                };
                Some(
                    c.as_any()
                        .downcast_ref::<BooleanArray>()
                        .cloned()
                        .ok_or_else(|| {
                            datafusion::common::internal_datafusion_err!("setval: not boolean")
                        })?,
                )
            }
        };
        let mut out = Vec::with_capacity(rows);
        for i in 0..rows {
            if oids.is_null(i) || values.is_null(i) {
                out.push(None);
                continue;
            }
            let is_called = match &called {
                None => true,
                Some(c) if c.is_null(i) => {
                    out.push(None);
                    continue;
                }
                Some(c) => c.value(i),
            };
            let (oid, value) = (oids.value(i) as u32, values.value(i));
            self.source.set_value(oid, value, is_called)?;
            if is_called {
                self.session.record(oid, value);
            }
            out.push(Some(value));
        }
        Ok(ColumnarValue::Array(
            Arc::new(Int64Array::from(out)) as ArrayRef
        ))
    }
}
