//! `cetp run` with several `--target`s: a sharded run gives the verdicts
//! of a one-device run, a matrix run gives each device's, builds that
//! differ are refused before anything runs, and a device lost mid-run
//! loses no case and charges the Provider nothing.

#[path = "support/run.rs"]
mod run;
#[path = "support/scratch.rs"]
mod scratch;
use run::{cetp, text};
#[path = "support/served_sim.rs"]
mod served_sim;

use scratch::Scratch;
use serde_json::Value as Json;
use served_sim::{AdbServer, AdbSim, ServedSim};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

fn report(dir: &Path) -> Json {
    serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap()
}

/// id → verdict of the cases, or of the checks.
fn verdicts(r: &Json, key: &str) -> BTreeMap<String, String> {
    r[key]
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

/// The report's schema violations (a sharded run's report is a
/// `cetp-report/1` report with its device fields).
fn schema_errors(report: &Json) -> Vec<String> {
    let schema: Json = serde_json::from_str(
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
    v.iter_errors(report)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

fn profile() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../profiles/reference.toml")
        .display()
        .to_string()
}

#[test]
fn a_sharded_run_gives_the_verdicts_of_a_one_device_run() {
    let one = Scratch::new("cetp-devices", "one", false);
    let four = Scratch::new("cetp-devices", "four", false);
    let o = cetp(&[
        "run",
        "--target",
        "sim",
        "--report-dir",
        one.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = cetp(&[
        "run",
        "--target",
        "sim",
        "--target",
        "sim:seed=2",
        "--target",
        "sim:seed=3",
        "--target",
        "sim:seed=4",
        "--report-dir",
        four.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let (a, b) = (report(&one), report(&four));
    assert_eq!(verdicts(&a, "cases"), verdicts(&b, "cases"));
    assert_eq!(verdicts(&a, "checks"), verdicts(&b, "checks"));
    assert_eq!(a["claim"], b["claim"]);
    assert_eq!(a["summary"], b["summary"]);
    // One report, whose pin names every device, each case its device.
    let targets = b["pin"]["fields"]["target"].as_array().unwrap();
    assert_eq!(targets.len(), 4);
    assert_eq!(b["devices"].as_array().unwrap().len(), 4);
    let used: BTreeSet<&str> = b["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["device"].as_str().expect("each case names its device"))
        .collect();
    assert!(
        used.len() > 1,
        "the cases went to one device only: {used:?}"
    );
    assert!(b["devices_lost"].as_array().unwrap().is_empty());
    assert_eq!(schema_errors(&b), Vec::<String>::new());
}

#[test]
fn devices_carrying_different_builds_are_refused_naming_the_field() {
    let dir = Scratch::new("cetp-devices", "refused", false);
    let o = cetp(&[
        "run",
        "--target",
        "sim",
        "--target",
        "sim:manifest=v2-only",
        "--report-dir",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("do not carry the same Provider build"), "{t}");
    assert!(t.contains("manifest.com.clawseed.tools.versions"), "{t}");
    assert!(!dir.join("report.json").exists(), "nothing ran");
    // The same device twice cannot run two cases at once.
    let o = cetp(&["run", "--target", "sim", "--target", "sim"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("given twice"));
}

#[test]
fn a_matrix_run_shows_each_devices_verdicts() {
    let dir = Scratch::new("cetp-devices", "matrix", false);
    let o = cetp(&[
        "run",
        "--target",
        "sim",
        "--target",
        "sim:mutant=no_dedupe",
        "--devices",
        "matrix",
        "--only",
        "IDEM-00*",
        "--only",
        "NEG-001",
        "--report-dir",
        dir.to_str().unwrap(),
    ]);
    // The mutant's device fails; the reference's passes.
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("IDEM-001       [1] PASS  [2] FAIL"), "{t}");
    let r = report(&dir);
    assert_eq!(r["schema"], "cetp-matrix/1");
    let devices = r["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 2);
    assert_eq!(devices[0]["exit_code"], 0);
    assert_eq!(devices[1]["exit_code"], 1);
    let idem = r["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "IDEM-001")
        .unwrap();
    assert_eq!(idem["verdicts"]["sim"], "PASS");
    assert_eq!(idem["verdicts"]["sim:mutant=no_dedupe"], "FAIL");
    assert_eq!(idem["differs"], true);
    let neg = r["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "NEG-001")
        .unwrap();
    assert_eq!(neg["differs"], false);
    // A report set per device; at the top, a JUnit suite per device and
    // SARIF results naming their device.
    for d in ["01-sim", "02-sim-mutant-no-dedupe"] {
        assert!(
            dir.join("devices").join(d).join("report.json").is_file(),
            "{d}"
        );
    }
    let junit = std::fs::read_to_string(dir.join("junit.xml")).unwrap();
    assert_eq!(junit.matches("<testsuite ").count(), 2, "{junit}");
    assert!(junit.contains("<testsuite name=\"sim:mutant=no_dedupe: "));
    let sarif: Json =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.sarif")).unwrap()).unwrap();
    let results = sarif["runs"][0]["results"].as_array().unwrap();
    assert!(!results.is_empty());
    assert!(results
        .iter()
        .all(|r| r["properties"]["device"] == "sim:mutant=no_dedupe"));
    let md = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(md.contains("| IDEM-001 | **PASS** | **FAIL** |"), "{md}");
    assert!(std::fs::read_to_string(dir.join("index.html"))
        .unwrap()
        .contains("class=\"differs\""));
}

/// The case ids of `CaseFinished` events so far, by device.
fn finished_on(events: &Path) -> BTreeMap<String, usize> {
    let mut by = BTreeMap::new();
    let mut device = None;
    for line in std::fs::read_to_string(events).unwrap_or_default().lines() {
        let Ok(e) = serde_json::from_str::<Json>(line) else {
            continue;
        };
        match e["event"].as_str() {
            Some("case_started") => device = e["device"].as_str().map(str::to_string),
            Some("case_finished") => {
                if let Some(d) = device.take() {
                    *by.entry(d).or_insert(0) += 1;
                }
            }
            _ => {}
        }
    }
    by
}

#[test]
fn a_device_lost_mid_run_loses_no_case_and_charges_nothing() {
    let dir = Scratch::new("cetp-devices", "lost", false);
    // Slow effects, so the run lasts long enough to lose a device in it.
    let keep = ServedSim::start_with(&["--effect-delay-ms", "150"]);
    let mut victim = ServedSim::start_with(&["--effect-delay-ms", "150"]);
    let (keep_t, victim_t) = (keep.target(), victim.target());
    let run = Command::new(env!("CARGO_BIN_EXE_cetp"))
        .args(["run", "--target", &keep_t, "--target", &victim_t])
        .args([
            "--profile",
            &profile(),
            "--report-dir",
            dir.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Kill the victim once it has finished a few cases.
    let events = dir.join("events.ndjson");
    let t0 = std::time::Instant::now();
    while finished_on(&events).get(&victim_t).copied().unwrap_or(0) < 3 {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(120),
            "the victim never finished 3 cases"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = victim.0.kill();
    let out = run.wait_with_output().unwrap();
    let t = text(&out);
    let r = report(&dir);
    // Every selected case has one verdict; none is a FAIL or INFRA_ERROR.
    let v = verdicts(&r, "cases");
    assert_eq!(
        v.len(),
        r["cases"].as_array().unwrap().len(),
        "a case twice"
    );
    let one = Scratch::new("cetp-devices", "lost-ref", false);
    let o = cetp(&[
        "run",
        "--target",
        &keep_t,
        "--profile",
        &profile(),
        "--report-dir",
        one.to_str().unwrap(),
        "--seed",
        "7",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let expected = verdicts(&report(&one), "cases");
    assert_eq!(v, expected, "{t}");
    assert_eq!(out.status.code(), Some(0), "{t}");
    assert_eq!(schema_errors(&r), Vec::<String>::new());
    let lost = r["devices_lost"].as_array().unwrap();
    assert_eq!(lost.len(), 1, "{t}");
    assert_eq!(lost[0]["device"], victim_t.as_str());
    assert!(t.contains("LOST  device"), "{t}");
    // The cases after the loss all ran on the device left.
    let by = finished_on(&events);
    assert!(by[&keep_t] > 0 && by[&victim_t] >= 3, "{by:?}");
}

/// Two devices behind a real adb server (Debian's `adb`, the simulated
/// devices' adb endpoints), as a device farm exposes phones: the sharded
/// run passes as one device does, and `adb disconnect` of one mid-run
/// hands its unfinished cases to the other; nothing is charged.
#[test]
fn devices_behind_a_real_adb_server_shard_and_survive_a_disconnect() {
    let Some(adb) = AdbServer::start("devices_behind_a_real_adb_server") else {
        return;
    };
    let keep = AdbSim::start_with(&["--effect-delay-ms", "150"]);
    let victim = AdbSim::start_with(&["--effect-delay-ms", "150"]);
    for d in [&keep, &victim] {
        let o = adb.adb(&["connect", &d.serial]);
        assert!(text(&o).contains("connected"), "{}", text(&o));
    }
    let (keep_t, victim_t) = (adb.target(&keep.serial), adb.target(&victim.serial));
    let dir = Scratch::new("cetp-devices", "adb", false);
    let run = Command::new(env!("CARGO_BIN_EXE_cetp"))
        .args(["run", "--target", &keep_t, "--target", &victim_t])
        .args([
            "--profile",
            &profile(),
            "--report-dir",
            dir.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let events = dir.join("events.ndjson");
    let t0 = std::time::Instant::now();
    while finished_on(&events).get(&victim_t).copied().unwrap_or(0) < 3 {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(120),
            "the victim never finished 3 cases"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let o = adb.adb(&["disconnect", &victim.serial]);
    assert!(o.status.success(), "{}", text(&o));
    let out = run.wait_with_output().unwrap();
    let t = text(&out);
    assert_eq!(out.status.code(), Some(0), "{t}");
    let r = report(&dir);
    assert_eq!(schema_errors(&r), Vec::<String>::new());
    let v = verdicts(&r, "cases");
    assert!(
        v.values().all(|v| v == "PASS" || v == "NOT_APPLICABLE"),
        "{v:?}"
    );
    // Every case the run selected has its one verdict (`run_started`
    // counts them).
    let selected = std::fs::read_to_string(&events)
        .unwrap()
        .lines()
        .find_map(|l| {
            let e: Json = serde_json::from_str(l).ok()?;
            (e["event"] == "run_started").then(|| e["cases"].as_u64())?
        })
        .unwrap();
    assert_eq!(v.len() as u64, selected, "{t}");
    assert_eq!(r["cases"].as_array().unwrap().len() as u64, selected);
    let lost = r["devices_lost"].as_array().unwrap();
    assert_eq!(lost.len(), 1, "{t}");
    assert_eq!(lost[0]["device"], victim_t.as_str());
    assert!(r["claim"]["cetp_v2"].as_bool().unwrap(), "{t}");
}
