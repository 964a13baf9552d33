//! The oracle: the reference Provider (with the target's app and manifest)
//! and every legal variant of it, each in-process on a manual clock, run on
//! the same sequence. What they answered, together, is what the target may
//! answer: a step's expectation is the union of their answer classes
//! (status, error code), an effect count is expected only where they all
//! agree, and a named judgement is kept only where it holds on all of them.
//! So a fuzz FAIL is never a choice one of the legal variants makes.

use crate::exec::{run_case, CaseRun};
use crate::moves::{GenStep, Meta};
use cetp_reference::device::DeviceClock;
use cetp_reference::provider::{FixtureSet, ManifestVariant, ReferenceProvider, Variant};
use cetp_sim::{provider_config, SimConfig};
use cetp_vectors::device::Target;
use cetp_vectors::interp::Stop;
use cetp_vectors::profile::{Counts, Profile};
use cetp_vectors::vector::Case;
use serde_json::{json, Value as Json};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Rounds of dropping steps some member could not run before the rest is cut.
pub(crate) const MAX_ROUNDS: usize = 12;

/// One Provider of the oracle.
#[derive(Clone, Debug)]
pub struct Member {
    /// `reference`, or the latitude's name.
    pub name: String,
    cfg: SimConfig,
}

/// The differential oracle: the reference Provider hosting the target's
/// app, and every legal variant of it.
pub struct Oracle {
    /// The reference app the target runs.
    pub app: FixtureSet,
    /// The reference and each legal variant, judging together.
    pub members: Vec<Member>,
}

/// What the oracle made of a sequence.
#[derive(Debug)]
pub struct Compiled {
    /// The case to run on the target, expectations filled in; `None` when
    /// nothing of the sequence is left to judge.
    pub case: Option<Json>,
    /// Checks that fired on an oracle member: the reference and its
    /// variants are conforming by construction, so each one is a defect of
    /// the checks (or of the reference) on this input, reported, and the
    /// sequence is not judged.
    pub oracle_findings: Vec<String>,
    /// Steps of `case` at which a legal variant stopped because its own
    /// earlier answer left the step's template empty (a refused
    /// escalation has no resolution to launch). A target that stops at
    /// one of them the same way took that variant's path: not judged.
    pub gaps: Vec<Json>,
}

/// A stop because a template names what an earlier answer does not hold:
/// a resolution's handle (a FAIL where the suite's cases expect one) or,
/// at an optional step, any template of it (the resumed call's token).
pub fn is_template_gap(stop: &Stop, optional: bool) -> bool {
    match stop {
        Stop::Fail(m) => m.contains("` has nothing at `"),
        Stop::Infra(m) => optional && m.contains("` has nothing at `"),
        _ => false,
    }
}

impl Oracle {
    /// The oracle for a target hosting `package` with manifest `manifest`,
    /// when one of the reference's apps is that package.
    pub fn for_package(package: &str, manifest: &str) -> Option<Oracle> {
        let app = [FixtureSet::Reference, FixtureSet::Notes]
            .into_iter()
            .find(|a| a.package() == package)?;
        let manifest = match manifest {
            "v2_only" => ManifestVariant::V2Only,
            _ => ManifestVariant::DualStack,
        };
        let base = SimConfig {
            provider: app,
            manifest,
            effect_delay_ms: 0,
            ..SimConfig::default()
        };
        let mut members = vec![Member {
            name: "reference".into(),
            cfg: base.clone(),
        }];
        for l in Variant::ALL {
            // A v2-only manifest is the target's own shape, not a latitude
            // the oracle adds: discovery and v1 answers depend on it.
            if *l == Variant::V2OnlyManifest {
                continue;
            }
            // A latitude of v2-only Providers (how they refuse a v1 call)
            // speaks only for a v2-only target: it makes the member
            // v2-only, whose v1 answers a dual-stack target must not give
            // (it hid `v1_lists_write_tools` from this oracle).
            if *l == Variant::V2OnlyV1CallsUnknown && manifest == ManifestVariant::DualStack {
                continue;
            }
            // Whether list_alerts counts effects is what the target's own
            // profile says about its observer; a Provider without the
            // counter comes with another profile (no-counter.toml), so under
            // this one it could not be observed at all.
            if *l == Variant::NoEffectCounter {
                continue;
            }
            members.push(Member {
                name: l.name().to_string(),
                cfg: SimConfig {
                    variant: Some(l.name().to_string()),
                    ..base.clone()
                },
            });
        }
        Some(Oracle { app, members })
    }

    /// The unmutated reference member, in-process.
    pub fn reference_target(&self, start_ms: i64) -> Option<(Target, Arc<ReferenceProvider>)> {
        self.target(self.members.first()?, start_ms)
    }

    /// A fresh in-process target for `m` whose clock starts at `start_ms`.
    fn target(&self, m: &Member, start_ms: i64) -> Option<(Target, Arc<ReferenceProvider>)> {
        let cfg = provider_config(&m.cfg).ok()?;
        let provider = Arc::new(ReferenceProvider::new(cfg));
        let app: Arc<dyn cetp_reference::app::ProviderApp> = provider.clone();
        let target =
            cetp_conformance::in_process::in_process_target(app, DeviceClock::manual(start_ms));
        Some((target, provider))
    }

    /// Runs `case` on each of `members`, in parallel (members are
    /// independent), each on a fresh target of its own.
    fn run_members(
        &self,
        members: &[Member],
        case: &Case,
        (profile, rules): (&Profile, &BTreeMap<String, Vec<String>>),
        seed: u64,
        start_ms: i64,
        wrap: &(dyn Fn(Target) -> Target + Sync),
    ) -> Vec<(String, CaseRun)> {
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(8);
        let chunk = members.len().div_ceil(threads.max(1)).max(1);
        std::thread::scope(|scope| {
            let handles: Vec<_> = members
                .chunks(chunk)
                .map(|ms| {
                    scope.spawn(move || {
                        ms.iter()
                            .filter_map(|m| {
                                let (target, _provider) = self.target(m, start_ms)?;
                                let target = wrap(target);
                                let (_, env) =
                                    cetp_conformance::runner::identify(&target, profile).ok()?;
                                Some((
                                    m.name.clone(),
                                    run_case(&target, profile, &env, rules, case, seed),
                                ))
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap_or_default())
                .collect()
        })
    }

    /// Runs `steps` on every member (or, with `reference_only`, on the
    /// reference alone) and compiles the case for the target.
    ///
    /// The reference alone gives the strictest case: its classes are a
    /// subset of the union, it keeps every judgement and effect count the
    /// whole oracle keeps. A target that passes it passes the whole
    /// oracle's case, so the variants need to run only when it does not.
    #[allow(clippy::too_many_arguments)]
    pub fn compile(
        &self,
        reference_only: bool,
        steps: &[GenStep],
        header: &Json,
        profile: &Profile,
        rules: &BTreeMap<String, Vec<String>>,
        seed: u64,
        start_ms: i64,
        wrap: &(dyn Fn(Target) -> Target + Sync),
    ) -> Compiled {
        let mut steps: Vec<GenStep> = steps.to_vec();
        let mut runs: Vec<CaseRun> = Vec::new();
        let mut oracle_findings = Vec::new();
        let mut gaps: BTreeSet<usize> = BTreeSet::new();
        // A step some member could not run to its end (a judgement that
        // does not hold there, a template naming what that member never
        // answered, a setup it lacks) is dropped and the sequence run again;
        // after a few rounds the rest is cut at the first such step.
        for round in 0..=MAX_ROUNDS {
            runs.clear();
            gaps.clear();
            let Some(case) = to_case(header, &oracle_steps(&steps)) else {
                break;
            };
            let members = if reference_only {
                &self.members[..1]
            } else {
                &self.members[..]
            };
            let results = self.run_members(members, &case, (profile, rules), seed, start_ms, wrap);
            let first_stop = first_dropped(&results, &steps, &mut gaps);
            for (name, run) in results {
                for (check, (step, f)) in &run.checks {
                    oracle_findings.push(format!(
                        "{check} fired on oracle member {name} at step {step}: {} ({})",
                        f.message, f.rule
                    ));
                }
                runs.push(run);
            }
            if !oracle_findings.is_empty() {
                return Compiled {
                    case: None,
                    oracle_findings,
                    gaps: Vec::new(),
                };
            }
            match first_stop {
                None => break,
                Some(i) if i >= steps.len() => break,
                Some(i) if round < MAX_ROUNDS => {
                    steps.remove(i);
                }
                Some(i) => steps.truncate(i),
            }
        }
        if runs.is_empty()
            || steps
                .iter()
                .all(|s| s.meta == Meta::Plain && is_setup(&s.step))
        {
            return Compiled {
                case: None,
                oracle_findings,
                gaps: Vec::new(),
            };
        }
        let counts = profile.observer.as_ref().map(|o| o.counts);
        let (compiled, gap_steps) = compile_steps(&steps, &runs, &gaps, counts);
        Compiled {
            case: Some(with_steps(header, compiled)),
            oracle_findings,
            gaps: gap_steps,
        }
    }
}

/// The first step to drop after a round: the first stop of any member
/// that is not a latitude. A variant that cannot go on by its own latitude
/// (a tool it hides, a case its choice makes inapplicable) stops there: it
/// vouches for the steps it ran, and a target taking the same latitude
/// stops there unjudged too. Any other stop, or the reference's, drops the
/// step.
///
/// A member's earlier answer can also leave a later template empty: a
/// variant's refusal has no resolution to launch, and an optional step (a
/// resolution a retry may ask for again) has nothing to run where the
/// member did not ask. That path is its latitude as well, as long as
/// another member went on; a target on it is left unjudged there (such
/// steps go to `gaps`, see [`Compiled::gaps`]). Any other FAIL is never
/// one: the step's own expectation does not hold for a legal Provider, so
/// it goes.
fn first_dropped(
    results: &[(String, CaseRun)],
    steps: &[GenStep],
    gaps: &mut BTreeSet<usize>,
) -> Option<usize> {
    let went_on = |i: usize| {
        results
            .iter()
            .any(|(_, r)| r.stop.is_none() || r.step > i + 1)
    };
    let mut first_stop: Option<usize> = None;
    for (k, (_, run)) in results.iter().enumerate() {
        let Some(stop) = &run.stop else { continue };
        let i = run.step.saturating_sub(1);
        let optional = steps.get(i).is_some_and(|s| s.meta == Meta::Optional);
        let gap = is_template_gap(stop, optional) && (k > 0 || (optional && went_on(i)));
        if gap {
            gaps.insert(i);
        }
        let latitude_stop = gap || (k > 0 && !matches!(stop, Stop::Fail(_) | Stop::Cut(_)));
        if !latitude_stop {
            first_stop = Some(first_stop.map_or(i, |f| f.min(i)));
        }
    }
    first_stop
}

/// The case's steps, each with what the members that reached it expect,
/// and those of them at which a member took a template gap.
fn compile_steps(
    steps: &[GenStep],
    runs: &[CaseRun],
    gaps: &BTreeSet<usize>,
    counts: Option<Counts>,
) -> (Vec<Json>, Vec<Json>) {
    let open = OpenOperations::of(steps, runs);
    let mut gap_steps = Vec::new();
    let compiled = steps
        .iter()
        .enumerate()
        .filter_map(|(i, s)| {
            let reached: Vec<&CaseRun> = runs
                .iter()
                .filter(|r| r.stop.is_none() || r.step > i + 1)
                .collect();
            if let Meta::EffectsAfter { since, .. } = &s.meta {
                if open.in_window(since, i) {
                    return None;
                }
            }
            let step = compile_step(s, &reached, counts)?;
            if gaps.contains(&i) {
                gap_steps.push(step.clone());
            }
            Some(step)
        })
        .collect();
    (compiled, gap_steps)
}

/// Background operations the members accepted, and the first step that
/// showed each one ended. The members run on a manual clock, so an operation they
/// accepted stays running until a step moves the clock or settles it; the
/// target's clock is real, so the same operation may end, with its effect,
/// at any moment in between. An effect count over a window in which any
/// member had such an operation open is the machine's timing, not the
/// Provider's choice: it is not expected (a loaded machine charged a legal
/// variant with the earlier operation's effect).
pub(crate) struct OpenOperations {
    /// Step index of each binding (a `concurrent` step's sub-calls share
    /// their step's index).
    at: BTreeMap<String, usize>,
    /// Per member: operation id → (step accepted, first step seen ended).
    ops: Vec<BTreeMap<String, (usize, Option<usize>)>>,
}

impl OpenOperations {
    pub(crate) fn of(steps: &[GenStep], runs: &[CaseRun]) -> Self {
        let mut at = BTreeMap::new();
        for (i, s) in steps.iter().enumerate() {
            let mut binds = vec![&s.step];
            if let Some(sub) = s.step.get("steps").and_then(Json::as_array) {
                binds.extend(sub);
            }
            for b in binds {
                if let Some(name) = b.get("bind").and_then(Json::as_str) {
                    at.entry(name.to_string()).or_insert(i);
                }
            }
        }
        let mut per_bind: Vec<(&String, usize)> = at.iter().map(|(k, v)| (k, *v)).collect();
        per_bind.sort_by_key(|(_, i)| *i);
        let ops = runs
            .iter()
            .map(|r| {
                let mut ops: BTreeMap<String, (usize, Option<usize>)> = BTreeMap::new();
                for (name, i) in &per_bind {
                    let Some(doc) = r.bindings.get(*name) else {
                        continue;
                    };
                    let Some((id, state)) = operation_in(doc) else {
                        continue;
                    };
                    let status = doc.get("status").and_then(Json::as_str);
                    if status == Some("accepted") {
                        ops.entry(id.to_string()).or_insert((*i, None));
                    } else if matches!(state, Some("succeeded" | "failed" | "cancelled")) {
                        if let Some(op) = ops.get_mut(id) {
                            op.1.get_or_insert(*i);
                        }
                    }
                }
                ops
            })
            .collect();
        OpenOperations { at, ops }
    }

    /// Whether some member had an operation open at the snapshot `since`
    /// or at step `after`.
    pub(crate) fn in_window(&self, since: &str, after: usize) -> bool {
        let Some(&from) = self.at.get(since) else {
            return true;
        };
        let open_at = |x: usize, (accepted, ended): (usize, Option<usize>)| {
            accepted < x && ended.is_none_or(|e| e >= x)
        };
        self.ops.iter().any(|ops| {
            ops.values()
                .any(|op| open_at(from, *op) || open_at(after, *op))
        })
    }
}

/// The operation an answer document speaks of, with its state: a call's
/// answer or a poll's carries it in `data`, a settle step's outcome in
/// `operation`.
pub(crate) fn operation_in(doc: &Json) -> Option<(&str, Option<&str>)> {
    let op = ["/data", "/operation"]
        .into_iter()
        .filter_map(|p| doc.pointer(p))
        .find(|d| d.get("operation_id").is_some())?;
    let id = op["operation_id"].as_str()?;
    Some((id, op.get("state").and_then(Json::as_str)))
}

pub(crate) fn is_setup(step: &Json) -> bool {
    matches!(
        step.get("do").and_then(Json::as_str),
        Some("negotiate" | "observe" | "uuid")
    ) && step.get("expect").is_none()
}

/// The steps as the oracle runs them: a call's placeholder expectation is
/// removed (every answer is recorded, none judged), except the marker that
/// keeps an operation unsettled and a negotiate's (without one, negotiate
/// must succeed).
pub(crate) fn oracle_steps(steps: &[GenStep]) -> Vec<Json> {
    steps
        .iter()
        .map(|s| {
            let mut j = s.step.clone();
            strip_placeholder(&mut j);
            if let Some(sub) = j.get_mut("steps").and_then(Json::as_array_mut) {
                for c in sub {
                    strip_placeholder(c);
                }
            }
            j
        })
        .collect()
}

fn strip_placeholder(j: &mut Json) {
    let is_negotiate = j.get("do").and_then(Json::as_str) == Some("negotiate");
    if !is_negotiate && j.get("expect") == Some(&json!({})) {
        if let Some(o) = j.as_object_mut() {
            o.remove("expect");
        }
    }
}

pub(crate) fn to_case(header: &Json, steps: &[Json]) -> Option<Case> {
    serde_json::from_value(with_steps(header, steps.to_vec())).ok()
}

/// `header` made a case of `steps`: its requirements the union of the
/// steps', and identity `b` listed when a step uses it.
pub fn with_steps(header: &Json, steps: Vec<Json>) -> Json {
    let mut case = header.clone();
    let mut reqs: BTreeSet<String> = BTreeSet::new();
    let mut b = false;
    for s in &steps {
        collect(s, &mut reqs, &mut b);
    }
    case["requirements"] = json!(reqs);
    case["identities"] = if b { json!(["a", "b"]) } else { json!(["a"]) };
    case["steps"] = Json::Array(steps);
    case
}

fn collect(s: &Json, reqs: &mut BTreeSet<String>, b: &mut bool) {
    if let Some(r) = s.get("requirements").and_then(Json::as_array) {
        reqs.extend(r.iter().filter_map(|x| x.as_str().map(str::to_string)));
    }
    if s.get("as").and_then(Json::as_str) == Some("b") {
        *b = true;
    }
    if let Some(sub) = s.get("steps").and_then(Json::as_array) {
        for c in sub {
            collect(c, reqs, b);
        }
    }
}

/// The answer class of a bound document: (status or `threw`/`null`/`v1`,
/// error code).
pub(crate) fn class(doc: &Json) -> (String, Option<String>) {
    if doc.get("_threw").is_some() {
        return ("threw".into(), None);
    }
    if doc.get("_null").is_some() {
        return ("null".into(), None);
    }
    match doc.get("status").and_then(Json::as_str) {
        Some(s) => (
            s.to_string(),
            doc.get("error_code")
                .and_then(Json::as_str)
                .map(str::to_string),
        ),
        None => ("v1".into(), None),
    }
}

pub(crate) fn compile_step(s: &GenStep, runs: &[&CaseRun], counts: Option<Counts>) -> Option<Json> {
    let mut j = s.step.clone();
    match &s.meta {
        Meta::Judgement => Some(j),
        Meta::EffectsAfter { since, tool_of } => {
            let after = j.get("bind").and_then(Json::as_str)?.to_string();
            let mut deltas = BTreeSet::new();
            for r in runs {
                let (a, b) = (r.bindings.get(since)?, r.bindings.get(&after)?);
                deltas.insert(effect_delta(a, b, counts)?);
            }
            if deltas.len() != 1 {
                return None;
            }
            let delta = deltas.into_iter().next()?;
            let mut e = json!({"do": "expect_effects", "since": since, "delta": delta,
                               "requirements": j.get("requirements").cloned().unwrap_or(json!([]))});
            if let Some(t) = tool_of {
                e["tool_of"] = json!(t);
            }
            Some(e)
        }
        Meta::Plain | Meta::Optional => {
            if j.get("do").and_then(Json::as_str) == Some("concurrent") {
                // Which of several overlapping calls is served, refused as
                // RATE_LIMITED or met as in progress is the machine's timing,
                // not the Provider's choice: the checks judge each answer,
                // the effect count the whole.
                if let Some(sub) = j.get_mut("steps").and_then(Json::as_array_mut) {
                    for c in sub {
                        set_expect(c, None);
                    }
                }
            } else {
                compile_expect(&mut j, runs);
            }
            Some(j)
        }
    }
}

/// Replaces a placeholder (or the operation marker) with the union of the
/// members' answer classes.
fn compile_expect(j: &mut Json, runs: &[&CaseRun]) {
    let Some(e) = j.get("expect").cloned() else {
        return;
    };
    let Some(bind) = j.get("bind").and_then(Json::as_str).map(str::to_string) else {
        return;
    };
    let marker = e.get("status").is_some();
    if e != json!({}) && !marker {
        return;
    }
    let mut statuses = BTreeSet::new();
    let mut codes = BTreeSet::new();
    // A successful cancel_operation says only that the request was taken
    // (§4.4 names its state): the states the members answered are expected
    // too, absence included where one of them refused.
    let mut states: Vec<Json> = Vec::new();
    let cancel = j.get("method").and_then(Json::as_str) == Some("cancel_operation");
    // A member whose own earlier answer left the step nothing to ask
    // (`only_if`: it answered the execution synchronously) skipped it: it
    // took another path and says nothing about the step; the members that
    // ran it judge it.
    let only_if = j.get("only_if").and_then(Json::as_str).map(str::to_string);
    let skipped = |r: &CaseRun| {
        only_if.as_deref().is_some_and(|t| {
            cetp_vectors::template::expand(&r.bindings, t).map_or(true, |v| v.is_null())
        })
    };
    let runs: Vec<&CaseRun> = runs.iter().copied().filter(|r| !skipped(r)).collect();
    if runs.is_empty() {
        set_expect(j, None);
        return;
    }
    for r in runs {
        let Some(doc) = r.bindings.get(&bind) else {
            // A member that never reached the step (concurrent sub-calls
            // in another order): no expectation is safe.
            set_expect(j, None);
            return;
        };
        let (s, c) = class(doc);
        if cancel {
            let state = doc.pointer("/data/state").cloned().unwrap_or(Json::Null);
            if !states.contains(&state) {
                states.push(state);
            }
        }
        statuses.insert(s);
        if let Some(c) = c {
            codes.insert(c);
        }
    }
    let is_negotiate = j.get("do").and_then(Json::as_str) == Some("negotiate");
    let expect = if statuses.len() == 1 && statuses.contains("threw") {
        Some(json!({"threw": true}))
    } else if statuses.len() == 1 && statuses.contains("null") {
        Some(json!({"null_result": true}))
    } else if statuses
        .iter()
        .all(|s| matches!(s.as_str(), "success" | "accepted" | "error"))
    {
        let mut e = json!({"status": statuses});
        if !codes.is_empty() {
            e["error_code"] = json!(codes);
        }
        if cancel {
            e["data"] = json!([{"pointer": "/data/state", "one_of": states}]);
        }
        Some(e)
    } else if is_negotiate {
        Some(json!({}))
    } else {
        None
    };
    set_expect(j, expect);
}

fn set_expect(j: &mut Json, e: Option<Json>) {
    if let Some(o) = j.as_object_mut() {
        match e {
            Some(e) => {
                o.insert("expect".into(), e);
            }
            None => {
                o.remove("expect");
            }
        }
    }
}

/// The effects between two observer snapshots, in the unit
/// `expect_effects` takes. Moves are observed only with an observer that
/// counts effects (`World::observer`); any other shows only "no change".
pub(crate) fn effect_delta(before: &Json, after: &Json, counts: Option<Counts>) -> Option<i64> {
    if before == after {
        return Some(0);
    }
    match counts? {
        // A counter: a number, or a list whose length counts
        // (profiles/README.md).
        Counts::Effects => {
            let n = |v: &Json| v.as_i64().or_else(|| v.as_array().map(|a| a.len() as i64));
            Some(n(after)? - n(before)?)
        }
        Counts::Objects | Counts::Snapshot => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(j: Json) -> GenStep {
        GenStep {
            step: j,
            meta: Meta::Plain,
        }
    }

    /// The effect window of a sync call, after an operation accepted
    /// earlier in the same sequence: with the operation still running on
    /// the members' manual clock the count is the target's timing (on a
    /// loaded machine four legal variants were charged with its effect), so
    /// it is not expected; once a step settles it first, it is.
    #[test]
    fn an_effect_window_with_an_operation_open_is_not_judged() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let suite = cetp_vectors::suite::Suite::load(&dir.join("vectors")).unwrap();
        let profile = Profile::from_toml(
            &std::fs::read_to_string(dir.join("profiles/reference.toml")).unwrap(),
        )
        .unwrap();
        let oracle = Oracle::for_package("com.clawseed.reference", "dual_stack").unwrap();
        let expected = |settle: bool| {
            let mut steps = vec![
                plain(json!({"do": "negotiate", "as": "a", "bind": "s",
                             "capabilities": ["async_operations"]})),
                plain(
                    json!({"do": "call", "as": "a", "method": "execute_tool", "session": "s",
                             "tool": {"name": "sync_portfolio"}, "args": {"json": {}},
                             "bind": "e", "expect": {"status": ["accepted"]},
                             "requirements": []}),
                ),
            ];
            if settle {
                steps.push(plain(
                    json!({"do": "settle", "as": "a", "session": "s", "of": "e",
                                        "bind": "f", "expect": {}, "requirements": []}),
                ));
            }
            steps.extend([
                plain(json!({"do": "negotiate", "as": "a", "bind": "t"})),
                plain(json!({"do": "observe", "bind": "o"})),
                plain(
                    json!({"do": "call", "as": "a", "method": "execute_tool", "session": "t",
                             "tool": {"name": "sync_portfolio"}, "args": {"json": {}},
                             "bind": "x", "expect": {}, "requirements": []}),
                ),
                GenStep {
                    step: json!({"do": "observe", "bind": "p", "requirements": ["CETP2-6-01"]}),
                    meta: Meta::EffectsAfter {
                        since: "o".into(),
                        tool_of: Some("x".into()),
                    },
                },
            ]);
            let header = json!({"id": "T-1", "title": "t", "role": "provider", "level": "MUST",
                                "requirements": [], "steps": []});
            let c = oracle.compile(
                true,
                &steps,
                &header,
                &profile,
                &suite.rules,
                1,
                1_700_000_000_000,
                &|t| t,
            );
            assert!(c.oracle_findings.is_empty(), "{:?}", c.oracle_findings);
            let case = c.case.expect("a case to judge");
            case["steps"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|s| s["do"] == "expect_effects")
                .map(|s| s["delta"].as_i64().unwrap())
                .collect::<Vec<_>>()
        };
        assert_eq!(expected(false), Vec::<i64>::new());
        assert_eq!(expected(true), vec![1]);
    }
}
