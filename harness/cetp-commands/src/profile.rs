//! A profile check's conclusion, shared by `cetp profile check` and the
//! check `cetp run` makes before it starts.

use crate::failure::{usage, Failure};
use cetp_conformance::exit::ExitCode;
use cetp_profile::profile_check::Report;
use cetp_report::escape;

fn esc(s: &str) -> String {
    escape::terminal(s, 2000)
}

/// Prints a check's report; a usage error when a field is wrong.
pub fn conclude(report: &Report, what: &str) -> Result<ExitCode, Failure> {
    eprint!("{}", report.render(&esc));
    if report.errors.is_empty() {
        Ok(ExitCode::Ok)
    } else {
        Err(usage(format!(
            "{what}: {} wrong field(s): {}",
            report.errors.len(),
            report
                .errors
                .iter()
                .map(|e| esc(&e.field))
                .collect::<Vec<_>>()
                .join(", ")
        )))
    }
}
