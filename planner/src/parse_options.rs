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

use crate::parse::{ObjectKind, RECURSION_LIMIT, Statement};
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
    // The statement's tokens, up to its end at depth 0.
    let mut tokens: Vec<TokenWithSpan> = Vec::new();
    let mut depth = 0usize;
    let mut group: Option<(usize, usize)> = None;
    loop {
        let t = parser.peek_nth_token(tokens.len());
        match &t.token {
            Token::EOF => break,
            Token::SemiColon if depth == 0 => break,
            Token::LParen => depth += 1,
            Token::RParen => depth = depth.saturating_sub(1),
            _ => {}
        }
        tokens.push(t);
    }
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
    let eof = |ts: &mut Vec<TokenWithSpan>| {
        ts.push(TokenWithSpan::wrap(Token::EOF));
    };
    let mut option_tokens: Vec<TokenWithSpan> = tokens[start + 2..end].to_vec();
    eof(&mut option_tokens);
    let mut option_parser = Parser::new(&dialect)
        .with_recursion_limit(RECURSION_LIMIT)
        .with_tokens_with_locations(option_tokens);
    let options = parse_option_list(&mut option_parser)?;
    let mut rest: Vec<TokenWithSpan> = tokens[..start]
        .iter()
        .chain(&tokens[end + 1..])
        .cloned()
        .collect();
    eof(&mut rest);
    let mut inner = Parser::new(&dialect)
        .with_recursion_limit(RECURSION_LIMIT)
        .with_tokens_with_locations(rest);
    let stmt = crate::parse::parse_one(&mut inner)?;
    let next = inner.peek_token();
    if next.token != Token::EOF {
        return Err(ParserError::ParserError(format!(
            "Expected: end of statement, found: {} at Line: {}, Column: {}",
            next.token, next.span.start.line, next.span.start.column
        )));
    }
    for _ in 0..tokens.len() {
        parser.next_token();
    }
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
    let keyword = |parser: &Parser, n: usize| match &parser.peek_nth_token(n).token {
        Token::Word(w) => Some(w.keyword),
        _ => None,
    };
    if keyword(parser, 0) != Some(Keyword::ALTER) {
        return Ok(None);
    }
    let (kind, kind_len) = match (keyword(parser, 1), keyword(parser, 2)) {
        (Some(Keyword::TABLE), _) => (ObjectKind::Table, 1),
        (Some(Keyword::MATERIALIZED), Some(Keyword::VIEW)) => (ObjectKind::MaterializedView, 2),
        (Some(Keyword::INDEX), _) => (ObjectKind::Index, 1),
        _ => return Ok(None),
    };
    let mut n = 1 + kind_len;
    let if_exists =
        keyword(parser, n) == Some(Keyword::IF) && keyword(parser, n + 1) == Some(Keyword::EXISTS);
    if if_exists {
        n += 2;
    }
    if !matches!(parser.peek_nth_token(n).token, Token::Word(_)) {
        return Ok(None);
    }
    n += 1;
    while parser.peek_nth_token(n).token == Token::Period
        && matches!(parser.peek_nth_token(n + 1).token, Token::Word(_))
    {
        n += 2;
    }
    let set = match keyword(parser, n) {
        Some(Keyword::SET) => true,
        Some(Keyword::RESET) => false,
        _ => return Ok(None),
    };
    if !(parser.peek_nth_token(n + 1).token == Token::LParen
        && (is_word(parser, n + 2, "retain") || is_word(parser, n + 2, "refresh")))
    {
        return Ok(None);
    }
    for _ in 0..1 + kind_len {
        parser.next_token();
    }
    if if_exists {
        parser.next_token();
        parser.next_token();
    }
    let name = parser.parse_object_name(false)?;
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
        kind,
        if_exists,
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
