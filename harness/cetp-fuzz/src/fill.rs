//! Work for the waits of a device whose clock cannot move.
//!
//! On a phone, the JVM device or `cetp sim --fixed-clock`, a sequence that
//! polls an operation waits the `poll_after_ms` its Provider asks for, in
//! real time (§4.4); a lifetime or an idempotency window is waited out the
//! same way. Measured on the Java sample over TCP, such waits were most of
//! a run's time. While one sequence waits, the fuzzer runs other sequences
//! drawn from the [quiet world](crate::world::World::quiet): read tools
//! that answer at once, sessions, envelopes, tool lists, v1 calls, replays
//! of reads. They leave nothing the waiting sequence could see (no effect
//! for its observer, no operation, no restart, no clock move), and each is
//! judged by the descriptor oracle as any sequence is. One that fails is
//! not charged here: it is handed to the main loop, which runs it again on
//! its own, and confirms and shrinks it as any other ([`Filler::suspects`]).

use crate::descriptor::{Judged, Shadow, Transcript};
use crate::exec::run_case_waiting;
use crate::moves::{Generator, Move};
use crate::world::World;
use cetp_vectors::device::Target;
use cetp_vectors::interp::{Env, Stop};
use cetp_vectors::profile::Profile;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the run shares with the sequences run during its waits.
pub(crate) struct Ctx<'c> {
    pub target: &'c Target,
    pub profile: &'c Profile,
    pub env: &'c Env,
    pub rules: &'c BTreeMap<String, Vec<String>>,
    pub shadow: &'c Shadow,
    pub transcript: &'c Arc<Transcript>,
    pub max_wait_ms: u64,
}

/// The figures of the sequences run during waits, added to the run's.
#[derive(Default, Debug)]
pub(crate) struct FillStats {
    pub sequences: u64,
    pub judged: u64,
    pub envelopes: u64,
    pub notes: Vec<String>,
}

/// Sequences for the waits ([module docs](self)).
pub(crate) struct Filler {
    world: World,
    seed: u64,
    next: u64,
    max_moves: usize,
    /// How long its last sequences took ([`Self::typical`]): one is started
    /// only when the wait has room for a typical one, so that a wait is
    /// not overrun by much (a poll comes a little late, which §4.4 allows).
    took: std::collections::VecDeque<Duration>,
    pub stats: FillStats,
    /// Sequences that failed here, with their seeds, for the main loop.
    pub suspects: Vec<(Vec<Move>, u64)>,
}

/// No sequence is started in a wait shorter than this.
const MIN_WAIT_MS: u64 = 50;

/// The first guess of one sequence's time, before any was measured.
const FIRST_GUESS: Duration = Duration::from_millis(60);

/// How many of the last sequences' times [`Filler::typical`] looks at.
const TIMES_KEPT: usize = 15;

impl Filler {
    /// Sequences of `world`'s quiet half, seeded from `seed`.
    pub fn new(world: &World, seed: u64, max_moves: usize) -> Filler {
        Filler {
            world: world.quiet(),
            seed: seed ^ 0xf111_f111_f111_f111,
            next: 0,
            max_moves: max_moves.min(8),
            took: std::collections::VecDeque::new(),
            stats: FillStats::default(),
            suspects: Vec::new(),
        }
    }

    /// Spends up to `ms` of real time on sequences, each judged.
    pub fn fill(&mut self, ms: u64, ctx: &Ctx) {
        if ms < MIN_WAIT_MS {
            return;
        }
        let until = Instant::now() + Duration::from_millis(ms);
        // A suspect is left for the main loop before more are drawn.
        while self.suspects.is_empty() {
            if !self.has_room(until.saturating_duration_since(Instant::now())) {
                return;
            }
            let started = Instant::now();
            self.one(ctx);
            if self.took.len() == TIMES_KEPT {
                self.took.pop_front();
            }
            self.took.push_back(started.elapsed());
        }
    }

    /// Whether `left` has room for one and a half typical sequences.
    /// Times are measured only when a sequence runs, so each wait let go
    /// forgets the oldest: a stretch of slow ones (measured while the
    /// machine was busy) cannot stop the waits being filled for the rest
    /// of the run. It did: a ten-minute run on the JVM device started
    /// beside a build filled one wait in all (60 envelopes/s, 240 before).
    fn has_room(&mut self, left: Duration) -> bool {
        if left < self.typical() * 3 / 2 {
            self.took.pop_front();
            return false;
        }
        true
    }

    /// The median of the last sequences' times. Not their mean: a few of
    /// them take ten times the rest (judged by every legal variant), and a
    /// mean pulled up by those left every 100 ms poll wait of a
    /// `v2_only_v1_calls_unknown` run unfilled (80 envelopes/s against
    /// 120 to 190 for the other targets). A median that a run of slow ones
    /// raised decays as waits are let go ([`Self::fill`]).
    fn typical(&self) -> Duration {
        if self.took.is_empty() {
            return FIRST_GUESS;
        }
        let mut t: Vec<Duration> = self.took.iter().copied().collect();
        t.sort_unstable();
        t[t.len() / 2]
    }

    fn one(&mut self, ctx: &Ctx) {
        let seed = crate::case_seed(self.seed, self.next);
        self.next += 1;
        let seq = Generator::new(&self.world, seed).sequence(self.max_moves);
        let steps = seq.steps();
        self.stats.sequences += 1;
        let header = crate::header(u64::MAX - self.next);
        let Some(case) = crate::oracle::to_case(&header, &crate::oracle::oracle_steps(&steps))
        else {
            return;
        };
        let start_ms = ctx.target.a.now_ms();
        // Its own request ids (the seed is its own); the transcript is not
        // cleared: the waiting sequence's answers stay for its shadow, and
        // each shadow reads only the calls it makes itself.
        let trun = run_case_waiting(
            ctx.target,
            ctx.profile,
            ctx.env,
            ctx.rules,
            &case,
            seed,
            ctx.max_wait_ms,
        );
        let answers = ctx.transcript.snapshot();
        let plain = |t: Target| t;
        let judged = ctx
            .shadow
            .judge_reference_first(&crate::descriptor::Judging {
                steps: &steps,
                trun: &trun,
                transcript: &answers,
                header: &header,
                profile: ctx.profile,
                rules: ctx.rules,
                seed,
                start_ms,
                wrap: &plain,
            });
        match judged {
            Judged::Notes(n) => {
                for x in n {
                    if self.stats.notes.len() < 50 && !self.stats.notes.contains(&x) {
                        self.stats.notes.push(x);
                    }
                }
            }
            Judged::Nothing => {}
            Judged::Ran { case, run } => {
                self.stats.envelopes += run.answers as u64;
                if !matches!(
                    run.stop,
                    Some(Stop::Setup { .. } | Stop::NotApplicable(_) | Stop::Infra(_))
                ) {
                    self.stats.judged += 1;
                }
                if crate::signature(&case, &run).is_some() {
                    self.suspects.push((seq.moves, seed));
                }
            }
        }
    }

    /// Takes the figures gathered since the last call.
    pub fn take_stats(&mut self) -> FillStats {
        std::mem::take(&mut self.stats)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filler(took: &[u64]) -> Filler {
        Filler {
            world: World {
                tools: Vec::new(),
                has_b: false,
                max_request_bytes: 65_536,
                observer: false,
                roles: Default::default(),
                v2_only: false,
                fixed_clock: true,
                can_resolve: false,
                quiet: true,
                granted: Vec::new(),
            },
            seed: 0,
            next: 0,
            max_moves: 1,
            took: took.iter().map(|ms| Duration::from_millis(*ms)).collect(),
            stats: FillStats::default(),
            suspects: Vec::new(),
        }
    }

    /// The median, not the mean: a few slow sequences leave the 100 ms
    /// waits filled.
    #[test]
    fn a_few_slow_sequences_do_not_stop_the_filling() {
        let mut f = filler(&[5, 8, 180, 6, 170, 9, 7]);
        assert_eq!(f.typical(), Duration::from_millis(8));
        assert!(f.has_room(Duration::from_millis(100)));
    }

    /// Slow times measured once are forgotten as waits go by unfilled, and
    /// the filling starts again.
    #[test]
    fn a_slow_stretch_is_forgotten() {
        let mut f = filler(&[200; TIMES_KEPT]);
        let mut let_go = 0;
        while !f.has_room(Duration::from_millis(100)) {
            let_go += 1;
            assert!(let_go <= TIMES_KEPT, "the waits were never filled again");
        }
        assert!(let_go >= TIMES_KEPT / 2, "{let_go}");
    }
}
