//! Confirmation moves (§4.3): a call the user must confirm, the decision,
//! and the resumed call its token is bound to.

use super::steps::{call_step, citing, named, plain, Call};
use super::{Exec, GenStep, Generator, Meta};
use crate::world::ToolInfo;
use cetp_vectors::template::literal;
use cetp_vectors::vector::{Args, Step};
use rand::Rng;

impl Generator<'_> {
    /// Move: a user decision on an earlier confirmation request (§4.3) and
    /// the resumed call, with the same or other args, caller, request id,
    /// sometimes past the token's lifetime or asked again. Made after an
    /// asking execution of its own when no earlier execution may have
    /// asked; `None` when no executable tool asks either.
    pub(super) fn resolve(&mut self, pre: &mut Vec<GenStep>) -> Option<Vec<GenStep>> {
        // A device that cannot play the user's decision (the JVM device)
        // would leave the whole sequence unjudged from here.
        if !self.world.can_resolve {
            return None;
        }
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
            Args::AlteredFrom(e.bind.clone())
        } else if altered {
            Args::ReorderedFrom(e.bind.clone())
        } else {
            Args::SameAs(e.bind.clone())
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
        let decide = resolution(e.ident, &e.bind, decision);
        let resumed = Call {
            tool: named(e.tool.name.clone()),
            args: Some(args),
            request_id: Some(rid),
            resume_token: Some(format!("${{{}/resume_token}}", e.bind)),
            ..Call::new(ident, "execute_tool", &s, &r)
        };
        // Drawn in the order the draws always had (a recorded seed must
        // generate the same sequence), pushed in the order the steps run.
        let mut again = None;
        if self.chance(0.3) {
            let r2 = self.name("r");
            let call = Call {
                tool: named(e.tool.name.clone()),
                args: Some(Args::AlteredOrSameFrom(e.bind.clone())),
                resume_token: Some(format!("${{{}/resume_token}}", e.bind)),
                ..Call::new(e.ident, "execute_tool", &e.session, &r2)
            };
            again = Some(call_step(call.citing(&["CETP2-4.3-10", "CETP2-4.3-11"])));
        }
        let mut inner = vec![plain(citing(
            decide,
            &["CETP2-4.3-02", "CETP2-7.2-04", "CETP2-7.2-05"],
        ))];
        if self.chance(0.2) && !self.world.fixed_clock {
            // The token outlived: past the lifetime the vendor names
            // (`[timing] resume_token_ttl_ms`), a resume must be refused.
            let ttl = Step::AdvanceClock {
                ms: None,
                profile: Some("resume_token_ttl_ms".into()),
                until: None,
                plus_ms: 1000,
            };
            inner.push(plain(citing(ttl, &[])));
            tags.push("CETP2-4.3-03");
        }
        inner.push(call_step(resumed.citing(&tags)));
        inner.extend(again);
        if self.chance(0.4) {
            self.asked_again(&e, &mut inner);
        }
        Some(self.observed(
            inner,
            Some(r),
            &["CETP2-4.3-05", "CETP2-4.3-12", "CETP2-4.3-10", "CETP2-6-04"],
        ))
    }

    /// The original request of `e` again, without a token, after the
    /// user's decision: a decision is the request's terminal result (§4.3,
    /// §6), so a denial is not undone by asking again. A Provider may ask
    /// again first (validate_before_dedupe does); what its approval then
    /// resumes must still be the first decision. Only the runs that were
    /// asked again can resolve and resume.
    fn asked_again(&mut self, e: &Exec, inner: &mut Vec<GenStep>) {
        let rr = self.name("r");
        let again = self.name("r");
        let request_id = Some(format!("${{{}/_request/request_id}}", e.bind));
        let ask = Call {
            tool: named(e.tool.name.clone()),
            args: Some(Args::SameAs(e.bind.clone())),
            request_id: request_id.clone(),
            ..Call::new(e.ident, "execute_tool", &e.session, &rr)
        };
        inner.push(call_step(ask.citing(&["CETP2-6-04", "CETP2-4.3-05"])));
        let mut decide = plain(citing(resolution(e.ident, &rr, "approve"), &[]));
        decide.meta = Meta::Optional;
        inner.push(decide);
        let resume = Call {
            tool: named(e.tool.name.clone()),
            args: Some(Args::SameAs(e.bind.clone())),
            request_id,
            resume_token: Some(format!("${{{rr}/resume_token}}")),
            ..Call::new(e.ident, "execute_tool", &e.session, &again)
        };
        let mut resumed = call_step(resume.citing(&["CETP2-6-04", "CETP2-4.3-05"]));
        resumed.meta = Meta::Optional;
        inner.push(resumed);
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
        let call = Call {
            tool: named(literal(&tool.name)),
            args: Some(if tool.escalating {
                Args::Escalating
            } else {
                Args::Valid
            }),
            ..Call::new("a", "execute_tool", &s, &bind)
        };
        pre.extend(self.observed(
            vec![call_step(call.citing(&[
                "CETP2-4.3-01",
                "CETP2-4.3-05",
                "CETP2-3.4-12",
            ]))],
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

/// `ident` plays `decision` on the confirmation request the answer bound to
/// `of` carries.
fn resolution(ident: &str, of: &str, decision: &str) -> Step {
    Step::Resolve {
        as_: ident.into(),
        handle: format!("${{{of}/resolution/handle}}"),
        decision: decision.into(),
    }
}
