//! Reading test files: the `restart` directive and record classification.
//!
//! `restart` is a Freshet extension that the `sqllogictest` parser does not know, so a file is
//! first split into chunks at `restart` lines and each chunk is parsed on its own. Every chunk
//! keeps the file's line numbering: the lines before it are replaced by empty lines, which the
//! parser turns into no-op records.

use sqllogictest::{Condition, DefaultColumnType, ParseError, Record};

/// A parsed record of a test file.
pub type SltRecord = Record<DefaultColumnType>;

/// The directive that restarts the server.
pub const RESTART_DIRECTIVE: &str = "restart";

/// Record keywords whose record runs until the next empty line.
const BLOCK_KEYWORDS: [&str; 4] = ["statement", "query", "system", "let"];

/// Splits a test file's text at `restart` directive lines.
///
/// A `restart` line is a directive only between records: a line that is inside a record's SQL
/// or expected results (which run until the next empty line) is left alone. The returned chunks
/// are padded with empty lines so that record line numbers match the original file.
pub fn split_on_restart(text: &str) -> Vec<String> {
    let mut chunks = Vec::new();
    let mut current = String::new();
    let mut in_block = false;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.is_empty() {
            in_block = false;
        } else if !in_block && trimmed == RESTART_DIRECTIVE {
            chunks.push(std::mem::take(&mut current));
            // Pad the next chunk so its first line keeps its line number.
            let lines_so_far = chunks.last().map_or(0, |c| c.lines().count()) + 1;
            current = "\n".repeat(lines_so_far);
            continue;
        } else if !in_block && !trimmed.starts_with('#') {
            let keyword = trimmed.split_whitespace().next().unwrap_or_default();
            in_block = BLOCK_KEYWORDS.contains(&keyword);
        }
        current.push_str(line);
        current.push('\n');
    }
    chunks.push(current);
    chunks
}

/// Parses one chunk produced by [`split_on_restart`]; `name` is used in record locations.
pub fn parse_chunk(chunk: &str, name: &str) -> Result<Vec<SltRecord>, ParseError> {
    sqllogictest::parse_with_name(chunk, name)
}

/// The conditions of a record that executes something, or `None` for records (comments,
/// control, `hash-threshold`, ...) that are not counted as passed, failed or skipped.
pub fn countable_conditions(record: &SltRecord) -> Option<&[Condition]> {
    match record {
        Record::Statement { conditions, .. }
        | Record::Query { conditions, .. }
        | Record::System { conditions, .. }
        | Record::Let { conditions, .. } => Some(conditions),
        _ => None,
    }
}

/// Whether `onlyif`/`skipif` conditions exclude a record for the given labels.
pub fn is_excluded(conditions: &[Condition], labels: &[String]) -> bool {
    let has = |label: &str| labels.iter().any(|l| l == label);
    conditions.iter().any(|c| match c {
        Condition::OnlyIf { label } => !has(label),
        Condition::SkipIf { label } => has(label),
    })
}

/// Whether a record changes runner state that must survive a reconnect (`hash-threshold`,
/// `control sortmode|resultmode|substitution`).
pub fn is_runner_state(record: &SltRecord) -> bool {
    matches!(record, Record::HashThreshold { .. } | Record::Control(_))
}

/// The SQL (or shell command) a record runs, when it runs one.
pub fn record_sql(record: &SltRecord) -> Option<&str> {
    match record {
        Record::Statement { sql, .. } | Record::Query { sql, .. } | Record::Let { sql, .. } => {
            Some(sql)
        }
        Record::System { command, .. } => Some(command),
        _ => None,
    }
}

/// The 1-based line number of a record, when it has one.
pub fn record_line(record: &SltRecord) -> Option<u32> {
    match record {
        Record::Statement { loc, .. }
        | Record::Query { loc, .. }
        | Record::System { loc, .. }
        | Record::Let { loc, .. }
        | Record::Include { loc, .. }
        | Record::Halt { loc }
        | Record::HashThreshold { loc, .. } => Some(loc.line()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_restart_gives_one_chunk() {
        let text = "statement ok\nSELECT 1\n";
        assert_eq!(split_on_restart(text), vec![text.to_string()]);
    }

    #[test]
    fn restart_splits_and_keeps_line_numbers() {
        let text =
            "statement ok\nCREATE TABLE t (a int)\n\nrestart\n\nquery I\nSELECT 1\n----\n1\n";
        let chunks = split_on_restart(text);
        assert_eq!(chunks.len(), 2);
        assert!(!chunks[0].contains("restart"));
        assert!(!chunks[1].contains("restart"));
        let records = parse_chunk(&chunks[1], "t.slt").expect("parses");
        let lines: Vec<u32> = records.iter().filter_map(record_line).collect();
        assert_eq!(lines, vec![6]);
    }

    #[test]
    fn restart_inside_results_is_data() {
        let text = "query T\nSELECT 'restart'\n----\nrestart\n";
        assert_eq!(split_on_restart(text).len(), 1);
    }

    #[test]
    fn conditions_select_labels() {
        let labels = vec!["postgresql".to_string()];
        let only_mysql = [Condition::OnlyIf {
            label: "mysql".into(),
        }];
        let skip_pg = [Condition::SkipIf {
            label: "postgresql".into(),
        }];
        let only_pg = [Condition::OnlyIf {
            label: "postgresql".into(),
        }];
        assert!(is_excluded(&only_mysql, &labels));
        assert!(is_excluded(&skip_pg, &labels));
        assert!(!is_excluded(&only_pg, &labels));
        assert!(!is_excluded(&[], &labels));
    }
}
