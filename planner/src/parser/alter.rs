//! `ALTER` statements Freshet handles itself: `ALTER <kind> [IF EXISTS]
//! name RENAME TO new_name` for every kind of object (sqlparser knows
//! neither `MATERIALIZED VIEW`, `SOURCE` nor `SINK` here), and `ALTER
//! {TABLE | MATERIALIZED VIEW | INDEX} ... SET (options) | RESET (names)`
//! with Freshet's item options. Any other `ALTER` (`ALTER TABLE ... ADD
//! COLUMN`) rewinds and goes to sqlparser whole.

use datafusion::sql::sqlparser::ast::ObjectName;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::Token;

use super::ast::{ObjectKind, Statement};
use super::item_options::{parse_option_group, parse_reset_names, starts_option};

/// `ALTER <kind> [IF EXISTS] name`.
struct AlterHead {
    kind: ObjectKind,
    if_exists: bool,
    name: ObjectName,
}

/// What follows an [`AlterHead`] in the statements parsed here.
enum Action {
    Rename,
    Set,
    Reset,
}

/// Parse a statement that begins with `ALTER`.
pub(super) fn parse_alter(parser: &mut Parser) -> Result<Statement, ParserError> {
    if let Some(stmt) = super::secret::parse_alter_secret(parser)? {
        return Ok(stmt);
    }
    let Some((head, action)) = parser.maybe_parse(head_and_action)? else {
        return Ok(Statement::Sql(Box::new(parser.parse_statement()?)));
    };
    let AlterHead {
        kind,
        if_exists,
        name,
    } = head;
    Ok(match action {
        Action::Rename => Statement::AlterRename {
            kind,
            if_exists,
            name,
            new_name: parser.parse_identifier()?,
        },
        Action::Set => Statement::AlterOptions {
            kind,
            if_exists,
            name,
            set: parse_option_group(parser)?,
            reset: Vec::new(),
        },
        Action::Reset => Statement::AlterOptions {
            kind,
            if_exists,
            name,
            set: Vec::new(),
            reset: parse_reset_names(parser)?,
        },
    })
}

/// The head and the action word(s) after it, if they are ones Freshet
/// parses; an error (so that `maybe_parse` rewinds) otherwise.
fn head_and_action(parser: &mut Parser) -> Result<(AlterHead, Action), ParserError> {
    let not_ours = || ParserError::ParserError("not a Freshet ALTER".into());
    parser.expect_keyword(Keyword::ALTER)?;
    let kind = if parser.parse_keyword(Keyword::TABLE) {
        ObjectKind::Table
    } else if parser.parse_keyword(Keyword::VIEW) {
        ObjectKind::View
    } else if parser.parse_keywords(&[Keyword::MATERIALIZED, Keyword::VIEW]) {
        ObjectKind::MaterializedView
    } else if parser.parse_keyword(Keyword::INDEX) {
        ObjectKind::Index
    } else if parser.parse_keyword(Keyword::SOURCE) {
        ObjectKind::Source
    } else if super::eat_word(parser, "secret") {
        ObjectKind::Secret
    } else if super::eat_word(parser, "connection") {
        ObjectKind::Connection
    } else if super::eat_word(parser, "sink") {
        ObjectKind::Sink
    } else if parser.parse_keyword(Keyword::SEQUENCE) {
        ObjectKind::Sequence
    } else {
        return Err(not_ours());
    };
    let if_exists = parser.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
    let name = parser.parse_object_name(false)?;
    let action = if parser.parse_keywords(&[Keyword::RENAME, Keyword::TO]) {
        Action::Rename
    } else if matches!(
        kind,
        ObjectKind::Table | ObjectKind::MaterializedView | ObjectKind::Index | ObjectKind::Source
    ) && parser.peek_nth_token(1).token == Token::LParen
        && starts_option(parser, 2)
    {
        if parser.parse_keyword(Keyword::SET) {
            Action::Set
        } else if parser.parse_keyword(Keyword::RESET) {
            Action::Reset
        } else {
            return Err(not_ours());
        }
    } else {
        return Err(not_ours());
    };
    Ok((
        AlterHead {
            kind,
            if_exists,
            name,
        },
        action,
    ))
}

#[cfg(test)]
mod tests {
    use crate::parser::{ObjectKind, Statement, parse};

    #[test]
    fn renames_every_kind_and_leaves_the_rest_to_sqlparser() {
        for (sql, kind) in [
            (
                "ALTER MATERIALIZED VIEW IF EXISTS s.mv RENAME TO w",
                ObjectKind::MaterializedView,
            ),
            ("ALTER SINK k RENAME TO k2", ObjectKind::Sink),
            ("ALTER INDEX i RENAME TO j", ObjectKind::Index),
        ] {
            match &parse(sql).unwrap()[..] {
                [stmt @ Statement::AlterRename { kind: k, .. }] => {
                    assert_eq!(*k, kind);
                    assert_eq!(stmt.to_string(), sql);
                }
                other => panic!("{sql}: {other:?}"),
            }
        }
        assert!(is_sql("ALTER TABLE t ADD COLUMN x int"));
        assert!(is_sql("ALTER TABLE t SET (fillfactor = 70)"));
    }

    fn is_sql(sql: &str) -> bool {
        matches!(&parse(sql).unwrap()[..], [Statement::Sql(_)])
    }
}
