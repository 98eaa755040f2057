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
