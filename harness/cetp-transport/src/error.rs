//! Transport errors, each with a stable `kind()` string that reports and the
//! runner key on.

use cetp_wire::ErrorKind;
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
    pub fn kind(&self) -> ErrorKind {
        match self {
            TransportError::ConnectionClosed { .. } => ErrorKind::ConnectionClosed,
            TransportError::Timeout { .. } => ErrorKind::Timeout,
            TransportError::FrameTooLarge { .. } => ErrorKind::FrameTooLarge,
            TransportError::BadFrame { .. } => ErrorKind::BadFrame,
            TransportError::Io { .. } => ErrorKind::Io,
            TransportError::Device { kind, .. } => kind.clone(),
            TransportError::Adb(e) => ErrorKind::Adb(e.kind),
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

/// The adb conditions the harness names: the core's, so that a device
/// error carries them as one [`ErrorKind`].
pub use cetp_proto::device::AdbErrorKind;

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
            assert_eq!(e.kind().as_str(), kind, "{e}");
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
