//! [`Consensus`] on a local directory: a directory per key, holding the
//! key's log (see [`super::log`]) and a lock file.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::log::{LOG_NAME, LogFile};
use super::{CasResult, Consensus, SeqNo, VersionedData};
use crate::blob::validate_key;
use crate::error::{Result, StorageError};
use crate::fsutil::{remove_temps, sync_dir, walk};

/// Name of the lock file in a key's directory.
const LOCK_NAME: &str = ".lock";

/// [`Consensus`] on a local directory.
///
/// Each key is a directory holding one log file of its entries. Every
/// operation on a key holds an exclusive `flock` on the key's lock file
/// (so two processes sharing the directory, an old one and the one
/// fencing it, never interleave a check of the head with an append), and,
/// within this process, the key's mutex (a `flock` does not exclude other
/// threads holding the same open file). Under the lock the key's cached
/// reading of its log is brought up to date — another process may have
/// appended, or rewritten the file — which costs a `stat` and one small
/// read when nothing changed.
#[derive(Debug)]
pub struct FileConsensus {
    root: PathBuf,
    keys: Mutex<HashMap<String, Arc<Mutex<KeyState>>>>,
}

/// What this process knows of one key.
#[derive(Debug)]
struct KeyState {
    dir: PathBuf,
    /// The key's lock file, opened on first use.
    lock: Option<File>,
    /// The key's log as last read; `None` while it has none.
    log: Option<LogFile>,
    /// Deleted by [`Consensus::delete_key`]: whoever still holds this
    /// state fetches the key's state again.
    deleted: bool,
}

impl KeyState {
    fn log_path(&self) -> PathBuf {
        self.dir.join(LOG_NAME)
    }

    /// Catch up with the log on disk (held under the key's lock).
    fn refresh(&mut self) -> Result<()> {
        match &mut self.log {
            Some(log) if !log.is_current()? => self.log = LogFile::open(&self.log_path())?,
            Some(log) => {
                if log.has_more()? {
                    log.read_from_end()?;
                }
            }
            None => self.log = LogFile::open(&self.log_path())?,
        }
        Ok(())
    }

    fn head_seqno(&self) -> Option<SeqNo> {
        self.log.as_ref().and_then(|l| l.head()).map(|h| h.seqno)
    }
}

impl FileConsensus {
    /// Open (creating if needed) a consensus store rooted at `root`.
    ///
    /// A directory written by an earlier build, which kept each entry in a
    /// file of its own (`e-<seqno>`), is converted to logs here, key by
    /// key; a crash in between leaves both forms, and the log wins.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self> {
        let root = root.into();
        fs::create_dir_all(&root)?;
        let converted = convert_entry_files(&root)?;
        if converted > 0 {
            tracing::info!(keys = converted, root = %root.display(), "consensus entries converted to one log per key");
        }
        Ok(FileConsensus {
            root,
            keys: Mutex::new(HashMap::new()),
        })
    }

    /// Replace `key`'s whole log by `entries` (consecutive seqnos; none
    /// removes the key): how [`FileConsensus::open`] converts a directory
    /// of the earlier layout, and how a repair tool — or a test standing in
    /// for an older build — rewrites a key's history. Not for use while
    /// another process writes the key.
    pub fn replace_log(&self, key: &str, entries: &[VersionedData]) -> Result<()> {
        if entries.is_empty() {
            return self.delete_key(key);
        }
        self.with_key(key, true, |state| {
            state.log = Some(LogFile::rewrite(&state.log_path(), entries)?);
            Ok(())
        })
    }

    /// Run `f` on `key`'s state under the key's locks, its log caught up.
    /// With `create`, the key's directory is made if missing; without, a
    /// key that has no directory is passed as having no log.
    fn with_key<T>(
        &self,
        key: &str,
        create: bool,
        f: impl FnOnce(&mut KeyState) -> Result<T>,
    ) -> Result<T> {
        validate_key(key)?;
        loop {
            let shared = Arc::clone(self.keys.lock().entry(key.to_string()).or_insert_with(|| {
                Arc::new(Mutex::new(KeyState {
                    dir: self.root.join(key),
                    lock: None,
                    log: None,
                    deleted: false,
                }))
            }));
            let mut state = shared.lock();
            if state.deleted {
                continue;
            }
            if create && state.lock.is_some() && !state.dir.is_dir() {
                // Another process deleted the key: its lock file went
                // with it, and the key is made again below.
                state.lock = None;
            }
            let lock = match state.lock.take() {
                Some(lock) => lock,
                None => {
                    if create {
                        if create_key_dir(&state.dir)? {
                            // The key's directory must survive a crash
                            // with its first entry.
                            sync_ancestors(&self.root, &state.dir)?;
                        }
                    } else if !state.dir.is_dir() {
                        state.log = None;
                        return f(&mut state);
                    }
                    open_lock(&state.dir)?
                }
            };
            if let Err(e) = lock.lock() {
                state.lock = Some(lock);
                return Err(e.into());
            }
            let result = state.refresh().and_then(|()| f(&mut state));
            let unlocked = lock.unlock();
            if !state.deleted {
                state.lock = Some(lock);
            }
            let out = result?;
            unlocked?;
            return Ok(out);
        }
    }
}

/// Create a key's directory; `true` if it was not there.
fn create_key_dir(dir: &Path) -> Result<bool> {
    if dir.is_dir() {
        return Ok(false);
    }
    fs::create_dir_all(dir)?;
    Ok(true)
}

/// Fsync `dir`'s parents up to `root`, so that directories just made for
/// a key survive a crash.
fn sync_ancestors(root: &Path, dir: &Path) -> Result<()> {
    let mut at = dir.parent();
    while let Some(parent) = at {
        sync_dir(parent)?;
        if parent == root || !parent.starts_with(root) {
            break;
        }
        at = parent.parent();
    }
    Ok(())
}

fn open_lock(dir: &Path) -> Result<File> {
    Ok(OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(LOCK_NAME))?)
}

impl Consensus for FileConsensus {
    fn head(&self, key: &str) -> Result<Option<VersionedData>> {
        self.with_key(key, false, |state| {
            Ok(state.log.as_ref().and_then(|l| l.head()).cloned())
        })
    }

    fn compare_and_set(
        &self,
        key: &str,
        expected: Option<SeqNo>,
        new: VersionedData,
    ) -> Result<CasResult> {
        let want = expected.map_or(1, |s| s + 1);
        if new.seqno != want {
            return Err(StorageError::InvalidUsage(format!(
                "compare_and_set on {key}: new seqno {} must follow expected {expected:?}",
                new.seqno
            )));
        }
        self.with_key(key, true, |state| {
            let current = state.head_seqno();
            if current != expected {
                return Ok(CasResult::Mismatch(current));
            }
            match &mut state.log {
                Some(log) => log.append(new)?,
                None => state.log = Some(LogFile::rewrite(&state.log_path(), &[new])?),
            }
            Ok(CasResult::Committed)
        })
    }

    fn scan(&self, key: &str, from: SeqNo) -> Result<Vec<VersionedData>> {
        self.with_key(key, false, |state| match &state.log {
            Some(log) => log.scan(from),
            None => Ok(Vec::new()),
        })
    }

    /// Without the key's file lock: `false` only when this process's
    /// reading of the log has `seqno` as its head, the file is the one it
    /// read, and nothing follows the head's record — an append by anyone
    /// writes there first, and a rewrite makes a new file.
    fn may_have_moved(&self, key: &str, seqno: SeqNo) -> Result<bool> {
        validate_key(key)?;
        let Some(shared) = self.keys.lock().get(key).cloned() else {
            return Ok(true);
        };
        let state = shared.lock();
        match &state.log {
            Some(log) if !state.deleted && log.head().is_some_and(|h| h.seqno == seqno) => {
                Ok(!log.is_current()? || log.has_more()?)
            }
            _ => Ok(true),
        }
    }

    fn truncate(&self, key: &str, seqno: SeqNo) -> Result<usize> {
        self.with_key(key, false, |state| {
            let head = state.head_seqno().unwrap_or(0);
            if seqno > head {
                return Err(StorageError::InvalidUsage(format!(
                    "truncate {key} to {seqno} past head {head}"
                )));
            }
            let Some(log) = &mut state.log else {
                return Ok(0);
            };
            let removed = log.count_below(seqno);
            if removed > 0 {
                log.truncate(seqno)?;
            }
            Ok(removed)
        })
    }

    fn list_keys(&self, prefix: &str) -> Result<Vec<String>> {
        let mut out: Vec<String> = key_dirs(&self.root)?
            .into_iter()
            .filter(|(rel, dir)| rel.starts_with(prefix) && dir.join(LOG_NAME).is_file())
            .map(|(rel, _)| rel)
            .collect();
        out.sort();
        Ok(out)
    }

    fn delete_key(&self, key: &str) -> Result<()> {
        self.with_key(key, false, |state| {
            if !state.dir.is_dir() {
                return Ok(());
            }
            match fs::remove_file(state.log_path()) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(e.into()),
            }
            remove_temps(&state.dir)?;
            let _ = fs::remove_file(state.dir.join(LOCK_NAME));
            let _ = fs::remove_dir(&state.dir);
            state.log = None;
            state.deleted = true;
            self.keys.lock().remove(key);
            Ok(())
        })
    }
}

/// Every directory under `root` with its path relative to it (a key's
/// name, if it holds a log).
fn key_dirs(root: &Path) -> Result<Vec<(String, PathBuf)>> {
    Ok(walk(root)?
        .into_iter()
        .filter(|e| e.is_dir)
        .map(|e| (e.rel, e.path))
        .collect())
}

/// Seqno of an entry file of the earlier one-file-per-entry layout.
fn entry_file_seqno(name: &str) -> Option<SeqNo> {
    name.strip_prefix("e-")?.parse().ok()
}

/// Convert every key directory of the earlier layout under `root` into a
/// log, and clear leftover temporary files (under each key's lock);
/// returns how many keys were converted.
fn convert_entry_files(root: &Path) -> Result<usize> {
    let mut converted = 0;
    for (_, dir) in key_dirs(root)? {
        let mut files: Vec<(SeqNo, PathBuf)> = Vec::new();
        let mut has_temps = false;
        for entry in fs::read_dir(&dir)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(seqno) = entry_file_seqno(&name) {
                files.push((seqno, entry.path()));
            }
            has_temps |= name.starts_with(".tmp-");
        }
        if files.is_empty() && !has_temps {
            continue;
        }
        let lock = open_lock(&dir)?;
        lock.lock()?;
        let done = (|| -> Result<bool> {
            let log = dir.join(LOG_NAME);
            let convert = !files.is_empty() && !log.exists();
            if convert {
                files.sort_unstable_by_key(|(s, _)| *s);
                // Truncation removed entries oldest first, so what is left
                // is consecutive; should it not be, the newest run is what
                // the head's history is.
                let start = files
                    .windows(2)
                    .rposition(|w| w[1].0 != w[0].0 + 1)
                    .map_or(0, |i| i + 1);
                let mut entries = Vec::new();
                for (seqno, path) in &files[start..] {
                    entries.push(VersionedData {
                        seqno: *seqno,
                        data: fs::read(path)?,
                    });
                }
                LogFile::rewrite(&log, &entries)?;
            }
            for (_, path) in &files {
                match fs::remove_file(path) {
                    Ok(()) => {}
                    Err(e) if e.kind() == ErrorKind::NotFound => {}
                    Err(e) => return Err(e.into()),
                }
            }
            remove_temps(&dir)?;
            Ok(convert)
        })();
        let unlocked = lock.unlock();
        if done? {
            converted += 1;
        }
        unlocked?;
    }
    Ok(converted)
}
