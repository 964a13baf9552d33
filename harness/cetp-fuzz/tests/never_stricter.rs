//! The fuzz oracle is never stricter than the suite (design.md): the
//! descriptor oracle, judging a Provider it knows only by its descriptors,
//! accepts every answer the suite's own cases accept.
//!
//! The answers the suite accepts are those of the conforming Providers it
//! passes: the reference and each of its legal variants, which `cetp
//! selftest` holds to a clean run of the whole suite. Each is taken here as
//! a foreign target, and each Provider case of the suite is put to the
//! descriptor oracle as a fuzz sequence is: its steps in the generator's
//! language, every expectation of the suite replaced by the oracle's own
//! (the placeholder `{}`), the suite's judgements of bound values dropped
//! (they are the suite's, not the oracle's). A finding is an answer the
//! suite accepts and the oracle does not. Exceptions are data
//! (`vectors/oracle/never-stricter.json`), each with the clause that makes
//! the oracle's reading the right one; an exception that no longer fails
//! fails the test, as a stale baseline entry does.
//!
//! `CETP_NEVER_STRICTER=NAME,NAME` narrows the run to those targets
//! (`reference` or legal variant names), for a developer's quick look.

use cetp_fuzz::moves::{GenStep, Meta};
use cetp_fuzz::{FuzzConfig, Fuzzer, Judgement, OracleChoice};
use cetp_targets::{open, TargetSpec};
use cetp_vectors::profile::Profile;
use cetp_vectors::suite::Suite;
use serde_json::{json, Value as Json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Steps that judge what earlier steps bound: the suite's own judgements,
/// which a fuzz sequence's oracle does not compile (it keeps its own).
const SUITE_JUDGEMENTS: &[&str] = &[
    "same",
    "equal",
    "differ",
    "assert",
    "tokens_unpredictable",
    "revision_consistent",
    "v1_read_only",
    "cancel_consistent",
    "expect_effects",
    "read_fd",
];

/// A suite case's steps as a fuzz sequence's: every expectation the
/// oracle's to compile.
fn as_sequence(steps: &[Json]) -> Vec<GenStep> {
    steps
        .iter()
        .filter(|s| {
            !SUITE_JUDGEMENTS.contains(&s.get("do").and_then(Json::as_str).unwrap_or_default())
        })
        .map(|s| {
            let mut s = s.clone();
            placeholder(&mut s);
            if let Some(sub) = s.get_mut("steps").and_then(Json::as_array_mut) {
                for c in sub {
                    placeholder(c);
                }
            }
            GenStep {
                step: s,
                meta: Meta::Plain,
            }
        })
        .collect()
}

fn placeholder(s: &mut Json) {
    if let Some(o) = s.as_object_mut() {
        if o.contains_key("expect") {
            o.insert("expect".into(), json!({}));
        }
    }
}

/// The conforming targets: the reference and every legal variant, each
/// with the profile its vendor would write.
fn targets() -> Vec<(String, String, String)> {
    let data: Json = serde_json::from_str(
        &std::fs::read_to_string(root().join("vectors/variants/variants.json")).unwrap(),
    )
    .unwrap();
    let mut out = vec![(
        "reference".to_string(),
        "sim".to_string(),
        "reference.toml".to_string(),
    )];
    for v in data["variants"].as_array().unwrap() {
        out.push((
            v["name"].as_str().unwrap().to_string(),
            v["target"].as_str().unwrap().to_string(),
            v["profile"].as_str().unwrap().to_string(),
        ));
    }
    if let Ok(only) = std::env::var("CETP_NEVER_STRICTER") {
        let only: BTreeSet<&str> = only.split(',').collect();
        out.retain(|(n, _, _)| only.contains(n.as_str()));
    }
    out
}

/// `target name` → case id → the clause that makes the oracle right.
fn exceptions() -> BTreeMap<(String, String), String> {
    let data: Json = serde_json::from_str(
        &std::fs::read_to_string(root().join("vectors/oracle/never-stricter.json")).unwrap(),
    )
    .unwrap();
    data["exceptions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let reason = e["reason"].as_str().unwrap_or_default();
            let clause = e["clause"].as_str().unwrap_or_default();
            assert!(
                !reason.is_empty() && !clause.is_empty(),
                "an exception needs its reason and clause: {e}"
            );
            (
                (
                    e["target"].as_str().unwrap().to_string(),
                    e["case"].as_str().unwrap().to_string(),
                ),
                format!("{clause}: {reason}"),
            )
        })
        .collect()
}

#[test]
fn the_descriptor_oracle_accepts_every_answer_the_suite_accepts() {
    let suite = Suite::load(&root().join("vectors")).unwrap();
    let exceptions = exceptions();
    let mut stricter = Vec::new();
    let mut excepted_seen = BTreeSet::new();
    let mut judged = 0usize;
    for (name, target, profile) in targets() {
        let profile = Profile::from_toml(
            &std::fs::read_to_string(root().join("profiles").join(&profile)).unwrap(),
        )
        .unwrap();
        let t = open(&TargetSpec::parse(&target).unwrap()).unwrap();
        let (_, env) = cetp_conformance::runner::identify(&t, &profile).unwrap();
        let cfg = FuzzConfig {
            seed: 5,
            cases: Some(0),
            oracle: OracleChoice::Descriptor,
            ..FuzzConfig::default()
        };
        let manifest = env.manifest_kind.clone();
        let mut f = Fuzzer::new(t, &profile, env, &suite.rules, cfg).unwrap();
        let (mut passed, mut unjudged) = (0usize, 0usize);
        for (k, case) in suite.cases.iter().enumerate() {
            if case.role != cetp_vectors::vector::Role::Provider
                || (!case.manifests.is_empty() && !case.manifests.contains(&manifest))
            {
                continue;
            }
            let steps: Vec<Json> = case
                .steps
                .iter()
                .map(|s| serde_json::to_value(s).unwrap())
                .collect();
            let seq = as_sequence(&steps);
            let key = (name.clone(), case.id.clone());
            match f.judge_steps(&seq, 1_000 + k as u64) {
                Judgement::Finding { signature, message } => {
                    if exceptions.contains_key(&key) {
                        excepted_seen.insert(key);
                    } else {
                        stricter.push(format!("{name} {}: {signature}: {message}", case.id));
                    }
                }
                Judgement::OracleNotes(n) => {
                    stricter.push(format!("{name} {}: oracle note: {}", case.id, n.join("; ")))
                }
                Judgement::Pass => passed += 1,
                Judgement::Unjudged => unjudged += 1,
            }
        }
        eprintln!("{name}: {passed} cases judged and passed, {unjudged} left nothing to judge");
        judged += passed;
    }
    let stale: Vec<String> = exceptions
        .iter()
        .filter(|(k, _)| !excepted_seen.contains(*k) && targets().iter().any(|(n, _, _)| *n == k.0))
        .map(|((t, c), why)| format!("{t} {c} ({why})"))
        .collect();
    assert!(
        stricter.is_empty(),
        "the descriptor oracle refused answers the suite accepts:\n{}",
        stricter.join("\n")
    );
    assert!(
        stale.is_empty(),
        "exceptions that no longer fail (remove them):\n{}",
        stale.join("\n")
    );
    assert!(judged > 0, "nothing was judged");
}
