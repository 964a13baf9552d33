//! `cetp fuzz`: structure-aware, stateful fuzzing of a live Provider.
//!
//! Each fuzz case is a generated sequence of moves ([`moves`]) written in the
//! vector format's step language. The oracle ([`oracle`]) runs it on the
//! reference Provider and every legal variant, in-process, and compiles the
//! expectations they all allow; the regular interpreter then runs the
//! compiled case on the target, with the regular checks on every answer. A
//! FAIL there is a *finding*: it is shrunk to the fewest moves and steps
//! that still fail the same way, and written as a regular case file that
//! `cetp replay` runs and `vectors/regressions/` keeps.
//!
//! The fuzzer never executes a tool with a side effect that the profile
//! does not allow: the generator only names tools [`world::World`] marks
//! executable, and the interpreter refuses any other.

/// The [`cetp_vectors::device::Device`] methods a wrapper device passes
/// to its `inner` device unchanged (every one but `call`), for the devices
/// that only change calls: the blind mutator and the descriptor oracle's
/// recorder and mirror.
macro_rules! forward_device {
    () => {
        fn hello(&self) -> Result<HelloInfo, DeviceError> {
            self.inner.hello()
        }
        fn now_ms(&self) -> i64 {
            self.inner.now_ms()
        }
        fn sleep_ms(&self, ms: u64) {
            self.inner.sleep_ms(ms)
        }
        fn discover(&self) -> Result<Vec<ServiceManifest>, DeviceError> {
            self.inner.discover()
        }
        fn read_fd(&self, handle: &str, max_bytes: u64) -> Result<FdRead, DeviceError> {
            self.inner.read_fd(handle, max_bytes)
        }
        fn close_fd(&self, handle: &str) -> Result<(), DeviceError> {
            self.inner.close_fd(handle)
        }
        fn resolve(
            &self,
            handle: &str,
            decision: Decision,
            ui: Option<&serde_json::Value>,
            timeout_ms: u64,
        ) -> Result<ResolveOutcome, DeviceError> {
            self.inner.resolve(handle, decision, ui, timeout_ms)
        }
        fn restart_provider(&self, package: &str) -> Result<(), DeviceError> {
            self.inner.restart_provider(package)
        }
        fn advance_clock(&self, ms: u64) -> Result<i64, DeviceError> {
            self.inner.advance_clock(ms)
        }
        fn resync_clock(&self) -> Result<(), DeviceError> {
            self.inner.resync_clock()
        }
        fn clock_moves_wall_only(&self) -> bool {
            self.inner.clock_moves_wall_only()
        }
        fn work_runs_in_real_time(&self) -> bool {
            self.inner.work_runs_in_real_time()
        }
        fn restore_clock(&self) -> Result<(), DeviceError> {
            self.inner.restore_clock()
        }
    };
}

pub mod blind;
pub mod campaign;
pub mod descriptor;
pub mod exec;
mod fill;
pub mod moves;
pub mod oracle;
pub mod settle;
pub mod world;

use cetp_vectors::device::Target;
use cetp_vectors::interp::{Env, Stop};
use cetp_vectors::profile::Profile;
use cetp_vectors::vector::Case;
use exec::{run_case, CaseRun};
use moves::{Move, Sequence};
use oracle::Oracle;
use serde_json::{json, Value as Json};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Which oracle judges the target.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OracleChoice {
    /// The differential oracle for the reference's own apps, the
    /// descriptor oracle for any other Provider.
    #[default]
    Auto,
    /// The shadow built from the protocol and the target's descriptors
    /// ([`descriptor`]), whatever the target.
    Descriptor,
    /// The reference's own app beside the target ([`oracle`]); only for
    /// the fixtures it implements.
    Differential,
}

/// How sequences are made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mutator {
    /// Stateful, structure-aware generation ([`moves`]).
    Structured,
    /// The blind byte-level baseline ([`blind`]).
    Blind,
}

/// How one fuzz run goes: `cetp fuzz`'s options.
#[derive(Clone, Debug)]
pub struct FuzzConfig {
    /// Seed of the run: sequence `i` is generated from [`case_seed`]`(seed, i)`.
    pub seed: u64,
    /// Wall-clock time the run may take; no limit when `None`.
    pub budget: Option<Duration>,
    /// Sequences to generate; no limit when `None`.
    pub cases: Option<u64>,
    /// Moves per sequence, at most.
    pub max_moves: usize,
    /// Stop after this many distinct findings.
    pub max_findings: usize,
    /// Target runs a shrink may spend on one finding.
    pub shrink_runs: usize,
    /// How sequences are made.
    pub mutator: Mutator,
    /// Requirement id → catalog level (`MUST`, `MUST_NOT`, `SHOULD`, `MAY`):
    /// a finding citing only SHOULD requirements is a SHOULD case.
    pub levels: BTreeMap<String, String>,
    /// Set (on Ctrl-C) to end the run after the current sequence, with its
    /// report.
    pub interrupt: Option<Arc<AtomicBool>>,
    /// The contract lock of the release before (`cetp lock`): the target is
    /// held to it once, as `cetp run --lock` does (LOCK-001, §3.3): a
    /// contract that changed under the same revision is a finding no single
    /// release shows.
    pub lock: Option<cetp_contract::Lock>,
    /// Which oracle judges the target.
    pub oracle: OracleChoice,
    /// Runs of the same moves (fresh request ids) a descriptor-oracle
    /// finding must fail again in before it is reported; one that does not
    /// is reported as flaky.
    pub confirm_runs: usize,
    /// The longest real-time wait on a device whose clock cannot move
    /// (`--max-wait`, as `cetp run` takes it): for a lifetime a sequence
    /// lets run out, and for the operations a sequence left running to end
    /// before the next one starts.
    pub max_wait: Duration,
    /// Mixed into the seed of every target and oracle run (never into the
    /// moves): `cetp fuzz` gives the run's start time, as `cetp run` does,
    /// so that runs never reuse a request id on a device that remembers it.
    pub nonce: u64,
    /// On a device whose clock cannot move, judge effect-free sequences
    /// while a sequence waits in real time ([`fill`]); `false` sleeps the
    /// waits out (`cetp fuzz --no-fill`, the pace to compare with).
    pub fill_waits: bool,
}

impl Default for FuzzConfig {
    fn default() -> Self {
        FuzzConfig {
            seed: 0,
            budget: None,
            cases: Some(100),
            max_moves: 8,
            max_findings: 10,
            shrink_runs: 48,
            mutator: Mutator::Structured,
            levels: BTreeMap::new(),
            interrupt: None,
            lock: None,
            oracle: OracleChoice::Auto,
            confirm_runs: 1,
            max_wait: Duration::from_secs(30),
            nonce: 0,
            fill_waits: true,
        }
    }
}

/// Running totals, for the progress line.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Stats {
    /// Sequences generated.
    pub cases: u64,
    /// Compiled cases run on the target.
    pub judged: u64,
    /// Sequences the oracle left nothing to judge in, or the target left
    /// unjudged (a setup it lacks).
    pub unjudged: u64,
    /// Distinct findings so far.
    pub findings: usize,
    /// Envelopes sent to the target (answers judged).
    pub envelopes: u64,
    /// `execute_tool` calls of tools with side effects sent to the target.
    pub dispatched: u64,
    /// Sequences whose effect windows were not judged: an operation an
    /// earlier one left running was still open when it started (a device
    /// whose clock cannot move, where `--max-wait` did not see it end).
    pub effects_unjudged: u64,
    /// Milliseconds since the run started.
    pub elapsed_ms: u64,
    /// Of `cases`, those run while another sequence waited in real time
    /// ([`fill`]).
    pub during_waits: u64,
    /// Of `during_waits`, those judged to their end.
    pub during_waits_judged: u64,
}

/// A failure of the target, shrunk to the fewest moves and steps that
/// still fail the same way.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Finding {
    /// `FZ<hex>-NNN`, from a digest of the minimal case's steps.
    pub id: String,
    /// What failed: a check and its rule, or a step's kind and requirements.
    pub signature: String,
    /// The failure's message, from the minimal case's run.
    pub message: String,
    /// Requirement ids the failure cites.
    pub cited: Vec<String>,
    /// The regular vector file holding the minimal case.
    pub file: Json,
    /// Sequence index and seed it was found with.
    pub case_index: u64,
    /// Seed of the target run the minimal case last failed in (its request ids).
    pub case_seed: u64,
    /// Milliseconds from the run's start until the finding was shrunk.
    pub found_after_ms: u64,
    /// Moves of the failing sequence before shrinking.
    pub moves_before: usize,
    /// Moves left after shrinking.
    pub moves_after: usize,
    /// Steps of the minimal case.
    pub steps_after: usize,
}

/// A failure the descriptor oracle saw once that did not fail again when
/// the same moves were run anew: not charged to the target.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Flaky {
    /// What failed, as in [`Finding::signature`].
    pub signature: String,
    /// The failure's message from the run that failed.
    pub message: String,
    /// Index of the sequence that failed once.
    pub case_index: u64,
    /// That sequence's seed ([`case_seed`]).
    pub case_seed: u64,
}

/// What a fuzz run found and did: `cetp fuzz` writes it as `fuzz.json`.
#[derive(Clone, Debug, serde::Serialize)]
pub struct FuzzReport {
    /// The run's seed: the same seed regenerates the same sequences.
    pub seed: u64,
    /// `structured` or `blind` ([`Mutator`]).
    pub mutator: String,
    /// `differential` (the reference's own app and its legal variants) or
    /// `descriptor` (the shadow built from the target's descriptors).
    pub oracle_kind: String,
    /// Descriptor-oracle failures that did not reproduce.
    pub flaky: Vec<Flaky>,
    /// The oracle's members (`reference` and each legal variant).
    pub oracle: Vec<String>,
    /// Totals at the end of the run.
    pub stats: Stats,
    /// Distinct findings, shrunk, in the order found.
    pub findings: Vec<Finding>,
    /// Checks that fired on an oracle member: defects of the harness's own
    /// judgement on some input, never charged to the target.
    pub oracle_notes: Vec<String>,
    /// Milliseconds from the run's start to the first failing sequence
    /// (before its shrink).
    pub first_finding_ms: Option<u64>,
    /// Observed effects on the target over the whole run, when the
    /// profile's observer counts them.
    pub effects_observed: Option<i64>,
    /// Why effect judgements stopped part-way, if they did: the target
    /// could not be settled between runs.
    pub effects_unjudged: Option<String>,
    /// Why the run ended before its budget: the target stopped answering
    /// ([`LOST_AFTER`] runs in a row stopped by the infrastructure, and a
    /// `hello` failed after them). Nothing of it is charged to the target.
    pub lost: Option<String>,
}

/// Runs in a row stopped by the infrastructure after which the fuzzer asks
/// whether the device is still there.
pub const LOST_AFTER: u32 = 3;

/// Why a fuzz run could not start.
#[derive(Debug, thiserror::Error)]
pub enum FuzzError {
    /// The profile and the target leave nothing the fuzzer may call.
    #[error("{0}")]
    Refused(String),
    /// The target could not be learned (its tools listed, its descriptors
    /// read): an error of the run, not a finding.
    #[error("{0}")]
    Target(String),
    /// The target failed the descriptor oracle's learning case (a session,
    /// its provider info, its tool lists): a finding before any fuzzing.
    #[error("{}", .0.message)]
    Unlearnable(Box<Finding>),
}

/// The seed of sequence `i` of a run seeded `seed` (SplitMix64 of both):
/// any sequence can be regenerated alone.
pub fn case_seed(seed: u64, i: u64) -> u64 {
    let mut z = seed ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn header(index: u64) -> Json {
    json!({"id": format!("FUZZ-{index}"), "title": "generated sequence", "role": "provider",
           "level": "MUST", "requirements": [], "steps": []})
}

/// One fuzz run on one target: generator, oracle and shrinker; built by
/// [`Fuzzer::new`], driven by [`Fuzzer::run`].
pub struct Fuzzer<'a> {
    target: Target,
    profile: &'a Profile,
    env: Env,
    rules: &'a BTreeMap<String, Vec<String>>,
    cfg: FuzzConfig,
    oracle: OracleMode,
    world: world::World,
    blind: Option<blind::Mutations>,
    /// Fresh seeds for target re-runs (shrinking): a re-run must not reuse
    /// request ids the target has already recorded.
    reruns: u64,
    /// Developer's aids, read once: `CETP_FUZZ_DUMP=DIR` writes every
    /// sequence that made a check fire on an oracle member,
    /// `CETP_FUZZ_TRACE=DIR` every compiled case with the target's outcome.
    dump: Option<std::path::PathBuf>,
    trace: Option<std::path::PathBuf>,
    /// A target run was answered `accepted`: a background operation may
    /// still be running, and would finish, with its effect, during the
    /// next sequence, whose oracle members start afresh. The target is
    /// settled first ([`Fuzzer::quiesce`]).
    unsettled: bool,
    /// Why the target could not be settled: effect judgements are dropped
    /// from then on rather than risk charging it with an earlier
    /// sequence's effect.
    effects_unsafe: Option<String>,
    /// The device's clock cannot move: operations left running are
    /// followed to their end in real time ([`settle`]).
    clock_fixed: bool,
    /// Operations the target's runs left running, not yet seen ended.
    open_ops: Vec<settle::Open>,
    /// The sequence about to run starts with one of `open_ops` still open:
    /// its effect windows are not judged.
    effects_unjudged_now: bool,
    /// The finding being confirmed failed again only with its schema-drawn
    /// args drawn anew ([`Fuzzer::reproduces`]): its shrink draws them
    /// anew for every candidate too.
    redraw_reruns: bool,
    /// The campaign this fuzzer is one worker of ([`campaign`]).
    campaign: Option<campaign::Member>,
    /// Target runs in a row stopped by the infrastructure.
    infra_streak: u32,
    lost: Option<String>,
    /// Sequences judged during real-time waits ([`fill`]), on a device
    /// whose clock cannot move, under the descriptor oracle.
    filler: Option<fill::Filler>,
    /// Sequences that failed during a wait, run again by the main loop
    /// (confirmed and shrunk as any other), with their seeds.
    suspects: std::collections::VecDeque<(Vec<Move>, u64)>,
}

enum OracleMode {
    Differential(Oracle),
    Descriptor {
        shadow: descriptor::Shadow,
        /// The target's `execute_tool` answers of the run being judged.
        transcript: Arc<descriptor::Transcript>,
    },
}

/// What [`Fuzzer::new`] was given, borrowed by its phases.
struct Given<'g> {
    target: &'g Target,
    profile: &'g Profile,
    env: &'g Env,
    cfg: &'g FuzzConfig,
}

/// `Fuzzer::new`'s first phase: the oracle the configuration asks for, the
/// differential one when the reference implements the target's app, else
/// the descriptor oracle learned from the target (refused when the
/// differential one was asked for and there is none).
fn oracle_for(g: &Given) -> Result<OracleMode, FuzzError> {
    let differential = match g.cfg.oracle {
        OracleChoice::Descriptor => None,
        _ => Oracle::for_package(&g.env.package, &g.env.manifest_kind),
    };
    if differential.is_none() && g.cfg.oracle == OracleChoice::Differential {
        return Err(FuzzError::Refused(format!(
            "no differential oracle for {}: the reference implements only com.clawseed.reference and com.clawseed.notes (--oracle descriptor judges any Provider)",
            g.env.package
        )));
    }
    Ok(match differential {
        Some(o) => OracleMode::Differential(o),
        None => {
            let shape = match descriptor::Shape::learn(g.target, g.profile, g.env, g.cfg.seed) {
                Ok(s) => s,
                Err(descriptor::LearnError::Other(e)) => return Err(FuzzError::Target(e)),
                Err(descriptor::LearnError::Fail {
                    case,
                    reason,
                    cited,
                }) => return Err(unlearnable(case, reason, cited, g.cfg)),
            };
            OracleMode::Descriptor {
                shadow: descriptor::Shadow::new(shape),
                transcript: Arc::new(descriptor::Transcript::default()),
            }
        }
    })
}

/// `Fuzzer::new`'s second phase: what the moves are generated from,
/// learned from the target (or, when it cannot list its tools, from the
/// differential oracle's reference), with whether its clock moves; refused
/// when nothing may be executed.
fn learn_world(g: &Given, oracle: &OracleMode) -> Result<world::World, FuzzError> {
    // A target that cannot even list its tools still gets fuzzed: the
    // oracle's reference hosts the same app, so its tools are the ones to
    // generate for (and the failure shows again as a finding).
    let world = match world::learn(g.target, g.profile, g.env, g.cfg.seed) {
        // The descriptor oracle also watches an observer that counts
        // objects: a window in which the shadow commits nothing must
        // leave the count unchanged (a background update of an earlier
        // sequence moves no count; anything else that moves it without
        // reproducing is reported as flaky, not as a finding).
        Ok(mut w) => {
            if matches!(oracle, OracleMode::Descriptor { .. }) {
                w.observer |= g
                    .profile
                    .observer
                    .as_ref()
                    .is_some_and(|o| o.counts == cetp_vectors::profile::Counts::Objects);
            }
            w
        }
        Err(e) => {
            let OracleMode::Differential(oracle) = oracle else {
                return Err(FuzzError::Target(e));
            };
            let (t, _) = oracle
                .reference_target(0)
                .ok_or_else(|| FuzzError::Target(e.clone()))?;
            let (_, renv) = cetp_conformance::runner::identify(&t, g.profile)
                .map_err(|_| FuzzError::Target(e.clone()))?;
            let mut w =
                world::learn(&t, g.profile, &renv, g.cfg.seed).map_err(|_| FuzzError::Target(e))?;
            w.has_b = g.target.b.is_some();
            w
        }
    };
    let mut world = world;
    // Whether the device's clock moves decides which waits the moves
    // may ask for (a wait on a clock that cannot move is real time).
    // Moving it by nothing asks the device without changing its time.
    world.fixed_clock = matches!(
        g.target.a.advance_clock(0),
        Err(e) if matches!(
            e.kind,
            cetp_vectors::device::ErrorKind::Unsupported
                | cetp_vectors::device::ErrorKind::UnknownOp
        )
    );
    if world.executable().next().is_none() {
        return Err(FuzzError::Refused(format!(
            "nothing to fuzz: {} lists no read tool and the profile's [execute] allow lets the harness execute none of its tools",
            g.env.package
        )));
    }
    Ok(world)
}

/// `Fuzzer::new`'s last phase: the target as the fuzzer calls it, recorded
/// for the descriptor oracle, then wrapped by the blind mutator (returned
/// too) when that is the mutator.
fn wrap_target(
    target: Target,
    oracle: &OracleMode,
    profile: &Profile,
    mutator: Mutator,
) -> (Target, Option<blind::Mutations>) {
    // The descriptor oracle repeats the target's answers: they are
    // recorded below the blind mutator, as the Provider saw the calls.
    let target = match oracle {
        OracleMode::Descriptor { transcript, .. } => {
            descriptor::recording(target, transcript.clone())
        }
        OracleMode::Differential(_) => target,
    };
    match mutator {
        Mutator::Structured => (target, None),
        Mutator::Blind => {
            let m = blind::Mutations::new(profile.observer.as_ref().map(|o| o.tool.clone()));
            (m.wrap(target), Some(m))
        }
    }
}

/// How far `quiesce` moves the device clock: past the end of the slowest
/// background job of the reference's apps and variants (20 minutes).
const QUIESCE_MS: u64 = 3_600_000;

impl<'a> Fuzzer<'a> {
    /// Learns the target and builds the oracle. Refuses when nothing may be
    /// called, or when no oracle matches the target's app.
    pub fn new(
        target: Target,
        profile: &'a Profile,
        env: Env,
        rules: &'a BTreeMap<String, Vec<String>>,
        cfg: FuzzConfig,
    ) -> Result<Self, FuzzError> {
        let given = Given {
            target: &target,
            profile,
            env: &env,
            cfg: &cfg,
        };
        let oracle = oracle_for(&given)?;
        let world = learn_world(&given, &oracle)?;
        let (target, blind) = wrap_target(target, &oracle, profile, cfg.mutator);
        // Waits in real time: on a clock that cannot move, and for the
        // operations of a Provider whose work runs in real time.
        let filler = (matches!(oracle, OracleMode::Descriptor { .. })
            && (world.fixed_clock || target.a.work_runs_in_real_time())
            && cfg.fill_waits
            && cfg.mutator == Mutator::Structured)
            .then(|| fill::Filler::new(&world, cfg.seed ^ cfg.nonce, cfg.max_moves));
        Ok(Fuzzer {
            filler,
            suspects: Default::default(),
            target,
            profile,
            env,
            rules,
            cfg,
            oracle,
            world,
            blind,
            reruns: 0,
            dump: std::env::var_os("CETP_FUZZ_DUMP").map(Into::into),
            trace: std::env::var_os("CETP_FUZZ_TRACE").map(Into::into),
            unsettled: false,
            effects_unsafe: None,
            clock_fixed: false,
            open_ops: Vec::new(),
            effects_unjudged_now: false,
            redraw_reruns: false,
            campaign: None,
            infra_streak: 0,
            lost: None,
        })
    }

    /// Makes this fuzzer one worker of a campaign: findings claimed in the
    /// campaign's hub, sequences derived from and written to its corpus.
    pub fn join_campaign(&mut self, member: campaign::Member) {
        self.campaign = Some(member);
    }

    /// The campaign this fuzzer is a worker of, if any (its corpus figures
    /// are read from it after the run).
    pub fn campaign_member(&self) -> Option<&campaign::Member> {
        self.campaign.as_ref()
    }

    /// The next sequence: derived from a corpus entry now and then in a
    /// campaign with a corpus, generated from `seed` otherwise.
    fn next_sequence(&mut self, seed: u64) -> Sequence {
        if self.cfg.mutator == Mutator::Structured {
            if let Some(m) = self.campaign.as_mut() {
                if let Some(moves) = m.derived(&self.world, seed, self.cfg.max_moves) {
                    return Sequence { moves };
                }
            }
        }
        self.sequence(seed)
    }

    /// Whether this fuzzer is the first to see `sig` (always, outside a
    /// campaign): only the first shrinks and reports it.
    fn claim(&self, sig: &str, index: u64, seed: u64) -> bool {
        let Some(m) = &self.campaign else {
            return true;
        };
        let s = campaign::Sighting {
            worker: m.worker,
            target: m.label.clone(),
            case_index: index,
            case_seed: seed,
        };
        m.hub.claim(&m.build, sig, s)
    }

    /// Writes the sequence to the campaign's corpus when its run showed
    /// something new.
    fn feed_corpus(&mut self, moves: &[Move], case: &Json, run: &CaseRun, seed: u64) {
        // The blind mutator edits one fixed sequence: nothing to keep.
        if self.cfg.mutator != Mutator::Structured {
            return;
        }
        let Some(m) = self.campaign.as_mut() else {
            return;
        };
        let label = format!("worker {} {}", m.worker, m.label);
        if let Some(c) = m.corpus.as_mut() {
            c.offer(&campaign::features(case, run), moves, &label, seed);
        }
    }

    /// Notes the device gone ([`FuzzReport::lost`]) after [`LOST_AFTER`]
    /// target runs in a row stopped by the infrastructure and a `hello`
    /// that fails: the run then stops ([`Fuzzer::should_stop`]).
    fn watch_device(&mut self, run: &CaseRun) {
        let Some(Stop::Infra(why)) = &run.stop else {
            self.infra_streak = 0;
            return;
        };
        self.infra_streak += 1;
        if self.infra_streak < LOST_AFTER || self.lost.is_some() {
            return;
        }
        match self.target.a.hello() {
            Ok(_) => self.infra_streak = 0,
            Err(e) => {
                let why: String = why.chars().take(300).collect();
                self.lost = Some(format!(
                    "{LOST_AFTER} runs in a row stopped by the infrastructure (last: {why}), and hello then failed: {e}"
                ));
            }
        }
    }

    /// What the fuzzer learned of the target: its tools, limits and the
    /// tools it may execute.
    pub fn world(&self) -> &world::World {
        &self.world
    }

    /// Names of the oracle's members: `reference` and each legal variant.
    pub fn oracle_members(&self) -> Vec<String> {
        match &self.oracle {
            OracleMode::Differential(o) => o.members.iter().map(|m| m.name.clone()).collect(),
            OracleMode::Descriptor { shadow, .. } => {
                shadow.members.iter().map(|m| m.name.clone()).collect()
            }
        }
    }

    /// `differential` or `descriptor`.
    pub fn oracle_kind(&self) -> &'static str {
        match &self.oracle {
            OracleMode::Differential(_) => "differential",
            OracleMode::Descriptor { .. } => "descriptor",
        }
    }

    fn sequence(&self, seed: u64) -> Sequence {
        match self.cfg.mutator {
            Mutator::Structured => {
                moves::Generator::new(&self.world, seed).sequence(self.cfg.max_moves)
            }
            Mutator::Blind => blind::sequence(&self.world),
        }
    }

    /// Lets every background operation an earlier run left behind end
    /// before the next run: the clock moves past any job's end, and a call
    /// makes the Provider advance its operations (as a real one would on
    /// its own). A target whose clock cannot move stays unsettled.
    fn quiesce(&mut self, seed: u64) {
        self.effects_unjudged_now = false;
        if !self.unsettled || self.effects_unsafe.is_some() {
            return;
        }
        if !self.clock_fixed {
            let case = json!({
                "id": "FUZZ-QUIESCE", "title": "settle the target", "role": "provider",
                "level": "MUST", "requirements": [],
                "steps": [
                    {"do": "advance_clock", "ms": QUIESCE_MS, "requirements": []},
                    {"do": "negotiate", "bind": "q"}
                ]
            });
            let Ok(case) = serde_json::from_value::<Case>(case) else {
                return;
            };
            let run = run_case(
                &self.target,
                self.profile,
                &self.env,
                &Default::default(),
                &case,
                seed,
            );
            match &run.stop {
                // The moved clock ended every job of a Provider whose work
                // follows it (the reference's apps and variants).
                None if !self.target.a.work_runs_in_real_time() => {
                    self.unsettled = false;
                    self.open_ops.clear();
                    return;
                }
                // The JVM device moved only what the Provider reads; its
                // operations' threads still run in real time: followed below.
                None => {}
                // The clock cannot move (the interpreter would wait the
                // hour in real time): follow the operations instead.
                Some(Stop::Setup { needs, .. }) if needs.starts_with("--max-wait") => {
                    self.clock_fixed = true;
                }
                Some(stop) => {
                    self.effects_unsafe = Some(format!(
                        "a run left a background operation running and the target could not be settled ({}); effects are not judged after it",
                        crate::exec::describe_stop(stop)
                    ));
                    return;
                }
            }
        }
        settle::settle(
            &self.target,
            self.profile,
            &self.env,
            &mut self.open_ops,
            self.cfg.max_wait,
            seed ^ 0x5e77_1e00,
        );
        self.unsettled = !self.open_ops.is_empty();
        self.effects_unjudged_now = self.unsettled;
    }

    /// The compiled case as it runs on the target: without its effect
    /// judgements when an earlier operation may still end inside them.
    fn effects_judgeable(&self, case: &mut Json) {
        if self.effects_unsafe.is_some() || self.effects_unjudged_now {
            if let Some(steps) = case.get_mut("steps").and_then(Json::as_array_mut) {
                steps.retain(|s| s.get("do").and_then(Json::as_str) != Some("expect_effects"));
            }
        }
    }

    /// Compiles `moves` with the oracle and runs the result on the target,
    /// everything seeded by `seed`.
    fn attempt(&mut self, moves: &[Move], index: u64, seed: u64) -> Attempt {
        // The run's nonce moves every request id the interpreter draws (the
        // moves stay those of `seed`): a second run with the same seed on a
        // device that remembers the first's request ids would otherwise
        // meet its own replays.
        let seed = seed ^ self.cfg.nonce;
        let seq = Sequence {
            moves: moves.to_vec(),
        };
        let steps = seq.steps();
        if matches!(self.oracle, OracleMode::Descriptor { .. }) {
            return self.attempt_descriptor(&steps, index, seed);
        }
        self.quiesce(seed);
        let start_ms = self.target.a.now_ms();
        // Each oracle member gets a mutator of its own, seeded like the
        // target's: they run in parallel and must see the same edits.
        let skip = self
            .blind
            .as_ref()
            .map(|_| self.profile.observer.as_ref().map(|o| o.tool.clone()));
        let skip2 = skip.clone();
        let wrap = move |t: Target| -> Target { wrap_blind(&skip, seed, t) };
        // First against the reference alone (the strictest case); only a
        // target that fails it is judged again against the whole oracle,
        // with fresh request ids, and only that verdict counts.
        let first = self.compile_and_run(true, &steps, index, seed, start_ms, &wrap);
        match &first {
            Attempt::Ran { run, .. } if run.failed() => {
                let again = self.next_seed(seed);
                self.quiesce(again);
                let start_ms = self.target.a.now_ms();
                let wrap = move |t: Target| -> Target { wrap_blind(&skip2, again, t) };
                self.compile_and_run(false, &steps, index, again, start_ms, &wrap)
            }
            _ => first,
        }
    }

    /// The descriptor oracle: the sequence runs on the target first, every
    /// answer recorded; the shadow then runs it repeating the target's
    /// business answers and judges the target's run (the reference engine
    /// first; only a failure there is judged again by every legal variant,
    /// and only that verdict counts). No second target run is needed.
    /// Runs one case on the target (the blind mutator reseeded for it) and
    /// remembers when the target left an operation running, so the next
    /// case waits for it to settle.
    fn run_on_target(&mut self, case: &Case, seed: u64) -> CaseRun {
        if let Some(m) = &self.blind {
            m.reseed(seed);
        }
        let max_wait_ms = u64::try_from(self.cfg.max_wait.as_millis()).unwrap_or(u64::MAX);
        // On a fixed clock under the descriptor oracle, quiet sequences are
        // judged while this one waits ([`fill`]).
        let ctx;
        let mut hook;
        let idle: Option<&mut dyn FnMut(u64)> = match (&mut self.filler, &self.oracle) {
            (Some(filler), OracleMode::Descriptor { shadow, transcript }) => {
                ctx = fill::Ctx {
                    target: &self.target,
                    profile: self.profile,
                    env: &self.env,
                    rules: self.rules,
                    shadow,
                    transcript,
                    max_wait_ms,
                };
                hook = |ms: u64| filler.fill(ms, &ctx);
                Some(&mut hook)
            }
            _ => None,
        };
        let run = exec::run_case_idling(
            &self.target,
            self.profile,
            &self.env,
            self.rules,
            case,
            seed,
            max_wait_ms,
            idle,
        );
        self.watch_device(&run);
        if run
            .bindings
            .values()
            .any(|doc| doc.get("status").and_then(Json::as_str) == Some("accepted"))
        {
            self.unsettled = true;
            let steps: Vec<Json> = case
                .steps
                .iter()
                .filter_map(|s| serde_json::to_value(s).ok())
                .collect();
            for o in settle::left_open(&steps, &run.bindings) {
                if !self
                    .open_ops
                    .iter()
                    .any(|x| x.operation_id == o.operation_id)
                {
                    self.open_ops.push(o);
                }
            }
        }
        run
    }

    fn attempt_descriptor(&mut self, steps: &[moves::GenStep], index: u64, seed: u64) -> Attempt {
        let OracleMode::Descriptor { transcript, .. } = &self.oracle else {
            return Attempt::Nothing;
        };
        let transcript = transcript.clone();
        self.quiesce(seed);
        transcript.clear();
        let start_ms = self.target.a.now_ms();
        let Some(case) = oracle::to_case(&header(index), &oracle::oracle_steps(steps)) else {
            return Attempt::Nothing;
        };
        let trun = self.run_on_target(&case, seed);
        let answers = transcript_snapshot(&transcript);
        let skip = self
            .blind
            .as_ref()
            .map(|_| self.profile.observer.as_ref().map(|o| o.tool.clone()));
        let wrap = move |t: Target| -> Target { wrap_blind(&skip, seed, t) };
        let OracleMode::Descriptor { shadow, .. } = &self.oracle else {
            return Attempt::Nothing;
        };
        let judged = shadow.judge_reference_first(&descriptor::Judging {
            steps,
            trun: &trun,
            transcript: &answers,
            header: &header(index),
            profile: self.profile,
            rules: self.rules,
            seed,
            start_ms,
            wrap: &wrap,
        });
        match judged {
            descriptor::Judged::Notes(n) => {
                if let Some(dir) = &self.dump {
                    let steps: Vec<Json> = steps.iter().map(|s| s.step.clone()).collect();
                    let _ = std::fs::write(
                        dir.join(format!("oracle-note-{index}-{seed}.json")),
                        serde_json::to_string_pretty(&json!({"notes": n, "steps": steps}))
                            .unwrap_or_default(),
                    );
                }
                Attempt::OracleNotes(n)
            }
            descriptor::Judged::Nothing => Attempt::Nothing,
            descriptor::Judged::Ran { mut case, run } => {
                self.effects_judgeable(&mut case);
                if let Some(dir) = &self.trace {
                    let _ = std::fs::write(
                        dir.join(format!("case-{index}-{seed}.json")),
                        serde_json::to_string_pretty(&json!({
                            "case": case,
                            "stop": run.stop.as_ref().map(crate::exec::describe_stop),
                            "failed": run.failed(),
                        }))
                        .unwrap_or_default(),
                    );
                }
                Attempt::Ran { case, run }
            }
        }
    }

    fn compile_and_run(
        &mut self,
        reference_only: bool,
        steps: &[moves::GenStep],
        index: u64,
        seed: u64,
        start_ms: i64,
        wrap: &(dyn Fn(Target) -> Target + Sync),
    ) -> Attempt {
        let OracleMode::Differential(oracle) = &self.oracle else {
            return Attempt::Nothing;
        };
        let compiled = oracle.compile(
            reference_only,
            steps,
            &header(index),
            self.profile,
            self.rules,
            seed,
            start_ms,
            wrap,
        );
        if !compiled.oracle_findings.is_empty() {
            // For looking into the harness's own misjudgement: the sequence
            // that made a check fire on a legal Provider.
            if let Some(dir) = &self.dump {
                let steps: Vec<Json> = steps.iter().map(|s| s.step.clone()).collect();
                let _ = std::fs::write(
                    dir.join(format!("oracle-note-{index}-{seed}.json")),
                    serde_json::to_string_pretty(
                        &json!({"notes": compiled.oracle_findings, "steps": steps}),
                    )
                    .unwrap_or_default(),
                );
            }
            return Attempt::OracleNotes(compiled.oracle_findings);
        }
        let Some(mut case_json) = compiled.case else {
            return Attempt::Nothing;
        };
        self.effects_judgeable(&mut case_json);
        let case: Case = match serde_json::from_value(case_json.clone()) {
            Ok(c) => c,
            Err(_) => return Attempt::Nothing,
        };
        let mut run = self.run_on_target(&case, seed);
        // A target that stopped where a legal variant's own path left the
        // step empty took that path: not judged there (the reference's
        // case, run first, still charges it if nothing legal goes there).
        if let Some(stop) = &run.stop {
            let at = case_json
                .get("steps")
                .and_then(|s| s.get(run.step.saturating_sub(1)));
            if oracle::is_template_gap(stop, true) && at.is_some_and(|s| compiled.gaps.contains(s))
            {
                run.stop = Some(Stop::NotApplicable(format!(
                    "a legal variant's answer takes this path too: {}",
                    crate::exec::describe_stop(stop)
                )));
            }
        }
        // For looking into what the generator reaches: every compiled case
        // with the target's outcome (a developer's aid, off by default).
        if let Some(dir) = &self.trace {
            let _ = std::fs::write(
                dir.join(format!("case-{index}-{seed}.json")),
                serde_json::to_string_pretty(&json!({
                    "case": case_json,
                    "stop": run.stop.as_ref().map(crate::exec::describe_stop),
                    "failed": run.failed(),
                }))
                .unwrap_or_default(),
            );
        }
        Attempt::Ran {
            case: case_json,
            run,
        }
    }

    /// Judges one given sequence (its moves, seeded by `seed`) as a run
    /// judges each generated one, without shrinking or confirming: what a
    /// regression test holds a mutant or a legal variant to, move by move.
    pub fn judge_moves(&mut self, moves: &[Move], seed: u64) -> Judgement {
        match self.attempt(moves, 0, seed) {
            Attempt::OracleNotes(n) => Judgement::OracleNotes(n),
            Attempt::Nothing => Judgement::Unjudged,
            Attempt::Ran { case, run } => match signature(&case, &run) {
                Some((signature, message)) => Judgement::Finding { signature, message },
                None => Judgement::Pass,
            },
        }
    }

    /// Judges given steps (in the generator's step language) as a run
    /// judges a generated sequence's, through the descriptor oracle: what
    /// the never-stricter-than-the-suite test holds the oracle to with the
    /// suite's own cases. `Unjudged` under the differential oracle.
    pub fn judge_steps(&mut self, steps: &[moves::GenStep], seed: u64) -> Judgement {
        match self.attempt_descriptor(steps, 0, seed) {
            Attempt::OracleNotes(n) => Judgement::OracleNotes(n),
            Attempt::Nothing => Judgement::Unjudged,
            Attempt::Ran { case, run } => match signature(&case, &run) {
                Some((signature, message)) => Judgement::Finding { signature, message },
                None => Judgement::Pass,
            },
        }
    }

    /// The contract lock's case (`LOCK-001`), run once before the
    /// sequences when a lock is given: its FAIL is a finding whose evidence
    /// is the lock, not a case file.
    fn lock_finding(&self, started: Instant) -> Option<Finding> {
        let lock = self.cfg.lock.as_ref()?;
        let cfg = cetp_conformance::runner::RunConfig::default();
        let o = cetp_conformance::lock_target::run_lock_case(
            &self.target,
            &self.env,
            lock,
            &cfg,
            &mut cetp_vectors::event::Fanout::default(),
        );
        if o.verdict != cetp_vectors::event::Verdict::Fail {
            return None;
        }
        Some(Finding {
            id: o.id.clone(),
            signature: format!("case {}", o.id),
            message: o.reason.clone(),
            cited: o.cited.clone(),
            // Not a case file: the lock is the evidence; `cetp run --lock
            // FILE --only LOCK-001` replays it.
            file: json!({"lock_case": o.id, "reason": o.reason, "requirements": o.requirements}),
            case_index: 0,
            case_seed: self.cfg.seed,
            found_after_ms: started.elapsed().as_millis() as u64,
            moves_before: 0,
            moves_after: 0,
            steps_after: 0,
        })
    }

    /// The case count, the time budget, `max_findings` (the campaign's, in
    /// one), an interrupt or a lost device ends the run.
    fn should_stop(&self, index: u64, started: Instant, findings: usize) -> bool {
        self.cfg.cases.is_some_and(|n| index >= n)
            || self.cfg.budget.is_some_and(|b| started.elapsed() >= b)
            || findings >= self.cfg.max_findings
            || self
                .cfg
                .interrupt
                .as_ref()
                .is_some_and(|i| i.load(Ordering::SeqCst))
            || self.lost.is_some()
            || self
                .campaign
                .as_ref()
                .is_some_and(|m| m.hub.distinct() >= self.cfg.max_findings)
    }

    /// Runs until the budget, the case count or `max_findings` is reached.
    pub fn run(&mut self, progress: &mut dyn FnMut(&Stats)) -> FuzzReport {
        let started = Instant::now();
        let mut t = Tally::default();
        let before = self.observe_total();
        if let Some(f) = self
            .lock_finding(started)
            .filter(|f| self.claim(&f.signature, 0, self.cfg.seed))
        {
            t.signatures.insert(f.signature.clone());
            t.first_finding_ms.get_or_insert(f.found_after_ms);
            t.findings.push(f);
            t.stats.findings = t.findings.len();
        }
        let mut last_tick = Instant::now();
        for index in 0.. {
            if self.should_stop(index, started, t.findings.len()) {
                break;
            }
            // A sequence that failed during a wait runs again on its own
            // first: only that run can charge the target.
            let (seed, seq) = match self.suspects.pop_front() {
                Some((moves, seed)) => (seed, Sequence { moves }),
                None => {
                    let seed = case_seed(self.cfg.seed, index);
                    (seed, self.next_sequence(seed))
                }
            };
            t.stats.cases += 1;
            let attempt = self.attempt(&seq.moves, index, seed);
            if self.effects_unjudged_now {
                t.stats.effects_unjudged += 1;
            }
            self.take_filled(&mut t.stats, &mut t.notes);
            match attempt {
                Attempt::OracleNotes(n) => {
                    t.stats.unjudged += 1;
                    for x in n {
                        if t.notes.len() < 50 {
                            t.notes.insert(x);
                        }
                    }
                }
                Attempt::Nothing => t.stats.unjudged += 1,
                Attempt::Ran { case, run } => {
                    let ran = RanSequence {
                        moves: &seq.moves,
                        index,
                        seed,
                        case,
                        run,
                    };
                    if !self.judge_ran(ran, &mut t, started) {
                        continue;
                    }
                }
            }
            t.stats.elapsed_ms = started.elapsed().as_millis() as u64;
            if last_tick.elapsed() >= Duration::from_millis(500) {
                progress(&t.stats);
                last_tick = Instant::now();
            }
        }
        t.stats.elapsed_ms = started.elapsed().as_millis() as u64;
        progress(&t.stats);
        let after = self.observe_total();
        self.report(t, before.zip(after).map(|(b, a)| a - b))
    }

    /// A sequence the target ran to a verdict: its figures counted, the
    /// corpus fed, and a failure it reproduces shrunk into a finding (one
    /// that does not reproduce is kept as flaky). False when the failure
    /// did not reproduce: the run's loop then skips its progress tick.
    fn judge_ran(&mut self, ran: RanSequence, t: &mut Tally, started: Instant) -> bool {
        let RanSequence {
            moves,
            index,
            seed,
            case,
            run,
        } = ran;
        t.stats.judged += 1;
        t.stats.envelopes += run.answers as u64;
        t.stats.dispatched += run.dispatched as u64;
        self.feed_corpus(moves, &case, &run, seed);
        // A sequence the setup or the harness stopped early was
        // not judged to its end.
        if matches!(
            run.stop,
            Some(Stop::Setup { .. } | Stop::NotApplicable(_) | Stop::Infra(_))
        ) {
            t.stats.unjudged += 1;
        }
        if let Some((sig, message)) = signature(&case, &run) {
            // A Provider the harness does not know is charged
            // only with what fails again: the same moves, run
            // anew with fresh request ids.
            self.redraw_reruns = false;
            if !t.signatures.contains(&sig) && !self.reproduces(moves, index, seed, &sig) {
                if t.flaky.len() < 50 && !t.flaky.iter().any(|f| f.signature == sig) {
                    t.flaky.push(Flaky {
                        signature: sig.clone(),
                        message: message.clone(),
                        case_index: index,
                        case_seed: seed,
                    });
                }
                t.stats.elapsed_ms = started.elapsed().as_millis() as u64;
                return false;
            }
            if t.signatures.insert(sig.clone()) && self.claim(&sig, index, seed) {
                t.first_finding_ms
                    .get_or_insert(started.elapsed().as_millis() as u64);
                let failure = Failure {
                    moves: moves.to_vec(),
                    index,
                    seed,
                    sig: &sig,
                    message,
                    case,
                    run,
                };
                let f = self.shrink(failure, &mut t.stats, started);
                t.signatures.insert(f.signature.clone());
                t.findings.push(f);
                t.stats.findings = t.findings.len();
            }
        }
        true
    }

    /// The run's report from what it gathered, and the effects the
    /// observer counted over it.
    fn report(&self, t: Tally, effects_observed: Option<i64>) -> FuzzReport {
        FuzzReport {
            seed: self.cfg.seed,
            mutator: match self.cfg.mutator {
                Mutator::Structured => "structured".into(),
                Mutator::Blind => "blind".into(),
            },
            oracle: self.oracle_members(),
            oracle_kind: self.oracle_kind().to_string(),
            flaky: t.flaky,
            stats: t.stats,
            findings: t.findings,
            oracle_notes: t.notes.into_iter().collect(),
            first_finding_ms: t.first_finding_ms,
            effects_observed,
            effects_unjudged: self.effects_unsafe.clone(),
            lost: self.lost.clone(),
        }
    }

    /// Adds what the sequences run during the last sequence's waits did to
    /// the run's figures, and queues those that failed for the main loop.
    fn take_filled(&mut self, stats: &mut Stats, notes: &mut BTreeSet<String>) {
        let Some(filler) = self.filler.as_mut() else {
            return;
        };
        let f = filler.take_stats();
        stats.cases += f.sequences;
        stats.during_waits += f.sequences;
        stats.during_waits_judged += f.judged;
        stats.judged += f.judged;
        stats.unjudged += f.sequences - f.judged;
        stats.envelopes += f.envelopes;
        for n in f.notes {
            if notes.len() < 50 {
                notes.insert(n);
            }
        }
        self.suspects.extend(filler.suspects.drain(..));
    }

    /// The observer's counter of effects, when the profile has one.
    fn observe_total(&mut self) -> Option<i64> {
        let o = self.profile.observer.as_ref()?;
        if o.counts != cetp_vectors::profile::Counts::Effects {
            return None;
        }
        let case: Case =
            serde_json::from_value(json!({"id": "FUZZ-OBSERVE", "title": "effects so far",
            "role": "provider", "level": "MUST", "requirements": [],
            "steps": [{"do": "observe", "bind": "o"}]}))
            .ok()?;
        let run = run_case(
            &self.target,
            self.profile,
            &self.env,
            self.rules,
            &case,
            self.cfg.seed,
        );
        run.bindings.get("o")?.as_i64()
    }

    /// Whether a failure with signature `sig` fails again in each of
    /// `confirm_runs` fresh runs of the same moves (descriptor oracle only;
    /// the differential oracle's verdict is already a second run).
    fn reproduces(&mut self, moves: &[Move], index: u64, seed: u64, sig: &str) -> bool {
        if !matches!(self.oracle, OracleMode::Descriptor { .. }) {
            return true;
        }
        for _ in 0..self.cfg.confirm_runs {
            let again = self.next_seed(seed);
            if self.fails_again(moves, index, again, sig) {
                continue;
            }
            // The first run may have changed what the same values meet (a
            // read that created the missing object it was asked for): the
            // same moves with their schema-drawn args drawn anew.
            let Some(redrawn) = moves::redraw_generated(moves, &self.world, again) else {
                return false;
            };
            let again = self.next_seed(seed);
            if !self.fails_again(&redrawn, index, again, sig) {
                return false;
            }
            self.redraw_reruns = true;
        }
        true
    }

    /// Whether `moves` run with `seed` fail with signature `sig`.
    fn fails_again(&mut self, moves: &[Move], index: u64, seed: u64, sig: &str) -> bool {
        match self.attempt(moves, index, seed) {
            Attempt::Ran { case, run } => signature(&case, &run).is_some_and(|(s, _)| s == sig),
            _ => false,
        }
    }

    fn next_seed(&mut self, seed: u64) -> u64 {
        self.reruns += 1;
        case_seed(seed ^ 0xA5A5_5A5A, self.reruns)
    }

    /// Removes moves, then steps, as long as the same failure remains.
    fn shrink(&mut self, failure: Failure, stats: &mut Stats, started: Instant) -> Finding {
        let Failure {
            moves,
            index,
            seed,
            sig,
            message,
            case,
            run,
        } = failure;
        let moves_before = moves.len();
        let mut best = (moves, case, message, run.cited.clone(), seed);
        let mut at = ShrinkRun {
            index,
            seed,
            sig,
            budget: self.cfg.shrink_runs,
        };
        let mut progress = true;
        while progress && at.budget > 0 {
            progress = self.shrink_pass(&mut at, &mut best, stats);
        }
        let (moves, case, message, cited, final_seed) = best;
        let steps_after = case
            .get("steps")
            .and_then(Json::as_array)
            .map_or(0, Vec::len);
        let judged_by = self.judged_by();
        let file = finding_file(
            &case, sig, &message, &cited, &self.cfg, index, final_seed, &judged_by,
        );
        let id = file
            .pointer("/cases/0/id")
            .and_then(Json::as_str)
            .unwrap_or("FUZZ")
            .to_string();
        Finding {
            id,
            signature: sig.to_string(),
            message,
            cited,
            file,
            case_index: index,
            case_seed: final_seed,
            found_after_ms: started.elapsed().as_millis() as u64,
            moves_before,
            moves_after: moves.len(),
            steps_after,
        }
    }

    /// One pass of [`Self::shrink`] over `best`: each whole move, last
    /// first (later moves depend on earlier ones), then each single step
    /// inside the moves left, dropped when the same failure remains. True
    /// when one was dropped.
    fn shrink_pass(&mut self, at: &mut ShrinkRun, best: &mut Shrunk, stats: &mut Stats) -> bool {
        let mut progress = false;
        // Whole moves, last first (later moves depend on earlier ones).
        let mut i = best.0.len();
        while i > 0 && at.budget > 0 {
            i -= 1;
            if best.0.len() <= 1 {
                break;
            }
            let mut cand = best.0.clone();
            cand.remove(i);
            if let Some(b) = self.try_shrunk(at, cand, stats) {
                *best = b;
                progress = true;
            }
        }
        // Single steps inside the moves left.
        for m in 0..best.0.len() {
            let mut k = best.0[m].steps.len();
            while k > 0 && at.budget > 0 {
                k -= 1;
                if best.0[m].steps.len() <= 1 {
                    break;
                }
                let mut cand = best.0.clone();
                cand[m].steps.remove(k);
                if let Some(b) = self.try_shrunk(at, cand, stats) {
                    *best = b;
                    progress = true;
                }
            }
        }
        progress
    }

    /// Runs a shrink candidate (its schema-drawn args drawn anew when the
    /// finding needed that to fail again), at the cost of one run of the
    /// budget: the candidate and its run when it fails the same way.
    fn try_shrunk(
        &mut self,
        at: &mut ShrinkRun,
        cand: Vec<Move>,
        stats: &mut Stats,
    ) -> Option<Shrunk> {
        if at.budget == 0 {
            return None;
        }
        at.budget -= 1;
        let s = self.next_seed(at.seed);
        let cand = if self.redraw_reruns {
            moves::redraw_generated(&cand, &self.world, s).unwrap_or(cand)
        } else {
            cand
        };
        match self.attempt(&cand, at.index, s) {
            Attempt::Ran { case, run } => {
                stats.envelopes += run.answers as u64;
                stats.dispatched += run.dispatched as u64;
                match signature(&case, &run) {
                    Some((got, msg)) if got == at.sig => {
                        Some((cand, case, msg, run.cited.clone(), s))
                    }
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// What a finding's file says judged it: the oracle and its members.
    fn judged_by(&self) -> String {
        match &self.oracle {
            OracleMode::Differential(o) => format!(
                "expectations compiled from the reference Provider and {} legal variants",
                o.members.len().saturating_sub(1)
            ),
            OracleMode::Descriptor { shadow, .. } => format!(
                "expectations compiled by the descriptor oracle: the reference engine and {} legal variants hosting the target's own descriptors, its business answers repeated from the run that failed (a Provider whose business answers differ on replay may fail elsewhere or pass)",
                shadow.members.len().saturating_sub(1)
            ),
        }
    }
}

/// What [`Fuzzer::run`] gathers over its sequences, for the report.
#[derive(Default)]
struct Tally {
    stats: Stats,
    findings: Vec<Finding>,
    /// The signatures already reported (or being shrunk).
    signatures: BTreeSet<String>,
    /// The oracle's notes on what it could not judge (at most 50).
    notes: BTreeSet<String>,
    first_finding_ms: Option<u64>,
    flaky: Vec<Flaky>,
}

/// A sequence the target ran to a verdict, as [`Fuzzer::judge_ran`] takes
/// it.
struct RanSequence<'m> {
    moves: &'m [Move],
    index: u64,
    seed: u64,
    case: Json,
    run: CaseRun,
}

/// A failing sequence for [`Fuzzer::shrink`]: its moves, where it was
/// drawn, its failure's signature and message, and the run that failed.
struct Failure<'s> {
    moves: Vec<Move>,
    index: u64,
    seed: u64,
    sig: &'s str,
    message: String,
    case: Json,
    run: CaseRun,
}

/// What a shrink's candidates share: the failure's sequence index, seed
/// and signature, and the runs left of the budget.
struct ShrinkRun<'s> {
    index: u64,
    seed: u64,
    sig: &'s str,
    budget: usize,
}

fn transcript_snapshot(
    t: &descriptor::Transcript,
) -> std::collections::HashMap<descriptor::Key, Vec<cetp_proto::device::CallAnswer>> {
    t.snapshot()
}

/// The descriptor oracle's learning case failed on the target: that case,
/// as a regular finding file.
fn unlearnable(case: Json, reason: String, cited: Vec<String>, cfg: &FuzzConfig) -> FuzzError {
    let sig = format!("learning case [{}]", cited.join(" "));
    let file = finding_file(
        &case,
        &sig,
        &reason,
        &cited,
        cfg,
        0,
        cfg.seed,
        "the descriptor oracle's learning case: one session per identity, the provider info and the tool lists, each required to succeed",
    );
    let id = file
        .pointer("/cases/0/id")
        .and_then(Json::as_str)
        .unwrap_or("FUZZ")
        .to_string();
    let steps_after = case
        .get("steps")
        .and_then(Json::as_array)
        .map_or(0, Vec::len);
    FuzzError::Unlearnable(Box::new(Finding {
        id,
        signature: sig,
        message: reason,
        cited,
        file,
        case_index: 0,
        case_seed: cfg.seed,
        found_after_ms: 0,
        moves_before: 1,
        moves_after: 1,
        steps_after,
    }))
}

/// The smallest failing sequence so far: its moves, compiled case,
/// message, cited requirements and the seed it failed with.
type Shrunk = (Vec<Move>, Json, String, Vec<String>, u64);

/// A target through a blind mutator of its own seeded `seed` (blind mode:
/// `skip` is then the observer's tool, or none), or the target itself.
fn wrap_blind(skip: &Option<Option<String>>, seed: u64, t: Target) -> Target {
    match skip {
        Some(skip) => {
            let m = blind::Mutations::new(skip.clone());
            m.reseed(seed);
            m.wrap(t)
        }
        None => t,
    }
}

/// What [`Fuzzer::judge_moves`] made of one sequence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Judgement {
    /// The target failed: the finding's signature and message.
    Finding {
        /// What failed: a check and its rule, or a step's kind and
        /// requirements.
        signature: String,
        /// The failure's message.
        message: String,
    },
    /// Judged, and the target passed.
    Pass,
    /// Nothing of the sequence was left to judge.
    Unjudged,
    /// A check fired on the oracle itself.
    OracleNotes(Vec<String>),
}

enum Attempt {
    OracleNotes(Vec<String>),
    Nothing,
    Ran { case: Json, run: CaseRun },
}

/// What failed, in a form that stays the same while a finding shrinks: the
/// check and its rule, or the failing step's kind, method and requirements.
fn signature(case: &Json, run: &CaseRun) -> Option<(String, String)> {
    if let Some((check, (_, f))) = run.checks.iter().next() {
        return Some((format!("check {check} ({})", f.rule), f.message.clone()));
    }
    let Some(Stop::Fail(reason)) = &run.stop else {
        return None;
    };
    let step = case
        .get("steps")
        .and_then(Json::as_array)
        .and_then(|s| s.get(run.step.saturating_sub(1)))?;
    let what = step.get("do").and_then(Json::as_str).unwrap_or("?");
    let method = step.get("method").and_then(Json::as_str).unwrap_or("");
    let mut reqs: Vec<String> = run.cited.clone();
    reqs.sort();
    Some((
        format!(
            "step {what}{}{} [{}]",
            if method.is_empty() { "" } else { " " },
            method,
            reqs.join(" ")
        ),
        reason.clone(),
    ))
}

#[allow(clippy::too_many_arguments)]
fn finding_file(
    case: &Json,
    sig: &str,
    message: &str,
    cited: &[String],
    cfg: &FuzzConfig,
    index: u64,
    seed: u64,
    judged_by: &str,
) -> Json {
    let mut case = case.clone();
    let steps = case.get("steps").cloned().unwrap_or(json!([]));
    let digest = hex::encode(Sha256::digest(steps.to_string().as_bytes()));
    // The case-id shape of the format (`PREFIX-NNN`): a prefix and number
    // from the digest of the steps, so the same finding keeps its id.
    let n = u64::from_str_radix(&digest[8..16], 16).unwrap_or(0) % 1000;
    let id = format!("FZ{}-{n:03}", digest[..8].to_uppercase());
    let only_should = !cited.is_empty()
        && cited.iter().all(|c| {
            matches!(
                cfg.levels.get(c).map(String::as_str),
                Some("SHOULD" | "MAY")
            )
        });
    case["id"] = json!(id);
    case["title"] = json!(format!("fuzz finding: {sig}"));
    case["level"] = json!(if only_should { "SHOULD" } else { "MUST" });
    let shown: String = message.chars().take(300).collect();
    case["notes"] = json!(format!(
        "Found by cetp fuzz --seed {} (sequence {index}, replay seed {seed}); {judged_by}. First seen: {shown}",
        cfg.seed,
    ));
    json!({"format_version": 1, "group": "fuzz-findings",
           "description": format!("A minimal sequence cetp fuzz found: {sig}"),
           "cases": [case]})
}

#[cfg(test)]
mod quiesce_tests {
    use super::*;
    use moves::{GenStep, Meta};

    fn step(j: Json) -> GenStep {
        GenStep {
            step: j,
            meta: Meta::Plain,
        }
    }

    /// An operation one sequence leaves running ends, with its effect,
    /// during a later one whose oracle members start afresh: without the
    /// quiesce that effect is charged to the later sequence (the false
    /// findings the 2-minute clean runs of two legal variants made).
    #[test]
    fn an_operation_left_running_is_settled_before_the_next_sequence() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let suite = cetp_vectors::suite::Suite::load(&dir.join("vectors")).unwrap();
        let profile = Profile::from_toml(
            &std::fs::read_to_string(dir.join("profiles/reference.toml")).unwrap(),
        )
        .unwrap();
        let leave_running = [Move {
            steps: vec![
                step(json!({"do": "negotiate", "as": "a", "bind": "s",
                            "capabilities": ["async_operations"]})),
                step(
                    json!({"do": "call", "as": "a", "method": "execute_tool", "session": "s",
                            "tool": {"name": "sync_portfolio"}, "args": {"json": {}},
                            "bind": "e", "expect": {"status": ["accepted"]},
                            "requirements": []}),
                ),
            ],
        }];
        let judge_effects = [Move {
            steps: vec![
                step(json!({"do": "observe", "bind": "o"})),
                step(json!({"do": "advance_clock", "ms": 3_600_000, "requirements": []})),
                step(json!({"do": "negotiate", "as": "a", "bind": "s2"})),
                step(
                    json!({"do": "call", "as": "a", "method": "list_tools", "session": "s2",
                            "bind": "l", "expect": {}, "requirements": []}),
                ),
                step(json!({"do": "expect_effects", "since": "o", "delta": 0,
                            "requirements": ["CETP2-6-01"]})),
            ],
        }];
        enum Then {
            Nothing,
            Settle,
            // As after a target whose clock cannot move.
            DropEffects,
        }
        let failed = |then: Then| {
            // A legal variant whose operations run 20 minutes: the one left
            // running cannot end on its own before the second sequence.
            let spec = cetp_targets::TargetSpec::parse("sim:variant=slow_operations").unwrap();
            let target = cetp_targets::open(&spec).unwrap();
            let (_, env) = cetp_conformance::runner::identify(&target, &profile).unwrap();
            let mut f =
                Fuzzer::new(target, &profile, env, &suite.rules, FuzzConfig::default()).unwrap();
            match f.attempt(&leave_running, 0, 1) {
                Attempt::Ran { run, .. } => assert!(!run.failed(), "{:?}", run.stop),
                _ => panic!("the first sequence did not run"),
            }
            assert!(
                f.unsettled,
                "an accepted answer leaves the target unsettled"
            );
            // One run of the second sequence, as `attempt` makes them (its
            // re-run of a failure is settled the same way).
            match then {
                Then::Nothing => {}
                Then::Settle => f.quiesce(2),
                Then::DropEffects => f.effects_unsafe = Some("unsettled".into()),
            }
            let steps = Sequence {
                moves: judge_effects.to_vec(),
            }
            .steps();
            let start_ms = f.target.a.now_ms();
            match f.compile_and_run(false, &steps, 1, 2, start_ms, &|t| t) {
                Attempt::Ran { run, .. } => run.failed(),
                _ => panic!("the second sequence did not run"),
            }
        };
        assert!(
            failed(Then::Nothing),
            "without the quiesce the leftover effect is charged"
        );
        assert!(
            !failed(Then::Settle),
            "with it, the later sequence is judged on its own"
        );
        assert!(
            !failed(Then::DropEffects),
            "unsettled, the effect judgement is dropped, not charged"
        );
    }
}

#[cfg(test)]
mod reproduce_tests {
    use super::*;
    use moves::{GenStep, Meta};

    /// get_note_creates_missing was reported flaky: its first run creates
    /// the note it was asked for, so the confirmation run of the same moves
    /// meets a note that exists. The confirmation draws the schema-drawn
    /// args anew and the finding is confirmed (and shrunk with fresh ones).
    #[test]
    fn a_finding_that_consumed_its_args_is_confirmed_with_args_drawn_anew() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let suite = cetp_vectors::suite::Suite::load(&dir.join("vectors")).unwrap();
        let profile =
            Profile::from_toml(&std::fs::read_to_string(dir.join("profiles/notes.toml")).unwrap())
                .unwrap();
        let step = |j: Json, meta: Meta| GenStep { step: j, meta };
        let moves = [
            Move {
                steps: vec![step(
                    json!({"do": "negotiate", "as": "a", "bind": "s1"}),
                    Meta::Plain,
                )],
            },
            Move {
                steps: vec![
                    step(json!({"do": "observe", "bind": "o2"}), Meta::Plain),
                    step(
                        json!({"do": "call", "as": "a", "method": "execute_tool", "session": "s1",
                            "tool": {"name": "get_note"}, "args": {"json": {"note_id": "n_zzzzzzzzzz"}},
                            "bind": "e3", "expect": {}, "requirements": []}),
                        Meta::Plain,
                    ),
                    step(
                        json!({"do": "observe", "bind": "p4", "requirements": ["CETP2-3.4-08"]}),
                        Meta::EffectsAfter {
                            since: "o2".into(),
                            tool_of: Some("e3".into()),
                        },
                    ),
                ],
            },
        ];
        let spec =
            cetp_targets::TargetSpec::parse("sim:provider=notes,mutant=get_note_creates_missing")
                .unwrap();
        let target = cetp_targets::open(&spec).unwrap();
        let (_, env) = cetp_conformance::runner::identify(&target, &profile).unwrap();
        let cfg = FuzzConfig {
            oracle: OracleChoice::Descriptor,
            ..FuzzConfig::default()
        };
        let mut f = Fuzzer::new(target, &profile, env, &suite.rules, cfg).unwrap();
        let Attempt::Ran { case, run } = f.attempt(&moves, 0, 1) else {
            panic!("the sequence was not judged");
        };
        let (sig, _) = signature(&case, &run).expect("the first run fails");
        assert!(sig.contains("CETP2-3.4-08"), "{sig}");
        assert!(
            !f.fails_again(&moves, 0, 2, &sig),
            "the same args no longer fail"
        );
        assert!(
            f.reproduces(&moves, 0, 3, &sig),
            "confirmed with args drawn anew"
        );
        assert!(f.redraw_reruns, "its shrink draws them anew too");
    }
}
