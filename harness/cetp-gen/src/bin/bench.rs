//! Throughput and correctness of cetp-gen over a schema corpus, one JSON
//! line per schema (scripts/gen-bench.sh prints them beside
//! hypothesis-jsonschema's figures).
//!
//! Usage: cetp-gen-bench DIR [SECONDS_PER_SCHEMA]
//!
//! values_per_s counts valid values drawn from the strategy (strategy
//! construction excluded, as on the Python side); valid_pct judges them with
//! the jsonschema crate, formats on; invalid_fail_pct judges
//! `INVALID_PER_VIOLATION` values of every violation offered.

use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::{json, Value as Json};
use std::time::{Duration, Instant};

const INVALID_PER_VIOLATION: usize = 20;
/// Values kept for judging after the timed loop, so that validation is not
/// timed as generation.
const MAX_VALUES: usize = 200_000;

fn judge(schema: &Json) -> Result<jsonschema::Validator, String> {
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .should_validate_formats(true)
        .offline()
        .build(schema)
        .map_err(|e| e.to_string())
}

fn runner() -> TestRunner {
    // Rejections are counted per runner for its whole life; the figures
    // here are about throughput, not a rejection budget.
    TestRunner::new_with_rng(
        Config {
            max_local_rejects: u32::MAX,
            ..Config::default()
        },
        TestRng::deterministic_rng(RngAlgorithm::ChaCha),
    )
}

fn measure(schema: &Json, budget: Duration) -> Result<Json, String> {
    let v = judge(schema)?;
    let g = cetp_gen::Generator::new(schema).map_err(|e| e.to_string())?;
    let valid = g.valid().map_err(|e| e.to_string())?;
    let mut r = runner();
    let mut values = Vec::new();
    let start = Instant::now();
    while start.elapsed() < budget && values.len() < MAX_VALUES {
        values.push(valid.new_tree(&mut r).map_err(|e| e.to_string())?.current());
    }
    let elapsed = start.elapsed().as_secs_f64();
    let ok = values.iter().filter(|x| v.is_valid(x)).count();

    let violations = g.invalid().map_err(|e| e.to_string())?;
    let (mut failed, mut drawn) = (0usize, 0usize);
    for (_, s) in &violations {
        for _ in 0..INVALID_PER_VIOLATION {
            let x = s.new_tree(&mut r).map_err(|e| e.to_string())?.current();
            drawn += 1;
            failed += usize::from(!v.is_valid(&x));
        }
    }
    Ok(json!({
        "values": values.len(),
        "values_per_s": values.len() as f64 / elapsed,
        "valid_pct": 100.0 * ok as f64 / values.len().max(1) as f64,
        "violations": violations.len(),
        "invalid_fail_pct": if drawn == 0 { Json::Null } else { json!(100.0 * failed as f64 / drawn as f64) },
    }))
}

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = args.next().unwrap_or_else(|| {
        eprintln!("usage: cetp-gen-bench DIR [SECONDS_PER_SCHEMA]");
        std::process::exit(2)
    });
    let seconds: f64 = args
        .next()
        .map_or(0.5, |s| s.parse().expect("SECONDS_PER_SCHEMA is a number"));
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| {
            eprintln!("{dir}: {e}");
            std::process::exit(2)
        })
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    for p in paths {
        let entry: Json = serde_json::from_str(&std::fs::read_to_string(&p).expect("readable"))
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let name = p
            .file_stem()
            .expect("a file name")
            .to_string_lossy()
            .into_owned();
        let mut line = match measure(&entry["schema"], Duration::from_secs_f64(seconds)) {
            Ok(m) => m,
            Err(e) => json!({ "error": e }),
        };
        line["schema"] = json!(name);
        line["kind"] = entry["kind"].clone();
        println!("{line}");
    }
}
