//! Consumer conformance: the harness plays a scripted hostile Provider
//! ([`hostile`]), makes the Consumer under test act (the `consumer_act`
//! shape), and judges what it observably did ([`judge`](mod@judge))
//! against each scenario (`vectors/consumer/`), citing requirement ids.
//!
//! In-process, the Consumer under test is the reference Consumer or one of
//! its mutants ([`ConsumerMutant`]); [`selftest`] proves that every mutant is
//! caught by a scenario citing the requirement it breaks.

pub mod hostile;
pub mod judge;
pub mod port;
pub mod record;
pub mod runner;
pub mod scenario;

use cetp_proto::device::ErrorKind;
use cetp_reference::consumer::{
    ActOutcome, Action, ConsumerConfig, ConsumerMutant, ConsumerVariant, DrivenConsumer,
};
use cetp_vectors::event::Verdict;
use hostile::{Hostile, AUTHORITY, T0};
use judge::{judge, ActRecord, Judged, Trace};
use port::HostilePort;
use scenario::Scenario;
use serde::Deserialize;
use serde_json::{json, Value as Json};
use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::path::Path;

/// One broken expectation.
#[derive(Clone, Debug, PartialEq)]
pub struct Finding {
    /// Name of the check that broke (a [`judge::CHECKS`] name, or
    /// `request_envelope/…`).
    pub check: String,
    /// The requirement ids it cites.
    pub cited: Vec<String>,
    /// What was seen, for a human.
    pub message: String,
}

/// The judgement of one Consumer scenario on one Consumer under test.
#[derive(Clone, Debug)]
pub struct ScenarioResult {
    /// Scenario id.
    pub id: String,
    /// Scenario title.
    pub title: String,
    /// The scenario's verdict: PASS without findings, FAIL with some (WARN for
    /// a SHOULD scenario), NOT_APPLICABLE when it cannot judge this Consumer.
    pub verdict: Verdict,
    /// Every broken expectation, in order.
    pub findings: Vec<Finding>,
    /// Expectations this target could not judge, with why.
    pub not_judged: Vec<String>,
    /// Expectations the target could not see (`check: why`), with the
    /// device ability that would judge each: a scenario that passed with
    /// any is only partly judged, and keeps the Consumer claim from being
    /// established.
    pub unseen: Vec<(String, &'static str)>,
    /// What each act of the Consumer did, for the report.
    pub acts: Vec<ActRecord>,
    /// How many calls the Consumer made to the hostile Provider.
    pub calls: usize,
}

impl ScenarioResult {
    /// The requirement ids the findings cite.
    pub fn cited(&self) -> BTreeSet<&str> {
        self.findings
            .iter()
            .flat_map(|f| f.cited.iter().map(String::as_str))
            .collect()
    }
}

/// The action an act of a scenario stands for (`authority` defaults to the
/// hostile Provider's); `None` for harness-side acts.
pub fn action_of(act: &Json) -> Result<Option<Action>, String> {
    action_at(act, AUTHORITY)
}

/// [`action_of`] for a hostile Provider hosted on `authority`.
pub fn action_at(act: &Json, authority: &str) -> Result<Option<Action>, String> {
    action_for(act, authority, hostile::DECOY_AUTHORITY)
}

/// As [`action_at`], with `$decoy` turned into `decoy_authority` (where the
/// decoy is hosted on a device).
fn action_for(
    act: &Json,
    authority: &str,
    decoy_authority: &str,
) -> Result<Option<Action>, String> {
    match act.get("do").and_then(Json::as_str) {
        Some("advance_clock") => Ok(None),
        _ => {
            let mut a = act.clone();
            if let Some(v) = a.get_mut("authority") {
                if v.as_str() == Some(hostile::DECOY_PLACEHOLDER) {
                    *v = json!(decoy_authority);
                }
            }
            if let Some(o) = a.as_object_mut() {
                o.entry("authority").or_insert_with(|| json!(authority));
            }
            Action::from_json(&a).map(Some)
        }
    }
}

/// `act` with `$decoy` turned into the decoy Provider's authority.
fn resolved(act: &Json) -> Json {
    let mut a = act.clone();
    if let Some(v) = a.get_mut("authority") {
        if v.as_str() == Some(hostile::DECOY_PLACEHOLDER) {
            *v = json!(hostile::DECOY_AUTHORITY);
        }
    }
    a
}

/// Judges a finished run of `s`, against the bounds the Consumer under test
/// declares (§7.3 says to bound Provider data and fixes no figure, so a
/// scenario that tests a bound judges it by the Consumer's own figure).
pub fn judge_run(s: &Scenario, trace: &Trace<'_>, bounds: &DeclaredBounds) -> ScenarioResult {
    if let Some(why) = unoffered(s, trace) {
        return not_judged_after(s, trace, why);
    }
    let mut level = s.level.as_str();
    let mut bound_note = None;
    if let Some(b) = &s.bound {
        match bounds.get(&b.limit) {
            Some(declared) if b.size <= declared => {
                let why = format!(
                    "not judged: the Consumer declares {} = {declared}, which admits the {} this scenario sends",
                    b.limit, b.size
                );
                return not_judged_after(s, trace, why);
            }
            Some(_) => {}
            None => {
                // No declared figure: the spec fixes none either, so refusing
                // to accept this size is judged as a recommendation only.
                level = "SHOULD";
                bound_note = Some(format!(
                    "judged as SHOULD: the Consumer declares no {} (a Consumer profile's [bounds])",
                    b.limit
                ));
            }
        }
    }
    let mut findings = Vec::new();
    let mut not_judged = Vec::new();
    let mut unseen = Vec::new();
    let mut must_broken = false;
    for e in &s.expect {
        match judge(trace, e) {
            Judged::Pass => {}
            Judged::Broken(message) => {
                must_broken |= e.must;
                findings.push(Finding {
                    check: e.check.name().to_string(),
                    cited: e
                        .requirements
                        .clone()
                        .unwrap_or_else(|| s.requirements.clone()),
                    message,
                })
            }
            Judged::NotJudged(why) => not_judged.push(format!("{}: {why}", e.check.name())),
            Judged::Unseen { why, needs } => {
                unseen.push((format!("{}: {why}", e.check.name()), needs))
            }
        }
    }
    if let Some(note) = bound_note {
        not_judged.push(note);
    }
    // Every v2 request's envelope (§4.1), in every scenario, as
    // CHK-ENVELOPE checks every Provider answer: a MUST whatever the
    // scenario's level.
    let mut envelope_broken = false;
    for (check, cited, judged) in judge::envelope(trace) {
        let named = s.expect.iter().any(|e| e.check.name() == check);
        if let (false, Judged::Broken(message)) = (named, judged) {
            envelope_broken = true;
            findings.push(Finding {
                check: format!("request_envelope/{check}"),
                cited: vec![cited.to_string()],
                message,
            });
        }
    }
    let verdict = if findings.is_empty() {
        Verdict::Pass
    } else if envelope_broken || must_broken {
        // A broken envelope, or a check whose own clause is a MUST (its
        // `level`), fails whatever the scenario's level.
        Verdict::Fail
    } else if level == "SHOULD" {
        Verdict::Warn
    } else {
        Verdict::Fail
    };
    ScenarioResult {
        id: s.id.clone(),
        title: s.title.clone(),
        verdict,
        findings,
        not_judged,
        unseen,
        acts: trace.acts.to_vec(),
        calls: trace.calls.len(),
    }
}

/// Why `s` cannot judge this run, when the Consumer negotiated and offered
/// none of a capability the scenario needs (§2.3: offering one is the
/// Consumer's choice). A Consumer that never negotiated is judged as is.
fn unoffered(s: &Scenario, trace: &Trace<'_>) -> Option<String> {
    use cetp_proto::bundle::Value;
    if s.needs.is_empty() {
        return None;
    }
    let mut offered: BTreeSet<String> = BTreeSet::new();
    let mut negotiated = false;
    for c in trace.calls.iter().filter(|c| c.method == "negotiate") {
        negotiated = true;
        if let Some(Value::String(text)) = c
            .extras
            .get(cetp_proto::envelope::keys::CONSUMER_CAPABILITIES)
        {
            if let Ok(list) = serde_json::from_str::<Vec<String>>(text) {
                offered.extend(list);
            }
        }
    }
    let missing: Vec<&str> = s
        .needs
        .iter()
        .filter(|n| !offered.contains(*n))
        .map(String::as_str)
        .collect();
    (negotiated && !missing.is_empty()).then(|| {
        format!(
            "not judged: the Consumer offered no {} in negotiate, which this scenario needs (offering it is the Consumer's choice, §2.3)",
            missing.join(", ")
        )
    })
}

/// Why `s` cannot be judged on a device, when its premise is a device
/// behaviour the device does not say it has (`binder_limit`: `hello`'s
/// `binder_transaction_limit`). Not judged by the setup: the claim stays
/// unestablished until a device that has it judges the scenario.
pub fn premise_unmet(s: &Scenario, binder_limit: bool) -> Option<String> {
    let binder = s.premise.iter().any(|p| p == "binder_transaction_limit");
    (binder && !binder_limit).then(|| {
        "not judged: the scenario's premise is Binder's transaction limit (an answer over about 1 MB never reaches a Consumer on Android), and this device does not say it enforces it, as a TCP rig that carries any size would not (needs a device whose hello says binder_transaction_limit: a phone's probe app, or cetp sim --hosting probe-app)".to_string()
    })
}

/// `s` played but not judged, for `why` (the Consumer's own choice).
fn not_judged_after(s: &Scenario, trace: &Trace<'_>, why: String) -> ScenarioResult {
    ScenarioResult {
        acts: trace.acts.to_vec(),
        calls: trace.calls.len(),
        ..not_judged(s, why)
    }
}

/// `s` not judged, for `why`, before anything was played.
fn not_judged(s: &Scenario, why: String) -> ScenarioResult {
    ScenarioResult {
        id: s.id.clone(),
        title: s.title.clone(),
        verdict: Verdict::NotApplicable,
        findings: Vec::new(),
        not_judged: vec![why],
        unseen: Vec::new(),
        acts: Vec::new(),
        calls: 0,
    }
}

/// Runs `s` in-process against the reference Consumer configured by
/// `config` (a mutant when its `faults` say so).
pub fn run_in_process(s: &Scenario, config: &ConsumerConfig) -> Result<ScenarioResult, String> {
    run_in_process_traced(s, config).map(|(r, _)| r)
}

/// [`run_in_process`], also handing back every call the Consumer made (what
/// a legal variant's differential test compares).
pub fn run_in_process_traced(
    s: &Scenario,
    config: &ConsumerConfig,
) -> Result<(ScenarioResult, Vec<hostile::CallRecord>), String> {
    // The in-process device enforces Binder's transaction limit
    // ([`HostilePort`]), so every premise holds here.
    debug_assert!(premise_unmet(s, true).is_none());
    let hostile = Hostile::new(s.provider.clone(), s.script.clone());
    let mut port = HostilePort::new(hostile, T0);
    port.decoy = s.provider.decoy.then(Hostile::decoy);
    let mut consumer = DrivenConsumer::new(config.clone());
    let mut acts = Vec::new();
    for (i, act) in s.acts.iter().enumerate() {
        port.hostile.act = i;
        if let Some(d) = port.decoy.as_mut() {
            d.act = i;
        }
        let outcome = match action_of(act).map_err(|e| format!("{}: act {i}: {e}", s.id))? {
            None => {
                let ms = act.get("ms").and_then(Json::as_u64).unwrap_or(0);
                cetp_reference::port::ConsumerPort::sleep_ms(&mut port, ms);
                None
            }
            Some(action) => {
                if action == Action::Reset {
                    port.hostile.life += 1;
                }
                Some(consumer.act(&mut port, &action))
            }
        };
        acts.push(ActRecord {
            action: resolved(act),
            outcome,
        });
    }
    let trace = Trace {
        calls: &port.hostile.log,
        acts: &acts,
        intents: &port.hostile.intents,
        fds: Some(&port.fds),
        resolves: Some(&port.resolves),
        decoy_calls: port.decoy.as_ref().map_or(&[], |d| &d.log),
        fd_closes: None,
    };
    let result = judge_run(s, &trace, &DeclaredBounds::of(&config.limits));
    Ok((result, port.hostile.log.clone()))
}

/// The bounds on Provider data a Consumer declares (a Consumer profile's
/// `[bounds]`; for the in-process reference Consumer, its
/// [`LocalLimits`](cetp_reference::consumer::LocalLimits)). §7.3 requires a
/// bound and fixes no figure: a scenario testing one judges it against the
/// declared figure, and at most WARNs when none is declared.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct DeclaredBounds {
    /// Names and titles, bytes.
    pub max_name_bytes: Option<u64>,
    /// Provider, tool and scope descriptions, bytes.
    pub max_description_bytes: Option<u64>,
    /// Nesting depth of Provider JSON (schemas, results, details).
    pub max_json_depth: Option<u64>,
    /// Inline JSON results and error details, bytes.
    pub max_inline_bytes: Option<u64>,
    /// File results read through a descriptor, bytes.
    pub max_file_bytes: Option<u64>,
    /// Tools or scopes accepted from one Provider.
    pub max_items: Option<u64>,
}

impl DeclaredBounds {
    /// Every bound name a scenario's `bound.limit` may use.
    pub const NAMES: &'static [&'static str] = &[
        "max_name_bytes",
        "max_description_bytes",
        "max_json_depth",
        "max_inline_bytes",
        "max_file_bytes",
        "max_items",
    ];

    /// The declared figure for a bound named as in [`DeclaredBounds::NAMES`].
    pub fn get(&self, name: &str) -> Option<u64> {
        match name {
            "max_name_bytes" => self.max_name_bytes,
            "max_description_bytes" => self.max_description_bytes,
            "max_json_depth" => self.max_json_depth,
            "max_inline_bytes" => self.max_inline_bytes,
            "max_file_bytes" => self.max_file_bytes,
            "max_items" => self.max_items,
            _ => None,
        }
    }

    /// What the in-process reference Consumer (or a variant or mutant of
    /// it) declares: the limits it is configured with.
    pub fn of(l: &cetp_reference::consumer::LocalLimits) -> DeclaredBounds {
        DeclaredBounds {
            max_name_bytes: Some(l.max_name_bytes as u64),
            max_description_bytes: Some(l.max_description_bytes as u64),
            max_json_depth: Some(l.json_depth() as u64),
            max_inline_bytes: Some(l.max_inline_bytes as u64),
            max_file_bytes: Some(l.max_file_bytes),
            max_items: Some(l.max_items as u64),
        }
    }
}

/// A Consumer mutant as documented in `vectors/mutants/consumer-mutants.json`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsumerMutantDoc {
    /// The mutant's name, as [`ConsumerMutant`] spells it.
    pub name: String,
    /// Spec sections the mutant breaks (`2.2` for §2.2).
    pub sections: Vec<String>,
    /// What the mutant does wrong.
    pub description: String,
    /// Requirement ids the mutant breaks: a scenario citing one of them must kill it.
    pub requirements: Vec<String>,
    /// Whether real Consumers were seen making this mistake.
    #[serde(default)]
    pub observed_in_the_wild: bool,
}

/// The Consumer mutants catalogue (`vectors/mutants/consumer-mutants.json`).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsumerMutantsFile {
    /// Format of the file (1).
    pub format_version: u32,
    /// Name of the Consumer the mutants derive from.
    pub consumer: String,
    /// What the catalogue is, for a human.
    pub description: String,
    /// The mutants.
    pub mutants: Vec<ConsumerMutantDoc>,
}

/// Reads and parses a mutants catalogue file (see [`parse_mutants`]).
pub fn load_mutants(path: &Path) -> Result<Vec<ConsumerMutantDoc>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse_mutants(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Parses a mutants catalogue (unknown fields refused).
pub fn parse_mutants(text: &str) -> Result<Vec<ConsumerMutantDoc>, String> {
    let f: ConsumerMutantsFile = serde_json::from_str(text).map_err(|e| e.to_string())?;
    Ok(f.mutants)
}

/// A Consumer legal variant as documented in
/// `vectors/variants/consumer-variants.json`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsumerVariantDoc {
    /// The variant's name, as [`ConsumerVariant`] spells it.
    pub name: String,
    /// Spec sections whose latitude the variant takes (`7.3` for §7.3).
    pub sections: Vec<String>,
    /// Requirement ids whose clause leaves the choice (or fixes less than a
    /// stricter reading would ask).
    pub allowed_by: Vec<String>,
    /// `MAY` (the text grants it) or `UNSPECIFIED` (the text fixes no figure
    /// or schedule).
    pub latitude: String,
    /// What the variant does differently, for a human.
    pub description: String,
}

/// The Consumer legal variants catalogue: Consumers that behave otherwise
/// than the reference one and still follow the spec.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsumerVariantsFile {
    /// Must be 1.
    pub format_version: u32,
    /// Name of the Consumer the variants derive from.
    pub consumer: String,
    /// What the catalogue is, for a human.
    pub description: String,
    /// The variants.
    pub variants: Vec<ConsumerVariantDoc>,
}

/// Reads and parses a variants catalogue file, refusing an unknown `format_version`.
pub fn load_variants(path: &Path) -> Result<Vec<ConsumerVariantDoc>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let f: ConsumerVariantsFile =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    if f.format_version != 1 {
        return Err(format!(
            "{}: format_version {}",
            path.display(),
            f.format_version
        ));
    }
    Ok(f.variants)
}

/// One Consumer legal variant through every scenario: any FAIL or WARN is a
/// false verdict of the suite (the variant follows the spec's text).
#[derive(Clone, Debug)]
pub struct VariantResult {
    /// The variant's name.
    pub name: String,
    /// (scenario, verdict, first finding) of every FAIL or WARN.
    pub false_verdicts: Vec<(String, Verdict, String)>,
    /// Scenarios not judged for it (a declared bound admits their size).
    pub not_judged: Vec<String>,
}

impl VariantResult {
    /// No false verdict: the suite accepts the variant.
    pub fn passed(&self) -> bool {
        self.false_verdicts.is_empty()
    }
}

/// Runs every scenario against the reference Consumer taking `variant`'s
/// latitude.
pub fn run_variant(
    scenarios: &[Scenario],
    variant: &ConsumerVariantDoc,
) -> Result<VariantResult, String> {
    let latitude = ConsumerVariant::parse(&variant.name)
        .ok_or_else(|| format!("unknown Consumer legal variant {:?}", variant.name))?;
    let config = ConsumerConfig::default().with_latitude(latitude);
    let mut false_verdicts = Vec::new();
    let mut not_judged = Vec::new();
    for s in scenarios {
        let r = run_in_process(s, &config)?;
        match r.verdict {
            Verdict::Pass => {}
            Verdict::NotApplicable => not_judged.push(s.id.clone()),
            v => {
                let first = r
                    .findings
                    .first()
                    .map(|f| format!("{}: {}", f.check, f.message))
                    .unwrap_or_default();
                false_verdicts.push((s.id.clone(), v, first));
            }
        }
    }
    Ok(VariantResult {
        name: variant.name.clone(),
        false_verdicts,
        not_judged,
    })
}

/// One scenario finding that kills a mutant: it cites a requirement the
/// mutant breaks.
#[derive(Clone, Debug)]
pub struct Kill {
    /// Id of the scenario.
    pub scenario: String,
    /// The check that broke.
    pub check: String,
    /// The requirement ids it cites.
    pub cited: Vec<String>,
    /// What was seen.
    pub message: String,
}

/// One Consumer mutant through every scenario: killed when a finding cites a
/// requirement it breaks.
#[derive(Clone, Debug)]
pub struct MutantResult {
    /// The mutant's name.
    pub name: String,
    /// Requirement ids the mutant breaks.
    pub requirements: Vec<String>,
    /// Findings that cite one of `requirements`: the proof it is caught.
    pub kills: Vec<Kill>,
    /// Findings that cite none of its requirements (not proof).
    pub other_findings: usize,
}

impl MutantResult {
    /// Whether any scenario killed the mutant.
    pub fn killed(&self) -> bool {
        !self.kills.is_empty()
    }
}

/// The Consumer selftest: the reference Consumer, every mutant and every
/// legal variant through the scenarios (what `cetp selftest` reports).
#[derive(Clone, Debug)]
pub struct ConsumerSelftest {
    /// The reference Consumer on every scenario: each must pass.
    pub reference: Vec<ScenarioResult>,
    /// Every mutant through every scenario: each must be killed.
    pub mutants: Vec<MutantResult>,
    /// Every Consumer legal variant through every scenario.
    pub variants: Vec<VariantResult>,
}

impl ConsumerSelftest {
    /// Every scenario passed on the reference Consumer.
    pub fn reference_clean(&self) -> bool {
        self.reference.iter().all(|r| r.verdict == Verdict::Pass)
    }
    /// Number of mutants killed.
    pub fn killed(&self) -> usize {
        self.mutants.iter().filter(|m| m.killed()).count()
    }
    /// Number of false verdicts over all variants.
    pub fn false_verdicts(&self) -> usize {
        self.variants.iter().map(|v| v.false_verdicts.len()).sum()
    }
    /// The selftest holds: reference clean, every mutant killed, no false verdict.
    pub fn ok(&self) -> bool {
        self.reference_clean()
            && self.killed() == self.mutants.len()
            && self.variants.iter().all(VariantResult::passed)
    }

    /// The Consumer proof (`reports/consumer-proof.json`): requirement →
    /// the Consumer mutants a finding citing it caught, same shape as the
    /// Provider's `reports/proof.json` plus `role`.
    pub fn proof(&self) -> Json {
        let mut by_req: std::collections::BTreeMap<String, Vec<&str>> = Default::default();
        let mut mutants = serde_json::Map::new();
        for m in &self.mutants {
            let proved = m.proved();
            for r in &proved {
                by_req.entry(r.clone()).or_default().push(m.name.as_str());
            }
            mutants.insert(m.name.clone(), json!(proved));
        }
        // Each legal variant: the scenarios that judged it falsely (must be
        // none) and those its declared bounds leave unjudged.
        let variants: serde_json::Map<String, Json> = self
            .variants
            .iter()
            .map(|v| {
                (
                    v.name.clone(),
                    json!({
                        "false_verdicts": v.false_verdicts.iter().map(|(s, _, _)| s).collect::<Vec<_>>(),
                        "not_judged": v.not_judged,
                    }),
                )
            })
            .collect();
        json!({
            "format_version": 1,
            "role": "consumer",
            "generated_by": "cetp selftest --consumer-only --write-proof",
            "mutants": mutants,
            "requirements": by_req,
            "variants": variants,
        })
    }

    /// Two tables: the reference Consumer per scenario, and mutant →
    /// killing scenarios with the requirements their findings cite.
    pub fn render(&self) -> String {
        let mut out = String::new();
        self.render_reference(&mut out);
        self.render_mutants(&mut out);
        self.render_variants(&mut out);
        out
    }

    /// Whether the reference Consumer passed every scenario, or what it failed.
    fn render_reference(&self, out: &mut String) {
        let bad: Vec<&ScenarioResult> = self
            .reference
            .iter()
            .filter(|r| r.verdict != Verdict::Pass)
            .collect();
        if bad.is_empty() {
            out.push_str(&format!(
                "reference Consumer: every scenario PASS ({} scenarios)\n",
                self.reference.len()
            ));
        } else {
            out.push_str("reference Consumer: NOT CLEAN\n");
            for r in bad {
                for f in &r.findings {
                    out.push_str(&format!(
                        "  {} {} {}: {}\n",
                        r.id,
                        r.verdict.as_str(),
                        f.check,
                        f.message
                    ));
                }
            }
        }
    }

    /// Each mutant, killed (by which scenarios, proving what) or not, and the score.
    fn render_mutants(&self, out: &mut String) {
        let width = self
            .mutants
            .iter()
            .map(|m| m.name.len())
            .max()
            .unwrap_or(6)
            .max("consumer mutant".len());
        out.push_str(&format!(
            "\n{:<width$}  {:<8}  killing scenarios / checks\n",
            "consumer mutant", "result"
        ));
        for m in &self.mutants {
            let (result, detail) = if m.killed() {
                let mut by: Vec<String> = m
                    .kills
                    .iter()
                    .map(|k| format!("{} {}", k.scenario, k.check))
                    .collect();
                by.dedup();
                (
                    "killed",
                    format!("{}  proves {}", by.join(", "), m.proved().join(", ")),
                )
            } else if m.other_findings > 0 {
                (
                    "SURVIVED",
                    format!(
                        "{} finding(s), none citing {}",
                        m.other_findings,
                        m.requirements.join(", ")
                    ),
                )
            } else {
                ("SURVIVED", "no scenario fails".to_string())
            };
            out.push_str(&format!("{:<width$}  {:<8}  {}\n", m.name, result, detail));
        }
        let n = self.mutants.len();
        let k = self.killed();
        out.push_str(&format!(
            "\nconsumer mutation score: {k}/{n} killed ({:.1}%)\n",
            if n == 0 {
                0.0
            } else {
                100.0 * k as f64 / n as f64
            }
        ));
    }

    /// Each legal variant: passed, or the false verdicts it drew.
    fn render_variants(&self, out: &mut String) {
        let vwidth = self
            .variants
            .iter()
            .map(|v| v.name.len())
            .max()
            .unwrap_or(0)
            .max("consumer legal variant".len());
        out.push_str(&format!(
            "\n{:<vwidth$}  {:<8}  false verdicts / not judged\n",
            "consumer legal variant", "result"
        ));
        for v in &self.variants {
            let detail = if v.passed() {
                if v.not_judged.is_empty() {
                    "none".to_string()
                } else {
                    format!("not judged: {}", v.not_judged.join(", "))
                }
            } else {
                v.false_verdicts
                    .iter()
                    .map(|(s, verdict, f)| format!("{s} {}: {f}", verdict.as_str()))
                    .collect::<Vec<_>>()
                    .join("; ")
            };
            let result = if v.passed() { "pass" } else { "FALSE" };
            out.push_str(&format!("{:<vwidth$}  {:<8}  {}\n", v.name, result, detail));
        }
        out.push_str(&format!(
            "consumer legal variants: {} x {} scenarios, {} false verdict(s)\n",
            self.variants.len(),
            self.reference.len(),
            self.false_verdicts()
        ));
    }
}

impl MutantResult {
    /// The mutant's requirements some finding cited while catching it.
    pub fn proved(&self) -> Vec<String> {
        let set: BTreeSet<&String> = self
            .kills
            .iter()
            .flat_map(|k| k.cited.iter())
            .filter(|c| self.requirements.contains(c))
            .collect();
        set.into_iter().cloned().collect()
    }
}

/// Runs every scenario against the reference Consumer and each documented
/// mutant. A mutant is killed by a finding citing one of its requirements.
pub fn selftest(
    scenarios: &[Scenario],
    mutants: &[ConsumerMutantDoc],
    variants: &[ConsumerVariantDoc],
) -> Result<ConsumerSelftest, String> {
    let base = ConsumerConfig::default();
    let reference = scenarios
        .iter()
        .map(|s| run_in_process(s, &base))
        .collect::<Result<Vec<_>, _>>()?;
    let mut out = Vec::new();
    for m in mutants {
        let fault = ConsumerMutant::parse(&m.name)
            .ok_or_else(|| format!("unknown Consumer mutant {:?}", m.name))?;
        let config = ConsumerConfig {
            faults: vec![fault],
            ..base.clone()
        };
        let mut kills = Vec::new();
        let mut other = 0;
        for s in scenarios {
            let r = run_in_process(s, &config)?;
            for f in r.findings {
                if f.cited.iter().any(|c| m.requirements.contains(c)) {
                    kills.push(Kill {
                        scenario: s.id.clone(),
                        check: f.check,
                        cited: f.cited,
                        message: f.message,
                    });
                } else {
                    other += 1;
                }
            }
        }
        out.push(MutantResult {
            name: m.name.clone(),
            requirements: m.requirements.clone(),
            kills,
            other_findings: other,
        });
    }
    let variants = variants
        .iter()
        .map(|v| run_variant(scenarios, v))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ConsumerSelftest {
        reference,
        mutants: out,
        variants,
    })
}

/// Requirement → the scenarios whose expectations cite it.
pub fn requirement_index(
    scenarios: &[Scenario],
) -> std::collections::BTreeMap<String, Vec<String>> {
    let mut index: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for s in scenarios {
        let cited: BTreeSet<&String> = s
            .expect
            .iter()
            .flat_map(|e| e.requirements.as_ref().unwrap_or(&s.requirements).iter())
            .collect();
        for r in cited {
            index.entry(r.clone()).or_default().push(s.id.clone());
        }
    }
    index
}

/// Outcome kinds an act may end in, as `consumer_act` names them.
pub const OUTCOMES: &[&str] = &["success", "error", "needs_user", "refused", "crashed"];

#[doc(hidden)]
pub fn outcome_kind(o: &ActOutcome) -> &'static str {
    o.kind()
}

/// What a device hosting the hostile Provider reports while the Consumer
/// under test acts.
#[derive(Clone, Debug)]
pub enum DeviceEvent {
    /// The Consumer called the hosted Provider (`incoming_call`).
    Call {
        /// The authority called, when the device says (`incoming_call`'s
        /// `authority`, an extension needed once two Providers are hosted).
        authority: Option<String>,
        /// Whether it reached the Provider the peer probe hosts
        /// ([`ConsumerDevice::host_on_peer`]) rather than this connection's.
        peer: bool,
        /// The method called (§2.2, §3, §4).
        method: String,
        /// The call's extras Bundle.
        extras: cetp_proto::Bundle,
        /// Device time of the call, in milliseconds.
        now_ms: i64,
    },
    /// The Consumer launched one of its PendingIntents (`intent_launched`,
    /// named by the script's handle).
    Launched {
        /// The script's handle of the PendingIntent.
        handle: String,
        /// The user decision the device played.
        decision: String,
    },
}

/// The hosted Provider's answer to one call, as the probe wire's `reply`
/// carries it.
#[derive(Clone, Debug, PartialEq)]
pub enum WireAnswer {
    /// Return this Bundle from `call`.
    Result {
        /// The returned Bundle.
        bundle: cetp_proto::Bundle,
        /// Data of the file descriptor the Bundle carries, if any (§4.5).
        fd_data: Option<Vec<u8>>,
    },
    /// Throw from `call`.
    Throw {
        /// The Java exception class thrown.
        class: String,
    },
    /// The call fails as this device error (`timeout`, `provider_died`):
    /// the `fail` reply extension.
    Fail {
        /// The device error the call fails as.
        kind: ErrorKind,
    },
    /// A result whose descriptor never ends: the `fd_endless` extension.
    EndlessFd {
        /// The returned Bundle.
        bundle: cetp_proto::Bundle,
        /// The byte the descriptor repeats forever.
        fill: u8,
    },
}

/// A device that hosts the hostile Provider and a Consumer under test
/// (`host_provider` + `consumer_act`, or a vendor's driver).
pub trait ConsumerDevice {
    /// Hosts the hostile Provider: its manifest `meta` entries, the package it
    /// runs as, and the package owning its authority (§2.1, §7.1).
    fn host(
        &mut self,
        meta: &std::collections::BTreeMap<String, String>,
        package: &str,
        authority_package: &str,
    ) -> Result<(), String>;
    /// Makes the Consumer perform `action` (the `consumer_act` action
    /// shape); every event meanwhile goes to `on`, whose answer to a call is
    /// sent back as its `reply`.
    fn act(
        &mut self,
        action: &Json,
        on: &mut dyn FnMut(DeviceEvent) -> Option<WireAnswer>,
    ) -> Result<ActOutcome, String>;
    /// Moves the device clock forward by `ms` (for expiry scenarios).
    fn advance_clock(&mut self, ms: u64) -> Result<(), String>;
    /// The `reply` extensions the device plays (`fail`, `fd_endless`,
    /// `pending_intent`).
    fn reply_extensions(&self) -> Vec<String> {
        Vec::new()
    }
    /// The `fail` kinds it plays when it does not play `fail` in full
    /// (`hello`'s `reply_fail`).
    fn reply_fail(&self) -> Vec<ErrorKind> {
        Vec::new()
    }
    /// Whether the device enforces Binder's transaction limit on what the
    /// hosted Provider answers, as Android does (`hello`'s
    /// `binder_transaction_limit`).
    fn binder_limit(&self) -> bool {
        false
    }
    /// What it can host the hostile Provider as, when it cannot host any
    /// authority and package (`hello`'s `hosted_provider`).
    fn hosted_as(&self) -> Option<HostedAs> {
        None
    }
    /// What the peer probe (a phone's second probe app, identity b) can
    /// host, when the device reaches one: a Provider of another package on
    /// the same phone.
    fn peer_hosted_as(&self) -> Option<HostedAs> {
        None
    }
    /// Hosts a Provider on the peer probe: its `meta`, package and
    /// authority package as [`ConsumerDevice::host`]; with `discoverable`
    /// false its ContentProvider answers but no discovery service of its
    /// own is listed (another package's service names it).
    fn host_on_peer(
        &mut self,
        meta: &std::collections::BTreeMap<String, String>,
        package: &str,
        authority_package: &str,
        discoverable: bool,
    ) -> Result<(), String> {
        let _ = (meta, package, authority_package, discoverable);
        Err("host_provider: unsupported: this device reaches no peer probe".into())
    }
    /// For each descriptor a reply handed out with `fd_data` (by call id),
    /// how the device saw the Consumer let go of it (`fd_closed`), waiting
    /// up to `wait` for those not yet let go of; `None` when the device
    /// does not report closes (`reply_extensions` lacks `fd_closed`).
    fn fd_closes(&mut self, wait: std::time::Duration) -> Option<BTreeMap<String, Option<String>>> {
        let _ = wait;
        None
    }
}

/// What a device can host the hostile Provider as (`hello`'s
/// `hosted_provider`, a compatible extension of the probe wire that the
/// probe app writes): a phone's probe exports one declared authority in its
/// own package, with declared meta-data sets, and throws only the classes
/// that cross Binder as themselves.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HostedAs {
    /// The one authority it can export.
    pub authority: String,
    /// The package exporting it.
    pub package: String,
    /// The manifest meta-data sets it can declare.
    pub metas: Vec<BTreeMap<String, String>>,
    /// Exception classes it can throw as themselves.
    pub throw_classes: Vec<String>,
    /// Meta-data sets of its discovery services that name another
    /// package's authority (the probe app's `$Foreign`, naming the peer
    /// probe's ContentProvider).
    pub foreign_metas: Vec<BTreeMap<String, String>>,
    /// The package whose ContentProvider those services name.
    pub foreign_package: Option<String>,
}

impl HostedAs {
    /// Reads `hello`'s `hosted_provider`; `Ok(None)` when it is absent. The
    /// member comes from the device: every string and list is bounded.
    pub fn from_hello(hello: &Json) -> Result<Option<HostedAs>, String> {
        const MAX_TEXT: usize = 256;
        const MAX_ITEMS: usize = 64;
        let Some(h) = hello.get("hosted_provider") else {
            return Ok(None);
        };
        let text = |v: &Json, what: &str| -> Result<String, String> {
            match v.as_str() {
                Some(t) if !t.is_empty() && t.len() <= MAX_TEXT => Ok(t.to_string()),
                _ => Err(format!(
                    "hello: hosted_provider.{what} is not a string of 1 to {MAX_TEXT} bytes"
                )),
            }
        };
        let list = |key: &str| -> Result<Vec<Json>, String> {
            match h.get(key) {
                None => Ok(Vec::new()),
                Some(Json::Array(a)) if a.len() <= MAX_ITEMS => Ok(a.clone()),
                Some(_) => Err(format!(
                    "hello: hosted_provider.{key} is not a list of at most {MAX_ITEMS}"
                )),
            }
        };
        let authority = text(h.get("authority").unwrap_or(&Json::Null), "authority")?;
        let package = text(h.get("package").unwrap_or(&Json::Null), "package")?;
        let sets = |key: &str| -> Result<Vec<BTreeMap<String, String>>, String> {
            let mut metas = Vec::new();
            for m in list(key)? {
                let Some(o) = m.as_object().filter(|o| o.len() <= MAX_ITEMS) else {
                    return Err(format!(
                        "hello: hosted_provider.{key} holds something not a small object"
                    ));
                };
                let mut set = BTreeMap::new();
                for (k, v) in o {
                    if k.len() > MAX_TEXT {
                        return Err(format!("hello: hosted_provider.{key} has an oversized key"));
                    }
                    set.insert(k.clone(), text(v, key)?);
                }
                metas.push(set);
            }
            Ok(metas)
        };
        let throw_classes = list("throw_classes")?
            .iter()
            .map(|c| text(c, "throw_classes"))
            .collect::<Result<_, _>>()?;
        let foreign_package = match h.get("foreign_package") {
            None | Some(Json::Null) => None,
            Some(v) => Some(text(v, "foreign_package")?),
        };
        Ok(Some(HostedAs {
            authority,
            package,
            metas: sets("metas")?,
            throw_classes,
            foreign_metas: sets("foreign_metas")?,
            foreign_package,
        }))
    }
}

/// What a device plays of the scripts: its `reply` extensions and `fail`
/// kinds, and what it hosts the Provider as.
#[derive(Clone, Debug, Default)]
pub struct Playable {
    /// The `reply` extensions it plays.
    pub extensions: Vec<String>,
    /// The `fail` kinds it plays.
    pub fail_kinds: Vec<ErrorKind>,
    /// What it hosts the Provider as, when restricted.
    pub hosted: Option<HostedAs>,
    /// What its peer probe hosts, when it reaches one.
    pub peer: Option<HostedAs>,
    /// It enforces Binder's transaction limit.
    pub binder_limit: bool,
}

impl Playable {
    /// What `dev` can play, as it reports.
    pub fn of(dev: &dyn ConsumerDevice) -> Playable {
        Playable {
            extensions: dev.reply_extensions(),
            fail_kinds: dev.reply_fail(),
            hosted: dev.hosted_as(),
            peer: dev.peer_hosted_as(),
            binder_limit: dev.binder_limit(),
        }
    }

    fn fails(&self, kind: ErrorKind) -> bool {
        self.extensions.iter().any(|e| e == "fail") || self.fail_kinds.contains(&kind)
    }

    fn has(&self, extension: &str) -> bool {
        self.extensions.iter().any(|e| e == extension)
    }
}

/// Why a scenario cannot be played over the probe wire, if it cannot: the
/// device plays no reply that times out within the Consumer's timeout,
/// kills the Provider mid-call, never ends a descriptor or creates a
/// PendingIntent, or it cannot host the Provider the scenario shapes.
pub fn wire_unplayable(s: &Scenario, dev: &Playable) -> Option<String> {
    for rule in &s.script {
        if rule.reply.get("timeout").is_some() && !dev.fails(ErrorKind::Timeout) {
            return Some("a call that times out (needs an in-process Consumer)".into());
        }
        if rule.reply.get("disconnect").is_some() && !dev.fails(ErrorKind::ProviderDied) {
            return Some("a Provider that dies mid-call (needs an in-process Consumer)".into());
        }
        if rule
            .reply
            .get("file")
            .and_then(|f| f.get("endless"))
            .and_then(Json::as_bool)
            == Some(true)
            && !dev.has("fd_endless")
        {
            return Some("a descriptor that never ends (needs an in-process Consumer)".into());
        }
        if rule.reply.get("needs_user").is_some() && !dev.has("pending_intent") {
            return Some("a confirmation PendingIntent, which this device does not create".into());
        }
        if let (Some(class), Some(h)) =
            (rule.reply.get("throw").and_then(Json::as_str), &dev.hosted)
        {
            if !h.throw_classes.iter().any(|c| c == class) {
                return Some(format!("a {class} thrown, which this device cannot throw"));
            }
        }
    }
    layout(s, dev).err()
}

/// Where a scenario's Providers answer on a device.
struct Layout {
    /// The hostile Provider, as hosted.
    hostile: Hostile,
    /// The decoy, when the scenario has one.
    decoy: Option<Hostile>,
    /// The hostile Provider's ContentProvider answers on the peer probe,
    /// and this probe declares only the service naming it (§2.1: a
    /// ContentProvider of another package than the service).
    hostile_on_peer: bool,
    /// The decoy answers on the peer probe.
    decoy_on_peer: bool,
}

/// Lays `s` out on `dev`: as the scenario says on a device that hosts any
/// authority and package; on a phone's probe (`hosted_provider`), on its
/// one authority, with a second Provider or another package's
/// ContentProvider on the peer probe (identity b's app) when the device
/// reaches one. `Err` says what the scenario needs that the device cannot
/// host.
fn layout(s: &Scenario, dev: &Playable) -> Result<Layout, String> {
    let Some(h) = &dev.hosted else {
        return Ok(Layout {
            hostile: Hostile::new(s.provider.clone(), s.script.clone()),
            decoy: s.provider.decoy.then(Hostile::decoy),
            hostile_on_peer: false,
            decoy_on_peer: false,
        });
    };
    let declared =
        |metas: &[BTreeMap<String, String>], meta: &BTreeMap<String, String>| metas.contains(meta);
    let foreign = s
        .provider
        .authority_package
        .as_deref()
        .filter(|p| *p != h.package);
    let mut decoy = None;
    if s.provider.decoy {
        let Some(p) = &dev.peer else {
            return Err(format!(
                "a second Provider, and this device hosts only {:?} (no peer probe answers)",
                h.authority
            ));
        };
        let d = Hostile::decoy().hosted_as(&p.authority, &p.package);
        if !declared(&p.metas, &d.meta()) {
            return Err("a second Provider whose meta-data the peer probe does not declare".into());
        }
        decoy = Some(d);
    }
    let (hostile, hostile_on_peer) = match foreign {
        Some(x) => {
            let Some(p) = dev.peer.as_ref().filter(|_| decoy.is_none()) else {
                return Err(format!(
                    "a ContentProvider of package {x:?}, and this device hosts it only in {:?} (no peer probe answers)",
                    h.package
                ));
            };
            if h.foreign_package.as_deref() != Some(p.package.as_str()) {
                return Err(format!(
                    "a ContentProvider of package {x:?}, and this device declares no service naming the peer probe's ({:?})",
                    p.package
                ));
            }
            // Any package other than the service's is what the scenario
            // needs: the peer probe's stands for the script's.
            let mut spec = s.provider.clone();
            spec.authority_package = Some(p.package.clone());
            let hostile = Hostile::new(spec, s.script.clone()).hosted_as(&p.authority, &h.package);
            if !declared(&h.foreign_metas, &hostile.meta()) {
                return Err(format!(
                    "a {} manifest naming another package's ContentProvider, whose meta-data this device does not declare",
                    s.provider.manifest
                ));
            }
            (hostile, true)
        }
        None => {
            let hostile = Hostile::new(s.provider.clone(), s.script.clone())
                .hosted_as(&h.authority, &h.package);
            if !declared(&h.metas, &hostile.meta()) {
                return Err(format!(
                    "a {} manifest, whose meta-data this device does not declare",
                    s.provider.manifest
                ));
            }
            (hostile, false)
        }
    };
    Ok(Layout {
        hostile,
        decoy_on_peer: decoy.is_some(),
        decoy,
        hostile_on_peer,
    })
}

/// Hosts the Providers of `layout` on `dev`: `Ok(Some(gap))` when the
/// device or its peer probe lacks the ability (a setup gap, not an
/// infrastructure error).
fn host_layout(
    dev: &mut dyn ConsumerDevice,
    layout: &Layout,
) -> Result<Option<(String, String)>, String> {
    let gap = |what: &str, e: String| -> Result<Option<(String, String)>, String> {
        if lacks_op(&e) {
            Ok(Some((what.to_string(), e)))
        } else {
            Err(e)
        }
    };
    if let Some(d) = &layout.decoy {
        let r = if layout.decoy_on_peer {
            dev.host_on_peer(&d.meta(), d.package(), &d.authority_package(), true)
        } else {
            dev.host(&d.meta(), d.package(), &d.authority_package())
        };
        if let Err(e) = r {
            return gap("a second Provider hosted on the peer probe", e);
        }
    }
    let h = &layout.hostile;
    if let Err(e) = dev.host(&h.meta(), h.package(), &h.authority_package()) {
        return gap("the service naming another package's ContentProvider", e);
    }
    if layout.hostile_on_peer {
        let meta = BTreeMap::from([(
            "com.clawseed.tools.authority".to_string(),
            h.authority().to_string(),
        )]);
        let owner = h.authority_package();
        if let Err(e) = dev.host_on_peer(&meta, &owner, &owner, false) {
            return gap(
                "a ContentProvider hosted on the peer probe with no service of its own",
                e,
            );
        }
    }
    Ok(None)
}

/// `s` not judged, with what it scripts that `dev` cannot play.
fn unplayable(s: &Scenario, dev: &Playable) -> ScenarioResult {
    let why = wire_unplayable(s, dev).unwrap_or_default();
    ScenarioResult {
        id: s.id.clone(),
        title: s.title.clone(),
        verdict: Verdict::NotApplicable,
        findings: Vec::new(),
        not_judged: vec![format!("not judged: the scenario scripts {why}")],
        unseen: Vec::new(),
        acts: Vec::new(),
        calls: 0,
    }
}

/// How long after its last act a scenario that judges descriptor closes
/// waits for the device to report those not yet closed (`fd_closed`): a
/// Consumer closes in a `finally` or a `use` block, at once; this leaves
/// room for one that closes on its next turn.
pub const FD_CLOSE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Plays `s` on a device: the hostile Provider answers there, the Consumer
/// under test acts there. Descriptor reads are not visible, so the checks
/// about them are not judged; launched resolutions are.
pub fn run_on_device(
    s: &Scenario,
    dev: &mut dyn ConsumerDevice,
    bounds: &DeclaredBounds,
) -> Result<ScenarioResult, String> {
    let playable = Playable::of(dev);
    if let Some(why) = premise_unmet(s, playable.binder_limit) {
        return Ok(not_judged(s, why));
    }
    let layout = match layout(s, &playable) {
        Ok(l) if wire_unplayable(s, &playable).is_none() => l,
        _ => return Ok(unplayable(s, &playable)),
    };
    // The Consumer under test may remember the previous scenario's Provider:
    // it starts afresh, as a restarted app.
    dev.act(&Action::Reset.to_json(), &mut |_| None)?;
    if let Some((what, e)) = host_layout(dev, &layout)? {
        return Ok(setup_gap(s, &what, &e));
    }
    let Layout {
        mut hostile,
        mut decoy,
        decoy_on_peer,
        ..
    } = layout;
    let authority = hostile.authority().to_string();
    let decoy_authority = decoy
        .as_ref()
        .map_or(hostile::DECOY_AUTHORITY.to_string(), |d| {
            d.authority().to_string()
        });
    let mut resolves: Vec<port::ResolveRecord> = Vec::new();
    let mut acts = Vec::new();
    let mut unrouted = false;
    for (i, act) in s.acts.iter().enumerate() {
        hostile.act = i;
        if let Some(d) = decoy.as_mut() {
            d.act = i;
        }
        let outcome = match action_for(act, &authority, &decoy_authority)
            .map_err(|e| format!("{}: act {i}: {e}", s.id))?
        {
            None => {
                let ms = act.get("ms").and_then(Json::as_u64).unwrap_or(0);
                if let Err(e) = dev.advance_clock(ms) {
                    if lacks_op(&e) {
                        return Ok(setup_gap(
                            s,
                            "the advance_clock op, which this device does not offer",
                            &e,
                        ));
                    }
                    return Err(e);
                }
                None
            }
            Some(action) => {
                let mut hosted = Hosted {
                    hostile: &mut hostile,
                    decoy: decoy.as_mut().map(|d| (d, decoy_on_peer)),
                    resolves: &mut resolves,
                    unrouted: &mut unrouted,
                };
                match play(s, dev, action, &mut hosted)? {
                    Ok(o) => Some(o),
                    Err(gap) => return Ok(gap),
                }
            }
        };
        if unrouted {
            return Ok(setup_gap(
                s,
                "incoming_call's authority (an extension needed once two Providers are hosted), which this device does not send",
                "calls to the two hosted Providers cannot be told apart",
            ));
        }
        acts.push(ActRecord {
            action: resolved(act),
            outcome,
        });
    }
    let fd_closes = reported_closes(s, dev);
    let trace = Trace {
        calls: &hostile.log,
        acts: &acts,
        intents: &hostile.intents,
        fds: None,
        resolves: Some(&resolves),
        decoy_calls: decoy.as_ref().map_or(&[], |d| &d.log),
        fd_closes: fd_closes.as_ref(),
    };
    Ok(judge_run(s, &trace, bounds))
}

/// The device reports a descriptor's close when the Consumer lets go of it,
/// which a Consumer may do after its act has ended: the scenarios that
/// judge closes wait for them, bounded ([`FD_CLOSE_WAIT`]).
fn reported_closes(
    s: &Scenario,
    dev: &mut dyn ConsumerDevice,
) -> Option<BTreeMap<String, Option<String>>> {
    s.expect
        .iter()
        .any(|e| matches!(e.check, scenario::ConsumerCheck::FdsClosed {}))
        .then(|| dev.fd_closes(FD_CLOSE_WAIT))
        .flatten()
}

/// The hosted Providers of a scenario on a device, and what the device
/// reported while the Consumer acted.
struct Hosted<'h> {
    hostile: &'h mut Hostile,
    /// The decoy, and whether it is hosted on the peer identity.
    decoy: Option<(&'h mut Hostile, bool)>,
    resolves: &'h mut Vec<port::ResolveRecord>,
    /// Set when a call came that names no authority while two are hosted.
    unrouted: &'h mut bool,
}

/// One act of the Consumer under test on the device, its incoming calls
/// answered by the hosted Providers: the outcome, or the scenario's
/// result when the device lacks the ability the act needs.
fn play(
    s: &Scenario,
    dev: &mut dyn ConsumerDevice,
    action: Action,
    h: &mut Hosted<'_>,
) -> Result<Result<ActOutcome, ScenarioResult>, String> {
    if action == Action::Reset {
        h.hostile.life += 1;
    }
    let is_cancel = matches!(action, Action::CancelTool { .. });
    let mut on = |ev: DeviceEvent| match ev {
        DeviceEvent::Call {
            authority: called,
            peer,
            method,
            extras,
            now_ms: at,
        } => Some(route_call(
            h.hostile,
            h.decoy.as_mut().map(|(d, on_peer)| (&mut **d, *on_peer)),
            (called.as_deref(), peer),
            (&method, &extras, at),
            h.unrouted,
        )),
        DeviceEvent::Launched { handle, decision } => {
            h.resolves.push(port::ResolveRecord {
                handle,
                decision: cetp_proto::provider::Decision::parse(&decision)
                    .unwrap_or(cetp_proto::provider::Decision::Dismiss),
                after_calls: h.hostile.log.len(),
            });
            None
        }
    };
    match dev.act(&action.to_json(), &mut on) {
        Ok(o) => Ok(Ok(o)),
        // `cancel_tool` is an extension of consumer_act: a device (or
        // driver) without it lacks an ability.
        Err(e) if is_cancel && (lacks_op(&e) || e.contains(": bad_request")) => Ok(Err(setup_gap(
            s,
            "the cancel_tool act (a consumer_act extension), which this device does not perform",
            &e,
        ))),
        Err(e) => Err(e),
    }
}

/// Which hosted Provider a call reached and what it answers, as the wire
/// carries it. A decoy on the peer probe gets the peer's calls (the peer
/// hosts nothing else then); a decoy on this device gets the calls naming
/// its `authority`; the hostile Provider the others. With a decoy hosted
/// here, a call naming no authority cannot be routed (`unrouted`: the
/// scenario is not judged).
fn route_call(
    hostile: &mut Hostile,
    decoy: Option<(&mut Hostile, bool)>,
    (called, peer): (Option<&str>, bool),
    (method, extras, at): (&str, &cetp_proto::Bundle, i64),
    unrouted: &mut bool,
) -> WireAnswer {
    let decoy = match decoy {
        Some((d, true)) => {
            return if peer {
                decoy_answer(d, (method, extras, at))
            } else {
                wire_answer(hostile.on_call(method, extras, at))
            };
        }
        Some((d, false)) => Some(d),
        None => None,
    };
    match (decoy, called) {
        (Some(d), Some(a)) if a == d.authority() => decoy_answer(d, (method, extras, at)),
        (Some(_), None) => {
            *unrouted = true;
            WireAnswer::Throw {
                class: "java.lang.IllegalStateException".into(),
            }
        }
        _ => wire_answer(hostile.on_call(method, extras, at)),
    }
}

/// The decoy's answer: a well-behaved Provider, unscripted.
fn decoy_answer(
    d: &mut Hostile,
    (method, extras, at): (&str, &cetp_proto::Bundle, i64),
) -> WireAnswer {
    match d.on_call(method, extras, at) {
        hostile::Scripted::Reply { bundle, .. } => WireAnswer::Result {
            bundle,
            fd_data: None,
        },
        _ => WireAnswer::Throw {
            class: "java.lang.IllegalStateException".into(),
        },
    }
}

/// The hostile Provider's scripted answer as a wire answer: a descriptor's
/// bytes (or an endless one) travel beside the Bundle, not in it.
fn wire_answer(scripted: hostile::Scripted) -> WireAnswer {
    match scripted {
        hostile::Scripted::Reply { mut bundle, fd, .. } => {
            if fd.is_some() {
                bundle.remove(cetp_proto::envelope::keys::RESULT_FD);
            }
            match fd.map(|(_, spec)| spec) {
                Some(hostile::FdSpec::Endless { fill, .. }) => {
                    WireAnswer::EndlessFd { bundle, fill }
                }
                Some(hostile::FdSpec::Bytes(b)) => WireAnswer::Result {
                    bundle,
                    fd_data: Some(b),
                },
                None => WireAnswer::Result {
                    bundle,
                    fd_data: None,
                },
            }
        }
        hostile::Scripted::Throw { class, .. } => WireAnswer::Throw { class },
        hostile::Scripted::Timeout => WireAnswer::Fail {
            kind: ErrorKind::Timeout,
        },
        hostile::Scripted::Died => WireAnswer::Fail {
            kind: ErrorKind::ProviderDied,
        },
    }
}

/// Whether a device error says the device lacks the op or act (probe-wire
/// kinds `unsupported`, `unknown_op`, or the host's `op_unavailable` for an
/// op the device's hello leaves out), not that the device or transport is
/// in trouble. The Consumer device reports errors as text (`op: kind:
/// message`), so the kind is found by its name.
fn lacks_op(e: &str) -> bool {
    [
        ErrorKind::Unsupported,
        ErrorKind::UnknownOp,
        ErrorKind::OpUnavailable,
    ]
    .iter()
    .any(|k| e.contains(&format!(": {}", k.as_str())))
}

/// A scenario a device cannot play because it lacks an ability: a setup
/// gap, NOT_APPLICABLE naming the ability (it holds the Consumer claim
/// back), never an infrastructure error.
fn setup_gap(s: &Scenario, ability: &str, detail: &str) -> ScenarioResult {
    ScenarioResult {
        id: s.id.clone(),
        title: s.title.clone(),
        verdict: Verdict::NotApplicable,
        findings: Vec::new(),
        not_judged: vec![format!(
            "not judged: the scenario needs {ability} ({})",
            judge::clip(detail, 200)
        )],
        unseen: Vec::new(),
        acts: Vec::new(),
        calls: 0,
    }
}

/// A Consumer profile (TOML): who the Consumer under test is, the bounds
/// it declares, and the driver command that makes it act on a real device
/// (optional: a device that serves `consumer_act` makes it act itself).
///
/// ```toml
/// [consumer]
/// name = "com.vendor.agent"
/// [driver]
/// command = ["adb", "shell", "am", "broadcast", "-a", "com.vendor.agent.TEST",
///            "--es", "do", "{do}", "--es", "tool", "{tool}", "--es", "args", "{args}"]
/// timeout_ms = 120000
/// [bounds]                     # optional: what the Consumer accepts (§7.3)
/// max_description_bytes = 65536
/// max_json_depth = 32
/// ```
///
/// `[bounds]` may declare `max_name_bytes`, `max_description_bytes`,
/// `max_json_depth`, `max_inline_bytes`, `max_file_bytes` and `max_items`.
/// A scenario that tests a bound the spec leaves open FAILs only a Consumer
/// that declared a smaller figure and accepted more; without a declared
/// figure it at most WARNs.
///
/// Placeholders in every argument: `{do}`, `{authority}`, `{tool}`,
/// `{args}` (JSON text), `{decision}`, `{action}` (the whole action, JSON).
/// The command's last non-empty line on stdout is the outcome, in the
/// `consumer_act` shape.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ConsumerProfile {
    /// Who the Consumer under test is.
    #[serde(default)]
    pub consumer: ConsumerInfo,
    /// How to drive the Consumer (the command run per act). Without it
    /// the device makes the Consumer act (`consumer_act`, the JVM device
    /// with a vendor's Consumer classes) and the profile names the
    /// Consumer and declares its bounds.
    #[serde(default)]
    pub driver: Option<DriverSpec>,
    /// The bounds the Consumer declares (§7.3).
    #[serde(default)]
    pub bounds: DeclaredBounds,
}

/// The `[consumer]` table of a Consumer profile.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ConsumerInfo {
    /// Display name of the Consumer.
    #[serde(default)]
    pub name: Option<String>,
}

/// The `[driver]` table: the command that makes the Consumer act.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DriverSpec {
    /// Program and arguments, with the placeholders [`ConsumerProfile`] lists.
    pub command: Vec<String>,
    /// Time allowed for one act, in milliseconds.
    #[serde(default = "driver_timeout")]
    pub timeout_ms: u64,
}

fn driver_timeout() -> u64 {
    120_000
}

impl ConsumerProfile {
    /// Parses a Consumer profile (TOML).
    pub fn from_toml(text: &str) -> Result<ConsumerProfile, String> {
        let p: ConsumerProfile = toml::from_str(text).map_err(|e| e.to_string())?;
        if p.driver.as_ref().is_some_and(|d| d.command.is_empty()) {
            return Err("driver.command: empty".into());
        }
        Ok(p)
    }
}

/// The driver's argv for one action (placeholders filled in).
pub fn driver_argv(command: &[String], action: &Json) -> Vec<String> {
    let s = |k: &str| {
        action
            .get(k)
            .map(|v| match v {
                Json::String(s) => s.clone(),
                other => other.to_string(),
            })
            .unwrap_or_default()
    };
    let args = action
        .get("args")
        .map(Json::to_string)
        .unwrap_or_else(|| "{}".into());
    command
        .iter()
        .map(|a| {
            a.replace("{action}", &action.to_string())
                .replace("{do}", &s("do"))
                .replace("{authority}", &s("authority"))
                .replace("{tool}", &s("tool"))
                .replace("{decision}", &s("decision"))
                .replace("{args}", &args)
        })
        .collect()
}

/// The outcome a driver printed: its last non-empty stdout line.
pub fn driver_outcome(stdout: &str) -> Result<ActOutcome, String> {
    let line = stdout
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .ok_or("the driver printed no outcome")?;
    let v: Json = serde_json::from_str(line.trim())
        .map_err(|e| format!("the driver's last line is not a JSON outcome: {e}"))?;
    ActOutcome::from_json(&v)
}

#[cfg(test)]
mod driver_tests {
    use super::*;

    #[test]
    fn argv_placeholders_and_outcome_lines() {
        let a =
            json!({"do": "call_tool", "authority": "x.y", "tool": "get_value", "args": {"k": [1]}});
        let argv = driver_argv(
            &[
                "d".into(),
                "--do={do}".into(),
                "{tool}".into(),
                "{args}".into(),
                "{action}".into(),
            ],
            &a,
        );
        assert_eq!(argv[1], "--do=call_tool");
        assert_eq!(argv[2], "get_value");
        assert_eq!(argv[3], r#"{"k":[1]}"#);
        assert_eq!(serde_json::from_str::<Json>(&argv[4]).unwrap(), a);
        let o = driver_outcome("log line\n{\"outcome\":\"refused\",\"detail\":\"sha256\"}\n\n")
            .unwrap();
        assert_eq!(o.kind(), "refused");
        assert!(driver_outcome("no json here").is_err());
        assert!(driver_outcome("").is_err());
        let p = ConsumerProfile::from_toml("[driver]\ncommand = [\"x\", \"{do}\"]\n").unwrap();
        assert_eq!(p.driver.map(|d| d.timeout_ms), Some(120_000));
        // No driver: the device makes the Consumer act; the bounds are read.
        let p =
            ConsumerProfile::from_toml("[consumer]\nname = \"c\"\n[bounds]\nmax_json_depth = 32\n")
                .unwrap();
        assert_eq!(p.driver, None);
        assert_eq!(p.bounds.max_json_depth, Some(32));
        assert!(ConsumerProfile::from_toml("[driver]\ncommand = []\n").is_err());
        assert!(ConsumerProfile::from_toml("[driver]\ncomand = [\"x\"]\n").is_err());
    }
}

#[cfg(test)]
mod hosted_tests {
    use super::*;

    fn phone() -> Json {
        json!({"hosted_provider": {
            "authority": "com.clawseed.probe.hostile.clawseed.tools",
            "package": "com.clawseed.probe",
            "metas": [
                {"com.clawseed.tools.authority": "com.clawseed.probe.hostile.clawseed.tools",
                 "com.clawseed.tools.version": "1", "com.clawseed.tools.versions": "1,2"},
                {"com.clawseed.tools.authority": "com.clawseed.probe.hostile.clawseed.tools",
                 "com.clawseed.tools.versions": "2"}],
            "throw_classes": ["java.lang.SecurityException"]}})
    }

    fn scenario(provider: Json, script: Json) -> Scenario {
        serde_json::from_value(json!({
            "id": "T-1", "title": "t", "role": "consumer", "level": "MUST",
            "requirements": ["CETP2-2.1-04"], "provider": provider, "script": script,
            "acts": [{"do": "connect"}], "expect": [{"check": "no_crash"}]}))
        .unwrap()
    }

    #[test]
    fn hello_hosted_provider_is_read_and_bounded() {
        let h = HostedAs::from_hello(&phone()).unwrap().unwrap();
        assert_eq!(h.package, "com.clawseed.probe");
        assert_eq!(h.metas.len(), 2);
        assert_eq!(h.throw_classes, ["java.lang.SecurityException"]);
        assert_eq!(HostedAs::from_hello(&json!({"ops": []})).unwrap(), None);
        for bad in [
            json!({"hosted_provider": {"package": "p"}}),
            json!({"hosted_provider": {"authority": "", "package": "p"}}),
            json!({"hosted_provider": {"authority": "a".repeat(257), "package": "p"}}),
            json!({"hosted_provider": {"authority": "a", "package": "p", "metas": [1]}}),
            json!({"hosted_provider": {"authority": "a", "package": "p",
                   "throw_classes": vec!["x"; 65]}}),
        ] {
            assert!(HostedAs::from_hello(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn what_a_phone_cannot_host_or_play_is_not_played() {
        let dev = Playable {
            extensions: vec!["fd_endless".into()],
            fail_kinds: vec![ErrorKind::Timeout],
            hosted: HostedAs::from_hello(&phone()).unwrap(),
            peer: None,
            binder_limit: true,
        };
        let plain = |manifest: &str| json!({"manifest": manifest});
        // Played: the default dual stack, a v2-only manifest, a timeout
        // (reply_fail), a listed throw, an endless descriptor.
        for (provider, script) in [
            (plain("dual_stack"), json!([])),
            (plain("v2_only"), json!([])),
            (
                plain("dual_stack"),
                json!([{"when": {"method": "negotiate"}, "reply": {"timeout": true}}]),
            ),
            (
                plain("dual_stack"),
                json!([{"when": {"method": "negotiate"},
                                          "reply": {"throw": "java.lang.SecurityException"}}]),
            ),
            (
                plain("dual_stack"),
                json!([{"when": {"method": "execute_tool"},
                                          "reply": {"file": {"content": {}, "endless": true}}}]),
            ),
        ] {
            let s = scenario(provider.clone(), script.clone());
            assert_eq!(wire_unplayable(&s, &dev), None, "{provider} {script}");
        }
        for (provider, script, why) in [
            (plain("v1_only"), json!([]), "manifest"),
            (
                json!({"manifest": "dual_stack", "authority_package": "com.attacker.app"}),
                json!([]),
                "only in",
            ),
            (
                plain("dual_stack"),
                json!([{"when": {"method": "negotiate"}, "reply": {"disconnect": true}}]),
                "dies",
            ),
            (
                plain("dual_stack"),
                json!([{"when": {"method": "negotiate"}, "reply": {"throw": "java.io.IOException"}}]),
                "cannot throw",
            ),
            (
                plain("dual_stack"),
                json!([{"when": {"method": "execute_tool"},
                                          "reply": {"needs_user": {"code": "USER_ACTION_REQUIRED"}}}]),
                "PendingIntent",
            ),
        ] {
            let s = scenario(provider.clone(), script.clone());
            let got = wire_unplayable(&s, &dev);
            assert!(
                got.as_deref().is_some_and(|g| g.contains(why)),
                "{provider} {script}: {got:?}"
            );
        }
        // The simulated device plays them all.
        let sim = Playable {
            extensions: vec!["fail".into(), "fd_endless".into(), "pending_intent".into()],
            ..Playable::default()
        };
        let s = scenario(
            json!({"manifest": "v1_only", "authority_package": "com.attacker.app"}),
            json!([{"when": {"method": "negotiate"}, "reply": {"disconnect": true}}]),
        );
        assert_eq!(wire_unplayable(&s, &sim), None);
    }

    /// Identity `name`'s probe: its own authority and the peer's, named by
    /// its `$Foreign` service.
    fn probe(own: &str, peer: &str) -> Json {
        let auth = |p: &str| format!("{p}.hostile.clawseed.tools");
        json!({"hosted_provider": {
            "authority": auth(own), "package": own,
            "metas": [{"com.clawseed.tools.authority": auth(own),
                       "com.clawseed.tools.version": "1", "com.clawseed.tools.versions": "1,2"}],
            "throw_classes": [],
            "foreign_metas": [{"com.clawseed.tools.authority": auth(peer),
                               "com.clawseed.tools.version": "1", "com.clawseed.tools.versions": "1,2"}],
            "foreign_package": peer}})
    }

    /// A phone with its second probe: a decoy goes to the peer; a
    /// ContentProvider of another package is the peer's, named by this
    /// probe's `$Foreign` service; without the peer both are not played.
    #[test]
    fn a_peer_probe_hosts_the_second_provider_and_the_other_packages_contentprovider() {
        let (a, b) = ("com.clawseed.probe", "com.clawseed.probe.b");
        let with_peer = Playable {
            hosted: HostedAs::from_hello(&probe(a, b)).unwrap(),
            peer: HostedAs::from_hello(&probe(b, a)).unwrap(),
            ..Playable::default()
        };
        let h = with_peer.hosted.as_ref().unwrap();
        assert_eq!(h.foreign_package.as_deref(), Some(b));
        assert_eq!(h.foreign_metas.len(), 1);
        let mut decoy = scenario(json!({"manifest": "dual_stack"}), json!([]));
        decoy.provider.decoy = true;
        let l = layout(&decoy, &with_peer).unwrap();
        assert!(l.decoy_on_peer && !l.hostile_on_peer);
        assert_eq!(l.decoy.as_ref().unwrap().package(), b);
        assert_eq!(l.hostile.package(), a);
        let foreign = scenario(
            json!({"manifest": "dual_stack", "authority_package": "com.attacker.app"}),
            json!([]),
        );
        let l = layout(&foreign, &with_peer).unwrap();
        assert!(l.hostile_on_peer && l.decoy.is_none());
        // The service is this probe's; the ContentProvider the peer's.
        assert_eq!(l.hostile.package(), a);
        assert_eq!(
            l.hostile.authority(),
            "com.clawseed.probe.b.hostile.clawseed.tools"
        );
        assert_eq!(l.hostile.authority_package(), b);
        // A manifest the $Foreign service does not declare is not played.
        let v2 = scenario(
            json!({"manifest": "v2_only", "authority_package": "com.attacker.app"}),
            json!([]),
        );
        assert!(wire_unplayable(&v2, &with_peer).is_some_and(|w| w.contains("another package")));
        let alone = Playable {
            peer: None,
            ..with_peer.clone()
        };
        for s in [&decoy, &foreign] {
            assert!(wire_unplayable(s, &alone).is_some_and(|w| w.contains("no peer probe")));
        }
    }
}

#[cfg(test)]
mod ability_tests {
    use super::*;

    /// A device that hosts anything and whose Consumer answers every act,
    /// but lacks one ability.
    struct Lacking {
        clock: bool,
        cancel: bool,
    }

    /// A device whose incoming_call names no authority.
    struct Anonymous;

    impl ConsumerDevice for Anonymous {
        fn host(&mut self, _: &BTreeMap<String, String>, _: &str, _: &str) -> Result<(), String> {
            Ok(())
        }
        fn act(
            &mut self,
            _: &Json,
            on: &mut dyn FnMut(DeviceEvent) -> Option<WireAnswer>,
        ) -> Result<ActOutcome, String> {
            on(DeviceEvent::Call {
                authority: None,
                peer: false,
                method: "negotiate".into(),
                extras: cetp_proto::Bundle::default(),
                now_ms: T0,
            });
            Ok(ActOutcome::Refused { detail: "x".into() })
        }
        fn advance_clock(&mut self, _: u64) -> Result<(), String> {
            Ok(())
        }
    }

    impl ConsumerDevice for Lacking {
        fn host(&mut self, _: &BTreeMap<String, String>, _: &str, _: &str) -> Result<(), String> {
            Ok(())
        }
        fn act(
            &mut self,
            action: &Json,
            _: &mut dyn FnMut(DeviceEvent) -> Option<WireAnswer>,
        ) -> Result<ActOutcome, String> {
            match action.get("do").and_then(Json::as_str) {
                Some("cancel_tool") if !self.cancel => {
                    Err("consumer_act: bad_request: unknown action \"cancel_tool\"".into())
                }
                Some("call_tool") if !self.cancel => {
                    Err("consumer_act: io: connection reset".into())
                }
                _ => Ok(ActOutcome::Success { value: json!({}) }),
            }
        }
        fn advance_clock(&mut self, _: u64) -> Result<(), String> {
            if self.clock {
                Ok(())
            } else {
                Err("advance_clock: unsupported: this device keeps real time".into())
            }
        }
    }

    fn scenario(acts: Json) -> Scenario {
        serde_json::from_value(json!({
            "id": "T-1", "title": "t", "role": "consumer", "level": "MUST",
            "requirements": ["CETP2-2.1-04"], "acts": acts,
            "expect": [{"check": "no_crash"}]}))
        .unwrap()
    }

    #[test]
    fn a_device_lacking_an_ability_is_a_setup_gap_naming_it_never_an_infra_error() {
        let none = DeclaredBounds::default();
        let clock = scenario(json!([{"do": "connect"}, {"do": "advance_clock", "ms": 5}]));
        let mut dev = Lacking {
            clock: false,
            cancel: true,
        };
        let r = run_on_device(&clock, &mut dev, &none).unwrap();
        assert_eq!(r.verdict, Verdict::NotApplicable);
        assert!(
            r.not_judged[0].contains("advance_clock"),
            "{:?}",
            r.not_judged
        );
        let cancel =
            scenario(json!([{"do": "connect"}, {"do": "cancel_tool", "tool": "slow_job"}]));
        let mut dev = Lacking {
            clock: true,
            cancel: false,
        };
        let r = run_on_device(&cancel, &mut dev, &none).unwrap();
        assert_eq!(r.verdict, Verdict::NotApplicable);
        assert!(
            r.not_judged[0].contains("cancel_tool"),
            "{:?}",
            r.not_judged
        );
        // Trouble of the device or transport stays an error (INFRA_ERROR).
        let call = scenario(json!([{"do": "connect"}, {"do": "call_tool", "tool": "get_value"}]));
        assert!(run_on_device(&call, &mut dev, &none).is_err());
        // Two hosted Providers, and calls that do not say which was called.
        let mut two: Scenario = scenario(json!([{"do": "connect"}]));
        two.provider.decoy = true;
        let r = run_on_device(&two, &mut Anonymous, &none).unwrap();
        assert_eq!(r.verdict, Verdict::NotApplicable);
        assert!(
            r.not_judged[0].contains("incoming_call's authority"),
            "{:?}",
            r.not_judged
        );
        // A device with the ability plays the scenario.
        let mut dev = Lacking {
            clock: true,
            cancel: true,
        };
        assert_eq!(
            run_on_device(&clock, &mut dev, &none).unwrap().verdict,
            Verdict::Pass
        );
    }

    /// A TCP rig's Consumer that takes whatever it is given: every act
    /// reaches the Provider and ends in success. `binder_limit` is what its
    /// `hello` says.
    struct Rig {
        binder_limit: bool,
    }

    impl ConsumerDevice for Rig {
        fn host(&mut self, _: &BTreeMap<String, String>, _: &str, _: &str) -> Result<(), String> {
            Ok(())
        }
        fn act(
            &mut self,
            action: &Json,
            on: &mut dyn FnMut(DeviceEvent) -> Option<WireAnswer>,
        ) -> Result<ActOutcome, String> {
            if action.get("do").and_then(Json::as_str) == Some("connect") {
                on(DeviceEvent::Call {
                    authority: None,
                    peer: false,
                    method: "negotiate".into(),
                    extras: cetp_proto::Bundle::default(),
                    now_ms: T0,
                });
            }
            Ok(ActOutcome::Success { value: json!({}) })
        }
        fn advance_clock(&mut self, _: u64) -> Result<(), String> {
            Ok(())
        }
        fn binder_limit(&self) -> bool {
            self.binder_limit
        }
    }

    #[test]
    fn a_binder_limit_premise_is_judged_only_where_the_device_enforces_it() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../vectors/consumer");
        let all = scenario::load_dir(&dir).unwrap();
        let s = all.iter().find(|s| s.id == "CDATA-001").unwrap();
        assert_eq!(s.premise, ["binder_transaction_limit"]);
        let none = DeclaredBounds::default();
        // A TCP rig delivered the 2 MB and its Consumer took it: not judged,
        // naming the premise and what would judge it.
        let r = run_on_device(
            s,
            &mut Rig {
                binder_limit: false,
            },
            &none,
        )
        .unwrap();
        assert_eq!(r.verdict, Verdict::NotApplicable, "{:?}", r.findings);
        assert!(r.findings.is_empty());
        assert!(
            r.not_judged[0].starts_with("not judged: ")
                && r.not_judged[0].contains("Binder's transaction limit")
                && r.not_judged[0].contains("binder_transaction_limit"),
            "{:?}",
            r.not_judged
        );
        // A device that says it enforces the limit is judged by it: a
        // Consumer there that reports the list accepted FAILs.
        let r = run_on_device(s, &mut Rig { binder_limit: true }, &none).unwrap();
        assert_eq!(r.verdict, Verdict::Fail, "{:?}", r.not_judged);
        assert_eq!(r.findings[0].cited, ["CETP2-7.3-01"]);
        // Scenarios without the premise are played on the rig as before.
        let other = all.iter().find(|s| s.id == "CDATA-007").unwrap();
        assert!(premise_unmet(other, false).is_none());
        // In-process the device enforces it: judged, and the reference
        // Consumer passes (the answer never crossed; the act ended in an
        // error, without a crash).
        let r = run_in_process(s, &ConsumerConfig::default()).unwrap();
        assert_eq!(r.verdict, Verdict::Pass, "{:?}", r.findings);
        assert!(r.not_judged.is_empty());
        // A Consumer that crashes on the failed transaction FAILs there.
        let crashes = ConsumerConfig {
            faults: vec![ConsumerMutant::OversizedAnswerCrashes],
            ..ConsumerConfig::default()
        };
        let r = run_in_process(s, &crashes).unwrap();
        assert_eq!(r.verdict, Verdict::Fail, "{:?}", r.findings);
        assert!(
            r.findings
                .iter()
                .any(|f| f.check == "no_crash" && f.cited == ["CETP2-4.2-04"]),
            "{:?}",
            r.findings
        );
    }
}
