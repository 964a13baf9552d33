//! `cetp lock`, `cetp drift` and `cetp run --lock` end to end, with the
//! drift exit codes a CI gate relies on: 0 no drift, 1 breaking or a
//! violation, 4 compatible only, 2 usage.

#[path = "support/run.rs"]
mod run;
#[path = "support/scratch.rs"]
mod scratch;
use run::{cetp, text};
use scratch::Scratch;

use cetp_contract::lock::Lock;
use serde_json::{json, Value as Json};
use std::path::{Path, PathBuf};

fn tmp(name: &str) -> Scratch {
    Scratch::new("cetp-lock-test", name, true)
}

/// `cetp lock --target sim` into `dir`, checked against the lock schema.
fn lock_sim(dir: &Path) -> (PathBuf, Lock) {
    let path = dir.join("cetp.lock.json");
    let o = cetp(&["lock", "--target", "sim", "--out", path.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let written = std::fs::read_to_string(&path).unwrap();
    let schema: Json = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../vectors/schema/lock.schema.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let v = jsonschema::options().build(&schema).unwrap();
    let doc: Json = serde_json::from_str(&written).unwrap();
    let errors: Vec<String> = v.iter_errors(&doc).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:?}");
    (path, Lock::parse(&written).unwrap())
}

/// Writes `lock` changed by `edit`, with its derived fields recomputed.
fn variant(dir: &Path, name: &str, lock: &Lock, edit: impl FnOnce(&mut Lock)) -> PathBuf {
    let mut l = lock.clone();
    edit(&mut l);
    l.rederive();
    let path = dir.join(name);
    std::fs::write(&path, l.to_pretty_json()).unwrap();
    path
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn lock_is_deterministic() {
    let (da, db) = (tmp("deterministic-a"), tmp("deterministic-b"));
    let (a, _) = lock_sim(&da);
    let (b, _) = lock_sim(&db);
    assert_eq!(std::fs::read(a).unwrap(), std::fs::read(b).unwrap());
}

#[test]
fn drift_against_the_simulated_device_exits_0_4_or_1() {
    let dir = tmp("sim");
    let (path, lock) = lock_sim(&dir);

    let o = cetp(&["drift", "--target", "sim", "--lock", s(&path)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("no drift"), "{}", text(&o));

    // The lock had another title: the live one differs compatibly.
    let titled = variant(&dir, "titled.json", &lock, |l| {
        l.tool_mut("get_quote").unwrap().title = Some("Quote".into())
    });
    let o = cetp(&["drift", "--target", "sim", "--lock", s(&titled)]);
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    assert!(
        text(&o).contains("COMPATIBLE get_quote /title"),
        "{}",
        text(&o)
    );

    // The lock allowed longer symbols, at the same revision: the live
    // Provider narrowed its input without a new revision.
    let wider = variant(&dir, "wider.json", &lock, |l| {
        l.tool_mut("get_quote").unwrap().input_schema["properties"]["symbol"]["maxLength"] =
            json!(64)
    });
    let o = cetp(&["drift", "--target", "sim", "--lock", s(&wider)]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let out = text(&o);
    assert!(
        out.contains("BREAKING   get_quote /input_schema/properties/symbol/maxLength"),
        "{out}"
    );
    assert!(out.contains("VIOLATION  get_quote /revision"), "{out}");

    let o = cetp(&[
        "drift",
        "--target",
        "sim",
        "--lock",
        s(&wider),
        "--format",
        "json",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let report: Json = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["format"], "cetp-drift/1");
    assert_eq!(report["summary"]["violation"], 1);

    let o = cetp(&[
        "drift",
        "--target",
        "sim",
        "--lock",
        s(&wider),
        "--format",
        "sarif",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let sarif: Json = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(sarif["version"], "2.1.0");
    let rules: Vec<&str> = sarif["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["ruleId"].as_str().unwrap())
        .collect();
    assert_eq!(rules, ["violation", "breaking"]);
}

#[test]
fn drift_between_two_lock_files_needs_no_device() {
    let dir = tmp("against");
    let (a, lock) = lock_sim(&dir);
    let compatible = variant(&dir, "b.json", &lock, |l| {
        l.revision = "tools-next".into();
        l.tool_mut("get_quote").unwrap().output_schema["properties"]["currency"] =
            json!({"type": "string"});
    });
    let breaking = variant(&dir, "c.json", &lock, |l| {
        l.revision = "tools-next".into();
        l.tools.retain(|t| t.name != "export_history");
    });
    for (against, code, needle) in [
        (&a, 0, "no drift"),
        (
            &compatible,
            4,
            "COMPATIBLE get_quote /output_schema/properties/currency",
        ),
        (&breaking, 1, "BREAKING   export_history"),
    ] {
        let o = cetp(&["drift", "--lock", s(&a), "--against", s(against)]);
        assert_eq!(o.status.code(), Some(code), "{}", text(&o));
        assert!(text(&o).contains(needle), "{}", text(&o));
        assert!(!text(&o).contains("VIOLATION"), "{}", text(&o));
    }
}

#[test]
fn drift_usage_errors_exit_2() {
    let dir = tmp("usage");
    let (a, _) = lock_sim(&dir);
    let o = cetp(&["drift", "--lock", s(&a)]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let o = cetp(&[
        "drift",
        "--lock",
        s(&a),
        "--against",
        s(&a),
        "--target",
        "sim",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let bad = dir.join("bad.json");
    std::fs::write(&bad, r#"{"format": "cetp-lock/0"}"#).unwrap();
    let o = cetp(&["drift", "--lock", s(&bad), "--against", s(&a)]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("bad.json"), "{}", text(&o));
    let o = cetp(&["run", "--target", "sim", "--lock", s(&bad)]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

#[test]
fn run_with_a_lock_adds_lock_001() {
    let dir = tmp("run");
    let (a, lock) = lock_sim(&dir);
    let reports = dir.join("report");
    let o = cetp(&[
        "run",
        "--target",
        "sim",
        "--lock",
        s(&a),
        "--only",
        "LOCK-*",
        "-v",
        "--report-dir",
        s(&reports),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("PASS  LOCK-001"), "{}", text(&o));
    let report: Json =
        serde_json::from_str(&std::fs::read_to_string(reports.join("report.json")).unwrap())
            .unwrap();
    let case = &report["cases"][0];
    assert_eq!(case["id"], "LOCK-001");
    assert_eq!(case["requirements"], json!(["CETP2-3.3-03"]));
    assert_eq!(case["verdict"], "PASS");
    let wider = variant(&dir, "wider.json", &lock, |l| {
        l.tool_mut("get_quote").unwrap().input_schema["properties"]["symbol"]["maxLength"] =
            json!(64)
    });
    let o = cetp(&[
        "run",
        "--target",
        "sim",
        "--lock",
        s(&wider),
        "--only",
        "LOCK-*",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("LOCK-001"), "{}", text(&o));
}

/// The mutant that changes a schema under the old revision, against the
/// reference's lock: drift reports the violation, and so does LOCK-001.
#[test]
fn the_revision_kept_mutant_fails_drift_and_run_with_the_lock() {
    let dir = tmp("mutant");
    let (a, _) = lock_sim(&dir);
    let target = "sim:mutant=schema_changed_revision_kept";
    let o = cetp(&["drift", "--target", target, "--lock", s(&a)]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("VIOLATION  get_quote /revision"),
        "{}",
        text(&o)
    );
    let o = cetp(&[
        "run",
        "--target",
        target,
        "--lock",
        s(&a),
        "--only",
        "LOCK-*",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let o = cetp(&["run", "--target", target, "--only", "DESC-*"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "without a lock nothing tells it from the reference: {}",
        text(&o)
    );
}
