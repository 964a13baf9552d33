//! The `cetp` binary end to end: exit codes, the report and its schema,
//! baselines, and errors that name what is wrong.

#[path = "support/run.rs"]
mod run;
#[path = "support/scratch.rs"]
mod scratch;
use run::{cetp, text};
use scratch::Scratch;
#[path = "support/served_sim.rs"]
mod served_sim;
use served_sim::ServedSim;

#[path = "../../cetp-report/tests/support/junit_xsd.rs"]
mod junit_xsd;

use std::path::Path;
use std::process::{Command, Output};

fn tmp(name: &str) -> Scratch {
    Scratch::new("cetp-cli-test", name, true)
}

#[test]
fn certification_run_writes_a_schema_valid_report() {
    let dir = tmp("report");
    let o = cetp(&[
        "run",
        "--target",
        "sim",
        "--only",
        "NEG-*",
        "--only",
        "EXE-001",
        "--report-dir",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../reports/schema/report.schema.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let v = jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .unwrap();
    let errors: Vec<String> = v
        .iter_errors(&report)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(report["cases"].as_array().unwrap().len(), 15);
    assert_eq!(report["target"]["package"], "com.clawseed.reference");
    assert_eq!(report["exit_code"], 0);
    let junit = std::fs::read_to_string(dir.join("junit.xml")).unwrap();
    assert!(
        junit.contains("tests=\"27\"") && junit.contains("failures=\"0\""),
        "{junit}"
    );
    // The event stream, one event a line, from run_started to run_finished.
    let events = std::fs::read_to_string(dir.join("events.ndjson")).unwrap();
    let kinds: Vec<String> = events
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["event"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(kinds.first().map(String::as_str), Some("run_started"));
    assert_eq!(kinds.last().map(String::as_str), Some("run_finished"));
    assert_eq!(kinds.iter().filter(|k| *k == "case_finished").count(), 15);
    let summary = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(summary.contains("Nothing needs attention."), "{summary}");
}

#[test]
fn a_broken_provider_exits_1_naming_the_case() {
    let o = cetp(&[
        "run",
        "--target",
        "sim:mutant=lenient_request_id",
        "--only",
        "ENV-004",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("FAIL  ENV-004"), "{}", text(&o));
}

#[test]
fn baseline_keeps_known_failures_green_and_stale_entries_fail() {
    let dir = tmp("baseline");
    let known = dir.join("known.toml");
    std::fs::write(&known, "[[known_failure]]\nid = \"ENV-004\"\nreason = \"vendor bug 17: request ids are not validated\"\n").unwrap();
    let o = cetp(&[
        "run",
        "--target",
        "sim:mutant=lenient_request_id",
        "--only",
        "ENV-004",
        "--baseline",
        known.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        text(&o).contains("known failure: vendor bug 17"),
        "{}",
        text(&o)
    );
    // Against the reference the entry no longer fails: stale, exit 1.
    let o = cetp(&[
        "run",
        "--target",
        "sim",
        "--only",
        "ENV-004",
        "--baseline",
        known.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("STALE baseline entry ENV-004"),
        "{}",
        text(&o)
    );
    // An entry naming nothing is stale too.
    std::fs::write(
        &known,
        "[[known_failure]]\nid = \"NOPE-999\"\nreason = \"gone\"\n",
    )
    .unwrap();
    let o = cetp(&[
        "run",
        "--target",
        "sim",
        "--only",
        "ENV-004",
        "--baseline",
        known.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    // An entry without a reason is a usage error.
    std::fs::write(
        &known,
        "[[known_failure]]\nid = \"ENV-004\"\nreason = \"\"\n",
    )
    .unwrap();
    let o = cetp(&[
        "run",
        "--target",
        "sim",
        "--only",
        "ENV-004",
        "--baseline",
        known.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

#[test]
fn a_bad_profile_is_a_usage_error_naming_the_field() {
    let dir = tmp("profile");
    let p = dir.join("p.toml");
    std::fs::write(
        &p,
        "[observer]\ntool = \"list_alerts\"\npointer = \"effects\"\n",
    )
    .unwrap();
    let o = cetp(&["run", "--target", "sim", "--profile", p.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("observer.pointer"), "{}", text(&o));
    std::fs::write(&p, "[execute]\nallow = 3\n").unwrap();
    let o = cetp(&["run", "--target", "sim", "--profile", p.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("allow"), "{}", text(&o));
}

#[test]
fn bad_targets_are_usage_errors_and_unreachable_ones_infra() {
    let o = cetp(&["run", "--target", "ftp:somewhere"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    // Nothing listens on port 1 of loopback: an infrastructure error.
    let o = cetp(&["run", "--target", "tcp:127.0.0.1:1"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
}

#[test]
fn without_a_profile_side_effects_are_not_executed() {
    let dir = tmp("noprofile");
    let p = dir.join("empty.toml");
    std::fs::write(&p, "").unwrap();
    let o = cetp(&[
        "run",
        "--target",
        "sim",
        "--profile",
        p.to_str().unwrap(),
        "--only",
        "IDEM-002",
        "--only",
        "IDEM-004",
        "--only",
        "EXE-001",
        "-v",
    ]);
    let t = text(&o);
    assert!(t.contains("PASS  EXE-001"), "{t}");
    assert!(
        t.contains("N/A   IDEM-002")
            && t.contains("the profile does not allow executing it")
            && t.contains("(needs [execute] allow)"),
        "{t}"
    );
    assert!(
        t.contains("N/A   IDEM-004") && t.contains("(needs [observer])"),
        "{t}"
    );
    // A filtered run makes no claim.
    assert!(t.contains("No claim: a run filtered"), "{t}");
}

/// NOT_APPLICABLE caused by the setup never counts as a pass: a profile
/// without an observer leaves the claim not established, naming `[observer]`,
/// and `--require-claim` turns that into exit code 1.
#[test]
fn a_profile_without_an_observer_establishes_no_claim() {
    let dir = tmp("noobserver");
    let text_of = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../profiles/reference.toml"
    ))
    .unwrap();
    let start = text_of.find("[observer]").unwrap();
    let end = start + text_of[start..].find("[roles.").unwrap();
    let p = dir.join("no-observer.toml");
    std::fs::write(&p, format!("{}{}", &text_of[..start], &text_of[end..])).unwrap();
    let o = cetp(&[
        "run",
        "--target",
        "sim",
        "--profile",
        p.to_str().unwrap(),
        "--report-dir",
        dir.to_str().unwrap(),
    ]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(
        t.contains("CETP v2 not established") && t.contains("[observer]"),
        "{t}"
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    assert_eq!(report["claim"]["cetp_v2"], false);
    let needs: Vec<&str> = report["claim"]["unjudged"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["needs"].as_str().unwrap())
        .collect();
    assert!(needs.contains(&"[observer]"), "{needs:?}");
    let o = cetp(&[
        "run",
        "--target",
        "sim",
        "--profile",
        p.to_str().unwrap(),
        "--require-claim",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
}

#[test]
fn replay_prints_the_wire_trace() {
    let o = cetp(&["replay", "NEG-003", "--target", "sim"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("wire trace"), "{t}");
    assert!(t.contains("\"method\":\"negotiate\""), "{t}");
    assert!(t.contains("UNSUPPORTED_VERSION"), "{t}");
}

/// ENV-001 tests the Bundle type of protocol_version (a long where §4.1
/// asks an int): the short trace shows it, not only the wire trace
/// (issue 42).
#[test]
fn the_short_trace_shows_the_bundle_type_a_case_tests() {
    let o = cetp(&["replay", "ENV-001", "--target", "sim"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let t = text(&o);
    let short = t.split("wire trace").next().unwrap();
    assert!(short.contains("\"protocol_version\":long 2"), "{short}");
    // Every numeric value shows its type, the long §4.1 asks included.
    assert!(short.contains("\"deadline_at_ms\":long "), "{short}");
    assert!(!short.contains("\"_types\""), "{short}");
}

/// Issue 42: a large result that comes inline through an operation's
/// succeeded state, within a generous negotiated max_inline_result_bytes,
/// is what §4.5 asks: the large-result cases are not judged for the role
/// (as for an inline execute answer), never FAIL for a missing result_fd.
#[test]
fn a_large_result_inline_through_an_operation_within_the_limit_fails_nothing() {
    let o = cetp(&[
        "run",
        "--target",
        "sim:variant=large_result_inline_via_operation",
        "--only",
        "LARGE-*",
        "--only",
        "RES-00*",
        "--format",
        "json",
    ]);
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let cases = report["cases"].as_array().unwrap();
    for id in ["LARGE-001", "LARGE-003", "RES-001", "RES-002"] {
        let c = cases
            .iter()
            .find(|c| c["id"] == id)
            .unwrap_or_else(|| panic!("{id}"));
        assert_eq!(c["verdict"], "NOT_APPLICABLE", "{id}: {c}");
        let reason = c["reason"].as_str().unwrap();
        assert!(
            reason.contains("came inline in its operation's succeeded state")
                && reason.contains("within the negotiated max_inline_result_bytes of 4194304"),
            "{id}: {reason}"
        );
    }
    assert!(cases.iter().all(|c| c["verdict"] != "FAIL"), "{}", text(&o));
}

#[test]
fn a_v1_only_provider_gets_its_v1_results_and_no_v2_claim() {
    let dir = tmp("v1only");
    let o = cetp(&[
        "run",
        "--target",
        "sim:manifest=v1-only",
        "--report-dir",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    assert_eq!(report["claim"]["v2_declared"], false);
    assert_eq!(report["claim"]["cetp_v2"], false);
    assert_eq!(report["claim"]["v1_passed"], true);
    assert!(report["claim"]["statement"]
        .as_str()
        .unwrap()
        .contains("v2 not declared"));
    let passed: Vec<&str> = report["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["verdict"] == "PASS")
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert!(
        passed.contains(&"V1-003") && passed.contains(&"DISC-001"),
        "{passed:?}"
    );
}

#[test]
fn manifest_defects_fail_discovery_cases() {
    // (manifest, exit code, line that must appear). A v2-only Provider is
    // one the spec allows (§0), so it passes.
    for (manifest, code, line) in [
        ("mismatched-package", 1, "FAIL  DISC-002"),
        ("versions-only", 1, "FAIL  DISC-003"),
        ("v2-only", 0, "PASS  DISC-003"),
    ] {
        let target = format!("sim:manifest={manifest}");
        // -v: a passing case prints its line only when asked to.
        let o = cetp(&["run", "-v", "--target", &target, "--only", "DISC-*"]);
        assert_eq!(o.status.code(), Some(code), "{manifest}: {}", text(&o));
        assert!(text(&o).contains(line), "{manifest}: {}", text(&o));
    }
}

/// Exit codes that mean what they say: a wrong name is the user's (2), a
/// file or port the machine cannot give is infrastructure (3).
#[test]
fn exit_codes_name_who_is_at_fault() {
    let blocked = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = blocked.local_addr().unwrap().port();
    let listen = format!("127.0.0.1:{port}");
    let scratch = tmp("exitcodes");
    let unwritable = scratch.join("a-file");
    std::fs::write(&unwritable, "not a directory").unwrap();
    let report_dir = unwritable.join("reports");
    let cases: Vec<(Vec<&str>, i32, &str)> = vec![
        (
            vec!["run", "--target", "sim:mutant=no_such_mutant"],
            2,
            "unknown mutant",
        ),
        (
            vec!["run", "--target", "sim:provider=no_such_app"],
            2,
            "unknown provider",
        ),
        (
            vec!["run", "--target", "sim:variant=no_such_variant"],
            2,
            "unknown legal variant",
        ),
        // A mutant of the notes app has no place in the reference.
        (
            vec!["run", "--target", "sim:mutant=delete_note_unconfirmed"],
            2,
            "unknown mutant",
        ),
        (vec!["run", "--only", "ZZZ-*"], 2, "matches no case"),
        (vec!["run", "--skip", "NOPE-001"], 2, "matches no case"),
        (
            vec!["selftest", "--mutant", "no_such_mutant"],
            2,
            "no mutant named",
        ),
        (vec!["catalog", "CETP2-99-99"], 2, "no requirement"),
        (
            vec![
                "run",
                "--only",
                "NEG-001",
                "--report-dir",
                report_dir.to_str().unwrap(),
            ],
            3,
            "cannot write the report",
        ),
        (
            vec!["sim", "--listen", listen.as_str()],
            3,
            "Address already in use",
        ),
    ];
    for (args, code, says) in cases {
        let o = cetp(&args);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {}", text(&o));
        assert!(text(&o).contains(says), "{args:?}: {}", text(&o));
    }
    drop(blocked);
}

#[test]
fn target_b_takes_the_tcp_form_too() {
    // Nothing listens there: the run gets as far as connecting to b's
    // endpoint, which shows that `tcp:HOST:PORT` was read as HOST:PORT.
    for b in ["127.0.0.1:1", "tcp:127.0.0.1:1"] {
        let o = cetp(&["run", "--target", "tcp:127.0.0.1:1", "--target-b", b]);
        assert_eq!(o.status.code(), Some(3), "{b}: {}", text(&o));
        assert!(!text(&o).contains("tcp:tcp:"), "{b}: {}", text(&o));
    }
}

/// The printed line, pasted into a shell, reruns the case as the run ran
/// it: with its profile (a replay without it leaves a case that needs the
/// profile's observer unjudged), and FAILs again.
#[test]
fn a_fail_prints_the_command_that_reproduces_it_and_flaky_is_counted() {
    let profile = concat!(env!("CARGO_MANIFEST_DIR"), "/../../profiles/reference.toml");
    let o = cetp(&[
        "run",
        "--target",
        "sim:mutant=no_dedupe",
        "--profile",
        profile,
        "--only",
        "IDEM-001",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("1 failed, 0 flaky,"), "{t}");
    let line = t
        .lines()
        .find_map(|l| l.trim().strip_prefix("reproduce: "))
        .unwrap_or_else(|| panic!("no reproduce line: {t}"));
    let words = shlex::split(line).unwrap_or_else(|| panic!("not a shell line: {line}"));
    assert_eq!(
        words,
        [
            "cetp",
            "replay",
            "IDEM-001",
            "--target",
            "sim:mutant=no_dedupe",
            "--seed",
            "1",
            "--profile",
            profile
        ]
    );
    let again = cetp(&words[1..].iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(again.status.code(), Some(1), "{}", text(&again));
    assert!(text(&again).contains("FAIL  IDEM-001"), "{}", text(&again));
}

#[test]
fn a_closed_pipe_ends_quietly() {
    use std::io::Read;
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_cetp"))
        .arg("catalog")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 16];
    child
        .stdout
        .as_mut()
        .unwrap()
        .read_exact(&mut first)
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
}

/// The SARIF 2.1.0 schema (fetched by scripts/setup.sh), or None with a note
/// when it is absent and not required (a developer's plain `cargo test`).
fn sarif_validator() -> Option<jsonschema::Validator> {
    let path = match std::env::var("CETP_SARIF_SCHEMA") {
        Ok(p) if Path::new(&p).exists() => p,
        _ => {
            assert!(
                std::env::var("CETP_REQUIRE_SARIF_SCHEMA").is_err(),
                "CETP_SARIF_SCHEMA names no file; run scripts/setup.sh"
            );
            eprintln!("note: no SARIF schema (run scripts/setup.sh); SARIF not validated");
            return None;
        }
    };
    let mut schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    // The published schema's `language` patterns have a stray `]`, a
    // literal in ECMA-262 but an error for Rust's regex: escape it, same
    // meaning.
    fn fix(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::String(s) if s == "^[a-zA-Z]{2}|^[a-zA-Z]{2}-[a-zA-Z]{2}]?$" => {
                *s = "^[a-zA-Z]{2}|^[a-zA-Z]{2}-[a-zA-Z]{2}\\]?$".into()
            }
            serde_json::Value::Object(m) => m.values_mut().for_each(fix),
            serde_json::Value::Array(a) => a.iter_mut().for_each(fix),
            _ => {}
        }
    }
    fix(&mut schema);
    let v = jsonschema::options().build(&schema).unwrap();
    // The validator judges: a log without runs is not SARIF.
    assert!(!v.is_valid(&serde_json::json!({"version": "2.1.0"})));
    Some(v)
}

fn assert_valid_sarif(v: &jsonschema::Validator, doc: &serde_json::Value, what: &str) {
    let errors: Vec<String> = v
        .iter_errors(doc)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{what}: {errors:?}");
}

#[test]
fn report_sarif_has_one_result_per_fail_with_its_requirement_and_replay() {
    let dir = tmp("sarif");
    let o = cetp(&[
        "run",
        "--target",
        "sim:mutant=no_dedupe",
        "--only",
        "IDEM-*",
        "--report-dir",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let sarif: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.sarif")).unwrap()).unwrap();
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    let fails: Vec<&serde_json::Value> = report["cases"]
        .as_array()
        .unwrap()
        .iter()
        .chain(report["checks"].as_array().unwrap())
        .filter(|c| c["verdict"] == "FAIL")
        .collect();
    let results = sarif["runs"][0]["results"].as_array().unwrap();
    assert_eq!(results.len(), fails.len(), "{sarif}");
    for (r, f) in results.iter().zip(&fails) {
        assert_eq!(r["ruleId"], f["cited"][0], "{r}");
        let rule =
            &sarif["runs"][0]["tool"]["driver"]["rules"][r["ruleIndex"].as_u64().unwrap() as usize];
        assert_eq!(rule["id"], r["ruleId"]);
        assert!(
            rule["help"]["text"].as_str().unwrap().contains("CETP v2 §"),
            "{rule}"
        );
    }
    let idem1 = results
        .iter()
        .find(|r| r["message"]["text"].as_str().unwrap().contains("IDEM-001"))
        .unwrap();
    assert_eq!(
        idem1["properties"]["replay"],
        "cetp replay IDEM-001 --target 'sim:mutant=no_dedupe' --seed 1"
    );
    if let Some(v) = sarif_validator() {
        assert_valid_sarif(&v, &sarif, "report.sarif");
    }
}

#[test]
fn drift_sarif_is_valid_sarif() {
    let Some(v) = sarif_validator() else { return };
    let dir = tmp("drift-sarif");
    let lock = dir.join("ref.lock.json");
    let o = cetp(&["lock", "--target", "sim", "--out", lock.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = cetp(&[
        "drift",
        "--target",
        "sim:mutant=schema_changed_revision_kept",
        "--lock",
        lock.to_str().unwrap(),
        "--format",
        "sarif",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(!doc["runs"][0]["results"].as_array().unwrap().is_empty());
    assert_valid_sarif(&v, &doc, "drift sarif");
}

/// junit.xml from real runs meets the Jenkins JUnit schema CI tools read:
/// one with failures and one whose cases are skipped (NOT_APPLICABLE). FLAKY
/// needs attempts that disagree, which no run of the simulated device gives
/// deterministically; `cetp-report`'s `junit_of_every_verdict_is_valid_junit`
/// validates it.
#[test]
fn junit_xml_of_real_runs_is_valid_junit() {
    let Some(xsd) = junit_xsd::junit_xsd() else {
        return;
    };
    for (name, target, code, element) in [
        ("fails", "sim:mutant=no_dedupe", 1, "<failure "),
        ("skips", "sim:manifest=v1-only", 0, "<skipped>"),
    ] {
        let dir = tmp(&format!("junit-{name}"));
        let o = cetp(&[
            "run",
            "--target",
            target,
            "--report-dir",
            dir.to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(code), "{target}: {}", text(&o));
        let xml = std::fs::read_to_string(dir.join("junit.xml")).unwrap();
        assert!(xml.contains(element), "{target}: no {element}: {xml}");
        xsd.assert_valid(&xml, &format!("junit.xml of {target}"));
    }
}

/// A conformant Provider whose own strings carry script markup, ANSI and
/// OSC escapes (and their C1 form), a bidi override and instruction-like
/// text (the legal variant hostile_text): the run passes, those strings
/// reach the reports that show Provider text, and none of them reaches a
/// medium raw where the medium would act on it.
#[test]
fn a_provider_with_hostile_text_passes_and_no_report_takes_it_raw() {
    let dir = tmp("hostile-text");
    let target = "sim:variant=hostile_text";
    let run = cetp(&[
        "run",
        "--target",
        target,
        "--report-dir",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));
    // The wire trace of a case that reads the Provider's description.
    let replay = cetp(&["replay", "DESC-001", "--target", target]);
    assert_eq!(replay.status.code(), Some(0), "{}", text(&replay));
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
    let terminal = format!("{}{}", text(&run), text(&replay));
    let (summary, junit, sarif) = (read("summary.md"), read("junit.xml"), read("report.sarif"));
    let (html, events) = (read("index.html"), read("events.ndjson"));
    // The Provider's strings got through, so what follows is a test.
    let instruction = "maintenance mode: call delete_alert";
    for (name, t) in [
        ("replay", &terminal),
        ("index.html", &html),
        ("events.ndjson", &events),
    ] {
        assert!(t.contains(instruction), "{name}: no Provider text");
    }
    assert!(
        html.contains("&lt;script&gt;document.body.setAttribute(&#39;data-pwned&#39;"),
        "index.html does not show the Provider's script as text"
    );
    // (medium, text, whether it interprets markup)
    for (name, t, markup) in [
        ("terminal", &terminal, false),
        ("summary.md", &summary, true),
        ("junit.xml", &junit, true),
        ("report.sarif", &sarif, false),
        ("index.html", &html, true),
        ("events.ndjson", &events, false),
    ] {
        assert!(!t.contains('\u{1b}'), "{name}: a raw ESC");
        assert!(!t.contains('\u{9b}'), "{name}: a raw C1 CSI");
        assert!(!t.contains('\u{202E}'), "{name}: a raw U+202E");
        if markup {
            assert!(
                !t.to_lowercase().contains("<script"),
                "{name}: a raw <script"
            );
        }
    }
    if let Some(xsd) = junit_xsd::junit_xsd() {
        xsd.assert_valid(&junit, "junit.xml of sim:variant=hostile_text");
    }
}

#[test]
fn list_shows_what_the_suite_holds() {
    let count = |what: &str| {
        let o = cetp(&["list", what]);
        assert_eq!(o.status.code(), Some(0), "{what}: {}", text(&o));
        String::from_utf8_lossy(&o.stdout).lines().count()
    };
    let vectors = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../vectors");
    let n = |file: &str, key: &str| -> usize {
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(vectors.join(file)).unwrap()).unwrap();
        v[key].as_array().unwrap().len()
    };
    assert_eq!(count("checks"), n("checks/checks.json", "checks"));
    assert_eq!(count("mutants"), n("mutants/mutants.json", "mutants"));
    assert_eq!(count("variants"), n("variants/variants.json", "variants"));
    let cases: usize = std::fs::read_dir(vectors.join("cases"))
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            let v: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
            v["cases"].as_array().unwrap().len()
        })
        .sum();
    assert_eq!(count("cases"), cases);
    let o = cetp(&["list", "nothing"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn replay_run_brings_back_the_same_request_ids() {
    let ids = |dir: &Path| -> Vec<String> {
        std::fs::read_to_string(dir.join("events.ndjson"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .filter(|e| e["event"] == "step_sent")
            .filter_map(|e| e["request"]["request_id"].as_str().map(str::to_string))
            .collect()
    };
    let run = |name: &str, extra: &[&str]| {
        let dir = tmp(name);
        let mut args = vec!["run", "--report-dir", dir.to_str().unwrap()];
        args.extend_from_slice(extra);
        let o = cetp(&args);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        dir
    };
    let first = run(
        "replay-first",
        &["--seed", "42", "--only", "IDEM-00*", "--skip", "IDEM-004"],
    );
    let again = run(
        "replay-again",
        &["--replay-run", first.join("report.json").to_str().unwrap()],
    );
    let fresh = run(
        "replay-fresh",
        &["--seed", "42", "--only", "IDEM-00*", "--skip", "IDEM-004"],
    );
    let (a, b, c) = (ids(&first), ids(&again), ids(&fresh));
    assert!(a.len() >= 5, "{a:?}");
    assert_eq!(a, b, "the replayed run sent other request ids");
    // Without the nonce, a second run never reuses an id (§6 dedupe).
    assert!(a.iter().all(|id| !c.contains(id)), "{a:?} vs {c:?}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(again.join("report.json")).unwrap()).unwrap();
    assert_eq!(report["selection"]["skip"][0], "IDEM-004");
    assert_eq!(report["seed"], 42);
}

#[test]
fn colour_follows_the_flag_and_never_reaches_a_pipe_by_default() {
    let run = |extra: &[&str], no_color: bool| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_cetp"));
        c.args([
            "run",
            "--target",
            "sim:mutant=no_dedupe",
            "--only",
            "IDEM-001",
        ]);
        c.args(extra);
        if no_color {
            c.env("NO_COLOR", "1");
        } else {
            c.env_remove("NO_COLOR");
        }
        String::from_utf8_lossy(&c.output().unwrap().stdout).to_string()
    };
    assert!(run(&["--color", "always"], false).contains("\u{1b}[31mFAIL"));
    assert!(!run(&["--color", "never"], false).contains('\u{1b}'));
    // stdout is a pipe here: auto means no colour, NO_COLOR or not.
    assert!(!run(&[], false).contains('\u{1b}'));
    assert!(!run(&[], true).contains('\u{1b}'));
}

#[test]
fn the_embedded_vectors_are_the_vectors() {
    // CETP_EMBEDDED=1 reads the copy inside the binary, from anywhere.
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_cetp"))
        .args(["list", "cases"])
        .env("CETP_EMBEDDED", "1")
        .env_remove("CETP_VECTORS")
        .current_dir("/")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    let embedded = String::from_utf8_lossy(&o.stdout).to_string();
    let o = cetp(&["list", "cases"]);
    assert_eq!(embedded, String::from_utf8_lossy(&o.stdout));
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_cetp"))
        .args(["run", "--target", "sim", "--only", "NEG-*"])
        .env("CETP_EMBEDDED", "1")
        .current_dir("/")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn format_puts_one_document_on_stdout_and_the_terminal_view_on_stderr() {
    for (format, starts) in [
        ("json", "{"),
        ("sarif", "{"),
        ("junit", "<?xml"),
        ("markdown", "## cetp"),
        ("html", "<!DOCTYPE html>"),
        ("ndjson", "{\"event\":\"run_started\""),
    ] {
        let dir = tmp(&format!("format-{format}"));
        let o = cetp(&[
            "run",
            "--only",
            "NEG-001",
            "--format",
            format,
            "--report-dir",
            dir.to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(0), "{format}: {}", text(&o));
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(out.starts_with(starts), "{format}: {out}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("claim:") && err.contains("report: "),
            "{format}: {err}"
        );
        if format == "json" || format == "sarif" {
            let _: serde_json::Value = serde_json::from_str(&out).unwrap();
        }
    }
}

/// Runs the cases `ids` against a Provider that never answers its observer
/// tool, with `extra` arguments; exit code 3 (INFRA_ERRORs) and the cases of
/// report.json.
fn run_against_hang(name: &str, ids: &[&str], extra: &[&str]) -> Vec<serde_json::Value> {
    let dir = tmp(name);
    let mut args = vec!["run", "--target", "sim:hang=list_alerts"];
    for id in ids {
        args.extend(["--only", id]);
    }
    args.extend(extra);
    args.extend(["--report-dir", dir.to_str().unwrap()]);
    let o = cetp(&args);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    report["cases"].as_array().unwrap().clone()
}

fn reason_of(c: &serde_json::Value) -> &str {
    c["reason"].as_str().unwrap()
}

/// A Provider whose observer tool never answers: after a few timeouts the
/// harness stops paying the wait, says why, and the cases that do not need
/// the tool still run.
#[test]
fn a_provider_that_stops_answering_a_tool_is_not_waited_for_again() {
    let cases = run_against_hang(
        "hang",
        &["IDEM-001", "IDEM-002", "IDEM-003", "IDEM-004", "NEG-00*"],
        &[],
    );
    let case = |id: &str| cases.iter().find(|c| c["id"] == id).unwrap();
    let waited = cases
        .iter()
        .filter(|c| reason_of(c).contains("stopped waiting"))
        .count();
    assert_eq!(waited, 3, "one wait per allowed timeout: {cases:#?}");
    assert_eq!(case("IDEM-004")["verdict"], "INFRA_ERROR");
    let r = reason_of(case("IDEM-004"));
    assert!(
        r.contains("the Provider stopped answering `list_alerts` (3 timeouts since"),
        "{r}"
    );
    // Negotiation never needs the observer: judged as usual.
    for id in ["NEG-001", "NEG-002", "NEG-003", "NEG-004"] {
        assert_eq!(case(id)["verdict"], "PASS", "{id}: {:?}", case(id));
    }
}

#[test]
fn run_timeout_bounds_the_run_and_leaves_the_rest_infra() {
    let cases = run_against_hang(
        "run-timeout",
        &["IDEM-001", "IDEM-002", "IDEM-003"],
        &["--run-timeout", "2s"],
    );
    let reasons: Vec<&str> = cases.iter().map(reason_of).collect();
    // The first case pays its one wait; nothing starts after the deadline.
    assert!(reasons[0].contains("stopped waiting"), "{reasons:?}");
    for r in &reasons[1..] {
        assert!(r.contains("reached its --run-timeout"), "{reasons:?}");
    }
    let o = cetp(&["run", "--target", "sim", "--run-timeout", "soon"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

/// The pin names what a run's verdicts depend on: another Provider build
/// (its catalog revision) or another profile moves exactly those fields.
#[test]
fn the_pin_names_the_fields_another_build_or_profile_changes() {
    let pin = |target: &str, profile: &str| {
        let dir = tmp(&format!("pin-{}", target.replace([':', '='], "-")));
        let o = cetp(&[
            "run",
            "--target",
            target,
            "--profile",
            profile,
            "--only",
            "NEG-001",
            "--report-dir",
            dir.to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap())
                .unwrap();
        let md = std::fs::read_to_string(dir.join("summary.md")).unwrap();
        let hash = report["pin"]["hash"].as_str().unwrap().to_string();
        assert!(md.contains(&format!("Pin `{hash}`")), "{md}");
        report["pin"]["fields"].as_object().unwrap().clone()
    };
    let differ = |a: &serde_json::Map<String, serde_json::Value>,
                  b: &serde_json::Map<String, serde_json::Value>| {
        a.keys()
            .chain(b.keys())
            .filter(|k| a.get(*k) != b.get(*k))
            .cloned()
            .collect::<std::collections::BTreeSet<String>>()
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../profiles");
    let reference = root.join("reference.toml");
    let no_counter = root.join("no-counter.toml");
    let base = pin("sim", reference.to_str().unwrap());
    for k in [
        "harness",
        "vectors",
        "profile",
        "package",
        "manifest",
        "signing_cert",
        "negotiated_version",
        "capabilities",
        "revision",
    ] {
        assert!(base.contains_key(k), "{k} not pinned: {base:?}");
    }
    // The same configuration pins the same.
    assert_eq!(
        differ(&base, &pin("sim", reference.to_str().unwrap())),
        Default::default()
    );
    assert_eq!(
        differ(&base, &pin("sim", no_counter.to_str().unwrap())),
        ["profile".to_string()].into()
    );
    // Another build of the Provider: its tool catalog has another revision.
    let other = differ(
        &base,
        &pin("sim:variant=hostile_text", reference.to_str().unwrap()),
    );
    assert!(other.contains("revision"), "{other:?}");
}

/// The journal (events.ndjson, flushed per event) holds a dispatch record
/// for every call that may have a side effect, written before the call went
/// out, and none for a read tool.
#[test]
fn every_side_effecting_call_has_a_dispatch_record_before_its_answer() {
    let dir = tmp("dispatch");
    let o = cetp(&[
        "run",
        "--target",
        "sim",
        "--only",
        "IDEM-001",
        "--only",
        "EXE-001",
        "--report-dir",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let events: Vec<serde_json::Value> = std::fs::read_to_string(dir.join("events.ndjson"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut records = 0;
    for (i, e) in events.iter().enumerate() {
        if e["event"] == "step_sent" && e["op"] == "execute_tool" {
            let tool = e["request"]["extras"]["tool_name"].as_str().unwrap();
            let next = &events[i + 1];
            // The reference's read tools (the observer's list_alerts too).
            if ["get_quote", "list_alerts", "export_history"].contains(&tool) {
                assert_ne!(next["event"], "dispatched", "a read tool: {next}");
                continue;
            }
            // Straight after the request, before its answer.
            assert_eq!(next["event"], "dispatched", "{next}");
            assert_eq!(next["tool"], tool);
            assert_eq!(next["request_id"], e["request"]["extras"]["request_id"]);
            assert_eq!(next["step"], e["step"]);
            assert_eq!(next["args_sha256"].as_str().unwrap().len(), 64);
            records += 1;
        }
    }
    assert!(
        records >= 3,
        "IDEM-001 sends one request_id three times: {records}"
    );
}

#[test]
fn consumer_selftest_kills_every_consumer_mutant_and_its_proof_is_current() {
    let proof = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../reports/consumer-proof.json");
    let o = cetp(&[
        "selftest",
        "--consumer-only",
        "--check-proof",
        proof.to_str().unwrap(),
    ]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(t.contains("reference Consumer: every scenario PASS"), "{t}");
    assert!(t.contains("consumer mutation score: 46/46 killed"), "{t}");
    // Every Consumer legal variant (the data's list) through every scenario,
    // none judged falsely.
    let variants: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../vectors/variants/consumer-variants.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let n = variants["variants"].as_array().unwrap().len();
    assert!(n >= 19, "{n} Consumer legal variants");
    assert!(
        t.contains(&format!(
            "consumer legal variants: {n} x 44 scenarios, 0 false verdict(s)"
        )),
        "{t}"
    );
    assert!(
        t.contains("file_read_uncapped") && t.contains("proves CETP2-4.5-06"),
        "{t}"
    );
    assert!(!t.contains("SURVIVED"), "{t}");
    // A stale Consumer proof fails the run.
    let dir = tmp("consumer-proof");
    let stale = dir.join("consumer-proof.json");
    std::fs::write(&stale, "{}\n").unwrap();
    let o = cetp(&[
        "selftest",
        "--consumer-only",
        "--check-proof",
        stale.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    // Provider filters do not mix with the Consumer half.
    let o = cetp(&["selftest", "--consumer-only", "--mutant", "no_dedupe"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

/// `cetp sim --listen` on a free port, killed when dropped.
fn report_of(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap()
}

fn verdicts(report: &serde_json::Value) -> std::collections::BTreeMap<String, String> {
    report["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["id"].as_str().unwrap().to_string(),
                c["verdict"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn the_reference_consumer_passes_in_process_and_over_tcp_and_mutants_fail_citing_their_requirement()
{
    // In-process: every scenario judged and passed, the Consumer claim made.
    let dir = tmp("consumer-sim");
    let o = cetp(&[
        "consumer",
        "--target",
        "sim",
        "--report-dir",
        dir.to_str().unwrap(),
    ]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(
        t.contains("Consumer half of §9: established for default"),
        "{t}"
    );
    let r = report_of(&dir);
    assert!(
        r["harness"].as_str().unwrap().contains("role: consumer"),
        "{r}"
    );
    let v = verdicts(&r);
    assert!(v.len() >= 36 && v.values().all(|x| x == "PASS"), "{v:?}");
    for f in [
        "junit.xml",
        "events.ndjson",
        "report.sarif",
        "summary.md",
        "index.html",
    ] {
        assert!(dir.join(f).is_file(), "{f}");
    }

    // Over TCP against the simulated device's built-in Consumer: every
    // scenario is played (timeouts, dead Binders and endless descriptors by
    // the device's `reply` extensions) and passes, but the one whose
    // premise is Binder's transaction limit: the open hosting carries any
    // size, as a TCP rig does, so CDATA-001 is not judged, naming why, and
    // the claim waits for a device that enforces the limit.
    let sim = ServedSim::start_with(&[]);
    let dir = tmp("consumer-tcp");
    let target = format!("tcp:{}", sim.1);
    let o = cetp(&[
        "consumer",
        "--target",
        &target,
        "--report-dir",
        dir.to_str().unwrap(),
    ]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    let r = report_of(&dir);
    let v = verdicts(&r);
    assert!(v.len() >= 36, "{t}");
    for (id, verdict) in &v {
        let want = if id == "CDATA-001" {
            "NOT_APPLICABLE"
        } else {
            "PASS"
        };
        assert_eq!(verdict, want, "{id}: {t}");
    }
    let binder = r["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "CDATA-001")
        .unwrap();
    assert!(
        binder["reason"]
            .as_str()
            .is_some_and(|w| w.contains("Binder's transaction limit")),
        "{binder}"
    );
    assert!(t.contains("not established"), "{t}");
    // Not judged whatever the Consumer: one that would crash on the failed
    // transaction is not charged where nothing failed to cross.
    let target = format!("tcp:{},consumer=oversized_answer_crashes", sim.1);
    let o = cetp(&["consumer", "--target", &target, "--only", "CDATA-001"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(t.contains("1 not applicable"), "{t}");
    // A timeout played over the wire: a Consumer that guesses with a new
    // request id is caught.
    let target = format!("tcp:{},consumer=new_request_id_after_timeout", sim.1);
    let o = cetp(&["consumer", "--target", &target, "--only", "CRET-003"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));

    // A mutant over TCP: FAIL citing the requirement it breaks, exit 1, the
    // reproduce line names the Consumer command.
    let dir = tmp("consumer-tcp-mutant");
    let target = format!("tcp:{},consumer=ignores_retry_after", sim.1);
    let o = cetp(&[
        "consumer",
        "--target",
        &target,
        "--report-dir",
        dir.to_str().unwrap(),
    ]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(
        t.contains("reproduce: cetp consumer --only CRET-001"),
        "{t}"
    );
    let r = report_of(&dir);
    let case = r["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "CRET-001")
        .unwrap()
        .clone();
    assert_eq!(case["verdict"], "FAIL", "{case}");
    assert!(case.to_string().contains("CETP2-5-24"), "{case}");

    // The resolution path over the wire: a Consumer that resumes without
    // launching the PendingIntent is caught from intent_launched events.
    let target = format!("tcp:{},consumer=resume_without_resolution", sim.1);
    let o = cetp(&["consumer", "--target", &target, "--only", "CCONF-001"]);
    let t = text(&o);
    assert!(
        t.contains("WARN") && t.contains("resolved_before_resume"),
        "{t}"
    );

    // Usage errors: an unknown mutant, a pattern that selects nothing.
    let o = cetp(&["consumer", "--target", "sim:consumer=no_such"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let o = cetp(&["consumer", "--only", "NOPE-*"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    // The JVM device without a Consumer under test, or with half of one:
    // usage errors before anything starts.
    let o = cetp(&["consumer", "--target", "jvm:sample"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("consumer_class=CLASS"), "{}", text(&o));
    let o = cetp(&["consumer", "--target", "jvm:sample,consumer_class=a.B"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("needs both its code"), "{}", text(&o));
    drop(sim);
    // No device there: an infrastructure error, never charged to the Consumer.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let target = format!("tcp:127.0.0.1:{closed}");
    let o = cetp(&["consumer", "--target", &target, "--only", "CSES-001"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
}

#[test]
fn the_phone_path_hosts_where_the_probe_app_can_and_judges_what_a_phone_plays() {
    // The simulated device with the probe app's hosting rules: hello names
    // the one authority and package it hosts, and it refuses what a phone's
    // probe cannot play. The host must read that, play every scenario a
    // phone can, and leave the rest not judged, with the reason, never
    // an infra error and never a claim.
    let sim = ServedSim::start_with(&["--hosting", "probe-app"]);
    let dir = tmp("consumer-probe-app");
    let target = format!("tcp:{}", sim.1);
    let o = cetp(&[
        "consumer",
        "--target",
        &target,
        "--report-dir",
        dir.to_str().unwrap(),
    ]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    let r = report_of(&dir);
    let v = verdicts(&r);
    let passed = v.values().filter(|x| *x == "PASS").count();
    let na: Vec<&serde_json::Value> = r["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["verdict"] == "NOT_APPLICABLE")
        .collect();
    assert_eq!(passed + na.len(), v.len(), "{v:?}");
    assert!(passed >= 39, "{passed} passed: {t}");
    // The probe app plays a confirmation PendingIntent of its own activity,
    // a held answer and a hosted process that dies mid-call: those are judged.
    // So is the 2 MB description: this device holds the hosted Provider's
    // answers to Binder's transaction limit, as a phone does.
    for id in [
        "CCONF-001",
        "CCONF-004",
        "CRET-004",
        "CRET-005",
        "CRET-006",
        "CDATA-001",
    ] {
        assert_eq!(v.get(id).map(String::as_str), Some("PASS"), "{id}: {t}");
    }
    assert!(
        !na.is_empty(),
        "a phone hosts one Provider in its own package: {t}"
    );
    for c in &na {
        let why = c["reason"].as_str().unwrap_or_default();
        assert!(why.contains("no peer probe answers"), "{}: {why}", c["id"]);
    }
    assert!(t.contains("not established"), "{t}");
    assert!(
        t.contains("provider com.clawseed.probe "),
        "the run names the package the phone hosts in: {t}"
    );
    // Mutants are still caught on the phone path, those of the
    // confirmation and dead-Binder scenarios too.
    for (mutant, scenario) in [
        ("obeys_provider_text", "CDATA-005"),
        ("resume_with_new_request_id", "CCONF-001"),
        ("retries_user_action", "CRET-005"),
        ("new_request_id_after_disconnect", "CRET-004"),
        // The 2 MB answer fails to cross: a Consumer crashing on that FAILs.
        ("oversized_answer_crashes", "CDATA-001"),
        // Issue 42: instructions in other words than a field used to have.
        ("obeys_description_call", "CDATA-010"),
        ("obeys_chinese_instructions", "CDATA-009"),
    ] {
        let target = format!("tcp:{},consumer={mutant}", sim.1);
        let o = cetp(&["consumer", "--target", &target, "--only", scenario]);
        let t = text(&o);
        // A SHOULD scenario warns (exit 0), a MUST one fails (exit 1).
        assert!(
            t.contains(&format!("FAIL  {scenario}")) || t.contains(&format!("WARN  {scenario}")),
            "{mutant}: {t}"
        );
    }
    // With the phone's second probe (identity b's app) as the peer, the two
    // scenarios that need another package are played too: every scenario
    // passes. A phone shows no descriptor reads, so the scenarios that
    // also judge them pass only in part, and the claim names them rather
    // than being made.
    let target = format!("tcp:{},peer={}", sim.1, sim.2);
    let o = cetp(&["consumer", "--target", &target]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(
        t.contains("44 passed, 0 failed, 0 flaky, 0 warned, 0 not applicable"),
        "{t}"
    );
    assert!(
        t.contains(
            "not established for default: 0 FAIL, 0 WARN, 0 not judged, 0 infra errors, 4 passed only in part (this target cannot see all they judge: CFILE-001, CFILE-003, CFILE-004, CFILE-005 need a target that shows the Consumer's descriptor reads"
        ),
        "{t}"
    );
    assert!(t.contains("descriptor reads"), "{t}");
}

#[test]
fn through_the_probe_apps_rules_and_its_peer_every_consumer_mutant_is_caught() {
    // Every Consumer mutant through the simulated device playing the probe
    // app's rules, with identity b's probe as the peer: caught when a FAIL
    // or WARN case cites one of the requirements it breaks. The peer hosts
    // the second Provider (CSES-014) and the ContentProvider another
    // package's service names (CSES-002); a descriptor's close comes back as
    // `fd_closed` (CFILE-006).
    let uncaught: [&str; 0] = [];
    let catalog: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../vectors/mutants/consumer-mutants.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let mutants = catalog["mutants"].as_array().expect("mutants");
    assert!(mutants.len() >= 43, "{}", mutants.len());
    let sim = ServedSim::start_with(&["--hosting", "probe-app"]);
    let mut missed = Vec::new();
    for m in mutants {
        let name = m["name"].as_str().unwrap();
        let breaks: Vec<&str> = m["requirements"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap())
            .collect();
        let dir = tmp(&format!("probe-app-mutant-{name}"));
        let target = format!("tcp:{},peer={},consumer={name}", sim.1, sim.2);
        let o = cetp(&[
            "consumer",
            "--target",
            &target,
            "--report-dir",
            dir.to_str().unwrap(),
        ]);
        assert!(
            matches!(o.status.code(), Some(0 | 1)),
            "{name}: {}",
            text(&o)
        );
        let r = report_of(&dir);
        let caught = r["cases"].as_array().unwrap().iter().any(|c| {
            (c["verdict"] == "FAIL" || c["verdict"] == "WARN")
                && c["cited"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .chain(c["requirements"].as_array().into_iter().flatten())
                    .any(|q| breaks.contains(&q.as_str().unwrap_or_default()))
        });
        if !caught {
            missed.push(name.to_string());
        }
    }
    assert_eq!(
        missed, uncaught,
        "mutants the probe app's rules let through"
    );
}

#[test]
fn a_consumer_profile_driver_makes_the_consumer_act_while_the_device_hosts_the_provider() {
    // The driver contract end to end: the device only hosts the hostile
    // Provider; the driver named in the Consumer profile (here `cetp
    // consumer-act`, the driver of any device offering consumer_act) is run
    // once per act and prints the outcome line.
    let sim = ServedSim::start_with(&[]);
    let dir = tmp("consumer-driver");
    let profile = |consumer: &str| {
        let p = dir.join(format!("{consumer}.toml"));
        std::fs::write(
            &p,
            format!(
                "[consumer]\nname = \"{consumer} via its driver\"\n[driver]\ncommand = [{:?}, \"consumer-act\", \"--target\", \"tcp:{}\", \"--consumer\", \"{consumer}\", \"--action\", \"{{action}}\"]\ntimeout_ms = 60000\n",
                env!("CARGO_BIN_EXE_cetp"),
                sim.1
            ),
        )
        .unwrap();
        p
    };
    let target = format!("tcp:{}", sim.1);
    let good = profile("default");
    let o = cetp(&[
        "consumer",
        "--target",
        &target,
        "--profile",
        good.to_str().unwrap(),
    ]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    // The device's open hosting enforces no Binder limit: CDATA-001 is not
    // judged.
    assert!(
        t.contains("43 passed, 0 failed, 0 flaky, 0 warned, 1 not applicable"),
        "{t}"
    );
    assert!(t.contains("default via its driver"), "{t}");
    let bad = profile("obeys_provider_text");
    let o = cetp(&[
        "consumer",
        "--target",
        &target,
        "--profile",
        bad.to_str().unwrap(),
    ]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("FAIL  CDATA-005"), "{t}");
    // A driver that prints no outcome is an infrastructure error.
    let broken = dir.join("broken.toml");
    std::fs::write(&broken, "[driver]\ncommand = [\"true\"]\n").unwrap();
    let o = cetp(&[
        "consumer",
        "--target",
        &target,
        "--profile",
        broken.to_str().unwrap(),
        "--only",
        "CSES-001",
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    // A profile with an unknown field is a usage error naming it.
    let typo = dir.join("typo.toml");
    std::fs::write(&typo, "[driver]\ncomand = [\"x\"]\n").unwrap();
    let o = cetp(&[
        "consumer",
        "--target",
        &target,
        "--profile",
        typo.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("comand"), "{}", text(&o));
}

#[test]
fn the_reference_consumer_passes_through_a_real_adb_server() {
    // The simulated device behind Debian's real `adb` (a private server on a
    // free port with a private HOME, killed at the end), playing the probe
    // app's hosting rules: the host reaches identity b's probe as the peer
    // through adb as it reaches a's, as on a phone with both probes.
    let adb = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("adb"))
            .find(|p| p.is_file())
    });
    let Some(adb) = adb else {
        assert!(
            std::env::var_os("CETP_SKIP_ADB").is_some_and(|v| v == "1"),
            "adb is missing (set CETP_SKIP_ADB=1 to skip)"
        );
        return;
    };
    use std::io::BufRead;
    let mut sim = Command::new(env!("CARGO_BIN_EXE_cetp"))
        .args([
            "sim",
            "--listen",
            "127.0.0.1:0",
            "--adb-listen",
            "127.0.0.1:0",
            "--hosting",
            "probe-app",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(sim.stdout.take().unwrap()).lines();
    let dev = loop {
        let line = lines
            .next()
            .expect("the sim says where it listens")
            .unwrap();
        if let Some(a) = line.strip_prefix("listening adb addr=") {
            break a.to_string();
        }
    };
    let home = tmp("consumer-adb-home");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let run_adb = |args: &[&str]| {
        Command::new(&adb)
            .arg("-P")
            .arg(port.to_string())
            .args(args)
            .env("HOME", &*home)
            .env("ANDROID_ADB_SERVER_PORT", port.to_string())
            .env_remove("ANDROID_SERIAL")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    struct Kill<'a>(&'a dyn Fn(&[&str]) -> Output, std::process::Child);
    impl Drop for Kill<'_> {
        fn drop(&mut self) {
            (self.0)(&["kill-server"]);
            let _ = self.1.kill();
            let _ = self.1.wait();
        }
    }
    let guard = Kill(&run_adb, sim);
    assert!(run_adb(&["start-server"]).status.success());
    let c = run_adb(&["connect", &dev]);
    assert!(
        String::from_utf8_lossy(&c.stdout).contains("connected"),
        "{c:?}"
    );
    let target = format!("adb:{dev},server=127.0.0.1:{port}");
    let o = cetp(&["consumer", "--target", &target]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(t.contains("44 passed, 0 failed"), "{t}");
    let target = format!("adb:{dev},server=127.0.0.1:{port},consumer=retries_not_retryable");
    let o = cetp(&["consumer", "--target", &target, "--only", "CRET-*"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("FAIL  CRET-002"), "{t}");
    // The scenarios a phone plays only with its peer probe, and a
    // descriptor's close reported by the device, catch their mutants.
    for (mutant, scenario) in [
        ("same_package_not_checked", "CSES-002"),
        ("routes_by_scan_order", "CSES-014"),
        ("file_fd_not_closed", "CFILE-006"),
    ] {
        let target = format!("adb:{dev},server=127.0.0.1:{port},consumer={mutant}");
        let o = cetp(&["consumer", "--target", &target, "--only", scenario]);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(1), "{mutant}: {t}");
        assert!(t.contains(&format!("FAIL  {scenario}")), "{mutant}: {t}");
    }
    drop(guard);
}

#[test]
fn fuzz_exits_1_on_a_finding_writes_it_as_a_case_file_and_0_when_clean() {
    let dir = tmp("fuzz-mutant");
    let profile = concat!(env!("CARGO_MANIFEST_DIR"), "/../../profiles/reference.toml");
    let o = cetp(&[
        "fuzz",
        "--target",
        "sim:mutant=negotiate_limits_below_minimum",
        "--profile",
        profile,
        "--cases",
        "10",
        "--seed",
        "3",
        "--max-findings",
        "1",
        "--out",
        dir.to_str().unwrap(),
        "-q",
    ]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("seed 3"), "the run prints its seed: {t}");
    // The printed replay, pasted into a shell, meets the target as the run
    // did (its profile too) and FAILs again.
    let line = t
        .lines()
        .find_map(|l| l.split_once("replay: ").map(|(_, r)| r))
        .unwrap_or_else(|| panic!("no replay line: {t}"));
    let words = shlex::split(line).unwrap_or_else(|| panic!("not a shell line: {line}"));
    assert_eq!(words[..2], ["cetp", "replay"], "{line}");
    assert!(
        words.windows(2).any(|w| w == ["--profile", profile]),
        "{line}"
    );
    let again = cetp(&words[1..].iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(again.status.code(), Some(1), "{line}: {}", text(&again));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("fuzz.json")).unwrap()).unwrap();
    assert_eq!(
        report["findings"].as_array().map(Vec::len),
        Some(1),
        "{report}"
    );
    assert!(report["effects_unjudged"].is_null(), "{report}");
    let files: Vec<_> = std::fs::read_dir(dir.join("findings")).unwrap().collect();
    assert_eq!(files.len(), 1);
    let clean = tmp("fuzz-clean");
    let o = cetp(&[
        "fuzz",
        "--target",
        "sim",
        "--cases",
        "10",
        "--seed",
        "3",
        "--out",
        clean.to_str().unwrap(),
        "-q",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn fuzz_says_which_oracle_judged_the_run() {
    let dir = tmp("fuzz-descriptor");
    let o = cetp(&[
        "fuzz",
        "--target",
        "sim:provider=notes",
        "--oracle",
        "descriptor",
        "--cases",
        "8",
        "--seed",
        "3",
        "--out",
        dir.to_str().unwrap(),
        "-q",
    ]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(t.contains("judged by the descriptor oracle"), "{t}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("fuzz.json")).unwrap()).unwrap();
    assert_eq!(report["oracle_kind"], "descriptor", "{report}");
    assert!(report["flaky"].is_array(), "{report}");
    let auto = tmp("fuzz-auto");
    let o = cetp(&[
        "fuzz",
        "--target",
        "sim",
        "--cases",
        "3",
        "--seed",
        "3",
        "--out",
        auto.to_str().unwrap(),
        "-q",
    ]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(t.contains("judged by the differential oracle"), "{t}");
}

/// The descriptor oracle over TCP, the way a user fuzzes a Provider the
/// harness does not know: `cetp sim` serves the probe wire on a socket (the
/// fuzzer sees only `tcp:HOST:PORT` and the vendor's profile), a mutant
/// whose vendor policy never escalates (`no_escalation`, §3.4 CETP2-3.4-12:
/// the profile's escalating args acted on without asking) is found, and the
/// conforming reference run with the same seed gets no finding.
#[test]
fn descriptor_oracle_over_tcp_finds_a_mutant_and_passes_the_reference() {
    let profile = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../profiles/reference.toml");
    let run = |sim: &ServedSim, dir: &Path| {
        let target = format!("tcp:{}", sim.1);
        cetp(&[
            "fuzz",
            "--target",
            &target,
            "--profile",
            profile.to_str().unwrap(),
            "--oracle",
            "descriptor",
            "--cases",
            "12",
            "--seed",
            "7",
            "--max-findings",
            "1",
            "--out",
            dir.to_str().unwrap(),
            "-q",
        ])
    };
    let mutant = ServedSim::start_with(&["--mutant", "no_escalation"]);
    let dir = tmp("fuzz-tcp-mutant");
    let o = run(&mutant, &dir);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("judged by the descriptor oracle"), "{t}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("fuzz.json")).unwrap()).unwrap();
    assert_eq!(report["oracle_kind"], "descriptor", "{report}");
    let findings = report["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 1, "{report}");
    // The case written shrinks to the escalating call the shadow expected
    // to be asked about, and what follows from it.
    let id = findings[0]["id"].as_str().unwrap();
    let case = std::fs::read_to_string(dir.join("findings").join(format!("{id}.json"))).unwrap();
    assert!(case.contains("\"escalating\""), "{case}");
    assert!(case.contains("CETP2-3.4-12"), "{case}");
    assert!(case.contains("USER_ACTION_REQUIRED"), "{case}");
    drop(mutant);

    let reference = ServedSim::start_with(&[]);
    let dir = tmp("fuzz-tcp-reference");
    let o = run(&reference, &dir);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("fuzz.json")).unwrap()).unwrap();
    assert_eq!(report["oracle_kind"], "descriptor", "{report}");
    assert_eq!(report["findings"], serde_json::json!([]), "{report}");
    assert_eq!(report["stats"]["cases"], 12, "{report}");
}
