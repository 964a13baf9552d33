//! Loading the data the runner needs: cases, check definitions, the rule →
//! requirement map, and a baseline of known failures.

use crate::vector::{VectorFile, FORMAT_VERSION};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

/// A check's definition (`vectors/checks/checks.json`).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CheckDef {
    /// The check's id (e.g. `CHK-ECHO`).
    pub id: String,
    /// Human title.
    pub title: String,
    /// Requirement ids it enforces.
    pub requirements: Vec<String>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ChecksFile {
    format_version: u32,
    checks: Vec<CheckDef>,
    /// Descriptor rule key → requirement ids.
    rules: BTreeMap<String, Vec<String>>,
}

/// Everything a run judges by: the vector cases and the check definitions,
/// loaded from the `vectors/` directory.
#[derive(Clone, Debug)]
pub struct Suite {
    /// Every case of every vector file.
    pub cases: Vec<crate::vector::Case>,
    /// The answer checks and what they enforce.
    pub checks: Vec<CheckDef>,
    /// Descriptor rule key → requirement ids (`vectors/checks/checks.json`).
    pub rules: BTreeMap<String, Vec<String>>,
    /// SHA-256 over every loaded file, for the run's config hash.
    pub fingerprint: String,
}

/// A vector or check file that cannot be loaded.
#[derive(Debug)]
pub struct SuiteError {
    /// The file.
    pub path: PathBuf,
    /// What is wrong with it.
    pub message: String,
}

impl fmt::Display for SuiteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.message)
    }
}

impl std::error::Error for SuiteError {}

fn read(path: &Path) -> Result<String, SuiteError> {
    std::fs::read_to_string(path).map_err(|e| SuiteError {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

/// The vectors directory of this source tree (used when `--vectors` is not
/// given and `CETP_VECTORS` is unset).
pub fn default_vectors_dir() -> PathBuf {
    if let Ok(dir) = std::env::var("CETP_VECTORS") {
        return PathBuf::from(dir);
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../vectors")
}

impl Suite {
    /// Loads `DIR/cases/*.json` and `DIR/checks/checks.json`.
    pub fn load(dir: &Path) -> Result<Suite, SuiteError> {
        let cases_dir = dir.join("cases");
        let mut files: Vec<PathBuf> = std::fs::read_dir(&cases_dir)
            .map_err(|e| SuiteError {
                path: cases_dir.clone(),
                message: e.to_string(),
            })?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        files.sort();
        // Regressions (`cetp fuzz` findings kept as they were written) are
        // cases like any other, after the groups.
        let regressions = dir.join("regressions");
        if let Ok(entries) = std::fs::read_dir(&regressions) {
            let mut more: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "json"))
                .collect();
            more.sort();
            files.extend(more);
        }
        let mut all = Vec::new();
        let mut hasher_input = String::new();
        let mut ids = BTreeSet::new();
        for path in &files {
            let text = read(path)?;
            hasher_input.push_str(&text);
            let file = VectorFile::from_json(&text).map_err(|message| SuiteError {
                path: path.clone(),
                message,
            })?;
            for case in file.cases {
                if !ids.insert(case.id.clone()) {
                    return Err(SuiteError {
                        path: path.clone(),
                        message: format!("duplicate case id {}", case.id),
                    });
                }
                all.push(case);
            }
        }
        let checks_path = dir.join("checks/checks.json");
        let text = read(&checks_path)?;
        hasher_input.push_str(&text);
        let checks: ChecksFile = serde_json::from_str(&text).map_err(|e| SuiteError {
            path: checks_path.clone(),
            message: e.to_string(),
        })?;
        if checks.format_version != FORMAT_VERSION {
            return Err(SuiteError {
                path: checks_path,
                message: "unsupported format_version".into(),
            });
        }
        Ok(Suite {
            cases: all,
            checks: checks.checks,
            rules: checks.rules,
            fingerprint: cetp_proto::canonical::sha256_hex(hasher_input.as_bytes()),
        })
    }
}

/// Known failures (`--baseline FILE`, TOML): each entry needs a reason.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Baseline {
    /// The `[[known_failure]]` entries.
    #[serde(rename = "known_failure", default)]
    pub entries: Vec<BaselineEntry>,
}

/// One known failure.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BaselineEntry {
    /// Id of the failing case or check.
    pub id: String,
    /// Why it is accepted (required).
    pub reason: String,
}

impl Baseline {
    /// Parses a baseline, refusing an entry without a reason.
    pub fn from_toml(text: &str) -> Result<Baseline, String> {
        let b: Baseline = toml::from_str(text).map_err(|e| e.to_string().trim().to_string())?;
        for e in &b.entries {
            if e.reason.trim().is_empty() {
                return Err(format!("known_failure {}: reason must not be empty", e.id));
            }
        }
        Ok(b)
    }

    /// The reason a failure of `id` is accepted, if it is.
    pub fn reason_for(&self, id: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|e| e.id == id)
            .map(|e| e.reason.as_str())
    }
}

/// Id of the contract lock case in the run's report: the one case not
/// read from a vector file (`--lock`, `cetp_conformance::lock_target`).
pub const LOCK_CASE_ID: &str = "LOCK-001";
