//! `cetp`: the CETP v2 conformance harness. Parsing and wiring only; the
//! logic lives in the library crates. Exit codes: `cetp_conformance::exit`.

// The fuzzer's oracle and checks build and drop many JSON values, some of
// a megabyte (a large result); glibc's malloc spent a third of the run in
// page faults and consolidation there. `scripts/fuzz-bench.sh` measures it.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod consumer_cmd;
mod devices_cmd;
mod embedded;
mod fuzz_cmd;
mod merge_cmd;
mod profile_cmd;

use cetp_conformance::coverage;
use cetp_conformance::event::Fanout;
use cetp_conformance::exit::ExitCode;
use cetp_conformance::journal::PausePoint;
use cetp_conformance::lock_target::{self, FetchError};
use cetp_conformance::profile::{builtin, Profile};
use cetp_conformance::rundir::{DirError, RunDir};
use cetp_conformance::runner::{run, RunConfig};
use cetp_conformance::selftest::{self, load_mutants, load_variants, ProofRecord};
use cetp_conformance::suite::{Baseline, Suite};
use cetp_contract::lock::Lock;
use cetp_report::document::{self, Document, Kept};
use cetp_report::escape;
use cetp_report::terminal::Terminal;
use cetp_targets::{open_with, OpenOptions, TargetSpec, WireTrace};
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// The built-in profile of a simulated target: the one its vendor wrote.
fn sim_profile(s: &cetp_targets::SimSpec) -> &'static str {
    match (s.provider, s.variant.as_deref()) {
        (cetp_targets::FixtureSet::Notes, _) => builtin::NOTES,
        (_, Some("no_effect_counter")) => builtin::NO_COUNTER,
        _ => builtin::REFERENCE,
    }
}

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
    Run(RunArgs),
    /// Continue a run that stopped (Ctrl-C, --run-timeout, or a harness that
    /// died) from its journal, without executing a side effect twice.
    Resume(ResumeArgs),
    /// Run one case and print its whole wire trace; or run the cases of a
    /// case file (a `cetp fuzz` finding, a regression) with every check.
    Replay {
        /// A case id of the suite (e.g. IDEM-003), or a case file.
        case: String,
        #[command(flatten)]
        run: RunArgs,
    },
    /// Fuzz a Provider: generated stateful sequences and envelope mutations,
    /// judged by the checks against what the reference Provider and its
    /// legal variants answer; findings are shrunk and written as case files.
    Fuzz(fuzz_cmd::FuzzArgs),
    /// Certify a Consumer: play the scripted hostile Provider of every
    /// Consumer scenario and judge what the Consumer under test does.
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
    Lock(LockArgs),
    /// Write a commented starter profile from a live Provider's descriptors
    /// (negotiate and list_tools only: nothing side-effecting is executed).
    Init(profile_cmd::InitArgs),
    /// Work with vendor profiles (`cetp profile check PROFILE`).
    Profile {
        #[command(subcommand)]
        cmd: profile_cmd::ProfileCmd,
    },
    /// Compare a Provider, or a second lock file, with a lock: exit 0 no
    /// drift, 1 breaking drift or a spec violation, 4 compatible drift only.
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
    /// sim[:mutant=NAME,manifest=VARIANT,...] | tcp:HOST:PORT | adb[:SERIAL].
    /// Repeat it for several devices carrying the same Provider build
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

impl RunArgs {
    /// The first (in most runs the only) `--target`.
    fn first_target(&self) -> &str {
        self.target.first().map_or("sim", String::as_str)
    }
}

#[derive(Args)]
struct LockArgs {
    /// sim[:...] | tcp:HOST:PORT | adb[:SERIAL]
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
    /// The live Provider to compare: sim[:...] | tcp:HOST:PORT | adb[:SERIAL].
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

/// A failure before or outside a run, with its exit code.
struct Failure {
    code: ExitCode,
    message: String,
}

fn usage(message: impl Into<String>) -> Failure {
    Failure {
        code: ExitCode::Usage,
        message: message.into(),
    }
}

fn infra(message: impl Into<String>) -> Failure {
    Failure {
        code: ExitCode::Infra,
        message: message.into(),
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn repo_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn vectors_or_default(vectors: &Option<PathBuf>) -> Result<PathBuf, Failure> {
    match vectors {
        Some(d) => Ok(d.clone()),
        None => embedded::vectors_dir().map_err(infra),
    }
}

fn load_suite(vectors: &Option<PathBuf>) -> Result<(PathBuf, Suite), Failure> {
    let dir = vectors_or_default(vectors)?;
    let suite = Suite::load(&dir).map_err(|e| usage(format!("vectors: {e}")))?;
    Ok((dir, suite))
}

fn target_spec(args: &RunArgs) -> Result<TargetSpec, Failure> {
    parse_target(args.first_target(), &args.target_b, &args.adb_server)
}

fn parse_target(
    target: &str,
    target_b: &Option<String>,
    adb_server: &Option<String>,
) -> Result<TargetSpec, Failure> {
    let mut spec = TargetSpec::parse(target).map_err(|e| usage(e.to_string()))?;
    match (&mut spec, target_b, adb_server) {
        // `--target-b` takes HOST:PORT or the same `tcp:HOST:PORT` as --target.
        (TargetSpec::Tcp(t), Some(b), _) => {
            t.b = Some(b.strip_prefix("tcp:").unwrap_or(b).to_string())
        }
        (_, Some(_), _) => {
            return Err(usage(
                "--target-b applies to tcp targets (sim and adb targets bring both identities)",
            ))
        }
        _ => {}
    }
    match (&mut spec, adb_server) {
        (TargetSpec::Adb(a), Some(server)) => {
            a.server = server
                .parse()
                .map_err(|_| usage(format!("--adb-server {server:?} is not IPV4:PORT")))?
        }
        (_, Some(_)) => return Err(usage("--adb-server applies to adb targets")),
        _ => {}
    }
    Ok(spec)
}

fn load_profile(args: &RunArgs, spec: &TargetSpec) -> Result<Profile, Failure> {
    profile_for(&args.profile, spec)
}

fn profile_for(profile: &Option<PathBuf>, spec: &TargetSpec) -> Result<Profile, Failure> {
    match profile {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| usage(format!("profile {}: {e}", path.display())))?;
            Profile::from_toml(&text).map_err(|e| usage(format!("{}: {e}", path.display())))
        }
        None => match spec {
            TargetSpec::Sim(s) => Profile::from_toml(sim_profile(s))
                .map_err(|e| usage(format!("built-in profile of the simulated Provider: {e}"))),
            _ => Ok(Profile::default()),
        },
    }
}

/// The arguments of the run a report.json records, and its nonce.
fn replayed(args: &RunArgs, path: &Path) -> Result<(RunArgs, i64), Failure> {
    let what = |e: String| usage(format!("--replay-run {}: {e}", path.display()));
    let text = std::fs::read_to_string(path).map_err(|e| what(e.to_string()))?;
    let r: serde_json::Value = serde_json::from_str(&text).map_err(|e| what(e.to_string()))?;
    let strings = |v: &serde_json::Value| -> Result<Vec<String>, Failure> {
        v.as_array()
            .ok_or_else(|| what("selection lacks only/skip (a report of an older cetp)".into()))?
            .iter()
            .map(|s| {
                s.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| what("a pattern is not a string".into()))
            })
            .collect()
    };
    let mut a = args.clone();
    // A run of several devices joins their labels.
    a.target = r["target"]["label"]
        .as_str()
        .ok_or_else(|| what("no target.label".into()))?
        .split(" + ")
        .map(str::to_string)
        .collect();
    a.seed = r["seed"].as_u64().ok_or_else(|| what("no seed".into()))?;
    a.only = strings(&r["selection"]["only"])?;
    a.skip = strings(&r["selection"]["skip"])?;
    a.attempts = r["selection"]["attempts"]
        .as_u64()
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| what("no selection.attempts".into()))?;
    // A partition's report runs its part again; a merge's, the whole run.
    a.partition = match r.get("partition").filter(|p| p.get("index").is_some()) {
        Some(p) => {
            Some(serde_json::from_value(p.clone()).map_err(|e| what(format!("partition: {e}")))?)
        }
        None => None,
    };
    let nonce = r["started_at_ms"]
        .as_i64()
        .ok_or_else(|| what("no started_at_ms".into()))?;
    Ok((a, nonce))
}

/// A run's inputs, read and checked before anything is sent.
struct Prepared {
    args: RunArgs,
    vectors_dir: PathBuf,
    suite: Suite,
    spec: TargetSpec,
    profile: Profile,
    cfg: RunConfig,
}

fn prepare(args: &RunArgs, replay: Option<&str>, started_at_ms: i64) -> Result<Prepared, Failure> {
    let (vectors_dir, mut suite) = load_suite(&args.vectors)?;
    // `cetp replay FILE`: the cases of one case file (a fuzz finding, a
    // regression) with the suite's checks and rules.
    let replay = match replay {
        Some(path) if path.ends_with(".json") || Path::new(path).is_file() => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| usage(format!("case file {path}: {e}")))?;
            let file = cetp_conformance::vector::VectorFile::from_json(&text)
                .map_err(|e| usage(format!("case file {path}: {e}")))?;
            suite.cases = file.cases;
            suite.fingerprint = cetp_proto::canonical::sha256_hex(text.as_bytes());
            None
        }
        other => other,
    };
    let spec = target_spec(args)?;
    let profile = load_profile(args, &spec)?;
    let baseline = match &args.baseline {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .map_err(|e| usage(format!("baseline {}: {e}", p.display())))?;
            Some(
                Baseline::from_toml(&text)
                    .map_err(|e| usage(format!("baseline {}: {e}", p.display())))?,
            )
        }
        None => None,
    };
    let lock = args.lock.as_deref().map(read_lock).transpose()?;
    let mut only = args.only.clone();
    if replay.is_some() && args.partition.is_some() {
        return Err(usage(
            "--partition splits a run; `cetp replay` runs one case",
        ));
    }
    if let Some(case) = replay {
        if !suite.cases.iter().any(|c| c.id == case) {
            return Err(usage(format!("no case {case:?} in the vectors")));
        }
        only = vec![case.to_string()];
    }
    // A pattern that selects nothing is a typo, not a run of zero cases.
    let mut ids: Vec<&str> = suite.cases.iter().map(|c| c.id.as_str()).collect();
    if lock.is_some() {
        ids.push(cetp_conformance::lock_target::LOCK_CASE_ID);
    }
    for (flag, patterns) in [("--only", &only), ("--skip", &args.skip)] {
        for p in patterns.iter() {
            if !ids
                .iter()
                .any(|id| cetp_conformance::runner::wildcard(p, id))
            {
                return Err(usage(format!("{flag} {p:?} matches no case")));
            }
        }
    }
    let cfg = RunConfig {
        seed: args.seed,
        attempts: args.attempts,
        only,
        skip: args.skip.clone(),
        baseline,
        harness_version: format!("cetp {}", env!("CARGO_PKG_VERSION")),
        started_at_ms,
        lock,
        run_timeout: args.run_timeout,
        interrupt: None,
        provider_apks: provider_apks(&spec)?,
        max_wait: Some(args.max_wait),
        partition: args.partition,
    };
    Ok(Prepared {
        args: args.clone(),
        vectors_dir,
        suite,
        spec,
        profile,
        cfg,
    })
}

/// SHA-256 of each Provider APK an adb target installs, for the pin.
fn provider_apks(spec: &TargetSpec) -> Result<Vec<String>, Failure> {
    let TargetSpec::Adb(a) = spec else {
        return Ok(Vec::new());
    };
    a.install
        .iter()
        .map(|path| {
            use sha2::Digest;
            let mut file = std::fs::File::open(path)
                .map_err(|e| usage(format!("install={}: {e}", path.display())))?;
            let mut h = sha2::Sha256::new();
            let mut buf = vec![0u8; 1 << 16];
            loop {
                let n = std::io::Read::read(&mut file, &mut buf)
                    .map_err(|e| usage(format!("install={}: {e}", path.display())))?;
                if n == 0 {
                    break;
                }
                h.update(&buf[..n]);
            }
            Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
        })
        .collect()
}

fn absolute(p: &Option<PathBuf>) -> serde_json::Value {
    match p {
        Some(p) => serde_json::json!(std::path::absolute(p).unwrap_or_else(|_| p.clone())),
        None => serde_json::Value::Null,
    }
}

/// What `cetp resume` needs to run the same run again: the journal's
/// `run` record. Paths are made absolute so a resume from another
/// directory reads the same files; the pin then checks their content.
fn journal_config(args: &RunArgs, cfg: &RunConfig) -> serde_json::Value {
    serde_json::json!({
        "target": args.first_target(),
        "targets": args.target,
        "target_b": args.target_b,
        "adb_server": args.adb_server,
        "profile": absolute(&args.profile),
        "vectors": absolute(&args.vectors),
        "baseline": absolute(&args.baseline),
        "lock": absolute(&args.lock),
        "seed": cfg.seed,
        "started_at_ms": cfg.started_at_ms,
        "only": cfg.only,
        "skip": cfg.skip,
        "attempts": cfg.attempts,
        "partition": cfg.partition,
        "require_claim": args.require_claim,
        "max_wait_ms": u64::try_from(args.max_wait.as_millis()).unwrap_or(u64::MAX),
    })
}

/// `CETP_PAUSE_AT` (crash tests only): see `cetp_conformance::journal::PausePoint`.
fn pause_point() -> Result<Option<PausePoint>, Failure> {
    match std::env::var("CETP_PAUSE_AT") {
        Ok(s) if !s.is_empty() => PausePoint::parse(&s)
            .map(Some)
            .map_err(|e| usage(format!("CETP_PAUSE_AT: {e}"))),
        _ => Ok(None),
    }
}

/// Ctrl-C: the first asks the run to stop at its next step boundary; a
/// second, while it winds down, ends the process at once (the journal is
/// consistent at every record, so even that can be resumed).
fn on_interrupt() -> std::sync::Arc<std::sync::atomic::AtomicBool> {
    let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let _ = signal_hook::flag::register_conditional_shutdown(
            sig,
            ExitCode::Interrupted.code(),
            flag.clone(),
        );
        let _ = signal_hook::flag::register(sig, flag.clone());
    }
    flag
}

fn dir_failure(e: DirError) -> Failure {
    Failure {
        code: e.exit,
        message: e.message,
    }
}

fn run_command(args: &RunArgs, replay: Option<&str>) -> Result<ExitCode, Failure> {
    let (args, started_at_ms) = match &args.replay_run {
        Some(path) => replayed(args, path)?,
        None => (args.clone(), now_ms()),
    };
    let p = prepare(&args, replay, started_at_ms)?;
    let pause = pause_point()?;
    let run_dir = p
        .args
        .report_dir
        .as_deref()
        .map(RunDir::for_new_run)
        .transpose()
        .map_err(dir_failure)?;
    let trace = WireTrace::new();
    let opts = if replay.is_some() {
        OpenOptions::traced(trace.clone())
    } else {
        OpenOptions::default()
    };
    let target = open_with(&p.spec, &opts)
        .map_err(|e| infra(format!("cannot open target {}: {e}", p.args.first_target())))?;
    precheck(&p, &target, replay.is_some())?;
    if p.args.target.len() > 1 {
        if replay.is_some() {
            return Err(usage(
                "cetp replay runs one case on one device: give one --target",
            ));
        }
        return devices_cmd::run(p, target, run_dir, pause);
    }
    let run_dir = match run_dir {
        Some(mut d) => {
            d.start_journal(&journal_config(&p.args, &p.cfg), pause)
                .map_err(dir_failure)?;
            Some(d)
        }
        None => None,
    };
    execute(p, target, run_dir, replay, Some(trace), false)
}

/// `cetp run` checks its profile first (`cetp profile check`): a wrong
/// field stops the run before anything executes; a missing one only says
/// what it will leave unjudged. The built-in profiles of simulated targets
/// are skipped: they are the fixtures' own, also run against mutants whose
/// descriptors break the spec on purpose, which the run must judge.
fn precheck(
    p: &Prepared,
    target: &cetp_conformance::device::Target,
    quiet: bool,
) -> Result<(), Failure> {
    if p.args.profile.is_none() && matches!(p.spec, TargetSpec::Sim(_)) {
        return Ok(());
    }
    let live = match cetp_conformance::profile_check::read_live(target, &p.profile) {
        // Descriptors that break the spec are the run's to judge, not a
        // profile's fault: check what the profile alone shows.
        Ok(l) if l.problems == 0 => Some(l),
        Ok(_) => None,
        Err(e) => {
            eprintln!(
                "cetp: the profile is checked without the Provider's tools: {}",
                escape::terminal(&e.to_string(), 500)
            );
            None
        }
    };
    let report = cetp_conformance::profile_check::check(
        &p.profile,
        &p.suite,
        live.as_ref().map(|l| &l.facts),
    );
    if !report.errors.is_empty() {
        return profile_cmd::conclude(&report, "profile").map(|_| ());
    }
    if !quiet {
        for m in &report.missing {
            eprintln!(
                "profile: without {}, {} case(s) will not be judged ({} core): {}",
                escape::terminal(&m.needs, 200),
                m.cases.len(),
                m.core_cases.len(),
                escape::terminal(&profile_check_fix(&m.needs), 400)
            );
        }
    }
    Ok(())
}

fn profile_check_fix(needs: &str) -> String {
    cetp_conformance::profile_check::fix_for(needs)
}

/// The terminal view of a run: on stdout, or on stderr when stdout
/// carries a `--format` document. Auto colour: NO_COLOR, CLICOLOR(_FORCE),
/// TERM and whether that stream is a terminal.
fn terminal_view(args: &RunArgs, replay: bool) -> Terminal<Box<dyn std::io::Write + Send>> {
    let (view, auto_color): (Box<dyn std::io::Write + Send>, anstream::ColorChoice) =
        if args.format == Format::Text {
            let out = std::io::stdout();
            let c = anstream::AutoStream::choice(&out);
            (Box::new(out), c)
        } else {
            let err = std::io::stderr();
            let c = anstream::AutoStream::choice(&err);
            (Box::new(err), c)
        };
    let color = match args.color {
        ColorWhen::Always => true,
        ColorWhen::Never => false,
        ColorWhen::Auto => auto_color != anstream::ColorChoice::Never,
    };
    let progress = !replay && std::io::IsTerminal::is_terminal(&std::io::stderr());
    Terminal::new(view, args.verbose, replay)
        .with_color(color)
        .with_progress(progress)
}

/// The reporters of a run: the terminal view, the `--format` document's
/// events, the journal's pin, and the report directory's files.
fn run_reporters(
    p: &Prepared,
    run_dir: Option<&RunDir>,
    replay: bool,
    resumed: bool,
    kept: &Kept,
) -> Result<Fanout, Failure> {
    let mut fanout = Fanout::default();
    fanout
        .reporters
        .push(Box::new(terminal_view(&p.args, replay)));
    if p.args.format != Format::Text {
        fanout.reporters.push(Box::new(kept.clone()));
    }
    if let Some(pin) = run_dir.and_then(RunDir::pin_recorder) {
        fanout.reporters.push(Box::new(pin));
    }
    if let Some(d) = run_dir {
        if resumed {
            d.keep_events().map_err(dir_failure)?;
        }
        let rules = cetp_report::sarif::catalog_rules(&p.vectors_dir).map_err(usage)?;
        fanout
            .reporters
            .extend(cetp_report::standard_reporters(d.path(), rules));
    }
    Ok(fanout)
}

/// Runs a prepared run against an opened target and writes its reports.
fn execute(
    p: Prepared,
    target: cetp_conformance::device::Target,
    run_dir: Option<RunDir>,
    replay: Option<&str>,
    trace: Option<std::sync::Arc<WireTrace>>,
    resumed: bool,
) -> Result<ExitCode, Failure> {
    let journal = run_dir.as_ref().and_then(RunDir::journal).cloned();
    let target = match &journal {
        Some(j) => j.wrap(target),
        None => target,
    };
    reported(p, run_dir, replay, trace, resumed, |p, fanout| {
        run(&p.suite, &target, &p.profile, &p.cfg, fanout)
    })
}

/// Runs `body` (the run itself, on one device or several) with the run's
/// reporters, and writes its reports and last lines.
fn reported(
    mut p: Prepared,
    run_dir: Option<RunDir>,
    replay: Option<&str>,
    trace: Option<std::sync::Arc<WireTrace>>,
    resumed: bool,
    body: impl FnOnce(&Prepared, &mut Fanout) -> cetp_conformance::runner::RunOutcome,
) -> Result<ExitCode, Failure> {
    let journals = run_dir.as_ref().map(RunDir::journals).unwrap_or_default();
    p.cfg.interrupt = Some(on_interrupt());
    let kept = Kept::default();
    let mut fanout = run_reporters(&p, run_dir.as_ref(), replay.is_some(), resumed, &kept)?;
    let args = &p.args;
    // The harness's own lines go where the terminal view goes.
    let say = |line: &str| {
        if args.format == Format::Text {
            println!("{line}");
        } else {
            eprintln!("{line}");
        }
    };
    let outcome = body(&p, &mut fanout);
    if let Some(why) = journals.iter().find_map(|j| j.diverged()) {
        return Err(infra(format!(
            "cannot resume: {}",
            escape::terminal(&why, 2000)
        )));
    }
    if let Some(doc) = args.format.document() {
        // Only SARIF names the catalog's rules.
        let rules = match doc {
            Document::Sarif => cetp_report::sarif::catalog_rules(&p.vectors_dir).map_err(usage)?,
            _ => Default::default(),
        };
        print!("{}", document::render(doc, &kept.events(), rules));
    }
    for r in &mut fanout.reporters {
        r.finish()
            .map_err(|e| infra(format!("cannot write the report: {e}")))?;
    }
    if let Some(trace) = trace.filter(|_| replay.is_some()) {
        println!("\nwire trace ({} frames):", trace.frames().len());
        print!("{}", trace.render());
    }
    if resumed && !journals.is_empty() {
        let mut s = cetp_conformance::journal::ReplayStats::default();
        for j in &journals {
            let t = j.stats();
            s.replayed += t.replayed;
            s.reconciled += t.reconciled;
            s.revived += t.revived;
            s.live += t.live;
        }
        say(&format!(
            "resumed: {} answer(s) replayed from the journal, {} in-flight call(s) sent again with their request_id, {} handle(s) re-obtained, {} new exchange(s)",
            s.replayed, s.reconciled, s.revived, s.live
        ));
    }
    match (&run_dir, outcome.interrupted) {
        (Some(d), true) => say(&format!(
            "the run stopped before its end; continue it with: cetp resume {}",
            d.path().display()
        )),
        (None, true) => say(
            "the run stopped before its end; without --report-dir it has no journal to resume from",
        ),
        (Some(d), false) => d.end(outcome.exit, false).map_err(dir_failure)?,
        (None, false) => {}
    }
    if let Some(dir) = &args.report_dir {
        say(&format!("report: {}", dir.join("report.json").display()));
    }
    if args.require_claim && !outcome.claim.cetp_v2 && outcome.exit == ExitCode::Ok {
        say(&format!("--require-claim: {}", outcome.claim.statement));
        return Ok(ExitCode::Fail);
    }
    Ok(outcome.exit)
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

/// The run arguments a journal's `run` record holds.
fn args_of_journal(config: &serde_json::Value, r: &ResumeArgs) -> Result<RunArgs, Failure> {
    let bad = |what: &str| {
        usage(format!(
            "{}: the journal's run record has no valid {what}",
            r.dir.display()
        ))
    };
    let string = |k: &str| config[k].as_str().map(str::to_string);
    let path = |k: &str| config[k].as_str().map(PathBuf::from);
    let strings = |k: &str| -> Result<Vec<String>, Failure> {
        config[k]
            .as_array()
            .ok_or_else(|| bad(k))?
            .iter()
            .map(|v| v.as_str().map(str::to_string).ok_or_else(|| bad(k)))
            .collect()
    };
    Ok(RunArgs {
        // A run of several devices lists them all (`targets`).
        target: match config["targets"].as_array() {
            Some(_) => strings("targets")?,
            None => vec![string("target").ok_or_else(|| bad("target"))?],
        },
        devices: devices_cmd::Mode::Shard,
        target_b: string("target_b"),
        adb_server: string("adb_server"),
        profile: path("profile"),
        report_dir: Some(r.dir.clone()),
        only: strings("only")?,
        skip: strings("skip")?,
        baseline: path("baseline"),
        seed: config["seed"].as_u64().ok_or_else(|| bad("seed"))?,
        attempts: config["attempts"]
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| bad("attempts"))?,
        run_timeout: r.run_timeout,
        // Journals written before --max-wait existed: its default.
        max_wait: config["max_wait_ms"].as_u64().map_or(
            std::time::Duration::from_secs(180),
            std::time::Duration::from_millis,
        ),
        vectors: path("vectors"),
        verbose: r.verbose,
        require_claim: config["require_claim"].as_bool().unwrap_or(false),
        lock: path("lock"),
        partition: serde_json::from_value(config["partition"].clone())
            .map_err(|_| bad("partition"))?,
        replay_run: None,
        color: r.color,
        format: Format::Text,
    })
}

fn resume_command(r: &ResumeArgs) -> Result<ExitCode, Failure> {
    let (mut run_dir, rec) = RunDir::unfinished(&r.dir).map_err(dir_failure)?;
    let started_at_ms = rec.config["started_at_ms"]
        .as_i64()
        .ok_or_else(|| usage("the journal's run record has no started_at_ms"))?;
    let args = args_of_journal(&rec.config, r)?;
    let p = prepare(&args, None, started_at_ms)?;
    if args.target.len() > 1 {
        return devices_cmd::resume(p, run_dir, rec, &r.dir);
    }
    if matches!(p.spec, TargetSpec::Sim(_)) {
        return Err(usage(format!(
            "the run in {} was against `{}`, a simulated device inside the harness process: the Provider's state died with it, so the run cannot be continued; run it again (serve `cetp sim` and use --target tcp:… for runs that can be resumed)",
            r.dir.display(),
            args.first_target()
        )));
    }
    let target = open_with(&p.spec, &OpenOptions::default())
        .map_err(|e| infra(format!("cannot open target {}: {e}", args.first_target())))?;
    // Fail-closed: the target, profile, vectors and harness must be those
    // the run was pinned to, or it is refused before anything is replayed.
    let live = cetp_conformance::runner::pin_of(&p.suite, &target, &p.profile, &p.cfg)
        .map_err(|e| infra(format!("cannot identify the target to check the pin: {e}")))?;
    check_pin(&r.dir, rec.pin.as_ref(), &live)?;
    run_dir
        .resume_journal(&rec, pause_point()?, now_ms())
        .map_err(dir_failure)?;
    execute(p, target, Some(run_dir), None, None, true)
}

/// Fail-closed: a resumed run's live pin must be the journaled one, or it
/// is refused before anything is replayed, naming every field that moved.
fn check_pin(
    dir: &Path,
    journaled: Option<&cetp_conformance::pin::Pin>,
    live: &cetp_conformance::pin::Pin,
) -> Result<(), Failure> {
    let r_dir = dir;
    if let Some(old) = journaled {
        let moved = old.differences(live);
        if !moved.is_empty() {
            let show = |v: Option<&serde_json::Value>| {
                escape::terminal(&v.map_or("(absent)".to_string(), |v| v.to_string()), 120)
            };
            let lines: Vec<String> = moved
                .iter()
                .map(|f| {
                    format!(
                        "  {f}: was {}, now {}",
                        show(old.fields.get(f)),
                        show(live.fields.get(f))
                    )
                })
                .collect();
            return Err(usage(format!(
                "cannot resume {}: the run was pinned to another configuration; these fields differ ({}):\n{}",
                r_dir.display(),
                moved.join(", "),
                lines.join("\n")
            )));
        }
    }
    Ok(())
}

fn read_lock(path: &Path) -> Result<Lock, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| usage(format!("lock {}: {e}", path.display())))?;
    Lock::parse(&text).map_err(|e| usage(format!("lock {}: {e}", path.display())))
}

fn open_target(
    spec: &TargetSpec,
    label: &str,
) -> Result<cetp_conformance::device::Target, Failure> {
    open_with(spec, &OpenOptions::default())
        .map_err(|e| infra(format!("cannot open target {label}: {e}")))
}

fn fetch_failure(e: FetchError) -> Failure {
    match e {
        FetchError::Infra(m) => infra(escape::terminal(&m, 500)),
        FetchError::Provider(m) => Failure {
            code: ExitCode::Fail,
            message: escape::terminal(&m, 500),
        },
    }
}

fn lock_command(args: &LockArgs) -> Result<ExitCode, Failure> {
    let spec = parse_target(&args.target, &None, &args.adb_server)?;
    let profile = profile_for(&args.profile, &spec)?;
    let target = open_target(&spec, &args.target)?;
    let built = lock_target::record(&target, &profile).map_err(fetch_failure)?;
    if !built.problems.is_empty() {
        for p in &built.problems {
            eprintln!(
                "{} {}: breaks §{}: {}",
                p.method,
                escape::terminal(&p.pointer, 200),
                p.section,
                escape::terminal(&p.message, 300)
            );
        }
        return Err(Failure {
            code: ExitCode::Fail,
            message: format!(
                "the Provider's descriptors break the spec in {} place(s): no lock written",
                built.problems.len()
            ),
        });
    }
    std::fs::write(&args.out, built.lock.to_pretty_json())
        .map_err(|e| usage(format!("cannot write {}: {e}", args.out.display())))?;
    println!(
        "wrote {}: {} tool(s) of {} at revision {}",
        args.out.display(),
        built.lock.tools.len(),
        escape::terminal(&built.lock.provider_id, 200),
        escape::terminal(&built.lock.revision, 200)
    );
    Ok(ExitCode::Ok)
}

fn drift_command(args: &DriftArgs) -> Result<ExitCode, Failure> {
    let lock = read_lock(&args.lock)?;
    let report = match (&args.against, &args.target) {
        (Some(other), _) => cetp_contract::drift::diff(&lock, &read_lock(other)?),
        (None, Some(t)) => {
            let spec = parse_target(t, &None, &args.adb_server)?;
            let profile = profile_for(&args.profile, &spec)?;
            let target = open_target(&spec, t)?;
            lock_target::drift(&target, &profile, &lock).map_err(fetch_failure)?
        }
        (None, None) => return Err(usage("give --target or --against")),
    };
    let lock_uri = args.lock.display().to_string();
    let rendered = match args.format {
        DriftFormat::Text => cetp_report::drift::text(&report),
        DriftFormat::Json => cetp_report::drift::json(&report),
        DriftFormat::Sarif => cetp_report::drift::sarif(
            &report,
            &format!("cetp {}", env!("CARGO_PKG_VERSION")),
            Some(&lock_uri),
        ),
    };
    print!("{rendered}");
    Ok(ExitCode::for_drift(report.worst()))
}

/// Writes the proof record or checks it (`--write-proof`,
/// `--check-proof`), saying so; a stale record is a FAIL.
fn settle_proof(
    proof: &ProofRecord,
    write: Option<&PathBuf>,
    check: Option<&PathBuf>,
) -> Result<ExitCode, Failure> {
    if let Some(path) = write {
        println!("{}", proof.write(path).map_err(infra)?);
    }
    if let Some(path) = check {
        match proof.check(path) {
            Ok(line) => println!("{line}"),
            Err(stale) => {
                eprintln!("{stale}");
                return Ok(ExitCode::Fail);
            }
        }
    }
    Ok(ExitCode::Ok)
}

/// The Consumer half of the self-test, its table, and (when asked) its
/// proof record.
fn consumer_selftest(
    dir: &std::path::Path,
    write: Option<&PathBuf>,
    check: Option<&PathBuf>,
) -> Result<ExitCode, Failure> {
    let scenarios =
        cetp_conformance::consumer::scenario::load_dir(&dir.join("consumer")).map_err(usage)?;
    let mutants =
        cetp_conformance::consumer::load_mutants(&dir.join("mutants/consumer-mutants.json"))
            .map_err(usage)?;
    let variants =
        cetp_conformance::consumer::load_variants(&dir.join("variants/consumer-variants.json"))
            .map_err(usage)?;
    eprintln!(
        "selftest: Consumer: {} scenarios, reference + {} mutants + {} legal variants",
        scenarios.len(),
        mutants.len(),
        variants.len()
    );
    let quiet = cetp_conformance::consumer::runner::QuietConsumerPanics::install();
    let report =
        cetp_conformance::consumer::selftest(&scenarios, &mutants, &variants).map_err(usage);
    drop(quiet);
    let report = report?;
    print!("{}", report.render());
    let proof = ProofRecord::new(
        "Consumer proof record",
        "cetp selftest --consumer-only",
        &report.proof(),
    );
    if settle_proof(&proof, write, check)? == ExitCode::Fail {
        return Ok(ExitCode::Fail);
    }
    Ok(if report.ok() {
        ExitCode::Ok
    } else {
        ExitCode::Fail
    })
}

fn selftest_command(args: &SelftestArgs) -> Result<ExitCode, Failure> {
    if args.consumer_only {
        if !args.mutant.is_empty() || !args.variant.is_empty() {
            return Err(usage("--consumer-only runs no Provider mutant or variant"));
        }
        let dir = vectors_or_default(&args.vectors)?;
        return consumer_selftest(&dir, args.write_proof.as_ref(), args.check_proof.as_ref());
    }
    let (dir, suite) = load_suite(&args.vectors)?;
    let mut mutants = load_mutants(&dir.join("mutants/mutants.json")).map_err(usage)?;
    let mut variants = load_variants(&dir.join("variants/variants.json")).map_err(usage)?;
    let filtered = !args.mutant.is_empty() || !args.variant.is_empty();
    if filtered && (args.write_proof.is_some() || args.check_proof.is_some()) {
        return Err(usage(
            "--write-proof/--check-proof need the whole self-test (no --mutant/--variant)",
        ));
    }
    if filtered {
        for name in args.mutant.iter() {
            if !mutants.iter().any(|m| &m.name == name) {
                return Err(usage(format!("no mutant named {name:?}")));
            }
        }
        for name in args.variant.iter() {
            if !variants.iter().any(|v| &v.name == name) {
                return Err(usage(format!("no legal variant named {name:?}")));
            }
        }
        mutants.retain(|m| args.mutant.contains(&m.name));
        variants.retain(|v| args.variant.contains(&v.name));
    }
    let profiles_dir = embedded::profiles_dir().map_err(infra)?;
    let variants = selftest::with_profiles(variants, &profiles_dir).map_err(usage)?;
    let mut fixtures = selftest::fixtures().map_err(usage)?;
    if filtered {
        // Only the fixtures of the selected mutants.
        fixtures.retain(|f| mutants.iter().any(|m| m.providers.contains(&f.name)));
    }
    let cfg = RunConfig {
        seed: args.seed,
        harness_version: format!("cetp {}", env!("CARGO_PKG_VERSION")),
        started_at_ms: now_ms(),
        ..RunConfig::default()
    };
    let factory = cetp_targets::target_factory();
    let total = selftest::planned_runs(&fixtures, &mutants, variants.len());
    let done = std::sync::atomic::AtomicUsize::new(0);
    let progress = |name: &str| {
        let n = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        eprintln!("selftest: [{n}/{total}] {name}");
    };
    let report = selftest::selftest(
        &suite, &fixtures, &mutants, &variants, &cfg, &factory, args.jobs, &progress,
    );
    print!("{}", report.render());
    let proof = ProofRecord::new("proof record", "cetp selftest", &report.proof());
    let settled = settle_proof(&proof, args.write_proof.as_ref(), args.check_proof.as_ref())?;
    if settled == ExitCode::Fail {
        return Ok(ExitCode::Fail);
    }
    // The Consumer half runs with the whole self-test (it takes a second).
    let consumer = if filtered {
        ExitCode::Ok
    } else {
        println!();
        consumer_selftest(&dir, None, None)?
    };
    Ok(if report.ok() && consumer == ExitCode::Ok {
        ExitCode::Ok
    } else {
        ExitCode::Fail
    })
}

fn coverage_command(args: &CoverageArgs) -> Result<ExitCode, Failure> {
    let (dir, suite) = load_suite(&args.vectors)?;
    let catalog_path = dir.join("requirements/catalog.json");
    let text = std::fs::read_to_string(&catalog_path)
        .map_err(|e| usage(format!("{}: {e}", catalog_path.display())))?;
    let catalog = cetp_proto::catalog::Catalog::from_json(&text)
        .map_err(|e| usage(format!("{}: {e}", catalog_path.display())))?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| repo_dir().join("reports"));
    let proof = coverage::load_proof(&out.join("proof.json")).map_err(usage)?;
    let exemptions =
        coverage::load_exemptions(&dir.join("coverage/exemptions.json")).map_err(usage)?;
    let scenarios =
        cetp_conformance::consumer::scenario::load_dir(&dir.join("consumer")).map_err(usage)?;
    let consumer = coverage::ConsumerCoverage {
        index: cetp_conformance::consumer::requirement_index(&scenarios),
        proof: coverage::load_proof(&out.join("consumer-proof.json")).map_err(usage)?,
    };
    let rows = coverage::rows_with_consumer(&catalog, &suite, &proof, &exemptions, &consumer);
    let md = coverage::render_markdown(&rows);
    let json =
        serde_json::to_string_pretty(&coverage::render_json(&rows)).unwrap_or_default() + "\n";
    let (md_path, json_path) = (out.join("coverage.md"), out.join("coverage.json"));
    let gaps: Vec<&str> = rows
        .iter()
        .filter(|r| r.status == coverage::Status::Gap)
        .map(|r| r.id.as_str())
        .collect();
    if args.write {
        std::fs::create_dir_all(&out).map_err(|e| usage(e.to_string()))?;
        std::fs::write(&md_path, &md).map_err(|e| usage(e.to_string()))?;
        std::fs::write(&json_path, &json).map_err(|e| usage(e.to_string()))?;
        println!("wrote {} and {}", md_path.display(), json_path.display());
    } else if args.check {
        let stale = std::fs::read_to_string(&md_path).ok().as_deref() != Some(md.as_str())
            || std::fs::read_to_string(&json_path).ok().as_deref() != Some(json.as_str());
        if stale {
            eprintln!("coverage report is stale: run `cetp coverage --write` and commit reports/coverage.*");
            return Ok(ExitCode::Fail);
        }
        println!("coverage report is up to date");
    } else {
        print!("{md}");
    }
    if !gaps.is_empty() {
        eprintln!(
            "requirements observable from outside but enforced by no case: {}",
            gaps.join(", ")
        );
        return Ok(ExitCode::Fail);
    }
    Ok(ExitCode::Ok)
}

/// One line each: the id, then what it is about and what it cites.
fn list_command(what: ListWhat, vectors: &Option<PathBuf>) -> Result<ExitCode, Failure> {
    let (dir, suite) = load_suite(vectors)?;
    match what {
        ListWhat::Cases => {
            for c in &suite.cases {
                let needs = if c.needs.is_empty() {
                    "core".to_string()
                } else {
                    c.needs.join("+")
                };
                println!(
                    "{:<11} {:<9} {:<28} {}  [{}]",
                    c.id,
                    format!("{:?}", c.level).to_uppercase(),
                    needs,
                    c.title,
                    c.requirements.join(", ")
                );
            }
        }
        ListWhat::Checks => {
            for c in &suite.checks {
                println!("{:<19} {}  [{}]", c.id, c.title, c.requirements.join(", "));
            }
        }
        ListWhat::Mutants => {
            for m in load_mutants(&dir.join("mutants/mutants.json")).map_err(usage)? {
                let mark = if m.equivalent.is_some() {
                    " (equivalent)"
                } else {
                    ""
                };
                println!(
                    "{:<40} {:<16} [{}]{mark}  {}",
                    m.name,
                    m.providers.join(","),
                    m.requirements.join(", "),
                    m.description
                );
            }
        }
        ListWhat::Variants => {
            for v in load_variants(&dir.join("variants/variants.json")).map_err(usage)? {
                println!(
                    "{:<34} {:<11} [{}]  {}",
                    v.name,
                    v.latitude,
                    v.allowed_by.join(", "),
                    v.description
                );
            }
        }
    }
    Ok(ExitCode::Ok)
}

fn catalog_command(
    ids: &[String],
    spec: &Option<PathBuf>,
    vectors: &Option<PathBuf>,
) -> Result<ExitCode, Failure> {
    let dir = vectors_or_default(vectors)?;
    let text = std::fs::read_to_string(dir.join("requirements/catalog.json"))
        .map_err(|e| usage(e.to_string()))?;
    let catalog =
        cetp_proto::catalog::Catalog::from_json(&text).map_err(|e| usage(e.to_string()))?;
    let spec_path = spec
        .clone()
        .unwrap_or_else(|| repo_dir().join("../shared/spec/cetp-v2.zh.md"));
    let spec_text = std::fs::read_to_string(&spec_path).ok();
    for id in ids {
        if !catalog.active().any(|r| &r.id == id) {
            return Err(usage(format!("no requirement {id:?} in the catalog")));
        }
    }
    for r in catalog.active() {
        if !ids.is_empty() && !ids.contains(&r.id) {
            continue;
        }
        println!(
            "{} [{} {}] §{}: {}",
            r.id,
            r.level,
            format!("{:?}", r.side).to_lowercase(),
            r.section,
            r.summary
        );
        match spec_text
            .as_deref()
            .and_then(|t| cetp_proto::catalog::clause_text(t, &r.source))
        {
            Some(clause) => println!("    spec line {}: {}", r.source.line, clause),
            None => println!(
                "    spec line {} (spec not found at {})",
                r.source.line,
                spec_path.display()
            ),
        }
    }
    Ok(ExitCode::Ok)
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
