//! COPY data: parsing `COPY ... FROM STDIN` (text, CSV and binary) and
//! rendering `COPY ... TO STDOUT`.

use std::borrow::Cow;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch};
use freshet_planner::{CopyFormat, CopyOptions};
use freshet_repr::RelationDesc;
use pgwire::api::results::{CopyCsvOptions, CopyEncoder, CopyTextOptions, FieldFormat, FieldInfo};
use pgwire::messages::copy::CopyData;
use pgwire::types::format::FormatOptions;

use crate::encode::{encode_batches, wire_type};
use crate::error::{AdapterError, Result};
use crate::values::parse_text_array;

/// Rows of text or CSV fields (`None` = NULL), borrowed from the data
/// unless escapes or quotes had to be resolved.
pub type TextRows<'a> = Vec<Vec<Option<Cow<'a, str>>>>;

/// The rows of COPY data, each field as its format gives it (`None` =
/// NULL): text to parse, or bytes in the type's binary format.
#[derive(Debug, PartialEq)]
pub enum CopyRows<'a> {
    /// Text or CSV fields.
    Text(TextRows<'a>),
    /// Binary fields, borrowed from the data.
    Binary(Vec<Vec<Option<&'a [u8]>>>),
}

impl CopyRows<'_> {
    /// How many rows.
    pub fn len(&self) -> usize {
        match self {
            CopyRows::Text(r) => r.len(),
            CopyRows::Binary(r) => r.len(),
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The signature, flags and (empty) header extension that start binary
/// COPY data.
pub const BINARY_HEADER: &[u8] = b"PGCOPY\n\xff\r\n\0\0\0\0\0\0\0\0\0";

fn bad_copy(m: &str) -> AdapterError {
    AdapterError::BadCopyData(m.to_string())
}

/// The length of the binary COPY header `data` starts with (`None`: not
/// all of it has arrived yet), or why it is not one.
fn binary_header_len(data: &[u8]) -> Result<Option<usize>> {
    let signature = &BINARY_HEADER[..11];
    let n = data.len().min(signature.len());
    if data[..n] != signature[..n] {
        return Err(bad_copy("COPY file signature not recognized"));
    }
    let Some(rest) = data.strip_prefix(signature) else {
        return Ok(None);
    };
    let Some((flags, rest)) = rest.split_first_chunk::<4>() else {
        return Ok(None);
    };
    let flags = u32::from_be_bytes(*flags);
    if flags & (1 << 16) != 0 {
        return Err(bad_copy("COPY data with OIDs is not supported"));
    }
    if flags & 0xffff_0000 & !(1 << 16) != 0 {
        return Err(bad_copy(
            "invalid COPY file header (unrecognized critical flags)",
        ));
    }
    let Some((ext, rest)) = rest.split_first_chunk::<4>() else {
        return Ok(None);
    };
    let ext = u32::from_be_bytes(*ext) as usize;
    if rest.len() < ext {
        return Ok(None);
    }
    Ok(Some(signature.len() + 8 + ext))
}

/// Rows of binary fields (`None` = NULL), borrowed from the data.
type BinaryRows<'a> = Vec<Vec<Option<&'a [u8]>>>;

/// Binary rows of `expected` fields up to the trailer (or the end of
/// the data); `true` if the trailer was seen.
fn parse_tuples(mut rest: &[u8], expected: usize) -> Result<(BinaryRows<'_>, bool)> {
    let mut rows = Vec::new();
    loop {
        let Some((count, tail)) = rest.split_first_chunk::<2>() else {
            // PostgreSQL accepts data that ends without the trailer.
            if rest.is_empty() {
                return Ok((rows, false));
            }
            return Err(bad_copy("unexpected EOF in COPY data"));
        };
        rest = tail;
        let count = i16::from_be_bytes(*count);
        if count == -1 {
            return Ok((rows, true));
        }
        if count as usize != expected || count < 0 {
            return Err(bad_copy(&format!(
                "row field count is {count}, expected {expected}"
            )));
        }
        let mut row = Vec::with_capacity(expected);
        for _ in 0..expected {
            let (len, tail) = rest
                .split_first_chunk::<4>()
                .ok_or_else(|| bad_copy("unexpected EOF in COPY data"))?;
            rest = tail;
            let len = i32::from_be_bytes(*len);
            if len == -1 {
                row.push(None);
                continue;
            }
            let len = usize::try_from(len).map_err(|_| bad_copy("invalid field size"))?;
            if len > rest.len() {
                return Err(bad_copy("unexpected EOF in COPY data"));
            }
            let (field, tail) = rest.split_at(len);
            rest = tail;
            row.push(Some(field));
        }
        rows.push(row);
    }
}

/// The end of the last whole binary row in `data[from..]` (rows start at
/// `from`), and whether the trailer ends the data there.
fn binary_rows_end(data: &[u8], from: usize) -> (usize, bool) {
    let mut pos = from;
    loop {
        let Some(count) = data.get(pos..pos + 2) else {
            return (pos, false);
        };
        let count = i16::from_be_bytes([count[0], count[1]]);
        if count == -1 {
            return (pos + 2, true);
        }
        let mut at = pos + 2;
        for _ in 0..count.max(0) {
            let Some(len) = data.get(at..at + 4) else {
                return (pos, false);
            };
            let len = i32::from_be_bytes([len[0], len[1], len[2], len[3]]);
            at += 4 + usize::try_from(len).unwrap_or(0);
            if at > data.len() {
                return (pos, false);
            }
        }
        pos = at;
    }
}

/// A `COPY ... FROM STDIN` stream cut into chunks of whole rows as it
/// arrives, so rows become columns a few megabytes at a time instead of
/// the whole data being held first. Text rows end at a newline; CSV rows
/// at a newline outside quotes; binary rows where their field lengths
/// say.
#[derive(Debug)]
pub struct CopyStream {
    format: CopyFormat,
    quote: u8,
    escape: u8,
    /// Received bytes not yet handed out.
    buffer: Vec<u8>,
    /// How far `buffer` has been scanned for row ends.
    scanned: usize,
    /// The end of the last whole row in `buffer`.
    complete: usize,
    /// CSV: whether `scanned` is inside a quoted field.
    in_quotes: bool,
    /// Binary: the header has been read.
    header_read: bool,
    /// The end of the data was seen (binary trailer); the rest is ignored.
    ended: bool,
}

impl CopyStream {
    /// A stream of data in `options`' format.
    pub fn new(options: &CopyOptions) -> Self {
        CopyStream {
            format: options.format,
            quote: options.quote,
            escape: options.escape,
            buffer: Vec::new(),
            scanned: 0,
            complete: 0,
            in_quotes: false,
            header_read: false,
            ended: false,
        }
    }

    /// Add received bytes.
    pub fn push(&mut self, bytes: &[u8]) -> Result<()> {
        if self.ended {
            return Ok(());
        }
        self.buffer.extend_from_slice(bytes);
        self.scan()
    }

    /// Bytes held that do not yet make a whole row.
    pub fn partial_bytes(&self) -> usize {
        self.buffer.len() - self.complete
    }

    fn scan(&mut self) -> Result<()> {
        match self.format {
            CopyFormat::Binary => {
                if !self.header_read {
                    match binary_header_len(&self.buffer)? {
                        Some(n) => {
                            self.header_read = true;
                            self.buffer.drain(..n);
                        }
                        None => return Ok(()),
                    }
                }
                let (end, ended) = binary_rows_end(&self.buffer, self.complete);
                self.complete = end;
                self.scanned = end;
                if ended {
                    self.ended = true;
                    self.buffer.truncate(end);
                }
            }
            CopyFormat::Text => {
                if let Some(i) = self.buffer[self.scanned..]
                    .iter()
                    .rposition(|b| *b == b'\n')
                {
                    self.complete = self.scanned + i + 1;
                }
                self.scanned = self.buffer.len();
            }
            CopyFormat::Csv => {
                let mut i = self.scanned;
                let data = &self.buffer;
                while i < data.len() {
                    let b = data[i];
                    if self.in_quotes {
                        if b == self.escape && self.escape != self.quote {
                            // An escape takes the next byte with it.
                            if i + 1 >= data.len() {
                                break;
                            }
                            i += 2;
                            continue;
                        }
                        if b == self.quote {
                            self.in_quotes = false;
                        }
                    } else if b == self.quote {
                        self.in_quotes = true;
                    } else if b == b'\n' {
                        self.complete = i + 1;
                    }
                    i += 1;
                }
                self.scanned = i;
            }
        }
        Ok(())
    }

    /// The whole rows received, once they add up to `min_bytes`.
    pub fn take_rows(&mut self, min_bytes: usize) -> Option<Vec<u8>> {
        if self.complete == 0 || self.complete < min_bytes {
            return None;
        }
        let rest = self.buffer.split_off(self.complete);
        let rows = std::mem::replace(&mut self.buffer, rest);
        self.scanned = self.scanned.saturating_sub(self.complete);
        self.complete = 0;
        Some(rows)
    }

    /// Everything left at the end of the data (a last text or CSV row may
    /// end without a newline).
    pub fn finish(&mut self) -> Result<Vec<u8>> {
        if self.format == CopyFormat::Binary && !self.header_read && !self.buffer.is_empty() {
            return Err(bad_copy("unexpected EOF in COPY data"));
        }
        self.complete = self.buffer.len();
        self.scanned = self.buffer.len();
        Ok(self.take_rows(0).unwrap_or_default())
    }
}

/// Split one chunk of COPY data (whole rows, from [`CopyStream`]) into
/// rows of `expected` fields. `first_line` numbers the chunk's first line
/// in error messages; `header` skips it (text and CSV). Binary chunks
/// carry no header. `true` with the rows: the data ends in this chunk
/// (an end marker).
pub fn parse_chunk<'a>(
    data: &'a [u8],
    options: &CopyOptions,
    expected: usize,
    first_line: usize,
    header: bool,
) -> Result<(CopyRows<'a>, bool)> {
    Ok(match options.format {
        CopyFormat::Binary => {
            let (rows, ended) = parse_tuples(data, expected)?;
            (CopyRows::Binary(rows), ended)
        }
        _ => {
            let mut options = options.clone();
            options.header = header;
            let (rows, ended) = parse_lines(data, &options, expected, first_line)?;
            (CopyRows::Text(rows), ended)
        }
    })
}

/// Split text or CSV COPY data into rows of fields (`None` = NULL); its
/// first line is line `first_line` of the whole (for messages). `true`
/// with the rows if an end marker (`\.`) ended them.
fn parse_lines<'a>(
    data: &'a [u8],
    options: &CopyOptions,
    expected: usize,
    first_line: usize,
) -> Result<(TextRows<'a>, bool)> {
    let text = std::str::from_utf8(data)
        .map_err(|_| AdapterError::BadCopyData("COPY data is not valid UTF-8".into()))?;
    let (rows, ended) = match options.format {
        CopyFormat::Csv => parse_csv(text, options)?,
        CopyFormat::Text | CopyFormat::Binary => parse_text(text, options)?,
    };
    let rows: Vec<_> = if options.header {
        rows.into_iter().skip(1).collect()
    } else {
        rows
    };
    for (i, row) in rows.iter().enumerate() {
        if row.len() != expected {
            return Err(AdapterError::BadCopyData(format!(
                "{} data for line {}: expected {expected} columns, found {}",
                if row.len() < expected {
                    "missing"
                } else {
                    "extra"
                },
                i + first_line + usize::from(options.header),
                row.len()
            )));
        }
    }
    Ok((rows, ended))
}

/// Text-format rows: lines of fields split at the delimiter where no
/// backslash escapes it. A field is compared with the NULL string before
/// its escapes are resolved (as PostgreSQL does), and borrowed from the
/// data when it has none. The delimiter is one ASCII byte, so scanning
/// bytes never splits a character.
fn parse_text<'a>(text: &'a str, options: &CopyOptions) -> Result<(TextRows<'a>, bool)> {
    let delim = options.delimiter;
    let mut rows = Vec::new();
    let mut width = 0;
    for line in text.split('\n') {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line == "\\." {
            return Ok((rows, true));
        }
        if line.is_empty() {
            continue;
        }
        let bytes = line.as_bytes();
        let mut fields = Vec::with_capacity(width);
        let mut field = |raw: &'a str, escaped: bool| -> Result<()> {
            fields.push(if raw == options.null {
                None
            } else if escaped {
                Some(Cow::Owned(unescape_text(raw)?))
            } else {
                Some(Cow::Borrowed(raw))
            });
            Ok(())
        };
        let (mut start, mut escaped, mut i) = (0, false, 0);
        while i < bytes.len() {
            if bytes[i] == b'\\' {
                escaped = true;
                i += 2;
            } else if bytes[i] == delim {
                field(&line[start..i], escaped)?;
                (start, escaped) = (i + 1, false);
                i += 1;
            } else {
                i += 1;
            }
        }
        field(&line[start..], escaped)?;
        width = fields.len();
        rows.push(fields);
    }
    Ok((rows, false))
}

fn unescape_text(s: &str) -> Result<String> {
    if !s.contains('\\') {
        return Ok(s.to_string());
    }
    let mut out = String::with_capacity(s.len());
    let bytes: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c != '\\' || i + 1 >= bytes.len() {
            out.push(c);
            i += 1;
            continue;
        }
        let n = bytes[i + 1];
        i += 2;
        match n {
            'b' => out.push('\u{8}'),
            'f' => out.push('\u{c}'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            't' => out.push('\t'),
            'v' => out.push('\u{b}'),
            'x' => {
                let mut v = 0u32;
                let mut k = 0;
                while k < 2 && i < bytes.len() && bytes[i].is_ascii_hexdigit() {
                    v = v * 16 + bytes[i].to_digit(16).unwrap_or(0);
                    i += 1;
                    k += 1;
                }
                out.push(char::from_u32(v).unwrap_or('\u{fffd}'));
            }
            '0'..='7' => {
                let mut v = n.to_digit(8).unwrap_or(0);
                let mut k = 1;
                while k < 3 && i < bytes.len() && bytes[i].is_digit(8) {
                    v = v * 8 + bytes[i].to_digit(8).unwrap_or(0);
                    i += 1;
                    k += 1;
                }
                out.push(char::from_u32(v).unwrap_or('\u{fffd}'));
            }
            other => out.push(other),
        }
    }
    Ok(out)
}

/// CSV rows: fields split at the delimiter outside quotes, rows at a
/// newline outside quotes. An unquoted field equal to the NULL string is
/// NULL; a quoted one never is. A field is borrowed from the data unless
/// it has doubled or escaped quotes, or quoted and unquoted parts. The
/// delimiter, quote and escape are ASCII bytes, so scanning bytes never
/// splits a character.
fn parse_csv<'a>(text: &'a str, options: &CopyOptions) -> Result<(TextRows<'a>, bool)> {
    let b = text.as_bytes();
    let mut rows = Vec::new();
    let mut width = 0;
    let mut i = 0;
    while i < b.len() {
        // `\.` alone on a line ends the data.
        if b[i] == b'\\'
            && b.get(i + 1) == Some(&b'.')
            && matches!(b.get(i + 2), None | Some(b'\n' | b'\r'))
        {
            return Ok((rows, true));
        }
        let mut row = Vec::with_capacity(width);
        loop {
            let (field, next) = csv_field(text, i, options)?;
            row.push(field);
            i = next;
            match b.get(i) {
                None => break,
                Some(&c) if c == options.delimiter => i += 1,
                Some(&c) => {
                    if c == b'\r' && b.get(i + 1) == Some(&b'\n') {
                        i += 1;
                    }
                    i += 1;
                    break;
                }
            }
        }
        width = row.len();
        rows.push(row);
    }
    Ok((rows, false))
}

/// The CSV field starting at `start`, and where it ends (at a delimiter,
/// a newline, or the end of `text`).
fn csv_field<'a>(
    text: &'a str,
    start: usize,
    options: &CopyOptions,
) -> Result<(Option<Cow<'a, str>>, usize)> {
    let b = text.as_bytes();
    let (delim, quote, escape) = (options.delimiter, options.quote, options.escape);
    let ends_field = |c: u8| c == delim || c == b'\n' || c == b'\r';
    // Unquoted, the common case.
    let mut j = start;
    while j < b.len() && !ends_field(b[j]) && b[j] != quote {
        j += 1;
    }
    if j == b.len() || ends_field(b[j]) {
        let raw = &text[start..j];
        return Ok(((raw != options.null).then_some(Cow::Borrowed(raw)), j));
    }
    // Quoted whole, with no quote inside.
    if j == start {
        let mut k = start + 1;
        while k < b.len() && b[k] != quote && b[k] != escape {
            k += 1;
        }
        if k < b.len() && b[k] == quote && b.get(k + 1).is_none_or(|&c| ends_field(c)) {
            return Ok((Some(Cow::Borrowed(&text[start + 1..k])), k + 1));
        }
    }
    // Anything else, character by character.
    let (delim, quote, escape) = (delim as char, quote as char, escape as char);
    let mut field = String::new();
    let mut quoted = false;
    let mut in_quotes = false;
    let mut chars = text[start..].char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        let next = chars.peek().map(|&(_, n)| n);
        if in_quotes {
            // An escaped quote (a doubled one when the escape is the quote).
            if c == escape && next == Some(quote) {
                field.push(quote);
                chars.next();
            } else if c == quote {
                in_quotes = false;
            } else {
                field.push(c);
            }
        } else if c == quote {
            in_quotes = true;
            quoted = true;
        } else if c == delim || c == '\n' || c == '\r' {
            return Ok((csv_value(field, quoted, options), start + at));
        } else {
            field.push(c);
        }
    }
    if in_quotes {
        return Err(AdapterError::BadCopyData(
            "unterminated CSV quoted field".into(),
        ));
    }
    Ok((csv_value(field, quoted, options), text.len()))
}

/// A CSV field's value: NULL when unquoted and equal to the NULL string.
fn csv_value<'a>(field: String, quoted: bool, options: &CopyOptions) -> Option<Cow<'a, str>> {
    (quoted || field != options.null).then_some(Cow::Owned(field))
}

/// Convert rows `range` of parsed rows into columns of the table's types:
/// `columns[i]` is the table column data field `i` fills; other columns
/// take `defaults`.
pub fn rows_to_batch(
    rows: &CopyRows,
    range: std::ops::Range<usize>,
    desc: &RelationDesc,
    columns: &[usize],
    defaults: &RecordBatch,
) -> Result<RecordBatch> {
    let n = range.len();
    let mut arrays: Vec<ArrayRef> = Vec::with_capacity(desc.arity());
    for (table_col, col) in desc.columns.iter().enumerate() {
        let array = match columns.iter().position(|c| *c == table_col) {
            Some(field) => match rows {
                CopyRows::Text(rows) => {
                    let values: Vec<Option<&str>> = rows[range.clone()]
                        .iter()
                        .map(|r| r[field].as_deref())
                        .collect();
                    parse_text_array(&values, &col.ty)?
                }
                CopyRows::Binary(rows) => {
                    binary_column(rows[range.clone()].iter().map(|r| r[field]), &col.ty)?
                }
            },
            None => {
                let default = defaults.column(table_col);
                let idx = arrow::array::UInt32Array::from(vec![0u32; n]);
                if defaults.num_rows() == 0 {
                    arrow::array::new_null_array(&col.ty.arrow_type(), n)
                } else {
                    arrow::compute::take(default.as_ref(), &idx, None)
                        .map_err(|e| AdapterError::Internal(e.to_string()))?
                }
            }
        };
        arrays.push(array);
    }
    RecordBatch::try_new_with_options(
        crate::values::unchecked_schema(desc),
        arrays,
        &arrow::array::RecordBatchOptions::new().with_row_count(Some(n)),
    )
    .map_err(|e| AdapterError::Internal(e.to_string()))
}

/// One column of binary fields, decoded as the client's binary send
/// format of `ty` (what `COPY ... TO ... (FORMAT binary)` writes).
fn binary_column<'a>(
    values: impl Iterator<Item = Option<&'a [u8]>>,
    ty: &freshet_repr::PgType,
) -> Result<ArrayRef> {
    let wire = wire_type(ty);
    let arrow_type = ty.arrow_type();
    let null = datafusion::common::ScalarValue::try_from(&arrow_type)?;
    let mut scalars = Vec::new();
    for v in values {
        scalars.push(match v {
            None => null.clone(),
            Some(bytes) => crate::params::decode_binary(&wire, bytes)
                .map_err(|e| match e {
                    AdapterError::Data { code, message, .. } => AdapterError::Data {
                        code,
                        message: message.replace("bind parameter", "COPY field"),
                        detail: None,
                    },
                    other => other,
                })?
                .cast_to(&arrow_type)?,
        });
    }
    if scalars.is_empty() {
        return Ok(arrow::array::new_empty_array(&arrow_type));
    }
    Ok(datafusion::common::ScalarValue::iter_to_array(scalars)?)
}

/// Render query results as COPY data rows.
pub fn render(
    desc: &RelationDesc,
    batches: &[RecordBatch],
    options: &CopyOptions,
    time_zone: &str,
    format_options: &Arc<FormatOptions>,
) -> Result<Vec<CopyData>> {
    let format = if options.format == CopyFormat::Binary {
        FieldFormat::Binary
    } else {
        FieldFormat::Text
    };
    let fields: Arc<Vec<FieldInfo>> = Arc::new(
        desc.columns
            .iter()
            .map(|c| {
                FieldInfo::new(c.name.clone(), None, None, wire_type(&c.ty), format)
                    .with_format_options(Arc::clone(format_options))
            })
            .collect(),
    );
    let delimiter = (options.delimiter as char).to_string();
    let mut encoder = match options.format {
        CopyFormat::Text => CopyEncoder::new_text(
            Arc::clone(&fields),
            CopyTextOptions {
                delimiter: delimiter.into(),
                null_string: options.null.clone().into(),
            },
        ),
        CopyFormat::Csv => CopyEncoder::new_csv(
            Arc::clone(&fields),
            CopyCsvOptions {
                delimiter: delimiter.into(),
                quote: (options.quote as char).to_string().into(),
                escape: (options.escape as char).to_string().into(),
                null_string: options.null.clone().into(),
                force_quote: vec![],
            },
        ),
        CopyFormat::Binary => CopyEncoder::new_binary(Arc::clone(&fields)),
    };
    let mut out = Vec::new();
    if options.header && options.format == CopyFormat::Csv {
        let header = desc
            .columns
            .iter()
            .map(|c| c.name.clone())
            .collect::<Vec<_>>()
            .join(&(options.delimiter as char).to_string());
        out.push(CopyData::new(format!("{header}\n").into()));
    }
    encode_batches(&mut encoder, desc, &fields, batches, time_zone, |e| {
        out.push(e.take_copy())
    })?;
    if options.format == CopyFormat::Binary {
        // The encoder writes the header with the first row; data without
        // rows still starts with one.
        if out.is_empty() {
            out.push(CopyData::new(bytes::Bytes::from_static(BINARY_HEADER)));
        }
        out.push(CopyEncoder::finish_copy_binary());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// All of `data` parsed as one chunk (its header read first).
    fn parse<'a>(data: &'a [u8], options: &CopyOptions, expected: usize) -> Result<CopyRows<'a>> {
        let rows = match options.format {
            CopyFormat::Binary => {
                let header = binary_header_len(data)?
                    .ok_or_else(|| bad_copy("unexpected EOF in COPY data"))?;
                &data[header..]
            }
            _ => data,
        };
        Ok(parse_chunk(rows, options, expected, 1, options.header)?.0)
    }

    fn parse_rows(
        data: &[u8],
        options: &CopyOptions,
        expected: usize,
    ) -> Result<Vec<Vec<Option<String>>>> {
        match parse(data, options, expected)? {
            CopyRows::Text(rows) => Ok(rows
                .into_iter()
                .map(|r| r.into_iter().map(|f| f.map(Cow::into_owned)).collect())
                .collect()),
            CopyRows::Binary(_) => Err(bad_copy("not text")),
        }
    }

    fn opts(format: CopyFormat) -> CopyOptions {
        let csv = format == CopyFormat::Csv;
        CopyOptions {
            format,
            delimiter: if csv { b',' } else { b'\t' },
            null: if csv { String::new() } else { "\\N".into() },
            header: false,
            quote: b'"',
            escape: b'"',
        }
    }

    #[test]
    fn text_format_escapes_and_nulls() {
        let rows = parse_rows(
            b"1\ta\\tb\t\\N\n2\tx\\\\y\tz\n\\.\n",
            &opts(CopyFormat::Text),
            3,
        )
        .unwrap();
        assert_eq!(
            rows,
            vec![
                vec![Some("1".into()), Some("a\tb".into()), None],
                vec![Some("2".into()), Some("x\\y".into()), Some("z".into())],
            ]
        );
    }

    #[test]
    fn csv_quotes_and_nulls() {
        let rows = parse_rows(
            b"1,\"a,\"\"b\"\"\",\n2,\"\",\"multi\nline\"\n",
            &opts(CopyFormat::Csv),
            3,
        )
        .unwrap();
        assert_eq!(
            rows,
            vec![
                vec![Some("1".into()), Some("a,\"b\"".into()), None],
                vec![
                    Some("2".into()),
                    Some(String::new()),
                    Some("multi\nline".into())
                ],
            ]
        );
    }

    #[test]
    fn binary_rows_split_into_fields_and_malformed_data_is_an_error() {
        let mut data = BINARY_HEADER.to_vec();
        data.extend_from_slice(&2i16.to_be_bytes());
        data.extend_from_slice(&4i32.to_be_bytes());
        data.extend_from_slice(&7i32.to_be_bytes());
        data.extend_from_slice(&(-1i32).to_be_bytes());
        let trailer = (-1i16).to_be_bytes();
        let mut full = data.clone();
        full.extend_from_slice(&trailer);
        let seven = 7i32.to_be_bytes();
        let expected = CopyRows::Binary(vec![vec![Some(&seven[..]), None]]);
        assert_eq!(
            parse(&full, &opts(CopyFormat::Binary), 2).unwrap(),
            expected
        );
        // Without the trailer too, as PostgreSQL.
        assert_eq!(
            parse(&data, &opts(CopyFormat::Binary), 2).unwrap(),
            expected
        );
        // Wrong field count, truncated field, bad signature, a length
        // past the end.
        assert!(parse(&full, &opts(CopyFormat::Binary), 3).is_err());
        assert!(parse(&data[..data.len() - 5], &opts(CopyFormat::Binary), 2).is_err());
        assert!(parse(b"PGCOPY\n", &opts(CopyFormat::Binary), 2).is_err());
        let mut long = BINARY_HEADER.to_vec();
        long.extend_from_slice(&1i16.to_be_bytes());
        long.extend_from_slice(&i32::MAX.to_be_bytes());
        assert!(parse(&long, &opts(CopyFormat::Binary), 1).is_err());
    }

    #[test]
    fn wrong_column_counts_are_errors() {
        assert!(parse_rows(b"1\t2\n", &opts(CopyFormat::Text), 3).is_err());
        assert!(parse_rows(b"1,\"open\n", &opts(CopyFormat::Csv), 2).is_err());
    }

    /// Push `data` in pieces of `step` bytes (taking rows whenever any are
    /// whole), then finish; every row, in order.
    fn streamed(data: &[u8], options: &CopyOptions, expected: usize, step: usize) -> Vec<String> {
        let mut stream = CopyStream::new(options);
        let mut chunks = Vec::new();
        for piece in data.chunks(step) {
            stream.push(piece).expect("push");
            while let Some(rows) = stream.take_rows(1) {
                chunks.push(rows);
            }
        }
        chunks.push(stream.finish().expect("finish"));
        let mut out = Vec::new();
        for chunk in &chunks {
            let (rows, _) = parse_chunk(chunk, options, expected, 1, false).expect("parse");
            out.extend(match rows {
                CopyRows::Text(rows) => rows.iter().map(|r| format!("{r:?}")).collect::<Vec<_>>(),
                CopyRows::Binary(rows) => rows.iter().map(|r| format!("{r:?}")).collect(),
            });
        }
        out
    }

    fn whole(data: &[u8], options: &CopyOptions, expected: usize) -> Vec<String> {
        match parse(data, options, expected).expect("parse") {
            CopyRows::Text(rows) => rows.iter().map(|r| format!("{r:?}")).collect(),
            CopyRows::Binary(rows) => rows.iter().map(|r| format!("{r:?}")).collect(),
        }
    }

    #[test]
    fn streamed_rows_equal_the_whole_data_parsed_at_once_at_every_cut() {
        let text = "1\tuno\n2\t\\N\n3\tdós\\ttab\n4\tlast".as_bytes();
        let csv = "1,\"a,b\"\n2,\"two\nlines\"\n3,\"quo\"\"ted\"\n4,\n5,é\n".as_bytes();
        let mut binary = BINARY_HEADER.to_vec();
        for (id, name) in [(1i32, Some("x")), (2, None), (3, Some("yz"))] {
            binary.extend_from_slice(&2i16.to_be_bytes());
            binary.extend_from_slice(&4i32.to_be_bytes());
            binary.extend_from_slice(&id.to_be_bytes());
            match name {
                Some(n) => {
                    binary.extend_from_slice(&(n.len() as i32).to_be_bytes());
                    binary.extend_from_slice(n.as_bytes());
                }
                None => binary.extend_from_slice(&(-1i32).to_be_bytes()),
            }
        }
        let mut with_trailer = binary.clone();
        with_trailer.extend_from_slice(&(-1i16).to_be_bytes());
        for (data, format) in [
            (text, CopyFormat::Text),
            (csv, CopyFormat::Csv),
            (&binary[..], CopyFormat::Binary),
            (&with_trailer[..], CopyFormat::Binary),
        ] {
            let o = opts(format);
            let expect = whole(data, &o, 2);
            assert!(expect.len() >= 3, "{format:?}: {expect:?}");
            for step in 1..=data.len() {
                assert_eq!(
                    streamed(data, &o, 2, step),
                    expect,
                    "{format:?} in pieces of {step}"
                );
            }
        }
    }

    #[test]
    fn a_binary_stream_that_ends_inside_a_row_is_an_error_not_a_panic() {
        let o = opts(CopyFormat::Binary);
        let mut data = BINARY_HEADER.to_vec();
        data.extend_from_slice(&2i16.to_be_bytes());
        data.extend_from_slice(&4i32.to_be_bytes());
        let mut stream = CopyStream::new(&o);
        stream.push(&data).expect("push");
        let rest = stream.finish().expect("finish");
        assert!(parse_chunk(&rest, &o, 2, 1, false).is_err());
        let mut stream = CopyStream::new(&o);
        stream.push(&BINARY_HEADER[..5]).expect("push");
        assert!(stream.finish().is_err(), "a header cut short");
    }

    /// A deterministic xorshift generator (no dependency; failures
    /// reproduce).
    fn xorshift(mut state: u64) -> impl FnMut() -> u64 {
        move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        }
    }

    /// Fields with every character the formats treat specially, written
    /// as PostgreSQL writes COPY text and CSV, read back as themselves
    /// (NULLs as NULL, empty strings as empty).
    #[test]
    fn fields_written_in_either_format_read_back_unchanged() {
        let mut next = xorshift(0x2545_f491_4f6c_dd1d);
        let alphabet = [
            'a', '1', ',', '\t', '"', '\\', '\n', '\r', '.', 'N', 'é', ' ',
        ];
        let text_escape = |f: &str| {
            let mut out = String::new();
            for c in f.chars() {
                match c {
                    '\\' => out.push_str("\\\\"),
                    '\t' => out.push_str("\\t"),
                    '\n' => out.push_str("\\n"),
                    '\r' => out.push_str("\\r"),
                    c => out.push(c),
                }
            }
            out
        };
        let csv_quote = |f: &str| {
            let special = f.is_empty()
                || f == "\\."
                || f.contains([',', '"', '\n', '\r', '\\'])
                || f.starts_with(' ');
            if special {
                format!("\"{}\"", f.replace('"', "\"\""))
            } else {
                f.to_string()
            }
        };
        for _ in 0..2_000 {
            let width = 1 + (next() % 4) as usize;
            let rows: Vec<Vec<Option<String>>> = (0..1 + next() % 5)
                .map(|_| {
                    (0..width)
                        .map(|_| {
                            (!next().is_multiple_of(6)).then(|| {
                                (0..next() % 6)
                                    .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                                    .collect()
                            })
                        })
                        .collect()
                })
                .collect();
            let mut text = String::new();
            let mut csv = String::new();
            for row in &rows {
                let t: Vec<String> = row
                    .iter()
                    .map(|f| f.as_deref().map_or("\\N".into(), text_escape))
                    .collect();
                text.push_str(&t.join("\t"));
                text.push('\n');
                let c: Vec<String> = row
                    .iter()
                    .map(|f| f.as_deref().map_or(String::new(), csv_quote))
                    .collect();
                csv.push_str(&c.join(","));
                csv.push_str(if next().is_multiple_of(2) {
                    "\n"
                } else {
                    "\r\n"
                });
            }
            // A text line of one empty field is a blank line, which COPY
            // skips (as PostgreSQL does): leave those out of the text case.
            let blank = rows
                .iter()
                .any(|r| r.len() == 1 && r[0].as_deref() == Some(""));
            if !blank {
                let got = parse_rows(text.as_bytes(), &opts(CopyFormat::Text), width);
                assert_eq!(got.ok().as_ref(), Some(&rows), "text {text:?}");
            }
            let got = parse_rows(csv.as_bytes(), &opts(CopyFormat::Csv), width);
            assert_eq!(got.ok().as_ref(), Some(&rows), "csv {csv:?}");
        }
    }

    #[test]
    fn arbitrary_bytes_cut_anywhere_never_panic() {
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
        let alphabet: &[u8] = b"\",\t\n\r\\.Nx\xff\x00\x01\x02\x04\xc3\xa9";
        for case in 0..3_000 {
            let len = (next() % 200) as usize;
            let mut data: Vec<u8> = if case % 3 == 0 {
                BINARY_HEADER.to_vec()
            } else {
                Vec::new()
            };
            data.extend((0..len).map(|_| alphabet[(next() % alphabet.len() as u64) as usize]));
            for format in [CopyFormat::Text, CopyFormat::Csv, CopyFormat::Binary] {
                let o = opts(format);
                let mut stream = CopyStream::new(&o);
                let mut at = 0;
                let mut chunks = Vec::new();
                let mut failed = false;
                while at < data.len() {
                    let step = 1 + (next() % 40) as usize;
                    let end = (at + step).min(data.len());
                    if stream.push(&data[at..end]).is_err() {
                        failed = true;
                        break;
                    }
                    while let Some(rows) = stream.take_rows((next() % 8) as usize) {
                        chunks.push(rows);
                    }
                    at = end;
                }
                if failed {
                    continue;
                }
                if let Ok(rest) = stream.finish() {
                    chunks.push(rest);
                }
                for chunk in &chunks {
                    let _ = parse_chunk(chunk, &o, 2, 1, false);
                }
            }
        }
    }
}
