//! Small helpers for crash-safe file writes on a local directory.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::Path;

/// Fsync a directory so that entries created, linked or renamed in it survive
/// a crash.
pub(crate) fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Write `data` to a fresh temporary file in `dir` and fsync it; the caller
/// then links or renames it into place.
pub(crate) fn write_temp(dir: &Path, data: &[u8]) -> std::io::Result<std::path::PathBuf> {
    fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".tmp-{}", uuid::Uuid::new_v4()));
    let mut f = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
    f.write_all(data)?;
    f.sync_all()?;
    Ok(tmp)
}

/// Remove leftover temporary files (from a crash between write and link).
pub(crate) fn remove_temps(dir: &Path) -> std::io::Result<()> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        if entry.file_name().to_string_lossy().starts_with(".tmp-") {
            let _ = fs::remove_file(entry.path());
        }
    }
    Ok(())
}

/// One entry found by [`walk`].
pub(crate) struct WalkEntry {
    /// Its path below the root, `/`-separated.
    pub rel: String,
    pub path: std::path::PathBuf,
    pub is_dir: bool,
}

/// Every entry below `root`, depth first, skipping names that start with
/// a dot (lock and temporary files; no blob or consensus key has such a
/// segment); a directory that vanishes meanwhile is skipped.
pub(crate) fn walk(root: &Path) -> std::io::Result<Vec<WalkEntry>> {
    let mut out = Vec::new();
    let mut stack = vec![(root.to_path_buf(), String::new())];
    while let Some((dir, rel)) = stack.pop() {
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        for entry in entries {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            let rel = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            let is_dir = entry.file_type()?.is_dir();
            if is_dir {
                stack.push((entry.path(), rel.clone()));
            }
            out.push(WalkEntry {
                rel,
                path: entry.path(),
                is_dir,
            });
        }
    }
    Ok(out)
}
