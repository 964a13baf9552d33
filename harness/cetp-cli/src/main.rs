//! `cetp`: the CETP v2 conformance harness. This file holds the command
//! line (its arguments) and `main`; each command is its own module
//! (`run_cmd`, `devices_cmd`, `merge_cmd`, `consumer_cmd`, `fuzz_cmd`,
//! `lock_cmd`, `selftest_cmd`, `info_cmd`, `profile_cmd`), the failures
//! they share and their exit codes are `cetp_commands::failure`'s and
//! `cetp_conformance::exit`'s, and the logic lives in the library crates
//! (what `run`, `replay`, `resume` and `consumer` do: `cetp_commands`).

// The fuzzer's oracle and checks build and drop many JSON values, some of
// a megabyte (a large result); glibc's malloc spent a third of the run in
// page faults and consolidation there. `scripts/fuzz-bench.sh` measures it.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[cfg(test)]
mod cli_tests;
mod consumer_cmd;
mod devices_cmd;
#[cfg(test)]
mod doc_commands_tests;
mod failure;
mod fuzz_cmd;
mod info_cmd;
mod lock_cmd;
mod merge_cmd;
mod profile_cmd;
mod run_cmd;
mod selftest_cmd;

// The command modules take these names, and each other's, with
// `use super::*`.
use cetp_commands::embedded;
use cetp_conformance::exit::ExitCode;
use cetp_conformance::lock_target::{self, FetchError};
use cetp_conformance::runner::RunConfig;
use cetp_profile::coverage;
use cetp_report::document::Document;
use cetp_report::escape;
use cetp_selftest::selftest::{self, load_mutants, load_variants, ProofRecord};
use cetp_targets::{open_with, OpenOptions, TargetSpec};
use clap::{Args, Parser, Subcommand, ValueEnum};
use failure::*;
use info_cmd::*;
use lock_cmd::*;
use run_cmd::*;
use selftest_cmd::*;
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "cetp",
    version,
    about = "Conformance harness and fuzzer for CETP v2 Providers"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Certify a Provider: run the suite against a target and write the report.
    #[command(after_long_help = cetp_targets::spec::TARGET_FORMS)]
    Run(RunArgs),
    /// Continue a run that stopped (Ctrl-C, --run-timeout, or a harness that
    /// died) from its journal, without executing a side effect twice.
    Resume(ResumeArgs),
    /// Run one case and print its whole wire trace; or run the cases of a
    /// case file (a `cetp fuzz` finding, a regression) with every check.
    #[command(after_long_help = cetp_targets::spec::TARGET_FORMS)]
    Replay {
        /// A case id of the suite (e.g. IDEM-003), or a case file.
        case: String,
        #[command(flatten)]
        run: RunArgs,
    },
    /// Fuzz a Provider: generated stateful sequences and envelope mutations,
    /// judged by the checks against what the reference Provider and its
    /// legal variants answer; findings are shrunk and written as case files.
    #[command(after_long_help = cetp_targets::spec::TARGET_FORMS)]
    Fuzz(fuzz_cmd::FuzzArgs),
    /// Certify a Consumer: play the scripted hostile Provider of every
    /// Consumer scenario and judge what the Consumer under test does.
    #[command(after_long_help = consumer_cmd::CONSUMER_TARGET_FORMS)]
    Consumer(consumer_cmd::ConsumerArgs),
    /// A driver for any device offering `consumer_act`: one action to the
    /// named Consumer, the outcome printed as one JSON line.
    #[command(name = "consumer-act")]
    ConsumerAct(consumer_cmd::ConsumerActArgs),
    /// Join the reports of the partitions of one split run (`run --partition`)
    /// into one report set, after checking they are complete, disjoint and
    /// of one configuration; only a complete merge can establish the claim.
    Merge(merge_cmd::MergeArgs),
    /// Prove the suite can fail: run it against the reference and every mutant.
    Selftest(SelftestArgs),
    /// Serve the simulated device (probe wire over TCP, optional adb endpoint).
    Sim(cetp_sim::SimOptions),
    /// Generate or check the requirement coverage report.
    Coverage(CoverageArgs),
    /// Record a Provider's tool contracts (schemas, scopes, annotations,
    /// revision) as a lock file.
    #[command(after_long_help = cetp_targets::spec::TARGET_FORMS)]
    Lock(LockArgs),
    /// Write a commented starter profile from a live Provider's descriptors
    /// (negotiate and list_tools only: nothing side-effecting is executed).
    #[command(after_long_help = cetp_targets::spec::TARGET_FORMS)]
    Init(profile_cmd::InitArgs),
    /// Work with vendor profiles (`cetp profile check PROFILE`).
    Profile {
        #[command(subcommand)]
        cmd: profile_cmd::ProfileCmd,
    },
    /// Compare a Provider, or a second lock file, with a lock: exit 0 no
    /// drift, 1 breaking drift or a spec violation, 4 compatible drift only.
    #[command(after_long_help = cetp_targets::spec::TARGET_FORMS)]
    Drift(DriftArgs),
    /// List what the suite holds: cases, checks, mutants or legal variants.
    List {
        #[arg(value_enum)]
        what: ListWhat,
        #[arg(long)]
        vectors: Option<PathBuf>,
    },
    /// Show catalog requirements with the spec clause they cite.
    Catalog {
        /// Requirement ids; all when none are given.
        ids: Vec<String>,
        /// The spec file [default: ../shared/spec/cetp-v2.zh.md beside the repository].
        #[arg(long)]
        spec: Option<PathBuf>,
        #[arg(long)]
        vectors: Option<PathBuf>,
    },
}

/// What `--format` puts on stdout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    Text,
    Json,
    Junit,
    Sarif,
    Markdown,
    Html,
    Ndjson,
}

impl Format {
    /// The report document it puts on stdout; none for the terminal view.
    fn document(self) -> Option<Document> {
        match self {
            Format::Text => None,
            Format::Json => Some(Document::Json),
            Format::Junit => Some(Document::Junit),
            Format::Sarif => Some(Document::Sarif),
            Format::Markdown => Some(Document::Markdown),
            Format::Html => Some(Document::Html),
            Format::Ndjson => Some(Document::Ndjson),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum ColorWhen {
    Auto,
    Always,
    Never,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum ListWhat {
    Cases,
    Checks,
    Mutants,
    Variants,
}

#[derive(Args, Clone)]
struct RunArgs {
    /// sim[:...] | tcp:HOST:PORT[,b=HOST:PORT] | adb[:SERIAL][,...] | jvm:... (the
    /// forms and their options are listed below). Repeat it for several devices carrying the same Provider build
    /// (see --devices).
    #[arg(long, default_value = "sim")]
    target: Vec<String>,
    /// With several --target: `shard` runs each case once, on whichever
    /// device is free (one report, one claim); `matrix` runs every case on
    /// every device (a case × device table, a claim per device).
    #[arg(long, value_enum, default_value_t = devices_cmd::Mode::Shard)]
    devices: devices_cmd::Mode,
    /// Endpoint of the second caller identity (tcp targets).
    #[arg(long, value_name = "HOST:PORT")]
    target_b: Option<String>,
    /// Address of the adb server (adb targets).
    #[arg(long, value_name = "HOST:PORT")]
    adb_server: Option<String>,
    /// Vendor profile (TOML); see profiles/README.md. Without it only
    /// effect=read tools are executed (sim targets use profiles/reference.toml).
    #[arg(long)]
    profile: Option<PathBuf>,
    /// Where the reports go: report.json, junit.xml, report.sarif, index.html,
    /// events.ndjson, summary.md.
    #[arg(long)]
    report_dir: Option<PathBuf>,
    /// Only cases whose id matches (`*` wildcards); repeatable.
    #[arg(long)]
    only: Vec<String>,
    /// Skip cases whose id matches; repeatable.
    #[arg(long)]
    skip: Vec<String>,
    /// Only part M of N of the selected cases (after --only/--skip), for a CI
    /// job matrix: slice:M/N (every Nth by sorted case id) or hash:M/N (by
    /// the id's hash, stable as cases come and go). `cetp merge` joins the
    /// parts' report directories; a part alone makes no §9 claim.
    #[arg(long, value_name = "slice:M/N", value_parser = |s: &str| s.parse::<cetp_conformance::partition::Partition>())]
    partition: Option<cetp_conformance::partition::Partition>,
    /// Known failures (TOML, `[[known_failure]] id, reason`).
    #[arg(long)]
    baseline: Option<PathBuf>,
    /// Seed of every generated request id and value.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Attempts per case that does not pass; disagreeing attempts are FLAKY.
    #[arg(long, default_value_t = 1)]
    attempts: u32,
    /// Bounds the whole run (`90s`, `20m`, `1h`): no step starts after it,
    /// the cases left are INFRA_ERROR, and with --report-dir `cetp resume`
    /// continues the run.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    run_timeout: Option<std::time::Duration>,
    /// The longest real-time wait for a lifetime to run out on a device
    /// whose clock cannot move (a phone): a longer one leaves its case
    /// unjudged, naming the value that would judge it. Waits overlap the
    /// rest of the run.
    #[arg(long, value_name = "DURATION", default_value = "3m", value_parser = humantime::parse_duration)]
    max_wait: std::time::Duration,
    /// The vectors directory [default: the repository's vectors/].
    #[arg(long)]
    vectors: Option<PathBuf>,
    /// Print passing cases too.
    #[arg(short, long)]
    verbose: bool,
    /// Exit 1 unless the run establishes the §9 claim (CI gating): a FAIL,
    /// a core case the setup left unjudged, or a filtered run all count.
    #[arg(long)]
    require_claim: bool,
    /// A contract lock (`cetp lock`): adds LOCK-001, which fails when the
    /// contract differs from the lock under the lock's revision (§3.3).
    #[arg(long)]
    lock: Option<PathBuf>,
    /// Run again what a report.json ran: its target, seed, nonce
    /// (started_at_ms), filters and attempts, so every generated request id
    /// and value is the same.
    #[arg(long, value_name = "REPORT.json", conflicts_with_all = ["target", "seed", "only", "skip", "attempts", "partition"])]
    replay_run: Option<PathBuf>,
    /// Colour the verdicts: auto (a terminal, unless NO_COLOR is set),
    /// always, never.
    #[arg(long, value_enum, default_value_t = ColorWhen::Auto)]
    color: ColorWhen,
    /// What goes to stdout: the terminal view (text), or one report
    /// document (the terminal view then goes to stderr). --report-dir
    /// writes every report whatever this says.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

#[derive(Args)]
struct LockArgs {
    /// sim[:...] | tcp:HOST:PORT[,b=HOST:PORT] | adb[:SERIAL][,...] | jvm:... (see below)
    #[arg(long, default_value = "sim")]
    target: String,
    #[arg(long, value_name = "HOST:PORT")]
    adb_server: Option<String>,
    /// Vendor profile naming the Provider ([target] package); sim targets
    /// use profiles/reference.toml.
    #[arg(long)]
    profile: Option<PathBuf>,
    /// Where the lock goes (cetp-lock/1, vectors/schema/lock.schema.json).
    #[arg(long)]
    out: PathBuf,
}

#[derive(Clone, Copy, ValueEnum)]
enum DriftFormat {
    Text,
    Json,
    Sarif,
}

#[derive(Args)]
struct DriftArgs {
    /// The lock to compare with.
    #[arg(long)]
    lock: PathBuf,
    /// The live Provider to compare: sim[:...] | tcp:HOST:PORT[,b=HOST:PORT] |
    /// adb[:SERIAL][,...] | jvm:... (see below).
    #[arg(long, required_unless_present = "against", conflicts_with = "against")]
    target: Option<String>,
    /// A second lock file instead of a live Provider (a release diff in CI).
    #[arg(long)]
    against: Option<PathBuf>,
    #[arg(long, value_name = "HOST:PORT")]
    adb_server: Option<String>,
    #[arg(long)]
    profile: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "text")]
    format: DriftFormat,
}

#[derive(Args)]
struct SelftestArgs {
    #[arg(long)]
    vectors: Option<PathBuf>,
    /// Only these mutants; repeatable.
    #[arg(long)]
    mutant: Vec<String>,
    /// Only these legal variants; repeatable.
    #[arg(long)]
    variant: Vec<String>,
    /// Mutants run at once (each has its own simulated device).
    #[arg(long, default_value_t = 8)]
    jobs: usize,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write the observed proof (requirement → mutants caught breaking it)
    /// to this file; `reports/proof.json` feeds the coverage report.
    #[arg(long, conflicts_with = "check_proof")]
    write_proof: Option<PathBuf>,
    /// Fail (exit 1) when this proof file differs from what the run observed.
    #[arg(long)]
    check_proof: Option<PathBuf>,
    /// Only the Consumer half: the reference Consumer and its mutants on the
    /// Consumer scenarios (`vectors/consumer/`); `--write-proof` /
    /// `--check-proof` then name the Consumer proof
    /// (`reports/consumer-proof.json`).
    #[arg(long)]
    consumer_only: bool,
}

#[derive(Args)]
struct CoverageArgs {
    #[arg(long)]
    vectors: Option<PathBuf>,
    /// Write reports/coverage.{md,json}.
    #[arg(long, conflicts_with = "check")]
    write: bool,
    /// Fail (exit 1) when the checked-in report is stale or has gaps.
    #[arg(long)]
    check: bool,
    /// Directory of coverage.md / coverage.json [default: reports/].
    #[arg(long)]
    out: Option<PathBuf>,
}

#[derive(Args)]
struct ResumeArgs {
    /// The run's report directory (it holds journal.ndjson).
    dir: PathBuf,
    /// Bounds the rest of the run.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    run_timeout: Option<std::time::Duration>,
    /// Print passing cases too.
    #[arg(short, long)]
    verbose: bool,
    #[arg(long, value_enum, default_value_t = ColorWhen::Auto)]
    color: ColorWhen,
}

/// A closed stdout (`cetp catalog | head`) ends the process quietly, as for
/// any Unix filter, instead of a panic in `println!`. Only for the commands
/// that print and touch no socket: a peer closing a connection must never
/// end a run or the simulated device.
fn quiet_on_closed_pipe() {
    #[cfg(unix)]
    // SAFETY: restoring the default disposition of SIGPIPE before any thread
    // starts; no handler runs Rust code.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn main() {
    let cli = Cli::parse();
    if matches!(
        cli.command,
        Command::Catalog { .. } | Command::Coverage(_) | Command::List { .. }
    ) {
        quiet_on_closed_pipe();
    }
    let result = match &cli.command {
        Command::Run(args) => run_command(args, None),
        Command::Replay { case, run } => run_command(run, Some(case)),
        Command::Resume(args) => resume_command(args),
        Command::Fuzz(args) => fuzz_cmd::fuzz_command(args),
        Command::Merge(args) => merge_cmd::merge_command(args),
        Command::Selftest(args) => selftest_command(args),
        Command::Consumer(args) => consumer_cmd::consumer_command(args),
        Command::ConsumerAct(args) => consumer_cmd::consumer_act_command(args),
        Command::Coverage(args) => coverage_command(args),
        Command::List { what, vectors } => list_command(*what, vectors),
        Command::Catalog { ids, spec, vectors } => catalog_command(ids, spec, vectors),
        Command::Lock(args) => lock_command(args),
        Command::Init(args) => profile_cmd::init_command(args),
        Command::Profile { cmd } => profile_cmd::check_command(cmd),
        Command::Drift(args) => drift_command(args),
        Command::Sim(opts) => {
            let rt = match tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    eprintln!("cetp sim: cannot start a runtime: {e}");
                    std::process::exit(ExitCode::Infra.code());
                }
            };
            match rt.block_on(cetp_sim::run_sim(opts.clone())) {
                Ok(()) => Ok(ExitCode::Ok),
                // A port that cannot be bound is the machine's trouble, not
                // a wrong argument; a wrong name is.
                Err(e @ cetp_sim::SimError::Io { .. }) => Err(infra(format!("sim: {e}"))),
                Err(e) => Err(usage(format!("sim: {e}"))),
            }
        }
    };
    match result {
        Ok(code) => std::process::exit(code.code()),
        Err(f) => {
            eprintln!("cetp: {}", f.message);
            std::process::exit(f.code.code());
        }
    }
}
