//! The runner's blocking [`Device`] over the async probe-wire client.

use crate::clock_move::{ClockMover, SETTLE_MS};
use cetp_proto::device::{CallAnswer, FdRead};
use cetp_proto::provider::{Decision, ResolveOutcome, ServiceManifest};
use cetp_proto::Bundle;
use cetp_transport::adb::{Adb, ProbeInstrumentation};
use cetp_transport::{ui_to_wire, ClientStats, ProbeClient, TransportError};
use cetp_vectors::device::{Device, DeviceError, HelloInfo};
use cetp_wire::{ErrorKind, HelloOk};
use std::any::Any;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::runtime::{Handle, Runtime};

/// A multi-thread runtime shared by a target's connections (and the
/// in-process device, when there is one). Dropping the last reference shuts
/// it down without waiting: an adb call that timed out may still be blocked
/// on its thread, and must not hold the harness.
pub(crate) struct SharedRuntime {
    rt: Option<Runtime>,
}

impl SharedRuntime {
    pub(crate) fn new() -> std::io::Result<Arc<SharedRuntime>> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("cetp-target")
            .enable_all()
            .build()?;
        Ok(Arc::new(SharedRuntime { rt: Some(rt) }))
    }

    fn rt(&self) -> &Runtime {
        // Only `Drop` takes the runtime out.
        self.rt.as_ref().expect("runtime present until drop")
    }

    pub(crate) fn handle(&self) -> &Handle {
        self.rt().handle()
    }

    /// Runs `f` to completion from a plain thread. From inside a runtime
    /// (where `block_on` would panic) it runs on a scoped helper thread.
    pub(crate) fn block_on<F>(&self, f: F) -> F::Output
    where
        F: Future + Send,
        F::Output: Send,
    {
        if Handle::try_current().is_ok() {
            std::thread::scope(|s| {
                s.spawn(|| self.rt().block_on(f))
                    .join()
                    .unwrap_or_else(|p| std::panic::resume_unwind(p))
            })
        } else {
            self.rt().block_on(f)
        }
    }
}

impl Drop for SharedRuntime {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

/// The adb side of a device reached through an adb server.
pub(crate) struct AdbSide {
    pub(crate) adb: Adb,
    pub(crate) forward_port: u16,
    last_logcat: Mutex<Option<(Instant, String)>>,
    /// The probe this target started for the identity, ended with it.
    instrumentation: Mutex<Option<ProbeInstrumentation>>,
    /// Shared by both identities of the device: one `resolve` at a time.
    /// From Android 12 each probe takes accessibility only for the length of
    /// a resolve, and a probe asked to resolve while the other holds it can
    /// lose its UiAutomation for the rest of the run (finding 3 of issue 27,
    /// read from the framework, not seen on a phone): the harness never
    /// makes them overlap.
    resolve_gate: Arc<Mutex<()>>,
    /// Sets the device's wall clock where the target allows it
    /// (`clock=move`); shared by both identities.
    mover: Option<Arc<ClockMover>>,
}

impl AdbSide {
    pub(crate) fn new(
        adb: Adb,
        forward_port: u16,
        resolve_gate: Arc<Mutex<()>>,
        mover: Option<Arc<ClockMover>>,
    ) -> Self {
        AdbSide {
            adb,
            forward_port,
            last_logcat: Mutex::new(None),
            instrumentation: Mutex::new(None),
            resolve_gate,
            mover,
        }
    }
}

/// How long ending a probe may hold the end of a run.
pub(crate) const PROBE_STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// What `hello` said the device can do: its `ops`, and why it leaves some
/// out (`ops_unavailable`, an extension the Android probe writes).
#[derive(Clone, Debug, Default)]
struct Abilities {
    ops: Vec<String>,
    unavailable: BTreeMap<String, String>,
    /// `advance_clock_moves: "reads"` (an extension the JVM device writes):
    /// a move changes the time the Provider reads, not its threads' pace.
    moves_reads_only: bool,
}

impl Abilities {
    fn of(hello: &HelloOk) -> Self {
        let unavailable = hello
            .extra
            .get("ops_unavailable")
            .and_then(cetp_wire::Json::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        Abilities {
            ops: hello.ops.clone(),
            unavailable,
            moves_reads_only: hello
                .extra
                .get("advance_clock_moves")
                .and_then(cetp_wire::Json::as_str)
                == Some("reads"),
        }
    }

    fn lacks(&self, op: &str) -> bool {
        !self.ops.iter().any(|o| o == op)
    }

    fn why(&self, op: &str) -> String {
        self.unavailable
            .get(op)
            .cloned()
            .unwrap_or_else(|| "no reason given".to_string())
    }
}

/// Device clock = device time at hello + host time elapsed since.
#[derive(Clone, Copy, Debug)]
struct ClockSync {
    device_ms: i64,
    at: Instant,
}

/// Error kinds after which the device log is worth attaching: the
/// connection, the probe or the Provider's process misbehaved.
fn wants_logcat(kind: &ErrorKind) -> bool {
    matches!(
        kind,
        ErrorKind::ConnectionClosed
            | ErrorKind::Timeout
            | ErrorKind::BadFrame
            | ErrorKind::FrameTooLarge
            | ErrorKind::Io
            | ErrorKind::ProviderDied
            | ErrorKind::TransactionTooLarge
    )
}

/// How long a fetched log is reused for later errors of one burst.
const LOGCAT_REUSE: Duration = Duration::from_secs(2);
const LOGCAT_TAIL_LINES: usize = 40;
const LOGCAT_TAIL_BYTES: usize = 4096;

/// One caller identity's connection to a device, as the runner's
/// [`Device`]. Methods block the calling thread; several threads may call
/// at once (requests are pipelined on the connection).
pub struct ProbeDevice {
    identity: String,
    client: ProbeClient,
    rt: Arc<SharedRuntime>,
    clock: Mutex<Option<ClockSync>>,
    abilities: Mutex<Option<Abilities>>,
    adb: Option<AdbSide>,
    /// The clock was moved by setting the wall clock over adb.
    wall_only: Mutex<bool>,
    /// Whatever must live as long as the connection (the in-process device).
    _keep: Option<Arc<dyn Any + Send + Sync>>,
}

impl std::fmt::Debug for ProbeDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProbeDevice")
            .field("identity", &self.identity)
            .field("client", &self.client)
            .field("adb", &self.adb.as_ref().map(|a| a.adb.config()))
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl ProbeDevice {
    pub(crate) fn new(
        identity: &str,
        client: ProbeClient,
        rt: Arc<SharedRuntime>,
        adb: Option<AdbSide>,
        keep: Option<Arc<dyn Any + Send + Sync>>,
    ) -> Self {
        ProbeDevice {
            identity: identity.to_string(),
            client,
            rt,
            clock: Mutex::new(None),
            abilities: Mutex::new(None),
            adb,
            wall_only: Mutex::new(false),
            _keep: keep,
        }
    }

    /// The identity this connection speaks for (`a`, `b`).
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// What this connection's client has seen (frames, events, bad and
    /// unmatched frames), for reports.
    pub fn stats(&self) -> ClientStats {
        self.client.stats()
    }

    /// The underlying client, for async callers on the target's runtime.
    pub fn client(&self) -> &ProbeClient {
        &self.client
    }

    /// Hands the probe started for this identity to the device, which ends
    /// it when it is dropped (the run's end).
    pub(crate) fn own_instrumentation(&self, probe: ProbeInstrumentation) {
        match &self.adb {
            Some(side) => *lock(&side.instrumentation) = Some(probe),
            None => {
                let _ = self.rt.block_on(async {
                    tokio::time::timeout(PROBE_STOP_TIMEOUT, probe.stop()).await
                });
            }
        }
    }

    /// The error for an op the device's `hello` left out of `ops`: the
    /// device cannot do it here, which is never the Provider's failure. Its
    /// kind is the host's own (the device was not
    /// asked), so that a suite can tell it from an `unsupported` answer to
    /// one request (`ErrorKind::OpUnavailable`).
    fn missing_op(&self, op: &str) -> Option<DeviceError> {
        let abilities = lock(&self.abilities).clone()?;
        abilities.lacks(op).then(|| {
            DeviceError::new(
                ErrorKind::OpUnavailable,
                format!(
                    "identity {}: the device cannot `{op}` here (its hello leaves it out of ops): {}",
                    self.identity,
                    abilities.why(op)
                ),
            )
        })
    }

    /// `hello` as the transport returns it, and the clock synchronised to it.
    pub fn hello_raw(&self) -> Result<HelloOk, TransportError> {
        let sent = Instant::now();
        let hello = self.rt.block_on(self.client.hello())?;
        // The device read its clock somewhere inside the round trip; the
        // midpoint halves the worst-case error.
        let rtt = sent.elapsed();
        *lock(&self.clock) = Some(ClockSync {
            device_ms: hello.now_ms,
            at: sent + rtt / 2,
        });
        *lock(&self.abilities) = Some(Abilities::of(&hello));
        Ok(hello)
    }

    fn run<T: Send>(
        &self,
        f: impl Future<Output = Result<T, TransportError>> + Send,
    ) -> Result<T, DeviceError> {
        self.rt.block_on(f).map_err(|e| self.device_error(e))
    }

    fn device_error(&self, e: TransportError) -> DeviceError {
        let mut message = e.to_string();
        if let Some(side) = &self.adb {
            if wants_logcat(&e.kind()) {
                message.push_str(&self.logcat_note(side));
            }
        }
        DeviceError::new(e.kind(), message)
    }

    /// The tail of `logcat -d`, fetched at most once per burst of errors.
    fn logcat_note(&self, side: &AdbSide) -> String {
        if let Some((at, text)) = lock(&side.last_logcat).as_ref() {
            if at.elapsed() < LOGCAT_REUSE {
                return text.clone();
            }
        }
        let note = match self.rt.block_on(side.adb.logcat()) {
            Ok(log) => {
                let text = String::from_utf8_lossy(&log);
                let lines: Vec<&str> = text.lines().collect();
                let mut tail = lines[lines.len().saturating_sub(LOGCAT_TAIL_LINES)..].join("\n");
                if tail.len() > LOGCAT_TAIL_BYTES {
                    let mut cut = tail.len() - LOGCAT_TAIL_BYTES;
                    while !tail.is_char_boundary(cut) {
                        cut += 1;
                    }
                    tail.drain(..cut);
                }
                format!("\n--- logcat -d (tail) ---\n{tail}")
            }
            Err(e) => format!("\n(logcat -d unavailable: {e})"),
        };
        *lock(&side.last_logcat) = Some((Instant::now(), note.clone()));
        note
    }
}

impl Drop for ProbeDevice {
    fn drop(&mut self) {
        if let Some(mover) = self.adb.as_ref().and_then(|s| s.mover.as_ref()) {
            // The clock is the user's: set back whatever the run moved
            // (the other identity's drop then finds nothing to do).
            let now = self.now_ms();
            let _ = self.rt.block_on(async {
                tokio::time::timeout(Duration::from_secs(10), mover.restore(now)).await
            });
        }
        self.client.close();
        if let Some(side) = &self.adb {
            // Best effort: a dead server must not hold the harness.
            let port = side.forward_port;
            let _ = self.rt.block_on(async {
                tokio::time::timeout(Duration::from_secs(2), side.adb.forward_remove(port)).await
            });
            if let Some(probe) = lock(&side.instrumentation).take() {
                let _ = self.rt.block_on(async {
                    tokio::time::timeout(PROBE_STOP_TIMEOUT, probe.stop()).await
                });
            }
        }
    }
}

impl Device for ProbeDevice {
    fn hello(&self) -> Result<HelloInfo, DeviceError> {
        let h = self.hello_raw().map_err(|e| self.device_error(e))?;
        Ok(HelloInfo {
            probe: h.probe,
            identity_name: h.identity.name,
            uid: h.identity.uid,
            packages: h.identity.packages,
            cert_sha256: h.identity.cert_sha256,
            sdk_int: i64::from(h.device.sdk_int),
            model: h.device.model,
            fingerprint: h.device.fingerprint,
            now_ms: h.now_ms,
            ops: h.ops,
        })
    }

    fn now_ms(&self) -> i64 {
        let sync = *lock(&self.clock);
        let sync = match sync {
            Some(s) => s,
            None => match self.hello_raw() {
                Ok(_) => match *lock(&self.clock) {
                    Some(s) => s,
                    None => return host_now_ms(),
                },
                // Without the device's word, the host clock is the best
                // estimate; the run's first hello already reported the error.
                Err(_) => return host_now_ms(),
            },
        };
        let elapsed = i64::try_from(sync.at.elapsed().as_millis()).unwrap_or(i64::MAX);
        sync.device_ms.saturating_add(elapsed)
    }

    fn sleep_ms(&self, ms: u64) {
        std::thread::sleep(Duration::from_millis(ms));
    }

    fn discover(&self) -> Result<Vec<ServiceManifest>, DeviceError> {
        self.run(self.client.discover())
    }

    fn call(
        &self,
        authority: &str,
        method: &str,
        arg: Option<&str>,
        extras: Option<&Bundle>,
        timeout_ms: u64,
    ) -> Result<CallAnswer, DeviceError> {
        self.run(self.client.call(authority, method, arg, extras, timeout_ms))
    }

    fn read_fd(&self, handle: &str, max_bytes: u64) -> Result<FdRead, DeviceError> {
        self.run(self.client.read_fd(handle, max_bytes))
    }

    fn close_fd(&self, handle: &str) -> Result<(), DeviceError> {
        self.run(self.client.close_fd(handle))
    }

    fn resolve(
        &self,
        handle: &str,
        decision: Decision,
        ui: Option<&serde_json::Value>,
        timeout_ms: u64,
    ) -> Result<ResolveOutcome, DeviceError> {
        if let Some(e) = self.missing_op("resolve") {
            return Err(e);
        }
        let ui = ui.and_then(ui_to_wire);
        let _turn = self.adb.as_ref().map(|side| lock(&side.resolve_gate));
        self.run(self.client.resolve(handle, decision, ui, timeout_ms))
    }

    fn restart_provider(&self, package: &str) -> Result<(), DeviceError> {
        if let Some(e) = self.missing_op("restart_provider") {
            // probe-wire: the host then restarts the process another way.
            return match &self.adb {
                Some(side) => self.run(async { Ok(side.adb.force_stop(package).await?) }),
                None => Err(e),
            };
        }
        self.run(async {
            match self.client.restart_provider(package).await {
                Err(TransportError::Device {
                    kind: ErrorKind::Unsupported,
                    message,
                    ..
                }) => match &self.adb {
                    // probe-wire: the host then restarts the process another way.
                    Some(side) => side.adb.force_stop(package).await.map_err(Into::into),
                    None => Err(TransportError::Device {
                        kind: ErrorKind::Unsupported,
                        message,
                        class: None,
                    }),
                },
                other => other,
            }
        })
    }

    fn advance_clock(&self, ms: u64) -> Result<i64, DeviceError> {
        match self.advance_by_probe(ms) {
            Err(e) if matches!(e.kind, ErrorKind::Unsupported | ErrorKind::UnknownOp) => {
                match self.adb.as_ref().and_then(|s| s.mover.as_ref()) {
                    Some(mover) => self.advance_by_adb(mover, ms),
                    None => Err(e),
                }
            }
            other => other,
        }
    }

    fn resync_clock(&self) -> Result<(), DeviceError> {
        self.hello_raw()
            .map(|_| ())
            .map_err(|e| self.device_error(e))
    }

    fn clock_moves_wall_only(&self) -> bool {
        // Set only when a move went through adb (`date`), not the probe.
        *lock(&self.wall_only)
    }

    fn work_runs_in_real_time(&self) -> bool {
        lock(&self.abilities)
            .as_ref()
            .is_some_and(|a| a.moves_reads_only)
    }

    fn restore_clock(&self) -> Result<(), DeviceError> {
        let Some(mover) = self.adb.as_ref().and_then(|s| s.mover.as_ref()) else {
            return Ok(());
        };
        let now = self.now_ms();
        self.rt
            .block_on(mover.restore(now))
            .map_err(|m| DeviceError::new(ErrorKind::Io, m))?;
        self.resync_clock()
    }
}

impl ProbeDevice {
    /// The probe's `advance_clock` (a simulated device's extension).
    fn advance_by_probe(&self, ms: u64) -> Result<i64, DeviceError> {
        let mut params = cetp_wire::Map::new();
        params.insert("ms".into(), cetp_wire::Json::from(ms));
        let reply =
            self.run(
                self.client
                    .request("advance_clock", params, 0, Duration::from_secs(10)),
            )?;
        let ok = reply
            .result
            .map_err(|e| DeviceError::new(e.kind.clone(), e.message.clone()))?;
        let now = ok
            .get("now_ms")
            .and_then(cetp_wire::Json::as_i64)
            .ok_or_else(|| {
                DeviceError::new(ErrorKind::BadFrame, "advance_clock answered without now_ms")
            })?;
        *lock(&self.clock) = Some(ClockSync {
            device_ms: now,
            at: Instant::now(),
        });
        Ok(now)
    }

    /// Sets the wall clock `ms` ahead as root over adb (`clock=move`), and
    /// reads it back through the probe: a refusal is `unsupported` (the
    /// case then waits in real time); a clock that did not move is an
    /// error of the device.
    fn advance_by_adb(&self, mover: &ClockMover, ms: u64) -> Result<i64, DeviceError> {
        let before = self.now_ms();
        self.rt
            .block_on(mover.advance(before, ms))
            .map_err(|m| DeviceError::new(ErrorKind::Unsupported, m))?;
        *lock(&self.wall_only) = true;
        self.resync_clock()?;
        let now = self.now_ms();
        let want = before.saturating_add(i64::try_from(ms).unwrap_or(i64::MAX));
        if now < want.saturating_sub(SETTLE_MS) {
            return Err(DeviceError::new(
                ErrorKind::Io,
                format!("clock=move: `date` was accepted, but the probe reads {now}, not {want} or later: the device's clock did not move"),
            ));
        }
        Ok(now)
    }
}

fn host_now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
