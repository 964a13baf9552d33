//! The runner's view of a target: the probe-wire ops as blocking calls.
//!
//! Implemented by the in-process device (`cetp_reference::device`) and by the
//! probe-wire client over any transport. Methods take `&self` so the runner
//! can issue calls from several threads at once (single-executor tests).

use cetp_proto::device::{CallAnswer, FdRead};
pub use cetp_proto::device::{DeviceError, ErrorKind, Fault};
use cetp_proto::provider::{Decision, ResolveOutcome, ServiceManifest};
use cetp_proto::Bundle;

/// What `hello` told about the device and the caller identity it speaks for.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HelloInfo {
    pub probe: String,
    pub identity_name: String,
    pub uid: u32,
    pub packages: Vec<String>,
    pub cert_sha256: Vec<String>,
    pub sdk_int: i64,
    pub model: String,
    pub fingerprint: String,
    pub now_ms: i64,
    pub ops: Vec<String>,
}

pub trait Device: Send + Sync {
    fn hello(&self) -> Result<HelloInfo, DeviceError>;
    /// Device clock, Unix epoch ms.
    fn now_ms(&self) -> i64;
    fn sleep_ms(&self, ms: u64);
    fn discover(&self) -> Result<Vec<ServiceManifest>, DeviceError>;
    fn call(
        &self,
        authority: &str,
        method: &str,
        arg: Option<&str>,
        extras: Option<&Bundle>,
        timeout_ms: u64,
    ) -> Result<CallAnswer, DeviceError>;
    fn read_fd(&self, handle: &str, max_bytes: u64) -> Result<FdRead, DeviceError>;
    fn close_fd(&self, handle: &str) -> Result<(), DeviceError>;
    fn resolve(
        &self,
        handle: &str,
        decision: Decision,
        ui: Option<&serde_json::Value>,
        timeout_ms: u64,
    ) -> Result<ResolveOutcome, DeviceError>;
    fn restart_provider(&self, package: &str) -> Result<(), DeviceError>;
    /// Lets `ms` of device time pass at once (the simulated device's
    /// `advance_clock` extension); returns the new device time. Devices
    /// without it answer `unsupported`, and cases needing it are then not
    /// applicable.
    fn advance_clock(&self, _ms: u64) -> Result<i64, DeviceError> {
        Err(DeviceError::new(
            ErrorKind::Unsupported,
            "this device cannot move its clock",
        ))
    }
    /// Re-reads the device clock (after another connection moved it).
    fn resync_clock(&self) -> Result<(), DeviceError> {
        Ok(())
    }
    /// Whether [`advance_clock`](Device::advance_clock) sets only the wall
    /// clock (a phone's `date` as root), leaving the elapsed clock
    /// (`elapsedRealtime`) a Provider may time its lifetimes by: what a
    /// Provider does after such a move proves nothing against it.
    fn clock_moves_wall_only(&self) -> bool {
        false
    }
    /// Sets a wall clock this device moved back to the time it would read
    /// had it never been moved (nothing where it never was).
    fn restore_clock(&self) -> Result<(), DeviceError> {
        Ok(())
    }
}

/// The target as the runner sees it: one device connection per identity.
pub struct Target {
    /// A label for reports (`sim`, `tcp:127.0.0.1:7000`, `adb:SERIAL`).
    pub label: String,
    pub a: Box<dyn Device>,
    pub b: Option<Box<dyn Device>>,
}

impl Target {
    pub fn identity(&self, name: &str) -> Option<&dyn Device> {
        match name {
            "a" => Some(self.a.as_ref()),
            "b" => self.b.as_deref(),
            _ => None,
        }
    }
}
