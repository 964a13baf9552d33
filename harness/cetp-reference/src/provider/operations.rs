//! Background operations (§4.4): `sync_portfolio` with async_operations.
//!
//! An operation is queued, runs from [`OPERATION_RUNNING_AFTER_MS`] and ends at
//! [`OPERATION_DONE_AFTER_MS`] of device time after creation. Its state is
//! advanced lazily from the `now_ms` of every call, only ever forwards, and
//! its effect is committed exactly once, with the transition to succeeded.

use super::execute::sync_failure;
use super::fixtures::ToolKind;
use super::state::{Answer, DurableState, Failure};
use super::util::lock;
use super::{Cx, Fault, Latitude, ReferenceProvider, OPERATION_RUNNING_AFTER_MS};
use cetp_proto::envelope::OpState;
use cetp_proto::ErrorCode;
use serde_json::{json, Value as Json};

/// Expired records are swept at most once per minute of device time.
const PRUNE_EVERY_MS: i64 = 60_000;
/// How long the operation_expired_early mutant keeps operations.
const EARLY_TTL_MS: i64 = 60_000;

impl ReferenceProvider {
    /// Advances every live operation to `now_ms` and sweeps what expired.
    pub(crate) fn tick(&self, now_ms: i64) {
        let mut guard = lock(&self.durable.state);
        let d = &mut *guard;
        let live: Vec<String> = d.active_ops.iter().cloned().collect();
        for id in live {
            self.advance(d, &id, now_ms);
        }
        if now_ms.saturating_sub(d.pruned_at_ms) >= PRUNE_EVERY_MS {
            d.pruned_at_ms = now_ms;
            self.prune(d, now_ms);
        }
    }

    fn prune(&self, d: &mut DurableState, now_ms: i64) {
        let window = self.window_ms();
        d.records.retain(|_, r| {
            matches!(r.state, super::state::RecordState::InFlight { .. })
                || now_ms <= r.created_ms.saturating_add(window)
        });
        // Operations answer RESULT_EXPIRED for another window, then are
        // forgotten.
        d.operations.retain(|id, op| {
            d.active_ops.contains(id)
                || now_ms <= op.created_ms.saturating_add(window.saturating_mul(2))
        });
        let stale: Vec<String> = d
            .decisions
            .iter()
            .filter(|(_, p)| now_ms > p.expires_ms.saturating_add(window))
            .map(|(id, _)| id.clone())
            .collect();
        for id in stale {
            if let Some(p) = d.decisions.remove(&id) {
                d.resume_tokens.remove(&p.resume_token);
                let key = (p.uid, p.request_id);
                if d.pending_by_request.get(&key) == Some(&id) {
                    d.pending_by_request.remove(&key);
                }
            }
        }
    }

    pub(crate) fn advance_op(&self, d: &mut DurableState, id: &str, now_ms: i64) {
        self.advance(d, id, now_ms);
    }

    fn advance(&self, d: &mut DurableState, id: &str, now_ms: i64) {
        let output = self
            .catalog
            .tools
            .iter()
            .find(|t| t.kind == ToolKind::SyncPortfolio)
            .map(|t| &t.output);
        let DurableState {
            operations,
            active_ops,
            effects,
            synced,
            ..
        } = d;
        let Some(op) = operations.get_mut(id) else {
            active_ops.remove(id);
            return;
        };
        if op.state.is_terminal() {
            active_ops.remove(id);
            return;
        }
        if op.cancel_requested {
            if self.has(Fault::CancelReportsCancelledAfterEffect) {
                *synced += 1;
                *effects += 1;
            }
            op.state = OpState::Cancelled;
            active_ops.remove(id);
            return;
        }
        let age = now_ms.saturating_sub(op.created_ms);
        let done_after = self.operation_done_after_ms();
        if age >= done_after {
            if let Some(result) = op.prepared.take() {
                // A read: nothing to commit, the result was computed up front.
                op.state = OpState::Succeeded;
                op.outcome = Some(result);
            } else if op.fail {
                op.state = OpState::Failed;
                op.outcome = Some(sync_failure().to_json());
            } else {
                let value = json!({ "synced": *synced + 1 });
                if output.is_some_and(|s| s.is_valid(&value)) {
                    *synced += 1;
                    *effects += 1;
                    op.state = OpState::Succeeded;
                    op.outcome = Some(json!({"kind": "inline", "value": value}));
                } else {
                    op.state = OpState::Failed;
                    op.outcome = Some(
                        Failure::new(
                            ErrorCode::InternalError,
                            "The provider could not produce a valid result.",
                        )
                        .to_json(),
                    );
                }
            }
            active_ops.remove(id);
        } else if age >= OPERATION_RUNNING_AFTER_MS {
            op.state = OpState::Running;
            let pct = (age - OPERATION_RUNNING_AFTER_MS) * 100
                / (done_after - OPERATION_RUNNING_AFTER_MS);
            op.progress = op.progress.max(pct.clamp(0, 99));
        }
    }

    /// §4.4: an operation is visible only to the UID that created it, and
    /// only under the request id of the execution that created it. Anything
    /// else gets the same answer as an unknown id.
    fn find_op(&self, d: &DurableState, cx: &Cx<'_>, op_id: &str) -> Result<(), Failure> {
        let visible = d.operations.get(op_id).filter(|op| {
            (op.uid == cx.uid || self.has(Fault::OperationOtherCaller))
                && (op.request_id == cx.request_id || self.has(Fault::OperationRequestIdUnbound))
        });
        let Some(op) = visible else {
            return Err(Failure::new(
                ErrorCode::InvalidRequest,
                "No such operation for this request.",
            ));
        };
        let ttl = if self.has(Fault::OperationExpiredEarly) {
            EARLY_TTL_MS
        } else {
            self.window_ms()
        };
        if cx.now_ms > op.created_ms.saturating_add(ttl) {
            return Err(Failure::new(
                ErrorCode::ResultExpired,
                "The operation's result is no longer kept.",
            ));
        }
        Ok(())
    }

    pub(crate) fn get_operation(&self, cx: &Cx<'_>, op_id: &str) -> Answer {
        let mut guard = lock(&self.durable.state);
        let d = &mut *guard;
        if let Err(f) = self.find_op(d, cx, op_id) {
            return f.into();
        }
        self.advance(d, op_id, cx.now_ms);
        match d.operations.get(op_id) {
            Some(op) => {
                let mut v = op_json(op_id, op, self.poll_after_ms());
                if self.takes(Latitude::ProgressOmitted) {
                    if let Some(obj) = v.as_object_mut() {
                        obj.remove("progress");
                    }
                }
                if self.has(Fault::FailedOperationWithoutError) {
                    if let Some(obj) = v.as_object_mut() {
                        obj.remove("error");
                    }
                }
                if self.has(Fault::OperationResultUnwrapped) {
                    if let Some(value) = v.get_mut("result").and_then(|r| r.get("value")).cloned() {
                        v["result"] = value;
                    }
                }
                // §4.4: the succeeded state carries the same result envelope
                // as a synchronous call, so a file result brings its fd.
                let file = (op.state == OpState::Succeeded)
                    .then(|| op.file.clone())
                    .flatten();
                Answer::Success { data: v, file }
            }
            None => Failure::new(
                ErrorCode::InvalidRequest,
                "No such operation for this request.",
            )
            .into(),
        }
    }

    /// §4.4: cancellation is a request; it succeeds only before the effect
    /// is committed, and a finished operation answers CONFLICT.
    pub(crate) fn cancel_operation(&self, cx: &Cx<'_>, op_id: &str) -> Answer {
        let mut guard = lock(&self.durable.state);
        let d = &mut *guard;
        if let Err(f) = self.find_op(d, cx, op_id) {
            return f.into();
        }
        if let Some(f) = self.deadline_passed(cx) {
            return f.into();
        }
        self.advance(d, op_id, cx.now_ms);
        let Some(op) = d.operations.get_mut(op_id) else {
            return Failure::new(
                ErrorCode::InvalidRequest,
                "No such operation for this request.",
            )
            .into();
        };
        match op.state {
            OpState::Succeeded | OpState::Failed
                if !self.takes(Latitude::CancelFinishedAcknowledged) =>
            {
                return Failure::new(
                    ErrorCode::Conflict,
                    "The operation already finished and cannot be cancelled.",
                )
                .into();
            }
            OpState::Queued | OpState::Running => op.cancel_requested = true,
            _ => {}
        }
        let state = if self.has(Fault::CancelReportsWrongState) {
            OpState::Cancelled
        } else {
            OpState::CancellationRequested
        };
        Answer::ok(json!({"operation_id": op_id, "state": state.as_str()}))
    }
}

fn op_json(id: &str, op: &super::state::Operation, poll_after_ms: i64) -> Json {
    let mut v = json!({"operation_id": id, "state": op.state.as_str()});
    if op.state == OpState::Running {
        v["progress"] = json!({
            "current": op.progress,
            "total": 100,
            "message": "Synchronising portfolio",
        });
    }
    if !op.state.is_terminal() {
        v["poll_after_ms"] = json!(poll_after_ms);
    }
    match (op.state, &op.outcome) {
        (OpState::Succeeded, Some(result)) => v["result"] = result.clone(),
        (OpState::Failed, Some(error)) => v["error"] = error.clone(),
        _ => {}
    }
    v
}
