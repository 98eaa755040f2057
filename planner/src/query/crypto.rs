//! `hmac(data, key, type)` (pgcrypto's, which Materialize has too) and
//! `constant_time_eq(a, b)`: what a webhook `CHECK` needs to verify a
//! signed request, e.g.
//! `constant_time_eq(decode(headers->>'x-signature', 'hex'), hmac(body, key, 'sha256'))`.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BinaryArray, BooleanArray};
use arrow::datatypes::DataType;
use datafusion::common::{Result, exec_err};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use hmac::{Hmac, KeyInit, Mac};

/// Both functions.
pub fn functions() -> Vec<Arc<ScalarUDF>> {
    vec![
        Arc::new(ScalarUDF::new_from_impl(HmacFn {
            signature: Signature::user_defined(Volatility::Immutable),
        })),
        Arc::new(ScalarUDF::new_from_impl(ConstantTimeEq {
            signature: Signature::user_defined(Volatility::Immutable),
        })),
    ]
}

/// Text arguments are their UTF-8 bytes; `bytea` stays as it is.
fn coerce_bytes(arg_types: &[DataType], n: usize, name: &str) -> Result<Vec<DataType>> {
    if arg_types.len() != n {
        return exec_err!("function {name} takes {n} arguments");
    }
    Ok(arg_types
        .iter()
        .map(|t| match t {
            DataType::Binary | DataType::LargeBinary | DataType::BinaryView => DataType::Binary,
            _ => DataType::Utf8,
        })
        .collect())
}

/// The bytes of row `i` of a text or binary array (`None`: NULL).
fn bytes_at(array: &ArrayRef, i: usize) -> Option<&[u8]> {
    if array.is_null(i) {
        return None;
    }
    match array.data_type() {
        DataType::Binary => Some(array.as_binary::<i32>().value(i)),
        DataType::Utf8 => Some(array.as_string::<i32>().value(i).as_bytes()),
        _ => None,
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct HmacFn {
    signature: Signature,
}

fn mac<M: Mac + KeyInit>(key: &[u8], data: &[u8]) -> Vec<u8> {
    // HMAC takes a key of any length.
    match <M as KeyInit>::new_from_slice(key) {
        Ok(mut m) => {
            m.update(data);
            m.finalize().into_bytes().to_vec()
        }
        Err(_) => Vec::new(),
    }
}

/// `hmac(data, key, type)` for one row.
fn hmac_of(data: &[u8], key: &[u8], kind: &str) -> Result<Vec<u8>> {
    Ok(match kind.to_ascii_lowercase().as_str() {
        "md5" => mac::<Hmac<md5::Md5>>(key, data),
        "sha1" => mac::<Hmac<sha1::Sha1>>(key, data),
        "sha224" => mac::<Hmac<sha2::Sha224>>(key, data),
        "sha256" => mac::<Hmac<sha2::Sha256>>(key, data),
        "sha384" => mac::<Hmac<sha2::Sha384>>(key, data),
        "sha512" => mac::<Hmac<sha2::Sha512>>(key, data),
        other => {
            return Err(crate::error::sqlstate_error(
                freshet_repr::sqlstate::INVALID_PARAMETER_VALUE,
                format!("Cannot use \"{other}\", no such hash algorithm"),
            ));
        }
    })
}

impl ScalarUDFImpl for HmacFn {
    fn name(&self) -> &str {
        "hmac"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let mut types = coerce_bytes(arg_types, 3, "hmac")?;
        types[2] = DataType::Utf8;
        Ok(types)
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Binary)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let scalar = crate::udf::all_scalar(&args);
        let data = crate::udf::arg_array(&args, 0)?;
        let key = crate::udf::arg_array(&args, 1)?;
        let kind = crate::udf::arg_array(&args, 2)?;
        let kinds = kind.as_string::<i32>();
        let mut out = Vec::with_capacity(data.len());
        for i in 0..data.len() {
            out.push(
                match (bytes_at(&data, i), bytes_at(&key, i), kinds.is_valid(i)) {
                    (Some(d), Some(k), true) => Some(hmac_of(d, k, kinds.value(i))?),
                    _ => None,
                },
            );
        }
        let out: BinaryArray = out.iter().map(|v| v.as_deref()).collect();
        crate::udf::to_columnar(Arc::new(out), scalar)
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct ConstantTimeEq {
    signature: Signature,
}

/// Equality that takes the same time wherever the inputs differ (it
/// still reveals whether their lengths differ, as every such comparison
/// does), so a signature cannot be guessed byte by byte from timings.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

impl ScalarUDFImpl for ConstantTimeEq {
    fn name(&self) -> &str {
        "constant_time_eq"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let types = coerce_bytes(arg_types, 2, "constant_time_eq")?;
        // Both sides the same type: bytea if either is.
        let common = if types.contains(&DataType::Binary) {
            DataType::Binary
        } else {
            DataType::Utf8
        };
        Ok(vec![common.clone(), common])
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Boolean)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let scalar = crate::udf::all_scalar(&args);
        let a = crate::udf::arg_array(&args, 0)?;
        let b = crate::udf::arg_array(&args, 1)?;
        let out: BooleanArray = (0..a.len())
            .map(|i| match (bytes_at(&a, i), bytes_at(&b, i)) {
                (Some(x), Some(y)) => Some(constant_time_eq(x, y)),
                _ => None,
            })
            .collect();
        crate::udf::to_columnar(Arc::new(out), scalar)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_rfc_4231_and_compares_in_constant_time() {
        // RFC 4231, test case 2.
        let mac = hmac_of(b"what do ya want for nothing?", b"Jefe", "SHA256").unwrap();
        let hex: String = mac.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert!(hmac_of(b"x", b"k", "sha3").is_err());
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }
}
