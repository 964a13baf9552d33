//! How the engine hosts a [`Described`] app: `execute_tool` of its tools
//! once the protocol's own checks have passed, the business's answer kept
//! within what the descriptor allows, and the end of its operations. Kept
//! apart from `described.rs`, whose types the catalogue builds on, so that
//! the catalogue does not depend on the engine's execution path.

use super::args::{Effected, ToolArgs};
use super::described::{BusinessAnswer, BusinessCall, Described, DescribedCall, Flavour};
use super::state::{Answer, DedupeKey, DurableState, Failure, Job, Operation, Purpose};
use super::tool::ToolDef;
use super::util::lock;
use super::{Cx, ReferenceProvider};
use cetp_proto::envelope::{Capability, OpState};
use cetp_proto::ErrorCode;
use serde_json::{json, Value as Json};

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
                let targs = ToolArgs::Described {
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
    ) -> Result<Effected, Failure> {
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
