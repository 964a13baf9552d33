//! What a device answers, and how it fails: the types every layer shares.
//!
//! They live in the core (as `ResolveOutcome` and `ServiceManifest` do in
//! [`crate::provider`]) because the reference's in-process device, the
//! probe-wire transports, the simulated device and the runner all speak
//! them; a transport must not depend on the reference implementation to get
//! them.
//!
//! One [`ErrorKind`] names every failure below CETP, whoever saw it: the
//! kinds a device reports on the probe wire, and the conditions the host
//! side meets itself (the connection, adb, the run journal). Kinds are
//! compared as this enum, never as strings; a kind nobody here knows (a
//! newer or hostile device) is kept as [`ErrorKind::Other`] and reported as
//! it came.

use crate::bundle::Bundle;
use std::fmt;

/// The outcome of one `ContentResolver.call()`.
#[derive(Clone, Debug, PartialEq)]
pub enum CallAnswer {
    /// `call()` returned (possibly null). PendingIntent and descriptor values
    /// in the Bundle are handles valid on the connection that received them.
    Result(Option<Bundle>),
    /// The Provider threw (`provider_exception`).
    Threw {
        /// The Java exception class.
        class: String,
        /// The exception message.
        message: String,
    },
}

/// The result of reading a descriptor once (probe-wire `read_fd`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FdRead {
    /// The bytes read, at most the `max_bytes` asked for.
    pub bytes: Vec<u8>,
    /// False when reading stopped at `max_bytes` with data still pending.
    pub eof: bool,
    /// A reliable-pipe error the writer reported, if any.
    pub error: Option<String>,
    /// Whether the descriptor was open for writing (probe-wire extension);
    /// `None` when the device does not say.
    pub writable: Option<bool>,
}

/// The adb conditions the harness names. Never charged to the Provider.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AdbErrorKind {
    /// Nothing accepts connections at the adb server address.
    ServerUnreachable,
    /// The server does not know the device (or knows none).
    DeviceNotFound,
    /// No serial was given and the server has several devices.
    DeviceAmbiguous,
    /// The device is attached but `offline`, `unauthorized` or otherwise not
    /// in the `device` state.
    DeviceOffline,
    /// The server or the device dropped the connection mid-request.
    ConnectionDropped,
    /// An adb request did not finish in time (adb_client's calls can block
    /// forever on a stalled server).
    Timeout,
    /// The request was refused or the command on the device failed.
    CommandFailed,
}

impl AdbErrorKind {
    /// Every adb condition, for parsing names back and for exhaustive tests.
    pub const ALL: [AdbErrorKind; 7] = [
        AdbErrorKind::ServerUnreachable,
        AdbErrorKind::DeviceNotFound,
        AdbErrorKind::DeviceAmbiguous,
        AdbErrorKind::DeviceOffline,
        AdbErrorKind::ConnectionDropped,
        AdbErrorKind::Timeout,
        AdbErrorKind::CommandFailed,
    ];

    /// The stable name reports and journals carry (`adb_server_unreachable`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            AdbErrorKind::ServerUnreachable => "adb_server_unreachable",
            AdbErrorKind::DeviceNotFound => "adb_device_not_found",
            AdbErrorKind::DeviceAmbiguous => "adb_device_ambiguous",
            AdbErrorKind::DeviceOffline => "adb_device_offline",
            AdbErrorKind::ConnectionDropped => "adb_connection_dropped",
            AdbErrorKind::Timeout => "adb_timeout",
            AdbErrorKind::CommandFailed => "adb_command_failed",
        }
    }
}

impl fmt::Display for AdbErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a device op failed (never a CETP error). Its text (`as_str`) is the
/// stable kind name reports, journals and the probe wire carry.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    // The kinds of probe-wire v1 (`probe-wire.md`, "Errors").
    /// The device did not understand the frame (bad JSON, missing field, wrong type).
    BadRequest,
    /// The device does not know the op.
    UnknownOp,
    /// No provider is installed for the authority.
    UnknownAuthority,
    /// The Provider threw from `call()` (see [`CallAnswer::Threw`]).
    ProviderException,
    /// The Provider's process died during the call (`DeadObjectException`); charged to the Provider.
    ProviderDied,
    /// The answer overflowed the Binder buffer; charged to the Provider.
    TransactionTooLarge,
    /// The device stopped waiting after `timeout_ms`; the call may still complete on the Provider side.
    Timeout,
    /// A PendingIntent or descriptor handle the connection does not hold (never given, or released).
    UnknownHandle,
    /// The device cannot perform this op here.
    Unsupported,
    /// The device itself is set up wrongly for the call (probe-wire: the
    /// probe lacks a permission the Provider requires, a locked phone...);
    /// the message names the fix. Never the Provider's fault.
    DeviceError,
    // What the host side meets itself; a device never needs to send these.
    /// The probe-wire connection ended or broke.
    ConnectionClosed,
    /// A frame over the probe-wire limit; the connection is closed.
    FrameTooLarge,
    /// Something that is not a valid probe-wire answer.
    BadFrame,
    /// Setting up the byte stream failed, or an op the harness could not
    /// address (no such identity).
    Io,
    /// Trouble with the adb server or the device behind it.
    Adb(AdbErrorKind),
    /// The run journal could not be written or read back.
    Journal,
    /// A resumed run asked what the journal does not hold: nothing more is
    /// sent.
    JournalDiverged,
    /// An op the device's `hello` leaves out of `ops` (probe-wire extension
    /// `ops_unavailable`): the host answers it itself and the device is
    /// never asked; a case that needs it is not judged for the setup.
    OpUnavailable,
    /// A kind this build does not know, kept as the device sent it.
    Other(String),
}

impl ErrorKind {
    /// The kinds probe-wire v1 defines, in its order.
    pub const WIRE: [ErrorKind; 10] = [
        ErrorKind::BadRequest,
        ErrorKind::UnknownOp,
        ErrorKind::UnknownAuthority,
        ErrorKind::ProviderException,
        ErrorKind::ProviderDied,
        ErrorKind::TransactionTooLarge,
        ErrorKind::Timeout,
        ErrorKind::UnknownHandle,
        ErrorKind::Unsupported,
        ErrorKind::DeviceError,
    ];

    /// The host-side conditions other than adb's.
    pub const HOST: [ErrorKind; 7] = [
        ErrorKind::ConnectionClosed,
        ErrorKind::FrameTooLarge,
        ErrorKind::BadFrame,
        ErrorKind::Io,
        ErrorKind::Journal,
        ErrorKind::JournalDiverged,
        ErrorKind::OpUnavailable,
    ];

    /// The stable kind name: the probe-wire text, or the unknown name as received.
    pub fn as_str(&self) -> &str {
        match self {
            ErrorKind::BadRequest => "bad_request",
            ErrorKind::UnknownOp => "unknown_op",
            ErrorKind::UnknownAuthority => "unknown_authority",
            ErrorKind::ProviderException => "provider_exception",
            ErrorKind::ProviderDied => "provider_died",
            ErrorKind::TransactionTooLarge => "transaction_too_large",
            ErrorKind::Timeout => "timeout",
            ErrorKind::UnknownHandle => "unknown_handle",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::DeviceError => "device_error",
            ErrorKind::ConnectionClosed => "connection_closed",
            ErrorKind::FrameTooLarge => "frame_too_large",
            ErrorKind::BadFrame => "bad_frame",
            ErrorKind::Io => "io",
            ErrorKind::Adb(k) => k.as_str(),
            ErrorKind::Journal => "journal",
            ErrorKind::JournalDiverged => "journal_diverged",
            ErrorKind::OpUnavailable => "op_unavailable",
            ErrorKind::Other(s) => s,
        }
    }

    /// The kind a name stands for; any name parses, so that what a device
    /// sends is never lost. A name of a host-side condition parses as that
    /// condition (a journal records them by name), as it always compared
    /// equal to it when kinds were strings.
    pub fn parse(s: &str) -> ErrorKind {
        let adb = AdbErrorKind::ALL.into_iter().map(ErrorKind::Adb);
        ErrorKind::WIRE
            .into_iter()
            .chain(ErrorKind::HOST)
            .chain(adb)
            .find(|k| k.as_str() == s)
            .unwrap_or_else(|| ErrorKind::Other(s.to_string()))
    }

    /// Who is at fault when a device op fails so.
    pub fn fault(&self) -> Fault {
        match self {
            // The Provider misbehaved at the Binder level.
            ErrorKind::ProviderDied | ErrorKind::TransactionTooLarge => Fault::Provider,
            _ => Fault::Infra,
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who is at fault when a device op fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The harness, the transport, adb or the device broke: INFRA_ERROR,
    /// never charged to the Provider.
    Infra,
    /// The Provider misbehaved at the Binder level (it died, or its answer
    /// overflowed the Binder buffer): charged to the Provider.
    Provider,
}

/// A device op that did not produce an answer (never a CETP error).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceError {
    /// What kind of failure it was; decides who is at fault ([`ErrorKind::fault`]).
    pub kind: ErrorKind,
    /// Human-readable detail from whoever saw the failure.
    pub message: String,
}

impl DeviceError {
    /// A device error of `kind` with its detail.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        DeviceError {
            kind,
            message: message.into(),
        }
    }

    /// Who is at fault for it: the Provider or the infrastructure.
    pub fn fault(&self) -> Fault {
        self.kind.fault()
    }
}

impl fmt::Display for DeviceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

impl std::error::Error for DeviceError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_named_kind_parses_back_and_unknown_ones_are_kept() {
        let adb = AdbErrorKind::ALL.into_iter().map(ErrorKind::Adb);
        let named: Vec<ErrorKind> = ErrorKind::WIRE
            .into_iter()
            .chain(ErrorKind::HOST)
            .chain(adb)
            .collect();
        let mut names: Vec<&str> = named.iter().map(ErrorKind::as_str).collect();
        for k in &named {
            assert_eq!(&ErrorKind::parse(k.as_str()), k);
        }
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), named.len(), "two kinds share a name");
        let odd = ErrorKind::parse("Timeout ");
        assert_eq!(odd, ErrorKind::Other("Timeout ".into()));
        assert_eq!(odd.as_str(), "Timeout ");
    }

    #[test]
    fn only_binder_failures_are_the_providers() {
        assert_eq!(ErrorKind::ProviderDied.fault(), Fault::Provider);
        assert_eq!(ErrorKind::TransactionTooLarge.fault(), Fault::Provider);
        assert_eq!(ErrorKind::Timeout.fault(), Fault::Infra);
        assert_eq!(
            ErrorKind::Other("provider_died2".into()).fault(),
            Fault::Infra
        );
        let e = DeviceError::new(ErrorKind::Adb(AdbErrorKind::Timeout), "slow");
        assert_eq!(e.to_string(), "adb_timeout: slow");
    }
}
