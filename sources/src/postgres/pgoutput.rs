//! Decoding of the messages PostgreSQL's `pgoutput` plugin sends on a
//! logical replication stream (protocol version 1, "Logical Replication
//! Message Formats" in the PostgreSQL documentation).
//!
//! The replication transport already turns `Begin`, `Commit` and `Message`
//! into events of its own; what it hands on as raw bytes is decoded here.
//! Every message is read through a bounds-checked cursor, so short or
//! garbled input is an error, never a panic. Column values are sliced out
//! of the message without copying.

use bytes::Bytes;

use crate::error::{Result, SourceError};

/// A column of a [`Relation`], as upstream describes it: enough to map the
/// values of later tuples onto Freshet columns and to tell key columns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RelationColumn {
    /// Column flags: `1` when the column is part of the replica identity
    /// key.
    pub flags: u8,
    /// The column's name.
    pub name: String,
    /// The oid of the column's type.
    pub type_oid: u32,
    /// The column's `atttypmod` (-1: none).
    pub type_modifier: i32,
}

/// A relation's description: upstream sends one before the first change to
/// a relation in a session and again whenever its definition changes, so
/// tuples (which carry only the relation's oid) can be interpreted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Relation {
    /// The relation's oid.
    pub oid: u32,
    /// Its schema, as sent: `""` stands for `pg_catalog`.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its replica identity setting: `b'd'` (default: primary key),
    /// `b'n'` (nothing), `b'f'` (all columns) or `b'i'` (an index).
    pub replica_identity: u8,
    /// Its columns, in order.
    pub columns: Vec<RelationColumn>,
}

/// One column's value in a tuple of a change message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum TupleValue {
    /// SQL NULL.
    Null,
    /// A TOASTed value that did not change: upstream does not send it, so
    /// the previous value must be kept.
    UnchangedToast,
    /// The value in the type's text output format.
    Text(Bytes),
    /// The value in the type's binary format (only if asked for).
    Binary(Bytes),
}

/// A decoded `pgoutput` message: what the change-data-capture source
/// applies to its view of upstream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum LogicalMessage {
    /// The description of a relation later changes refer to.
    Relation(Relation),
    /// A row was inserted into relation `relation`.
    Insert {
        /// The relation's oid.
        relation: u32,
        /// The new row.
        new: Vec<TupleValue>,
    },
    /// A row of relation `relation` was updated.
    Update {
        /// The relation's oid.
        relation: u32,
        /// `Some((is_key_only, values))` when upstream sent the old row:
        /// its key columns only (`'K'`, other columns NULL) or all of it
        /// (`'O'`, replica identity full).
        old: Option<(bool, Vec<TupleValue>)>,
        /// The new row.
        new: Vec<TupleValue>,
    },
    /// A row of relation `relation` was deleted.
    Delete {
        /// The relation's oid.
        relation: u32,
        /// The old row: `(is_key_only, values)` as for [`Self::Update`].
        old: (bool, Vec<TupleValue>),
    },
    /// Relations were truncated.
    Truncate {
        /// The truncated relations' oids.
        relations: Vec<u32>,
        /// `TRUNCATE ... CASCADE`.
        cascade: bool,
        /// `TRUNCATE ... RESTART IDENTITY`.
        restart_identity: bool,
    },
    /// The description of a (non-builtin) type columns refer to.
    Type {
        /// The type's oid.
        oid: u32,
        /// Its schema (`""`: `pg_catalog`).
        namespace: String,
        /// Its name.
        name: String,
    },
    /// The origin of the transaction being sent.
    Origin {
        /// The commit position on the origin server.
        lsn: u64,
        /// The origin's name.
        name: String,
    },
    /// `Begin`, `Commit`, `Message` and anything unknown: the tag byte,
    /// for the caller to skip.
    Other(u8),
}

/// Decode one `pgoutput` message (its first byte is the message tag).
pub(crate) fn decode(data: &Bytes) -> Result<LogicalMessage> {
    let mut r = Reader::new(data);
    let tag = r.u8("message tag")?;
    let message = match tag {
        b'R' => LogicalMessage::Relation(relation(&mut r)?),
        b'I' => insert(&mut r)?,
        b'U' => update(&mut r)?,
        b'D' => delete(&mut r)?,
        b'T' => truncate(&mut r)?,
        b'Y' => LogicalMessage::Type {
            oid: r.u32("type oid")?,
            namespace: r.string("type namespace")?,
            name: r.string("type name")?,
        },
        b'O' => LogicalMessage::Origin {
            lsn: r.u64("origin lsn")?,
            name: r.string("origin name")?,
        },
        other => return Ok(LogicalMessage::Other(other)),
    };
    r.finish(tag)?;
    Ok(message)
}

fn relation(r: &mut Reader<'_>) -> Result<Relation> {
    let oid = r.u32("relation oid")?;
    let namespace = r.string("relation namespace")?;
    let name = r.string("relation name")?;
    let replica_identity = r.u8("replica identity")?;
    let count = r.count16("relation column count")?;
    let mut columns = Vec::with_capacity(count.min(r.remaining()));
    for _ in 0..count {
        columns.push(RelationColumn {
            flags: r.u8("column flags")?,
            name: r.string("column name")?,
            type_oid: r.u32("column type oid")?,
            type_modifier: r.i32("column type modifier")?,
        });
    }
    Ok(Relation {
        oid,
        namespace,
        name,
        replica_identity,
        columns,
    })
}

fn insert(r: &mut Reader<'_>) -> Result<LogicalMessage> {
    let relation = r.u32("insert relation oid")?;
    r.expect(b'N', "insert new tuple marker")?;
    let new = tuple(r)?;
    Ok(LogicalMessage::Insert { relation, new })
}

fn update(r: &mut Reader<'_>) -> Result<LogicalMessage> {
    let relation = r.u32("update relation oid")?;
    let old = match r.u8("update tuple marker")? {
        b'N' => None,
        marker @ (b'K' | b'O') => {
            let old = (marker == b'K', tuple(r)?);
            r.expect(b'N', "update new tuple marker")?;
            Some(old)
        }
        other => return Err(malformed(format!("update tuple marker {other:#04x}"))),
    };
    let new = tuple(r)?;
    Ok(LogicalMessage::Update { relation, old, new })
}

fn delete(r: &mut Reader<'_>) -> Result<LogicalMessage> {
    let relation = r.u32("delete relation oid")?;
    let key_only = match r.u8("delete tuple marker")? {
        b'K' => true,
        b'O' => false,
        other => return Err(malformed(format!("delete tuple marker {other:#04x}"))),
    };
    let old = (key_only, tuple(r)?);
    Ok(LogicalMessage::Delete { relation, old })
}

fn truncate(r: &mut Reader<'_>) -> Result<LogicalMessage> {
    let count = r.count32("truncate relation count")?;
    let options = r.u8("truncate options")?;
    let mut relations = Vec::with_capacity(count.min(r.remaining() / 4));
    for _ in 0..count {
        relations.push(r.u32("truncated relation oid")?);
    }
    Ok(LogicalMessage::Truncate {
        relations,
        cascade: options & 1 != 0,
        restart_identity: options & 2 != 0,
    })
}

/// `TupleData`: an Int16 column count, then each column's value.
fn tuple(r: &mut Reader<'_>) -> Result<Vec<TupleValue>> {
    let count = r.count16("tuple column count")?;
    let mut values = Vec::with_capacity(count.min(r.remaining()));
    for _ in 0..count {
        values.push(match r.u8("tuple value kind")? {
            b'n' => TupleValue::Null,
            b'u' => TupleValue::UnchangedToast,
            b't' => TupleValue::Text(r.sized("text tuple value")?),
            b'b' => TupleValue::Binary(r.sized("binary tuple value")?),
            other => return Err(malformed(format!("tuple value kind {other:#04x}"))),
        });
    }
    Ok(values)
}

fn malformed(what: impl std::fmt::Display) -> SourceError {
    SourceError::Upstream(format!("malformed pgoutput message: {what}"))
}

/// A bounds-checked cursor over a message.
struct Reader<'a> {
    data: &'a Bytes,
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(data: &'a Bytes) -> Self {
        Reader { data, pos: 0 }
    }

    fn remaining(&self) -> usize {
        self.data.len().saturating_sub(self.pos)
    }

    /// The next `n` bytes, or an error naming the field cut short.
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        let data: &'a [u8] = self.data;
        let end = self.pos.checked_add(n).filter(|end| *end <= data.len());
        let Some(bytes) = end.and_then(|end| data.get(self.pos..end)) else {
            return Err(malformed(format!(
                "{what} needs {n} bytes at offset {}, the message has {}",
                self.pos,
                data.len()
            )));
        };
        self.pos += n;
        Ok(bytes)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let bytes = self.take(N, what)?;
        bytes
            .try_into()
            .map_err(|_| SourceError::Internal(format!("{what}: took the wrong length")))
    }

    fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.array::<1>(what)?[0])
    }

    fn i16(&mut self, what: &str) -> Result<i16> {
        Ok(i16::from_be_bytes(self.array(what)?))
    }

    fn i32(&mut self, what: &str) -> Result<i32> {
        Ok(i32::from_be_bytes(self.array(what)?))
    }

    fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_be_bytes(self.array(what)?))
    }

    fn u64(&mut self, what: &str) -> Result<u64> {
        Ok(u64::from_be_bytes(self.array(what)?))
    }

    /// An Int16 count, which must not be negative.
    fn count16(&mut self, what: &str) -> Result<usize> {
        let n = self.i16(what)?;
        usize::try_from(n).map_err(|_| malformed(format!("{what} {n} is negative")))
    }

    /// An Int32 count, which must not be negative.
    fn count32(&mut self, what: &str) -> Result<usize> {
        let n = self.i32(what)?;
        usize::try_from(n).map_err(|_| malformed(format!("{what} {n} is negative")))
    }

    /// A byte that must be `want`.
    fn expect(&mut self, want: u8, what: &str) -> Result<()> {
        match self.u8(what)? {
            got if got == want => Ok(()),
            got => Err(malformed(format!(
                "{what} is {got:#04x}, expected {:?}",
                want as char
            ))),
        }
    }

    /// A NUL-terminated UTF-8 string.
    fn string(&mut self, what: &str) -> Result<String> {
        let rest = self.data.get(self.pos..).unwrap_or_default();
        let Some(len) = rest.iter().position(|b| *b == 0) else {
            return Err(malformed(format!("{what} is not NUL-terminated")));
        };
        let bytes = self.take(len, what)?;
        self.pos += 1;
        String::from_utf8(bytes.to_vec())
            .map_err(|_| malformed(format!("{what} is not valid UTF-8")))
    }

    /// An Int32 length, then that many bytes, shared with the message.
    fn sized(&mut self, what: &str) -> Result<Bytes> {
        let len = self.count32(&format!("{what} length"))?;
        let start = self.pos;
        self.take(len, what)?;
        Ok(self.data.slice(start..self.pos))
    }

    /// Check that the message held nothing after its last field: trailing
    /// bytes mean it was misread.
    fn finish(&self, tag: u8) -> Result<()> {
        match self.remaining() {
            0 => Ok(()),
            n => Err(malformed(format!(
                "{n} unexpected bytes after a {:?} message",
                tag as char
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds messages the way `pgoutput` writes them.
    struct Msg(Vec<u8>);

    impl Msg {
        fn tag(t: u8) -> Self {
            Msg(vec![t])
        }
        fn u8(mut self, v: u8) -> Self {
            self.0.push(v);
            self
        }
        fn i16(mut self, v: i16) -> Self {
            self.0.extend_from_slice(&v.to_be_bytes());
            self
        }
        fn i32(mut self, v: i32) -> Self {
            self.0.extend_from_slice(&v.to_be_bytes());
            self
        }
        fn u32(mut self, v: u32) -> Self {
            self.0.extend_from_slice(&v.to_be_bytes());
            self
        }
        fn u64(mut self, v: u64) -> Self {
            self.0.extend_from_slice(&v.to_be_bytes());
            self
        }
        fn str(mut self, s: &str) -> Self {
            self.0.extend_from_slice(s.as_bytes());
            self.0.push(0);
            self
        }
        fn text(self, s: &str) -> Self {
            let mut m = self.u8(b't').i32(s.len() as i32);
            m.0.extend_from_slice(s.as_bytes());
            m
        }
        fn bytes(self) -> Bytes {
            Bytes::from(self.0)
        }
    }

    fn text(s: &str) -> TupleValue {
        TupleValue::Text(Bytes::copy_from_slice(s.as_bytes()))
    }

    fn relation_message() -> Msg {
        Msg::tag(b'R')
            .u32(16384)
            .str("public")
            .str("orders")
            .u8(b'd')
            .i16(2)
            .u8(1)
            .str("id")
            .u32(23)
            .i32(-1)
            .u8(0)
            .str("amount")
            .u32(1700)
            .i32((12 << 16 | 2) + 4)
    }

    #[test]
    fn decodes_relation() {
        let m = decode(&relation_message().bytes()).unwrap();
        let LogicalMessage::Relation(rel) = m else {
            panic!("{m:?}");
        };
        assert_eq!(rel.oid, 16384);
        assert_eq!(
            (rel.namespace.as_str(), rel.name.as_str()),
            ("public", "orders")
        );
        assert_eq!(rel.replica_identity, b'd');
        assert_eq!(
            rel.columns,
            vec![
                RelationColumn {
                    flags: 1,
                    name: "id".into(),
                    type_oid: 23,
                    type_modifier: -1,
                },
                RelationColumn {
                    flags: 0,
                    name: "amount".into(),
                    type_oid: 1700,
                    type_modifier: (12 << 16 | 2) + 4,
                },
            ]
        );
    }

    #[test]
    fn keeps_empty_namespace_and_zero_columns() {
        let m = Msg::tag(b'R')
            .u32(1259)
            .str("")
            .str("pg_class")
            .u8(b'n')
            .i16(0)
            .bytes();
        let LogicalMessage::Relation(rel) = decode(&m).unwrap() else {
            panic!("not a relation");
        };
        assert_eq!(rel.namespace, "");
        assert_eq!(rel.replica_identity, b'n');
        assert!(rel.columns.is_empty());
    }

    #[test]
    fn decodes_insert_with_every_value_kind() {
        let m = Msg::tag(b'I')
            .u32(16384)
            .u8(b'N')
            .i16(5)
            .text("42")
            .u8(b'n')
            .u8(b'u')
            .u8(b'b')
            .i32(3)
            .u8(1)
            .u8(0)
            .u8(255)
            .text("")
            .bytes();
        assert_eq!(
            decode(&m).unwrap(),
            LogicalMessage::Insert {
                relation: 16384,
                new: vec![
                    text("42"),
                    TupleValue::Null,
                    TupleValue::UnchangedToast,
                    TupleValue::Binary(Bytes::from_static(&[1, 0, 255])),
                    text(""),
                ],
            }
        );
    }

    #[test]
    fn values_share_the_message_buffer() {
        let m = Msg::tag(b'I').u32(1).u8(b'N').i16(1).text("hello").bytes();
        let LogicalMessage::Insert { new, .. } = decode(&m).unwrap() else {
            panic!("not an insert");
        };
        let TupleValue::Text(v) = &new[0] else {
            panic!("not text");
        };
        let inside = m.as_ptr_range();
        assert!(inside.contains(&v.as_ptr()), "value was copied");
    }

    #[test]
    fn decodes_updates_with_and_without_old_tuples() {
        let plain = Msg::tag(b'U')
            .u32(7)
            .u8(b'N')
            .i16(2)
            .text("1")
            .text("b")
            .bytes();
        assert_eq!(
            decode(&plain).unwrap(),
            LogicalMessage::Update {
                relation: 7,
                old: None,
                new: vec![text("1"), text("b")],
            }
        );
        let key = Msg::tag(b'U')
            .u32(7)
            .u8(b'K')
            .i16(2)
            .text("1")
            .u8(b'n')
            .u8(b'N')
            .i16(2)
            .text("2")
            .u8(b'u')
            .bytes();
        assert_eq!(
            decode(&key).unwrap(),
            LogicalMessage::Update {
                relation: 7,
                old: Some((true, vec![text("1"), TupleValue::Null])),
                new: vec![text("2"), TupleValue::UnchangedToast],
            }
        );
        let full = Msg::tag(b'U')
            .u32(7)
            .u8(b'O')
            .i16(1)
            .text("a")
            .u8(b'N')
            .i16(1)
            .text("b")
            .bytes();
        assert_eq!(
            decode(&full).unwrap(),
            LogicalMessage::Update {
                relation: 7,
                old: Some((false, vec![text("a")])),
                new: vec![text("b")],
            }
        );
    }

    #[test]
    fn decodes_deletes() {
        let key = Msg::tag(b'D').u32(9).u8(b'K').i16(1).text("5").bytes();
        assert_eq!(
            decode(&key).unwrap(),
            LogicalMessage::Delete {
                relation: 9,
                old: (true, vec![text("5")]),
            }
        );
        let full = Msg::tag(b'D')
            .u32(9)
            .u8(b'O')
            .i16(2)
            .text("5")
            .u8(b'n')
            .bytes();
        assert_eq!(
            decode(&full).unwrap(),
            LogicalMessage::Delete {
                relation: 9,
                old: (false, vec![text("5"), TupleValue::Null]),
            }
        );
    }

    #[test]
    fn decodes_truncate_options() {
        for (options, cascade, restart_identity) in [
            (0, false, false),
            (1, true, false),
            (2, false, true),
            (3, true, true),
        ] {
            let m = Msg::tag(b'T')
                .i32(2)
                .u8(options)
                .u32(16384)
                .u32(4_000_000_000)
                .bytes();
            assert_eq!(
                decode(&m).unwrap(),
                LogicalMessage::Truncate {
                    relations: vec![16384, 4_000_000_000],
                    cascade,
                    restart_identity,
                }
            );
        }
    }

    #[test]
    fn decodes_type_and_origin() {
        let ty = Msg::tag(b'Y').u32(16390).str("public").str("mood").bytes();
        assert_eq!(
            decode(&ty).unwrap(),
            LogicalMessage::Type {
                oid: 16390,
                namespace: "public".into(),
                name: "mood".into(),
            }
        );
        let origin = Msg::tag(b'O')
            .u64(0x0000_0001_0000_00a8)
            .str("node_a")
            .bytes();
        assert_eq!(
            decode(&origin).unwrap(),
            LogicalMessage::Origin {
                lsn: 0x0000_0001_0000_00a8,
                name: "node_a".into(),
            }
        );
    }

    #[test]
    fn passes_other_tags_through() {
        for tag in [b'B', b'C', b'M', b'S', b'E', b'z'] {
            let m = Msg::tag(tag).u64(1).u32(2).bytes();
            assert_eq!(decode(&m).unwrap(), LogicalMessage::Other(tag));
        }
    }

    fn hex(s: &str) -> Bytes {
        let digits: Vec<u8> = s
            .as_bytes()
            .chunks(2)
            .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap())
            .collect();
        Bytes::from(digits)
    }

    /// Messages `pg_logical_slot_peek_binary_changes(..., 'proto_version',
    /// '1', ...)` returned on PostgreSQL 15 for `t (id int primary key,
    /// name text, amount numeric(12,2), big text)`, `f (k int, v text)`
    /// with replica identity full and `big (id int primary key, note text,
    /// blob text)` holding an out-of-line TOASTed `blob`.
    #[test]
    fn decodes_messages_captured_from_postgres_15() {
        let LogicalMessage::Relation(t) = decode(&hex(
            "52000040047075626c69630074006400040169640000000017ffffffff006e616d65000000\
             0019ffffffff00616d6f756e7400000006a4000c0006006269670000000019ffffffff",
        ))
        .unwrap() else {
            panic!("not a relation");
        };
        assert_eq!(
            (t.oid, t.name.as_str(), t.replica_identity),
            (16388, "t", b'd')
        );
        let columns: Vec<_> = t
            .columns
            .iter()
            .map(|c| (c.flags, c.name.as_str(), c.type_oid, c.type_modifier))
            .collect();
        assert_eq!(
            columns,
            vec![
                (1, "id", 23, -1),
                (0, "name", 25, -1),
                (0, "amount", 1700, (12 << 16 | 2) + 4),
                (0, "big", 25, -1),
            ]
        );
        // `update t set id = 3 where id = 2`: the old key, then the row.
        assert_eq!(
            decode(&hex(
                "55000040044b00047400000001326e6e6e4e00047400000001336e74000000052d302e3035\
                 740000000162"
            ))
            .unwrap(),
            LogicalMessage::Update {
                relation: 16388,
                old: Some((
                    true,
                    vec![
                        text("2"),
                        TupleValue::Null,
                        TupleValue::Null,
                        TupleValue::Null
                    ]
                )),
                new: vec![text("3"), TupleValue::Null, text("-0.05"), text("b")],
            }
        );
        assert_eq!(
            decode(&hex("44000040044b00047400000001336e6e6e")).unwrap(),
            LogicalMessage::Delete {
                relation: 16388,
                old: (
                    true,
                    vec![
                        text("3"),
                        TupleValue::Null,
                        TupleValue::Null,
                        TupleValue::Null
                    ]
                ),
            }
        );
        let LogicalMessage::Relation(f) = decode(&hex(
            "520000400b7075626c6963006600660002016b0000000017ffffffff01760000000019ffffffff",
        ))
        .unwrap() else {
            panic!("not a relation");
        };
        assert_eq!((f.oid, f.replica_identity), (16395, b'f'));
        assert!(f.columns.iter().all(|c| c.flags == 1));
        assert_eq!(
            decode(&hex("490000400b4e0002740000000131740000000161")).unwrap(),
            LogicalMessage::Insert {
                relation: 16395,
                new: vec![text("1"), text("a")],
            }
        );
        assert_eq!(
            decode(&hex(
                "550000400b4f00027400000001317400000001614e0002740000000131740000000162"
            ))
            .unwrap(),
            LogicalMessage::Update {
                relation: 16395,
                old: Some((false, vec![text("1"), text("a")])),
                new: vec![text("1"), text("b")],
            }
        );
        assert_eq!(
            decode(&hex("440000400b4f0002740000000131740000000162")).unwrap(),
            LogicalMessage::Delete {
                relation: 16395,
                old: (false, vec![text("1"), text("b")]),
            }
        );
        // `update big set note = 'm'` leaves the TOASTed blob out.
        assert_eq!(
            decode(&hex("550000401a4e000374000000013174000000016d75")).unwrap(),
            LogicalMessage::Update {
                relation: 16410,
                old: None,
                new: vec![text("1"), text("m"), TupleValue::UnchangedToast],
            }
        );
        // `truncate t, f restart identity cascade`.
        assert_eq!(
            decode(&hex("540000000203000040040000400b")).unwrap(),
            LogicalMessage::Truncate {
                relations: vec![16388, 16395],
                cascade: true,
                restart_identity: true,
            }
        );
        // Begin and Commit are the transport's.
        let begin = hex("420000000001577158000304b9aa6c53c1000002e6");
        assert_eq!(decode(&begin).unwrap(), LogicalMessage::Other(b'B'));
        let commit = hex("430000000000015771580000000001577188000304b9aa6c53c1");
        assert_eq!(decode(&commit).unwrap(), LogicalMessage::Other(b'C'));
    }

    fn assert_malformed(data: &[u8], needle: &str) {
        let err = decode(&Bytes::copy_from_slice(data)).unwrap_err();
        assert!(matches!(err, SourceError::Upstream(_)), "{err:?}");
        let msg = err.to_string();
        assert!(msg.contains("malformed pgoutput message"), "{msg}");
        assert!(msg.contains(needle), "{msg} should mention {needle}");
    }

    #[test]
    fn every_truncation_of_a_valid_message_is_an_error() {
        let messages = [
            relation_message().bytes(),
            Msg::tag(b'I')
                .u32(1)
                .u8(b'N')
                .i16(2)
                .text("ab")
                .u8(b'n')
                .bytes(),
            Msg::tag(b'U')
                .u32(1)
                .u8(b'O')
                .i16(1)
                .text("a")
                .u8(b'N')
                .i16(1)
                .u8(b'b')
                .i32(1)
                .u8(7)
                .bytes(),
            Msg::tag(b'D').u32(1).u8(b'K').i16(1).text("x").bytes(),
            Msg::tag(b'T').i32(2).u8(1).u32(1).u32(2).bytes(),
            Msg::tag(b'Y').u32(1).str("s").str("t").bytes(),
            Msg::tag(b'O').u64(1).str("o").bytes(),
        ];
        for m in messages {
            assert!(decode(&m).is_ok());
            for len in 0..m.len() {
                let err = decode(&m.slice(..len)).unwrap_err();
                assert!(matches!(err, SourceError::Upstream(_)), "{len}: {err:?}");
            }
        }
    }

    #[test]
    fn garbled_input_is_an_error_that_says_what_is_wrong() {
        assert_malformed(b"", "message tag");
        assert_malformed(&Msg::tag(b'I').u32(1).u8(b'X').0, "insert new tuple marker");
        assert_malformed(&Msg::tag(b'U').u32(1).u8(b'X').0, "update tuple marker");
        assert_malformed(
            &Msg::tag(b'U').u32(1).u8(b'K').i16(0).u8(b'K').0,
            "update new tuple marker",
        );
        assert_malformed(&Msg::tag(b'D').u32(1).u8(b'N').0, "delete tuple marker");
        assert_malformed(
            &Msg::tag(b'I').u32(1).u8(b'N').i16(1).u8(b'x').0,
            "tuple value kind",
        );
        assert_malformed(
            &Msg::tag(b'I').u32(1).u8(b'N').i16(-1).0,
            "tuple column count -1 is negative",
        );
        assert_malformed(
            &Msg::tag(b'I').u32(1).u8(b'N').i16(1).u8(b't').i32(-1).0,
            "text tuple value length -1 is negative",
        );
        assert_malformed(
            &Msg::tag(b'I')
                .u32(1)
                .u8(b'N')
                .i16(1)
                .u8(b't')
                .i32(i32::MAX)
                .0,
            "text tuple value needs",
        );
        assert_malformed(&Msg::tag(b'T').i32(-3).u8(0).0, "truncate relation count");
        assert_malformed(&Msg::tag(b'Y').u32(1).u8(b'a').0, "not NUL-terminated");
        assert_malformed(
            &Msg::tag(b'Y').u32(1).u8(0xff).u8(0).str("t").0,
            "type namespace is not valid UTF-8",
        );
        assert_malformed(
            &Msg::tag(b'D').u32(1).u8(b'K').i16(0).u8(0).0,
            "1 unexpected bytes after a 'D' message",
        );
    }

    /// A deterministic xorshift generator, so failures reproduce.
    struct XorShift(u64);

    impl XorShift {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
        let tags = b"RIUDTYOBCMx";
        for _ in 0..20_000 {
            let len = (rng.next() % 48) as usize;
            let mut data: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            if let Some(first) = data.first_mut() {
                *first = tags[(rng.next() % tags.len() as u64) as usize];
            }
            // Small counts and lengths reach deeper into the decoders.
            for b in data.iter_mut().skip(1) {
                if rng.next().is_multiple_of(3) {
                    *b = (rng.next() % 4) as u8;
                }
            }
            let _ = decode(&Bytes::from(data));
        }
    }

    #[test]
    fn mutations_of_valid_messages_never_panic() {
        let mut rng = XorShift(42);
        let base = [
            relation_message().bytes(),
            Msg::tag(b'U')
                .u32(1)
                .u8(b'K')
                .i16(2)
                .text("ab")
                .u8(b'n')
                .u8(b'N')
                .i16(2)
                .u8(b'u')
                .u8(b'b')
                .i32(2)
                .u8(1)
                .u8(2)
                .bytes(),
            Msg::tag(b'T').i32(2).u8(3).u32(1).u32(2).bytes(),
        ];
        for _ in 0..20_000 {
            let mut data = base[(rng.next() % base.len() as u64) as usize].to_vec();
            for _ in 0..1 + rng.next() % 3 {
                let at = (rng.next() % data.len() as u64) as usize;
                if let Some(b) = data.get_mut(at) {
                    *b = rng.next() as u8;
                }
            }
            let cut = (rng.next() % (data.len() as u64 + 1)) as usize;
            data.truncate(cut.max(data.len().saturating_sub(2)));
            let _ = decode(&Bytes::from(data));
        }
    }
}
