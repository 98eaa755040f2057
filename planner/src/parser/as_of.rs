//! Queries read at a chosen time: `<query> AS OF [AT LEAST] <time>`.
//!
//! This is the one statement found by scanning tokens rather than parsed
//! in a single pass: sqlparser reads any word after an explicit `AS` as an
//! alias, so `SELECT a FROM t AS OF 5` would parse as `t` aliased `of` and
//! a stray `5`, and no dialect hook stops it (the hooks see only implicit
//! aliases). The statement is therefore split at its last `AS OF` at
//! parenthesis depth 0, and taken as a timed query only when the part
//! before parses as a query and the part after as one expression; anything
//! else (`SELECT 1 AS of`) is sqlparser's, untouched.

use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan};

use super::ast::Statement;
use super::{parser_over, skip_tokens, statement_tokens};

/// Parse a statement that begins like a query.
pub(super) fn parse_query(parser: &mut Parser) -> Result<Statement, ParserError> {
    match try_parse_as_of(parser)? {
        Some(stmt) => Ok(stmt),
        None => Ok(Statement::Sql(Box::new(parser.parse_statement()?))),
    }
}

/// Recognize `<query> AS OF [AT LEAST] <time>`: a query followed, at
/// depth 0, by `AS OF` and an expression that ends the statement. Anything
/// else (`SELECT 1 AS of`) is left to sqlparser.
fn try_parse_as_of(parser: &mut Parser) -> Result<Option<Statement>, ParserError> {
    let tokens = statement_tokens(parser);
    let mut depth = 0usize;
    let mut split = None;
    for (i, t) in tokens.iter().enumerate() {
        match &t.token {
            Token::LParen => depth += 1,
            Token::RParen => depth = depth.saturating_sub(1),
            Token::Word(w) if depth == 0 && w.keyword == Keyword::OF && i > 0 => {
                if matches!(&tokens[i - 1].token, Token::Word(a) if a.keyword == Keyword::AS) {
                    split = Some(i - 1);
                }
            }
            _ => {}
        }
    }
    let Some(split) = split else {
        return Ok(None);
    };
    let dialect = PostgreSqlDialect {};
    let sub = |ts: &[TokenWithSpan]| parser_over(&dialect, ts);
    let mut q = sub(&tokens[..split]);
    let Ok(query) = q.parse_query() else {
        return Ok(None);
    };
    if q.peek_token().token != Token::EOF {
        return Ok(None);
    }
    let mut t = sub(&tokens[split + 2..]);
    let at_least = t.parse_keywords(&[Keyword::AT, Keyword::LEAST]);
    let Ok(time) = t.parse_expr() else {
        return Ok(None);
    };
    if t.peek_token().token != Token::EOF {
        return Ok(None);
    }
    skip_tokens(parser, tokens.len());
    Ok(Some(Statement::SelectAsOf {
        query,
        at_least,
        time: Box::new(time),
    }))
}
