//! Statement shapes: a simple-protocol statement's text with its integer
//! literals cut out, so that a statement whose template
//! ([`super::templates`]) was planned before is recognised from its text
//! alone, without parsing it again.
//!
//! The scan is deliberately shallow: it skips string literals, quoted
//! identifiers and comments, and marks each run of digits that stands
//! alone (not part of a word, a decimal or an exponent) as a *slot*. It
//! never decides what a slot means. That is learnt once per shape from
//! the parse of its first statement: [`ShapeBinding::new`] matches the
//! literals the template took out (by their positions in the text) to
//! slots, and every other slot is *kept* and must hold the same digits
//! in a later statement for the binding to apply. Two texts with the same
//! key and the same kept digits differ only in digit runs that the parser
//! read as integer literals, which it reads the same way whatever their
//! digits; so a later statement binds the template's parameters directly.
//! Anything the scan does not follow (`$` quoting or parameters, `E''`
//! strings, an unterminated literal or comment, a NUL) has no shape.

use datafusion::common::ScalarValue;
use datafusion::sql::sqlparser::tokenizer::Location;

/// Texts longer than this are not shaped: a session keeps its shapes'
/// keys, and long statements are rarely repeated with new literals.
const MAX_SHAPED_LEN: usize = 4096;

/// Marks a slot in a shape's key; a text holding it has no shape.
const SLOT: char = '\0';

/// A statement text with its stand-alone digit runs cut out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape {
    /// The text with each slot replaced by a NUL: equal keys mean equal
    /// texts but for the digits in the slots.
    pub key: String,
    slots: Vec<Slot>,
}

/// One stand-alone run of digits.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Slot {
    /// Its bytes in the text.
    start: usize,
    end: usize,
    /// Where sqlparser's tokenizer says it starts (line and column, both
    /// counted from one, columns in characters).
    at: Location,
}

/// What each slot of a shape is in its template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShapeBinding {
    uses: Vec<SlotUse>,
    params: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum SlotUse {
    /// The template's parameter `index` (from zero), typed `bigint` when
    /// `wide` (the value did not fit `integer`) and `integer` otherwise.
    Param { index: usize, wide: bool },
    /// A literal the template kept in its text: these digits exactly.
    Kept(String),
}

impl Shape {
    /// The shape of `sql`, or `None` when it has no slot or holds
    /// something the scan does not follow.
    pub fn of(sql: &str) -> Option<Shape> {
        if sql.len() > MAX_SHAPED_LEN {
            return None;
        }
        let slots = scan(sql)?;
        if slots.is_empty() {
            return None;
        }
        let mut key = String::with_capacity(sql.len());
        let mut last = 0;
        for slot in &slots {
            key.push_str(&sql[last..slot.start]);
            key.push(SLOT);
            last = slot.end;
        }
        key.push_str(&sql[last..]);
        Some(Shape { key, slots })
    }
}

impl ShapeBinding {
    /// How `shape` (of `sql`) binds its template, given where each literal
    /// the template took out stood in `sql` and its value (both in
    /// parameter order; a `bigint` value is a `bigint` parameter). `None`
    /// when a taken literal is not one of the shape's slots.
    pub fn new(
        shape: &Shape,
        sql: &str,
        taken: &[Location],
        values: &[ScalarValue],
    ) -> Option<ShapeBinding> {
        if taken.len() != values.len() {
            return None;
        }
        let mut uses: Vec<Option<SlotUse>> = vec![None; shape.slots.len()];
        for (index, (at, value)) in taken.iter().zip(values).enumerate() {
            let slot = shape.slots.iter().position(|s| s.at == *at)?;
            if uses[slot].is_some() {
                return None;
            }
            let wide = matches!(value, ScalarValue::Int64(_));
            uses[slot] = Some(SlotUse::Param { index, wide });
        }
        let uses = uses
            .into_iter()
            .zip(&shape.slots)
            .map(|(used, slot)| {
                used.unwrap_or_else(|| SlotUse::Kept(sql[slot.start..slot.end].to_owned()))
            })
            .collect();
        Some(ShapeBinding {
            uses,
            params: taken.len(),
        })
    }

    /// The template's parameter values for `sql` (whose shape is `shape`,
    /// with this binding's key), or `None` when a kept literal differs or
    /// a value would have been typed otherwise: then the statement is
    /// parsed and planned as any other.
    pub fn bind(&self, shape: &Shape, sql: &str) -> Option<Vec<ScalarValue>> {
        if shape.slots.len() != self.uses.len() {
            return None;
        }
        let mut values = vec![ScalarValue::Null; self.params];
        for (slot, used) in shape.slots.iter().zip(&self.uses) {
            let digits = &sql[slot.start..slot.end];
            match used {
                SlotUse::Kept(kept) if kept == digits => {}
                SlotUse::Kept(_) => return None,
                SlotUse::Param { index, wide } => {
                    // As the template's literal taker types them.
                    let n = digits.parse::<i64>().ok()?;
                    values[*index] = match (i32::try_from(n), wide) {
                        (Ok(small), false) => ScalarValue::Int32(Some(small)),
                        (Err(_), true) => ScalarValue::Int64(Some(n)),
                        _ => return None,
                    };
                }
            }
        }
        Some(values)
    }
}

/// The stand-alone digit runs of `sql`, or `None` if it holds something
/// the scan does not follow.
fn scan(sql: &str) -> Option<Vec<Slot>> {
    let bytes = sql.as_bytes();
    let mut slots = Vec::new();
    let mut cursor = Cursor {
        bytes,
        pos: 0,
        line: 1,
        column: 1,
    };
    while let Some(b) = cursor.peek(0) {
        match b {
            0 | b'$' | b'\\' => return None,
            b'\'' => {
                // `E'...'` strings escape with backslashes; `U&'...'` and
                // `B'...'`/`X'...'` are fine as plain quoting goes.
                if cursor.pos > 0 && matches!(bytes[cursor.pos - 1], b'e' | b'E') {
                    return None;
                }
                cursor.quoted(b'\'')?;
            }
            b'"' => cursor.quoted(b'"')?,
            b'-' if cursor.peek(1) == Some(b'-') => {
                while let Some(c) = cursor.peek(0) {
                    if c == b'\n' {
                        break;
                    }
                    cursor.bump();
                }
            }
            b'/' if cursor.peek(1) == Some(b'*') => cursor.block_comment()?,
            b'0'..=b'9' => {
                let at = cursor.location();
                let start = cursor.pos;
                while cursor.peek(0).is_some_and(|c| c.is_ascii_digit()) {
                    cursor.bump();
                }
                let end = cursor.pos;
                let before = start.checked_sub(1).map(|i| bytes[i]);
                let after = cursor.peek(0);
                let alone = !before.is_some_and(|c| c == b'.' || is_word_byte(c))
                    && !after.is_some_and(|c| c == b'.' || is_word_byte(c));
                if alone {
                    slots.push(Slot { start, end, at });
                }
            }
            c if is_word_byte(c) => {
                // A word, digits and all (`t1`, `x_2`).
                while cursor.peek(0).is_some_and(is_word_byte) {
                    cursor.bump();
                }
            }
            _ => cursor.bump(),
        }
    }
    Some(slots)
}

/// Whether `b` can continue a word: letters, digits, `_`, and any byte of
/// a non-ASCII character (PostgreSQL's identifiers admit those).
fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80
}

/// A position in the text, counted as sqlparser's tokenizer counts it.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
    line: u64,
    column: u64,
}

impl Cursor<'_> {
    fn peek(&self, ahead: usize) -> Option<u8> {
        self.bytes.get(self.pos + ahead).copied()
    }

    fn location(&self) -> Location {
        Location {
            line: self.line,
            column: self.column,
        }
    }

    /// Step over one byte; a new character starts a new column.
    fn bump(&mut self) {
        let b = self.bytes[self.pos];
        self.pos += 1;
        if b == b'\n' {
            self.line += 1;
            self.column = 1;
        } else if b & 0xC0 != 0x80 {
            self.column += 1;
        }
    }

    /// Step over a literal quoted by `quote` (a doubled quote stands for
    /// itself); `None` if it does not end.
    fn quoted(&mut self, quote: u8) -> Option<()> {
        self.bump();
        loop {
            let b = self.peek(0)?;
            self.bump();
            if b == quote {
                if self.peek(0) == Some(quote) {
                    self.bump();
                } else {
                    return Some(());
                }
            }
        }
    }

    /// Step over a `/* ... */` comment, nested as PostgreSQL nests them.
    fn block_comment(&mut self) -> Option<()> {
        let mut depth = 0usize;
        loop {
            match (self.peek(0)?, self.peek(1)) {
                (b'/', Some(b'*')) => {
                    depth += 1;
                    self.bump();
                    self.bump();
                }
                (b'*', Some(b'/')) => {
                    depth -= 1;
                    self.bump();
                    self.bump();
                    if depth == 0 {
                        return Some(());
                    }
                }
                _ => self.bump(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slots(sql: &str) -> Vec<&str> {
        let shape = Shape::of(sql).unwrap();
        shape.slots.iter().map(|s| &sql[s.start..s.end]).collect()
    }

    #[test]
    fn stand_alone_digit_runs_are_slots() {
        assert_eq!(
            slots("SELECT v, t1.x2 FROM t1 WHERE k = 17 AND x = -3 LIMIT 5"),
            vec!["17", "3", "5"]
        );
        assert_eq!(slots("SELECT 1.5, 2e3, .7, 8"), vec!["8"]);
        assert_eq!(
            slots("SELECT 'a 1 '' 2', \"c 3\" /* 4 /* 5 */ 6 */ -- 7\n, 9"),
            vec!["9"]
        );
    }

    #[test]
    fn the_key_differs_only_in_slots() {
        let a = Shape::of("SELECT v FROM t WHERE k = 5").unwrap();
        let b = Shape::of("SELECT v FROM t WHERE k = 123456").unwrap();
        assert_eq!(a.key, b.key);
        assert_eq!(a.key, "SELECT v FROM t WHERE k = \0");
        assert_ne!(
            a.key,
            Shape::of("SELECT v FROM t WHERE k = 5 -- 1").unwrap().key
        );
        assert!(Shape::of("SELECT v FROM t WHERE k = 5.0").is_none());
    }

    #[test]
    fn what_the_scan_does_not_follow_has_no_shape() {
        for sql in [
            "SELECT $1 + 2",
            "SELECT $$ 1 $$",
            "SELECT E'\\' 1' , 2",
            "SELECT 'unterminated 1",
            "SELECT 1 /* unterminated",
            "SELECT \"x",
            "SELECT v FROM t",
            "SELECT 1\0",
        ] {
            assert!(Shape::of(sql).is_none(), "{sql}");
        }
    }

    #[test]
    fn columns_count_characters_as_the_tokenizer_does() {
        let sql = "SELECT 'é'\n, ü, 42";
        let shape = Shape::of(sql).unwrap();
        assert_eq!(shape.slots[0].at, Location { line: 2, column: 6 });
    }

    /// What the parser makes of `sql`: its template's text and values.
    fn parsed(sql: &str) -> Option<super::super::templates::Parameterized> {
        let mut stmts = crate::parser::parse(sql).unwrap();
        assert_eq!(stmts.len(), 1);
        super::super::templates::parameterize(&stmts.remove(0))
    }

    #[test]
    fn a_binding_learnt_from_one_text_binds_another_as_the_parser_would() {
        let pairs = [
            (
                "SELECT v FROM kv_mv WHERE k = 5",
                "SELECT v FROM kv_mv WHERE k = 123",
            ),
            (
                "SELECT v, 2 FROM t WHERE k = -7 AND x < 3 LIMIT 10",
                "SELECT v, 2 FROM t WHERE k = -70000 AND x < 0 LIMIT 10",
            ),
            (
                "UPDATE \"t 1\" SET v = v + 1, s = 'é 5'\n WHERE k = 3000000000",
                "UPDATE \"t 1\" SET v = v + 22, s = 'é 5'\n WHERE k = 3000000001",
            ),
            (
                "/* ü */ DELETE FROM t\r\n WHERE k BETWEEN 1 AND 0010 -- 7",
                "/* ü */ DELETE FROM t\r\n WHERE k BETWEEN 0 AND 2147483647 -- 7",
            ),
        ];
        for (first, second) in pairs {
            let shape = Shape::of(first).unwrap();
            let learnt = parsed(first).unwrap();
            let binding = ShapeBinding::new(&shape, first, &learnt.taken, &learnt.values)
                .unwrap_or_else(|| panic!("{first}"));
            let other = Shape::of(second).unwrap();
            assert_eq!(shape.key, other.key);
            let expected = parsed(second).unwrap();
            assert_eq!(
                expected.template.to_string(),
                learnt.template.to_string(),
                "{second}"
            );
            assert_eq!(
                binding.bind(&other, second),
                Some(expected.values),
                "{second}"
            );
        }
    }

    #[test]
    fn a_binding_checks_kept_digits_and_widths() {
        let sql = "SELECT v, 2 FROM t WHERE k = 7 LIMIT 3";
        let shape = Shape::of(sql).unwrap();
        let at = shape.slots[1].at;
        let seven = [ScalarValue::Int32(Some(7))];
        let binding = ShapeBinding::new(&shape, sql, &[at], &seven).unwrap();
        let bind = |text: &str| binding.bind(&Shape::of(text).unwrap(), text);
        assert_eq!(
            bind("SELECT v, 2 FROM t WHERE k = 900 LIMIT 3"),
            Some(vec![ScalarValue::Int32(Some(900))])
        );
        assert_eq!(bind("SELECT v, 2 FROM t WHERE k = 9 LIMIT 4"), None);
        assert_eq!(
            bind("SELECT v, 2 FROM t WHERE k = 3000000000 LIMIT 3"),
            None
        );
        assert_eq!(
            bind("SELECT v, 2 FROM t WHERE k = 99999999999999999999 LIMIT 3"),
            None
        );
        let missing = Location { line: 9, column: 9 };
        assert!(ShapeBinding::new(&shape, sql, &[missing], &seven).is_none());
    }
}
