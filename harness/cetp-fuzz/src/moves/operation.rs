//! Background operation moves (§4.4): reads, cancellations and settles of
//! an operation, its whole life in one move, and an operation across a
//! restart.

use super::steps::{
    advance_by, any_status, bare, call_step, citing, judgement, named, observe, plain,
    request_id_of, role, same_answer, settle, Call,
};
use super::{Exec, GenStep, Generator, Meta};
use crate::world::ToolInfo;
use cetp_vectors::template::literal;
use cetp_vectors::vector::{Args, Step, ToolRef};
use rand::Rng;

/// The execution an `async_flow` move follows, as its queries name it.
struct Flow<'f> {
    /// The identity that executed, in `session`.
    ident: &'static str,
    session: &'f str,
    /// The capabilities `session` was negotiated with (another session of
    /// either identity asks for the same).
    caps: &'f [&'static str],
    /// `${e/data/operation_id}` of the execution bound as `e`.
    op: String,
    /// `${e/_request/request_id}`: the request id the operation is bound to.
    own_rid: String,
}

impl Generator<'_> {
    /// Move: a read, cancel or settle of an earlier execution's background
    /// operation (§4.4), by its creator, the other identity, or another
    /// session of the creator. `None` when no earlier execution was of a
    /// tool that may run in the background.
    pub(super) fn operation(&mut self, pre: &mut Vec<GenStep>) -> Option<Vec<GenStep>> {
        let candidates: Vec<Exec> = self
            .st
            .execs
            .iter()
            .filter(|e| e.tool.execution != "sync")
            .cloned()
            .collect();
        let e = self.pick(&candidates)?;
        let r = self.rng.random_range(0..10);
        // Who asks: the creator in its own session, the other identity
        // (§4.4: the operation is bound to the caller), or the creator in
        // another of its sessions, which may lack async_operations or
        // cancellation (§2.3).
        let other = self.world.has_b && r < 3;
        let (ident, s) = if r >= 7 {
            let s = self.fresh_session(e.ident, pre);
            (e.ident, s)
        } else {
            self.caller_for(&e, other, pre)
        };
        let op = format!("${{{}/data/operation_id}}", e.bind);
        // Mostly the execution's own request id, which the operation is
        // bound to (§4.1, §5), so that what is judged is the caller or the
        // capability; sometimes a new one.
        let rid = if self.chance(0.7) {
            request_id_of(&e.bind)
        } else {
            "new".to_string()
        };
        let r = self.rng.random_range(0..4);
        let b = self.name("g");
        let mut tags = vec![
            "CETP2-4.4-04",
            "CETP2-4.4-06",
            "CETP2-4.1-07",
            "CETP2-2.3-02",
        ];
        if other {
            tags.push("CETP2-4.4-11");
        }
        let query = |method: &str| Call {
            request_id: Some(rid.clone()),
            operation_id: Some(op.clone()),
            ..Call::new(ident, method, &s, &b)
        };
        let step = match r {
            0 => call_step(query("get_operation").citing(&tags)),
            1 => {
                tags.extend(["CETP2-4.4-09", "CETP2-4.4-17"]);
                call_step(query("cancel_operation").citing(&tags))
            }
            _ => settle(
                e.ident,
                &e.session,
                &e.bind,
                &b,
                &["CETP2-4.4-05", "CETP2-4.4-08"],
            ),
        };
        let inner = vec![step];
        Some(if e.tool.effect == "read" {
            inner
        } else {
            self.observed(inner, Some(e.bind), &["CETP2-4.4-17", "CETP2-4.4-11"])
        })
    }

    /// An executable tool that may run in the background (`execution` not
    /// `sync`), drawn evenly; `None` when there is none.
    fn background_tool(&mut self) -> Option<ToolInfo> {
        let tools: Vec<ToolInfo> = self
            .world
            .executable()
            .filter(|t| t.execution != "sync")
            .cloned()
            .collect();
        self.pick(&tools)
    }

    /// Move: a background operation's life (§4.4) in one move: an execution
    /// in a session with async_operations, then reads and cancellations by
    /// its creator, by the other identity, under another request id, from
    /// a session without the capability, after time has passed, and a
    /// settle; after a cancellation, the final state is held to the effects
    /// seen. `None` when no executable tool may run in the background.
    pub(super) fn async_flow(&mut self, pre: &mut Vec<GenStep>) -> Option<Vec<GenStep>> {
        let tool = self.background_tool()?;
        let ident = self.ident();
        let mut caps = vec!["async_operations"];
        if self.chance(0.7) {
            caps.push("cancellation");
        }
        if self.chance(0.5) {
            caps.push("large_results");
        }
        let s = self.session_with(ident, &caps, pre);
        let e = self.name("e");
        let (tool_ref, args) = self.background_call_target(&tool);
        let call = Call {
            tool: tool_ref,
            args: Some(args),
            expect: any_status(),
            ..Call::new(ident, "execute_tool", &s, &e)
        };
        let mut inner = vec![call_step(call.citing(&[
            "CETP2-4.4-01",
            "CETP2-4.4-02",
            "CETP2-4-04",
        ]))];
        self.st.execs.push(Exec {
            bind: e.clone(),
            tool: tool.clone(),
            session: s.clone(),
            ident,
            may_ask: tool.confirmation == "always",
        });
        let flow = Flow {
            ident,
            session: &s,
            caps: &caps,
            op: format!("${{{e}/data/operation_id}}"),
            own_rid: format!("${{{e}/_request/request_id}}"),
        };
        let cancelled = self.operation_queries(&flow, &mut inner);
        let fin = self.name("f");
        inner.push(settle(
            ident,
            &s,
            &e,
            &fin,
            &["CETP2-4.4-05", "CETP2-4.4-08"],
        ));
        if !self.world.observer {
            return Some(inner);
        }
        let before = self.name("o");
        let mut out = vec![plain(bare(observe(&before)))];
        out.extend(inner);
        if cancelled {
            out.extend(self.cancel_judged(ident, s, &e, &before));
        }
        let after = self.name("p");
        let mut snapshot = plain(citing(
            observe(&after),
            &["CETP2-4.4-17", "CETP2-4.4-11", "CETP2-6-01"],
        ));
        snapshot.meta = Meta::EffectsAfter {
            since: before,
            tool_of: Some(e),
        };
        out.push(snapshot);
        Some(out)
    }

    /// How an `async_flow` execution names its tool and args: mostly by a
    /// profile role the tool fills (with valid args), else by name with
    /// valid or schema-drawn args.
    fn background_call_target(&mut self, tool: &ToolInfo) -> (Option<ToolRef>, Args) {
        let roles: Vec<String> = self
            .world
            .roles
            .iter()
            .filter(|(_, t)| **t == tool.name)
            .map(|(r, _)| r.clone())
            .collect();
        match self.pick(&roles) {
            Some(r) if self.chance(0.5) => (role(r), Args::Valid),
            _ => {
                let args = match self.generated(tool) {
                    Some(v) if self.chance(0.4) => Args::Json(v),
                    _ => Args::Valid,
                };
                (named(literal(&tool.name)), args)
            }
        }
    }

    /// The one to three queries of an `async_flow` execution's operation
    /// (reads and cancellations, see [`Self::operation_query`]), pushed to
    /// `inner`; true when one was a cancellation by its creator under its
    /// own request id, whose final state is then judged.
    fn operation_queries(&mut self, flow: &Flow, inner: &mut Vec<GenStep>) -> bool {
        let mut cancelled = false;
        for _ in 0..self.rng.random_range(1..=3) {
            let b = self.name("g");
            let what = self.rng.random_range(0..9);
            let (who, sess, rid, method) = self.operation_query(
                what,
                (flow.ident, flow.session, &flow.own_rid),
                flow.caps,
                inner,
            );
            if method == "cancel_operation" && who == flow.ident && rid == flow.own_rid {
                cancelled = true;
            }
            let mut tags = vec![
                "CETP2-4.4-04",
                "CETP2-4.4-06",
                "CETP2-4.4-11",
                "CETP2-4.1-07",
                "CETP2-2.3-02",
            ];
            if method == "cancel_operation" {
                tags.extend(["CETP2-4.4-09", "CETP2-4.4-17"]);
            }
            let query = Call {
                request_id: Some(rid),
                operation_id: Some(flow.op.clone()),
                ..Call::new(who, method, &sess, &b)
            };
            inner.push(call_step(query.citing(&tags)));
        }
        cancelled
    }

    /// After a cancellation of the operation of `e` by `ident` in `session`:
    /// its final state, held to the effects the observer saw since
    /// `before`.
    fn cancel_judged(
        &mut self,
        ident: &str,
        session: String,
        e: &str,
        before: &str,
    ) -> [GenStep; 2] {
        // The judgement reads the operation's state, which a poll's answer
        // carries (`/data/state`); the settled answer holds the result
        // instead. A run that answered synchronously has no operation to
        // poll and stops there.
        let state = self.name("f");
        let poll = Step::Poll {
            as_: ident.into(),
            session,
            operation_of: e.into(),
            max_ms: None,
            bind: Some(state.clone()),
            expect: None,
        };
        let consistent = Step::CancelConsistent {
            final_: state,
            since: before.into(),
        };
        [
            call_step(citing(poll, &["CETP2-4.4-09"])),
            judgement(citing(consistent, &["CETP2-4.4-17"])),
        ]
    }

    /// One query of an async execution's operation (§4.4): by its creator,
    /// by the other identity, with a new request id, from a session
    /// without async_operations, or after time passed; a poll or a cancel.
    pub(super) fn operation_query(
        &mut self,
        what: i32,
        (ident, s, own_rid): (&'static str, &str, &str),
        caps: &[&str],
        inner: &mut Vec<GenStep>,
    ) -> (&'static str, String, String, &'static str) {
        match what {
            0 => (ident, s.to_string(), own_rid.to_string(), "get_operation"),
            1 | 5 if self.world.has_b => {
                let other = if ident == "a" { "b" } else { "a" };
                let os = self.session_with(other, caps, inner);
                let m = if what == 1 {
                    "get_operation"
                } else {
                    "cancel_operation"
                };
                (other, os, own_rid.to_string(), m)
            }
            2 | 6 => {
                let m = if what == 2 {
                    "get_operation"
                } else {
                    "cancel_operation"
                };
                (ident, s.to_string(), "new".to_string(), m)
            }
            3 => {
                // Another session of the creator, without async_operations.
                let few: Vec<&str> = ["cancellation", "large_results"]
                    .into_iter()
                    .filter(|_| self.rng.random_bool(0.5))
                    .collect();
                let os = self.session_with(ident, &few, inner);
                (ident, os, own_rid.to_string(), "get_operation")
            }
            7 => {
                // Time passes, well inside the idempotency window the
                // operation must outlive (§4.4), and never exactly a
                // lifetime (the reference's resume token lives ten minutes,
                // its session an hour): a device's clock moves a little
                // more than it is asked to, the descriptor shadow's
                // exactly, so at the boundary the two would disagree.
                let ms = *[61_000u64, 590_000, 3_590_000]
                    .get(self.rng.random_range(0..3))
                    .unwrap_or(&61_000);
                if !self.world.fixed_clock {
                    inner.push(advance_by(ms));
                }
                (ident, s.to_string(), own_rid.to_string(), "get_operation")
            }
            _ => (
                ident,
                s.to_string(),
                own_rid.to_string(),
                "cancel_operation",
            ),
        }
    }

    /// Move: an operation across a restart (§4.4: operation states are persisted,
    /// a restart executes nothing twice): accepted in a session with
    /// async_operations, sometimes followed to its end first, the process
    /// killed, then read by its caller in a new session: still known, and
    /// once ended, ended the same way. `None` when no executable tool may
    /// run in the background.
    pub(super) fn restart_operation(&mut self, pre: &mut Vec<GenStep>) -> Option<Vec<GenStep>> {
        let tool = self.background_tool()?;
        let ident = self.ident();
        let mut caps = vec!["async_operations"];
        if self.chance(0.5) {
            caps.push("cancellation");
        }
        let s = self.session_with(ident, &caps, pre);
        let e = self.name("e");
        let tool_ref = match self
            .world
            .roles
            .iter()
            .find(|(r, t)| **t == tool.name && r.as_str() == "async")
        {
            Some((r, _)) if self.chance(0.7) => role(r),
            _ => named(literal(&tool.name)),
        };
        let call = Call {
            tool: tool_ref,
            args: Some(Args::Valid),
            expect: any_status(),
            ..Call::new(ident, "execute_tool", &s, &e)
        };
        let mut inner = vec![call_step(call.citing(&["CETP2-4.4-01", "CETP2-4-04"]))];
        self.st.execs.push(Exec {
            bind: e.clone(),
            tool: tool.clone(),
            session: s.clone(),
            ident,
            may_ask: tool.confirmation == "always",
        });
        let settled_first = self.chance(0.5).then(|| self.name("f"));
        if let Some(f) = &settled_first {
            inner.push(settle(ident, &s, &e, f, &["CETP2-4.4-05", "CETP2-4.4-08"]));
        }
        inner.extend(self.restart());
        let s2 = self.session_with(ident, &caps, &mut inner);
        let g = self.name("g");
        let reqs = ["CETP2-4.4-13", "CETP2-4.4-14", "CETP2-6-04"];
        if self.chance(0.5) {
            let read = Call {
                request_id: Some(request_id_of(&e)),
                operation_id: Some(format!("${{{e}/data/operation_id}}")),
                ..Call::new(ident, "get_operation", &s2, &g)
            };
            inner.push(call_step(read.citing(&reqs)));
        } else {
            inner.push(settle(ident, &s2, &e, &g, &reqs));
            if let Some(f) = &settled_first {
                // An ended operation stays ended with the same outcome: the
                // restart ran nothing again (§4.4, §6).
                inner.push(same_answer(f, &g, &reqs));
            }
        }
        Some(if tool.effect == "read" {
            inner
        } else {
            self.observed(inner, Some(e), &["CETP2-4.4-14", "CETP2-6-01"])
        })
    }
}
