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

use super::state::{Answer, DedupeKey, DurableState, Failure, Job, Operation, Purpose};
use super::tool::ToolDef;
use super::util::lock;
use super::{Cx, ReferenceProvider};
use cetp_proto::envelope::{Capability, OpState};
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

impl ReferenceProvider {
    pub(crate) fn described(&self) -> Option<&Described> {
        self.cfg.described.as_deref()
    }

    /// `execute_tool` of a described tool once the protocol's checks before
    /// the business have passed (dedupe, deadline, tool, size, JSON, schema,
    /// resume token).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn execute_described(
        &self,
        d: &Described,
        cx: &Cx<'_>,
        tool: &ToolDef,
        index: usize,
        args: &str,
        digest: &str,
        key: DedupeKey,
        confirmed: bool,
        value: &Json,
    ) -> Answer {
        let Some(desc) = d.tools.get(index) else {
            return Failure::new(ErrorCode::ToolNotFound, "No such tool.").into();
        };
        let (effects, granted) = {
            let s = lock(&self.durable.state);
            let held = s.grants.get(&cx.uid);
            let granted = !tool.scopes.is_empty()
                && held.is_some_and(|h| tool.scopes.iter().all(|x| h.contains(*x)));
            (s.effects, granted)
        };
        let answer = d.business.decide(&BusinessCall {
            uid: cx.uid,
            request_id: cx.request_id,
            tool: desc,
            args: value,
            confirmed,
            effects,
            granted,
        });
        let always = tool.confirmation == "always";
        match answer {
            BusinessAnswer::AskConfirm => self.ask(cx, tool, args, digest, &key, Purpose::Confirm),
            BusinessAnswer::AskGrant => {
                let scopes = tool.scopes.iter().map(|s| s.to_string()).collect();
                self.ask(cx, tool, args, digest, &key, Purpose::Grant(scopes))
            }
            BusinessAnswer::Error { code, retryable } => {
                let mut f = Failure::new(code, "The provider refused this call.");
                if let Some(r) = retryable.filter(|r| code.retry_rule().allows(*r)) {
                    f.retryable = r;
                }
                if !tool.is_read() {
                    if d.flavour.error_effect {
                        lock(&self.durable.state).effects += 1;
                    }
                    if d.flavour.record_errors && !f.retryable {
                        self.record_terminal(&key, tool, digest, cx.now_ms, f.clone().into());
                    }
                }
                f.into()
            }
            // §3.4: a tool that always confirms acts only once confirmed,
            // whatever the business would have answered.
            _ if always && !confirmed => self.ask(cx, tool, args, digest, &key, Purpose::Confirm),
            answer if tool.is_read() => self.described_read(d, cx, tool, answer),
            answer => {
                let targs = super::execute::ToolArgs::Described {
                    index,
                    args: value.clone(),
                    call: Some(Box::new(DescribedCall {
                        answer,
                        may_run_async: tool.may_run_async,
                    })),
                };
                self.run_mutation(cx, tool, &targs, key, digest.to_string())
            }
        }
    }

    /// A read tool's answer: inline or file by size (§4.5), or an
    /// operation where the business chose one and the protocol allows it.
    fn described_read(
        &self,
        d: &Described,
        cx: &Cx<'_>,
        tool: &ToolDef,
        answer: BusinessAnswer,
    ) -> Answer {
        let (value, background) = match answer {
            BusinessAnswer::Value(v) => (v, false),
            BusinessAnswer::Accepted { value } => (value, true),
            _ => return Failure::new(ErrorCode::InternalError, "Internal error.").into(),
        };
        let packaged = self.package(cx.caps, tool, value);
        let background =
            background && tool.may_run_async && cx.caps.contains(&Capability::AsyncOperations);
        let Answer::Success { data, file } = packaged else {
            return packaged;
        };
        if !background {
            return Answer::Success { data, file };
        }
        self.accept_in_background(
            cx,
            Job::Described {
                result: data,
                effect: false,
                done_after_ms: d.flavour.op_done_after_ms,
                fails: d.flavour.op_fails,
            },
            file,
        )
    }

    /// The effect of a described tool with side effects, under the durable
    /// lock (the engine's single-executor commit).
    pub(crate) fn described_effect(
        &self,
        d: &mut DurableState,
        now_ms: i64,
        uid: u32,
        request_id: &str,
        async_ok: bool,
        call: &DescribedCall,
    ) -> Result<super::execute::Effected, Failure> {
        use super::execute::Effected;
        let flavour = self.described().map_or(Flavour::QUICK, |desc| desc.flavour);
        match &call.answer {
            BusinessAnswer::Accepted { value } if async_ok && call.may_run_async => {
                let id = self.new_operation_id(d);
                d.operations.insert(
                    id.clone(),
                    Operation {
                        uid,
                        request_id: request_id.to_string(),
                        created_ms: now_ms,
                        job: Job::Described {
                            result: json!({"kind": "inline", "value": value}),
                            effect: true,
                            done_after_ms: flavour.op_done_after_ms,
                            fails: flavour.op_fails,
                        },
                        state: OpState::Queued,
                        cancel_requested: false,
                        progress: 0,
                        outcome: None,
                        file: None,
                    },
                );
                d.active_ops.insert(id.clone());
                Ok(Effected::Operation(id))
            }
            BusinessAnswer::Value(v) | BusinessAnswer::Accepted { value: v } => {
                d.effects += 1;
                Ok(Effected::Value(v.clone()))
            }
            _ => Err(Failure::new(ErrorCode::InternalError, "Internal error.")),
        }
    }

    /// A v1 call of a described read tool (§8) by the caller `uid`: the
    /// business's value, when it gives one (a grant or confirmation it asks
    /// for is a refusal over v1, which has neither).
    pub(crate) fn described_v1_value(
        &self,
        index: usize,
        args: &Json,
        uid: u32,
    ) -> Result<Json, Failure> {
        let d = self
            .described()
            .ok_or_else(|| Failure::new(ErrorCode::InternalError, "Internal error."))?;
        let tool = d
            .tools
            .get(index)
            .ok_or_else(|| Failure::new(ErrorCode::ToolNotFound, "No such tool."))?;
        let effects = lock(&self.durable.state).effects;
        let granted = !tool.scopes.is_empty()
            && lock(&self.durable.state)
                .grants
                .get(&uid)
                .is_some_and(|h| tool.scopes.iter().all(|x| h.contains(x)));
        match d.business.decide(&BusinessCall {
            uid,
            request_id: "",
            tool,
            args,
            confirmed: false,
            effects,
            granted,
        }) {
            BusinessAnswer::Value(v) | BusinessAnswer::Accepted { value: v } => Ok(v),
            BusinessAnswer::Error { code, .. } => Err(Failure::new(code, "Refused.")),
            _ => Err(Failure::new(
                ErrorCode::PermissionDenied,
                "This tool needs the user's approval.",
            )),
        }
    }

    /// The target's provider info, as it published it.
    pub(crate) fn described_info(&self) -> Option<Answer> {
        self.described().map(|d| Answer::ok(d.info.clone()))
    }
}

/// Ends a described job: its result, or a failure (the SLOW flavour).
pub(crate) fn finish_described(
    d: &mut DurableState,
    result: &Json,
    effect: bool,
    fails: bool,
) -> Result<Json, Failure> {
    if fails {
        return Err(Failure::new(
            ErrorCode::InternalError,
            "The operation could not be completed.",
        ));
    }
    if effect {
        d.effects += 1;
    }
    Ok(result.clone())
}
