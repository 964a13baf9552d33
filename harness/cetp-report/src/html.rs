//! `index.html`: one self-contained page a vendor can hand to a partner. It
//! needs no network and runs no script: a Content-Security-Policy forbids
//! both, styles are inline, the chart is inline SVG, and cases expand with
//! `<details>`. It shows the summary by verdict and by spec section, the §9
//! claim, and every case with its steps, its wire trace and the command
//! that reproduces it. Every Provider string is HTML-escaped (after the
//! terminal escaping of controls and bidi overrides) and capped.

use crate::escape::terminal;
use cetp_vectors::event::{Claim, Event, Reporter, Summary, Verdict};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

/// Text for HTML: controls and bidi overrides shown as `\u{..}`, capped,
/// then markup characters as entities.
pub fn html(s: &str, max_chars: usize) -> String {
    let t = terminal(s, max_chars);
    let mut out = String::with_capacity(t.len() + 16);
    for c in t.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

struct CaseView {
    id: String,
    title: String,
    kind: &'static str,
    verdict: Verdict,
    reason: String,
    requirements: Vec<String>,
    cited: Vec<String>,
    trace: Vec<String>,
    /// A NOT_APPLICABLE the setup caused: what would judge it.
    unjudged: Option<String>,
}

impl CaseView {
    /// The label shown: a case the setup kept from judging is NOT_JUDGED,
    /// apart from a NOT_APPLICABLE by the spec.
    fn label(&self) -> &'static str {
        match (&self.unjudged, self.verdict) {
            (Some(_), Verdict::NotApplicable) => "NOT_JUDGED",
            (_, v) => v.as_str(),
        }
    }
}

/// Builds `index.html` from events; writes it on `finish`.
pub struct HtmlReport {
    path: Option<PathBuf>,
    run_id: String,
    target: String,
    /// The run's other flags a rerun needs (`RunStarted::rerun`).
    rerun: Vec<String>,
    seed: u64,
    harness: String,
    traces: BTreeMap<String, Vec<String>>,
    cases: Vec<CaseView>,
    end: Option<(Summary, Claim, i32)>,
    /// The run's pin hash (`RunPinned`).
    pin: Option<String>,
    /// A part of a split run, or a merge of the parts (`RunPartition`).
    partition: Option<String>,
    /// Every finding of each check (a check's reason names the first).
    findings: crate::findings::Findings,
}

/// Longest Provider value shown in a trace line.
const TRACE_CAP: usize = 2000;
/// Trace lines kept per case.
const TRACE_LINES: usize = 400;

impl HtmlReport {
    /// `path`: where to write on finish (None: keep in memory).
    pub fn new(path: Option<PathBuf>) -> Self {
        HtmlReport {
            path,
            run_id: String::new(),
            target: String::new(),
            rerun: Vec::new(),
            seed: 0,
            harness: String::new(),
            traces: BTreeMap::new(),
            cases: Vec::new(),
            findings: crate::findings::Findings::default(),
            end: None,
            pin: None,
            partition: None,
        }
    }

    fn trace(&mut self, case: &str, line: String) {
        let t = self.traces.entry(case.to_string()).or_default();
        if t.len() < TRACE_LINES {
            t.push(line);
        } else if t.len() == TRACE_LINES {
            t.push("… (trace cut)".into());
        }
    }

    /// The page for the events seen so far.
    pub fn render(&self) -> String {
        let mut o = String::new();
        self.render_head(&mut o);
        self.render_outcome(&mut o);
        self.render_sections(&mut o);
        o.push_str("</table>\n<h2>Cases and checks</h2>\n");
        for c in &self.cases {
            self.render_case(&mut o, c);
        }
        o.push_str("</body></html>\n");
        o
    }

    /// The document head (a CSP that allows no script or network, the
    /// style sheet) and the run's heading line.
    fn render_head(&self, o: &mut String) {
        o.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n");
        // No script, no network, whatever a Provider's text turns into.
        o.push_str("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\n");
        let _ = writeln!(o, "<title>cetp report {}</title>", html(&self.run_id, 80));
        o.push_str("<style>body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.2em .6em;text-align:left}code,pre{font:12px ui-monospace,monospace}pre{background:#f6f6f6;padding:.5em;overflow-x:auto;white-space:pre-wrap;word-break:break-all}details{margin:.2em 0}summary{cursor:pointer}.v{font-weight:bold;display:inline-block;min-width:10em;white-space:nowrap;overflow-wrap:normal}.PASS{color:#1a7f37}.FAIL,.FLAKY{color:#cf222e}.WARN{color:#9a6700}.NOT_APPLICABLE{color:#777}.NOT_JUDGED{color:#bc4c00}.fixes{margin:.4em 0 0 1.2em;padding:0}.INFRA_ERROR{color:#8250df}.claim{padding:.6em;border:2px solid #888;max-width:60em}p,summary{overflow-wrap:anywhere}</style>\n</head><body>\n");
        let _ = writeln!(            o,            "<h1>cetp conformance report</h1>\n<p>Run <code>{}</code> of <code>{}</code> against <code>{}</code>, seed {}{}.</p>",
            html(&self.run_id, 80),
            html(&self.harness, 80),
            html(&self.target, 200),
            self.seed,
            match &self.pin {
                Some(p) => format!(", pin <code>{}</code>", html(p, 80)),
                None => String::new(),
            }
        );
        if let Some(p) = &self.partition {
            let _ = writeln!(o, "<p>{}</p>", html(p, 2000));
        }
    }

    /// The §9 claim, the chart by verdict and the exit code, or that the
    /// run did not finish.
    fn render_outcome(&self, o: &mut String) {
        match &self.end {
            Some((s, claim, code)) => {
                let _ = write!(
                    o,
                    "<div class=\"claim\"><b>Claim (§9):</b> {}",
                    html(&claim.statement, 4000)
                );
                if !claim.fixes.is_empty() {
                    o.push_str("<br><b>To establish it:</b><ul class=\"fixes\">");
                    for f in &claim.fixes {
                        let _ = write!(o, "<li>{}</li>", html(f, 4000));
                    }
                    o.push_str("</ul>");
                }
                o.push_str("</div>\n");
                let judged_na = s.not_applicable - s.not_judged.min(s.not_applicable);
                let rows = [
                    ("PASS", s.pass),
                    ("FAIL", s.fail),
                    ("FLAKY", s.flaky),
                    ("WARN", s.warn),
                    ("NOT_APPLICABLE", judged_na),
                    ("NOT_JUDGED", s.not_judged),
                    ("INFRA_ERROR", s.infra_error),
                ];
                o.push_str("<h2>By verdict</h2>\n");
                o.push_str(&chart(&rows));
                let _ = writeln!(o, "<p>exit code {code}</p>");
            }
            None => o.push_str("<p><b>The run did not finish.</b></p>\n"),
        }
    }

    /// The table of verdicts by spec section: the section of each case's
    /// first requirement, in section order (left open for the caller).
    fn render_sections(&self, o: &mut String) {
        let mut sections: BTreeMap<String, BTreeMap<&'static str, usize>> = BTreeMap::new();
        for c in &self.cases {
            let sec = c
                .requirements
                .first()
                .and_then(|r| r.strip_prefix("CETP2-"))
                .and_then(|r| r.rsplit_once('-'))
                .map(|(s, _)| s.to_string())
                .unwrap_or_else(|| "?".into());
            *sections
                .entry(sec)
                .or_default()
                .entry(c.label())
                .or_default() += 1;
        }
        o.push_str("<h2>By spec section</h2>\n<table><tr><th>§</th><th>PASS</th><th>FAIL</th><th>FLAKY</th><th>WARN</th><th>N/A</th><th>NOT JUDGED</th><th>INFRA</th></tr>\n");
        let mut keys: Vec<&String> = sections.keys().collect();
        keys.sort_by_key(|k| {
            k.split('.')
                .map(|n| n.parse::<u32>().unwrap_or(u32::MAX))
                .collect::<Vec<_>>()
        });
        for sec in keys {
            let m = &sections[sec];
            let n = |v: &str| m.get(v).copied().unwrap_or(0);
            let _ = writeln!(
                o,
                "<tr><td>§{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                html(sec, 20),
                n("PASS"),
                n("FAIL"),
                n("FLAKY"),
                n("WARN"),
                n("NOT_APPLICABLE"),
                n("NOT_JUDGED"),
                n("INFRA_ERROR")
            );
        }
    }

    /// One case or check, open when it failed: its requirements, reason,
    /// the command that reruns a case, and its wire trace.
    fn render_case(&self, o: &mut String, c: &CaseView) {
        let v = c.label();
        let open = if matches!(c.verdict, Verdict::Fail | Verdict::Flaky) {
            " open"
        } else {
            ""
        };
        let _ = writeln!(
            o,
            "<details{open}><summary><span class=\"v {v}\">{v}</span> <b>{}</b> {}</summary>",
            html(&c.id, 40),
            html(&c.title, 300)
        );
        let _ = write!(
            o,
            "<p>Requirements: {}",
            html(&c.requirements.join(", "), 600)
        );
        if !c.cited.is_empty() {
            let _ = write!(o, "; the finding cites {}", html(&c.cited.join(", "), 600));
        }
        o.push_str("</p>\n");
        if !c.reason.is_empty() {
            let _ = writeln!(o, "<p>{}</p>", html(&c.reason, 4000));
        }
        if c.kind == "check" {
            self.render_findings(o, &c.id);
        }
        if let Some(needs) = &c.unjudged {
            let _ = writeln!(
                o,
                "<p><b>To judge it:</b> {}</p>",
                html(&cetp_vectors::advice::fix_for(needs), 4000)
            );
        }
        if c.kind == "case" {
            let line = crate::replay_command(&c.id, &self.target, self.seed, &self.rerun);
            let _ = writeln!(o, "<p>Reproduce: <code>{}</code></p>", html(&line, 4000));
        }
        if !c.trace.is_empty() {
            o.push_str("<details><summary>steps and wire trace</summary><pre>");
            for l in &c.trace {
                o.push_str(&html(l, TRACE_CAP + 200));
                o.push('\n');
            }
            o.push_str("</pre></details>\n");
        }
        o.push_str("</details>\n");
    }
}

impl HtmlReport {
    /// Every finding of a check that found more than its reason names
    /// (bounded, each escaped).
    fn render_findings(&self, o: &mut String, check: &str) {
        let (kept, total) = self.findings.of(check);
        if total < 2 {
            return;
        }
        let _ = writeln!(o, "<p>Every finding ({total}):</p>\n<ul>");
        for f in kept {
            let _ = writeln!(o, "<li>{}</li>", html(&f.line(), 4000));
        }
        if let Some(more) = self.findings.left_out(check) {
            let _ = writeln!(o, "<li>{}</li>", html(&more, 400));
        }
        o.push_str("</ul>\n");
    }
}

/// A horizontal bar chart as inline SVG.
fn chart(rows: &[(&str, usize)]) -> String {
    let max = rows.iter().map(|r| r.1).max().unwrap_or(0).max(1);
    let colour = |v: &str| match v {
        "PASS" => "#1a7f37",
        "FAIL" | "FLAKY" => "#cf222e",
        "WARN" => "#9a6700",
        "INFRA_ERROR" => "#8250df",
        "NOT_JUDGED" => "#bc4c00",
        _ => "#999",
    };
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"520\" height=\"{}\" role=\"img\" aria-label=\"verdicts\">",
        rows.len() * 24 + 4
    );
    for (i, (v, n)) in rows.iter().enumerate() {
        let y = i * 24 + 2;
        let w = 300 * n / max;
        let _ = write!(
            s,
            "<text x=\"0\" y=\"{}\" font-size=\"12\">{v}</text><rect x=\"130\" y=\"{y}\" width=\"{w}\" height=\"18\" fill=\"{}\"/><text x=\"{}\" y=\"{}\" font-size=\"12\">{n}</text>",
            y + 14,
            colour(v),
            136 + w,
            y + 14
        );
    }
    s.push_str("</svg>\n");
    s
}

/// The handlers of [`Reporter::on_event`], one per family of events, so
/// that the dispatch reads as a table and each family's bookkeeping stands
/// on its own.
impl HtmlReport {
    /// The run's own events (start, pin, partition, end): the page's header
    /// and outcome.
    fn on_run_event(&mut self, event: &Event) {
        match event {
            Event::RunStarted {
                run_id,
                harness,
                target,
                seed,
                rerun,
                ..
            } => {
                self.run_id = run_id.clone();
                self.harness = harness.clone();
                self.target = target.clone();
                self.rerun = rerun.clone();
                self.seed = *seed;
            }
            Event::RunPinned { pin_hash, .. } => self.pin = Some(pin_hash.clone()),
            Event::RunPartition { .. } => self.partition = partition_text(event),
            Event::RunFinished {
                summary,
                claim,
                exit_code,
                ..
            } => self.end = Some((summary.clone(), claim.clone(), *exit_code)),
            _ => {}
        }
    }

    /// A step's request, answer or finding: a line of its case's wire trace
    /// (a finding is also kept for its check).
    fn on_trace_event(&mut self, event: &Event) {
        match event {
            Event::StepSent {
                case_id,
                step,
                identity,
                op,
                request,
            } => {
                let r = crate::terminal::typed_request(request);
                self.trace(case_id, format!("-> [{step}] {identity} {op}: {}", cap(&r)));
            }
            Event::StepAnswered {
                case_id,
                step,
                answer,
                elapsed_us,
            } => {
                let a = answer.to_string();
                self.trace(case_id, format!("<- [{step}] {elapsed_us}µs: {}", cap(&a)));
            }
            Event::CheckFinding {
                case_id,
                step,
                check,
                message,
                ..
            } => {
                self.findings.on_event(event);
                self.trace(case_id, format!("!! [{step}] {check}: {}", cap(message)))
            }
            _ => {}
        }
    }

    /// A case's or a check's verdict: a row of the page, a case taking the
    /// trace gathered for it.
    fn on_verdict_event(&mut self, event: &Event) {
        match event {
            Event::CaseFinished {
                case_id,
                title,
                requirements,
                cited,
                verdict,
                reason,
                unjudged,
                ..
            } => {
                let trace = self.traces.remove(case_id).unwrap_or_default();
                self.cases.push(CaseView {
                    id: case_id.clone(),
                    title: title.clone(),
                    kind: "case",
                    verdict: *verdict,
                    reason: reason.clone(),
                    requirements: requirements.clone(),
                    cited: cited.clone(),
                    trace,
                    unjudged: unjudged.clone(),
                });
            }
            Event::CheckVerdict {
                check,
                title,
                requirements,
                cited,
                verdict,
                reason,
                ..
            } => self.cases.push(CaseView {
                id: check.clone(),
                title: title.clone(),
                kind: "check",
                verdict: *verdict,
                reason: reason.clone(),
                requirements: requirements.clone(),
                cited: cited.clone(),
                trace: Vec::new(),
                unjudged: None,
            }),
            _ => {}
        }
    }
}

/// The page's sentence for a `RunPartition`: a part of a split run, or the
/// parts a merge joined (None for any other event).
fn partition_text(event: &Event) -> Option<String> {
    let Event::RunPartition {
        scheme,
        count,
        index,
        merged,
    } = event
    else {
        return None;
    };
    let runs: Vec<String> = merged
        .iter()
        .map(|m| format!("{} ({} on {})", m.index, m.run_id, m.target))
        .collect();
    Some(match index {
        Some(i) => format!(
            "Partition {}:{i}/{count} of a split run: a part claims nothing; cetp merge joins the parts.",
            scheme.as_str()
        ),
        None => format!(
            "Merged from {count} partitions by {}: {}.",
            scheme.as_str(),
            runs.join(", ")
        ),
    })
}

impl Reporter for HtmlReport {
    fn on_event(&mut self, event: &Event) {
        match event {
            Event::RunStarted { .. }
            | Event::RunPinned { .. }
            | Event::RunPartition { .. }
            | Event::RunFinished { .. } => self.on_run_event(event),
            Event::StepSent { .. } | Event::StepAnswered { .. } | Event::CheckFinding { .. } => {
                self.on_trace_event(event)
            }
            Event::CaseFinished { .. } | Event::CheckVerdict { .. } => self.on_verdict_event(event),
            _ => {}
        }
    }

    fn finish(&mut self) -> std::io::Result<()> {
        crate::write_report(self.path.as_deref(), &self.render())
    }
}

/// A trace value cut to [`TRACE_CAP`] characters (a 1 MB string stays a line).
fn cap(s: &str) -> String {
    if s.chars().count() <= TRACE_CAP {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(TRACE_CAP).collect();
        t.push_str(&format!("… ({} bytes)", s.len()));
        t
    }
}
