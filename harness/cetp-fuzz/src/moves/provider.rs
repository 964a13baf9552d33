//! Moves about the Provider rather than one tool: discovery (§2.1), its
//! info and identity (§3.1, §3.2), its tool lists and their revisions
//! (§3.3), methods it must refuse (§4), and the v1 path (§8).

use super::steps::{call_step, citing, judgement, named, strings, Call};
use super::{GenStep, Generator};
use crate::world::ToolInfo;
use cetp_vectors::template::literal;
use cetp_vectors::vector::{Args, DiscoverExpect, Step};
use rand::Rng;

impl Generator<'_> {
    /// Move: what discovery must show (§2.1), each judged on its own. No
    /// precondition.
    pub(super) fn discover(&mut self) -> Vec<GenStep> {
        // Kept where every member's manifest (the target's shape) holds it.
        let found = DiscoverExpect {
            found: true,
            ..DiscoverExpect::default()
        };
        [
            (found.clone(), "CETP2-2.1-01"),
            (
                DiscoverExpect {
                    same_package: true,
                    ..found.clone()
                },
                "CETP2-2.1-07",
            ),
            (
                DiscoverExpect {
                    legacy_version_kept: true,
                    ..found
                },
                "CETP2-2.1-02",
            ),
        ]
        .into_iter()
        .map(|(expect, req)| {
            let step = Step::Discover {
                bind: None,
                expect: Some(expect),
            };
            judgement(citing(step, &[req]))
        })
        .collect()
    }

    /// A `list_tools` call in session `s`, pushed onto `pre`: its binding,
    /// kept for later revision judgements.
    pub(super) fn list_into(&mut self, s: &str, ident: &str, pre: &mut Vec<GenStep>) -> String {
        let l = self.name("l");
        pre.push(call_step(
            Call::new(ident, "list_tools", s, &l).citing(&["CETP2-4-03"]),
        ));
        self.st.lists.push(l.clone());
        l
    }

    /// Move: a `list_tools` call, the list kept for later revision
    /// judgements. No precondition.
    pub(super) fn list(&mut self, pre: &mut Vec<GenStep>) -> Vec<GenStep> {
        let ident = self.ident();
        let s = self.session_of(ident, pre);
        self.list_into(&s, ident, pre);
        Vec::new()
    }

    /// Move: a `get_provider_info` call (§3.2). No precondition.
    pub(super) fn info(&mut self, pre: &mut Vec<GenStep>) -> Vec<GenStep> {
        let ident = self.ident();
        let s = self.session_of(ident, pre);
        let i = self.name("i");
        self.st.infos.push(i.clone());
        vec![call_step(
            Call::new(ident, "get_provider_info", &s, &i).citing(&["CETP2-4-02", "CETP2-3.2-01"]),
        )]
    }

    /// Move: the Provider's identity held the same in negotiate,
    /// get_provider_info and across calls (§3.1). No precondition.
    pub(super) fn stable(&mut self, pre: &mut Vec<GenStep>) -> Vec<GenStep> {
        let ident = self.ident();
        let s = self.session_of(ident, pre);
        let a = self.name("i");
        pre.push(call_step(
            Call::new(ident, "get_provider_info", &s, &a).citing(&["CETP2-4-02"]),
        ));
        let prior = self.st.infos.clone();
        self.st.infos.push(a.clone());
        // The same identity in negotiate and in get_provider_info,
        // and across calls, sessions, identities and restarts.
        let equal = Step::Equal {
            a: format!("${{{s}/data/provider_id}}"),
            b: format!("${{{a}/data/provider_id}}"),
        };
        let mut out = vec![judgement(citing(equal, &["CETP2-3.1-01"]))];
        if let Some(b) = self.pick(&prior) {
            let same = Step::Same {
                a: b,
                b: a,
                pointers: strings(&["/data/provider_id"]),
                different: false,
                unless_code: vec![],
                if_status: None,
            };
            out.push(judgement(citing(same, &["CETP2-3.1-01"])));
        }
        out
    }

    /// Move: two tool lists whose revisions must agree with their contents
    /// (§3.3). `None` when the draw holds a fresh list to an earlier one and
    /// picks the fresh one itself (always, when there is no earlier one).
    pub(super) fn revision(&mut self, pre: &mut Vec<GenStep>) -> Option<Vec<GenStep>> {
        let judge = |a: &str, b: &str| {
            let step = Step::RevisionConsistent {
                a: a.into(),
                b: b.into(),
            };
            judgement(citing(step, &["CETP2-3.3-03"]))
        };
        if self.chance(0.5) {
            // Two sessions apart only in async_operations: execution
            // annotations follow it (§3.3), so on most Providers the
            // two lists differ, and so must their revisions.
            let ident = self.ident();
            let on = self.session_with(ident, &["async_operations"], pre);
            let a = self.list_into(&on, ident, pre);
            let off = self.session_with(ident, &[], pre);
            let b = self.list_into(&off, ident, pre);
            Some(vec![judge(&a, &b)])
        } else {
            // A fresh session, often with other capabilities, held
            // to any earlier list.
            let s = self.fresh_session("a", pre);
            let a = self.list_into(&s, "a", pre);
            let prior = self.st.lists.clone();
            let b = self.pick(&prior).filter(|b| *b != a)?;
            Some(vec![judge(&b, &a)])
        }
    }

    /// Move: a method no version defines, or a near miss of one (§4),
    /// which must be refused. No precondition.
    pub(super) fn unknown_method(&mut self, pre: &mut Vec<GenStep>) -> Vec<GenStep> {
        let ident = self.ident();
        let s = self.session_of(ident, pre);
        let methods = [
            "frobnicate",
            "LIST_TOOLS",
            "list_tools ",
            "execute",
            "authorize_intent",
            "getOperation",
            "negotiate2",
            "resume_tool",
        ];
        let m = methods[self.rng.random_range(0..methods.len())];
        let b = self.name("u");
        vec![call_step(
            Call::new(ident, m, &s, &b).citing(&["CETP2-4-07", "CETP2-5-12"]),
        )]
    }

    /// Move: a v1 call (§8): the v1 tool list held to the v2 one's
    /// read-only tools, or an execution. `None` when the draw is an
    /// execution and no tool is executable.
    pub(super) fn v1(&mut self, pre: &mut Vec<GenStep>) -> Option<Vec<GenStep>> {
        let ident = self.ident();
        let s = self.session_of(ident, pre);
        let b = self.name("w");
        // A v2-only Provider is held to §4.1 (every v2 request carries
        // protocol_version) and §8's v2-only rule for writes, never to the
        // dual-stack clauses (the v1 reading of §4, the v1 view of §2.1).
        let (list_tags, exec_tags, effect_tags): (&[&str], &[&str], &[&str]) = if self.world.v2_only
        {
            (
                &["CETP2-4.1-01"],
                &["CETP2-4.1-01", "CETP2-8-02"],
                &["CETP2-4.1-01", "CETP2-8-02"],
            )
        } else {
            (
                &["CETP2-2.1-05", "CETP2-4-08"],
                &["CETP2-8-02", "CETP2-8-07", "CETP2-4-08"],
                &["CETP2-8-02", "CETP2-8-07"],
            )
        };
        if self.chance(0.4) {
            let list = Call {
                session: None,
                v1: true,
                ..Call::new(ident, "list_tools", "", &b)
            };
            if self.world.v2_only {
                // Refused, whichever way (§4.1): no v1 list to compare.
                return Some(vec![call_step(list.citing(list_tags))]);
            }
            // The v1 list holds only tools the v2 list declares read-only.
            let l = self.list_into(&s, ident, pre);
            let read_only = Step::V1ReadOnly { v1: b, v2: l };
            return Some(vec![
                call_step(list.citing(list_tags)),
                judgement(citing(read_only, &["CETP2-2.1-05", "CETP2-8-08"])),
            ]);
        }
        let tools: Vec<ToolInfo> = self.world.executable().cloned().collect();
        let tool = self.pick(&tools)?;
        let call = Call {
            v1: true,
            tool: named(literal(&tool.name)),
            args: Some(Args::Valid),
            ..Call::new(ident, "execute_tool", &s, &b)
        };
        let step = call_step(call.citing(exec_tags));
        Some(if tool.effect == "read" {
            vec![step]
        } else {
            self.observed(vec![step], None, effect_tags)
        })
    }
}
