//! `report.sarif` (SARIF 2.1.0): one result per FAIL, FLAKY or WARN of a
//! run. The rule of a result is the requirement its finding cites (the first
//! of them; all are in `properties.requirements`), with the spec section and
//! the catalog summary in the rule's help; the result carries the
//! `cetp replay` command that reproduces a case. Provider text is escaped as
//! for a terminal (SARIF viewers show `message.text` as it is).

use crate::escape::terminal as esc;
use cetp_vectors::event::{Event, Reporter, Verdict};
use serde_json::{json, Value as Json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What the report says about a requirement (from the catalog).
#[derive(Clone, Debug)]
pub struct RuleInfo {
    /// The spec section the requirement is in (`4.5`, ...).
    pub section: String,
    /// Its strength (MUST, SHOULD, ...).
    pub level: String,
    /// The catalog's one-line summary, shown as the rule's help.
    pub summary: String,
}

/// The catalog (`requirements/catalog.json` under a vectors directory) as
/// SARIF rules: section, level and summary per active requirement.
pub fn catalog_rules(vectors_dir: &Path) -> Result<BTreeMap<String, RuleInfo>, String> {
    let path = vectors_dir.join("requirements/catalog.json");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let catalog = cetp_proto::catalog::Catalog::from_json(&text)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(catalog
        .active()
        .map(|r| {
            (
                r.id.clone(),
                RuleInfo {
                    section: r.section.clone(),
                    level: r.level.to_string(),
                    summary: r.summary.clone(),
                },
            )
        })
        .collect())
}

/// Builds `report.sarif` from events; writes it on `finish`.
pub struct SarifReport {
    path: Option<PathBuf>,
    catalog: BTreeMap<String, RuleInfo>,
    harness: String,
    target: String,
    /// The run's other flags a rerun needs (`RunStarted::rerun`).
    rerun: Vec<String>,
    seed: u64,
    results: Vec<Json>,
    rules_used: Vec<String>,
    exit_code: Option<i32>,
    /// The run's pin hash (`RunPinned`).
    pin: Option<String>,
}

impl SarifReport {
    /// `path`: where to write on finish (None: keep in memory).
    pub fn new(path: Option<PathBuf>, catalog: BTreeMap<String, RuleInfo>) -> Self {
        SarifReport {
            path,
            catalog,
            harness: String::new(),
            target: String::new(),
            rerun: Vec::new(),
            seed: 0,
            results: Vec::new(),
            rules_used: Vec::new(),
            exit_code: None,
            pin: None,
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn result(
        &mut self,
        id: &str,
        kind: &str,
        verdict: Verdict,
        requirements: &[String],
        cited: &[String],
        reason: &str,
    ) {
        let level = match verdict {
            Verdict::Fail | Verdict::Flaky => "error",
            Verdict::Warn => "warning",
            _ => return,
        };
        // The finding's own requirement; a FLAKY has none of its own, so
        // the case's first stands for it.
        let rule = cited
            .first()
            .or_else(|| requirements.first())
            .cloned()
            .unwrap_or_else(|| "CETP2-unknown".into());
        let index = match self.rules_used.iter().position(|r| *r == rule) {
            Some(i) => i,
            None => {
                self.rules_used.push(rule.clone());
                self.rules_used.len() - 1
            }
        };
        let replay = (kind == "case")
            .then(|| crate::replay_command(id, &self.target, self.seed, &self.rerun));
        let mut text = format!("{} {id}: {}", verdict.as_str(), esc(reason, 2000));
        if let Some(r) = &replay {
            text.push_str(&format!(" Reproduce: {}", esc(r, 4000)));
        }
        self.results.push(json!({
            "ruleId": rule,
            "ruleIndex": index,
            "level": level,
            "message": {"text": text},
            "locations": [{"logicalLocations": [{"name": id, "kind": "function"}]}],
            "properties": {
                "kind": kind,
                "verdict": verdict.as_str(),
                "requirements": if cited.is_empty() { requirements } else { cited },
                "replay": replay,
            },
        }));
    }

    /// The SARIF log for the events seen so far, with the rules its results
    /// use.
    pub fn document(&self) -> Json {
        let rules: Vec<Json> = self
            .rules_used
            .iter()
            .map(|id| match self.catalog.get(id) {
                Some(r) => json!({
                    "id": id,
                    "shortDescription": {"text": r.summary},
                    "help": {"text": format!(
                        "CETP v2 §{} ({}): {} `cetp catalog {id}` prints the clause of the spec.",
                        r.section, r.level, r.summary
                    )},
                    "properties": {"section": r.section, "level": r.level},
                }),
                None => json!({"id": id, "shortDescription": {"text": id}}),
            })
            .collect();
        json!({
            "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
            "version": "2.1.0",
            "runs": [{
                "tool": {"driver": {
                    "name": "cetp",
                    "version": self.harness,
                    "rules": rules,
                }},
                "invocations": [{
                    "executionSuccessful": self.exit_code.is_some_and(|c| c == 0 || c == 1),
                    "exitCode": self.exit_code.unwrap_or(-1),
                }],
                "results": self.results,
                "properties": {"target": self.target, "seed": self.seed, "pin": self.pin},
            }],
        })
    }
}

impl Reporter for SarifReport {
    fn on_event(&mut self, event: &Event) {
        match event {
            Event::RunStarted {
                harness,
                target,
                seed,
                rerun,
                ..
            } => {
                self.harness = harness.clone();
                self.target = target.clone();
                self.rerun = rerun.clone();
                self.seed = *seed;
            }
            Event::CaseFinished {
                case_id,
                requirements,
                cited,
                verdict,
                reason,
                baseline,
                ..
            } if baseline.is_none() => {
                self.result(case_id, "case", *verdict, requirements, cited, reason)
            }
            Event::CheckVerdict {
                check,
                requirements,
                cited,
                verdict,
                reason,
                ..
            } => self.result(check, "check", *verdict, requirements, cited, reason),
            Event::RunPinned { pin_hash, .. } => self.pin = Some(pin_hash.clone()),
            Event::RunFinished { exit_code, .. } => self.exit_code = Some(*exit_code),
            _ => {}
        }
    }

    fn finish(&mut self) -> std::io::Result<()> {
        let text = serde_json::to_string_pretty(&self.document()).unwrap_or_default() + "\n";
        crate::write_report(self.path.as_deref(), &text)
    }
}
