//! Reading `COPY ... TO STDOUT` output in PostgreSQL's text format, which
//! the snapshot of a PostgreSQL source arrives in: lines cut out of the
//! chunks `copy_out` streams, and each line split into its fields.

use crate::error::{Result, SourceError};

/// The fields of one row of COPY's text format (without its trailing
/// newline): tab-separated, `\N` is NULL, backslash escapes (`\b \f \n \r
/// \t \v \\`, `\NNN` octal, `\xHH` hex, and a backslash before any other
/// char means that char) decoded.
///
/// An empty line is one empty (not NULL) field, as COPY writes a row of
/// one empty string.
pub(crate) fn split_row(line: &[u8]) -> Result<Vec<Option<String>>> {
    raw_fields(line)?
        .into_iter()
        .enumerate()
        .map(|(i, raw)| field(raw).map_err(|what| bad_field(i + 1, what)))
        .collect()
}

/// Cut a line at its unescaped tabs; a backslash keeps the byte after it
/// (a tab included) in the field.
fn raw_fields(line: &[u8]) -> Result<Vec<&[u8]>> {
    let mut fields = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while let Some(&b) = line.get(i) {
        match b {
            b'\\' if i + 1 >= line.len() => {
                return Err(SourceError::Upstream(
                    "malformed COPY text row: it ends in a lone backslash".into(),
                ));
            }
            b'\\' => i += 2,
            b'\t' => {
                fields.push(line.get(start..i).unwrap_or_default());
                i += 1;
                start = i;
            }
            _ => i += 1,
        }
    }
    fields.push(line.get(start..).unwrap_or_default());
    Ok(fields)
}

/// One raw field: NULL for exactly `\N`, else its decoded text.
fn field(raw: &[u8]) -> std::result::Result<Option<String>, &'static str> {
    if raw == b"\\N" {
        return Ok(None);
    }
    String::from_utf8(unescape(raw))
        .map(Some)
        .map_err(|_| "is not valid UTF-8")
}

fn bad_field(column: usize, what: &str) -> SourceError {
    SourceError::Upstream(format!("malformed COPY text row: field {column} {what}"))
}

/// Decode a field's backslash escapes into the bytes they stand for.
fn unescape(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len());
    let mut rest = raw;
    while let Some((&b, tail)) = rest.split_first() {
        rest = tail;
        if b != b'\\' {
            out.push(b);
            continue;
        }
        let Some((&c, tail)) = rest.split_first() else {
            // `raw_fields` rejects a line ending in a lone backslash, and
            // a field never ends in one otherwise.
            out.push(b);
            break;
        };
        rest = tail;
        out.push(match c {
            b'b' => 0x08,
            b'f' => 0x0c,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'v' => 0x0b,
            b'0'..=b'7' => digits(&mut rest, c - b'0', 2, 8),
            b'x' => match rest.first().and_then(|h| hex(*h)) {
                Some(_) => digits(&mut rest, 0, 2, 16),
                None => b'x',
            },
            other => other,
        });
    }
    out
}

/// Fold up to `max` more digits of `radix` from `rest` into `value`,
/// keeping the low byte as PostgreSQL does (`\501` is `A`, 0x41).
fn digits(rest: &mut &[u8], mut value: u8, max: usize, radix: u8) -> u8 {
    for _ in 0..max {
        let Some(d) = rest.first().and_then(|&c| digit(c, radix)) else {
            break;
        };
        value = value.wrapping_mul(radix).wrapping_add(d);
        *rest = rest.get(1..).unwrap_or_default();
    }
    value
}

fn digit(c: u8, radix: u8) -> Option<u8> {
    match radix {
        8 => matches!(c, b'0'..=b'7').then(|| c - b'0'),
        _ => hex(c),
    }
}

fn hex(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Cuts the byte chunks `copy_out` streams (which may end anywhere, even
/// mid-line) into complete lines, without their newlines. Start with
/// `LineSplitter::default()`.
#[derive(Debug, Default)]
pub(crate) struct LineSplitter {
    buf: Vec<u8>,
    /// Where the first line not yet handed out starts.
    start: usize,
    /// How far the buffer is known to hold no newline.
    scanned: usize,
}

impl LineSplitter {
    /// Add a chunk as it arrived.
    pub(crate) fn push(&mut self, chunk: &[u8]) {
        // Drop lines already handed out once they are half the buffer, so
        // the buffer stays near one chunk and copies stay linear.
        if self.start > 0 && self.start * 2 >= self.buf.len() {
            self.buf.drain(..self.start);
            self.scanned -= self.start;
            self.start = 0;
        }
        self.buf.extend_from_slice(chunk);
    }

    /// The next complete line, if one has arrived.
    pub(crate) fn next_line(&mut self) -> Option<Vec<u8>> {
        let unscanned = self.buf.get(self.scanned..).unwrap_or_default();
        let Some(at) = unscanned.iter().position(|b| *b == b'\n') else {
            self.scanned = self.buf.len();
            return None;
        };
        let end = self.scanned + at;
        let line = self.buf.get(self.start..end).unwrap_or_default().to_vec();
        self.start = end + 1;
        self.scanned = self.start;
        Some(line)
    }

    /// The end of the stream: an error if it stopped inside a line.
    pub(crate) fn finish(self) -> Result<()> {
        match self.buf.len().saturating_sub(self.start) {
            0 => Ok(()),
            n => Err(SourceError::Upstream(format!(
                "COPY data ended inside a row ({n} bytes after the last newline)"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(line: &[u8]) -> Vec<Option<String>> {
        split_row(line).unwrap()
    }

    fn some(s: &str) -> Option<String> {
        Some(s.to_string())
    }

    #[test]
    fn splits_on_tabs_with_nulls_and_empty_strings() {
        assert_eq!(
            row(b"1\tabc\t\\N\t\t"),
            vec![some("1"), some("abc"), None, some(""), some("")]
        );
        assert_eq!(row(b""), vec![some("")]);
        assert_eq!(row(b"\\N"), vec![None]);
        assert_eq!(row(b"\t"), vec![some(""), some("")]);
        assert_eq!(row(b"\\N\t\\N"), vec![None, None]);
    }

    #[test]
    fn null_marker_only_counts_as_a_whole_field() {
        // COPY writes a backslash in data as `\\`, so `\\N` is the text
        // `\N`; `\N` inside a longer field decodes to `N`.
        assert_eq!(row(b"\\\\N"), vec![some("\\N")]);
        assert_eq!(row(b"a\\N"), vec![some("aN")]);
        assert_eq!(row(b"\\Nb"), vec![some("Nb")]);
    }

    #[test]
    fn decodes_escapes() {
        assert_eq!(
            row(b"a\\tb\\nc\\rd\\\\e\\bf\\fg\\vh"),
            vec![some("a\tb\nc\rd\\e\u{8}f\u{c}g\u{b}h")]
        );
        // Octal: one to three digits, low byte kept.
        assert_eq!(row(b"\\101\\0\\7x\\1012"), vec![some("A\0\u{7}xA2")]);
        assert_eq!(row(b"\\501"), vec![some("A")]);
        // Hex: one or two digits; `\x` without one is `x`.
        assert_eq!(row(b"\\x41\\x4a\\x4Bz\\x7\\xg"), vec![some("AJKz\u{7}xg")]);
        // Any other escaped char is itself, tabs included.
        assert_eq!(row(b"a\\\tb\\q\\."), vec![some("a\tbq.")]);
    }

    #[test]
    fn decodes_multibyte_text_and_escaped_utf8_bytes() {
        assert_eq!(
            row("héllo\t日本".as_bytes()),
            vec![some("héllo"), some("日本")]
        );
        // é as escaped UTF-8 bytes.
        assert_eq!(row(b"\\303\\251\\xc3\\xa9"), vec![some("éé")]);
    }

    #[test]
    fn non_utf8_is_an_upstream_error_naming_the_field() {
        for line in [&b"ok\t\xff"[..], b"ok\t\\377", b"ok\t\\xc3"] {
            let err = split_row(line).unwrap_err();
            assert!(matches!(err, SourceError::Upstream(_)), "{err:?}");
            assert!(
                err.to_string().contains("field 2 is not valid UTF-8"),
                "{err}"
            );
        }
    }

    #[test]
    fn a_lone_trailing_backslash_is_an_error() {
        let err = split_row(b"a\tb\\").unwrap_err();
        assert!(matches!(err, SourceError::Upstream(_)), "{err:?}");
        assert!(err.to_string().contains("lone backslash"), "{err}");
        assert_eq!(row(b"a\tb\\\\"), vec![some("a"), some("b\\")]);
    }

    #[test]
    fn matches_what_postgres_copy_writes() {
        // `COPY (SELECT 1, E'tab\there', NULL, '', E'new\nline', 'back\slash',
        // E'\x01', E'\\N', '') TO STDOUT` on PostgreSQL 15: other control
        // characters go out raw.
        let line = b"1\ttab\\there\t\\N\t\tnew\\nline\tback\\\\slash\t\x01\t\\\\N\t";
        assert_eq!(
            row(line),
            vec![
                some("1"),
                some("tab\there"),
                None,
                some(""),
                some("new\nline"),
                some("back\\slash"),
                some("\u{1}"),
                some("\\N"),
                some(""),
            ]
        );
    }

    fn lines_of(chunks: &[&[u8]]) -> Result<Vec<Vec<u8>>> {
        let mut s = LineSplitter::default();
        let mut lines = Vec::new();
        for chunk in chunks {
            s.push(chunk);
            while let Some(line) = s.next_line() {
                lines.push(line);
            }
        }
        s.finish()?;
        Ok(lines)
    }

    const ROWS: &[u8] = b"1\tone\t\\N\n2\t\t\\t\\n\n\n3\t\xc3\xa9t\xc3\xa9\t\\\\\n4\\\tx\t\\101\n";

    #[test]
    fn splits_a_stream_into_lines() {
        let lines = lines_of(&[ROWS]).unwrap();
        assert_eq!(lines.len(), 5);
        assert_eq!(lines[2], b"");
        let rows: Vec<_> = lines.iter().map(|l| row(l)).collect();
        assert_eq!(
            rows,
            vec![
                vec![some("1"), some("one"), None],
                vec![some("2"), some(""), some("\t\n")],
                vec![some("")],
                vec![some("3"), some("été"), some("\\")],
                vec![some("4\tx"), some("A")],
            ]
        );
    }

    #[test]
    fn chunk_boundaries_do_not_matter() {
        let whole = lines_of(&[ROWS]).unwrap();
        for at in 0..=ROWS.len() {
            let (a, b) = ROWS.split_at(at);
            assert_eq!(lines_of(&[a, b]).unwrap(), whole, "split at {at}");
            for at2 in at..=ROWS.len() {
                let (b1, b2) = ROWS.split_at(at2);
                let chunks = [a, &b1[at..], b2];
                assert_eq!(lines_of(&chunks).unwrap(), whole, "split at {at}, {at2}");
            }
        }
        let bytes: Vec<&[u8]> = ROWS.chunks(1).collect();
        assert_eq!(lines_of(&bytes).unwrap(), whole);
    }

    #[test]
    fn many_lines_through_a_small_buffer() {
        let data: Vec<u8> = (0..1000)
            .flat_map(|i| format!("{i}\trow {i}\n").into_bytes())
            .collect();
        let chunks: Vec<&[u8]> = data.chunks(7).collect();
        let lines = lines_of(&chunks).unwrap();
        assert_eq!(lines.len(), 1000);
        assert_eq!(row(&lines[999]), vec![some("999"), some("row 999")]);
    }

    #[test]
    fn a_stream_ending_mid_line_is_an_error() {
        let err = lines_of(&[b"1\ta\n2\tb"]).unwrap_err();
        assert!(matches!(err, SourceError::Upstream(_)), "{err:?}");
        assert!(err.to_string().contains("3 bytes"), "{err}");
        assert_eq!(lines_of(&[]).unwrap(), Vec::<Vec<u8>>::new());
        let mut s = LineSplitter::default();
        s.push(b"partial");
        assert_eq!(s.next_line(), None);
        assert!(s.finish().is_err());
    }
}
