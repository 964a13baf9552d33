//! Self-test: proves that the suite can fail.
//!
//! The suite runs against the reference Provider (every case must PASS or be
//! NOT_APPLICABLE, every check PASS) and against every documented mutant; a
//! mutant is killed when at least one case or check FAILs naming one of the
//! requirements the mutant's documentation says it breaks
//! (`vectors/mutants/mutants.json`).
//!
//! The reference's contract lock is recorded first and every run is held to
//! it, as a release is held to the lock of the one before: that is the only
//! way the §3.3 revision rule across two releases (`LOCK-001`) can fail.

use crate::device::Target;
use crate::event::{Fanout, Verdict};
use crate::profile::Profile;
use crate::runner::{run, RunConfig, RunOutcome};
use crate::suite::Suite;
use serde::Deserialize;
use std::collections::BTreeSet;
use std::path::Path;

#[derive(Clone, Debug, Deserialize)]
pub struct MutantDoc {
    pub name: String,
    #[serde(default)]
    pub requirements: Vec<String>,
    #[serde(default)]
    pub description: String,
    /// Why the suite cannot tell this mutant from the reference (an
    /// equivalent mutant under black-box testing). Such mutants are run and
    /// reported, but not required to be killed.
    #[serde(default)]
    pub equivalent: Option<String>,
}

#[derive(Clone, Debug, Deserialize)]
struct MutantsFile {
    mutants: Vec<MutantDoc>,
}

pub fn load_mutants(path: &Path) -> Result<Vec<MutantDoc>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let f: MutantsFile =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(f.mutants)
}

#[derive(Clone, Debug)]
pub struct MutantResult {
    pub name: String,
    pub requirements: Vec<String>,
    /// Cases/checks that FAILed naming a documented requirement.
    pub killed_by: Vec<String>,
    /// Cases/checks that FAILed for other requirements.
    pub other_failures: Vec<String>,
    pub infra: Option<String>,
    pub equivalent: Option<String>,
}

impl MutantResult {
    pub fn killed(&self) -> bool {
        !self.killed_by.is_empty()
    }
}

#[derive(Clone, Debug)]
pub struct SelftestReport {
    /// Problems with the reference run (must be empty).
    pub reference_problems: Vec<String>,
    pub mutants: Vec<MutantResult>,
}

impl SelftestReport {
    pub fn killed(&self) -> usize {
        self.mutants.iter().filter(|m| m.killed()).count()
    }

    /// Mutants that must be killed (not documented as equivalent).
    pub fn required(&self) -> usize {
        self.mutants
            .iter()
            .filter(|m| m.equivalent.is_none())
            .count()
    }

    pub fn ok(&self) -> bool {
        self.reference_problems.is_empty()
            && self
                .mutants
                .iter()
                .all(|m| m.killed() || m.equivalent.is_some())
    }

    /// Mutation score and the table mutant → killing cases.
    pub fn render(&self) -> String {
        let mut out = String::new();
        if self.reference_problems.is_empty() {
            out.push_str("reference: every case PASS or NOT_APPLICABLE, every check PASS\n");
        } else {
            out.push_str("reference: NOT CLEAN\n");
            for p in &self.reference_problems {
                out.push_str(&format!("  {p}\n"));
            }
        }
        let width = self
            .mutants
            .iter()
            .map(|m| m.name.len())
            .max()
            .unwrap_or(6)
            .max(6);
        out.push_str(&format!(
            "\n{:<width$}  {:<8}  killing cases / checks\n",
            "mutant", "result"
        ));
        for m in &self.mutants {
            let result = if m.killed() {
                "killed"
            } else if m.equivalent.is_some() {
                "equiv."
            } else if m.infra.is_some() {
                "INFRA"
            } else {
                "SURVIVED"
            };
            let detail = if m.killed() {
                m.killed_by.join(", ")
            } else if let Some(e) = &m.equivalent {
                format!("documented equivalent: {e}")
            } else if let Some(i) = &m.infra {
                i.clone()
            } else if !m.other_failures.is_empty() {
                format!(
                    "fails only for other requirements: {}",
                    m.other_failures.join(", ")
                )
            } else {
                "no case fails".into()
            };
            out.push_str(&format!("{:<width$}  {:<8}  {}\n", m.name, result, detail));
        }
        let n = self.required();
        let k = self
            .mutants
            .iter()
            .filter(|m| m.killed() && m.equivalent.is_none())
            .count();
        let eq = self.mutants.len() - n;
        out.push_str(&format!(
            "\nmutation score: {k}/{n} killed ({:.1}%); {eq} documented equivalent mutant(s) not counted\n",
            if n == 0 { 0.0 } else { 100.0 * k as f64 / n as f64 }
        ));
        out
    }
}

fn failures(out: &RunOutcome) -> Vec<(String, Vec<String>)> {
    let mut v: Vec<(String, Vec<String>)> = out
        .cases
        .iter()
        .filter(|c| c.verdict == Verdict::Fail)
        .map(|c| (c.id.clone(), c.requirements.clone()))
        .collect();
    v.extend(
        out.checks
            .iter()
            .filter(|c| c.verdict == Verdict::Fail)
            .map(|c| (c.id.clone(), c.requirements.clone())),
    );
    v
}

/// Runs the self-test. `make_target(None)` builds the reference target,
/// `make_target(Some(name))` the mutant `name`. Mutants run on `jobs`
/// threads: each has its own device, and most of a run is waiting.
pub fn selftest(
    suite: &Suite,
    profile: &Profile,
    mutants: &[MutantDoc],
    cfg: &RunConfig,
    make_target: &(dyn Fn(Option<&str>) -> Result<Target, String> + Sync),
    jobs: usize,
    progress: &(dyn Fn(&str) + Sync),
) -> SelftestReport {
    let mut reference_problems = Vec::new();
    let mut cfg = cfg.clone();
    match make_target(None) {
        Ok(t) => {
            if cfg.lock.is_none() {
                match crate::contract::record(&t, profile) {
                    Ok(built) if built.problems.is_empty() => cfg.lock = Some(built.lock),
                    Ok(built) => reference_problems.extend(built.problems.iter().map(|p| {
                        format!(
                            "the reference's {} answer breaks §{} at {}: {}",
                            p.method, p.section, p.pointer, p.message
                        )
                    })),
                    Err(e) => reference_problems
                        .push(format!("cannot record the reference's contract lock: {e}")),
                }
            }
            let out = run(suite, &t, profile, &cfg, &mut Fanout::default());
            for c in &out.cases {
                if !matches!(c.verdict, Verdict::Pass | Verdict::NotApplicable) {
                    reference_problems.push(format!(
                        "{} {}: {}",
                        c.id,
                        c.verdict.as_str(),
                        c.reason
                    ));
                }
            }
            for c in &out.checks {
                if c.verdict != Verdict::Pass {
                    reference_problems.push(format!(
                        "{} {}: {}",
                        c.id,
                        c.verdict.as_str(),
                        c.reason
                    ));
                }
            }
        }
        Err(e) => reference_problems.push(format!("cannot start the reference target: {e}")),
    }
    progress("reference");
    let next = std::sync::Mutex::new(0usize);
    let results = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            scope.spawn(|| loop {
                let i = {
                    let mut n = next.lock().unwrap_or_else(|p| p.into_inner());
                    let i = *n;
                    *n += 1;
                    i
                };
                let Some(m) = mutants.get(i) else { break };
                let r = judge_mutant(suite, profile, &cfg, make_target, m);
                progress(&m.name);
                results
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push((i, r));
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_else(|p| p.into_inner());
    results.sort_by_key(|(i, _)| *i);
    SelftestReport {
        reference_problems,
        mutants: results.into_iter().map(|(_, r)| r).collect(),
    }
}

fn judge_mutant(
    suite: &Suite,
    profile: &Profile,
    cfg: &RunConfig,
    make_target: &(dyn Fn(Option<&str>) -> Result<Target, String> + Sync),
    m: &MutantDoc,
) -> MutantResult {
    let documented: BTreeSet<&str> = m.requirements.iter().map(String::as_str).collect();
    let mut r = MutantResult {
        name: m.name.clone(),
        requirements: m.requirements.clone(),
        killed_by: Vec::new(),
        other_failures: Vec::new(),
        infra: None,
        equivalent: m.equivalent.clone(),
    };
    match make_target(Some(&m.name)) {
        Ok(t) => {
            let out = run(suite, &t, profile, cfg, &mut Fanout::default());
            for (id, reqs) in failures(&out) {
                if reqs.iter().any(|q| documented.contains(q.as_str())) {
                    r.killed_by.push(id);
                } else {
                    r.other_failures.push(id);
                }
            }
            if r.killed_by.is_empty() {
                if let Some(c) = out.cases.iter().find(|c| c.verdict == Verdict::InfraError) {
                    r.infra = Some(format!("{}: {}", c.id, c.reason));
                }
            }
        }
        Err(e) => r.infra = Some(e),
    }
    r
}
