//! `summary.md`: a short Markdown summary for a pull-request comment: the
//! counts, the §9 claim, and a table of what needs attention (FAIL, FLAKY,
//! WARN, INFRA_ERROR) with the requirements each finding cites and the
//! command that reproduces it. Every Provider string goes through
//! [`crate::escape::markdown`].

use crate::escape::markdown as md;
use crate::findings::Findings;
use cetp_vectors::advice::fix_for;
use cetp_vectors::event::{Claim, Event, Reporter, Summary, Verdict};
use std::path::PathBuf;

/// Builds `summary.md` from events; writes it on `finish`.
pub struct SummaryMd {
    path: Option<PathBuf>,
    target: String,
    /// The run's other flags a rerun needs (`RunStarted::rerun`).
    rerun: Vec<String>,
    seed: u64,
    run_id: String,
    /// The run's pin hash (`RunPinned`).
    pin: Option<String>,
    /// `--partition` or a merge: which part, or how many parts.
    partition: Option<String>,
    rows: Vec<String>,
    /// Cases NOT_APPLICABLE for the setup: what would judge each.
    unjudged: Vec<String>,
    /// Every finding of each check, and the checks that need attention.
    findings: Findings,
    failed_checks: Vec<String>,
    end: Option<(Summary, Claim, i32)>,
}

impl SummaryMd {
    /// `path`: where to write on finish (None: keep in memory).
    pub fn new(path: Option<PathBuf>) -> Self {
        SummaryMd {
            path,
            target: String::new(),
            rerun: Vec::new(),
            seed: 0,
            run_id: String::new(),
            pin: None,
            partition: None,
            rows: Vec::new(),
            unjudged: Vec::new(),
            findings: Findings::default(),
            failed_checks: Vec::new(),
            end: None,
        }
    }

    fn row(&mut self, id: &str, verdict: Verdict, cited: &[String], reason: &str, replay: bool) {
        if matches!(verdict, Verdict::Pass | Verdict::NotApplicable) {
            return;
        }
        let again = if replay {
            // Escaped as any text (a code span cannot escape a backquote,
            // a control character or a pipe of the table): the line reads
            // back as the shell's once rendered.
            md(
                &crate::replay_command(id, &self.target, self.seed, &self.rerun),
                4000,
            )
        } else {
            String::new()
        };
        self.rows.push(format!(
            "| {} | {} | {} | {} | {} |",
            verdict.as_str(),
            md(id, 40),
            cited.join(", "),
            md(reason, 300),
            again
        ));
    }

    /// The Markdown for the events seen so far.
    pub fn render(&self) -> String {
        let mut out = String::from("## cetp conformance run\n\n");
        out.push_str(&format!(
            "Target `{}`, seed {}, run `{}`.\n\n",
            self.target.replace('`', ""),
            self.seed,
            self.run_id.replace('`', "")
        ));
        if let Some(pin) = &self.pin {
            out.push_str(&format!("Pin `{}`.\n\n", pin.replace('`', "")));
        }
        if let Some(p) = &self.partition {
            out.push_str(&format!("{p}\n\n"));
        }
        if let Some((s, claim, code)) = &self.end {
            out.push_str(&format!(
                "| PASS | FAIL | FLAKY | WARN | N/A | INFRA | exit |\n|---|---|---|---|---|---|---|\n| {} | {} | {} | {} | {} | {} | {code} |\n\n",
                s.pass, s.fail, s.flaky, s.warn, s.not_applicable, s.infra_error
            ));
            if s.not_judged > 0 {
                out.push_str(&format!(
                    "N/A: {} by the spec, {} not judged for the setup.\n\n",
                    s.not_applicable - s.not_judged.min(s.not_applicable),
                    s.not_judged
                ));
            }
            out.push_str(&format!("**Claim:** {}\n\n", md(&claim.statement, 2000)));
            if !claim.fixes.is_empty() {
                out.push_str("To establish it:\n\n");
                for f in &claim.fixes {
                    out.push_str(&format!("- {}\n", md(f, 2000)));
                }
                out.push('\n');
            }
        } else {
            out.push_str("The run did not finish.\n\n");
        }
        if !self.unjudged.is_empty() {
            out.push_str("| not judged for the setup | needs | to judge it |\n|---|---|---|\n");
            for r in &self.unjudged {
                out.push_str(r);
                out.push('\n');
            }
            out.push('\n');
        }
        if self.rows.is_empty() {
            out.push_str("Nothing needs attention.\n");
        } else {
            out.push_str("| verdict | case / check | requirements cited | reason | reproduce |\n|---|---|---|---|---|\n");
            for r in &self.rows {
                out.push_str(r);
                out.push('\n');
            }
        }
        self.render_findings(&mut out);
        out
    }

    /// Every finding of each check that needs attention and found more
    /// than its reason names (bounded, each escaped).
    fn render_findings(&self, out: &mut String) {
        for check in &self.failed_checks {
            let (kept, total) = self.findings.of(check);
            if total < 2 {
                continue;
            }
            out.push_str(&format!(
                "\n### Every finding of {} ({total})\n\n",
                md(check, 40)
            ));
            for f in kept {
                out.push_str(&format!("- {}\n", md(&f.line(), 600)));
            }
            if let Some(more) = self.findings.left_out(check) {
                out.push_str(&format!("- {}\n", md(&more, 200)));
            }
        }
    }
}

impl Reporter for SummaryMd {
    fn on_event(&mut self, event: &Event) {
        match event {
            Event::RunStarted {
                run_id,
                target,
                seed,
                rerun,
                ..
            } => {
                self.run_id = run_id.clone();
                self.target = target.clone();
                self.rerun = rerun.clone();
                self.seed = *seed;
            }
            Event::CaseFinished {
                case_id,
                verdict: Verdict::NotApplicable,
                unjudged: Some(needs),
                ..
            } => self.unjudged.push(format!(
                "| {} | {} | {} |",
                md(case_id, 40),
                md(needs, 200),
                md(&fix_for(needs), 400)
            )),
            Event::CaseFinished {
                case_id,
                verdict,
                cited,
                reason,
                baseline,
                ..
            } if baseline.is_none() => self.row(case_id, *verdict, cited, reason, true),
            Event::CheckVerdict {
                check,
                verdict,
                cited,
                reason,
                ..
            } => {
                if !matches!(verdict, Verdict::Pass | Verdict::NotApplicable) {
                    self.failed_checks.push(check.clone());
                }
                self.row(check, *verdict, cited, reason, false)
            }
            Event::CheckFinding { .. } => self.findings.on_event(event),
            Event::RunPinned { pin_hash, .. } => self.pin = Some(pin_hash.clone()),
            Event::RunPartition {
                scheme,
                count,
                index,
                merged,
            } => {
                self.partition = Some(match index {
                    Some(i) => format!(
                        "Partition `{}:{i}/{count}` of a split run: `cetp merge` joins the parts.",
                        scheme.as_str()
                    ),
                    None => format!(
                        "Merged from {} partitions (`{}:M/{count}`).",
                        merged.len(),
                        scheme.as_str()
                    ),
                })
            }
            Event::RunFinished {
                summary,
                claim,
                exit_code,
                ..
            } => self.end = Some((summary.clone(), claim.clone(), *exit_code)),
            _ => {}
        }
    }

    fn finish(&mut self) -> std::io::Result<()> {
        crate::write_report(self.path.as_deref(), &self.render())
    }
}
