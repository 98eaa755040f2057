//! `SHOW` statements Freshet adds: `SHOW CREATE {MATERIALIZED VIEW |
//! SOURCE} name`, `SHOW SOURCES [FROM schema]` and `SHOW INDEXES [ON
//! name]`. Other `SHOW`s (variables, `SHOW CREATE
//! TABLE`) are sqlparser's.

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
    if is_word(parser, 1, "secrets") {
        parser.next_token();
        parser.next_token();
        let schema = if parser
            .parse_one_of_keywords(&[Keyword::FROM, Keyword::IN])
            .is_some()
        {
            Some(parser.parse_object_name(false)?)
        } else {
            None
        };
        return Ok(Statement::ShowSecrets(schema));
    }
    if is_word(parser, 1, "sources") {
        parser.next_token();
        parser.next_token();
        let schema = if parser
            .parse_one_of_keywords(&[Keyword::FROM, Keyword::IN])
            .is_some()
        {
            Some(parser.parse_object_name(false)?)
        } else {
            None
        };
        return Ok(Statement::ShowSources(schema));
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
