//! `CREATE SINK`, in Materialize's grammar with Freshet's targets:
//!
//! ```text
//! CREATE SINK [IF NOT EXISTS] name
//!   FROM relation
//!   INTO FILES (PATH 'dir' | URL 'file:///dir')
//!      | KAFKA CONNECTION conn (TOPIC 't' [, PROGRESS TOPIC 'p']
//!          [, TOPIC PARTITION COUNT n] [, TOPIC REPLICATION FACTOR n])
//!      | POSTGRES CONNECTION conn (TABLE 'schema.table'
//!          [, PROGRESS TABLE 'schema.table'])
//!   [KEY (column [, ...]) [NOT ENFORCED]]
//!   [FORMAT PARQUET | CSV | JSON]
//!   [ENVELOPE UPSERT | DEBEZIUM]
//!   [WITH (SNAPSHOT [=] bool, COMMIT INTERVAL [=] 'interval')]
//! ```
//!
//! The statement prints back in one canonical form, which the catalog
//! stores (with the relation named by id) and `SHOW CREATE SINK` shows.

use datafusion::sql::sqlparser::ast::{self, Ident, ObjectName};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::Token;

use super::ast::Statement;
use super::{eat_word, expect_word, expected};

/// A parsed `CREATE SINK`.
#[derive(Clone, Debug, PartialEq)]
pub struct CreateSinkStatement {
    /// The sink's name.
    pub name: ObjectName,
    /// Skip (with a notice) if the name exists.
    pub if_not_exists: bool,
    /// The relation whose changes it exports.
    pub from: ObjectName,
    /// Where they go.
    pub target: SinkTargetStatement,
    /// `KEY (...)`.
    pub key: Vec<Ident>,
    /// `NOT ENFORCED` after the key.
    pub key_not_enforced: bool,
    /// `FORMAT ...`, upper case.
    pub format: Option<String>,
    /// `ENVELOPE ...`, upper case.
    pub envelope: Option<String>,
    /// `WITH (...)`: option names upper case, with their value if given.
    pub options: Vec<(String, Option<ast::Expr>)>,
}

/// The `INTO ...` part of a `CREATE SINK`.
#[derive(Clone, Debug, PartialEq)]
pub enum SinkTargetStatement {
    /// `FILES (PATH 'dir')` or `FILES (URL 'url')`: the option, upper
    /// case, and its value.
    Files {
        /// `PATH` or `URL`.
        option: String,
        /// The directory or URL.
        value: String,
    },
    /// `KAFKA CONNECTION conn (TOPIC 't', ...)`.
    Kafka {
        /// The connection.
        connection: ObjectName,
        /// The options in parentheses: names upper case (words joined by
        /// one space), in order.
        options: Vec<(String, SinkOptionValue)>,
    },
    /// `POSTGRES CONNECTION conn (TABLE 't', ...)`.
    Postgres {
        /// The connection.
        connection: ObjectName,
        /// The options in parentheses, as for Kafka.
        options: Vec<(String, SinkOptionValue)>,
    },
}

/// The value of a target's option.
#[derive(Clone, Debug, PartialEq)]
pub enum SinkOptionValue {
    /// A string literal.
    Text(String),
    /// A number, as written.
    Number(String),
}

/// The options `INTO KAFKA CONNECTION c (...)` takes.
pub const KAFKA_SINK_OPTIONS: &[&str] = &[
    "TOPIC PARTITION COUNT",
    "TOPIC REPLICATION FACTOR",
    "PROGRESS TOPIC",
    "TOPIC",
];

/// The options `INTO POSTGRES CONNECTION c (...)` takes.
pub const POSTGRES_SINK_OPTIONS: &[&str] = &["PROGRESS TABLE", "TABLE"];

/// The formats a files sink writes.
pub const FILE_FORMATS: &[&str] = &["PARQUET", "CSV", "JSON"];

/// Parse `CREATE SINK ...` (the parser is at `CREATE`).
pub(super) fn parse_create_sink(parser: &mut Parser) -> Result<Statement, ParserError> {
    parser.expect_keyword(Keyword::CREATE)?;
    expect_word(parser, "sink")?;
    let if_not_exists = parser.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
    let name = parser.parse_object_name(false)?;
    parser.expect_keyword(Keyword::FROM)?;
    let from = parser.parse_object_name(false)?;
    parser.expect_keyword(Keyword::INTO)?;
    let target = if eat_word(parser, "files") {
        parser.expect_token(&Token::LParen)?;
        let option = if eat_word(parser, "path") {
            "PATH"
        } else if eat_word(parser, "url") {
            "URL"
        } else {
            return expected(parser, "PATH or URL");
        };
        let _ = parser.consume_token(&Token::Eq);
        let value = parser.parse_literal_string()?;
        parser.expect_token(&Token::RParen)?;
        SinkTargetStatement::Files {
            option: option.into(),
            value,
        }
    } else if eat_word(parser, "kafka") {
        let (connection, options) = parse_connection_target(parser, KAFKA_SINK_OPTIONS)?;
        SinkTargetStatement::Kafka {
            connection,
            options,
        }
    } else if eat_word(parser, "postgres") {
        let (connection, options) = parse_connection_target(parser, POSTGRES_SINK_OPTIONS)?;
        SinkTargetStatement::Postgres {
            connection,
            options,
        }
    } else {
        return expected(parser, "FILES, KAFKA or POSTGRES");
    };
    let mut key = Vec::new();
    let mut key_not_enforced = false;
    if parser.parse_keyword(Keyword::KEY) {
        parser.expect_token(&Token::LParen)?;
        key = parser.parse_comma_separated(|p| p.parse_identifier())?;
        parser.expect_token(&Token::RParen)?;
        key_not_enforced = parser.parse_keywords(&[Keyword::NOT, Keyword::ENFORCED]);
    }
    let format = if parser.parse_keyword(Keyword::FORMAT) {
        match FILE_FORMATS.iter().find(|f| eat_word(parser, f)) {
            Some(f) => Some(f.to_string()),
            None => return expected(parser, "PARQUET, CSV or JSON"),
        }
    } else {
        None
    };
    let envelope = if eat_word(parser, "envelope") {
        if eat_word(parser, "upsert") {
            Some("UPSERT".to_string())
        } else if eat_word(parser, "debezium") {
            Some("DEBEZIUM".to_string())
        } else {
            return expected(parser, "UPSERT or DEBEZIUM");
        }
    } else {
        None
    };
    let mut options = Vec::new();
    if parser.parse_keyword(Keyword::WITH) {
        parser.expect_token(&Token::LParen)?;
        options = parser.parse_comma_separated(|p| {
            // `COMMIT INTERVAL` is two words; the rest are SUBSCRIBE's.
            if super::is_word(p, 0, "commit") && super::is_word(p, 1, "interval") {
                p.next_token();
                p.next_token();
                let _ = p.consume_token(&Token::Eq);
                return Ok(("COMMIT INTERVAL".to_string(), Some(p.parse_expr()?)));
            }
            let mut one = super::stream::parse_option(p)?;
            one.0 = one.0.to_uppercase();
            Ok(one)
        })?;
        parser.expect_token(&Token::RParen)?;
    }
    Ok(Statement::CreateSink(Box::new(CreateSinkStatement {
        name,
        if_not_exists,
        from,
        target,
        key,
        key_not_enforced,
        format,
        envelope,
        options,
    })))
}

/// `CONNECTION name (option value, ...)` with options among `names`.
fn parse_connection_target(
    parser: &mut Parser,
    names: &[&str],
) -> Result<(ObjectName, Vec<(String, SinkOptionValue)>), ParserError> {
    expect_word(parser, "connection")?;
    let connection = parser.parse_object_name(false)?;
    parser.expect_token(&Token::LParen)?;
    let options = parser.parse_comma_separated(|p| parse_option(p, names))?;
    parser.expect_token(&Token::RParen)?;
    Ok((connection, options))
}

/// One of `names` with its value (`=` optional).
fn parse_option(
    parser: &mut Parser,
    names: &[&str],
) -> Result<(String, SinkOptionValue), ParserError> {
    let Some(name) = super::source::parse_words(parser, names) else {
        return expected(parser, &names.join(", "));
    };
    let _ = parser.consume_token(&Token::Eq);
    let value = match parser.next_token().token {
        Token::SingleQuotedString(s) => SinkOptionValue::Text(s),
        Token::Number(n, _) => SinkOptionValue::Number(n),
        _ => {
            parser.prev_token();
            return expected(parser, "a string or a number");
        }
    };
    Ok((name, value))
}

/// A target's options as they are written.
fn print_options(options: &[(String, SinkOptionValue)]) -> String {
    let options: Vec<String> = options
        .iter()
        .map(|(name, value)| match value {
            SinkOptionValue::Text(t) => format!("{name} {}", quoted(t)),
            SinkOptionValue::Number(n) => format!("{name} {n}"),
        })
        .collect();
    options.join(", ")
}

/// A string literal, quoted as SQL.
fn quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

impl std::fmt::Display for CreateSinkStatement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CREATE SINK {}{} FROM {} INTO ",
            if self.if_not_exists {
                "IF NOT EXISTS "
            } else {
                ""
            },
            self.name,
            self.from
        )?;
        match &self.target {
            SinkTargetStatement::Files { option, value } => {
                write!(f, "FILES ({option} {})", quoted(value))?
            }
            SinkTargetStatement::Kafka {
                connection,
                options,
            } => write!(
                f,
                "KAFKA CONNECTION {connection} ({})",
                print_options(options)
            )?,
            SinkTargetStatement::Postgres {
                connection,
                options,
            } => write!(
                f,
                "POSTGRES CONNECTION {connection} ({})",
                print_options(options)
            )?,
        }
        if !self.key.is_empty() {
            let key: Vec<String> = self.key.iter().map(|k| k.to_string()).collect();
            write!(f, " KEY ({})", key.join(", "))?;
            if self.key_not_enforced {
                f.write_str(" NOT ENFORCED")?;
            }
        }
        if let Some(format) = &self.format {
            write!(f, " FORMAT {format}")?;
        }
        if let Some(envelope) = &self.envelope {
            write!(f, " ENVELOPE {envelope}")?;
        }
        if !self.options.is_empty() {
            let options: Vec<String> = self
                .options
                .iter()
                .map(|(n, v)| match v {
                    Some(v) => format!("{n} = {v}"),
                    None => n.clone(),
                })
                .collect();
            write!(f, " WITH ({})", options.join(", "))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::parser::{Statement, parse};

    fn sink(sql: &str) -> super::CreateSinkStatement {
        match parse(sql).unwrap().pop() {
            Some(Statement::CreateSink(s)) => *s,
            other => panic!("{sql}: {other:?}"),
        }
    }

    #[test]
    fn sinks_print_back_in_canonical_form() {
        let s = sink(
            "create sink if not exists s from mv into files (path '/tmp/o''x') \
             key (a, b) not enforced format parquet envelope debezium \
             with (snapshot = false, commit interval '100ms')",
        );
        assert!(s.if_not_exists);
        assert!(s.key_not_enforced);
        assert_eq!(
            s.to_string(),
            "CREATE SINK IF NOT EXISTS s FROM mv INTO FILES (PATH '/tmp/o''x') KEY (a, b) \
             NOT ENFORCED FORMAT PARQUET ENVELOPE DEBEZIUM WITH (SNAPSHOT = false, \
             COMMIT INTERVAL = '100ms')"
        );
        assert_eq!(sink(&s.to_string()), s);
        let kafka = sink(
            "create sink k from t into kafka connection kc (topic 'out', progress topic = 'p', \
             topic partition count 3) format json envelope upsert",
        );
        assert_eq!(
            kafka.to_string(),
            "CREATE SINK k FROM t INTO KAFKA CONNECTION kc (TOPIC 'out', PROGRESS TOPIC 'p', \
             TOPIC PARTITION COUNT 3) FORMAT JSON ENVELOPE UPSERT"
        );
        assert_eq!(sink(&kafka.to_string()), kafka);
        let pg = sink(
            "create sink p from t into postgres connection pg (table 'a.b', progress table 'a.p')",
        );
        assert_eq!(
            pg.to_string(),
            "CREATE SINK p FROM t INTO POSTGRES CONNECTION pg (TABLE 'a.b', PROGRESS TABLE 'a.p')"
        );
        assert_eq!(sink(&pg.to_string()), pg);
        let plain = sink("CREATE SINK s FROM t INTO FILES (URL 'file:///d') FORMAT CSV");
        assert_eq!(plain.envelope, None);
        assert_eq!(plain.format.as_deref(), Some("CSV"));
    }

    #[test]
    fn bad_sinks_are_syntax_errors() {
        for sql in [
            "CREATE SINK s FROM t INTO KAFKAS (TOPIC 't')",
            "CREATE SINK s FROM t INTO FILES (DIR 'x')",
            "CREATE SINK s FROM t INTO KAFKA CONNECTION k (TOPICS 'x')",
            "CREATE SINK s FROM t INTO KAFKA CONNECTION k (TOPIC x)",
            "CREATE SINK s FROM t INTO KAFKA (TOPIC 'x')",
            "CREATE SINK s FROM t INTO POSTGRES CONNECTION pg (TOPIC 'x')",
            "CREATE SINK s FROM t INTO FILES (PATH 'x') FORMAT AVRO",
            "CREATE SINK s FROM t INTO FILES (PATH 'x') ENVELOPE NONE",
            "CREATE SINK s FROM t",
        ] {
            assert!(parse(sql).is_err(), "{sql}");
        }
    }
}
