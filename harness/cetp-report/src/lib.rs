//! Reporters: independent consumers of the runner's event stream.
//!
//! - [`json::JsonReport`] writes `report.json` (schema `cetp-report/1`,
//!   documented in `reports/README.md`, JSON Schema in
//!   `reports/schema/report.schema.json`);
//! - [`terminal::Terminal`] prints progress and the summary;
//! - [`ndjson::NdjsonReport`] writes `events.ndjson`, the event stream
//!   itself, one event a line, flushed as it goes;
//! - [`summary_md::SummaryMd`] writes `summary.md` for a pull-request comment;
//! - [`sarif::SarifReport`] writes `report.sarif` (SARIF 2.1.0);
//! - [`html::HtmlReport`] writes `index.html`, self-contained and script-free;
//! - [`drift`] renders a contract drift report (text, JSON, SARIF).
//!
//! Every string that came from a Provider is escaped for its medium here
//! ([`escape`]); the runner never escapes.

pub mod drift;
pub mod escape;
pub mod html;
pub mod json;
pub mod junit;
pub mod ndjson;
pub mod sarif;
pub mod summary_md;
pub mod terminal;

/// Writes a rendered report where its reporter was told to (nowhere for an
/// in-memory one), naming the file in the error.
pub(crate) fn write_report(path: Option<&std::path::Path>, text: &str) -> std::io::Result<()> {
    match path {
        Some(p) => std::fs::write(p, text)
            .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", p.display()))),
        None => Ok(()),
    }
}
