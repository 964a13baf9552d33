//! Background operations (§4.4): `sync_portfolio` of the reference app, and
//! large `archive_notes` of the notes app, with async_operations.
//!
//! An operation is queued, runs from its job's running age (reference:
//! [`OPERATION_RUNNING_AFTER_MS`]) and ends at its done age (reference:
//! [`OPERATION_DONE_AFTER_MS`]) of device time after creation. Its state is
//! advanced lazily from the `now_ms` of every call, only ever forwards, and
//! its effect is committed exactly once, with the transition to succeeded.

use super::execute::sync_failure;
use super::notes;
use super::state::{Answer, DurableState, Failure, Job, Operation};
use super::tool::ToolKind;
use super::util::lock;
use super::{
    Cx, Mutant, ReferenceProvider, Variant, OPERATION_DONE_AFTER_MS, OPERATION_RUNNING_AFTER_MS,
};
use cetp_proto::canonical::sha256_hex;
use cetp_proto::envelope::Capability;
use cetp_proto::envelope::OpState;
use cetp_proto::ErrorCode;
use serde_json::{json, Value as Json};
use std::sync::Arc;

/// Expired records are swept at most once per minute of device time.
const PRUNE_EVERY_MS: i64 = 60_000;
/// How long the operation_expired_early mutant keeps operations.
const EARLY_TTL_MS: i64 = 60_000;

impl Job {
    /// Device-time ages at which the job starts running and finishes.
    fn timing(&self) -> (i64, i64) {
        match self {
            Job::SyncPortfolio { .. } | Job::Read { .. } => {
                (OPERATION_RUNNING_AFTER_MS, OPERATION_DONE_AFTER_MS)
            }
            Job::Notes(_) => (
                notes::ARCHIVE_RUNNING_AFTER_MS,
                notes::ARCHIVE_DONE_AFTER_MS,
            ),
            Job::Described { done_after_ms, .. } => {
                let done = (*done_after_ms).max(1);
                ((done / 2).min(OPERATION_RUNNING_AFTER_MS), done)
            }
        }
    }

    fn progress_message(&self) -> &'static str {
        match self {
            Job::SyncPortfolio { .. } => "Synchronising portfolio",
            Job::Read { .. } => "Preparing the result",
            Job::Notes(_) => "Archiving notes",
            Job::Described { .. } => "Working",
        }
    }
}

impl ReferenceProvider {
    /// The job's running and done ages; the slow_operations variant takes
    /// twenty minutes of device time over every job.
    fn job_timing(&self, job: &Job) -> (i64, i64) {
        let (running, done) = job.timing();
        if self.takes(Variant::SlowOperations) {
            (running, done.max(20 * 60_000))
        } else {
            (running, done)
        }
    }

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
        let Some(op) = d.operations.get(id) else {
            d.active_ops.remove(id);
            return;
        };
        let job = op.job.clone();
        let age = now_ms.saturating_sub(op.created_ms);
        let (running_after, done_after) = self.job_timing(&job);
        // The mutant's cancelled job runs on to its end.
        let runs_on = self.has(Mutant::CancelledThenSucceeds)
            && op.state == OpState::Cancelled
            && op.outcome.is_none();
        if op.state.is_terminal() && !(runs_on && age >= done_after) {
            if !runs_on {
                d.active_ops.remove(id);
            }
            return;
        }
        let (state, outcome) = if op.cancel_requested && !runs_on {
            if self.has(Mutant::CancelledThenSucceeds) {
                if let Some(op) = d.operations.get_mut(id) {
                    op.state = OpState::Cancelled;
                }
                return;
            }
            if self.has(Mutant::CancelReportsCancelledAfterEffect) {
                self.apply_job(d, &job);
            }
            (OpState::Cancelled, None)
        } else if age >= done_after {
            match self.finish_job(d, &job) {
                Ok(result) => (OpState::Succeeded, Some(result)),
                Err(f) => (OpState::Failed, Some(f.to_json())),
            }
        } else {
            if age >= running_after {
                if let Some(op) = d.operations.get_mut(id) {
                    op.state = OpState::Running;
                    let pct = (age - running_after) * 100 / (done_after - running_after);
                    op.progress = op.progress.max(pct.clamp(0, 99));
                }
            }
            return;
        };
        if let Some(op) = d.operations.get_mut(id) {
            op.state = state;
            op.outcome = outcome;
        }
        d.active_ops.remove(id);
    }

    /// Ends a job that ran its course: the result envelope of a succeeded
    /// operation, or the error of a failed one. The effect is committed
    /// only with a valid result.
    fn finish_job(&self, d: &mut DurableState, job: &Job) -> Result<Json, Failure> {
        match job {
            Job::SyncPortfolio { fail: true } => Err(sync_failure()),
            Job::SyncPortfolio { fail: false } => {
                let value = json!({ "synced": d.synced + 1 });
                let valid = self
                    .catalog
                    .by_kind(ToolKind::SyncPortfolio)
                    .is_some_and(|t| t.output.is_valid(&value));
                if !valid {
                    return Err(Failure::new(
                        ErrorCode::InternalError,
                        "The provider could not produce a valid result.",
                    ));
                }
                self.apply_job(d, job);
                Ok(json!({"kind": "inline", "value": value}))
            }
            Job::Notes(j) => self.notes_finish_job(d, j),
            // A read: nothing to commit, the result was computed up front.
            Job::Read { result } => Ok(result.clone()),
            Job::Described {
                result,
                effect,
                fails,
                ..
            } => super::described_exec::finish_described(d, result, *effect, *fails),
        }
    }

    /// Commits a job's effect.
    fn apply_job(&self, d: &mut DurableState, job: &Job) {
        match job {
            Job::SyncPortfolio { .. } => {
                d.synced += 1;
                d.effects += 1;
            }
            Job::Notes(j) => self.notes_apply_job(d, j),
            Job::Read { .. } => {}
            Job::Described { effect, .. } => {
                if *effect {
                    d.effects += 1;
                }
            }
        }
    }

    /// §4.4: an operation is visible only to the UID that created it, and
    /// only under the request id of the execution that created it. Anything
    /// else gets the same answer as an unknown id.
    fn find_op(&self, d: &DurableState, cx: &Cx<'_>, op_id: &str) -> Result<(), Failure> {
        let visible = d.operations.get(op_id).filter(|op| {
            (op.uid == cx.uid || self.has(Mutant::OperationOtherCaller))
                && (op.request_id == cx.request_id || self.has(Mutant::OperationRequestIdUnbound))
        });
        let Some(op) = visible else {
            // Only another caller's: a request id that is not the
            // execution's is INVALID_REQUEST by §5's table (CETP2-5-14).
            let foreign = d
                .operations
                .get(op_id)
                .is_some_and(|op| op.uid != cx.uid && op.request_id == cx.request_id);
            if self.takes(Variant::ForeignOperationsExpired) && foreign {
                return Err(Failure::new(
                    ErrorCode::ResultExpired,
                    "No operation result is kept for this request.",
                ));
            }
            return Err(Failure::new(
                ErrorCode::InvalidRequest,
                "No such operation for this request.",
            ));
        };
        let ttl = if self.has(Mutant::OperationExpiredEarly) {
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
                // Progress is display data (§4.4): the vendor's text.
                if let Some(m) = v.pointer_mut("/progress/message") {
                    *m = json!(self.vendor_text(m.as_str().unwrap_or_default()));
                }
                if self.takes(Variant::ProgressOmitted) {
                    if let Some(obj) = v.as_object_mut() {
                        obj.remove("progress");
                    }
                }
                if self.has(Mutant::FailedOperationWithoutError) {
                    if let Some(obj) = v.as_object_mut() {
                        obj.remove("error");
                    }
                }
                if self.has(Mutant::OperationResultUnwrapped) {
                    if let Some(value) = v.get_mut("result").and_then(|r| r.get("value")).cloned() {
                        v["result"] = value;
                    }
                }
                // §4.4: the succeeded state carries the same result envelope
                // as a synchronous call, so a file result brings its fd.
                let mut file = (op.state == OpState::Succeeded)
                    .then(|| op.file.clone())
                    .flatten();
                if op.state == OpState::Succeeded
                    && file.is_none()
                    && self.takes(Variant::OperationResultsAsFiles)
                    && cx.caps.contains(&Capability::LargeResults)
                {
                    if let Some(value) = v.pointer("/result/value") {
                        let bytes: Arc<[u8]> = Arc::from(value.to_string().into_bytes());
                        v["result"] = json!({
                            "kind": "file",
                            "media_type": "application/json",
                            "size_bytes": bytes.len(),
                            "sha256": sha256_hex(&bytes),
                        });
                        file = Some(bytes);
                    }
                }
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
            // The mutants look the operation up by its id alone, dropping
            // one of the bindings find_op holds.
            let lax = d.operations.get(op_id).is_some_and(|op| {
                (op.uid == cx.uid || self.has(Mutant::CancelOtherCaller))
                    && (op.request_id == cx.request_id || self.has(Mutant::CancelRequestIdUnbound))
            });
            if !lax {
                return f.into();
            }
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
                if !self.takes(Variant::CancelFinishedAcknowledged) =>
            {
                return Failure::new(
                    ErrorCode::Conflict,
                    "The operation already finished and cannot be cancelled.",
                )
                .into();
            }
            OpState::Queued | OpState::Running if self.takes(Variant::CancelRefusedCommitted) => {
                return Failure::new(
                    ErrorCode::Conflict,
                    "The operation's transaction is committed and cannot be cancelled.",
                )
                .into();
            }
            OpState::Queued | OpState::Running => op.cancel_requested = true,
            _ => {}
        }
        let state = if self.has(Mutant::CancelReportsWrongState) {
            OpState::Cancelled
        } else {
            OpState::CancellationRequested
        };
        Answer::ok(json!({"operation_id": op_id, "state": state.as_str()}))
    }
}

fn op_json(id: &str, op: &Operation, poll_after_ms: i64) -> Json {
    let mut v = json!({"operation_id": id, "state": op.state.as_str()});
    if op.state == OpState::Running {
        v["progress"] = json!({
            "current": op.progress,
            "total": 100,
            "message": op.job.progress_message(),
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
