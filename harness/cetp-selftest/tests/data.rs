//! The data the runner loads is consistent: case files match their JSON
//! Schema, every requirement id they (and the checks and mutants) cite exists
//! in the catalog, and every descriptor rule the core can emit is mapped.

use cetp_proto::catalog::Catalog;
use cetp_selftest::selftest::load_mutants;
use cetp_vectors::suite::{default_vectors_dir, Suite};
use std::collections::BTreeSet;

fn catalog_ids() -> BTreeSet<String> {
    let text =
        std::fs::read_to_string(default_vectors_dir().join("requirements/catalog.json")).unwrap();
    Catalog::from_json(&text)
        .unwrap()
        .active()
        .map(|r| r.id.clone())
        .collect()
}

#[test]
fn case_files_match_their_schema() {
    let dir = default_vectors_dir();
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("schema/cases.schema.json")).unwrap(),
    )
    .unwrap();
    let validator = jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .unwrap();
    let mut n = 0;
    for entry in std::fs::read_dir(dir.join("cases")).unwrap() {
        let path = entry.unwrap().path();
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let errors: Vec<String> = validator
            .iter_errors(&doc)
            .take(5)
            .map(|e| format!("{}: {e}", e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{}: {errors:?}", path.display());
        n += 1;
    }
    assert!(n >= 10, "only {n} case files");
    // The schema is not vacuous: a misspelled step is rejected.
    let bad = serde_json::json!({"format_version": 1, "group": "g", "description": "d", "cases": [
        {"id": "X-001", "title": "t", "role": "provider", "requirements": ["CETP2-2.2-01"], "level": "MUST",
         "steps": [{"do": "negotiat"}]}]});
    assert!(!validator.is_valid(&bad));
}

#[test]
fn cited_requirements_exist() {
    let ids = catalog_ids();
    let suite = Suite::load(&default_vectors_dir()).unwrap();
    for c in &suite.cases {
        for r in &c.requirements {
            assert!(
                ids.contains(r),
                "case {} cites unknown requirement {r}",
                c.id
            );
        }
    }
    for c in &suite.checks {
        for r in &c.requirements {
            assert!(
                ids.contains(r),
                "check {} cites unknown requirement {r}",
                c.id
            );
        }
    }
    for (rule, reqs) in &suite.rules {
        for r in reqs {
            assert!(
                ids.contains(r),
                "rule {rule} maps to unknown requirement {r}"
            );
        }
    }
    for m in load_mutants(&default_vectors_dir().join("mutants/mutants.json")).unwrap() {
        assert!(
            !m.requirements.is_empty(),
            "mutant {} documents no requirement",
            m.name
        );
        for r in &m.requirements {
            assert!(
                ids.contains(r),
                "mutant {} cites unknown requirement {r}",
                m.name
            );
        }
    }
}

#[test]
fn every_descriptor_rule_is_mapped_and_every_check_defined() {
    let suite = Suite::load(&default_vectors_dir()).unwrap();
    for rule in cetp_proto::descriptor::RULES {
        assert!(
            suite.rules.contains_key(*rule),
            "descriptor rule {rule} has no requirement mapping"
        );
    }
    let defined: BTreeSet<&str> = suite.checks.iter().map(|c| c.id.as_str()).collect();
    let coded: BTreeSet<&str> = cetp_vectors::checks::ALL.iter().copied().collect();
    assert_eq!(defined, coded, "checks.json and checks::ALL disagree");
}

/// Proof per finding: every rule a check can emit maps to requirement ids,
/// and those ids are among the ones its check says it enforces, so that a
/// FAIL cites exactly the rule broken and coverage never claims more.
#[test]
fn every_check_rule_cites_requirements_of_its_check() {
    use cetp_proto::error::{ErrorCode, RetryRule};
    let suite = Suite::load(&default_vectors_dir()).unwrap();
    let of_check = |id: &str| -> BTreeSet<String> {
        suite
            .checks
            .iter()
            .find(|c| c.id == id)
            .map(|c| c.requirements.iter().cloned().collect())
            .unwrap_or_default()
    };
    let mut emitted: Vec<(&str, String)> = Vec::new();
    for (check, rule) in cetp_vectors::checks::RULES {
        if *rule == "retryable.CODE" {
            for code in ErrorCode::ALL {
                if code.retry_rule() != RetryRule::Conditional {
                    emitted.push((check, cetp_vectors::checks::retry_rule_key(*code)));
                }
            }
        } else {
            emitted.push((check, rule.to_string()));
        }
    }
    for rule in cetp_proto::descriptor::RULES {
        let check = if rule.starts_with("negotiate.")
            || rule.starts_with("session_token.")
            || rule.starts_with("limits.")
        {
            cetp_vectors::checks::NEGOTIATION
        } else {
            cetp_vectors::checks::DESCRIPTORS
        };
        emitted.push((check, rule.to_string()));
    }
    for (check, rule) in emitted {
        let reqs = suite
            .rules
            .get(&rule)
            .unwrap_or_else(|| panic!("rule {rule} of {check} cites no requirement"));
        assert!(
            !reqs.is_empty(),
            "rule {rule} of {check} cites no requirement"
        );
        let allowed = of_check(check);
        // Shape rules are shared by the negotiate, provider-info and tool
        // answers; they cite the descriptor clause.
        let allowed: BTreeSet<String> = if rule.starts_with("shape.") || rule == "enum.unknown" {
            allowed
                .union(&of_check(cetp_vectors::checks::DESCRIPTORS))
                .cloned()
                .collect()
        } else {
            allowed
        };
        for r in reqs {
            assert!(
                allowed.contains(r),
                "rule {rule} cites {r}, which {check} does not list in checks.json"
            );
        }
    }
}

/// A `rule@field` refinement names a descriptor rule and cites only what the
/// descriptor checks enforce.
#[test]
fn field_refinements_of_descriptor_rules_stay_within_their_checks() {
    let suite = Suite::load(&default_vectors_dir()).unwrap();
    let allowed: BTreeSet<&String> = suite
        .checks
        .iter()
        .filter(|c| {
            c.id == cetp_vectors::checks::DESCRIPTORS || c.id == cetp_vectors::checks::NEGOTIATION
        })
        .flat_map(|c| c.requirements.iter())
        .collect();
    for (key, reqs) in &suite.rules {
        if let Some((base, field)) = key.split_once('@') {
            assert!(
                cetp_proto::descriptor::RULES.contains(&base),
                "{key}: {base} is no descriptor rule"
            );
            assert!(!field.is_empty() && !reqs.is_empty(), "{key}");
            for r in reqs {
                assert!(
                    allowed.contains(r),
                    "{key} cites {r}, outside the descriptor checks"
                );
            }
        }
    }
}

/// A step cites only requirements its case enforces, so the coverage index
/// (built from cases) and what a FAIL proves never disagree.
#[test]
fn step_requirements_are_a_subset_of_their_case() {
    let suite = Suite::load(&default_vectors_dir()).unwrap();
    for c in &suite.cases {
        for (i, s) in c.steps.iter().enumerate() {
            for r in s.requirements.iter().flatten() {
                assert!(
                    c.requirements.contains(r),
                    "{} step {}: cites {r}, which the case does not list",
                    c.id,
                    i + 1
                );
            }
        }
    }
}

/// A title that promises a comparison (the same answer, something stable or
/// unchanged, one effect or none) needs a step that compares; otherwise the
/// case passes without testing what it says.
#[test]
fn every_case_whose_title_promises_a_comparison_has_a_comparing_step() {
    use cetp_vectors::vector::Step;
    fn kinds(steps: &[Step], out: &mut Vec<&'static str>) {
        for s in steps {
            let kind = match s {
                Step::Same { .. } | Step::Equal { .. } | Step::Differ { .. } => "compare",
                Step::RevisionConsistent { .. } | Step::TokensUnpredictable { .. } => "compare",
                Step::V1ReadOnly { .. } => "compare",
                Step::ExpectEffects { .. } | Step::CancelConsistent { .. } => "effects",
                Step::Concurrent { steps } => {
                    kinds(steps, out);
                    "concurrent"
                }
                _ => "other",
            };
            out.push(kind);
        }
    }
    let effect_words = ["one effect", "no effect", "exactly once", "runs once"];
    let compare_words = [
        "same",
        "stable",
        "does not change",
        "echoes",
        "differ",
        "its own",
        "unchanged",
    ];
    let suite = Suite::load(&default_vectors_dir()).unwrap();
    let mut judged = 0;
    for c in &suite.cases {
        let title = c.title.to_lowercase();
        let steps: Vec<Step> = c.steps.iter().map(|s| s.step.clone()).collect();
        let mut k = Vec::new();
        kinds(&steps, &mut k);
        if effect_words.iter().any(|w| title.contains(w)) {
            judged += 1;
            assert!(
                k.contains(&"effects"),
                "{}: {:?} observes no effect",
                c.id,
                c.title
            );
        }
        if compare_words.iter().any(|w| title.contains(w)) {
            judged += 1;
            assert!(
                k.contains(&"compare") || k.contains(&"effects"),
                "{}: {:?} has no comparing step",
                c.id,
                c.title
            );
        }
    }
    assert!(judged >= 15, "the title rules matched only {judged} cases");
}

/// A step written out (as cetp-fuzz writes the steps it generates) reads
/// back as the same step, and a case made of such steps still matches the
/// schema: serializing leaves out only what deserializing fills in.
#[test]
fn steps_written_out_read_back_the_same() {
    use cetp_vectors::vector::CaseStep;
    let dir = default_vectors_dir();
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("schema/cases.schema.json")).unwrap(),
    )
    .unwrap();
    let validator = jsonschema::options().build(&schema).unwrap();
    let suite = Suite::load(&dir).unwrap();
    let mut n = 0;
    for c in &suite.cases {
        let mut written = Vec::new();
        for s in &c.steps {
            let json = serde_json::to_value(s).unwrap();
            let back: CaseStep = serde_json::from_value(json.clone())
                .unwrap_or_else(|e| panic!("{}: {e}: {json}", c.id));
            assert_eq!(serde_json::to_value(&back).unwrap(), json, "{}", c.id);
            written.push(json);
            n += 1;
        }
        let file = serde_json::json!({"format_version": 1, "group": "g", "description": "d",
            "cases": [{"id": c.id, "title": c.title, "role": c.role, "level": c.level,
                       "requirements": c.requirements, "steps": written}]});
        let errors: Vec<String> = validator
            .iter_errors(&file)
            .take(5)
            .map(|e| format!("{}: {e}", e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{}: {errors:?}", c.id);
    }
    assert!(n >= 100, "only {n} steps");
}
