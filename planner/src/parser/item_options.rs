//! Parsing Materialize's item options, which sqlparser does not know:
//! `CREATE {TABLE | MATERIALIZED VIEW | INDEX} ... WITH (RETAIN HISTORY FOR
//! '1h', REFRESH EVERY '1 day' ALIGNED TO ..., ...)` and `ALTER ... SET
//! (RETAIN HISTORY FOR ...)` / `RESET (RETAIN HISTORY)`.
//!
//! The statement parsers ([`super::create`], [`super::alter`]) call these
//! where the options stand in the statement.

use datafusion::sql::sqlparser::ast;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::Token;

use super::{eat_word, expect_word, is_word};

/// One `WITH (...)` option of a table, materialized view or index.
#[derive(Clone, Debug, PartialEq)]
pub enum ItemOption {
    /// `RETAIN HISTORY [=] FOR <interval>`.
    RetainHistory(Box<ast::Expr>),
    /// `REFRESH [=] ...`.
    Refresh(RefreshOption),
}

/// One `REFRESH` option of a materialized view.
#[derive(Clone, Debug, PartialEq)]
pub enum RefreshOption {
    /// `REFRESH ON COMMIT` (the default): after every change.
    OnCommit,
    /// `REFRESH AT CREATION`: once, at the time the view is created.
    AtCreation,
    /// `REFRESH AT <time>`.
    At(Box<ast::Expr>),
    /// `REFRESH EVERY <interval> [ALIGNED TO <time>]`.
    Every {
        /// How often.
        interval: Box<ast::Expr>,
        /// A time the series passes through (default: creation).
        aligned_to: Option<Box<ast::Expr>>,
    },
}

impl std::fmt::Display for ItemOption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ItemOption::RetainHistory(e) => write!(f, "RETAIN HISTORY FOR {e}"),
            ItemOption::Refresh(RefreshOption::OnCommit) => write!(f, "REFRESH ON COMMIT"),
            ItemOption::Refresh(RefreshOption::AtCreation) => write!(f, "REFRESH AT CREATION"),
            ItemOption::Refresh(RefreshOption::At(e)) => write!(f, "REFRESH AT {e}"),
            ItemOption::Refresh(RefreshOption::Every {
                interval,
                aligned_to,
            }) => {
                write!(f, "REFRESH EVERY {interval}")?;
                if let Some(a) = aligned_to {
                    write!(f, " ALIGNED TO {a}")?;
                }
                Ok(())
            }
        }
    }
}

/// Write options as `WITH (a, b)`.
pub fn display_options(options: &[ItemOption]) -> String {
    let parts: Vec<String> = options.iter().map(|o| o.to_string()).collect();
    format!("WITH ({})", parts.join(", "))
}

/// Whether Freshet's item options come next: `WITH (` and then
/// `RETAIN` or `REFRESH`. Other `WITH (...)` clauses (Postgres storage
/// parameters) are sqlparser's.
pub(crate) fn at_item_options(parser: &Parser) -> bool {
    matches!(&parser.peek_token().token, Token::Word(w) if w.keyword == Keyword::WITH)
        && parser.peek_nth_token(1).token == Token::LParen
        && starts_option(parser, 2)
}

/// Whether token `n` ahead begins an option (`RETAIN` or `REFRESH`).
pub(crate) fn starts_option(parser: &Parser, n: usize) -> bool {
    is_word(parser, n, "retain") || is_word(parser, n, "refresh")
}

/// `WITH (option [, option ...])`.
pub(crate) fn parse_with_options(parser: &mut Parser) -> Result<Vec<ItemOption>, ParserError> {
    parser.expect_keyword(Keyword::WITH)?;
    parse_option_group(parser)
}

/// `(option [, option ...])`.
pub(crate) fn parse_option_group(parser: &mut Parser) -> Result<Vec<ItemOption>, ParserError> {
    parser.expect_token(&Token::LParen)?;
    let options = parser.parse_comma_separated(parse_option)?;
    parser.expect_token(&Token::RParen)?;
    Ok(options)
}

/// `(RETAIN HISTORY | REFRESH [, ...])`: the options an `ALTER ... RESET`
/// names, lower case.
pub(crate) fn parse_reset_names(parser: &mut Parser) -> Result<Vec<String>, ParserError> {
    parser.expect_token(&Token::LParen)?;
    let names = parser.parse_comma_separated(|p| {
        if eat_word(p, "retain") {
            expect_word(p, "history")?;
            Ok("retain history".to_string())
        } else {
            expect_word(p, "refresh")?;
            Ok("refresh".to_string())
        }
    })?;
    parser.expect_token(&Token::RParen)?;
    Ok(names)
}

fn parse_option(parser: &mut Parser) -> Result<ItemOption, ParserError> {
    if eat_word(parser, "retain") {
        expect_word(parser, "history")?;
        let _ = parser.consume_token(&Token::Eq);
        parser.expect_keyword(Keyword::FOR)?;
        return Ok(ItemOption::RetainHistory(Box::new(parser.parse_expr()?)));
    }
    expect_word(parser, "refresh")?;
    let _ = parser.consume_token(&Token::Eq);
    if parser.parse_keywords(&[Keyword::ON, Keyword::COMMIT]) {
        return Ok(ItemOption::Refresh(RefreshOption::OnCommit));
    }
    if parser.parse_keyword(Keyword::AT) {
        if eat_word(parser, "creation") {
            return Ok(ItemOption::Refresh(RefreshOption::AtCreation));
        }
        return Ok(ItemOption::Refresh(RefreshOption::At(Box::new(
            parser.parse_expr()?,
        ))));
    }
    expect_word(parser, "every")?;
    let interval = Box::new(parser.parse_expr()?);
    let aligned_to = if eat_word(parser, "aligned") {
        parser.expect_keyword(Keyword::TO)?;
        Some(Box::new(parser.parse_expr()?))
    } else {
        None
    };
    Ok(ItemOption::Refresh(RefreshOption::Every {
        interval,
        aligned_to,
    }))
}

#[cfg(test)]
mod tests {
    use crate::parser::{Statement, parse};

    #[test]
    fn parses_options_where_they_stand() {
        let s = parse(
            "CREATE MATERIALIZED VIEW mv WITH (RETAIN HISTORY FOR '1h', REFRESH EVERY '1 day' ALIGNED TO 5, REFRESH AT CREATION) AS SELECT 1",
        )
        .unwrap();
        let Statement::CreateWithOptions { stmt, options } = &s[0] else {
            panic!("{s:?}")
        };
        assert_eq!(stmt.to_string(), "CREATE MATERIALIZED VIEW mv AS SELECT 1");
        assert_eq!(
            super::display_options(options),
            "WITH (RETAIN HISTORY FOR '1h', REFRESH EVERY '1 day' ALIGNED TO 5, REFRESH AT CREATION)"
        );
        let s =
            parse("CREATE TABLE t (a int) WITH (RETAIN HISTORY = FOR '10s'); SELECT 1").unwrap();
        assert_eq!(s.len(), 2);
        assert!(matches!(&s[0], Statement::CreateWithOptions { .. }));
        // Other WITH clauses are sqlparser's.
        let s = parse("CREATE TABLE t (a int) WITH (fillfactor = 70)").unwrap();
        assert!(matches!(&s[0], Statement::Sql(_)));
        assert!(parse("CREATE TABLE t (a int) WITH (RETAIN HISTORY '1h')").is_err());
    }

    #[test]
    fn parses_alter_set_and_reset() {
        let s = parse("ALTER MATERIALIZED VIEW s.mv SET (RETAIN HISTORY FOR '2h')").unwrap();
        assert!(matches!(&s[0], Statement::AlterOptions { set, .. } if set.len() == 1));
        let s = parse("ALTER TABLE IF EXISTS t RESET (RETAIN HISTORY)").unwrap();
        assert!(
            matches!(&s[0], Statement::AlterOptions { reset, if_exists: true, .. } if reset == &["retain history"])
        );
    }
}
