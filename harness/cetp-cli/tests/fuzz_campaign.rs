//! `cetp fuzz` over several targets end to end: the terminal and
//! `fuzz.json` name every worker, a finding is reported once with the
//! workers that saw it, and targets of different Provider builds are
//! refused before anything runs unless `--mixed-builds`.

#[path = "support/run.rs"]
mod run;
#[path = "support/scratch.rs"]
mod scratch;
use run::{cetp, text};
use scratch::Scratch;

fn tmp(name: &str) -> Scratch {
    Scratch::new("cetp-fuzz-campaign-test", name, true)
}

#[test]
fn two_targets_one_worker_each_findings_once_with_who_saw_them() {
    let out = tmp("two");
    let corpus = out.join("corpus");
    let o = cetp(&[
        "fuzz",
        "--target",
        "sim",
        "--target",
        "sim:mutant=negotiate_limits_below_minimum",
        "--corpus",
        corpus.to_str().unwrap(),
        "--cases",
        "10",
        "--seed",
        "3",
        "--max-findings",
        "1",
        "--out",
        out.to_str().unwrap(),
        "-q",
    ]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("worker 0 sim (seed 3): finished"), "{t}");
    assert!(
        t.contains("worker 1 sim:mutant=negotiate_limits_below_minimum (seed "),
        "{t}"
    );
    assert!(
        t.contains("found by worker 1 (sim:mutant=negotiate_limits_below_minimum)"),
        "{t}"
    );
    assert!(!t.contains("found by worker 0"), "{t}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("fuzz.json")).unwrap()).unwrap();
    assert_eq!(
        report["targets"],
        serde_json::json!(["sim", "sim:mutant=negotiate_limits_below_minimum"])
    );
    assert_eq!(report["builds"], "same");
    let workers = report["workers"].as_array().unwrap();
    assert_eq!(workers.len(), 2);
    for w in workers {
        assert_eq!(w["state"], "finished", "{w}");
        assert!(w["stats"]["cases"].as_u64().unwrap() > 0, "{w}");
        assert!(w["corpus"]["written"].is_u64(), "{w}");
    }
    let findings = report["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 1, "{report}");
    for f in findings {
        assert_eq!(f["found_by"][0]["worker"], 1, "{f}");
        assert!(f.get("file").is_none(), "the case file is written apart");
        let id = f["id"].as_str().unwrap();
        assert!(out.join("findings").join(format!("{id}.json")).is_file());
    }
    assert!(std::fs::read_dir(&corpus).unwrap().count() > 0);
}

#[test]
fn targets_of_different_builds_are_refused_unless_asked_for() {
    let out = tmp("mixed");
    let args = |extra: &[&'static str]| {
        let mut a = vec![
            "fuzz",
            "--target",
            "sim",
            "--target",
            "sim:provider=notes",
            "--cases",
            "2",
            "--seed",
            "5",
            "--out",
            out.to_str().unwrap(),
            "-q",
        ];
        a.extend_from_slice(extra);
        a.into_iter().map(String::from).collect::<Vec<_>>()
    };
    let run = |a: Vec<String>| cetp(&a.iter().map(String::as_str).collect::<Vec<_>>());
    let o = run(args(&[]));
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(
        t.contains("target sim:provider=notes runs another Provider build than target sim"),
        "{t}"
    );
    assert!(
        t.contains("package (\"com.clawseed.reference\" vs \"com.clawseed.notes\")"),
        "{t}"
    );
    assert!(t.contains("--mixed-builds"), "{t}");
    assert!(
        !out.join("fuzz.json").exists(),
        "refused before anything ran"
    );
    let o = run(args(&["--mixed-builds"]));
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(t.contains("mixed Provider builds"), "{t}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("fuzz.json")).unwrap()).unwrap();
    assert_eq!(report["builds"], "mixed");
    assert_eq!(report["workers"][1]["stats"]["cases"], 2, "{report}");
}

#[test]
fn one_device_twice_or_a_second_identity_for_several_is_a_usage_error() {
    let out = tmp("usage");
    let o = cetp(&[
        "fuzz",
        "--target",
        "tcp:127.0.0.1:1",
        "--target",
        "tcp:127.0.0.1:1",
        "--cases",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(t.contains("is named twice"), "{t}");
    let o = cetp(&[
        "fuzz",
        "--target",
        "sim",
        "--target",
        "sim",
        "--target-b",
        "127.0.0.1:2",
        "--cases",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(t.contains("--target-b applies to a single --target"), "{t}");
}
