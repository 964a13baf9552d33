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
//!
//! The moves are grouped by what they exercise, one file each: `session`
//! (negotiation and tokens, §2.2), `provider` (discovery, info, tool
//! lists, methods to refuse, v1), `execute` (tool calls) with `args`
//! (their arguments), `replay` (de-duplication, §6), `operation`
//! (background operations, §4.4), `confirm` (confirmations, §4.3),
//! `envelope` (malformed requests) and `lifetime` (the clock and restarts).
//! They build the vector format's typed steps (`steps`).
//! Each move is a [`Generator`] method that returns `None` when its
//! precondition fails (no tool to call, no earlier execution to replay);
//! the draw then simply draws again.

mod args;
mod confirm;
mod envelope;
mod execute;
mod lifetime;
mod operation;
mod provider;
mod replay;
mod session;
mod steps;

pub use args::redraw_generated;

use crate::world::{ToolInfo, World};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::Value as Json;
use steps::{bare, citing, observe, plain};

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
    /// A process restart, and new sessions for the identities that had one (`restart`).
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

impl MoveKind {
    /// Whether a quiet world ([`World::quiet`]) draws this kind: none that
    /// restarts the Provider, moves or waits on its clock, leaves an
    /// operation running, floods it, or asks its user.
    fn quiet(self) -> bool {
        !matches!(
            self,
            MoveKind::Restart
                | MoveKind::Advance
                | MoveKind::Expire
                | MoveKind::RestartReplay
                | MoveKind::RestartOperation
                | MoveKind::Concurrent
                | MoveKind::Operation
                | MoveKind::AsyncFlow
                | MoveKind::Resolve
                | MoveKind::Retry
        )
    }
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

    /// One move of `kind`, or `None` when its precondition fails (see
    /// each move's doc).
    fn make(&mut self, kind: MoveKind) -> Option<Move> {
        // Steps a move needs first (a session to call in, a list to hold a
        // revision to) go to `pre`, and lead the move.
        if self.world.quiet && !kind.quiet() {
            return None;
        }
        let mut pre = Vec::new();
        let steps = match kind {
            MoveKind::Execute => self.execute(&mut pre),
            MoveKind::Replay => self.replay(&mut pre)?,
            MoveKind::Envelope => self.envelope(&mut pre),
            MoveKind::NegotiateOdd => self.negotiate_odd(),
            MoveKind::Info => self.info(&mut pre),
            MoveKind::List => self.list(&mut pre),
            MoveKind::UnknownMethod => self.unknown_method(&mut pre),
            MoveKind::V1 => self.v1(&mut pre)?,
            MoveKind::Operation => self.operation(&mut pre)?,
            MoveKind::Resolve => self.resolve(&mut pre)?,
            MoveKind::Restart => self.restart(),
            MoveKind::Advance => self.advance(),
            MoveKind::Concurrent => self.concurrent(&mut pre)?,
            MoveKind::Tokens => self.tokens(&mut pre),
            MoveKind::Revision => self.revision(&mut pre)?,
            MoveKind::Stable => self.stable(&mut pre),
            MoveKind::Expire => self.expire()?,
            MoveKind::Session => self.session(),
            MoveKind::Discover => self.discover(),
            MoveKind::RestartReplay => self.restart_replay(&mut pre)?,
            MoveKind::AsyncFlow => self.async_flow(&mut pre)?,
            MoveKind::Large => self.large(&mut pre)?,
            MoveKind::Retry => self.retry(&mut pre)?,
            MoveKind::RestartOperation => self.restart_operation(&mut pre)?,
        };
        pre.extend(steps);
        Some(Move { steps: pre })
    }

    /// A bind name not used before in the sequence: `prefix` and a number.
    fn name(&mut self, prefix: &str) -> String {
        self.st.n += 1;
        format!("{prefix}{}", self.st.n)
    }

    /// True with probability `p`.
    fn chance(&mut self, p: f64) -> bool {
        self.rng.random_bool(p)
    }

    /// One of `items`, drawn evenly; `None` when there is none.
    fn pick<T: Clone>(&mut self, items: &[T]) -> Option<T> {
        if items.is_empty() {
            None
        } else {
            Some(items[self.rng.random_range(0..items.len())].clone())
        }
    }

    /// The caller identity of a move: mostly `a`, sometimes `b` when the
    /// target has a second identity.
    fn ident(&mut self) -> &'static str {
        if self.world.has_b && self.chance(0.3) {
            "b"
        } else {
            "a"
        }
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
        let mut out = vec![plain(bare(observe(&before)))];
        out.extend(inner);
        let mut snapshot = plain(citing(observe(&after), tags));
        snapshot.meta = Meta::EffectsAfter {
            since: before,
            tool_of,
        };
        out.push(snapshot);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::{Generator, WEIGHTS};
    use crate::world::{ToolInfo, World};

    /// A world of one read tool the profile names for `large_result`,
    /// whose learning negotiate granted `granted`.
    fn large_world(granted: &[&str]) -> World {
        World {
            tools: vec![ToolInfo {
                name: "label_sheet".into(),
                effect: "read".into(),
                execution: "sync".into(),
                confirmation: "never".into(),
                input_schema: serde_json::json!({"type": "object"}),
                executable: true,
                escalating: false,
            }],
            has_b: false,
            max_request_bytes: 65_536,
            observer: false,
            roles: [("large_result".to_string(), "label_sheet".to_string())].into(),
            v2_only: true,
            fixed_clock: false,
            can_resolve: false,
            quiet: false,
            granted: granted.iter().map(|c| c.to_string()).collect(),
        }
    }

    /// How many steps of 400 sequences read a file result.
    fn file_reads(world: &World) -> usize {
        (0..400)
            .flat_map(|seed| Generator::new(world, seed).sequence(8).steps())
            .filter(|s| s.step["do"] == "read_fd")
            .count()
    }

    /// A Provider that grants no large_results has no file result to read:
    /// a read would stop the sequence unjudged (the Kotlin sample: 55 of
    /// 124 unjudged sequences in 40 s). One that grants it is read.
    #[test]
    fn a_file_result_is_read_only_where_large_results_is_granted() {
        assert_eq!(file_reads(&large_world(&[])), 0);
        assert!(file_reads(&large_world(&["large_results"])) > 0);
    }

    /// A kind missing from the table fails to compile (never constructed);
    /// one listed twice or with no weight would skew the draw unnoticed.
    #[test]
    fn every_kind_is_weighted_once() {
        for (i, (kind, weight)) in WEIGHTS.iter().enumerate() {
            assert!(*weight > 0, "{kind:?} is never drawn");
            assert!(
                !WEIGHTS[..i].iter().any(|(k, _)| k == kind),
                "{kind:?} listed twice"
            );
        }
    }
}
