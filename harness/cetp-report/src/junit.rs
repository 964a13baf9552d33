//! `junit.xml`: cases and checks as JUnit test cases, for CI systems that
//! gate on JUnit. FAIL → `<failure>`, INFRA_ERROR → `<error>`,
//! NOT_APPLICABLE → `<skipped>`; WARN passes with its reason in
//! `<system-out>`.

use crate::escape;
use cetp_conformance::event::{Event, Reporter, Verdict};
use std::path::PathBuf;

struct Row {
    class: &'static str,
    id: String,
    title: String,
    verdict: Verdict,
    reason: String,
    millis: u64,
}

pub struct JunitReport {
    path: PathBuf,
    suite: String,
    rows: Vec<Row>,
}

impl JunitReport {
    pub fn new(path: PathBuf) -> Self {
        JunitReport {
            path,
            suite: "cetp".into(),
            rows: Vec::new(),
        }
    }

    pub fn render(&self) -> String {
        let count = |v: Verdict| self.rows.iter().filter(|r| r.verdict == v).count();
        let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        out.push_str(&format!(
            "<testsuites><testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\">\n",
            escape::xml(&self.suite),
            self.rows.len(),
            count(Verdict::Fail) + count(Verdict::Flaky),
            count(Verdict::InfraError),
            count(Verdict::NotApplicable)
        ));
        for r in &self.rows {
            out.push_str(&format!(
                "  <testcase classname=\"{}\" name=\"{} {}\" time=\"{:.3}\">",
                r.class,
                escape::xml(&r.id),
                escape::xml(&r.title),
                r.millis as f64 / 1000.0
            ));
            let reason = escape::xml(&r.reason);
            match r.verdict {
                Verdict::Pass => {}
                Verdict::Warn => out.push_str(&format!("<system-out>WARN: {reason}</system-out>")),
                Verdict::Fail | Verdict::Flaky => out.push_str(&format!(
                    "<failure message=\"{reason}\" type=\"{}\"/>",
                    r.verdict.as_str()
                )),
                Verdict::InfraError => out.push_str(&format!(
                    "<error message=\"{reason}\" type=\"INFRA_ERROR\"/>"
                )),
                Verdict::NotApplicable => out.push_str(&format!("<skipped message=\"{reason}\"/>")),
            }
            out.push_str("</testcase>\n");
        }
        out.push_str("</testsuite></testsuites>\n");
        out
    }
}

impl Reporter for JunitReport {
    fn on_event(&mut self, event: &Event) {
        match event {
            Event::RunStarted { target, .. } => self.suite = format!("cetp {target}"),
            Event::CaseFinished {
                case_id,
                title,
                verdict,
                reason,
                baseline,
                duration_ms,
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
                reason: match baseline {
                    Some(b) => format!("known failure ({b}): {reason}"),
                    None => reason.clone(),
                },
                millis: *duration_ms,
            }),
            Event::CheckVerdict {
                check,
                title,
                verdict,
                reason,
                ..
            } => self.rows.push(Row {
                class: "cetp.check",
                id: check.clone(),
                title: title.clone(),
                verdict: *verdict,
                reason: reason.clone(),
                millis: 0,
            }),
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
            cited: vec![],
            verdict: Verdict::Fail,
            reason: "error_message \"<script>&</script>\" \u{1b}[31m\u{0}".into(),
            baseline: None,
            duration_ms: 5,
        });
        let xml = j.render();
        assert!(
            xml.contains("&quot;&lt;script&gt;&amp;&lt;/script&gt;&quot;"),
            "{xml}"
        );
        assert!(!xml.contains('\u{1b}') && !xml.contains('\u{0}'), "{xml}");
        assert!(xml.contains("failures=\"1\""));
    }
}
