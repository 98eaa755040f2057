//! Connections, in Materialize's grammar:
//!
//! ```text
//! CREATE CONNECTION [IF NOT EXISTS] name TO POSTGRES (
//!     HOST 'host' [, PORT n] [, USER 'user'] [, PASSWORD SECRET secret]
//!     [, DATABASE 'db'] [, SSL MODE 'disable']
//! ) [WITH (VALIDATE = {true | false})]
//! CREATE CONNECTION [IF NOT EXISTS] name TO KAFKA (
//!     {BROKER 'host:port' | BROKERS ('host:port', ...)}
//! ) [WITH (VALIDATE = {true | false})]
//! DROP CONNECTION [IF EXISTS] name [, ...] [CASCADE | RESTRICT]
//! SHOW CONNECTIONS [{FROM | IN} schema]
//! ```
//!
//! A connection holds no credential itself: a password is named by the
//! secret that holds it, so the statement prints back (and is stored)
//! as written.

use datafusion::sql::sqlparser::ast::{self, ObjectName};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::Token;

use super::ast::Statement;
use super::{eat_word, expect_word, expected, is_word};

/// A parsed `CREATE CONNECTION`.
#[derive(Clone, Debug, PartialEq)]
pub struct CreateConnectionStatement {
    /// The connection's name.
    pub name: ObjectName,
    /// Skip (with a notice) if the name exists.
    pub if_not_exists: bool,
    /// What it connects to (`POSTGRES`), upper case.
    pub connection_type: String,
    /// Its options, names upper case, in the order written.
    pub options: Vec<(String, ConnectionOptionValue)>,
    /// `WITH (VALIDATE = ...)`: whether to connect once at creation.
    pub validate: Option<bool>,
}

/// The value of one connection option.
#[derive(Clone, Debug, PartialEq)]
pub enum ConnectionOptionValue {
    /// A literal or identifier (`'host'`, `5432`, `postgres`).
    Value(Box<ast::Expr>),
    /// `SECRET name`.
    Secret(ObjectName),
}

/// The connection types Freshet knows.
pub const CONNECTION_TYPES: &[&str] = &["POSTGRES", "KAFKA"];

/// The options of a `POSTGRES` connection.
pub const POSTGRES_OPTIONS: &[&str] = &["HOST", "PORT", "USER", "PASSWORD", "DATABASE", "SSL MODE"];

/// The options of a `KAFKA` connection.
pub const KAFKA_OPTIONS: &[&str] = &["BROKER", "BROKERS"];

/// Parse `CREATE CONNECTION ...` if that is what comes (the parser is at
/// `CREATE`); `None`, nothing consumed, otherwise.
pub(super) fn parse_create_connection(
    parser: &mut Parser,
) -> Result<Option<Statement>, ParserError> {
    if !is_word(parser, 1, "connection") {
        return Ok(None);
    }
    parser.next_token();
    parser.next_token();
    let if_not_exists = parser.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
    let name = parser.parse_object_name(false)?;
    parser.expect_keyword(Keyword::TO)?;
    let Some(connection_type) = CONNECTION_TYPES
        .iter()
        .find(|t| eat_word(parser, t))
        .map(|t| t.to_string())
    else {
        return expected(parser, "POSTGRES or KAFKA");
    };
    parser.expect_token(&Token::LParen)?;
    let options = parser.parse_comma_separated(parse_option)?;
    parser.expect_token(&Token::RParen)?;
    let validate = if parser.parse_keyword(Keyword::WITH) {
        parser.expect_token(&Token::LParen)?;
        expect_word(parser, "validate")?;
        let _ = parser.consume_token(&Token::Eq);
        let value = if parser.parse_keyword(Keyword::TRUE) {
            true
        } else if parser.parse_keyword(Keyword::FALSE) {
            false
        } else {
            return expected(parser, "true or false");
        };
        parser.expect_token(&Token::RParen)?;
        Some(value)
    } else {
        None
    };
    Ok(Some(Statement::CreateConnection(Box::new(
        CreateConnectionStatement {
            name,
            if_not_exists,
            connection_type,
            options,
            validate,
        },
    ))))
}

/// One `NAME value` or `PASSWORD SECRET name` entry.
fn parse_option(parser: &mut Parser) -> Result<(String, ConnectionOptionValue), ParserError> {
    let name = if eat_word(parser, "ssl") {
        expect_word(parser, "mode")?;
        "SSL MODE".to_string()
    } else {
        match parser.next_token().token {
            Token::Word(w) => w.value.to_uppercase(),
            _ => {
                parser.prev_token();
                return expected(parser, "a connection option");
            }
        }
    };
    let _ = parser.consume_token(&Token::Eq);
    let value = if eat_word(parser, "secret") {
        ConnectionOptionValue::Secret(parser.parse_object_name(false)?)
    } else {
        ConnectionOptionValue::Value(Box::new(parser.parse_expr()?))
    };
    Ok((name, value))
}

impl std::fmt::Display for CreateConnectionStatement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let options: Vec<String> = self
            .options
            .iter()
            .map(|(name, value)| match value {
                ConnectionOptionValue::Value(v) => format!("{name} {v}"),
                ConnectionOptionValue::Secret(s) => format!("{name} SECRET {s}"),
            })
            .collect();
        write!(
            f,
            "CREATE CONNECTION {}{} TO {} ({})",
            if self.if_not_exists {
                "IF NOT EXISTS "
            } else {
                ""
            },
            self.name,
            self.connection_type,
            options.join(", ")
        )?;
        if let Some(v) = self.validate {
            write!(f, " WITH (VALIDATE = {v})")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::parser::{Statement, parse};

    #[test]
    fn parses_and_prints_a_postgres_connection() {
        let s = parse(
            "create connection if not exists pg to postgres (host 'db', port 5433, user repl, \
             password secret pgpass, database 'shop', ssl mode 'disable') with (validate = false)",
        )
        .unwrap();
        let Statement::CreateConnection(c) = &s[0] else {
            panic!("{s:?}")
        };
        assert_eq!(c.options.len(), 6);
        assert_eq!(
            c.to_string(),
            "CREATE CONNECTION IF NOT EXISTS pg TO POSTGRES (HOST 'db', PORT 5433, USER repl, \
             PASSWORD SECRET pgpass, DATABASE 'shop', SSL MODE 'disable') WITH (VALIDATE = false)"
        );
        let again = parse(&c.to_string()).unwrap();
        assert_eq!(again, s);
    }

    #[test]
    fn refuses_unknown_connection_types() {
        let err = parse("CREATE CONNECTION k TO MYSQL (HOST 'x')").unwrap_err();
        assert!(err.to_string().contains("MYSQL"), "{err}");
    }

    #[test]
    fn parses_and_prints_a_kafka_connection() {
        for sql in [
            "CREATE CONNECTION k TO KAFKA (BROKER 'localhost:9092')",
            "CREATE CONNECTION k TO KAFKA (BROKERS ('a:9092', 'b:9092')) WITH (VALIDATE = false)",
        ] {
            let s = parse(sql).unwrap();
            assert_eq!(s[0].to_string(), sql);
        }
    }
}
