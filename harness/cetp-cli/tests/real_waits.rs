//! Time-bound cases on a device whose clock the harness cannot move (a
//! phone; here `cetp sim --fixed-clock`, which answers `advance_clock`
//! `unknown_op` as a phone's probe does): judged by waiting in real time for
//! the short lifetimes of a debug build, bounded by `--max-wait`, with the
//! waits overlapping the rest of the run, and resumable when the harness
//! dies while a case waits.
//!
//! The lifetimes are short (`CETP_WAIT_TEST_MS`, default 5 s, lifetime plus
//! margin) so the test command stays fast; `scripts/bench-waits.sh`
//! measures the same with the 60 s.

#[path = "support/scratch.rs"]
mod scratch;
use scratch::Scratch;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The margin the test profile gives past a lifetime's end.
const MARGIN_MS: u64 = 1_000;

/// Real time one wait takes: lifetime plus margin.
fn wait_ms() -> u64 {
    std::env::var("CETP_WAIT_TEST_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&ms| ms > MARGIN_MS + 1_000)
        .unwrap_or(5_000)
}

fn lifetime_ms() -> u64 {
    wait_ms() - MARGIN_MS
}

fn cetp() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cetp"))
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `cetp sim --fixed-clock` with short lifetimes, served over TCP by its
/// own process, as `cetp sim` would be left running for a vendor.
struct FixedClockSim {
    child: Child,
    a: String,
    b: String,
}

impl FixedClockSim {
    fn start(mutant: Option<&str>) -> FixedClockSim {
        let ttl = lifetime_ms().to_string();
        let mut cmd = cetp();
        cmd.args([
            "sim",
            "--listen",
            "127.0.0.1:0",
            "--fixed-clock",
            "--session-ttl-ms",
            &ttl,
            "--resume-token-ttl-ms",
            &ttl,
        ]);
        if let Some(m) = mutant {
            cmd.args(["--mutant", m]);
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // One line per listener: `listening identity=a addr=HOST:PORT`.
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut addr = BTreeMap::new();
        while addr.len() < 2 {
            let line = lines.next().expect("cetp sim ended early").unwrap();
            if let Some(rest) = line.strip_prefix("listening identity=") {
                let (id, a) = rest.split_once(" addr=").unwrap();
                addr.insert(id.to_string(), a.to_string());
            }
        }
        FixedClockSim {
            child,
            a: addr["a"].clone(),
            b: addr["b"].clone(),
        }
    }
}

impl Drop for FixedClockSim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The reference profile with the debug build's resume-token lifetime and
/// a short margin, as profiles/README.md tells a vendor to write it.
fn profile(dir: &Path) -> PathBuf {
    let reference = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../profiles/reference.toml"),
    )
    .unwrap();
    let line = "resume_token_ttl_ms = 600000";
    assert!(reference.contains(line), "profiles/reference.toml changed");
    let text = reference.replace(
        line,
        &format!(
            "resume_token_ttl_ms = {}\nexpiry_margin_ms = {MARGIN_MS}",
            lifetime_ms()
        ),
    );
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("short-lifetimes.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// Runs `cetp run` against the sim; returns the output, the report and how
/// long the run took.
fn run(sim: &FixedClockSim, dir: &Path, extra: &[&str]) -> (Output, serde_json::Value, Duration) {
    let profile = profile(&dir.join("profile"));
    let report = dir.join("report");
    let started = Instant::now();
    let o = cetp()
        .args(["run", "--target", &format!("tcp:{}", sim.a)])
        .args(["--target-b", &sim.b, "--color", "never"])
        .args(["--profile", profile.to_str().unwrap()])
        .args(["--report-dir", report.to_str().unwrap()])
        .args(extra)
        .output()
        .unwrap();
    let took = started.elapsed();
    let r = std::fs::read_to_string(report.join("report.json"))
        .unwrap_or_else(|e| panic!("no report.json ({e}): {}", text(&o)));
    (o, serde_json::from_str(&r).unwrap(), took)
}

/// `id` → (verdict, reason).
fn cases(report: &serde_json::Value) -> BTreeMap<String, (String, String)> {
    report["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["id"].as_str().unwrap().to_string(),
                (
                    c["verdict"].as_str().unwrap().to_string(),
                    c["reason"].as_str().unwrap_or("").to_string(),
                ),
            )
        })
        .collect()
}

fn events(dir: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("report/events.ndjson"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

const TIME_BOUND: [&str; 4] = ["--only", "BIND-005", "--only", "CONF-010"];

#[test]
fn time_bound_cases_pass_by_real_waiting_and_fail_on_providers_that_never_expire() {
    let reference = FixedClockSim::start(None);
    let session_mutant = FixedClockSim::start(Some("session_never_expires"));
    let token_mutant = FixedClockSim::start(Some("resume_token_never_expires"));
    let dirs: Vec<Scratch> = ["reference", "session", "token"]
        .iter()
        .map(|n| Scratch::new("cetp-waits-test", n, true))
        .collect();
    // The three runs at once: each waits in real time.
    let (ok, session, token) = std::thread::scope(|s| {
        let ok = s.spawn(|| run(&reference, &dirs[0], &TIME_BOUND));
        let session = s.spawn(|| run(&session_mutant, &dirs[1], &TIME_BOUND));
        let token = s.spawn(|| run(&token_mutant, &dirs[2], &TIME_BOUND));
        (
            ok.join().unwrap(),
            session.join().unwrap(),
            token.join().unwrap(),
        )
    });

    let v = cases(&ok.1);
    for id in ["BIND-005", "CONF-010"] {
        let (verdict, reason) = &v[id];
        assert_eq!(verdict, "PASS", "{id}: {reason}\n{}", text(&ok.0));
        assert!(
            reason.contains("in real time (the device's clock cannot be moved)"),
            "{id}: the reason says how it was judged: {reason}"
        );
    }
    // The trace: the clock was asked to move, refused, then waited for.
    let ev = events(&dirs[0]);
    let ops: Vec<(&str, &str)> = ev
        .iter()
        .filter(|e| e["event"] == "step_sent")
        .map(|e| (e["case_id"].as_str().unwrap(), e["op"].as_str().unwrap()))
        .collect();
    for id in ["BIND-005", "CONF-010"] {
        assert!(ops.contains(&(id, "advance_clock")), "{id}: {ops:?}");
        assert!(ops.contains(&(id, "wait")), "{id}: {ops:?}");
    }

    let (verdict, reason) = &cases(&session.1)["BIND-005"];
    assert_eq!(verdict, "FAIL", "{reason}\n{}", text(&session.0));
    assert!(reason.contains("real time"), "{reason}");
    let (verdict, reason) = &cases(&token.1)["CONF-010"];
    assert_eq!(verdict, "FAIL", "{reason}\n{}", text(&token.0));
    let cited = token.1["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "CONF-010")
        .unwrap()["cited"]
        .to_string();
    assert!(cited.contains("CETP2-4.3-03"), "{cited}");
}

#[test]
fn a_lifetime_beyond_max_wait_leaves_its_case_unjudged_naming_the_flag_and_value() {
    let sim = FixedClockSim::start(None);
    let dir = Scratch::new("cetp-waits-test", "max-wait", true);
    let started = Instant::now();
    let (o, report, _) = run(
        &sim,
        &dir,
        &[&TIME_BOUND[..], &["--max-wait", "1s"]].concat(),
    );
    let v = cases(&report);
    let want = format!("`--max-wait {}s`", wait_ms().div_ceil(1000));
    for id in ["BIND-005", "CONF-010"] {
        let (verdict, reason) = &v[id];
        assert_eq!(verdict, "NOT_APPLICABLE", "{id}: {reason}\n{}", text(&o));
        assert!(
            reason.contains("beyond --max-wait 1000 ms") && reason.contains("(needs --max-wait "),
            "{id}: {reason}"
        );
    }
    // The token's lifetime is the profile's: its wait is known exactly,
    // and the claim names the change that would judge it.
    assert!(v["CONF-010"].1.contains(&want), "{}", v["CONF-010"].1);
    let needs = format!("(needs --max-wait {}s)", wait_ms().div_ceil(1000));
    assert!(v["CONF-010"].1.contains(&needs), "{}", v["CONF-010"].1);
    assert!(
        started.elapsed() < Duration::from_millis(wait_ms()),
        "nothing was waited for"
    );
}

/// The device time each `wait` step of a run started and ended.
fn wait_spans(dir: &Path) -> BTreeMap<String, (i64, i64)> {
    events(dir)
        .iter()
        .filter(|e| e["event"] == "step_sent" && e["op"] == "wait")
        .map(|e| {
            let until = e["request"]["until_ms"].as_i64().unwrap();
            let ms = e["request"]["ms"].as_i64().unwrap();
            (
                e["case_id"].as_str().unwrap().to_string(),
                (until - ms, until),
            )
        })
        .collect()
}

#[test]
fn waits_overlap_so_a_run_costs_about_its_longest_wait() {
    let w = wait_ms();
    let sim = FixedClockSim::start(None);
    let quiet = ["--only", "NEG-00*", "--only", "ENV-00*"];
    let base_dir = Scratch::new("cetp-waits-test", "overlap-base", true);
    let (o, base, base_took) = run(&sim, &base_dir, &quiet);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let dir = Scratch::new("cetp-waits-test", "overlap", true);
    let (o, report, took) = run(&sim, &dir, &[&quiet[..], &TIME_BOUND[..]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(
        cases(&report).len(),
        cases(&base).len() + 2,
        "the same cases and the two time-bound ones"
    );
    // Both waits were in flight at once (device time, from the trace).
    let spans = wait_spans(&dir);
    let (b, c) = (spans["BIND-005"], spans["CONF-010"]);
    assert!(
        b.0 < c.1 && c.0 < b.1,
        "the two waits did not overlap: {spans:?}"
    );
    let extra = took.saturating_sub(base_took);
    eprintln!(
        "two waits of {w} ms: run {} ms, without them {} ms, {} ms more",
        took.as_millis(),
        base_took.as_millis(),
        extra.as_millis()
    );
    assert!(
        extra < Duration::from_millis(w * 3 / 2),
        "two waits of {w} ms cost {} ms more than none: they did not overlap",
        extra.as_millis()
    );
}

#[test]
fn a_run_killed_while_a_case_waits_resumes_to_the_same_verdicts_without_a_second_effect() {
    let sim = FixedClockSim::start(None);
    let cases_args = [&TIME_BOUND[..], &["--only", "NEG-00*"]].concat();
    let full_dir = Scratch::new("cetp-waits-test", "uninterrupted", true);
    let (o, full, _) = run(&sim, &full_dir, &cases_args);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));

    let dir = Scratch::new("cetp-waits-test", "killed", true);
    let profile = profile(&dir.join("profile"));
    let report = dir.join("report");
    // The fifth negotiate comes after CONF-010 has asked, been approved
    // and parked at its wait (checked below in the journal).
    let mut child = cetp()
        .args(["run", "--target", &format!("tcp:{}", sim.a)])
        .args(["--target-b", &sim.b, "--color", "never"])
        .args(["--profile", profile.to_str().unwrap()])
        .args(["--report-dir", report.to_str().unwrap()])
        .args(&cases_args)
        .env("CETP_PAUSE_AT", "before:negotiate:5")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let paused = BufReader::new(stderr)
        .lines()
        .map_while(Result::ok)
        .any(|l| l.starts_with("cetp: paused"));
    let _ = child.kill();
    let _ = child.wait();
    assert!(paused, "the run ended without reaching its pause point");
    let journal = std::fs::read_to_string(report.join("journal.ndjson")).unwrap();
    let records: Vec<serde_json::Value> = journal
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let ops: Vec<&str> = records.iter().filter_map(|r| r["op"].as_str()).collect();
    let effects_before = records
        .iter()
        .filter(|r| r["j"] == "send" && r["req"]["method"] == "execute_tool")
        .count();
    assert!(
        ops.contains(&"resolve") && ops.iter().filter(|o| **o == "advance_clock").count() == 2,
        "CONF-010 was not waiting when the run was killed: {ops:?}"
    );

    let o = cetp()
        .args(["resume", report.to_str().unwrap(), "--color", "never"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let resumed: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(report.join("report.json")).unwrap())
            .unwrap();
    let strip = |v: BTreeMap<String, (String, String)>| -> BTreeMap<String, String> {
        v.into_iter()
            .map(|(k, (verdict, _))| (k, verdict))
            .collect()
    };
    assert_eq!(strip(cases(&resumed)), strip(cases(&full)));
    // The journal after the resume: every execute_tool sent before the
    // kill was answered from it, none sent twice.
    let after = std::fs::read_to_string(report.join("journal.ndjson")).unwrap();
    let sent_again = after
        .lines()
        .skip(records.len())
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|r| r["j"] == "send" && r["req"]["method"] == "execute_tool")
        .count();
    let full_execs = std::fs::read_to_string(full_dir.join("report/journal.ndjson"))
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|r| r["j"] == "send" && r["req"]["method"] == "execute_tool")
        .count();
    assert_eq!(
        effects_before + sent_again,
        full_execs,
        "the resumed run sent an execute_tool the journal already held"
    );
}

/// The two observer-window cases that wait (IDEM-008, which expects its
/// create's effect, and CONF-010, which expects none) with --max-wait 8s.
const WINDOWS: [&str; 6] = [
    "--only",
    "IDEM-008",
    "--only",
    "CONF-010",
    "--max-wait",
    "8s",
];

/// A case that expects no effect joins the observer window of one that
/// waits inside it, with a counter that only grows: on a conforming
/// Provider both pass with their waits overlapping, and where one of them
/// fails, both are run again alone, so the verdicts are those of the cases
/// run one after the other.
#[test]
fn a_case_expecting_no_effect_waits_inside_anothers_window_and_a_failure_judges_both_alone() {
    let reference = FixedClockSim::start(None);
    let token_mutant = FixedClockSim::start(Some("resume_token_never_expires"));
    let dedupe_mutant = FixedClockSim::start(Some("no_dedupe"));
    let dirs: Vec<Scratch> = ["reference", "token", "dedupe"]
        .iter()
        .map(|n| Scratch::new("cetp-waits-windows", n, true))
        .collect();
    let (ok, token, dedupe) = std::thread::scope(|s| {
        let ok = s.spawn(|| run(&reference, &dirs[0], &WINDOWS));
        let token = s.spawn(|| run(&token_mutant, &dirs[1], &WINDOWS));
        let dedupe = s.spawn(|| run(&dedupe_mutant, &dirs[2], &WINDOWS));
        (
            ok.join().unwrap(),
            token.join().unwrap(),
            dedupe.join().unwrap(),
        )
    });

    let v = cases(&ok.1);
    for id in ["IDEM-008", "CONF-010"] {
        let (verdict, reason) = &v[id];
        assert_eq!(verdict, "PASS", "{id}: {reason}\n{}", text(&ok.0));
        assert!(!reason.contains("judged alone"), "{id}: {reason}");
    }
    // The waits (8 s and 5 s) were in flight at once: the run costs about
    // the longer one, not their sum.
    let spans = wait_spans(&dirs[0]);
    let (i, c) = (spans["IDEM-008"], spans["CONF-010"]);
    assert!(
        i.0 < c.1 && c.0 < i.1,
        "the waits did not overlap: {spans:?}"
    );
    assert!(
        ok.2 < Duration::from_millis(8_000 + 5_000),
        "took {:?}",
        ok.2
    );

    // A failing guest: it and its host are judged alone.
    let v = cases(&token.1);
    let (verdict, reason) = &v["CONF-010"];
    assert_eq!(verdict, "FAIL", "{reason}\n{}", text(&token.0));
    assert!(
        reason.contains("judged alone: run beside IDEM-008"),
        "{reason}"
    );
    let (verdict, reason) = &v["IDEM-008"];
    assert_eq!(verdict, "PASS", "{reason}");
    assert!(
        reason.contains("judged alone: run beside CONF-010"),
        "{reason}"
    );

    // A failing host: the same.
    let v = cases(&dedupe.1);
    let (verdict, reason) = &v["IDEM-008"];
    assert_eq!(verdict, "FAIL", "{reason}\n{}", text(&dedupe.0));
    assert!(reason.contains("judged alone"), "{reason}");
    let (verdict, reason) = &v["CONF-010"];
    assert_eq!(verdict, "PASS", "{reason}");
    assert!(reason.contains("judged alone"), "{reason}");
}

/// A guest whose tool needs setup calls (here delete_alert, set up by a
/// create_alert) withdraws from the window it joined before the setup's
/// effect could land there, and is judged alone: both pass, and the host's
/// judgement stands.
#[test]
fn a_guest_whose_tool_needs_setup_withdraws_and_is_judged_alone() {
    let sim = FixedClockSim::start(None);
    let dir = Scratch::new("cetp-waits-windows", "setup", true);
    let base = profile(&dir.join("base"));
    let line = "sample_args = { alert_id = \"alert-cetp-probe\" }";
    let text_in = std::fs::read_to_string(&base).unwrap();
    assert!(text_in.contains(line), "profiles/reference.toml changed");
    let with_setup = dir.join("setup.toml");
    std::fs::write(
        &with_setup,
        text_in.replace(
            line,
            &format!("{line}\nsetup = [ {{ tool = \"create_alert\", args = {{ symbol = \"ACME\", price = 12.5 }}, bind = {{ \"/alert_id\" = \"/alert_id\" }} }} ]"),
        ),
    )
    .unwrap();
    let report = dir.join("report");
    let o = cetp()
        .args(["run", "--target", &format!("tcp:{}", sim.a)])
        .args(["--target-b", &sim.b, "--color", "never"])
        .args(["--profile", with_setup.to_str().unwrap()])
        .args(["--report-dir", report.to_str().unwrap()])
        .args(WINDOWS)
        .output()
        .unwrap();
    let r: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(report.join("report.json"))
            .unwrap_or_else(|e| panic!("no report.json ({e}): {}", text(&o))),
    )
    .unwrap();
    let v = cases(&r);
    let (verdict, reason) = &v["CONF-010"];
    assert_eq!(verdict, "PASS", "{reason}\n{}", text(&o));
    assert!(
        reason.contains("withdrew from another case's observer window")
            && reason.contains("delete_alert needs setup calls"),
        "{reason}"
    );
    let (verdict, reason) = &v["IDEM-008"];
    assert_eq!(verdict, "PASS", "{reason}");
    assert!(!reason.contains("judged alone"), "{reason}");
}

/// `cetp fuzz` on a clock that cannot move (issue 40): the operations a
/// sequence leaves open are followed to their end in real time, so effects
/// stay judged for the whole run (before, the first background operation
/// ended every effect judgement); moves ask for no long real-time wait, so
/// nearly every sequence is judged; a clean reference gets no finding; the
/// run says its share judged and its pace; and the fuzzer still finds a
/// mutant whose fault only an effect count shows.
#[test]
fn fuzz_on_a_fixed_clock_keeps_judging_effects_and_finds_a_mutant() {
    let dir = std::env::temp_dir().join(format!("cetp-fuzz-fixed-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let profile = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../profiles/reference.toml");
    let fuzz = |sim: &FixedClockSim, out: &Path| {
        let o = cetp()
            .args([
                "fuzz",
                "--target",
                &format!("tcp:{}", sim.a),
                "--target-b",
                &sim.b,
            ])
            .args([
                "--profile",
                profile.to_str().unwrap(),
                "--oracle",
                "descriptor",
            ])
            .args(["--cases", "40", "--seed", "11", "--max-findings", "1", "-q"])
            .args(["--out", out.to_str().unwrap()])
            .output()
            .unwrap();
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("fuzz.json")).unwrap()).unwrap();
        (o, report)
    };
    let sim = FixedClockSim::start(None);
    let (o, r) = fuzz(&sim, &dir.join("clean"));
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(t.contains("pace: ") && t.contains("envelopes/s"), "{t}");
    assert!(r["effects_unjudged"].is_null(), "{r}");
    assert!(r["oracle_notes"].as_array().unwrap().is_empty(), "{r}");
    let s = &r["stats"];
    let judged = s["cases"].as_u64().unwrap() - s["unjudged"].as_u64().unwrap();
    assert!(judged * 10 >= s["cases"].as_u64().unwrap() * 8, "{s}");
    assert!(
        s["effects_unjudged"].as_u64().unwrap() * 4 < s["cases"].as_u64().unwrap(),
        "{s}"
    );
    // The reference's operations ask for polls a few hundred ms apart:
    // quiet sequences were judged while they waited, and said so.
    assert!(s["during_waits"].as_u64().unwrap() > 0, "{s}");
    assert!(t.contains("ran while another waited in real time"), "{t}");
    drop(sim);
    let sim = FixedClockSim::start(Some("no_dedupe"));
    let (o, r) = fuzz(&sim, &dir.join("mutant"));
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert_eq!(r["findings"].as_array().map(Vec::len), Some(1), "{r}");
}
