//! One key's consensus log: a preallocated file of framed records.
//!
//! A compare-and-set appends one record where the previous one ends and
//! `fdatasync`s the file. The file is filled with zeroes ahead of the
//! records (as the transaction log's segments are), so an append only
//! overwrites blocks the file already has: no file is created, renamed or
//! unlinked, the inode's size does not change, and the sync writes the
//! record's block alone instead of forcing a file-system journal commit.
//! (One file per entry, as this store had before, cost every entry a
//! temporary file, a hard link, an unlink and two directory fsyncs; with a
//! view appending a few hundred times a second, those journal commits
//! stalled every other sync in the process for milliseconds.)
//!
//! A record is `[len u32][crc32 u32][kind u8][seqno u64][data]`, `len`
//! counting from `kind` and the checksum covering the same bytes. `len` is
//! never zero, so the first zero length is the end of the records; a short
//! or mis-summed record is a torn append, which ends them too. Two kinds:
//! an *entry* (a seqno and its data) and a *truncation* (entries below a
//! seqno are gone). Truncating thus costs an append; the space is taken
//! back when the file is full and [`LogFile::rewrite`] writes a fresh one
//! holding only the live entries (aside, then renamed into place).

use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use super::{SeqNo, VersionedData};
use crate::error::{Result, StorageError};
use crate::fsutil::sync_dir;

/// The log's file name inside its key's directory.
pub(super) const LOG_NAME: &str = "log";

/// Bytes before a record's body: its length and checksum.
const FRAME_BYTES: usize = 8;

/// Bytes of a body before its data: kind and seqno.
const BODY_HEADER_BYTES: usize = 9;

/// Largest body a reader accepts; a larger length is a torn frame.
const MAX_BODY_BYTES: usize = 1 << 30;

/// Smallest file a rewrite makes. A key's log is rewritten when an append
/// would not fit, at four times its live bytes — so it is rewritten at
/// most once per three times its live size appended — and with room for
/// [`RECORDS_AHEAD`] records the size of its largest (a shard's state,
/// which every commit writes whole, truncated to one entry, would else be
/// rewritten every few commits), up to [`MAX_AHEAD_BYTES`].
const MIN_ALLOCATION: u64 = 64 << 10;

/// See [`MIN_ALLOCATION`].
const RECORDS_AHEAD: u64 = 64;

/// See [`MIN_ALLOCATION`].
const MAX_AHEAD_BYTES: u64 = 16 << 20;

const KIND_ENTRY: u8 = 1;
const KIND_TRUNCATE: u8 = 2;

/// Where one live entry's data sits in the file.
#[derive(Clone, Copy, Debug)]
struct Slot {
    seqno: SeqNo,
    offset: u64,
    len: usize,
}

/// An open log file and what its records say, as of the last read.
#[derive(Debug)]
pub(super) struct LogFile {
    path: PathBuf,
    file: File,
    /// Identity of the file read: a rewrite (by this process or another)
    /// replaces it, which a changed inode reveals.
    ino: u64,
    dev: u64,
    /// Offset just past the last valid record.
    end: u64,
    /// The file's length (records, then zeroes).
    allocated: u64,
    /// Bytes after `end` are not zeroes (a torn append): the next append
    /// rewrites the file rather than write after them.
    torn: bool,
    /// Entries below this seqno are truncated.
    floor: SeqNo,
    /// Live entries, oldest first.
    slots: Vec<Slot>,
    /// The newest entry's data (read on every compare-and-set).
    head: Option<VersionedData>,
}

impl LogFile {
    /// Open and read the log at `path`; `None` if there is none.
    pub fn open(path: &Path) -> Result<Option<LogFile>> {
        let file = match OpenOptions::new().read(true).write(true).open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let meta = file.metadata()?;
        let mut log = LogFile {
            path: path.to_path_buf(),
            file,
            ino: meta.ino(),
            dev: meta.dev(),
            end: 0,
            allocated: meta.len(),
            torn: false,
            floor: 0,
            slots: Vec::new(),
            head: None,
        };
        log.read_from_end()?;
        Ok(Some(log))
    }

    /// Whether the file at our path is still the one this handle read.
    pub fn is_current(&self) -> Result<bool> {
        match fs::metadata(&self.path) {
            Ok(m) => Ok(m.ino() == self.ino && m.dev() == self.dev),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Whether a record (possibly torn) follows the last one read: another
    /// writer appended since.
    pub fn has_more(&self) -> Result<bool> {
        if self.end + FRAME_BYTES as u64 > self.allocated {
            // No room for a record in this file, so nobody appended one;
            // and the file is never extended in place.
            return Ok(false);
        }
        let mut len = [0u8; 4];
        self.file.read_exact_at(&mut len, self.end)?;
        Ok(u32::from_le_bytes(len) != 0)
    }

    /// Read records appended after the last one read (by another process).
    pub fn read_from_end(&mut self) -> Result<()> {
        let mut frame = [0u8; FRAME_BYTES];
        while self.end + FRAME_BYTES as u64 <= self.allocated {
            self.file.read_exact_at(&mut frame, self.end)?;
            let len = u32::from_le_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize;
            let crc = u32::from_le_bytes([frame[4], frame[5], frame[6], frame[7]]);
            if len == 0 {
                return Ok(());
            }
            let body_at = self.end + FRAME_BYTES as u64;
            if !(BODY_HEADER_BYTES..=MAX_BODY_BYTES).contains(&len)
                || body_at + len as u64 > self.allocated
            {
                self.torn = true;
                return Ok(());
            }
            let mut body = vec![0u8; len];
            self.file.read_exact_at(&mut body, body_at)?;
            if crc32fast::hash(&body) != crc {
                self.torn = true;
                return Ok(());
            }
            self.apply(&body, body_at)?;
            self.end = body_at + len as u64;
        }
        Ok(())
    }

    /// Take in one valid record's body, found at `body_at`.
    fn apply(&mut self, body: &[u8], body_at: u64) -> Result<()> {
        let kind = body[0];
        let mut seqno = [0u8; 8];
        seqno.copy_from_slice(&body[1..BODY_HEADER_BYTES]);
        let seqno = SeqNo::from_le_bytes(seqno);
        match kind {
            KIND_ENTRY => {
                if let Some(head) = self.head_seqno()
                    && seqno != head + 1
                {
                    return Err(StorageError::Corruption(format!(
                        "{}: entry {seqno} follows {head}",
                        self.path.display()
                    )));
                }
                let data = body[BODY_HEADER_BYTES..].to_vec();
                self.slots.push(Slot {
                    seqno,
                    offset: body_at + BODY_HEADER_BYTES as u64,
                    len: data.len(),
                });
                self.head = Some(VersionedData { seqno, data });
            }
            KIND_TRUNCATE => self.drop_below(seqno),
            other => {
                return Err(StorageError::Corruption(format!(
                    "{}: record of unknown kind {other}",
                    self.path.display()
                )));
            }
        }
        Ok(())
    }

    fn drop_below(&mut self, seqno: SeqNo) {
        self.floor = self.floor.max(seqno);
        // The head is never dropped: a truncation past it is refused
        // before it is written.
        let keep_from = self
            .slots
            .iter()
            .position(|s| s.seqno >= seqno)
            .unwrap_or(self.slots.len().saturating_sub(1));
        self.slots.drain(..keep_from);
    }

    /// The newest entry.
    pub fn head(&self) -> Option<&VersionedData> {
        self.head.as_ref()
    }

    fn head_seqno(&self) -> Option<SeqNo> {
        self.head.as_ref().map(|h| h.seqno)
    }

    /// Live entries with seqno ≥ `from`, oldest first.
    pub fn scan(&self, from: SeqNo) -> Result<Vec<VersionedData>> {
        let mut out = Vec::new();
        for slot in self.slots.iter().filter(|s| s.seqno >= from) {
            match &self.head {
                Some(h) if h.seqno == slot.seqno => out.push(h.clone()),
                _ => out.push(VersionedData {
                    seqno: slot.seqno,
                    data: self.read_slot(slot)?,
                }),
            }
        }
        Ok(out)
    }

    fn read_slot(&self, slot: &Slot) -> Result<Vec<u8>> {
        let mut data = vec![0u8; slot.len];
        self.file.read_exact_at(&mut data, slot.offset)?;
        Ok(data)
    }

    /// How many live entries are below `seqno`.
    pub fn count_below(&self, seqno: SeqNo) -> usize {
        self.slots.iter().take_while(|s| s.seqno < seqno).count()
    }

    /// Durably append `entry` (the caller checked it follows the head).
    pub fn append(&mut self, entry: VersionedData) -> Result<()> {
        let record = encode(KIND_ENTRY, entry.seqno, &entry.data);
        if self.torn || self.end + record.len() as u64 > self.allocated {
            let mut entries = self.scan(0)?;
            entries.push(entry);
            *self = LogFile::rewrite(&self.path, &entries)?;
            return Ok(());
        }
        self.write_record(&record, true)?;
        let body_at = self.end + FRAME_BYTES as u64;
        self.slots.push(Slot {
            seqno: entry.seqno,
            offset: body_at + BODY_HEADER_BYTES as u64,
            len: entry.data.len(),
        });
        self.head = Some(entry);
        self.end += record.len() as u64;
        Ok(())
    }

    /// Drop entries below `seqno` (not past the head; the caller checked).
    /// Not synced: a crash that loses it only brings old entries back,
    /// which readers tolerate, and the next append's sync writes it.
    pub fn truncate(&mut self, seqno: SeqNo) -> Result<()> {
        let record = encode(KIND_TRUNCATE, seqno, &[]);
        if self.torn || self.end + record.len() as u64 > self.allocated {
            self.drop_below(seqno);
            let entries = self.scan(0)?;
            *self = LogFile::rewrite(&self.path, &entries)?;
            return Ok(());
        }
        self.write_record(&record, false)?;
        self.end += record.len() as u64;
        self.drop_below(seqno);
        Ok(())
    }

    /// Write `record` at the end; on failure, try to zero what may have
    /// been written and leave the log marked torn, so no later append
    /// follows a record nobody was told about.
    fn write_record(&mut self, record: &[u8], sync: bool) -> Result<()> {
        let written = self
            .file
            .write_all_at(record, self.end)
            .and_then(|()| if sync { self.file.sync_data() } else { Ok(()) });
        if let Err(e) = written {
            let _ = self.file.write_all_at(&vec![0u8; record.len()], self.end);
            self.torn = true;
            return Err(e.into());
        }
        Ok(())
    }

    /// Write a fresh log at `path` holding `entries` (consecutive seqnos),
    /// aside and then renamed into place, durably: the file, and the
    /// directory's entry for it.
    pub fn rewrite(path: &Path, entries: &[VersionedData]) -> Result<LogFile> {
        for pair in entries.windows(2) {
            if pair[1].seqno != pair[0].seqno + 1 {
                return Err(StorageError::InvalidUsage(format!(
                    "{}: entry {} follows {}",
                    path.display(),
                    pair[1].seqno,
                    pair[0].seqno
                )));
            }
        }
        let dir = path.parent().ok_or_else(|| {
            StorageError::InvalidUsage(format!("{} has no directory", path.display()))
        })?;
        let mut bytes = Vec::new();
        let mut largest = 0;
        for e in entries {
            let record = encode(KIND_ENTRY, e.seqno, &e.data);
            largest = largest.max(record.len() as u64);
            bytes.extend_from_slice(&record);
        }
        let allocation = (bytes.len() as u64 * 4)
            .max((largest * RECORDS_AHEAD).min(MAX_AHEAD_BYTES))
            .max(MIN_ALLOCATION);
        bytes.resize(allocation as usize, 0);
        let tmp = dir.join(format!(".tmp-{}", uuid::Uuid::new_v4()));
        let written = (|| -> std::io::Result<()> {
            let mut f = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
            fs::rename(&tmp, path)?;
            sync_dir(dir)
        })();
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp);
            return Err(e.into());
        }
        LogFile::open(path)?.ok_or_else(|| {
            StorageError::Corruption(format!("{} vanished as it was written", path.display()))
        })
    }
}

/// A framed record of `kind`.
fn encode(kind: u8, seqno: SeqNo, data: &[u8]) -> Vec<u8> {
    let len = BODY_HEADER_BYTES + data.len();
    let mut out = Vec::with_capacity(FRAME_BYTES + len);
    out.extend_from_slice(&(len as u32).to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.push(kind);
    out.extend_from_slice(&seqno.to_le_bytes());
    out.extend_from_slice(data);
    let crc = crc32fast::hash(&out[FRAME_BYTES..]);
    out[4..FRAME_BYTES].copy_from_slice(&crc.to_le_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::super::vd;
    use super::*;

    fn seqnos(log: &LogFile) -> Vec<SeqNo> {
        log.scan(0).unwrap().iter().map(|e| e.seqno).collect()
    }

    #[test]
    fn appends_are_read_back_by_a_fresh_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOG_NAME);
        let mut log = LogFile::rewrite(&path, &[vd(1, "a")]).unwrap();
        log.append(vd(2, "bb")).unwrap();
        log.append(vd(3, "")).unwrap();
        log.truncate(2).unwrap();
        let again = LogFile::open(&path).unwrap().unwrap();
        assert_eq!(again.scan(0).unwrap(), vec![vd(2, "bb"), vd(3, "")]);
        assert_eq!(again.head(), Some(&vd(3, "")));
        // The file did not change size: appends overwrote its zeroes.
        assert_eq!(fs::metadata(&path).unwrap().len(), MIN_ALLOCATION);
    }

    #[test]
    fn a_full_log_is_rewritten_with_only_its_live_entries() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOG_NAME);
        let mut log = LogFile::rewrite(&path, &[vd(1, "x")]).unwrap();
        let big = "y".repeat(10_000);
        for s in 2..40 {
            log.append(vd(s, &big)).unwrap();
            log.truncate(s).unwrap();
        }
        let again = LogFile::open(&path).unwrap().unwrap();
        assert_eq!(seqnos(&again), vec![39]);
        assert!(fs::metadata(&path).unwrap().len() <= RECORDS_AHEAD * 10_100);
        // Nothing but the log is left in the directory.
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_torn_append_ends_the_records_and_the_next_append_rewrites() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOG_NAME);
        let log = LogFile::rewrite(&path, &[vd(1, "a"), vd(2, "b")]).unwrap();
        let end = log.end;
        // Half a record at the end, as a crash mid-write leaves it.
        let record = encode(KIND_ENTRY, 3, b"a long entry that was cut short");
        log.file.write_all_at(&record[..20], end).unwrap();
        let mut torn = LogFile::open(&path).unwrap().unwrap();
        assert!(torn.torn);
        assert_eq!(seqnos(&torn), vec![1, 2]);
        torn.append(vd(3, "c")).unwrap();
        let again = LogFile::open(&path).unwrap().unwrap();
        assert!(!again.torn);
        assert_eq!(seqnos(&again), vec![1, 2, 3]);
    }

    #[test]
    fn another_writers_appends_are_seen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOG_NAME);
        let mut mine = LogFile::rewrite(&path, &[vd(1, "a")]).unwrap();
        let mut theirs = LogFile::open(&path).unwrap().unwrap();
        theirs.append(vd(2, "b")).unwrap();
        assert!(mine.is_current().unwrap());
        assert!(mine.has_more().unwrap());
        mine.read_from_end().unwrap();
        assert_eq!(mine.head(), Some(&vd(2, "b")));
        assert!(!mine.has_more().unwrap());
        // A rewrite replaces the file, which the other handle notices.
        LogFile::rewrite(&path, &[vd(2, "b")]).unwrap();
        assert!(!theirs.is_current().unwrap());
    }
}
