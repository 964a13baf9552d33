//! Exit codes of `cetp`, in one place (documented in the README).

/// How a run ends, by who is at fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitCode {
    /// No FAIL (known failures in the baseline do not count).
    Ok,
    /// At least one FAIL charged to the target, a stale baseline entry, or
    /// (with `--require-claim`) a run that does not establish the §9 claim.
    Fail,
    /// Bad usage: arguments, profile, vectors or baseline file.
    Usage,
    /// Infrastructure: the device, adb or the transport failed; nothing is
    /// charged to the Provider.
    Infra,
}

impl ExitCode {
    pub fn code(self) -> i32 {
        match self {
            ExitCode::Ok => 0,
            ExitCode::Fail => 1,
            ExitCode::Usage => 2,
            ExitCode::Infra => 3,
        }
    }
}
