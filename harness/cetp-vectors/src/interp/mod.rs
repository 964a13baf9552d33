//! Runs one case: turns steps into device ops, runs the checks on every
//! answer, and judges the expectations.
//!
//! One small handler per step kind, grouped by what they touch:
//! `session.rs` (discover, negotiate, descriptors), `call.rs` (calls, args,
//! tool picking, the judgement of one answer), `operation.rs` (polling,
//! settling, resolve, descriptors, restart, clock), `observe.rs` (observer
//! snapshots and setup calls), `compare.rs` (judgements over bound values).
//!
//! Every step that executes a tool accepts each outcome the spec allows the
//! Provider; where a case's subject needs one particular outcome (a
//! background operation, an observable effect), the case is left unjudged
//! with [`Stop::Setup`], naming the profile field that would let it judge.

mod call;
mod compare;
mod observe;
mod operation;
mod session;

pub use compare::{check_assertion, tokens_unpredictable};

use crate::answer::{answer_document, bundle_to_json, describe};
use crate::checks::Finding;
use crate::device::{Device, Fault, Target};
use crate::event::Event;
use crate::profile::Profile;
use crate::template::Bindings;
use crate::vector::{Case, Expect, Step};
use cetp_proto::descriptor::{Negotiated, ProviderInfoSummary, ToolList, ToolSummary};
use cetp_proto::device::CallAnswer;
use cetp_proto::discovery::Declared;
use cetp_proto::provider::ServiceManifest;
use cetp_proto::Bundle;
use rand::RngCore;
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value as Json};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

/// Default per-call timeout handed to the device.
pub const CALL_TIMEOUT_MS: u64 = 10_000;
/// Largest descriptor the harness will read in one `read_fd`.
pub const MAX_FD_READ: u64 = 64 * 1024 * 1024;
/// Longest real-time wait a case may take on a device whose clock cannot
/// move, unless `--max-wait` says otherwise: a lifetime beyond it leaves
/// its case unjudged, naming the flag.
pub const DEFAULT_MAX_WAIT_MS: u64 = 180_000;

/// What is known about the target before any case runs.
#[derive(Clone, Debug)]
pub struct Env {
    /// Package of the Provider under test.
    pub package: String,
    /// Its authority (§2.1).
    pub authority: String,
    /// `dual_stack`, `v2_only`, `v1_only`, `versions_only` or `other`.
    pub manifest_kind: String,
    /// What its manifest declares (versions, capabilities), if readable.
    pub declared: Option<Declared>,
    /// Its manifest as discovered.
    pub manifest: Option<ServiceManifest>,
    /// What identity a's `hello` said (`uid`, `packages`), for cases that
    /// impersonate it.
    pub identity_a: Json,
}

impl Env {
    /// Whether the manifest declares protocol version 2 (§2.1).
    pub fn declares_v2(&self) -> bool {
        self.declared
            .as_ref()
            .is_some_and(|d| d.versions.contains(&2))
    }
}

/// Why a case stopped before its last step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stop {
    /// An expectation broke: the case FAILs (or WARNs at SHOULD level) with this reason.
    Fail(String),
    /// Not applicable by the spec: a capability the target did not grant,
    /// a manifest shape the case is not about.
    NotApplicable(String),
    /// Not judged because of the setup: `needs` names the profile field or
    /// the device ability that would let the case judge (`[observer]`,
    /// `[roles.async]`, `--target-b`, ...). Such a case never counts as
    /// passed.
    Setup {
        /// The profile field, flag or device ability that would let the case judge.
        needs: String,
        /// Why the case could not judge, for a human.
        reason: String,
    },
    /// The harness, device or transport failed: INFRA_ERROR, says nothing of the Provider.
    Infra(String),
    /// The run was cut short before this step (Ctrl-C, `--run-timeout`):
    /// an INFRA_ERROR, and the run is left to be resumed.
    Cut(String),
    /// A case running inside another's observer window (a guest) reached
    /// a setup call, whose effects would land in that window: it stops
    /// unjudged, to be run again alone. `clean`: its own window had seen no
    /// effect up to then (its observer read again), so the windows it ran
    /// in may still be trusted.
    Withdraw {
        /// Why the guest withdrew, for a human.
        reason: String,
        /// Whether its window had seen no effect up to then.
        clean: bool,
    },
}

impl Stop {
    fn setup(needs: &str, reason: impl Into<String>) -> Stop {
        Stop::Setup {
            needs: needs.to_string(),
            reason: reason.into(),
        }
    }
}

type StepResult = Result<(), Stop>;

#[derive(Clone, Debug)]
struct Session {
    identity: String,
    token: String,
    negotiated: Negotiated,
    info: Option<ProviderInfoSummary>,
    tools: Option<ToolList>,
}

/// A call made ready to send.
struct Prepared {
    identity: String,
    method: String,
    arg: Option<String>,
    extras: Option<Bundle>,
    v1: bool,
    session: Option<String>,
    tool: Option<ToolSummary>,
    request_doc: Json,
    bind: Option<String>,
    expect: Option<Expect>,
    /// The device time the envelope's deadline was computed from: when the
    /// call was made ready, just before it was sent.
    at_ms: Option<i64>,
}

impl Prepared {
    /// What the Provider may stop answering: the tool of an `execute_tool`,
    /// else the method.
    fn stall_key(&self) -> String {
        self.tool
            .as_ref()
            .map(|t| t.name.clone())
            .or_else(|| {
                self.extras
                    .as_ref()
                    .and_then(|b| b.opt_string("tool_name").ok().flatten())
            })
            .unwrap_or_else(|| self.method.clone())
    }
}

/// Check findings and answers counted per check across a run.
#[derive(Default)]
pub struct CheckTally {
    /// Answers checked so far.
    pub answers: usize,
    /// First finding of each check: (case, step, finding).
    pub first: BTreeMap<&'static str, (String, usize, Finding)>,
    /// Findings per check.
    pub counts: BTreeMap<&'static str, usize>,
    /// Rule key → requirement ids (`vectors/checks/checks.json`).
    pub rules: BTreeMap<String, Vec<String>>,
    /// Requirement ids cited by the findings of each check.
    pub cited: BTreeMap<&'static str, BTreeSet<String>>,
}

impl CheckTally {
    /// An empty tally citing through `rules` (rule key → requirement ids).
    pub fn new(rules: BTreeMap<String, Vec<String>>) -> Self {
        CheckTally {
            rules,
            ..CheckTally::default()
        }
    }

    /// Adds another device's tally of the same run: its answers and
    /// counts; of the two first findings of a check, the one of the case
    /// that comes first in `order` (the selection), so the report does not
    /// depend on which device finished first.
    pub fn merge(&mut self, other: CheckTally, order: &dyn Fn(&str) -> Option<usize>) {
        self.answers += other.answers;
        for (check, n) in other.counts {
            *self.counts.entry(check).or_default() += n;
        }
        for (check, ids) in other.cited {
            self.cited.entry(check).or_default().extend(ids);
        }
        for (check, first) in other.first {
            let earlier = match self.first.get(check) {
                Some(mine) => (order(&first.0), first.1) < (order(&mine.0), mine.1),
                None => true,
            };
            if earlier {
                self.first.insert(check, first);
            }
        }
    }

    /// The requirement ids a finding's rule maps to: `rule@field` when the
    /// data has the field's own clause, else the rule's.
    pub fn cite(&self, rule: &str) -> Vec<String> {
        self.rules
            .get(rule)
            .or_else(|| {
                rule.split_once('@')
                    .and_then(|(base, _)| self.rules.get(base))
            })
            .cloned()
            .unwrap_or_default()
    }
}

/// Runs the steps of one case against the target (see the module docs):
/// holds the case's bindings and reports events and check findings.
pub struct CaseRunner<'a> {
    /// The device connections, one per identity.
    pub target: &'a Target,
    /// The vendor's profile.
    pub profile: &'a Profile,
    /// What was learnt of the target before the case.
    pub env: &'a Env,
    /// Where the case's events go.
    pub emit: &'a mut dyn FnMut(Event),
    /// The run's check tally, fed with every answer.
    pub tally: &'a mut CheckTally,
    /// Source of generated request ids and values; the runner seeds it from
    /// the run's seed and start, the case's index and the attempt.
    pub rng: ChaCha8Rng,
    /// The request ids of observer snapshots: another stream of the same
    /// seed ([`observer_stream`]). Whether a judgement takes a snapshot
    /// depends on what the Provider answered (`cancel_consistent` after a
    /// failed operation takes none), so its draws must not move the
    /// request ids of the calls after it: a replay, and an oracle running
    /// the same steps against another Provider, send those calls with the
    /// same ids whatever each snapshot did.
    snapshot_rng: ChaCha8Rng,
    case_id: String,
    bindings: Bindings,
    sessions: BTreeMap<String, Session>,
    observer_session: Option<String>,
    /// Whether the device can move its clock (learned on first use), so
    /// that waiting for an operation costs no real time on a simulator.
    virtual_clock: Option<bool>,
    /// Names bound to observer snapshots, retaken after setup calls.
    snapshots: BTreeSet<String>,
    step: usize,
    /// The requirements a FAIL cites: the failing step's.
    pub cited: Vec<String>,
    /// Set by a step whose FAIL comes from a rule of its own rather than
    /// from its expectation (a resolve that launched another app): the
    /// requirement of that rule, cited instead of the step's.
    cite_override: Option<Vec<String>>,
    /// The run's record of call timeouts: calls of a tool the Provider
    /// stopped answering are not sent again.
    stalls: Option<&'a crate::stall::Stalls>,
    /// When the run's time is up (`--run-timeout`): no step starts after it.
    deadline: Option<Instant>,
    /// Set by Ctrl-C: no step starts after it.
    interrupt: Option<&'a std::sync::atomic::AtomicBool>,
    /// The device time at which each bound call was sent: an `age` step
    /// measures from it.
    sent_at: BTreeMap<String, i64>,
    /// The longest real-time wait on a device whose clock cannot move
    /// (`--max-wait`).
    max_wait_ms: u64,
    /// Whether a top-level real-time wait may park the case (its executor
    /// runs other cases meanwhile) instead of sleeping in place.
    parking: bool,
    /// How deep in nested steps the running step is (1: top level): only a
    /// top-level step can park, its case then resumes at the next one.
    depth: usize,
    /// The device time a parked case waits for, and when it parked.
    park: Option<(i64, Instant)>,
    /// Real time waited for device time, in ms (the device's clock could
    /// not be moved): said in the case's reason.
    real_waited_ms: u64,
    /// The device's wall clock was set forward for this case, its elapsed
    /// clock left as it was (`clock=move` on a phone).
    wall_clock_moved: bool,
    /// Runs inside another case's observer window: a setup call withdraws
    /// it ([`Stop::Withdraw`]).
    guest: bool,
    /// Work the caller does while the case waits in real time ([`Self::idle`]).
    idle: Option<&'a mut dyn FnMut(u64)>,
}

/// What a case parked at a real-time wait keeps: everything the
/// interpreter owns, without the borrows of the run (event sink, check
/// tally, device), which [`CaseRunner::resumed`] hands back.
pub struct CaseState {
    rng: ChaCha8Rng,
    snapshot_rng: ChaCha8Rng,
    case_id: String,
    bindings: Bindings,
    sessions: BTreeMap<String, Session>,
    observer_session: Option<String>,
    virtual_clock: Option<bool>,
    snapshots: BTreeSet<String>,
    step: usize,
    sent_at: BTreeMap<String, i64>,
    max_wait_ms: u64,
    park: Option<(i64, Instant)>,
    real_waited_ms: u64,
    guest: bool,
}

impl CaseState {
    /// How many of the case's top-level steps have started (the one it
    /// waits at included).
    pub fn step(&self) -> usize {
        self.step
    }

    /// A case parked after its `step`th step, with nothing bound (the
    /// run's scheduler tests).
    pub fn parked_at(step: usize) -> CaseState {
        use rand::SeedableRng;
        CaseState {
            rng: ChaCha8Rng::seed_from_u64(0),
            snapshot_rng: ChaCha8Rng::seed_from_u64(1),
            case_id: String::new(),
            bindings: Bindings::new(),
            sessions: BTreeMap::new(),
            observer_session: None,
            virtual_clock: Some(false),
            snapshots: BTreeSet::new(),
            step,
            sent_at: BTreeMap::new(),
            max_wait_ms: DEFAULT_MAX_WAIT_MS,
            park: None,
            real_waited_ms: 0,
            guest: false,
        }
    }
}

impl<'a> CaseRunner<'a> {
    /// Shares the run's timeout record and bounds the case by the run's
    /// deadline.
    pub fn guarded(
        mut self,
        stalls: &'a crate::stall::Stalls,
        deadline: Option<Instant>,
        interrupt: &'a std::sync::atomic::AtomicBool,
    ) -> Self {
        self.stalls = Some(stalls);
        self.deadline = deadline;
        self.interrupt = Some(interrupt);
        self
    }

    /// Why a call of `tool` is not sent, if the Provider stopped answering it.
    fn stalled(&self, tool: &str) -> Result<(), Stop> {
        match self.stalls.and_then(|s| s.blocked(tool)) {
            Some(why) => Err(Stop::Infra(why)),
            None => Ok(()),
        }
    }

    fn record_call<T>(&self, tool: &str, result: &Result<T, crate::device::DeviceError>) {
        if let Some(s) = self.stalls {
            s.record(tool, result);
        }
    }

    /// Makes the FAIL about to be returned cite `ids` alone.
    fn cite_only(&mut self, ids: &[&str]) {
        self.cite_override = Some(ids.iter().map(|s| s.to_string()).collect());
    }

    /// A runner over these; [`CaseRunner::run`] then runs a case.
    pub fn new(
        target: &'a Target,
        profile: &'a Profile,
        env: &'a Env,
        emit: &'a mut dyn FnMut(Event),
        tally: &'a mut CheckTally,
        rng: ChaCha8Rng,
    ) -> Self {
        CaseRunner {
            target,
            profile,
            env,
            emit,
            tally,
            snapshot_rng: observer_stream(&rng),
            rng,
            case_id: String::new(),
            bindings: Bindings::new(),
            sessions: BTreeMap::new(),
            observer_session: None,
            virtual_clock: None,
            snapshots: BTreeSet::new(),
            step: 0,
            cited: Vec::new(),
            cite_override: None,
            stalls: None,
            deadline: None,
            interrupt: None,
            sent_at: BTreeMap::new(),
            max_wait_ms: DEFAULT_MAX_WAIT_MS,
            parking: false,
            depth: 0,
            park: None,
            real_waited_ms: 0,
            wall_clock_moved: false,
            guest: false,
            idle: None,
        }
    }

    /// Bounds each real-time wait for device time (`--max-wait`).
    pub fn max_wait(mut self, ms: u64) -> Self {
        self.max_wait_ms = ms;
        self
    }

    /// Hands every real-time wait of the case to `hook` first, with its
    /// length in ms: the caller may spend it on other work (the fuzzer
    /// judges other, effect-free sequences meanwhile); whatever the hook
    /// leaves of the wait is then slept. Only for a device whose clock
    /// cannot move, where device time is real time.
    pub fn idle(mut self, hook: &'a mut dyn FnMut(u64)) -> Self {
        self.idle = Some(hook);
        self
    }

    /// Lets `ms` of real time pass on `device`: first the idle hook's
    /// work, if any, then a sleep for what is left.
    fn pass_real_time(&mut self, device: &'a dyn Device, ms: u64) {
        let Some(hook) = self.idle.as_mut() else {
            device.sleep_ms(ms);
            return;
        };
        let until = Instant::now() + std::time::Duration::from_millis(ms);
        hook(ms);
        let left = until.saturating_duration_since(Instant::now()).as_millis();
        if left > 0 {
            device.sleep_ms(u64::try_from(left).unwrap_or(ms));
        }
    }

    /// Lets a top-level real-time wait park the case: [`Self::start`] and
    /// [`Self::resume`] then return the device time it waits for, and the
    /// executor runs other cases until then.
    pub fn parking(mut self) -> Self {
        self.parking = true;
        self
    }

    /// Runs the case inside another's observer window: it withdraws
    /// before any setup call ([`Stop::Withdraw`]).
    pub fn guest(mut self) -> Self {
        self.guest = true;
        self
    }

    /// Never moves the device's clock: every lifetime is waited for in
    /// real time (a case judged again after a wall-clock move proved
    /// nothing).
    pub fn real_time_only(mut self) -> Self {
        self.virtual_clock = Some(false);
        self
    }

    /// Whether the case set the device's wall clock forward, leaving its
    /// elapsed clock ([`Device::clock_moves_wall_only`]).
    ///
    /// [`Device::clock_moves_wall_only`]: crate::device::Device::clock_moves_wall_only
    pub fn wall_clock_moved(&self) -> bool {
        self.wall_clock_moved
    }

    /// The state of a case that parked, to be resumed later.
    pub fn into_state(self) -> CaseState {
        CaseState {
            rng: self.rng,
            snapshot_rng: self.snapshot_rng,
            case_id: self.case_id,
            bindings: self.bindings,
            sessions: self.sessions,
            observer_session: self.observer_session,
            virtual_clock: self.virtual_clock,
            snapshots: self.snapshots,
            step: self.step,
            sent_at: self.sent_at,
            max_wait_ms: self.max_wait_ms,
            park: self.park,
            real_waited_ms: self.real_waited_ms,
            guest: self.guest,
        }
    }

    /// A parked case's runner again, with the run's borrows.
    pub fn resumed(
        target: &'a Target,
        profile: &'a Profile,
        env: &'a Env,
        emit: &'a mut dyn FnMut(Event),
        tally: &'a mut CheckTally,
        state: CaseState,
    ) -> Self {
        let mut r = CaseRunner::new(target, profile, env, emit, tally, state.rng);
        r.snapshot_rng = state.snapshot_rng;
        r.case_id = state.case_id;
        r.bindings = state.bindings;
        r.sessions = state.sessions;
        r.observer_session = state.observer_session;
        r.virtual_clock = state.virtual_clock;
        r.snapshots = state.snapshots;
        r.step = state.step;
        r.sent_at = state.sent_at;
        r.max_wait_ms = state.max_wait_ms;
        r.park = state.park;
        r.real_waited_ms = state.real_waited_ms;
        r.guest = state.guest;
        r.parking = true;
        r
    }

    /// Real time the case waited for device time (its clock could not be
    /// moved), in ms; 0 where the clock was moved or nothing waited.
    pub fn real_waited_ms(&self) -> u64 {
        self.real_waited_ms
    }

    /// What the case has bound so far (answer documents, snapshots, ids):
    /// the fuzzer's oracle reads the answers of its reference runs here.
    pub fn bindings(&self) -> &Bindings {
        &self.bindings
    }

    /// The 1-based index of the last top-level step started.
    pub fn step_reached(&self) -> usize {
        self.step
    }

    /// Runs a case to its end or its first failed expectation (real-time
    /// waits are slept in place unless the runner is [`Self::parking`]).
    pub fn run(&mut self, case: &Case) -> StepResult {
        self.begin(case)?;
        while self.steps(case)?.is_some() {
            self.resume_wait()?;
        }
        Ok(())
    }

    /// Runs a case to its end, its first failed expectation, or a
    /// real-time wait it parks at: `Some(device time)` it waits for. The
    /// caller then keeps [`Self::into_state`] and calls [`Self::resume`]
    /// once the device's clock has reached it.
    pub fn start(&mut self, case: &Case) -> Result<Option<i64>, Stop> {
        self.begin(case)?;
        self.steps(case)
    }

    /// Goes on with a parked case: ends its wait (sleeping what is left of
    /// it), then runs the steps after it.
    pub fn resume(&mut self, case: &Case) -> Result<Option<i64>, Stop> {
        self.resume_wait()?;
        self.steps(case)
    }

    fn resume_wait(&mut self) -> StepResult {
        if let Some((due, started)) = self.park.take() {
            let now = self.sleep_until(due)?;
            self.answered(json!({"now_ms": now, "waited": "real time"}), started);
        }
        Ok(())
    }

    /// Everything before the first step: whether the case applies.
    fn begin(&mut self, case: &Case) -> StepResult {
        self.case_id = case.id.clone();
        self.bindings.insert(
            "env".into(),
            json!({"package": self.env.package, "authority": self.env.authority, "manifest": self.env.manifest_kind, "a": self.env.identity_a}),
        );
        if !case.manifests.is_empty() {
            if !case.manifests.contains(&self.env.manifest_kind) {
                return Err(Stop::NotApplicable(format!(
                    "applies to {} manifests; the target's is {}",
                    case.manifests.join("/"),
                    self.env.manifest_kind
                )));
            }
        } else if !self.env.declares_v2() {
            return Err(Stop::NotApplicable("v2 not declared".into()));
        }
        if case.identities.iter().any(|i| i == "b") && self.target.b.is_none() {
            return Err(if self.profile.identities.second {
                Stop::Fail("cannot run: needs a second caller identity (--target-b), and the profile does not declare it unavailable".into())
            } else {
                Stop::setup(
                    crate::advice::TARGET_B.flag,
                    "the profile declares no second caller identity",
                )
            });
        }
        Ok(())
    }

    /// The steps from the first not yet started, until the end, a stop, or
    /// a parked wait (`Some(device time)`).
    fn steps(&mut self, case: &Case) -> Result<Option<i64>, Stop> {
        while let Some(step) = case.steps.get(self.step) {
            self.step += 1;
            if self
                .interrupt
                .is_some_and(|i| i.load(std::sync::atomic::Ordering::SeqCst))
            {
                return Err(Stop::Cut(format!(
                    "the run was interrupted; this case stopped before step {}",
                    self.step
                )));
            }
            if self.deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(Stop::Cut(format!(
                    "the run reached its --run-timeout; this case stopped before step {}",
                    self.step
                )));
            }
            if let Err(stop) = self.run_step(&step.step, &case.needs) {
                if matches!(stop, Stop::Fail(_)) {
                    self.cited = self
                        .cite_override
                        .take()
                        .unwrap_or_else(|| step.cites(case).to_vec());
                }
                return Err(stop);
            }
            if let Some((due, _)) = self.park {
                return Ok(Some(due));
            }
        }
        Ok(None)
    }

    fn run_step(&mut self, step: &Step, needs: &[String]) -> StepResult {
        self.depth += 1;
        let result = self.run_one_step(step, needs);
        self.depth -= 1;
        result
    }

    fn run_one_step(&mut self, step: &Step, needs: &[String]) -> StepResult {
        match step {
            Step::Discover { bind, expect } => self.discover(bind.as_deref(), expect.as_ref()),
            Step::Negotiate {
                as_,
                versions,
                capabilities,
                extras,
                bind,
                expect,
            } => self.negotiate(
                as_,
                versions.as_deref(),
                capabilities.as_deref(),
                extras.as_ref(),
                bind.as_deref(),
                expect.as_ref(),
                needs,
            ),
            Step::Call { .. } => self.call_step(step),
            Step::Poll {
                as_,
                session,
                operation_of,
                max_ms,
                bind,
                expect,
            } => {
                let doc = self.poll(as_, session, operation_of, *max_ms)?;
                self.conclude(as_, doc, bind.as_deref(), expect.as_ref(), operation_of)
            }
            Step::Settle {
                as_,
                session,
                of,
                bind,
                expect,
            } => {
                let doc = self.settle(as_, session, of)?;
                self.conclude(as_, doc, bind.as_deref(), expect.as_ref(), of)
            }
            Step::Resolve {
                as_,
                handle,
                decision,
            } => self.resolve(as_, handle, decision),
            Step::ReadFd {
                as_,
                handle,
                max_bytes,
                verify_against,
                expect_ok,
                output_schema,
                read_only,
            } => self.read_fd(
                as_,
                handle,
                *max_bytes,
                verify_against.as_deref(),
                expect_ok.unwrap_or(true),
                (*output_schema, *read_only),
            ),
            Step::Restart => self.restart(),
            Step::CancelConsistent { final_, since } => self.cancel_consistent(final_, since),
            Step::Age { .. } | Step::AdvanceClock { .. } | Step::Sleep { .. } => {
                self.clock_step(step)
            }
            Step::Uuid { bind } => {
                let id = self.uuid();
                self.bindings.insert(bind.clone(), json!(id));
                Ok(())
            }
            Step::Observe { bind } => self.observe_step(bind),
            Step::ExpectEffects {
                since,
                delta,
                tool_of,
            } => self.expect_effects(since, *delta, tool_of.as_deref()),
            Step::Concurrent { steps } => self.concurrent(steps),
            Step::IfAnswer {
                of,
                error_code,
                steps,
            } => self.if_answer(of, error_code, steps, needs),
            Step::EachTool {
                session,
                pick,
                bind,
                steps,
            } => self.each_tool(session, pick, bind, steps, needs),
            Step::Same { .. }
            | Step::Equal { .. }
            | Step::TokensUnpredictable { .. }
            | Step::RevisionConsistent { .. }
            | Step::V1ReadOnly { .. }
            | Step::Differ { .. }
            | Step::Assert { .. } => self.compare_step(step),
        }
    }

    /// The steps that let device time pass: moved where the harness can
    /// move the clock, waited in real time elsewhere.
    fn clock_step(&mut self, step: &Step) -> StepResult {
        match step {
            Step::Age {
                ms,
                window_of,
                since,
                margin_ms,
                fixed_clock_wait_ms,
            } => self.age(
                *ms,
                window_of.as_deref().zip(since.as_deref()),
                *margin_ms,
                *fixed_clock_wait_ms,
            ),
            Step::AdvanceClock {
                ms,
                profile,
                until,
                plus_ms,
            } => match until {
                Some(until) => self.advance_clock_until(until, *plus_ms),
                None => self.advance_clock_step(*ms, profile.as_deref(), *plus_ms),
            },
            Step::Sleep { ms } => {
                self.pass_real_time(self.target.a.as_ref(), *ms);
                Ok(())
            }
            _ => Err(Stop::Infra("vector error: not a clock step".into())),
        }
    }

    /// The steps that judge what earlier steps bound, sending nothing.
    fn compare_step(&mut self, step: &Step) -> StepResult {
        match step {
            Step::Same {
                a,
                b,
                pointers,
                different,
                unless_code,
                if_status,
            } => self.same(
                a,
                b,
                pointers,
                *different,
                unless_code,
                if_status.as_deref(),
            ),
            Step::Equal { a, b } => self.equal(a, b),
            Step::TokensUnpredictable { tokens } => self.tokens_step(tokens),
            Step::RevisionConsistent { a, b } => self.revision_consistent(a, b),
            Step::V1ReadOnly { v1, v2 } => self.v1_read_only(v1, v2),
            Step::Differ { a, b } => self.differ(a, b),
            Step::Assert { value, assertion } => self.assert_step(value, assertion),
            _ => Err(Stop::Infra("vector error: not a comparison step".into())),
        }
    }

    /// `observe`: the observer's snapshot, bound under `bind`.
    fn observe_step(&mut self, bind: &str) -> StepResult {
        let snapshot = self.snapshot()?;
        self.bindings.insert(bind.to_string(), snapshot);
        self.snapshots.insert(bind.to_string());
        Ok(())
    }

    /// `if_answer`: the nested steps, only when the answer bound to `of`
    /// carries one of `error_code`.
    fn if_answer(
        &mut self,
        of: &str,
        error_code: &[String],
        steps: &[Step],
        needs: &[String],
    ) -> StepResult {
        let doc = self.bound(of)?;
        let code = doc.get("error_code").and_then(Json::as_str);
        if code.is_some_and(|c| error_code.iter().any(|x| x == c)) {
            for s in steps {
                self.run_step(s, needs)?;
            }
        }
        Ok(())
    }

    fn device(&self, identity: &str) -> Result<&'a dyn Device, Stop> {
        self.target
            .identity(identity)
            .ok_or_else(|| Stop::Infra(format!("no device connection for identity {identity:?}")))
    }

    fn uuid(&mut self) -> String {
        seeded_uuid(&mut self.rng)
    }

    fn bound(&self, name: &str) -> Result<Json, Stop> {
        self.bindings
            .get(name)
            .cloned()
            .ok_or_else(|| Stop::Infra(format!("vector error: nothing bound to {name:?}")))
    }

    fn sent(&mut self, identity: &str, op: &str, request: Json) {
        (self.emit)(Event::StepSent {
            case_id: self.case_id.clone(),
            step: self.step,
            identity: identity.to_string(),
            op: op.to_string(),
            request,
        });
    }

    /// The dispatch record of a call that may have a side effect: an
    /// `execute_tool` (over v2 or v1) of a tool not known to be read-only.
    fn dispatched(&mut self, p: &Prepared) {
        if p.method != "execute_tool" || p.tool.as_ref().is_some_and(|t| t.effect == "read") {
            return;
        }
        let text = |key: &str| {
            p.extras
                .as_ref()
                .and_then(|b| b.opt_string(key).ok().flatten())
                .unwrap_or_default()
        };
        (self.emit)(Event::Dispatched {
            case_id: self.case_id.clone(),
            step: self.step,
            identity: p.identity.clone(),
            tool: p.stall_key(),
            request_id: text("request_id"),
            args_sha256: cetp_proto::canonical::sha256_hex(text("args").as_bytes()),
        });
    }

    fn answered(&mut self, answer: Json, started: Instant) {
        (self.emit)(Event::StepAnswered {
            case_id: self.case_id.clone(),
            step: self.step,
            answer,
            elapsed_us: started.elapsed().as_micros() as u64,
        });
    }
}

/// A call the harness makes on its own behalf (polling, observing) in a
/// session, with every optional field unset.
fn internal_call(identity: &str, method: &str, session: &str) -> Step {
    Step::Call {
        as_: identity.to_string(),
        method: method.to_string(),
        session: Some(session.to_string()),
        v1: false,
        tool: None,
        args: None,
        request_id: None,
        deadline_in_ms: None,
        resume_token: None,
        operation_id: None,
        only_if: None,
        extras: BTreeMap::new(),
        omit: Vec::new(),
        arg: None,
        bind: None,
        expect: None,
    }
}

/// The observer snapshots' stream of request ids: the same seed as `rng`,
/// another ChaCha stream, so that its draws never move `rng`'s.
fn observer_stream(rng: &ChaCha8Rng) -> ChaCha8Rng {
    let mut r = rng.clone();
    r.set_stream(rng.get_stream().wrapping_add(0x6f62_7365_7276_6572));
    r
}

/// A random-form UUID drawn from `rng`: request ids stay reproducible.
pub fn seeded_uuid(rng: &mut ChaCha8Rng) -> String {
    let mut bytes = [0u8; 16];
    rng.fill_bytes(&mut bytes);
    uuid::Builder::from_random_bytes(bytes)
        .into_uuid()
        .to_string()
}

fn device_stop(e: crate::device::DeviceError) -> Stop {
    match e.fault() {
        Fault::Infra => Stop::Infra(e.to_string()),
        Fault::Provider => Stop::Fail(format!("the Provider failed at the Binder level: {e}")),
    }
}

fn answer_json(a: &CallAnswer) -> Json {
    match a {
        CallAnswer::Result(None) => json!({"result": null}),
        CallAnswer::Result(Some(b)) => json!({"result": bundle_to_json(b)}),
        CallAnswer::Threw { class, message } => {
            json!({"threw": {"class": class, "message": message}})
        }
    }
}

fn short(v: Option<&Json>) -> String {
    let s = v.map(Json::to_string).unwrap_or_else(|| "nothing".into());
    if s.chars().count() > 120 {
        format!("{}…", s.chars().take(120).collect::<String>())
    } else {
        s
    }
}

/// The answer document of a call as bound for later steps.
fn document(answer: &CallAnswer, request: Json) -> Json {
    answer_document(answer, request)
}

fn status(doc: &Json) -> Option<&str> {
    doc.get("status").and_then(Json::as_str)
}

fn what(doc: &Json) -> String {
    describe(doc)
}

fn describe_short(doc: &Json) -> String {
    describe(doc)
}

/// Scopes known for BTreeSet use in checks.
pub type Scopes = BTreeSet<String>;
