//! An in-process device: Provider apps hosted in this process, reached through
//! [`ConsumerPort`] as if over the probe wire (`probe-wire.md`).
//!
//! [`LocalDevice`] is what is shared by everyone talking to the device: the
//! installed apps, the device clock and the caller identities it offers.
//! [`DeviceConnection`] is one connection, which speaks for one caller
//! identity and owns the `pi-N` / `fd-N` handles of the objects Providers
//! returned to it (probe wire: "Handles belong to the connection"). The
//! simulated device reuses both for its per-connection logic, so every method
//! of a connection takes `&self` and may run concurrently with the others, as
//! outstanding `call` requests must.
//!
//! Calls are synchronous: an in-process device cannot interrupt a Provider.
//! `timeout_ms` is honoured after the fact: when a Provider took longer (real
//! time) than the caller was willing to wait, its answer is dropped and the
//! call fails with `timeout`, which is what a device that stopped waiting
//! reports while the Provider finishes the call anyway.

use crate::app::ProviderApp;
use crate::port::ConsumerPort;
use cetp_proto::device::{CallAnswer, DeviceError, ErrorKind, FdRead};
use cetp_proto::provider::{
    Attachment, CallerIdentity, Decision, FdSource, IntentTarget, ProviderCall, Reply,
    ResolveOutcome, ServiceManifest,
};
use cetp_proto::{Bundle, FdValue, PendingIntentValue, Value};
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

// ---------------------------------------------------------------- identities

/// A caller identity in a form that can be a constant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StandardIdentity {
    /// The probe wire's `identity.name`.
    pub name: &'static str,
    /// The caller's Linux UID, which the Provider binds sessions and grants to (§7.1).
    pub uid: u32,
    /// Every package sharing that UID.
    pub packages: &'static [&'static str],
    /// Lowercase hex SHA-256 of the signing certificate.
    pub cert_sha256: &'static str,
}

impl StandardIdentity {
    /// The identity as a Provider sees it on a call.
    pub fn caller(&self) -> CallerIdentity {
        CallerIdentity {
            uid: self.uid,
            packages: self.packages.iter().map(|p| p.to_string()).collect(),
            cert_sha256: vec![self.cert_sha256.to_string()],
        }
    }

    /// The identity as a device offers it, with its probe-wire name.
    pub fn identity(&self) -> DeviceIdentity {
        DeviceIdentity {
            name: self.name.to_string(),
            caller: self.caller(),
        }
    }
}

/// The first probe app (`localabstract:cetp-probe`).
pub const IDENTITY_A: StandardIdentity = StandardIdentity {
    name: "a",
    uid: 10123,
    packages: &["com.clawseed.probe"],
    cert_sha256: "48dda1a77decc9c43906dd2f501fa55dd463a03ce2aed9382d57d611f18d228a",
};

/// The second probe app (`localabstract:cetp-probe-b`): another UID, package
/// and certificate, for the cross-caller cases (tokens, operation ids and
/// dedupe keys are bound to the caller).
pub const IDENTITY_B: StandardIdentity = StandardIdentity {
    name: "b",
    uid: 10200,
    packages: &["com.clawseed.probe.b"],
    cert_sha256: "8db24a1bc6d1c76ea16a8b09e5f5021432c5f5270487a53fa0512d1ac2771ef3",
};

/// A caller identity a device offers, with the name the probe wire's `hello`
/// reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceIdentity {
    /// The probe wire's `identity.name` (`a`, `b`, ...).
    pub name: String,
    /// Who the Provider sees calling on a connection of this identity.
    pub caller: CallerIdentity,
}

// ---------------------------------------------------------------- clock

#[derive(Debug)]
enum ClockMode {
    /// Time moves only when told to: deterministic tests.
    Manual(AtomicI64),
    /// Wall-clock time shifted by an offset (`--clock-skew`, plus every
    /// [`DeviceClock::advance`]), so the harness can check that deadlines are
    /// computed in device time and let a simulated day pass in no time.
    System { skew_ms: AtomicI64 },
}

/// The device clock, Unix epoch milliseconds. Cloning shares the clock.
///
/// It reads two ways, as an Android device's clocks do: [`now_ms`] is the
/// wall clock, which someone with root can set (`date`); [`elapsed_ms`]
/// moves only as time passes (or [`advance`] lets it pass), as
/// `elapsedRealtime` does. Until the wall clock is set they agree.
///
/// [`now_ms`]: DeviceClock::now_ms
/// [`elapsed_ms`]: DeviceClock::elapsed_ms
/// [`advance`]: DeviceClock::advance
#[derive(Clone, Debug)]
pub struct DeviceClock {
    mode: Arc<ClockMode>,
    /// How far the wall clock was set away from the elapsed clock.
    wall_offset_ms: Arc<AtomicI64>,
}

impl DeviceClock {
    /// A clock that starts at `start_ms` and moves only by [`advance`] and
    /// [`sleep`].
    ///
    /// [`advance`]: DeviceClock::advance
    /// [`sleep`]: DeviceClock::sleep
    pub fn manual(start_ms: i64) -> Self {
        DeviceClock {
            mode: Arc::new(ClockMode::Manual(AtomicI64::new(start_ms))),
            wall_offset_ms: Arc::default(),
        }
    }

    /// Real time plus `skew_ms` (negative: the device is behind the host).
    pub fn system(skew_ms: i64) -> Self {
        DeviceClock {
            mode: Arc::new(ClockMode::System {
                skew_ms: AtomicI64::new(skew_ms),
            }),
            wall_offset_ms: Arc::default(),
        }
    }

    /// Whether the clock only moves when told to (tests), rather than with real time.
    pub fn is_manual(&self) -> bool {
        matches!(*self.mode, ClockMode::Manual(_))
    }

    /// The wall clock.
    pub fn now_ms(&self) -> i64 {
        self.elapsed_ms()
            .saturating_add(self.wall_offset_ms.load(Ordering::SeqCst))
    }

    /// Sets the wall clock to `ms` (`date` as root); the elapsed clock
    /// does not move.
    pub fn set_wall_ms(&self, ms: i64) {
        self.wall_offset_ms
            .store(ms.saturating_sub(self.elapsed_ms()), Ordering::SeqCst);
    }

    /// The clock that only time passing moves, on the wall clock's scale
    /// (epoch milliseconds as if the wall clock had never been set).
    pub fn elapsed_ms(&self) -> i64 {
        match &*self.mode {
            ClockMode::Manual(t) => t.load(Ordering::SeqCst),
            ClockMode::System { skew_ms } => {
                let real = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
                    .unwrap_or(0);
                real.saturating_add(skew_ms.load(Ordering::SeqCst))
            }
        }
    }

    /// Moves the clock forward: a manual clock by itself, a system clock by
    /// growing its skew (the simulated device's `advance_clock` op, which lets
    /// retention and expiry be tested without waiting a day).
    pub fn advance(&self, ms: u64) {
        let step = i64::try_from(ms).unwrap_or(i64::MAX);
        let t = match &*self.mode {
            ClockMode::Manual(t) => t,
            ClockMode::System { skew_ms } => skew_ms,
        };
        // fetch_update with a closure that always returns Some never fails.
        let _ = t.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| {
            Some(v.saturating_add(step))
        });
    }

    /// Lets `ms` pass: advances a manual clock, really sleeps on a system one.
    pub fn sleep(&self, ms: u64) {
        match &*self.mode {
            ClockMode::Manual(_) => self.advance(ms),
            ClockMode::System { .. } => std::thread::sleep(Duration::from_millis(ms)),
        }
    }
}

// ---------------------------------------------------------------- device

/// Limits and identities of a device.
#[derive(Clone, Debug)]
pub struct DeviceConfig {
    /// Ceiling on one `read_fd`, whatever `max_bytes` the caller asks for:
    /// the device never buffers more than this for one read.
    pub max_read_bytes: u64,
    /// The identities [`LocalDevice::connect_as`] can speak for.
    pub identities: Vec<DeviceIdentity>,
    /// The apps time lifetimes by the elapsed clock (`elapsedRealtime`),
    /// not the wall clock: setting the wall clock does not age their
    /// sessions or tokens. Android leaves the choice to the app.
    pub apps_use_elapsed_clock: bool,
}

impl Default for DeviceConfig {
    fn default() -> Self {
        DeviceConfig {
            max_read_bytes: 64 * 1024 * 1024,
            identities: vec![IDENTITY_A.identity(), IDENTITY_B.identity()],
            apps_use_elapsed_clock: false,
        }
    }
}

struct Inner {
    apps: RwLock<Vec<Arc<dyn ProviderApp>>>,
    clock: DeviceClock,
    config: DeviceConfig,
}

/// An in-process device. Cloning shares the device.
#[derive(Clone)]
pub struct LocalDevice {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for LocalDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalDevice")
            .field("apps", &self.apps().len())
            .field("clock", &self.inner.clock)
            .field("config", &self.inner.config)
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic elsewhere must not turn every later device call into a panic;
    // the tables stay consistent because no method panics halfway through.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl LocalDevice {
    /// A device with one app installed and the default configuration.
    pub fn new(app: Arc<dyn ProviderApp>, clock: DeviceClock) -> Self {
        LocalDevice::with_config(vec![app], clock, DeviceConfig::default())
    }

    /// A device with these apps installed and this configuration.
    pub fn with_config(
        apps: Vec<Arc<dyn ProviderApp>>,
        clock: DeviceClock,
        config: DeviceConfig,
    ) -> Self {
        LocalDevice {
            inner: Arc::new(Inner {
                apps: RwLock::new(apps),
                clock,
                config,
            }),
        }
    }

    /// Installs another app. Existing connections see it at once.
    pub fn install(&self, app: Arc<dyn ProviderApp>) {
        self.inner
            .apps
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push(app);
    }

    /// The installed apps, in installation order.
    pub fn apps(&self) -> Vec<Arc<dyn ProviderApp>> {
        self.inner
            .apps
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The device clock, shared with whoever holds a clone.
    pub fn clock(&self) -> &DeviceClock {
        &self.inner.clock
    }

    /// Device wall-clock time, Unix epoch milliseconds (what `deadline_at_ms` is computed from).
    pub fn now_ms(&self) -> i64 {
        self.inner.clock.now_ms()
    }

    /// The time an app is given with each call: the wall clock, or the
    /// elapsed clock where the apps time by it.
    pub fn app_now_ms(&self) -> i64 {
        if self.inner.config.apps_use_elapsed_clock {
            self.inner.clock.elapsed_ms()
        } else {
            self.inner.clock.now_ms()
        }
    }

    /// The configuration the device was made with.
    pub fn config(&self) -> &DeviceConfig {
        &self.inner.config
    }

    /// The caller identities a connection may speak for.
    pub fn identities(&self) -> &[DeviceIdentity] {
        &self.inner.config.identities
    }

    /// Every service of every installed app (probe wire `discover`).
    pub fn discover(&self) -> Vec<ServiceManifest> {
        self.apps().iter().flat_map(|a| a.manifests()).collect()
    }

    /// The app whose ContentProvider answers on `authority`. Android lets one
    /// package own an authority; with several claimants the first installed
    /// wins, as the first to register would.
    fn app_for_authority(&self, authority: &str) -> Option<Arc<dyn ProviderApp>> {
        self.apps().into_iter().find(|a| a.authority() == authority)
    }

    /// Kills the process of `package` as `am force-stop` does (probe wire
    /// `restart_provider`). Handles callers hold survive: PendingIntents live
    /// in the system, and a received descriptor stays open in the receiver.
    pub fn restart_provider(&self, package: &str) -> Result<(), DeviceError> {
        let apps: Vec<_> = self
            .apps()
            .into_iter()
            .filter(|a| {
                a.manifests().iter().any(|m| {
                    m.package == package || m.authority_package.as_deref() == Some(package)
                })
            })
            .collect();
        if apps.is_empty() {
            return Err(DeviceError::new(
                ErrorKind::BadRequest,
                format!("no installed app has package {package:?}"),
            ));
        }
        for app in apps {
            if catch_unwind(AssertUnwindSafe(|| app.restart())).is_err() {
                return Err(DeviceError::new(
                    ErrorKind::ProviderDied,
                    format!("the app of {package:?} panicked while restarting"),
                ));
            }
        }
        Ok(())
    }

    /// A new connection speaking for `identity`, with its own empty handle
    /// table.
    pub fn connect(&self, identity: DeviceIdentity) -> DeviceConnection {
        DeviceConnection {
            device: self.clone(),
            identity,
            handles: Mutex::new(Handles::default()),
        }
    }

    /// A new connection for one of the configured identities, by name.
    pub fn connect_as(&self, name: &str) -> Result<DeviceConnection, DeviceError> {
        let identity = self
            .identities()
            .iter()
            .find(|i| i.name == name)
            .cloned()
            .ok_or_else(|| {
                DeviceError::new(
                    ErrorKind::Unsupported,
                    format!("this device offers no identity named {name:?}"),
                )
            })?;
        Ok(self.connect(identity))
    }
}

// ---------------------------------------------------------------- connection

struct HeldIntent {
    target: IntentTarget,
    /// The app whose Reply carried the intent: launching it runs that app's
    /// confirmation activity, even when the intent claims another creator.
    app: Arc<dyn ProviderApp>,
}

#[derive(Default)]
struct Handles {
    next_pi: u64,
    next_fd: u64,
    intents: HashMap<String, HeldIntent>,
    fds: HashMap<String, FdSource>,
    /// Descriptors the Provider opened for writing too.
    writable: std::collections::HashSet<String>,
}

impl Handles {
    fn add_intent(&mut self, held: HeldIntent) -> String {
        self.next_pi += 1;
        let h = format!("pi-{}", self.next_pi);
        self.intents.insert(h.clone(), held);
        h
    }

    fn add_fd(&mut self, src: FdSource, writable: bool) -> String {
        self.next_fd += 1;
        let h = format!("fd-{}", self.next_fd);
        self.fds.insert(h.clone(), src);
        if writable {
            self.writable.insert(h.clone());
        }
        h
    }
}

/// One connection to a [`LocalDevice`], speaking for one caller identity.
pub struct DeviceConnection {
    device: LocalDevice,
    identity: DeviceIdentity,
    handles: Mutex<Handles>,
}

impl std::fmt::Debug for DeviceConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let h = lock(&self.handles);
        f.debug_struct("DeviceConnection")
            .field("identity", &self.identity)
            .field("intents", &h.intents.len())
            .field("fds", &h.fds.len())
            .finish()
    }
}

fn unknown_handle(handle: &str) -> DeviceError {
    DeviceError::new(
        ErrorKind::UnknownHandle,
        format!("this connection holds no handle {handle:?}"),
    )
}

impl DeviceConnection {
    /// The caller identity this connection speaks for.
    pub fn identity(&self) -> &DeviceIdentity {
        &self.identity
    }

    /// The device the connection belongs to.
    pub fn device(&self) -> &LocalDevice {
        &self.device
    }

    /// Handles this connection currently holds, sorted (for tests and the
    /// simulated device's diagnostics).
    pub fn held_handles(&self) -> Vec<String> {
        let h = lock(&self.handles);
        let mut out: Vec<String> = h.intents.keys().chain(h.fds.keys()).cloned().collect();
        out.sort();
        out
    }

    /// `ContentResolver.call()` from this connection's identity.
    pub fn call(
        &self,
        authority: &str,
        method: &str,
        arg: Option<&str>,
        extras: Option<&Bundle>,
        timeout_ms: u64,
    ) -> Result<CallAnswer, DeviceError> {
        let app = self.device.app_for_authority(authority).ok_or_else(|| {
            DeviceError::new(
                ErrorKind::UnknownAuthority,
                format!("no provider is installed for authority {authority:?}"),
            )
        })?;
        let call = ProviderCall {
            method: method.to_string(),
            arg: arg.map(str::to_string),
            extras: extras.cloned(),
        };
        let now_ms = self.device.app_now_ms();
        let started = Instant::now();
        let reply = match catch_unwind(AssertUnwindSafe(|| {
            app.call(&self.identity.caller, now_ms, &call)
        })) {
            Ok(reply) => reply,
            Err(_) => {
                // Android restarts a crashed Provider process on the next
                // call; the caller saw a DeadObjectException.
                let _ = catch_unwind(AssertUnwindSafe(|| app.restart()));
                return Err(DeviceError::new(
                    ErrorKind::ProviderDied,
                    format!("the provider of {authority:?} crashed during {method:?}"),
                ));
            }
        };
        if timeout_ms > 0 && started.elapsed() > Duration::from_millis(timeout_ms) {
            return Err(DeviceError::new(
                ErrorKind::Timeout,
                format!(
                    "the provider took longer than {timeout_ms} ms; the call completed on the provider side"
                ),
            ));
        }
        match reply {
            Reply::Threw { class, message } => Ok(CallAnswer::Threw { class, message }),
            Reply::Result {
                bundle: None,
                attachments: _,
            } => Ok(CallAnswer::Result(None)),
            Reply::Result {
                bundle: Some(mut bundle),
                attachments,
            } => {
                let attached: HashMap<String, Attachment> = attachments.into_iter().collect();
                let mut memo = HashMap::new();
                let mut handles = lock(&self.handles);
                rewrite_handles(&mut bundle, &attached, &mut memo, &mut handles, &app);
                Ok(CallAnswer::Result(Some(bundle)))
            }
        }
    }

    /// Reads a descriptor once, to EOF or to `max_bytes` (capped at the
    /// device's `max_read_bytes`), then closes it. Never allocates more than
    /// that cap, whatever the descriptor claims or holds.
    pub fn read_fd(&self, handle: &str, max_bytes: u64) -> Result<FdRead, DeviceError> {
        let (src, writable) = {
            let mut h = lock(&self.handles);
            let writable = h.writable.remove(handle);
            let src = h.fds.remove(handle).ok_or_else(|| unknown_handle(handle))?;
            (src, writable)
        };
        Ok(FdRead {
            // The local device knows the mode the Provider opened it in.
            writable: Some(writable),
            ..read_source(&src, max_bytes.min(self.device.config().max_read_bytes))
        })
    }

    /// Closes a descriptor unread.
    pub fn close_fd(&self, handle: &str) -> Result<(), DeviceError> {
        let mut h = lock(&self.handles);
        h.writable.remove(handle);
        h.fds
            .remove(handle)
            .map(|_| ())
            .ok_or_else(|| unknown_handle(handle))
    }

    /// Launches a PendingIntent as this connection's app and plays `decision`
    /// in the confirmation UI. Uses the handle up.
    pub fn resolve(&self, handle: &str, decision: Decision) -> Result<ResolveOutcome, DeviceError> {
        let held = lock(&self.handles)
            .intents
            .remove(handle)
            .ok_or_else(|| unknown_handle(handle))?;
        let now_ms = self.device.app_now_ms();
        catch_unwind(AssertUnwindSafe(|| {
            crate::app::launch_intent(
                held.app.as_ref(),
                &self.identity.caller,
                &held.target,
                decision,
                now_ms,
            )
        }))
        .map_err(|_| {
            let _ = catch_unwind(AssertUnwindSafe(|| held.app.restart()));
            DeviceError::new(
                ErrorKind::ProviderDied,
                format!(
                    "the confirmation activity of {:?} crashed",
                    held.target.creator_package
                ),
            )
        })
    }
}

/// Gives every PendingIntent and descriptor value of a reply a fresh
/// connection handle, nested Bundles included. The value's type and the
/// PendingIntent's creator facts come from the attached object, as a real
/// device reads them from the object and not from what the Provider claims.
/// A value whose handle has no attachment stands for no object at all: it is
/// handed over as `other`, so it can never name another call's object.
fn rewrite_handles(
    bundle: &mut Bundle,
    attached: &HashMap<String, Attachment>,
    memo: &mut HashMap<String, Value>,
    handles: &mut Handles,
    app: &Arc<dyn ProviderApp>,
) {
    for value in bundle.0.values_mut() {
        let (provider_handle, class) = match value {
            Value::Bundle(inner) => {
                rewrite_handles(inner, attached, memo, handles, app);
                continue;
            }
            Value::PendingIntent(pi) => (pi.handle.clone(), "android.app.PendingIntent"),
            Value::Fd(fd) => (fd.handle.clone(), "android.os.ParcelFileDescriptor"),
            _ => continue,
        };
        if let Some(done) = memo.get(&provider_handle) {
            *value = done.clone();
            continue;
        }
        let new_value = match attached.get(&provider_handle) {
            Some(Attachment::Intent(target)) => {
                let pi = PendingIntentValue {
                    handle: String::new(),
                    creator_package: Some(target.creator_package.clone()),
                    creator_uid: Some(i64::from(target.creator_uid)),
                    immutable: Some(target.immutable),
                    activity: Some(target.activity),
                };
                let handle = handles.add_intent(HeldIntent {
                    target: target.clone(),
                    app: Arc::clone(app),
                });
                Value::PendingIntent(PendingIntentValue { handle, ..pi })
            }
            Some(a @ (Attachment::File(src) | Attachment::WritableFile(src))) => {
                Value::Fd(FdValue {
                    handle: handles.add_fd(src.clone(), matches!(a, Attachment::WritableFile(_))),
                })
            }
            None => Value::Other {
                class: class.to_string(),
            },
        };
        memo.insert(provider_handle, new_value.clone());
        *value = new_value;
    }
}

fn read_source(src: &FdSource, limit: u64) -> FdRead {
    let (available, byte) = match src {
        FdSource::Bytes(data) => (Some(data.len() as u64), None),
        FdSource::Pattern { len, byte } => (*len, Some(*byte)),
    };
    let n = available.map_or(limit, |a| a.min(limit));
    // `n <= limit <= max_read_bytes`, which the device was configured to
    // afford; a usize overflow can only come from a 32-bit host.
    let n = usize::try_from(n).unwrap_or(usize::MAX);
    let bytes = match (src, byte) {
        (FdSource::Bytes(data), _) => data[..n.min(data.len())].to_vec(),
        (_, Some(b)) => vec![b; n],
        (_, None) => Vec::new(),
    };
    FdRead {
        eof: available.is_some_and(|a| a <= limit),
        bytes,
        error: None,
        writable: None,
    }
}

impl ConsumerPort for DeviceConnection {
    fn now_ms(&mut self) -> i64 {
        self.device.now_ms()
    }

    fn sleep_ms(&mut self, ms: u64) {
        self.device.clock().sleep(ms)
    }

    fn discover(&mut self) -> Result<Vec<ServiceManifest>, DeviceError> {
        Ok(self.device.discover())
    }

    fn call(
        &mut self,
        authority: &str,
        method: &str,
        arg: Option<&str>,
        extras: Option<&Bundle>,
        timeout_ms: u64,
    ) -> Result<CallAnswer, DeviceError> {
        DeviceConnection::call(self, authority, method, arg, extras, timeout_ms)
    }

    fn read_fd(&mut self, handle: &str, max_bytes: u64) -> Result<FdRead, DeviceError> {
        DeviceConnection::read_fd(self, handle, max_bytes)
    }

    fn close_fd(&mut self, handle: &str) -> Result<(), DeviceError> {
        DeviceConnection::close_fd(self, handle)
    }

    fn resolve(&mut self, handle: &str, decision: Decision) -> Result<ResolveOutcome, DeviceError> {
        DeviceConnection::resolve(self, handle, decision)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_reads_are_bounded() {
        let endless = FdSource::Pattern { len: None, byte: 7 };
        let r = read_source(&endless, 10);
        assert_eq!(r.bytes, vec![7; 10]);
        assert!(!r.eof);
        let exact = FdSource::Pattern {
            len: Some(10),
            byte: 1,
        };
        assert!(read_source(&exact, 10).eof);
        assert!(!read_source(&exact, 9).eof);
        let bytes = FdSource::bytes(b"abc".to_vec());
        let r = read_source(&bytes, 100);
        assert_eq!(r.bytes, b"abc");
        assert!(r.eof);
        let r = read_source(&bytes, 0);
        assert!(r.bytes.is_empty() && !r.eof);
    }

    #[test]
    fn manual_clock_saturates() {
        let c = DeviceClock::manual(i64::MAX - 5);
        c.advance(u64::MAX);
        assert_eq!(c.now_ms(), i64::MAX);
        let s = DeviceClock::system(-1_000_000);
        assert!(!s.is_manual());
        assert!(s.now_ms() > 1_600_000_000_000 - 1_000_000);
    }

    #[test]
    fn setting_the_wall_clock_leaves_the_elapsed_clock() {
        let c = DeviceClock::manual(1_000);
        c.set_wall_ms(61_000);
        assert_eq!((c.now_ms(), c.elapsed_ms()), (61_000, 1_000));
        // Time passing moves both; setting it back restores agreement.
        c.advance(500);
        assert_eq!((c.now_ms(), c.elapsed_ms()), (61_500, 1_500));
        c.set_wall_ms(c.elapsed_ms());
        assert_eq!(c.now_ms(), c.elapsed_ms());
    }

    #[test]
    fn standard_identities_differ() {
        assert_ne!(IDENTITY_A.caller(), IDENTITY_B.caller());
        assert_eq!(IDENTITY_A.caller().cert_sha256[0].len(), 64);
    }
}
