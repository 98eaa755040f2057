//! `EXPLAIN` statements Freshet adds: `EXPLAIN TIMESTAMP FOR <select>`,
//! `EXPLAIN MATERIALIZED VIEW name` and `EXPLAIN INDEX name`. Other
//! `EXPLAIN`s (of queries, writes, `CREATE MATERIALIZED VIEW`) are
//! sqlparser's.

use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};

use super::ast::Statement;

/// Parse a statement that begins with `EXPLAIN`.
pub(super) fn parse_explain(parser: &mut Parser) -> Result<Statement, ParserError> {
    if parser.parse_keywords(&[Keyword::EXPLAIN, Keyword::TIMESTAMP, Keyword::FOR]) {
        return Ok(Statement::ExplainTimestamp(Box::new(
            parser.parse_statement()?,
        )));
    }
    if parser.parse_keywords(&[Keyword::EXPLAIN, Keyword::MATERIALIZED, Keyword::VIEW]) {
        return Ok(Statement::ExplainMaterializedView(
            parser.parse_object_name(false)?,
        ));
    }
    if parser.parse_keywords(&[Keyword::EXPLAIN, Keyword::INDEX]) {
        return Ok(Statement::ExplainIndex(parser.parse_object_name(false)?));
    }
    Ok(Statement::Sql(Box::new(parser.parse_statement()?)))
}
