//! Consumer scenarios (`vectors/consumer/*.json`, `format_version` 1): the
//! harness plays a scripted hostile Provider, makes the Consumer under test
//! act, and judges what it did. Format in `vectors/consumer/README.md`.

use super::hostile::CallRecord;
use cetp_proto::envelope::keys;
use serde::Deserialize;
use serde_json::{Map, Value as Json};
use std::path::Path;

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    pub format_version: u32,
    pub group: String,
    #[serde(default)]
    pub description: String,
    pub scenarios: Vec<Scenario>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub id: String,
    pub title: String,
    /// Always `consumer`: the harness is the Provider.
    pub role: String,
    /// `MUST` (a broken expectation FAILs) or `SHOULD` (it WARNs).
    pub level: String,
    pub requirements: Vec<String>,
    #[serde(default)]
    pub provider: ProviderSpec,
    #[serde(default)]
    pub script: Vec<Rule>,
    pub acts: Vec<Json>,
    pub expect: Vec<Expect>,
}

/// The hostile Provider's shape.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderSpec {
    /// `dual_stack` (default: `version=1`, `versions=1,2`), `v2_only`, `v1_only`.
    #[serde(default = "dual_stack")]
    pub manifest: String,
    /// The package owning the ContentProvider behind the authority, when it
    /// is not the service's (§2.1 same-package check).
    #[serde(default)]
    pub authority_package: Option<String>,
    /// Capabilities it grants when offered (default: all three).
    #[serde(default)]
    pub caps: Option<Vec<String>>,
    /// Its tool descriptors (default: `hostile::default_tools`).
    #[serde(default)]
    pub tools: Option<Json>,
    #[serde(default)]
    pub revision: Option<String>,
    /// A second, well-behaved Provider of another package (`org.cetp.decoy`,
    /// authority `org.cetp.decoy.clawseed.tools`, acts name it `$decoy`),
    /// discovered before this one, with the same tools and the same
    /// provider_name: routing must follow (provider_id, tool name), never
    /// scan order or a label (§3.1).
    #[serde(default)]
    pub decoy: bool,
}

fn dual_stack() -> String {
    "dual_stack".into()
}

impl Default for ProviderSpec {
    fn default() -> Self {
        ProviderSpec {
            manifest: dual_stack(),
            authority_package: None,
            caps: None,
            tools: None,
            revision: None,
            decoy: false,
        }
    }
}

/// One scripted answer: the first rule whose `when` matches a call answers it.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    pub when: When,
    pub reply: Json,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct When {
    pub method: String,
    #[serde(default)]
    pub tool: Option<String>,
    /// Only the n-th matching call (1-based).
    #[serde(default)]
    pub nth: Option<u32>,
    /// Only the first n matching calls.
    #[serde(default)]
    pub upto: Option<u32>,
    /// Only calls that carry (true) or lack (false) a `resume_token`.
    #[serde(default)]
    pub resume: Option<bool>,
    /// Only v1 calls (true) or v2 calls (false).
    #[serde(default)]
    pub v1: Option<bool>,
}

impl When {
    pub fn matches(&self, r: &CallRecord) -> bool {
        r.method == self.method
            && self
                .tool
                .as_ref()
                .is_none_or(|t| r.tool().as_ref() == Some(t))
            && self
                .resume
                .is_none_or(|want| r.extras.contains(keys::RESUME_TOKEN) == want)
            && self.v1.is_none_or(|want| r.is_v1() == want)
    }
}

/// One judgement of the run (the checks are listed in
/// [`super::judge::CHECKS`]).
#[derive(Clone, Debug, Deserialize)]
pub struct Expect {
    pub check: String,
    /// What a finding cites; default: the scenario's requirements.
    #[serde(default)]
    pub requirements: Option<Vec<String>>,
    #[serde(flatten)]
    pub params: Map<String, Json>,
}

/// Expands `${repeat:N:TEXT}` string values (TEXT N times), so that
/// oversized Provider text can be written down.
pub fn expand(v: &mut Json) {
    match v {
        Json::String(s) => {
            if let Some(inner) = s
                .strip_prefix("${repeat:")
                .and_then(|r| r.strip_suffix('}'))
            {
                if let Some((n, text)) = inner.split_once(':') {
                    if let Ok(n) = n.parse::<usize>() {
                        *s = text.repeat(n.min(16 * 1024 * 1024));
                    }
                }
            }
        }
        Json::Array(a) => a.iter_mut().for_each(expand),
        Json::Object(o) => o.values_mut().for_each(expand),
        _ => {}
    }
}

/// Every scenario of a folder, in file-name order, ids unique.
pub fn load_dir(dir: &Path) -> Result<Vec<Scenario>, String> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let mut texts = Vec::new();
    for f in files {
        let t = std::fs::read_to_string(&f).map_err(|e| format!("{}: {e}", f.display()))?;
        texts.push((f.display().to_string(), t));
    }
    load_texts(&texts)
}

/// Parses scenario files given as (name, text).
pub fn load_texts(texts: &[(String, String)]) -> Result<Vec<Scenario>, String> {
    let mut out: Vec<Scenario> = Vec::new();
    for (name, text) in texts {
        let mut v: Json = serde_json::from_str(text).map_err(|e| format!("{name}: {e}"))?;
        expand(&mut v);
        let f: ScenarioFile = serde_json::from_value(v).map_err(|e| format!("{name}: {e}"))?;
        if f.format_version != 1 {
            return Err(format!("{name}: format_version {}", f.format_version));
        }
        for s in f.scenarios {
            if s.role != "consumer" {
                return Err(format!("{name}: {} has role {:?}", s.id, s.role));
            }
            if out.iter().any(|o| o.id == s.id) {
                return Err(format!("{name}: duplicate scenario id {}", s.id));
            }
            out.push(s);
        }
    }
    Ok(out)
}
