//! Targets for the conformance runner: the probe-wire client
//! ([`cetp_transport::ProbeClient`]) behind the runner's blocking
//! [`Device`](cetp_vectors::device::Device), over each transport.
//!
//! ```text
//! TARGET ──TargetSpec::parse──▶ open / open_with ──▶ Target { a, b: ProbeDevice }
//!   sim          in-process simulated device, through an in-memory pipe
//!   tcp:H:P      a probe-wire endpoint (and b=H:P for identity b)
//!   adb[:SERIAL] adb server ─ forward tcp:N localabstract:cetp-probe[-b]
//!   jvm:…        scripts/jvm-device.sh started on two loopback ports, then as tcp
//! ```
//!
//! Even the in-process `sim` goes through the wire codec, so every target
//! exercises the same client. Each target owns a small multi-thread Tokio
//! runtime; the `Device` methods block on it and must be called from plain
//! threads (the runner's), though they also work, more slowly, from inside
//! a runtime.
//!
//! Faults are mapped by kind: `provider_died` and `transaction_too_large`
//! are charged to the Provider by the runner; every other kind
//! (`connection_closed`, `timeout`, `bad_frame`, `frame_too_large`, `io`,
//! `adb_*`, device kinds like `unknown_handle`) is an infrastructure error.

#![forbid(unsafe_code)]

mod clock_move;
pub mod consumer;
mod device;
pub mod jvm;
pub mod spec;
pub mod trace;

pub use cetp_reference::provider::FixtureSet;
pub use device::ProbeDevice;
pub use spec::{
    AdbSpec, ConsumerTarget, IdentityB, JvmBuild, JvmCode, JvmSpec, SimSpec, SpecError, TargetSpec,
    TcpSpec,
};
pub use trace::{TracedFrame, WireTrace};

use cetp_proto::device::{AdbErrorKind, ErrorKind};
use cetp_sim::Sim;
use cetp_transport::adb::{Adb, AdbConfig, ProbeInstrumentation, PROBE_SOCKET_A, PROBE_SOCKET_B};
use cetp_transport::AdbError;
use cetp_transport::{pipe, tcp, ClientConfig, ProbeClient, Tap, TransportError};
use cetp_vectors::device::Target;
use device::{AdbSide, SharedRuntime};
use sha2::{Digest, Sha256};
use std::any::Any;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Why a target could not be opened; [`TargetError::kind`] says whose fault
/// it is for the runner.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// The TARGET string does not parse: a usage error.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// The target's Tokio runtime could not be built (the host is out of
    /// threads or memory).
    #[error("cannot start the target's runtime: {0}")]
    Runtime(String),
    /// The in-process simulated device refused its configuration.
    #[error("cannot start the simulated device: {0}")]
    Sim(String),
    /// A step of setting up the device failed (adb checks, install, start).
    #[error("{step}: {error}")]
    Setup {
        /// The step, as a message names it (`starting COMPONENT`, ...).
        step: String,
        /// What the transport saw.
        error: TransportError,
    },
    /// Identity `identity` could not be connected or did not answer `hello`.
    #[error("identity {identity} at {endpoint}: {error}")]
    Connect {
        /// `a` or `b`.
        identity: String,
        /// Where it was reached (`HOST:PORT`, the probe's socket on an adb
        /// device, ...).
        endpoint: String,
        /// What the transport saw.
        error: TransportError,
    },
    /// The JVM device (`jvm:`) did not come up.
    #[error("the JVM device: {message}")]
    Jvm {
        /// Its script refused its input (exit 2: a class that does not
        /// load, an unknown defect): the user's to fix. Otherwise the
        /// machine's: no script, a failed build, no ready line in time.
        refused: bool,
        /// What happened, with the tail of the device's output.
        message: String,
    },
}

impl TargetError {
    /// Whether the user's input is at fault (a usage error), not the
    /// machine or the device.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            TargetError::Spec(_) | TargetError::Jvm { refused: true, .. }
        )
    }

    /// `bad_target`, `runtime`, `sim`, `jvm_device`, or the transport
    /// error's kind.
    pub fn kind(&self) -> String {
        match self {
            TargetError::Spec(_) => "bad_target".into(),
            TargetError::Runtime(_) => "runtime".into(),
            TargetError::Sim(_) => "sim".into(),
            TargetError::Jvm { .. } => "jvm_device".into(),
            TargetError::Setup { error, .. } | TargetError::Connect { error, .. } => {
                error.kind().to_string()
            }
        }
    }

    /// The device error kind, when a transport error caused this one.
    pub fn device_kind(&self) -> Option<ErrorKind> {
        match self {
            TargetError::Setup { error, .. } | TargetError::Connect { error, .. } => {
                Some(error.kind())
            }
            _ => None,
        }
    }
}

/// How to open a target beyond what its spec says.
#[derive(Clone, Debug, Default)]
pub struct OpenOptions {
    /// Client settings; `op_timeout` is replaced by the spec's `timeout_ms`.
    /// A tap given here sees the frames of both identities.
    pub client: ClientConfig,
    /// Records every frame of every identity (for `cetp replay`).
    pub trace: Option<Arc<WireTrace>>,
    /// Where a device the harness starts (`jvm:`) writes its output; none,
    /// a temporary file.
    pub device_log: Option<std::path::PathBuf>,
}

impl OpenOptions {
    /// Default options that record every frame in `trace` (`cetp replay`).
    pub fn traced(trace: Arc<WireTrace>) -> Self {
        OpenOptions {
            trace: Some(trace),
            ..OpenOptions::default()
        }
    }

    fn client_config(&self, identity: &str, op_timeout: Duration) -> ClientConfig {
        let mut cfg = self.client.clone();
        cfg.op_timeout = op_timeout;
        let taps: Vec<Tap> = cfg
            .tap
            .take()
            .into_iter()
            .chain(self.trace.as_ref().map(|t| t.tap(identity)))
            .collect();
        cfg.tap = match taps.len() {
            0 => None,
            1 => taps.into_iter().next(),
            _ => Some(Arc::new(move |d, b: &[u8]| {
                for t in &taps {
                    t(d, b);
                }
            })),
        };
        cfg
    }
}

/// Opens `spec` with default options. Call from a plain thread.
pub fn open(spec: &TargetSpec) -> Result<Target, TargetError> {
    open_with(spec, &OpenOptions::default())
}

/// Opens `spec`: connects every identity and checks it with `hello`.
pub fn open_with(spec: &TargetSpec, opts: &OpenOptions) -> Result<Target, TargetError> {
    let rt = SharedRuntime::new().map_err(|e| TargetError::Runtime(e.to_string()))?;
    let op_timeout = Duration::from_millis(spec.op_timeout_ms());
    let label = spec.to_string();
    let (a, b) = match spec {
        TargetSpec::Sim(s) => {
            let sim = Sim::new(s.sim_config()).map_err(|e| TargetError::Sim(e.to_string()))?;
            let a = connect_sim(&rt, &sim, "a", opts, op_timeout)?;
            let b = connect_sim(&rt, &sim, "b", opts, op_timeout)?;
            (a, Some(b))
        }
        TargetSpec::Tcp(t) => {
            let a = connect_tcp(&rt, &t.a, "a", opts, op_timeout, None)?;
            let b = match &t.b {
                Some(addr) => Some(connect_tcp(&rt, addr, "b", opts, op_timeout, None)?),
                None => None,
            };
            (a, b)
        }
        TargetSpec::Adb(s) => open_adb(&rt, s, opts, op_timeout)?,
        TargetSpec::Jvm(s) => {
            // Both connections hold the device; the last one dropped ends it.
            let device = Arc::new(jvm::start(s, opts.device_log.as_deref())?);
            let (ea, eb) = (device.a.clone(), device.b.clone());
            let keep: Arc<dyn Any + Send + Sync> = device;
            let a = connect_tcp(&rt, &ea, "a", opts, op_timeout, Some(keep.clone()))?;
            let b = connect_tcp(&rt, &eb, "b", opts, op_timeout, Some(keep))?;
            (a, Some(b))
        }
    };
    Ok(Target {
        label,
        a: Box::new(a),
        b: b.map(|d| Box::new(d) as Box<dyn cetp_vectors::device::Device>),
    })
}

/// Builds a fresh target per call from its text (`sim:mutant=NAME`,
/// `sim:variant=NAME`, ...). The shape `cetp_selftest::selftest::selftest`
/// takes.
pub fn target_factory() -> impl Fn(&str) -> Result<Target, String> + Send + Sync {
    |text| {
        let spec = TargetSpec::parse(text).map_err(|e| e.to_string())?;
        open(&spec).map_err(|e| e.to_string())
    }
}

fn checked(
    rt: &Arc<SharedRuntime>,
    identity: &str,
    endpoint: &str,
    client: ProbeClient,
    adb: Option<AdbSide>,
    keep: Option<Arc<dyn Any + Send + Sync>>,
) -> Result<ProbeDevice, TargetError> {
    let dev = ProbeDevice::new(identity, client, rt.clone(), adb, keep);
    dev.hello_raw().map_err(|error| TargetError::Connect {
        identity: identity.to_string(),
        endpoint: endpoint.to_string(),
        error,
    })?;
    Ok(dev)
}

fn connect_sim(
    rt: &Arc<SharedRuntime>,
    sim: &Arc<Sim>,
    identity: &str,
    opts: &OpenOptions,
    op_timeout: Duration,
) -> Result<ProbeDevice, TargetError> {
    let served = sim.clone();
    let name = identity.to_string();
    let stream = pipe::connect(rt.handle(), move |device_end| async move {
        served.serve_connection(&name, device_end).await
    });
    let client = ProbeClient::connect_on(
        rt.handle(),
        stream,
        opts.client_config(identity, op_timeout),
    );
    let keep: Arc<dyn Any + Send + Sync> = sim.clone();
    checked(rt, identity, "in-process", client, None, Some(keep))
}

fn connect_tcp(
    rt: &Arc<SharedRuntime>,
    addr: &str,
    identity: &str,
    opts: &OpenOptions,
    op_timeout: Duration,
    keep: Option<Arc<dyn Any + Send + Sync>>,
) -> Result<ProbeDevice, TargetError> {
    let stream = rt
        .block_on(tcp::connect(addr, op_timeout))
        .map_err(|error| TargetError::Connect {
            identity: identity.to_string(),
            endpoint: addr.to_string(),
            error,
        })?;
    let client = ProbeClient::connect_on(
        rt.handle(),
        stream,
        opts.client_config(identity, op_timeout),
    );
    checked(rt, identity, addr, client, None, keep)
}

fn open_adb(
    rt: &Arc<SharedRuntime>,
    s: &AdbSpec,
    opts: &OpenOptions,
    op_timeout: Duration,
) -> Result<(ProbeDevice, Option<ProbeDevice>), TargetError> {
    let adb = Adb::new(AdbConfig {
        server: s.server,
        serial: s.serial.clone(),
        op_timeout,
        relay_through_server: s.relay_through_server,
        install_timeout: Duration::from_millis(s.install_timeout_ms),
        ..AdbConfig::default()
    });
    let setup = |step: String, r: Result<(), TransportError>| {
        r.map_err(|error| TargetError::Setup { step, error })
    };
    setup(
        format!("adb server {}, {}", s.server, adb.device_label()),
        rt.block_on(adb.check_device()).map_err(Into::into),
    )?;
    // The probes last: Android grants them the Provider's normal permission
    // only if the app that defines it is installed first.
    install_apks(rt, &adb, s).map_err(|(step, error)| TargetError::Setup { step, error })?;
    let gate = Arc::new(std::sync::Mutex::new(()));
    let mover = s
        .clock_move
        .then(|| Arc::new(clock_move::ClockMover::new(adb.clone())));
    let a = start_and_connect(
        rt,
        &adb,
        (&gate, &mover),
        s.start,
        &s.probe_service,
        PROBE_SOCKET_A,
        "a",
        opts,
        op_timeout,
    )?;
    let b = match s.b {
        IdentityB::Off => None,
        mode => {
            let b = start_and_connect(
                rt,
                &adb,
                (&gate, &mover),
                s.start,
                &s.probe_b_service,
                PROBE_SOCKET_B,
                "b",
                opts,
                op_timeout,
            );
            match (b, mode) {
                (Ok(b), _) => Some(b),
                (Err(e), IdentityB::Required) => return Err(e),
                // The device offers one identity; cross-caller cases will
                // say so.
                (Err(_), _) => None,
            }
        }
    };
    Ok((a, b))
}

/// Installs the `install=` APKs, then the probes. Android grants the probes
/// the Provider's normal permission only if the app that defines it is
/// installed first. A probe of another signature already on the device (a
/// build from another machine) is uninstalled first and named on stderr;
/// nothing else is ever removed.
fn install_apks(
    rt: &Arc<SharedRuntime>,
    adb: &Adb,
    s: &AdbSpec,
) -> Result<(), (String, TransportError)> {
    rt.block_on(install_apks_async(adb, s))
}

/// `install_apks` for callers with their own runtime (`cetp consumer`).
pub async fn install_apks_async(adb: &Adb, s: &AdbSpec) -> Result<(), (String, TransportError)> {
    let probe_packages: Vec<&str> = [&s.probe_service, &s.probe_b_service]
        .iter()
        .filter_map(|c| c.split_once('/').map(|(p, _)| p))
        .collect();
    for (apk, replaceable) in s
        .install
        .iter()
        .map(|a| (a, &[][..]))
        .chain(s.probe_apks.iter().map(|a| (a, &probe_packages[..])))
    {
        let step = format!("installing {}", apk.display());
        let removed = adb
            .install_replacing(apk, replaceable)
            .await
            .map_err(|e| (step, e.into()))?;
        note_removed(adb, removed, apk);
    }
    if s.probe_apks.is_empty() {
        install_built_probes(adb, s, &probe_packages).await?;
    }
    Ok(())
}

fn note_removed(adb: &Adb, removed: Option<String>, apk: &Path) {
    if let Some(removed) = removed {
        eprintln!(
            "cetp: removed {removed} from {}: it was signed with another key (a probe built elsewhere); installed {} instead",
            adb.device_label(),
            apk.display()
        );
    }
}

/// The probes `scripts/build-apks.sh` built (`apk_dir=`), each installed
/// only when the device lacks it or holds another build: its installed APK
/// has another SHA-256 (another build, version or signing key), or the
/// device cannot say. After an `install=` APK every probe is installed
/// again, so that Android grants it the permission that APK defines. A
/// directory without the APKs installs nothing (the probes must then be on
/// the device already), unless it was named with `apk_dir=`.
async fn install_built_probes(
    adb: &Adb,
    s: &AdbSpec,
    probe_packages: &[&str],
) -> Result<(), (String, TransportError)> {
    let Some(dir) = &s.apk_dir else {
        return Ok(());
    };
    let named = s.apk_dir.as_deref() != Some(Path::new(spec::DEFAULT_APK_DIR));
    let wanted: Vec<(&str, &str)> = [("probe-a.apk", &s.probe_service)]
        .into_iter()
        .chain((s.b != IdentityB::Off).then_some(("probe-b.apk", &s.probe_b_service)))
        .filter_map(|(file, c)| c.split_once('/').map(|(p, _)| (file, p)))
        .collect();
    for (file, package) in wanted {
        let apk = dir.join(file);
        let step = format!("installing {} as {package}", apk.display());
        let local = match std::fs::read(&apk) {
            Ok(bytes) => hex::encode(Sha256::digest(&bytes)),
            Err(_) if !named => continue,
            Err(e) => {
                let error = AdbError::new(
                    AdbErrorKind::CommandFailed,
                    format!("apk_dir={}: cannot read {file}: {e}", dir.display()),
                );
                return Err((step, error.into()));
            }
        };
        let held = adb
            .installed_apk_sha256(package)
            .await
            .map_err(|e| (step.clone(), e.into()))?;
        if s.install.is_empty() && held.as_deref() == Some(local.as_str()) {
            continue;
        }
        eprintln!(
            "cetp: installing {} on {}: {package} is {}",
            apk.display(),
            adb.device_label(),
            match &held {
                None => "not installed or of unknown build".to_string(),
                Some(_) if !s.install.is_empty() => "installed again after install=".to_string(),
                Some(h) => format!(
                    "another build (sha256 {} there, {} here)",
                    &h[..12],
                    &local[..12]
                ),
            }
        );
        let removed = adb
            .install_package(&apk, package, probe_packages)
            .await
            .map_err(|e| (step, e.into()))?;
        note_removed(adb, removed, &apk);
    }
    Ok(())
}

/// How a probe that does not listen yet shows: through a forward, as a
/// connection closed at the first request; relayed by the server, as the
/// server's refusal of the socket.
pub(crate) fn probe_not_listening(kind: ErrorKind) -> bool {
    matches!(
        kind,
        ErrorKind::ConnectionClosed | ErrorKind::Io | ErrorKind::Adb(AdbErrorKind::CommandFailed)
    )
}

/// How often to try the probe's socket while a probe just started comes up.
pub(crate) const PROBE_RETRY: Duration = Duration::from_millis(200);

/// Starts the identity's probe (when `start`) as a long-lived `am
/// instrument -w -r` stream and connects to it. The device that comes out
/// owns the stream and ends it when dropped; on failure it is ended here.
#[allow(clippy::too_many_arguments)]
fn start_and_connect(
    rt: &Arc<SharedRuntime>,
    adb: &Adb,
    gate: Shared<'_>,
    start: bool,
    component: &str,
    socket: &str,
    identity: &str,
    opts: &OpenOptions,
    op_timeout: Duration,
) -> Result<ProbeDevice, TargetError> {
    if !start {
        return connect_adb(rt, adb, gate, socket, identity, opts, op_timeout);
    }
    let probe = rt
        .block_on(adb.start_probe(component))
        .map_err(|e| TargetError::Setup {
            step: format!("starting {component}"),
            error: e.into(),
        })?;
    // A probe just started may not listen yet: until it does, the device
    // refuses the forwarded socket and the first request sees the
    // connection closed.
    let deadline = Instant::now() + op_timeout;
    let outcome = loop {
        match connect_adb(rt, adb, gate, socket, identity, opts, op_timeout) {
            Ok(dev) => break Ok(dev),
            Err(e) if probe.has_ended() => break Err(probe_ended(e, &probe)),
            Err(e)
                if e.device_kind().is_some_and(probe_not_listening)
                    && Instant::now() + PROBE_RETRY < deadline =>
            {
                std::thread::sleep(PROBE_RETRY);
            }
            Err(e) => break Err(e),
        }
    };
    match outcome {
        Ok(dev) => {
            dev.own_instrumentation(probe);
            Ok(dev)
        }
        Err(e) => {
            let _ = rt.block_on(async {
                tokio::time::timeout(device::PROBE_STOP_TIMEOUT, probe.stop()).await
            });
            Err(e)
        }
    }
}

/// A connection error, with what `am instrument` printed when it ended
/// before the probe served (`INSTRUMENTATION_FAILED: ...` for a component
/// that is not installed, a crash report otherwise).
fn probe_ended(e: TargetError, probe: &ProbeInstrumentation) -> TargetError {
    let output = probe.output();
    let output = output.trim();
    match e {
        TargetError::Connect {
            identity,
            endpoint,
            error,
        } => TargetError::Setup {
            step: format!(
                "identity {identity} at {endpoint}: `am instrument -w -r {}` ended before the probe served ({})",
                probe.component(),
                if output.is_empty() { "no output" } else { output }
            ),
            error,
        },
        other => other,
    }
}

/// What both identities' connections to one device share: the resolve gate
/// and the clock mover (`clock=move`).
type Shared<'s> = (
    &'s Arc<std::sync::Mutex<()>>,
    &'s Option<Arc<clock_move::ClockMover>>,
);

fn connect_adb(
    rt: &Arc<SharedRuntime>,
    adb: &Adb,
    (gate, mover): Shared<'_>,
    socket: &str,
    identity: &str,
    opts: &OpenOptions,
    op_timeout: Duration,
) -> Result<ProbeDevice, TargetError> {
    let connect_error = |error| TargetError::Connect {
        identity: identity.to_string(),
        endpoint: socket.to_string(),
        error,
    };
    let (stream, port) = rt
        .block_on(adb.connect_socket(socket))
        .map_err(connect_error)?;
    let client = ProbeClient::connect_on(
        rt.handle(),
        stream,
        opts.client_config(identity, op_timeout),
    );
    // On failure the device is dropped, which removes the forward.
    checked(
        rt,
        identity,
        socket,
        client,
        Some(AdbSide::new(adb.clone(), port, gate.clone(), mover.clone())),
        None,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use cetp_proto::device::CallAnswer;
    use cetp_proto::discovery::parse_declared;
    use cetp_proto::envelope::keys;
    use cetp_proto::{Bundle, Value};
    use cetp_reference::provider::{NOTES_AUTHORITY, NOTES_PACKAGE};

    fn answer(a: CallAnswer) -> Bundle {
        match a {
            CallAnswer::Result(Some(b)) => b,
            other => panic!("{other:?}"),
        }
    }

    /// `sim:provider=notes` hosts the notes app under its own package and
    /// authority, and it answers v2 calls over the wire.
    #[test]
    fn the_notes_provider_is_discovered_and_lists_its_tools() {
        let t = open(&TargetSpec::parse("sim:provider=notes").unwrap()).unwrap();
        assert_eq!(t.label, "sim:provider=notes");
        let found = t.a.discover().unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].package, NOTES_PACKAGE);
        assert_eq!(
            parse_declared(&found[0].meta).unwrap().authority,
            NOTES_AUTHORITY
        );
        let offer = Bundle::new()
            .with(keys::CONSUMER_VERSIONS, Value::IntArray(vec![2, 1]))
            .with(keys::CONSUMER_CAPABILITIES, Value::str("[]"));
        let negotiated = answer(
            t.a.call(NOTES_AUTHORITY, "negotiate", None, Some(&offer), 5_000)
                .unwrap(),
        );
        let data = negotiated.get_json(keys::DATA).unwrap();
        assert_eq!(data["provider_id"], NOTES_PACKAGE);
        let token = data["session_token"].as_str().unwrap();
        let common = Bundle::new()
            .with(keys::PROTOCOL_VERSION, Value::Int(2))
            .with(keys::SESSION_TOKEN, Value::str(token))
            .with(
                keys::REQUEST_ID,
                Value::str("00000000-0000-4000-8000-000000000001"),
            )
            .with(keys::DEADLINE_AT_MS, Value::Long(t.a.now_ms() + 30_000));
        let tools = answer(
            t.a.call(NOTES_AUTHORITY, "list_tools", None, Some(&common), 5_000)
                .unwrap(),
        );
        let names: Vec<String> = tools.get_json(keys::DATA).unwrap()["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(
            names,
            [
                "list_notes",
                "get_note",
                "add_note",
                "delete_note",
                "archive_notes",
                "export_notes"
            ]
        );
    }

    #[test]
    fn the_factory_hosts_mutants_of_the_named_app_only() {
        let make = target_factory();
        let t = make("sim:provider=notes,mutant=delete_note_unconfirmed").unwrap();
        assert_eq!(t.label, "sim:provider=notes,mutant=delete_note_unconfirmed");
        assert_eq!(t.a.discover().unwrap()[0].package, NOTES_PACKAGE);
        let Err(e) = make("sim:mutant=delete_note_unconfirmed") else {
            panic!("a notes mutant was hosted by the reference app")
        };
        assert!(e.contains("of the reference provider"), "{e}");
    }
}
