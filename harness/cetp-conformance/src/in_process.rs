//! An in-process target: the runner's [`Device`] directly over
//! `cetp_reference`'s [`LocalDevice`], without the probe wire. The fastest
//! path (fuzzing, the suite's own unit tests); `cetp run --target sim` goes
//! through the wire codec instead.

use cetp_proto::device::{CallAnswer, FdRead};
use cetp_proto::provider::{Decision, ResolveOutcome, ServiceManifest};
use cetp_proto::Bundle;
use cetp_reference::app::ProviderApp;
use cetp_reference::device::{DeviceClock, DeviceConnection, LocalDevice, IDENTITY_A, IDENTITY_B};
use cetp_vectors::device::{Device, DeviceError, HelloInfo, Target};
use std::sync::Arc;

/// A [`Device`] answering from an in-process reference Provider app, as
/// one caller identity.
pub struct InProcessDevice {
    conn: DeviceConnection,
}

impl Device for InProcessDevice {
    fn hello(&self) -> Result<HelloInfo, DeviceError> {
        let id = self.conn.identity();
        Ok(HelloInfo {
            probe: "cetp-local/1".into(),
            identity_name: id.name.clone(),
            uid: id.caller.uid,
            packages: id.caller.packages.clone(),
            cert_sha256: id.caller.cert_sha256.clone(),
            sdk_int: 34,
            model: "in-process".into(),
            fingerprint: "cetp/local".into(),
            now_ms: self.conn.device().now_ms(),
            ops: [
                "hello",
                "discover",
                "call",
                "read_fd",
                "close_fd",
                "resolve",
                "restart_provider",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
        })
    }

    fn now_ms(&self) -> i64 {
        self.conn.device().now_ms()
    }

    fn sleep_ms(&self, ms: u64) {
        self.conn.device().clock().sleep(ms);
    }

    fn discover(&self) -> Result<Vec<ServiceManifest>, DeviceError> {
        Ok(self.conn.device().discover())
    }

    fn call(
        &self,
        authority: &str,
        method: &str,
        arg: Option<&str>,
        extras: Option<&Bundle>,
        timeout_ms: u64,
    ) -> Result<CallAnswer, DeviceError> {
        self.conn.call(authority, method, arg, extras, timeout_ms)
    }

    fn read_fd(&self, handle: &str, max_bytes: u64) -> Result<FdRead, DeviceError> {
        self.conn.read_fd(handle, max_bytes)
    }

    fn close_fd(&self, handle: &str) -> Result<(), DeviceError> {
        self.conn.close_fd(handle)
    }

    fn resolve(
        &self,
        handle: &str,
        decision: Decision,
        _ui: Option<&serde_json::Value>,
        _timeout_ms: u64,
    ) -> Result<ResolveOutcome, DeviceError> {
        self.conn.resolve(handle, decision)
    }

    fn restart_provider(&self, package: &str) -> Result<(), DeviceError> {
        self.conn.device().restart_provider(package)
    }

    fn advance_clock(&self, ms: u64) -> Result<i64, DeviceError> {
        self.conn.device().clock().advance(ms);
        Ok(self.conn.device().now_ms())
    }
}

/// A target hosting `app` in-process, with both standard identities.
pub fn in_process_target(app: Arc<dyn ProviderApp>, clock: DeviceClock) -> Target {
    let device = LocalDevice::new(app, clock);
    Target {
        label: "local".into(),
        a: Box::new(InProcessDevice {
            conn: device.connect(IDENTITY_A.identity()),
        }),
        b: Some(Box::new(InProcessDevice {
            conn: device.connect(IDENTITY_B.identity()),
        })),
    }
}
