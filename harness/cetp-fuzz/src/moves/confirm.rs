//! Confirmation moves (§4.3): a call the user must confirm, the decision,
//! and the resumed call its token is bound to.

use super::{call_step, plain, Exec, GenStep, Generator, Meta};
use crate::world::ToolInfo;
use cetp_conformance::template::literal;
use rand::Rng;
use serde_json::{json, Value as Json};

impl Generator<'_> {
    /// Move: a user decision on an earlier confirmation request (§4.3) and
    /// the resumed call, with the same or other args, caller, request id,
    /// sometimes past the token's lifetime or asked again. Made after an
    /// asking execution of its own when no earlier execution may have
    /// asked; `None` when no executable tool asks either.
    pub(super) fn resolve(&mut self, pre: &mut Vec<GenStep>) -> Option<Vec<GenStep>> {
        let candidates: Vec<Exec> = self
            .st
            .execs
            .iter()
            .filter(|e| e.may_ask)
            .cloned()
            .collect();
        let e = match self.pick(&candidates) {
            Some(e) => e,
            None => self.asking_exec(pre)?,
        };
        let decision = ["approve", "approve", "deny", "dismiss"][self.rng.random_range(0..4)];
        let other = self.world.has_b && self.chance(0.15);
        let (ident, s) = self.caller_for(&e, other, pre);
        // The token is bound to the args bytes (§4.3): other args, or the
        // same members in another order, must both be refused.
        let r = self.rng.random_range(0..100);
        let altered = r < 35;
        let args = if r < 20 {
            json!({"altered_from": e.bind})
        } else if altered {
            json!({"reordered_from": e.bind})
        } else {
            json!({"same_as": e.bind})
        };
        let mut tags = vec!["CETP2-4.3-05", "CETP2-4.3-12", "CETP2-4.3-03"];
        // The token is bound to the request it was issued for (§4.3).
        let rid = if self.chance(0.2) {
            tags.push("CETP2-4.3-10");
            "new".to_string()
        } else {
            format!("${{{}/_request/request_id}}", e.bind)
        };
        if altered {
            tags.push("CETP2-4.3-11");
        }
        if other {
            tags.push("CETP2-4.3-03");
        }
        let r = self.name("r");
        let mut inner = vec![
            plain(
                json!({"do": "resolve", "as": e.ident, "handle": format!("${{{}/resolution/handle}}", e.bind),
                         "decision": decision, "requirements": ["CETP2-4.3-02", "CETP2-7.2-04", "CETP2-7.2-05"]}),
            ),
            call_step(
                json!({"do": "call", "as": ident, "method": "execute_tool", "session": s,
                "tool": {"name": e.tool.name}, "args": args,
                "request_id": rid,
                "resume_token": format!("${{{}/resume_token}}", e.bind), "bind": r,
                "requirements": tags}),
            ),
        ];
        if self.chance(0.3) {
            let r2 = self.name("r");
            inner.push(call_step(json!({"do": "call", "as": e.ident, "method": "execute_tool",
                "session": e.session, "tool": {"name": e.tool.name}, "args": {"altered_or_same_from": e.bind},
                "resume_token": format!("${{{}/resume_token}}", e.bind), "bind": r2,
                "requirements": ["CETP2-4.3-10", "CETP2-4.3-11"]})));
        }
        if self.chance(0.2) {
            // The token outlived: past the lifetime the vendor names
            // (`[timing] resume_token_ttl_ms`), a resume must be refused.
            inner.insert(
                1,
                plain(
                    json!({"do": "advance_clock", "profile": "resume_token_ttl_ms",
                             "plus_ms": 1000, "requirements": []}),
                ),
            );
            if let Some(step) = inner.get_mut(2) {
                if let Some(reqs) = step
                    .step
                    .get_mut("requirements")
                    .and_then(Json::as_array_mut)
                {
                    reqs.push(json!("CETP2-4.3-03"));
                }
            }
        }
        if self.chance(0.4) {
            // The original request again, without a token, after the user's
            // decision: a decision is the request's terminal result (§4.3,
            // §6), so a denial is not undone by asking again. A Provider
            // may ask again first (validate_before_dedupe does); what its
            // approval then resumes must still be the first decision. Only
            // the runs that were asked again can resolve and resume.
            let rr = self.name("r");
            let again = self.name("r");
            inner.push(call_step(json!({
                "do": "call", "as": e.ident, "method": "execute_tool", "session": e.session,
                "tool": {"name": e.tool.name}, "args": {"same_as": e.bind},
                "request_id": format!("${{{}/_request/request_id}}", e.bind), "bind": rr,
                "requirements": ["CETP2-6-04", "CETP2-4.3-05"]})));
            inner.push(GenStep {
                step: json!({"do": "resolve", "as": e.ident,
                    "handle": format!("${{{rr}/resolution/handle}}"), "decision": "approve",
                    "requirements": []}),
                meta: Meta::Optional,
            });
            let mut resumed = call_step(json!({
                "do": "call", "as": e.ident, "method": "execute_tool", "session": e.session,
                "tool": {"name": e.tool.name}, "args": {"same_as": e.bind},
                "request_id": format!("${{{}/_request/request_id}}", e.bind),
                "resume_token": format!("${{{rr}/resume_token}}"), "bind": again,
                "requirements": ["CETP2-6-04", "CETP2-4.3-05"]}));
            resumed.meta = Meta::Optional;
            inner.push(resumed);
        }
        Some(self.observed(
            inner,
            Some(r),
            &["CETP2-4.3-05", "CETP2-4.3-12", "CETP2-4.3-10", "CETP2-6-04"],
        ))
    }

    /// A call that asks the user first (a tool that always confirms, or an
    /// escalating call), when no earlier execution did.
    pub(super) fn asking_exec(&mut self, pre: &mut Vec<GenStep>) -> Option<Exec> {
        let tools: Vec<ToolInfo> = self
            .world
            .executable()
            .filter(|t| t.confirmation == "always" || t.escalating)
            .cloned()
            .collect();
        let tool = self.pick(&tools)?;
        let s = self.session_of("a", pre);
        let bind = self.name("e");
        let args = if tool.escalating {
            "escalating"
        } else {
            "valid"
        };
        pre.extend(self.observed(
            vec![call_step(
                json!({"do": "call", "as": "a", "method": "execute_tool", "session": s,
                "tool": {"name": literal(&tool.name)}, "args": args, "bind": bind,
                "requirements": ["CETP2-4.3-01", "CETP2-4.3-05", "CETP2-3.4-12"]}),
            )],
            Some(bind.clone()),
            &["CETP2-4.3-05", "CETP2-3.4-12"],
        ));
        let ex = Exec {
            bind,
            tool,
            session: s,
            ident: "a",
            may_ask: true,
        };
        self.st.execs.push(ex.clone());
        Some(ex)
    }
}
