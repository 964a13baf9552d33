//! The simulated device: one Android device in a process, reached over the
//! probe wire (`probe-wire.md`) on any byte stream, with a device-side adb
//! endpoint for the harness code paths that drive real devices through `adb`.
//!
//! A [`Sim`] hosts the reference Provider (or one of its mutants) on a
//! [`LocalDevice`] and offers the device's two caller identities: `a`
//! (uid 10123, every scope) and `b` (uid 10200, every scope except
//! `portfolio.sync` and `history.read`, so the conformance suite has a write
//! tool and a read tool `b` lacks a scope for). With [`SimConfig::provider`]
//! it hosts the notes app instead, where `b` lacks `notes.archive` and
//! `notes.read`. Each connection speaks for one identity and
//! owns its `pi-N` / `fd-N` handles.
//!
//! What makes it a device rather than a function call:
//!
//! - Provider calls run on blocking threads, so outstanding `call` requests
//!   really run at once (the harness sends two calls with one `request_id`
//!   concurrently to test that the Provider has a single executor), and
//!   effects really take time ([`SimConfig::effect_delay_ms`]).
//! - `timeout_ms` is a real wait: the device answers `timeout` when it stops
//!   waiting, while the Provider may still finish the call.
//! - The clock is the host's wall clock shifted by
//!   [`SimConfig::clock_skew_ms`], so deadlines computed in host time fail.
//! - Descriptors are streamed in chunks of at most 1 MiB without ever holding
//!   more than one chunk, endless ones included.
//! - `read_fd` reports the probe-wire extension `writable`: whether the
//!   Provider opened the descriptor for writing too (§4.5 asks for a
//!   read-only one; `Attachment::WritableFile`).
//!
//! Everything a peer sends is bounded: frame size (16 MiB, then the
//! connection is closed), outstanding requests per connection (count and
//! bytes), handles per connection, log lines, hosted Providers and their
//! pending calls.

#![forbid(unsafe_code)]

mod adb;
pub mod binder;
mod conn;
pub mod consumer;
mod handles;
mod hosted;
pub use hosted::Hosting;
mod log;
mod run;

pub use run::{run_sim, SimOptions};

use cetp_proto::provider::ServiceManifest;
use cetp_reference::app::ProviderApp;
use cetp_reference::device::{
    DeviceClock, DeviceConfig, DeviceIdentity, LocalDevice, IDENTITY_A, IDENTITY_B,
};
use cetp_reference::provider::{
    thread_sleeper, FixtureSet, ManifestVariant, Mutant, ProviderConfig, ReferenceProvider, Variant,
};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::io::{AsyncRead, AsyncWrite};

/// The probe name `hello` reports.
pub const PROBE_NAME: &str = "cetp-sim";
/// `ro.product.model` and `hello.device.model`.
pub const MODEL: &str = "cetp-sim";
/// `hello.device.sdk_int`: the Android 14 API level the device claims.
pub const SDK_INT: u32 = 34;
/// `ro.serialno`: the serial the device-side adb endpoint reports.
pub const SERIAL: &str = "CETPSIM0001";
/// `ro.build.fingerprint` and `hello.device.fingerprint`, a userdebug build
/// whose version is the crate's, so reports say which simulator ran.
pub const FINGERPRINT: &str = concat!(
    "clawseed/cetp_sim/cetp_sim:14/CETP.SIM/",
    env!("CARGO_PKG_VERSION"),
    ":userdebug/test-keys"
);
/// The scopes identity `b` is not granted by the reference app: a write
/// scope and a read scope.
pub const SCOPES_WITHHELD_FROM_B: &[&str] = &["portfolio.sync", "history.read"];
/// The scopes identity `b` is not granted by the notes app.
pub const NOTES_SCOPES_WITHHELD_FROM_B: &[&str] = &["notes.archive", "notes.read"];

/// The scopes identity `b` lacks in `app`: one write scope, so that the suite
/// has a tool `b` may not run (EXE-009), and one read scope, so that it has a
/// read tool refused to `b` over v2 to ask for over v1 (V1-005, §8).
pub fn scopes_withheld_from_b(app: FixtureSet) -> &'static [&'static str] {
    match app {
        FixtureSet::Reference => SCOPES_WITHHELD_FROM_B,
        FixtureSet::Notes => NOTES_SCOPES_WITHHELD_FROM_B,
    }
}

/// Requests one connection may have outstanding; more are answered
/// `bad_request` at once.
pub const MAX_OUTSTANDING_REQUESTS: usize = 64;
/// Bytes of request frames one connection may have outstanding.
pub const MAX_OUTSTANDING_BYTES: usize = 64 * 1024 * 1024;
/// `pi-N` and `fd-N` handles one connection may hold at once.
pub const MAX_HANDLES_PER_CONNECTION: usize = 4096;
/// The most one `read_fd` reads, whatever `max_bytes` asks for: descriptors
/// may be endless.
pub const MAX_READ_BYTES: u64 = 256 * 1024 * 1024;
/// The longest a device waits for a Provider, whatever `timeout_ms` says
/// (`0` means "no limit of the host's own", which still ends here).
pub const MAX_WAIT_MS: u64 = 600_000;

/// How the simulated device is set up.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// The app the device hosts.
    pub provider: FixtureSet,
    /// A [`Mutant`] name of that app: host that mutant instead.
    pub mutant: Option<String>,
    /// A [`Variant`] name: host that legal variant of the reference.
    pub variant: Option<String>,
    /// What the app's manifest declares (dual-stack, v2-only, ...), for the
    /// discovery and version-negotiation checks.
    pub manifest: ManifestVariant,
    /// Device clock = host clock + skew (deadlines are judged in device time).
    pub clock_skew_ms: i64,
    /// Time a mutation takes between reservation and commit, for real, so
    /// concurrent calls with one request id overlap.
    pub effect_delay_ms: u64,
    /// Seeds every token the Provider issues.
    pub seed: u64,
    /// A tool (an `execute_tool`'s `tool_name`, or a method) the Provider
    /// never answers: each call of it hangs until the caller stops waiting,
    /// as a Provider stuck on a lock or a dead backend would.
    pub hang: Option<String>,
    /// What a host may shape when it hosts a Provider here: anything (the
    /// simulated device), or only what the probe app allows on a phone.
    pub hosting: hosted::Hosting,
    /// The device's clock cannot be moved: `advance_clock` is answered
    /// `unknown_op` and left out of `hello`'s ops, as on a phone, so that
    /// the harness's real-time waits can be tested (`cetp sim --fixed-clock`).
    pub fixed_clock: bool,
    /// The Provider's session lifetime instead of its app's (a vendor's
    /// debug build with short lifetimes).
    pub session_ttl_ms: Option<i64>,
    /// The Provider's resume-token lifetime instead of its app's.
    pub resume_token_ttl_ms: Option<i64>,
    /// Who may set the wall clock over adb (`date @SECONDS`): nobody (a
    /// user build), adbd itself (`adb root` on an emulator or a userdebug
    /// build), or `su`.
    pub root: Root,
    /// The Provider times its lifetimes by the elapsed clock
    /// (`elapsedRealtime`), so setting the wall clock ages nothing.
    pub provider_elapsed_clock: bool,
}

/// Root on the simulated device's adb shell.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Root {
    /// A user build: the shell runs as uid 2000 and there is no `su`.
    #[default]
    None,
    /// adbd runs as root (`adb root` done): the shell is uid 0.
    Adbd,
    /// The shell is uid 2000, and `su 0 COMMAND` runs as root.
    Su,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            provider: FixtureSet::Reference,
            mutant: None,
            variant: None,
            manifest: ManifestVariant::DualStack,
            clock_skew_ms: 0,
            effect_delay_ms: 30,
            seed: 0,
            hang: None,
            hosting: hosted::Hosting::Open,
            fixed_clock: false,
            session_ttl_ms: None,
            resume_token_ttl_ms: None,
            root: Root::None,
            provider_elapsed_clock: false,
        }
    }
}

/// Why a simulated device could not be set up or served: a name the user
/// gave that names nothing (a usage error, listing the valid names), or the
/// host's own I/O.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// A mutant name the app has no such fault for.
    #[error("unknown mutant {name:?} of the {provider} provider; valid names: {}", valid.join(", "))]
    UnknownMutant {
        /// The name as given.
        name: String,
        /// The app it was asked of.
        provider: FixtureSet,
        /// The mutants that app has.
        valid: Vec<String>,
    },
    /// A provider name that is not one of the hosted apps.
    #[error("unknown provider {0:?}; valid: {names}", names = provider_names().join(", "))]
    UnknownProvider(String),
    /// A legal-variant name the reference Provider does not have.
    #[error("unknown legal variant {name:?}; valid names: {}", valid.join(", "))]
    UnknownVariant {
        /// The name as given.
        name: String,
        /// The variants there are.
        valid: Vec<String>,
    },
    /// A `--manifest` name not in [`MANIFEST_VARIANTS`].
    #[error("unknown manifest variant {0:?}; valid: dual-stack, v2-only, v1-only, versions-only, mismatched-package")]
    UnknownManifest(String),
    /// The host failed: binding or serving a listener.
    #[error("{what}: {source}")]
    Io {
        /// What the device was doing (`serving identity a`, ...).
        what: String,
        /// The host's error.
        #[source]
        source: std::io::Error,
    },
}

fn provider_names() -> Vec<&'static str> {
    FixtureSet::ALL.iter().map(|s| s.name()).collect()
}

/// Parses a provider name (`reference`, `notes`).
pub fn parse_provider(name: &str) -> Result<FixtureSet, SimError> {
    FixtureSet::parse(name).ok_or_else(|| SimError::UnknownProvider(name.to_string()))
}

/// The names `--manifest` accepts, with their variants.
pub const MANIFEST_VARIANTS: [(&str, ManifestVariant); 5] = [
    ("dual-stack", ManifestVariant::DualStack),
    ("v2-only", ManifestVariant::V2Only),
    ("v1-only", ManifestVariant::V1Only),
    ("versions-only", ManifestVariant::VersionsOnly),
    ("mismatched-package", ManifestVariant::MismatchedPackage),
];

/// Parses a manifest variant name (`dual-stack`, `v2-only`, ...).
pub fn parse_manifest_variant(name: &str) -> Result<ManifestVariant, SimError> {
    MANIFEST_VARIANTS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| *v)
        .ok_or_else(|| SimError::UnknownManifest(name.to_string()))
}

/// The `--manifest` name of `variant`, as boot logs and reports show it.
pub fn manifest_variant_name(variant: ManifestVariant) -> &'static str {
    MANIFEST_VARIANTS
        .iter()
        .find(|(_, v)| *v == variant)
        .map_or("dual-stack", |(n, _)| n)
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A poisoned table is still consistent: no critical section here can
    // panic halfway through an update.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Packages installed with `pm install` that `pm list packages` shows; a
/// bound on what a host can make the simulator remember.
const MAX_INSTALLED: usize = 256;
const MAX_PUSHED: usize = 1024;

/// A running `am instrument -w`: its component, and what ends it early.
type RunningInstrumentation = (String, Option<tokio::sync::oneshot::Sender<()>>);

/// One simulated device.
pub struct Sim {
    cfg: SimConfig,
    device: LocalDevice,
    provider: Arc<ReferenceProvider>,
    log: log::SimLog,
    hosted: hosted::Registry,
    /// APK paths given to `pm install`, in order.
    installed: Mutex<Vec<String>>,
    /// Files pushed over adb sync: path → size and SHA-256 (hex).
    pushed: Mutex<BTreeMap<String, (u64, String)>>,
    /// Packages `pm install --pkg` installed: package → SHA-256 of the APK,
    /// what `pm path` and `sha256sum` of its base.apk then answer.
    package_apks: Mutex<BTreeMap<String, String>>,
    next_connection: AtomicU64,
    /// `am instrument -w` commands running now: id → component, and the
    /// signal that ends one as a force-stop of its package would.
    instrumentations: Mutex<BTreeMap<u64, RunningInstrumentation>>,
    next_instrumentation: AtomicU64,
    /// The built-in Consumers under test (`consumer_act`), one per name,
    /// kept between acts and connections as an installed app would be.
    pub(crate) consumers: Mutex<BTreeMap<String, conn::BuiltIn>>,
    /// `settings` values set over adb (namespace/key → value).
    pub(crate) settings: Mutex<BTreeMap<String, String>>,
}

impl fmt::Debug for Sim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sim")
            .field("cfg", &self.cfg)
            .field("device", &self.device)
            .finish_non_exhaustive()
    }
}

/// The mutant `name` of `app`; a fault the app has no place for is as
/// unknown as a misspelt one. Targets check this when parsed, so a wrong
/// name is a usage error, not a device that failed to start.
pub fn mutant_of(app: FixtureSet, name: &str) -> Result<Mutant, SimError> {
    Mutant::parse(name)
        .filter(|f| f.applies_to(app))
        .ok_or_else(|| SimError::UnknownMutant {
            name: name.to_string(),
            provider: app,
            valid: Mutant::ALL
                .iter()
                .filter(|f| f.applies_to(app))
                .map(|f| f.name().to_string())
                .collect(),
        })
}

/// The legal variant `name`.
pub fn variant_named(name: &str) -> Result<Variant, SimError> {
    Variant::parse(name).ok_or_else(|| SimError::UnknownVariant {
        name: name.to_string(),
        valid: Variant::ALL.iter().map(|l| l.name().to_string()).collect(),
    })
}

/// The Provider a simulated device set up by `cfg` hosts: the app, its
/// mutant or legal variant, its manifest, seed and the standard identities'
/// grants, without the device's real-time effect delay. The fuzzer's oracle
/// builds the same Provider in-process from it.
pub fn provider_config(cfg: &SimConfig) -> Result<ProviderConfig, SimError> {
    let app = cfg.provider;
    let mut faults = BTreeSet::new();
    if let Some(name) = &cfg.mutant {
        faults.insert(mutant_of(app, name)?);
    }
    let mut base = ProviderConfig {
        manifest: cfg.manifest,
        ..ProviderConfig::of(app)
    };
    if let Some(name) = &cfg.variant {
        base = base.with_latitude(variant_named(name)?);
    }
    let all = app.all_scopes();
    let mut b_scopes = all.clone();
    for scope in scopes_withheld_from_b(app) {
        b_scopes.remove(*scope);
    }
    if let Some(ms) = cfg.session_ttl_ms {
        base.session_ttl_ms = ms;
    }
    if let Some(ms) = cfg.resume_token_ttl_ms {
        base.resume_token_ttl_ms = ms;
    }
    Ok(ProviderConfig {
        seed: cfg.seed,
        grants: BTreeMap::from([(IDENTITY_A.uid, all), (IDENTITY_B.uid, b_scopes)]),
        faults,
        ..base
    })
}

impl Sim {
    /// A device hosting the app `cfg.provider`, or its mutant
    /// `cfg.mutant`; a fault the app has no place for is an unknown mutant.
    pub fn new(cfg: SimConfig) -> Result<Arc<Sim>, SimError> {
        let provider = Arc::new(ReferenceProvider::new(ProviderConfig {
            effect_delay_ms: cfg.effect_delay_ms,
            sleeper: thread_sleeper(),
            ..provider_config(&cfg)?
        }));
        let app: Arc<dyn ProviderApp> = provider.clone();
        let device = LocalDevice::with_config(
            vec![app],
            DeviceClock::system(cfg.clock_skew_ms),
            DeviceConfig {
                max_read_bytes: MAX_READ_BYTES,
                identities: vec![IDENTITY_A.identity(), IDENTITY_B.identity()],
                apps_use_elapsed_clock: cfg.provider_elapsed_clock,
            },
        );
        let sim = Arc::new(Sim {
            device,
            provider,
            log: log::SimLog::new(log::MAX_LINES),
            hosted: hosted::Registry::default(),
            installed: Mutex::new(Vec::new()),
            pushed: Mutex::new(BTreeMap::new()),
            package_apks: Mutex::new(BTreeMap::new()),
            next_connection: AtomicU64::new(0),
            instrumentations: Mutex::new(BTreeMap::new()),
            next_instrumentation: AtomicU64::new(0),
            consumers: Mutex::new(BTreeMap::new()),
            // A phone sets its time from the network unless told not to.
            settings: Mutex::new(BTreeMap::from([(
                "global/auto_time".to_string(),
                "1".to_string(),
            )])),
            cfg,
        });
        sim.log(
            'I',
            &format!(
                "boot: provider={} mutant={} manifest={} clock_skew_ms={} fixed_clock={} session_ttl_ms={} resume_token_ttl_ms={} root={:?} provider_elapsed_clock={}",
                sim.provider.config().package,
                sim.cfg.mutant.as_deref().unwrap_or("none"),
                manifest_variant_name(sim.cfg.manifest),
                sim.cfg.clock_skew_ms,
                sim.cfg.fixed_clock,
                sim.provider.config().session_ttl_ms,
                sim.provider.config().resume_token_ttl_ms,
                sim.cfg.root,
                sim.cfg.provider_elapsed_clock,
            ),
        );
        Ok(sim)
    }

    /// How this device was set up.
    pub fn config(&self) -> &SimConfig {
        &self.cfg
    }

    /// The device: its clock, identities and installed apps.
    pub fn device(&self) -> &LocalDevice {
        &self.device
    }

    /// The hosted Provider (or mutant).
    pub fn provider(&self) -> &Arc<ReferenceProvider> {
        &self.provider
    }

    /// Device clock, Unix epoch milliseconds.
    pub fn now_ms(&self) -> i64 {
        self.device.now_ms()
    }

    /// The device log (`logcat -d`), oldest first.
    pub fn log_lines(&self) -> Vec<String> {
        self.log.lines()
    }

    /// The caller identity named `name` (`a` or `b`).
    pub fn identity(&self, name: &str) -> Option<DeviceIdentity> {
        self.device
            .identities()
            .iter()
            .find(|i| i.name == name)
            .cloned()
    }

    /// Serves the probe wire on `stream` for caller identity `identity`
    /// until the peer closes it or breaks the protocol beyond recovery.
    /// An identity the device does not offer gets the stream closed at once.
    pub async fn serve_connection<S>(self: Arc<Self>, identity: &str, stream: S)
    where
        S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
    {
        let Some(ident) = self.identity(identity) else {
            self.log(
                'W',
                &format!("refused a connection for unknown identity {identity:?}"),
            );
            return;
        };
        let number = self.next_connection.fetch_add(1, Ordering::Relaxed) + 1;
        conn::serve(self, ident, number, stream).await;
    }

    /// Accepts connections for identity `identity` on `listener`, each served
    /// by [`serve_connection`](Sim::serve_connection) on its own task.
    /// Returns only when accepting keeps failing (the listener is unusable).
    pub async fn serve_tcp(
        self: Arc<Self>,
        identity: &str,
        listener: tokio::net::TcpListener,
    ) -> std::io::Result<()> {
        let identity = identity.to_string();
        let mut failures = 0u32;
        loop {
            match listener.accept().await {
                Ok((sock, _peer)) => {
                    failures = 0;
                    let _ = sock.set_nodelay(true);
                    let sim = Arc::clone(&self);
                    let identity = identity.clone();
                    tokio::spawn(async move { sim.serve_connection(&identity, sock).await });
                }
                Err(e) => {
                    // Transient failures (out of descriptors) pass; a dead
                    // listener fails every time.
                    failures += 1;
                    if failures >= 100 {
                        return Err(e);
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            }
        }
    }

    /// The device-side adb services, for [`cetp_adbd::serve`]:
    /// `localabstract:cetp-probe` is identity `a`, `localabstract:cetp-probe-b`
    /// identity `b`, plus the shell commands a harness uses.
    pub fn adb_services(self: Arc<Self>) -> Arc<dyn cetp_adbd::DeviceServices> {
        Arc::new(adb::SimServices::new(self))
    }

    /// Every service answering the TOOL_PROVIDER action: the installed apps
    /// and the Providers hosts currently script.
    pub(crate) fn discover(&self) -> Vec<ServiceManifest> {
        let mut all = self.device.discover();
        all.extend(self.hosted.manifests());
        all
    }

    /// The app answering on `authority`: an installed one, else a scripted
    /// one. Android lets one package own an authority; the first installed
    /// wins, and hosting refuses authorities already taken.
    pub(crate) fn app_for(&self, authority: &str) -> Option<handles::AppRef> {
        self.device
            .apps()
            .into_iter()
            .find(|a| a.authority() == authority)
            .map(handles::AppRef::Installed)
            .or_else(|| self.hosted.get(authority).map(handles::AppRef::Hosted))
    }

    /// Kills the process of `package` (`am force-stop`, `restart_provider`).
    pub(crate) fn restart_package(
        &self,
        package: &str,
    ) -> Result<(), cetp_proto::device::DeviceError> {
        if self.hosted.has_package(package) {
            // A scripted Provider keeps nothing in memory worth losing.
            self.log('I', &format!("force-stop {package} (scripted provider)"));
            return Ok(());
        }
        let r = self.device.restart_provider(package);
        match &r {
            Ok(()) => self.log('I', &format!("force-stop {package}: process restarted")),
            Err(e) => self.log('W', &format!("force-stop {package}: {e}")),
        }
        r
    }

    /// Packages `pm list packages` shows.
    pub(crate) fn packages(&self) -> Vec<String> {
        let mut out: BTreeSet<String> = BTreeSet::new();
        for id in self.device.identities() {
            out.extend(id.caller.packages.iter().cloned());
        }
        for m in self.discover() {
            out.insert(m.package.clone());
            if let Some(p) = m.authority_package {
                out.insert(p);
            }
        }
        out.into_iter().collect()
    }

    pub(crate) fn record_install(&self, path: &str) {
        let mut installed = lock(&self.installed);
        if installed.len() >= MAX_INSTALLED {
            installed.remove(0);
        }
        installed.push(path.to_string());
    }

    /// APK paths `pm install` was given, oldest first.
    pub fn installed_apks(&self) -> Vec<String> {
        lock(&self.installed).clone()
    }

    pub(crate) fn record_push(&self, path: &str, data: &[u8]) {
        let digest = hex::encode(Sha256::digest(data));
        let mut pushed = lock(&self.pushed);
        if pushed.len() >= MAX_PUSHED && !pushed.contains_key(path) {
            if let Some(first) = pushed.keys().next().cloned() {
                pushed.remove(&first);
            }
        }
        pushed.insert(path.to_string(), (data.len() as u64, digest));
    }

    pub(crate) fn pushed_size(&self, path: &str) -> Option<u64> {
        lock(&self.pushed).get(path).map(|(size, _)| *size)
    }

    /// `pm install --pkg PACKAGE PATH`: the package now holds the APK pushed
    /// to PATH (unknown bytes when nothing was pushed there).
    pub(crate) fn record_package_install(&self, package: &str, path: &str) {
        let digest = lock(&self.pushed).get(path).map_or_else(
            || hex::encode(Sha256::digest(path.as_bytes())),
            |(_, d)| d.clone(),
        );
        let mut apks = lock(&self.package_apks);
        if apks.len() >= MAX_INSTALLED && !apks.contains_key(package) {
            return;
        }
        apks.insert(package.to_string(), digest);
    }

    /// The SHA-256 of the APK the package holds: the one `pm install --pkg`
    /// installed, else, for a package the simulator has built in (the
    /// probes, the Providers), a digest of its name that no APK has, as a
    /// build made elsewhere would have. `None`: not installed.
    pub(crate) fn package_apk_sha256(&self, package: &str) -> Option<String> {
        if let Some(d) = lock(&self.package_apks).get(package) {
            return Some(d.clone());
        }
        self.packages().iter().any(|p| p == package).then(|| {
            hex::encode(Sha256::digest(
                format!("cetp-sim built-in {package}").as_bytes(),
            ))
        })
    }

    pub(crate) fn forget_pushed(&self, path: &str) {
        lock(&self.pushed).remove(path);
    }

    /// Components whose `am instrument -w` shell stream is open now, in the
    /// order they started.
    pub fn running_instrumentations(&self) -> Vec<String> {
        lock(&self.instrumentations)
            .values()
            .map(|(c, _)| c.clone())
            .collect()
    }

    pub(crate) fn instrumentation_started(
        &self,
        component: &str,
    ) -> (u64, tokio::sync::oneshot::Receiver<()>) {
        let id = self.next_instrumentation.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = tokio::sync::oneshot::channel();
        lock(&self.instrumentations).insert(id, (component.to_string(), Some(tx)));
        self.log('I', &format!("am instrument {component}: running"));
        (id, rx)
    }

    pub(crate) fn instrumentation_ended(&self, id: u64, why: &str) {
        if let Some((component, _)) = lock(&self.instrumentations).remove(&id) {
            self.log('I', &format!("am instrument {component}: ended ({why})"));
        }
    }

    /// `am force-stop PACKAGE` ends the instrumentations of that package.
    pub(crate) fn stop_instrumentations(&self, package: &str) {
        for (component, stop) in lock(&self.instrumentations).values_mut() {
            if component.split('/').next() == Some(package) {
                if let Some(stop) = stop.take() {
                    let _ = stop.send(());
                }
            }
        }
    }

    /// Device properties (`getprop`, the adb banner).
    pub fn properties(&self) -> Vec<(String, String)> {
        [
            ("ro.product.model", MODEL),
            ("ro.product.name", "cetp_sim"),
            ("ro.product.device", "cetp_sim"),
            ("ro.product.brand", "clawseed"),
            ("ro.product.manufacturer", "ClawSeed"),
            ("ro.build.version.sdk", "34"),
            ("ro.build.version.release", "14"),
            ("ro.build.type", "userdebug"),
            ("ro.build.fingerprint", FINGERPRINT),
            ("ro.serialno", SERIAL),
            ("ro.debuggable", "1"),
            ("ro.kernel.qemu", "0"),
            ("sys.boot_completed", "1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    pub(crate) fn log(&self, level: char, message: &str) {
        self.log.push(self.now_ms(), level, message);
    }

    pub(crate) fn clear_log(&self) {
        self.log.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_names_round_trip() {
        for (name, v) in MANIFEST_VARIANTS {
            assert_eq!(parse_manifest_variant(name).unwrap(), v);
            assert_eq!(manifest_variant_name(v), name);
        }
        let e = parse_manifest_variant("v3-only").unwrap_err();
        assert!(e.to_string().contains("mismatched-package"), "{e}");
    }

    #[test]
    fn identity_b_lacks_exactly_the_withheld_scopes() {
        let sim = Sim::new(SimConfig::default()).unwrap();
        let grants = &sim.provider().config().grants;
        let a = &grants[&IDENTITY_A.uid];
        let b = &grants[&IDENTITY_B.uid];
        assert_eq!(a, &ProviderConfig::all_scopes());
        let mut withheld = SCOPES_WITHHELD_FROM_B.to_vec();
        withheld.sort_unstable();
        assert_eq!(a.difference(b).collect::<Vec<_>>(), withheld);
        assert!(sim.provider().config().faults.is_empty());
        assert_eq!(sim.provider().config().effect_delay_ms, 30);
    }

    #[test]
    fn notes_identity_b_lacks_the_archive_and_read_scopes() {
        let sim = Sim::new(SimConfig {
            provider: FixtureSet::Notes,
            ..SimConfig::default()
        })
        .unwrap();
        let cfg = sim.provider().config();
        assert_eq!(cfg.package, "com.clawseed.notes");
        let a = &cfg.grants[&IDENTITY_A.uid];
        let b = &cfg.grants[&IDENTITY_B.uid];
        assert_eq!(a, &FixtureSet::Notes.all_scopes());
        assert_eq!(
            a.difference(b).collect::<Vec<_>>(),
            ["notes.archive", "notes.read"]
        );
    }

    #[test]
    fn unknown_mutant_lists_the_valid_names() {
        for app in FixtureSet::ALL {
            let e = Sim::new(SimConfig {
                provider: app,
                mutant: Some("no_such_mutant".into()),
                ..SimConfig::default()
            })
            .unwrap_err();
            let text = e.to_string();
            assert!(text.contains("no_such_mutant"), "{text}");
            let (_, list) = text.split_once("valid names: ").expect("a list");
            let listed: BTreeSet<&str> = list.split(", ").collect();
            let expected: BTreeSet<&str> = Mutant::ALL
                .iter()
                .filter(|f| f.applies_to(app))
                .map(|f| f.name())
                .collect();
            assert_eq!(listed, expected, "{app}");
        }
    }

    #[test]
    fn mutants_are_hosted_only_in_their_app() {
        let notes_only = Some("delete_note_unconfirmed".to_string());
        let hosted = Sim::new(SimConfig {
            provider: FixtureSet::Notes,
            mutant: notes_only.clone(),
            ..SimConfig::default()
        })
        .unwrap();
        assert_eq!(
            hosted.provider().config().faults,
            BTreeSet::from([Mutant::DeleteNoteUnconfirmed])
        );
        let e = Sim::new(SimConfig {
            mutant: notes_only,
            ..SimConfig::default()
        })
        .unwrap_err();
        assert!(matches!(e, SimError::UnknownMutant { .. }), "{e}");
        assert!(Sim::new(SimConfig {
            provider: FixtureSet::Notes,
            mutant: Some("tool_name_invalid".into()),
            ..SimConfig::default()
        })
        .is_err());
    }

    #[test]
    fn provider_names_parse() {
        for app in FixtureSet::ALL {
            assert_eq!(parse_provider(app.name()).unwrap(), app);
        }
        let e = parse_provider("todo").unwrap_err().to_string();
        assert!(e.contains("reference, notes"), "{e}");
    }

    #[test]
    fn clock_skew_moves_device_time() {
        let sim = Sim::new(SimConfig {
            clock_skew_ms: -3_600_000,
            ..SimConfig::default()
        })
        .unwrap();
        let host = DeviceClock::system(0).now_ms();
        let skewed = sim.now_ms();
        assert!((host - 3_600_000 - skewed).abs() < 5_000, "{host} {skewed}");
    }
}
