//! An app built from another Provider's descriptors: the engine (sessions,
//! dedupe, confirmation, operations, capabilities, the v1 view) hosts the
//! tools a target published, and every business answer is asked of a
//! [`Business`] the caller supplies.
//!
//! This is the shadow `cetp fuzz` builds of a Provider the reference does not
//! implement: where the protocol decides an outcome (a forged session, args
//! that break the input schema, a request id reused with other content, an
//! operation read by another caller, a missing confirmation, an unnegotiated
//! capability, a replay) the engine answers as it does for its own apps;
//! where the business decides (the value, a business refusal, whether to run
//! in the background, to ask for a confirmation or a grant) the [`Business`]
//! answers, and the engine only keeps the answer within what the descriptor
//! allows (§3.4: a tool with `confirmation=always` never acts unconfirmed;
//! §2.3: `accepted` only for `sync_or_async` tools in a session with
//! async_operations).

use cetp_proto::envelope::Capability;
use cetp_proto::ErrorCode;
use serde_json::{json, Value as Json};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::{Arc, Mutex};

/// One tool as the target published it in `list_tools` (§3.3, §3.4).
#[derive(Clone, Debug, PartialEq)]
pub struct DescribedTool {
    /// Tool name.
    pub name: String,
    /// Display title (at most 1024 characters kept).
    pub title: String,
    /// Description (at most 1024 characters kept).
    pub description: String,
    /// Input schema, `{}` when absent.
    pub input_schema: Json,
    /// Output schema, `{}` when absent.
    pub output_schema: Json,
    /// Scopes the tool requires (§3.4).
    pub scopes: Vec<String>,
    /// The `effect` annotation; `update` when absent, so an unstated tool is taken to write.
    pub effect: String,
    /// The `risk` annotation; `moderate` when absent.
    pub risk: String,
    /// The `destructive` annotation; false when absent.
    pub destructive: bool,
    /// The `idempotent` annotation; false when absent.
    pub idempotent: bool,
    /// The `open_world` annotation; false when absent.
    pub open_world: bool,
    /// The `confirmation` annotation; `provider_policy` when absent.
    pub confirmation: String,
    /// `execution` is `sync_or_async`.
    pub may_run_async: bool,
}

impl DescribedTool {
    /// Reads one entry of a `list_tools` answer; `None` for an entry without
    /// a name. A tool that does not say it only reads is taken to write and
    /// one that does not say when it confirms to confirm always; a missing
    /// or unknown risk is `moderate`, which no §3.4 rule ties to a
    /// confirmation (the shadow's own descriptor stays conforming, the
    /// target's is judged by the checks).
    pub fn from_json(t: &Json) -> Option<DescribedTool> {
        let name = t.get("name")?.as_str()?.to_string();
        let ann = t.get("annotations").cloned().unwrap_or(Json::Null);
        let text = |v: &Json, k: &str, d: &str| {
            v.get(k)
                .and_then(Json::as_str)
                .unwrap_or(d)
                .chars()
                .take(1024)
                .collect::<String>()
        };
        let flag = |k: &str| ann.get(k).and_then(Json::as_bool).unwrap_or(false);
        Some(DescribedTool {
            title: text(t, "title", ""),
            description: text(t, "description", ""),
            input_schema: t.get("input_schema").cloned().unwrap_or(json!({})),
            output_schema: t.get("output_schema").cloned().unwrap_or(json!({})),
            scopes: t
                .get("scopes")
                .and_then(Json::as_array)
                .map(|s| {
                    s.iter()
                        .filter_map(Json::as_str)
                        .map(|s| s.chars().take(256).collect())
                        .collect()
                })
                .unwrap_or_default(),
            effect: text(&ann, "effect", "update"),
            risk: text(&ann, "risk", "moderate"),
            destructive: flag("destructive"),
            idempotent: flag("idempotent"),
            open_world: flag("open_world"),
            confirmation: text(&ann, "confirmation", "provider_policy"),
            may_run_async: ann.get("execution").and_then(Json::as_str) == Some("sync_or_async"),
            name,
        })
    }

    /// Whether the tool only reads (`effect = read`), and so needs no dedupe (§6).
    pub fn is_read(&self) -> bool {
        self.effect == "read"
    }
}

/// An `execute_tool` call that passed every check the protocol makes.
#[derive(Clone, Debug)]
pub struct BusinessCall<'a> {
    /// The caller's UID.
    pub uid: u32,
    /// Empty for a v1 call.
    pub request_id: &'a str,
    /// The tool called.
    pub tool: &'a DescribedTool,
    /// The parsed `args`.
    pub args: &'a Json,
    /// A confirmation of this call was approved (its resume token redeemed).
    pub confirmed: bool,
    /// Committed effects so far (for an observer that counts them).
    pub effects: u64,
    /// The caller holds every scope the tool declares through a grant
    /// approved in this app (an approved AUTH_REQUIRED resolution, §3.4).
    pub granted: bool,
}

/// What the business answers a call.
#[derive(Clone, Debug, PartialEq)]
pub enum BusinessAnswer {
    /// A result (validated by nothing here: the target's own value, or one
    /// generated from its output schema).
    Value(Json),
    /// Run in the background; `value` is the result when it ends (and the
    /// synchronous result when the protocol does not allow an operation).
    Accepted {
        /// The result once the operation ends.
        value: Json,
    },
    /// Ask the user to confirm this call (USER_ACTION_REQUIRED, §3.4, §4.3).
    AskConfirm,
    /// Ask for the tool's scopes (AUTH_REQUIRED, §3.4).
    AskGrant,
    /// A business refusal; `retryable` is kept where §5 leaves it open.
    Error {
        /// The §5 code answered.
        code: ErrorCode,
        /// The `retryable` flag where §5 leaves it open; `None`, or a value the code's rule forbids, takes the engine's.
        retryable: Option<bool>,
    },
}

/// The business side of a [`Described`] app.
pub trait Business: Send + Sync {
    /// The business outcome of one call that passed the protocol checks.
    fn decide(&self, call: &BusinessCall<'_>) -> BusinessAnswer;
}

/// The choices the protocol leaves a Provider about its own business
/// outcomes that the shadow cannot learn from one answer: an oracle runs
/// both and takes their union.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flavour {
    /// A business error of a tool with effects is a terminal result its
    /// request id keeps (else a retry executes again).
    pub record_errors: bool,
    /// A business error of a tool with effects may have committed one
    /// (§4.4: an external transaction may be committed and still CONFLICT).
    pub error_effect: bool,
    /// Device time an operation takes, and whether it ends failed.
    pub op_done_after_ms: i64,
    /// Whether an operation ends `failed` rather than `succeeded`.
    pub op_fails: bool,
}

impl Flavour {
    /// Errors are not recorded and change nothing; operations end at once
    /// and succeed.
    pub const QUICK: Flavour = Flavour {
        record_errors: false,
        error_effect: false,
        op_done_after_ms: 1,
        op_fails: false,
    };
    /// Errors are terminal and may have had their effect; operations take
    /// ten seconds of device time (a hundred polls at the engine's pace:
    /// still running at any step that does not wait for them) and fail.
    pub const SLOW: Flavour = Flavour {
        record_errors: true,
        error_effect: true,
        op_done_after_ms: 10_000,
        op_fails: true,
    };
}

/// The app: a target's descriptors and a business.
pub struct Described {
    /// The target's tools as published.
    pub tools: Vec<DescribedTool>,
    /// The target's `get_provider_info` data, answered as is.
    pub info: Json,
    /// The optional capabilities the target grants.
    pub capabilities: BTreeSet<Capability>,
    /// Tools each caller UID does not see (§7.2).
    pub hidden: BTreeMap<u32, BTreeSet<String>>,
    /// Decides each call's business outcome.
    pub business: Arc<dyn Business>,
    /// Which of the open business choices this shadow takes.
    pub flavour: Flavour,
}

impl fmt::Debug for Described {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Described")
            .field("tools", &self.tools.len())
            .field("capabilities", &self.capabilities)
            .field("hidden", &self.hidden)
            .field("flavour", &self.flavour)
            .finish_non_exhaustive()
    }
}

/// What a described tool's execution carries into the engine's mutation
/// path.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct DescribedCall {
    pub answer: BusinessAnswer,
    pub may_run_async: bool,
}

/// The engine's `ToolDef.scopes` and annotation strings are `'static`; a
/// described tool's are interned once per distinct string, with a bound so
/// that a hostile tool list cannot grow it without end.
pub(crate) fn intern(s: &str) -> &'static str {
    static TABLE: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());
    const MAX: usize = 4096;
    let mut t = TABLE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(x) = t.get(s) {
        return x;
    }
    if t.len() >= MAX {
        return "cetp.interned.overflow";
    }
    let x: &'static str = Box::leak(s.to_string().into_boxed_str());
    t.insert(x);
    x
}

/// One of the spec's annotation values, or the strictest reading.
pub(crate) fn known(
    value: &str,
    allowed: &[&'static str],
    strictest: &'static str,
) -> &'static str {
    allowed
        .iter()
        .find(|a| **a == value)
        .copied()
        .unwrap_or(strictest)
}
