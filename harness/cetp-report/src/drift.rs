//! Renderers of a contract drift report (`cetp drift`): text for a
//! terminal, JSON (`cetp-drift/1`), and SARIF 2.1.0 for code-scanning UIs.
//!
//! Tool names, pointers and messages quote the Provider: the text renderer
//! escapes them for the terminal; JSON and SARIF carry them verbatim, as
//! serde_json escapes them.

use crate::escape;
use cetp_contract::drift::{Class, DriftReport};
use serde_json::{json, Value as Json};

/// Longest Provider-controlled string shown on one terminal line.
const MAX_SHOWN: usize = 300;

fn label(c: Class) -> &'static str {
    match c {
        Class::Violation => "VIOLATION ",
        Class::Breaking => "BREAKING  ",
        Class::Compatible => "COMPATIBLE",
    }
}

/// The report for a terminal: the revisions, one line per finding labelled
/// with its class, and the counts; Provider text escaped and capped.
pub fn text(r: &DriftReport) -> String {
    let t = |s: &str| escape::terminal(s, MAX_SHOWN);
    let mut out = format!(
        "contract drift of {}: revision {:?} in the lock, {:?} now\n",
        t(&r.provider_id),
        t(&r.locked_revision),
        t(&r.current_revision)
    );
    if r.findings.is_empty() {
        out.push_str("no drift: the contract matches the lock\n");
        return out;
    }
    for f in &r.findings {
        let at = match &f.tool {
            Some(tool) => format!("{} {}", t(tool), t(&f.pointer)),
            None => t(&f.pointer),
        };
        out.push_str(&format!(
            "{} {at}: {} [{}]\n",
            label(f.class),
            t(&f.message),
            t(&f.rule)
        ));
    }
    out.push_str(&format!(
        "summary: {} breaking, {} compatible, {} violation(s)\n",
        r.summary.breaking, r.summary.compatible, r.summary.violation
    ));
    out
}

/// The report as JSON, keys sorted at every level.
pub fn json(r: &DriftReport) -> String {
    let v = serde_json::to_value(r).unwrap_or(Json::Null);
    serde_json::to_string_pretty(&v).unwrap_or_default() + "\n"
}

const RULES: &[(Class, &str)] = &[
    (
        Class::Breaking,
        "A difference from the locked contract that can make a Consumer built against the lock fail.",
    ),
    (
        Class::Compatible,
        "A difference from the locked contract that nothing a Consumer relied on depends on.",
    ),
    (
        Class::Violation,
        "A breach of the spec: the tool set, a schema or a tool's safety semantics changed while revision did not (CETP v2 §3.3), or an answer breaks its section.",
    ),
];

/// A minimal SARIF 2.1.0 log: one result per finding, `ruleId` the class,
/// the tool and pointer as the logical location. `artifact` is the lock
/// file the findings are relative to.
pub fn sarif(r: &DriftReport, harness_version: &str, artifact: Option<&str>) -> String {
    let rules: Vec<Json> = RULES
        .iter()
        .map(|(c, text)| {
            json!({
                "id": c.as_str(),
                "shortDescription": {"text": text},
                "defaultConfiguration": {"level": level(*c)},
            })
        })
        .collect();
    let results: Vec<Json> = r
        .findings
        .iter()
        .map(|f| {
            let name = f.tool.clone().unwrap_or_else(|| r.provider_id.clone());
            let mut location = json!({
                "logicalLocations": [{
                    "name": name,
                    "fullyQualifiedName": format!("{name}{}", f.pointer),
                    "kind": if f.tool.is_some() { "function" } else { "module" },
                }]
            });
            if let Some(uri) = artifact {
                location["physicalLocation"] = json!({"artifactLocation": {"uri": uri}});
            }
            json!({
                "ruleId": f.class.as_str(),
                "ruleIndex": RULES.iter().position(|(c, _)| *c == f.class).unwrap_or(0),
                "level": level(f.class),
                "message": {"text": format!("{name} {}: {}", f.pointer, f.message)},
                "locations": [location],
                "properties": {
                    "rule": f.rule,
                    "pointer": f.pointer,
                    "revisionBound": f.revision_bound,
                },
            })
        })
        .collect();
    let doc = json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "cetp",
                "version": harness_version,
                "rules": rules,
            }},
            "results": results,
            "properties": {
                "providerId": r.provider_id,
                "lockedRevision": r.locked_revision,
                "currentRevision": r.current_revision,
            },
        }],
    });
    serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n"
}

fn level(c: Class) -> &'static str {
    match c {
        Class::Breaking | Class::Violation => "error",
        Class::Compatible => "note",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cetp_contract::drift::{Finding, Summary, FORMAT};

    fn report() -> DriftReport {
        DriftReport {
            format: FORMAT.into(),
            provider_id: "com.x".into(),
            locked_revision: "r1".into(),
            current_revision: "r1".into(),
            findings: vec![
                Finding {
                    class: Class::Violation,
                    tool: Some("evil\u{1b}[2Jtool".into()),
                    pointer: "/revision".into(),
                    rule: "revision.unchanged".into(),
                    message: "changed\r\u{202E}".into(),
                    revision_bound: true,
                },
                Finding {
                    class: Class::Compatible,
                    tool: None,
                    pointer: "/capabilities".into(),
                    rule: "capability.added".into(),
                    message: "capability added".into(),
                    revision_bound: false,
                },
            ],
            summary: Summary {
                breaking: 0,
                compatible: 1,
                violation: 1,
            },
        }
    }

    #[test]
    fn text_escapes_provider_strings() {
        let t = text(&report());
        assert!(!t.contains('\u{1b}') && !t.contains('\r') && !t.contains('\u{202E}'));
        assert!(t.contains("VIOLATION  evil\\u{1b}[2Jtool /revision"), "{t}");
        assert!(t.contains("summary: 0 breaking, 1 compatible, 1 violation(s)"));
    }

    #[test]
    fn sarif_has_one_result_per_finding_and_the_required_members() {
        let doc: Json = serde_json::from_str(&sarif(&report(), "cetp 0", Some("l.json"))).unwrap();
        assert_eq!(doc["version"], "2.1.0");
        let run = &doc["runs"][0];
        assert_eq!(run["tool"]["driver"]["name"], "cetp");
        let results = run["results"].as_array().unwrap();
        assert_eq!(results.len(), 2);
        for r in results {
            let id = r["ruleId"].as_str().unwrap();
            let idx = r["ruleIndex"].as_u64().unwrap() as usize;
            assert_eq!(run["tool"]["driver"]["rules"][idx]["id"], id);
            assert!(r["message"]["text"].is_string());
        }
        assert_eq!(results[0]["level"], "error");
        assert_eq!(results[1]["level"], "note");
        assert_eq!(
            results[0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
            "l.json"
        );
    }

    #[test]
    fn json_round_trips() {
        let r = report();
        let back: DriftReport = serde_json::from_str(&json(&r)).unwrap();
        assert_eq!(back, r);
    }
}
