//! The terminal view: one line per case and check, then the summary and the
//! §9 claim. Provider text is escaped ([`crate::escape::terminal`]).

use crate::escape::terminal as esc;
use cetp_vectors::advice::fix_for;
use cetp_vectors::event::{Claim, Event, Reporter, Summary, Verdict};
use std::io::Write;

/// Prints a run's progress and summary to `W` as the events arrive.
pub struct Terminal<W: Write + Send> {
    out: W,
    /// Print passing cases too (otherwise only what needs attention).
    pub verbose: bool,
    /// Print every step sent and answered (`cetp replay`).
    pub trace: bool,
    /// Colour the verdict marks (the caller decides: `--color`, `NO_COLOR`,
    /// whether stdout is a terminal). Provider text is never coloured: it is
    /// escaped before our own styles are added around it.
    pub color: bool,
    /// A progress bar on stderr with the case being run (a terminal only).
    progress: Option<indicatif::ProgressBar>,
    want_progress: bool,
    /// The run's target and seed, for the command that reproduces a FAIL.
    target: String,
    /// The run's other flags a rerun needs (`RunStarted::rerun`).
    rerun_flags: Vec<String>,
    /// The device of the case running, in a run of several devices: its
    /// FAIL is reproduced there.
    device: Option<String>,
    seed: u64,
    /// The command that reruns one case (`cetp replay CASE`) or, for the
    /// Consumer suite, one scenario (`cetp consumer --only CASE`).
    rerun: Rerun,
    /// Every finding of each check, listed under its verdict with `-v`.
    findings: crate::findings::Findings,
}

#[derive(Clone, Copy)]
enum Rerun {
    Replay,
    Consumer,
}

impl<W: Write + Send> Terminal<W> {
    /// A plain view on `out`, without colour or progress bar; `verbose` and
    /// `trace` as the fields say.
    pub fn new(out: W, verbose: bool, trace: bool) -> Self {
        Terminal {
            out,
            verbose,
            trace,
            color: false,
            progress: None,
            want_progress: false,
            target: String::new(),
            rerun_flags: Vec::new(),
            device: None,
            seed: 0,
            rerun: Rerun::Replay,
            findings: crate::findings::Findings::default(),
        }
    }

    /// Reproduce lines name `cetp consumer --only SCENARIO` (the Consumer
    /// suite) instead of `cetp replay CASE`.
    pub fn for_consumer(mut self) -> Self {
        self.rerun = Rerun::Consumer;
        self
    }

    /// Colour the marks.
    pub fn with_color(mut self, yes: bool) -> Self {
        self.color = yes;
        self
    }

    /// Show a progress bar on stderr while cases run.
    pub fn with_progress(mut self, yes: bool) -> Self {
        self.want_progress = yes;
        self
    }

    fn styled_mark(&self, v: Verdict) -> String {
        if !self.color {
            return mark(v).to_string();
        }
        let style = match v {
            Verdict::Pass => anstyle::AnsiColor::Green.on_default(),
            Verdict::Fail | Verdict::Flaky => anstyle::AnsiColor::Red.on_default().bold(),
            Verdict::Warn => anstyle::AnsiColor::Yellow.on_default(),
            Verdict::NotApplicable => anstyle::Style::new().dimmed(),
            Verdict::InfraError => anstyle::AnsiColor::Magenta.on_default().bold(),
        };
        format!("{style}{}{style:#}", mark(v))
    }

    /// Writes a line, with the progress bar (if any) out of the way.
    fn line(&mut self, text: String) {
        // A closed stdout must not abort the run; reports still get written.
        match &self.progress {
            Some(pb) => pb.suspend(|| {
                let _ = writeln!(self.out, "{text}");
            }),
            None => {
                let _ = writeln!(self.out, "{text}");
            }
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

impl<W: Write + Send> Terminal<W> {
    /// The run's first line; starts the progress bar.
    fn run_started(&mut self, run_id: &str, target: &str, seed: u64, cases: usize) -> String {
        self.target = target.to_string();
        self.seed = seed;
        if self.want_progress && !self.trace {
            let pb = indicatif::ProgressBar::new(cases as u64);
            pb.set_style(
                indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            self.progress = Some(pb);
        }
        format!(
            "cetp: run {run_id} against {} (seed {seed}, {cases} cases)",
            esc(target, 200)
        )
    }

    /// A case's line: shown when it did not pass (or when verbose), with
    /// its known failure, its reason and the command that reruns it.
    fn case_finished(
        &mut self,
        case_id: &str,
        title: &str,
        verdict: Verdict,
        reason: &str,
        baseline: Option<&str>,
        unjudged: Option<&str>,
    ) -> Option<String> {
        if let Some(pb) = &self.progress {
            pb.inc(1);
        }
        if !(self.verbose || self.trace || verdict != Verdict::Pass) {
            return None;
        }
        let known = baseline
            .map(|b| format!(" [known failure: {}]", esc(b, 200)))
            .unwrap_or_default();
        let mut why = reason_line(reason);
        if let Some(needs) = unjudged {
            why.push_str(&format!(
                "\n        to judge it: {}",
                esc(&fix_for(needs), 600)
            ));
        }
        // One line to paste: the case alone, with its wire trace.
        let again =
            if matches!(verdict, Verdict::Fail | Verdict::Flaky | Verdict::Warn) && !self.trace {
                self.reproduce_line(case_id)
            } else {
                String::new()
            };
        Some(format!(
            "{} {case_id} {}{known}{why}{again}",
            self.styled_mark(verdict),
            esc(title, 200)
        ))
    }

    /// The command that reruns one case, whole: a line cut short, or one
    /// without the run's profile, would not rerun it as it ran.
    fn reproduce_line(&self, case_id: &str) -> String {
        let line = match self.rerun {
            Rerun::Replay => crate::replay_command(
                case_id,
                self.device.as_ref().unwrap_or(&self.target),
                self.seed,
                &self.rerun_flags,
            ),
            Rerun::Consumer => {
                let seed = self.seed.to_string();
                let words = [
                    "cetp",
                    "consumer",
                    "--only",
                    case_id,
                    "--target",
                    &self.target,
                ]
                .into_iter()
                .chain(["--seed", seed.as_str()])
                .chain(self.rerun_flags.iter().map(String::as_str));
                crate::escape::shell_words(words)
            }
        };
        format!("\n        reproduce: {}", esc(&line, 4000))
    }

    /// A run-level check's line: shown when it did not pass (or when
    /// verbose).
    fn check_verdict(
        &self,
        check: &str,
        title: &str,
        verdict: Verdict,
        reason: &str,
    ) -> Option<String> {
        if !(self.verbose || verdict != Verdict::Pass) {
            return None;
        }
        let mut text = format!(
            "{} {check} {}{}",
            self.styled_mark(verdict),
            esc(title, 200),
            reason_line(reason)
        );
        // With -v, every finding the reason counts as "(and N more)".
        let (kept, total) = self.findings.of(check);
        if self.verbose && verdict != Verdict::Pass && total > 1 {
            for f in kept {
                text.push_str(&format!("\n      - {}", esc(&f.line(), 600)));
            }
            if let Some(more) = self.findings.left_out(check) {
                text.push_str(&format!("\n      - {more}"));
            }
        }
        Some(text)
    }

    /// The summary, the §9 claim and the exit code; clears the progress bar.
    fn run_finished(
        &mut self,
        summary: &Summary,
        claim: &Claim,
        exit_code: i32,
        duration_ms: u64,
    ) -> String {
        if let Some(pb) = self.progress.take() {
            pb.finish_and_clear();
        }
        let not_judged = if summary.not_judged > 0 {
            format!(
                " ({} by the spec, {} not judged for the setup)",
                summary.not_applicable - summary.not_judged.min(summary.not_applicable),
                summary.not_judged
            )
        } else {
            String::new()
        };
        let mut fixes = String::new();
        if !claim.fixes.is_empty() {
            fixes.push_str("\nto establish it:");
            for f in &claim.fixes {
                fixes.push_str(&format!("\n  - {}", esc(f, 2000)));
            }
        }
        format!(
            "\n{} passed, {} failed, {} flaky, {} warned, {} not applicable{not_judged}, {} infra errors ({:.1} s)\nclaim: {}{fixes}\nexit code {exit_code}",
            summary.pass,
            summary.fail,
            summary.flaky,
            summary.warn,
            summary.not_applicable,
            summary.infra_error,
            duration_ms as f64 / 1000.0,
            esc(&claim.statement, 4000)
        )
    }
}

/// A reason on its own indented line, or nothing.
fn reason_line(reason: &str) -> String {
    if reason.is_empty() {
        String::new()
    } else {
        format!("\n        {}", esc(reason, 600))
    }
}

/// Who answered: the device's hello, the Provider and its manifest.
fn target_line(event: &Event) -> Option<String> {
    let Event::TargetIdentified {
        hello,
        package,
        manifest,
        declared_versions,
        ..
    } = event
    else {
        return None;
    };
    let who = hello
        .as_ref()
        .map(|h| {
            format!(
                "{} uid {} on {} (sdk {})",
                esc(&h.identity_name, 40),
                h.uid,
                esc(&h.model, 60),
                h.sdk_int
            )
        })
        .unwrap_or_else(|| "unidentified device".into());
    Some(format!(
        "target: {} — provider {} — manifest {} {:?}",
        who,
        esc(package.as_deref().unwrap_or("?"), 120),
        esc(manifest, 40),
        declared_versions
    ))
}

/// A request document as the short trace shows it: the JSON view, with
/// each numeric Bundle value's type before it (`"protocol_version":long 2`)
/// where the document records the types (`_types`), since a case may test
/// the type (ENV-001 sends a long where §4.1 asks an int), and the `_types`
/// record itself left out. Not JSON where a type is shown: it is read, not
/// parsed.
pub fn typed_request(request: &serde_json::Value) -> String {
    let (Some(obj), Some(types)) = (
        request.as_object(),
        request.get("_types").and_then(|t| t.as_object()),
    ) else {
        return request.to_string();
    };
    let mut out = String::from("{");
    for (i, (k, v)) in obj.iter().filter(|(k, _)| *k != "_types").enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&serde_json::Value::from(k.as_str()).to_string());
        out.push(':');
        match v.as_object() {
            Some(extras) if k == "extras" => {
                out.push('{');
                for (j, (name, value)) in extras.iter().enumerate() {
                    if j > 0 {
                        out.push(',');
                    }
                    out.push_str(&serde_json::Value::from(name.as_str()).to_string());
                    out.push(':');
                    match types.get(name).and_then(|t| t.as_str()) {
                        Some(t @ ("int" | "long" | "float" | "double")) => {
                            out.push_str(&format!("{t} {value}"))
                        }
                        _ => out.push_str(&value.to_string()),
                    }
                }
                out.push('}');
            }
            _ => out.push_str(&v.to_string()),
        }
    }
    out.push('}');
    out
}

/// The wire trace (`--trace`): each step sent and answered, each finding.
fn trace_line(event: &Event) -> Option<String> {
    match event {
        Event::StepSent {
            step,
            identity,
            op,
            request,
            ..
        } => Some(format!(
            "  -> [{step}] {} {}: {}",
            esc(identity, 8),
            esc(op, 60),
            esc(&typed_request(request), 4000)
        )),
        Event::StepAnswered {
            step,
            answer,
            elapsed_us,
            ..
        } => Some(format!(
            "  <- [{step}] {}µs: {}",
            elapsed_us,
            esc(&answer.to_string(), 4000)
        )),
        Event::CheckFinding {
            step,
            check,
            message,
            ..
        } => Some(format!("  !! [{step}] {check}: {}", esc(message, 400))),
        _ => None,
    }
}

/// The line for a `RunPartition`: a part of a split run, or the runs a
/// merge joined (None for any other event). Kept out of `on_event` so the
/// dispatch stays a table.
fn partition_line(event: &Event) -> Option<String> {
    let Event::RunPartition {
        scheme,
        count,
        index,
        merged,
    } = event
    else {
        return None;
    };
    Some(match index {
        Some(i) => format!(
            "partition {}:{i}/{count}: a part of the cases; `cetp merge` joins the {count} parts",
            scheme.as_str()
        ),
        None => format!(
            "merged {} partitions ({}:1..{count}/{count}): {}",
            merged.len(),
            scheme.as_str(),
            merged
                .iter()
                .map(|m| format!("{} on {}", esc(&m.run_id, 80), esc(&m.target, 80)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    })
}

/// The line for a mid-run notice: a device lost (its cases handed on) or a
/// stale baseline entry (None for any other event).
fn notice_line(event: &Event) -> Option<String> {
    match event {
        Event::DeviceLost {
            device,
            reason,
            handed_back,
        } => Some(format!(
            "LOST  device {}: {}; {} unfinished case(s) handed to the devices left",
            esc(device, 120),
            esc(reason, 400),
            handed_back.len()
        )),
        Event::BaselineStale { id, reason } => Some(format!(
            "STALE baseline entry {}: {}",
            esc(id, 80),
            esc(reason, 200)
        )),
        _ => None,
    }
}

impl<W: Write + Send> Reporter for Terminal<W> {
    fn on_event(&mut self, event: &Event) {
        let text: Option<String> = match event {
            Event::RunStarted {
                run_id,
                target,
                seed,
                cases,
                rerun,
                ..
            } => {
                self.rerun_flags = rerun.clone();
                Some(self.run_started(run_id, target, *seed, *cases))
            }
            Event::RunPartition { .. } => partition_line(event),
            Event::TargetIdentified { .. } => target_line(event),
            Event::CaseStarted {
                case_id,
                title,
                device,
            } => {
                self.device = device.clone();
                if let Some(pb) = &self.progress {
                    pb.set_message(format!("{} {}", esc(case_id, 40), esc(title, 60)));
                }
                None
            }
            Event::StepSent { .. } | Event::StepAnswered { .. } | Event::CheckFinding { .. }
                if self.trace =>
            {
                self.findings.on_event(event);
                trace_line(event)
            }
            Event::CheckFinding { .. } => {
                self.findings.on_event(event);
                None
            }
            Event::CaseFinished {
                case_id,
                title,
                verdict,
                reason,
                baseline,
                unjudged,
                ..
            } => self.case_finished(
                case_id,
                title,
                *verdict,
                reason,
                baseline.as_deref(),
                unjudged.as_deref(),
            ),
            Event::CheckVerdict {
                check,
                title,
                verdict,
                reason,
                ..
            } => self.check_verdict(check, title, *verdict, reason),
            Event::DeviceLost { .. } | Event::BaselineStale { .. } => notice_line(event),
            Event::RunFinished {
                summary,
                claim,
                exit_code,
                duration_ms,
            } => Some(self.run_finished(summary, claim, *exit_code, *duration_ms)),
            _ => None,
        };
        if let Some(t) = text {
            self.line(t);
        }
    }

    fn finish(&mut self) -> std::io::Result<()> {
        if let Some(pb) = self.progress.take() {
            pb.finish_and_clear();
        }
        self.out.flush()
    }
}
