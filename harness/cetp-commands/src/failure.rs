//! Failures before or outside a run, with their exit codes: the one type
//! every command returns, so the command line maps it to an exit code in
//! one place.

use cetp_conformance::exit::ExitCode;
use cetp_conformance::rundir::DirError;
use std::time::{SystemTime, UNIX_EPOCH};

/// A failure before or outside a run, with its exit code.
pub struct Failure {
    /// Who is at fault, as the process's exit code.
    pub code: ExitCode,
    /// What went wrong, for the user.
    pub message: String,
}

/// A failure of the arguments or of the files they name (exit 2).
pub fn usage(message: impl Into<String>) -> Failure {
    Failure {
        code: ExitCode::Usage,
        message: message.into(),
    }
}

/// A failure of the machine, the network or the device (exit 3).
pub fn infra(message: impl Into<String>) -> Failure {
    Failure {
        code: ExitCode::Infra,
        message: message.into(),
    }
}

/// A target that could not be opened: a usage error when the user's input
/// is at fault (a TARGET that does not parse, a JVM device refusing the
/// Provider it was given), else an infrastructure error (the device, adb,
/// the network, a JVM device that did not start).
pub fn cannot_open(label: &str, e: cetp_targets::TargetError) -> Failure {
    let message = format!("cannot open target {label}: {e}");
    if e.is_usage() {
        usage(message)
    } else {
        infra(message)
    }
}

/// A run directory's failure, with the exit code it chose.
pub fn dir_failure(e: DirError) -> Failure {
    Failure {
        code: e.exit,
        message: e.message,
    }
}

/// Now, in milliseconds since the Unix epoch (a run's nonce).
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
