//! `CREATE SOURCE` and `DROP SOURCE`, in Materialize's grammar:
//!
//! ```text
//! CREATE SOURCE [IF NOT EXISTS] name
//!   FROM LOAD GENERATOR generator [(option [value] [, ...])]
//!   [FOR ALL TABLES]
//!   [EXPOSE PROGRESS AS progress_name]
//!   [WITH (RETAIN HISTORY FOR interval)]
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
}

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
    } else {
        return expected(parser, "LOAD GENERATOR");
    };
    let for_all_tables = parser.parse_keywords(&[Keyword::FOR, Keyword::ALL, Keyword::TABLES]);
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
        progress,
        options,
    })))
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

/// Consume the first of `phrases` (each one or more words) that comes
/// next, returning it.
fn parse_words(parser: &mut Parser, phrases: &[&str]) -> Option<String> {
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

/// Parse `DROP SOURCE ...` (the parser is at `DROP`); `None` (nothing
/// consumed) for any other `DROP`.
pub(super) fn parse_drop(parser: &mut Parser) -> Result<Option<Statement>, ParserError> {
    if !(is_word(parser, 1, "source")) {
        return Ok(None);
    }
    parser.next_token();
    parser.next_token();
    let if_exists = parser.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
    let names = parser.parse_comma_separated(|p| p.parse_object_name(false))?;
    let cascade = matches!(
        parser.parse_one_of_keywords(&[Keyword::CASCADE, Keyword::RESTRICT]),
        Some(Keyword::CASCADE)
    );
    Ok(Some(Statement::DropObjects {
        kind: ObjectKind::Source,
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
        }
        if self.for_all_tables {
            write!(f, " FOR ALL TABLES")?;
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
