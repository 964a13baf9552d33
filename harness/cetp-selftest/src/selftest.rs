//! Self-test: proves that the suite can fail.
//!
//! The suite runs against each fixture Provider (every case must PASS or be
//! NOT_APPLICABLE, every check PASS), against every documented mutant of it
//! (a mutant is killed when at least one case or check FAILs naming one of
//! the requirements the mutant's documentation says it breaks,
//! `vectors/mutants/mutants.json`), and against every legal variant, which
//! must get no false verdict (`vectors/variants/variants.json`).
//!
//! Each fixture's contract lock is recorded first and every run is held to
//! it, as a release is held to the lock of the one before: that is the only
//! way the §3.3 revision rule across two releases (`LOCK-001`) can fail.

use cetp_conformance::runner::{run, RunConfig, RunOutcome};
use cetp_vectors::device::Target;
use cetp_vectors::event::{Fanout, Verdict};
use cetp_vectors::profile::Profile;
use cetp_vectors::suite::Suite;
use serde::Deserialize;
use serde_json::{json, Value as Json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// A documented Provider mutant (`vectors/mutants/mutants.json`).
#[derive(Clone, Debug, Deserialize)]
pub struct MutantDoc {
    /// The mutant's name, as the fixture Provider knows it.
    pub name: String,
    /// Requirement ids it breaks: a finding citing one of them kills it.
    #[serde(default)]
    pub requirements: Vec<String>,
    /// What it does wrong, for a human.
    #[serde(default)]
    pub description: String,
    /// Why the suite cannot tell this mutant from the reference (an
    /// equivalent mutant under black-box testing). Such mutants are run and
    /// reported, but not required to be killed.
    #[serde(default)]
    pub equivalent: Option<String>,
    /// Fixture Providers this mutant applies to (`reference`, `notes`).
    #[serde(default = "reference_only")]
    pub providers: Vec<String>,
}

fn reference_only() -> Vec<String> {
    vec!["reference".into()]
}

#[derive(Clone, Debug, Deserialize)]
struct MutantsFile {
    mutants: Vec<MutantDoc>,
}

/// A legal variant (`vectors/variants/variants.json`): a Provider taking one
/// latitude the spec leaves, with the profile its vendor would write.
#[derive(Clone, Debug, Deserialize)]
pub struct VariantDoc {
    /// The variant's name, as the simulator knows it.
    pub name: String,
    /// The target hosting it (`sim:variant=NAME`).
    pub target: String,
    /// Profile file name under `profiles/`.
    pub profile: String,
    /// Requirement ids whose latitude it takes.
    #[serde(default)]
    pub allowed_by: Vec<String>,
    /// `MAY` (a WARN is then a false verdict too) or `UNSPECIFIED`.
    pub latitude: String,
    /// What it does differently, for a human.
    #[serde(default)]
    pub description: String,
}

#[derive(Clone, Debug, Deserialize)]
struct VariantsFile {
    variants: Vec<VariantDoc>,
}

/// Reads the legal variants file.
pub fn load_variants(path: &Path) -> Result<Vec<VariantDoc>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let f: VariantsFile =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(f.variants)
}

/// A fixture Provider the self-test runs with its own profile and mutants.
#[derive(Clone, Debug)]
pub struct Fixture {
    /// `reference` or `notes`: matches [`MutantDoc::providers`].
    pub name: String,
    /// Target text hosting it unmutated (`sim`, `sim:provider=notes`).
    pub target: String,
    /// The profile its vendor would write.
    pub profile: Profile,
}

impl Fixture {
    /// The target text of mutant `m` of this fixture.
    pub fn mutant_target(&self, m: &str) -> String {
        if self.target.contains(':') {
            format!("{},mutant={m}", self.target)
        } else {
            format!("{}:mutant={m}", self.target)
        }
    }
}

/// The fixture Providers the self-test runs the suite and their mutants
/// against: the reference Provider and the notes Provider, shaped unlike
/// it, each with the profile its vendor wrote ([`cetp_vectors::profile::builtin`]).
pub fn fixtures() -> Result<Vec<Fixture>, String> {
    use cetp_vectors::profile::builtin;
    let profile = |text: &str| Profile::from_toml(text).map_err(|e| e.to_string());
    Ok(vec![
        Fixture {
            name: "reference".into(),
            target: "sim".into(),
            profile: profile(builtin::REFERENCE)?,
        },
        Fixture {
            name: "notes".into(),
            target: "sim:provider=notes".into(),
            profile: profile(builtin::NOTES)?,
        },
    ])
}

/// Each legal variant with the profile its vendor would write, read from
/// `profiles_dir`.
pub fn with_profiles(
    variants: Vec<VariantDoc>,
    profiles_dir: &Path,
) -> Result<Vec<(VariantDoc, Profile)>, String> {
    variants
        .into_iter()
        .map(|v| {
            let path = profiles_dir.join(&v.profile);
            let text =
                std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            let p = Profile::from_toml(&text).map_err(|e| format!("{}: {e}", path.display()))?;
            Ok((v, p))
        })
        .collect()
}

/// How many runs a self-test makes: each fixture, each mutant on each
/// fixture it applies to, each legal variant.
pub fn planned_runs(fixtures: &[Fixture], mutants: &[MutantDoc], variants: usize) -> usize {
    fixtures.len()
        + mutants
            .iter()
            .map(|m| {
                fixtures
                    .iter()
                    .filter(|f| m.providers.contains(&f.name))
                    .count()
            })
            .sum::<usize>()
        + variants
}

/// A proof record (`reports/proof.json`, `reports/consumer-proof.json`):
/// the text a self-test observed, written, or checked against the file
/// that must hold it.
pub struct ProofRecord {
    /// How messages name it (`proof record`, `Consumer proof record`).
    pub label: &'static str,
    /// The command that writes it again (`cetp selftest`).
    pub command: &'static str,
    /// The JSON text (pretty-printed, newline-terminated) the file must hold.
    pub text: String,
}

impl ProofRecord {
    /// The record of `proof`, named `label`, written again by `command`.
    pub fn new(label: &'static str, command: &'static str, proof: &Json) -> ProofRecord {
        ProofRecord {
            label,
            command,
            text: serde_json::to_string_pretty(proof).unwrap_or_default() + "\n",
        }
    }

    /// Writes it to `path`; the line to print, or why it cannot be written.
    pub fn write(&self, path: &Path) -> Result<String, String> {
        std::fs::write(path, &self.text)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        Ok(format!("wrote {}", path.display()))
    }

    /// Whether `path` holds it: the line to print when it does, or what
    /// to do when it is stale.
    pub fn check(&self, path: &Path) -> Result<String, String> {
        if std::fs::read_to_string(path).ok().as_deref() == Some(self.text.as_str()) {
            return Ok(format!(
                "{} {} matches this run",
                self.label,
                path.display()
            ));
        }
        Err(format!(
            "{} {} is stale: run `{} --write-proof {}`, then `cetp coverage --write`, and commit both",
            self.label,
            path.display(),
            self.command,
            path.display()
        ))
    }
}

/// Reads the mutants file.
pub fn load_mutants(path: &Path) -> Result<Vec<MutantDoc>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let f: MutantsFile =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(f.mutants)
}

/// What one Provider mutant got: killed, equivalent, or not caught.
#[derive(Clone, Debug)]
pub struct MutantResult {
    /// `fixture/name` for fixtures other than the reference.
    pub name: String,
    /// Requirement ids it is documented to break.
    pub requirements: Vec<String>,
    /// Cases/checks whose finding cited a documented requirement.
    pub killed_by: Vec<String>,
    /// The documented requirements those findings cited: what this mutant
    /// proves the suite can catch. Empty for an equivalent mutant, which
    /// proves nothing.
    pub proved: BTreeSet<String>,
    /// Cases/checks that FAILed for other requirements.
    pub other_failures: Vec<String>,
    /// An INFRA_ERROR that kept it from being judged, with the case.
    pub infra: Option<String>,
    /// Why it is equivalent, when documented so.
    pub equivalent: Option<String>,
}

impl MutantResult {
    /// Whether a finding cited a documented requirement.
    pub fn killed(&self) -> bool {
        !self.killed_by.is_empty()
    }
}

/// What a legal variant got: it must get no FAIL (and no WARN when its
/// latitude is a MAY); anything else is a false verdict of the suite.
#[derive(Clone, Debug)]
pub struct VariantResult {
    /// The variant's name.
    pub name: String,
    /// `MAY` or `UNSPECIFIED`.
    pub latitude: String,
    /// `ID: reason` of each FAIL, FLAKY or INFRA_ERROR.
    pub false_fails: Vec<String>,
    /// `ID: reason` of each WARN.
    pub warns: Vec<String>,
    /// Cases left unjudged by the variant's profile (not a false verdict,
    /// but reported: the claim is not established for them).
    pub unjudged: Vec<String>,
    /// Cases and checks that passed.
    pub passed: usize,
}

impl VariantResult {
    /// No false verdict (a WARN counts for a MAY latitude).
    pub fn ok(&self) -> bool {
        self.false_fails.is_empty() && (self.latitude != "MAY" || self.warns.is_empty())
    }
}

/// The Provider selftest's result (what `cetp selftest` reports).
#[derive(Clone, Debug)]
pub struct SelftestReport {
    /// Problems with the unmutated fixtures' runs (must be empty).
    pub reference_problems: Vec<String>,
    /// Every Provider mutant's result.
    pub mutants: Vec<MutantResult>,
    /// Every legal variant's result.
    pub variants: Vec<VariantResult>,
}

impl SelftestReport {
    /// Number of mutants killed.
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

    /// The selftest holds: fixtures clean, every non-equivalent mutant killed,
    /// every variant without false verdict.
    pub fn ok(&self) -> bool {
        self.reference_problems.is_empty()
            && self
                .mutants
                .iter()
                .all(|m| m.killed() || m.equivalent.is_some())
            && self.variants.iter().all(VariantResult::ok)
    }

    /// The proof record (`reports/proof.json`): which requirements each
    /// mutant was observed to be caught breaking in this run. Coverage's
    /// "proven" column is made from it, never from the documentation.
    pub fn proof(&self) -> Json {
        let mut by_req: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        let mut mutants = serde_json::Map::new();
        for m in self.mutants.iter().filter(|m| m.equivalent.is_none()) {
            for r in &m.proved {
                by_req.entry(r.as_str()).or_default().push(m.name.as_str());
            }
            mutants.insert(m.name.clone(), json!(m.proved));
        }
        json!({
            "format_version": 1,
            "generated_by": "cetp selftest --write-proof",
            "mutants": mutants,
            "requirements": by_req,
        })
    }

    /// Both tables: mutant → killing cases, legal variant → false verdicts.
    pub fn render(&self) -> String {
        let mut out = String::new();
        if self.reference_problems.is_empty() {
            out.push_str("fixtures: every case PASS or NOT_APPLICABLE, every check PASS\n");
        } else {
            out.push_str("fixtures: NOT CLEAN\n");
            for p in &self.reference_problems {
                out.push_str(&format!("  {p}\n"));
            }
        }
        let width = self
            .mutants
            .iter()
            .map(|m| m.name.len())
            .chain(self.variants.iter().map(|v| v.name.len()))
            .max()
            .unwrap_or(6)
            .max(7);
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
            let detail = if m.killed() && !m.proved.is_empty() {
                format!(
                    "{}  proves {}",
                    m.killed_by.join(", "),
                    m.proved.iter().cloned().collect::<Vec<_>>().join(", ")
                )
            } else if m.killed() {
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
        if !self.variants.is_empty() {
            out.push_str(&format!(
                "\n{:<width$}  {:<8}  {:<11}  false verdicts / cases left unjudged by its profile\n",
                "variant", "result", "latitude"
            ));
            for v in &self.variants {
                let result = if v.ok() { "passed" } else { "FALSE" };
                let mut detail: Vec<String> = v.false_fails.clone();
                detail.extend(v.warns.iter().map(|w| format!("WARN {w}")));
                if !v.unjudged.is_empty() {
                    detail.push(format!("unjudged: {}", v.unjudged.join(", ")));
                }
                out.push_str(&format!(
                    "{:<width$}  {:<8}  {:<11}  {}\n",
                    v.name,
                    result,
                    v.latitude,
                    if detail.is_empty() {
                        format!("{} passed", v.passed)
                    } else {
                        detail.join("; ")
                    }
                ));
            }
            let good = self.variants.iter().filter(|v| v.ok()).count();
            out.push_str(&format!(
                "\nlegal variants: {good}/{} without a false FAIL{}\n",
                self.variants.len(),
                " (and without a WARN where the latitude is a MAY)"
            ));
        }
        out
    }
}

/// Each FAIL with the requirements its finding cites (the failing step's,
/// or the rules of a check's findings), never the whole static list of its
/// case or check.
fn failures(out: &RunOutcome) -> Vec<(String, Vec<String>)> {
    let mut v: Vec<(String, Vec<String>)> = out
        .cases
        .iter()
        .filter(|c| c.verdict == Verdict::Fail)
        .map(|c| (c.id.clone(), c.cited.clone()))
        .collect();
    v.extend(
        out.checks
            .iter()
            .filter(|c| c.verdict == Verdict::Fail)
            .map(|c| (c.id.clone(), c.cited.clone())),
    );
    v
}

/// Builds a target from its text (`sim:mutant=NAME`, ...).
pub type TargetFactory<'a> = dyn Fn(&str) -> Result<Target, String> + Sync + 'a;

/// One run the self-test makes.
enum Job<'a> {
    Mutant(&'a Fixture, &'a MutantDoc, &'a RunConfig),
    Variant(&'a VariantDoc, &'a Profile, &'a RunConfig),
}

/// Runs the self-test: each fixture unmutated (clean), every mutant of each
/// fixture (killed), every legal variant (no false verdict). Runs go on
/// `jobs` threads: each has its own device, and most of a run is waiting.
#[allow(clippy::too_many_arguments)]
pub fn selftest(
    suite: &Suite,
    fixtures: &[Fixture],
    mutants: &[MutantDoc],
    variants: &[(VariantDoc, Profile)],
    cfg: &RunConfig,
    make_target: &TargetFactory<'_>,
    jobs: usize,
    progress: &(dyn Fn(&str) + Sync),
) -> SelftestReport {
    let mut reference_problems = Vec::new();
    // One configuration per fixture: the run's, held to the fixture's lock.
    let mut cfgs: Vec<RunConfig> = Vec::new();
    for f in fixtures {
        cfgs.push(clean_fixture(
            suite,
            f,
            cfg,
            make_target,
            &mut reference_problems,
        ));
        progress(&f.name);
    }
    let mut work: Vec<Job<'_>> = Vec::new();
    for (f, fcfg) in fixtures.iter().zip(&cfgs) {
        for m in mutants.iter().filter(|m| m.providers.contains(&f.name)) {
            work.push(Job::Mutant(f, m, fcfg));
        }
    }
    // Variants are held to the reference's lock: one that changes its
    // contract must also change its revision.
    let variant_cfg = cfgs.first().unwrap_or(cfg);
    for (v, p) in variants {
        work.push(Job::Variant(v, p, variant_cfg));
    }
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
                let Some(job) = work.get(i) else { break };
                let (label, r) = match job {
                    Job::Mutant(f, m, c) => {
                        let r = judge_mutant(suite, f, c, make_target, m);
                        (r.name.clone(), Ok(r))
                    }
                    Job::Variant(v, p, c) => (
                        v.name.clone(),
                        Err(judge_variant(suite, p, c, make_target, v)),
                    ),
                };
                progress(&label);
                results
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push((i, r));
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_else(|p| p.into_inner());
    results.sort_by_key(|(i, _)| *i);
    let mut report = SelftestReport {
        reference_problems,
        mutants: Vec::new(),
        variants: Vec::new(),
    };
    for (_, r) in results {
        match r {
            Ok(m) => report.mutants.push(m),
            Err(v) => report.variants.push(v),
        }
    }
    report
}

/// One fixture unmutated: recorded to its contract lock (unless the run
/// brings one) and run; whatever does not pass is a problem of the
/// reference. The configuration its mutants are held to.
fn clean_fixture(
    suite: &Suite,
    f: &Fixture,
    cfg: &RunConfig,
    make_target: &TargetFactory<'_>,
    reference_problems: &mut Vec<String>,
) -> RunConfig {
    let mut fcfg = cfg.clone();
    match make_target(&f.target) {
        Ok(t) => {
            if fcfg.lock.is_none() {
                match cetp_conformance::lock_target::record(&t, &f.profile) {
                    Ok(built) if built.problems.is_empty() => fcfg.lock = Some(built.lock),
                    Ok(built) => reference_problems.extend(built.problems.iter().map(|p| {
                        format!(
                            "{}: the {} answer breaks §{} at {}: {}",
                            f.name, p.method, p.section, p.pointer, p.message
                        )
                    })),
                    Err(e) => reference_problems
                        .push(format!("{}: cannot record the contract lock: {e}", f.name)),
                }
            }
            let out = run(suite, &t, &f.profile, &fcfg, &mut Fanout::default());
            for c in &out.cases {
                if !matches!(c.verdict, Verdict::Pass | Verdict::NotApplicable) {
                    reference_problems.push(format!(
                        "{}: {} {}: {}",
                        f.name,
                        c.id,
                        c.verdict.as_str(),
                        c.reason
                    ));
                }
            }
            for c in &out.checks {
                if c.verdict != Verdict::Pass {
                    reference_problems.push(format!(
                        "{}: {} {}: {}",
                        f.name,
                        c.id,
                        c.verdict.as_str(),
                        c.reason
                    ));
                }
            }
        }
        Err(e) => reference_problems.push(format!("cannot start {}: {e}", f.target)),
    }
    fcfg
}

fn judge_mutant(
    suite: &Suite,
    fixture: &Fixture,
    cfg: &RunConfig,
    make_target: &TargetFactory<'_>,
    m: &MutantDoc,
) -> MutantResult {
    let documented: BTreeSet<&str> = m.requirements.iter().map(String::as_str).collect();
    let mut r = MutantResult {
        name: if fixture.name == "reference" {
            m.name.clone()
        } else {
            format!("{}/{}", fixture.name, m.name)
        },
        requirements: m.requirements.clone(),
        killed_by: Vec::new(),
        proved: BTreeSet::new(),
        other_failures: Vec::new(),
        infra: None,
        equivalent: m.equivalent.clone(),
    };
    match make_target(&fixture.mutant_target(&m.name)) {
        Ok(t) => {
            let out = run(suite, &t, &fixture.profile, cfg, &mut Fanout::default());
            for (id, reqs) in failures(&out) {
                let hit: Vec<&String> = reqs
                    .iter()
                    .filter(|q| documented.contains(q.as_str()))
                    .collect();
                if !hit.is_empty() {
                    r.killed_by.push(id);
                    if r.equivalent.is_none() {
                        r.proved.extend(hit.into_iter().cloned());
                    }
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

fn judge_variant(
    suite: &Suite,
    profile: &Profile,
    cfg: &RunConfig,
    make_target: &TargetFactory<'_>,
    v: &VariantDoc,
) -> VariantResult {
    let mut r = VariantResult {
        name: v.name.clone(),
        latitude: v.latitude.clone(),
        false_fails: Vec::new(),
        warns: Vec::new(),
        unjudged: Vec::new(),
        passed: 0,
    };
    match make_target(&v.target) {
        Ok(t) => {
            let out = run(suite, &t, profile, cfg, &mut Fanout::default());
            let all = out
                .cases
                .iter()
                .map(|c| (&c.id, c.verdict, &c.reason, c.unjudged.as_ref()))
                .chain(
                    out.checks
                        .iter()
                        .map(|c| (&c.id, c.verdict, &c.reason, None)),
                );
            for (id, verdict, reason, unjudged) in all {
                match verdict {
                    Verdict::Pass => r.passed += 1,
                    Verdict::Warn => r.warns.push(format!("{id}: {reason}")),
                    Verdict::NotApplicable => {
                        if let Some(n) = unjudged {
                            r.unjudged.push(format!("{id} ({n})"));
                        }
                    }
                    other => r
                        .false_fails
                        .push(format!("{} {id}: {reason}", other.as_str())),
                }
            }
        }
        Err(e) => r
            .false_fails
            .push(format!("cannot start {}: {e}", v.target)),
    }
    r
}
