//! psql smoke test (placeholder).
