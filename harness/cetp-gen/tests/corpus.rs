//! Every schema of the corpus (`tests/schemas/`, see its README): valid
//! values validate, invalid values fail at the constraint they name, with
//! the jsonschema crate (formats on) as the judge.

use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, TestRunner};
use serde_json::Value as Json;
use std::path::PathBuf;

const VALID_CASES: usize = 200;
const INVALID_CASES: usize = 12;

fn corpus() -> Vec<(String, Json)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/schemas");
    let mut out: Vec<(String, Json)> = std::fs::read_dir(&dir)
        .expect("tests/schemas")
        .filter_map(|e| {
            let p = e.expect("dir entry").path();
            (p.extension()? == "json").then_some(p)
        })
        .map(|p| {
            let entry: Json = serde_json::from_str(&std::fs::read_to_string(&p).expect("read"))
                .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            let name = p.file_stem().expect("stem").to_string_lossy().into_owned();
            (name, entry["schema"].clone())
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn judge(schema: &Json) -> jsonschema::Validator {
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .should_validate_formats(true)
        .offline()
        .build(schema)
        .expect("corpus schemas compile")
}

fn runner() -> TestRunner {
    TestRunner::new_with_rng(
        Config {
            max_local_rejects: 1_000_000,
            ..Config::default()
        },
        proptest::test_runner::TestRng::deterministic_rng(
            proptest::test_runner::RngAlgorithm::ChaCha,
        ),
    )
}

#[test]
fn the_corpus_holds_at_least_30_schemas() {
    let c = corpus();
    assert!(c.len() >= 30, "{} schemas", c.len());
    let kinds: Vec<String> =
        std::fs::read_dir(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/schemas"))
            .expect("dir")
            .filter_map(|e| {
                let p = e.ok()?.path();
                let j: Json = serde_json::from_str(&std::fs::read_to_string(p).ok()?).ok()?;
                j["kind"].as_str().map(str::to_string)
            })
            .collect();
    assert!(
        kinds.iter().all(|k| k == "flat" || k == "nested"),
        "{kinds:?}"
    );
    assert!(kinds.iter().filter(|k| *k == "nested").count() >= 10);
}

#[test]
fn valid_values_validate() {
    for (name, schema) in corpus() {
        let v = judge(&schema);
        let s = cetp_gen::valid(&schema).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut r = runner();
        for _ in 0..VALID_CASES {
            let value = s
                .new_tree(&mut r)
                .unwrap_or_else(|e| panic!("{name}: {e}"))
                .current();
            let errors: Vec<String> = v
                .iter_errors(&value)
                .map(|e| format!("{} {e}", e.evaluation_path()))
                .collect();
            assert!(errors.is_empty(), "{name}: {value} is invalid: {errors:?}");
        }
    }
}

/// Each invalid value fails, and one of its errors is at the keyword its
/// violation names (through `$ref`, as the evaluation path goes).
#[test]
fn invalid_values_fail_at_the_named_constraint() {
    let mut only_that = 0usize;
    let mut total = 0usize;
    for (name, schema) in corpus() {
        let v = judge(&schema);
        let violations = cetp_gen::invalid(&schema).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(!violations.is_empty(), "{name}: no violation offered");
        let mut r = runner();
        for (violation, s) in &violations {
            let expected = if violation.keyword == "false" {
                violation.pointer.clone()
            } else {
                format!("{}/{}", violation.pointer, violation.keyword)
            };
            for _ in 0..INVALID_CASES {
                let value = s
                    .new_tree(&mut r)
                    .unwrap_or_else(|e| panic!("{name} {violation}: {e}"))
                    .current();
                let paths: Vec<String> = v
                    .iter_errors(&value)
                    .map(|e| e.evaluation_path().to_string())
                    .collect();
                assert!(!paths.is_empty(), "{name} {violation}: {value} is valid");
                assert!(
                    paths.contains(&expected),
                    "{name} {violation}: {value} fails elsewhere: {paths:?}"
                );
                total += 1;
                only_that += usize::from(paths.iter().all(|p| *p == expected));
            }
        }
    }
    // "Valid everywhere else": the named error is the only one for nearly
    // all values (a value one character short of minLength may, say, also
    // end a pattern early).
    assert!(
        only_that * 100 >= total * 95,
        "{only_that} of {total} break only the named constraint"
    );
}

#[test]
fn every_constraint_of_a_fixture_is_offered() {
    let schema = corpus()
        .into_iter()
        .find(|(n, _)| n == "add_note.input")
        .expect("add_note.input")
        .1;
    let names: Vec<String> = cetp_gen::invalid(&schema)
        .expect("generates")
        .into_iter()
        .map(|(v, _)| v.to_string())
        .collect();
    assert_eq!(
        names,
        [
            "additionalProperties",
            "required",
            "type",
            "/properties/body maxLength",
            "/properties/body type",
            "/properties/share_publicly type",
            "/properties/title maxLength",
            "/properties/title minLength",
            "/properties/title type",
        ]
    );
}
