//! What a Consumer needs from the device it runs on. The in-process
//! [`crate::device::LocalDevice`] implements it directly; transports implement
//! it over the probe wire.

use cetp_proto::provider::{Decision, ResolveOutcome, ServiceManifest};
use cetp_proto::Bundle;
use std::fmt;

/// The outcome of one `ContentResolver.call()`.
#[derive(Clone, Debug, PartialEq)]
pub enum CallAnswer {
    /// `call()` returned (possibly null). PendingIntent and descriptor values
    /// in the Bundle are handles valid on this port.
    Result(Option<Bundle>),
    /// The Provider threw (`provider_exception`).
    Threw { class: String, message: String },
}

/// A device-level failure (probe-wire error kinds other than
/// `provider_exception`). Never a CETP error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortError {
    /// `timeout`, `provider_died`, `transaction_too_large`, `unknown_handle`,
    /// `unknown_authority`, `unsupported`, `bad_request`, or `io`.
    pub kind: String,
    pub message: String,
}

impl PortError {
    pub fn new(kind: &str, message: impl Into<String>) -> Self {
        PortError {
            kind: kind.to_string(),
            message: message.into(),
        }
    }
}

impl fmt::Display for PortError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

impl std::error::Error for PortError {}

/// The result of reading a descriptor once (probe-wire `read_fd`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FdRead {
    pub bytes: Vec<u8>,
    /// False when reading stopped at `max_bytes` with data still pending.
    pub eof: bool,
    /// A reliable-pipe error the writer reported, if any.
    pub error: Option<String>,
    /// Whether the descriptor was open for writing (probe-wire extension);
    /// `None` when the device does not say.
    pub writable: Option<bool>,
}

pub trait ConsumerPort {
    /// Device clock, Unix epoch milliseconds (used for `deadline_at_ms`).
    fn now_ms(&mut self) -> i64;
    /// Waits (a real sleep on a device; a clock advance in-process).
    fn sleep_ms(&mut self, ms: u64);
    fn discover(&mut self) -> Result<Vec<ServiceManifest>, PortError>;
    fn call(
        &mut self,
        authority: &str,
        method: &str,
        arg: Option<&str>,
        extras: Option<&Bundle>,
        timeout_ms: u64,
    ) -> Result<CallAnswer, PortError>;
    fn read_fd(&mut self, handle: &str, max_bytes: u64) -> Result<FdRead, PortError>;
    fn close_fd(&mut self, handle: &str) -> Result<(), PortError>;
    fn resolve(&mut self, handle: &str, decision: Decision) -> Result<ResolveOutcome, PortError>;
}
