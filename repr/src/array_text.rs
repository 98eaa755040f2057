//! PostgreSQL's text form of a one-dimensional array: `{a,"b,c",NULL}`.
//!
//! Drivers that send parameters as text (node-postgres, JDBC's
//! `setArray`, psycopg with text dumpers) and COPY's text and CSV formats
//! spell arrays this way; the elements are then parsed as the element
//! type. Arrays cast to text, and arrays Arrow's wire encoder would print
//! in another form, print this way too ([`list_literals`]).

use arrow::array::{Array, AsArray, ListArray};
use arrow::datatypes::DataType;
use arrow::error::ArrowError;

/// The elements of an array literal, `None` for an unquoted `NULL`.
///
/// Follows `array_in`: elements are separated by commas; an unquoted
/// element has its surrounding whitespace removed and a backslash escapes
/// the next character; a double-quoted element keeps everything between
/// its quotes (with backslash escapes), so `"NULL"` is the text `NULL`.
/// Multidimensional arrays (`{{1,2},{3,4}}`) and explicit bounds
/// (`[1:2]={1,2}`) are refused: Freshet's arrays have one dimension.
pub fn parse_array_literal(text: &str) -> Result<Vec<Option<String>>, String> {
    let malformed = |why: &str| format!("malformed array literal: \"{text}\" ({why})");
    let trimmed = text.trim();
    if trimmed.starts_with('[') {
        return Err(malformed("explicit array bounds are not supported"));
    }
    let inner = trimmed
        .strip_prefix('{')
        .and_then(|s| s.strip_suffix('}'))
        .ok_or_else(|| malformed("array value must start with \"{\" and end with \"}\""))?;
    let mut out = Vec::new();
    if inner.trim().is_empty() {
        return Ok(out);
    }
    let mut chars = inner.chars().peekable();
    loop {
        // One element.
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        let mut quoted = false;
        match chars.peek() {
            Some('"') => {
                quoted = true;
                chars.next();
                loop {
                    match chars.next() {
                        None => return Err(malformed("unterminated quoted element")),
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c) => value.push(c),
                            None => return Err(malformed("unexpected end of input")),
                        },
                        Some(c) => value.push(c),
                    }
                }
                while chars.next_if(|c| c.is_whitespace()).is_some() {}
            }
            Some('{') => return Err(malformed("multidimensional arrays are not supported")),
            _ => {
                let mut trailing_space = 0;
                while let Some(&c) = chars.peek() {
                    if c == ',' {
                        break;
                    }
                    chars.next();
                    match c {
                        '\\' => match chars.next() {
                            Some(e) => {
                                value.push(e);
                                trailing_space = 0;
                            }
                            None => return Err(malformed("unexpected end of input")),
                        },
                        '"' | '{' | '}' => return Err(malformed("unexpected character")),
                        c if c.is_whitespace() => {
                            value.push(c);
                            trailing_space += c.len_utf8();
                        }
                        c => {
                            value.push(c);
                            trailing_space = 0;
                        }
                    }
                }
                value.truncate(value.len() - trailing_space);
                if value.is_empty() {
                    return Err(malformed("empty element"));
                }
            }
        }
        if !quoted && value.eq_ignore_ascii_case("null") {
            out.push(None);
        } else {
            out.push(Some(value));
        }
        match chars.next() {
            None => return Ok(out),
            Some(',') => continue,
            Some(_) => return Err(malformed("junk after an element")),
        }
    }
}

/// Many array literals (`None`: a NULL array) split into what a list
/// array is built from: every element in order, the offsets where each
/// array's elements start (one more than there are arrays), and which
/// arrays are non-NULL. The elements are then parsed as the element type.
#[derive(Debug, Default, PartialEq)]
pub struct SplitArrays {
    /// Every array's elements, in order.
    pub elements: Vec<Option<String>>,
    /// Array `i`'s elements are `elements[offsets[i]..offsets[i + 1]]`.
    pub offsets: Vec<i32>,
    /// Whether array `i` is non-NULL.
    pub valid: Vec<bool>,
}

/// Split each literal ([`parse_array_literal`]); an error is the first
/// malformed literal's message.
pub fn split_arrays<'a>(
    literals: impl IntoIterator<Item = Option<&'a str>>,
) -> Result<SplitArrays, String> {
    let mut out = SplitArrays {
        offsets: vec![0],
        ..Default::default()
    };
    for literal in literals {
        if let Some(text) = literal {
            out.elements.extend(parse_array_literal(text)?);
        }
        out.valid.push(literal.is_some());
        out.offsets
            .push(i32::try_from(out.elements.len()).map_err(|_| "array too large".to_string())?);
    }
    Ok(out)
}

/// The text form of an array from its elements' text (`None` for NULL),
/// as PostgreSQL's `array_out` writes it: `{1,NULL,"a b","c\\"d"}`.
///
/// An element is double-quoted when it is empty, is `NULL` in any case,
/// or holds a brace, quote, comma, backslash or whitespace; inside quotes
/// a quote or backslash is escaped with a backslash. Arrays cast to text
/// and arrays in COPY's text format print this way.
pub fn format_array_literal<'a>(elements: impl IntoIterator<Item = Option<&'a str>>) -> String {
    let mut out = String::from("{");
    for (i, element) in elements.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let Some(text) = element else {
            out.push_str("NULL");
            continue;
        };
        let quote = text.is_empty()
            || text.eq_ignore_ascii_case("null")
            || text
                .chars()
                .any(|c| matches!(c, '{' | '}' | '"' | ',' | '\\') || c.is_ascii_whitespace());
        if !quote {
            out.push_str(text);
            continue;
        }
        out.push('"');
        for c in text.chars() {
            if matches!(c, '"' | '\\') {
                out.push('\\');
            }
            out.push(c);
        }
        out.push('"');
    }
    out.push('}');
    out
}

/// Each list's text form ([`format_array_literal`]), `None` for a NULL
/// list, with the elements printed as PostgreSQL prints them inside
/// arrays: `t`/`f` for booleans, a space between a timestamp's date and
/// time, unconstrained `numeric` (held at a fixed scale) without its
/// padding zeros; other types as Arrow casts them to text.
pub fn list_literals(lists: &ListArray) -> Result<Vec<Option<String>>, ArrowError> {
    let element_type = lists.value_type();
    let texts = arrow::compute::cast(lists.values(), &DataType::Utf8)?;
    let texts = texts.as_string::<i32>();
    let unconstrained = {
        let (p, s) = crate::UNCONSTRAINED_NUMERIC;
        DataType::Decimal128(p, s)
    };
    let element_text = |i: usize| -> Option<String> {
        if texts.is_null(i) {
            return None;
        }
        let text = texts.value(i);
        Some(match &element_type {
            DataType::Boolean => (if text == "true" { "t" } else { "f" }).to_string(),
            DataType::Timestamp(..) => text.replacen('T', " ", 1),
            t if *t == unconstrained && text.contains('.') => {
                text.trim_end_matches('0').trim_end_matches('.').to_string()
            }
            _ => text.to_string(),
        })
    };
    let offsets = lists.value_offsets();
    Ok((0..lists.len())
        .map(|row| {
            if lists.is_null(row) {
                return None;
            }
            let (start, end) = (offsets[row] as usize, offsets[row + 1] as usize);
            let elements: Vec<Option<String>> = (start..end).map(element_text).collect();
            Some(format_array_literal(elements.iter().map(Option::as_deref)))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_as_array_out_and_reads_back() {
        let elements = [
            Some("1"),
            None,
            Some("a b"),
            Some("c,d"),
            Some("e\"f"),
            Some("g\\h"),
            Some(""),
            Some("NULL"),
            Some("{x}"),
        ];
        let text = format_array_literal(elements);
        assert_eq!(
            text,
            r#"{1,NULL,"a b","c,d","e\"f","g\\h","","NULL","{x}"}"#
        );
        let back = parse_array_literal(&text).unwrap();
        assert_eq!(
            back,
            elements
                .iter()
                .map(|e| e.map(str::to_string))
                .collect::<Vec<_>>()
        );
        assert_eq!(format_array_literal([]), "{}");
    }

    #[test]
    fn lists_print_their_elements_as_postgres_does() {
        use arrow::array::{BooleanBuilder, Decimal128Builder, ListBuilder};
        let mut bools = ListBuilder::new(BooleanBuilder::new());
        bools.values().append_value(true);
        bools.values().append_null();
        bools.values().append_value(false);
        bools.append(true);
        bools.append(false);
        assert_eq!(
            list_literals(&bools.finish()).unwrap(),
            vec![Some("{t,NULL,f}".to_string()), None]
        );
        let (p, s) = crate::UNCONSTRAINED_NUMERIC;
        let mut decimals = ListBuilder::new(
            Decimal128Builder::new()
                .with_precision_and_scale(p, s)
                .unwrap(),
        );
        decimals.values().append_value(15_000_000_000);
        decimals.values().append_value(20_000_000_000);
        decimals.append(true);
        assert_eq!(
            list_literals(&decimals.finish()).unwrap(),
            vec![Some("{1.5,2}".to_string())]
        );
    }

    fn some(v: &[&str]) -> Vec<Option<String>> {
        v.iter().map(|s| Some(s.to_string())).collect()
    }

    #[test]
    fn elements_quotes_escapes_and_nulls() {
        assert_eq!(parse_array_literal("{}").unwrap(), vec![]);
        assert_eq!(parse_array_literal(" { } ").unwrap(), vec![]);
        assert_eq!(
            parse_array_literal("{1,2,3}").unwrap(),
            some(&["1", "2", "3"])
        );
        assert_eq!(
            parse_array_literal("{\"1\", \"2\"}").unwrap(),
            some(&["1", "2"])
        );
        assert_eq!(
            parse_array_literal("{a b , \"c,d\" ,\"e\\\"f\",g\\,h}").unwrap(),
            some(&["a b", "c,d", "e\"f", "g,h"])
        );
        assert_eq!(
            parse_array_literal("{NULL,\"NULL\",null}").unwrap(),
            vec![None, Some("NULL".into()), None]
        );
        assert_eq!(parse_array_literal("{\"\"}").unwrap(), some(&[""]));
    }

    #[test]
    fn many_literals_split_into_elements_offsets_and_validity() {
        let split = split_arrays([Some("{1,2}"), None, Some("{}"), Some("{3}")]).unwrap();
        assert_eq!(split.elements, some(&["1", "2", "3"]));
        assert_eq!(split.offsets, vec![0, 2, 2, 2, 3]);
        assert_eq!(split.valid, vec![true, false, true, true]);
        assert!(split_arrays([Some("{1"), Some("{2}")]).is_err());
    }

    #[test]
    fn malformed_literals_are_errors() {
        for bad in [
            "1,2",
            "{1,2",
            "{1,,2}",
            "{{1},{2}}",
            "[1:2]={1,2}",
            "{\"a}",
            "{a\"b}",
            "{1} x",
        ] {
            assert!(parse_array_literal(bad).is_err(), "{bad}");
        }
    }
}
