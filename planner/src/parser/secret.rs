//! Secrets, in Materialize's grammar:
//!
//! ```text
//! CREATE SECRET [IF NOT EXISTS] name AS value
//! ALTER SECRET [IF EXISTS] name AS value
//! ALTER SECRET [IF EXISTS] name RENAME TO new_name
//! DROP SECRET [IF EXISTS] name [, ...] [CASCADE | RESTRICT]
//! SHOW SECRETS [{FROM | IN} schema]
//! ```
//!
//! A secret statement prints back with its value replaced by `'********'`:
//! the printed form is what the catalog stores, what `SHOW CREATE` shows
//! and what logs may hold, and none of them may hold the value.

use datafusion::sql::sqlparser::ast::{self, ObjectName};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};

use super::ast::Statement;
use super::is_word;

/// What a secret's value prints as.
pub const REDACTED: &str = "'********'";

/// A parsed `CREATE SECRET`.
#[derive(Clone, PartialEq)]
pub struct CreateSecretStatement {
    /// The secret's name.
    pub name: ObjectName,
    /// Skip (with a notice) if the name exists.
    pub if_not_exists: bool,
    /// The value's expression (a string, or e.g. `decode('...', 'base64')`).
    pub value: ast::Expr,
}

impl std::fmt::Debug for CreateSecretStatement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self}")
    }
}

impl std::fmt::Display for CreateSecretStatement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CREATE SECRET {}{} AS {REDACTED}",
            if self.if_not_exists {
                "IF NOT EXISTS "
            } else {
                ""
            },
            self.name
        )
    }
}

/// A parsed `ALTER SECRET ... AS`.
#[derive(Clone, PartialEq)]
pub struct AlterSecretStatement {
    /// The secret's name.
    pub name: ObjectName,
    /// A missing secret is a notice, not an error.
    pub if_exists: bool,
    /// The new value's expression.
    pub value: ast::Expr,
}

impl std::fmt::Debug for AlterSecretStatement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self}")
    }
}

impl std::fmt::Display for AlterSecretStatement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ALTER SECRET {}{} AS {REDACTED}",
            if self.if_exists { "IF EXISTS " } else { "" },
            self.name
        )
    }
}

/// Parse `CREATE SECRET ...` if that is what comes (the parser is at
/// `CREATE`); `None`, nothing consumed, otherwise.
pub(super) fn parse_create_secret(parser: &mut Parser) -> Result<Option<Statement>, ParserError> {
    if !is_word(parser, 1, "secret") {
        return Ok(None);
    }
    parser.next_token();
    parser.next_token();
    let if_not_exists = parser.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
    let name = parser.parse_object_name(false)?;
    parser.expect_keyword(Keyword::AS)?;
    let value = parser.parse_expr()?;
    Ok(Some(Statement::CreateSecret(Box::new(
        CreateSecretStatement {
            name,
            if_not_exists,
            value,
        },
    ))))
}

/// Parse `ALTER SECRET [IF EXISTS] name AS value` if that is what comes;
/// `None`, nothing consumed, otherwise (`ALTER SECRET ... RENAME` is
/// parsed with the other renames).
pub(super) fn parse_alter_secret(parser: &mut Parser) -> Result<Option<Statement>, ParserError> {
    if !is_word(parser, 1, "secret") {
        return Ok(None);
    }
    parser.maybe_parse(|p| {
        p.expect_keyword(Keyword::ALTER)?;
        p.next_token();
        let if_exists = p.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
        let name = p.parse_object_name(false)?;
        p.expect_keyword(Keyword::AS)?;
        let value = p.parse_expr()?;
        Ok(Statement::AlterSecret(Box::new(AlterSecretStatement {
            name,
            if_exists,
            value,
        })))
    })
}

#[cfg(test)]
mod tests {
    use crate::parser::{ObjectKind, Statement, parse};

    #[test]
    fn secret_statements_never_print_their_value() {
        let s = parse("create secret if not exists s.k as 'hunter2'").unwrap();
        assert!(matches!(&s[0], Statement::CreateSecret(c) if c.if_not_exists));
        assert_eq!(
            s[0].to_string(),
            "CREATE SECRET IF NOT EXISTS s.k AS '********'"
        );
        assert!(!format!("{s:?}").contains("hunter2"));
        let s = parse("ALTER SECRET k AS decode('aHVudGVyMg==', 'base64')").unwrap();
        assert_eq!(s[0].to_string(), "ALTER SECRET k AS '********'");
        assert!(!format!("{s:?}").contains("aHVudGVy"));
        let s = parse("ALTER SECRET k RENAME TO k2").unwrap();
        assert!(matches!(
            &s[0],
            Statement::AlterRename {
                kind: ObjectKind::Secret,
                ..
            }
        ));
        let s = parse("DROP SECRET IF EXISTS a, b CASCADE").unwrap();
        assert!(matches!(
            &s[0],
            Statement::DropObjects {
                kind: ObjectKind::Secret,
                if_exists: true,
                cascade: true,
                ..
            }
        ));
        assert!(matches!(
            &parse("SHOW SECRETS FROM s").unwrap()[0],
            Statement::ShowSecrets(Some(_))
        ));
    }
}
