//! Parsing SQL into Freshet statements.
//!
//! Freshet parses with sqlparser's PostgreSQL dialect (the version DataFusion
//! re-exports, so ASTs pass straight to its planner). Like DataFusion's
//! `DFParser`, [`parse_statement`] looks at a statement's leading keyword and
//! hands it to the file for that family: Freshet's own grammar where
//! sqlparser has none (`SUBSCRIBE`, `FETCH`, `EXPLAIN TIMESTAMP`, item
//! options, `AS OF`) or another dialect's (`VACUUM`, `ANALYZE`),
//! sqlparser for everything else. Sub-parts (names,
//! expressions, queries, column definitions) are always sqlparser's.

mod alter;
mod as_of;
pub mod ast;
pub mod complexity;
pub mod connection;
mod create;
mod explain;
mod ident;
pub mod item_options;
mod maintenance;
pub mod secret;
mod sequence;
mod show;
pub mod sink;
pub mod source;
pub(crate) mod stream;

use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan, Tokenizer};

use crate::error::{PlanError, Result};
pub use ast::{
    EnvelopeKind, MaintenanceKind, ObjectKind, Statement, SubscribeRelation, SubscribeStatement,
};
pub use ident::{normalize_ident, normalize_name, quote_if_needed};

/// Deepest nesting the parser accepts before refusing the statement.
pub const RECURSION_LIMIT: usize = 64;

/// Parse a query string holding any number of statements.
pub fn parse(sql: &str) -> Result<Vec<Statement>> {
    let dialect = PostgreSqlDialect {};
    let tokens = Tokenizer::new(&dialect, sql)
        .with_unescape(true)
        .tokenize_with_location()
        .map_err(|e| parse_error(sql, e.into()))?;
    complexity::check_expression_depth(&tokens)?;
    complexity::check_parameters(&tokens)?;
    let mut parser = Parser::new(&dialect)
        .with_recursion_limit(RECURSION_LIMIT)
        .with_tokens_with_locations(tokens);
    let mut out = Vec::new();
    loop {
        while parser.consume_token(&Token::SemiColon) {}
        if parser.peek_token().token == Token::EOF {
            break;
        }
        let stmt = parse_statement(&mut parser).map_err(|e| parse_error(sql, e))?;
        out.push(stmt);
        let next = parser.peek_token();
        if next.token != Token::EOF && next.token != Token::SemiColon {
            return Err(parse_error(
                sql,
                ParserError::ParserError(format!(
                    "Expected: end of statement, found: {} at Line: {}, Column: {}",
                    next.token, next.span.start.line, next.span.start.column
                )),
            ));
        }
    }
    Ok(out)
}

/// Parse one statement, dispatching on its leading keyword.
pub(crate) fn parse_statement(parser: &mut Parser) -> Result<Statement, ParserError> {
    let lead = parser.peek_token().token;
    match &lead {
        Token::Word(w) if w.quote_style.is_none() => match w.keyword {
            Keyword::CREATE => create::parse_create(parser),
            Keyword::ALTER => alter::parse_alter(parser),
            Keyword::DROP => match source::parse_drop(parser)? {
                Some(stmt) => Ok(stmt),
                None => sql(parser),
            },
            Keyword::EXPLAIN => explain::parse_explain(parser),
            Keyword::SHOW => show::parse_show(parser),
            Keyword::COPY | Keyword::DECLARE | Keyword::FETCH => stream::parse_stream(parser),
            Keyword::SELECT | Keyword::WITH | Keyword::VALUES => as_of::parse_query(parser),
            Keyword::VACUUM | Keyword::ANALYZE => maintenance::parse_maintenance(parser),
            Keyword::REFRESH => maintenance::parse_refresh(parser),
            _ if w.value.eq_ignore_ascii_case("subscribe") => stream::parse_stream(parser),
            _ => sql(parser),
        },
        Token::LParen => as_of::parse_query(parser),
        _ => sql(parser),
    }
}

/// A statement sqlparser parses whole.
fn sql(parser: &mut Parser) -> Result<Statement, ParserError> {
    Ok(Statement::Sql(Box::new(parser.parse_statement()?)))
}

/// Whether token `n` ahead is the unquoted word `text` (for Freshet's
/// words that sqlparser has no keyword for).
pub(crate) fn is_word(parser: &Parser, n: usize, text: &str) -> bool {
    matches!(&parser.peek_nth_token(n).token,
        Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(text))
}

/// Consume the unquoted word `text` if it is next.
pub(crate) fn eat_word(parser: &mut Parser, text: &str) -> bool {
    let found = is_word(parser, 0, text);
    if found {
        parser.next_token();
    }
    found
}

/// Consume the unquoted word `text`, or fail as sqlparser does.
pub(crate) fn expect_word(parser: &mut Parser, text: &str) -> Result<(), ParserError> {
    if eat_word(parser, text) {
        return Ok(());
    }
    expected(parser, &text.to_uppercase())
}

/// A syntax error at the next token, worded as sqlparser words its own.
pub(crate) fn expected<T>(parser: &Parser, what: &str) -> Result<T, ParserError> {
    let found = parser.peek_token();
    Err(ParserError::ParserError(format!(
        "Expected: {what}, found: {} at Line: {}, Column: {}",
        found.token, found.span.start.line, found.span.start.column
    )))
}

/// The tokens of the statement starting here, up to its `;` at depth 0
/// or the end of input, without whitespace (nothing is consumed).
///
/// One walk over the token stream: `peek_nth_token(n)` rescans from the
/// parser's position, so peeking each token in turn would cost the square
/// of the statement's length (a 30,000-item `IN` list took 11 s).
pub(crate) fn statement_tokens(parser: &Parser) -> Vec<TokenWithSpan> {
    let mut tokens: Vec<TokenWithSpan> = Vec::new();
    let mut depth = 0usize;
    for t in (parser.index()..).map(|i| parser.token_at(i)) {
        match &t.token {
            Token::Whitespace(_) => continue,
            Token::EOF => break,
            Token::SemiColon if depth == 0 => break,
            Token::LParen => depth += 1,
            Token::RParen => depth = depth.saturating_sub(1),
            _ => {}
        }
        tokens.push(t.clone());
    }
    tokens
}

/// A parser over `tokens`, as if they were the whole input.
pub(crate) fn parser_over<'a>(
    dialect: &'a PostgreSqlDialect,
    tokens: &[TokenWithSpan],
) -> Parser<'a> {
    let mut tokens = tokens.to_vec();
    tokens.push(TokenWithSpan::wrap(Token::EOF));
    Parser::new(dialect)
        .with_recursion_limit(RECURSION_LIMIT)
        .with_tokens_with_locations(tokens)
}

/// Consume `n` tokens (counted as `peek_nth_token` counts them).
pub(crate) fn skip_tokens(parser: &mut Parser, n: usize) {
    for _ in 0..n {
        parser.next_token();
    }
}

/// Turn a sqlparser error into a syntax error with a 1-based character
/// position, as Postgres reports in `ErrorResponse`.
fn parse_error(sql: &str, e: ParserError) -> PlanError {
    let message = match &e {
        ParserError::TokenizerError(m) | ParserError::ParserError(m) => m.clone(),
        ParserError::RecursionLimitExceeded => {
            return PlanError::Parse {
                message: "statement is too deeply nested".into(),
                position: None,
                detail: None,
            };
        }
    };
    let (message, position) = match message.rsplit_once(" at Line: ") {
        Some((msg, loc)) => {
            let mut parts = loc.split(", Column: ");
            let line = parts.next().and_then(|l| l.trim().parse::<usize>().ok());
            let col = parts.next().and_then(|c| c.trim().parse::<usize>().ok());
            let pos = match (line, col) {
                (Some(line), Some(col)) => {
                    let before: usize = sql
                        .split('\n')
                        .take(line.saturating_sub(1))
                        .map(|l| l.chars().count() + 1)
                        .sum();
                    Some(before + col)
                }
                _ => None,
            };
            (msg.to_string(), pos)
        }
        None => (message, None),
    };
    // sqlparser says what it expected and what it found; PostgreSQL names
    // only the token ("at or near"), or the end of the input, where its
    // position points just past the last character. The expectation is
    // kept as the DETAIL.
    match message.rsplit_once(", found: ") {
        Some((expected, "EOF")) => PlanError::Parse {
            message: "syntax error at end of input".into(),
            position: Some(sql.chars().count() + 1),
            detail: Some(expected.to_owned()),
        },
        Some((expected, found)) if position.is_some() => PlanError::Parse {
            message: format!("syntax error at or near \"{found}\""),
            position,
            detail: Some(expected.to_owned()),
        },
        _ => PlanError::Parse {
            message: format!("syntax error: {message}"),
            position,
            detail: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_statements_and_skips_empty_ones() {
        let s = parse("select 1;; select 2;").unwrap();
        assert_eq!(s.len(), 2);
        assert!(parse("  ;  ").unwrap().is_empty());
    }

    #[test]
    fn reports_positions() {
        // `FROMM` parses as a column alias; the error is at `t`, the 16th
        // character, which is where Postgres reports it too.
        match parse("SELECT 1 FROMM t").unwrap_err() {
            PlanError::Parse { position, .. } => assert_eq!(position, Some(16)),
            other => panic!("{other:?}"),
        }
        // Positions count across lines, from the start of the query string.
        let sql = "select 1;\nselect 1 frm t";
        match parse(sql).unwrap_err() {
            PlanError::Parse { position, .. } => {
                assert_eq!(position, Some(sql.rfind('t').unwrap() + 1))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn parses_extensions() {
        assert!(matches!(
            &parse("EXPLAIN TIMESTAMP FOR SELECT 1").unwrap()[0],
            Statement::ExplainTimestamp(_)
        ));
        match &parse("ALTER VIEW IF EXISTS s.v RENAME TO w").unwrap()[0] {
            Statement::AlterRename {
                kind,
                if_exists,
                name,
                new_name,
            } => {
                assert_eq!(*kind, ObjectKind::View);
                assert!(*if_exists);
                assert_eq!(name.to_string(), "s.v");
                assert_eq!(new_name.value, "w");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            &parse("ALTER TABLE t ADD COLUMN x int").unwrap()[0],
            Statement::Sql(_)
        ));
    }

    #[test]
    fn parses_query_as_of() {
        match &parse("SELECT a AS of FROM t AS OF AT LEAST 5 + 1; SELECT 1 AS of").unwrap()[..] {
            [
                Statement::SelectAsOf { at_least, time, .. },
                Statement::Sql(_),
            ] => {
                assert!(*at_least);
                assert_eq!(time.to_string(), "5 + 1");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            &parse("(SELECT 1) UNION (SELECT 2) AS OF mz_now()").unwrap()[0],
            Statement::SelectAsOf { .. }
        ));
    }

    #[test]
    fn deep_nesting_is_refused_not_a_crash() {
        let sql = format!("SELECT {}1{}", "(".repeat(5000), ")".repeat(5000));
        assert!(parse(&sql).is_err());
    }
}
