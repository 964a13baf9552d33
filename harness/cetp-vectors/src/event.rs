//! The one typed event stream a run emits. Reporters (`cetp-report`: JSON,
//! terminal, JUnit, SARIF, NDJSON, Markdown) are independent consumers of
//! it; none of them is consulted by the runner.
//!
//! Strings inside events may come from the Provider: reporters must escape
//! them for their medium.

use crate::device::HelloInfo;
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

/// The outcome of one case or check, as the report and the §9 claim count it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Verdict {
    /// The Provider did what the spec requires.
    Pass,
    /// The Provider broke a MUST: evidence against the claim.
    Fail,
    /// The Provider broke a SHOULD: reported, but not held against the claim.
    Warn,
    /// The case does not apply: by the spec (e.g. a capability not granted),
    /// or because the setup could not judge it (then counted in
    /// [`Summary::not_judged`] too, and never a pass).
    NotApplicable,
    /// The harness, device or transport failed: says nothing about the Provider.
    InfraError,
    /// Attempts of the same case disagreed (pass on one, fail on another).
    Flaky,
}

impl Verdict {
    /// The wire spelling (`SCREAMING_SNAKE_CASE`), as serde writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::Fail => "FAIL",
            Verdict::Warn => "WARN",
            Verdict::NotApplicable => "NOT_APPLICABLE",
            Verdict::InfraError => "INFRA_ERROR",
            Verdict::Flaky => "FLAKY",
        }
    }
}

/// The §9 claim a run allows.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    /// Whether v2 is declared by the manifest at all.
    pub v2_declared: bool,
    /// Every core case and check passed: the Provider may call itself CETP v2.
    pub cetp_v2: bool,
    /// One line per optional capability (§2.3): declared by the Provider, and
    /// whether its cases passed.
    pub capabilities: Vec<CapabilityClaim>,
    /// v1 and discovery results for a Provider without v2.
    pub v1_passed: Option<bool>,
    /// Core cases and checks the setup kept from judging, grouped by what
    /// would let them judge. Non-empty means the claim is not established.
    pub unjudged: Vec<Unjudged>,
    /// A run filtered with --only/--skip makes no claim.
    pub filtered: bool,
    /// The claim in words, as printed at the end of a run (`May claim CETP
    /// v2 …`, `No claim: …`).
    pub statement: String,
    /// For a claim not established: the shortest list of changes that
    /// would establish it (profile lines, flags, device abilities, cases
    /// to fix), one per line; empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fixes: Vec<String>,
}

/// Core cases left unjudged for one missing profile field or device ability.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unjudged {
    /// What would judge them: a profile field, flag or device ability.
    pub needs: String,
    /// Ids of the cases it kept unjudged.
    pub cases: Vec<String>,
    /// Requirement ids of those cases.
    pub requirements: Vec<String>,
}

/// The claim for one optional capability of §2.3.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapabilityClaim {
    /// The capability's name (§2.3).
    pub capability: String,
    /// Whether the Provider declares it.
    pub declared: bool,
    /// Whether it may be claimed: declared, CETP v2 claimed, and its own cases
    /// judged and passed.
    pub passed: bool,
}

/// Count of cases and checks per [`Verdict`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// Cases and checks that passed.
    pub pass: usize,
    /// Cases and checks that failed.
    pub fail: usize,
    /// Cases and checks with a warning.
    pub warn: usize,
    /// Cases and checks not applicable (by the spec or the setup).
    pub not_applicable: usize,
    /// Cases and checks the harness could not run.
    pub infra_error: usize,
    /// Cases whose attempts disagreed.
    pub flaky: usize,
    /// Of `not_applicable`, those the setup caused (a profile field, a
    /// flag, a device ability): not judged, unlike a NOT_APPLICABLE by the
    /// spec, and never a pass.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub not_judged: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Summary {
    /// Counts one verdict.
    pub fn add(&mut self, v: Verdict) {
        match v {
            Verdict::Pass => self.pass += 1,
            Verdict::Fail => self.fail += 1,
            Verdict::Warn => self.warn += 1,
            Verdict::NotApplicable => self.not_applicable += 1,
            Verdict::InfraError => self.infra_error += 1,
            Verdict::Flaky => self.flaky += 1,
        }
    }
}

/// Deserialize: `cetp merge` reads the partitions' `events.ndjson` back.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// First event of every run: what runs, against what, and how to reproduce it.
    RunStarted {
        /// Unique id of this run.
        run_id: String,
        /// Version of the harness that ran.
        harness: String,
        /// The target's label (`sim`, `tcp:HOST:PORT`, `adb:SERIAL`, …).
        target: String,
        /// Seed of every generated value: with `started_at_ms`, replays the run.
        seed: u64,
        /// Hash of the run's configuration (profile, flags, vectors).
        config_hash: String,
        /// With `seed`, the nonce of every generated request id and value:
        /// `cetp run --replay-run report.json` brings both back.
        started_at_ms: i64,
        /// Number of cases selected to run.
        cases: usize,
        /// The `--only` / `--skip` patterns of the run.
        only: Vec<String>,
        /// The `--skip` patterns of the run.
        skip: Vec<String>,
        /// Attempts per case (`--attempts`): more than one can yield FLAKY.
        attempts: u32,
        /// The flags besides `--target` and `--seed` a rerun of one case
        /// needs to run it as this run did (`--target-b`, `--profile`), in
        /// order: the reproduce lines print them. Without the profile a
        /// case that needs its roles or observer is not judged on rerun.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        rerun: Vec<String>,
    },
    /// Right after `RunStarted`, for a run that is one part of a split run
    /// (`--partition`, `cetp_conformance::partition`), or a merge of all the parts
    /// (`cetp merge`: `index` absent, `merged` naming each part's run).
    RunPartition {
        /// How the cases were split between the parts.
        scheme: Scheme,
        /// Number of parts.
        count: u32,
        /// This part's index (1-based); absent for a merge.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        index: Option<u32>,
        /// For a merge: the run of each part.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        merged: Vec<MergedPart>,
    },
    /// What the harness learned of the target before the first case.
    TargetIdentified {
        /// The probe's `hello` answer; absent when the target could not be
        /// identified (then nothing is judged).
        hello: Option<HelloInfo>,
        /// Android package of the Provider; absent when not identified.
        package: Option<String>,
        /// Provider authority the manifest declares (§2.1); absent when not
        /// identified.
        authority: Option<String>,
        /// Which versions the manifest declares (§8): `dual_stack`, `v2_only`,
        /// `v1_only` or `other`; `unknown` when not identified.
        manifest: String,
        /// Protocol versions the manifest declares (§2.1).
        declared_versions: Vec<i32>,
    },
    /// A case begins.
    CaseStarted {
        /// Id of the case (the vector's `id`).
        case_id: String,
        /// Human title of the case.
        title: String,
        /// The device that ran the case, in a run of several devices.
        #[serde(skip_serializing_if = "Option::is_none")]
        device: Option<String>,
    },
    /// One request of a case left the harness.
    StepSent {
        /// The case it belongs to.
        case_id: String,
        /// Index of the step in the case.
        step: usize,
        /// The caller identity the request was made as (§7.1).
        identity: String,
        /// The protocol method or probe op called.
        op: String,
        /// The request as sent.
        request: Json,
    },
    /// The answer to a [`Event::StepSent`].
    StepAnswered {
        /// The case it belongs to.
        case_id: String,
        /// Index of the step in the case.
        step: usize,
        /// The answer as received (result, error or probe failure).
        answer: Json,
        /// Time from send to answer, in microseconds.
        elapsed_us: u64,
    },
    /// Written before a call that may cause a side effect leaves the
    /// harness (`execute_tool` of a tool that is not read-only): which call,
    /// so that a run that dies mid-call can be reconciled by repeating it
    /// with the same `request_id`.
    Dispatched {
        /// The case making the call.
        case_id: String,
        /// Index of the step in the case.
        step: usize,
        /// The caller identity the call is made as.
        identity: String,
        /// Name of the tool executed.
        tool: String,
        /// The call's `request_id` (§4.1, §6): repeating it must not repeat the effect.
        request_id: String,
        /// SHA-256 of the args JSON text as sent.
        args_sha256: String,
    },
    /// A check (`crate::checks`) found something in one answer.
    CheckFinding {
        /// The case whose answer was checked.
        case_id: String,
        /// Index of the step in the case.
        step: usize,
        /// Name of the check.
        check: String,
        /// Requirement ids the finding is about.
        requirements: Vec<String>,
        /// Level of the rule broken (`MUST`, `SHOULD`, …).
        level: String,
        /// What was found, for a human.
        message: String,
    },
    /// A case ended with its verdict.
    CaseFinished {
        /// Id of the case.
        case_id: String,
        /// Human title of the case.
        title: String,
        /// Requirement ids the case covers.
        requirements: Vec<String>,
        /// For a FAIL or WARN, the requirements of the failing step (its
        /// own `requirements`, else the case's): what the finding proves.
        cited: Vec<String>,
        /// The case's verdict.
        verdict: Verdict,
        /// Why, for a human; for a FAIL, the first failed expectation.
        reason: String,
        /// Failure accepted by the baseline (known failure, with its reason).
        baseline: Option<String>,
        /// Wall time of the case, in milliseconds.
        duration_ms: u64,
        /// For a NOT_APPLICABLE the setup caused (not the spec): the
        /// profile field, flag or device ability that would judge the case
        /// (the `needs X` of its reason). Absent otherwise.
        #[serde(skip_serializing_if = "Option::is_none")]
        unjudged: Option<String>,
    },
    /// The verdict of one cross-answer check over the whole run.
    CheckVerdict {
        /// Name of the check.
        check: String,
        /// Human title of the check.
        title: String,
        /// Requirement ids the check covers.
        requirements: Vec<String>,
        /// For a FAIL or WARN, the requirements the rules of its findings
        /// map to (every finding of the run, not only the first).
        cited: Vec<String>,
        /// The check's verdict.
        verdict: Verdict,
        /// Why, for a human.
        reason: String,
        /// How many answers the check saw.
        answers_checked: usize,
    },
    /// A baseline entry matched no failure of this run: it can be removed.
    BaselineStale {
        /// Id of the baseline entry (a case or check).
        id: String,
        /// Why it is stale.
        reason: String,
    },
    /// What the run's verdicts depend on, by name, and its hash
    /// (the run's pin, `cetp_conformance::pin`): emitted once, before `RunFinished`.
    RunPinned {
        /// Hash of `fields`: two runs with the same pin hash judged the same things.
        pin_hash: String,
        /// Each pinned input by name.
        fields: std::collections::BTreeMap<String, Json>,
    },
    /// A device of a run of several was lost (adb disconnected, its probe
    /// died, its Provider stopped answering): the cases it had not finished
    /// went to the devices left, or, with none left, are INFRA_ERROR.
    DeviceLost {
        /// The lost device's target label.
        device: String,
        /// What was seen, for a human.
        reason: String,
        /// Ids of the unfinished cases it gave back.
        handed_back: Vec<String>,
    },
    /// Last event of every run.
    RunFinished {
        /// Count per verdict.
        summary: Summary,
        /// The §9 claim the run allows.
        claim: Claim,
        /// The exit code the run ends with (`crate::exit`).
        exit_code: i32,
        /// Wall time of the run, in milliseconds.
        duration_ms: u64,
    },
}

/// A consumer of the event stream.
pub trait Reporter: Send {
    /// Called for every event, in order.
    fn on_event(&mut self, event: &Event);
    /// Called once after `RunFinished`; writes files, flushes terminals.
    fn finish(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Collects events in memory (tests, selftest, replay).
#[derive(Default)]
pub struct Collect {
    /// Every event received, in order.
    pub events: Vec<Event>,
}

impl Reporter for Collect {
    fn on_event(&mut self, event: &Event) {
        self.events.push(event.clone());
    }
}

/// Fans one event out to every reporter.
#[derive(Default)]
pub struct Fanout {
    /// The reporters, each called in order.
    pub reporters: Vec<Box<dyn Reporter>>,
}

impl Fanout {
    /// Sends `e` to every reporter.
    pub fn emit(&mut self, e: Event) {
        for r in &mut self.reporters {
            r.on_event(&e);
        }
    }
}

/// How the selected cases are split between partitions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scheme {
    /// Sorted ids, every Nth from the Mth: even parts, stable for one suite.
    Slice,
    /// By the SHA-256 of the id: a case keeps its part across suite releases.
    Hash,
}

impl Scheme {
    /// The name as written in `--partition` (`slice`, `hash`).
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Slice => "slice",
            Scheme::Hash => "hash",
        }
    }
}

/// One partition a merge joined, as its report names it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MergedPart {
    /// Which part it was (1-based).
    pub index: u32,
    /// Its run id.
    pub run_id: String,
    /// Its target label.
    pub target: String,
    /// When it started, Unix epoch ms.
    pub started_at_ms: i64,
    /// How long it ran, in milliseconds.
    pub duration_ms: u64,
}
