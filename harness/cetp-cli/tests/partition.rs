//! CI partitions end to end: `cetp run --partition` against the simulated
//! device, and `cetp merge` of the parts' report directories, compared with
//! the unpartitioned run; merges that do not add up are refused, naming why.

#[path = "support/run.rs"]
mod run;
#[path = "support/scratch.rs"]
mod scratch;
use run::{cetp, text};
use scratch::Scratch;

#[path = "support/served_sim.rs"]
mod served_sim;
use served_sim::ServedSim;

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn report(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Runs `cetp run ARGS --report-dir DIR` for each (args, dir) at once
/// (separate processes, each with its own simulated device); their exit
/// codes and output.
fn runs(jobs: Vec<(Vec<String>, PathBuf)>) -> Vec<Output> {
    let handles: Vec<_> = jobs
        .into_iter()
        .map(|(args, dir)| {
            std::thread::spawn(move || {
                let mut all: Vec<&str> = vec!["run"];
                all.extend(args.iter().map(String::as_str));
                all.extend(["--report-dir", s(&dir)]);
                cetp(&all)
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

/// `args` run whole into `root/full` and split `scheme:M/n` into
/// `root/pM`, all at once; the parts' directories.
fn whole_and_split(root: &Path, args: &[&str], scheme: &str, n: u32) -> (Output, Vec<PathBuf>) {
    let mut jobs = vec![(strings(args), root.join("full"))];
    let mut dirs = Vec::new();
    for m in 1..=n {
        let mut a = strings(args);
        a.extend(["--partition".to_string(), format!("{scheme}:{m}/{n}")]);
        dirs.push(root.join(format!("p{m}")));
        jobs.push((a, root.join(format!("p{m}"))));
    }
    let mut outs = runs(jobs);
    let whole = outs.remove(0);
    for (o, d) in outs.iter().zip(&dirs) {
        assert!(
            matches!(o.status.code(), Some(0 | 1)),
            "{}: {}",
            d.display(),
            text(o)
        );
    }
    (whole, dirs)
}

fn merge(dirs: &[PathBuf], out: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["merge"];
    args.extend(dirs.iter().map(|d| s(d)));
    args.extend(["--report-dir", s(out)]);
    args.extend(extra);
    cetp(&args)
}

/// A case or check of report.json without what differs between two runs
/// of one configuration: its duration; the device that ran it (in a run
/// sharded over several devices, whichever was free); a check's count of
/// answers (a case
/// polling an operation makes as many calls as the device's timing asks:
/// two unpartitioned runs differ in it too); and (`reasons` false) its
/// reason, which may quote the device's state (a counter, an id it
/// generated) that other cases before it moved.
fn result_row(r: &Value, reasons: bool) -> Value {
    let mut r = r.clone();
    let o = r.as_object_mut().unwrap();
    o.remove("duration_ms");
    o.remove("device");
    o.remove("answers_checked");
    if !reasons {
        o.remove("reason");
    }
    r
}

/// Asserts the merged report says what the unpartitioned one says: every
/// case and check (id, title, requirements, verdict, cited requirements,
/// baseline, unjudged need; reasons of cases when `case_reasons`, of checks
/// always: the first finding and the count of the others), in the same
/// order; the summary, §9 claim, exit code, stale baseline
/// entries, pin (fields and hash), seed, selection, config hash, harness and
/// the target but for the device's clock in its `hello`. Not compared: the
/// run id, start time and durations, the answers checked (see
/// [`result_row`]; [`assert_answers_summed`] checks the merge's), and the
/// merge's `partition` record.
fn assert_same_run(whole: &Value, merged: &Value, case_reasons: bool) {
    for (key, reasons) in [("cases", case_reasons), ("checks", true)] {
        let rows = |r: &Value| -> Vec<Value> {
            r[key]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| result_row(c, reasons))
                .collect()
        };
        assert_eq!(rows(whole), rows(merged), "{key}");
    }
    for key in [
        "summary",
        "claim",
        "exit_code",
        "baseline_stale",
        "pin",
        "seed",
        "selection",
        "config_hash",
        "harness",
    ] {
        assert_eq!(whole[key], merged[key], "{key}");
    }
    let target = |r: &Value| {
        let mut t = r["target"].clone();
        t["hello"]["now_ms"] = Value::Null;
        t
    };
    assert_eq!(target(whole), target(merged));
}

/// Each merged check judged every partition's answers.
fn assert_answers_summed(parts: &[PathBuf], merged: &Value) {
    let answers = |r: &Value| r["checks"][0]["answers_checked"].as_u64().unwrap();
    let sum: u64 = parts.iter().map(|p| answers(&report(p))).sum();
    assert!(sum > 0);
    for c in merged["checks"].as_array().unwrap() {
        assert_eq!(c["answers_checked"].as_u64(), Some(sum), "{c}");
    }
}

#[test]
fn three_partitions_merge_into_the_unpartitioned_run() {
    let root = Scratch::new("cetp-partition-test", "whole", true);
    let (whole, parts) = whole_and_split(&root, &["--target", "sim"], "slice", 3);
    assert_eq!(whole.status.code(), Some(0), "{}", text(&whole));
    let mut sizes = Vec::new();
    for (m, dir) in parts.iter().enumerate() {
        let r = report(dir);
        assert_eq!(
            r["partition"],
            serde_json::json!({"scheme": "slice", "count": 3, "index": m + 1})
        );
        // A part alone claims nothing, and says how to claim.
        assert_eq!(r["claim"]["cetp_v2"], false);
        let statement = r["claim"]["statement"].as_str().unwrap();
        assert!(
            statement.contains(&format!("partition slice:{}/3", m + 1)),
            "{statement}"
        );
        assert!(r["claim"]["fixes"][0]
            .as_str()
            .unwrap()
            .contains("cetp merge"));
        sizes.push(r["cases"].as_array().unwrap().len());
    }
    let whole_report = report(&root.join("full"));
    let total = whole_report["cases"].as_array().unwrap().len();
    assert_eq!(sizes.iter().sum::<usize>(), total, "{sizes:?}");
    assert!(
        sizes.iter().all(|n| n.abs_diff(total / 3) <= 1),
        "{sizes:?}"
    );

    let out = root.join("merged");
    let o = merge(&parts, &out, &["--require-claim"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("merged 3 partitions"), "{}", text(&o));
    let merged = report(&out);
    assert_same_run(&whole_report, &merged, true);
    assert_answers_summed(&parts, &merged);
    assert_eq!(merged["claim"]["cetp_v2"], true);
    assert_eq!(merged["partition"]["count"], 3);
    assert!(merged["partition"].get("index").is_none());
    let runs: Vec<&str> = merged["partition"]["merged"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["run_id"].as_str().unwrap())
        .collect();
    assert_eq!(runs.len(), 3);
    assert_eq!(runs[1], report(&parts[1])["run_id"].as_str().unwrap());
    // The same report set a run writes, from the same reporters.
    for f in [
        "report.json",
        "junit.xml",
        "report.sarif",
        "index.html",
        "summary.md",
        "events.ndjson",
    ] {
        assert!(out.join(f).is_file(), "{f}");
    }
    for f in ["index.html", "summary.md"] {
        let t = std::fs::read_to_string(out.join(f)).unwrap();
        assert!(t.contains("Merged from 3 partitions"), "{f}");
    }
    let junit = |d: &Path| std::fs::read_to_string(d.join("junit.xml")).unwrap();
    assert_eq!(
        junit(&root.join("full")).matches("<testcase").count(),
        junit(&out).matches("<testcase").count()
    );
    // The merged events read back as one run's: a merge of a merge is
    // refused as such.
    let again = merge(std::slice::from_ref(&out), &root.join("again"), &[]);
    assert_eq!(again.status.code(), Some(2), "{}", text(&again));
    assert!(text(&again).contains("itself a merge"), "{}", text(&again));
}

#[test]
fn a_mutant_split_and_merged_fails_as_it_does_whole() {
    // A case FAIL (no_dedupe: the IDEM cases) and a check FAIL over the
    // answers of several partitions (stack_trace_in_message:
    // CHK-ERROR-MESSAGE, its first finding and the count of the others).
    for (mutant, only) in [
        ("no_dedupe", ["IDEM-*", "EXE-00*"]),
        ("stack_trace_in_message", ["EXE-*", "NEG-00*"]),
    ] {
        let root = Scratch::new("cetp-partition-test", mutant, true);
        let target = format!("sim:mutant={mutant}");
        let args = ["--target", &target, "--only", only[0], "--only", only[1]];
        let (whole, parts) = whole_and_split(&root, &args, "hash", 3);
        assert_eq!(whole.status.code(), Some(1), "{}", text(&whole));
        let out = root.join("merged");
        let o = merge(&parts, &out, &[]);
        assert_eq!(o.status.code(), Some(1), "{mutant}: {}", text(&o));
        let (w, m) = (report(&root.join("full")), report(&out));
        // The cases' reasons quote the device's counters, which the cases
        // of other partitions did not move: compared without them.
        assert_same_run(&w, &m, false);
        assert_answers_summed(&parts, &m);
        assert!(m["summary"]["fail"].as_u64().unwrap() > 0);
        if mutant == "stack_trace_in_message" {
            let check = m["checks"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["id"] == "CHK-ERROR-MESSAGE")
                .unwrap();
            assert_eq!(check["verdict"], "FAIL");
            assert!(
                check["reason"].as_str().unwrap().contains("more)"),
                "{check}"
            );
        }
    }
}

#[test]
fn merges_that_do_not_add_up_are_refused_naming_why() {
    let root = Scratch::new("cetp-partition-test", "refused", true);
    let base = ["--target", "sim", "--only", "NEG-00*"];
    let with = |extra: &[&str]| {
        let mut a = strings(&base);
        a.extend(strings(extra));
        a
    };
    let d = |n: &str| root.join(n);
    let outs = runs(vec![
        (with(&["--partition", "slice:1/2"]), d("a1")),
        (with(&["--partition", "slice:2/2"]), d("a2")),
        (with(&["--partition", "slice:2/3"]), d("b2")),
        (
            with(&["--partition", "slice:2/2", "--seed", "7"]),
            d("seed"),
        ),
        (with(&[]), d("whole")),
        (
            strings(&[
                "--target",
                "sim:mutant=session_token_predictable",
                "--only",
                "NEG-00*",
                "--partition",
                "slice:2/2",
            ]),
            d("mutant"),
        ),
    ]);
    for o in &outs[..5] {
        assert_eq!(o.status.code(), Some(0), "{}", text(o));
    }
    // A copy of partition 1 under another name.
    std::fs::create_dir_all(d("dup")).unwrap();
    for f in std::fs::read_dir(d("a1")).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, d("dup").join(f.file_name().unwrap())).unwrap();
    }
    let refused = |dirs: &[&str], code: i32, says: &[&str]| {
        let dirs: Vec<PathBuf> = dirs.iter().map(|n| d(n)).collect();
        let o = merge(&dirs, &d("out"), &[]);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(code), "{dirs:?}: {t}");
        for w in says {
            assert!(t.contains(w), "{dirs:?}: wanted {w:?} in {t}");
        }
        assert!(!d("out").join("report.json").exists(), "{dirs:?} wrote");
    };
    let a1 = s(&d("a1")).to_string();
    refused(&["a1"], 2, &["missing partition(s) slice:2/2"]);
    refused(
        &["a1", "a2", "dup"],
        2,
        &["duplicate partition slice:1/2", &a1, s(&d("dup"))],
    );
    refused(
        &["a1", "b2"],
        2,
        &["not partitions of one split", "slice:2/3", s(&d("b2"))],
    );
    refused(
        &["a1", "mutant"],
        2,
        &[
            "the pins differ",
            "(target)",
            "sim:mutant=session_token_predictable",
            s(&d("mutant")),
        ],
    );
    refused(&["a1", "seed"], 2, &["seed (7 vs 1)", s(&d("seed"))]);
    refused(&["a1", "whole"], 2, &["is not a partition", s(&d("whole"))]);
    refused(&["a1", "nowhere"], 2, &["no such report directory"]);
    // A stream cut short (the run died) and one that is not cetp's.
    std::fs::create_dir_all(d("cut")).unwrap();
    let events = std::fs::read_to_string(d("a2").join("events.ndjson")).unwrap();
    let lines: Vec<&str> = events.lines().collect();
    std::fs::write(
        d("cut").join("events.ndjson"),
        lines[..lines.len() - 1].join("\n"),
    )
    .unwrap();
    refused(&["a1", "cut"], 3, &["did not finish", s(&d("cut"))]);
    std::fs::write(
        d("cut").join("events.ndjson"),
        format!(
            "{}\n{{\"event\": \"case_started\", \"case_id\": [\n",
            lines[0]
        ),
    )
    .unwrap();
    refused(&["a1", "cut"], 3, &["line 2 is not a cetp event"]);
    // The output may not be an input.
    let o = merge(&[d("a1"), d("a2")], &d("a1"), &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("one of the partitions' directories"));

    // The complete set merges; filtered with --only, it claims nothing.
    let o = merge(&[d("a2"), d("a1")], &d("out"), &["--require-claim"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let m = report(&d("out"));
    assert_eq!(m["exit_code"], 0);
    assert!(m["claim"]["statement"]
        .as_str()
        .unwrap()
        .contains("filtered with --only"));
    assert_same_run(&report(&d("whole")), &m, true);

    // A part's report replays that part.
    let o = cetp(&[
        "run",
        "--replay-run",
        s(&d("a2").join("report.json")),
        "--report-dir",
        s(&d("replayed")),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let ids = |dir: &Path| -> Vec<Value> {
        report(dir)["cases"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["id"].clone())
            .collect()
    };
    assert_eq!(ids(&d("replayed")), ids(&d("a2")));
    assert_eq!(report(&d("replayed"))["partition"]["index"], 2);
}

#[test]
fn bad_partitions_are_usage_errors() {
    for (bad, says) in [
        ("0/4", "expected slice:M/N"),
        ("slice:0/4", "M must be in 1..=4"),
        ("slice:5/4", "M must be in 1..=4"),
        ("slice:1/0", "N must be at least 1"),
        ("count:1/4", "unknown scheme"),
        ("garbage", "expected slice:M/N"),
    ] {
        let o = cetp(&["run", "--target", "sim", "--partition", bad]);
        assert_eq!(o.status.code(), Some(2), "{bad}: {}", text(&o));
        assert!(text(&o).contains(says), "{bad}: {}", text(&o));
    }
    let o = cetp(&["replay", "NEG-001", "--partition", "slice:1/2"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("runs one case"), "{}", text(&o));
}

#[test]
fn the_lock_case_runs_once_and_known_failures_need_the_baseline() {
    let root = Scratch::new("cetp-partition-test", "lock-baseline", true);
    let d = |n: &str| root.join(n);
    let lock = d("lock.json");
    let o = cetp(&["lock", "--target", "sim", "--out", s(&lock)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let baseline = d("baseline.toml");
    std::fs::write(
        &baseline,
        "[[known_failure]]\nid = \"IDEM-001\"\nreason = \"bug 12\"\n",
    )
    .unwrap();
    // IDEM-001 alone: partition 2 of 2 holds no case at all.
    let args = |m: u32| {
        strings(&[
            "--target",
            "sim:mutant=no_dedupe",
            "--only",
            "IDEM-001",
            "--only",
            "LOCK-*",
            "--lock",
            s(&lock),
            "--baseline",
            s(&baseline),
            "--partition",
            &format!("slice:{m}/2"),
        ])
    };
    let outs = runs(vec![(args(1), d("p1")), (args(2), d("p2"))]);
    for o in &outs {
        assert_eq!(o.status.code(), Some(0), "{}", text(o));
    }
    let ids = |dir: &Path| -> Vec<String> {
        report(dir)["cases"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(ids(&d("p1")), ["IDEM-001", "LOCK-001"]);
    assert!(ids(&d("p2")).is_empty());
    let parts = [d("p1"), d("p2")];
    let o = merge(&parts, &d("out"), &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("give cetp merge the --baseline"),
        "{}",
        text(&o)
    );
    let o = merge(&parts, &d("out"), &["--baseline", s(&baseline)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let m = report(&d("out"));
    assert_eq!(m["cases"][0]["baseline"], "bug 12");
    assert_eq!(m["cases"][1]["id"], "LOCK-001");
    assert_eq!(m["cases"][1]["verdict"], "PASS");
}

/// `cetp run` against `served` for partition 2 of 3 of the IDEM and EXE
/// cases, with the reference's profile (it executes their side effects).
fn served_args(served: &ServedSim, dir: &Path) -> Vec<String> {
    let profile = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../profiles/reference.toml");
    strings(&[
        "run",
        "--target",
        &served.target(),
        "--profile",
        s(&profile),
        "--only",
        "IDEM-*",
        "--only",
        "EXE-*",
        "--partition",
        "slice:2/3",
        "--report-dir",
        s(dir),
    ])
}

#[test]
fn a_partition_killed_mid_run_resumes_as_the_same_partition() {
    let root = Scratch::new("cetp-partition-test", "resume", true);
    let whole = root.join("uninterrupted");
    let o = Command::new(env!("CARGO_BIN_EXE_cetp"))
        .args(served_args(&ServedSim::start_with(&[]), &whole))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));

    // Killed (SIGKILL) once its third side effect was answered, unrecorded.
    let served = ServedSim::start_with(&[]);
    let dir = root.join("killed");
    let mut child = Command::new(env!("CARGO_BIN_EXE_cetp"))
        .args(served_args(&served, &dir))
        .env("CETP_PAUSE_AT", "after:execute_tool:3")
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
    assert!(paused, "the run ended before its third execute_tool");
    let o = cetp(&["resume", s(&dir), "--color", "never"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let (want, got) = (report(&whole), report(&dir));
    assert_eq!(got["partition"], want["partition"]);
    assert_eq!(got["partition"]["index"], 2);
    let verdicts = |r: &Value| -> Vec<(Value, Value)> {
        r["cases"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (c["id"].clone(), c["verdict"].clone()))
            .collect()
    };
    assert_eq!(verdicts(&got), verdicts(&want));
    assert!(verdicts(&got).len() > 3);
}

#[test]
fn partitions_sharded_over_several_devices_merge_into_the_sharded_run() {
    let root = Scratch::new("cetp-partition-test", "sharded", true);
    let args = [
        "--target",
        "sim",
        "--target",
        "sim:seed=2",
        "--only",
        "NEG-*",
        "--only",
        "EXE-*",
    ];
    let (whole, parts) = whole_and_split(&root, &args, "slice", 2);
    assert_eq!(whole.status.code(), Some(0), "{}", text(&whole));
    let out = root.join("merged");
    let o = merge(&parts, &out, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // A sharded run reports its cases as the devices finish them: in
    // another order than the suite's, which the merge keeps.
    let by_id = |mut r: Value| {
        for key in ["cases", "checks"] {
            r[key]
                .as_array_mut()
                .unwrap()
                .sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
        }
        r
    };
    let (w, m) = (by_id(report(&root.join("full"))), by_id(report(&out)));
    assert_same_run(&w, &m, true);
    assert_answers_summed(&parts, &m);
    // The pin and the report list both devices, as the sharded run's.
    assert_eq!(
        m["pin"]["fields"]["target"],
        serde_json::json!(["sim", "sim:seed=2"])
    );
    assert_eq!(m["devices"].as_array().unwrap().len(), 2);
    let devices = |r: &Value| {
        let mut d = r["devices"].clone();
        for one in d.as_array_mut().unwrap() {
            one["hello"]["now_ms"] = Value::Null;
        }
        d
    };
    assert_eq!(devices(&m), devices(&w));
}
