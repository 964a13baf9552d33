//! De-duplication moves (§6): a request id used again, a retry, a replay
//! across a restart.

use super::steps::{
    advance_by, any_status, call_step, citing, judgement, request_id_of, same_answer, strings, Call,
};
use super::{Exec, GenStep, Generator};
use crate::world::ToolInfo;
use cetp_vectors::template::literal;
use cetp_vectors::vector::{Args, Step};
use rand::Rng;

impl Generator<'_> {
    /// Move: an earlier execution's request id again (§6), with the same,
    /// altered or reordered args, sometimes another tool, caller or
    /// session. `None` when there is no earlier execution.
    pub(super) fn replay(&mut self, pre: &mut Vec<GenStep>) -> Option<Vec<GenStep>> {
        let prior = self.pick(&self.st.execs.clone())?;
        let other_ident = self.world.has_b && self.chance(0.2);
        let ident = if other_ident {
            if prior.ident == "a" {
                "b"
            } else {
                "a"
            }
        } else {
            prior.ident
        };
        let s = if other_ident || self.chance(0.3) {
            self.session_of(ident, pre)
        } else {
            prior.session.clone()
        };
        let others: Vec<ToolInfo> = self
            .world
            .executable()
            .filter(|t| t.name != prior.tool.name)
            .cloned()
            .collect();
        let other_tool = if self.chance(0.15) {
            self.pick(&others)
        } else {
            None
        };
        let tool = other_tool.clone().unwrap_or(prior.tool.clone());
        let args_kind = self.rng.random_range(0..4);
        let args = match (args_kind, &other_tool) {
            (_, Some(_)) => Args::Valid,
            (0 | 1, _) => Args::SameAs(prior.bind.clone()),
            (2, _) => Args::AlteredFrom(prior.bind.clone()),
            _ => Args::ReorderedFrom(prior.bind.clone()),
        };
        let mut tags = vec!["CETP2-6-01", "CETP2-6-04"];
        if other_tool.is_some() || args_kind == 2 {
            tags.push("CETP2-6-03");
        }
        if other_ident {
            tags.push("CETP2-6-02");
        }
        let r = self.name("r");
        let call = Call {
            request_id: Some(request_id_of(&prior.bind)),
            ..Call::execute(ident, &s, literal(&tool.name), args, &r)
        };
        let mut inner = vec![call_step(call.citing(&tags))];
        // §6 binds only tools whose effect is not `read` to their first
        // answer: a read asked again may read afresh.
        if other_tool.is_none() && !other_ident && args_kind != 2 && prior.tool.effect != "read" {
            let same = Step::Same {
                a: prior.bind.clone(),
                b: r.clone(),
                pointers: vec![],
                different: false,
                unless_code: strings(&["RATE_LIMITED", "NEGOTIATION_REQUIRED"]),
                if_status: None,
            };
            inner.push(judgement(citing(same, &["CETP2-6-04"])));
        }
        self.st.execs.push(Exec {
            bind: r.clone(),
            tool: tool.clone(),
            session: s,
            ident,
            may_ask: prior.may_ask,
        });
        Some(if tool.effect == "read" && prior.tool.effect == "read" {
            inner
        } else {
            self.observed(inner, Some(r), &["CETP2-6-01", "CETP2-6-03", "CETP2-6-02"])
        })
    }

    /// Move: the retry §6 is about: a side effect with valid args, then the same
    /// request id and args again (the same session, or a new one of the same
    /// caller, as after a lost connection; sometimes minutes or an hour
    /// later): the first answer again, and no second effect. `None` when
    /// no executable tool has a side effect.
    pub(super) fn retry(&mut self, pre: &mut Vec<GenStep>) -> Option<Vec<GenStep>> {
        let tools: Vec<ToolInfo> = self.world.side_effecting().cloned().collect();
        let tool = self.pick(&tools)?;
        let ident = self.ident();
        let s = self.session_of(ident, pre);
        let e = self.name("e");
        let mut first = Call::execute(ident, &s, literal(&tool.name), Args::Valid, &e);
        if tool.execution != "sync" {
            first.expect = any_status();
        }
        let mut out = self.observed(
            vec![call_step(first.citing(&["CETP2-4-04", "CETP2-6-01"]))],
            Some(e.clone()),
            &["CETP2-6-01", "CETP2-3.4-12"],
        );
        self.st.execs.push(Exec {
            bind: e.clone(),
            tool: tool.clone(),
            session: s.clone(),
            ident,
            may_ask: tool.confirmation == "always",
        });
        // Sometimes later, well inside the idempotency window the record
        // must outlive (§6: at least a day), in a new session, as the old
        // one may have expired meanwhile; never exactly a lifetime (see
        // `operation_query`).
        let later = self.chance(0.3);
        if later {
            let ms = *[61_000u64, 590_000, 3_590_000]
                .get(self.rng.random_range(0..3))
                .unwrap_or(&61_000);
            // Real time on a clock that cannot move: no such wait.
            if !self.world.fixed_clock {
                out.push(advance_by(ms));
            }
        }
        let s2 = if later || self.chance(0.3) {
            self.fresh_session(ident, &mut out)
        } else {
            s
        };
        let r = self.name("r");
        let again = Call {
            request_id: Some(request_id_of(&e)),
            ..Call::execute(ident, &s2, literal(&tool.name), Args::SameAs(e.clone()), &r)
        };
        let replay = vec![
            call_step(again.citing(&["CETP2-6-01", "CETP2-6-04"])),
            same_answer(&e, &r, &["CETP2-6-04"]),
        ];
        out.extend(self.observed(replay, Some(r), &["CETP2-6-01", "CETP2-6-04"]));
        Some(out)
    }

    /// Move: a side effect, the process killed, and the same request again
    /// in a new session: the de-duplication record must have survived
    /// (§4.4). `None` when no executable tool has a side effect.
    pub(super) fn restart_replay(&mut self, pre: &mut Vec<GenStep>) -> Option<Vec<GenStep>> {
        let tools: Vec<ToolInfo> = self.world.side_effecting().cloned().collect();
        let tool = self.pick(&tools)?;
        let s = self.session_of("a", pre);
        let e = self.name("e");
        let first = Call::execute("a", &s, literal(&tool.name), Args::Valid, &e);
        let first = vec![call_step(first.citing(&["CETP2-4-04", "CETP2-6-01"]))];
        let mut out = self.observed(first, Some(e.clone()), &["CETP2-6-01"]);
        out.extend(self.restart());
        let s2 = self.session_of("a", &mut out);
        let r = self.name("r");
        let again = Call {
            request_id: Some(request_id_of(&e)),
            ..Call::execute("a", &s2, literal(&tool.name), Args::SameAs(e.clone()), &r)
        };
        let mut replay = vec![call_step(again.citing(&[
            "CETP2-4.4-13",
            "CETP2-4.4-14",
            "CETP2-6-04",
        ]))];
        // The record that survived carries the first answer (§6).
        replay.push(same_answer(&e, &r, &["CETP2-4.4-13", "CETP2-6-04"]));
        out.extend(self.observed(replay, Some(r), &["CETP2-4.4-13", "CETP2-4.4-14"]));
        Some(out)
    }
}
