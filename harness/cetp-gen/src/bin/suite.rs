//! cetp-gen over the official JSON-Schema-Test-Suite (draft 2020-12): every
//! test group's schema, each in its own process with a time limit, must
//! either generate (valid values the schema accepts, invalid values it
//! rejects) or be refused with a named reason, and a refusal must be one
//! the known-refusals list expects.
//!
//! Usage: cetp-gen-suite SUITE_DIR [--refused FILE] [--limit-ms N] [--jsonl]
//!
//! SUITE_DIR is the suite's `tests/draft2020-12` directory: its top-level
//! groups and those of `optional/format/` (the formats are asserted here,
//! as cetp asserts them) are run. `--refused` is the known-refusals list
//! (harness/cetp-gen/tests/suite/README.md); without it every refusal is
//! only counted. `--jsonl` prints one line per schema instead of the table.
//!
//! Exit status: 0 when nothing hung, nothing generated was wrong, every
//! refusal was expected and every expected refusal still happened; 1
//! otherwise; 2 on bad usage.

use proptest::test_runner::{RngAlgorithm, TestRng};
use serde_json::{json, Value as Json};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Valid values drawn per schema, and invalid values per violation.
const VALID_DRAWS: usize = 64;
const INVALID_DRAWS: usize = 4;
/// Bound on one child's answer (a line of JSON).
const MAX_ANSWER: u64 = 64 * 1024;

fn usage() -> ! {
    eprintln!("usage: cetp-gen-suite SUITE_DIR [--refused FILE] [--limit-ms N] [--jsonl]");
    std::process::exit(2)
}

fn judge(schema: &Json) -> Result<jsonschema::Validator, String> {
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .should_validate_formats(true)
        .offline()
        .build(schema)
        .map_err(|e| e.to_string())
}

fn refusal(e: &cetp_gen::GenError) -> Json {
    json!({
        "status": "refused",
        "kind": format!("{:?}", e.kind),
        "keyword": e.keyword,
        "pointer": e.pointer,
        "message": e.to_string(),
    })
}

/// One schema, in the child process: generate, judge, answer one line.
fn one(schema: &Json) -> Json {
    // Ten times the default time, the default attempts: what is refused
    // for want of budget is decided by attempt counts on fixed seeds, the
    // same on a loaded CI machine as here.
    let budget = cetp_gen::Budget::default().slower(10);
    let g = match cetp_gen::Generator::with_budget(schema, budget) {
        Ok(g) => g,
        Err(e) => return refusal(&e),
    };
    let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
    let values = match g.draw_valid_n(&mut rng, VALID_DRAWS) {
        Ok(v) => v,
        Err(e) => return refusal(&e),
    };
    // The judge compiles what the generator accepted: a schema it cannot
    // compile would have been refused above.
    let v = match judge(schema) {
        Ok(v) => v,
        Err(e) => return json!({"status": "wrong", "why": format!("judge: {e}")}),
    };
    let mut wrong = Vec::new();
    for x in &values {
        if !v.is_valid(x) {
            wrong.push(json!({"valid_but_rejected": x}));
        }
    }
    let mut invalid_drawn = 0;
    let mut violations = 0;
    match g.draw_invalid(&mut rng, INVALID_DRAWS) {
        Ok(per) => {
            for (violation, xs) in per {
                violations += 1;
                for x in xs {
                    invalid_drawn += 1;
                    if v.is_valid(&x) {
                        wrong.push(
                            json!({"invalid_but_accepted": x, "violation": violation.to_string()}),
                        );
                    }
                }
            }
        }
        Err(e) => return refusal(&e),
    }
    let valid_rejected = wrong
        .iter()
        .filter(|w| w.get("valid_but_rejected").is_some())
        .count();
    let counts = json!({
        "valid": values.len(),
        "valid_rejected": valid_rejected,
        "violations": violations,
        "invalid": invalid_drawn,
        "invalid_accepted": wrong.len() - valid_rejected,
    });
    let mut answer = if wrong.is_empty() {
        json!({"status": "ok"})
    } else {
        wrong.truncate(5);
        json!({"status": "wrong", "why": wrong})
    };
    for (k, v) in counts.as_object().expect("an object") {
        answer[k] = v.clone();
    }
    answer
}

fn child(file: &Path, index: usize) -> ! {
    let groups: Json = serde_json::from_str(&std::fs::read_to_string(file).expect("readable"))
        .expect("a suite file is JSON");
    println!("{}", one(&groups[index]["schema"]));
    std::process::exit(0)
}

struct Group {
    id: String,
    file: PathBuf,
    index: usize,
}

fn groups(dir: &Path) -> Vec<Group> {
    let mut files: Vec<PathBuf> = Vec::new();
    for sub in [dir.to_path_buf(), dir.join("optional").join("format")] {
        let Ok(rd) = std::fs::read_dir(&sub) else {
            continue;
        };
        files.extend(
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "json")),
        );
    }
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let rel = f
            .strip_prefix(dir)
            .unwrap_or(&f)
            .to_string_lossy()
            .into_owned();
        let text = std::fs::read_to_string(&f).unwrap_or_else(|e| {
            eprintln!("{}: {e}", f.display());
            std::process::exit(2)
        });
        let parsed: Json = serde_json::from_str(&text).unwrap_or_else(|e| {
            eprintln!("{}: {e}", f.display());
            std::process::exit(2)
        });
        for (i, g) in parsed.as_array().into_iter().flatten().enumerate() {
            let desc = g["description"].as_str().unwrap_or("");
            out.push(Group {
                id: format!("{rel}: {desc}"),
                file: f.clone(),
                index: i,
            });
        }
    }
    out
}

/// Runs one schema in a child process; None when it did not answer in time.
fn run(exe: &Path, g: &Group, limit: Duration) -> Option<Json> {
    let mut c = Command::new(exe)
        .arg("--one")
        .arg(&g.file)
        .arg(g.index.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the suite runner starts itself");
    let start = Instant::now();
    loop {
        match c.try_wait().expect("wait on the child") {
            Some(_) => break,
            None if start.elapsed() > limit => {
                let _ = c.kill();
                let _ = c.wait();
                return None;
            }
            None => std::thread::sleep(Duration::from_millis(2)),
        }
    }
    let mut out = String::new();
    let _ = c
        .stdout
        .take()
        .expect("piped")
        .take(MAX_ANSWER)
        .read_to_string(&mut out);
    Some(serde_json::from_str(out.trim()).unwrap_or_else(
        |_| json!({"status": "wrong", "why": format!("the child crashed: {:?}", out.trim())}),
    ))
}

/// The command line of a suite run (the `--one` child aside).
struct Options {
    dir: PathBuf,
    refused_file: Option<String>,
    limit: Duration,
    jsonl: bool,
}

fn options(args: Vec<String>) -> Options {
    let mut dir = None;
    let mut refused_file = None;
    let mut limit = Duration::from_secs(5);
    let mut jsonl = false;
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--refused" => refused_file = Some(it.next().unwrap_or_else(|| usage())),
            "--limit-ms" => {
                limit = Duration::from_millis(
                    it.next()
                        .and_then(|n| n.parse().ok())
                        .unwrap_or_else(|| usage()),
                )
            }
            "--jsonl" => jsonl = true,
            _ if dir.is_none() => dir = Some(PathBuf::from(a)),
            _ => usage(),
        }
    }
    Options {
        dir: dir.unwrap_or_else(|| usage()),
        refused_file,
        limit,
        jsonl,
    }
}

/// The known-refusals list, by schema id; every entry must give a reason.
fn known_refusals(f: &str) -> BTreeMap<String, Json> {
    let list: Json = serde_json::from_str(&std::fs::read_to_string(f).unwrap_or_else(|e| {
        eprintln!("{f}: {e}");
        std::process::exit(2)
    }))
    .unwrap_or_else(|e| {
        eprintln!("{f}: {e}");
        std::process::exit(2)
    });
    let mut m = BTreeMap::new();
    for e in list["refused"].as_array().into_iter().flatten() {
        let id = e["schema"].as_str().unwrap_or_else(|| {
            eprintln!("{f}: an entry without a \"schema\" string");
            std::process::exit(2)
        });
        if e["reason"].as_str().is_none_or(str::is_empty) {
            eprintln!("{f}: {id}: an entry without a reason");
            std::process::exit(2)
        }
        m.insert(id.to_string(), e.clone());
    }
    m
}

/// What a child's answer (None: it hung) counts as.
fn status_of(answer: &Option<Json>) -> &'static str {
    match answer {
        None => "hang",
        Some(a) => match a["status"].as_str() {
            Some("ok") => "generated",
            Some("refused") => "refused",
            _ => "wrong",
        },
    }
}

/// The failure one schema's result is, if any: a hang, a wrong value, a
/// refusal the known-refusals list does not expect (or expects otherwise),
/// or a listed refusal that now generates.
fn failure(
    g: &Group,
    status: &str,
    answer: &Option<Json>,
    expected: &BTreeMap<String, Json>,
    checking_refusals: bool,
    limit: Duration,
) -> Option<String> {
    let listed = expected.contains_key(&g.id);
    match status {
        "hang" => Some(format!(
            "{}: no answer within {} ms",
            g.id,
            limit.as_millis()
        )),
        "wrong" => Some(format!(
            "{}: {}",
            g.id,
            answer.as_ref().map_or(Json::Null, |a| a["why"].clone())
        )),
        "refused" if checking_refusals && !listed => Some(format!(
            "{}: refused, and not on the known-refusals list: {}",
            g.id,
            answer
                .as_ref()
                .and_then(|a| a["message"].as_str())
                .unwrap_or("")
        )),
        "refused" if listed => {
            let e = &expected[&g.id];
            let a = answer.as_ref().expect("refused means answered");
            (e["kind"] != a["kind"] || e["keyword"] != a["keyword"]).then(|| {
                format!(
                    "{}: refused as {} `{}`, but the known-refusals list expects {} `{}`: {}",
                    g.id,
                    a["kind"].as_str().unwrap_or(""),
                    a["keyword"].as_str().unwrap_or(""),
                    e["kind"].as_str().unwrap_or(""),
                    e["keyword"].as_str().unwrap_or(""),
                    a["message"].as_str().unwrap_or("")
                )
            })
        }
        "generated" if listed => Some(format!(
            "{}: on the known-refusals list but now generates: drop the entry",
            g.id
        )),
        _ => None,
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--one") {
        let (Some(f), Some(i)) = (args.get(1), args.get(2).and_then(|i| i.parse().ok())) else {
            usage()
        };
        child(Path::new(f), i);
    }
    let Options {
        dir,
        refused_file,
        limit,
        jsonl,
    } = options(args);
    let expected: BTreeMap<String, Json> = match &refused_file {
        Some(f) => known_refusals(f),
        None => BTreeMap::new(),
    };
    let exe = std::env::current_exe().expect("own path");
    let all = groups(&dir);
    if all.is_empty() {
        eprintln!(
            "{}: no test groups (is this the suite's tests/draft2020-12?)",
            dir.display()
        );
        std::process::exit(2);
    }
    let started = Instant::now();
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    let mut failures = Vec::new();
    let mut slowest = (Duration::ZERO, String::new());
    let mut seen = Vec::new();
    for g in &all {
        let t = Instant::now();
        let answer = run(&exe, g, limit);
        let took = t.elapsed();
        if took > slowest.0 {
            slowest = (took, g.id.clone());
        }
        let status = status_of(&answer);
        *counts.entry(status).or_default() += 1;
        if jsonl {
            let mut line = answer.clone().unwrap_or(json!({}));
            line["schema"] = json!(g.id);
            line["result"] = json!(status);
            line["ms"] = json!(took.as_millis() as u64);
            println!("{line}");
        }
        if expected.contains_key(&g.id) {
            seen.push(g.id.clone());
        }
        failures.extend(failure(
            g,
            status,
            &answer,
            &expected,
            refused_file.is_some(),
            limit,
        ));
    }
    for id in expected.keys() {
        if !seen.contains(id) {
            failures.push(format!(
                "{id}: on the known-refusals list but matches no schema of the suite: drop or fix the entry"
            ));
        }
    }
    if !jsonl {
        println!("| of {} schemas | count |", all.len());
        println!("|---|---|");
        for (k, n) in &counts {
            println!("| {k} | {n} |");
        }
        println!(
            "suite: {} s in all, slowest {} ms ({}); limit {} ms per schema",
            started.elapsed().as_secs(),
            slowest.0.as_millis(),
            slowest.1,
            limit.as_millis()
        );
    }
    for f in &failures {
        eprintln!("FAIL {f}");
    }
    if !failures.is_empty() {
        eprintln!("cetp-gen-suite: {} failure(s)", failures.len());
        std::process::exit(1);
    }
}
