//! The files target: each committed range of timestamps `[lower, upper)`
//! becomes one immutable file (Parquet, CSV or JSON lines) holding its
//! changes, and a manifest names the files in order with the frontier
//! everything below which is exported.
//!
//! Exactly once comes from the order of two atomic steps: a range's file
//! is written aside and renamed into place, then the manifest (also
//! written aside and renamed) is replaced by one that names it and moves
//! the frontier to `upper`. A crash between the two leaves a file no
//! manifest names; the next start deletes it and exports the range again.
//! The manifest is the only record of progress, so it and the files can
//! never disagree. Everything goes through the `object_store` crate
//! (`LocalFileSystem` today), so an object store can take the directory's
//! place without new code here.

use std::path::PathBuf;
use std::sync::Arc;

use arrow::array::{RecordBatch, new_null_array};
use arrow::datatypes::SchemaRef;
use bytes::Bytes;
use freshet_catalog::{FileFormat, FilesSinkSpec};
use freshet_repr::{GlobalId, Timestamp};
use futures::TryStreamExt;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use serde::{Deserialize, Serialize};

use crate::Committed;
use crate::error::{Result, SinkError};

/// The manifest's name in the directory.
pub const MANIFEST: &str = "manifest.json";

/// What a files sink has exported: read at start, replaced at each
/// commit.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// The sink that owns the directory (its id).
    pub sink: String,
    /// The files' format (`parquet`, `csv`, `json`).
    pub format: String,
    /// Every change at a time below this is in `files`.
    pub frontier: Timestamp,
    /// The files, in timestamp order.
    pub files: Vec<ManifestFile>,
}

/// One file of a files sink: the changes at times in `[lower, upper)`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestFile {
    /// The file's name in the directory.
    pub name: String,
    /// The first time its range covers.
    pub lower: Timestamp,
    /// The time its range ends before.
    pub upper: Timestamp,
    /// Changes (rows) in it.
    pub rows: u64,
    /// Its size.
    pub bytes: u64,
}

/// A files sink's directory, opened.
pub struct FilesTarget {
    store: Arc<dyn ObjectStore>,
    /// The directory, when the store is the local file system: files are
    /// synced there so that a commit survives a power loss too.
    local: Option<PathBuf>,
    sink: GlobalId,
    format: FileFormat,
    schema: SchemaRef,
    manifest: Option<Manifest>,
}

impl FilesTarget {
    /// Open (creating it if need be) the directory `spec` names, for
    /// `sink`'s rows of `schema`.
    pub fn open(sink: GlobalId, spec: &FilesSinkSpec, schema: SchemaRef) -> Result<Self> {
        let dir = local_dir(&spec.url)?;
        std::fs::create_dir_all(&dir)
            .map_err(|e| SinkError::Target(format!("cannot create {}: {e}", dir.display())))?;
        let store = LocalFileSystem::new_with_prefix(&dir)
            .map_err(|e| SinkError::Target(format!("cannot open {}: {e}", dir.display())))?;
        Ok(FilesTarget {
            store: Arc::new(store),
            local: Some(dir),
            sink,
            format: spec.format,
            schema,
            manifest: None,
        })
    }

    /// Read the manifest and delete every file it does not name (a range
    /// written before a crash, never committed). Returns the frontier
    /// the sink resumes from (`None`: nothing was ever committed). A
    /// directory another sink owns is refused.
    pub async fn recover(&mut self) -> Result<Option<Timestamp>> {
        let manifest = self.read_manifest().await?;
        if let Some(m) = &manifest
            && m.sink != self.sink.to_string()
        {
            return Err(SinkError::Fatal(format!(
                "the directory holds the files of another sink ({}); a sink needs a directory of its own",
                m.sink
            )));
        }
        let named: Vec<&str> = manifest
            .iter()
            .flat_map(|m| m.files.iter().map(|f| f.name.as_str()))
            .collect();
        let listed: Vec<object_store::ObjectMeta> = self
            .store
            .list(None)
            .try_collect()
            .await
            .map_err(target_error)?;
        for meta in listed {
            let name = meta.location.filename().unwrap_or_default();
            if name.starts_with("part-") && !named.contains(&name) {
                tracing::info!(sink = %self.sink, file = name, "deleting a file no manifest names");
                self.store
                    .delete(&meta.location)
                    .await
                    .map_err(target_error)?;
            }
        }
        // Files written aside and never renamed (`name#n`).
        if let Some(dir) = &self.local
            && let Ok(entries) = std::fs::read_dir(dir)
        {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().to_string();
                if name.contains('#') {
                    let _ = std::fs::remove_file(entry.path());
                }
            }
        }
        let frontier = manifest.as_ref().map(|m| m.frontier);
        self.manifest = manifest;
        Ok(frontier)
    }

    /// Commit the changes at times in `[lower, upper)` (`batches`, rows of
    /// the sink's schema; none when the range had no changes): their file
    /// first, then the manifest naming it.
    pub async fn commit(
        &mut self,
        lower: Timestamp,
        upper: Timestamp,
        batches: &[RecordBatch],
    ) -> Result<Committed> {
        let mut manifest = self.manifest.clone().unwrap_or_else(|| Manifest {
            sink: self.sink.to_string(),
            format: self.format.extension().into(),
            frontier: lower,
            files: Vec::new(),
        });
        let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
        let mut written = 0;
        if rows > 0 {
            let data = encode(self.format, &self.schema, batches)?;
            let name = format!(
                "part-{:08}-{lower}-{upper}.{}",
                manifest.files.len(),
                self.format.extension()
            );
            written += data.len() as u64;
            self.put(&name, data.clone()).await?;
            manifest.files.push(ManifestFile {
                name,
                lower,
                upper,
                rows: rows as u64,
                bytes: data.len() as u64,
            });
        }
        manifest.frontier = upper;
        let text = serde_json::to_vec_pretty(&manifest)
            .map_err(|e| SinkError::Internal(format!("manifest: {e}")))?;
        written += text.len() as u64;
        let began = std::time::Instant::now();
        self.put(MANIFEST, Bytes::from(text)).await?;
        self.manifest = Some(manifest);
        Ok(Committed {
            bytes: written,
            progress: began.elapsed(),
        })
    }

    async fn read_manifest(&self) -> Result<Option<Manifest>> {
        match self.store.get(&Path::from(MANIFEST)).await {
            Ok(got) => {
                let bytes = got.bytes().await.map_err(target_error)?;
                let manifest = serde_json::from_slice(&bytes).map_err(|e| {
                    SinkError::Fatal(format!("the sink's {MANIFEST} cannot be read: {e}"))
                })?;
                Ok(Some(manifest))
            }
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(target_error(e)),
        }
    }

    /// Write `name` atomically (aside, then renamed), and on a local
    /// directory sync it and the directory.
    async fn put(&self, name: &str, data: Bytes) -> Result<()> {
        self.store
            .put(&Path::from(name), PutPayload::from_bytes(data))
            .await
            .map_err(target_error)?;
        if let Some(dir) = self.local.clone() {
            let path = dir.join(name);
            tokio::task::spawn_blocking(move || -> std::io::Result<()> {
                std::fs::File::open(&path)?.sync_all()?;
                std::fs::File::open(&dir)?.sync_all()
            })
            .await
            .map_err(|e| SinkError::Internal(format!("sync task: {e}")))?
            .map_err(|e| SinkError::Target(format!("cannot sync {name}: {e}")))?;
        }
        Ok(())
    }
}

/// Check at `CREATE SINK` that the directory `spec` names can be made
/// and written, holds no other sink's files, and that `format` can hold
/// rows of `schema`.
pub async fn check_target(spec: &FilesSinkSpec, schema: &SchemaRef) -> Result<()> {
    check_format(spec.format, schema)?;
    let dir = local_dir(&spec.url)?;
    std::fs::create_dir_all(&dir)
        .map_err(|e| SinkError::Target(format!("cannot create {}: {e}", dir.display())))?;
    if dir.join(MANIFEST).exists() {
        return Err(SinkError::Fatal(format!(
            "{} already holds a sink's files ({MANIFEST}); a sink needs a directory of its own",
            dir.display()
        )));
    }
    let probe = dir.join(".freshet-write-check");
    std::fs::write(&probe, b"")
        .and_then(|_| std::fs::remove_file(&probe))
        .map_err(|e| SinkError::Target(format!("cannot write in {}: {e}", dir.display())))
}

/// The local directory of a `file://` URL.
fn local_dir(url: &str) -> Result<PathBuf> {
    url.strip_prefix("file://")
        .map(PathBuf::from)
        .ok_or_else(|| SinkError::Fatal(format!("unsupported sink URL {url}")))
}

fn target_error(e: object_store::Error) -> SinkError {
    SinkError::Target(e.to_string())
}

/// `batches` as one file of `format`.
pub fn encode(format: FileFormat, schema: &SchemaRef, batches: &[RecordBatch]) -> Result<Bytes> {
    let mut out = Vec::new();
    let failed = |e: &dyn std::fmt::Display| {
        SinkError::Encode(format!("cannot write {}: {e}", format.extension()))
    };
    match format {
        FileFormat::Parquet => {
            let mut writer = parquet::arrow::ArrowWriter::try_new(&mut out, schema.clone(), None)
                .map_err(|e| failed(&e))?;
            for b in batches {
                writer.write(b).map_err(|e| failed(&e))?;
            }
            writer.close().map_err(|e| failed(&e))?;
        }
        FileFormat::Csv => {
            let mut writer = arrow_csv::WriterBuilder::new()
                .with_header(true)
                .build(&mut out);
            for b in batches {
                writer.write(b).map_err(|e| failed(&e))?;
            }
        }
        FileFormat::Json => {
            let mut writer = arrow_json::LineDelimitedWriter::new(&mut out);
            for b in batches {
                writer.write(b).map_err(|e| failed(&e))?;
            }
            writer.finish().map_err(|e| failed(&e))?;
        }
    }
    Ok(Bytes::from(out))
}

/// Whether rows of `schema` can be written as `format`: one row of NULLs
/// is encoded (so a column type the format cannot hold fails at `CREATE
/// SINK`, not at the first change).
pub fn check_format(format: FileFormat, schema: &SchemaRef) -> Result<()> {
    let columns = schema
        .fields()
        .iter()
        .map(|f| new_null_array(f.data_type(), 1))
        .collect();
    let nullable = freshet_repr::nullable_schema(schema);
    let batch = RecordBatch::try_new(nullable.clone(), columns)
        .map_err(|e| SinkError::Encode(e.to_string()))?;
    encode(format, &nullable, &[batch]).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Int64Array;
    use arrow::datatypes::{DataType, Field, Schema};

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("mz_timestamp", DataType::Int64, false),
            Field::new("mz_diff", DataType::Int64, false),
        ]))
    }

    fn batch(times: &[i64]) -> RecordBatch {
        RecordBatch::try_new(
            schema(),
            vec![
                Arc::new(Int64Array::from(times.to_vec())),
                Arc::new(Int64Array::from(vec![1; times.len()])),
            ],
        )
        .unwrap()
    }

    #[tokio::test]
    async fn a_restart_resumes_at_the_manifest_and_drops_uncommitted_files() {
        let dir = tempfile::tempdir().unwrap();
        let spec = FilesSinkSpec {
            url: format!("file://{}", dir.path().display()),
            format: FileFormat::Csv,
        };
        let id = GlobalId::User(7);
        let mut t = FilesTarget::open(id, &spec, schema()).unwrap();
        assert_eq!(t.recover().await.unwrap(), None);
        t.commit(10, 12, &[batch(&[10, 11])]).await.unwrap();
        t.commit(12, 15, &[]).await.unwrap();
        // A range written but never named: a crash before the manifest.
        std::fs::write(dir.path().join("part-00000001-15-20.csv"), "x").unwrap();
        std::fs::write(dir.path().join("manifest.json#3"), "x").unwrap();
        let mut again = FilesTarget::open(id, &spec, schema()).unwrap();
        assert_eq!(again.recover().await.unwrap(), Some(15));
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .collect();
        names.sort();
        assert_eq!(names, ["manifest.json", "part-00000000-10-12.csv"]);
        let csv = std::fs::read_to_string(dir.path().join("part-00000000-10-12.csv")).unwrap();
        assert_eq!(csv, "mz_timestamp,mz_diff\n10,1\n11,1\n");
        // Another sink may not take the directory over.
        let mut other = FilesTarget::open(GlobalId::User(8), &spec, schema()).unwrap();
        assert!(matches!(other.recover().await, Err(SinkError::Fatal(_))));
    }

    #[test]
    fn formats_refuse_types_they_cannot_hold() {
        let interval = Arc::new(Schema::new(vec![Field::new(
            "i",
            DataType::Interval(arrow::datatypes::IntervalUnit::MonthDayNano),
            true,
        )]));
        assert!(check_format(FileFormat::Parquet, &schema()).is_ok());
        assert!(check_format(FileFormat::Parquet, &interval).is_err());
    }
}
