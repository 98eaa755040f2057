//! Per-file and total outcome counts, and how they are printed.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// One failed record.
#[derive(Debug, Clone)]
pub struct Failure {
    /// 1-based line of the record in its file (0 when unknown).
    pub line: u32,
    /// What went wrong, including the SQL where there is one.
    pub message: String,
}

/// The outcome of one test file.
#[derive(Debug, Clone)]
pub struct FileReport {
    /// The file.
    pub path: PathBuf,
    /// Records that ran and matched their expectation.
    pub passed: usize,
    /// Records that ran and did not (plus one for a file that could not run at all).
    pub failed: usize,
    /// Records excluded by `onlyif` / `skipif`.
    pub skipped: usize,
    /// `restart` directives carried out.
    pub restarts: usize,
    /// Times the server died unexpectedly and was restarted.
    pub crashes: usize,
    /// Details of each failure, in file order.
    pub failures: Vec<Failure>,
    /// Why the file stopped early, if it did.
    pub aborted: Option<String>,
    /// Wall-clock time for the file, server start included.
    pub elapsed: Duration,
    /// The server's temp dir (data and log), when it was kept.
    pub kept_dir: Option<PathBuf>,
}

impl FileReport {
    /// An empty report for `path`.
    pub fn new(path: &Path) -> Self {
        Self {
            path: path.to_path_buf(),
            passed: 0,
            failed: 0,
            skipped: 0,
            restarts: 0,
            crashes: 0,
            failures: Vec::new(),
            aborted: None,
            elapsed: Duration::ZERO,
            kept_dir: None,
        }
    }

    /// Records that the file could not go on; counts as one failure.
    pub fn fatal(&mut self, reason: String) {
        tracing::error!(file = %self.path.display(), %reason, "file aborted");
        self.failed += 1;
        self.aborted = Some(reason);
    }

    /// The per-file summary line.
    pub fn summary_line(&self) -> String {
        let mut line = format!(
            "{}: {} passed, {} failed, {} skipped",
            self.path.display(),
            self.passed,
            self.failed,
            self.skipped
        );
        let mut extras = vec![format!("{:.1}s", self.elapsed.as_secs_f64())];
        if self.restarts > 0 {
            extras.push(format!("{} restarts", self.restarts));
        }
        if self.crashes > 0 {
            extras.push(format!("{} server crashes", self.crashes));
        }
        if self.aborted.is_some() {
            extras.push("ABORTED".to_string());
        }
        line.push_str(&format!(" ({})", extras.join(", ")));
        line
    }

    /// Every failure with its location, for `--verbose`.
    pub fn failure_details(&self) -> String {
        let mut out = String::new();
        for failure in &self.failures {
            out.push_str(&format!(
                "--- FAILED {}:{}\n{}\n",
                self.path.display(),
                failure.line,
                failure.message.trim_end()
            ));
        }
        out
    }
}

/// Sums over all files.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Number of files run.
    pub files: usize,
    /// Passed records.
    pub passed: usize,
    /// Failed records.
    pub failed: usize,
    /// Skipped records.
    pub skipped: usize,
}

impl Totals {
    /// Adds one file's counts.
    pub fn add(&mut self, report: &FileReport) {
        self.files += 1;
        self.passed += report.passed;
        self.failed += report.failed;
        self.skipped += report.skipped;
    }
}

impl fmt::Display for Totals {
    /// The closing line, in the plain `N passed, N failed, N skipped` form.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "total: {} passed, {} failed, {} skipped",
            self.passed, self.failed, self.skipped
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_line_is_plain() {
        let mut report = FileReport::new(Path::new("a.slt"));
        report.passed = 3;
        report.failed = 1;
        report.skipped = 2;
        let mut totals = Totals::default();
        totals.add(&report);
        assert_eq!(totals.to_string(), "total: 3 passed, 1 failed, 2 skipped");
        assert!(
            report
                .summary_line()
                .starts_with("a.slt: 3 passed, 1 failed, 2 skipped (")
        );
    }
}
