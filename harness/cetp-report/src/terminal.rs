//! The terminal view: one line per case and check, then the summary and the
//! §9 claim. Provider text is escaped ([`crate::escape::terminal`]).

use crate::escape::terminal as esc;
use cetp_conformance::event::{Event, Reporter, Verdict};
use std::io::Write;

pub struct Terminal<W: Write + Send> {
    out: W,
    /// Print passing cases too (otherwise only what needs attention).
    pub verbose: bool,
    /// Print every step sent and answered (`cetp replay`).
    pub trace: bool,
    /// The run's target and seed, for the command that reproduces a FAIL.
    target: String,
    seed: u64,
}

impl<W: Write + Send> Terminal<W> {
    pub fn new(out: W, verbose: bool, trace: bool) -> Self {
        Terminal {
            out,
            verbose,
            trace,
            target: String::new(),
            seed: 0,
        }
    }
}

fn mark(v: Verdict) -> &'static str {
    match v {
        Verdict::Pass => "PASS ",
        Verdict::Fail => "FAIL ",
        Verdict::Warn => "WARN ",
        Verdict::NotApplicable => "N/A  ",
        Verdict::InfraError => "INFRA",
        Verdict::Flaky => "FLAKY",
    }
}

impl<W: Write + Send> Reporter for Terminal<W> {
    fn on_event(&mut self, event: &Event) {
        // A closed stdout must not abort the run; reports still get written.
        let _ = match event {
            Event::RunStarted { run_id, target, seed, cases, .. } => {
                self.target = target.clone();
                self.seed = *seed;
                writeln!(self.out, "cetp: run {run_id} against {} (seed {seed}, {cases} cases)", esc(target, 200))
            }
            Event::TargetIdentified { hello, package, manifest, declared_versions, .. } => {
                let who = hello
                    .as_ref()
                    .map(|h| format!("{} uid {} on {} (sdk {})", esc(&h.identity_name, 40), h.uid, esc(&h.model, 60), h.sdk_int))
                    .unwrap_or_else(|| "unidentified device".into());
                writeln!(
                    self.out,
                    "target: {} — provider {} — manifest {} {:?}",
                    who,
                    esc(package.as_deref().unwrap_or("?"), 120),
                    esc(manifest, 40),
                    declared_versions
                )
            }
            Event::StepSent { step, identity, op, request, .. } if self.trace => writeln!(
                self.out,
                "  -> [{step}] {} {}: {}",
                esc(identity, 8),
                esc(op, 60),
                esc(&request.to_string(), 4000)
            ),
            Event::StepAnswered { step, answer, elapsed_us, .. } if self.trace => writeln!(
                self.out,
                "  <- [{step}] {}µs: {}",
                elapsed_us,
                esc(&answer.to_string(), 4000)
            ),
            Event::CheckFinding { step, check, message, .. } if self.trace => {
                writeln!(self.out, "  !! [{step}] {check}: {}", esc(message, 400))
            }
            Event::CaseFinished { case_id, title, verdict, reason, baseline, .. } => {
                if self.verbose || self.trace || *verdict != Verdict::Pass {
                    let known = baseline.as_ref().map(|b| format!(" [known failure: {}]", esc(b, 200))).unwrap_or_default();
                    let why = if reason.is_empty() { String::new() } else { format!("\n        {}", esc(reason, 600)) };
                    // One line to paste: the case alone, with its wire trace.
                    let again = if matches!(verdict, Verdict::Fail | Verdict::Flaky | Verdict::Warn) && !self.trace {
                        format!("\n        reproduce: cetp replay {} --target {} --seed {}", esc(case_id, 40), esc(&self.target, 200), self.seed)
                    } else {
                        String::new()
                    };
                    writeln!(self.out, "{} {case_id} {}{known}{why}{again}", mark(*verdict), esc(title, 200))
                } else {
                    Ok(())
                }
            }
            Event::CheckVerdict { check, title, verdict, reason, .. } => {
                if self.verbose || *verdict != Verdict::Pass {
                    let why = if reason.is_empty() { String::new() } else { format!("\n        {}", esc(reason, 600)) };
                    writeln!(self.out, "{} {check} {}{why}", mark(*verdict), esc(title, 200))
                } else {
                    Ok(())
                }
            }
            Event::BaselineStale { id, reason } => {
                writeln!(self.out, "STALE baseline entry {}: {}", esc(id, 80), esc(reason, 200))
            }
            Event::RunFinished { summary, claim, exit_code, duration_ms } => writeln!(
                self.out,
                "\n{} passed, {} failed, {} flaky, {} warned, {} not applicable, {} infra errors ({:.1} s)\nclaim: {}\nexit code {exit_code}",
                summary.pass,
                summary.fail,
                summary.flaky,
                summary.warn,
                summary.not_applicable,
                summary.infra_error,
                *duration_ms as f64 / 1000.0,
                claim.statement
            ),
            _ => Ok(()),
        };
    }

    fn finish(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}
