//! The requirement catalog (`vectors/requirements/catalog.json`) against the
//! spec it cites and its own schema.
//!
//! The spec is not in this repository: it is read from
//! `<repo root>/../shared/spec/cetp-v2.zh.md`, or from `$CETP_SPEC`. A missing
//! spec fails these tests; it is never a silent skip.

use cetp_proto::catalog::{
    clause_fingerprint, clause_text, section_at_line, spec_sha256, Catalog, MismatchProblem,
    Observability, ID_PATTERN,
};
use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn catalog_text() -> String {
    let path = repo_root().join("vectors/requirements/catalog.json");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

fn catalog() -> Catalog {
    Catalog::from_json(&catalog_text()).expect("catalog.json parses")
}

fn spec_bytes() -> Vec<u8> {
    let path = match std::env::var_os("CETP_SPEC") {
        Some(p) => PathBuf::from(p),
        None => repo_root().join("../shared/spec/cetp-v2.zh.md"),
    };
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read the CETP v2 spec at {} ({e}); put shared/ beside the repository or set CETP_SPEC",
            path.display()
        )
    })
}

fn spec() -> String {
    String::from_utf8(spec_bytes()).expect("spec is UTF-8")
}

#[test]
fn spec_is_the_revision_the_catalog_was_written_for() {
    let c = catalog();
    let actual = spec_sha256(&spec_bytes());
    assert_eq!(
        actual, c.spec.sha256,
        "the spec file changed (sha256 {actual}, catalog pins {}). Re-verify every source location \
         against the new text (print them with `cargo run -p cetp-proto --example catalog_locate -- --show-all`), \
         fix moved entries, retire removed ones, add new ones, then update spec.sha256",
        c.spec.sha256
    );
}

#[test]
fn every_fingerprint_matches_the_spec() {
    let mismatches = catalog().verify_against_spec(&spec());
    let report: Vec<String> = mismatches.iter().map(ToString::to_string).collect();
    assert!(
        report.is_empty(),
        "{} entries do not match the spec:\n{}",
        report.len(),
        report.join("\n")
    );
}

#[test]
fn ids_are_unique_well_formed_and_match_their_section() {
    let c = catalog();
    let spec = spec();
    let re = regex::Regex::new(ID_PATTERN).unwrap();
    let mut seen = HashSet::new();
    for r in &c.requirements {
        assert!(seen.insert(&r.id), "duplicate id {}", r.id);
        let caps = re
            .captures(&r.id)
            .unwrap_or_else(|| panic!("{} does not match {ID_PATTERN}", r.id));
        assert_eq!(
            &caps[1], r.section,
            "{}: id and section field disagree",
            r.id
        );
        assert_ne!(&caps[2], "00", "{}: numbers start at 01", r.id);
        assert_eq!(
            section_at_line(&spec, r.source.line).as_deref(),
            Some(r.section.as_str()),
            "{}: line {} is not in section {}",
            r.id,
            r.source.line,
            r.section
        );
        assert_eq!(r.source.file, c.spec.file, "{}", r.id);
    }
}

#[test]
fn ids_follow_spec_order_within_each_section() {
    let c = catalog();
    let mut by_section: BTreeMap<&str, Vec<(u32, &cetp_proto::catalog::Requirement)>> =
        BTreeMap::new();
    for r in &c.requirements {
        let n: u32 = r.id.rsplit('-').next().unwrap().parse().unwrap();
        by_section.entry(&r.section).or_default().push((n, r));
    }
    for (section, mut entries) in by_section {
        entries.sort_by_key(|(n, _)| *n);
        for (i, (n, r)) in entries.iter().enumerate() {
            // Retired entries keep their numbers, so there are never gaps.
            assert_eq!(
                *n as usize,
                i + 1,
                "section {section}: {} leaves a gap",
                r.id
            );
        }
        let ordered: Vec<_> = entries.iter().filter(|(_, r)| !r.late_addition).collect();
        for pair in ordered.windows(2) {
            let (a, b) = (&pair[0].1.source, &pair[1].1.source);
            assert!(
                (a.line, a.start) <= (b.line, b.start),
                "section {section}: {} comes before {} but its clause is later in the spec",
                pair[0].1.id,
                pair[1].1.id
            );
        }
    }
}

#[test]
fn catalog_is_exhaustive_enough() {
    let c = catalog();
    assert!(
        c.requirements.len() >= 90,
        "only {} requirements",
        c.requirements.len()
    );
    for level in ["MUST", "MUST_NOT", "SHOULD", "MAY"] {
        assert!(
            c.requirements.iter().any(|r| r.level.as_str() == level),
            "no {level} entry"
        );
    }
}

#[test]
fn not_remote_entries_say_why_and_only_they_do() {
    for r in &catalog().requirements {
        let has_reason = r
            .not_remote_reason
            .as_deref()
            .is_some_and(|s| !s.trim().is_empty());
        assert_eq!(
            r.observable == Observability::NotRemote,
            has_reason,
            "{}: not_remote_reason must be given exactly when observable is not_remote",
            r.id
        );
    }
}

#[test]
fn related_ids_exist() {
    let c = catalog();
    for r in &c.requirements {
        for rel in &r.related {
            assert_ne!(rel, &r.id, "{} relates to itself", r.id);
            assert!(c.get(rel).is_some(), "{} relates to unknown {rel}", r.id);
        }
    }
}

#[test]
fn texts_are_our_own_english() {
    // The spec's wording stays in the spec; summaries, notes and reasons are
    // ours. Any CJK character is a sign that spec text was copied in.
    let cjk = |s: &str| {
        s.chars().any(|ch| {
            matches!(ch, '\u{2E80}'..='\u{9FFF}' | '\u{F900}'..='\u{FAFF}' | '\u{FE30}'..='\u{FE4F}' | '\u{FF00}'..='\u{FFEF}')
        })
    };
    for r in &catalog().requirements {
        for text in [
            Some(&r.summary),
            r.notes.as_ref(),
            r.not_remote_reason.as_ref(),
        ]
        .into_iter()
        .flatten()
        {
            assert!(!cjk(text), "{}: contains CJK text: {text}", r.id);
        }
    }
}

#[test]
fn catalog_validates_against_its_schema() {
    let schema_path = repo_root().join("vectors/requirements/catalog.schema.json");
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&schema_path).unwrap()).unwrap();
    let validator = jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .expect("schema compiles");
    let instance: serde_json::Value = serde_json::from_str(&catalog_text()).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&instance)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "schema violations:\n{}",
        errors.join("\n")
    );

    // The schema really enforces the not_remote rule and the id pattern.
    let mut broken = instance.clone();
    let first = &mut broken["requirements"][0];
    first["observable"] = "not_remote".into();
    first.as_object_mut().unwrap().remove("not_remote_reason");
    assert!(
        !validator.is_valid(&broken),
        "not_remote without a reason must be rejected"
    );
    let mut broken = instance.clone();
    broken["requirements"][0]["id"] = "CETP2-4.9-01".into();
    assert!(
        !validator.is_valid(&broken),
        "unknown section in id must be rejected"
    );
    let mut broken = instance;
    broken["requirements"][0]["summary"] =
        "\u{5fc5}\u{987b}\u{662f}\u{4e0d}\u{900f}\u{660e}".into();
    assert!(!validator.is_valid(&broken), "CJK summary must be rejected");
}

#[test]
fn clause_text_quotes_the_spec() {
    let c = catalog();
    let spec = spec();
    for r in c.active() {
        let quote = clause_text(&spec, &r.source)
            .unwrap_or_else(|| panic!("{}: no text at its location", r.id));
        assert_eq!(clause_fingerprint(&quote), r.fingerprint, "{}", r.id);
    }
}

#[test]
fn a_tampered_fingerprint_is_reported() {
    let mut c = catalog();
    let spec = spec();
    let victim = c.requirements[10].id.clone();
    c.requirements[10].fingerprint = clause_fingerprint("something the spec never said");
    let found = c.verify_against_spec(&spec);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].id, victim);
    assert!(matches!(
        found[0].problem,
        MismatchProblem::FingerprintDiffers { .. }
    ));
}

#[test]
fn a_shifted_or_impossible_location_is_reported() {
    let mut c = catalog();
    let spec = spec();
    c.requirements[20].source.start += 1;
    c.requirements[20].source.end += 1;
    c.requirements[30].source.line += 1;
    c.requirements[40].source.line = 100_000;
    c.requirements[50].source.end = c.requirements[50].source.start;
    let found = c.verify_against_spec(&spec);
    let ids: Vec<&str> = found.iter().map(|m| m.id.as_str()).collect();
    let expect: Vec<&str> = [20, 30, 40, 50]
        .iter()
        .map(|&i| c.requirements[i].id.as_str())
        .collect();
    assert_eq!(ids, expect);
    assert!(matches!(
        found[2].problem,
        MismatchProblem::LineOutOfRange { .. }
    ));
    assert!(matches!(
        found[3].problem,
        MismatchProblem::SpanOutOfRange { .. }
    ));
}

#[test]
fn an_edited_spec_is_detected() {
    let c = catalog();
    let spec = spec();
    let r = &c.requirements[5];
    let quote = clause_text(&spec, &r.source).unwrap();
    // Insert one character into the clause's line, as an editor would.
    let edited: String = spec
        .split('\n')
        .enumerate()
        .map(|(i, l)| {
            if i + 1 == r.source.line {
                l.replacen(&quote, &format!("X{quote}"), 1)
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert_ne!(spec_sha256(edited.as_bytes()), c.spec.sha256);
    let found = c.verify_against_spec(&edited);
    assert!(found.iter().any(|m| m.id == r.id), "{found:?}");
    // Whitespace-only edits do not count as changes to a clause.
    let respaced = spec.replace("\u{3001} max_concurrent", "\u{3001}\tmax_concurrent");
    assert_ne!(respaced, spec, "the sample edit must hit a cited clause");
    assert!(c.verify_against_spec(&respaced).is_empty());
}

#[test]
fn lookup_by_id() {
    let c = catalog();
    let r = c.get("CETP2-2.2-01").expect("first entry of 2.2");
    assert_eq!(r.section, "2.2");
    assert!(c.get("CETP2-2.2-00").is_none());
}
