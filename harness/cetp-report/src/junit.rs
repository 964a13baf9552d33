//! `junit.xml`: cases and checks as JUnit test cases, for CI systems that
//! gate on JUnit, written with `quick-junit`. FAIL and FLAKY → `<failure>`,
//! INFRA_ERROR → `<error>`, each with the reason as its message and in its
//! body (with the requirements the finding cites and, for a case, the
//! command that reproduces it); NOT_APPLICABLE → `<skipped>` with the reason
//! as its text only, since the Jenkins JUnit schema (the one the tests
//! validate against) gives `<skipped>` no attributes; WARN passes with its
//! reason in `<system-out>`. The suite carries the run's start time and
//! duration. Provider text is first escaped as for a terminal, and for the
//! characters XML 1.0 cannot carry ([`crate::escape::xml_chars`]);
//! quick-junit escapes the markup.

use crate::escape::xml_chars as esc;
use cetp_vectors::event::{Event, Reporter, Verdict};
use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
use std::path::PathBuf;
use std::time::Duration;

struct Row {
    class: &'static str,
    id: String,
    title: String,
    verdict: Verdict,
    reason: String,
    cited: Vec<String>,
    millis: u64,
}

/// Builds `junit.xml` from events; writes it on `finish`.
pub struct JunitReport {
    path: PathBuf,
    suite: String,
    target: String,
    /// The run's other flags a rerun needs (`RunStarted::rerun`).
    rerun: Vec<String>,
    seed: u64,
    started_at_ms: i64,
    duration_ms: u64,
    rows: Vec<Row>,
    /// The run's pin hash (`RunPinned`).
    pin: Option<String>,
}

impl JunitReport {
    /// `path`: where to write on finish.
    pub fn new(path: PathBuf) -> Self {
        JunitReport {
            path,
            suite: "cetp".into(),
            target: String::new(),
            rerun: Vec::new(),
            seed: 0,
            started_at_ms: 0,
            duration_ms: 0,
            rows: Vec::new(),
            pin: None,
        }
    }

    fn case(&self, r: &Row) -> TestCase {
        let reason = esc(&r.reason, 4000);
        let mut body = reason.clone();
        if !r.cited.is_empty() {
            body.push_str(&format!("\nrequirements: {}", r.cited.join(", ")));
        }
        if r.class == "cetp.case" {
            let line = crate::replay_command(&r.id, &self.target, self.seed, &self.rerun);
            body.push_str(&format!("\nreproduce: {}", esc(&line, 4000)));
        }
        let status = match r.verdict {
            Verdict::Pass => TestCaseStatus::success(),
            Verdict::Warn => TestCaseStatus::success(),
            Verdict::NotApplicable => {
                let mut s = TestCaseStatus::skipped();
                s.set_description(reason.clone());
                s
            }
            Verdict::Fail | Verdict::Flaky | Verdict::InfraError => {
                let kind = if r.verdict == Verdict::InfraError {
                    NonSuccessKind::Error
                } else {
                    NonSuccessKind::Failure
                };
                let mut s = TestCaseStatus::non_success(kind);
                s.set_message(reason.clone());
                s.set_type(r.verdict.as_str());
                s.set_description(body);
                s
            }
        };
        let mut tc = TestCase::new(format!("{} {}", esc(&r.id, 80), esc(&r.title, 300)), status);
        tc.set_classname(r.class);
        tc.set_time(Duration::from_millis(r.millis));
        if r.verdict == Verdict::Warn {
            tc.set_system_out(format!("WARN: {reason}"));
        }
        tc
    }

    /// The JUnit XML for the events seen so far.
    pub fn render(&self) -> String {
        let mut suite = TestSuite::new(esc(&self.suite, 300));
        if let Some(t) = chrono::DateTime::from_timestamp_millis(self.started_at_ms) {
            suite.set_timestamp(t.fixed_offset());
        }
        suite.set_time(Duration::from_millis(self.duration_ms));
        if let Some(pin) = &self.pin {
            suite.add_property(quick_junit::Property::new("cetp.pin", pin.as_str()));
        }
        for r in &self.rows {
            suite.add_test_case(self.case(r));
        }
        let mut report = Report::new("cetp");
        report.add_test_suite(suite);
        report.to_string().unwrap_or_default()
    }
}

impl Reporter for JunitReport {
    fn on_event(&mut self, event: &Event) {
        match event {
            Event::RunStarted {
                target,
                seed,
                started_at_ms,
                rerun,
                ..
            } => {
                self.suite = format!("cetp {target}");
                self.target = target.clone();
                self.rerun = rerun.clone();
                self.seed = *seed;
                self.started_at_ms = *started_at_ms;
            }
            Event::CaseFinished {
                case_id,
                title,
                verdict,
                reason,
                cited,
                baseline,
                duration_ms,
                unjudged,
                ..
            } => self.rows.push(Row {
                class: "cetp.case",
                id: case_id.clone(),
                title: title.clone(),
                // A known failure does not fail the CI job, but stays visible.
                verdict: if baseline.is_some() {
                    Verdict::Warn
                } else {
                    *verdict
                },
                reason: match (baseline, unjudged) {
                    (Some(b), _) => format!("known failure ({b}): {reason}"),
                    // Skipped for the setup: say what would judge it.
                    (None, Some(needs)) => format!(
                        "{reason}; to judge it: {}",
                        cetp_vectors::advice::fix_for(needs)
                    ),
                    (None, None) => reason.clone(),
                },
                cited: cited.clone(),
                millis: *duration_ms,
            }),
            Event::CheckVerdict {
                check,
                title,
                verdict,
                reason,
                cited,
                ..
            } => self.rows.push(Row {
                class: "cetp.check",
                id: check.clone(),
                title: title.clone(),
                verdict: *verdict,
                reason: reason.clone(),
                cited: cited.clone(),
                millis: 0,
            }),
            Event::RunPinned { pin_hash, .. } => self.pin = Some(pin_hash.clone()),
            Event::RunFinished { duration_ms, .. } => self.duration_ms = *duration_ms,
            _ => {}
        }
    }

    fn finish(&mut self) -> std::io::Result<()> {
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&self.path, self.render())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_reasons_are_escaped() {
        let mut j = JunitReport::new(PathBuf::from("/nonexistent/junit.xml"));
        j.on_event(&Event::CaseFinished {
            case_id: "EXE-003".into(),
            title: "t".into(),
            requirements: vec![],
            cited: vec!["CETP2-5-13".into()],
            verdict: Verdict::Fail,
            reason: "error_message \"<script>&</script>\" \u{1b}[31m\u{0}]]>".into(),
            baseline: None,
            unjudged: None,
            duration_ms: 5,
        });
        let xml = j.render();
        assert!(xml.contains("&lt;script&gt;&amp;&lt;/script&gt;"), "{xml}");
        assert!(!xml.contains("<script>"), "{xml}");
        assert!(!xml.contains('\u{1b}') && !xml.contains('\u{0}'), "{xml}");
        assert!(xml.contains("failures=\"1\""), "{xml}");
        assert!(xml.contains("requirements: CETP2-5-13"), "{xml}");
        assert!(xml.contains("reproduce: cetp replay EXE-003"), "{xml}");
    }

    #[test]
    fn characters_xml_cannot_carry_are_shown_not_written() {
        // Found by the `reporters` fuzz target: a reason or title with
        // U+FFFE or U+FFFF made the whole file ill-formed XML 1.0.
        let mut j = JunitReport::new(PathBuf::from("/nonexistent/junit.xml"));
        j.on_event(&Event::CaseFinished {
            case_id: "EXE-003".into(),
            title: "t\u{ffff}".into(),
            requirements: vec![],
            cited: vec![],
            verdict: Verdict::Fail,
            reason: "error_message \u{fffe}".into(),
            baseline: None,
            unjudged: None,
            duration_ms: 5,
        });
        let xml = j.render();
        assert!(!xml.contains(['\u{fffe}', '\u{ffff}']), "{xml}");
        assert!(xml.contains("error_message \\u{fffe}"), "{xml}");
        assert!(xml.contains("t\\u{ffff}"), "{xml}");
    }
}
