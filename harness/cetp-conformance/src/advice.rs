//! Flags the harness suggests in its reasons and fixes ("`--max-wait
//! 3660s` would judge it", "give --target-b HOST:PORT"), each with the
//! commands that print the suggestion. A suggestion must be one the command
//! that printed it accepts: the CLI's tests parse every entry with every
//! command named here, so a text built through [`Flag::with`] cannot name a
//! flag the command lacks (issue 42: `cetp fuzz` advised `--max-wait`, which
//! it did not take).

/// A flag the harness suggests.
#[derive(Clone, Copy, Debug)]
pub struct Flag {
    /// The flag as typed (`--max-wait`).
    pub flag: &'static str,
    /// A value of the kind the suggestion gives (for the parse test).
    pub example: &'static str,
    /// The commands whose output can carry the suggestion, as typed after
    /// `cetp` (`run`, `profile check`).
    pub printed_by: &'static [&'static str],
}

impl Flag {
    /// The flag with `value`, as a suggestion writes it.
    pub fn with(&self, value: &str) -> String {
        format!("{} {value}", self.flag)
    }
}

/// The commands that run vector cases and print their reasons (a case's
/// `needs`, the claim's fix list).
pub const CASE_RUNNERS: &[&str] = &["run", "replay", "fuzz"];

/// A real-time wait long enough for a lifetime on a clock that cannot move
/// (`interp::operation`, the claim's fix list, the profile check's start-up
/// line).
pub const MAX_WAIT: Flag = Flag {
    flag: "--max-wait",
    example: "3660s",
    printed_by: CASE_RUNNERS,
};

/// A second caller identity (`profile_check`'s missing fields and fixes,
/// printed by a run's start-up line and by `cetp profile check`).
pub const TARGET_B: Flag = Flag {
    flag: "--target-b",
    example: "127.0.0.1:7001",
    printed_by: &["run", "replay", "fuzz", "profile check", "init"],
};

/// Every flag the harness suggests.
pub const ALL: &[Flag] = &[MAX_WAIT, TARGET_B];
