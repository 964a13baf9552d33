//! `report.json`: the stable, versioned machine-readable result of a run.

use cetp_vectors::event::{Event, Reporter};
use serde_json::{json, Map, Value as Json};
use std::path::PathBuf;

/// The `schema` field of every `report.json`: bumped on an incompatible
/// change, so a reader can refuse a report it does not understand.
pub const SCHEMA: &str = "cetp-report/1";

/// Builds the report from events; writes it on `finish`.
pub struct JsonReport {
    path: Option<PathBuf>,
    doc: Map<String, Json>,
    cases: Vec<Json>,
    checks: Vec<Json>,
    stale: Vec<Json>,
    /// The device of the case running, in a run of several devices.
    device: Option<String>,
    /// Each device identified, in a run of several.
    devices: Vec<Json>,
    lost: Vec<Json>,
}

impl JsonReport {
    /// `path`: where to write on finish (None: keep in memory).
    pub fn new(path: Option<PathBuf>) -> Self {
        let mut doc = Map::new();
        doc.insert("schema".into(), json!(SCHEMA));
        JsonReport {
            path,
            doc,
            cases: Vec::new(),
            checks: Vec::new(),
            stale: Vec::new(),
            device: None,
            devices: Vec::new(),
            lost: Vec::new(),
        }
    }

    /// The report for the events seen so far.
    pub fn document(&self) -> Json {
        let mut d = self.doc.clone();
        d.insert("cases".into(), Json::Array(self.cases.clone()));
        d.insert("checks".into(), Json::Array(self.checks.clone()));
        d.insert("baseline_stale".into(), Json::Array(self.stale.clone()));
        // Added in a compatible way: only in a run of several devices.
        if self.devices.len() > 1 {
            d.insert("devices".into(), Json::Array(self.devices.clone()));
            d.insert("devices_lost".into(), Json::Array(self.lost.clone()));
        }
        Json::Object(d)
    }
}

/// `partition` of a `RunPartition` event: its fields, without an absent
/// index or an empty list of merged parts.
fn partition_record(event: &Event) -> Json {
    let mut p = json!(event);
    if let Some(o) = p.as_object_mut() {
        o.remove("event");
    }
    p
}

impl JsonReport {
    /// The target as identified; several devices identify one after
    /// another: the target stays the first's, and each is listed.
    fn identified(&mut self, event: &Event) {
        let Event::TargetIdentified {
            hello,
            package,
            authority,
            manifest,
            declared_versions,
        } = event
        else {
            return;
        };
        let label = self
            .doc
            .get("target")
            .and_then(|t| t.get("label"))
            .cloned()
            .unwrap_or(Json::Null);
        let target = json!({
            "label": label,
            "hello": hello,
            "package": package,
            "authority": authority,
            "manifest": manifest,
            "declared_versions": declared_versions,
        });
        let mut one = target.clone();
        one.as_object_mut().map(|o| o.remove("label"));
        self.devices.push(one);
        if self.devices.len() == 1 {
            self.doc.insert("target".into(), target);
        }
    }
}

impl Reporter for JsonReport {
    fn on_event(&mut self, event: &Event) {
        match event {
            Event::RunStarted {
                run_id,
                harness,
                target,
                seed,
                config_hash,
                started_at_ms,
                only,
                skip,
                attempts,
                ..
            } => {
                self.doc.insert(
                    "selection".into(),
                    json!({"only": only, "skip": skip, "attempts": attempts}),
                );
                self.doc.insert("run_id".into(), json!(run_id));
                self.doc.insert("harness".into(), json!(harness));
                self.doc.insert("config_hash".into(), json!(config_hash));
                self.doc.insert("seed".into(), json!(seed));
                self.doc
                    .insert("started_at_ms".into(), json!(started_at_ms));
                self.doc.insert("target".into(), json!({ "label": target }));
            }
            // `partition`: this run's part of a split run, or for a merge
            // (no `index`) the parts it joined.
            Event::RunPartition { .. } => {
                self.doc.insert("partition".into(), partition_record(event));
            }
            Event::RunPinned { pin_hash, fields } => {
                self.doc
                    .insert("pin".into(), json!({"hash": pin_hash, "fields": fields}));
            }
            Event::TargetIdentified { .. } => self.identified(event),
            Event::CaseStarted { device, .. } => self.device = device.clone(),
            Event::DeviceLost {
                device,
                reason,
                handed_back,
            } => self.lost.push(json!({
                "device": device, "reason": reason, "handed_back": handed_back,
            })),
            Event::CaseFinished {
                case_id,
                title,
                requirements,
                cited,
                verdict,
                reason,
                baseline,
                duration_ms,
                unjudged,
            } => {
                let mut case = json!({
                    "id": case_id, "title": title, "requirements": requirements, "cited": cited,
                    "verdict": verdict, "reason": reason, "baseline": baseline, "duration_ms": duration_ms,
                });
                if let Some(d) = self.device.take() {
                    case["device"] = json!(d);
                }
                // Added in a compatible way: only on a case the setup kept
                // from judging, naming what would judge it.
                if let Some(needs) = unjudged {
                    case["unjudged"] = json!({
                        "needs": needs,
                        "fix": cetp_vectors::advice::fix_for(needs),
                    });
                }
                self.cases.push(case);
            }
            Event::CheckVerdict {
                check,
                title,
                requirements,
                cited,
                verdict,
                reason,
                answers_checked,
            } => self.checks.push(json!({
                "id": check, "title": title, "requirements": requirements, "cited": cited,
                "verdict": verdict, "reason": reason, "answers_checked": answers_checked,
            })),
            Event::BaselineStale { id, reason } => {
                self.stale.push(json!({"id": id, "reason": reason}))
            }
            Event::RunFinished {
                summary,
                claim,
                exit_code,
                duration_ms,
            } => {
                self.doc.insert("summary".into(), json!(summary));
                self.doc.insert("claim".into(), json!(claim));
                self.doc.insert("exit_code".into(), json!(exit_code));
                self.doc.insert("duration_ms".into(), json!(duration_ms));
            }
            _ => {}
        }
    }

    fn finish(&mut self) -> std::io::Result<()> {
        if let Some(path) = &self.path {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            let text =
                serde_json::to_string_pretty(&self.document()).map_err(std::io::Error::other)?;
            std::fs::write(path, text + "\n")?;
        }
        Ok(())
    }
}
