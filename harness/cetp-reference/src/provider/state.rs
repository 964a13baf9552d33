//! The Provider's state, split the way a real app's is: [`Memory`] dies with
//! the process, [`DurableState`] is its database and survives `restart()`.

use super::notes_model::{NotesJob, NotesState};
use super::util::DetRng;
use cetp_proto::envelope::{Capability, OpState};
use cetp_proto::provider::{Decision, IntentTarget};
use cetp_proto::{ErrorCode, RetryRule};
use serde_json::{json, Value as Json};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

/// A CETP error before the echo fields are attached.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Failure {
    pub code: ErrorCode,
    pub message: String,
    pub retryable: bool,
    pub details: Option<Json>,
    pub retry_after_ms: Option<i64>,
    pub resolution: Option<Box<IntentTarget>>,
    pub resume_token: Option<String>,
}

impl Failure {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Failure {
            code,
            message: message.into(),
            retryable: default_retryable(code),
            details: None,
            retry_after_ms: None,
            resolution: None,
            resume_token: None,
        }
    }

    pub fn retryable(mut self, retryable: bool) -> Self {
        self.retryable = retryable;
        self
    }

    pub fn details(mut self, details: Json) -> Self {
        self.details = Some(details);
        self
    }

    /// Reads back an error object written by [`Failure::to_json`].
    pub fn from_json(v: &Json) -> Option<Failure> {
        let code = ErrorCode::parse(v.get("error_code")?.as_str()?)?;
        let mut f = Failure::new(code, v.get("error_message")?.as_str()?);
        f.retryable = v.get("retryable")?.as_bool()?;
        f.details = v.get("error_details").cloned();
        Some(f)
    }

    /// The error object of a failed operation (§4.4: the fields of §5).
    pub fn to_json(&self) -> Json {
        let mut v = json!({
            "error_code": self.code.as_str(),
            "error_message": self.message,
            "retryable": self.retryable,
        });
        if let Some(d) = &self.details {
            v["error_details"] = d.clone();
        }
        v
    }
}

/// §5 fixes `retryable` for most codes. For the conditional ones the reference
/// says true only where repeating the same request is the right next step:
/// after DEADLINE_EXCEEDED the Consumer must ask again with the same id.
/// Authorization, confirmation, conflicts and internal errors need something
/// to change first.
pub(crate) fn default_retryable(code: ErrorCode) -> bool {
    match code.retry_rule() {
        RetryRule::Always => true,
        RetryRule::Never => false,
        RetryRule::Conditional => code == ErrorCode::DeadlineExceeded,
    }
}

/// An answer before the echo fields are attached. Terminal answers are what
/// dedupe records keep and replay.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Answer {
    /// `data` is the whole data object (`{"kind": ...}` for execute_tool).
    Success {
        data: Json,
        file: Option<Arc<[u8]>>,
    },
    Accepted {
        data: Json,
    },
    Error(Failure),
}

impl From<Failure> for Answer {
    fn from(f: Failure) -> Self {
        Answer::Error(f)
    }
}

impl Answer {
    pub fn ok(data: Json) -> Self {
        Answer::Success { data, file: None }
    }
}

/// §6: the dedupe key holds at least the caller UID, provider_id and
/// request_id. `uid` is `None` only in the mutant that forgets it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct DedupeKey {
    pub uid: Option<u32>,
    pub provider_id: String,
    pub request_id: String,
}

#[derive(Clone, Debug)]
pub(crate) enum RecordState {
    /// Waiting for authorization or confirmation: binds the id to the tool and
    /// args, nothing has happened yet.
    Pending,
    /// Reserved by an executor of process generation `boot`.
    InFlight {
        boot: u64,
    },
    Done(Answer),
}

#[derive(Clone, Debug)]
pub(crate) struct Record {
    pub tool: String,
    pub digest: String,
    pub created_ms: i64,
    pub state: RecordState,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Purpose {
    /// AUTH_REQUIRED: approving grants these scopes to the caller.
    Grant(BTreeSet<String>),
    /// USER_ACTION_REQUIRED: approving allows this one execution.
    Confirm,
}

/// One request for the user's decision, and the resume token bound to it.
#[derive(Clone, Debug)]
pub(crate) struct PendingDecision {
    pub purpose: Purpose,
    pub uid: u32,
    pub tool: String,
    /// The args bytes exactly as sent (§4.3 binds the token to them).
    pub args: String,
    pub request_id: String,
    pub resume_token: String,
    pub expires_ms: i64,
    pub decision: Option<Decision>,
    pub used: bool,
    pub target: IntentTarget,
}

/// What a background operation does when it finishes.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Job {
    /// `sync_portfolio` of the reference fixtures.
    SyncPortfolio { fail: bool },
    /// A job of the notes fixtures.
    Notes(NotesJob),
    /// A read tool's result, computed when the operation was created and
    /// revealed when it succeeds (the read-tool legal variants).
    Read { result: Json },
    /// A described tool's operation (`described.rs`): its result envelope,
    /// whether it commits an effect, when it ends and whether it fails.
    Described {
        result: Json,
        effect: bool,
        done_after_ms: i64,
        fails: bool,
    },
}

#[derive(Clone, Debug)]
pub(crate) struct Operation {
    pub uid: u32,
    pub request_id: String,
    pub created_ms: i64,
    pub job: Job,
    pub state: OpState,
    pub cancel_requested: bool,
    /// Progress percentage last reported (running only).
    pub progress: i64,
    /// The result envelope (succeeded) or error object (failed).
    pub outcome: Option<Json>,
    /// The file of a large result (a read handed over by an operation).
    pub file: Option<Arc<[u8]>>,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Alert {
    pub symbol: String,
    pub price: f64,
}

/// What survives a process restart: the app's database.
pub(crate) struct DurableState {
    pub rng: DetRng,
    /// Process generation; bumped by every restart so that an executor of a
    /// killed process can tell its reservation is gone.
    pub boot: u64,
    pub records: BTreeMap<DedupeKey, Record>,
    /// By confirmation id (the opaque key in the PendingIntent).
    pub decisions: BTreeMap<String, PendingDecision>,
    /// Resume token to confirmation id.
    pub resume_tokens: BTreeMap<String, String>,
    /// The current decision request of one logical execution.
    pub pending_by_request: BTreeMap<(u32, String), String>,
    /// Explicit grants; UIDs not listed have the configured default.
    pub grants: BTreeMap<u32, BTreeSet<String>>,
    pub alerts: BTreeMap<String, Alert>,
    pub next_alert: u64,
    /// The notes fixtures' business data.
    pub notes: NotesState,
    /// Committed executions of tools with side effects (the observer's count).
    pub effects: u64,
    pub synced: u64,
    pub operations: BTreeMap<String, Operation>,
    /// Operations not yet in a terminal state.
    pub active_ops: BTreeSet<String>,
    /// Device time of the last sweep of expired records.
    pub pruned_at_ms: i64,
}

impl DurableState {
    pub fn new(seed: u64, grants: BTreeMap<u32, BTreeSet<String>>) -> Self {
        DurableState {
            rng: DetRng::new(seed),
            boot: 0,
            records: BTreeMap::new(),
            decisions: BTreeMap::new(),
            resume_tokens: BTreeMap::new(),
            pending_by_request: BTreeMap::new(),
            grants,
            alerts: BTreeMap::new(),
            next_alert: 0,
            notes: NotesState::default(),
            effects: 0,
            synced: 0,
            operations: BTreeMap::new(),
            active_ops: BTreeSet::new(),
            pruned_at_ms: 0,
        }
    }
}

/// A negotiated session (§2.2): bound to the UID, version and capabilities.
#[derive(Clone, Debug)]
pub(crate) struct Session {
    pub uid: u32,
    pub version: i32,
    pub capabilities: BTreeSet<Capability>,
    pub expires_ms: i64,
}

/// What dies with the process.
#[derive(Default)]
pub(crate) struct Memory {
    /// Bumped by restart so that in-flight counters of the old process are
    /// not decremented into the new one.
    pub epoch: u64,
    pub sessions: HashMap<String, Session>,
    /// The capabilities of each caller's latest negotiation (only read by the
    /// capabilities_changed_in_session mutant).
    pub latest_caps: HashMap<u32, BTreeSet<Capability>>,
    pub in_flight: HashMap<u32, usize>,
    /// Sessions issued by this process (only used by the predictable-token mutant).
    pub issued: u64,
    /// The next call answers UNAVAILABLE (the unavailable_after_restart
    /// latitude, set by a restart).
    pub warming_up: bool,
}
