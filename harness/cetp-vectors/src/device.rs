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
    /// Name and version of the probe (`NAME/VERSION`).
    pub probe: String,
    /// Name of the identity (`a`, `b`) the probe speaks for.
    pub identity_name: String,
    /// Linux uid of the probe's app: the caller the Provider sees (§7.1).
    pub uid: u32,
    /// Packages of that uid.
    pub packages: Vec<String>,
    /// SHA-256 of the probe's signing certificates.
    pub cert_sha256: Vec<String>,
    /// Android SDK level of the device.
    pub sdk_int: i64,
    /// Device model.
    pub model: String,
    /// Build fingerprint of the device.
    pub fingerprint: String,
    /// Device clock at `hello`, Unix epoch ms.
    pub now_ms: i64,
    /// Probe-wire ops the probe supports (extensions included).
    pub ops: Vec<String>,
}

/// A connection to a device as one caller identity: the probe-wire ops as
/// blocking calls. `Send + Sync` so cases may call concurrently.
pub trait Device: Send + Sync {
    /// Who the probe is and what it supports (probe-wire `hello`).
    fn hello(&self) -> Result<HelloInfo, DeviceError>;
    /// Device clock, Unix epoch ms.
    fn now_ms(&self) -> i64;
    /// Waits `ms`: in real time for a remote device, on its own clock for an
    /// in-process one.
    fn sleep_ms(&self, ms: u64);
    /// Lists the Providers the device declares, with their manifests (§2.1).
    fn discover(&self) -> Result<Vec<ServiceManifest>, DeviceError>;
    /// `ContentResolver.call` on `authority` with `method`, `arg` and `extras`,
    /// giving up after `timeout_ms`.
    fn call(
        &self,
        authority: &str,
        method: &str,
        arg: Option<&str>,
        extras: Option<&Bundle>,
        timeout_ms: u64,
    ) -> Result<CallAnswer, DeviceError>;
    /// Reads at most `max_bytes` of a file descriptor a result handed over (§4.5).
    fn read_fd(&self, handle: &str, max_bytes: u64) -> Result<FdRead, DeviceError>;
    /// Closes a file descriptor a result handed over.
    fn close_fd(&self, handle: &str) -> Result<(), DeviceError>;
    /// Launches a PendingIntent (§4.3) and plays the user `decision` on the
    /// confirmation UI located by `ui`.
    fn resolve(
        &self,
        handle: &str,
        decision: Decision,
        ui: Option<&serde_json::Value>,
        timeout_ms: u64,
    ) -> Result<ResolveOutcome, DeviceError>;
    /// Kills the Provider's process (for restart cases: memory lost, storage kept).
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
    /// Whether the Provider's background work (an operation's progress)
    /// runs in real time even where [`advance_clock`](Device::advance_clock)
    /// moves the time the Provider reads: the JVM device moves the clocks
    /// the Provider's code reads, not the sleeps of its threads. The
    /// interpreter then waits for an operation in real time and moves the
    /// clock only to let a lifetime or a window run out.
    fn work_runs_in_real_time(&self) -> bool {
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
    /// Connection as the first caller identity, `a`.
    pub a: Box<dyn Device>,
    /// Connection as a second caller identity, `b` (another app, §7.1), when available.
    pub b: Option<Box<dyn Device>>,
}

impl Target {
    /// The connection for identity `a` or `b`, if present.
    pub fn identity(&self, name: &str) -> Option<&dyn Device> {
        match name {
            "a" => Some(self.a.as_ref()),
            "b" => self.b.as_deref(),
            _ => None,
        }
    }
}
