//! `cetp consumer` and `cetp consumer-act`: the Consumer half of the
//! suite. The harness plays the scripted hostile Provider of every scenario
//! in `vectors/consumer/`, the Consumer under test acts, and the findings
//! are reported with the same event stream, reporters and exit codes as
//! `cetp run`.
//!
//! Targets: `sim[:consumer=NAME]` (the reference Consumer or a mutant,
//! in-process, on a manual clock: everything is judged), and
//! `tcp:HOST:PORT[,peer=HOST:PORT][,consumer=NAME]` (any device offering
//! `host_provider` and `consumer_act`, e.g. `cetp sim --listen`, with its
//! second probe as `peer` where it hosts only its own authority; descriptor
//! reads are not visible there, their closes only as the device reports
//! them, and scenarios the wire cannot script are not judged).

use crate::failure::{infra, now_ms, usage, Failure};
use crate::inputs::vectors_or_default;
use cetp_conformance::exit::ExitCode;
use cetp_consumer::runner::{self, ConsumerPlace};
use cetp_consumer::{scenario::Scenario, ScenarioResult};
use cetp_reference::consumer::{ConsumerConfig, ConsumerMutant};
use cetp_report::terminal::Terminal;
use cetp_vectors::event::Fanout;
use std::path::PathBuf;

/// `cetp consumer`'s options; see `cetp consumer --help` for each.
#[derive(Clone, Debug)]
pub struct ConsumerOptions {
    /// Where the Consumer under test is (`sim[:consumer=NAME]`, `tcp:…`,
    /// `adb…`).
    pub target: String,
    /// Where the reports go.
    pub report_dir: Option<PathBuf>,
    /// Only scenarios whose id matches.
    pub only: Vec<String>,
    /// Scenarios whose id matches are skipped.
    pub skip: Vec<String>,
    /// Seed of the in-process Consumer's request ids.
    pub seed: u64,
    /// The vectors directory (the shipped one when none).
    pub vectors: Option<PathBuf>,
    /// Print passing scenarios too.
    pub verbose: bool,
    /// A Consumer profile: the Consumer's name and bounds, and the driver
    /// that makes it act where the device cannot.
    pub profile: Option<PathBuf>,
}

/// `cetp consumer-act`: sends one `action` (JSON) to the Consumer named
/// `consumer` on the device at `target` (`tcp:HOST:PORT`) and prints the
/// outcome line.
pub fn consumer_act(target: &str, consumer: &str, action: &str) -> Result<ExitCode, Failure> {
    let addr = target
        .strip_prefix("tcp:")
        .ok_or_else(|| usage("consumer-act needs --target tcp:HOST:PORT"))?;
    let action: serde_json::Value =
        serde_json::from_str(action).map_err(|e| usage(format!("--action: {e}")))?;
    let mut dev =
        cetp_targets::consumer::WireConsumer::connect_tcp(addr, consumer).map_err(infra)?;
    let outcome =
        cetp_consumer::ConsumerDevice::act(&mut dev, &action, &mut |_| None).map_err(infra)?;
    println!("{}", outcome.to_json());
    Ok(ExitCode::Ok)
}

enum Where {
    InProcess(ConsumerConfig),
    /// A device over TCP, and its peer probe (identity b), when given.
    Tcp {
        addr: String,
        peer: Option<String>,
    },
    Adb {
        target: String,
    },
    /// The JVM device with a vendor's Consumer classes, started for the
    /// run (on its first use) and ended with it.
    Jvm(Box<cetp_targets::JvmSpec>),
}

/// Who makes the Consumer act, and the Consumer's name for the claim.
fn actor_of(
    profile: &Option<PathBuf>,
    consumer: &str,
) -> Result<
    (
        cetp_targets::consumer::Actor,
        String,
        cetp_consumer::DeclaredBounds,
    ),
    Failure,
> {
    let Some(path) = profile else {
        return Ok((
            cetp_targets::consumer::Actor::Device(consumer.to_string()),
            consumer.to_string(),
            cetp_consumer::DeclaredBounds::default(),
        ));
    };
    let text =
        std::fs::read_to_string(path).map_err(|e| usage(format!("{}: {e}", path.display())))?;
    let p = cetp_consumer::ConsumerProfile::from_toml(&text)
        .map_err(|e| usage(format!("{}: {e}", path.display())))?;
    let name = p
        .consumer
        .name
        .clone()
        .unwrap_or_else(|| format!("the Consumer driven by {}", path.display()));
    // Without a driver the device makes the Consumer act (consumer_act);
    // the profile still names it and declares its bounds.
    let actor = match p.driver {
        Some(d) => cetp_targets::consumer::Actor::Driver {
            command: d.command,
            timeout: std::time::Duration::from_millis(d.timeout_ms),
        },
        None => cetp_targets::consumer::Actor::Device(consumer.to_string()),
    };
    Ok((actor, name, p.bounds))
}

/// Where the Consumer is, from the one TARGET parser every command uses
/// ([`cetp_targets::ConsumerTarget`]), and the Consumer's name.
fn parse_target(t: &str, seed: u64) -> Result<(Where, String), Failure> {
    use cetp_targets::TargetSpec;
    let c = cetp_targets::ConsumerTarget::parse(t).map_err(|e| usage(e.to_string()))?;
    let consumer = c.consumer.unwrap_or_else(|| "default".to_string());
    if consumer != "default" && ConsumerMutant::parse(&consumer).is_none() {
        return Err(usage(format!("no Consumer mutant named {consumer:?}")));
    }
    let at = match c.spec {
        TargetSpec::Sim(sim) => {
            // The sim options set up a simulated Provider; the simulated
            // Consumer takes only its name.
            if sim
                != (cetp_targets::SimSpec {
                    op_timeout_ms: sim.op_timeout_ms,
                    ..cetp_targets::SimSpec::default()
                })
            {
                return Err(usage(format!(
                    "{t:?}: a simulated Consumer takes only consumer=NAME (the other sim options set up a simulated Provider)"
                )));
            }
            Where::InProcess(ConsumerConfig {
                faults: ConsumerMutant::parse(&consumer).into_iter().collect(),
                uuid_seed: seed,
                ..ConsumerConfig::default()
            })
        }
        TargetSpec::Tcp(tcp) => Where::Tcp {
            addr: tcp.a,
            peer: tcp.b,
        },
        TargetSpec::Jvm(spec) => {
            if spec.consumer.is_none() {
                return Err(usage(format!(
                    "{t:?}: the JVM device needs the Consumer under test: consumer_jar=JAR,consumer_class=CLASS (its ConsumerAdapter)"
                )));
            }
            Where::Jvm(Box::new(spec))
        }
        // The adb options are read again where the probe is reached.
        TargetSpec::Adb(_) => Where::Adb {
            target: t
                .split(',')
                .filter(|p| !p.starts_with("consumer="))
                .collect::<Vec<_>>()
                .join(","),
        },
    };
    Ok((at, consumer))
}

/// The Consumer under test where the target says, for the library's
/// Consumer runner.
struct Place {
    at: Where,
    actor: cetp_targets::consumer::Actor,
    /// The bounds the Consumer's profile declares (none without a profile).
    bounds: cetp_consumer::DeclaredBounds,
    /// A phone's probe is installed, started and waited for as `cetp run`
    /// does, once for the run; it ends when the run ends.
    probe: Option<cetp_targets::consumer::AdbProbe>,
    /// The JVM device started for the run (`jvm:`); it ends when the run ends.
    jvm: Option<cetp_targets::jvm::StartedDevice>,
    /// Where the JVM device's output goes: the report directory's
    /// `jvm-device.log`, or a temporary file.
    device_log: Option<std::path::PathBuf>,
}

impl ConsumerPlace for Place {
    /// Where the hostile Provider lives: a phone's probe names what it can
    /// host (`hello`'s hosted_provider); an unreachable device is an infra
    /// error before any scenario.
    fn prepare(&mut self) -> Result<Option<(String, String)>, String> {
        use cetp_targets::consumer::{AdbProbe, WireConsumer};
        let hosted = match &self.at {
            Where::InProcess(_) => None,
            Where::Tcp { addr, peer } => {
                { WireConsumer::connect_with_peer(addr, peer.as_deref(), self.actor.clone())? }
                    .hosted
                    .clone()
            }
            Where::Adb { target } => {
                self.probe = Some(AdbProbe::prepare(target)?);
                WireConsumer::connect_adb(target, self.actor.clone())?
                    .hosted
                    .clone()
            }
            Where::Jvm(spec) => {
                let device =
                    cetp_targets::jvm::StartedDevice::start(spec, self.device_log.as_deref())
                        .map_err(|e| e.to_string())?;
                let hosted = WireConsumer::connect_with_peer(
                    device.identity_a(),
                    Some(device.identity_b()),
                    self.actor.clone(),
                )?
                .hosted
                .clone();
                self.jvm = Some(device);
                hosted
            }
        };
        Ok(hosted.map(|h| (h.package, h.authority)))
    }

    fn play(&mut self, s: &Scenario) -> Result<ScenarioResult, String> {
        use cetp_targets::consumer::WireConsumer;
        match &self.at {
            Where::InProcess(config) => cetp_consumer::run_in_process(s, config),
            Where::Tcp { addr, peer } => {
                { WireConsumer::connect_with_peer(addr, peer.as_deref(), self.actor.clone()) }
                    .and_then(|mut dev| cetp_consumer::run_on_device(s, &mut dev, &self.bounds))
            }
            Where::Adb { target } => WireConsumer::connect_adb(target, self.actor.clone())
                .and_then(|mut dev| cetp_consumer::run_on_device(s, &mut dev, &self.bounds)),
            Where::Jvm(_) => {
                let Some(device) = &self.jvm else {
                    return Err("the JVM device was not started".into());
                };
                WireConsumer::connect_with_peer(
                    device.identity_a(),
                    Some(device.identity_b()),
                    self.actor.clone(),
                )
                .and_then(|mut dev| cetp_consumer::run_on_device(s, &mut dev, &self.bounds))
            }
        }
    }
}

/// `cetp consumer`: every selected scenario played against the Consumer
/// under test, reported; the run's exit code.
pub fn consumer(args: &ConsumerOptions) -> Result<ExitCode, Failure> {
    let dir = vectors_or_default(&args.vectors)?;
    let all = cetp_consumer::scenario::load_dir(&dir.join("consumer")).map_err(usage)?;
    let selected = runner::select(&all, &args.only, &args.skip).map_err(usage)?;
    let (at, target_consumer) = parse_target(&args.target, args.seed)?;
    if args.profile.is_some() && matches!(at, Where::InProcess(_)) {
        return Err(usage(
            "--profile names a driver for a device: use --target tcp:HOST:PORT",
        ));
    }
    let (actor, consumer_name, bounds) = actor_of(&args.profile, &target_consumer)?;
    let mut fanout = Fanout::default();
    fanout.reporters.push(Box::new(
        Terminal::new(std::io::stdout(), args.verbose, false).for_consumer(),
    ));
    if let Some(d) = &args.report_dir {
        std::fs::create_dir_all(d)
            .map_err(|e| infra(format!("cannot write the report to {}: {e}", d.display())))?;
        let rules = cetp_report::sarif::catalog_rules(&dir).map_err(usage)?;
        fanout
            .reporters
            .extend(cetp_report::standard_reporters(d, rules));
    }
    let plan = runner::ConsumerPlan {
        target: args.target.clone(),
        consumer: consumer_name,
        seed: args.seed,
        only: args.only.clone(),
        skip: args.skip.clone(),
        harness: format!("cetp {} (role: consumer)", env!("CARGO_PKG_VERSION")),
        started_at_ms: now_ms(),
        rerun: args
            .profile
            .iter()
            .flat_map(|p| ["--profile".to_string(), p.display().to_string()])
            .collect(),
    };
    let quiet = matches!(at, Where::InProcess(_)).then(runner::QuietConsumerPanics::install);
    let mut place = Place {
        at,
        actor,
        bounds,
        probe: None,
        jvm: None,
        device_log: args.report_dir.as_ref().map(|d| d.join("jvm-device.log")),
    };
    let finished = runner::run(&plan, &selected, &mut place, &mut fanout).map_err(infra)?;
    drop(quiet);
    for r in &mut fanout.reporters {
        r.finish()
            .map_err(|e| infra(format!("cannot write a report: {e}")))?;
    }
    Ok(finished.exit)
}
