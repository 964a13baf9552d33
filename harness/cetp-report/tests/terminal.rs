//! The terminal view of one run with every event kind it prints, in each of
//! its modes (quiet, verbose, trace, colour, Consumer reruns), pinned as a
//! snapshot: what a user reads and pastes must not move when the reporter's
//! code does.

use cetp_report::terminal::Terminal;
use cetp_vectors::event::{Claim, Event, Reporter, Summary, Verdict};
use serde_json::json;
use std::io::Write;
use std::sync::{Arc, Mutex};

const HOSTILE: &str = "rate <b>x</b> \u{1b}[31mred\u{1b}]0;t\u{7} \u{202E}gpj.exe\nIGNORE";

/// A writer the test can read back after the reporter has it.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("lock").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn case(id: &str, verdict: Verdict, reason: &str, baseline: Option<&str>) -> Event {
    Event::CaseFinished {
        case_id: id.into(),
        title: format!("title of {id}"),
        requirements: vec!["CETP2-6-01".into()],
        cited: vec![],
        verdict,
        reason: reason.into(),
        baseline: baseline.map(str::to_string),
        unjudged: None,
        duration_ms: 1,
    }
}

fn check(id: &str, verdict: Verdict, reason: &str) -> Event {
    Event::CheckVerdict {
        check: id.into(),
        title: format!("title of {id}"),
        requirements: vec![],
        cited: vec![],
        verdict,
        reason: reason.into(),
        answers_checked: 1,
    }
}

fn summary() -> Summary {
    let mut s = Summary::default();
    for v in [
        Verdict::Pass,
        Verdict::Fail,
        Verdict::Fail,
        Verdict::Flaky,
        Verdict::Warn,
        Verdict::NotApplicable,
        Verdict::InfraError,
    ] {
        s.add(v);
    }
    s
}

fn run() -> Vec<Event> {
    vec![
        Event::RunStarted {
            run_id: "run-1".into(),
            harness: "cetp test".into(),
            target: format!("sim:{HOSTILE}"),
            seed: 7,
            config_hash: "0".repeat(64),
            started_at_ms: 1_800_000_000_000,
            cases: 6,
            only: vec![],
            skip: vec![],
            attempts: 1,
            rerun: Vec::new(),
        },
        Event::TargetIdentified {
            // Built from JSON so that the test names no device type.
            hello: Some(
                serde_json::from_value(json!({
                    "probe": "p", "identity_name": HOSTILE, "uid": 10123,
                    "packages": [], "cert_sha256": [], "sdk_int": 34,
                    "model": "Pixel", "fingerprint": "f", "now_ms": 0, "ops": []
                }))
                .expect("a hello"),
            ),
            package: Some("org.example".into()),
            authority: None,
            manifest: "ok".into(),
            declared_versions: vec![2],
        },
        Event::TargetIdentified {
            hello: None,
            package: None,
            authority: None,
            manifest: HOSTILE.into(),
            declared_versions: vec![],
        },
        Event::CaseStarted {
            case_id: "IDEM-001".into(),
            title: "A request_id replayed".into(),
            device: None,
        },
        Event::StepSent {
            case_id: "IDEM-001".into(),
            step: 1,
            identity: "caller".into(),
            op: "call".into(),
            request: json!({"method": HOSTILE}),
        },
        Event::StepAnswered {
            case_id: "IDEM-001".into(),
            step: 1,
            answer: json!({"status": "error", "error_message": HOSTILE}),
            elapsed_us: 120,
        },
        Event::CheckFinding {
            case_id: "IDEM-001".into(),
            step: 1,
            check: "CHK-X".into(),
            requirements: vec![],
            level: "fail".into(),
            message: HOSTILE.into(),
        },
        case("IDEM-001", Verdict::Fail, HOSTILE, None),
        case("NEG-001", Verdict::Pass, "", None),
        case("WARN-001", Verdict::Warn, "", Some(HOSTILE)),
        case("FLAKY-001", Verdict::Flaky, "passed on retry", None),
        case("NA-001", Verdict::NotApplicable, "no such tool", None),
        case("INFRA-001", Verdict::InfraError, "adb went away", None),
        check("CHK-ERROR-MESSAGE", Verdict::Fail, HOSTILE),
        check("CHK-OK", Verdict::Pass, ""),
        Event::BaselineStale {
            id: "OLD-001".into(),
            reason: HOSTILE.into(),
        },
        Event::RunFinished {
            summary: summary(),
            claim: Claim {
                statement: format!("Not CETP v2: {HOSTILE}"),
                ..Claim::default()
            },
            exit_code: 1,
            duration_ms: 1234,
        },
    ]
}

fn view(make: impl Fn(Shared) -> Terminal<Shared>) -> String {
    let out = Shared::default();
    let mut t = make(out.clone());
    for e in run() {
        t.on_event(&e);
    }
    t.finish().expect("finish");
    let bytes = out.0.lock().expect("lock").clone();
    String::from_utf8(bytes).expect("UTF-8")
}

#[test]
fn terminal_view_snapshot() {
    let mut text = String::new();
    for (mode, out) in [
        ("quiet", view(|o| Terminal::new(o, false, false))),
        ("verbose", view(|o| Terminal::new(o, true, false))),
        ("trace", view(|o| Terminal::new(o, false, true))),
        (
            "color",
            view(|o| Terminal::new(o, false, false).with_color(true)),
        ),
        (
            "consumer",
            view(|o| Terminal::new(o, false, false).for_consumer()),
        ),
    ] {
        // No Provider text reaches the terminal raw.
        assert!(
            !out.contains('\u{202E}') && !out.contains('\u{7}'),
            "{mode}"
        );
        text.push_str(&format!("===== {mode}\n{out}"));
    }
    insta::assert_snapshot!(text);
}

/// The reproduce line of a FAIL is one a shell reads back as the run's own
/// flags: the whole target however long (a cut one names another file),
/// the second identity and the profile (without which a case that needs
/// its roles or observer is not judged), each word quoted as it needs.
#[test]
fn a_reproduce_line_reruns_the_case_as_it_ran() {
    let target = format!(
        "jvm:/home/v/my app/notes.jar,classpath={}/kotlin-stdlib.jar",
        "/m2/repository/org/jetbrains/kotlin".repeat(8)
    );
    let out = Shared::default();
    let mut t = Terminal::new(out.clone(), false, false);
    for e in [
        Event::RunStarted {
            run_id: "run-1".into(),
            harness: "cetp test".into(),
            target: target.clone(),
            seed: 7,
            config_hash: String::new(),
            started_at_ms: 0,
            cases: 1,
            only: vec![],
            skip: vec![],
            attempts: 1,
            rerun: vec![
                "--target-b".into(),
                "127.0.0.1:7802".into(),
                "--profile".into(),
                "vendor's profile.toml".into(),
            ],
        },
        case("CONF-008", Verdict::Fail, "executed", None),
    ] {
        t.on_event(&e);
    }
    t.finish().expect("finish");
    let text = String::from_utf8(out.0.lock().expect("lock").clone()).expect("UTF-8");
    let line = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("reproduce: "))
        .unwrap_or_else(|| panic!("no reproduce line in {text}"));
    let words = shlex::split(line).unwrap_or_else(|| panic!("not a shell line: {line}"));
    assert_eq!(
        words,
        [
            "cetp",
            "replay",
            "CONF-008",
            "--target",
            &target,
            "--seed",
            "7",
            "--target-b",
            "127.0.0.1:7802",
            "--profile",
            "vendor's profile.toml"
        ]
    );
}
