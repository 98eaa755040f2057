//! PostgreSQL's string functions for building SQL text, which BI tools use
//! in their catalog queries and users in theirs: `format(fmt, ...)` (`%s`,
//! `%I`, `%L`, `%%`, with `n$` positions and `-`/width),
//! `quote_literal`, `quote_nullable` and `parse_ident`.

use std::sync::Arc;

use arrow::array::{ArrayRef, ListBuilder, StringArray, StringBuilder};
use arrow::datatypes::DataType;
use datafusion::common::Result;
use datafusion::logical_expr::ScalarUDF;
use freshet_repr::sqlstate;

use crate::error::sqlstate_error;
use crate::query::bound_function::{BoundFunction, rows, texts};

/// Most arguments `format` takes after its format string.
const FORMAT_MAX_ARGS: usize = 32;

/// The function `name`, if this module provides it.
pub fn text_function(name: &str) -> Option<Arc<ScalarUDF>> {
    Some(match name {
        "format" => {
            let arities: Vec<usize> = (1..=FORMAT_MAX_ARGS + 1).collect();
            BoundFunction::udf("format", &arities, DataType::Utf8, |args| {
                let n = rows(args);
                let columns: Vec<Vec<Option<String>>> = (0..args.len())
                    .map(|i| texts(args, i))
                    .collect::<Result<_>>()?;
                let out = (0..n)
                    .map(|r| {
                        let Some(fmt) = &columns[0][r] else {
                            return Ok(None);
                        };
                        let values: Vec<Option<&str>> =
                            columns[1..].iter().map(|c| c[r].as_deref()).collect();
                        format(fmt, &values).map(Some)
                    })
                    .collect::<Result<Vec<_>>>()?;
                Ok(Arc::new(StringArray::from(out)) as ArrayRef)
            })
        }
        "quote_literal" | "quote_nullable" => {
            let nullable = name == "quote_nullable";
            BoundFunction::udf(name, &[1], DataType::Utf8, move |args| {
                let out: StringArray = texts(args, 0)?
                    .into_iter()
                    .map(|s| match s {
                        Some(s) => Some(quote_literal(&s)),
                        None if nullable => Some("NULL".to_string()),
                        None => None,
                    })
                    .collect();
                Ok(Arc::new(out) as ArrayRef)
            })
        }
        "parse_ident" => BoundFunction::udf(
            "parse_ident",
            &[1, 2],
            DataType::new_list(DataType::Utf8, true),
            |args| {
                let mut out = ListBuilder::new(StringBuilder::new());
                for s in texts(args, 0)? {
                    match s {
                        Some(s) => {
                            for part in parse_ident(&s)? {
                                out.values().append_value(part);
                            }
                            out.append(true);
                        }
                        None => out.append(false),
                    }
                }
                Ok(Arc::new(out.finish()) as ArrayRef)
            },
        ),
        _ => return None,
    })
}

/// `'text'`, doubling quotes; `E'...'` with doubled backslashes if the
/// text has any, as PostgreSQL writes it.
pub fn quote_literal(s: &str) -> String {
    let quoted = s.replace('\'', "''");
    if s.contains('\\') {
        format!("E'{}'", quoted.replace('\\', "\\\\"))
    } else {
        format!("'{quoted}'")
    }
}

fn invalid(message: impl Into<String>) -> datafusion::error::DataFusionError {
    sqlstate_error(sqlstate::INVALID_PARAMETER_VALUE, message)
}

/// PostgreSQL's `format`.
fn format(fmt: &str, values: &[Option<&str>]) -> Result<String> {
    let mut out = String::with_capacity(fmt.len());
    let mut chars = fmt.chars().peekable();
    let mut next_arg = 0usize;
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        if chars.peek() == Some(&'%') {
            chars.next();
            out.push('%');
            continue;
        }
        // [position$][-][width]type
        let mut digits = String::new();
        while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
            digits.push(*d);
            chars.next();
        }
        let mut position = None;
        if !digits.is_empty() && chars.peek() == Some(&'$') {
            chars.next();
            position = Some(
                digits
                    .parse::<usize>()
                    .map_err(|_| invalid("invalid argument number"))?,
            );
            digits.clear();
        }
        let mut left = false;
        if digits.is_empty() && chars.peek() == Some(&'-') {
            chars.next();
            left = true;
        }
        if digits.is_empty() {
            while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                digits.push(*d);
                chars.next();
            }
        }
        let width: usize = if digits.is_empty() {
            0
        } else {
            digits.parse().map_err(|_| invalid("invalid width"))?
        };
        let Some(kind) = chars.next() else {
            return Err(invalid("unterminated format() type specifier"));
        };
        let index = match position {
            Some(0) => {
                return Err(invalid(
                    "format specifies argument 0, but arguments are numbered from 1",
                ));
            }
            Some(p) => p - 1,
            None => next_arg,
        };
        next_arg = index + 1;
        let value = *values
            .get(index)
            .ok_or_else(|| invalid("too few arguments for format()"))?;
        let text = match kind {
            's' => value.unwrap_or("").to_string(),
            'I' => match value {
                Some(v) => crate::parser::quote_if_needed(v).to_string(),
                None => {
                    return Err(sqlstate_error(
                        sqlstate::NULL_VALUE_NOT_ALLOWED,
                        "null values cannot be formatted as an SQL identifier",
                    ));
                }
            },
            'L' => value.map_or_else(|| "NULL".to_string(), quote_literal),
            other => {
                return Err(invalid(format!(
                    "unrecognized format() type specifier \"{other}\""
                )));
            }
        };
        let pad = width.saturating_sub(text.chars().count());
        if left {
            out.push_str(&text);
            out.extend(std::iter::repeat_n(' ', pad));
        } else {
            out.extend(std::iter::repeat_n(' ', pad));
            out.push_str(&text);
        }
    }
    Ok(out)
}

/// PostgreSQL's `parse_ident`: a qualified name's parts, unquoted ones
/// folded to lower case.
fn parse_ident(s: &str) -> Result<Vec<String>> {
    let not_valid = || invalid(format!("string is not a valid identifier: \"{s}\""));
    let mut parts = Vec::new();
    let mut chars = s.trim().chars().peekable();
    loop {
        let mut part = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next() {
                    Some('"') if chars.peek() == Some(&'"') => {
                        chars.next();
                        part.push('"');
                    }
                    Some('"') => break,
                    Some(c) => part.push(c),
                    None => return Err(not_valid()),
                }
            }
            if part.is_empty() {
                return Err(not_valid());
            }
        } else {
            while let Some(c) = chars.peek().copied() {
                if c.is_alphanumeric() || c == '_' || c == '$' {
                    part.push(c.to_ascii_lowercase());
                    chars.next();
                } else {
                    break;
                }
            }
            if part.is_empty() || part.starts_with(|c: char| c.is_ascii_digit() || c == '$') {
                return Err(not_valid());
            }
        }
        parts.push(part);
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        match chars.next() {
            None => return Ok(parts),
            Some('.') => {
                while chars.peek().is_some_and(|c| c.is_whitespace()) {
                    chars.next();
                }
            }
            Some(_) => return Err(not_valid()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_as_postgres() {
        let f = |fmt: &str, v: &[Option<&str>]| format(fmt, v).unwrap();
        assert_eq!(f("%s-%s", &[Some("a"), None]), "a-");
        assert_eq!(
            f("%I.%I", &[Some("public"), Some("My T")]),
            "public.\"My T\""
        );
        assert_eq!(f("%L, %L", &[Some("it's"), None]), "'it''s', NULL");
        assert_eq!(f("%2$s %1$s %%", &[Some("a"), Some("b")]), "b a %");
        assert_eq!(f("[%5s|%-5s]", &[Some("ab"), Some("cd")]), "[   ab|cd   ]");
        assert!(format("%s %s", &[Some("a")]).is_err());
        assert!(format("%I", &[None]).is_err());
        assert!(format("%x", &[Some("a")]).is_err());
    }

    #[test]
    fn quotes_and_parses_identifiers() {
        assert_eq!(quote_literal("a'b"), "'a''b'");
        assert_eq!(quote_literal("a\\b"), "E'a\\\\b'");
        assert_eq!(
            parse_ident("Public.\"My \"\"T\"\"\"").unwrap(),
            vec!["public".to_string(), "My \"T\"".to_string()]
        );
        assert_eq!(parse_ident("a . b").unwrap(), vec!["a", "b"]);
        assert!(parse_ident("a.").is_err());
        assert!(parse_ident("1a").is_err());
        assert!(parse_ident("\"\"").is_err());
    }
}
