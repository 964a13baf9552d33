//! Flags the harness suggests in its reasons and fixes ("`--max-wait
//! 3660s` would judge it", "give --target-b HOST:PORT"), each with the
//! commands that print the suggestion. A suggestion must be one the command
//! that printed it accepts: the CLI's tests parse every entry with every
//! command named here, so a text built through [`Flag::with`] cannot name a
//! flag the command lacks (issue 42: `cetp fuzz` advised `--max-wait`, which
//! it did not take).
//!
//! Also what a case left unjudged by the setup needs, in a vendor's words
//! ([`fix_for`], [`role_hint`]): the run's claim, its start-up line and
//! `cetp profile check` give the same fix.

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

/// As a run's `needs` names a device without `resolve`
/// (`interp::operation`).
pub const RESOLVE_NEEDS: &str = "a device that plays the user's decision (resolve)";

/// What to write for a role (profiles/README.md, Roles).
pub fn role_hint(role: &str) -> String {
    match role {
        "async" => "a sync_or_async tool and args that make it run in the background (a Provider may always answer synchronously, §2.3)".into(),
        "large_result" => "a tool and args whose result exceeds max_inline_result_bytes (§4.5)".into(),
        "escalating" => "a tool and args the Provider's own policy must confirm although the annotation does not say so (§3.4)".into(),
        "failing_operation" => "a sync_or_async tool and args whose background operation fails (§4.4)".into(),
        "scope_missing_for_b" => "a tool declaring a scope the second identity lacks (§7.2)".into(),
        "read_scope_missing_for_b" => "a read tool declaring a scope the second identity lacks (§7.2, §8)".into(),
        other => format!("a tool for role {other}"),
    }
}

/// The change that judges a case left unjudged for `needs` (a run's `needs
/// X`): a profile line, a flag or a device ability, in a vendor's words.
pub fn fix_for(needs: &str) -> String {
    if let Some(role) = needs
        .strip_prefix("[roles.")
        .and_then(|r| r.strip_suffix(']'))
    {
        return format!("add [roles.{role}]: {}", role_hint(role));
    }
    match needs {
        "[observer]" => "add an [observer]: a read tool and a JSON pointer into its result that shows what happened (profiles/README.md)".into(),
        "[observer] counts" => "set observer.counts to \"effects\" (a counter of committed changes) or \"objects\" (a number or list of objects)".into(),
        "[observer] counts = \"effects\"" => "point the [observer] at a counter of committed changes and set counts = \"effects\"".into(),
        "[observer] pointer" => "point observer.pointer at a number or an array".into(),
        "[execute] allow" => "list the side-effecting tools the harness may execute in [execute] allow".into(),
        "--target-b" => "give --target-b HOST:PORT: a second caller identity (another UID, package and certificate)".into(),
        "a device with a movable clock" => "a device whose clock the harness can move (a simulated device, or an emulator or userdebug phone after `adb root` with clock=move on its adb target), or lifetimes short enough to wait for in real time".into(),
        RESOLVE_NEEDS => "a device that plays the user's decision on your confirmation UI (the probe app, with [ui] selectors)".into(),
        // The shortest path first: a build, a clock that moves, and only
        // then a real-time wait that may take an hour.
        other if other.starts_with(MAX_WAIT.flag) => format!(
            "use a build whose lifetimes are shorter (a debug build), or let the harness move the device's clock (a simulated device; an emulator or userdebug phone after `adb root`, with clock=move on its adb target); failing both, give {other} (a real-time wait that long, on a device whose clock cannot move)"
        ),
        other if other.starts_with("[timing] ") => format!("set {} in milliseconds", other.trim_start_matches("[timing] ").trim()).replace("set ", "set [timing] "),
        other if other.starts_with("[tools.") => format!("give {other} in the profile"),
        other => format!("provide {other}"),
    }
}
