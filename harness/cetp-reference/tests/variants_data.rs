//! `vectors/variants/variants.json` and [`Variant::ALL`] list the same legal
//! variants, in the same order; every entry is well formed and its profile
//! exists.

use cetp_reference::provider::{ReferenceProvider, Variant};
use serde_json::Value as Json;
use std::collections::BTreeSet;

fn doc() -> Json {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../vectors/variants/variants.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).expect("variants.json")).expect("JSON")
}

#[test]
fn variants_json_matches_the_latitude_list() {
    let d = doc();
    assert_eq!(d["format_version"], 1);
    let entries = d["variants"].as_array().expect("variants");
    let names: Vec<&str> = entries
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    let all: Vec<&str> = Variant::ALL.iter().map(|l| l.name()).collect();
    assert_eq!(names, all);
    assert!(entries.len() >= 25, "at least 25 legal variants");
    let catalog: Json = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../vectors/requirements/catalog.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let ids: BTreeSet<&str> = catalog["requirements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    for e in entries {
        let name = e["name"].as_str().unwrap();
        let keys: BTreeSet<&str> = e.as_object().unwrap().keys().map(String::as_str).collect();
        let allowed = BTreeSet::from([
            "name",
            "target",
            "profile",
            "sections",
            "allowed_by",
            "latitude",
            "description",
            "false_fail_class",
        ]);
        assert!(keys.is_subset(&allowed), "{name}: {keys:?}");
        assert_eq!(e["target"], format!("sim:variant={name}"));
        let profile = e["profile"].as_str().unwrap();
        let path = format!("{}/../../profiles/{profile}", env!("CARGO_MANIFEST_DIR"));
        assert!(std::path::Path::new(&path).is_file(), "{name}: {path}");
        assert!(
            matches!(e["latitude"].as_str(), Some("MAY" | "UNSPECIFIED")),
            "{name}"
        );
        for r in e["allowed_by"].as_array().unwrap() {
            assert!(ids.contains(r.as_str().unwrap()), "{name}: unknown {r}");
        }
        let d = e["description"].as_str().unwrap();
        assert!(d.len() >= 30, "{name}");
        assert!(
            d.chars().all(|c| c.is_ascii() || "§—–’“”".contains(c)),
            "{name}: our own words, in English"
        );
        assert!(ReferenceProvider::variant(name).is_ok());
    }
    assert!(ReferenceProvider::variant("no_such_variant").is_err());
}
