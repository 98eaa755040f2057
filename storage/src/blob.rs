//! Immutable batch files.

use std::fs;
use std::io::ErrorKind;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use crate::error::{Result, StorageError};
use crate::fsutil::{remove_temps, sync_dir, walk, write_temp};

/// Blob values: immutable byte buffers shared without copying. Arrow's
/// buffer, so a part file's columns decode straight out of the bytes read
/// from disk (see [`crate::batch::IpcFile`]).
pub type Bytes = arrow::buffer::Buffer;

/// A key-value store of immutable byte blobs (batch files).
///
/// Blobs are written once under a fresh key and never modified, so a reader
/// never sees a partial blob and caching is trivially correct. Everything that
/// says *which* blobs are live lives in [`Consensus`](crate::Consensus).
pub trait Blob: Send + Sync + std::fmt::Debug {
    /// The blob stored under `key`, if any.
    fn get(&self, key: &str) -> Result<Option<Bytes>>;
    /// The last `len` bytes of the blob under `key` (all of it when it is
    /// shorter), if any: how a part file's footer is read without its
    /// batches.
    fn get_tail(&self, key: &str, len: usize) -> Result<Option<Bytes>>;
    /// Durably store `value` under `key`; once this returns, `get` sees it
    /// after any crash.
    fn set(&self, key: &str, value: &[u8]) -> Result<()>;
    /// Remove a blob; removing a missing blob is not an error.
    fn delete(&self, key: &str) -> Result<()>;
    /// All keys that start with `prefix`.
    fn list_keys(&self, prefix: &str) -> Result<Vec<String>>;
}

/// [`Blob`] on a local directory: one file per key.
#[derive(Debug)]
pub struct FileBlob {
    root: PathBuf,
}

impl FileBlob {
    /// Open (creating if needed) a blob store rooted at `root`.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self> {
        let root = root.into();
        fs::create_dir_all(&root)?;
        Ok(FileBlob { root })
    }

    /// Remove temporary files left by a crash between write and rename.
    /// Only safe while no other writer uses the directory (at boot).
    pub fn remove_leftover_temps(&self) -> Result<()> {
        let mut stack = vec![self.root.clone()];
        while let Some(dir) = stack.pop() {
            remove_temps(&dir)?;
            for entry in fs::read_dir(&dir)? {
                let entry = entry?;
                if entry.file_type()?.is_dir() {
                    stack.push(entry.path());
                }
            }
        }
        Ok(())
    }

    fn path(&self, key: &str) -> Result<PathBuf> {
        validate_key(key)?;
        Ok(self.root.join(key))
    }
}

/// Keys are relative paths of `[A-Za-z0-9_.-]` segments separated by `/`.
pub(crate) fn validate_key(key: &str) -> Result<()> {
    let ok = !key.is_empty()
        && key.split('/').all(|seg| {
            !seg.is_empty()
                && !seg.starts_with('.')
                && seg
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
        });
    if ok {
        Ok(())
    } else {
        Err(StorageError::InvalidUsage(format!("invalid key {key:?}")))
    }
}

impl Blob for FileBlob {
    fn get(&self, key: &str) -> Result<Option<Bytes>> {
        match fs::read(self.path(key)?) {
            Ok(data) => Ok(Some(Bytes::from_vec(data))),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    fn get_tail(&self, key: &str, len: usize) -> Result<Option<Bytes>> {
        let file = match fs::File::open(self.path(key)?) {
            Ok(file) => file,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let size = file.metadata()?.len();
        let take = size.min(u64::try_from(len).unwrap_or(u64::MAX));
        let mut buf = vec![0; usize::try_from(take).unwrap_or(len)];
        file.read_exact_at(&mut buf, size - take)?;
        Ok(Some(Bytes::from_vec(buf)))
    }

    fn set(&self, key: &str, value: &[u8]) -> Result<()> {
        let path = self.path(key)?;
        let dir = path
            .parent()
            .ok_or_else(|| StorageError::InvalidUsage(format!("invalid key {key:?}")))?;
        let tmp = write_temp(dir, value)?;
        fs::rename(&tmp, &path)?;
        sync_dir(dir)?;
        Ok(())
    }

    fn delete(&self, key: &str) -> Result<()> {
        match fs::remove_file(self.path(key)?) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    fn list_keys(&self, prefix: &str) -> Result<Vec<String>> {
        let mut out: Vec<String> = walk(&self.root)?
            .into_iter()
            .filter(|e| !e.is_dir && e.rel.starts_with(prefix))
            .map(|e| e.rel)
            .collect();
        out.sort();
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_get_delete_list() {
        let dir = tempfile::tempdir().unwrap();
        let blob = FileBlob::open(dir.path()).unwrap();
        assert!(blob.get("a/b").unwrap().is_none());
        blob.set("a/b", b"hello").unwrap();
        blob.set("a/c", b"world").unwrap();
        blob.set("z", b"!").unwrap();
        assert_eq!(&*blob.get("a/b").unwrap().unwrap(), b"hello");
        assert_eq!(&*blob.get_tail("a/b", 3).unwrap().unwrap(), b"llo");
        assert_eq!(&*blob.get_tail("a/b", 99).unwrap().unwrap(), b"hello");
        assert!(blob.get_tail("a/x", 3).unwrap().is_none());
        assert_eq!(blob.list_keys("a/").unwrap(), vec!["a/b", "a/c"]);
        blob.delete("a/b").unwrap();
        blob.delete("a/b").unwrap();
        assert_eq!(blob.list_keys("").unwrap(), vec!["a/c", "z"]);
    }

    #[test]
    fn rejects_escaping_keys() {
        let dir = tempfile::tempdir().unwrap();
        let blob = FileBlob::open(dir.path()).unwrap();
        for key in ["../x", "/abs", "a//b", "", ".hidden", "a/../b"] {
            assert!(blob.set(key, b"x").is_err(), "{key}");
        }
    }
}
