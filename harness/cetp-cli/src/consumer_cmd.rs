//! `cetp consumer` and `cetp consumer-act`: their arguments turned into
//! the library's options; what the commands do (the Consumer half of the
//! suite, the Consumer targets) is [`cetp_commands::consumer`]'s.

use super::Failure;
use cetp_commands::consumer::ConsumerOptions;
use cetp_conformance::exit::ExitCode;
use clap::Args;
use std::path::PathBuf;

/// The Consumer targets (`cetp consumer --help`): the Provider forms'
/// kinds with the Consumer side's options, as
/// `cetp_commands::consumer` reads them.
pub(crate) const CONSUMER_TARGET_FORMS: &str = "\
TARGET forms (--target):
  sim[:consumer=NAME]                                  the reference Consumer or a Consumer mutant, in process
  tcp:HOST:PORT[,peer=HOST:PORT][,consumer=NAME]       a device serving consumer_act (`cetp sim`, a probe);
                                                       peer= is identity b's probe (a second Provider)
  adb[:SERIAL][,server=HOST:PORT][,consumer=NAME][,...] a phone or emulator behind an adb server
                                                       (the adb options of `cetp run --help`)
  jvm:sample,consumer_jar=JAR,consumer_class=CLASS[,...] the JVM device (scripts/jvm-device.sh), started for the run,
                                                       hosting the hostile Provider and making the vendor's Consumer
                                                       (its ConsumerAdapter CLASS in JAR) act; the jvm options of
                                                       `cetp run --help` (build=, jvm_prop=, ...) apply
NAME is `default` (the reference Consumer) or a Consumer mutant (`cetp list mutants`).";

#[derive(Args, Clone)]
pub(crate) struct ConsumerArgs {
    /// `sim[:consumer=NAME]`, `tcp:HOST:PORT[,peer=HOST:PORT][,consumer=NAME]`
    /// (`peer`: identity b's probe, which hosts a second Provider or another
    /// package's ContentProvider), `adb[:SERIAL][,...]` or
    /// `jvm:sample,consumer_jar=JAR,consumer_class=CLASS[,...]` (the JVM
    /// device with a vendor's Consumer); NAME is `default` (the reference
    /// Consumer, or the JVM device's Consumer) or a Consumer mutant.
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
    /// A Consumer profile (TOML): the Consumer's name and declared
    /// `[bounds]`, and the driver command that makes it act (`[driver]
    /// command`, README "Pointing the suite at your Consumer app"; the
    /// target then only hosts the hostile Provider). Without `[driver]`
    /// the target's own `consumer_act` makes it act.
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

/// `cetp consumer-act`.
pub(crate) fn consumer_act_command(args: &ConsumerActArgs) -> Result<ExitCode, Failure> {
    cetp_commands::consumer::consumer_act(&args.target, &args.consumer, &args.action)
}

/// `cetp consumer`.
pub(crate) fn consumer_command(args: &ConsumerArgs) -> Result<ExitCode, Failure> {
    cetp_commands::consumer::consumer(&ConsumerOptions {
        target: args.target.clone(),
        report_dir: args.report_dir.clone(),
        only: args.only.clone(),
        skip: args.skip.clone(),
        seed: args.seed,
        vectors: args.vectors.clone(),
        verbose: args.verbose,
        profile: args.profile.clone(),
    })
}
