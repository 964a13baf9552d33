//! Session moves (§2.2): negotiations, the sessions other moves call in,
//! and what session tokens must be.

use super::steps::{bare, call_step, citing, judgement, plain, strings, typed};
use super::{Exec, GenStep, Generator, Move, Sess};
use cetp_vectors::vector::{Expect, Step};
use rand::Rng;
use serde_json::json;
use std::collections::BTreeMap;

impl Generator<'_> {
    /// Move: a new session of a drawn identity. No precondition.
    pub(super) fn session(&mut self) -> Vec<GenStep> {
        let ident = self.ident();
        self.session_move(ident).steps
    }

    /// Move: the session tokens so far judged unpredictable (§2.2), after
    /// enough negotiations to judge them by. No precondition.
    pub(super) fn tokens(&mut self, pre: &mut Vec<GenStep>) -> Vec<GenStep> {
        // Enough sessions to judge tokens by: a few negotiations.
        while self.st.tokens.len() < 4 {
            let ident = self.ident();
            let m = self.session_move(ident);
            pre.extend(m.steps);
        }
        let tokens = self.st.tokens.clone();
        vec![judgement(citing(
            Step::TokensUnpredictable { tokens },
            &["CETP2-2.2-07"],
        ))]
    }

    /// A negotiation of `ident`, sometimes with drawn capabilities or an
    /// explicit version offer: a session later moves may use.
    pub(super) fn session_move(&mut self, ident: &'static str) -> Move {
        let name = self.name("s");
        let mut capabilities = None;
        if self.chance(0.5) {
            let caps: Vec<&str> = ["async_operations", "cancellation", "large_results"]
                .into_iter()
                .filter(|_| self.rng.random_bool(0.5))
                .collect();
            capabilities = Some(strings(&caps));
        }
        let versions = self.chance(0.15).then(|| vec![2]);
        self.remember_session(&name, ident);
        Move {
            steps: vec![plain(bare(Step::Negotiate {
                as_: ident.into(),
                versions,
                capabilities,
                extras: None,
                bind: Some(name),
                expect: None,
            }))],
        }
    }

    /// A new session of `ident` (its negotiation pushed onto `pre`), named.
    pub(super) fn fresh_session(&mut self, ident: &'static str, pre: &mut Vec<GenStep>) -> String {
        let m = self.session_move(ident);
        pre.extend(m.steps);
        self.st
            .sessions
            .last()
            .map(|x| x.name.clone())
            .unwrap_or_default()
    }

    /// A session of `ident`, made by a move pushed first when none exists.
    pub(super) fn session_of(&mut self, ident: &'static str, pre: &mut Vec<GenStep>) -> String {
        let have: Vec<Sess> = self
            .st
            .sessions
            .iter()
            .filter(|s| s.ident == ident)
            .cloned()
            .collect();
        if let Some(s) = self.pick(&have) {
            return s.name;
        }
        self.fresh_session(ident, pre)
    }

    /// A session negotiated with exactly `caps`, bound before the move.
    pub(super) fn session_with(
        &mut self,
        ident: &'static str,
        caps: &[&str],
        pre: &mut Vec<GenStep>,
    ) -> String {
        let name = self.name("s");
        pre.push(plain(bare(Step::Negotiate {
            as_: ident.into(),
            versions: None,
            capabilities: Some(strings(caps)),
            extras: None,
            bind: Some(name.clone()),
            expect: None,
        })));
        self.remember_session(&name, ident);
        name
    }

    /// A negotiated session later moves may use, and its token for the
    /// unpredictability judgement.
    pub(super) fn remember_session(&mut self, name: &str, ident: &'static str) {
        self.st.sessions.push(Sess {
            name: name.to_string(),
            ident,
        });
        self.st
            .tokens
            .push(format!("${{{name}/data/session_token}}"));
    }

    /// Who calls about an earlier execution: its own caller in its own
    /// session, or (`other`) the other identity in a session of its own.
    pub(super) fn caller_for(
        &mut self,
        e: &Exec,
        other: bool,
        pre: &mut Vec<GenStep>,
    ) -> (&'static str, String) {
        if !other {
            return (e.ident, e.session.clone());
        }
        let ident = if e.ident == "a" { "b" } else { "a" };
        (ident, self.session_of(ident, pre))
    }

    /// Move: a negotiation with odd version offers or capabilities, or with
    /// mistyped fields (§2.2), judged by what the oracle answers. No
    /// precondition.
    pub(super) fn negotiate_odd(&mut self) -> Vec<GenStep> {
        let ident = self.ident();
        let n = self.name("n");
        let (mut versions, mut capabilities, mut extras) = (None, None, None);
        let tags: &[&str];
        if self.chance(0.6) {
            let offers: [&[i32]; 9] = [
                &[],
                &[1],
                &[3],
                &[0],
                &[3, 2],
                &[2, 2],
                &[99, 2],
                &[-1],
                &[1, 2],
            ];
            versions = Some(offers[self.rng.random_range(0..offers.len())].to_vec());
            let caps: Vec<&str> = [
                "async_operations",
                "cancellation",
                "large_results",
                "bogus_capability",
                "",
            ]
            .into_iter()
            .filter(|_| self.rng.random_bool(0.4))
            .collect();
            capabilities = Some(strings(&caps));
            tags = &["CETP2-2.2-05", "CETP2-2.2-06", "CETP2-2.2-14", "CETP2-5-04"];
        } else {
            let versions = [
                typed("int[]", json!([2])),
                typed("string", json!("2")),
                typed("int", json!(2)),
                typed("long[]", json!([2])),
                typed("string[]", json!(["2"])),
                typed("bundle", json!({})),
            ];
            let caps = [
                typed("string", json!("[\"async_operations\"]")),
                typed("string[]", json!(["async_operations"])),
                typed("string", json!("[")),
                typed("int", json!(1)),
                typed("string", json!("{}")),
            ];
            let mut fields = BTreeMap::new();
            if self.chance(0.85) {
                fields.insert(
                    "consumer_versions".into(),
                    versions[self.rng.random_range(0..versions.len())].clone(),
                );
            }
            if self.chance(0.85) {
                fields.insert(
                    "consumer_capabilities".into(),
                    caps[self.rng.random_range(0..caps.len())].clone(),
                );
            }
            if self.chance(0.2) {
                fields.insert("protocol_version".into(), typed("int", json!(2)));
            }
            extras = Some(fields);
            tags = &["CETP2-2.2-14", "CETP2-5-14", "CETP2-2.2-04"];
        }
        let step = Step::Negotiate {
            as_: ident.into(),
            versions,
            capabilities,
            extras,
            bind: Some(n),
            expect: Some(Expect::default()),
        };
        vec![call_step(citing(step, tags))]
    }
}
