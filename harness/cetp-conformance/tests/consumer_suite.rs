//! The Consumer suite proves itself: the reference Consumer passes every
//! scenario, every Consumer mutant is caught by a finding citing the
//! requirement it breaks, and the data (scenarios, mutants, catalog) agree.

use cetp_conformance::consumer::{self, judge::CHECKS, scenario, ConsumerMutantDoc};
use cetp_conformance::event::Verdict;
use cetp_reference::consumer::{ConsumerConfig, ConsumerMutant};
use serde_json::Value as Json;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn scenarios() -> Vec<scenario::Scenario> {
    scenario::load_dir(&repo().join("vectors/consumer")).unwrap()
}

fn mutants() -> Vec<ConsumerMutantDoc> {
    consumer::load_mutants(&repo().join("vectors/mutants/consumer-mutants.json")).unwrap()
}

fn catalog() -> BTreeMap<String, Json> {
    let text = std::fs::read_to_string(repo().join("vectors/requirements/catalog.json")).unwrap();
    let v: Json = serde_json::from_str(&text).unwrap();
    v["requirements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["id"].as_str().unwrap().to_string(), r.clone()))
        .collect()
}

#[test]
fn the_reference_consumer_passes_every_scenario() {
    let all = scenarios();
    assert!(all.len() >= 20, "{} scenarios", all.len());
    for s in &all {
        let r = consumer::run_in_process(s, &ConsumerConfig::default()).unwrap();
        assert_eq!(
            r.verdict,
            Verdict::Pass,
            "{}: {:#?}\nacts: {:#?}",
            s.id,
            r.findings,
            r.acts
        );
        assert!(r.not_judged.is_empty(), "{}: {:?}", s.id, r.not_judged);
        assert!(
            r.calls > 0 || s.id == "CSES-002",
            "{}: no call was made",
            s.id
        );
    }
}

#[test]
fn every_consumer_mutant_is_killed_citing_its_requirement() {
    let result = consumer::selftest(&scenarios(), &mutants(), &[]).unwrap();
    assert!(result.reference_clean());
    let survivors: Vec<&str> = result
        .mutants
        .iter()
        .filter(|m| !m.killed())
        .map(|m| m.name.as_str())
        .collect();
    assert!(
        survivors.is_empty(),
        "surviving Consumer mutants: {survivors:?}"
    );
    for m in &result.mutants {
        for k in &m.kills {
            assert!(k.cited.iter().any(|c| m.requirements.contains(c)));
            assert!(!k.message.is_empty());
        }
    }
    assert!(result.ok());
    assert!(result.mutants.len() >= 20);
}

#[test]
fn the_mutant_file_follows_the_fault_enum() {
    let docs = mutants();
    let names: Vec<&str> = docs.iter().map(|m| m.name.as_str()).collect();
    let enum_names: Vec<&str> = ConsumerMutant::ALL.iter().map(|f| f.name()).collect();
    assert_eq!(names, enum_names);
    let cat = catalog();
    for m in &docs {
        assert!(!m.requirements.is_empty(), "{}", m.name);
        assert!(!m.description.is_empty(), "{}", m.name);
        for r in &m.requirements {
            let entry = cat
                .get(r)
                .unwrap_or_else(|| panic!("{}: unknown {r}", m.name));
            assert!(
                ["consumer", "both"].contains(&entry["side"].as_str().unwrap()),
                "{}: {r} is not a consumer requirement",
                m.name
            );
            let section = entry["section"].as_str().unwrap();
            assert!(
                m.sections.iter().any(|s| s == section),
                "{}: {r} is in §{section}",
                m.name
            );
        }
    }
}

#[test]
fn scenarios_cite_consumer_requirements_at_their_level() {
    let cat = catalog();
    let spec = std::fs::read_to_string(repo().join("../shared/spec/cetp-v2.zh.md")).ok();
    let known: BTreeSet<&str> = CHECKS.iter().map(|(k, _)| *k).collect();
    for s in scenarios() {
        assert!(["MUST", "SHOULD"].contains(&s.level.as_str()), "{}", s.id);
        assert!(!s.expect.is_empty(), "{}", s.id);
        for e in &s.expect {
            assert!(
                known.contains(e.check.name()),
                "{}: check {}",
                s.id,
                e.check.name()
            );
            for r in e.requirements.iter().flatten() {
                assert!(
                    s.requirements.contains(r),
                    "{}: {} cites {r}, not in the scenario",
                    s.id,
                    e.check.name()
                );
            }
        }
        for r in &s.requirements {
            let entry = cat
                .get(r)
                .unwrap_or_else(|| panic!("{}: unknown {r}", s.id));
            assert!(
                ["consumer", "both"].contains(&entry["side"].as_str().unwrap()),
                "{}: {r}",
                s.id
            );
            if s.level == "MUST" {
                let level = entry["level"].as_str().unwrap();
                assert!(
                    ["MUST", "MUST_NOT"].contains(&level),
                    "{}: {r} is {level}",
                    s.id
                );
                if let Some(spec) = &spec {
                    let line = entry["source"]["line"].as_u64().unwrap() as usize;
                    let text = spec.lines().nth(line - 1).unwrap_or_default();
                    assert!(
                        text.contains("必须") || text.contains("不得"),
                        "{}: the clause of {r} (line {line}) holds no MUST or MUST NOT",
                        s.id
                    );
                }
            }
        }
        for (i, a) in s.acts.iter().enumerate() {
            consumer::action_of(a).unwrap_or_else(|e| panic!("{}: act {i}: {e}", s.id));
        }
    }
}

#[test]
fn scenario_files_follow_their_schema_and_the_schema_knows_every_check() {
    let schema: Json = serde_json::from_str(
        &std::fs::read_to_string(repo().join("vectors/schema/consumer.schema.json")).unwrap(),
    )
    .unwrap();
    let validator = jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .unwrap();
    let mut n = 0;
    for entry in std::fs::read_dir(repo().join("vectors/consumer")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let doc: Json = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let errors: Vec<String> = validator
            .iter_errors(&doc)
            .map(|e| format!("{}: {e}", e.instance_path()))
            .take(5)
            .collect();
        assert!(errors.is_empty(), "{}: {errors:?}", path.display());
        n += 1;
    }
    assert!(n >= 5);
    let in_schema: BTreeSet<&str> = schema["$defs"]["expect"]["properties"]["check"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    let known: BTreeSet<&str> = CHECKS.iter().map(|(k, _)| *k).collect();
    assert_eq!(in_schema, known);
    // A scenario the schema refuses: an unknown reply form.
    let bad = serde_json::json!({"format_version": 1, "group": "x", "scenarios": [
        {"id": "CX-001", "title": "t", "role": "consumer", "level": "MUST",
         "requirements": ["CETP2-5-23"], "acts": [{"do": "connect"}],
         "script": [{"when": {"method": "execute_tool"}, "reply": {"explode": true}}],
         "expect": [{"check": "no_crash"}]}]});
    assert!(!validator.is_valid(&bad));
}

/// §7.3 fixes no bound: a bound scenario FAILs only a Consumer that declared
/// a smaller figure and accepted more, is not judged when the declared
/// figure admits its size, and at most WARNs when nothing is declared.
#[test]
fn a_bound_the_spec_leaves_open_is_judged_by_the_declared_figure() {
    let all = scenarios();
    let deep = all.iter().find(|s| s.id == "CDATA-002").unwrap();
    assert_eq!(deep.bound.as_ref().unwrap().limit, "max_json_depth");
    let mutant = ConsumerConfig {
        faults: vec![ConsumerMutant::JsonDepthUnbounded],
        ..ConsumerConfig::default()
    };
    // Declares 32 and accepts 48: FAIL.
    let r = consumer::run_in_process(deep, &mutant).unwrap();
    assert_eq!(r.verdict, Verdict::Fail, "{:?}", r.findings);
    // Declares 64: a 48-deep result is within what it accepts.
    let mut wide = ConsumerConfig::default();
    wide.limits.max_json_depth = 64;
    let r = consumer::run_in_process(deep, &wide).unwrap();
    assert_eq!(r.verdict, Verdict::NotApplicable, "{:?}", r.findings);
    assert!(
        r.not_judged[0].contains("max_json_depth = 64"),
        "{:?}",
        r.not_judged
    );
    // Declares nothing (a device without [bounds]): the same findings WARN.
    let r = consumer::run_in_process(deep, &mutant).unwrap();
    let trace_acts = r.acts.clone();
    let trace = consumer::judge::Trace {
        calls: &[],
        acts: &trace_acts,
        intents: &[],
        fds: None,
        resolves: None,
        decoy_calls: &[],
        fd_closes: None,
    };
    let undeclared = consumer::judge_run(deep, &trace, &consumer::DeclaredBounds::default());
    assert_eq!(
        undeclared.verdict,
        Verdict::Warn,
        "{:?}",
        undeclared.findings
    );
    assert!(undeclared
        .not_judged
        .iter()
        .any(|n| n.contains("declares no max_json_depth")));
    // The bound figures a profile declares are read from its [bounds].
    let p = consumer::ConsumerProfile::from_toml(
        "[driver]\ncommand = [\"x\"]\n[bounds]\nmax_json_depth = 20\nmax_description_bytes = 65536\n",
    )
    .unwrap();
    assert_eq!(p.bounds.get("max_json_depth"), Some(20));
    assert_eq!(p.bounds.get("max_file_bytes"), None);
    assert!(consumer::ConsumerProfile::from_toml(
        "[driver]\ncommand = [\"x\"]\n[bounds]\nmax_depth = 2\n"
    )
    .is_err());
}

fn variants() -> Vec<consumer::ConsumerVariantDoc> {
    consumer::load_variants(&repo().join("vectors/variants/consumer-variants.json")).unwrap()
}

#[test]
fn consumer_variants_are_data_in_step_with_the_latitudes_and_cite_their_clause() {
    use cetp_reference::consumer::ConsumerVariant;
    let docs = variants();
    let names: Vec<&str> = docs.iter().map(|v| v.name.as_str()).collect();
    let all: Vec<&str> = ConsumerVariant::ALL.iter().map(|l| l.name()).collect();
    assert_eq!(
        names, all,
        "consumer-variants.json and ConsumerVariant::ALL differ"
    );
    assert!(docs.len() >= 15, "{} Consumer legal variants", docs.len());
    let cat = catalog();
    for v in &docs {
        assert!(
            ["MAY", "UNSPECIFIED"].contains(&v.latitude.as_str()),
            "{}",
            v.name
        );
        assert!(
            !v.allowed_by.is_empty() && !v.description.is_empty(),
            "{}",
            v.name
        );
        for r in &v.allowed_by {
            let entry = cat
                .get(r)
                .unwrap_or_else(|| panic!("{}: unknown {r}", v.name));
            assert!(
                ["consumer", "both"].contains(&entry["side"].as_str().unwrap()),
                "{}: {r} does not bind a Consumer",
                v.name
            );
        }
    }
}

/// The dual of the mutants: a Consumer that takes a latitude the spec
/// leaves follows the spec's text, so any FAIL or WARN is a false verdict.
#[test]
fn every_consumer_legal_variant_passes_every_scenario() {
    let all = scenarios();
    for v in variants() {
        let r = consumer::run_variant(&all, &v).unwrap();
        assert!(r.passed(), "{}: {:?}", v.name, r.false_verdicts);
    }
}

/// Each latitude changes what the Consumer observably does on some
/// scenario (its calls or outcomes), so passing it proves something.
#[test]
fn every_consumer_latitude_changes_something_observable() {
    use cetp_reference::consumer::ConsumerVariant;
    let all = scenarios();
    // What the Consumer did: every call (method, device time, deadline)
    // and every act's outcome.
    let seen = |s: &scenario::Scenario, config: &ConsumerConfig| {
        let (r, calls) = consumer::run_in_process_traced(s, config).unwrap();
        let calls: Vec<(String, i64, Option<String>)> = calls
            .iter()
            .map(|c| {
                let deadline = c
                    .extras
                    .get(cetp_proto::envelope::keys::DEADLINE_AT_MS)
                    .map(|v| format!("{v:?}"));
                (c.method.clone(), c.now_ms, deadline)
            })
            .collect();
        format!("{calls:?} {:?}", r.acts)
    };
    let base: Vec<String> = all
        .iter()
        .map(|s| seen(s, &ConsumerConfig::default()))
        .collect();
    let mut idle = Vec::new();
    for l in ConsumerVariant::ALL {
        let config = ConsumerConfig::default().with_latitude(*l);
        let differs = all.iter().zip(&base).any(|(s, b)| seen(s, &config) != *b);
        // Bounds no scenario reaches are still declared: the bound
        // scenarios judge them by the declared figure.
        let declared_only = consumer::DeclaredBounds::of(&config.limits)
            != consumer::DeclaredBounds::of(&ConsumerConfig::default().limits);
        if !(differs || declared_only) {
            idle.push(l.name());
        }
    }
    assert!(idle.is_empty(), "these latitudes change nothing: {idle:?}");
}
