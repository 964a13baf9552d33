//! Background operations (poll, settle, cancel), the resolution flow, file
//! descriptors, restarts and device time.

use super::{
    device_stop, document, internal_call, status, CaseRunner, StepResult, Stop, MAX_FD_READ,
};
use crate::template::{self, expand_string};
use crate::vector::{Expect, Step};
use cetp_proto::canonical::sha256_hex;
use cetp_proto::descriptor::ToolSummary;
use cetp_proto::device::ErrorKind;
use cetp_proto::provider::Decision;
use serde_json::{json, Value as Json};
use std::collections::VecDeque;
use std::sync::{LazyLock, Mutex};
use std::time::Instant;

/// Device time the harness waits for an operation when the profile sets no
/// `timing.operation_max_ms`. The spec sets no bound: running out leaves the
/// case unjudged, never failed.
pub const DEFAULT_OPERATION_MAX_MS: u64 = 30 * 60_000;
/// Longest real-time wait between two polls on a device whose clock the
/// harness cannot move; a longer poll_after_ms is shortened to it (polling
/// early is harmless, the Provider answers the same state).
const MAX_REAL_POLL_WAIT_MS: u64 = 2_000;
/// Longest real-time wait of an `age` step on a device whose clock the
/// harness cannot move.
const MAX_FIXED_CLOCK_AGE_MS: u64 = 180_000;
/// Longest single wait honoured on a movable clock.
const MAX_VIRTUAL_POLL_WAIT_MS: u64 = 120_000;
/// Longest sleep between two looks at the interrupt flag and the device
/// clock during a real-time wait.
const MAX_SLEEP_SLICE_MS: u64 = 1_000;

/// `ms` for a reason: `1500 ms`, `65 s`, `30 min`.
fn duration(ms: u64) -> String {
    if ms < 10_000 {
        format!("{ms} ms")
    } else if ms.is_multiple_of(60_000) {
        format!("{} min", ms / 60_000)
    } else {
        format!("{} s", ms.div_ceil(1000))
    }
}

/// `ms` as a `--max-wait` value that covers it (whole seconds, rounded up).
fn flag_duration(ms: u64) -> String {
    format!("{}s", ms.div_ceil(1000))
}

impl CaseRunner<'_> {
    /// Polls the operation of the bound `accepted` answer `operation_of`
    /// until a terminal state, and returns the last get_operation document.
    pub(super) fn poll(
        &mut self,
        identity: &str,
        session: &str,
        operation_of: &str,
        max_ms: Option<u64>,
    ) -> Result<Json, Stop> {
        let accepted = self.bound(operation_of)?;
        let op = accepted
            .pointer("/data/operation_id")
            .and_then(Json::as_str)
            .ok_or_else(|| {
                Stop::Fail(format!(
                    "`{operation_of}` carries no operation_id ({})",
                    super::what(&accepted)
                ))
            })?
            .to_string();
        if accepted
            .pointer("/_request/request_id")
            .and_then(Json::as_str)
            .is_none()
        {
            return Err(Stop::Infra(format!(
                "vector error: `{operation_of}` has no request id"
            )));
        }
        // The operation id is the Provider's string: the poll refers to it
        // where it is bound, never copies it into a template, where a `${…}`
        // in it would be expanded (and could pull other bound values, such
        // as the other identity's tokens, into the request).
        let op_ref = template::reference(operation_of, "/data/operation_id");
        let rid_ref = template::reference(operation_of, "/_request/request_id");
        let tool = self.tool_of(&accepted);
        let max_ms = max_ms
            .or_else(|| self.profile.timing_ms("operation_max_ms"))
            .unwrap_or(DEFAULT_OPERATION_MAX_MS);
        let device = self.device(identity)?;
        let deadline = device.now_ms().saturating_add(max_ms as i64);
        loop {
            let mut step = internal_call(identity, "get_operation", session);
            if let Step::Call {
                request_id,
                operation_id,
                ..
            } = &mut step
            {
                *request_id = Some(rid_ref.clone());
                *operation_id = Some(op_ref.clone());
            }
            let mut p = self.prepare_call(&step)?;
            p.tool = tool.clone();
            let answer = self.send(&p)?;
            self.run_checks(&p, &answer, None);
            let doc = document(&answer, p.request_doc.clone());
            let state = doc
                .pointer("/data/state")
                .and_then(Json::as_str)
                .unwrap_or("");
            if status(&doc) != Some("success")
                || matches!(state, "succeeded" | "failed" | "cancelled")
            {
                return Ok(doc);
            }
            if self.device(identity)?.now_ms() >= deadline {
                return Err(Stop::setup(
                    "[timing] operation_max_ms",
                    format!(
                        "operation {op} was still {state:?} after {max_ms} ms of device time; the spec sets no bound, so raise timing.operation_max_ms to judge this case"
                    ),
                ));
            }
            let wait = doc
                .pointer("/data/poll_after_ms")
                .and_then(Json::as_u64)
                .unwrap_or(100)
                .max(10);
            self.wait(identity, wait)?;
        }
    }

    /// Lets `ms` of device time pass: at once on a device whose clock the
    /// harness can move, else by sleeping (shortened, see
    /// [`MAX_REAL_POLL_WAIT_MS`]).
    pub(super) fn wait(&mut self, identity: &str, ms: u64) -> StepResult {
        let device = self.device(identity)?;
        // An operation whose progress is real time (the JVM device's
        // Provider threads) is not hurried by a clock move: polling on a
        // moved clock would spend the operation's device-time bound in a
        // burst of polls while its work had barely started.
        if device.work_runs_in_real_time()
            || self.move_clock(ms.min(MAX_VIRTUAL_POLL_WAIT_MS))?.is_none()
        {
            self.pass_real_time(device, ms.min(MAX_REAL_POLL_WAIT_MS));
        }
        Ok(())
    }

    /// Moves the device clock by `ms` where the harness can (identity b's
    /// clock follows), giving the device time it then reads; `None` on a
    /// device whose clock cannot move, learned on first use, so that the
    /// caller waits in real time instead.
    pub(super) fn move_clock(&mut self, ms: u64) -> Result<Option<i64>, Stop> {
        if self.virtual_clock == Some(false) {
            return Ok(None);
        }
        match self.target.a.advance_clock(ms) {
            Ok(now) => {
                self.virtual_clock = Some(true);
                self.wall_clock_moved |= self.target.a.clock_moves_wall_only();
                if let Some(b) = &self.target.b {
                    b.resync_clock().map_err(device_stop)?;
                }
                Ok(Some(now))
            }
            Err(e) if matches!(e.kind, ErrorKind::Unsupported | ErrorKind::UnknownOp) => {
                self.virtual_clock = Some(false);
                Ok(None)
            }
            Err(e) => Err(device_stop(e)),
        }
    }

    /// The tool of a bound execution, from any session that listed it.
    pub(super) fn tool_of(&self, doc: &Json) -> Option<ToolSummary> {
        let name = doc.pointer("/_request/tool_name").and_then(Json::as_str)?;
        self.sessions
            .values()
            .filter_map(|s| s.tools.as_ref())
            .flat_map(|t| t.tools.iter())
            .find(|t| t.name == name)
            .cloned()
    }

    /// Follows the bound execution `of` to its final answer, in the shape of
    /// a synchronous answer whichever path the Provider chose (`via`).
    pub(super) fn settle(&mut self, identity: &str, session: &str, of: &str) -> Result<Json, Stop> {
        let doc = self.bound(of)?;
        let request = doc.get("_request").cloned().unwrap_or(Json::Null);
        if status(&doc) != Some("accepted") {
            let mut d = doc;
            d["via"] = json!("sync");
            return Ok(d);
        }
        let fin = self.poll(identity, session, of, None)?;
        if status(&fin) != Some("success") {
            // get_operation itself failed: that answer is the outcome.
            return Ok(fin);
        }
        let data = fin.get("data").cloned().unwrap_or(Json::Null);
        let mut out = match data.get("state").and_then(Json::as_str) {
            Some("succeeded") => {
                let mut d = json!({
                    "status": "success",
                    "data": data.get("result").cloned().unwrap_or(Json::Null),
                });
                if let Some(fd) = fin.get("result_fd") {
                    d["result_fd"] = fd.clone();
                }
                d
            }
            Some("failed") => {
                let mut d = json!({"status": "error"});
                if let Some(Json::Object(e)) = data.get("error") {
                    for (k, v) in e {
                        d[k] = v.clone();
                    }
                }
                d
            }
            _ => json!({"status": "error", "error_code": "CANCELLED", "retryable": false}),
        };
        // The envelope (echoes and their types) is the one of the answer
        // that carried the outcome.
        for k in ["protocol_version", "request_id", "_types"] {
            if let Some(v) = fin.get(k) {
                out[k] = v.clone();
            }
        }
        out["via"] = json!("operation");
        out["operation"] = data;
        out["_request"] = request;
        Ok(out)
    }

    /// Binds and judges the outcome of a poll or settle step.
    pub(super) fn conclude(
        &mut self,
        identity: &str,
        mut doc: Json,
        bind: Option<&str>,
        expect: Option<&Expect>,
        of: &str,
    ) -> StepResult {
        let tool = self.bindings.get(of).and_then(|d| self.tool_of(d));
        if expect.is_some_and(|e| e.output_schema) {
            // The execution's request names the tool, not the poll's.
            let request = self
                .bindings
                .get(of)
                .and_then(|d| d.get("_request"))
                .cloned();
            self.judge_file_result(identity, &mut doc, request)?;
        }
        if let Some(name) = bind {
            self.bindings.insert(name.to_string(), doc.clone());
        }
        match expect {
            Some(e) => self.judge(&doc, e, tool.as_ref()),
            None => Ok(()),
        }
    }

    /// A result that came as a file (§4.5), directly or as the result of a
    /// succeeded operation (§4.4: the same envelope): its descriptor is read
    /// once, and its size, digest and content are judged against its
    /// declaration and the tool's output_schema, as the large-result cases
    /// judge one. The document is marked `_file_judged` so that the
    /// expectation's `output_schema` knows the value was judged there.
    pub(super) fn judge_file_result(
        &mut self,
        identity: &str,
        doc: &mut Json,
        request: Option<Json>,
    ) -> StepResult {
        let is_file =
            |v: Option<&Json>| v.and_then(|e| e.get("kind")).and_then(Json::as_str) == Some("file");
        let envelope = if is_file(doc.get("data")) {
            doc.get("data").cloned()
        } else if is_file(doc.pointer("/data/result")) {
            doc.pointer("/data/result").cloned()
        } else {
            None
        };
        let Some(envelope) = envelope else {
            return Ok(());
        };
        let Some(handle) = doc.get("result_fd").cloned() else {
            return Err(Stop::Fail(format!(
                "the result is a file envelope without a result_fd ({})",
                super::what(doc)
            )));
        };
        self.bindings.insert(
            "__file".into(),
            json!({"data": envelope, "result_fd": handle,
                   "_request": request.or_else(|| doc.get("_request").cloned()).unwrap_or(Json::Null)}),
        );
        let handle_ref = template::reference("__file", "/result_fd");
        self.read_fd(
            identity,
            &handle_ref,
            None,
            Some("__file"),
            true,
            (true, false),
        )?;
        doc["_file_judged"] = json!(true);
        Ok(())
    }

    pub(super) fn resolve(&mut self, identity: &str, handle: &str, decision: &str) -> StepResult {
        let handle = expand_string(&self.bindings, handle).map_err(Stop::Fail)?;
        let decision = Decision::parse(decision)
            .ok_or_else(|| Stop::Infra(format!("vector error: unknown decision {decision:?}")))?;
        let ui = self.profile.ui_json();
        self.sent(
            identity,
            "resolve",
            json!({"handle": handle, "decision": decision.as_str()}),
        );
        let started = Instant::now();
        let answer = self
            .device(identity)?
            .resolve(&handle, decision, ui.as_ref(), 30_000);
        let out = match answer {
            Ok(out) => out,
            // The device said in its hello that it cannot play a user's
            // decision here (a probe without UiAutomation): the case is not
            // judged, as on a device whose clock cannot move, and holds the
            // claim back.
            Err(e) if e.kind == ErrorKind::OpUnavailable => {
                return Err(Stop::setup(crate::advice::RESOLVE_NEEDS, e.message))
            }
            // The Provider's confirmation activity threw while it started or
            // handled the decision (a device that runs it in its own process
            // sees the exception: the JVM device): the confirmation could not
            // take place in the Provider's own UI (§4.3), charged to it as a
            // crash of its process on a phone would be.
            Err(e) if e.kind == ErrorKind::ProviderException => {
                self.cite_only(&["CETP2-4.3-06"]);
                return Err(Stop::Fail(format!(
                    "the Provider's confirmation activity threw while the {} decision was played (handle {handle}): {}",
                    decision.as_str(),
                    e.message
                )));
            }
            // Anything else the device could not do, a selector that matched
            // nothing included (the device names it and what was on screen),
            // is not judged: INFRA_ERROR with the device's words.
            Err(e) => return Err(device_stop(e)),
        };
        self.answered(
            json!({"launched": out.launched, "decision_applied": out.decision_applied, "result_code": out.result_code, "launched_package": out.launched_package}),
            started,
        );
        // §7.2: the PendingIntent must name a component of the Provider's own
        // package. Judged before the decision: another app's activity never
        // shows the Provider's UI, so the decision could not be applied, and
        // that is the Provider's doing, not the selectors'. A device that
        // does not report the package leaves this to the creator check.
        if let Some(pkg) = out.launched_package.as_deref() {
            if pkg != self.env.package {
                self.cite_only(&["CETP2-7.2-04"]);
                return Err(Stop::Fail(format!(
                    "the resolution PendingIntent launched an activity of {pkg:?}, not of the Provider's package {:?} (handle {handle})",
                    self.env.package
                )));
            }
        }
        if !out.launched {
            return Err(Stop::Fail(format!(
                "the Provider's resolution PendingIntent did not launch (handle {handle})"
            )));
        }
        // A decision the device could not play (the [ui] selectors missed,
        // or the probe has no UI automation) judges nothing: what follows
        // would be charged to the Provider, or pass, without the user's
        // decision ever reaching it.
        // `dismiss` backs out without deciding, so nothing is applied.
        if !out.decision_applied && decision != Decision::Dismiss {
            return Err(Stop::Infra(format!(
                "the {} decision was not applied to the Provider's confirmation UI (check the [ui] selectors of the profile and the device's UI automation)",
                decision.as_str()
            )));
        }
        Ok(())
    }

    pub(super) fn restart(&mut self) -> StepResult {
        self.sent(
            "a",
            "restart_provider",
            json!({"package": self.env.package}),
        );
        let started = Instant::now();
        self.target
            .a
            .restart_provider(&self.env.package)
            .map_err(device_stop)?;
        if let Some(s) = self.stalls {
            s.restarted();
        }
        self.answered(json!({}), started);
        Ok(())
    }

    /// After a cancellation: an operation that ended `cancelled` had no
    /// effect since `since`, one that ended `succeeded` had its one effect
    /// (§4.4: only `cancelled` means no further effect). One that ended
    /// `failed` claims no cancellation: cancelling is only a request, which
    /// a committed transaction may refuse (CONFLICT), and the operation then
    /// ends by its own business, a failure included (§4.4, §5); what a
    /// failure left behind is not judged here.
    pub(super) fn cancel_consistent(&mut self, final_: &str, since: &str) -> StepResult {
        let fin = self.bound(final_)?;
        let state = fin
            .pointer("/data/state")
            .and_then(Json::as_str)
            .unwrap_or("")
            .to_string();
        let tool = self.tool_of(&fin);
        let prefix = |e: Stop| match e {
            Stop::Fail(m) => Stop::Fail(format!("the operation reports {state}, but {m}")),
            other => other,
        };
        match state.as_str() {
            "cancelled" => self.judge_effects(since, 0, tool.as_ref()).map_err(prefix),
            "succeeded" => self.judge_effects(since, 1, tool.as_ref()).map_err(prefix),
            "failed" => Ok(()),
            other => Err(Stop::Fail(format!(
                "after a cancellation the operation ended {other:?}, not a terminal state (cancelled, succeeded or failed)"
            ))),
        }
    }

    /// Lets a lifetime run out: `base` ms (given, or the profile's
    /// `[timing] KEY`) and a margin, the case's `plus_ms` unless the profile
    /// sets `timing.expiry_margin_ms`. Device time is moved where the
    /// harness can move it; elsewhere the case waits in real time, bounded
    /// by `--max-wait`.
    pub(super) fn advance_clock_step(
        &mut self,
        ms: Option<u64>,
        profile: Option<&str>,
        plus_ms: u64,
    ) -> StepResult {
        let (base, what) = match (ms, profile) {
            (Some(ms), _) => (ms, None),
            (None, Some(key)) => (
                self.profile.timing_ms(key).ok_or_else(|| {
                    Stop::setup(
                        &format!("[timing] {key}"),
                        format!("needs timing.{key} in the profile"),
                    )
                })?,
                Some(format!("timing.{key}")),
            ),
            (None, None) => {
                return Err(Stop::Infra(
                    "vector error: advance_clock needs ms or profile".into(),
                ))
            }
        };
        let what = what.unwrap_or_else(|| format!("a lifetime of {}", duration(base)));
        self.let_lifetime_pass(base, &what, plus_ms)
    }

    /// `base` ms of a lifetime (`what`, for the reasons) and the margin.
    fn let_lifetime_pass(&mut self, base: u64, what: &str, plus_ms: u64) -> StepResult {
        let margin = self
            .profile
            .timing_ms("expiry_margin_ms")
            .unwrap_or(plus_ms);
        let ms = base.saturating_add(margin);
        if self.virtual_clock != Some(false) {
            self.sent("a", "advance_clock", json!({"ms": ms}));
            let started = Instant::now();
            match self.target.a.advance_clock(ms) {
                Ok(now) => {
                    self.virtual_clock = Some(true);
                    if self.target.a.clock_moves_wall_only() {
                        self.wall_clock_moved = true;
                        self.answered(
                            json!({"now_ms": now, "clock": "the wall clock, set through adb; the elapsed clock did not move"}),
                            started,
                        );
                    } else {
                        self.answered(json!({"now_ms": now}), started);
                    }
                    if let Some(b) = &self.target.b {
                        b.resync_clock().map_err(device_stop)?;
                    }
                    return Ok(());
                }
                Err(e) if matches!(e.kind, ErrorKind::Unsupported | ErrorKind::UnknownOp) => {
                    self.virtual_clock = Some(false);
                    self.answered(json!({"unsupported": e.to_string()}), started);
                }
                Err(e) => return Err(device_stop(e)),
            }
        }
        if ms > self.max_wait_ms {
            // The flag with the value that would judge it: the claim then
            // lists it as the change to make.
            // The shortest path first (a build, a clock that moves), the
            // wait last: it may be an hour.
            let flag = crate::advice::MAX_WAIT.with(&flag_duration(ms));
            return Err(Stop::setup(
                &flag,
                format!(
                    "the device's clock cannot be moved, and {what} plus a margin of {} is a real-time wait of {}, beyond --max-wait {}; a build with a shorter lifetime, a device whose clock the harness moves (clock=move on an emulator or userdebug phone after `adb root`), or `{flag}` would judge it",
                    duration(margin),
                    duration(ms),
                    duration(self.max_wait_ms),
                ),
            ));
        }
        self.real_wait(ms, &format!("{what} plus a margin of {}", duration(margin)))
    }

    /// Waits `ms` of real time for the device's clock (which cannot be
    /// moved): parks the case where the runner may (its executor runs
    /// other cases meanwhile), else sleeps here.
    fn real_wait(&mut self, ms: u64, what: &str) -> StepResult {
        let due = self
            .target
            .a
            .now_ms()
            .saturating_add(i64::try_from(ms).unwrap_or(i64::MAX));
        self.sent(
            "a",
            "wait",
            json!({"ms": ms, "for": what, "until_ms": due, "clock": "real time: the device's clock cannot be moved"}),
        );
        self.real_waited_ms = self.real_waited_ms.saturating_add(ms);
        let started = Instant::now();
        if self.parking && self.depth == 1 {
            self.park = Some((due, started));
            return Ok(());
        }
        let now = self.sleep_until(due)?;
        self.answered(json!({"now_ms": now, "waited": "real time"}), started);
        Ok(())
    }

    /// Sleeps until the device's clock reads `due`, in slices, so that
    /// Ctrl-C and `--run-timeout` end the wait (the case is then cut and
    /// left to `cetp resume`). Returns the device time then.
    pub(super) fn sleep_until(&mut self, due: i64) -> Result<i64, Stop> {
        loop {
            let now = self.target.a.now_ms();
            if now >= due {
                return Ok(now);
            }
            if self
                .interrupt
                .is_some_and(|i| i.load(std::sync::atomic::Ordering::SeqCst))
            {
                return Err(Stop::Cut(format!(
                    "the run was interrupted while this case waited in real time (step {})",
                    self.step
                )));
            }
            if self.deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(Stop::Cut(format!(
                    "the run reached its --run-timeout while this case waited in real time (step {})",
                    self.step
                )));
            }
            let left = u64::try_from(due.saturating_sub(now)).unwrap_or(0);
            self.pass_real_time(self.target.a.as_ref(), left.clamp(1, MAX_SLEEP_SLICE_MS));
        }
    }

    /// The `age` step: device time moved where the harness can move it,
    /// real time waited (bounded by [`MAX_FIXED_CLOCK_AGE_MS`]) elsewhere.
    pub(super) fn age(
        &mut self,
        ms: Option<u64>,
        window: Option<(&str, &str)>,
        margin_ms: u64,
        fixed_clock_wait_ms: u64,
    ) -> StepResult {
        let ms = match (ms, window) {
            (Some(ms), _) => ms,
            (None, Some((session, since))) => {
                let sent = *self.sent_at.get(since).ok_or_else(|| {
                    Stop::Infra(format!("vector error: no call was bound to `{since}`"))
                })?;
                let elapsed =
                    u64::try_from(self.target.a.now_ms().saturating_sub(sent)).unwrap_or(0);
                let seconds = self
                    .session(session)?
                    .negotiated
                    .limit("idempotency_window_seconds")
                    .ok_or_else(|| {
                        Stop::Fail(format!(
                            "session `{session}` negotiated no idempotency_window_seconds"
                        ))
                    })?;
                u64::try_from(seconds)
                    .unwrap_or(0)
                    .saturating_mul(1000)
                    .saturating_sub(margin_ms)
                    .saturating_sub(elapsed)
            }
            (None, None) => {
                return Err(Stop::Infra(
                    "vector error: age needs ms, or window_of with since".into(),
                ))
            }
        };
        if self.virtual_clock != Some(false) {
            self.sent("a", "advance_clock", json!({"ms": ms}));
            let started = Instant::now();
            if let Some(now) = self.move_clock(ms)? {
                self.answered(json!({"now_ms": now}), started);
                return Ok(());
            }
        }
        // Not a lifetime: a wait long enough to catch what is forgotten
        // early, so --max-wait shortens it rather than leaving the case
        // unjudged.
        let wait = fixed_clock_wait_ms
            .min(MAX_FIXED_CLOCK_AGE_MS)
            .min(ms)
            .min(self.max_wait_ms);
        self.real_wait(
            wait,
            "the age the case gives its operation on a fixed clock",
        )
    }

    /// Moves the device clock past an RFC 3339 time a bound answer names.
    /// Nothing there (a time the Provider need not declare) is not
    /// applicable; a time the harness cannot read leaves the case unjudged.
    pub(super) fn advance_clock_until(
        &mut self,
        until: &crate::vector::Until,
        plus_ms: u64,
    ) -> StepResult {
        let mut latest: Option<i64> = None;
        let mut absent = Vec::new();
        for until in until.templates() {
            let text = match crate::template::expand(&self.bindings, until) {
                Ok(Json::String(t)) => t,
                Ok(other) => {
                    return Err(Stop::setup(
                        "an RFC 3339 time",
                        format!("{until} is {other}, not an RFC 3339 date-time"),
                    ))
                }
                // A lifetime is optional (§2.2 "可以有有效期"): a session
                // without one has nothing to wait for.
                Err(e) if e.contains("has nothing at") => {
                    absent.push(format!("{until} ({e})"));
                    continue;
                }
                Err(e) => return Err(Stop::Infra(e)),
            };
            let Some(t) = parse_rfc3339_ms(&text) else {
                return Err(Stop::setup(
                    "an RFC 3339 time",
                    format!("{until} = {text:?} is not an RFC 3339 date-time"),
                ));
            };
            latest = Some(latest.map_or(t, |l| l.max(t)));
        }
        let Some(target) = latest else {
            return Err(Stop::NotApplicable(format!(
                "the Provider declares no {}",
                absent.join(", no ")
            )));
        };
        let now = self.target.a.now_ms();
        let ms = u64::try_from(target.saturating_sub(now)).unwrap_or(0);
        // `${s/data/expires_at}` reads as the bound answer's field.
        let names: Vec<&str> = until
            .templates()
            .iter()
            .map(|t| t.trim_start_matches("${").trim_end_matches('}'))
            .collect();
        let when = match names.as_slice() {
            [one] => one.to_string(),
            many => format!("the latest of {}", many.join(", ")),
        };
        let what = format!("the time left until {when} ({})", duration(ms));
        self.let_lifetime_pass(ms, &what, plus_ms)
    }

    pub(super) fn read_fd(
        &mut self,
        identity: &str,
        handle: &str,
        max_bytes: Option<u64>,
        verify_against: Option<&str>,
        expect_ok: bool,
        (output_schema, read_only): (bool, bool),
    ) -> StepResult {
        let handle = expand_string(&self.bindings, handle).map_err(Stop::Infra)?;
        let declared = match verify_against {
            Some(name) => Some(self.bound(name)?),
            None => None,
        };
        let size = declared
            .as_ref()
            .and_then(|d| d.pointer("/data/size_bytes"))
            .and_then(Json::as_u64);
        let digest = declared
            .as_ref()
            .and_then(|d| d.pointer("/data/sha256"))
            .and_then(Json::as_str)
            .map(str::to_string);
        // One byte more than declared reveals a descriptor longer than its
        // declaration, without reading an unbounded stream.
        let max = max_bytes
            .or(size.map(|s| s.saturating_add(1)))
            .unwrap_or(MAX_FD_READ)
            .min(MAX_FD_READ);
        self.sent(
            identity,
            "read_fd",
            json!({"handle": handle, "max_bytes": max}),
        );
        let started = Instant::now();
        let read = self
            .device(identity)?
            .read_fd(&handle, max)
            .map_err(device_stop)?;
        let got = sha256_hex(&read.bytes);
        self.answered(
            json!({"bytes": read.bytes.len(), "sha256": got, "eof": read.eof, "error": read.error, "writable": read.writable}),
            started,
        );
        let mut problems = Vec::new();
        if let Some(s) = size {
            if read.bytes.len() as u64 != s || !read.eof {
                problems.push(format!(
                    "declared size_bytes {s}, the descriptor held {}{}",
                    read.bytes.len(),
                    if read.eof { "" } else { " or more" }
                ));
            }
        }
        if let Some(d) = &digest {
            if *d != got {
                problems.push(format!("declared sha256 {d}, the bytes hash to {got}"));
            }
        }
        if let Some(e) = &read.error {
            problems.push(format!("the writer reported an error: {e}"));
        }
        if read_only {
            match read.writable {
                Some(true) => problems.push("result_fd is open for writing, not read-only".into()),
                Some(false) => {}
                None => {
                    return Err(Stop::setup(
                        "a device that reports a descriptor's mode",
                        "the device's read_fd does not say whether the descriptor was writable (probe-wire extension `writable`)",
                    ))
                }
            }
        }
        if let (true, Some(doc)) = (problems.is_empty(), declared.as_ref()) {
            let tool = if output_schema {
                Some(self.tool_of(doc).ok_or_else(|| {
                    Stop::Infra(
                        "vector error: output_schema needs the bound answer of a tool call".into(),
                    )
                })?)
            } else {
                None
            };
            problems.extend(file_content_problems(&got, &read.bytes, tool.as_ref())?);
        }
        match (problems.is_empty(), expect_ok) {
            (true, true) | (false, false) => Ok(()),
            (false, true) => Err(Stop::Fail(problems.join("; "))),
            (true, false) => Err(Stop::Fail(
                "the descriptor matched its declaration where a mismatch was expected".into(),
            )),
        }
    }
}

/// What is wrong with a file result's content: not UTF-8 JSON, or (with
/// `tool`) JSON that breaks the tool's output_schema (§4.2: the Provider
/// validates its own output, in the file form too).
///
/// Judged once per content and schema: the fuzzer's oracle reads the same
/// megabyte export from every member, and parsing and validating it again
/// each time was most of a large sequence's cost. The key is the SHA-256 of
/// the bytes read, so only identical content shares a judgement.
fn file_content_problems(
    sha256: &str,
    bytes: &[u8],
    tool: Option<&ToolSummary>,
) -> Result<Vec<String>, Stop> {
    /// The digest, and the tool's name and output_schema when judged by it.
    type Key = (String, Option<(String, Json)>);
    type Judged = Mutex<VecDeque<(Key, Vec<String>)>>;
    static JUDGED: LazyLock<Judged> = LazyLock::new(Default::default);
    const KEEP: usize = 8;
    let same = |(d, t): &Key| {
        d == sha256
            && t.as_ref().map(|(n, s)| (n.as_str(), s))
                == tool.map(|t| (t.name.as_str(), &t.output_schema))
    };
    let cache = || JUDGED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, p)) = cache().iter().find(|(k, _)| same(k)) {
        return Ok(p.clone());
    }
    let Ok(text) = std::str::from_utf8(bytes) else {
        return Ok(vec!["file content is not UTF-8 JSON".into()]);
    };
    let value = match cetp_proto::bundle::parse_json_text("result_fd", text) {
        Err(e) => return Ok(vec![format!("file content is not JSON: {e}")]),
        Ok(v) => v,
    };
    let mut problems = Vec::new();
    if let Some(tool) = tool {
        let schema = cetp_proto::schema::CompiledSchema::compile(
            &tool.output_schema,
            cetp_proto::schema::DEFAULT_DIALECT,
        )
        .map_err(|e| Stop::Fail(format!("output_schema of {}: {e}", tool.name)))?;
        if !schema.is_valid(&value) {
            problems.push(format!(
                "file content does not match the output_schema of {}: {}",
                tool.name,
                schema.errors(&value).join("; ")
            ));
        }
    }
    let mut c = cache();
    if c.len() >= KEEP {
        c.pop_back();
    }
    let key = (
        sha256.to_string(),
        tool.map(|t| (t.name.clone(), t.output_schema.clone())),
    );
    c.push_front((key, problems.clone()));
    Ok(problems)
}

/// Milliseconds since the epoch of an RFC 3339 `date-time`
/// (`2026-09-02T12:00:00Z`, `2026-09-02T14:00:00.250+02:00`).
pub(super) fn parse_rfc3339_ms(s: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.timestamp_millis())
}

#[cfg(test)]
mod rfc3339_tests {
    use super::parse_rfc3339_ms;

    #[test]
    fn parses_rfc3339() {
        assert_eq!(parse_rfc3339_ms("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            parse_rfc3339_ms("2026-09-02T12:00:00Z"),
            Some(1_788_350_400_000)
        );
        assert_eq!(
            parse_rfc3339_ms("2026-09-02T14:00:00.25+02:00"),
            Some(1_788_350_400_250)
        );
        for bad in [
            "2026-09-02 12:00:00",
            "2026-09-02T12:00:00",
            "2026-13-02T12:00:00Z",
            "x",
        ] {
            assert_eq!(parse_rfc3339_ms(bad), None, "{bad}");
        }
    }
}

#[cfg(test)]
mod file_content_tests {
    use super::file_content_problems;
    use cetp_proto::canonical::sha256_hex;
    use cetp_proto::descriptor::ToolSummary;
    use serde_json::json;

    fn tool(output_schema: serde_json::Value) -> ToolSummary {
        ToolSummary {
            name: "export".into(),
            input_schema: json!({"type": "object"}),
            output_schema,
            scopes: vec![],
            effect: "read".into(),
            risk: "low".into(),
            destructive: false,
            idempotent: true,
            open_world: false,
            confirmation: "never".into(),
            execution: "sync".into(),
        }
    }

    /// A judgement is shared only by the same bytes under the same schema.
    #[test]
    fn content_is_judged_per_bytes_and_schema() {
        let rows = tool(json!({"type": "object", "required": ["rows"]}));
        let names = tool(json!({"type": "object", "required": ["names"]}));
        let good = br#"{"rows":[]}"#;
        let d = sha256_hex(good);
        for _ in 0..2 {
            assert!(file_content_problems(&d, good, Some(&rows))
                .unwrap()
                .is_empty());
            let p = file_content_problems(&d, good, Some(&names)).unwrap();
            assert!(p[0].contains("does not match the output_schema"), "{p:?}");
            assert!(file_content_problems(&d, good, None).unwrap().is_empty());
            // The same schema under another name: its own message.
            let renamed = ToolSummary {
                name: "archive".into(),
                ..names.clone()
            };
            let p = file_content_problems(&d, good, Some(&renamed)).unwrap();
            assert!(p[0].contains("output_schema of archive"), "{p:?}");
        }
        let bad = b"{\"rows\":";
        let p = file_content_problems(&sha256_hex(bad), bad, Some(&rows)).unwrap();
        assert!(p[0].contains("not JSON"), "{p:?}");
        let latin = b"\xff";
        let p = file_content_problems(&sha256_hex(latin), latin, None).unwrap();
        assert!(p[0].contains("not UTF-8"), "{p:?}");
    }
}
