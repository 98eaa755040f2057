//! Parsing the statements that stream: `SUBSCRIBE`, `COPY (SUBSCRIBE ...)
//! TO STDOUT`, and the cursor statements that read them, `DECLARE ...
//! CURSOR FOR` and `FETCH ... [WITH (timeout = ...)]` (sqlparser knows
//! neither `SUBSCRIBE` nor `FETCH`'s options).

use datafusion::sql::sqlparser::ast;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::Token;

use super::ast::{EnvelopeKind, Statement, SubscribeRelation, SubscribeStatement};
use super::{eat_word, expect_word, is_word};

/// Parse a streaming statement: `SUBSCRIBE`, `COPY`, `DECLARE` or
/// `FETCH` (a `COPY` of anything but a `SUBSCRIBE` is sqlparser's).
pub(super) fn parse_stream(parser: &mut Parser) -> Result<Statement, ParserError> {
    match try_parse(parser)? {
        Some(stmt) => Ok(stmt),
        None if is_word(parser, 0, "copy") => parse_copy(parser),
        None => Ok(Statement::Sql(Box::new(parser.parse_statement()?))),
    }
}

/// A plain `COPY`, sqlparser's, with PostgreSQL's other spellings of a
/// boolean option's value (`FREEZE on`, `HEADER off`, as pgbench -i
/// writes) turned into the `TRUE`/`FALSE` sqlparser reads.
fn parse_copy(parser: &mut Parser) -> Result<Statement, ParserError> {
    let mut tokens = super::statement_tokens(parser);
    let word = |t: &Token, text: &str| matches!(t, Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(text));
    for i in 1..tokens.len() {
        let option = &tokens[i - 1].token;
        if !(word(option, "freeze") || word(option, "header")) {
            continue;
        }
        let value = &tokens[i].token;
        let replacement = if word(value, "on") {
            "TRUE"
        } else if word(value, "off") {
            "FALSE"
        } else {
            continue;
        };
        tokens[i].token = Token::make_keyword(replacement);
    }
    let dialect = datafusion::sql::sqlparser::dialect::PostgreSqlDialect {};
    let mut sub = super::parser_over(&dialect, &tokens);
    let stmt = sub.parse_statement()?;
    if sub.peek_token().token != Token::EOF {
        return super::expected(&sub, "end of statement");
    }
    super::skip_tokens(parser, tokens.len());
    Ok(Statement::Sql(Box::new(stmt)))
}

/// The streaming statements, if one starts here.
fn try_parse(parser: &mut Parser) -> Result<Option<Statement>, ParserError> {
    if is_word(parser, 0, "subscribe") {
        parser.next_token();
        return Ok(Some(Statement::Subscribe(Box::new(parse_subscribe_body(
            parser,
        )?))));
    }
    if is_word(parser, 0, "copy")
        && parser.peek_nth_token(1).token == Token::LParen
        && is_word(parser, 2, "subscribe")
    {
        parser.next_token();
        parser.next_token();
        parser.next_token();
        let subscribe = parse_subscribe_body(parser)?;
        parser.expect_token(&Token::RParen)?;
        parser.expect_keyword(Keyword::TO)?;
        expect_word(parser, "stdout")?;
        let options = parse_copy_options(parser)?;
        return Ok(Some(Statement::CopySubscribe {
            subscribe: Box::new(subscribe),
            options,
        }));
    }
    if is_word(parser, 0, "declare") {
        parser.next_token();
        let name = crate::parser::normalize_ident(&parser.parse_identifier()?);
        if eat_word(parser, "no") {
            expect_word(parser, "scroll")?;
        }
        expect_word(parser, "cursor")?;
        if eat_word(parser, "without") {
            expect_word(parser, "hold")?;
        }
        if is_word(parser, 0, "with") && is_word(parser, 1, "hold") {
            return Err(ParserError::ParserError(
                "DECLARE CURSOR WITH HOLD is not supported".into(),
            ));
        }
        parser.expect_keyword(Keyword::FOR)?;
        let stmt = match try_parse(parser)? {
            Some(s @ Statement::Subscribe(_)) => s,
            Some(_) => {
                return Err(ParserError::ParserError(
                    "a cursor reads a query or SUBSCRIBE".into(),
                ));
            }
            None => Statement::Sql(Box::new(ast::Statement::Query(parser.parse_query()?))),
        };
        return Ok(Some(Statement::Declare {
            name,
            stmt: Box::new(stmt),
        }));
    }
    if is_word(parser, 0, "fetch") {
        parser.next_token();
        return Ok(Some(parse_fetch(parser)?));
    }
    Ok(None)
}

fn parse_subscribe_body(parser: &mut Parser) -> Result<SubscribeStatement, ParserError> {
    eat_word(parser, "to");
    let relation = if parser.consume_token(&Token::LParen) {
        let query = parser.parse_query()?;
        parser.expect_token(&Token::RParen)?;
        SubscribeRelation::Query(query)
    } else {
        SubscribeRelation::Name(parser.parse_object_name(false)?)
    };
    let mut stmt = SubscribeStatement {
        relation,
        envelope: None,
        options: Vec::new(),
        as_of: None,
        up_to: None,
    };
    loop {
        if stmt.envelope.is_none() && eat_word(parser, "envelope") {
            let kind = if eat_word(parser, "upsert") {
                EnvelopeKind::Upsert
            } else if eat_word(parser, "debezium") {
                EnvelopeKind::Debezium
            } else {
                return Err(ParserError::ParserError(
                    "Expected: UPSERT or DEBEZIUM after ENVELOPE".into(),
                ));
            };
            parser.expect_token(&Token::LParen)?;
            parser.expect_keyword(Keyword::KEY)?;
            parser.expect_token(&Token::LParen)?;
            let key = parser.parse_comma_separated(|p| p.parse_identifier())?;
            parser.expect_token(&Token::RParen)?;
            parser.expect_token(&Token::RParen)?;
            stmt.envelope = Some((kind, key));
        } else if stmt.options.is_empty() && parser.parse_keyword(Keyword::WITH) {
            parser.expect_token(&Token::LParen)?;
            stmt.options = parse_option_list(parser)?;
            parser.expect_token(&Token::RParen)?;
        } else if stmt.as_of.is_none() && parser.parse_keywords(&[Keyword::AS, Keyword::OF]) {
            let at_least = parser.parse_keywords(&[Keyword::AT, Keyword::LEAST]);
            stmt.as_of = Some((at_least, parser.parse_expr()?));
        } else if stmt.up_to.is_none() && is_word(parser, 0, "up") && is_word(parser, 1, "to") {
            parser.next_token();
            parser.next_token();
            stmt.up_to = Some(parser.parse_expr()?);
        } else {
            return Ok(stmt);
        }
    }
}

/// `[WITH] (name [value], ...)` after `COPY (...) TO STDOUT`.
fn parse_copy_options(parser: &mut Parser) -> Result<Vec<(String, Option<String>)>, ParserError> {
    let with = parser.parse_keyword(Keyword::WITH);
    if !parser.consume_token(&Token::LParen) {
        if with {
            return Err(ParserError::ParserError(
                "Expected: ( after WITH".to_string(),
            ));
        }
        return Ok(Vec::new());
    }
    let options = parser.parse_comma_separated(|p| {
        let name = p.parse_identifier()?.value.to_lowercase();
        let value = match p.peek_token().token {
            Token::Comma | Token::RParen => None,
            _ => Some(option_value(p, "COPY")?),
        };
        Ok((name, value))
    })?;
    parser.expect_token(&Token::RParen)?;
    Ok(options)
}

/// An option's value as text: a word, a quoted string or a number.
fn option_value(parser: &mut Parser, statement: &str) -> Result<String, ParserError> {
    match parser.next_token().token {
        Token::Word(w) => Ok(w.value),
        Token::SingleQuotedString(s) => Ok(s),
        Token::Number(n, _) => Ok(n),
        other => Err(ParserError::ParserError(format!(
            "unexpected {statement} option value {other}"
        ))),
    }
}

/// After `FETCH`: `[FORWARD | NEXT] [count | ALL] [FROM | IN] name [WITH
/// (timeout = interval)]`.
fn parse_fetch(parser: &mut Parser) -> Result<Statement, ParserError> {
    let mut count = Some(1);
    if eat_word(parser, "next") {
        count = Some(1);
    } else {
        eat_word(parser, "forward");
        if parser.parse_keyword(Keyword::ALL) {
            count = None;
        } else if let Token::Number(n, _) = parser.peek_token().token {
            parser.next_token();
            count = Some(
                n.parse::<u64>()
                    .map_err(|_| ParserError::ParserError(format!("invalid FETCH count {n}")))?,
            );
        }
    }
    let _from = parser.parse_keyword(Keyword::FROM) || parser.parse_keyword(Keyword::IN);
    let name = crate::parser::normalize_ident(&parser.parse_identifier()?);
    let mut timeout = None;
    if parser.parse_keyword(Keyword::WITH) {
        parser.expect_token(&Token::LParen)?;
        let options = parser.parse_comma_separated(|p| {
            let name = p.parse_identifier()?.value.to_lowercase();
            let _eq = p.consume_token(&Token::Eq);
            let value = option_value(p, "FETCH")?;
            Ok((name, value))
        })?;
        parser.expect_token(&Token::RParen)?;
        for (name, value) in options {
            if name != "timeout" {
                return Err(ParserError::ParserError(format!(
                    "unknown FETCH option {}",
                    name.to_uppercase()
                )));
            }
            timeout = Some(value);
        }
    }
    Ok(Statement::Fetch {
        name,
        count,
        timeout,
    })
}

/// `name [=] [value], ...` inside a `WITH (...)` (`SUBSCRIBE`'s, `CREATE
/// SINK`'s): names lower-cased, each with its value if one is given.
pub(crate) fn parse_option_list(
    parser: &mut Parser,
) -> Result<Vec<(String, Option<ast::Expr>)>, ParserError> {
    parser.parse_comma_separated(parse_option)
}

/// One `name [=] [value]` of such a list (name lower-cased).
pub(crate) fn parse_option(p: &mut Parser) -> Result<(String, Option<ast::Expr>), ParserError> {
    let name = p.parse_identifier()?.value.to_lowercase();
    let value = if p.consume_token(&Token::Eq) {
        Some(p.parse_expr()?)
    } else if matches!(p.peek_token().token, Token::Comma | Token::RParen) {
        None
    } else {
        Some(p.parse_expr()?)
    };
    Ok((name, value))
}

#[cfg(test)]
mod tests {
    use crate::parser::{EnvelopeKind, Statement, SubscribeRelation, parse};

    #[test]
    fn parses_subscribe_forms() {
        let Statement::Subscribe(s) = &parse(
            "SUBSCRIBE TO t ENVELOPE UPSERT (KEY (k)) WITH (SNAPSHOT = false, PROGRESS) AS OF 5 UP TO 9",
        )
        .unwrap()[0] else {
            panic!()
        };
        assert!(matches!(&s.relation, SubscribeRelation::Name(n) if n.to_string() == "t"));
        assert_eq!(s.envelope.as_ref().unwrap().0, EnvelopeKind::Upsert);
        assert_eq!(s.options.len(), 2);
        assert_eq!(s.options[1], ("progress".to_string(), None));
        assert!(s.as_of.is_some() && s.up_to.is_some());
        // Display round-trips.
        let again = parse(&s.to_string()).unwrap();
        assert_eq!(again[0], Statement::Subscribe(s.clone()));

        let Statement::CopySubscribe { subscribe, options } =
            &parse("COPY (SUBSCRIBE (SELECT 1)) TO STDOUT WITH (FORMAT csv)").unwrap()[0]
        else {
            panic!()
        };
        assert!(matches!(subscribe.relation, SubscribeRelation::Query(_)));
        assert_eq!(options[0], ("format".to_string(), Some("csv".to_string())));
    }

    #[test]
    fn parses_cursor_statements() {
        match &parse("DECLARE c CURSOR FOR SUBSCRIBE t").unwrap()[0] {
            Statement::Declare { name, stmt } => {
                assert_eq!(name, "c");
                assert!(matches!(stmt.as_ref(), Statement::Subscribe(_)));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            &parse("DECLARE \"C\" NO SCROLL CURSOR WITHOUT HOLD FOR SELECT 1").unwrap()[0],
            Statement::Declare { name, stmt } if name == "C" && matches!(stmt.as_ref(), Statement::Sql(_))
        ));
        assert_eq!(
            parse("FETCH 10 c WITH (timeout = '1s')").unwrap()[0],
            Statement::Fetch {
                name: "c".into(),
                count: Some(10),
                timeout: Some("1s".into())
            }
        );
        assert_eq!(
            parse("FETCH FORWARD ALL FROM c").unwrap()[0],
            Statement::Fetch {
                name: "c".into(),
                count: None,
                timeout: None
            }
        );
        assert!(parse("FETCH 10 c WITH (bogus = 1)").is_err());
    }
}
