//! The vector format (`vectors/cases/*.json`, schema in
//! `vectors/schema/cases.schema.json`): cases as data, so that SDKs can load
//! them without this harness.
//!
//! A case is a list of steps; each step sends something to the target and
//! states what the answer must be. Values from earlier answers are referred to
//! with templates `${NAME/json/pointer}` (see [`crate::template`]).

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;
use std::collections::BTreeMap;

/// The `format_version` every vector file must carry; a file of another version is refused.
pub const FORMAT_VERSION: u32 = 1;

/// One file of test vectors: a group of [`Case`]s, parsed with unknown fields refused.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VectorFile {
    /// Must equal [`FORMAT_VERSION`].
    pub format_version: u32,
    /// Name of the group (usually the spec area, e.g. `negotiate`).
    pub group: String,
    /// What the group covers, for a human.
    pub description: String,
    /// The cases, in file order.
    pub cases: Vec<Case>,
}

impl VectorFile {
    /// Parses one case file's text: the JSON shape, then the format version.
    /// The one parser of the format, so that `Suite::load` and the
    /// `vector_file` fuzz target judge the same bytes the same way.
    pub fn from_json(text: &str) -> Result<VectorFile, String> {
        let file: VectorFile = serde_json::from_str(text).map_err(|e| e.to_string())?;
        if file.format_version != FORMAT_VERSION {
            return Err(format!(
                "format_version {} is not {FORMAT_VERSION}",
                file.format_version
            ));
        }
        Ok(file)
    }
}

/// Which side of the protocol the harness plays in a case.
#[derive(
    Clone, Copy, Debug, Deserialize, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The harness is the Consumer, the target is the Provider under test.
    Provider,
    /// The harness plays a (hostile) Provider, the target is a Consumer.
    Consumer,
}

/// Strength of a requirement: a MUST fails a case, a SHOULD only warns.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Level {
    /// A MUST (or MUST NOT) of the spec.
    Must,
    /// A SHOULD (or SHOULD NOT) of the spec.
    Should,
}

/// One conformance case: a sequence of steps run against the target, with
/// the requirements it enforces.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    /// Stable, never renumbered (e.g. `NEG-003`).
    pub id: String,
    /// Human title, shown in reports.
    pub title: String,
    /// Which side the harness plays.
    pub role: Role,
    /// Requirement ids (catalog) this case enforces.
    pub requirements: Vec<String>,
    /// MUST cases FAIL, SHOULD cases WARN when broken.
    pub level: Level,
    /// Optional capabilities the case needs negotiated; when the target did
    /// not negotiate one, the case is NOT_APPLICABLE.
    #[serde(default)]
    pub needs: Vec<String>,
    /// Manifest shapes the case applies to (`dual_stack`, `v2_only`,
    /// `v1_only`); empty = any shape that declares v2.
    #[serde(default)]
    pub manifests: Vec<String>,
    /// Caller identities used (`a`, `b`).
    #[serde(default = "default_identities")]
    pub identities: Vec<String>,
    /// Whether this case is part of the core (§9: every core case must pass to
    /// claim v2) or belongs to the capability in `needs`.
    #[serde(default)]
    pub notes: Option<String>,
    /// The steps, run in order; the first failed expectation decides the verdict.
    pub steps: Vec<CaseStep>,
}

/// A step of a case, with the requirement ids its expectation enforces
/// (a subset of the case's). A FAIL cites the failing step's ids, so that a
/// mutant is credited only with the rule it was caught breaking
/// (`cetp selftest`). Without `requirements`, a step cites the case's ids,
/// except a setup step (`observe`, a `negotiate` with no expectation),
/// which cites none; `[]` cites none.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct CaseStep {
    /// The step itself.
    #[serde(flatten)]
    pub step: Step,
    /// Requirement ids a FAIL of this step cites, instead of the case's (see [`CaseStep::cites`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requirements: Option<Vec<String>>,
}

impl CaseStep {
    /// The requirement ids a FAIL of this step cites.
    pub fn cites<'a>(&'a self, case: &'a Case) -> &'a [String] {
        match (&self.requirements, &self.step) {
            (Some(r), _) => r,
            (None, Step::Observe { .. }) | (None, Step::Negotiate { expect: None, .. }) => &[],
            (None, _) => &case.requirements,
        }
    }
}

fn default_tool_bind() -> String {
    "tool".into()
}

fn default_identities() -> Vec<String> {
    vec!["a".into()]
}

fn ident_a() -> String {
    "a".into()
}

/// Which tool a step uses.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ToolRef {
    /// A literal tool name (may be a template).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Pick the first listed tool matching these annotation values, e.g.
    /// `{"effect": ["delete"], "confirmation": ["always"]}`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pick: BTreeMap<String, Vec<Json>>,
    /// Pick the tool the profile names for a role (`observer`,
    /// `large_result`, `async`, ...), with that role's args. When the profile
    /// names no tool for it, `pick` decides; without `pick` the case cannot
    /// be judged with this profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile_role: Option<String>,
    /// Annotation values the chosen tool must have, however it was chosen
    /// (a role's tool included): a requirement that binds only such tools
    /// (§6 dedupe binds effect != read) has no subject on another tool, so
    /// the case is NOT_APPLICABLE by the spec.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub require: BTreeMap<String, Vec<Json>>,
    /// Does the step execute the tool (so the profile must allow it)?
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub executes: bool,
    /// Pick from the tool list of this session instead of the calling one
    /// (a tool the caller may not see, §7.2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listed_in: Option<String>,
    /// With `pick`: never this tool (a template naming a tool), for a case
    /// about a second, different tool (§6: a request_id reused with another
    /// tool).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_than: Option<String>,
}

fn yes() -> bool {
    true
}

// Serializing leaves out what deserializing would fill in anyway, so that a
// step written by a generator (cetp-fuzz) reads as one written by hand.
fn is_true(b: &bool) -> bool {
    *b
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Arguments for `execute_tool`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Args {
    /// Valid args: the profile's sample, or generated from input_schema.
    Valid,
    /// Args that break the input schema (generated).
    Invalid,
    /// The profile's "escalating" sample (a call the Provider's policy must
    /// confirm), falling back to `valid`.
    Escalating,
    /// Literal JSON value.
    Json(Json),
    /// Literal text (may be broken JSON).
    Text(String),
    /// The exact args text of an earlier bound call.
    SameAs(String),
    /// The args of an earlier bound call with object keys in another order
    /// (same canonical JSON, different bytes).
    ReorderedFrom(String),
    /// Valid args altered in one value (same keys, different content).
    AlteredFrom(String),
    /// As `altered_from`, or the same args when the schema fixes every
    /// value (for steps that try other args where any exist).
    AlteredOrSameFrom(String),
    /// Valid args padded past the negotiated max_request_bytes.
    Oversize,
}

/// A typed Bundle value in a vector: `{"t": "int", "v": 2}` (probe-wire
/// tags). String values may be templates.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TypedValue {
    /// The probe-wire type tag (`int`, `string`, `bool`, …).
    pub t: String,
    /// The value; a string may be a template.
    pub v: Json,
}

/// One step of the vector language: a protocol call, a device action, or an
/// assertion over what earlier steps bound. Run by [`crate::interp`].
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(tag = "do", rename_all = "snake_case", deny_unknown_fields)]
// Steps are parsed once per run and never moved in bulk: boxing the large
// variants would only obscure the data format.
#[allow(clippy::large_enum_variant)]
pub enum Step {
    /// `discover` on the device.
    Discover {
        /// Name to bind the discovery result to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bind: Option<String>,
        /// What the discovery must find.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expect: Option<DiscoverExpect>,
    },
    /// `negotiate`. Without `expect`, success with valid data is expected
    /// and the answer becomes a session usable by later calls.
    Negotiate {
        /// Identity (profile caller) the request is made as (default `a`, §7.1).
        #[serde(default = "ident_a", rename = "as")]
        as_: String,
        /// Versions offered (§2.2); default: `[2, 1]`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        versions: Option<Vec<i32>>,
        /// Default: every capability the harness knows.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        capabilities: Option<Vec<String>>,
        /// Replace the extras entirely (for malformed-request cases).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        extras: Option<BTreeMap<String, TypedValue>>,
        /// Name to bind the answer document and the session to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bind: Option<String>,
        /// What the answer must be; absent: a usable session (a valid success
        /// with a `session_token`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expect: Option<Expect>,
    },
    /// Any method call. With `session`, the common v2 fields are filled in
    /// (protocol_version, session_token, request_id, deadline_at_ms) and can
    /// then be overridden (`extras`) or removed (`omit`).
    Call {
        /// Identity (profile caller) the request is made as (default `a`, §7.1).
        #[serde(default = "ident_a", rename = "as")]
        as_: String,
        /// The protocol method (`list_tools`, `execute_tool`, …).
        method: String,
        /// Bound session whose token and limits the call uses.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        session: Option<String>,
        /// v1 call: no common v2 fields at all.
        #[serde(default, skip_serializing_if = "is_false")]
        v1: bool,
        /// The tool called (for `execute_tool` and tool-scoped methods).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool: Option<ToolRef>,
        /// The tool's arguments.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        args: Option<Args>,
        /// `new` (default: a fresh UUID), or a template / literal.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        request_id: Option<String>,
        /// Deadline relative to the device clock (ms); default +30000.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        deadline_in_ms: Option<i64>,
        /// `resume_token` to send (a template), for `get_operation` and friends (§4.4).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resume_token: Option<String>,
        /// `operation_id` to send (a template), §4.4.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        operation_id: Option<String>,
        /// A template the call needs: when an earlier answer has nothing
        /// there (the Provider answered synchronously, so there is no
        /// operation to ask about, §4.4 lets it), the step is skipped
        /// rather than the case stopped.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        only_if: Option<String>,
        /// Extra Bundle keys, overriding the generated ones (to break a request on purpose).
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        extras: BTreeMap<String, TypedValue>,
        /// Bundle keys removed from the generated request.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        omit: Vec<String>,
        /// The `arg` string of `ContentProvider.call`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        arg: Option<String>,
        /// Name to bind the answer to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bind: Option<String>,
        /// What the answer must be; absent: nothing checked beyond the always-on checks.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expect: Option<Expect>,
    },
    /// Poll `get_operation` until a terminal state, honouring poll_after_ms.
    Poll {
        /// Identity the polls are made as.
        #[serde(default = "ident_a", rename = "as")]
        as_: String,
        /// Bound session the operation belongs to.
        session: String,
        /// The bound `accepted` answer of the execution.
        operation_of: String,
        /// Device time to wait for a terminal state; default: the profile's
        /// `timing.operation_max_ms`, else 30 minutes. The spec sets no
        /// bound, so running out is never charged to the Provider.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_ms: Option<u64>,
        /// Name to bind the terminal answer to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bind: Option<String>,
        /// What the terminal answer must be.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expect: Option<Expect>,
    },
    /// Follow a bound execution to its final answer: an `accepted` one is
    /// polled to a terminal state, and the bound document then has the shape
    /// of a synchronous answer (`status`, `data` holding the result envelope,
    /// `result_fd`, or the error fields); a synchronous answer is itself.
    /// `via` in the document says which path the Provider chose.
    Settle {
        /// Identity the polls are made as.
        #[serde(default = "ident_a", rename = "as")]
        as_: String,
        /// Bound session the execution belongs to.
        session: String,
        /// The bound execution answer to settle.
        of: String,
        /// Name to bind the settled document to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bind: Option<String>,
        /// What the settled document must be.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expect: Option<Expect>,
    },
    /// Launch a PendingIntent and play one user decision.
    Resolve {
        /// Identity whose probe launches the PendingIntent.
        #[serde(default = "ident_a", rename = "as")]
        as_: String,
        /// Template naming the bound PendingIntent handle (§4.3).
        handle: String,
        /// The user decision to play: `approve`, `deny` or `dismiss`.
        decision: String,
    },
    /// Read a file descriptor of a large result (§4.5) through the probe.
    ReadFd {
        /// Identity whose probe reads it.
        #[serde(default = "ident_a", rename = "as")]
        as_: String,
        /// Template naming the bound descriptor handle.
        handle: String,
        /// Read at most this many bytes; default: one past the size
        /// `verify_against` declares, else [`crate::interp::MAX_FD_READ`].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_bytes: Option<u64>,
        /// Verify against the `data` of this bound file result.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        verify_against: Option<String>,
        /// Whether the bytes must match their declaration (default `true`);
        /// `false`: a mismatch is what the case expects.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expect_ok: Option<bool>,
        /// Also validate the file's JSON against the output_schema of the
        /// tool that answered `verify_against` (§4.2).
        #[serde(default, skip_serializing_if = "is_false")]
        output_schema: bool,
        /// Also require the descriptor to be read-only (§4.5), as far as
        /// the device reports its mode (`read_fd`'s `writable`).
        #[serde(default, skip_serializing_if = "is_false")]
        read_only: bool,
    },
    /// After a cancellation: `final` (a bound get_operation answer) reports
    /// `cancelled` only if the observer saw no effect since `since`, and
    /// `succeeded` only with exactly one.
    CancelConsistent {
        /// The bound final `get_operation` answer.
        #[serde(rename = "final")]
        final_: String,
        /// The bound observer snapshot the effects are counted from.
        since: String,
    },
    /// Bind a fresh request id (for calls that must share one).
    Uuid {
        /// Name to bind the request id to.
        bind: String,
    },
    /// Kill the Provider's process (memory lost, durable state kept).
    Restart,
    /// Let device time pass.
    Sleep {
        /// How long to sleep, in milliseconds.
        ms: u64,
    },
    /// Let what a case made (a finished request, an operation's outcome)
    /// grow old: on a device whose clock the harness can move, by `ms`, or
    /// until `margin_ms` short of the end of the idempotency window that the
    /// session `window_of` negotiated, counted from when the bound call
    /// `since` was sent (§2.2, §4.4, §6: outcomes are kept for the whole
    /// window); on any other device, by `fixed_clock_wait_ms` of real time,
    /// bounded, so that every device sees whether outcomes outlive a few
    /// minutes.
    Age {
        /// Age by exactly this many milliseconds.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ms: Option<u64>,
        /// Bound session whose negotiated idempotency window bounds the age.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        window_of: Option<String>,
        /// Bound call the window is counted from.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        since: Option<String>,
        /// How far short of the window's end to stop.
        #[serde(default, skip_serializing_if = "is_zero")]
        margin_ms: u64,
        /// Real time to wait on a device whose clock cannot be moved.
        fixed_clock_wait_ms: u64,
    },
    /// Let a lifetime run out: `ms`, or the duration the profile names
    /// under `[timing]` (a lifetime only the vendor knows, such as
    /// `resume_token_ttl_ms`), plus `plus_ms` (or the profile's
    /// `timing.expiry_margin_ms`). The device clock is moved at once where
    /// the harness can; elsewhere (a phone) the case waits in real time,
    /// overlapping other cases, and a wait beyond `--max-wait` leaves the
    /// case not judged, naming the flag.
    AdvanceClock {
        /// Advance by exactly this many milliseconds.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ms: Option<u64>,
        /// Name of the profile's `[timing]` lifetime to advance by.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        profile: Option<String>,
        /// Move the clock to an RFC 3339 time (a template over a bound
        /// answer, e.g. a session's `expires_at`), then `plus_ms` further.
        /// A list moves it to the latest of its times: every session it
        /// names is then past its lifetime, however long the device took
        /// between their negotiations (one time alone leaves a session
        /// negotiated later alive or not by the device's speed).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        until: Option<Until>,
        /// Extra milliseconds past the target time.
        #[serde(default, skip_serializing_if = "is_zero")]
        plus_ms: u64,
    },
    /// Take a snapshot through the profile's observer and bind it.
    Observe {
        /// Name to bind the snapshot to.
        bind: String,
    },
    /// `delta` effects happened since the snapshot `since`, judged as far as
    /// the observer allows (`observer.counts`): a counter of effects moved by
    /// `delta`; a count of objects moved by `delta` in the direction of the
    /// tool's effect (create +1, delete -1); a snapshot changed (delta > 0)
    /// or not (delta = 0). `tool_of` names a bound call whose tool made the
    /// effects: a read tool makes none, whatever `delta` says.
    ExpectEffects {
        /// The bound snapshot taken before.
        since: String,
        /// Number of effects expected since then.
        delta: i64,
        /// Bound call whose tool made the effects.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool_of: Option<String>,
    },
    /// Run calls at the same time (for single-executor tests).
    Concurrent {
        /// The calls to run at once.
        steps: Vec<Step>,
    },
    /// Run `steps` only when the answer bound to `of` is an error with one
    /// of `error_code`: a choice the Provider may make (asking for a
    /// confirmation again) that the rest of the case follows to its end.
    IfAnswer {
        /// The bound answer inspected.
        of: String,
        /// Error codes that select the branch.
        error_code: Vec<String>,
        /// Steps run when it is selected.
        steps: Vec<Step>,
    },
    /// Run `steps` once for each tool of `session`'s list that matches
    /// `pick` and that the profile lets the harness execute, with the tool's
    /// name bound to `bind` (default `tool`). Without any such tool the case
    /// is not judged.
    EachTool {
        /// Bound session whose tool list is walked.
        session: String,
        /// Annotation values a tool must have to be walked.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        pick: BTreeMap<String, Vec<Json>>,
        /// Name each tool is bound to while its steps run.
        #[serde(default = "default_tool_bind")]
        bind: String,
        /// Steps run once per tool.
        steps: Vec<Step>,
    },
    /// Two bound answers carry the same terminal result (or, with
    /// `different`, differ in at least one of the pointers).
    Same {
        /// First bound answer.
        a: String,
        /// Second bound answer.
        b: String,
        /// JSON pointers into the answer documents; default: status,
        /// error_code and data.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pointers: Vec<String>,
        /// Require a difference instead of sameness.
        #[serde(default, skip_serializing_if = "is_false")]
        different: bool,
        /// Skip the comparison when either answer is an error with one of
        /// these codes (an outcome the spec allows instead of the shared
        /// result, such as RATE_LIMITED for a call over the limit).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        unless_code: Vec<String>,
        /// Compare only when `b` has this status (one outcome among several
        /// the spec allows).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        if_status: Option<String>,
    },
    /// Two templates expand to equal values.
    Equal {
        /// First template.
        a: String,
        /// Second template, expanding to the same value.
        b: String,
    },
    /// Session tokens (templates) look unpredictable: long enough, varied,
    /// and unrelated to each other.
    TokensUnpredictable {
        /// The tokens, each a template.
        tokens: Vec<String>,
    },
    /// Two bound list_tools answers: different tool lists must carry
    /// different revisions.
    RevisionConsistent {
        /// First bound `list_tools` answer (§3.3).
        a: String,
        /// Second bound `list_tools` answer.
        b: String,
    },
    /// The v1 tool list (bound answer `v1`) holds only tools that the v2
    /// list (bound answer `v2`) declares with effect=read.
    V1ReadOnly {
        /// The bound v1 tool list (§8).
        v1: String,
        /// The bound v2 `list_tools` answer.
        v2: String,
    },
    /// Two bound values differ.
    Differ {
        /// First bound value.
        a: String,
        /// Second bound value.
        b: String,
    },
    /// Check that a bound value satisfies an assertion.
    Assert {
        /// Template naming the bound value.
        value: String,
        /// What it must satisfy.
        #[serde(flatten)]
        assertion: Assertion,
    },
}

/// What an answer must look like; every field left empty is not checked.
#[derive(Clone, Debug, Deserialize, Default, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// `success`, `accepted`, `error` (one or several).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub status: Vec<String>,
    /// Accepted error codes (§5), for an error answer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub error_code: Vec<String>,
    /// Required `retryable` flag of an error answer (§5, §6).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retryable: Option<bool>,
    /// Bundle keys that must be present / absent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub has: Vec<String>,
    /// Bundle keys that must be absent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lacks: Vec<String>,
    /// Assertions on the answer document (see [`crate::answer`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub data: Vec<Assertion>,
    /// The answer is a v1 answer (no v2 fields required).
    #[serde(default, skip_serializing_if = "is_false")]
    pub v1: bool,
    /// The call must return null / throw.
    #[serde(default, skip_serializing_if = "is_false")]
    pub null_result: bool,
    /// The call must throw rather than answer.
    #[serde(default, skip_serializing_if = "is_false")]
    pub threw: bool,
    /// An inline result must match the tool's output_schema.
    #[serde(default, skip_serializing_if = "is_false")]
    pub output_schema: bool,
    /// Any answer that is not `success` (an error or a throw) is accepted.
    #[serde(default, skip_serializing_if = "is_false")]
    pub refused: bool,
    /// The case's subject is a background operation: `accepted` is
    /// required, and a synchronous answer (which the Provider may always
    /// give, §2.3) leaves the case unjudged, naming the profile role
    /// `[roles.async]` that would make one.
    #[serde(default, skip_serializing_if = "is_false")]
    pub operation: bool,
    /// With `operation`: a synchronous error also leaves the case unjudged
    /// (the case is about an operation that fails, and the Provider failed
    /// the call at once instead, which the checks still judge).
    #[serde(default, skip_serializing_if = "is_false")]
    pub sync_failure_ok: bool,
    /// The case's subject is a confirmation request: when the Provider
    /// refuses the call outright instead (an error that is neither
    /// USER_ACTION_REQUIRED nor AUTH_REQUIRED, and no effect), it took the
    /// stricter policy §3.4 allows, and the case does not apply.
    #[serde(default, skip_serializing_if = "is_false")]
    pub asks: bool,
    /// The case's subject is a result too large to inline (the profile's
    /// `[roles.large_result]`): a success that carries it inline within the
    /// session's negotiated `max_inline_result_bytes` is where it must go
    /// (§4.5), so the case is not judged for that role, naming the role and
    /// the limit.
    #[serde(default, skip_serializing_if = "is_false")]
    pub large: bool,
}

/// One assertion on a value at a JSON pointer; each set field must hold.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Assertion {
    /// JSON pointer into the answer document.
    pub pointer: String,
    /// The value equals this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub equals: Option<Json>,
    /// The value equals one of these.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub one_of: Option<Vec<Json>>,
    /// The pointer resolves (`true`) or not (`false`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exists: Option<bool>,
    /// The value (an array) does not contain an element equal to any of these.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excludes: Option<Vec<Json>>,
    /// Every element (an array of objects) has a member matching at pointer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all: Option<Box<Assertion>>,
    /// The value is a number at least this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    /// The value is a number at most this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
}

/// What a `discover` step must find (§2.1).
#[derive(Clone, Debug, Deserialize, Default, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DiscoverExpect {
    /// The Provider under test is found and its manifest is well formed.
    #[serde(default, skip_serializing_if = "is_false")]
    pub found: bool,
    /// The discovered service and its authority share a package.
    #[serde(default, skip_serializing_if = "is_false")]
    pub same_package: bool,
    /// A dual-stack declaration keeps version=1 for v1 Consumers.
    #[serde(default, skip_serializing_if = "is_false")]
    pub legacy_version_kept: bool,
    /// The manifest declares v1 (a read-only v1 path is kept).
    #[serde(default, skip_serializing_if = "is_false")]
    pub v1_declared: bool,
}

/// `advance_clock`'s `until`: one time, or several (the latest counts).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(untagged)]
pub enum Until {
    /// One time.
    One(String),
    /// Several times: the latest of them.
    Latest(Vec<String>),
}

impl Until {
    /// The time templates, one or several.
    pub fn templates(&self) -> &[String] {
        match self {
            Until::One(t) => std::slice::from_ref(t),
            Until::Latest(ts) => ts,
        }
    }
}
