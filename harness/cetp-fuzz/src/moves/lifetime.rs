//! Time and the process: the clock moved, a session past its lifetime, a
//! restart.

use super::steps::{advance_by, bare, call_step, citing, plain, Call};
use super::{GenStep, Generator};
use cetp_vectors::vector::{Step, Until};
use rand::Rng;

/// The Advance move's wait on a clock that cannot move (real time).
const FIXED_CLOCK_ADVANCE_MS: u64 = 250;

impl Generator<'_> {
    /// Move: the clock moved by a drawn amount, from a second to past a
    /// week. No precondition.
    pub(super) fn advance(&mut self) -> Vec<GenStep> {
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
        // On a clock that cannot move the wait is real time, and nothing a
        // move sets up expires within a second there (no short deadline is
        // drawn, no lifetime is let run out): a quarter of one, which the
        // sequences judged during waits fill, keeps the moves that do
        // commit something coming (measured on the Kotlin sample, where
        // these waits were most of a sequence's time).
        //
        // There it is a `sleep`, not a clock move: a clock move is a
        // lifetime let run out, to which the interpreter adds the profile's
        // `expiry_margin_ms` (the Kotlin sample's 5 s made each of these
        // waits 5.25 s, most of its run: 54 sequences a minute). A sleep is
        // the time asked for, on the target and on the shadow's manual
        // clock alike.
        if self.world.fixed_clock {
            return vec![plain(bare(Step::Sleep {
                ms: FIXED_CLOCK_ADVANCE_MS,
            }))];
        }
        vec![advance_by(ms)]
    }

    /// Move: a session used after its lifetime (§2.2), which must be
    /// refused. `None` when there is no session yet.
    pub(super) fn expire(&mut self) -> Option<Vec<GenStep>> {
        // A session's lifetime in real time is beyond any run's patience
        // (the JVM device's sessions live an hour): not drawn there.
        if self.world.fixed_clock {
            return None;
        }
        let sess = self.pick(&self.st.sessions.clone())?;
        let l = self.name("x");
        // Past the lifetime of every session so far, not only of the one
        // judged: a session negotiated after it would otherwise outlive the
        // jump or not by how long the device took in between, and the
        // oracle's members are faster.
        let until: Vec<String> = std::iter::once(&sess)
            .chain(self.st.sessions.iter().filter(|s| s.name != sess.name))
            .take(64)
            .map(|s| format!("${{{}/data/expires_at}}", s.name))
            .collect();
        Some(vec![
            plain(citing(
                Step::AdvanceClock {
                    ms: None,
                    profile: None,
                    until: Some(Until::Latest(until)),
                    plus_ms: 1000,
                },
                &[],
            )),
            call_step(
                Call::new(sess.ident, "list_tools", &sess.name, &l)
                    .citing(&["CETP2-2.2-13", "CETP2-5-06"]),
            ),
        ])
    }

    /// Move: a process restart: sessions may end with it (§2.2), so the
    /// moves after it work in new ones. No precondition.
    pub(super) fn restart(&mut self) -> Vec<GenStep> {
        // Sessions may end with the process (§2.2): the moves after
        // a restart work in new ones, so that what must survive it
        // (de-duplication records, §4.4) is what they meet.
        let mut out = vec![plain(citing(Step::Restart, &[]))];
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
}
