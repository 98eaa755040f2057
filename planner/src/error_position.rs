//! Where in the query text an error is about: the `position` of an
//! `ErrorResponse`, from which psql draws its `LINE 1: ...` caret.
//!
//! Planning works on rewritten copies of a statement and DataFusion's
//! errors carry no place, so the place is found afterwards, in the
//! statement as parsed (its tokens keep their line and column): the first
//! mention of the missing relation, column or function, or the operator
//! no function matches. PostgreSQL points at the same tokens.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{self, Expr, Spanned, Visit, Visitor};
use datafusion::sql::sqlparser::tokenizer::Location;

use crate::parser::{Statement, normalize_ident};

/// What an error names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Subject {
    /// A relation (`relation "x" does not exist`), as the message names it.
    Relation(String),
    /// A column (`column "x" does not exist`).
    Column(String),
    /// A function (`function f(integer) does not exist`).
    Function(String),
    /// A binary operator (`operator does not exist: integer + text`).
    Operator(String),
}

/// The 1-based character position in `sql` of the first place `stmt`
/// mentions `subject`, if it does.
pub fn position_of(sql: &str, stmt: &Statement, subject: &Subject) -> Option<usize> {
    let inner = match stmt {
        Statement::Sql(s) | Statement::ExplainTimestamp(s) => s.as_ref(),
        _ => return None,
    };
    let location = find(inner, subject)?;
    let offset = char_offset(sql, location)?;
    Some(match subject {
        // The span found is the left operand's; PostgreSQL points at the
        // operator after it.
        Subject::Operator(_) => skip_whitespace(sql, offset) + 1,
        _ => offset + 1,
    })
}

/// The location of `subject` in `stmt` (for an operator: where its left
/// operand ends).
fn find(stmt: &ast::Statement, subject: &Subject) -> Option<Location> {
    struct Finder<'a> {
        subject: &'a Subject,
    }
    impl Visitor for Finder<'_> {
        type Break = Location;
        fn pre_visit_relation(&mut self, relation: &ast::ObjectName) -> ControlFlow<Location> {
            // Every relation name: FROM items, INSERT INTO x, UPDATE x, ...
            if let Subject::Relation(name) = self.subject {
                let parts: Vec<String> = relation
                    .0
                    .iter()
                    .filter_map(|p| p.as_ident().map(normalize_ident))
                    .collect();
                if (parts.join(".") == *name || parts.last() == Some(name))
                    && let Some(first) = relation.0.first().and_then(|p| p.as_ident())
                {
                    return ControlFlow::Break(first.span.start);
                }
            }
            ControlFlow::Continue(())
        }
        fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<Location> {
            match (self.subject, expr) {
                (Subject::Column(name), Expr::Identifier(ident))
                    if normalize_ident(ident) == *name =>
                {
                    ControlFlow::Break(ident.span.start)
                }
                (Subject::Column(name), Expr::CompoundIdentifier(parts))
                    if parts.last().map(normalize_ident).as_ref() == Some(name) =>
                {
                    ControlFlow::Break(parts[0].span.start)
                }
                (Subject::Function(name), Expr::Function(f)) => {
                    let last = f.name.0.last().and_then(|p| p.as_ident());
                    match (last, f.name.0.first().and_then(|p| p.as_ident())) {
                        (Some(last), Some(first)) if normalize_ident(last) == *name => {
                            ControlFlow::Break(first.span.start)
                        }
                        _ => ControlFlow::Continue(()),
                    }
                }
                (
                    Subject::Operator(op),
                    Expr::BinaryOp {
                        left, op: written, ..
                    },
                ) if written.to_string() == *op => {
                    let end = left.span().end;
                    if end.line == 0 {
                        ControlFlow::Continue(())
                    } else {
                        ControlFlow::Break(end)
                    }
                }
                _ => ControlFlow::Continue(()),
            }
        }
    }
    match stmt.visit(&mut Finder { subject }) {
        ControlFlow::Break(l) if l.line > 0 => Some(l),
        _ => None,
    }
}

/// The 0-based character offset of a 1-based line and column in `sql`.
fn char_offset(sql: &str, location: Location) -> Option<usize> {
    let line = usize::try_from(location.line).ok()?;
    let column = usize::try_from(location.column).ok()?;
    let before: usize = sql
        .split('\n')
        .take(line.checked_sub(1)?)
        .map(|l| l.chars().count() + 1)
        .sum();
    Some(before + column.checked_sub(1)?)
}

/// The offset of the first non-whitespace character at or after `offset`
/// (in characters).
fn skip_whitespace(sql: &str, offset: usize) -> usize {
    offset
        + sql
            .chars()
            .skip(offset)
            .take_while(|c| c.is_whitespace())
            .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(sql: &str, subject: Subject) -> Option<usize> {
        let stmts = crate::parser::parse(sql).unwrap();
        position_of(sql, &stmts[0], &subject)
    }

    #[test]
    fn finds_the_first_mention() {
        let sql = "SELECT a FROM t JOIN nosuch ON true";
        assert_eq!(
            at(sql, Subject::Relation("nosuch".into())),
            Some(sql.find("nosuch").unwrap() + 1)
        );
        let sql = "SELECT a,\n  b.Missing FROM t b";
        assert_eq!(
            at(sql, Subject::Column("missing".into())),
            Some(sql.find("b.Missing").unwrap() + 1)
        );
        let sql = "SELECT x, pg_catalog.foo(1)";
        assert_eq!(
            at(sql, Subject::Function("foo".into())),
            Some(sql.find("pg_catalog").unwrap() + 1)
        );
        let sql = "SELECT 1 +  'a'::text";
        assert_eq!(
            at(sql, Subject::Operator("+".into())),
            Some(sql.find('+').unwrap() + 1)
        );
        let sql = "INSERT INTO nosuch VALUES (1)";
        assert_eq!(at(sql, Subject::Relation("nosuch".into())), Some(13));
        assert_eq!(at(sql, Subject::Column("nosuch".into())), None);
    }
}
