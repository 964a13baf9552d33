//! The data the runner loads is consistent: case files match their JSON
//! Schema, every requirement id they (and the checks and mutants) cite exists
//! in the catalog, and every descriptor rule the core can emit is mapped.

use cetp_conformance::selftest::load_mutants;
use cetp_conformance::suite::{default_vectors_dir, Suite};
use cetp_proto::catalog::Catalog;
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
    let coded: BTreeSet<&str> = cetp_conformance::checks::ALL.iter().copied().collect();
    assert_eq!(defined, coded, "checks.json and checks::ALL disagree");
}
