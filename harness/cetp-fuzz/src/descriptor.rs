//! The descriptor oracle: a shadow of a Provider the reference does not
//! implement, built from the protocol and the target's own descriptors.
//!
//! The reference's engine hosts a described app (`cetp_reference::provider::
//! described`) made of the target's tool list, provider info, capabilities
//! and limits; every business answer of that app is the one the target gave
//! to the same call, when the descriptor allows it. So a sequence runs on the
//! target first, every answer recorded (the regular checks judge each one);
//! then on the shadow, whose engine decides everything the protocol decides
//! (sessions, schema-checked args, dedupe and replays, confirmations and
//! resume tokens, operations and their owners, capabilities, the v1 view)
//! while its business repeats the target's choices. Where the shadow's
//! answer class differs from the target's, the target did something neither
//! the protocol nor its own earlier answers allow.
//!
//! What one answer cannot tell (whether a business error is a terminal
//! result, whether it committed an effect, how long an operation takes and
//! how it ends) the shadow runs both ways ([`Flavour::QUICK`] and
//! [`Flavour::SLOW`]); where the two disagree the step's expectation is
//! widened to every business outcome §5 allows. Legal variants stay in the
//! oracle: when the reference engine's shadow finds something, the shadow is
//! built again on every legal variant and only their union judges.

use crate::exec::{run_case, CaseRun};
use crate::moves::{GenStep, Meta};
use crate::oracle::{class, compile_step, effect_delta, oracle_steps, to_case, with_steps};
use crate::oracle::{OpenOperations, MAX_ROUNDS};
use cetp_proto::device::{CallAnswer, FdRead};
use cetp_proto::envelope::Capability;
use cetp_proto::provider::{Decision, ResolveOutcome, ServiceManifest};
use cetp_proto::schema::{CompiledSchema, DEFAULT_DIALECT};
use cetp_proto::{Bundle, ErrorCode, Value};
use cetp_reference::device::{DeviceClock, IDENTITY_B};
use cetp_reference::provider::{
    Business, BusinessAnswer, BusinessCall, Described, DescribedTool, Flavour, ManifestVariant,
    ProviderConfig, ReferenceProvider, Variant,
};
use cetp_vectors::device::{Device, DeviceError, HelloInfo, Target};
use cetp_vectors::interp::{Env, Stop};
use cetp_vectors::profile::{Counts, Profile};
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::{json, Value as Json};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Error codes a business may answer `execute_tool` with once the protocol
/// let the call through (§5, §7.3: a Provider checks what it relies on
/// beyond the schema).
const BUSINESS: &[ErrorCode] = &[
    ErrorCode::PermissionDenied,
    ErrorCode::InvalidArgs,
    ErrorCode::Conflict,
    ErrorCode::RateLimited,
    ErrorCode::DeadlineExceeded,
    ErrorCode::ResultTooLarge,
    ErrorCode::Unavailable,
    ErrorCode::InternalError,
];

/// Where the shadow's two flavours disagree, the business decided: these
/// are the outcomes it may have chosen (the execution's own, and a
/// background operation's: cancelled, expired).
const WIDE: &[&str] = &[
    "AUTH_REQUIRED",
    "USER_ACTION_REQUIRED",
    "PERMISSION_DENIED",
    "INVALID_ARGS",
    "CONFLICT",
    "RATE_LIMITED",
    "DEADLINE_EXCEEDED",
    "RESULT_TOO_LARGE",
    "UNAVAILABLE",
    "INTERNAL_ERROR",
    "CANCELLED",
    "RESULT_EXPIRED",
];

/// Steps that change nothing on the Provider and draw nothing from the
/// interpreter's generator: the shadow may drop them without shifting the
/// request ids of the steps after them (all but `cancel_consistent` where
/// the target's run took a snapshot, which is replaced by one instead, so
/// that the snapshots' own stream stays aligned too:
/// [`draws_a_request_id`]).
const PURE: &[&str] = &[
    "same",
    "equal",
    "differ",
    "assert",
    "tokens_unpredictable",
    "revision_consistent",
    "v1_read_only",
    "read_fd",
    "cancel_consistent",
];

/// Whether a pure step took an observer snapshot in the target's run
/// `trun`: `cancel_consistent` judges the effects by a snapshot of its own
/// when the final state it reads is `cancelled` or `succeeded`; after
/// `failed` (nothing to judge) or a state it refuses, it takes none. What
/// the target's run did decides, not what the shadow's did: the snapshots'
/// request ids (their own stream, which never moves the calls') follow the
/// target's, and with them any refusal of the observer it repeats.
fn draws_a_request_id(step: &Json, trun: &CaseRun) -> bool {
    if step.get("do").and_then(Json::as_str) != Some("cancel_consistent") {
        return false;
    }
    let state = step
        .get("final")
        .and_then(Json::as_str)
        .and_then(|f| trun.bindings.get(f))
        .and_then(|d| d.pointer("/data/state"))
        .and_then(Json::as_str);
    matches!(state, Some("cancelled" | "succeeded"))
}

/// Identifies one `execute_tool` call across the target and the shadow: the
/// identity, request id, tool and args text (the generator makes them the
/// same on both for the same seed).
pub type Key = (String, String, String, String);

fn key_of(identity: &str, method: &str, extras: Option<&Bundle>) -> Option<Key> {
    if method != "execute_tool" {
        return None;
    }
    let b = extras?;
    let s = |k: &str| b.opt_string(k).ok().flatten().unwrap_or_default();
    Some((
        identity.to_string(),
        s("request_id"),
        s("tool_name"),
        s("args"),
    ))
}

/// The target's answers to its `execute_tool` calls during one run, in
/// order per call.
#[derive(Default)]
pub struct Transcript {
    calls: Mutex<HashMap<Key, Vec<CallAnswer>>>,
}

impl Transcript {
    /// Forgets the answers of the previous run (before each target run).
    pub fn clear(&self) {
        self.calls.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    fn record(&self, key: Key, answer: CallAnswer) {
        let mut c = self.calls.lock().unwrap_or_else(|e| e.into_inner());
        // A hostile or looping sequence is bounded by the run's own limits;
        // this only keeps one call's history from growing without end.
        let v = c.entry(key).or_default();
        if v.len() < 64 {
            v.push(answer);
        }
    }

    /// A copy of the answers recorded so far, for the shadow to repeat.
    pub fn snapshot(&self) -> HashMap<Key, Vec<CallAnswer>> {
        self.calls.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The target's device, recording what it answers `execute_tool`.
struct Recorder {
    inner: Box<dyn Device>,
    identity: &'static str,
    transcript: Arc<Transcript>,
}

/// The shadow's device: before each `execute_tool` it hands the business
/// the target's answer to the same call, and before every call it records
/// every refusal the request's faults could draw ([`Refusals`]).
struct Mirror {
    inner: Box<dyn Device>,
    identity: &'static str,
    uid: u32,
    business: Arc<MirrorBusiness>,
    provider: Arc<ReferenceProvider>,
}

/// Per request (its identity, method and extras as the interpreter binds
/// them): the codes of every refusal one of its faults could draw. No
/// clause orders the checks of a request that carries several faults, so
/// any of them is the Provider's to answer.
type Refusals = HashMap<String, BTreeSet<String>>;

fn refusal_key(identity: &str, method: &str, extras: &Json) -> String {
    format!("{identity} {method} {extras}")
}

impl Device for Recorder {
    forward_device!();
    fn call(
        &self,
        authority: &str,
        method: &str,
        arg: Option<&str>,
        extras: Option<&Bundle>,
        timeout_ms: u64,
    ) -> Result<CallAnswer, DeviceError> {
        let r = self.inner.call(authority, method, arg, extras, timeout_ms);
        if let (Some(k), Ok(a)) = (key_of(self.identity, method, extras), &r) {
            self.transcript.record(k, a.clone());
        }
        r
    }
}

impl Mirror {
    /// Records what each fault of this request, checked first, would draw:
    /// the engine's own checks, and a scope the profile says the caller
    /// lacks (asked for or refused: §3.4, §7.2).
    fn note_refusals(&self, method: &str, extras: Option<&Bundle>) {
        let mut codes = if method == "negotiate" {
            self.provider.negotiate_refusals(extras)
        } else {
            self.provider
                .refusals(self.uid, self.inner.now_ms(), method, extras)
        };
        // Asked for or refused, also once b approved something
        // (`granted_b`): whether that grant covers this scope, or whether
        // the approval was a grant at all (the Java sample confirms one
        // call at a time), is the target's business. `granted_b` stops the
        // shadow requiring the refusal, never admitting it: the JVM device,
        // once it played decisions, drew three false findings in ten
        // minutes (b's complete_tasks refused PERMISSION_DENIED after b had
        // approved an escalated add_task).
        let lacking = extras
            .and_then(|b| b.opt_string("tool_name").ok().flatten())
            .is_some_and(|t| {
                self.uid == IDENTITY_B.uid && self.business.shape.lacking_b.contains(&t)
            });
        if lacking && method == "execute_tool" {
            codes.insert(ErrorCode::AuthRequired);
            codes.insert(ErrorCode::PermissionDenied);
        }
        if codes.is_empty() {
            return;
        }
        let extras = extras.map_or(Json::Null, cetp_vectors::answer::bundle_to_json);
        self.business
            .refusals
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(refusal_key(self.identity, method, &extras))
            .or_default()
            .extend(codes.iter().map(|c| c.as_str().to_string()));
    }
}

impl Device for Mirror {
    forward_device!();
    fn call(
        &self,
        authority: &str,
        method: &str,
        arg: Option<&str>,
        extras: Option<&Bundle>,
        timeout_ms: u64,
    ) -> Result<CallAnswer, DeviceError> {
        self.note_refusals(method, extras);
        let Some(k) = key_of(self.identity, method, extras) else {
            return self.inner.call(authority, method, arg, extras, timeout_ms);
        };
        let request_id = k.1.clone();
        self.business.arm(k);
        let r = self.inner.call(authority, method, arg, extras, timeout_ms);
        self.business.disarm(&request_id);
        r
    }
}

/// The target with its `execute_tool` answers recorded into `transcript`.
pub fn recording(target: Target, transcript: Arc<Transcript>) -> Target {
    Target {
        label: target.label,
        a: Box::new(Recorder {
            inner: target.a,
            identity: "a",
            transcript: transcript.clone(),
        }),
        b: target.b.map(|b| {
            Box::new(Recorder {
                inner: b,
                identity: "b",
                transcript,
            }) as Box<dyn Device>
        }),
    }
}

/// The business of one shadow run: the target's answers by call, handed
/// over by [`Mirror`] for the call being served.
struct MirrorBusiness {
    answers: HashMap<Key, Vec<CallAnswer>>,
    /// Calls of each key seen so far in this shadow run.
    seen: Mutex<HashMap<Key, usize>>,
    /// Request id → the target's answer to the call being served (`None`:
    /// the target made no such call).
    armed: Mutex<HashMap<String, Option<CallAnswer>>>,
    shape: Arc<Shape>,
    flavour: Flavour,
    /// What each request's faults could draw, recorded by [`Mirror`].
    refusals: Mutex<Refusals>,
}

impl MirrorBusiness {
    fn arm(&self, k: Key) {
        let n = {
            let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
            let n = seen.entry(k.clone()).or_insert(0);
            *n += 1;
            *n - 1
        };
        let answer = self.answers.get(&k).and_then(|v| v.get(n)).cloned();
        self.armed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(k.1, answer);
    }

    fn disarm(&self, request_id: &str) {
        self.armed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(request_id);
    }

    /// The business answer the target's answer stands for, when the
    /// descriptor allows one; `None` when the target answered something the
    /// business cannot (a protocol error, a throw).
    fn business_of(&self, index: usize, answer: &CallAnswer) -> Option<BusinessAnswer> {
        let CallAnswer::Result(Some(b)) = answer else {
            return None;
        };
        let fallback = self.shape.fallback(index);
        match b.opt_string("status").ok().flatten()?.as_str() {
            "success" => {
                let data = b.opt_string("data").ok().flatten()?;
                let data: Json = serde_json::from_str(&data).ok()?;
                let value = match (data.get("kind").and_then(Json::as_str), data.get("value")) {
                    (Some("inline"), Some(v)) if self.shape.output_valid(index, v) => v.clone(),
                    // A file's content is not read here (the step that reads
                    // it judges it); its class is what the shadow repeats.
                    _ => fallback,
                };
                Some(BusinessAnswer::Value(value))
            }
            "accepted" => Some(BusinessAnswer::Accepted { value: fallback }),
            "error" => {
                let code = ErrorCode::parse(&b.opt_string("error_code").ok().flatten()?)?;
                let retryable = match b.get("retryable") {
                    Some(Value::Bool(r)) => Some(*r),
                    _ => None,
                };
                match code {
                    ErrorCode::UserActionRequired => Some(BusinessAnswer::AskConfirm),
                    // A tool that always confirms may ask for its
                    // confirmation with AUTH_REQUIRED (§4.3 names both): the
                    // engine's own variants decide the code.
                    ErrorCode::AuthRequired if self.shape.tools[index].confirmation == "always" => {
                        Some(BusinessAnswer::AskConfirm)
                    }
                    ErrorCode::AuthRequired => Some(BusinessAnswer::AskGrant),
                    c if BUSINESS.contains(&c) => Some(BusinessAnswer::Error { code, retryable }),
                    _ => None,
                }
            }
            _ => None,
        }
    }
}

impl Business for MirrorBusiness {
    fn decide(&self, call: &BusinessCall<'_>) -> BusinessAnswer {
        let index = self.shape.index_of(&call.tool.name);
        let target = self
            .armed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(call.request_id)
            .cloned()
            .flatten();
        let mirrored = index.and_then(|i| target.as_ref().and_then(|a| self.business_of(i, a)));
        let asks = matches!(
            mirrored,
            Some(
                BusinessAnswer::Error { .. }
                    | BusinessAnswer::AskConfirm
                    | BusinessAnswer::AskGrant
            )
        );
        // What the profile says the protocol decides for this caller and
        // these args: a scope identity b lacks is asked for or refused
        // (§3.4, §7.2: AUTH_REQUIRED, or PERMISSION_DENIED; a confirmation
        // request is the strictest reading), never served before a grant
        // is approved; a call the vendor's own policy escalates is
        // confirmed (or refused) before it acts (§3.4 runtime risk).
        let lacking = call.uid == IDENTITY_B.uid && self.shape.lacking_b.contains(&call.tool.name);
        if lacking && (call.confirmed || call.granted) {
            // Approved in this run: the target may keep the grant, so later
            // sequences (whose shadow starts afresh) no longer know b lacks it.
            self.shape.granted_b.store(true, Ordering::Relaxed);
        }
        if !call.confirmed && !call.granted && !asks {
            if lacking && !self.shape.granted_b.load(Ordering::Relaxed) {
                return BusinessAnswer::AskGrant;
            }
            if call.tool.confirmation != "never"
                && self
                    .shape
                    .escalating
                    .get(&call.tool.name)
                    .is_some_and(|a| a.contains(call.args))
            {
                return BusinessAnswer::AskConfirm;
            }
        }
        let fallback = index.map_or(Json::Null, |i| self.shape.fallback(i));
        // The observer is the harness's eyes: the shadow reports its own
        // count of effects there, the target its own.
        if let Some((tool, pointer, _)) = &self.shape.observer {
            if *tool == call.tool.name {
                return match mirrored {
                    // A refusal, or a grant or confirmation it asks for
                    // (the observer tool may be one a caller lacks a scope
                    // for), is repeated as is.
                    Some(
                        a @ (BusinessAnswer::Error { .. }
                        | BusinessAnswer::AskGrant
                        | BusinessAnswer::AskConfirm),
                    ) => a,
                    other => {
                        let base = match other {
                            Some(BusinessAnswer::Value(v)) => v,
                            _ => fallback,
                        };
                        // The count in the shape the target's output
                        // schema gives the pointer (a number, or a list
                        // whose length counts): nothing the shadow writes
                        // may fire a check of its own.
                        let count = self.shape.observed.value(call.effects);
                        BusinessAnswer::Value(set_pointer(base, pointer, count))
                    }
                };
            }
        }
        match mirrored {
            Some(a) => a,
            // Nothing to repeat (the target made no such call, or answered
            // what no business may): each flavour answers its own way, and
            // the step's expectation is widened where they disagree.
            None if self.flavour.op_fails => BusinessAnswer::Error {
                code: ErrorCode::InternalError,
                retryable: Some(false),
            },
            None => BusinessAnswer::Value(fallback),
        }
    }
}

/// `value` with `n` at `pointer`, objects made along the way.
fn set_pointer(mut value: Json, pointer: &str, n: Json) -> Json {
    if pointer.is_empty() {
        return n;
    }
    let mut cur = &mut value;
    let parts: Vec<String> = pointer
        .trim_start_matches('/')
        .split('/')
        .map(|p| cetp_proto::pointer::unescape(p).into_owned())
        .collect();
    for (i, p) in parts.iter().enumerate() {
        if !cur.is_object() {
            *cur = json!({});
        }
        let Some(obj) = cur.as_object_mut() else {
            break;
        };
        if i + 1 == parts.len() {
            obj.insert(p.clone(), n);
            break;
        }
        cur = obj.entry(p.clone()).or_insert_with(|| json!({}));
    }
    value
}

/// Why the target could not be learned.
#[derive(Debug)]
pub enum LearnError {
    /// It failed the learning case itself (a session, its provider info or
    /// its tool list): a protocol failure before any fuzzing, with the case
    /// that shows it.
    Fail {
        /// The learning case, as a regular case file.
        case: Json,
        /// Why it failed.
        reason: String,
        /// Requirement ids the failure cites.
        cited: Vec<String>,
    },
    /// It could not be run or judged (setup, infrastructure): an error the
    /// run reports, not a finding.
    Other(String),
}

/// What the shadow knows of the target, learned once.
pub struct Shape {
    tools: Vec<DescribedTool>,
    outputs: Vec<Option<CompiledSchema>>,
    fallbacks: Vec<Json>,
    info: Json,
    capabilities: BTreeSet<Capability>,
    hidden_b: BTreeSet<String>,
    limits: cetp_reference::provider::Limits,
    session_ttl_ms: i64,
    resume_ttl_ms: i64,
    package: String,
    authority: String,
    manifest: ManifestVariant,
    /// The observer's tool and pointer, when it counts effects or objects
    /// (the shadow's count of effects there: equal snapshots mean no
    /// effect, which either unit shows).
    observer: Option<(String, String, Counts)>,
    /// How the shadow writes its count at the observer's pointer.
    observed: Observed,
    /// Tools identity b lacks a scope for: the profile's
    /// `scope_missing_for_b` and `read_scope_missing_for_b` roles name one
    /// each (the vendor knows who holds what; descriptors do not), and any
    /// tool that declares every scope of a named one lacks it too (§3.4:
    /// every call checks every declared scope).
    lacking_b: BTreeSet<String>,
    /// A resolution approved a call of b's that lacked a scope, in some
    /// sequence of the run: the target may hold the grant from then on (and
    /// which scopes it covers is its business), so `lacking_b` is no longer
    /// enforced.
    granted_b: AtomicBool,
    /// Args per tool that the Provider's own policy must confirm (the
    /// profile's `escalating_args` and `escalating` role; §3.4 runtime risk
    /// above the annotation).
    escalating: HashMap<String, Vec<Json>>,
}

impl Shape {
    fn index_of(&self, name: &str) -> Option<usize> {
        self.tools.iter().position(|t| t.name == name)
    }
    fn fallback(&self, i: usize) -> Json {
        self.fallbacks.get(i).cloned().unwrap_or(Json::Null)
    }
    fn output_valid(&self, i: usize, v: &Json) -> bool {
        self.outputs
            .get(i)
            .and_then(Option::as_ref)
            .is_some_and(|s| s.is_valid(v))
    }

    /// How many tools the target describes.
    pub fn tools(&self) -> usize {
        self.tools.len()
    }

    /// Learns the target's descriptors: one session per identity (every
    /// capability offered), its provider info and tool lists.
    pub fn learn(
        target: &Target,
        profile: &Profile,
        env: &Env,
        seed: u64,
    ) -> Result<Shape, LearnError> {
        let case = learning_case(target.b.is_some());
        let parsed =
            serde_json::from_value(case.clone()).map_err(|e| LearnError::Other(e.to_string()))?;
        let before = target.a.now_ms();
        let run = run_case(target, profile, env, &Default::default(), &parsed, seed);
        learned(&run, case)?;
        let get = |b: &str, p: &str| learned_value(&run, b, p);
        let tools: Vec<DescribedTool> = get("l", "/data/tools")
            .and_then(|t| t.as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter_map(DescribedTool::from_json)
            .collect();
        let hidden_b = hidden_from_b(&tools, get("lb", "/data/tools"));
        let capabilities = get("s", "/data/capabilities")
            .and_then(|c| c.as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter_map(|c| c.as_str().and_then(Capability::parse))
            .collect();
        let limits = learned_limits(&run);
        let session_ttl_ms = session_ttl_ms(get("s", "/data/expires_at"), before);
        let outputs = tools
            .iter()
            .map(|t| CompiledSchema::compile(&t.output_schema, DEFAULT_DIALECT).ok())
            .collect();
        let fallbacks: Vec<Json> = tools
            .iter()
            .map(|t| generate(&t.output_schema, seed))
            .collect();
        let observer = profile
            .observer
            .as_ref()
            .filter(|o| matches!(o.counts, Counts::Effects | Counts::Objects))
            .map(|o| (o.tool.clone(), o.pointer.clone(), o.counts));
        let observed = profile
            .observer
            .as_ref()
            .map(|o| Observed::of(&tools, &fallbacks, o, seed))
            .unwrap_or(Observed::Number { base: 0 });
        let lacking_b = lacking_for_b(&tools, profile);
        let escalating = escalating_args(&tools, profile);
        Ok(Shape {
            tools,
            outputs,
            fallbacks,
            info: get("i", "/data").unwrap_or(json!({})),
            capabilities,
            hidden_b,
            limits,
            session_ttl_ms,
            resume_ttl_ms: profile
                .timing_ms("resume_token_ttl_ms")
                .map_or(cetp_reference::provider::RESUME_TOKEN_TTL_MS, |t| t as i64),
            package: env.package.clone(),
            authority: env.authority.clone(),
            manifest: match env.manifest_kind.as_str() {
                "v2_only" => ManifestVariant::V2Only,
                _ => ManifestVariant::DualStack,
            },
            observer,
            observed,
            lacking_b,
            granted_b: AtomicBool::new(false),
            escalating,
        })
    }
}

/// The descriptor oracle's learning case: a session per identity (every
/// capability offered), the provider info and the tool lists, each
/// required to succeed (`with_b`: the target has a second identity).
fn learning_case(with_b: bool) -> Json {
    let mut steps = vec![
        json!({"do": "negotiate", "bind": "s"}),
        json!({"do": "call", "method": "get_provider_info", "session": "s", "bind": "i",
               "expect": {"status": ["success"]}, "requirements": ["CETP2-4-02"]}),
        json!({"do": "call", "method": "list_tools", "session": "s", "bind": "l",
               "expect": {"status": ["success"]}, "requirements": ["CETP2-4-03"]}),
    ];
    if with_b {
        steps.push(json!({"do": "negotiate", "as": "b", "bind": "sb"}));
        steps.push(
            json!({"do": "call", "as": "b", "method": "list_tools", "session": "sb",
                          "bind": "lb", "expect": {"status": ["success"]}, "requirements": ["CETP2-4-03"]}),
        );
    }
    json!({"id": "FUZZ-LEARN", "title": "learn the target's descriptors",
                      "role": "provider", "level": "MUST", "requirements": [],
                      "identities": if with_b { json!(["a", "b"]) } else { json!(["a"]) },
                      "steps": steps})
}

/// Whether the learning run went to its end: its FAIL is the target's
/// (`case` becomes the finding), any other stop an error of the harness.
fn learned(run: &CaseRun, case: Json) -> Result<(), LearnError> {
    match &run.stop {
        None => Ok(()),
        Some(Stop::Fail(reason)) => Err(LearnError::Fail {
            case,
            reason: reason.clone(),
            cited: run.cited.clone(),
        }),
        Some(stop) => Err(LearnError::Other(format!(
            "could not learn the target's descriptors: {}",
            crate::exec::describe_stop(stop)
        ))),
    }
}

/// The value at pointer `p` of the learning run's binding `b`.
fn learned_value(run: &CaseRun, b: &str, p: &str) -> Option<Json> {
    run.bindings.get(b).and_then(|d| d.pointer(p)).cloned()
}

/// The limits the target negotiated in the learning run's session `s`,
/// never below §2.2's minimums: a target that negotiates less is judged by
/// the checks, and the shadow stays a conforming Provider.
fn learned_limits(run: &CaseRun) -> cetp_reference::provider::Limits {
    let limit = |k: &str, min: u64| {
        learned_value(run, "s", &format!("/data/limits/{k}"))
            .and_then(|v| v.as_u64())
            .unwrap_or(min)
            .max(min)
    };
    cetp_reference::provider::Limits {
        max_request_bytes: limit("max_request_bytes", 65_536),
        max_inline_result_bytes: limit("max_inline_result_bytes", 262_144),
        max_concurrent_requests: limit("max_concurrent_requests", 1),
        idempotency_window_seconds: limit("idempotency_window_seconds", 86_400),
    }
}

/// The judged case: the steps compiled for the target's run, and the run
/// as judged (the verdict's FAIL, else the target's own stop); nothing
/// when no step expects anything and no check fired.
fn judged(
    header: &Json,
    compiled: Vec<Json>,
    verdict: Option<(usize, String, Vec<String>)>,
    trun: &CaseRun,
) -> Judged {
    if compiled.iter().all(|s| {
        s.get("expect").is_none()
            && !matches!(s.get("do").and_then(Json::as_str), Some("expect_effects"))
    }) && trun.checks.is_empty()
        && verdict.is_none()
    {
        return Judged::Nothing;
    }
    let case = with_steps(header, compiled);
    let run = CaseRun {
        stop: verdict
            .as_ref()
            .map(|(_, why, _)| Stop::Fail(why.clone()))
            .or_else(|| trun.stop.clone().filter(|s| !matches!(s, Stop::Fail(_)))),
        step: verdict.as_ref().map_or(trun.step, |(n, _, _)| *n),
        bindings: trun.bindings.clone(),
        checks: trun.checks.clone(),
        cited: verdict.map(|(_, _, c)| c).unwrap_or_default(),
        answers: trun.answers,
        dispatched: trun.dispatched,
    };
    Judged::Ran { case, run }
}

/// The target FAILed step `i`, which every shadow run that reached it
/// passed and none stopped at: a finding (a step only transient answers
/// fail is not).
fn fail_every_run_passed(
    stop: &Stop,
    i: usize,
    s: &GenStep,
    runs: &[&CaseRun],
    trun: &CaseRun,
    compiled: &mut Vec<Json>,
) -> Option<(usize, String, Vec<String>)> {
    let Stop::Fail(reason) = stop else {
        return None;
    };
    let reached = runs.iter().any(|r| r.stop.is_none() || r.step > i + 1);
    // A run that could not judge this step (the profile or device cannot
    // show what its own path needs, e.g. a legal variant that refused a
    // cancel and so has an effect to count by an observer of objects)
    // vouches neither way: the target's FAIL rests on its own answers.
    let stopped_here = runs.iter().any(|r| {
        r.step == i + 1
            && r.stop
                .as_ref()
                .is_some_and(|s| !matches!(s, Stop::Setup { .. } | Stop::NotApplicable(_)))
    });
    if stopped_here || !reached || transient(trun, &s.step) {
        return None;
    }
    compiled.push(s.step.clone());
    Some((
        compiled.len(),
        format!("{reason} (every run of the descriptor shadow passed this step)"),
        reqs(&s.step),
    ))
}

/// The target failed a step the shadow dropped, after its last kept one
/// and before the first it could not vouch for.
fn dropped_step_failed(
    original: &[GenStep],
    orig: &[usize],
    limit: usize,
    target_stop: Option<(usize, &Stop)>,
    compiled: &mut Vec<Json>,
) -> Option<(usize, String, Vec<String>)> {
    let (ts, stop) = target_stop?;
    let before_limit = orig.get(limit).is_none_or(|l| ts < *l);
    if orig.contains(&ts) || !before_limit {
        return None;
    }
    intrinsic_fail(original, ts, stop, compiled)
}

/// A step that only judges what earlier steps bound: one the shadow can
/// drop (or replace) without changing what the target was sent.
fn is_pure(s: &GenStep) -> bool {
    s.step
        .get("do")
        .and_then(Json::as_str)
        .is_some_and(|d| PURE.contains(&d))
}

/// A sequence the target ran, and what its shadow needs to judge it: the
/// target's run of `steps`, the answers the target gave (which the shadow
/// repeats), and the run's setting.
pub struct Judging<'a> {
    /// The sequence's steps, as generated.
    pub steps: &'a [GenStep],
    /// The target's run of them.
    pub trun: &'a CaseRun,
    /// The target's answers, by call.
    pub transcript: &'a HashMap<Key, Vec<CallAnswer>>,
    /// The case header the compiled case takes.
    pub header: &'a Json,
    /// The vendor's profile.
    pub profile: &'a Profile,
    /// The checks' rules.
    pub rules: &'a BTreeMap<String, Vec<String>>,
    /// The sequence's seed.
    pub seed: u64,
    /// The target's device time when the sequence started.
    pub start_ms: i64,
    /// Wraps each member's target as the target was wrapped.
    pub wrap: &'a (dyn Fn(Target) -> Target + Sync),
}

/// What the shadow ran of a sequence ([`Shadow::shadow_runs`]).
struct ShadowRuns {
    /// The steps it ran: the sequence less the pure steps it dropped.
    steps: Vec<GenStep>,
    /// Index of each step in the sequence the target ran.
    orig: Vec<usize>,
    /// The first step the shadow cannot vouch for; nothing from it on is
    /// judged (a Provider step dropped would shift the request ids the
    /// generator draws after it, and with them every repeated answer).
    limit: usize,
    /// Judgements the shadow could not vouch for, run as an observation in
    /// their place (by index in the target's sequence).
    replaced: BTreeSet<usize>,
    /// Each member's run (by member and flavour).
    runs: Vec<(usize, CaseRun)>,
    /// The refusals each member recorded.
    refusals: BTreeMap<usize, Refusals>,
}

/// The first step of `steps` the shadow cannot vouch for, by where its
/// runs stopped.
fn first_unvouched(
    runs: &[(usize, CaseRun)],
    steps: &[GenStep],
    left: &[Option<usize>],
) -> Option<usize> {
    let on_path = |x: usize, i: usize| on_path(left, x, i);
    let passed = |i: usize| {
        runs.iter()
            .enumerate()
            .any(|(x, (_, r))| on_path(x, i) && (r.stop.is_none() || r.step > i + 1))
    };
    // No run followed the target's path as far as this step: from it on,
    // nothing is vouched.
    let deserted =
        (0..steps.len()).find(|&i| !runs.is_empty() && (0..runs.len()).all(|x| !on_path(x, i)));
    runs.iter()
        .enumerate()
        .filter_map(|(x, (k, r))| {
            let stop = r.stop.as_ref()?;
            let at = r.step.saturating_sub(1);
            // A run that left the target's path before it stopped says
            // nothing about the target's steps.
            if !on_path(x, at) {
                return None;
            }
            let variant = *k / FLAVOURS.len() > 0;
            // A run that cannot run an optional step (its earlier answer
            // asked nothing to resolve) stops there unjudged, as long as
            // another run went on.
            if steps.get(at).is_some_and(|s| s.meta == Meta::Optional) && passed(at) {
                return None;
            }
            // A variant that cannot go on by its own latitude stops there
            // unjudged; the reference engine's stop, or any FAIL, is a step
            // the shadow cannot vouch for.
            (!variant || matches!(stop, Stop::Fail(_) | Stop::Cut(_))).then_some(at)
        })
        .chain(deserted)
        .min()
}

/// Where each shadow run left the target's path: the first `only_if` step
/// whose condition held for the one and not for the other (a member's own
/// synchronous answer left no operation to ask about where the target's
/// left one, or the other way round, §4.4). From there on the run says
/// nothing about the target's steps, neither by its answers nor by its
/// stops: a member that skipped the cancel of an operation it never opened
/// had its effect at once, and would otherwise unpin the effect window of
/// the target's cancelled one.
fn left_paths(runs: &[(usize, CaseRun)], steps: &[GenStep], trun: &CaseRun) -> Vec<Option<usize>> {
    let holds = |r: &CaseRun, t: &str| {
        cetp_vectors::template::expand(&r.bindings, t).is_ok_and(|v| !v.is_null())
    };
    runs.iter()
        .map(|(_, r)| {
            steps.iter().position(|s| {
                s.step
                    .get("only_if")
                    .and_then(Json::as_str)
                    .is_some_and(|t| holds(r, t) != holds(trun, t))
            })
        })
        .collect()
}

/// Whether run `x` still followed the target's path at step `i`.
fn on_path(left: &[Option<usize>], x: usize, i: usize) -> bool {
    left.get(x).copied().flatten().is_none_or(|d| d > i)
}

/// The tools identity b's list leaves out (`listed`: its `/data/tools`;
/// none when there is no identity b).
fn hidden_from_b(tools: &[DescribedTool], listed: Option<Json>) -> BTreeSet<String> {
    let Some(listed) = listed else {
        return BTreeSet::new();
    };
    let names: BTreeSet<String> = listed
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t.get("name").and_then(Json::as_str).map(str::to_string))
        .collect();
    tools
        .iter()
        .filter(|t| !names.contains(&t.name))
        .map(|t| t.name.clone())
        .collect()
}

/// The session lifetime the target's `expires_at` shows, from `before`
/// (device time before negotiating); a session without one does not
/// expire (§2.2 lets it).
fn session_ttl_ms(expires_at: Option<Json>, before: i64) -> i64 {
    expires_at
        .and_then(|e| e.as_str().map(str::to_string))
        .and_then(|e| humantime::parse_rfc3339_weak(&e).ok())
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| (d.as_millis() as i64).saturating_sub(before).max(1000))
        .unwrap_or(10 * 365 * 86_400_000)
}

/// How the shadow writes its count of effects at the observer's pointer,
/// in the shape the target's output schema gives it there
/// (profiles/README.md: a number, or a list whose length counts, which may
/// be a page the Provider caps). Only equality and differences of two
/// snapshots are read, so a fixed base is as good as zero.
#[derive(Clone, Debug, PartialEq)]
pub enum Observed {
    /// A number: the count above the schema's `minimum`.
    Number {
        /// The schema's `minimum` (0 when it sets none or a negative one).
        base: i64,
    },
    /// A list: `min` items plus one per count, at most `max`; the items
    /// distinct where the schema asks `uniqueItems` (as many as could be
    /// generated), and always the same ones, so that equal counts are
    /// equal snapshots.
    List {
        /// Items to take the list from, in order.
        items: Vec<Json>,
        /// The schema's `minItems`.
        min: usize,
        /// The most items the list may hold: the schema's `maxItems`, the
        /// page size the observer's args ask for, the distinct items at
        /// hand.
        max: usize,
    },
}

/// Pages are capped by one of these args (`cetp init` passes the largest
/// the input schema allows).
const PAGE_ARGS: &[&str] = &["limit", "max_items", "max_results", "page_size", "count"];

impl Observed {
    /// The observer's value shape, from the tool's output schema along the
    /// pointer (else the generated instance there), and its page cap.
    fn of(
        tools: &[DescribedTool],
        fallbacks: &[Json],
        o: &cetp_vectors::profile::Observer,
        seed: u64,
    ) -> Observed {
        let Some(i) = tools.iter().position(|t| t.name == o.tool) else {
            return Observed::Number { base: 0 };
        };
        let schema = schema_at(&tools[i].output_schema, &o.pointer);
        let instance = fallbacks.get(i).and_then(|f| f.pointer(&o.pointer));
        let ty = |t: &str| {
            schema.and_then(|s| s.get("type")).is_some_and(|x| {
                x.as_str() == Some(t) || x.as_array().is_some_and(|a| a.iter().any(|y| y == t))
            })
        };
        let is_list = ty("array")
            || (!ty("integer") && !ty("number") && instance.is_some_and(Json::is_array));
        if !is_list {
            let base = schema
                .and_then(|s| s.get("minimum"))
                .and_then(Json::as_f64)
                .map_or(0, |m| m.ceil().max(0.0) as i64);
            return Observed::Number { base };
        }
        let get_u = |k: &str| schema.and_then(|s| s.get(k)).and_then(Json::as_u64);
        let min = get_u("minItems").unwrap_or(0) as usize;
        let mut max = get_u("maxItems").unwrap_or(10_000).min(10_000) as usize;
        if let Some(page) = page_size(&cetp_vectors::profile::table_to_json(&o.args)) {
            max = max.min(page);
        }
        let unique = schema
            .and_then(|s| s.get("uniqueItems"))
            .and_then(Json::as_bool)
            == Some(true);
        let item_schema = schema
            .and_then(|s| s.get("items"))
            .cloned()
            .unwrap_or(json!({}));
        let first = instance
            .and_then(Json::as_array)
            .and_then(|a| a.first())
            .cloned()
            .unwrap_or_else(|| generate(&item_schema, seed));
        let mut items = vec![first];
        if unique {
            // Distinct items, each generated from its own seed: as many as
            // the page may hold, or as could be found.
            for k in 1..(max.min(256) as u64 * 4) {
                if items.len() >= max.min(256) {
                    break;
                }
                let v = generate(&item_schema, seed.wrapping_add(k));
                if !items.contains(&v) {
                    items.push(v);
                }
            }
            max = max.min(items.len());
        }
        Observed::List { items, min, max }
    }

    /// The snapshot value for `effects` effects.
    pub fn value(&self, effects: u64) -> Json {
        match self {
            Observed::Number { base } => json!(base.saturating_add(effects.min(1 << 40) as i64)),
            Observed::List { items, min, max } => {
                let n = min
                    .saturating_add(effects.min(10_000) as usize)
                    .min(*max)
                    .max(*min.min(max));
                Json::Array(
                    (0..n)
                        .map(|k| items.get(k).unwrap_or(&items[0]).clone())
                        .collect(),
                )
            }
        }
    }

    /// The most items the target's list can show, when it is a list with a
    /// cap: a count at the cap may hide an effect, so such a snapshot
    /// judges nothing.
    pub fn cap(&self) -> Option<u64> {
        match self {
            Observed::List { max, .. } if *max < 10_000 => Some(*max as u64),
            _ => None,
        }
    }
}

/// The page size the observer's args ask for, when one of [`PAGE_ARGS`]
/// is a positive integer.
fn page_size(args: &Json) -> Option<usize> {
    PAGE_ARGS
        .iter()
        .find_map(|k| args.get(*k).and_then(Json::as_u64))
        .filter(|n| *n > 0)
        .map(|n| n as usize)
}

/// The subschema at `pointer` of an object schema, following `properties`
/// (and `items` for an index); `None` where the schema does not say.
fn schema_at<'s>(schema: &'s Json, pointer: &str) -> Option<&'s Json> {
    let mut cur = schema;
    for part in pointer.split('/').skip(1) {
        let part = cetp_proto::pointer::unescape(part);
        cur = match cur.get("properties").and_then(|p| p.get(part.as_ref())) {
            Some(s) => s,
            None if part.parse::<usize>().is_ok() => cur.get("items")?,
            None => return None,
        };
    }
    Some(cur)
}

/// The escalating args the profile names per tool (`escalating_args`, and
/// the `escalating` role's).
fn escalating_args(tools: &[DescribedTool], profile: &Profile) -> HashMap<String, Vec<Json>> {
    let mut escalating: HashMap<String, Vec<Json>> = HashMap::new();
    for t in tools {
        if let Some(a) = profile.escalating_args(&t.name) {
            escalating.entry(t.name.clone()).or_default().push(a);
        }
    }
    if let Some(r) = profile.roles.get("escalating") {
        escalating
            .entry(r.tool.clone())
            .or_default()
            .push(cetp_vectors::profile::table_to_json(&r.args));
    }
    escalating
}

/// The tools identity b lacks a scope for, from the profile's scope roles:
/// the role's tool, and every tool declaring all of its scopes.
fn lacking_for_b(tools: &[DescribedTool], profile: &Profile) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for role in ["scope_missing_for_b", "read_scope_missing_for_b"] {
        let Some(r) = profile.roles.get(role) else {
            continue;
        };
        let Some(named) = tools.iter().find(|t| t.name == r.tool) else {
            continue;
        };
        out.insert(named.name.clone());
        if named.scopes.is_empty() {
            continue;
        }
        for t in tools {
            if named.scopes.iter().all(|s| t.scopes.contains(s)) {
                out.insert(t.name.clone());
            }
        }
    }
    out
}

/// A value `schema` accepts, the same for the same seed; `null` when none
/// can be generated (the shadow then passes values on unchecked).
fn generate(schema: &Json, seed: u64) -> Json {
    let Ok(strategy) = cetp_gen::valid(schema) else {
        return Json::Null;
    };
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &bytes),
    );
    strategy
        .new_tree(&mut runner)
        .map(|t| t.current())
        .unwrap_or(Json::Null)
}

/// One configuration of the shadow: the reference engine or a legal
/// variant of it.
#[derive(Clone, Debug)]
pub struct Member {
    /// `reference`, or the legal variant's name.
    pub name: String,
    latitude: Option<Variant>,
}

/// The shadow of the target: its learned [`Shape`] hosted by the
/// reference engine and by legal variants of it.
pub struct Shadow {
    /// What was learned of the target.
    pub shape: Arc<Shape>,
    /// The engine configurations that judge together.
    pub members: Vec<Member>,
}

/// What judging one sequence gave.
pub enum Judged {
    /// A check fired on the shadow: the harness's own misjudgement.
    Notes(Vec<String>),
    /// Nothing was left to judge.
    Nothing,
    /// The compiled case (the file a finding is written as) and the target's
    /// run as judged against it.
    Ran {
        /// The compiled case.
        case: Json,
        /// The target's run, judged against it.
        run: CaseRun,
    },
}

const FLAVOURS: [Flavour; 2] = [Flavour::QUICK, Flavour::SLOW];

impl Shadow {
    /// The shadow of `shape`: the reference engine and each legal variant
    /// that leaves the target's own descriptors as they are.
    pub fn new(shape: Shape) -> Shadow {
        let mut members = vec![Member {
            name: "reference".into(),
            latitude: None,
        }];
        for l in Variant::ALL {
            // The target's own manifest, limits, provider id and observer
            // are what they are: the latitudes that only set them are not
            // choices left open here.
            if matches!(
                l,
                Variant::V2OnlyManifest
                    | Variant::NoEffectCounter
                    | Variant::GenerousLimits
                    | Variant::InlineLimitFitsLargeResult
                    // Its limit only: the export it runs in the background
                    // is a reference tool, not one of the target's.
                    | Variant::LargeResultInlineViaOperation
                    | Variant::SingleConcurrentRequest
                    | Variant::ProviderIdCustom
            ) {
                continue;
            }
            members.push(Member {
                name: l.name().to_string(),
                latitude: Some(*l),
            });
        }
        Shadow {
            shape: Arc::new(shape),
            members,
        }
    }

    fn config(
        &self,
        m: &Member,
        business: Arc<MirrorBusiness>,
        flavour: Flavour,
    ) -> ProviderConfig {
        let s = &self.shape;
        let provider_id = s
            .info
            .get("provider_id")
            .and_then(Json::as_str)
            .unwrap_or(&s.package)
            .to_string();
        let mut cfg = ProviderConfig {
            package: s.package.clone(),
            authority: s.authority.clone(),
            provider_id: provider_id.clone(),
            manifest: s.manifest,
            session_ttl_ms: s.session_ttl_ms,
            resume_token_ttl_ms: s.resume_ttl_ms,
            ..ProviderConfig::default()
        };
        if let Some(l) = m.latitude {
            cfg = cfg.with_latitude(l);
        }
        cfg.limits = s.limits;
        cfg.manifest = s.manifest;
        cfg.provider_id = provider_id;
        // Who holds which scope is the business's (the profile's scope
        // roles, `MirrorBusiness::decide`): the engine's grants record only
        // what this run's resolutions approved.
        cfg.grants = BTreeMap::new();
        cfg.default_grants = BTreeSet::new();
        cfg.described = Some(Arc::new(Described {
            tools: s.tools.clone(),
            info: s.info.clone(),
            capabilities: s.capabilities.clone(),
            hidden: BTreeMap::from([(IDENTITY_B.uid, s.hidden_b.clone())]),
            business,
            flavour,
        }));
        cfg
    }

    /// Runs `steps` on the shadow (the reference engine alone, or every
    /// member) repeating the target's answers of `transcript`, and judges the
    /// target's run `trun` of the same steps against what it allows.
    pub fn judge(&self, all: bool, q: &Judging<'_>) -> Judged {
        let (steps, trun) = (q.steps, q.trun);
        let judged = self.judge_steps(all, q);
        // The target keeps a grant its user approved for b whether or not
        // the shadow got as far as that decision (its judgement may stop at
        // an earlier step it cannot vouch for): later sequences no longer
        // know that b lacks the scope.
        if approved_as_b(steps, trun) {
            self.shape.granted_b.store(true, Ordering::Relaxed);
        }
        judged
    }

    /// [`Self::judge`] with the reference engine's members alone, the
    /// strictest and cheapest; with every member only where the target
    /// failed that (the failure may be a legal variant's choice).
    pub fn judge_reference_first(&self, q: &Judging<'_>) -> Judged {
        let mut judged = Judged::Nothing;
        for all in [false, true] {
            judged = self.judge(all, q);
            match &judged {
                Judged::Ran { run, .. } if run.failed() => {}
                _ => break,
            }
        }
        judged
    }

    /// Runs the members on `steps`, dropping (or replacing) the pure steps
    /// they cannot vouch for, round by round, until every run vouches for
    /// what is left or the first step none can is found. `Err` is the
    /// judgement already made: nothing to judge, or the shadow's notes.
    fn shadow_runs(&self, members: &[Member], q: &Judging<'_>) -> Result<ShadowRuns, Box<Judged>> {
        let (steps, trun, header) = (q.steps, q.trun, q.header);
        let mut sr = ShadowRuns {
            orig: (0..steps.len()).collect(),
            steps: steps.to_vec(),
            limit: steps.len(),
            replaced: BTreeSet::new(),
            runs: Vec::new(),
            refusals: BTreeMap::new(),
        };
        for round in 0..=MAX_ROUNDS {
            let Some(case) = to_case(header, &oracle_steps(&sr.steps)) else {
                return Err(Box::new(Judged::Nothing));
            };
            (sr.runs, sr.refusals) = self.run_members(
                members,
                &case,
                q.transcript,
                q.profile,
                q.rules,
                q.seed,
                q.start_ms,
                q.wrap,
            );
            let notes = self.shadow_notes(members, &sr.runs, trun);
            if !notes.is_empty() {
                return Err(Box::new(Judged::Notes(notes)));
            }
            let left = left_paths(&sr.runs, &sr.steps, trun);
            match first_unvouched(&sr.runs, &sr.steps, &left) {
                Some(i) if i < sr.steps.len() => {
                    if is_pure(&sr.steps[i]) && round < MAX_ROUNDS {
                        if draws_a_request_id(&sr.steps[i].step, trun) {
                            sr.replaced.insert(sr.orig[i]);
                            // It takes an observer snapshot, whose request id
                            // the target's run drew: an observation in its
                            // place keeps every later request id the same,
                            // and with it every repeated answer.
                            sr.steps[i] = GenStep {
                                step: json!({"do": "observe", "bind": format!("__in_place_of_{i}")}),
                                meta: Meta::Plain,
                            };
                        } else {
                            sr.steps.remove(i);
                            sr.orig.remove(i);
                        }
                        continue;
                    }
                    sr.limit = i;
                    break;
                }
                _ => break,
            }
        }
        Ok(sr)
    }

    fn judge_steps(&self, all: bool, q: &Judging<'_>) -> Judged {
        let (steps, trun, header, profile) = (q.steps, q.trun, q.header, q.profile);
        // Every member, or the reference engine's alone.
        let members = &self.members[..if all { self.members.len() } else { 1 }];
        let original: Vec<GenStep> = steps.to_vec();
        let ShadowRuns {
            steps,
            orig,
            limit,
            replaced,
            runs,
            refusals,
        } = match self.shadow_runs(members, q) {
            Ok(sr) => sr,
            Err(judged) => return *judged,
        };
        let counts = profile.observer.as_ref().map(|o| o.counts);
        let only_runs: Vec<CaseRun> = runs.iter().map(|(_, r)| clone_run(r)).collect();
        let open = OpenOperations::of(&steps, &only_runs);
        let left = left_paths(&runs, &steps, trun);
        // The target's run: where it stopped, in the steps kept here.
        let target_stop = trun.stop.as_ref().map(|s| (trun.step.saturating_sub(1), s));
        let mut compiled: Vec<Json> = Vec::new();
        let mut verdict: Option<(usize, String, Vec<String>)> = None;
        for (i, s) in steps.iter().enumerate() {
            if i >= limit {
                break;
            }
            let oi = orig[i];
            // The runs still on the target's path at this step, and those of
            // them that reached it.
            let live: Vec<(usize, &CaseRun)> = runs
                .iter()
                .enumerate()
                .filter(|(x, _)| on_path(&left, *x, i))
                .map(|(_, (k, r))| (*k, r))
                .collect();
            let live_runs: Vec<&CaseRun> = live.iter().map(|(_, r)| *r).collect();
            let reached: Vec<&CaseRun> = live_runs
                .iter()
                .copied()
                .filter(|r| r.stop.is_none() || r.step > i + 1)
                .collect();
            if let Some((ts, stop)) = &target_stop {
                if oi > *ts {
                    if let Some(v) = intrinsic_fail(&original, *ts, stop, &mut compiled) {
                        verdict = Some(v);
                    }
                    break;
                }
                if oi == *ts {
                    // The target stopped here. A FAIL of a step every shadow
                    // run that reached it passed is a finding; any other stop
                    // ends the judgement. Before `limit` a run stops short
                    // only by its own earlier answer (a legal variant's sync
                    // answer leaves no operation to poll; a run that was not
                    // asked again has nothing to resolve at an optional
                    // step): it took a path the target, which went on, did
                    // not, and says nothing about this step. A run that
                    // stopped at this very step does.
                    if !replaced.contains(&oi) {
                        let here =
                            fail_every_run_passed(stop, i, s, &live_runs, trun, &mut compiled);
                        // A step before it that already broke its compiled
                        // expectation is the finding (a replay of the file
                        // FAILs there first): this stop follows from it, as
                        // a resolve with nothing to launch follows an
                        // escalated call that answered success.
                        verdict = verdict.or(here);
                    }
                    break;
                }
            }
            if let Meta::EffectsAfter { since, .. } = &s.meta {
                if open.in_window(since, i) {
                    continue;
                }
            }
            let Some(mut step) = compile_step(s, &reached, counts) else {
                continue;
            };
            if matches!(s.meta, Meta::Plain | Meta::Optional) && step.get("expect").is_some() {
                self.widen(&mut step, &live);
                any_fault(&mut step, &live, &refusals);
                if foreign_operation_query(&steps, i) || resume_after_clock_move(&steps, i) {
                    any_refusal(&mut step);
                } else {
                    resumed_refusal(&mut step);
                }
            }
            compiled.push(step.clone());
            if verdict.is_some() {
                continue;
            }
            let why = match &s.meta {
                Meta::EffectsAfter { .. } => {
                    s.step.get("bind").and_then(Json::as_str).and_then(|after| {
                        effects_mismatch(&step, after, trun, counts, self.shape.observed.cap())
                    })
                }
                _ => mismatch(&step, trun),
            };
            if let Some(why) = why {
                verdict = Some((compiled.len(), why, reqs(&step)));
            }
        }
        if verdict.is_none() {
            verdict = dropped_step_failed(&original, &orig, limit, target_stop, &mut compiled);
        }
        judged(header, compiled, verdict, trun)
    }

    /// Checks that fired on the shadow's own runs. The shadow publishes the
    /// target's own descriptors: a check that fires on both for the same
    /// rule judged the target's data, and stands against the target; any
    /// other is a note on the oracle, not a finding.
    fn shadow_notes(
        &self,
        members: &[Member],
        runs: &[(usize, CaseRun)],
        trun: &CaseRun,
    ) -> Vec<String> {
        let mut notes = Vec::new();
        for (k, run) in runs {
            for (check, (step, f)) in &run.checks {
                if trun
                    .checks
                    .get(check)
                    .is_some_and(|(_, tf)| tf.rule == f.rule)
                {
                    continue;
                }
                notes.push(format!(
                    "{check} fired on the descriptor shadow ({}) at step {step}: {} ({})",
                    self.member_name(members, *k),
                    f.message,
                    f.rule
                ));
            }
        }
        notes
    }

    fn member_name(&self, members: &[Member], k: usize) -> String {
        let m = &members[k / FLAVOURS.len()];
        let f = if k.is_multiple_of(FLAVOURS.len()) {
            "quick"
        } else {
            "slow"
        };
        format!("{}, {f} business", m.name)
    }

    /// Widens the expectation of a step whose answer the two flavours of
    /// one member disagree on: the business decided it.
    fn widen(&self, step: &mut Json, runs: &[(usize, &CaseRun)]) {
        let Some(bind) = step.get("bind").and_then(Json::as_str) else {
            return;
        };
        let mut by_member: BTreeMap<usize, BTreeSet<(String, Option<String>)>> = BTreeMap::new();
        let mut reached: BTreeMap<usize, usize> = BTreeMap::new();
        for (k, r) in runs {
            if let Some(doc) = r.bindings.get(bind) {
                by_member
                    .entry(k / FLAVOURS.len())
                    .or_default()
                    .insert(class(doc));
                *reached.entry(k / FLAVOURS.len()).or_default() += 1;
            }
        }
        // How an operation ends is the one business answer the shadow does
        // not repeat from the target (the flavour decides it). Where one
        // flavour of a member stopped before a read of that end (its own
        // earlier answers took another path), the business's choice there
        // went unexplored: the one flavour left does not pin it (§4.4: a
        // refused cancel leaves the outcome to the business, a failure
        // with a §5 error among them).
        let reads_an_end = matches!(
            step.get("do").and_then(Json::as_str),
            Some("settle" | "poll")
        );
        let unexplored = reads_an_end && reached.values().any(|n| *n < FLAVOURS.len());
        if !unexplored && !by_member.values().any(|c| c.len() > 1) {
            return;
        }
        let Some(e) = step.get_mut("expect").and_then(Json::as_object_mut) else {
            return;
        };
        let mut status: BTreeSet<String> = e
            .get("status")
            .and_then(Json::as_array)
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(str::to_string))
            .collect();
        if status.is_empty() {
            return;
        }
        status.insert("error".into());
        status.insert("success".into());
        let mut codes: BTreeSet<String> = e
            .get("error_code")
            .and_then(Json::as_array)
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(str::to_string))
            .collect();
        codes.extend(WIDE.iter().map(|c| c.to_string()));
        e.insert("status".into(), json!(status));
        e.insert("error_code".into(), json!(codes));
        e.remove("data");
    }

    #[allow(clippy::too_many_arguments)]
    fn run_members(
        &self,
        members: &[Member],
        case: &cetp_vectors::vector::Case,
        transcript: &HashMap<Key, Vec<CallAnswer>>,
        profile: &Profile,
        rules: &BTreeMap<String, Vec<String>>,
        seed: u64,
        start_ms: i64,
        wrap: &(dyn Fn(Target) -> Target + Sync),
    ) -> (Vec<(usize, CaseRun)>, BTreeMap<usize, Refusals>) {
        let jobs: Vec<(usize, &Member, Flavour)> = members
            .iter()
            .enumerate()
            .flat_map(|(i, m)| {
                FLAVOURS
                    .iter()
                    .enumerate()
                    .map(move |(j, f)| (i * FLAVOURS.len() + j, m, *f))
            })
            .collect();
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .clamp(1, 8);
        let chunk = jobs.len().div_ceil(threads).max(1);
        let mut out: Vec<(usize, CaseRun, Refusals)> = std::thread::scope(|scope| {
            let handles: Vec<_> = jobs
                .chunks(chunk)
                .map(|js| {
                    scope.spawn(move || {
                        js.iter()
                            .filter_map(|(k, m, f)| {
                                let business = Arc::new(MirrorBusiness {
                                    answers: transcript.clone(),
                                    seen: Default::default(),
                                    armed: Default::default(),
                                    shape: self.shape.clone(),
                                    flavour: *f,
                                    refusals: Default::default(),
                                });
                                let cfg = self.config(m, business.clone(), *f);
                                let provider = Arc::new(ReferenceProvider::new(cfg));
                                let app: Arc<dyn cetp_reference::app::ProviderApp> =
                                    provider.clone();
                                let t = cetp_conformance::in_process::in_process_target(
                                    app,
                                    DeviceClock::manual(start_ms),
                                );
                                let t = Target {
                                    label: t.label,
                                    a: Box::new(Mirror {
                                        inner: t.a,
                                        identity: "a",
                                        uid: cetp_reference::device::IDENTITY_A.uid,
                                        business: business.clone(),
                                        provider: provider.clone(),
                                    }),
                                    b: t.b.map(|b| {
                                        Box::new(Mirror {
                                            inner: b,
                                            identity: "b",
                                            uid: IDENTITY_B.uid,
                                            business: business.clone(),
                                            provider,
                                        })
                                            as Box<dyn Device>
                                    }),
                                };
                                let t = wrap(t);
                                let (_, env) =
                                    cetp_conformance::runner::identify(&t, profile).ok()?;
                                let run = run_case(&t, profile, &env, rules, case, seed);
                                let refusals = std::mem::take(
                                    &mut *business
                                        .refusals
                                        .lock()
                                        .unwrap_or_else(|e| e.into_inner()),
                                );
                                Some((*k, run, refusals))
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap_or_default())
                .collect()
        });
        out.sort_by_key(|(k, _, _)| *k);
        let mut refusals = BTreeMap::new();
        let runs = out
            .into_iter()
            .map(|(k, run, r)| {
                refusals.insert(k, r);
                (k, run)
            })
            .collect();
        (runs, refusals)
    }
}

/// A step every member refused (its expectation `error` alone) accepts the
/// refusal of any fault of its request, as each member that reached it
/// recorded them ([`Mirror::note_refusals`]).
fn any_fault(step: &mut Json, runs: &[(usize, &CaseRun)], refusals: &BTreeMap<usize, Refusals>) {
    let Some(bind) = step.get("bind").and_then(Json::as_str).map(str::to_string) else {
        return;
    };
    let identity = step
        .get("as")
        .and_then(Json::as_str)
        .unwrap_or("a")
        .to_string();
    let Some(e) = step.get_mut("expect").and_then(Json::as_object_mut) else {
        return;
    };
    if e.get("status") != Some(&json!(["error"])) {
        return;
    }
    let Some(codes) = e.get("error_code").and_then(Json::as_array) else {
        // Any refusal is expected already.
        return;
    };
    let mut codes: BTreeSet<String> = codes
        .iter()
        .filter_map(|c| c.as_str().map(str::to_string))
        .collect();
    for (k, run) in runs {
        let Some(req) = run.bindings.get(&bind).and_then(|d| d.get("_request")) else {
            continue;
        };
        let method = req.get("method").and_then(Json::as_str).unwrap_or_default();
        let extras = req.get("extras").cloned().unwrap_or(Json::Null);
        if let Some(more) = refusals
            .get(k)
            .and_then(|r| r.get(&refusal_key(&identity, method, &extras)))
        {
            codes.extend(more.iter().cloned());
        }
    }
    e.insert("error_code".into(), json!(codes));
}

/// Whether step `i` reads or cancels an operation another identity's
/// execution started (its `operation_id` taken from that execution's
/// binding).
fn foreign_operation_query(steps: &[GenStep], i: usize) -> bool {
    let st = &steps[i].step;
    let method = st.get("method").and_then(Json::as_str);
    if !matches!(method, Some("get_operation" | "cancel_operation")) {
        return false;
    }
    let who = |s: &Json| {
        s.get("as")
            .and_then(Json::as_str)
            .unwrap_or("a")
            .to_string()
    };
    let Some(from) = st
        .get("operation_id")
        .and_then(Json::as_str)
        .and_then(|t| t.strip_prefix("${"))
        .and_then(|t| t.split('/').next())
    else {
        return false;
    };
    steps[..i]
        .iter()
        .flat_map(|g| {
            let mut all = vec![&g.step];
            if let Some(sub) = g.step.get("steps").and_then(Json::as_array) {
                all.extend(sub);
            }
            all
        })
        .find(|s| s.get("bind").and_then(Json::as_str) == Some(from))
        .is_some_and(|creator| who(creator) != who(st))
}

/// §4.4 says only that another caller may not read an operation; which
/// refusal it gets is not fixed (the suite's BIND-002 accepts any): where
/// the shadow refused, any error code is expected.
/// Whether step `i` resumes a call with a resume token after the clock was
/// moved (a lifetime let run out). The suite asks only that an expired
/// token is refused (CONF-010, §4.3's validity period): which error, an
/// INVALID_REQUEST or a new confirmation asked for (the Kotlin sample's
/// USER_ACTION_REQUIRED), is the Provider's, so the oracle is no stricter.
fn resume_after_clock_move(steps: &[GenStep], i: usize) -> bool {
    let st = &steps[i].step;
    st.get("method").and_then(Json::as_str) == Some("execute_tool")
        && st.get("resume_token").is_some()
        && steps[..i]
            .iter()
            .any(|g| g.step.get("do").and_then(Json::as_str) == Some("advance_clock"))
}

/// A resumed call the members refused for anything but the user's
/// denial: any refusal. The suite asks only `refused` of every misused
/// token (another caller's, CONF-005; one used twice, reordered args, an
/// expired one: CONF-004, -006, -007, -009, -010): which code says no is
/// the Provider's choice (the Kotlin sample asks again, USER_ACTION_REQUIRED,
/// for a token of another caller while its own confirmation is pending).
/// A denial keeps its USER_CANCELLED (CONF-002, CONF-011: §4.3 names it),
/// and a success the members allowed stays the only pass.
fn resumed_refusal(step: &mut Json) {
    let resumed = step.get("method").and_then(Json::as_str) == Some("execute_tool")
        && step.get("resume_token").is_some();
    let denied = step
        .pointer("/expect/error_code")
        .and_then(Json::as_array)
        .is_some_and(|codes| codes.iter().any(|c| c == "USER_CANCELLED"));
    if resumed && !denied {
        any_refusal(step);
    }
}

fn any_refusal(step: &mut Json) {
    let Some(e) = step.get_mut("expect").and_then(Json::as_object_mut) else {
        return;
    };
    if e.get("status") == Some(&json!(["error"])) {
        e.remove("error_code");
    }
}

/// Whether the target's run `trun` reached a decision identity b approved
/// (a grant or a confirmation: which one the resolution was is the
/// target's business; either may leave b holding a scope).
fn approved_as_b(steps: &[GenStep], trun: &CaseRun) -> bool {
    let reached = if trun.stop.is_some() {
        trun.step
    } else {
        steps.len()
    };
    steps.iter().take(reached).any(|s| {
        let st = &s.step;
        st.get("do").and_then(Json::as_str) == Some("resolve")
            && st.get("as").and_then(Json::as_str) == Some("b")
            && st.get("decision").and_then(Json::as_str) == Some("approve")
    })
}

/// A FAIL of the target at a step the shadow cannot run the same way but
/// that judges the target against its own declaration: a `read_fd` that
/// verifies a file against the size, digest and output schema the target
/// itself declared, or requires it read-only (§4.5). The shadow has no file
/// of the target's to read.
fn intrinsic_fail(
    original: &[GenStep],
    ts: usize,
    stop: &Stop,
    compiled: &mut Vec<Json>,
) -> Option<(usize, String, Vec<String>)> {
    let Stop::Fail(reason) = stop else {
        return None;
    };
    let step = &original.get(ts)?.step;
    let flag = |k: &str| step.get(k).and_then(Json::as_bool) == Some(true);
    let intrinsic = step.get("do").and_then(Json::as_str) == Some("read_fd")
        && (step.get("verify_against").is_some() || flag("read_only") || flag("output_schema"));
    if !intrinsic {
        return None;
    }
    compiled.push(step.clone());
    Some((
        compiled.len(),
        format!("{reason} (the file against the target's own declaration)"),
        reqs(step),
    ))
}

fn clone_run(r: &CaseRun) -> CaseRun {
    CaseRun {
        stop: r.stop.clone(),
        step: r.step,
        bindings: r.bindings.clone(),
        checks: r.checks.clone(),
        cited: r.cited.clone(),
        answers: r.answers,
        dispatched: r.dispatched,
    }
}

fn reqs(step: &Json) -> Vec<String> {
    step.get("requirements")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| r.as_str().map(str::to_string))
        .collect()
}

/// §5: RATE_LIMITED and UNAVAILABLE (retryable) are a Provider's to answer
/// at any time; the step's own outcome is then unknown, never wrong.
fn transient_doc(doc: &Json) -> bool {
    doc.get("status").and_then(Json::as_str) == Some("error")
        && matches!(
            doc.get("error_code").and_then(Json::as_str),
            Some("RATE_LIMITED" | "UNAVAILABLE")
        )
        && doc.get("retryable").and_then(Json::as_bool) == Some(true)
}

fn transient(trun: &CaseRun, step: &Json) -> bool {
    step.get("bind")
        .and_then(Json::as_str)
        .and_then(|b| trun.bindings.get(b))
        .is_some_and(transient_doc)
}

/// Why the effects the target's observer counted over a compiled
/// `expect_effects` step (its snapshot after bound as `after`) are not the
/// shadow's.
fn effects_mismatch(
    step: &Json,
    after: &str,
    trun: &CaseRun,
    counts: Option<Counts>,
    cap: Option<u64>,
) -> Option<String> {
    let since = step.get("since")?.as_str()?;
    let want = step.get("delta")?.as_i64()?;
    let (a, b) = (trun.bindings.get(since)?, trun.bindings.get(after)?);
    // A page the Provider caps shows no more than its cap: at the cap, an
    // effect may not show, and one that shows may be an item pushed out.
    if cap.is_some_and(|c| {
        [a, b]
            .iter()
            .any(|v| v.as_array().is_some_and(|l| l.len() as u64 >= c))
    }) {
        return None;
    }
    if want == 0 && counts == Some(Counts::Objects) {
        // The shadow committed nothing: a create or a delete moved the
        // count (an update changes no count, so only the count is compared).
        let (n, m) = (object_count(a)?, object_count(b)?);
        return (n != m).then(|| {
            format!("expected no effect since `{since}`, the observer's count of objects went from {n} to {m}")
        });
    }
    let got = effect_delta(a, b, counts)?;
    (got != want)
        .then(|| format!("expected {want} effect(s) since `{since}`, the observer counted {got}"))
}

/// A count of objects as the profile's README defines it: a number, or an
/// array's length.
fn object_count(v: &Json) -> Option<u64> {
    v.as_u64().or_else(|| v.as_array().map(|a| a.len() as u64))
}

/// Why the target's answer at a compiled step is not one the step expects.
fn mismatch(step: &Json, trun: &CaseRun) -> Option<String> {
    let expect = step.get("expect")?;
    let bind = step.get("bind")?.as_str()?;
    let doc = trun.bindings.get(bind)?;
    if expect == &json!({}) || transient_doc(doc) {
        return None;
    }
    let (status, code) = class(doc);
    let flag = |k: &str| expect.get(k).and_then(Json::as_bool) == Some(true);
    let holds = if flag("threw") {
        status == "threw"
    } else if flag("null_result") {
        status == "null"
    } else {
        let statuses: Vec<&str> = expect
            .get("status")
            .and_then(Json::as_array)
            .into_iter()
            .flatten()
            .filter_map(Json::as_str)
            .collect();
        let codes: Vec<&str> = expect
            .get("error_code")
            .and_then(Json::as_array)
            .into_iter()
            .flatten()
            .filter_map(Json::as_str)
            .collect();
        let status_ok = statuses.is_empty() || statuses.contains(&status.as_str());
        let code_ok = status != "error"
            || codes.is_empty()
            || code.as_deref().is_some_and(|c| codes.contains(&c));
        let data_ok = expect
            .get("data")
            .and_then(Json::as_array)
            .into_iter()
            .flatten()
            .all(|a| {
                let (Some(p), Some(one_of)) = (
                    a.get("pointer").and_then(Json::as_str),
                    a.get("one_of").and_then(Json::as_array),
                ) else {
                    return true;
                };
                one_of.contains(doc.pointer(p).unwrap_or(&Json::Null))
            });
        status_ok && code_ok && data_ok
    };
    (!holds).then(|| {
        format!(
            "{} answered {}{} where the protocol and the target's descriptors allow {}",
            step.get("method")
                .and_then(Json::as_str)
                .or_else(|| step.get("do").and_then(Json::as_str))
                .unwrap_or("the step"),
            status,
            code.map(|c| format!(" {c}")).unwrap_or_default(),
            expect
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A resume after a clock move admits any refusal (the suite's CONF-010
    /// asks only `refused`), never a success; one before any move keeps
    /// the codes the members gave.
    #[test]
    fn a_resume_after_a_clock_move_admits_any_refusal() {
        let plain = |j: Json| GenStep {
            step: j,
            meta: Meta::Plain,
        };
        let resume = json!({"do": "call", "method": "execute_tool", "resume_token": "${e2/resume_token}",
            "expect": {"status": ["error"], "error_code": ["INVALID_REQUEST"]}});
        let ask = plain(json!({"do": "call", "method": "execute_tool", "bind": "e2"}));
        let moved = vec![
            ask.clone(),
            plain(json!({"do": "advance_clock", "ms": 590000})),
            plain(resume.clone()),
        ];
        let unmoved = vec![ask, plain(resume.clone())];
        assert!(resume_after_clock_move(&moved, 2));
        assert!(!resume_after_clock_move(&unmoved, 1));
        let mut step = resume.clone();
        any_refusal(&mut step);
        assert_eq!(step["expect"], json!({"status": ["error"]}));
        // A success the members allowed stays allowed, and required codes
        // of a step that may succeed are left alone.
        let mut may_succeed =
            json!({"expect": {"status": ["error", "success"], "error_code": ["INVALID_REQUEST"]}});
        any_refusal(&mut may_succeed);
        assert_eq!(
            may_succeed["expect"]["error_code"],
            json!(["INVALID_REQUEST"])
        );
    }

    /// Every misused resume token the members refused is refused any way
    /// the target likes (the suite's cases ask `refused`); a denial keeps
    /// USER_CANCELLED, and a step that is no resumed call keeps its codes.
    #[test]
    fn a_misused_resume_token_admits_any_refusal_and_a_denial_keeps_its_code() {
        let resumed = |codes: Json| {
            json!({"do": "call", "method": "execute_tool", "as": "a",
                   "resume_token": "${r11/resume_token}",
                   "expect": {"status": ["error"], "error_code": codes}})
        };
        let mut foreign = resumed(json!(["INVALID_REQUEST"]));
        resumed_refusal(&mut foreign);
        assert_eq!(foreign["expect"], json!({"status": ["error"]}));
        let mut denied = resumed(json!(["USER_CANCELLED"]));
        resumed_refusal(&mut denied);
        assert_eq!(denied["expect"]["error_code"], json!(["USER_CANCELLED"]));
        let mut plain = json!({"do": "call", "method": "execute_tool",
            "expect": {"status": ["error"], "error_code": ["INVALID_REQUEST"]}});
        resumed_refusal(&mut plain);
        assert_eq!(plain["expect"]["error_code"], json!(["INVALID_REQUEST"]));
        let mut may_succeed = json!({"method": "execute_tool", "resume_token": "t",
            "expect": {"status": ["success"]}});
        resumed_refusal(&mut may_succeed);
        assert_eq!(may_succeed["expect"], json!({"status": ["success"]}));
    }

    fn run(stop_at: Option<usize>, len: usize) -> CaseRun {
        CaseRun {
            stop: stop_at.map(|_| Stop::Fail("x".into())),
            step: stop_at.unwrap_or(len),
            bindings: Default::default(),
            checks: BTreeMap::new(),
            cited: Vec::new(),
            answers: 0,
            dispatched: 0,
        }
    }

    fn tool(output: Json) -> DescribedTool {
        DescribedTool::from_json(&json!({
            "name": "stats", "title": "t", "description": "d",
            "input_schema": {"type": "object"}, "output_schema": output, "scopes": [],
            "annotations": {"effect": "read", "risk": "low", "destructive": false,
                            "idempotent": true, "confirmation": "never", "open_world": false,
                            "execution": "sync"}
        }))
        .unwrap()
    }

    fn observer(pointer: &str, args: &str) -> cetp_vectors::profile::Observer {
        Profile::from_toml(&format!(
            "[observer]\ntool = \"stats\"\npointer = \"{pointer}\"\ncounts = \"objects\"\nargs = {args}\n"
        ))
        .unwrap()
        .observer
        .unwrap()
    }

    /// The shadow writes its count in the shape the output schema gives
    /// the observer's pointer (profiles/README.md: a number, a list, a
    /// page the Provider caps), never a value the schema refuses: an
    /// integer count (it wrote `[]` there, and the output schema check
    /// fired on the shadow), a list with `minItems`, a page capped by
    /// `maxItems` and by the observer's `limit`, unique items.
    #[test]
    fn the_observers_count_takes_the_shape_its_schema_gives() {
        let count = json!({"type": "object", "properties": {
            "count": {"type": "integer", "minimum": 0},
            "notes": {"type": "array", "minItems": 1, "maxItems": 50, "uniqueItems": true,
                      "items": {"type": "string"}}}});
        let tools = vec![tool(count.clone())];
        let fallbacks = vec![generate(&count, 3)];
        let schema = CompiledSchema::compile(&count, DEFAULT_DIALECT).unwrap();
        let o = Observed::of(&tools, &fallbacks, &observer("/count", "{}"), 3);
        assert_eq!(o, Observed::Number { base: 0 });
        for n in [0, 1, 7] {
            let v = set_pointer(json!({"notes": ["x"]}), "/count", o.value(n));
            assert!(schema.is_valid(&v), "{v}");
            assert_eq!(v["count"], json!(n));
        }
        let l = Observed::of(&tools, &fallbacks, &observer("/notes", "{ limit = 20 }"), 3);
        assert_eq!(l.cap(), Some(20));
        let (mut lens, mut seen) = (Vec::new(), BTreeSet::new());
        for n in [0, 1, 2, 40] {
            let v = set_pointer(json!({"count": 0}), "/notes", l.value(n));
            assert!(schema.is_valid(&v), "{v}");
            lens.push(v["notes"].as_array().unwrap().len());
            seen.insert(v["notes"].to_string());
        }
        // minItems 1 is the base, 20 (the page asked for) the most.
        assert_eq!(lens, vec![1, 2, 3, 20]);
        assert_eq!(
            seen.len(),
            4,
            "equal counts, equal snapshots; others differ"
        );
        assert_eq!(l.value(2), l.value(2));
    }

    /// At a page's cap an effect may not show: such a window is not
    /// judged; below it, a change with no effect due is a finding.
    #[test]
    fn a_capped_page_at_its_cap_judges_no_effect() {
        let step = json!({"do": "expect_effects", "since": "o", "delta": 0});
        let trun = |before: usize, after: usize| {
            let mut r = run(None, 1);
            r.bindings.insert("o".into(), json!(vec!["n"; before]));
            r.bindings.insert("p".into(), json!(vec!["n"; after]));
            r
        };
        let at_cap = trun(3, 3);
        assert!(effects_mismatch(&step, "p", &at_cap, Some(Counts::Objects), Some(3)).is_none());
        let moved = trun(1, 2);
        assert!(effects_mismatch(&step, "p", &moved, Some(Counts::Objects), Some(3)).is_some());
        let full = trun(2, 3);
        assert!(effects_mismatch(&step, "p", &full, Some(Counts::Objects), Some(3)).is_none());
    }

    /// A grant b's user approved in the target's run is the target's to
    /// keep: the run counts it once the target reached the decision,
    /// whatever the shadow reached; a denial, a's decision or a decision
    /// after the target stopped does not count.
    #[test]
    fn an_approval_as_b_the_target_reached_counts() {
        let step = |j: Json| GenStep {
            step: j,
            meta: Meta::Plain,
        };
        let call = step(json!({"do": "call", "as": "b", "method": "execute_tool"}));
        let decide = |who: &str, decision: &str| {
            step(
                json!({"do": "resolve", "as": who, "handle": "${e/resolution/handle}",
                        "decision": decision}),
            )
        };
        let approved = vec![call.clone(), decide("b", "approve"), call.clone()];
        assert!(approved_as_b(&approved, &run(None, 3)));
        assert!(approved_as_b(&approved, &run(Some(3), 3)));
        assert!(!approved_as_b(&approved, &run(Some(1), 3)));
        for other in [decide("b", "deny"), decide("a", "approve")] {
            assert!(!approved_as_b(&[call.clone(), other], &run(None, 2)));
        }
    }
}
