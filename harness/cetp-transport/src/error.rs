//! Transport errors, each with a stable `kind()` string that reports and the
//! runner key on.

use cetp_wire::ErrorKind;
use std::fmt;
use std::time::Duration;

/// Why an op over the probe wire did not produce an answer.
///
/// The first five variants are conditions of the connection itself; `Device`
/// is an error the device reported in a final frame; `Adb` is trouble with
/// the adb server or the device behind it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TransportError {
    /// The stream ended or broke; every pending and later request fails so.
    #[error("connection closed: {reason}")]
    ConnectionClosed { reason: String },
    /// No answer in time. `op` names what was waited for.
    #[error("{op}: no answer within {} ms", after.as_millis())]
    Timeout { op: String, after: Duration },
    /// The peer sent (or we were about to send) a frame over the limit; the
    /// connection is closed, as probe-wire requires.
    #[error("frame larger than {limit} bytes; connection closed")]
    FrameTooLarge { limit: usize },
    /// The peer sent something that is not a valid probe-wire answer.
    #[error("bad frame from the device: {reason}")]
    BadFrame { reason: String },
    /// Setting up the byte stream failed (connect refused, DNS, ...).
    #[error("{context}: {message}")]
    Io { context: String, message: String },
    /// The device answered with a probe-wire error.
    #[error("device error {}: {message}{}", kind.as_str(), class.as_deref().map(|c| format!(" ({c})")).unwrap_or_default())]
    Device {
        kind: ErrorKind,
        message: String,
        class: Option<String>,
    },
    #[error(transparent)]
    Adb(#[from] AdbError),
}

impl TransportError {
    /// Stable kind: `connection_closed`, `timeout`, `frame_too_large`,
    /// `bad_frame`, `io`, a probe-wire error kind (`provider_died`,
    /// `unknown_handle`, ...), or an `adb_*` kind.
    pub fn kind(&self) -> &str {
        match self {
            TransportError::ConnectionClosed { .. } => "connection_closed",
            TransportError::Timeout { .. } => "timeout",
            TransportError::FrameTooLarge { .. } => "frame_too_large",
            TransportError::BadFrame { .. } => "bad_frame",
            TransportError::Io { .. } => "io",
            TransportError::Device { kind, .. } => kind.as_str(),
            TransportError::Adb(e) => e.kind.as_str(),
        }
    }

    pub(crate) fn io(context: impl Into<String>, e: &std::io::Error) -> Self {
        TransportError::Io {
            context: context.into(),
            message: e.to_string(),
        }
    }

    pub(crate) fn timeout(op: impl Into<String>, after: Duration) -> Self {
        TransportError::Timeout {
            op: op.into(),
            after,
        }
    }

    pub(crate) fn bad_frame(reason: impl Into<String>) -> Self {
        TransportError::BadFrame {
            reason: reason.into(),
        }
    }

    /// Whether the connection is unusable after this error.
    pub fn is_connection_fatal(&self) -> bool {
        matches!(
            self,
            TransportError::ConnectionClosed { .. } | TransportError::FrameTooLarge { .. }
        )
    }
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

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{kind}: {message}")]
pub struct AdbError {
    pub kind: AdbErrorKind,
    pub message: String,
}

impl AdbError {
    pub fn new(kind: AdbErrorKind, message: impl Into<String>) -> Self {
        AdbError {
            kind,
            message: message.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_stable() {
        let cases = [
            (
                TransportError::ConnectionClosed { reason: "x".into() },
                "connection_closed",
            ),
            (
                TransportError::timeout("call", Duration::from_millis(5)),
                "timeout",
            ),
            (
                TransportError::FrameTooLarge { limit: 1 },
                "frame_too_large",
            ),
            (TransportError::bad_frame("x"), "bad_frame"),
            (
                TransportError::io("connect", &std::io::Error::other("refused")),
                "io",
            ),
            (
                TransportError::Device {
                    kind: ErrorKind::ProviderDied,
                    message: "dead".into(),
                    class: None,
                },
                "provider_died",
            ),
            (
                TransportError::Device {
                    kind: ErrorKind::Other("vendor_kind".into()),
                    message: "m".into(),
                    class: None,
                },
                "vendor_kind",
            ),
            (
                AdbError::new(AdbErrorKind::DeviceOffline, "offline").into(),
                "adb_device_offline",
            ),
        ];
        for (e, kind) in cases {
            assert_eq!(e.kind(), kind, "{e}");
        }
    }

    #[test]
    fn device_error_names_the_class() {
        let e = TransportError::Device {
            kind: ErrorKind::ProviderException,
            message: "no".into(),
            class: Some("java.lang.SecurityException".into()),
        };
        assert_eq!(
            e.to_string(),
            "device error provider_exception: no (java.lang.SecurityException)"
        );
    }
}
