//! De-duplication moves (§6): a request id used again, a retry, a replay
//! across a restart.

use super::{call_step, plain, same_answer, Exec, GenStep, Generator, Meta};
use crate::world::ToolInfo;
use cetp_conformance::template::literal;
use rand::Rng;
use serde_json::json;

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
            (_, Some(_)) => json!("valid"),
            (0 | 1, _) => json!({"same_as": prior.bind}),
            (2, _) => json!({"altered_from": prior.bind}),
            _ => json!({"reordered_from": prior.bind}),
        };
        let mut tags = vec!["CETP2-6-01", "CETP2-6-04"];
        if other_tool.is_some() || args_kind == 2 {
            tags.push("CETP2-6-03");
        }
        if other_ident {
            tags.push("CETP2-6-02");
        }
        let r = self.name("r");
        let step = json!({"do": "call", "as": ident, "method": "execute_tool", "session": s,
            "tool": {"name": literal(&tool.name)}, "args": args, "bind": r,
            "request_id": format!("${{{}/_request/request_id}}", prior.bind),
            "requirements": tags});
        let mut inner = vec![call_step(step)];
        if other_tool.is_none() && !other_ident && args_kind != 2 {
            inner.push(GenStep {
                step: json!({"do": "same", "a": prior.bind, "b": r,
                    "unless_code": ["RATE_LIMITED", "NEGOTIATION_REQUIRED"], "requirements": ["CETP2-6-04"]}),
                meta: Meta::Judgement,
            });
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
        let mut first = json!({"do": "call", "as": ident, "method": "execute_tool", "session": s,
            "tool": {"name": literal(&tool.name)}, "args": "valid", "bind": e,
            "requirements": ["CETP2-4-04", "CETP2-6-01"]});
        if tool.execution != "sync" {
            first["expect"] = json!({"status": ["success", "accepted", "error"]});
        }
        let mut out = self.observed(
            vec![call_step(first)],
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
            out.push(plain(
                json!({"do": "advance_clock", "ms": ms, "requirements": []}),
            ));
        }
        let s2 = if later || self.chance(0.3) {
            self.fresh_session(ident, &mut out)
        } else {
            s
        };
        let r = self.name("r");
        let replay = vec![
            call_step(
                json!({"do": "call", "as": ident, "method": "execute_tool", "session": s2,
                "tool": {"name": literal(&tool.name)}, "args": {"same_as": e},
                "request_id": format!("${{{e}/_request/request_id}}"), "bind": r,
                "requirements": ["CETP2-6-01", "CETP2-6-04"]}),
            ),
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
        let first = vec![call_step(
            json!({"do": "call", "as": "a", "method": "execute_tool",
            "session": s, "tool": {"name": literal(&tool.name)}, "args": "valid", "bind": e,
            "requirements": ["CETP2-4-04", "CETP2-6-01"]}),
        )];
        let mut out = self.observed(first, Some(e.clone()), &["CETP2-6-01"]);
        out.extend(self.restart());
        let s2 = self.session_of("a", &mut out);
        let r = self.name("r");
        let replay = vec![call_step(
            json!({"do": "call", "as": "a", "method": "execute_tool",
            "session": s2, "tool": {"name": literal(&tool.name)}, "args": {"same_as": e},
            "request_id": format!("${{{e}/_request/request_id}}"), "bind": r,
            "requirements": ["CETP2-4.4-13", "CETP2-4.4-14", "CETP2-6-04"]}),
        )];
        // The record that survived carries the first answer (§6).
        let mut replay = replay;
        replay.push(same_answer(&e, &r, &["CETP2-4.4-13", "CETP2-6-04"]));
        out.extend(self.observed(replay, Some(r), &["CETP2-4.4-13", "CETP2-4.4-14"]));
        Some(out)
    }
}
