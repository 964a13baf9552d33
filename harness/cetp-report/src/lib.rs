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
//! - [`document`] renders one of them from a finished run's events
//!   (`--format`);
//! - [`drift`] renders a contract drift report (text, JSON, SARIF).
//!
//! Every string that came from a Provider is escaped for its medium here
//! ([`escape`]); the runner never escapes.

pub mod document;
pub mod drift;
pub mod escape;
pub mod findings;
pub mod html;
pub mod json;
pub mod junit;
pub mod matrix;
pub mod ndjson;
pub mod sarif;
pub mod summary_md;
pub mod terminal;

/// The reporters of a report directory, for both halves of a run:
/// `report.json`, `junit.xml`, `events.ndjson`, `summary.md`, `index.html`
/// and `report.sarif` (its rules from [`sarif::catalog_rules`]). The
/// terminal view is the caller's: it depends on the command's flags.
pub fn standard_reporters(
    dir: &std::path::Path,
    rules: std::collections::BTreeMap<String, sarif::RuleInfo>,
) -> Vec<Box<dyn cetp_vectors::event::Reporter>> {
    vec![
        Box::new(json::JsonReport::new(Some(dir.join("report.json")))),
        Box::new(junit::JunitReport::new(dir.join("junit.xml"))),
        Box::new(ndjson::NdjsonReport::new(dir.join("events.ndjson"))),
        Box::new(summary_md::SummaryMd::new(Some(dir.join("summary.md")))),
        Box::new(html::HtmlReport::new(Some(dir.join("index.html")))),
        Box::new(sarif::SarifReport::new(
            Some(dir.join("report.sarif")),
            rules,
        )),
    ]
}

/// The command that reruns one case as its run ran it: the run's target,
/// seed and other flags (`RunStarted`'s `rerun`: the profile, the second
/// identity), whole and quoted for a POSIX shell. Each reporter escapes
/// it for its own medium.
pub fn replay_command(case_id: &str, target: &str, seed: u64, rerun: &[String]) -> String {
    let seed = seed.to_string();
    let words = [
        "cetp", "replay", case_id, "--target", target, "--seed", &seed,
    ]
    .into_iter()
    .chain(rerun.iter().map(String::as_str));
    escape::shell_words(words)
}

/// Writes a rendered report where its reporter was told to (nowhere for an
/// in-memory one), naming the file in the error.
pub(crate) fn write_report(path: Option<&std::path::Path>, text: &str) -> std::io::Result<()> {
    match path {
        Some(p) => std::fs::write(p, text)
            .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", p.display()))),
        None => Ok(()),
    }
}
