//! Parsing Materialize's item options, which sqlparser does not know:
//! `CREATE {TABLE | MATERIALIZED VIEW | INDEX} ... WITH (RETAIN HISTORY FOR
//! '1h', REFRESH EVERY '1 day' ALIGNED TO ..., ...)` and `ALTER ... SET
//! (RETAIN HISTORY FOR ...)` / `RESET (RETAIN HISTORY)`.
//!
//! The `WITH (...)` group is cut out of the statement's tokens and parsed
//! here; the rest goes to sqlparser as if the options had not been there.

use datafusion::sql::sqlparser::ast;
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan};

use crate::parse::{
    ObjectKind, Statement, parser_over, peek_alter_head, skip_tokens, statement_tokens,
    take_alter_head,
};
use crate::parse_subscribe::{eat_word, expect_word, is_word};

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

/// `CREATE ... WITH (RETAIN HISTORY | REFRESH ...)`, if one starts here:
/// the statement without its options, and the options.
pub(crate) fn try_parse_create_with(parser: &mut Parser) -> Result<Option<Statement>, ParserError> {
    if !matches!(&parser.peek_token().token, Token::Word(w) if w.keyword == Keyword::CREATE) {
        return Ok(None);
    }
    let tokens = statement_tokens(parser);
    let mut group: Option<(usize, usize)> = None;
    for i in 0..tokens.len() {
        let opens_group = matches!(&tokens[i].token, Token::Word(w) if w.keyword == Keyword::WITH)
            && tokens.get(i + 1).is_some_and(|t| t.token == Token::LParen)
            && tokens.get(i + 2).is_some_and(|t| {
                matches!(&t.token, Token::Word(w) if w.quote_style.is_none()
                    && (w.value.eq_ignore_ascii_case("retain") || w.value.eq_ignore_ascii_case("refresh")))
            });
        if !opens_group || group.is_some() {
            continue;
        }
        let mut d = 0usize;
        for (j, t) in tokens.iter().enumerate().skip(i + 1) {
            match t.token {
                Token::LParen => d += 1,
                Token::RParen => {
                    d -= 1;
                    if d == 0 {
                        group = Some((i, j));
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    let Some((start, end)) = group else {
        return Ok(None);
    };
    let dialect = PostgreSqlDialect {};
    let options = parse_option_list(&mut parser_over(&dialect, &tokens[start + 2..end]))?;
    let rest: Vec<TokenWithSpan> = tokens[..start]
        .iter()
        .chain(&tokens[end + 1..])
        .cloned()
        .collect();
    let mut inner = parser_over(&dialect, &rest);
    let stmt = crate::parse::parse_one(&mut inner)?;
    let next = inner.peek_token();
    if next.token != Token::EOF {
        return Err(ParserError::ParserError(format!(
            "Expected: end of statement, found: {} at Line: {}, Column: {}",
            next.token, next.span.start.line, next.span.start.column
        )));
    }
    skip_tokens(parser, tokens.len());
    Ok(Some(Statement::CreateWithOptions {
        stmt: Box::new(stmt),
        options,
    }))
}

/// `option [, option ...]` until the end of the tokens.
fn parse_option_list(parser: &mut Parser) -> Result<Vec<ItemOption>, ParserError> {
    let mut options = Vec::new();
    loop {
        options.push(parse_option(parser)?);
        if !parser.consume_token(&Token::Comma) {
            break;
        }
    }
    let next = parser.peek_token();
    if next.token != Token::EOF {
        return Err(ParserError::ParserError(format!(
            "Expected: , or ), found: {} at Line: {}, Column: {}",
            next.token, next.span.start.line, next.span.start.column
        )));
    }
    Ok(options)
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

/// `ALTER {TABLE | MATERIALIZED VIEW | INDEX} [IF EXISTS] name {SET
/// (options) | RESET (names)}` where the options are Freshet's, if one
/// starts here.
pub(crate) fn try_parse_alter_options(
    parser: &mut Parser,
) -> Result<Option<Statement>, ParserError> {
    let Some(head) = peek_alter_head(parser) else {
        return Ok(None);
    };
    if !matches!(
        head.kind,
        ObjectKind::Table | ObjectKind::MaterializedView | ObjectKind::Index
    ) {
        return Ok(None);
    }
    let n = head.after_name;
    let set = match &parser.peek_nth_token(n).token {
        Token::Word(w) if w.keyword == Keyword::SET => true,
        Token::Word(w) if w.keyword == Keyword::RESET => false,
        _ => return Ok(None),
    };
    if !(parser.peek_nth_token(n + 1).token == Token::LParen
        && (is_word(parser, n + 2, "retain") || is_word(parser, n + 2, "refresh")))
    {
        return Ok(None);
    }
    let name = take_alter_head(parser, &head)?;
    parser.next_token();
    parser.expect_token(&Token::LParen)?;
    let (options, reset) = if set {
        let mut options = Vec::new();
        loop {
            options.push(parse_option(parser)?);
            if !parser.consume_token(&Token::Comma) {
                break;
            }
        }
        (options, Vec::new())
    } else {
        let mut names = Vec::new();
        loop {
            if eat_word(parser, "retain") {
                expect_word(parser, "history")?;
                names.push("retain history".to_string());
            } else {
                expect_word(parser, "refresh")?;
                names.push("refresh".to_string());
            }
            if !parser.consume_token(&Token::Comma) {
                break;
            }
        }
        (Vec::new(), names)
    };
    parser.expect_token(&Token::RParen)?;
    Ok(Some(Statement::AlterOptions {
        kind: head.kind,
        if_exists: head.if_exists,
        name,
        set: options,
        reset,
    }))
}

#[cfg(test)]
mod tests {
    use crate::parse::{Statement, parse};

    #[test]
    fn cuts_options_out_of_create() {
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
