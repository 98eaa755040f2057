//! `CREATE` statements: `CREATE DEFAULT INDEX`, and tables, views,
//! materialized views and indexes with Freshet's item options
//! (`WITH (RETAIN HISTORY FOR ..., REFRESH ...)`).
//!
//! The options stand where Postgres puts a `WITH (...)` clause: after a
//! table's columns, before a view's `AS`, after an index's columns.
//! sqlparser would read that clause as storage parameters and fail on
//! `RETAIN HISTORY`, so the statement's head is parsed here (with
//! sqlparser's parsers for names, columns and queries) up to the clause;
//! when the clause is not Freshet's, the parser rewinds to the start of the
//! statement and sqlparser parses it whole, exactly as without Freshet.

use datafusion::sql::sqlparser::ast::helpers::stmt_create_table::CreateTableBuilder;
use datafusion::sql::sqlparser::ast::{self, Ident, ObjectName};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{IsOptional, Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::Token;

use super::ast::Statement;
use super::item_options::{ItemOption, at_item_options, parse_with_options};

/// Parse a statement that begins with `CREATE`.
pub(super) fn parse_create(parser: &mut Parser) -> Result<Statement, ParserError> {
    if parser.parse_keywords(&[Keyword::CREATE, Keyword::DEFAULT, Keyword::INDEX]) {
        let if_not_exists = parser.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
        parser.expect_keyword(Keyword::ON)?;
        return Ok(Statement::CreateDefaultIndex {
            on: parser.parse_object_name(false)?,
            if_not_exists,
        });
    }
    if let Some(stmt) = super::secret::parse_create_secret(parser)? {
        return Ok(stmt);
    }
    if let Some(stmt) = super::connection::parse_create_connection(parser)? {
        return Ok(stmt);
    }
    if super::is_word(parser, 1, "sink") {
        return super::sink::parse_create_sink(parser);
    }
    if super::is_word(parser, 1, "source") {
        return super::source::parse_create_source(parser);
    }
    if let Some(seq) = super::sequence::parse_create_sequence(parser)? {
        return Ok(Statement::Sql(Box::new(seq)));
    }
    if let Some(head) = parser.maybe_parse(|p| before_item_options(p, table_head))? {
        let options = parse_with_options(parser)?;
        return Ok(with_options(
            ast::Statement::CreateTable(head.build()),
            options,
        ));
    }
    if let Some(head) = parser.maybe_parse(|p| before_item_options(p, view_head))? {
        let options = parse_with_options(parser)?;
        parser.expect_keyword(Keyword::AS)?;
        let view = head.with_query(parser.parse_query()?);
        return Ok(with_options(ast::Statement::CreateView(view), options));
    }
    if let Some(index) = parser.maybe_parse(|p| before_item_options(p, index_head))? {
        let options = parse_with_options(parser)?;
        return Ok(with_options(ast::Statement::CreateIndex(index), options));
    }
    Ok(Statement::Sql(Box::new(parser.parse_statement()?)))
}

fn with_options(stmt: ast::Statement, options: Vec<ItemOption>) -> Statement {
    Statement::CreateWithOptions {
        stmt: Box::new(Statement::Sql(Box::new(stmt))),
        options,
    }
}

/// Parse a statement head with `head`, succeeding only if Freshet's item
/// options follow it (so that `maybe_parse` rewinds otherwise).
fn before_item_options<T>(
    parser: &mut Parser,
    head: fn(&mut Parser) -> Result<T, ParserError>,
) -> Result<T, ParserError> {
    let parsed = head(parser)?;
    if at_item_options(parser) {
        Ok(parsed)
    } else {
        Err(ParserError::ParserError("no item options".into()))
    }
}

/// `CREATE TABLE [IF NOT EXISTS] name (columns and constraints)`.
fn table_head(parser: &mut Parser) -> Result<CreateTableBuilder, ParserError> {
    parser.expect_keywords(&[Keyword::CREATE, Keyword::TABLE])?;
    let if_not_exists = parser.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
    let name = parser.parse_object_name(false)?;
    let (columns, constraints) = parser.parse_columns()?;
    Ok(CreateTableBuilder::new(name)
        .if_not_exists(if_not_exists)
        .columns(columns)
        .constraints(constraints))
}

/// The head of a `CREATE [OR REPLACE] [TEMPORARY] [MATERIALIZED] VIEW`,
/// up to its options.
struct ViewHead {
    or_replace: bool,
    temporary: bool,
    materialized: bool,
    if_not_exists: bool,
    name: ObjectName,
    columns: Vec<Ident>,
}

impl ViewHead {
    /// The view, as sqlparser would have parsed it without the options.
    fn with_query(self, query: Box<ast::Query>) -> ast::CreateView {
        ast::CreateView {
            or_alter: false,
            or_replace: self.or_replace,
            materialized: self.materialized,
            secure: false,
            name: self.name,
            name_before_not_exists: false,
            columns: self
                .columns
                .into_iter()
                .map(|name| ast::ViewColumnDef {
                    name,
                    data_type: None,
                    options: None,
                })
                .collect(),
            query,
            options: ast::CreateTableOptions::None,
            cluster_by: vec![],
            comment: None,
            with_no_schema_binding: false,
            if_not_exists: self.if_not_exists,
            temporary: self.temporary,
            copy_grants: false,
            to: None,
            params: None,
        }
    }
}

fn view_head(parser: &mut Parser) -> Result<ViewHead, ParserError> {
    parser.expect_keyword(Keyword::CREATE)?;
    let or_replace = parser.parse_keywords(&[Keyword::OR, Keyword::REPLACE]);
    let temporary = parser
        .parse_one_of_keywords(&[Keyword::TEMP, Keyword::TEMPORARY])
        .is_some();
    let materialized = parser.parse_keyword(Keyword::MATERIALIZED);
    parser.expect_keyword(Keyword::VIEW)?;
    let if_not_exists = parser.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
    let name = parser.parse_object_name(false)?;
    let columns = if parser.peek_token().token == Token::LParen {
        parser.parse_parenthesized_column_list(IsOptional::Mandatory, false)?
    } else {
        Vec::new()
    };
    Ok(ViewHead {
        or_replace,
        temporary,
        materialized,
        if_not_exists,
        name,
        columns,
    })
}

/// `CREATE INDEX [IF NOT EXISTS] [name] ON object (keys)`, the form
/// Freshet plans (no `UNIQUE`, `USING`, `INCLUDE` or `WHERE`).
fn index_head(parser: &mut Parser) -> Result<ast::CreateIndex, ParserError> {
    parser.expect_keywords(&[Keyword::CREATE, Keyword::INDEX])?;
    let if_not_exists = parser.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
    let name = if if_not_exists || !parser.parse_keyword(Keyword::ON) {
        let name = parser.parse_object_name(false)?;
        parser.expect_keyword(Keyword::ON)?;
        Some(name)
    } else {
        None
    };
    let table_name = parser.parse_object_name(false)?;
    parser.expect_token(&Token::LParen)?;
    let columns = parser.parse_comma_separated(Parser::parse_create_index_expr)?;
    parser.expect_token(&Token::RParen)?;
    Ok(ast::CreateIndex {
        name,
        table_name,
        using: None,
        columns,
        unique: false,
        concurrently: false,
        if_not_exists,
        include: vec![],
        nulls_distinct: None,
        with: vec![],
        predicate: None,
        index_options: vec![],
        alter_options: vec![],
    })
}

#[cfg(test)]
mod tests {
    use crate::parser::{Statement, parse};

    /// The statement parsed with options prints back as written, and the
    /// same statement without them is sqlparser's.
    #[test]
    fn options_stand_where_written() {
        for sql in [
            "CREATE TABLE t (a INT, b TEXT, PRIMARY KEY (a)) WITH (RETAIN HISTORY FOR '1h')",
            "CREATE MATERIALIZED VIEW IF NOT EXISTS s.mv (x) WITH (REFRESH EVERY '1 day' ALIGNED TO 5) AS SELECT 1",
            "CREATE OR REPLACE MATERIALIZED VIEW mv WITH (RETAIN HISTORY FOR '1h') AS SELECT a FROM t",
            "CREATE VIEW v WITH (RETAIN HISTORY FOR '1h') AS SELECT 1",
            "CREATE INDEX IF NOT EXISTS i ON t(a, b + 1) WITH (RETAIN HISTORY FOR '1h')",
            "CREATE INDEX ON t(a) WITH (RETAIN HISTORY FOR '1h')",
        ] {
            let parsed = parse(sql).unwrap();
            let [stmt @ Statement::CreateWithOptions { .. }] = &parsed[..] else {
                panic!("{sql}: {parsed:?}")
            };
            assert_eq!(stmt.to_string(), sql);
            assert_eq!(
                parse(&stmt.to_string()).unwrap(),
                parsed,
                "{sql} reads back"
            );
        }
        for sql in [
            "CREATE TABLE t (a INT) WITH (fillfactor = 70)",
            "CREATE TABLE t AS SELECT 1",
            "CREATE MATERIALIZED VIEW mv AS SELECT 1",
            "CREATE UNIQUE INDEX i ON t (a)",
            "CREATE INDEX i ON t (a)",
        ] {
            assert!(
                matches!(&parse(sql).unwrap()[..], [Statement::Sql(_)]),
                "{sql}"
            );
        }
    }

    #[test]
    fn bad_options_are_syntax_errors_at_the_option() {
        match parse("CREATE MATERIALIZED VIEW mv WITH (RETAIN HISTORY '1h') AS SELECT 1")
            .unwrap_err()
        {
            crate::PlanError::Parse {
                message, detail, ..
            } => {
                assert_eq!(message, "syntax error at or near \"'1h'\"");
                assert!(detail.is_some_and(|d| d.contains("Expected: FOR")));
            }
            other => panic!("{other:?}"),
        }
        assert!(parse("CREATE TABLE t (a int) WITH (REFRESH EVERY '1 day'").is_err());
    }
}
