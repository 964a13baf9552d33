//! TARGET strings of the CLI.
//!
//! ```text
//! sim[:OPTION,...]                 in-process simulated device
//!     provider=reference|notes     the app it hosts [reference]
//!     mutant=NAME variant=NAME manifest=VARIANT clock_skew_ms=N effect_delay_ms=N seed=N
//!     hang=TOOL                    the Provider never answers TOOL (a tool or method)
//! tcp:HOST:PORT[,OPTION,...]       a probe-wire endpoint
//!     b=HOST:PORT                  identity b's endpoint
//! adb[:SERIAL][,OPTION,...]        a device behind an adb server
//!     server=HOST:PORT             the adb server [default 127.0.0.1:$ANDROID_ADB_SERVER_PORT or 5037]
//!     install=PATH                 install this APK first (repeatable, in order): the Provider
//!     probe_apk=PATH               a probe APK, installed after every install= APK (repeatable)
//!     apk_dir=DIR|off              without probe_apk=: the built probes DIR/probe-a.apk and
//!                                  DIR/probe-b.apk (scripts/build-apks.sh), installed when the
//!                                  device lacks them or holds another build [target/apk, if present]
//!     probe=COMPONENT              the probe instrumentation to start [com.clawseed.probe/com.clawseed.probe.ProbeInstrumentation]
//!     probe_b=COMPONENT            the second probe's instrumentation [com.clawseed.probe.b/com.clawseed.probe.ProbeInstrumentation]
//!     start=0                      do not start the probe services
//!     b=auto|on|off                identity b: try it / require it / skip it [auto]
//!     install_timeout_ms=N         per APK: push, pm install (and pm uninstall of a foreign probe) [120000]
//!     relay=server|forward         reach the probe's socket relayed by the adb server, or
//!                                  through `adb forward` [server for a remote server, else forward]
//!     clock=move|fixed             may the harness set the device's wall clock (as root: `adb root`
//!                                  or `su`) when a case needs time to pass; set back at the end [fixed]
//! jvm:sample|APP.apk|JAR[,JAR…][,OPTION,...]
//!                                  the JVM device (scripts/jvm-device.sh), started for the run
//!                                  with both identities on loopback ports, stopped after; see
//!                                  the `jvm` submodule for its options
//! common:
//!     timeout_ms=N                 per-op timeout (hello, discover, adb commands) [15000]
//! ```
//!
//! The probes ask for the Provider's normal permission
//! `com.clawseed.permission.ACCESS_TOOLS`, which Android grants only if the
//! app defining it is already installed: that is why `probe_apk=` APKs are
//! installed last, whatever the order of the options.
//!
//! Without `probe_apk=`, the probes built by `scripts/build-apks.sh` (`apk_dir=`)
//! are installed only where needed: a probe whose installed APK has another
//! SHA-256 than the built one (another build, version or signer), or that is
//! missing, is installed; one that is this build is left alone. After an
//! `install=` APK they are installed again whatever the device holds, for the
//! permission above.
//!
//! After the scheme, items are separated by `,`; an item with `=` is an
//! option, the one item without is the endpoint (tcp) or the serial (adb).
//! IPv6 hosts are bracketed: `tcp:[::1]:7000`.

use cetp_reference::provider::{FixtureSet, ManifestVariant};
use std::collections::BTreeMap;
use std::fmt;
use std::net::{SocketAddr, SocketAddrV4};
use std::path::PathBuf;

mod jvm;
pub use jvm::{JvmBuild, JvmCode, JvmConsumer, JvmSpec, DEFAULT_READY_TIMEOUT_MS};

/// The TARGET forms, for every command's `--help` that takes `--target`
/// (one text, so no command's help lags the parser below; a test parses
/// each example it gives).
pub const TARGET_FORMS: &str = "\
TARGET forms (--target):
  sim[:OPTION,...]               the simulated device, in process
      provider=reference|notes   the app it hosts [reference]
      mutant=NAME variant=NAME   a seeded defect or a legal variant (`cetp list mutants|variants`)
      manifest=VARIANT hang=TOOL clock_skew_ms=N effect_delay_ms=N seed=N
  tcp:HOST:PORT[,b=HOST:PORT]    a probe-wire endpoint (`cetp sim`, a JVM device, a forwarded probe);
                                 b= is identity b's endpoint
  adb[:SERIAL][,OPTION,...]      a device behind an adb server
      server=HOST:PORT           the adb server [127.0.0.1:$ANDROID_ADB_SERVER_PORT or 5037]
      install=APK probe_apk=APK  APKs to install first (repeatable; probe APKs last)
      probe=COMPONENT probe_b=COMPONENT start=0 b=auto|on|off relay=server|forward
      clock=move|fixed           may the harness set the wall clock as root (`adb root`) [fixed]
      install_timeout_ms=N
  jvm:sample|APP.apk|JAR[,JAR...][,OPTION,...]
                                 the JVM device (scripts/jvm-device.sh, or $CETP_JVM_DEVICE), started
                                 on loopback with both identities and stopped after; paths are
                                 relative to the current directory and hold no ','
      defect=NAME                a seeded defect of the built-in Java sample (jvm:sample)
      class=CLASS authority=AUTH package=PKG permission=PERM manifest=FILE
      meta=KEY=VALUE provider_meta=KEY=VALUE classpath=CP   (repeatable)
      jvm_prop=KEY=VALUE         a system property for the Provider's code (repeatable)
      consumer_jar=JAR consumer_apk=APK consumer_class=CLASS consumer_package=PKG
                                 a Consumer under test (`cetp consumer`): its code and its adapter
      build=auto|yes|no          build the device first: if never built / always / never [auto]
      ready_timeout_ms=N         how long the device may take to be ready [300000]
  any form: timeout_ms=N         per-op timeout [15000]
Examples: sim:mutant=no_dedupe  tcp:127.0.0.1:7000,b=127.0.0.1:7001  adb:emulator-5554,clock=move
          jvm:sample,defect=no-dedupe  jvm:app.apk  jvm:build/libs/provider.jar,manifest=AndroidManifest.xml";

/// Example targets [`TARGET_FORMS`] shows, each of which parses.
pub const TARGET_EXAMPLES: &[&str] = &[
    "sim:mutant=no_dedupe",
    "tcp:127.0.0.1:7000,b=127.0.0.1:7001",
    "adb:emulator-5554,clock=move",
    "jvm:sample,defect=no-dedupe",
];

/// `probe=`: the probe app's instrumentation, which serves identity `a`.
pub const DEFAULT_PROBE_SERVICE: &str =
    "com.clawseed.probe/com.clawseed.probe.ProbeInstrumentation";
/// `probe_b=`: the second probe APK's instrumentation, a second app uid
/// for identity `b`.
pub const DEFAULT_PROBE_B_SERVICE: &str =
    "com.clawseed.probe.b/com.clawseed.probe.ProbeInstrumentation";
/// `timeout_ms=`: how long `hello`, `discover` and an adb command may take.
pub const DEFAULT_OP_TIMEOUT_MS: u64 = 15_000;

/// A parsed TARGET string: which device to run against and how to reach it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TargetSpec {
    /// `sim[:...]`: the simulated device, in process.
    Sim(SimSpec),
    /// `tcp:HOST:PORT[,...]`: a probe-wire endpoint.
    Tcp(TcpSpec),
    /// `adb[:SERIAL][,...]`: a device behind an adb server.
    Adb(AdbSpec),
    /// `jvm:sample|APP.apk|JAR…[,...]`: the JVM device, started for the run.
    Jvm(JvmSpec),
}

/// `sim[:OPTION,...]`: how the in-process simulated device is set up
/// ([`cetp_sim::SimConfig`]'s fields of the same names).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimSpec {
    /// The app the device hosts; `mutant` names one of its mutants.
    pub provider: FixtureSet,
    /// `mutant=`: host that mutant of the app instead.
    pub mutant: Option<String>,
    /// `variant=`: host that legal variant of the reference instead.
    pub variant: Option<String>,
    /// `manifest=`: what the app's manifest declares.
    pub manifest: ManifestVariant,
    /// `clock_skew_ms=`: device clock minus host clock.
    pub clock_skew_ms: i64,
    /// `effect_delay_ms=`: real time a mutation takes in the Provider.
    pub effect_delay_ms: u64,
    /// `seed=`: seeds the Provider's tokens.
    pub seed: u64,
    /// `hang=`: a tool or method the Provider never answers.
    pub hang: Option<String>,
    /// `timeout_ms=`: the per-op timeout.
    pub op_timeout_ms: u64,
}

impl Default for SimSpec {
    fn default() -> Self {
        let d = cetp_sim::SimConfig::default();
        SimSpec {
            provider: d.provider,
            mutant: d.mutant,
            variant: d.variant,
            manifest: d.manifest,
            clock_skew_ms: d.clock_skew_ms,
            effect_delay_ms: d.effect_delay_ms,
            seed: d.seed,
            hang: d.hang,
            op_timeout_ms: DEFAULT_OP_TIMEOUT_MS,
        }
    }
}

impl SimSpec {
    /// The simulated device this spec sets up.
    pub fn sim_config(&self) -> cetp_sim::SimConfig {
        cetp_sim::SimConfig {
            provider: self.provider,
            mutant: self.mutant.clone(),
            variant: self.variant.clone(),
            manifest: self.manifest,
            clock_skew_ms: self.clock_skew_ms,
            effect_delay_ms: self.effect_delay_ms,
            seed: self.seed,
            hang: self.hang.clone(),
            // An in-process target hosts no Provider for a host to script.
            hosting: cetp_sim::Hosting::Open,
            fixed_clock: false,
            session_ttl_ms: None,
            resume_token_ttl_ms: None,
            root: cetp_sim::Root::None,
            provider_elapsed_clock: false,
        }
    }
}

/// `tcp:HOST:PORT[,OPTION,...]`: a probe-wire endpoint per identity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcpSpec {
    /// `HOST:PORT` of identity a.
    pub a: String,
    /// `b=`: `HOST:PORT` of identity b; none, no identity b.
    pub b: Option<String>,
    /// `timeout_ms=`: the per-op timeout.
    pub op_timeout_ms: u64,
}

/// Whether to connect identity b.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdentityB {
    /// Connect it if the device offers it.
    Auto,
    /// Fail to open when it cannot be connected.
    Required,
    /// Do not connect it: the cases that need it are not judged.
    Off,
}

/// `adb[:SERIAL][,OPTION,...]`: a device behind an adb server, and what to
/// install and start on it before the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdbSpec {
    /// The device's serial; none, the only device the server has.
    pub serial: Option<String>,
    /// `server=`: the adb server.
    pub server: SocketAddrV4,
    /// `install=`: APKs (the Provider) installed first, in order.
    pub install: Vec<PathBuf>,
    /// Probe APKs, installed after `install`.
    pub probe_apks: Vec<PathBuf>,
    /// `apk_dir=`: where the built probes are (`probe-a.apk`, `probe-b.apk`),
    /// installed when `probe_apks` is empty and the device lacks this
    /// build; `None` (`apk_dir=off`) installs nothing unasked.
    pub apk_dir: Option<PathBuf>,
    /// `probe=`: the instrumentation component of identity a's probe.
    pub probe_service: String,
    /// `probe_b=`: the instrumentation component of identity b's probe.
    pub probe_b_service: String,
    /// `start=0` makes it false: the probes are already running.
    pub start: bool,
    /// `b=`: whether to connect identity b.
    pub b: IdentityB,
    /// `timeout_ms=`: the per-op timeout, adb commands included.
    pub op_timeout_ms: u64,
    /// `relay=`: `Some(true)` relayed by the server, `Some(false)` through
    /// `adb forward`, `None` by the server's address.
    pub relay_through_server: Option<bool>,
    /// `install_timeout_ms=`: pushing and installing one APK.
    pub install_timeout_ms: u64,
    /// `clock=move`: the harness may set the device's wall clock (as root)
    /// when a case needs time to pass, and sets it back at the end;
    /// `clock=fixed` (the default) never touches it.
    pub clock_move: bool,
}

/// Where `scripts/build-apks.sh` leaves the APKs, from the repository's root.
pub const DEFAULT_APK_DIR: &str = "target/apk";

/// How long pushing and installing one APK may take by default: a large
/// APK, Play Protect's scan, a vendor's "install via USB" prompt.
pub const DEFAULT_INSTALL_TIMEOUT_MS: u64 = 120_000;

impl Default for AdbSpec {
    fn default() -> Self {
        AdbSpec {
            serial: None,
            server: cetp_transport::adb::default_server(),
            install: Vec::new(),
            probe_apks: Vec::new(),
            apk_dir: Some(PathBuf::from(DEFAULT_APK_DIR)),
            probe_service: DEFAULT_PROBE_SERVICE.into(),
            probe_b_service: DEFAULT_PROBE_B_SERVICE.into(),
            start: true,
            b: IdentityB::Auto,
            op_timeout_ms: DEFAULT_OP_TIMEOUT_MS,
            relay_through_server: None,
            install_timeout_ms: DEFAULT_INSTALL_TIMEOUT_MS,
            clock_move: false,
        }
    }
}

/// A TARGET string that does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("bad target {text:?}: {reason}")]
pub struct SpecError {
    /// The string as given.
    pub text: String,
    /// What is wrong with it.
    pub reason: String,
}

struct Items {
    /// The items without `=`: one at most, except for `jvm` (its code).
    positionals: Vec<String>,
    options: Vec<(String, String)>,
}

fn split_items(text: &str, rest: &str, many: bool) -> Result<Items, SpecError> {
    let err = |reason: String| SpecError {
        text: text.to_string(),
        reason,
    };
    let mut items = Items {
        positionals: Vec::new(),
        options: Vec::new(),
    };
    for item in rest.split(',').filter(|s| !s.is_empty()) {
        match item.split_once('=') {
            Some((k, v)) => items
                .options
                .push((k.trim().to_string(), v.trim().to_string())),
            None if many || items.positionals.is_empty() => {
                items.positionals.push(item.trim().to_string())
            }
            None => return Err(err(format!("unexpected {item:?} (options are KEY=VALUE)"))),
        }
    }
    Ok(items)
}

fn number<T: std::str::FromStr>(text: &str, key: &str, v: &str) -> Result<T, SpecError> {
    v.parse().map_err(|_| SpecError {
        text: text.to_string(),
        reason: format!("{key}={v:?} is not a number"),
    })
}

/// Checks `HOST:PORT` (the host is resolved at connect time).
fn endpoint(text: &str, v: &str) -> Result<String, SpecError> {
    let bad = || SpecError {
        text: text.to_string(),
        reason: format!("{v:?} is not HOST:PORT"),
    };
    if v.parse::<SocketAddr>().is_ok() {
        return Ok(v.to_string());
    }
    let (host, port) = v.rsplit_once(':').ok_or_else(bad)?;
    if host.is_empty() || host.contains(':') || port.parse::<u16>().is_err() {
        return Err(bad());
    }
    Ok(v.to_string())
}

/// `sim[:OPTIONS]`: the simulated Provider, its mutant or variant, its
/// manifest, clock and seed; a named mutant or variant must exist.
fn parse_sim(
    o: &mut Options,
    positional: Option<String>,
    op_timeout_ms: u64,
) -> Result<SimSpec, SpecError> {
    if let Some(p) = positional {
        return Err(o.err(format!("sim takes only KEY=VALUE options, found {p:?}")));
    }
    let mut s = SimSpec {
        op_timeout_ms,
        ..SimSpec::default()
    };
    if let Some(v) = o.take("provider")? {
        s.provider = cetp_sim::parse_provider(&v).map_err(|e| o.err(e.to_string()))?;
    }
    if let Some(v) = o.take("mutant")? {
        s.mutant = Some(v);
    }
    if let Some(v) = o.take("variant")? {
        s.variant = Some(v);
    }
    if let Some(v) = o.take("manifest")? {
        s.manifest = cetp_sim::parse_manifest_variant(&v).map_err(|e| o.err(e.to_string()))?;
    }
    if let Some(v) = o.number("clock_skew_ms")? {
        s.clock_skew_ms = v;
    }
    if let Some(v) = o.number("effect_delay_ms")? {
        s.effect_delay_ms = v;
    }
    if let Some(v) = o.number("seed")? {
        s.seed = v;
    }
    if let Some(v) = o.take("hang")? {
        s.hang = Some(v);
    }
    if let Some(m) = &s.mutant {
        cetp_sim::mutant_of(s.provider, m).map_err(|e| o.err(e.to_string()))?;
    }
    if let Some(v) = &s.variant {
        cetp_sim::variant_named(v).map_err(|e| o.err(e.to_string()))?;
    }
    Ok(s)
}

/// `adb[:SERIAL][,OPTIONS]`: the adb server, APKs to install, the probe
/// services, starting them, the relay and identity B.
fn parse_adb(
    o: &mut Options,
    serial: Option<String>,
    op_timeout_ms: u64,
) -> Result<AdbSpec, SpecError> {
    let mut s = AdbSpec {
        serial,
        op_timeout_ms,
        ..AdbSpec::default()
    };
    if let Some(v) = o.take("server")? {
        s.server = v
            .parse()
            .map_err(|_| o.err(format!("server={v:?} is not IPV4:PORT")))?;
    }
    s.install = o
        .take_all("install")
        .into_iter()
        .map(PathBuf::from)
        .collect();
    s.probe_apks = o
        .take_all("probe_apk")
        .into_iter()
        .map(PathBuf::from)
        .collect();
    if let Some(v) = o.take("apk_dir")? {
        s.apk_dir = (v != "off").then(|| PathBuf::from(v));
    }
    if let Some(v) = o.take("probe")? {
        s.probe_service = v;
    }
    if let Some(v) = o.take("probe_b")? {
        s.probe_b_service = v;
    }
    if let Some(v) = o.take("start")? {
        s.start = match v.as_str() {
            "1" | "on" | "true" => true,
            "0" | "off" | "false" => false,
            _ => return Err(o.err(format!("start={v:?}: use 1 or 0"))),
        };
    }
    if let Some(v) = o.number("install_timeout_ms")? {
        s.install_timeout_ms = v;
    }
    if let Some(v) = o.take("relay")? {
        s.relay_through_server = match v.as_str() {
            "server" => Some(true),
            "forward" => Some(false),
            _ => return Err(o.err(format!("relay={v:?}: use server or forward"))),
        };
    }
    if let Some(v) = o.take("clock")? {
        s.clock_move = match v.as_str() {
            "move" => true,
            "fixed" => false,
            _ => return Err(o.err(format!("clock={v:?}: use move or fixed"))),
        };
    }
    if let Some(v) = o.take("b")? {
        s.b = match v.as_str() {
            "auto" => IdentityB::Auto,
            "on" | "1" | "required" => IdentityB::Required,
            "off" | "0" => IdentityB::Off,
            _ => return Err(o.err(format!("b={v:?}: use auto, on or off"))),
        };
    }
    Ok(s)
}

/// The `KEY=VALUE` options of a target spec, taken one by one; what is
/// left once a kind has taken its own is unknown.
struct Options<'t> {
    text: &'t str,
    opts: BTreeMap<String, Vec<String>>,
}

impl Options<'_> {
    fn err(&self, reason: String) -> SpecError {
        SpecError {
            text: self.text.to_string(),
            reason,
        }
    }

    /// The option `k`, given at most once.
    fn take(&mut self, k: &str) -> Result<Option<String>, SpecError> {
        match self.opts.remove(k) {
            None => Ok(None),
            Some(mut vs) if vs.len() == 1 => Ok(vs.pop()),
            Some(_) => Err(self.err(format!("{k} given more than once"))),
        }
    }

    /// Every value of the repeatable option `k`.
    fn take_all(&mut self, k: &str) -> Vec<String> {
        self.opts.remove(k).unwrap_or_default()
    }

    fn number<T: std::str::FromStr>(&mut self, k: &str) -> Result<Option<T>, SpecError> {
        self.take(k)?.map(|v| number(self.text, k, &v)).transpose()
    }
}

impl TargetSpec {
    /// Parses a TARGET string (the grammar is in this module's docs).
    pub fn parse(text: &str) -> Result<TargetSpec, SpecError> {
        let t = text.trim();
        // `adb,server=...` (no serial) and `sim,seed=1` read like `adb:...`.
        let split_at = t.find([':', ',']).unwrap_or(t.len());
        let (scheme, rest) = (&t[..split_at], t.get(split_at + 1..).unwrap_or(""));
        let items = split_items(text, rest, scheme == "jvm")?;
        let positional = items.positionals.first().cloned();
        let mut o = Options {
            text,
            opts: BTreeMap::new(),
        };
        for (k, v) in items.options {
            o.opts.entry(k).or_default().push(v);
        }
        let op_timeout_ms = o.number("timeout_ms")?.unwrap_or(DEFAULT_OP_TIMEOUT_MS);
        let spec = match scheme {
            "sim" => TargetSpec::Sim(parse_sim(&mut o, positional, op_timeout_ms)?),
            "tcp" => {
                let a = positional
                    .ok_or_else(|| o.err("tcp needs HOST:PORT".into()))?;
                let b = o.take("b")?.map(|v| endpoint(text, &v)).transpose()?;
                TargetSpec::Tcp(TcpSpec {
                    a: endpoint(text, &a)?,
                    b,
                    op_timeout_ms,
                })
            }
            "adb" => TargetSpec::Adb(parse_adb(&mut o, positional, op_timeout_ms)?),
            "jvm" => TargetSpec::Jvm(jvm::parse_jvm(
                &mut o,
                items.positionals,
                op_timeout_ms,
            )?),
            other => {
                return Err(o.err(format!(
                    "unknown kind {other:?}; use sim[:OPTIONS], tcp:HOST:PORT[,b=HOST:PORT], adb[:SERIAL][,server=HOST:PORT] or jvm:sample|APP.apk|JAR[,OPTIONS]"
                )))
            }
        };
        if let Some(k) = o.opts.keys().next() {
            return Err(o.err(format!("unknown option {k:?} for {scheme}")));
        }
        Ok(spec)
    }

    /// The per-op timeout the spec asks for.
    pub fn op_timeout_ms(&self) -> u64 {
        match self {
            TargetSpec::Sim(s) => s.op_timeout_ms,
            TargetSpec::Tcp(s) => s.op_timeout_ms,
            TargetSpec::Adb(s) => s.op_timeout_ms,
            TargetSpec::Jvm(s) => s.op_timeout_ms,
        }
    }
}

/// A `cetp consumer` TARGET, read by [`TargetSpec::parse`] itself: the
/// same forms, plus `consumer=NAME` (the Consumer mutant the simulated
/// device plays, or the Consumer's name on a device) and `peer=HOST:PORT`,
/// the Consumer side's name for `b=` (the probe of identity b, which
/// hosts the peer Provider). One parser, so that `run`, `fuzz`, `lock`,
/// `init` and `consumer` accept the same targets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumerTarget {
    /// Where the Consumer is reached.
    pub spec: TargetSpec,
    /// `consumer=`: its name (a Consumer mutant on `sim`).
    pub consumer: Option<String>,
}

impl ConsumerTarget {
    /// Reads a Consumer TARGET; see [`ConsumerTarget`].
    pub fn parse(text: &str) -> Result<ConsumerTarget, SpecError> {
        let t = text.trim();
        let split_at = t.find([':', ',']).unwrap_or(t.len());
        let (scheme, rest) = (&t[..split_at], t.get(split_at + 1..).unwrap_or(""));
        let mut consumer = None;
        let mut kept = Vec::new();
        for item in rest.split(',').filter(|i| !i.is_empty()) {
            match item.split_once('=') {
                Some(("consumer", name)) => consumer = Some(name.to_string()),
                Some(("peer", p)) => kept.push(format!("b={p}")),
                _ => kept.push(item.to_string()),
            }
        }
        let provider_side = if kept.is_empty() {
            scheme.to_string()
        } else {
            format!("{scheme}:{}", kept.join(","))
        };
        let spec = TargetSpec::parse(&provider_side).map_err(|e| SpecError {
            text: text.to_string(),
            reason: e.reason,
        })?;
        Ok(ConsumerTarget { spec, consumer })
    }
}

impl std::str::FromStr for TargetSpec {
    type Err = SpecError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TargetSpec::parse(s)
    }
}

/// The canonical text, which parses back to the same spec (used as the
/// target's label in reports).
impl fmt::Display for TargetSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut opts: Vec<String> = Vec::new();
        let head = match self {
            TargetSpec::Sim(s) => sim_head(s, &mut opts),
            TargetSpec::Tcp(s) => {
                if let Some(b) = &s.b {
                    opts.push(format!("b={b}"));
                }
                format!("tcp:{}", s.a)
            }
            TargetSpec::Adb(s) => adb_head(s, &mut opts),
            TargetSpec::Jvm(s) => s.head(&mut opts),
        };
        if self.op_timeout_ms() != DEFAULT_OP_TIMEOUT_MS {
            opts.push(format!("timeout_ms={}", self.op_timeout_ms()));
        }
        f.write_str(&head)?;
        if !opts.is_empty() {
            let sep = if head.contains(':') || matches!(self, TargetSpec::Adb(_)) {
                ","
            } else {
                ":"
            };
            write!(f, "{sep}{}", opts.join(","))?;
        }
        Ok(())
    }
}

/// The head of a `sim` spec's text (`sim`), its options that differ from
/// the defaults pushed to `opts` in their canonical order; split from
/// `Display::fmt` to keep one function per target kind.
fn sim_head(s: &SimSpec, opts: &mut Vec<String>) -> String {
    let d = SimSpec::default();
    if s.provider != d.provider {
        opts.push(format!("provider={}", s.provider));
    }
    if let Some(m) = &s.mutant {
        opts.push(format!("mutant={m}"));
    }
    if let Some(v) = &s.variant {
        opts.push(format!("variant={v}"));
    }
    if s.manifest != d.manifest {
        opts.push(format!(
            "manifest={}",
            cetp_sim::manifest_variant_name(s.manifest)
        ));
    }
    if s.clock_skew_ms != d.clock_skew_ms {
        opts.push(format!("clock_skew_ms={}", s.clock_skew_ms));
    }
    if s.effect_delay_ms != d.effect_delay_ms {
        opts.push(format!("effect_delay_ms={}", s.effect_delay_ms));
    }
    if s.seed != d.seed {
        opts.push(format!("seed={}", s.seed));
    }
    if let Some(h) = &s.hang {
        opts.push(format!("hang={h}"));
    }
    "sim".to_string()
}

/// The head of an `adb` spec's text (`adb` or `adb:SERIAL`), its options
/// that differ from the defaults pushed to `opts` in their canonical order;
/// split from `Display::fmt` to keep one function per target kind.
fn adb_head(s: &AdbSpec, opts: &mut Vec<String>) -> String {
    let d = AdbSpec::default();
    if s.server != d.server {
        opts.push(format!("server={}", s.server));
    }
    for p in &s.install {
        opts.push(format!("install={}", p.display()));
    }
    for p in &s.probe_apks {
        opts.push(format!("probe_apk={}", p.display()));
    }
    if s.apk_dir != d.apk_dir {
        opts.push(match &s.apk_dir {
            Some(p) => format!("apk_dir={}", p.display()),
            None => "apk_dir=off".into(),
        });
    }
    if s.probe_service != d.probe_service {
        opts.push(format!("probe={}", s.probe_service));
    }
    if s.probe_b_service != d.probe_b_service {
        opts.push(format!("probe_b={}", s.probe_b_service));
    }
    if !s.start {
        opts.push("start=0".into());
    }
    match s.b {
        IdentityB::Auto => {}
        IdentityB::Required => opts.push("b=on".into()),
        IdentityB::Off => opts.push("b=off".into()),
    }
    if s.install_timeout_ms != d.install_timeout_ms {
        opts.push(format!("install_timeout_ms={}", s.install_timeout_ms));
    }
    match s.relay_through_server {
        None => {}
        Some(true) => opts.push("relay=server".into()),
        Some(false) => opts.push("relay=forward".into()),
    }
    if s.clock_move {
        opts.push("clock=move".into());
    }
    match &s.serial {
        Some(serial) => format!("adb:{serial}"),
        None => "adb".to_string(),
    }
}

#[cfg(test)]
mod consumer_target_tests {
    use super::*;

    #[test]
    fn a_consumer_target_is_a_provider_target_with_its_consumer_and_peer() {
        let c = ConsumerTarget::parse("sim:consumer=obeys_description_call").unwrap();
        assert_eq!(c.spec, TargetSpec::Sim(SimSpec::default()));
        assert_eq!(c.consumer.as_deref(), Some("obeys_description_call"));
        let c = ConsumerTarget::parse("sim").unwrap();
        assert_eq!(
            (c.spec, c.consumer),
            (TargetSpec::Sim(SimSpec::default()), None)
        );
        let c = ConsumerTarget::parse("tcp:127.0.0.1:7000,peer=127.0.0.1:7001,consumer=x").unwrap();
        let TargetSpec::Tcp(t) = c.spec else {
            panic!("{c:?}")
        };
        assert_eq!(
            (t.a.as_str(), t.b.as_deref(), c.consumer.as_deref()),
            ("127.0.0.1:7000", Some("127.0.0.1:7001"), Some("x"))
        );
        let c =
            ConsumerTarget::parse("adb:emulator-5554,server=127.0.0.1:5037,consumer=y").unwrap();
        assert!(
            matches!(c.spec, TargetSpec::Adb(ref a) if a.serial.as_deref() == Some("emulator-5554"))
        );
        // The Provider side's errors, with the text as given.
        let e = ConsumerTarget::parse("tcp:nowhere,consumer=z").unwrap_err();
        assert_eq!(e.text, "tcp:nowhere,consumer=z");
        assert!(ConsumerTarget::parse("sim:bogus=1").is_err());
        assert!(ConsumerTarget::parse("serial:x").is_err());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(text: &str) -> TargetSpec {
        let spec = TargetSpec::parse(text).unwrap_or_else(|e| panic!("{e}"));
        let again = TargetSpec::parse(&spec.to_string()).unwrap();
        assert_eq!(spec, again, "{text} -> {spec}");
        spec
    }

    #[test]
    fn the_help_text_names_every_option_and_its_examples_parse() {
        for e in TARGET_EXAMPLES {
            round_trip(e);
            assert!(TARGET_FORMS.contains(e), "{e} is not shown");
        }
        // Every option a parser takes is in the help text.
        for opt in [
            "provider=",
            "mutant=",
            "variant=",
            "manifest=",
            "hang=",
            "clock_skew_ms=",
            "effect_delay_ms=",
            "seed=",
            "b=HOST:PORT",
            "server=",
            "install=",
            "probe_apk=",
            "probe=",
            "probe_b=",
            "start=0",
            "b=auto",
            "relay=",
            "clock=move",
            "install_timeout_ms=",
            "timeout_ms=",
            "jvm:sample",
            "APP.apk",
            "defect=",
            "class=",
            "authority=",
            "package=",
            "permission=",
            "manifest=FILE",
            "meta=",
            "provider_meta=",
            "classpath=",
            "jvm_prop=",
            "build=auto|yes|no",
            "ready_timeout_ms=",
            "$CETP_JVM_DEVICE",
        ] {
            assert!(
                TARGET_FORMS.contains(opt),
                "{opt} missing from TARGET_FORMS"
            );
        }
    }

    #[test]
    fn sim_specs() {
        assert_eq!(round_trip("sim"), TargetSpec::Sim(SimSpec::default()));
        let TargetSpec::Sim(s) = round_trip(
            "sim:mutant=session_not_checked,manifest=v1-only,seed=9,clock_skew_ms=-5000",
        ) else {
            panic!()
        };
        assert_eq!(s.mutant.as_deref(), Some("session_not_checked"));
        assert_eq!(s.manifest, ManifestVariant::V1Only);
        assert_eq!((s.seed, s.clock_skew_ms), (9, -5000));
        assert_eq!(
            TargetSpec::Sim(s).to_string(),
            "sim:mutant=session_not_checked,manifest=v1-only,clock_skew_ms=-5000,seed=9"
        );
        let TargetSpec::Sim(n) = round_trip("sim:mutant=delete_note_unconfirmed,provider=notes")
        else {
            panic!()
        };
        assert_eq!(n.provider, FixtureSet::Notes);
        assert_eq!(n.sim_config().provider, FixtureSet::Notes);
        assert_eq!(
            TargetSpec::Sim(n).to_string(),
            "sim:provider=notes,mutant=delete_note_unconfirmed"
        );
        assert_eq!(
            round_trip("sim:provider=reference"),
            TargetSpec::Sim(SimSpec::default())
        );
        let e = TargetSpec::parse("sim:provider=todo").unwrap_err();
        assert!(e.reason.contains("reference, notes"), "{e}");
        assert!(TargetSpec::parse("sim:provider=notes,provider=notes").is_err());
        assert!(TargetSpec::parse("sim:manifest=v3").is_err());
        assert!(TargetSpec::parse("sim:frobnicate=1").is_err());
        assert!(TargetSpec::parse("sim:seed=x").is_err());
    }

    #[test]
    fn tcp_specs() {
        let TargetSpec::Tcp(t) = round_trip("tcp:127.0.0.1:7000,b=127.0.0.1:7001") else {
            panic!()
        };
        assert_eq!(t.a, "127.0.0.1:7000");
        assert_eq!(t.b.as_deref(), Some("127.0.0.1:7001"));
        round_trip("tcp:[::1]:7000");
        round_trip("tcp:device.lan:7000,timeout_ms=2000");
        round_trip("adb,relay=server");
        round_trip("adb,install_timeout_ms=600000");
        round_trip("adb:emulator-5554,relay=forward");
        for bad in ["tcp", "tcp:host", "tcp:host:x", "tcp:::1:7"] {
            assert!(TargetSpec::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn adb_specs() {
        let TargetSpec::Adb(a) = round_trip("adb") else {
            panic!()
        };
        assert_eq!(a.serial, None);
        let TargetSpec::Adb(a) = round_trip(
            "adb:127.0.0.1:5555,server=127.0.0.1:5038,install=/tmp/p.apk,install=/tmp/q.apk,b=off",
        ) else {
            panic!()
        };
        assert_eq!(a.serial.as_deref(), Some("127.0.0.1:5555"));
        assert_eq!(a.server, "127.0.0.1:5038".parse().unwrap());
        assert_eq!(
            a.install,
            vec![PathBuf::from("/tmp/p.apk"), PathBuf::from("/tmp/q.apk")]
        );
        assert_eq!(a.b, IdentityB::Off);
        let TargetSpec::Adb(a) =
            round_trip("adb,probe_apk=/tmp/a.apk,install=/tmp/provider.apk,probe_apk=/tmp/b.apk")
        else {
            panic!()
        };
        assert_eq!(a.install, vec![PathBuf::from("/tmp/provider.apk")]);
        assert_eq!(
            a.probe_apks,
            vec![PathBuf::from("/tmp/a.apk"), PathBuf::from("/tmp/b.apk")]
        );
        let TargetSpec::Adb(a) = round_trip("adb,apk_dir=off") else {
            panic!()
        };
        assert_eq!(a.apk_dir, None);
        let TargetSpec::Adb(a) = round_trip("adb,apk_dir=/tmp/apks") else {
            panic!()
        };
        assert_eq!(a.apk_dir, Some(PathBuf::from("/tmp/apks")));
        let TargetSpec::Adb(a) = round_trip("adb") else {
            panic!()
        };
        assert_eq!(a.apk_dir, Some(PathBuf::from(DEFAULT_APK_DIR)));
        let TargetSpec::Adb(a) = round_trip("adb,server=127.0.0.1:6000,start=0") else {
            panic!()
        };
        assert_eq!((a.serial, a.start), (None, false));
        // The clock is the user's: fixed unless the target says move.
        let TargetSpec::Adb(a) = round_trip("adb:emulator-5554,clock=move") else {
            panic!()
        };
        assert!(a.clock_move);
        let TargetSpec::Adb(a) = TargetSpec::parse("adb,clock=fixed").unwrap() else {
            panic!()
        };
        assert!(!a.clock_move);
        assert!(TargetSpec::parse("adb,clock=root").is_err());
        assert!(TargetSpec::parse("adb:X,server=localhost").is_err());
        assert!(TargetSpec::parse("adb:X,Y").is_err());
        assert!(TargetSpec::parse("usb:X").is_err());
    }
}
