//! The coverage report: requirement → cases and checks → mutants, computed
//! from data (catalog, vectors, the explanations of what is deliberately not
//! tested) and from the last self-test's observed kills (`reports/proof.json`),
//! in the manner of duvet. "Proven" means a mutant was seen caught by a
//! finding that cites the requirement, never that its documentation says so.

use cetp_proto::catalog::{Catalog, Level, Observability, Side};
use cetp_vectors::suite::Suite;
use serde::Deserialize;
use serde_json::{json, Value as Json};
use std::collections::BTreeMap;
use std::path::Path;

/// Requirements deliberately left without a Provider case, with the reason
/// (`vectors/coverage/exemptions.json`).
#[derive(Clone, Debug, Deserialize)]
pub struct Exemptions {
    /// Requirement id → why it has no Provider case.
    pub exemptions: BTreeMap<String, String>,
}

/// The observed proof (`cetp selftest --write-proof`): requirement → the
/// mutants a finding citing it caught.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Proof {
    /// Requirement id → names of the mutants caught citing it.
    pub requirements: BTreeMap<String, Vec<String>>,
}

/// Reads a proof file (`reports/proof.json`).
pub fn load_proof(path: &Path) -> Result<Proof, String> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        format!(
            "{}: {e} (make it with `cetp selftest --write-proof {}`)",
            path.display(),
            path.display()
        )
    })?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Reads the exemptions file (`vectors/coverage/exemptions.json`).
pub fn load_exemptions(path: &Path) -> Result<Exemptions, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// How a requirement stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    /// Cases or checks enforce it.
    Covered,
    /// A permission (MAY): nothing a Provider could break.
    Permission,
    /// Binds Consumers: not yet judged, as no Consumer scenario exists yet.
    ConsumerSide,
    /// Binds Consumers: Consumer scenarios judge it and a Consumer mutant
    /// was seen caught by a finding citing it (`reports/consumer-proof.json`).
    ConsumerJudged,
    /// Binds Consumers: Consumer scenarios cite it, but no Consumer mutant
    /// proves they can fail; not counted as judged.
    ConsumerUnproven,
    /// Not observable from outside the device, with the catalog's reason.
    NotRemote(String),
    /// Deliberately not tested, with the reason from the exemptions.
    Exempt(String),
    /// Observable from outside, yet nothing enforces it: a gap.
    Gap,
}

/// One requirement's line in the coverage report.
pub struct Row {
    /// Requirement id.
    pub id: String,
    /// Its level as the catalog spells it (`MUST`, `MUST_NOT`, `SHOULD`, …).
    pub level: &'static str,
    /// Who it binds: `provider`, `consumer` or `both`.
    pub side: &'static str,
    /// The requirement, in short.
    pub summary: String,
    /// Cases, checks and scenarios that cite it.
    pub enforced_by: Vec<String>,
    /// Mutants caught by a finding citing it (the proof).
    pub mutants: Vec<String>,
    /// How it stands.
    pub status: Status,
}

fn side_str(s: Side) -> &'static str {
    match s {
        Side::Provider => "provider",
        Side::Consumer => "consumer",
        Side::Both => "both",
    }
}

/// The Consumer suite's share: requirement → Consumer scenarios citing it,
/// and the Consumer proof (`cetp selftest --consumer-only --write-proof`).
#[derive(Clone, Debug, Default)]
pub struct ConsumerCoverage {
    /// Requirement id → Consumer scenarios citing it.
    pub index: BTreeMap<String, Vec<String>>,
    /// The Consumer selftest's observed kills.
    pub proof: Proof,
}

/// The coverage rows of every requirement of `catalog`, without the
/// Consumer suite's share (see [`rows_with_consumer`]).
pub fn rows(catalog: &Catalog, suite: &Suite, proof: &Proof, exemptions: &Exemptions) -> Vec<Row> {
    rows_with_consumer(
        catalog,
        suite,
        proof,
        exemptions,
        &ConsumerCoverage::default(),
    )
}

/// As [`rows`], with the Consumer scenarios: a requirement no Provider case
/// enforces counts as judged by the Consumer suite only when scenarios cite
/// it and a Consumer mutant was seen caught by a finding citing it.
pub fn rows_with_consumer(
    catalog: &Catalog,
    suite: &Suite,
    proof: &Proof,
    exemptions: &Exemptions,
    consumer: &ConsumerCoverage,
) -> Vec<Row> {
    let index = cetp_conformance::runner::requirement_index(suite);
    let by_mutant = &proof.requirements;
    catalog
        .active()
        .map(|r| {
            let mut enforced_by = index.get(&r.id).cloned().unwrap_or_default();
            let mut mutants = by_mutant.get(r.id.as_str()).cloned().unwrap_or_default();
            let scenarios = consumer.index.get(&r.id).cloned().unwrap_or_default();
            let consumer_proof = consumer
                .proof
                .requirements
                .get(r.id.as_str())
                .cloned()
                .unwrap_or_default();
            let status = if !enforced_by.is_empty() {
                Status::Covered
            } else if !scenarios.is_empty() && r.side != Side::Provider {
                enforced_by = scenarios;
                let judged = !consumer_proof.is_empty();
                mutants = consumer_proof;
                if judged {
                    Status::ConsumerJudged
                } else {
                    Status::ConsumerUnproven
                }
            } else if let Some(why) = exemptions.exemptions.get(&r.id) {
                Status::Exempt(why.clone())
            } else if r.level == Level::May {
                Status::Permission
            } else if r.observable == Observability::NotRemote {
                Status::NotRemote(r.not_remote_reason.clone().unwrap_or_default())
            } else if r.side == Side::Consumer || r.observable == Observability::HostileProvider {
                Status::ConsumerSide
            } else {
                Status::Gap
            };
            Row {
                id: r.id.clone(),
                level: r.level.as_str(),
                side: side_str(r.side),
                summary: r.summary.clone(),
                enforced_by,
                mutants,
                status,
            }
        })
        .collect()
}

/// Covered requirements that no mutant proves can fail.
pub fn unproven(rows: &[Row]) -> Vec<&Row> {
    rows.iter()
        .filter(|r| r.status == Status::Covered && r.mutants.is_empty())
        .collect()
}

/// The coverage report as JSON (`format_version` 1).
pub fn render_json(rows: &[Row]) -> Json {
    let items: Vec<Json> = rows
        .iter()
        .map(|r| {
            let (status, reason) = match &r.status {
                Status::Covered => ("covered", None),
                Status::Permission => (
                    "permission",
                    Some("MAY: nothing a Provider can break".to_string()),
                ),
                Status::ConsumerSide => (
                    "not_yet_judged",
                    Some(
                        "binds Consumers: not yet judged (no Consumer scenario exists yet)"
                            .to_string(),
                    ),
                ),
                Status::ConsumerJudged => ("consumer_judged", None),
                Status::ConsumerUnproven => (
                    "consumer_unproven",
                    Some(
                        "Consumer scenarios cite it; no Consumer mutant proves they can fail"
                            .to_string(),
                    ),
                ),
                Status::NotRemote(w) => ("not_remote", Some(w.clone())),
                Status::Exempt(w) => ("exempt", Some(w.clone())),
                Status::Gap => ("gap", None),
            };
            json!({"id": r.id, "level": r.level, "side": r.side, "status": status, "reason": reason,
                   "enforced_by": r.enforced_by, "mutants": r.mutants})
        })
        .collect();
    json!({"format_version": 1, "requirements": items})
}

/// The coverage report as Markdown, with totals.
pub fn render_markdown(rows: &[Row]) -> String {
    let count = |f: &dyn Fn(&Status) -> bool| rows.iter().filter(|r| f(&r.status)).count();
    let covered = count(&|s| *s == Status::Covered);
    let proven = rows
        .iter()
        .filter(|r| r.status == Status::Covered && !r.mutants.is_empty())
        .count();
    let mut out = String::new();
    out.push_str("# CETP v2 requirement coverage\n\n");
    out.push_str("Generated by `cetp coverage --write` from `vectors/requirements/catalog.json`, the cases in\n`vectors/cases/`, the checks in `vectors/checks/`, the Consumer scenarios in `vectors/consumer/`,\n`vectors/coverage/exemptions.json` and the last self-tests' observed kills (`reports/proof.json`,\nfrom `cetp selftest --write-proof`, and `reports/consumer-proof.json`, from\n`cetp selftest --consumer-only --write-proof`): a requirement is proven only when a mutant was\ncaught by a finding that cites it. Do not edit by hand; CI fails when either file is stale.\n\n");
    out.push_str(&format!(
        "| | count |\n|---|---|\n| requirements | {} |\n| enforced by cases or checks | {covered} |\n| ... proven by an observed kill | {proven} |\n| ... covered but not proven | {} |\n| Consumer-side: judged by Consumer scenarios, proven by a Consumer mutant | {} |\n| Consumer-side: cited by Consumer scenarios, not proven (not counted as judged) | {} |\n| permissions (MAY) | {} |\n| Consumer-side: not yet judged (no Consumer scenario yet) | {} |\n| not observable remotely | {} |\n| exempt, with reason | {} |\n| gaps | {} |\n\n",
        rows.len(),
        covered - proven,
        count(&|s| *s == Status::ConsumerJudged),
        count(&|s| *s == Status::ConsumerUnproven),
        count(&|s| *s == Status::Permission),
        count(&|s| *s == Status::ConsumerSide),
        count(&|s| matches!(s, Status::NotRemote(_))),
        count(&|s| matches!(s, Status::Exempt(_))),
        count(&|s| *s == Status::Gap),
    ));
    out.push_str("## Enforced requirements\n\n| requirement | level | enforced by | mutants observed caught breaking it |\n|---|---|---|---|\n");
    for r in rows.iter().filter(|r| r.status == Status::Covered) {
        out.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            r.id,
            r.level,
            r.enforced_by.join(", "),
            if r.mutants.is_empty() {
                "— (covered, not proven)".to_string()
            } else {
                r.mutants.join(", ")
            }
        ));
    }
    out.push_str("\n## Consumer requirements judged by Consumer scenarios\n\n| requirement | level | scenarios | Consumer mutants observed caught breaking it |\n|---|---|---|---|\n");
    for r in rows
        .iter()
        .filter(|r| matches!(r.status, Status::ConsumerJudged | Status::ConsumerUnproven))
    {
        out.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            r.id,
            r.level,
            r.enforced_by.join(", "),
            if r.mutants.is_empty() {
                "— (cited, not proven: not counted as judged)".to_string()
            } else {
                r.mutants.join(", ")
            }
        ));
    }
    out.push_str("\n## Not enforced by a Provider case or a Consumer scenario, and why\n\n| requirement | level | side | why |\n|---|---|---|---|\n");
    for r in rows.iter().filter(|r| {
        !matches!(
            r.status,
            Status::Covered | Status::ConsumerJudged | Status::ConsumerUnproven
        )
    }) {
        let why = match &r.status {
            Status::Permission => "a permission (MAY): nothing to break".to_string(),
            Status::ConsumerSide => "binds the Consumer: not yet judged; the Consumer suite (hostile Provider) has no scenario for it yet".to_string(),
            Status::NotRemote(w) => format!("not observable remotely: {w}"),
            Status::Exempt(w) => w.clone(),
            Status::Gap => "**GAP**: observable, but no case enforces it".to_string(),
            Status::Covered | Status::ConsumerJudged | Status::ConsumerUnproven => {
                unreachable!("filtered")
            }
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            r.id,
            r.level,
            r.side,
            why.replace('|', "\\|")
        ));
    }
    out
}
