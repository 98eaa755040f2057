//! Parsing SQL into Freshet statements.
//!
//! Freshet parses with sqlparser's PostgreSQL dialect (the version DataFusion
//! re-exports, so ASTs pass straight to its planner) and adds a thin layer
//! for statements sqlparser does not know, such as `EXPLAIN TIMESTAMP FOR`
//! and `ALTER VIEW ... RENAME TO`.

use datafusion::sql::sqlparser::ast::{self, Ident, ObjectName};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan, Tokenizer};

use crate::error::{PlanError, Result};

/// Deepest nesting the parser accepts before refusing the statement.
pub const RECURSION_LIMIT: usize = 64;

/// Kinds of object a Freshet-specific statement may name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ObjectKind {
    /// `TABLE`
    Table,
    /// `VIEW`
    View,
    /// `MATERIALIZED VIEW`
    MaterializedView,
    /// `INDEX`
    Index,
    /// `SOURCE`
    Source,
    /// `SINK`
    Sink,
}

/// A statement as Freshet understands it.
#[derive(Clone, Debug, PartialEq)]
pub enum Statement {
    /// Anything sqlparser parses.
    Sql(Box<ast::Statement>),
    /// `EXPLAIN TIMESTAMP FOR <select>`.
    ExplainTimestamp(Box<ast::Statement>),
    /// `EXPLAIN MATERIALIZED VIEW name`.
    ExplainMaterializedView(ObjectName),
    /// `SHOW CREATE MATERIALIZED VIEW name`.
    ShowCreateMaterializedView(ObjectName),
    /// `EXPLAIN INDEX name`.
    ExplainIndex(ObjectName),
    /// `SHOW INDEXES [ON name]`.
    ShowIndexes(Option<ObjectName>),
    /// `CREATE DEFAULT INDEX [IF NOT EXISTS] ON name`.
    CreateDefaultIndex {
        /// The object indexed.
        on: ObjectName,
        /// Skip (with a notice) if it exists.
        if_not_exists: bool,
    },
    /// `SUBSCRIBE ...` (streamed as `COPY ... TO STDOUT`).
    Subscribe(Box<SubscribeStatement>),
    /// `COPY (SUBSCRIBE ...) TO STDOUT [WITH (option value, ...)]`.
    CopySubscribe {
        /// The subscribe.
        subscribe: Box<SubscribeStatement>,
        /// COPY options, names lower-cased (`format`, `delimiter`, ...).
        options: Vec<(String, Option<String>)>,
    },
    /// `DECLARE name [NO SCROLL] CURSOR [WITHOUT HOLD] FOR <query or
    /// SUBSCRIBE>`.
    Declare {
        /// The cursor's name.
        name: String,
        /// What it reads.
        stmt: Box<Statement>,
    },
    /// `FETCH [FORWARD | NEXT] [count | ALL] [FROM | IN] name
    /// [WITH (timeout = interval)]`.
    Fetch {
        /// The cursor.
        name: String,
        /// Rows wanted (`None`: all available).
        count: Option<u64>,
        /// How long to wait for a first row (`None`: until one comes).
        timeout: Option<String>,
    },
    /// `CREATE {TABLE | MATERIALIZED VIEW | INDEX} ... WITH (RETAIN
    /// HISTORY ..., REFRESH ...)`: the statement without the options.
    CreateWithOptions {
        /// The `CREATE` statement.
        stmt: Box<Statement>,
        /// Its options.
        options: Vec<crate::parse_options::ItemOption>,
    },
    /// `ALTER {TABLE | MATERIALIZED VIEW | INDEX} [IF EXISTS] name {SET
    /// (options) | RESET (names)}`.
    AlterOptions {
        /// What kind of object.
        kind: ObjectKind,
        /// Whether a missing object is a notice rather than an error.
        if_exists: bool,
        /// The object.
        name: ObjectName,
        /// `SET` options.
        set: Vec<crate::parse_options::ItemOption>,
        /// `RESET` option names, lower case (`retain history`).
        reset: Vec<String>,
    },
    /// `<query> AS OF [AT LEAST] <time>`.
    SelectAsOf {
        /// The query.
        query: Box<ast::Query>,
        /// Whether `AT LEAST` (any readable time at or after `time`).
        at_least: bool,
        /// The time.
        time: Box<ast::Expr>,
    },
    /// `ALTER <kind> [IF EXISTS] name RENAME TO new_name`.
    AlterRename {
        /// What kind of object.
        kind: ObjectKind,
        /// Whether a missing object is a notice rather than an error.
        if_exists: bool,
        /// The object.
        name: ObjectName,
        /// Its new (unqualified) name.
        new_name: Ident,
    },
}

/// What a `SUBSCRIBE` reads.
#[derive(Clone, Debug, PartialEq)]
pub enum SubscribeRelation {
    /// A table, view, materialized view or source.
    Name(ObjectName),
    /// `(query)`.
    Query(Box<ast::Query>),
}

/// The shape of a subscribe's output rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EnvelopeKind {
    /// `ENVELOPE UPSERT`: one row per changed key with its new value.
    Upsert,
    /// `ENVELOPE DEBEZIUM`: one row per changed key with before and after.
    Debezium,
}

/// `SUBSCRIBE [TO] relation [ENVELOPE ...] [WITH (...)] [AS OF [AT LEAST]
/// t] [UP TO t]`.
#[derive(Clone, Debug, PartialEq)]
pub struct SubscribeStatement {
    /// What to follow.
    pub relation: SubscribeRelation,
    /// `ENVELOPE UPSERT | DEBEZIUM (KEY (cols))`.
    pub envelope: Option<(EnvelopeKind, Vec<Ident>)>,
    /// `WITH (name [= value], ...)`, names lower-cased.
    pub options: Vec<(String, Option<ast::Expr>)>,
    /// `AS OF [AT LEAST] t`: whether `AT LEAST`, and `t`.
    pub as_of: Option<(bool, ast::Expr)>,
    /// `UP TO t`.
    pub up_to: Option<ast::Expr>,
}

impl std::fmt::Display for SubscribeStatement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.relation {
            SubscribeRelation::Name(n) => write!(f, "SUBSCRIBE {n}")?,
            SubscribeRelation::Query(q) => write!(f, "SUBSCRIBE ({q})")?,
        }
        if let Some((kind, key)) = &self.envelope {
            let keys: Vec<String> = key.iter().map(|k| k.to_string()).collect();
            let kind = match kind {
                EnvelopeKind::Upsert => "UPSERT",
                EnvelopeKind::Debezium => "DEBEZIUM",
            };
            write!(f, " ENVELOPE {kind} (KEY ({}))", keys.join(", "))?;
        }
        if !self.options.is_empty() {
            let options: Vec<String> = self
                .options
                .iter()
                .map(|(n, v)| match v {
                    Some(v) => format!("{} = {v}", n.to_uppercase()),
                    None => n.to_uppercase(),
                })
                .collect();
            write!(f, " WITH ({})", options.join(", "))?;
        }
        if let Some((at_least, t)) = &self.as_of {
            write!(f, " AS OF {}{t}", if *at_least { "AT LEAST " } else { "" })?;
        }
        if let Some(t) = &self.up_to {
            write!(f, " UP TO {t}")?;
        }
        Ok(())
    }
}

impl std::fmt::Display for Statement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Statement::Sql(s) => write!(f, "{s}"),
            Statement::Subscribe(s) => write!(f, "{s}"),
            Statement::CopySubscribe { subscribe, options } => {
                write!(f, "COPY ({subscribe}) TO STDOUT")?;
                if !options.is_empty() {
                    let options: Vec<String> = options
                        .iter()
                        .map(|(n, v)| match v {
                            Some(v) => format!("{} '{}'", n.to_uppercase(), v.replace('\'', "''")),
                            None => n.to_uppercase(),
                        })
                        .collect();
                    write!(f, " WITH ({})", options.join(", "))?;
                }
                Ok(())
            }
            Statement::Declare { name, stmt } => write!(
                f,
                "DECLARE {} CURSOR FOR {stmt}",
                crate::resolve::quote_if_needed(name)
            ),
            Statement::Fetch {
                name,
                count,
                timeout,
            } => {
                match count {
                    Some(n) => write!(f, "FETCH {n} ")?,
                    None => write!(f, "FETCH ALL ")?,
                }
                write!(f, "{}", crate::resolve::quote_if_needed(name))?;
                if let Some(t) = timeout {
                    write!(f, " WITH (TIMEOUT = '{}')", t.replace('\'', "''"))?;
                }
                Ok(())
            }
            Statement::CreateWithOptions { stmt, options } => {
                let text = stmt.to_string();
                let options = crate::parse_options::display_options(options);
                // Options go before `AS` in a materialized view, at the
                // end elsewhere.
                match text.find(" AS ") {
                    Some(i)
                        if text.starts_with("CREATE MATERIALIZED VIEW")
                            || text.starts_with("CREATE OR REPLACE MATERIALIZED VIEW") =>
                    {
                        write!(f, "{} {options}{}", &text[..i], &text[i..])
                    }
                    _ => write!(f, "{text} {options}"),
                }
            }
            Statement::AlterOptions {
                kind,
                if_exists,
                name,
                set,
                reset,
            } => {
                write!(
                    f,
                    "ALTER {} {}{name} ",
                    kind.keyword(),
                    if *if_exists { "IF EXISTS " } else { "" }
                )?;
                if set.is_empty() {
                    write!(f, "RESET ({})", reset.join(", ").to_uppercase())
                } else {
                    let options = crate::parse_options::display_options(set);
                    write!(f, "SET {}", options.trim_start_matches("WITH "))
                }
            }
            Statement::SelectAsOf {
                query,
                at_least,
                time,
            } => write!(
                f,
                "{query} AS OF {}{time}",
                if *at_least { "AT LEAST " } else { "" }
            ),
            Statement::ExplainTimestamp(s) => write!(f, "EXPLAIN TIMESTAMP FOR {s}"),
            Statement::ExplainMaterializedView(n) => write!(f, "EXPLAIN MATERIALIZED VIEW {n}"),
            Statement::ExplainIndex(n) => write!(f, "EXPLAIN INDEX {n}"),
            Statement::ShowIndexes(None) => write!(f, "SHOW INDEXES"),
            Statement::ShowIndexes(Some(n)) => write!(f, "SHOW INDEXES ON {n}"),
            Statement::CreateDefaultIndex { on, if_not_exists } => write!(
                f,
                "CREATE DEFAULT INDEX {}ON {on}",
                if *if_not_exists { "IF NOT EXISTS " } else { "" }
            ),
            Statement::ShowCreateMaterializedView(n) => {
                write!(f, "SHOW CREATE MATERIALIZED VIEW {n}")
            }
            Statement::AlterRename {
                kind,
                if_exists,
                name,
                new_name,
            } => write!(
                f,
                "ALTER {} {}{name} RENAME TO {new_name}",
                kind.keyword(),
                if *if_exists { "IF EXISTS " } else { "" }
            ),
        }
    }
}

impl ObjectKind {
    /// The SQL keyword(s).
    pub fn keyword(&self) -> &'static str {
        match self {
            ObjectKind::Table => "TABLE",
            ObjectKind::View => "VIEW",
            ObjectKind::MaterializedView => "MATERIALIZED VIEW",
            ObjectKind::Index => "INDEX",
            ObjectKind::Source => "SOURCE",
            ObjectKind::Sink => "SINK",
        }
    }
}

/// Parse a query string holding any number of statements.
pub fn parse(sql: &str) -> Result<Vec<Statement>> {
    let dialect = PostgreSqlDialect {};
    let tokens = Tokenizer::new(&dialect, sql)
        .with_unescape(true)
        .tokenize_with_location()
        .map_err(|e| parse_error(sql, e.into()))?;
    crate::complexity::check_expression_depth(&tokens)?;
    crate::complexity::check_parameters(&tokens)?;
    let mut parser = Parser::new(&dialect)
        .with_recursion_limit(RECURSION_LIMIT)
        .with_tokens_with_locations(tokens);
    let mut out = Vec::new();
    loop {
        while parser.consume_token(&Token::SemiColon) {}
        if parser.peek_token().token == Token::EOF {
            break;
        }
        let stmt = parse_one(&mut parser).map_err(|e| parse_error(sql, e))?;
        out.push(stmt);
        let next = parser.peek_token();
        if next.token != Token::EOF && next.token != Token::SemiColon {
            return Err(parse_error(
                sql,
                ParserError::ParserError(format!(
                    "Expected: end of statement, found: {} at Line: {}, Column: {}",
                    next.token, next.span.start.line, next.span.start.column
                )),
            ));
        }
    }
    Ok(out)
}

pub(crate) fn parse_one(parser: &mut Parser) -> Result<Statement, ParserError> {
    if let Some(stmt) = crate::parse_subscribe::try_parse(parser)? {
        return Ok(stmt);
    }
    if let Some(stmt) = crate::parse_options::try_parse_create_with(parser)? {
        return Ok(stmt);
    }
    if let Some(stmt) = crate::parse_options::try_parse_alter_options(parser)? {
        return Ok(stmt);
    }
    if let Some(stmt) = try_parse_select_as_of(parser)? {
        return Ok(stmt);
    }
    if parser.parse_keywords(&[Keyword::EXPLAIN, Keyword::TIMESTAMP, Keyword::FOR]) {
        return Ok(Statement::ExplainTimestamp(Box::new(
            parser.parse_statement()?,
        )));
    }
    if parser.parse_keywords(&[Keyword::EXPLAIN, Keyword::MATERIALIZED, Keyword::VIEW]) {
        return Ok(Statement::ExplainMaterializedView(
            parser.parse_object_name(false)?,
        ));
    }
    if parser.parse_keywords(&[
        Keyword::SHOW,
        Keyword::CREATE,
        Keyword::MATERIALIZED,
        Keyword::VIEW,
    ]) {
        return Ok(Statement::ShowCreateMaterializedView(
            parser.parse_object_name(false)?,
        ));
    }
    if parser.parse_keywords(&[Keyword::EXPLAIN, Keyword::INDEX]) {
        return Ok(Statement::ExplainIndex(parser.parse_object_name(false)?));
    }
    let show_indexes = matches!(&parser.peek_nth_token(0).token, Token::Word(w) if w.keyword == Keyword::SHOW)
        && matches!(&parser.peek_nth_token(1).token,
            Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case("indexes"));
    if show_indexes {
        parser.next_token();
        parser.next_token();
        let on = if parser.parse_keyword(Keyword::ON) {
            Some(parser.parse_object_name(false)?)
        } else {
            None
        };
        return Ok(Statement::ShowIndexes(on));
    }
    if parser.parse_keywords(&[Keyword::CREATE, Keyword::DEFAULT, Keyword::INDEX]) {
        let if_not_exists = parser.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
        parser.expect_keyword(Keyword::ON)?;
        return Ok(Statement::CreateDefaultIndex {
            on: parser.parse_object_name(false)?,
            if_not_exists,
        });
    }
    if let Some(rename) = try_alter_rename(parser)? {
        return Ok(rename);
    }
    Ok(Statement::Sql(Box::new(parser.parse_statement()?)))
}

/// Recognize `<query> AS OF [AT LEAST] <time>`: a query followed, at
/// depth 0, by `AS OF` and an expression that ends the statement. Anything
/// else (`SELECT 1 AS of`) is left to sqlparser.
fn try_parse_select_as_of(parser: &mut Parser) -> Result<Option<Statement>, ParserError> {
    let starts_query = match &parser.peek_token().token {
        Token::Word(w) => matches!(w.keyword, Keyword::SELECT | Keyword::WITH | Keyword::VALUES),
        Token::LParen => true,
        _ => false,
    };
    if !starts_query {
        return Ok(None);
    }
    let tokens = statement_tokens(parser);
    let mut depth = 0usize;
    let mut split = None;
    for (i, t) in tokens.iter().enumerate() {
        match &t.token {
            Token::LParen => depth += 1,
            Token::RParen => depth = depth.saturating_sub(1),
            Token::Word(w) if depth == 0 && w.keyword == Keyword::OF && i > 0 => {
                if matches!(&tokens[i - 1].token, Token::Word(a) if a.keyword == Keyword::AS) {
                    split = Some(i - 1);
                }
            }
            _ => {}
        }
    }
    let Some(split) = split else {
        return Ok(None);
    };
    let dialect = PostgreSqlDialect {};
    let sub = |ts: &[TokenWithSpan]| parser_over(&dialect, ts);
    let mut q = sub(&tokens[..split]);
    let Ok(query) = q.parse_query() else {
        return Ok(None);
    };
    if q.peek_token().token != Token::EOF {
        return Ok(None);
    }
    let mut t = sub(&tokens[split + 2..]);
    let at_least = t.parse_keywords(&[Keyword::AT, Keyword::LEAST]);
    let Ok(time) = t.parse_expr() else {
        return Ok(None);
    };
    if t.peek_token().token != Token::EOF {
        return Ok(None);
    }
    skip_tokens(parser, tokens.len());
    Ok(Some(Statement::SelectAsOf {
        query,
        at_least,
        time: Box::new(time),
    }))
}

/// The tokens of the statement starting here, up to its `;` at depth 0
/// or the end of input, without whitespace (nothing is consumed).
///
/// One walk over the token stream: `peek_nth_token(n)` rescans from the
/// parser's position, so peeking each token in turn would cost the square
/// of the statement's length (a 30,000-item `IN` list took 11 s).
pub(crate) fn statement_tokens(parser: &Parser) -> Vec<TokenWithSpan> {
    let mut tokens: Vec<TokenWithSpan> = Vec::new();
    let mut depth = 0usize;
    for t in (parser.index()..).map(|i| parser.token_at(i)) {
        match &t.token {
            Token::Whitespace(_) => continue,
            Token::EOF => break,
            Token::SemiColon if depth == 0 => break,
            Token::LParen => depth += 1,
            Token::RParen => depth = depth.saturating_sub(1),
            _ => {}
        }
        tokens.push(t.clone());
    }
    tokens
}

/// A parser over `tokens`, as if they were the whole input.
pub(crate) fn parser_over<'a>(
    dialect: &'a PostgreSqlDialect,
    tokens: &[TokenWithSpan],
) -> Parser<'a> {
    let mut tokens = tokens.to_vec();
    tokens.push(TokenWithSpan::wrap(Token::EOF));
    Parser::new(dialect)
        .with_recursion_limit(RECURSION_LIMIT)
        .with_tokens_with_locations(tokens)
}

/// Consume `n` tokens (counted as `peek_nth_token` counts them).
pub(crate) fn skip_tokens(parser: &mut Parser, n: usize) {
    for _ in 0..n {
        parser.next_token();
    }
}

/// `ALTER <kind> [IF EXISTS] <name>` at the start of a statement, found by
/// peeking, so that statements Freshet does not handle still go to
/// sqlparser untouched.
pub(crate) struct AlterHead {
    /// The object kind named.
    pub kind: ObjectKind,
    /// Whether `IF EXISTS` was given.
    pub if_exists: bool,
    /// Tokens before the name.
    before_name: usize,
    /// Index of the first token after the name.
    pub after_name: usize,
}

/// Peek an [`AlterHead`].
pub(crate) fn peek_alter_head(parser: &Parser) -> Option<AlterHead> {
    let word = |n: usize| match parser.peek_nth_token(n).token {
        Token::Word(w) => Some(w.keyword),
        _ => None,
    };
    if word(0) != Some(Keyword::ALTER) {
        return None;
    }
    let (kind, kind_len) = match (word(1), word(2)) {
        (Some(Keyword::TABLE), _) => (ObjectKind::Table, 1),
        (Some(Keyword::VIEW), _) => (ObjectKind::View, 1),
        (Some(Keyword::MATERIALIZED), Some(Keyword::VIEW)) => (ObjectKind::MaterializedView, 2),
        (Some(Keyword::INDEX), _) => (ObjectKind::Index, 1),
        (Some(Keyword::SOURCE), _) => (ObjectKind::Source, 1),
        _ if crate::parse_subscribe::is_word(parser, 1, "sink") => (ObjectKind::Sink, 1),
        _ => return None,
    };
    let mut n = 1 + kind_len;
    let if_exists = word(n) == Some(Keyword::IF) && word(n + 1) == Some(Keyword::EXISTS);
    if if_exists {
        n += 2;
    }
    let before_name = n;
    // name: word (. word)*
    if !matches!(parser.peek_nth_token(n).token, Token::Word(_)) {
        return None;
    }
    n += 1;
    while parser.peek_nth_token(n).token == Token::Period
        && matches!(parser.peek_nth_token(n + 1).token, Token::Word(_))
    {
        n += 2;
    }
    Some(AlterHead {
        kind,
        if_exists,
        before_name,
        after_name: n,
    })
}

/// Consume the head peeked as `head`, returning the object's name.
pub(crate) fn take_alter_head(
    parser: &mut Parser,
    head: &AlterHead,
) -> Result<ObjectName, ParserError> {
    skip_tokens(parser, head.before_name);
    parser.parse_object_name(false)
}

/// Recognize `ALTER <kind> [IF EXISTS] name RENAME TO new`.
fn try_alter_rename(parser: &mut Parser) -> Result<Option<Statement>, ParserError> {
    let Some(head) = peek_alter_head(parser) else {
        return Ok(None);
    };
    let word = |n: usize| match parser.peek_nth_token(n).token {
        Token::Word(w) => Some(w.keyword),
        _ => None,
    };
    if !(word(head.after_name) == Some(Keyword::RENAME)
        && word(head.after_name + 1) == Some(Keyword::TO))
    {
        return Ok(None);
    }
    let name = take_alter_head(parser, &head)?;
    skip_tokens(parser, 2);
    let new_name = parser.parse_identifier()?;
    Ok(Some(Statement::AlterRename {
        kind: head.kind,
        if_exists: head.if_exists,
        name,
        new_name,
    }))
}

/// Turn a sqlparser error into a syntax error with a 1-based character
/// position, as Postgres reports in `ErrorResponse`.
fn parse_error(sql: &str, e: ParserError) -> PlanError {
    let message = match &e {
        ParserError::TokenizerError(m) | ParserError::ParserError(m) => m.clone(),
        ParserError::RecursionLimitExceeded => {
            return PlanError::Parse {
                message: "statement is too deeply nested".into(),
                position: None,
            };
        }
    };
    let (message, position) = match message.rsplit_once(" at Line: ") {
        Some((msg, loc)) => {
            let mut parts = loc.split(", Column: ");
            let line = parts.next().and_then(|l| l.trim().parse::<usize>().ok());
            let col = parts.next().and_then(|c| c.trim().parse::<usize>().ok());
            let pos = match (line, col) {
                (Some(line), Some(col)) => {
                    let before: usize = sql
                        .split('\n')
                        .take(line.saturating_sub(1))
                        .map(|l| l.chars().count() + 1)
                        .sum();
                    Some(before + col)
                }
                _ => None,
            };
            (msg.to_string(), pos)
        }
        None => (message, None),
    };
    PlanError::Parse {
        message: format!("syntax error: {message}"),
        position,
    }
}

/// Normalize an identifier as Postgres does: unquoted names fold to lower
/// case, quoted names are kept exactly.
pub fn normalize_ident(ident: &Ident) -> String {
    match ident.quote_style {
        Some(_) => ident.value.clone(),
        None => ident.value.to_lowercase(),
    }
}

/// The identifiers of an object name, normalized.
pub fn normalize_name(name: &ObjectName) -> Result<Vec<String>> {
    name.0
        .iter()
        .map(|part| {
            part.as_ident()
                .map(normalize_ident)
                .ok_or_else(|| PlanError::Syntax(format!("invalid name: {name}")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_statements_and_skips_empty_ones() {
        let s = parse("select 1;; select 2;").unwrap();
        assert_eq!(s.len(), 2);
        assert!(parse("  ;  ").unwrap().is_empty());
    }

    #[test]
    fn reports_positions() {
        // `FROMM` parses as a column alias; the error is at `t`, the 16th
        // character, which is where Postgres reports it too.
        match parse("SELECT 1 FROMM t").unwrap_err() {
            PlanError::Parse { position, .. } => assert_eq!(position, Some(16)),
            other => panic!("{other:?}"),
        }
        // Positions count across lines, from the start of the query string.
        let sql = "select 1;\nselect 1 frm t";
        match parse(sql).unwrap_err() {
            PlanError::Parse { position, .. } => {
                assert_eq!(position, Some(sql.rfind('t').unwrap() + 1))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn parses_extensions() {
        assert!(matches!(
            &parse("EXPLAIN TIMESTAMP FOR SELECT 1").unwrap()[0],
            Statement::ExplainTimestamp(_)
        ));
        match &parse("ALTER VIEW IF EXISTS s.v RENAME TO w").unwrap()[0] {
            Statement::AlterRename {
                kind,
                if_exists,
                name,
                new_name,
            } => {
                assert_eq!(*kind, ObjectKind::View);
                assert!(*if_exists);
                assert_eq!(name.to_string(), "s.v");
                assert_eq!(new_name.value, "w");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            &parse("ALTER TABLE t ADD COLUMN x int").unwrap()[0],
            Statement::Sql(_)
        ));
    }

    #[test]
    fn parses_query_as_of() {
        match &parse("SELECT a AS of FROM t AS OF AT LEAST 5 + 1; SELECT 1 AS of").unwrap()[..] {
            [
                Statement::SelectAsOf { at_least, time, .. },
                Statement::Sql(_),
            ] => {
                assert!(*at_least);
                assert_eq!(time.to_string(), "5 + 1");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            &parse("(SELECT 1) UNION (SELECT 2) AS OF mz_now()").unwrap()[0],
            Statement::SelectAsOf { .. }
        ));
    }

    #[test]
    fn deep_nesting_is_refused_not_a_crash() {
        let sql = format!("SELECT {}1{}", "(".repeat(5000), ")".repeat(5000));
        assert!(parse(&sql).is_err());
    }
}
