//! The generator: random stateful sequences of CETP calls in the vector
//! format's own step language, so that a finding is a regular case.
//!
//! A sequence is a list of *moves*; a move is one or a few steps that belong
//! together (a call and the observer snapshots around it, a resolve and the
//! resumed call). Shrinking removes whole moves, then single steps.
//! Expectations are not written here: the oracle compiles them from what the
//! reference Provider and its legal variants answered (`oracle.rs`). Steps
//! the oracle must vouch for before they judge (named judgements) are marked
//! [`Meta::Judgement`].

use crate::world::{ToolInfo, World};
use cetp_conformance::template::literal;
use proptest::test_runner::{RngAlgorithm, TestRng};
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value as Json};
use std::collections::BTreeSet;

/// What the oracle does with a step.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Meta {
    /// Runs as written; a call bound with a placeholder expectation gets the
    /// oracle's answers as its expectation.
    Plain,
    /// A named judgement (`same`, `tokens_unpredictable`, ...): kept only
    /// when it holds on every oracle member.
    Judgement,
    /// An observer snapshot after an effectful move: becomes
    /// `expect_effects` since `since` with the delta every oracle member
    /// agrees on, or is dropped.
    EffectsAfter {
        /// Binding of the observer snapshot taken before the move.
        since: String,
        /// Binding of the call whose tool made the effect, when there is one.
        tool_of: Option<String>,
    },
    /// Runs as [`Meta::Plain`], but only where an earlier answer made it
    /// possible (a resolution a retry asked for again, and the resumed
    /// call): an oracle run whose own earlier answer leaves it nothing to
    /// run stops there unjudged, as long as another run went on, and the
    /// runs that went on judge what follows.
    Optional,
}

/// One generated step and what the oracle does with it.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct GenStep {
    /// The step, in the vector format's step language.
    pub step: Json,
    /// What the oracle does with it.
    pub meta: Meta,
}

/// One move: steps that belong together, removed whole when shrinking.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Move {
    /// Its steps, in order.
    pub steps: Vec<GenStep>,
}

/// A generated sequence.
#[derive(Clone, Debug)]
pub struct Sequence {
    /// Its moves, in order.
    pub moves: Vec<Move>,
}

impl Sequence {
    /// Every step of the sequence, in order.
    pub fn steps(&self) -> Vec<GenStep> {
        self.moves.iter().flat_map(|m| m.steps.clone()).collect()
    }
}

#[derive(Clone, Debug)]
struct Sess {
    name: String,
    ident: &'static str,
}

#[derive(Clone, Debug)]
struct Exec {
    bind: String,
    tool: ToolInfo,
    session: String,
    ident: &'static str,
    /// Could ask for a confirmation (confirmation=always, or escalating
    /// args).
    may_ask: bool,
}

#[derive(Default)]
struct State {
    sessions: Vec<Sess>,
    execs: Vec<Exec>,
    lists: Vec<String>,
    infos: Vec<String>,
    tokens: Vec<String>,
    n: usize,
}

/// Input schemas cetp-gen refused or gave up on (by their text): not tried
/// again, and reported once per process.
static UNGENERATED: std::sync::Mutex<BTreeSet<String>> = std::sync::Mutex::new(BTreeSet::new());

/// Generates sequences of moves for a target's [`World`], from a seed.
pub struct Generator<'w> {
    world: &'w World,
    rng: ChaCha8Rng,
    st: State,
}

/// A kind of move, drawn by weight ([`WEIGHTS`]) for each move after a
/// sequence's first session. A kind left out of the table is never built
/// by the draw, and the compiler says so (a variant never constructed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MoveKind {
    /// An execution of an executable tool, with drawn args (`execute`).
    Execute,
    /// An earlier execution's request id again, with other args, tool or caller (`replay`).
    Replay,
    /// A call with a malformed common envelope (`envelope`).
    Envelope,
    /// A negotiation with odd versions, capabilities or types (`negotiate_odd`).
    NegotiateOdd,
    /// A `get_provider_info` call.
    Info,
    /// A `list_tools` call.
    List,
    /// A method no version defines (`unknown_method`).
    UnknownMethod,
    /// A v1 call (`v1`).
    V1,
    /// A read, cancel or settle of an earlier background operation (`operation`).
    Operation,
    /// A user decision on a confirmation request and the resumed call (`resolve`).
    Resolve,
    /// A process restart, and new sessions for the identities that had one (`restart_move`).
    Restart,
    /// The clock moved by a drawn amount.
    Advance,
    /// The same call several times at once (`concurrent`).
    Concurrent,
    /// The session tokens so far judged unpredictable.
    Tokens,
    /// Two tool lists held to their revisions (`revision`).
    Revision,
    /// The Provider's identity held to be stable (`stable`).
    Stable,
    /// A session used after its lifetime.
    Expire,
    /// A new session.
    Session,
    /// What discovery must show.
    Discover,
    /// A side effect replayed across a restart (`restart_replay`).
    RestartReplay,
    /// A background operation's life (`async_flow`).
    AsyncFlow,
    /// A large result through the profile's role (`large`).
    Large,
    /// A retry of a side effect (`retry`).
    Retry,
    /// An operation across a restart (`restart_operation`).
    RestartOperation,
}

/// How often each kind is drawn, relative to the others. The order is part
/// of the draw: the same seed picks the same kinds only in this order.
const WEIGHTS: &[(MoveKind, u32)] = &[
    (MoveKind::Execute, 18),
    (MoveKind::Replay, 12),
    (MoveKind::Envelope, 12),
    (MoveKind::NegotiateOdd, 6),
    (MoveKind::Info, 4),
    (MoveKind::List, 4),
    (MoveKind::UnknownMethod, 3),
    (MoveKind::V1, 8),
    (MoveKind::Operation, 8),
    (MoveKind::Resolve, 8),
    (MoveKind::Restart, 4),
    (MoveKind::Advance, 5),
    (MoveKind::Concurrent, 5),
    (MoveKind::Tokens, 4),
    (MoveKind::Revision, 2),
    (MoveKind::Stable, 2),
    (MoveKind::Expire, 2),
    (MoveKind::Session, 6),
    (MoveKind::Discover, 2),
    (MoveKind::RestartReplay, 4),
    (MoveKind::AsyncFlow, 10),
    (MoveKind::Large, 4),
    (MoveKind::Retry, 6),
    (MoveKind::RestartOperation, 4),
];

impl<'w> Generator<'w> {
    /// A generator for `world`, seeded by `seed`.
    pub fn new(world: &'w World, seed: u64) -> Self {
        Generator {
            world,
            rng: ChaCha8Rng::seed_from_u64(seed),
            st: State::default(),
        }
    }

    /// One sequence of 2 to `max_moves` moves after a first session.
    pub fn sequence(&mut self, max_moves: usize) -> Sequence {
        self.sequence_named_from(max_moves, 0)
    }

    /// A sequence as [`Generator::sequence`] makes it, its bind names
    /// numbered after `first_name`: appended to a corpus entry's moves
    /// (`campaign`), it rebinds nothing the entry bound.
    pub fn sequence_named_from(&mut self, max_moves: usize, first_name: usize) -> Sequence {
        self.st = State {
            n: first_name,
            ..State::default()
        };
        let mut moves = vec![self.session_move("a")];
        let n = self.rng.random_range(1..=max_moves.max(1));
        let total: u32 = WEIGHTS.iter().map(|k| k.1).sum();
        while moves.len() <= n {
            let mut pick = self.rng.random_range(0..total);
            let mut kind = WEIGHTS[0].0;
            for (k, w) in WEIGHTS {
                if pick < *w {
                    kind = *k;
                    break;
                }
                pick -= w;
            }
            if let Some(m) = self.make(kind) {
                moves.push(m);
            }
        }
        Sequence { moves }
    }

    fn name(&mut self, prefix: &str) -> String {
        self.st.n += 1;
        format!("{prefix}{}", self.st.n)
    }

    fn chance(&mut self, p: f64) -> bool {
        self.rng.random_bool(p)
    }

    fn pick<T: Clone>(&mut self, items: &[T]) -> Option<T> {
        if items.is_empty() {
            None
        } else {
            Some(items[self.rng.random_range(0..items.len())].clone())
        }
    }

    fn ident(&mut self) -> &'static str {
        if self.world.has_b && self.chance(0.3) {
            "b"
        } else {
            "a"
        }
    }

    /// A session of `ident`, made by a move pushed first when none exists.
    fn session_of(&mut self, ident: &'static str, pre: &mut Vec<GenStep>) -> String {
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

    /// Who calls about an earlier execution: its own caller in its own
    /// session, or (`other`) the other identity in a session of its own.
    fn caller_for(
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

    /// A process restart: sessions may end with it (§2.2), so the moves
    /// after it work in new ones.
    fn restart_move(&mut self) -> Vec<GenStep> {
        // Sessions may end with the process (§2.2): the moves after
        // a restart work in new ones, so that what must survive it
        // (de-duplication records, §4.4) is what they meet.
        let mut out = vec![plain(json!({"do": "restart", "requirements": []}))];
        let idents: Vec<&'static str> = self.st.sessions.iter().map(|x| x.ident).collect();
        self.st.sessions.clear();
        for ident in ["a", "b"] {
            if idents.contains(&ident) {
                out.extend(self.session_move(ident).steps);
            }
        }
        for e in &mut self.st.execs {
            if let Some(n) = self.st.sessions.iter().find(|x| x.ident == e.ident) {
                e.session = n.name.clone();
            }
        }
        out
    }

    /// Two tool lists whose revisions must agree with their contents
    /// (§3.3), or `None` when there is no earlier list to hold one to.
    fn revision(&mut self, pre: &mut Vec<GenStep>) -> Option<Vec<GenStep>> {
        let judge = |a: &str, b: &str| GenStep {
            step: json!({"do": "revision_consistent", "a": a, "b": b,
                         "requirements": ["CETP2-3.3-03"]}),
            meta: Meta::Judgement,
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

    /// The Provider's identity, the same in negotiate, get_provider_info
    /// and across calls (§3.1).
    fn stable(&mut self, pre: &mut Vec<GenStep>) -> Vec<GenStep> {
        let ident = self.ident();
        let s = self.session_of(ident, pre);
        let a = self.name("i");
        pre.push(call_step(
            json!({"do": "call", "as": ident, "method": "get_provider_info",
            "session": s, "bind": a, "requirements": ["CETP2-4-02"]}),
        ));
        let prior = self.st.infos.clone();
        self.st.infos.push(a.clone());
        // The same identity in negotiate and in get_provider_info,
        // and across calls, sessions, identities and restarts.
        let mut out = vec![GenStep {
            step: json!({"do": "equal", "a": format!("${{{s}/data/provider_id}}"),
                         "b": format!("${{{a}/data/provider_id}}"),
                         "requirements": ["CETP2-3.1-01"]}),
            meta: Meta::Judgement,
        }];
        if let Some(b) = self.pick(&prior) {
            out.push(GenStep {
                step: json!({"do": "same", "a": b, "b": a, "pointers": ["/data/provider_id"],
                             "requirements": ["CETP2-3.1-01"]}),
                meta: Meta::Judgement,
            });
        }
        out
    }

    fn make(&mut self, kind: MoveKind) -> Option<Move> {
        let mut pre = Vec::new();
        let steps = match kind {
            MoveKind::Session => {
                let ident = self.ident();
                return Some(self.session_move(ident));
            }
            MoveKind::Execute => self.execute(&mut pre),
            MoveKind::Replay => self.replay(&mut pre)?,
            MoveKind::Envelope => self.envelope(&mut pre),
            MoveKind::NegotiateOdd => self.negotiate_odd(),
            MoveKind::Info | MoveKind::List => self.read_call(kind == MoveKind::List, &mut pre),
            MoveKind::UnknownMethod => self.unknown_method(&mut pre),
            MoveKind::V1 => self.v1(&mut pre)?,
            MoveKind::Operation => self.operation(&mut pre)?,
            MoveKind::Resolve => self.resolve(&mut pre)?,
            MoveKind::Restart => self.restart_move(),
            // What discovery must show (§2.1): each judged on its own, kept
            // where every member's manifest (the target's shape) holds it.
            MoveKind::Discover => [
                (json!({"found": true}), "CETP2-2.1-01"),
                (json!({"found": true, "same_package": true}), "CETP2-2.1-07"),
                (
                    json!({"found": true, "legacy_version_kept": true}),
                    "CETP2-2.1-02",
                ),
            ]
            .into_iter()
            .map(|(expect, req)| GenStep {
                step: json!({"do": "discover", "expect": expect, "requirements": [req]}),
                meta: Meta::Judgement,
            })
            .collect(),
            MoveKind::Advance => {
                let ms = *[
                    1_000u64,
                    61_000,
                    600_001,
                    3_600_001,
                    86_400_001,
                    8 * 86_400_000,
                ]
                .get(self.rng.random_range(0..6))
                .unwrap_or(&1_000);
                vec![plain(
                    json!({"do": "advance_clock", "ms": ms, "requirements": []}),
                )]
            }
            MoveKind::Concurrent => self.concurrent(&mut pre)?,
            MoveKind::AsyncFlow => self.async_flow(&mut pre)?,
            MoveKind::Large => self.large(&mut pre)?,
            MoveKind::RestartReplay => self.restart_replay(&mut pre)?,
            MoveKind::Retry => self.retry(&mut pre)?,
            MoveKind::RestartOperation => self.restart_operation(&mut pre)?,
            MoveKind::Tokens => {
                // Enough sessions to judge tokens by: a few negotiations.
                while self.st.tokens.len() < 4 {
                    let ident = self.ident();
                    let m = self.session_move(ident);
                    pre.extend(m.steps);
                }
                vec![GenStep {
                    step: json!({"do": "tokens_unpredictable", "tokens": self.st.tokens.clone(),
                                 "requirements": ["CETP2-2.2-07"]}),
                    meta: Meta::Judgement,
                }]
            }
            MoveKind::Revision => self.revision(&mut pre)?,
            MoveKind::Stable => self.stable(&mut pre),
            MoveKind::Expire => {
                let sess = self.pick(&self.st.sessions.clone())?;
                let l = self.name("x");
                // Past the lifetime of every session so far, not only of
                // the one judged: a session negotiated after it would
                // otherwise outlive the jump or not by how long the device
                // took in between, and the oracle's members are faster.
                let until: Vec<String> = std::iter::once(&sess)
                    .chain(self.st.sessions.iter().filter(|s| s.name != sess.name))
                    .take(64)
                    .map(|s| format!("${{{}/data/expires_at}}", s.name))
                    .collect();
                vec![
                    plain(json!({"do": "advance_clock", "until": until,
                                 "plus_ms": 1000, "requirements": []})),
                    call_step(
                        json!({"do": "call", "as": sess.ident, "method": "list_tools",
                        "session": sess.name, "bind": l,
                        "requirements": ["CETP2-2.2-13", "CETP2-5-06"]}),
                    ),
                ]
            }
        };
        pre.extend(steps);
        Some(Move { steps: pre })
    }

    /// A new session of `ident` (its negotiation pushed onto `pre`), named.
    fn fresh_session(&mut self, ident: &'static str, pre: &mut Vec<GenStep>) -> String {
        let m = self.session_move(ident);
        pre.extend(m.steps);
        self.st
            .sessions
            .last()
            .map(|x| x.name.clone())
            .unwrap_or_default()
    }

    fn session_move(&mut self, ident: &'static str) -> Move {
        let name = self.name("s");
        let mut step = json!({"do": "negotiate", "as": ident, "bind": name});
        if self.chance(0.5) {
            let caps: Vec<&str> = ["async_operations", "cancellation", "large_results"]
                .into_iter()
                .filter(|_| self.rng.random_bool(0.5))
                .collect();
            step["capabilities"] = json!(caps);
        }
        if self.chance(0.15) {
            step["versions"] = json!([2]);
        }
        self.remember_session(&name, ident);
        Move {
            steps: vec![plain(step)],
        }
    }

    /// A negotiated session later moves may use, and its token for the
    /// unpredictability judgement.
    fn remember_session(&mut self, name: &str, ident: &'static str) {
        self.st.sessions.push(Sess {
            name: name.to_string(),
            ident,
        });
        self.st
            .tokens
            .push(format!("${{{name}/data/session_token}}"));
    }

    fn list_into(&mut self, s: &str, ident: &str, pre: &mut Vec<GenStep>) -> String {
        let l = self.name("l");
        pre.push(call_step(
            json!({"do": "call", "as": ident, "method": "list_tools",
            "session": s, "bind": l, "requirements": ["CETP2-4-03"]}),
        ));
        self.st.lists.push(l.clone());
        l
    }

    fn read_call(&mut self, list: bool, pre: &mut Vec<GenStep>) -> Vec<GenStep> {
        let ident = self.ident();
        let s = self.session_of(ident, pre);
        if list {
            self.list_into(&s, ident, pre);
            return Vec::new();
        }
        let i = self.name("i");
        self.st.infos.push(i.clone());
        vec![call_step(
            json!({"do": "call", "as": ident, "method": "get_provider_info",
            "session": s, "bind": i, "requirements": ["CETP2-4-02", "CETP2-3.2-01"]}),
        )]
    }

    /// Observer snapshots around `inner` when the move may have an effect.
    fn observed(
        &mut self,
        inner: Vec<GenStep>,
        tool_of: Option<String>,
        tags: &[&str],
    ) -> Vec<GenStep> {
        if !self.world.observer {
            return inner;
        }
        let before = self.name("o");
        let after = self.name("p");
        let mut out = vec![plain(json!({"do": "observe", "bind": before}))];
        out.extend(inner);
        out.push(GenStep {
            step: json!({"do": "observe", "bind": after, "requirements": tags}),
            meta: Meta::EffectsAfter {
                since: before,
                tool_of,
            },
        });
        out
    }

    fn args_for(&mut self, tool: &ToolInfo) -> (Json, Vec<&'static str>) {
        let r = self.rng.random_range(0..100);
        match r {
            0..=49 => (json!("valid"), vec![]),
            50..=64 => (json!("invalid"), vec!["CETP2-5-13", "CETP2-7.3-04"]),
            65..=74 if tool.escalating => {
                (json!("escalating"), vec!["CETP2-3.4-12", "CETP2-4.3-01"])
            }
            75..=79 => (json!("oversize"), vec!["CETP2-4.1-06", "CETP2-2.2-16"]),
            80..=89 => (
                json!({"text": self.edge_text(tool)}),
                vec!["CETP2-5-13", "CETP2-7.3-04"],
            ),
            _ => match self.generated(tool) {
                Some(v) => (json!({"json": v}), vec![]),
                None => (json!("valid"), vec![]),
            },
        }
    }

    /// Valid args drawn from the input schema by `cetp-gen`, within its
    /// budget (construction and draw): the schema is the Provider's, so a
    /// schema the generator cannot serve must not stall the run. Such a
    /// tool's args are "not generated": said once on stderr, and its calls
    /// use the other argument kinds.
    fn generated(&mut self, tool: &ToolInfo) -> Option<Json> {
        let mut seed = [0u8; 32];
        self.rng.fill_bytes(&mut seed);
        let key = tool.input_schema.to_string();
        let refused = |e: cetp_gen::GenError| {
            let mut seen = UNGENERATED.lock().unwrap_or_else(|p| p.into_inner());
            if seen.insert(key.clone()) {
                // Debug formatting escapes the Provider's control characters.
                eprintln!(
                    "cetp fuzz: arguments not generated for tool {:?}: {:?}",
                    tool.name,
                    e.to_string()
                );
            }
        };
        if UNGENERATED
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&key)
        {
            return None;
        }
        let g = cetp_gen::Generator::new(&tool.input_schema)
            .map_err(refused)
            .ok()?;
        g.draw_valid(&mut TestRng::from_seed(RngAlgorithm::ChaCha, &seed))
            .map_err(refused)
            .ok()
    }

    /// Args text at the edges: lone surrogates, BOM, NUL, bidi overrides,
    /// huge numbers, duplicate keys, deep nesting, broken JSON, sizes just
    /// under and over the negotiated `max_request_bytes`.
    fn edge_text(&mut self, tool: &ToolInfo) -> String {
        let base = self.generated(tool).unwrap_or(json!({}));
        let limit = self.world.max_request_bytes;
        let variants: Vec<String> = vec![
            r#"{"k":"\ud800"}"#.into(),
            format!("\u{feff}{base}"),
            base.to_string().replacen('"', "\"\u{0}", 1),
            base.to_string().replacen('"', "\"\u{202e}", 1),
            r#"{"a":1,"a":2}"#.into(),
            "1e400".into(),
            "{".into(),
            String::new(),
            "null".into(),
            "[]".into(),
            format!("{}{}", "[".repeat(300), "]".repeat(300)),
            pad_to(&base, limit.saturating_sub(600)),
            pad_to(&base, limit + 1),
            "\u{fffe}\u{ffff}".into(),
        ];
        let i = self.rng.random_range(0..variants.len());
        variants[i].clone()
    }

    fn execute(&mut self, pre: &mut Vec<GenStep>) -> Vec<GenStep> {
        let tools: Vec<ToolInfo> = self.world.executable().cloned().collect();
        let Some(tool) = self.pick(&tools) else {
            return Vec::new();
        };
        let ident = self.ident();
        let s = self.session_of(ident, pre);
        let e = self.name("e");
        let (args, mut tags) = self.args_for(&tool);
        tags.extend(["CETP2-4-04", "CETP2-4.2-02"]);
        let mut step = json!({"do": "call", "as": ident, "method": "execute_tool", "session": s,
            "tool": {"name": literal(&tool.name)}, "args": args, "bind": e});
        if self.chance(0.15) {
            // Around the device's now, but never within the time a call
            // takes to arrive: a deadline a few ms away is exceeded or not
            // by the transport's whim, on the target and not in the oracle.
            let d = *[-60_000i64, -1_000, 5_000, 3_600_000]
                .get(self.rng.random_range(0..4))
                .unwrap_or(&5_000);
            step["deadline_in_ms"] = json!(d);
            tags.extend(["CETP2-4.1-09", "CETP2-5-17"]);
        }
        if self.chance(0.15) {
            // The request claims what only the Provider may decide: that
            // the user confirmed (§4.3), or who the caller is (§7.1).
            step["extras"] = self.assertion_extras(ident);
            tags.extend(["CETP2-4.3-07", "CETP2-7.1-02", "CETP2-3.4-14"]);
        }
        step["requirements"] = json!(tags);
        if tool.execution != "sync" {
            // `accepted` among the expected statuses keeps an operation
            // unsettled, so later moves can read or cancel it by its id;
            // the oracle replaces the set with what its members answered.
            step["expect"] = json!({"status": ["success", "accepted", "error"]});
        }
        let may_ask = tool.confirmation == "always" || args == json!("escalating");
        self.st.execs.push(Exec {
            bind: e.clone(),
            tool: tool.clone(),
            session: s,
            ident,
            may_ask,
        });
        // Reads are observed too: a read tool changes no business state
        // (§3.4).
        let inner = vec![call_step(step)];
        self.observed(
            inner,
            Some(e),
            &["CETP2-6-01", "CETP2-4.1-09", "CETP2-3.4-12", "CETP2-3.4-08"],
        )
    }

    /// Extras asserting a confirmation or another caller's identity.
    fn assertion_extras(&mut self, ident: &str) -> Json {
        // The second identity lacks scopes the first holds: claiming to be
        // the first is the borrowing §7.1 forbids.
        if ident == "b" && self.chance(0.6) {
            return json!({"calling_uid": {"t": "int", "v": "${env/a/uid}"}});
        }
        match self.rng.random_range(0..4) {
            0 => json!({"confirmed": {"t": "bool", "v": true}}),
            1 => json!({"calling_uid": {"t": "int", "v": "${env/a/uid}"}}),
            2 => json!({"caller_package": {"t": "string", "v": "${env/a/packages/0}"}}),
            _ => json!({"confirmed": {"t": "string", "v": "true"}}),
        }
    }

    /// A side effect, the process killed, and the same request again in a
    /// new session: the de-duplication record must have survived (§4.4).
    fn restart_replay(&mut self, pre: &mut Vec<GenStep>) -> Option<Vec<GenStep>> {
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
        out.extend(self.make(MoveKind::Restart)?.steps);
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

    /// The retry §6 is about: a side effect with valid args, then the same
    /// request id and args again (the same session, or a new one of the same
    /// caller, as after a lost connection; sometimes minutes or an hour
    /// later): the first answer again, and no second effect.
    fn retry(&mut self, pre: &mut Vec<GenStep>) -> Option<Vec<GenStep>> {
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

    /// An operation across a restart (§4.4: operation states are persisted,
    /// a restart executes nothing twice): accepted in a session with
    /// async_operations, sometimes followed to its end first, the process
    /// killed, then read by its caller in a new session: still known, and
    /// once ended, ended the same way.
    fn restart_operation(&mut self, pre: &mut Vec<GenStep>) -> Option<Vec<GenStep>> {
        let tools: Vec<ToolInfo> = self
            .world
            .executable()
            .filter(|t| t.execution != "sync")
            .cloned()
            .collect();
        let tool = self.pick(&tools)?;
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
            Some((r, _)) if self.chance(0.7) => json!({"profile_role": r}),
            _ => json!({"name": literal(&tool.name)}),
        };
        let mut inner = vec![call_step(json!({
            "do": "call", "as": ident, "method": "execute_tool", "session": s,
            "tool": tool_ref, "args": "valid", "bind": e,
            "expect": {"status": ["success", "accepted", "error"]},
            "requirements": ["CETP2-4.4-01", "CETP2-4-04"]}))];
        self.st.execs.push(Exec {
            bind: e.clone(),
            tool: tool.clone(),
            session: s.clone(),
            ident,
            may_ask: tool.confirmation == "always",
        });
        let settled_first = self.chance(0.5).then(|| self.name("f"));
        if let Some(f) = &settled_first {
            inner.push(call_step(json!({
                "do": "settle", "as": ident, "session": s, "of": e, "bind": f,
                "expect": {}, "requirements": ["CETP2-4.4-05", "CETP2-4.4-08"]})));
        }
        inner.extend(self.make(MoveKind::Restart)?.steps);
        let s2 = self.session_with(ident, &caps, &mut inner);
        let g = self.name("g");
        let reqs = ["CETP2-4.4-13", "CETP2-4.4-14", "CETP2-6-04"];
        if self.chance(0.5) {
            inner.push(call_step(json!({
                "do": "call", "as": ident, "method": "get_operation", "session": s2,
                "request_id": format!("${{{e}/_request/request_id}}"),
                "operation_id": format!("${{{e}/data/operation_id}}"), "bind": g,
                "requirements": reqs})));
        } else {
            inner.push(call_step(json!({
                "do": "settle", "as": ident, "session": s2, "of": e, "bind": g,
                "expect": {}, "requirements": reqs})));
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

    fn replay(&mut self, pre: &mut Vec<GenStep>) -> Option<Vec<GenStep>> {
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

    fn envelope(&mut self, pre: &mut Vec<GenStep>) -> Vec<GenStep> {
        let ident = self.ident();
        let s = self.session_of(ident, pre);
        let reads: Vec<ToolInfo> = self
            .world
            .executable()
            .filter(|t| t.effect == "read")
            .cloned()
            .collect();
        let methods = [
            "get_provider_info",
            "list_tools",
            "execute_tool",
            "get_operation",
            "cancel_operation",
        ];
        let mut method = methods[self.rng.random_range(0..methods.len())];
        let read = self.pick(&reads);
        if method == "execute_tool" && read.is_none() {
            method = "list_tools";
        }
        let b = self.name("v");
        let mut step =
            json!({"do": "call", "as": ident, "method": method, "session": s, "bind": b});
        if method == "execute_tool" {
            if let Some(t) = &read {
                step["tool"] = json!({"name": literal(&t.name)});
                step["args"] = json!("valid");
            }
        }
        if matches!(method, "get_operation" | "cancel_operation") {
            step["operation_id"] = json!(
                ["op-unknown", "", "00000000-0000-4000-8000-000000000000"]
                    [self.rng.random_range(0..3)]
            );
        }
        let mut tags = vec!["CETP2-5-14"];
        let mut extras = serde_json::Map::new();
        let mut omit = Vec::new();
        for _ in 0..self.rng.random_range(1..=2) {
            match self.rng.random_range(0..6) {
                0 => {
                    let mut keys = vec![
                        "protocol_version",
                        "session_token",
                        "request_id",
                        "deadline_at_ms",
                    ];
                    if method == "execute_tool" {
                        keys.extend(["tool_name", "args"]);
                    }
                    let k = keys[self.rng.random_range(0..keys.len())];
                    omit.push(k);
                    tags.extend(["CETP2-2.2-13", "CETP2-4-08"]);
                }
                1 => {
                    let (k, v) = self.confused();
                    extras.insert(k.into(), v);
                    tags.push("CETP2-4-08");
                }
                2 => {
                    if self.chance(0.5) {
                        if let Some(o) = self.assertion_extras(ident).as_object() {
                            extras.extend(o.clone());
                        }
                    } else {
                        extras.insert(
                            ["x_unknown", "PROTOCOL_VERSION"][self.rng.random_range(0..2)].into(),
                            json!({"t": "string", "v": "true"}),
                        );
                    }
                    tags.extend(["CETP2-4.3-07", "CETP2-7.1-02"]);
                }
                3 => {
                    let v = self.foreign_token(ident);
                    extras.insert("session_token".into(), json!({"t": "string", "v": v}));
                    tags.extend(["CETP2-2.2-13", "CETP2-2.2-09"]);
                }
                4 => {
                    step["deadline_in_ms"] =
                        json!([-86_400_000i64, -1_000, 5_000][self.rng.random_range(0..3)]);
                    tags.extend(["CETP2-4.1-09", "CETP2-5-17"]);
                }
                _ => {
                    let rid = self.bad_request_id();
                    extras.insert("request_id".into(), json!({"t": "string", "v": rid}));
                    tags.push("CETP2-4.1-03");
                }
            }
        }
        if !extras.is_empty() {
            step["extras"] = Json::Object(extras);
        }
        if !omit.is_empty() {
            step["omit"] = json!(omit);
        }
        tags.sort();
        tags.dedup();
        step["requirements"] = json!(tags);
        vec![call_step(step)]
    }

    /// A session token that is not `ident`'s: another identity's, a forged
    /// one, or one far too long (§2.2: a token is bound to its caller).
    fn foreign_token(&mut self, ident: &str) -> String {
        let others: Vec<String> = self
            .st
            .sessions
            .iter()
            .filter(|x| x.ident != ident)
            .map(|x| format!("${{{}/data/session_token}}", x.name))
            .collect();
        let forged = ["", "AAAA", "forged-token-0000000000000000", "x"]
            [self.rng.random_range(0..4)]
        .to_string();
        let long = "t".repeat(300);
        self.pick(&others)
            .filter(|_| self.rng.random_bool(0.6))
            .unwrap_or(if self.rng.random_bool(0.2) {
                long
            } else {
                forged
            })
    }

    /// A request_id that is not a lower-case UUID (§4.1).
    fn bad_request_id(&mut self) -> &'static str {
        [
            "",
            "not-a-uuid",
            "00000000-0000-0000-0000-000000000000",
            "F47AC10B-58CC-4372-A567-0E02B2C3D479",
            "f47ac10b-58cc-4372-a567-0e02b2c3d4790",
            "f47ac10b58cc4372a5670e02b2c3d479",
        ][self.rng.random_range(0..6)]
    }

    /// A common field with a value of another Bundle type.
    fn confused(&mut self) -> (&'static str, Json) {
        let options: Vec<(&str, Json)> = vec![
            ("protocol_version", json!({"t": "long", "v": 2})),
            ("protocol_version", json!({"t": "string", "v": "2"})),
            ("protocol_version", json!({"t": "int", "v": 1})),
            ("protocol_version", json!({"t": "int", "v": 3})),
            ("protocol_version", json!({"t": "double", "v": 2.0})),
            ("protocol_version", json!({"t": "int[]", "v": [2]})),
            (
                "protocol_version",
                json!({"t": "bundle", "v": {"v": {"t": "int", "v": 2}}}),
            ),
            ("session_token", json!({"t": "int", "v": 7})),
            ("session_token", json!({"t": "string[]", "v": ["a"]})),
            ("request_id", json!({"t": "long", "v": 1})),
            ("request_id", json!({"t": "bundle", "v": {}})),
            ("deadline_at_ms", json!({"t": "int", "v": 5})),
            ("deadline_at_ms", json!({"t": "string", "v": "soon"})),
            ("deadline_at_ms", json!({"t": "double", "v": 1.5})),
            ("deadline_at_ms", json!({"t": "null", "v": null})),
        ];
        let i = self.rng.random_range(0..options.len());
        (options[i].0, options[i].1.clone())
    }

    fn negotiate_odd(&mut self) -> Vec<GenStep> {
        let ident = self.ident();
        let n = self.name("n");
        let mut step = json!({"do": "negotiate", "as": ident, "bind": n, "expect": {}});
        let tags: Vec<&str>;
        if self.chance(0.6) {
            let offers = [
                json!([]),
                json!([1]),
                json!([3]),
                json!([0]),
                json!([3, 2]),
                json!([2, 2]),
                json!([99, 2]),
                json!([-1]),
                json!([1, 2]),
            ];
            step["versions"] = offers[self.rng.random_range(0..offers.len())].clone();
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
            step["capabilities"] = json!(caps);
            tags = vec!["CETP2-2.2-05", "CETP2-2.2-06", "CETP2-2.2-14", "CETP2-5-04"];
        } else {
            let versions = [
                json!({"t": "int[]", "v": [2]}),
                json!({"t": "string", "v": "2"}),
                json!({"t": "int", "v": 2}),
                json!({"t": "long[]", "v": [2]}),
                json!({"t": "string[]", "v": ["2"]}),
                json!({"t": "bundle", "v": {}}),
            ];
            let caps = [
                json!({"t": "string", "v": "[\"async_operations\"]"}),
                json!({"t": "string[]", "v": ["async_operations"]}),
                json!({"t": "string", "v": "["}),
                json!({"t": "int", "v": 1}),
                json!({"t": "string", "v": "{}"}),
            ];
            let mut extras = serde_json::Map::new();
            if self.chance(0.85) {
                extras.insert(
                    "consumer_versions".into(),
                    versions[self.rng.random_range(0..versions.len())].clone(),
                );
            }
            if self.chance(0.85) {
                extras.insert(
                    "consumer_capabilities".into(),
                    caps[self.rng.random_range(0..caps.len())].clone(),
                );
            }
            if self.chance(0.2) {
                extras.insert("protocol_version".into(), json!({"t": "int", "v": 2}));
            }
            step["extras"] = Json::Object(extras);
            tags = vec!["CETP2-2.2-14", "CETP2-5-14", "CETP2-2.2-04"];
        }
        step["requirements"] = json!(tags);
        vec![call_step(step)]
    }

    fn unknown_method(&mut self, pre: &mut Vec<GenStep>) -> Vec<GenStep> {
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
            json!({"do": "call", "as": ident, "method": m, "session": s, "bind": b,
            "requirements": ["CETP2-4-07", "CETP2-5-12"]}),
        )]
    }

    fn v1(&mut self, pre: &mut Vec<GenStep>) -> Option<Vec<GenStep>> {
        let ident = self.ident();
        let s = self.session_of(ident, pre);
        let b = self.name("w");
        if self.chance(0.4) {
            // The v1 list holds only tools the v2 list declares read-only.
            let l = self.list_into(&s, ident, pre);
            return Some(vec![
                call_step(json!({"do": "call", "as": ident, "method": "list_tools",
                    "v1": true, "bind": b, "requirements": ["CETP2-2.1-05", "CETP2-4-08"]})),
                GenStep {
                    step: json!({"do": "v1_read_only", "v1": b, "v2": l,
                                 "requirements": ["CETP2-2.1-05", "CETP2-8-08"]}),
                    meta: Meta::Judgement,
                },
            ]);
        }
        let tools: Vec<ToolInfo> = self.world.executable().cloned().collect();
        let tool = self.pick(&tools)?;
        let step = call_step(
            json!({"do": "call", "as": ident, "method": "execute_tool", "v1": true,
            "session": s, "tool": {"name": literal(&tool.name)}, "args": "valid", "bind": b,
            "requirements": ["CETP2-8-02", "CETP2-8-07", "CETP2-4-08"]}),
        );
        Some(if tool.effect == "read" {
            vec![step]
        } else {
            self.observed(vec![step], None, &["CETP2-8-02", "CETP2-8-07"])
        })
    }

    fn operation(&mut self, pre: &mut Vec<GenStep>) -> Option<Vec<GenStep>> {
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
            format!("${{{}/_request/request_id}}", e.bind)
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
        let step = match r {
            0 => json!({"do": "call", "as": ident, "method": "get_operation", "session": s,
                        "request_id": rid, "operation_id": op, "bind": b, "requirements": tags}),
            1 => {
                tags.extend(["CETP2-4.4-09", "CETP2-4.4-17"]);
                json!({"do": "call", "as": ident, "method": "cancel_operation", "session": s,
                        "request_id": rid, "operation_id": op, "bind": b, "requirements": tags})
            }
            _ => {
                json!({"do": "settle", "as": e.ident, "session": e.session, "of": e.bind, "bind": b,
                        "expect": {}, "requirements": ["CETP2-4.4-05", "CETP2-4.4-08"]})
            }
        };
        let inner = vec![call_step(step)];
        Some(if e.tool.effect == "read" {
            inner
        } else {
            self.observed(inner, Some(e.bind), &["CETP2-4.4-17", "CETP2-4.4-11"])
        })
    }

    /// A call that asks the user first (a tool that always confirms, or an
    /// escalating call), when no earlier execution did.
    fn asking_exec(&mut self, pre: &mut Vec<GenStep>) -> Option<Exec> {
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

    fn resolve(&mut self, pre: &mut Vec<GenStep>) -> Option<Vec<GenStep>> {
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

    /// A session negotiated with exactly `caps`, bound before the move.
    fn session_with(
        &mut self,
        ident: &'static str,
        caps: &[&str],
        pre: &mut Vec<GenStep>,
    ) -> String {
        let name = self.name("s");
        pre.push(plain(
            json!({"do": "negotiate", "as": ident, "bind": name, "capabilities": caps}),
        ));
        self.remember_session(&name, ident);
        name
    }

    /// A background operation's life (§4.4) in one move: an execution in a
    /// session with async_operations, then reads and cancellations by its
    /// creator, by the other identity, under another request id, from a
    /// session without the capability, after time has passed, and a settle;
    /// after a cancellation, the final state is held to the effects seen.
    /// One query of an async execution's operation (§4.4): by its creator,
    /// by the other identity, with a new request id, from a session
    /// without async_operations, or after time passed; a poll or a cancel.
    fn operation_query(
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
                inner.push(plain(
                    json!({"do": "advance_clock", "ms": ms, "requirements": []}),
                ));
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

    fn async_flow(&mut self, pre: &mut Vec<GenStep>) -> Option<Vec<GenStep>> {
        let tools: Vec<ToolInfo> = self
            .world
            .executable()
            .filter(|t| t.execution != "sync")
            .cloned()
            .collect();
        let tool = self.pick(&tools)?;
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
        let roles: Vec<String> = self
            .world
            .roles
            .iter()
            .filter(|(_, t)| **t == tool.name)
            .map(|(r, _)| r.clone())
            .collect();
        let (tool_ref, args) = match self.pick(&roles) {
            Some(r) if self.chance(0.5) => (json!({"profile_role": r}), json!("valid")),
            _ => {
                let args = match self.generated(&tool) {
                    Some(v) if self.chance(0.4) => json!({"json": v}),
                    _ => json!("valid"),
                };
                (json!({"name": literal(&tool.name)}), args)
            }
        };
        let mut inner = vec![call_step(json!({
            "do": "call", "as": ident, "method": "execute_tool", "session": s,
            "tool": tool_ref, "args": args, "bind": e,
            "expect": {"status": ["success", "accepted", "error"]},
            "requirements": ["CETP2-4.4-01", "CETP2-4.4-02", "CETP2-4-04"]}))];
        self.st.execs.push(Exec {
            bind: e.clone(),
            tool: tool.clone(),
            session: s.clone(),
            ident,
            may_ask: tool.confirmation == "always",
        });
        let op = format!("${{{e}/data/operation_id}}");
        let own_rid = format!("${{{e}/_request/request_id}}");
        let mut cancelled = false;
        for _ in 0..self.rng.random_range(1..=3) {
            let b = self.name("g");
            let what = self.rng.random_range(0..9);
            let (who, sess, rid, method) =
                self.operation_query(what, (ident, &s, &own_rid), &caps, &mut inner);
            if method == "cancel_operation" && who == ident && rid == own_rid {
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
            inner.push(call_step(json!({
                "do": "call", "as": who, "method": method, "session": sess,
                "request_id": rid, "operation_id": op, "bind": b, "requirements": tags})));
        }
        let fin = self.name("f");
        inner.push(call_step(json!({
            "do": "settle", "as": ident, "session": s, "of": e, "bind": fin,
            "expect": {}, "requirements": ["CETP2-4.4-05", "CETP2-4.4-08"]})));
        if !self.world.observer {
            return Some(inner);
        }
        let before = self.name("o");
        let mut out = vec![plain(json!({"do": "observe", "bind": before}))];
        out.extend(inner);
        if cancelled {
            // The judgement reads the operation's state, which a poll's
            // answer carries (`/data/state`); the settled answer holds the
            // result instead. A run that answered synchronously has no
            // operation to poll and stops there.
            let state = self.name("f");
            out.push(call_step(json!({
                "do": "poll", "as": ident, "session": s, "operation_of": e, "bind": state,
                "expect": {}, "requirements": ["CETP2-4.4-09"]})));
            out.push(GenStep {
                step: json!({"do": "cancel_consistent", "final": state, "since": before,
                             "requirements": ["CETP2-4.4-17"]}),
                meta: Meta::Judgement,
            });
        }
        let after = self.name("p");
        out.push(GenStep {
            step: json!({"do": "observe", "bind": after,
                         "requirements": ["CETP2-4.4-17", "CETP2-4.4-11", "CETP2-6-01"]}),
            meta: Meta::EffectsAfter {
                since: before,
                tool_of: Some(e),
            },
        });
        Some(out)
    }

    /// A large result (§4.5) through the profile's `large_result` role:
    /// in a session with or without large_results, and when it comes as a
    /// file, the descriptor read back and held to its declared size, digest,
    /// output_schema and read-only mode.
    fn large(&mut self, pre: &mut Vec<GenStep>) -> Option<Vec<GenStep>> {
        self.world.roles.get("large_result")?;
        let ident = self.ident();
        let mut caps = vec![];
        if self.chance(0.8) {
            caps.push("large_results");
        }
        if self.chance(0.3) {
            caps.push("async_operations");
        }
        let s = self.session_with(ident, &caps, pre);
        let big = self.name("e");
        let mut out = vec![call_step(json!({
            "do": "call", "as": ident, "method": "execute_tool", "session": s,
            "tool": {"profile_role": "large_result"}, "args": "valid", "bind": big,
            "expect": {"status": ["success", "accepted", "error"]},
            "requirements": ["CETP2-4.5-01", "CETP2-4.5-02", "CETP2-2.3-05"]}))];
        let (of, settled) = if caps.contains(&"async_operations") {
            let f = self.name("f");
            out.push(call_step(json!({
                "do": "settle", "as": ident, "session": s, "of": big, "bind": f,
                "expect": {}, "requirements": ["CETP2-4.4-05"]})));
            (f, true)
        } else {
            (big.clone(), false)
        };
        if caps.contains(&"large_results") {
            let mut read = json!({"do": "read_fd", "as": ident,
                "handle": format!("${{{of}/result_fd}}"),
                "requirements": ["CETP2-4.5-03", "CETP2-4.5-04"]});
            if !settled {
                read["verify_against"] = json!(big);
                read["output_schema"] = json!(true);
                read["read_only"] = json!(true);
            }
            out.push(plain(read));
        }
        Some(out)
    }

    fn concurrent(&mut self, pre: &mut Vec<GenStep>) -> Option<Vec<GenStep>> {
        let tools: Vec<ToolInfo> = self.world.executable().cloned().collect();
        let tool = self.pick(&tools)?;
        let ident = self.ident();
        let s = self.session_of(ident, pre);
        let same_rid = self.chance(0.7);
        let u = self.name("u");
        let mut out = Vec::new();
        if same_rid {
            out.push(plain(json!({"do": "uuid", "bind": u, "requirements": []})));
        }
        let first = self.name("c");
        // Up to more calls than the minimum max_concurrent_requests (4):
        // one request id (one executor, §6) or several (RATE_LIMITED, §5).
        let n = self.rng.random_range(2..=6);
        let calls: Vec<Json> = (0..n)
            .map(|i| {
                let mut c = json!({"do": "call", "as": ident, "method": "execute_tool", "session": s,
                    "tool": {"name": literal(&tool.name)}, "args": "valid",
                    "bind": if i == 0 { first.clone() } else { format!("{first}_{i}") }});
                if same_rid {
                    c["request_id"] = json!(format!("${{{u}}}"));
                }
                c
            })
            .collect();
        out.push(plain(
            json!({"do": "concurrent", "steps": calls, "requirements": ["CETP2-6-05"]}),
        ));
        // Only one request id makes the count independent of timing: one
        // executor, whatever the overlap (§6). With several, how many run
        // depends on how they overlap the Provider's limit.
        Some(if tool.effect == "read" || !same_rid {
            out
        } else {
            self.observed(out, Some(first), &["CETP2-6-05"])
        })
    }
}

/// `moves` with every argument drawn from a tool's input schema drawn
/// anew (seeded by `seed`), or `None` when none was drawn. A re-run of a
/// failure needs this when the first run changed what its values meet: a
/// read that creates the object it was asked for shows that only for an id
/// that does not exist yet, and the first run made it exist.
pub fn redraw_generated(moves: &[Move], world: &World, seed: u64) -> Option<Vec<Move>> {
    let mut g = Generator::new(world, seed);
    let mut changed = false;
    let mut out = moves.to_vec();
    for step in out.iter_mut().flat_map(|m| m.steps.iter_mut()) {
        let j = &mut step.step;
        if j.pointer("/args/json").is_none() {
            continue;
        }
        let Some(name) = j.pointer("/tool/name").and_then(Json::as_str) else {
            continue;
        };
        let Some(tool) = world.tools.iter().find(|t| literal(&t.name) == name) else {
            continue;
        };
        if let Some(v) = g.generated(tool) {
            j["args"] = json!({ "json": v });
            changed = true;
        }
    }
    changed.then_some(out)
}

/// A judgement that `b` repeats the terminal answer `a` (§6), unless one
/// of them is an answer §5 lets a Provider give at any time.
fn same_answer(a: &str, b: &str, reqs: &[&str]) -> GenStep {
    GenStep {
        step: json!({"do": "same", "a": a, "b": b,
            "unless_code": ["RATE_LIMITED", "NEGOTIATION_REQUIRED", "UNAVAILABLE"],
            "requirements": reqs}),
        meta: Meta::Judgement,
    }
}

fn plain(step: Json) -> GenStep {
    GenStep {
        step,
        meta: Meta::Plain,
    }
}

/// A call whose expectation the oracle fills in: a placeholder `expect`
/// marks it.
fn call_step(mut step: Json) -> GenStep {
    if step.get("expect").is_none() {
        step["expect"] = json!({});
    }
    GenStep {
        step,
        meta: Meta::Plain,
    }
}

/// `base` as JSON text padded with a string member to about `size` bytes.
fn pad_to(base: &Json, size: usize) -> String {
    let mut v = base.clone();
    let text = v.to_string();
    let room = size.saturating_sub(text.len() + 16);
    if let Some(o) = v.as_object_mut() {
        o.insert("_pad".into(), json!("p".repeat(room)));
        v.to_string()
    } else {
        text
    }
}
