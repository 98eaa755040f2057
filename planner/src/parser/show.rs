//! `SHOW` statements Freshet adds: `SHOW CREATE {MATERIALIZED VIEW |
//! SOURCE | SINK | CONNECTION} name`, `SHOW {SOURCES | SINKS} [FROM schema]` and `SHOW INDEXES [ON
//! name]`. Other `SHOW`s (variables, `SHOW CREATE
//! TABLE`) are sqlparser's.

use datafusion::sql::sqlparser::ast::ObjectName;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};

use super::ast::{ObjectKind, Statement};
use super::is_word;

/// Parse a statement that begins with `SHOW`.
pub(super) fn parse_show(parser: &mut Parser) -> Result<Statement, ParserError> {
    if parser.parse_keywords(&[
        Keyword::SHOW,
        Keyword::CREATE,
        Keyword::MATERIALIZED,
        Keyword::VIEW,
    ]) {
        return Ok(Statement::ShowCreate(
            ObjectKind::MaterializedView,
            parser.parse_object_name(false)?,
        ));
    }
    if parser.parse_keywords(&[Keyword::SHOW, Keyword::CREATE, Keyword::SOURCE]) {
        return Ok(Statement::ShowCreate(
            ObjectKind::Source,
            parser.parse_object_name(false)?,
        ));
    }
    if is_word(parser, 1, "create") && is_word(parser, 2, "sink") {
        for _ in 0..3 {
            parser.next_token();
        }
        return Ok(Statement::ShowCreate(
            ObjectKind::Sink,
            parser.parse_object_name(false)?,
        ));
    }
    if is_word(parser, 1, "sinks") {
        return Ok(Statement::ShowSinks(parse_show_in_schema(parser)?));
    }
    if is_word(parser, 1, "connections") {
        return Ok(Statement::ShowConnections(parse_show_in_schema(parser)?));
    }
    if is_word(parser, 1, "create") && is_word(parser, 2, "connection") {
        for _ in 0..3 {
            parser.next_token();
        }
        return Ok(Statement::ShowCreate(
            ObjectKind::Connection,
            parser.parse_object_name(false)?,
        ));
    }
    if is_word(parser, 1, "secrets") {
        return Ok(Statement::ShowSecrets(parse_show_in_schema(parser)?));
    }
    if is_word(parser, 1, "sources") {
        return Ok(Statement::ShowSources(parse_show_in_schema(parser)?));
    }
    if is_word(parser, 1, "indexes") {
        parser.next_token();
        parser.next_token();
        let on = if parser.parse_keyword(Keyword::ON) {
            Some(parser.parse_object_name(false)?)
        } else {
            None
        };
        return Ok(Statement::ShowIndexes(on));
    }
    Ok(Statement::Sql(Box::new(parser.parse_statement()?)))
}

/// The rest of `SHOW <word> [{FROM | IN} schema]` (the parser is at
/// `SHOW`): the schema, if named.
fn parse_show_in_schema(parser: &mut Parser) -> Result<Option<ObjectName>, ParserError> {
    parser.next_token();
    parser.next_token();
    if parser
        .parse_one_of_keywords(&[Keyword::FROM, Keyword::IN])
        .is_some()
    {
        Ok(Some(parser.parse_object_name(false)?))
    } else {
        Ok(None)
    }
}
