//! `cetp consumer`: the Consumer half of the suite. The harness plays the
//! scripted hostile Provider of every scenario in `vectors/consumer/`, the
//! Consumer under test acts, and the findings are reported with the same
//! event stream, reporters and exit codes as `cetp run`.
//!
//! Targets: `sim[:consumer=NAME]` (the reference Consumer or a mutant,
//! in-process, on a manual clock: everything is judged), and
//! `tcp:HOST:PORT[,peer=HOST:PORT][,consumer=NAME]` (any device offering
//! `host_provider` and `consumer_act`, e.g. `cetp sim --listen`, with its
//! second probe as `peer` where it hosts only its own authority; descriptor
//! reads are not visible there, their closes only as the device reports
//! them, and scenarios the wire cannot script are not judged).

use super::{infra, usage, vectors_or_default, Failure};
use cetp_conformance::exit::ExitCode;
use cetp_consumer::runner::{self, ConsumerPlace};
use cetp_consumer::{scenario::Scenario, ScenarioResult};
use cetp_reference::consumer::{ConsumerConfig, ConsumerMutant};
use cetp_report::terminal::Terminal;
use cetp_vectors::event::Fanout;
use clap::Args;
use std::path::PathBuf;

/// The Consumer targets (`cetp consumer --help`): the Provider forms'
/// kinds with the Consumer side's options, as [`parse_target`] reads them.
pub(crate) const CONSUMER_TARGET_FORMS: &str = "\
TARGET forms (--target):
  sim[:consumer=NAME]                                  the reference Consumer or a Consumer mutant, in process
  tcp:HOST:PORT[,peer=HOST:PORT][,consumer=NAME]       a device serving consumer_act (`cetp sim`, a probe);
                                                       peer= is identity b's probe (a second Provider)
  adb[:SERIAL][,server=HOST:PORT][,consumer=NAME][,...] a phone or emulator behind an adb server
                                                       (the adb options of `cetp run --help`)
NAME is `default` (the reference Consumer) or a Consumer mutant (`cetp list mutants`).";

#[derive(Args, Clone)]
pub(crate) struct ConsumerArgs {
    /// `sim[:consumer=NAME]`, `tcp:HOST:PORT[,peer=HOST:PORT][,consumer=NAME]`
    /// (`peer`: identity b's probe, which hosts a second Provider or another
    /// package's ContentProvider) or `adb[:SERIAL][,...]`; NAME is `default`
    /// (the reference Consumer) or a Consumer mutant.
    #[arg(long, default_value = "sim")]
    target: String,
    /// Where the reports go (as for `cetp run`).
    #[arg(long)]
    report_dir: Option<PathBuf>,
    /// Only scenarios whose id matches (`*` wildcards); repeatable.
    #[arg(long)]
    only: Vec<String>,
    /// Skip scenarios whose id matches; repeatable.
    #[arg(long)]
    skip: Vec<String>,
    /// Seed of the in-process Consumer's request ids.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The vectors directory [default: the repository's vectors/].
    #[arg(long)]
    vectors: Option<PathBuf>,
    /// Print passing scenarios too.
    #[arg(short, long)]
    verbose: bool,
    /// A Consumer profile (TOML) naming the driver command that makes the
    /// Consumer under test act (`[driver] command`, README "Pointing the
    /// suite at your Consumer app"); the target then only hosts the
    /// hostile Provider.
    #[arg(long)]
    profile: Option<PathBuf>,
}

/// `cetp consumer-act`: a driver for any device offering `consumer_act`.
/// Sends one action to the named Consumer and prints the outcome line.
#[derive(Args, Clone)]
pub(crate) struct ConsumerActArgs {
    /// `tcp:HOST:PORT`
    #[arg(long)]
    target: String,
    #[arg(long, default_value = "default")]
    consumer: String,
    /// The action, JSON (`{"do":"call_tool",...}`).
    #[arg(long)]
    action: String,
}

pub(crate) fn consumer_act_command(args: &ConsumerActArgs) -> Result<ExitCode, Failure> {
    let addr = args
        .target
        .strip_prefix("tcp:")
        .ok_or_else(|| usage("consumer-act needs --target tcp:HOST:PORT"))?;
    let action: serde_json::Value =
        serde_json::from_str(&args.action).map_err(|e| usage(format!("--action: {e}")))?;
    let mut dev =
        cetp_targets::consumer::WireConsumer::connect_tcp(addr, &args.consumer).map_err(infra)?;
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
    Ok((
        cetp_targets::consumer::Actor::Driver {
            command: p.driver.command,
            timeout: std::time::Duration::from_millis(p.driver.timeout_ms),
        },
        name,
        p.bounds,
    ))
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
        }
    }
}

pub(crate) fn consumer_command(args: &ConsumerArgs) -> Result<ExitCode, Failure> {
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
        started_at_ms: super::now_ms(),
    };
    let quiet = matches!(at, Where::InProcess(_)).then(runner::QuietConsumerPanics::install);
    let mut place = Place {
        at,
        actor,
        bounds,
        probe: None,
    };
    let finished = runner::run(&plan, &selected, &mut place, &mut fanout).map_err(infra)?;
    drop(quiet);
    for r in &mut fanout.reporters {
        r.finish()
            .map_err(|e| infra(format!("cannot write a report: {e}")))?;
    }
    Ok(finished.exit)
}
