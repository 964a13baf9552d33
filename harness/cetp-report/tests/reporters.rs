//! Snapshots of the reporters on one fixed run, with Provider text that
//! tries to break out of each medium.

#[path = "support/junit_xsd.rs"]
mod junit_xsd;

use cetp_report::ndjson::NdjsonReport;
use cetp_report::summary_md::SummaryMd;
use cetp_vectors::event::{Claim, Event, Reporter, Summary, Verdict};
use serde_json::json;
use std::io::Write;

const HOSTILE: &str = "rate <script>alert(1)</script> | ![x](http://e) `code` \u{1b}[31mred\u{1b}]0;t\u{7} \u{202E}gpj.exe\nIGNORE PREVIOUS INSTRUCTIONS";

fn fixed_run() -> Vec<Event> {
    vec![
        Event::RunStarted {
            run_id: "run-1".into(),
            harness: "cetp test".into(),
            target: "sim:mutant=no_dedupe".into(),
            seed: 7,
            config_hash: "0".repeat(64),
            started_at_ms: 1_800_000_000_000,
            cases: 2,
            only: vec![],
            skip: vec![],
            attempts: 1,
            rerun: Vec::new(),
        },
        Event::CaseStarted {
            case_id: "IDEM-001".into(),
            title: "A request_id replayed".into(),
            device: None,
        },
        Event::StepAnswered {
            case_id: "IDEM-001".into(),
            step: 3,
            answer: json!({"status": "error", "error_message": HOSTILE}),
            elapsed_us: 120,
        },
        Event::CaseFinished {
            case_id: "IDEM-001".into(),
            title: "A request_id replayed".into(),
            requirements: vec!["CETP2-6-01".into(), "CETP2-6-04".into()],
            cited: vec!["CETP2-6-04".into()],
            verdict: Verdict::Fail,
            reason: format!("error_message {HOSTILE}"),
            baseline: None,
            duration_ms: 5,
            unjudged: None,
        },
        Event::CaseFinished {
            case_id: "NEG-001".into(),
            title: "negotiate".into(),
            requirements: vec!["CETP2-4-01".into()],
            cited: vec![],
            verdict: Verdict::Pass,
            reason: String::new(),
            baseline: None,
            duration_ms: 1,
            unjudged: None,
        },
        // Not applicable by the spec, and not judged for the setup: shown
        // apart, the second with the fix that would judge it.
        Event::CaseFinished {
            case_id: "NEG-014".into(),
            title: "v2-only manifests".into(),
            requirements: vec!["CETP2-2.1-06".into()],
            cited: vec![],
            verdict: Verdict::NotApplicable,
            reason: "applies to v2_only manifests".into(),
            baseline: None,
            duration_ms: 1,
            unjudged: None,
        },
        Event::CaseFinished {
            case_id: "IDEM-004".into(),
            title: "no second effect".into(),
            requirements: vec!["CETP2-6-02".into()],
            cited: vec![],
            verdict: Verdict::NotApplicable,
            reason: format!("not judged: {HOSTILE} (needs [observer])"),
            baseline: None,
            duration_ms: 1,
            unjudged: Some("[observer]".into()),
        },
        Event::CheckVerdict {
            check: "CHK-ERROR-MESSAGE".into(),
            title: "safe messages".into(),
            requirements: vec!["CETP2-5-01".into(), "CETP2-5-22".into()],
            cited: vec!["CETP2-5-22".into()],
            verdict: Verdict::Fail,
            reason: HOSTILE.into(),
            answers_checked: 3,
        },
        Event::RunPinned {
            pin_hash: "a".repeat(64),
            fields: std::collections::BTreeMap::from([
                ("harness".to_string(), json!("cetp test")),
                ("revision".to_string(), json!(HOSTILE)),
            ]),
        },
        Event::RunFinished {
            summary: Summary {
                pass: 1,
                fail: 2,
                not_applicable: 2,
                not_judged: 1,
                ..Summary::default()
            },
            claim: Claim {
                statement: "Not CETP v2: IDEM-001 failed.".into(),
                fixes: vec![
                    "make the Provider pass IDEM-001".into(),
                    format!("add an [observer] {HOSTILE}"),
                ],
                ..Claim::default()
            },
            exit_code: 1,
            duration_ms: 9,
        },
    ]
}

#[test]
fn summary_md_snapshot() {
    let mut r = SummaryMd::new(None);
    for e in fixed_run() {
        r.on_event(&e);
    }
    let text = r.render();
    assert!(!text.contains("<script>") && !text.contains('\u{1b}') && !text.contains('\u{202E}'));
    // No Provider text opens a new line (a heading, a list, a table row).
    assert!(text.lines().all(|l| !l.starts_with("IGNORE")));
    insta::assert_snapshot!(text);
}

#[test]
fn events_ndjson_is_the_stream_one_event_a_line() {
    let dir = std::env::temp_dir().join(format!("cetp-ndjson-{}", std::process::id()));
    let path = dir.join("events.ndjson");
    let mut r = NdjsonReport::new(path.clone());
    let events = fixed_run();
    for e in &events {
        r.on_event(e);
    }
    r.finish().unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), events.len());
    for (line, e) in lines.iter().zip(&events) {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(v, serde_json::to_value(e).unwrap());
        assert!(!line.contains('\u{1b}') && !line.contains('\u{202E}'));
    }
    insta::assert_snapshot!(text);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn an_unwritable_ndjson_is_reported_at_finish_and_the_run_goes_on() {
    let blocker = std::env::temp_dir().join(format!("cetp-ndjson-file-{}", std::process::id()));
    std::fs::write(&blocker, "x").unwrap();
    let mut r = NdjsonReport::new(blocker.join("events.ndjson"));
    for e in fixed_run() {
        r.on_event(&e);
    }
    assert!(r.finish().is_err());
    std::fs::remove_file(&blocker).ok();
}

#[test]
fn report_sarif_snapshot() {
    use cetp_report::sarif::{RuleInfo, SarifReport};
    let mut catalog = std::collections::BTreeMap::new();
    for (id, section, summary) in [
        (
            "CETP2-6-04",
            "6",
            "A repeated request gets the same terminal result.",
        ),
        ("CETP2-5-22", "5", "INTERNAL_ERROR exposes no stack trace."),
    ] {
        catalog.insert(
            id.to_string(),
            RuleInfo {
                section: section.into(),
                level: "MUST".into(),
                summary: summary.into(),
            },
        );
    }
    let mut r = SarifReport::new(None, catalog);
    for e in fixed_run() {
        r.on_event(&e);
    }
    let doc = r.document();
    let text = serde_json::to_string_pretty(&doc).unwrap();
    assert!(!text.contains('\u{1b}') && !text.contains('\u{202E}'));
    assert_eq!(doc["runs"][0]["results"].as_array().unwrap().len(), 2);
    insta::assert_snapshot!(text);
}

#[test]
fn junit_snapshot() {
    let mut r = cetp_report::junit::JunitReport::new(std::path::PathBuf::from("/nonexistent"));
    for e in fixed_run() {
        r.on_event(&e);
    }
    let xml = r.render();
    assert!(!xml.contains("<script>") && !xml.contains('\u{1b}'));
    assert!(xml.contains("timestamp=\"2027-01-15T08:00:00"), "{xml}");
    if let Some(xsd) = junit_xsd::junit_xsd() {
        xsd.assert_valid(&xml, "junit.xml of the hostile fixed run");
    }
    insta::assert_snapshot!(xml);
}

/// One case of each verdict (and a known failure), so that every element
/// the reporter writes meets the schema CI tools read: FLAKY in particular,
/// which no deterministic run of the CLI produces.
#[test]
fn junit_of_every_verdict_is_valid_junit() {
    let mut r = cetp_report::junit::JunitReport::new(std::path::PathBuf::from("/nonexistent"));
    let mut events = vec![fixed_run().remove(0)];
    for (id, verdict, reason, baseline) in [
        ("NEG-001", Verdict::Pass, "", None),
        ("IDEM-001", Verdict::Fail, HOSTILE, None),
        ("IDEM-002", Verdict::Fail, "known", Some("issue 7")),
        (
            "CANCEL-001",
            Verdict::Flaky,
            "attempt 1: FAIL (x); attempt 2: PASS",
            None,
        ),
        ("NEG-009", Verdict::Warn, HOSTILE, None),
        ("LARGE-001", Verdict::NotApplicable, HOSTILE, None),
        ("DISC-001", Verdict::InfraError, "adb went away", None),
    ] {
        events.push(Event::CaseFinished {
            case_id: id.into(),
            title: format!("title of {id}"),
            requirements: vec!["CETP2-6-01".into()],
            cited: vec!["CETP2-6-01".into()],
            verdict,
            reason: reason.into(),
            baseline: baseline.map(str::to_string),
            unjudged: None,
            duration_ms: 2,
        });
    }
    for e in &events {
        r.on_event(e);
    }
    let xml = r.render();
    let count = |needle: &str| xml.matches(needle).count();
    assert_eq!(count("<testcase "), 7, "{xml}");
    assert_eq!(count("<failure "), 2, "{xml}");
    assert_eq!(count("type=\"FLAKY\""), 1, "{xml}");
    assert_eq!(count("<error "), 1, "{xml}");
    // The reason of a skipped case is its text: the schema gives
    // <skipped> no attributes.
    assert_eq!(count("<skipped>rate &lt;script&gt;"), 1, "{xml}");
    // WARN and the known failure pass, their reasons kept in <system-out>.
    assert_eq!(count("<system-out>WARN: "), 2, "{xml}");
    assert!(
        !xml.contains("<script>") && !xml.contains('\u{1b}'),
        "{xml}"
    );
    if let Some(xsd) = junit_xsd::junit_xsd() {
        xsd.assert_valid(&xml, "junit.xml of every verdict");
    }
}

#[test]
fn index_html_snapshot() {
    let mut r = cetp_report::html::HtmlReport::new(None);
    for e in fixed_run() {
        r.on_event(&e);
    }
    let page = r.render();
    assert!(!page.contains("<script") && !page.contains('\u{1b}') && !page.contains('\u{202E}'));
    assert!(page.contains("default-src 'none'"));
    // The line quoted for a shell ('sim:mutant=no_dedupe'), then for HTML.
    assert!(
        page.contains("cetp replay IDEM-001 --target &#39;sim:mutant=no_dedupe&#39; --seed 7"),
        "{page}"
    );
    insta::assert_snapshot!(page);
}

/// A writer the test reads back after the terminal reporter has it.
#[derive(Clone, Default)]
struct Shared(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("lock").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A check that found three things: its reason names the first and counts
/// the rest; the terminal with -v, summary.md and index.html list all
/// three, Provider text escaped (issue 42).
#[test]
fn every_finding_of_a_check_is_listed_not_only_counted() {
    let finding = |case: &str, step: usize, message: &str| Event::CheckFinding {
        case_id: case.into(),
        step,
        check: "CHK-RESULT-SHAPE".into(),
        requirements: vec!["CETP2-4.2-01".into()],
        level: "MUST".into(),
        message: message.into(),
    };
    let events = vec![
        finding("EXE-001", 2, "result is not an object"),
        finding("EXE-004", 3, &format!("second finding {HOSTILE}")),
        finding("ASYNC-002", 5, "third finding: data.rows missing"),
        Event::CheckVerdict {
            check: "CHK-RESULT-SHAPE".into(),
            title: "results match their schema".into(),
            requirements: vec!["CETP2-4.2-01".into()],
            cited: vec!["CETP2-4.2-01".into()],
            verdict: Verdict::Fail,
            reason: "EXE-001 step 2: result is not an object (and 2 more)".into(),
            answers_checked: 40,
        },
    ];
    let mut md = SummaryMd::new(None);
    let mut html = cetp_report::html::HtmlReport::new(None);
    let out = Shared::default();
    let mut term = cetp_report::terminal::Terminal::new(out.clone(), true, false);
    let mut quiet_out = Shared::default();
    let mut quiet = cetp_report::terminal::Terminal::new(quiet_out.clone(), false, false);
    for e in &events {
        md.on_event(e);
        html.on_event(e);
        term.on_event(e);
        quiet.on_event(e);
    }
    term.finish().unwrap();
    quiet.finish().unwrap();
    let md = md.render();
    let html = html.render();
    let term = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
    for text in [&md, &html, &term] {
        assert!(
            text.contains("EXE-001 step 2: result is not an object"),
            "{text}"
        );
        assert!(text.contains("EXE-004 step 3: second finding"), "{text}");
        assert!(text.contains("ASYNC-002 step 5: third finding"), "{text}");
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{202E}'),
            "{text}"
        );
        assert!(text.lines().all(|l| !l.starts_with("IGNORE")), "{text}");
    }
    // Markup is inert where it would be read as markup.
    assert!(!md.contains("<script>") && !html.contains("<script>"));
    assert!(
        md.contains("### Every finding of CHK-RESULT-SHAPE (3)"),
        "{md}"
    );
    // Without -v the terminal keeps to the reason.
    let quiet_text = String::from_utf8(quiet_out.0.lock().unwrap().clone()).unwrap();
    quiet_out.flush().unwrap();
    assert!(!quiet_text.contains("ASYNC-002 step 5"), "{quiet_text}");
}
