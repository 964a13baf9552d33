//! `execute_tool` (§4.1-§4.5, §6): dedupe, deadline, validation, scopes,
//! confirmation, and the single-executor commit.

use super::args::{invalid_args, Effected, ToolArgs};
use super::fixtures::{self, Serialized};
use super::notes;
use super::state::{
    Alert, Answer, DedupeKey, DurableState, Failure, Job, Operation, Purpose, Record, RecordState,
};
use super::tool::{ToolDef, ToolKind};
use super::util::lock;
use super::{Cx, Mutant, ReferenceProvider, Variant};
use cetp_proto::bundle::parse_json_text;
use cetp_proto::canonical::{canonical_hash, sha256_hex};
use cetp_proto::envelope::{Capability, OpState};
use cetp_proto::{ErrorCode, Value};
use serde_json::{json, Value as Json};
use std::collections::BTreeSet;
use std::sync::{Arc, MutexGuard};
use std::time::{Duration, Instant};

/// Longest real-time wait for another executor of the same request id, even
/// when the deadline is further away.
const MAX_WAIT_MS: i64 = 30_000;

/// What a dedupe record says about a request id.
enum Seen {
    Fresh,
    Pending,
    InFlight,
    Done(Answer),
    Conflict,
}

/// `text` as a lenient JSON parser reads it (RFC 8259 lets a parser ignore
/// a byte order mark, §8.1, and leaves what an unpaired surrogate escape
/// becomes to it, §8.2): the mark dropped, each unpaired `\uD800`–`\uDFFF`
/// escape made `\uFFFD`.
fn lenient_json_text(text: &str) -> String {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let surrogate = |s: &str| -> Option<u16> {
        let hex = s.strip_prefix("\\u")?.get(..4)?;
        u16::from_str_radix(hex, 16)
            .ok()
            .filter(|v| (0xD800..=0xDFFF).contains(v))
    };
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("\\u") {
        // An escaped backslash before it makes it text, not an escape.
        let backslashes = rest[..at].chars().rev().take_while(|c| *c == '\\').count();
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        match surrogate(tail) {
            Some(hi) if backslashes % 2 == 0 => {
                let paired = (0xD800..0xDC00).contains(&hi)
                    && tail
                        .get(6..)
                        .and_then(surrogate)
                        .is_some_and(|lo| (0xDC00..=0xDFFF).contains(&lo));
                if paired {
                    out.push_str(&tail[..12]);
                    rest = &tail[12..];
                } else {
                    out.push_str("\\ufffd");
                    rest = &tail[6..];
                }
            }
            _ => {
                out.push_str(&tail[..2]);
                rest = &tail[2..];
            }
        }
    }
    out.push_str(rest);
    out
}

impl ReferenceProvider {
    pub(crate) fn execute(
        &self,
        cx: &Cx<'_>,
        tool_name: &str,
        args: &str,
        resume_token: Option<&str>,
    ) -> Answer {
        let digest = self.args_digest(args);
        let key = self.dedupe_key(cx.uid, cx.request_id);
        // §6 first: a retry after its deadline, or one that would now fail
        // validation, still gets the recorded terminal result.
        if !self.has(Mutant::NoDedupe) && !self.takes(Variant::ValidateBeforeDedupe) {
            let d = lock(&self.durable.state);
            if let (mut d, Some(answer)) = self.settle(d, cx, &key, tool_name, &digest) {
                return self.replayed(&mut d, cx, answer);
            }
        }
        // §4.1: the deadline is checked before any business effect.
        if !self.has(Mutant::DeadlineCheckedAfterEffect) {
            if let Some(f) = self.deadline_passed(cx) {
                return f.into();
            }
        }
        let (tool, value, targs) = match self.checked_call(cx, tool_name, args) {
            Ok(call) => call,
            Err(answer) => return *answer,
        };

        let (confirmed, approved) = match resume_token {
            Some(token) => match self.redeemed(cx, tool, args, token, &key, &digest) {
                Ok(both) => both,
                Err(answer) => return *answer,
            },
            None => (false, false),
        };

        // A described app's scope, confirmation and business answers are
        // its business's, inside what its descriptor allows.
        if let (Some(d), ToolKind::Described(index)) = (self.described(), tool.kind) {
            return self.execute_described(
                d,
                cx,
                tool,
                index,
                args,
                &digest,
                key,
                confirmed || approved,
                &value,
            );
        }

        // §3.4, §7.2: every call checks every scope, whatever list_tools said.
        let scope_uid = match cx.extras.get("calling_uid") {
            Some(Value::Int(uid)) if self.has(Mutant::ClaimedCallerTrusted) => *uid as u32,
            _ => cx.uid,
        };
        let missing = self.missing_scopes(scope_uid, tool);
        if !missing.is_empty() && !self.scope_check_skipped(cx, &targs) {
            if self.has(Mutant::ScopeDegradedData) {
                return degraded(tool.kind);
            }
            if !self.has(Mutant::ScopeNotEnforced) {
                return self.ask(cx, tool, args, &digest, &key, Purpose::Grant(missing));
            }
        }

        let consumer_says_confirmed = self.has(Mutant::ConsumerConfirmedFlagTrusted)
            && matches!(cx.extras.get("confirmed"), Some(Value::Bool(true)));
        if needs_confirmation(tool, &targs, !self.has(Mutant::NoEscalation))
            && !confirmed
            && !consumer_says_confirmed
            && !self.confirmation_skipped(&targs)
        {
            if self.has(Mutant::EffectBeforeConfirmation) {
                let mut d = lock(&self.durable.state);
                // The mutant's whole point is the effect; its value is unused.
                let _ = self.effect(&mut d, cx.now_ms, cx.uid, cx.request_id, false, &targs);
            }
            if self.takes(Variant::EscalationRefused) && tool.confirmation != "always" {
                return Failure::new(
                    ErrorCode::PermissionDenied,
                    "This call is riskier than the tool allows without a review; it was refused.",
                )
                .into();
            }
            return self.ask(cx, tool, args, &digest, &key, Purpose::Confirm);
        }

        if tool.is_read() {
            let answer = match self.read_serialized(&targs) {
                Ok(v) => self.package_serialized(cx.caps, tool, v),
                Err(f) => f.into(),
            };
            return self.maybe_in_background(cx, tool, answer);
        }
        self.run_mutation(cx, tool, &targs, key, digest)
    }

    /// The call's tool (one this caller may see), its args parsed and
    /// checked against the negotiated size (§4.1) and the input schema
    /// (§3.2), or the answer that refuses it.
    pub(crate) fn checked_call<'t>(
        &'t self,
        cx: &Cx<'_>,
        tool_name: &str,
        args: &str,
    ) -> Result<(&'t ToolDef, Json, ToolArgs), Box<Answer>> {
        let refuse = |f: Failure| Err(Box::new(Answer::from(f)));
        let Some(tool) = self
            .catalog
            .find(tool_name)
            .filter(|t| !self.hidden_tools(cx.uid).contains(&t.name))
        else {
            return refuse(Failure::new(ErrorCode::ToolNotFound, "No such tool."));
        };
        let max = self.limits().max_request_bytes;
        if args.len() as u64 > max && !self.has(Mutant::ArgsLimitNotEnforced) {
            return refuse(Failure::new(
                ErrorCode::InvalidRequest,
                format!(
                    "args is {} bytes, more than the negotiated {max}.",
                    args.len()
                ),
            ));
        }
        let lenient;
        let args = if self.takes(Variant::LenientArgsText) {
            lenient = lenient_json_text(args);
            lenient.as_str()
        } else {
            args
        };
        let value = match parse_json_text("args", args) {
            Ok(v) => v,
            Err(e) => {
                return refuse(invalid_args(
                    self,
                    format!("args is not valid JSON ({})", e.found),
                ))
            }
        };
        if !self.has(Mutant::SchemaNotValidated) && !tool.input.is_valid(&value) {
            return refuse(
                invalid_args(self, "The arguments do not match the tool's input schema.")
                    .details(json!({ "errors": tool.input.errors(&value) })),
            );
        }
        match ToolArgs::parse(tool.kind, &value) {
            Ok(targs) => Ok((tool, value, targs)),
            Err(why) => refuse(invalid_args(self, why)),
        }
    }

    /// Redeems a resume token (§4.3): (confirmed, approved), or the answer
    /// that ends the call. §4.3 does not say which code asks for what: for
    /// a described app, any approved resolution of this call is the user's
    /// approval.
    fn redeemed(
        &self,
        cx: &Cx<'_>,
        tool: &ToolDef,
        args: &str,
        token: &str,
        key: &DedupeKey,
        digest: &str,
    ) -> Result<(bool, bool), Box<Answer>> {
        match self.redeem(cx, tool, args, token) {
            super::decisions::Redeem::Approved(Purpose::Confirm) => Ok((true, false)),
            super::decisions::Redeem::Approved(Purpose::Grant(_)) => Ok((false, true)),
            super::decisions::Redeem::Denied => {
                let f = if self.has(Mutant::DenialWrongCode) {
                    Failure::new(ErrorCode::PermissionDenied, "Not allowed.")
                } else {
                    Failure::new(ErrorCode::UserCancelled, "The user declined this action.")
                };
                // A denial is terminal: retries of this id get it again.
                if self.has(Mutant::DenialNotRecorded) {
                    lock(&self.durable.state).records.remove(key);
                } else if !tool.is_read() {
                    self.record_terminal(key, tool, digest, cx.now_ms, f.clone().into());
                }
                Err(Box::new(f.into()))
            }
            super::decisions::Redeem::Again(f) => Err(Box::new(f.into())),
            super::decisions::Redeem::Invalid(why) => Err(Box::new(
                Failure::new(ErrorCode::InvalidRequest, why).into(),
            )),
        }
    }

    /// The read-tool latitudes: a `sync_or_async` read tool may hand its
    /// result over through an operation (§2.3, §4.4), a large one included
    /// (§4.5 only says how the file travels).
    fn maybe_in_background(&self, cx: &Cx<'_>, tool: &ToolDef, answer: Answer) -> Answer {
        let background = tool.may_run_async
            && cx.caps.contains(&Capability::AsyncOperations)
            && !self.takes(Variant::SyncForAsyncTool)
            && match (&answer, tool.kind) {
                (Answer::Success { .. }, ToolKind::GetQuote) => self.takes(Variant::AsyncReadTool),
                (Answer::Success { file: Some(_), .. }, ToolKind::ExportHistory) => {
                    self.takes(Variant::LargeResultViaOperation)
                }
                // The inline limit fits the export: it runs in the
                // background all the same, its result inline in the state.
                (Answer::Success { file: None, .. }, ToolKind::ExportHistory) => {
                    self.takes(Variant::LargeResultInlineViaOperation)
                }
                _ => false,
            };
        let Answer::Success { data, file } = answer else {
            return answer;
        };
        if !background {
            return Answer::Success { data, file };
        }
        self.accept_in_background(cx, Job::Read { result: data }, file)
    }

    /// Records a background operation for `job` (its result, if any, already
    /// computed; `file` the result's descriptor bytes) and answers
    /// `accepted` with its id.
    pub(crate) fn accept_in_background(
        &self,
        cx: &Cx<'_>,
        job: Job,
        file: Option<Arc<[u8]>>,
    ) -> Answer {
        let mut d = lock(&self.durable.state);
        let id = self.new_operation_id(&mut d);
        d.operations.insert(
            id.clone(),
            Operation {
                uid: cx.uid,
                request_id: cx.request_id.to_string(),
                created_ms: cx.now_ms,
                job,
                state: OpState::Queued,
                cancel_requested: false,
                progress: 0,
                outcome: None,
                file,
            },
        );
        d.active_ops.insert(id.clone());
        Answer::Accepted {
            data: json!({"operation_id": id, "poll_after_ms": self.poll_after_ms()}),
        }
    }

    /// §6 lets a replay answer "the same operation or the terminal result":
    /// the replay_returns_terminal variant answers the latter once the
    /// operation has ended. A replay into a session that did not negotiate
    /// async_operations never gets `accepted` (§2.3, §4.4 allow it only
    /// after that negotiation): it gets the terminal result, or, while the
    /// operation still runs, a retryable UNAVAILABLE that asks for the same
    /// request_id again.
    fn replayed(&self, d: &mut DurableState, cx: &Cx<'_>, answer: Answer) -> Answer {
        let Answer::Accepted { data } = &answer else {
            return answer;
        };
        let async_ok = cx.caps.contains(&Capability::AsyncOperations)
            || self.has(Mutant::AsyncWithoutNegotiation);
        if async_ok && !self.takes(Variant::ReplayReturnsTerminal) {
            return answer;
        }
        let Some(id) = data.get("operation_id").and_then(Json::as_str) else {
            return answer;
        };
        self.advance_op(d, id, cx.now_ms);
        let terminal = match d.operations.get(id) {
            Some(op) if op.state == OpState::Succeeded => {
                op.outcome.as_ref().map(|result| Answer::Success {
                    data: result.clone(),
                    file: op.file.clone(),
                })
            }
            Some(op) if op.state == OpState::Failed => op
                .outcome
                .as_ref()
                .and_then(Failure::from_json)
                .map(Answer::Error),
            Some(op) if op.state == OpState::Cancelled => {
                Some(Failure::new(ErrorCode::Cancelled, "The operation was cancelled.").into())
            }
            _ => None,
        };
        match terminal {
            Some(t) => t,
            None if async_ok => answer,
            None => {
                let mut f = Failure::new(
                    ErrorCode::Unavailable,
                    "The execution started under this request_id is still running; ask again with the same request_id.",
                );
                f.retry_after_ms = Some(self.poll_after_ms());
                f.into()
            }
        }
    }

    pub(crate) fn deadline_passed(&self, cx: &Cx<'_>) -> Option<Failure> {
        (cx.now_ms > cx.deadline_at_ms && !self.has(Mutant::DeadlineIgnored)).then(|| {
            Failure::new(
                ErrorCode::DeadlineExceeded,
                "The request deadline has passed; nothing was done.",
            )
        })
    }

    /// §6: records bind the canonical args (key order and number spelling do
    /// not make a different request). Args that cannot be canonicalized get a
    /// digest of their bytes; they never reach a record anyway.
    fn args_digest(&self, args: &str) -> String {
        let raw = || format!("raw:{}", sha256_hex(args.as_bytes()));
        if self.takes(Variant::DedupeRawArgs) {
            return raw();
        }
        parse_json_text("args", args)
            .ok()
            .and_then(|v| canonical_hash(&v).ok())
            .unwrap_or_else(raw)
    }

    pub(crate) fn dedupe_key(&self, uid: u32, request_id: &str) -> DedupeKey {
        DedupeKey {
            uid: (!self.has(Mutant::DedupeNotCallerBound)).then_some(uid),
            provider_id: self.cfg.provider_id.clone(),
            request_id: request_id.to_string(),
        }
    }

    fn classify(
        &self,
        d: &mut DurableState,
        key: &DedupeKey,
        tool: &str,
        digest: &str,
        now_ms: i64,
    ) -> Seen {
        let Some(r) = d.records.get(key) else {
            return Seen::Fresh;
        };
        if matches!(r.state, RecordState::InFlight { boot } if boot != d.boot) {
            // Reserved by a process that was killed: nothing was committed.
            d.records.remove(key);
            return Seen::Fresh;
        }
        let settled = !matches!(r.state, RecordState::InFlight { .. });
        let kept_ms = if self.has(Mutant::DedupeForgottenEarly) {
            60_000
        } else {
            self.window_ms()
        };
        if settled && now_ms > r.created_ms.saturating_add(kept_ms) {
            // Past the idempotency window the id is forgotten.
            d.records.remove(key);
            return Seen::Fresh;
        }
        if r.tool != tool && self.has(Mutant::DedupePerTool) {
            // The mutant keys its records by tool as well: another tool's
            // record is none of this call's business.
            return Seen::Fresh;
        }
        let other_content = if self.has(Mutant::DedupeToolNotBound) {
            r.tool == tool && r.digest != digest
        } else {
            r.tool != tool || r.digest != digest
        };
        if !self.has(Mutant::DedupeIgnoresArgs) && other_content {
            return Seen::Conflict;
        }
        match &r.state {
            RecordState::Pending => Seen::Pending,
            RecordState::InFlight { .. } => Seen::InFlight,
            RecordState::Done(a) => Seen::Done(a.clone()),
        }
    }

    /// Looks the request id up, waiting (bounded by the deadline) while
    /// another thread executes it: §6 allows one executor only.
    fn settle<'a>(
        &'a self,
        mut d: MutexGuard<'a, DurableState>,
        cx: &Cx<'_>,
        key: &DedupeKey,
        tool: &str,
        digest: &str,
    ) -> (MutexGuard<'a, DurableState>, Option<Answer>) {
        let bound_ms = cx
            .deadline_at_ms
            .saturating_sub(cx.now_ms)
            .clamp(0, MAX_WAIT_MS);
        let bound = Duration::from_millis(bound_ms as u64);
        let start = Instant::now();
        loop {
            match self.classify(&mut d, key, tool, digest, cx.now_ms) {
                Seen::Fresh | Seen::Pending => return (d, None),
                Seen::Done(a) => return (d, Some(a)),
                Seen::Conflict => {
                    return (
                        d,
                        Some(
                            Failure::new(
                                ErrorCode::InvalidRequest,
                                "This request_id was already used with another tool or other args.",
                            )
                            .into(),
                        ),
                    )
                }
                Seen::InFlight if self.has(Mutant::ConcurrentDoubleExecution) => return (d, None),
                Seen::InFlight => {
                    let elapsed = start.elapsed();
                    if elapsed >= bound {
                        return (
                            d,
                            Some(
                                Failure::new(
                                    ErrorCode::DeadlineExceeded,
                                    "The request is still being executed; ask again with the same request_id.",
                                )
                                .into(),
                            ),
                        );
                    }
                    d = match self.durable.changed.wait_timeout(d, bound - elapsed) {
                        Ok((g, _)) => g,
                        Err(e) => e.into_inner().0,
                    };
                }
            }
        }
    }

    pub(crate) fn record_terminal(
        &self,
        key: &DedupeKey,
        tool: &ToolDef,
        digest: &str,
        now_ms: i64,
        answer: Answer,
    ) {
        if self.has(Mutant::NoDedupe) {
            return;
        }
        let mut d = lock(&self.durable.state);
        insert_record(&mut d, key, tool, digest, now_ms, RecordState::Done(answer));
        drop(d);
        self.durable.changed.notify_all();
    }

    /// Tools a caller does not see (the hide_tools_without_scope variant).
    pub(crate) fn hidden_tools(&self, uid: u32) -> BTreeSet<String> {
        if let Some(d) = self.described() {
            return d.hidden.get(&uid).cloned().unwrap_or_default();
        }
        if !self.takes(Variant::HideToolsWithoutScope) {
            return BTreeSet::new();
        }
        self.catalog
            .tools
            .iter()
            .filter(|t| !self.missing_scopes(uid, t).is_empty())
            .map(|t| t.name.clone())
            .collect()
    }

    fn missing_scopes(&self, uid: u32, tool: &ToolDef) -> BTreeSet<String> {
        let d = lock(&self.durable.state);
        let held = d.grants.get(&uid).unwrap_or(&self.cfg.default_grants);
        tool.scopes
            .iter()
            .filter(|s| !held.contains(**s))
            .map(|s| s.to_string())
            .collect()
    }

    /// Reserve, perform the effect outside the lock, then commit effect and
    /// result in one critical section. Concurrent callers of the same id
    /// wait in [`Self::settle`] and get the committed result.
    pub(crate) fn run_mutation(
        &self,
        cx: &Cx<'_>,
        tool: &ToolDef,
        targs: &ToolArgs,
        key: DedupeKey,
        digest: String,
    ) -> Answer {
        let dedupe = !self.has(Mutant::NoDedupe) && !self.dedupe_skipped(cx, targs);
        let boot = {
            let mut d = lock(&self.durable.state);
            if dedupe {
                let (mut g, settled) = self.settle(d, cx, &key, &tool.name, &digest);
                if let Some(a) = settled {
                    // The same replay rules as before validation (the
                    // validate_before_dedupe variant reaches only this one).
                    return self.replayed(&mut g, cx, a);
                }
                let boot = g.boot;
                insert_record(
                    &mut g,
                    &key,
                    tool,
                    &digest,
                    cx.now_ms,
                    RecordState::InFlight { boot },
                );
                d = g;
            }
            d.boot
        };
        if self.cfg.effect_delay_ms > 0 {
            (self.cfg.sleeper)(self.cfg.effect_delay_ms);
        }
        let mut guard = lock(&self.durable.state);
        if guard.boot != boot {
            // The process that reserved this id was killed before it could
            // commit; nothing happened and the reservation is gone.
            return Failure::new(
                ErrorCode::Unavailable,
                "The provider restarted; ask again with the same request_id.",
            )
            .into();
        }
        let async_ok = (cx.caps.contains(&Capability::AsyncOperations)
            || self.has(Mutant::AsyncWithoutNegotiation))
            && !self.takes(Variant::SyncForAsyncTool);
        let answer = match self.effect(
            &mut guard,
            cx.now_ms,
            cx.uid,
            cx.request_id,
            async_ok,
            targs,
        ) {
            Ok(Effected::Value(v)) => self.package(cx.caps, tool, v),
            Ok(Effected::Operation(id)) => Answer::Accepted {
                data: if self.has(Mutant::PollAfterMsMissing) {
                    json!({ "operation_id": id })
                } else {
                    json!({"operation_id": id, "poll_after_ms": self.poll_after_ms()})
                },
            },
            Err(f) => f.into(),
        };
        if dedupe {
            insert_record(
                &mut guard,
                &key,
                tool,
                &digest,
                cx.now_ms,
                RecordState::Done(answer.clone()),
            );
        }
        drop(guard);
        self.durable.changed.notify_all();
        if self.has(Mutant::DeadlineCheckedAfterEffect) {
            if let Some(f) = self.deadline_passed(cx) {
                return f.into();
            }
        }
        answer
    }

    /// The business effect of a mutating tool, under the durable lock.
    fn effect(
        &self,
        d: &mut DurableState,
        now_ms: i64,
        uid: u32,
        request_id: &str,
        async_ok: bool,
        targs: &ToolArgs,
    ) -> Result<Effected, Failure> {
        match targs {
            ToolArgs::CreateAlert { symbol, price } => {
                d.next_alert += 1;
                let id = format!("alert-{}", d.next_alert);
                d.alerts.insert(
                    id.clone(),
                    Alert {
                        symbol: symbol.clone(),
                        price: *price,
                    },
                );
                d.effects += 1;
                Ok(Effected::Value(json!({ "alert_id": id })))
            }
            ToolArgs::DeleteAlert { alert_id } => {
                let deleted = d.alerts.remove(alert_id).is_some();
                d.effects += 1;
                Ok(Effected::Value(json!({ "deleted": deleted })))
            }
            ToolArgs::SyncPortfolio { fail } if async_ok => {
                let id = self.new_operation_id(d);
                d.operations.insert(
                    id.clone(),
                    Operation {
                        uid,
                        request_id: request_id.to_string(),
                        created_ms: now_ms,
                        job: Job::SyncPortfolio { fail: *fail },
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
            ToolArgs::SyncPortfolio { fail: true } => Err(sync_failure()),
            ToolArgs::SyncPortfolio { fail: false } => {
                d.synced += 1;
                d.effects += 1;
                Ok(Effected::Value(json!({ "synced": d.synced })))
            }
            ToolArgs::Notes(args) => self.notes_effect(d, now_ms, uid, request_id, async_ok, args),
            ToolArgs::Described { call: Some(c), .. } => {
                self.described_effect(d, now_ms, uid, request_id, async_ok, c)
            }
            ToolArgs::Described { call: None, .. } => {
                Err(Failure::new(ErrorCode::InternalError, "Internal error."))
            }
            ToolArgs::GetQuote { .. } | ToolArgs::ListAlerts | ToolArgs::ExportHistory { .. } => {
                Err(Failure::new(ErrorCode::InternalError, "Internal error."))
            }
        }
    }

    /// Runs a mutating tool for the v1 mutant: straight to the effect.
    pub(crate) fn effect_now(
        &self,
        now_ms: i64,
        uid: u32,
        targs: &ToolArgs,
    ) -> Result<Json, Failure> {
        let mut d = lock(&self.durable.state);
        match self.effect(&mut d, now_ms, uid, "", false, targs)? {
            Effected::Value(v) => Ok(v),
            Effected::Operation(_) => {
                Err(Failure::new(ErrorCode::InternalError, "Internal error."))
            }
        }
    }

    /// The value of a tool without side effects (§3.4: effect=read changes
    /// no business state).
    pub(crate) fn read_value(&self, targs: &ToolArgs) -> Result<Json, Failure> {
        match targs {
            ToolArgs::GetQuote { symbol } => {
                if self.has(Mutant::ReadToolHasEffect) {
                    lock(&self.durable.state).effects += 1;
                }
                let price = fixtures::quote_price(symbol);
                Ok(if self.has(Mutant::OutputViolatesSchema) {
                    json!({ "symbol": symbol, "price": format!("{price:.2}") })
                } else {
                    json!({ "symbol": symbol, "price": price })
                })
            }
            ToolArgs::ListAlerts => {
                let d = lock(&self.durable.state);
                let alerts: Vec<Json> = d
                    .alerts
                    .iter()
                    .map(|(id, a)| json!({"alert_id": id, "symbol": a.symbol, "price": a.price}))
                    .collect();
                Ok(if self.takes(Variant::NoEffectCounter) {
                    json!({ "count": alerts.len(), "alerts": alerts })
                } else {
                    json!({ "count": alerts.len(), "effects": d.effects, "alerts": alerts })
                })
            }
            // A copy for the v1 mutant's path; v2 answers share the export
            // through `read_serialized`.
            ToolArgs::ExportHistory { rows } => Ok(fixtures::history_export(
                *rows,
                self.takes(Variant::HostileText),
            )
            .value
            .clone()),
            ToolArgs::Notes(args) => self.notes_read(args),
            ToolArgs::Described { index, args, .. } => self.described_v1_value(*index, args, 0),
            _ => Err(Failure::new(ErrorCode::InternalError, "Internal error.")),
        }
    }

    /// A read tool's result, serialized (shared when it is the history
    /// export, see [`fixtures::history_export`]).
    fn read_serialized(&self, targs: &ToolArgs) -> Result<Arc<Serialized>, Failure> {
        match targs {
            ToolArgs::ExportHistory { rows } => Ok(fixtures::history_export(
                *rows,
                self.takes(Variant::HostileText),
            )),
            _ => self.read_value(targs).map(|v| Arc::new(Serialized::new(v))),
        }
    }

    /// §4.2: the Provider checks its own output against output_schema.
    pub(crate) fn output_valid(&self, tool: &ToolDef, value: &Json) -> bool {
        self.unchecked_output(tool) || tool.output.is_valid(value)
    }

    fn unchecked_output(&self, tool: &ToolDef) -> bool {
        (tool.kind == ToolKind::GetQuote && self.has(Mutant::OutputViolatesSchema))
            // A described tool's value is the target's own (judged on the
            // target) or generated from its schema.
            || matches!(tool.kind, ToolKind::Described(_))
    }

    /// §4.2: validate our own output; §4.5: inline, file, or RESULT_TOO_LARGE.
    pub(crate) fn package(
        &self,
        caps: &BTreeSet<Capability>,
        tool: &ToolDef,
        value: Json,
    ) -> Answer {
        self.package_serialized(caps, tool, Arc::new(Serialized::new(value)))
    }

    fn package_serialized(
        &self,
        caps: &BTreeSet<Capability>,
        tool: &ToolDef,
        result: Arc<Serialized>,
    ) -> Answer {
        if !self.unchecked_output(tool) && !result.valid_for(tool) {
            return Failure::new(
                ErrorCode::InternalError,
                "The provider could not produce a valid result.",
            )
            .into();
        }
        // The inline limit applies to the `data` text that would travel in
        // the Bundle: `{"kind":"inline","value":` VALUE `}` (keys sorted, no
        // spaces).
        let max = self.limits().max_inline_result_bytes;
        if (INLINE_WRAPPER_BYTES + result.text.len()) as u64 <= max
            || self.has(Mutant::InlineOverLimit)
        {
            return Answer::ok(json!({"kind": "inline", "value": result.into_value()}));
        }
        if !caps.contains(&Capability::LargeResults) && !self.has(Mutant::FileWithoutNegotiation) {
            return Failure::new(
                ErrorCode::ResultTooLarge,
                "The result is too large to return inline, and large_results was not negotiated.",
            )
            .into();
        }
        let (bytes, digest): (Arc<[u8]>, String) = if self.has(Mutant::FileContentViolatesSchema) {
            let b = json!("The export is too large; ask for fewer rows.")
                .to_string()
                .into_bytes();
            let d = sha256_hex(&b);
            (Arc::from(b.into_boxed_slice()), d)
        } else {
            (result.text.clone(), result.sha256().to_string())
        };
        let size = bytes.len() as u64 + u64::from(self.has(Mutant::FileWrongSize));
        let sha256 = if self.has(Mutant::FileWrongSha256) {
            sha256_hex(&bytes[..bytes.len().saturating_sub(1)])
        } else {
            digest
        };
        Answer::Success {
            data: json!({
                "kind": "file",
                "media_type": "application/json",
                "size_bytes": size,
                "sha256": sha256,
            }),
            file: Some(bytes),
        }
    }
}

/// The bytes `{"kind":"inline","value":}` add around an inline value's text.
const INLINE_WRAPPER_BYTES: usize = r#"{"kind":"inline","value":}"#.len();

fn insert_record(
    d: &mut DurableState,
    key: &DedupeKey,
    tool: &ToolDef,
    digest: &str,
    now_ms: i64,
    state: RecordState,
) {
    // A record keeps the time its id was first bound: the window runs from
    // there.
    let created_ms = d.records.get(key).map_or(now_ms, |r| r.created_ms);
    d.records.insert(
        key.clone(),
        Record {
            tool: tool.name.clone(),
            digest: digest.to_string(),
            created_ms,
            state,
        },
    );
}

/// §3.4: `always`, or `provider_policy` when the runtime risk is higher than
/// declared (an alert at an extreme price, a note shared publicly).
fn needs_confirmation(tool: &ToolDef, targs: &ToolArgs, escalate: bool) -> bool {
    match tool.confirmation {
        "always" => true,
        "provider_policy" => escalate && targs.escalates(),
        _ => false,
    }
}

pub(crate) fn sync_failure() -> Failure {
    Failure::new(
        ErrorCode::Conflict,
        "The portfolio could not be synchronised in its current state.",
    )
}

/// What the scope_degraded_data mutant passes off as a complete result.
fn degraded(kind: ToolKind) -> Answer {
    let value = match kind {
        ToolKind::GetQuote => json!({"symbol": "", "price": 0}),
        ToolKind::ListAlerts => json!({"count": 0, "effects": 0, "alerts": []}),
        ToolKind::CreateAlert => json!({"alert_id": ""}),
        ToolKind::DeleteAlert => json!({"deleted": false}),
        ToolKind::SyncPortfolio => json!({"synced": 0}),
        ToolKind::ExportHistory => json!({"rows": []}),
        ToolKind::Notes(tool) => notes::degraded(tool),
        ToolKind::Described(_) => json!(null),
    };
    Answer::ok(json!({"kind": "inline", "value": value}))
}

#[cfg(test)]
mod tests {
    use super::fixtures::{history_export, Catalog, Serialized};
    use super::INLINE_WRAPPER_BYTES;
    use crate::provider::tool::ToolKind;
    use crate::provider::variant::Variant;
    use crate::provider::FixtureSet;
    use cetp_proto::canonical::sha256_hex;
    use serde_json::json;
    use std::collections::BTreeSet;
    use std::sync::Arc;

    /// The export is built once per rows and hostility, and its text and
    /// digest are those of its value.
    #[test]
    fn the_history_export_is_shared_and_consistent() {
        let a = history_export(30, false);
        assert!(Arc::ptr_eq(&a, &history_export(30, false)));
        let h = history_export(30, true);
        assert!(!Arc::ptr_eq(&a, &h));
        for e in [&a, &h] {
            assert_eq!(&*e.text, e.value.to_string().as_bytes());
            assert_eq!(e.sha256(), sha256_hex(&e.text));
        }
        assert_eq!(a.value["rows"].as_array().map(Vec::len), Some(30));
        assert!(h.value["rows"][0].get("note").is_some());
    }

    /// A result's validity is its own per output_schema, shared or not: the
    /// same list without `effects` breaks the reference's list_alerts schema
    /// and keeps the no_effect_counter variant's, asked in either order.
    #[test]
    fn validity_is_judged_per_schema() {
        let catalog = |lat: &[Variant]| {
            let lat: BTreeSet<Variant> = lat.iter().copied().collect();
            Catalog::new(FixtureSet::Reference, &BTreeSet::new(), &lat, false)
        };
        let (full, lean) = (catalog(&[]), catalog(&[Variant::NoEffectCounter]));
        let full = full.by_kind(ToolKind::ListAlerts).unwrap();
        let lean = lean.by_kind(ToolKind::ListAlerts).unwrap();
        let value = json!({"count": 0, "alerts": []});
        for s in [
            Serialized::new(value.clone()),
            Serialized::shared(value.clone()),
        ] {
            for _ in 0..2 {
                assert!(!s.valid_for(full));
                assert!(s.valid_for(lean));
            }
        }
        let s = Serialized::shared(value);
        assert!(s.valid_for(lean));
        assert!(!s.valid_for(full));
    }

    /// The inline limit is measured on the `data` text without building it.
    #[test]
    fn the_inline_wrapper_is_what_data_adds_to_its_value() {
        for v in [
            json!(null),
            json!({"rows": [{"seq": 1, "side": "buy"}], "z": "é\u{1}"}),
            json!([1.5, "x"]),
        ] {
            let data = json!({"kind": "inline", "value": v.clone()}).to_string();
            assert_eq!(
                data.len(),
                INLINE_WRAPPER_BYTES + v.to_string().len(),
                "{data}"
            );
        }
    }
}
