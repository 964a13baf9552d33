//! Running one case, generated or replayed, on one target: the regular
//! interpreter with the regular checks on every answer, nothing added.

use cetp_vectors::checks::Finding;
use cetp_vectors::device::Target;
use cetp_vectors::event::Event;
use cetp_vectors::interp::{CaseRunner, CheckTally, Env, Stop};
use cetp_vectors::profile::Profile;
use cetp_vectors::template::Bindings;
use cetp_vectors::vector::Case;
use rand::SeedableRng;
use std::collections::BTreeMap;

/// What one case did on one target.
#[derive(Debug)]
pub struct CaseRun {
    /// Why the case stopped before its end, if it did.
    pub stop: Option<Stop>,
    /// The top-level step the case stopped at (1-based), or the step count.
    pub step: usize,
    /// What the case bound (`bind`), by name, when it stopped.
    pub bindings: Bindings,
    /// First finding of each check that fired: check id → (step, finding).
    pub checks: BTreeMap<String, (usize, Finding)>,
    /// Requirement ids a FAIL of the case cites (the failing step's).
    pub cited: Vec<String>,
    /// Calls sent (answers judged by the checks).
    pub answers: usize,
    /// `execute_tool` calls of tools not known to be read-only.
    pub dispatched: usize,
}

impl CaseRun {
    /// Whether the case failed: a FAIL stop, or any check fired.
    pub fn failed(&self) -> bool {
        matches!(self.stop, Some(Stop::Fail(_))) || !self.checks.is_empty()
    }
}

/// One line saying why a case stopped, for errors and traces.
pub fn describe_stop(stop: &Stop) -> String {
    match stop {
        Stop::Fail(r) => format!("FAIL: {r}"),
        Stop::NotApplicable(r) => format!("not applicable: {r}"),
        Stop::Setup { needs, reason } => format!("not judged: {reason} (needs {needs})"),
        Stop::Infra(r) => format!("infrastructure: {r}"),
        Stop::Cut(r) => format!("cut: {r}"),
        Stop::Withdraw { reason, .. } => format!("withdrawn: {reason}"),
    }
}

/// Runs `case` on `target` with a generator seeded by `seed`, so that the
/// same case and seed send the same request ids wherever they run.
pub fn run_case(
    target: &Target,
    profile: &Profile,
    env: &Env,
    rules: &BTreeMap<String, Vec<String>>,
    case: &Case,
    seed: u64,
) -> CaseRun {
    run_case_waiting(
        target,
        profile,
        env,
        rules,
        case,
        seed,
        cetp_vectors::interp::DEFAULT_MAX_WAIT_MS,
    )
}

/// [`run_case`] on a target whose clock may not move: a lifetime longer
/// than `max_wait_ms` of real time leaves its step unjudged, naming the
/// `--max-wait` that would judge it.
pub fn run_case_waiting(
    target: &Target,
    profile: &Profile,
    env: &Env,
    rules: &BTreeMap<String, Vec<String>>,
    case: &Case,
    seed: u64,
    max_wait_ms: u64,
) -> CaseRun {
    run_case_idling(target, profile, env, rules, case, seed, max_wait_ms, None)
}

/// [`run_case_waiting`], handing each real-time wait to `idle` first
/// ([`CaseRunner::idle`]): the fuzzer judges other sequences meanwhile.
#[allow(clippy::too_many_arguments)]
pub fn run_case_idling(
    target: &Target,
    profile: &Profile,
    env: &Env,
    rules: &BTreeMap<String, Vec<String>>,
    case: &Case,
    seed: u64,
    max_wait_ms: u64,
    idle: Option<&mut dyn FnMut(u64)>,
) -> CaseRun {
    let mut tally = CheckTally::new(rules.clone());
    let mut dispatched = 0usize;
    let mut emit = |e: Event| {
        if let Event::Dispatched { .. } = e {
            dispatched += 1;
        }
    };
    let rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let (stop, step, bindings, cited) = {
        let mut runner =
            CaseRunner::new(target, profile, env, &mut emit, &mut tally, rng).max_wait(max_wait_ms);
        if let Some(hook) = idle {
            runner = runner.idle(hook);
        }
        let r = runner.run(case);
        (
            r.err(),
            runner.step_reached(),
            runner.bindings().clone(),
            runner.cited.clone(),
        )
    };
    let checks = tally
        .first
        .iter()
        .map(|(id, (_, step, f))| (id.to_string(), (*step, f.clone())))
        .collect();
    CaseRun {
        stop,
        step,
        bindings,
        checks,
        cited,
        answers: tally.answers,
        dispatched,
    }
}
