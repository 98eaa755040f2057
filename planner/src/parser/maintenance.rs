//! `VACUUM` and `ANALYZE` in PostgreSQL's grammar (sqlparser parses
//! Redshift's `VACUUM` and Hive's `ANALYZE`):
//!
//! ```text
//! VACUUM [ ( option [, ...] ) ] [ table [ ( column [, ...] ) ] [, ...] ]
//! VACUUM [ FULL ] [ FREEZE ] [ VERBOSE ] [ ANALYZE ] [ table_and_columns [, ...] ]
//! ANALYZE [ ( option [, ...] ) ] [ table_and_columns [, ...] ]
//! ANALYZE [ VERBOSE ] [ table_and_columns [, ...] ]
//! ```
//!
//! and `REFRESH MATERIALIZED VIEW [CONCURRENTLY] name [WITH [NO] DATA]`.
//!
//! Freshet compacts its collections itself, plans without statistics and
//! keeps materialized views up to date as writes commit, so these only
//! check what they name; tools (`pgbench -i`, dbt, migrations, ORMs' test
//! fixtures) run them as routine.

use datafusion::sql::sqlparser::ast::{Ident, ObjectName};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::Token;

use super::ast::{MaintenanceKind, Statement};

/// The options each command accepts in its parenthesized form.
const VACUUM_OPTIONS: &[&str] = &[
    "full",
    "freeze",
    "verbose",
    "analyze",
    "disable_page_skipping",
    "skip_locked",
    "index_cleanup",
    "process_main",
    "process_toast",
    "truncate",
    "parallel",
    "skip_database_stats",
    "only_database_stats",
    "buffer_usage_limit",
];
const ANALYZE_OPTIONS: &[&str] = &["verbose", "skip_locked", "buffer_usage_limit"];

/// Parse `VACUUM ...` or `ANALYZE ...` (the leading word is next).
pub(super) fn parse_maintenance(parser: &mut Parser) -> Result<Statement, ParserError> {
    let kind = if parser.parse_keyword(Keyword::VACUUM) {
        MaintenanceKind::Vacuum
    } else {
        parser.expect_keyword(Keyword::ANALYZE)?;
        MaintenanceKind::Analyze
    };
    let (command, allowed) = match kind {
        MaintenanceKind::Vacuum => ("VACUUM", VACUUM_OPTIONS),
        MaintenanceKind::Analyze => ("ANALYZE", ANALYZE_OPTIONS),
    };
    if parser.consume_token(&Token::LParen) {
        loop {
            let word = parser.parse_identifier()?;
            let name = word.value.to_lowercase();
            if !allowed.contains(&name.as_str()) {
                return Err(ParserError::ParserError(format!(
                    "unrecognized {command} option \"{name}\""
                )));
            }
            // A value, if any: a boolean, number or word.
            if !matches!(parser.peek_token().token, Token::Comma | Token::RParen) {
                parser.next_token();
            }
            if !parser.consume_token(&Token::Comma) {
                break;
            }
        }
        parser.expect_token(&Token::RParen)?;
    } else {
        let words: &[Keyword] = match kind {
            MaintenanceKind::Vacuum => &[
                Keyword::FULL,
                Keyword::FREEZE,
                Keyword::VERBOSE,
                Keyword::ANALYZE,
            ],
            MaintenanceKind::Analyze => &[Keyword::VERBOSE],
        };
        for word in words {
            let _ = parser.parse_keyword(*word);
        }
    }
    let mut tables: Vec<(ObjectName, Vec<Ident>)> = Vec::new();
    if !matches!(parser.peek_token().token, Token::EOF | Token::SemiColon) {
        loop {
            let name = parser.parse_object_name(false)?;
            let columns = if parser.consume_token(&Token::LParen) {
                let columns = parser.parse_comma_separated(|p| p.parse_identifier())?;
                parser.expect_token(&Token::RParen)?;
                columns
            } else {
                Vec::new()
            };
            tables.push((name, columns));
            if !parser.consume_token(&Token::Comma) {
                break;
            }
        }
    }
    Ok(Statement::Maintenance { kind, tables })
}

/// Parse `REFRESH MATERIALIZED VIEW ...` (the leading word is next).
pub(super) fn parse_refresh(parser: &mut Parser) -> Result<Statement, ParserError> {
    parser.expect_keyword(Keyword::REFRESH)?;
    parser.expect_keywords(&[Keyword::MATERIALIZED, Keyword::VIEW])?;
    let _ = super::eat_word(parser, "concurrently");
    let name = parser.parse_object_name(false)?;
    let with_data = if parser.parse_keyword(Keyword::WITH) {
        let no = parser.parse_keyword(Keyword::NO);
        parser.expect_keyword(Keyword::DATA)?;
        !no
    } else {
        true
    };
    Ok(Statement::RefreshMaterializedView { name, with_data })
}

#[cfg(test)]
mod tests {
    use crate::parser::{MaintenanceKind, Statement, parse};

    fn tables(sql: &str) -> (MaintenanceKind, Vec<String>) {
        match &parse(sql).unwrap()[..] {
            [Statement::Maintenance { kind, tables }] => (
                *kind,
                tables
                    .iter()
                    .map(|(n, c)| {
                        let cols: Vec<String> = c.iter().map(|c| c.value.clone()).collect();
                        format!("{n}{cols:?}")
                    })
                    .collect(),
            ),
            other => panic!("{sql}: {other:?}"),
        }
    }

    #[test]
    fn parses_postgres_forms() {
        assert_eq!(
            tables("vacuum analyze pgbench_branches"),
            (MaintenanceKind::Vacuum, vec!["pgbench_branches[]".into()])
        );
        assert_eq!(tables("VACUUM").1, Vec::<String>::new());
        assert_eq!(
            tables("VACUUM (VERBOSE, INDEX_CLEANUP off, PARALLEL 2) a, s.b (x, y)").1,
            vec!["a[]".to_string(), "s.b[\"x\", \"y\"]".to_string()]
        );
        assert_eq!(
            tables("ANALYZE VERBOSE t (c)"),
            (MaintenanceKind::Analyze, vec!["t[\"c\"]".into()])
        );
        assert_eq!(tables("analyze").0, MaintenanceKind::Analyze);
        assert!(parse("VACUUM (NOPE) t").is_err());
        assert!(matches!(
            &parse("REFRESH MATERIALIZED VIEW CONCURRENTLY s.mv WITH NO DATA").unwrap()[..],
            [Statement::RefreshMaterializedView {
                with_data: false,
                ..
            }]
        ));
        assert!(parse("ANALYZE (FULL) t").is_err());
    }
}
