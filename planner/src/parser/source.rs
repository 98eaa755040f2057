//! `CREATE SOURCE` and `DROP SOURCE`, in Materialize's grammar:
//!
//! ```text
//! CREATE SOURCE [IF NOT EXISTS] name
//!   FROM LOAD GENERATOR generator [(option [value] [, ...])]
//!   [FOR ALL TABLES]
//!   [EXPOSE PROGRESS AS progress_name]
//!   [WITH (RETAIN HISTORY FOR interval)]
//!
//! CREATE SOURCE [IF NOT EXISTS] name
//!   FROM WEBHOOK BODY FORMAT {TEXT | JSON | JSON ARRAY | BYTES}
//!   [INCLUDE HEADERS [([NOT] 'header' [, ...])]]
//!   [INCLUDE HEADER 'header' AS column [BYTES]] [...]
//!   [CHECK ([WITH ({HEADERS | BODY | SECRET secret} [AS alias] [BYTES] [, ...])] expr)]
//!   [EXPOSE PROGRESS AS progress_name]
//! ```
//!
//! The statement prints back in one canonical form, which the catalog
//! stores and `SHOW CREATE SOURCE` shows.

use datafusion::sql::sqlparser::ast::{self, ObjectName};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::Token;

use super::ast::{ObjectKind, Statement};
use super::item_options::{ItemOption, display_options, parse_with_options};
use super::{eat_word, expect_word, expected, is_word};

/// A parsed `CREATE SOURCE`.
#[derive(Clone, Debug, PartialEq)]
pub struct CreateSourceStatement {
    /// The source's name.
    pub name: ObjectName,
    /// Skip (with a notice) if the name exists.
    pub if_not_exists: bool,
    /// Where its data comes from.
    pub connector: SourceConnectorStatement,
    /// `FOR ALL TABLES`: one relation per upstream relation.
    pub for_all_tables: bool,
    /// `FOR TABLES (upstream [AS name], ...)`: only these upstream
    /// tables, each into a relation of its own.
    pub for_tables: Option<Vec<(ObjectName, Option<ObjectName>)>>,
    /// `EXPOSE PROGRESS AS name`.
    pub progress: Option<ObjectName>,
    /// `WITH (RETAIN HISTORY FOR ...)`.
    pub options: Vec<ItemOption>,
}

/// The `FROM ...` part of a `CREATE SOURCE`.
#[derive(Clone, Debug, PartialEq)]
pub enum SourceConnectorStatement {
    /// `LOAD GENERATOR name [(options)]`.
    LoadGenerator {
        /// The generator, upper case, words separated by one space
        /// (`KEY VALUE`).
        generator: String,
        /// Options, names upper case (`TICK INTERVAL`), with their value
        /// if one was given.
        options: Vec<(String, Option<ast::Expr>)>,
    },
    /// `WEBHOOK BODY FORMAT ...`.
    Webhook(Box<WebhookStatement>),
    /// `POSTGRES CONNECTION name (...)`.
    Postgres(Box<PostgresStatement>),
    /// `KAFKA CONNECTION name (TOPIC ...) ...`.
    Kafka(Box<KafkaStatement>),
}

/// The `FROM KAFKA CONNECTION ...` part of a `CREATE SOURCE`.
#[derive(Clone, Debug, PartialEq)]
pub struct KafkaStatement {
    /// The connection.
    pub connection: ObjectName,
    /// `TOPIC 't'`.
    pub topic: String,
    /// `FORMAT TEXT | BYTES | JSON`, upper case.
    pub format: Option<String>,
    /// `INCLUDE KEY | PARTITION | OFFSET | TIMESTAMP [AS name], ...`:
    /// what (upper case) and the column's name, in order.
    pub include: Vec<(String, Option<ast::Ident>)>,
    /// `ENVELOPE NONE | UPSERT`, upper case.
    pub envelope: Option<String>,
}

/// What `INCLUDE` may name for a Kafka source.
pub const KAFKA_INCLUDES: &[&str] = &["KEY", "PARTITION", "OFFSET", "TIMESTAMP"];

/// The `FROM POSTGRES CONNECTION ...` part of a `CREATE SOURCE`.
#[derive(Clone, Debug, PartialEq)]
pub struct PostgresStatement {
    /// The connection.
    pub connection: ObjectName,
    /// `PUBLICATION 'p'`.
    pub publication: String,
    /// `TEXT COLUMNS (table.column, ...)`.
    pub text_columns: Vec<ObjectName>,
}

/// The `FROM WEBHOOK ...` part of a `CREATE SOURCE`.
#[derive(Clone, Debug, PartialEq)]
pub struct WebhookStatement {
    /// `TEXT`, `JSON`, `JSON ARRAY` or `BYTES`.
    pub body_format: String,
    /// `INCLUDE HEADERS [(...)]`: each entry, with `true` for `NOT`.
    pub include_headers: Option<Vec<(bool, String)>>,
    /// `INCLUDE HEADER 'name' AS column [BYTES]`, in order.
    pub header_columns: Vec<(String, ast::Ident, bool)>,
    /// `CHECK (...)`.
    pub check: Option<WebhookCheckStatement>,
}

/// `CHECK ([WITH (...)] expr)`.
#[derive(Clone, Debug, PartialEq)]
pub struct WebhookCheckStatement {
    /// The `WITH` entries.
    pub inputs: Vec<WebhookCheckOption>,
    /// The boolean expression.
    pub expr: ast::Expr,
}

/// One `WITH` entry of a webhook `CHECK`.
#[derive(Clone, Debug, PartialEq)]
pub struct WebhookCheckOption {
    /// What it brings into scope.
    pub input: WebhookCheckInputKind,
    /// `AS alias`.
    pub alias: Option<ast::Ident>,
    /// `BYTES`: as `bytea`.
    pub bytes: bool,
}

/// What a webhook `CHECK`'s `WITH` entry names.
#[derive(Clone, Debug, PartialEq)]
pub enum WebhookCheckInputKind {
    /// `HEADERS`.
    Headers,
    /// `BODY`.
    Body,
    /// `SECRET name`.
    Secret(ObjectName),
}

/// The body formats, as written.
pub const BODY_FORMATS: &[&str] = &["JSON ARRAY", "JSON", "TEXT", "BYTES"];

/// The options every load generator takes.
pub const COMMON_OPTIONS: &[&str] = &["TICK INTERVAL", "AS OF", "UP TO", "SEED"];

/// The options only generator `name` takes, beyond [`COMMON_OPTIONS`].
pub fn generator_options(name: &str) -> &'static [&'static str] {
    match name {
        "COUNTER" => &["MAX CARDINALITY"],
        "TPCH" => &["SCALE FACTOR"],
        "KEY VALUE" => &[
            "KEYS",
            "VALUE SIZE",
            "PARTITIONS",
            "BATCH SIZE",
            "SNAPSHOT ROUNDS",
            "TRANSACTIONAL SNAPSHOT",
        ],
        "NEXMARK" => &["EVENTS PER SECOND", "TOTAL EVENTS"],
        _ => &[],
    }
}

/// Every load generator option name (none is a prefix of another).
fn all_options() -> Vec<&'static str> {
    let mut all: Vec<&'static str> = COMMON_OPTIONS.to_vec();
    for g in GENERATORS {
        all.extend(generator_options(g));
    }
    all
}

/// The generators, as their names are written.
const GENERATORS: &[&str] = &[
    "COUNTER",
    "AUCTION",
    "MARKETING",
    "TPCH",
    "KEY VALUE",
    "NEXMARK",
];

/// Parse `CREATE SOURCE ...` (the parser is at `CREATE`).
pub(super) fn parse_create_source(parser: &mut Parser) -> Result<Statement, ParserError> {
    parser.expect_keywords(&[Keyword::CREATE, Keyword::SOURCE])?;
    let if_not_exists = parser.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
    let name = parser.parse_object_name(false)?;
    parser.expect_keyword(Keyword::FROM)?;
    let connector = if eat_word(parser, "load") {
        expect_word(parser, "generator")?;
        parse_load_generator(parser)?
    } else if eat_word(parser, "webhook") {
        SourceConnectorStatement::Webhook(Box::new(parse_webhook(parser)?))
    } else if eat_word(parser, "postgres") {
        SourceConnectorStatement::Postgres(Box::new(parse_postgres(parser)?))
    } else if eat_word(parser, "kafka") {
        SourceConnectorStatement::Kafka(Box::new(parse_kafka(parser)?))
    } else {
        return expected(parser, "LOAD GENERATOR, WEBHOOK, POSTGRES or KAFKA");
    };
    let for_all_tables = parser.parse_keywords(&[Keyword::FOR, Keyword::ALL, Keyword::TABLES]);
    let for_tables = if !for_all_tables && parser.parse_keywords(&[Keyword::FOR, Keyword::TABLES]) {
        parser.expect_token(&Token::LParen)?;
        let tables = parser.parse_comma_separated(|p| {
            let upstream = p.parse_object_name(false)?;
            let local = if p.parse_keyword(Keyword::AS) {
                Some(p.parse_object_name(false)?)
            } else {
                None
            };
            Ok((upstream, local))
        })?;
        parser.expect_token(&Token::RParen)?;
        Some(tables)
    } else {
        None
    };
    let progress = if eat_word(parser, "expose") {
        expect_word(parser, "progress")?;
        parser.expect_keyword(Keyword::AS)?;
        Some(parser.parse_object_name(false)?)
    } else {
        None
    };
    let options = if matches!(&parser.peek_token().token, Token::Word(w) if w.keyword == Keyword::WITH)
    {
        parse_with_options(parser)?
    } else {
        Vec::new()
    };
    Ok(Statement::CreateSource(Box::new(CreateSourceStatement {
        name,
        if_not_exists,
        connector,
        for_all_tables,
        for_tables,
        progress,
        options,
    })))
}

/// `CONNECTION name (TOPIC 't') [FORMAT f] [INCLUDE ...] [ENVELOPE e]`.
fn parse_kafka(parser: &mut Parser) -> Result<KafkaStatement, ParserError> {
    expect_word(parser, "connection")?;
    let connection = parser.parse_object_name(false)?;
    parser.expect_token(&Token::LParen)?;
    expect_word(parser, "topic")?;
    let _ = parser.consume_token(&Token::Eq);
    let topic = parser.parse_literal_string()?;
    parser.expect_token(&Token::RParen)?;
    let mut format = None;
    let mut include = Vec::new();
    let mut envelope = None;
    loop {
        if format.is_none() && eat_word(parser, "format") {
            let Some(f) = parse_words(parser, &["TEXT", "BYTES", "JSON"]) else {
                return expected(parser, "TEXT, BYTES or JSON");
            };
            format = Some(f);
        } else if is_word(parser, 0, "include") {
            parser.next_token();
            include.extend(parser.parse_comma_separated(|p| {
                let Some(what) = parse_words(p, KAFKA_INCLUDES) else {
                    return expected(p, "KEY, PARTITION, OFFSET or TIMESTAMP");
                };
                let alias = if p.parse_keyword(Keyword::AS) {
                    Some(p.parse_identifier()?)
                } else {
                    None
                };
                Ok((what, alias))
            })?);
        } else if envelope.is_none() && eat_word(parser, "envelope") {
            let Some(e) = parse_words(parser, &["NONE", "UPSERT"]) else {
                return expected(parser, "NONE or UPSERT");
            };
            envelope = Some(e);
        } else {
            break;
        }
    }
    Ok(KafkaStatement {
        connection,
        topic,
        format,
        include,
        envelope,
    })
}

/// `CONNECTION name (PUBLICATION 'p' [, TEXT COLUMNS (t.c, ...)])`.
fn parse_postgres(parser: &mut Parser) -> Result<PostgresStatement, ParserError> {
    expect_word(parser, "connection")?;
    let connection = parser.parse_object_name(false)?;
    parser.expect_token(&Token::LParen)?;
    let mut publication = None;
    let mut text_columns = Vec::new();
    loop {
        if eat_word(parser, "publication") {
            let _ = parser.consume_token(&Token::Eq);
            if publication.is_some() {
                return Err(ParserError::ParserError(
                    "PUBLICATION specified more than once".into(),
                ));
            }
            publication = Some(parser.parse_literal_string()?);
        } else if eat_word(parser, "text") {
            expect_word(parser, "columns")?;
            let _ = parser.consume_token(&Token::Eq);
            parser.expect_token(&Token::LParen)?;
            text_columns.extend(parser.parse_comma_separated(|p| p.parse_object_name(false))?);
            parser.expect_token(&Token::RParen)?;
        } else {
            return expected(parser, "PUBLICATION or TEXT COLUMNS");
        }
        if !parser.consume_token(&Token::Comma) {
            break;
        }
    }
    parser.expect_token(&Token::RParen)?;
    let Some(publication) = publication else {
        return Err(ParserError::ParserError(
            "a POSTGRES source needs PUBLICATION 'name'".into(),
        ));
    };
    Ok(PostgresStatement {
        connection,
        publication,
        text_columns,
    })
}

fn parse_load_generator(parser: &mut Parser) -> Result<SourceConnectorStatement, ParserError> {
    let Some(generator) = parse_words(parser, GENERATORS) else {
        return expected(parser, &format!("one of {}", GENERATORS.join(", ")));
    };
    let mut options = Vec::new();
    if parser.consume_token(&Token::LParen) {
        loop {
            let names = all_options();
            let Some(option) = parse_words(parser, &names) else {
                return expected(
                    parser,
                    &format!("a load generator option ({})", names.join(", ")),
                );
            };
            let _ = parser.consume_token(&Token::Eq);
            let value = match parser.peek_token().token {
                Token::Comma | Token::RParen => None,
                _ => Some(parser.parse_expr()?),
            };
            options.push((option, value));
            if !parser.consume_token(&Token::Comma) {
                break;
            }
        }
        parser.expect_token(&Token::RParen)?;
    }
    Ok(SourceConnectorStatement::LoadGenerator { generator, options })
}

fn parse_webhook(parser: &mut Parser) -> Result<WebhookStatement, ParserError> {
    expect_word(parser, "body")?;
    expect_word(parser, "format")?;
    let Some(body_format) = parse_words(parser, BODY_FORMATS) else {
        return expected(parser, "one of TEXT, JSON, JSON ARRAY, BYTES");
    };
    let mut include_headers = None;
    let mut header_columns = Vec::new();
    while is_word(parser, 0, "include") {
        parser.next_token();
        if eat_word(parser, "headers") {
            if include_headers.is_some() {
                return Err(ParserError::ParserError(
                    "INCLUDE HEADERS specified more than once".into(),
                ));
            }
            let mut entries = Vec::new();
            if parser.consume_token(&Token::LParen) {
                entries = parser.parse_comma_separated(|p| {
                    let not = p.parse_keyword(Keyword::NOT);
                    Ok((not, p.parse_literal_string()?))
                })?;
                parser.expect_token(&Token::RParen)?;
            }
            include_headers = Some(entries);
        } else if eat_word(parser, "header") {
            let header = parser.parse_literal_string()?;
            parser.expect_keyword(Keyword::AS)?;
            let column = parser.parse_identifier()?;
            let bytes = eat_word(parser, "bytes");
            header_columns.push((header, column, bytes));
        } else {
            return expected(parser, "HEADERS or HEADER");
        }
    }
    let check = if parser.parse_keyword(Keyword::CHECK) {
        parser.expect_token(&Token::LParen)?;
        let mut inputs = Vec::new();
        if parser.parse_keyword(Keyword::WITH) {
            parser.expect_token(&Token::LParen)?;
            inputs = parser.parse_comma_separated(|p| {
                let input = if eat_word(p, "headers") {
                    WebhookCheckInputKind::Headers
                } else if eat_word(p, "body") {
                    WebhookCheckInputKind::Body
                } else if eat_word(p, "secret") {
                    WebhookCheckInputKind::Secret(p.parse_object_name(false)?)
                } else {
                    return expected(p, "HEADERS, BODY or SECRET");
                };
                let alias = if p.parse_keyword(Keyword::AS) {
                    Some(p.parse_identifier()?)
                } else {
                    None
                };
                let bytes = eat_word(p, "bytes");
                Ok(WebhookCheckOption {
                    input,
                    alias,
                    bytes,
                })
            })?;
            parser.expect_token(&Token::RParen)?;
        }
        let expr = parser.parse_expr()?;
        parser.expect_token(&Token::RParen)?;
        Some(WebhookCheckStatement { inputs, expr })
    } else {
        None
    };
    Ok(WebhookStatement {
        body_format,
        include_headers,
        header_columns,
        check,
    })
}

/// Consume the first of `phrases` (each one or more words) that comes
/// next, returning it.
pub(super) fn parse_words(parser: &mut Parser, phrases: &[&str]) -> Option<String> {
    for phrase in phrases {
        let words: Vec<&str> = phrase.split(' ').collect();
        if words.iter().enumerate().all(|(i, w)| is_word(parser, i, w)) {
            for _ in &words {
                parser.next_token();
            }
            return Some(phrase.to_string());
        }
    }
    None
}

/// Parse `DROP SOURCE ...` and `DROP SECRET ...` (the parser is at `DROP`); `None` (nothing
/// consumed) for any other `DROP`.
pub(super) fn parse_drop(parser: &mut Parser) -> Result<Option<Statement>, ParserError> {
    let kind = if is_word(parser, 1, "source") {
        ObjectKind::Source
    } else if is_word(parser, 1, "sink") {
        ObjectKind::Sink
    } else if is_word(parser, 1, "secret") {
        ObjectKind::Secret
    } else if is_word(parser, 1, "connection") {
        ObjectKind::Connection
    } else {
        return Ok(None);
    };
    parser.next_token();
    parser.next_token();
    let if_exists = parser.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
    let names = parser.parse_comma_separated(|p| p.parse_object_name(false))?;
    let cascade = matches!(
        parser.parse_one_of_keywords(&[Keyword::CASCADE, Keyword::RESTRICT]),
        Some(Keyword::CASCADE)
    );
    Ok(Some(Statement::DropObjects {
        kind,
        if_exists,
        names,
        cascade,
    }))
}

impl std::fmt::Display for CreateSourceStatement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CREATE SOURCE {}{} FROM ",
            if self.if_not_exists {
                "IF NOT EXISTS "
            } else {
                ""
            },
            self.name
        )?;
        match &self.connector {
            SourceConnectorStatement::LoadGenerator { generator, options } => {
                write!(f, "LOAD GENERATOR {generator}")?;
                if !options.is_empty() {
                    let options: Vec<String> = options
                        .iter()
                        .map(|(n, v)| match v {
                            Some(v) => format!("{n} {v}"),
                            None => n.clone(),
                        })
                        .collect();
                    write!(f, " ({})", options.join(", "))?;
                }
            }
            SourceConnectorStatement::Webhook(w) => write!(f, "{w}")?,
            SourceConnectorStatement::Postgres(pg) => {
                write!(
                    f,
                    "POSTGRES CONNECTION {} (PUBLICATION {}",
                    pg.connection,
                    quote_string(&pg.publication)
                )?;
                if !pg.text_columns.is_empty() {
                    let columns: Vec<String> =
                        pg.text_columns.iter().map(|c| c.to_string()).collect();
                    write!(f, ", TEXT COLUMNS ({})", columns.join(", "))?;
                }
                write!(f, ")")?;
            }
            SourceConnectorStatement::Kafka(k) => {
                write!(
                    f,
                    "KAFKA CONNECTION {} (TOPIC {})",
                    k.connection,
                    quote_string(&k.topic)
                )?;
                if let Some(format) = &k.format {
                    write!(f, " FORMAT {format}")?;
                }
                if !k.include.is_empty() {
                    let include: Vec<String> = k
                        .include
                        .iter()
                        .map(|(what, alias)| match alias {
                            Some(a) => format!("{what} AS {a}"),
                            None => what.clone(),
                        })
                        .collect();
                    write!(f, " INCLUDE {}", include.join(", "))?;
                }
                if let Some(envelope) = &k.envelope {
                    write!(f, " ENVELOPE {envelope}")?;
                }
            }
        }
        if self.for_all_tables {
            write!(f, " FOR ALL TABLES")?;
        }
        if let Some(tables) = &self.for_tables {
            let tables: Vec<String> = tables
                .iter()
                .map(|(upstream, local)| match local {
                    Some(l) => format!("{upstream} AS {l}"),
                    None => upstream.to_string(),
                })
                .collect();
            write!(f, " FOR TABLES ({})", tables.join(", "))?;
        }
        if let Some(p) = &self.progress {
            write!(f, " EXPOSE PROGRESS AS {p}")?;
        }
        if !self.options.is_empty() {
            write!(f, " {}", display_options(&self.options))?;
        }
        Ok(())
    }
}

fn quote_string(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

impl std::fmt::Display for WebhookStatement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "WEBHOOK BODY FORMAT {}", self.body_format)?;
        if let Some(entries) = &self.include_headers {
            write!(f, " INCLUDE HEADERS")?;
            if !entries.is_empty() {
                let entries: Vec<String> = entries
                    .iter()
                    .map(|(not, h)| {
                        format!("{}{}", if *not { "NOT " } else { "" }, quote_string(h))
                    })
                    .collect();
                write!(f, " ({})", entries.join(", "))?;
            }
        }
        for (header, column, bytes) in &self.header_columns {
            write!(
                f,
                " INCLUDE HEADER {} AS {column}{}",
                quote_string(header),
                if *bytes { " BYTES" } else { "" }
            )?;
        }
        if let Some(check) = &self.check {
            write!(f, " CHECK (")?;
            if !check.inputs.is_empty() {
                let inputs: Vec<String> = check
                    .inputs
                    .iter()
                    .map(|i| {
                        let mut s = match &i.input {
                            WebhookCheckInputKind::Headers => "HEADERS".to_string(),
                            WebhookCheckInputKind::Body => "BODY".to_string(),
                            WebhookCheckInputKind::Secret(name) => format!("SECRET {name}"),
                        };
                        if let Some(alias) = &i.alias {
                            s.push_str(&format!(" AS {alias}"));
                        }
                        if i.bytes {
                            s.push_str(" BYTES");
                        }
                        s
                    })
                    .collect();
                write!(f, "WITH ({}) ", inputs.join(", "))?;
            }
            write!(f, "{})", check.expr)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::parser::{ObjectKind, Statement, parse};

    #[test]
    fn parses_load_generators_and_prints_them_back() {
        for (sql, printed) in [
            (
                "create source c from load generator counter",
                "CREATE SOURCE c FROM LOAD GENERATOR COUNTER",
            ),
            (
                "CREATE SOURCE IF NOT EXISTS s.a FROM LOAD GENERATOR AUCTION (TICK INTERVAL = '500ms', seed 7) FOR ALL TABLES EXPOSE PROGRESS AS a_prog WITH (RETAIN HISTORY FOR '1h')",
                "CREATE SOURCE IF NOT EXISTS s.a FROM LOAD GENERATOR AUCTION (TICK INTERVAL '500ms', SEED 7) FOR ALL TABLES EXPOSE PROGRESS AS a_prog WITH (RETAIN HISTORY FOR '1h')",
            ),
            (
                "CREATE SOURCE kv FROM LOAD GENERATOR KEY VALUE (KEYS 16, VALUE SIZE 8, PARTITIONS 2, BATCH SIZE 4, TRANSACTIONAL SNAPSHOT)",
                "CREATE SOURCE kv FROM LOAD GENERATOR KEY VALUE (KEYS 16, VALUE SIZE 8, PARTITIONS 2, BATCH SIZE 4, TRANSACTIONAL SNAPSHOT)",
            ),
        ] {
            let s = parse(sql).unwrap();
            assert_eq!(s.len(), 1);
            assert!(matches!(&s[0], Statement::CreateSource(_)), "{s:?}");
            assert_eq!(s[0].to_string(), printed);
            // The printed form parses to the same statement.
            assert_eq!(parse(printed).unwrap(), s);
        }
    }

    #[test]
    fn parses_postgres_sources_and_prints_them_back() {
        for (sql, printed) in [
            (
                "create source pg from postgres connection c (publication 'mz') for all tables",
                "CREATE SOURCE pg FROM POSTGRES CONNECTION c (PUBLICATION 'mz') FOR ALL TABLES",
            ),
            (
                "CREATE SOURCE s.pg FROM POSTGRES CONNECTION c (TEXT COLUMNS (t.mood, public.u.x), PUBLICATION = 'p') FOR TABLES (public.t AS t2, u) EXPOSE PROGRESS AS pg_lsn",
                "CREATE SOURCE s.pg FROM POSTGRES CONNECTION c (PUBLICATION 'p', TEXT COLUMNS (t.mood, public.u.x)) FOR TABLES (public.t AS t2, u) EXPOSE PROGRESS AS pg_lsn",
            ),
        ] {
            let s = parse(sql).unwrap();
            assert_eq!(s[0].to_string(), printed);
            assert_eq!(parse(printed).unwrap(), s);
        }
        let err =
            parse("CREATE SOURCE pg FROM POSTGRES CONNECTION c (TEXT COLUMNS (a.b))").unwrap_err();
        assert!(err.to_string().contains("PUBLICATION"), "{err}");
    }

    #[test]
    fn parses_kafka_sources_and_prints_them_back() {
        for (sql, printed) in [
            (
                "create source k from kafka connection c (topic 'orders')",
                "CREATE SOURCE k FROM KAFKA CONNECTION c (TOPIC 'orders')",
            ),
            (
                "CREATE SOURCE k FROM KAFKA CONNECTION c (TOPIC = 'o') FORMAT JSON INCLUDE KEY AS k, PARTITION, OFFSET AS o, TIMESTAMP ENVELOPE UPSERT EXPOSE PROGRESS AS kp",
                "CREATE SOURCE k FROM KAFKA CONNECTION c (TOPIC 'o') FORMAT JSON INCLUDE KEY AS k, PARTITION, OFFSET AS o, TIMESTAMP ENVELOPE UPSERT EXPOSE PROGRESS AS kp",
            ),
        ] {
            let s = parse(sql).unwrap();
            assert_eq!(s[0].to_string(), printed);
            assert_eq!(parse(printed).unwrap(), s);
        }
    }

    #[test]
    fn parses_webhooks_and_prints_them_back() {
        for (sql, printed) in [
            (
                "create source w from webhook body format json array",
                "CREATE SOURCE w FROM WEBHOOK BODY FORMAT JSON ARRAY",
            ),
            (
                "CREATE SOURCE w FROM WEBHOOK BODY FORMAT text INCLUDE HEADERS (NOT 'authorization', 'x-Id') INCLUDE HEADER 'x-event' AS event BYTES CHECK (WITH (BODY AS b BYTES, SECRET s.k AS key, HEADERS) constant_time_eq(hmac(b, key, 'sha256'), decode(headers->>'x-sig', 'hex'))) EXPOSE PROGRESS AS wp",
                "CREATE SOURCE w FROM WEBHOOK BODY FORMAT TEXT INCLUDE HEADERS (NOT 'authorization', 'x-Id') INCLUDE HEADER 'x-event' AS event BYTES CHECK (WITH (BODY AS b BYTES, SECRET s.k AS key, HEADERS) constant_time_eq(hmac(b, key, 'sha256'), decode(headers ->> 'x-sig', 'hex'))) EXPOSE PROGRESS AS wp",
            ),
            (
                "CREATE SOURCE w FROM WEBHOOK BODY FORMAT BYTES INCLUDE HEADERS CHECK (length(body) > 0)",
                "CREATE SOURCE w FROM WEBHOOK BODY FORMAT BYTES INCLUDE HEADERS CHECK (length(body) > 0)",
            ),
        ] {
            let s = parse(sql).unwrap();
            assert!(matches!(&s[0], Statement::CreateSource(_)), "{s:?}");
            assert_eq!(s[0].to_string(), printed);
            assert_eq!(parse(printed).unwrap(), s);
        }
        assert!(parse("CREATE SOURCE w FROM WEBHOOK BODY FORMAT XML").is_err());
        assert!(
            parse("CREATE SOURCE w FROM WEBHOOK BODY FORMAT JSON INCLUDE HEADERS INCLUDE HEADERS")
                .is_err()
        );
    }

    #[test]
    fn refuses_unknown_generators_and_options() {
        // The expectation is the error's DETAIL.
        let e = parse("CREATE SOURCE c FROM LOAD GENERATOR WIDGETS").unwrap_err();
        assert!(format!("{e:?}").contains("COUNTER"), "{e:?}");
        let e = parse("CREATE SOURCE c FROM LOAD GENERATOR COUNTER (SPEED 3)").unwrap_err();
        assert!(format!("{e:?}").contains("TICK INTERVAL"), "{e:?}");
        assert!(parse("CREATE SOURCE c FROM KAFKAESQUE").is_err());
    }

    #[test]
    fn parses_drop_source_and_leaves_other_drops_to_sqlparser() {
        let s = parse("DROP SOURCE IF EXISTS a, b CASCADE").unwrap();
        assert!(matches!(
            &s[0],
            Statement::DropObjects { kind: ObjectKind::Source, if_exists: true, names, cascade: true }
                if names.len() == 2
        ));
        assert_eq!(s[0].to_string(), "DROP SOURCE IF EXISTS a, b CASCADE");
        let s = parse("DROP TABLE t").unwrap();
        assert!(matches!(&s[0], Statement::Sql(_)));
    }
}
