//! Postgres's catalog inquiry functions that tools call on `pg_catalog`
//! rows: psql's `\d` asks `pg_table_is_visible(c.oid)` and
//! `pg_get_userbyid(c.relowner)`. Each is answered from the catalog
//! version and the session a statement is planned against, fixed into the
//! function when the statement is planned (as a Postgres snapshot fixes
//! what the catalog looks like to one statement).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, StringArray, UInt32Array};
use arrow::datatypes::DataType;
use datafusion::common::{Result, internal_datafusion_err};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

use crate::builtins::{BUILTIN_OWNER_OID, BUILTINS};
use crate::query::resolve::NameResolver;
use crate::udf;

/// The catalog function `name` (unqualified), bound to what `resolver`
/// sees, if `name` is one.
pub fn catalog_function(name: &str, resolver: &NameResolver) -> Option<Arc<ScalarUDF>> {
    let answer = match name {
        "pg_table_is_visible" => Answer::Visible(Arc::new(visible_relations(resolver))),
        "pg_get_userbyid" => Answer::User(Arc::new(HashMap::from([(
            BUILTIN_OWNER_OID,
            resolver.session.user.clone(),
        )]))),
        _ => return None,
    };
    Some(Arc::new(ScalarUDF::new_from_impl(OidFunction {
        answer,
        signature: Signature::any(1, Volatility::Stable),
    })))
}

/// The oids of the relations an unqualified name can reach, as Postgres
/// decides it: `pg_catalog` first, then the search path in order, a name
/// found earlier hiding the same name later.
fn visible_relations(resolver: &NameResolver) -> HashSet<u32> {
    let catalog = resolver.catalog;
    let session = resolver.session;
    let mut seen: HashSet<&str> = HashSet::new();
    let mut visible = HashSet::new();
    for rel in BUILTINS.iter().filter(|r| r.schema == "pg_catalog") {
        seen.insert(rel.name);
        visible.insert(rel.oid());
    }
    let Some(db) = catalog.database_by_name(&session.database) else {
        return visible;
    };
    for schema_name in &session.search_path {
        let Some(schema) = catalog.schema_by_name(db.id, schema_name) else {
            continue;
        };
        for item in catalog.items().filter(|i| i.schema_id == schema.id) {
            if seen.insert(item.name.as_str()) {
                visible.insert(item.oid);
            }
        }
    }
    visible
}

#[derive(Debug, Clone)]
enum Answer {
    /// `pg_table_is_visible`: the visible relations.
    Visible(Arc<HashSet<u32>>),
    /// `pg_get_userbyid`: role names by oid.
    User(Arc<HashMap<u32, String>>),
}

impl Answer {
    fn name(&self) -> &'static str {
        match self {
            Answer::Visible(_) => "pg_table_is_visible",
            Answer::User(_) => "pg_get_userbyid",
        }
    }
}

/// A function of one oid, answered from a table fixed at planning.
#[derive(Debug)]
struct OidFunction {
    answer: Answer,
    signature: Signature,
}

impl PartialEq for OidFunction {
    fn eq(&self, other: &Self) -> bool {
        match (&self.answer, &other.answer) {
            (Answer::Visible(a), Answer::Visible(b)) => Arc::ptr_eq(a, b),
            (Answer::User(a), Answer::User(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Eq for OidFunction {}

impl std::hash::Hash for OidFunction {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.answer.name().hash(state)
    }
}

impl ScalarUDFImpl for OidFunction {
    fn name(&self) -> &str {
        self.answer.name()
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(match self.answer {
            Answer::Visible(_) => DataType::Boolean,
            Answer::User(_) => DataType::Utf8,
        })
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let scalar = udf::all_scalar(&args);
        let input = udf::arg_array(&args, 0)?;
        // Any integer (a literal is int4 or int8) names an oid; values no
        // oid has are NULL, as Postgres answers NULL for no such object.
        let oids = arrow::compute::cast(&input, &DataType::UInt32)?;
        let oids = oids
            .as_any()
            .downcast_ref::<UInt32Array>()
            .ok_or_else(|| internal_datafusion_err!("{}: oids not cast to UInt32", self.name()))?;
        let out: ArrayRef = match &self.answer {
            Answer::Visible(visible) => Arc::new(
                oids.iter()
                    .map(|o| o.map(|o| visible.contains(&o)))
                    .collect::<BooleanArray>(),
            ),
            Answer::User(users) => Arc::new(
                oids.iter()
                    .map(|o| {
                        o.map(|o| {
                            users
                                .get(&o)
                                .cloned()
                                .unwrap_or_else(|| format!("unknown (OID={o})"))
                        })
                    })
                    .collect::<StringArray>(),
            ),
        };
        udf::to_columnar(out, scalar)
    }
}
