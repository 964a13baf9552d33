//! What a Consumer needs from the device it runs on. The in-process
//! [`crate::device::LocalDevice`] implements it directly; transports implement
//! it over the probe wire. The answers and errors it speaks are the core's
//! ([`cetp_proto::device`]), shared with the runner's devices.

use cetp_proto::device::{CallAnswer, DeviceError, FdRead};
use cetp_proto::provider::{Decision, ResolveOutcome, ServiceManifest};
use cetp_proto::Bundle;

/// What the reference Consumer needs from a device: the clock, discovery, `call()`, descriptors and PendingIntents. Implemented in-process and over the probe wire.
pub trait ConsumerPort {
    /// Device clock, Unix epoch milliseconds (used for `deadline_at_ms`).
    fn now_ms(&mut self) -> i64;
    /// Waits (a real sleep on a device; a clock advance in-process).
    fn sleep_ms(&mut self, ms: u64);
    /// The services that answer the CETP discovery action (§2.1).
    fn discover(&mut self) -> Result<Vec<ServiceManifest>, DeviceError>;
    /// One `ContentResolver.call()` to `authority`; the port gives up after `timeout_ms`.
    fn call(
        &mut self,
        authority: &str,
        method: &str,
        arg: Option<&str>,
        extras: Option<&Bundle>,
        timeout_ms: u64,
    ) -> Result<CallAnswer, DeviceError>;
    /// Reads at most `max_bytes` from a result descriptor this connection holds (§4.5).
    fn read_fd(&mut self, handle: &str, max_bytes: u64) -> Result<FdRead, DeviceError>;
    /// Closes a result descriptor; a Consumer must close what it was given (§4.5).
    fn close_fd(&mut self, handle: &str) -> Result<(), DeviceError>;
    /// Launches a `resolution` PendingIntent and makes the user's `decision` in the UI it opens (§4.3).
    fn resolve(&mut self, handle: &str, decision: Decision) -> Result<ResolveOutcome, DeviceError>;
}
