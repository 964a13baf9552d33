//! Exit codes of `cetp`, in one place (documented in the README).

use cetp_contract::drift::Class;

/// How a run ends, by who is at fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitCode {
    /// No FAIL (known failures in the baseline do not count); for
    /// `cetp drift`, no drift.
    Ok,
    /// At least one FAIL charged to the target, a stale baseline entry, or
    /// (with `--require-claim`) a run that does not establish the §9 claim;
    /// for `cetp drift`, breaking drift or a spec violation.
    Fail,
    /// Bad usage: arguments, profile, vectors, baseline or lock file; a name
    /// that names nothing (mutant, legal variant, fixture, requirement, a
    /// filter pattern that selects no case); `cetp merge` inputs that are
    /// not one complete split of one configuration.
    Usage,
    /// Infrastructure: the device, adb or the transport failed, or the
    /// machine refused a file or a port (a report that cannot be written, a
    /// port that cannot be bound, a `cetp merge` input that cannot be read
    /// or did not finish); nothing is charged to the Provider.
    Infra,
    /// `cetp drift` only: the contract drifted, but compatibly (nothing
    /// breaking, no violation), so a CI gate may let it through.
    CompatibleDrift,
    /// Ctrl-C stopped the run at a step boundary; its journal is left for
    /// `cetp resume` (128 + SIGINT, as shells report it).
    Interrupted,
}

impl ExitCode {
    /// The process exit code.
    pub fn code(self) -> i32 {
        match self {
            ExitCode::Ok => 0,
            ExitCode::Fail => 1,
            ExitCode::Usage => 2,
            ExitCode::Infra => 3,
            ExitCode::CompatibleDrift => 4,
            ExitCode::Interrupted => 130,
        }
    }

    /// The exit code of a drift report with this worst class.
    pub fn for_drift(worst: Option<Class>) -> ExitCode {
        match worst {
            None => ExitCode::Ok,
            Some(Class::Compatible) => ExitCode::CompatibleDrift,
            Some(Class::Breaking | Class::Violation) => ExitCode::Fail,
        }
    }
}
