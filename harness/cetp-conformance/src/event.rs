//! The one typed event stream a run emits. Reporters (`cetp-report`: JSON,
//! terminal, JUnit, SARIF, NDJSON, Markdown) are independent consumers of
//! it; none of them is consulted by the runner.
//!
//! Strings inside events may come from the Provider: reporters must escape
//! them for their medium.

use crate::device::HelloInfo;
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Verdict {
    Pass,
    Fail,
    Warn,
    NotApplicable,
    InfraError,
    Flaky,
}

impl Verdict {
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
    pub capabilities: Vec<CapabilityClaim>,
    /// v1 and discovery results for a Provider without v2.
    pub v1_passed: Option<bool>,
    /// Core cases and checks the setup kept from judging, grouped by what
    /// would let them judge. Non-empty means the claim is not established.
    pub unjudged: Vec<Unjudged>,
    /// A run filtered with --only/--skip makes no claim.
    pub filtered: bool,
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
    pub needs: String,
    pub cases: Vec<String>,
    /// Requirement ids of those cases.
    pub requirements: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapabilityClaim {
    pub capability: String,
    pub declared: bool,
    pub passed: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    pub pass: usize,
    pub fail: usize,
    pub warn: usize,
    pub not_applicable: usize,
    pub infra_error: usize,
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
    RunStarted {
        run_id: String,
        harness: String,
        target: String,
        seed: u64,
        config_hash: String,
        /// With `seed`, the nonce of every generated request id and value:
        /// `cetp run --replay-run report.json` brings both back.
        started_at_ms: i64,
        cases: usize,
        /// The `--only` / `--skip` patterns of the run.
        only: Vec<String>,
        skip: Vec<String>,
        attempts: u32,
    },
    /// Right after `RunStarted`, for a run that is one part of a split run
    /// (`--partition`, [`crate::partition`]), or a merge of all the parts
    /// (`cetp merge`: `index` absent, `merged` naming each part's run).
    RunPartition {
        scheme: crate::partition::Scheme,
        count: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        index: Option<u32>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        merged: Vec<crate::partition::MergedPart>,
    },
    TargetIdentified {
        hello: Option<HelloInfo>,
        package: Option<String>,
        authority: Option<String>,
        manifest: String,
        declared_versions: Vec<i32>,
    },
    CaseStarted {
        case_id: String,
        title: String,
        /// The device that ran the case, in a run of several devices.
        #[serde(skip_serializing_if = "Option::is_none")]
        device: Option<String>,
    },
    StepSent {
        case_id: String,
        step: usize,
        identity: String,
        op: String,
        request: Json,
    },
    StepAnswered {
        case_id: String,
        step: usize,
        answer: Json,
        elapsed_us: u64,
    },
    /// Written before a call that may cause a side effect leaves the
    /// harness (`execute_tool` of a tool that is not read-only): which call,
    /// so that a run that dies mid-call can be reconciled by repeating it
    /// with the same `request_id`.
    Dispatched {
        case_id: String,
        step: usize,
        identity: String,
        tool: String,
        request_id: String,
        /// SHA-256 of the args JSON text as sent.
        args_sha256: String,
    },
    CheckFinding {
        case_id: String,
        step: usize,
        check: String,
        requirements: Vec<String>,
        level: String,
        message: String,
    },
    CaseFinished {
        case_id: String,
        title: String,
        requirements: Vec<String>,
        /// For a FAIL or WARN, the requirements of the failing step (its
        /// own `requirements`, else the case's): what the finding proves.
        cited: Vec<String>,
        verdict: Verdict,
        reason: String,
        /// Failure accepted by the baseline (known failure, with its reason).
        baseline: Option<String>,
        duration_ms: u64,
        /// For a NOT_APPLICABLE the setup caused (not the spec): the
        /// profile field, flag or device ability that would judge the case
        /// (the `needs X` of its reason). Absent otherwise.
        #[serde(skip_serializing_if = "Option::is_none")]
        unjudged: Option<String>,
    },
    CheckVerdict {
        check: String,
        title: String,
        requirements: Vec<String>,
        /// For a FAIL or WARN, the requirements the rules of its findings
        /// map to (every finding of the run, not only the first).
        cited: Vec<String>,
        verdict: Verdict,
        reason: String,
        answers_checked: usize,
    },
    BaselineStale {
        id: String,
        reason: String,
    },
    /// What the run's verdicts depend on, by name, and its hash
    /// (`cetp_conformance::pin`): emitted once, before `RunFinished`.
    RunPinned {
        pin_hash: String,
        fields: std::collections::BTreeMap<String, Json>,
    },
    /// A device of a run of several was lost (adb disconnected, its probe
    /// died, its Provider stopped answering): the cases it had not finished
    /// went to the devices left, or, with none left, are INFRA_ERROR.
    DeviceLost {
        device: String,
        reason: String,
        handed_back: Vec<String>,
    },
    RunFinished {
        summary: Summary,
        claim: Claim,
        exit_code: i32,
        duration_ms: u64,
    },
}

/// A consumer of the event stream.
pub trait Reporter: Send {
    fn on_event(&mut self, event: &Event);
    /// Called once after `RunFinished`; writes files, flushes terminals.
    fn finish(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Collects events in memory (tests, selftest, replay).
#[derive(Default)]
pub struct Collect {
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
    pub reporters: Vec<Box<dyn Reporter>>,
}

impl Fanout {
    pub fn emit(&mut self, e: Event) {
        for r in &mut self.reporters {
            r.on_event(&e);
        }
    }
}
