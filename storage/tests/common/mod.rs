#![allow(dead_code)]
//! Helpers shared by the storage integration tests.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use arrow::array::{Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use freshet_repr::GlobalId;
use freshet_storage::{
    CollectionKind, Storage, StorageConfig, TableWrite, open_local, write_batch,
};

pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("payload", DataType::Utf8, true),
    ]))
}

pub fn rows(ids: &[i64], payload: &str) -> RecordBatch {
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from(ids.to_vec())),
            Arc::new(StringArray::from(vec![payload; ids.len()])),
        ],
    )
    .unwrap()
}

pub fn insert(id: GlobalId, ids: &[i64], payload: &str) -> TableWrite {
    TableWrite {
        staged: Vec::new(),
        id,
        updates: write_batch(&rows(ids, payload), 1).unwrap(),
    }
}

pub fn delete(id: GlobalId, ids: &[i64], payload: &str) -> TableWrite {
    TableWrite {
        staged: Vec::new(),
        id,
        updates: write_batch(&rows(ids, payload), -1).unwrap(),
    }
}

pub fn fast_config(dir: &Path) -> StorageConfig {
    let mut c = StorageConfig::new(dir);
    c.tick = Duration::from_millis(20);
    c
}

/// Open storage on `dir` and register tables `u1` and `u2`.
pub fn open(dir: &Path, config: StorageConfig) -> Storage {
    let (blob, fence) = open_local(dir).unwrap();
    let storage = Storage::open(blob, fence, config).unwrap();
    for id in [GlobalId::User(1), GlobalId::User(2)] {
        storage
            .create_collection(id, schema(), CollectionKind::Table)
            .unwrap();
    }
    storage.finish_boot().unwrap();
    storage
}

/// Sorted ids in a snapshot.
pub fn ids(batches: &[RecordBatch]) -> Vec<i64> {
    let mut out = vec![];
    for b in batches {
        let a = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
        for i in 0..a.len() {
            out.push(a.value(i));
        }
    }
    out.sort();
    out
}
