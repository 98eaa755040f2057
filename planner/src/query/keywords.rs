//! `pg_get_keywords()`: the words the SQL parser treats as keywords, which
//! editors (DBeaver, pgAdmin) load at start-up to highlight and quote.
//! The words are sqlparser's (what Freshet's parser knows); the category
//! is PostgreSQL's for its reserved words and "unreserved" otherwise.

use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::common::{Result, plan_err};
use datafusion::datasource::MemTable;
use datafusion::sql::sqlparser::keywords::ALL_KEYWORDS;

/// PostgreSQL 15's reserved keywords (category `R`).
const RESERVED: &[&str] = &[
    "all",
    "analyse",
    "analyze",
    "and",
    "any",
    "array",
    "as",
    "asc",
    "asymmetric",
    "both",
    "case",
    "cast",
    "check",
    "collate",
    "column",
    "constraint",
    "create",
    "current_catalog",
    "current_date",
    "current_role",
    "current_time",
    "current_timestamp",
    "current_user",
    "default",
    "deferrable",
    "desc",
    "distinct",
    "do",
    "else",
    "end",
    "except",
    "false",
    "fetch",
    "for",
    "foreign",
    "from",
    "grant",
    "group",
    "having",
    "in",
    "initially",
    "intersect",
    "into",
    "lateral",
    "leading",
    "limit",
    "localtime",
    "localtimestamp",
    "not",
    "null",
    "offset",
    "on",
    "only",
    "or",
    "order",
    "placing",
    "primary",
    "references",
    "returning",
    "select",
    "session_user",
    "some",
    "symmetric",
    "table",
    "then",
    "to",
    "trailing",
    "true",
    "union",
    "unique",
    "user",
    "using",
    "variadic",
    "when",
    "where",
    "window",
    "with",
];

/// The `pg_get_keywords` table function.
#[derive(Debug)]
pub struct Keywords;

impl TableFunctionImpl for Keywords {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        if !args.exprs().is_empty() {
            return plan_err!("pg_get_keywords takes no arguments");
        }
        let schema = Arc::new(Schema::new(vec![
            Field::new("word", DataType::Utf8, false),
            Field::new("catcode", DataType::Utf8, false),
            Field::new("barelabel", DataType::Boolean, false),
            Field::new("catdesc", DataType::Utf8, false),
            Field::new("baredesc", DataType::Utf8, false),
        ]));
        let words: Vec<String> = ALL_KEYWORDS.iter().map(|w| w.to_lowercase()).collect();
        let reserved: Vec<bool> = words
            .iter()
            .map(|w| RESERVED.contains(&w.as_str()))
            .collect();
        let n = words.len();
        let columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(words)),
            Arc::new(StringArray::from_iter_values(
                reserved.iter().map(|r| if *r { "R" } else { "U" }),
            )),
            Arc::new(BooleanArray::from(vec![true; n])),
            Arc::new(StringArray::from_iter_values(
                reserved
                    .iter()
                    .map(|r| if *r { "reserved" } else { "unreserved" }),
            )),
            Arc::new(StringArray::from(vec!["can be bare label"; n])),
        ];
        let batch = RecordBatch::try_new(Arc::clone(&schema), columns)?;
        Ok(Arc::new(MemTable::try_new(schema, vec![vec![batch]])?))
    }
}
