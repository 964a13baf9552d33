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
    ConnectionClosed {
        /// What ended it: the device closing, a read or write failing, the host.
        reason: String,
    },
    /// No answer in time. `op` names what was waited for.
    #[error("{op}: no answer within {} ms", after.as_millis())]
    Timeout {
        /// The op or phase waited for.
        op: String,
        /// How long it was waited for.
        after: Duration,
    },
    /// The peer sent (or we were about to send) a frame over the limit; the
    /// connection is closed, as probe-wire requires.
    #[error("frame larger than {limit} bytes; connection closed")]
    FrameTooLarge {
        /// The frame-size limit in force, in bytes.
        limit: usize,
    },
    /// The peer sent something that is not a valid probe-wire answer.
    #[error("bad frame from the device: {reason}")]
    BadFrame {
        /// What is wrong with it.
        reason: String,
    },
    /// Setting up the byte stream failed (connect refused, DNS, ...).
    #[error("{context}: {message}")]
    Io {
        /// What was being set up (`connecting to 127.0.0.1:7000`, ...).
        context: String,
        /// The host's error, as text so that the error stays `Clone` and `Eq`.
        message: String,
    },
    /// The device answered with a probe-wire error.
    #[error("device error {}: {message}{}", kind.as_str(), class.as_deref().map(|c| format!(" ({c})")).unwrap_or_default())]
    Device {
        /// The probe-wire error kind (`provider_died`, `unknown_handle`, ...).
        kind: ErrorKind,
        /// The device's message, as sent.
        message: String,
        /// The Java class the Provider threw, for `provider_exception`.
        class: Option<String>,
    },
    /// Trouble with the adb server or the device behind it: not the probe's
    /// answer, the way to it.
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

/// Trouble with adb: the server, the device's state, or a command run on it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{kind}: {message}")]
pub struct AdbError {
    /// Which adb condition, for reports and the runner to key on.
    pub kind: AdbErrorKind,
    /// What adb said, or what the harness saw.
    pub message: String,
}

impl AdbError {
    /// An adb error of `kind`.
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
