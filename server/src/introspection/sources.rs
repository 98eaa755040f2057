//! `freshet_internal.source_statuses` and `freshet_internal.sink_statuses`:
//! every source (sink) of the session's database with what its ingestion
//! (export) reports: state, last error, what it moved, how far it came.

use freshet_catalog::SourceDetails;

use super::{QueryReader, Row};

/// Wall-clock milliseconds as a `timestamptz` text value.
fn timestamp_text(ms: u64) -> Option<String> {
    let t = chrono::DateTime::from_timestamp_millis(i64::try_from(ms).ok()?)?;
    Some(t.format("%Y-%m-%d %H:%M:%S%.3f+00").to_string())
}

impl QueryReader {
    pub(super) fn source_statuses(&self) -> Vec<Row> {
        let schemas = self.schemas_in_db();
        let statuses = self.sources.statuses();
        self.catalog
            .items()
            .filter(|item| schemas.iter().any(|s| s.id == item.schema_id))
            .filter_map(|item| match item.source_details() {
                Some(SourceDetails::Ingestion(ingestion)) => Some((item, ingestion)),
                _ => None,
            })
            .map(|(item, ingestion)| {
                let status = statuses.iter().find(|s| s.id == item.id);
                // Every relation of a source shares the log's upper; its
                // progress relation always exists. (Its other dependents,
                // materialized views, have uppers of their own.)
                let upper = self
                    .catalog
                    .source_parts(item.id)
                    .into_iter()
                    .find_map(|p| self.storage.frontiers(p.id).ok())
                    .and_then(|(_, upper)| upper.as_option().copied());
                vec![
                    Some(item.id.to_string()),
                    self.name_of(item.id),
                    Some(ingestion.connector.type_name().to_string()),
                    Some(status.map_or("starting", |s| s.state.name()).to_string()),
                    status.and_then(|s| s.error.clone()),
                    Some(status.map_or(0, |s| s.records).to_string()),
                    Some(status.map_or(0, |s| s.bytes).to_string()),
                    upper.map(|u| u.to_string()),
                    status.and_then(|s| s.progress.clone()),
                    status
                        .and_then(|s| s.last_ingest_at)
                        .and_then(timestamp_text),
                    status.and_then(|s| timestamp_text(s.changed_at)),
                ]
            })
            .collect()
    }
}

impl QueryReader {
    /// One row per sink: its task's status, and its lag: how far its
    /// target's frontier is behind the least upper of the collections it
    /// reads (milliseconds, as timestamps are).
    pub(super) fn sink_statuses(&self) -> Vec<Row> {
        let schemas = self.schemas_in_db();
        let statuses = self.sinks.statuses();
        self.catalog
            .items()
            .filter(|item| schemas.iter().any(|s| s.id == item.schema_id))
            .filter_map(|item| item.sink_details().map(|d| (item, d)))
            .map(|(item, details)| {
                let status = statuses.iter().find(|s| s.id == item.id);
                let upper = self
                    .catalog
                    .collections_behind(item.id)
                    .into_iter()
                    .filter_map(|id| self.storage.frontiers(id).ok())
                    .filter_map(|(_, upper)| upper.as_option().copied())
                    .min();
                let frontier = status.and_then(|s| s.frontier);
                let lag = match (upper, frontier) {
                    (Some(u), Some(f)) => Some(u.saturating_sub(f)),
                    _ => None,
                };
                vec![
                    Some(item.id.to_string()),
                    self.name_of(item.id),
                    Some(details.connector.type_name().to_string()),
                    Some(status.map_or("starting", |s| s.state.name()).to_string()),
                    status.and_then(|s| s.error.clone()),
                    Some(status.map_or(0, |s| s.messages).to_string()),
                    Some(status.map_or(0, |s| s.bytes).to_string()),
                    frontier.map(|f| f.to_string()),
                    status.and_then(|s| s.progress()).map(|p| p.to_string()),
                    lag.map(|l| l.to_string()),
                    Some(status.map_or(0, |s| s.commits).to_string()),
                    Some(status.map_or(0, |s| s.commit_us).to_string()),
                    Some(status.map_or(0, |s| s.progress_us).to_string()),
                    status
                        .and_then(|s| s.last_export_at)
                        .and_then(timestamp_text),
                    status.and_then(|s| timestamp_text(s.changed_at)),
                ]
            })
            .collect()
    }
}
