//! `cetp fuzz`: the command around `cetp_fuzz` (target, profile, output
//! directory, progress line, exit codes).

use super::{infra, on_interrupt, parse_target, profile_for, usage, vectors_or_default, Failure};
use cetp_conformance::exit::ExitCode;
use cetp_conformance::suite::Suite;
use cetp_fuzz::{FuzzConfig, Fuzzer, Mutator, OracleChoice, Stats};
use cetp_report::escape;
use clap::{Args, ValueEnum};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum MutatorArg {
    /// Stateful sequences and envelope mutations that know CETP.
    Structured,
    /// The baseline: random byte edits of a fixed seed sequence's envelopes.
    Blind,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum OracleArg {
    /// The differential oracle for the reference's own apps, the
    /// descriptor oracle for any other Provider.
    Auto,
    /// A shadow built from the protocol and the target's own descriptors:
    /// judges any Provider.
    Descriptor,
    /// The reference's own app beside the target (its fixtures only).
    Differential,
}

#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("amount").required(true).args(["budget", "cases"])))]
pub struct FuzzArgs {
    /// sim[:mutant=NAME,variant=NAME,...] | tcp:HOST:PORT | adb[:SERIAL]
    #[arg(long, default_value = "sim")]
    target: String,
    /// Endpoint of the second caller identity (tcp targets).
    #[arg(long, value_name = "HOST:PORT")]
    target_b: Option<String>,
    /// Address of the adb server (adb targets).
    #[arg(long, value_name = "HOST:PORT")]
    adb_server: Option<String>,
    /// Vendor profile (TOML): only the side-effecting tools it allows are
    /// ever executed (sim targets use the built-in profile of their app).
    #[arg(long)]
    profile: Option<PathBuf>,
    /// How long to fuzz (`90s`, `10m`).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    budget: Option<Duration>,
    /// How many sequences to generate.
    #[arg(long)]
    cases: Option<u64>,
    /// Seed of every sequence [default: from the clock, printed].
    #[arg(long)]
    seed: Option<u64>,
    /// Where findings (`findings/FUZZ-*.json`, regular case files) and
    /// `fuzz.json` go.
    #[arg(long)]
    out: PathBuf,
    /// Moves per sequence, at most.
    #[arg(long, default_value_t = 8)]
    max_moves: usize,
    /// Stop after this many distinct findings.
    #[arg(long, default_value_t = 10)]
    max_findings: usize,
    #[arg(long, value_enum, default_value_t = MutatorArg::Structured)]
    mutator: MutatorArg,
    /// Which oracle judges the target.
    #[arg(long, value_enum, default_value_t = OracleArg::Auto)]
    oracle: OracleArg,
    /// The vectors directory (checks, rules, catalog) [default: the repository's].
    #[arg(long)]
    vectors: Option<PathBuf>,
    /// The contract lock of the release before (`cetp lock`): the target
    /// is held to it (LOCK-001, §3.3) before fuzzing.
    #[arg(long)]
    lock: Option<PathBuf>,
    /// No progress line.
    #[arg(short, long)]
    quiet: bool,
}

pub fn fuzz_command(args: &FuzzArgs) -> Result<ExitCode, Failure> {
    let dir = vectors_or_default(&args.vectors)?;
    let suite = Suite::load(&dir).map_err(|e| usage(format!("vectors: {e}")))?;
    let levels = catalog_levels(&dir)?;
    let spec = parse_target(&args.target, &args.target_b, &args.adb_server)?;
    let profile = profile_for(&args.profile, &spec)?;
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
    });
    std::fs::create_dir_all(args.out.join("findings"))
        .map_err(|e| infra(format!("cannot write to {}: {e}", args.out.display())))?;
    let target = cetp_targets::open(&spec)
        .map_err(|e| infra(format!("cannot open target {}: {e}", args.target)))?;
    let (_, env) = cetp_conformance::runner::identify(&target, &profile)
        .map_err(|e| infra(format!("cannot identify the target: {e}")))?;
    let cfg = fuzz_config(args, seed, levels)?;
    let mut fuzzer = match Fuzzer::new(target, &profile, env, &suite.rules, cfg) {
        Ok(f) => f,
        Err(e @ cetp_fuzz::FuzzError::Refused(_)) => return Err(usage(format!("fuzz: {e}"))),
        Err(cetp_fuzz::FuzzError::Unlearnable(f)) => return unlearnable(args, seed, &f),
        Err(e) => return Err(infra(format!("fuzz: {e}"))),
    };
    announce(args, &spec, seed, &fuzzer);
    let started = Instant::now();
    let report = {
        let mut progress = ProgressLine::new(args.quiet);
        let report = fuzzer.run(&mut |s: &Stats| progress.show(s));
        progress.finish();
        report
    };
    write_findings(args, &report)?;
    print_report(args, seed, started, &report);
    if report.findings.is_empty() {
        Ok(ExitCode::Ok)
    } else {
        Ok(ExitCode::Fail)
    }
}

/// The fuzzer's configuration from the command line.
fn fuzz_config(
    args: &FuzzArgs,
    seed: u64,
    levels: std::collections::BTreeMap<String, String>,
) -> Result<FuzzConfig, Failure> {
    Ok(FuzzConfig {
        seed,
        budget: args.budget,
        cases: args.cases,
        max_moves: args.max_moves.max(1),
        max_findings: args.max_findings.max(1),
        mutator: match args.mutator {
            MutatorArg::Structured => Mutator::Structured,
            MutatorArg::Blind => Mutator::Blind,
        },
        levels,
        interrupt: Some(on_interrupt()),
        lock: args.lock.as_deref().map(super::read_lock).transpose()?,
        oracle: match args.oracle {
            OracleArg::Auto => OracleChoice::Auto,
            OracleArg::Descriptor => OracleChoice::Descriptor,
            OracleArg::Differential => OracleChoice::Differential,
        },
        ..FuzzConfig::default()
    })
}

/// What is fuzzed, by which oracle, and whether side effects are executed.
fn announce(args: &FuzzArgs, spec: &cetp_targets::TargetSpec, seed: u64, fuzzer: &Fuzzer) {
    let world = fuzzer.world();
    let oracle_line = match fuzzer.oracle_kind() {
        "descriptor" => format!(
            "oracle: descriptor (the reference engine hosting the target's own descriptors, {} members: reference + legal variants, each with two business flavours)",
            fuzzer.oracle_members().len()
        ),
        _ => format!(
            "oracle: differential ({} members: the reference's own app + legal variants)",
            fuzzer.oracle_members().len()
        ),
    };
    eprintln!(
        "cetp fuzz: seed {seed} · target {} · {} tools ({} executable, {} with side effects the profile allows) · {oracle_line}",
        escape::terminal(&args.target, 200),
        world.tools.len(),
        world.executable().count(),
        world.side_effecting().count(),
    );
    if world.side_effecting().count() == 0 {
        eprintln!(
            "cetp fuzz: {}: only read tools and the protocol surface are fuzzed; no tool with a side effect is executed",
            if args.profile.is_none() && !matches!(spec, cetp_targets::TargetSpec::Sim(_)) {
                "no profile"
            } else {
                "the profile's [execute] allow lists no tool with a side effect"
            }
        );
    }
}

/// The running figures: one line redrawn in place on a terminal, elsewhere
/// a line every 10 s, nothing when quiet.
struct ProgressLine {
    quiet: bool,
    bar: Option<indicatif::ProgressBar>,
    last_line: Instant,
}

impl ProgressLine {
    fn new(quiet: bool) -> Self {
        let tty = std::io::stderr().is_terminal() && !quiet;
        let bar = tty.then(|| {
            let bar = indicatif::ProgressBar::new_spinner();
            bar.set_style(
                indicatif::ProgressStyle::with_template("{msg}")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
            );
            bar
        });
        ProgressLine {
            quiet,
            bar,
            last_line: Instant::now(),
        }
    }

    fn show(&mut self, s: &Stats) {
        if self.quiet {
            return;
        }
        let secs = (s.elapsed_ms as f64 / 1000.0).max(0.001);
        let line = format!(
            "cases {} · judged {} · findings {} · {:.1} cases/s · {:.0} envelopes/s · {:.0}s",
            s.cases,
            s.judged,
            s.findings,
            s.cases as f64 / secs,
            s.envelopes as f64 / secs,
            secs
        );
        if let Some(bar) = &self.bar {
            bar.set_message(line);
        } else if self.last_line.elapsed() >= Duration::from_secs(10) {
            eprintln!("{line}");
            self.last_line = Instant::now();
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.abandon();
        }
    }
}

/// `findings/ID.json` for every shrunk finding, and `fuzz.json` (the
/// report without the findings' files).
fn write_findings(args: &FuzzArgs, report: &cetp_fuzz::FuzzReport) -> Result<(), Failure> {
    for f in report.findings.iter().filter(|f| f.moves_before > 0) {
        let path = args.out.join("findings").join(format!("{}.json", f.id));
        let text = serde_json::to_string_pretty(&f.file).unwrap_or_default();
        std::fs::write(&path, text + "\n")
            .map_err(|e| infra(format!("cannot write {}: {e}", path.display())))?;
    }
    let mut summary = serde_json::to_value(report).unwrap_or_default();
    if let Some(fs) = summary.get_mut("findings").and_then(|f| f.as_array_mut()) {
        for f in fs {
            if let Some(o) = f.as_object_mut() {
                o.remove("file");
            }
        }
    }
    let summary_path = args.out.join("fuzz.json");
    std::fs::write(
        &summary_path,
        serde_json::to_string_pretty(&summary).unwrap_or_default() + "\n",
    )
    .map_err(|e| infra(format!("cannot write {}: {e}", summary_path.display())))
}

/// The run's figures, its findings with how to replay each, the flaky
/// ones and the oracle's notes.
fn print_report(args: &FuzzArgs, seed: u64, started: Instant, report: &cetp_fuzz::FuzzReport) {
    let s = &report.stats;
    println!(
        "seed {seed}: {} sequences, {} judged, {} envelopes, {} findings in {:.1}s",
        s.cases,
        s.judged,
        s.envelopes,
        report.findings.len(),
        started.elapsed().as_secs_f64()
    );
    match report.effects_observed {
        Some(n) => println!(
            "effects: {n} observed by the profile's observer; {} side-effecting calls sent",
            s.dispatched
        ),
        None => println!(
            "effects: {} side-effecting calls sent (the profile's observer does not count effects)",
            s.dispatched
        ),
    }
    if let Some(why) = &report.effects_unjudged {
        println!("effects: {}", escape::terminal(why, 400));
    }
    for f in report.findings.iter().filter(|f| f.moves_before == 0) {
        println!(
            "FINDING {} — {}\n  cites {}\n  replay: cetp run --target {} --lock {} --only {}",
            f.id,
            escape::terminal(&f.message, 300),
            f.cited.join(", "),
            escape::terminal(&args.target, 200),
            args.lock
                .as_deref()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            f.id
        );
    }
    for f in report.findings.iter().filter(|f| f.moves_before > 0) {
        println!(
            "FINDING {} {} — {}\n  cites {}\n  shrunk from {} moves to {} ({} steps); replay: cetp replay {} --target {}",
            f.id,
            escape::terminal(&f.signature, 200),
            escape::terminal(&f.message, 300),
            if f.cited.is_empty() { "(the check's rule)".to_string() } else { f.cited.join(", ") },
            f.moves_before,
            f.moves_after,
            f.steps_after,
            args.out.join("findings").join(format!("{}.json", f.id)).display(),
            escape::terminal(&args.target, 200),
        );
    }
    println!("judged by the {} oracle", report.oracle_kind);
    for f in &report.flaky {
        println!(
            "FLAKY (failed once, not again on a fresh run of the same moves; not charged) {} — {}",
            escape::terminal(&f.signature, 200),
            escape::terminal(&f.message, 300)
        );
    }
    for n in &report.oracle_notes {
        println!(
            "ORACLE NOTE (a check fired on a legal Provider; not charged): {}",
            escape::terminal(n, 300)
        );
    }
}

/// The target failed the descriptor oracle's learning case: that case is
/// the finding (a regular case file), and nothing was fuzzed.
fn unlearnable(args: &FuzzArgs, seed: u64, f: &cetp_fuzz::Finding) -> Result<ExitCode, Failure> {
    let path = args.out.join("findings").join(format!("{}.json", f.id));
    let text = serde_json::to_string_pretty(&f.file).unwrap_or_default();
    std::fs::write(&path, text + "\n")
        .map_err(|e| infra(format!("cannot write {}: {e}", path.display())))?;
    let summary = serde_json::json!({
        "seed": seed,
        "oracle_kind": "descriptor",
        "stats": cetp_fuzz::Stats::default(),
        "findings": [{"id": f.id, "signature": f.signature, "message": f.message,
                      "cited": f.cited, "found_after_ms": 0}],
        "flaky": [],
        "oracle_notes": [],
        "first_finding_ms": 0,
    });
    let summary_path = args.out.join("fuzz.json");
    std::fs::write(
        &summary_path,
        serde_json::to_string_pretty(&summary).unwrap_or_default() + "\n",
    )
    .map_err(|e| infra(format!("cannot write {}: {e}", summary_path.display())))?;
    println!(
        "FINDING {} — the target failed the descriptor oracle's learning case before any fuzzing: {}\n  cites {}\n  replay: cetp replay {} --target {}",
        f.id,
        escape::terminal(&f.message, 300),
        f.cited.join(", "),
        path.display(),
        escape::terminal(&args.target, 200),
    );
    println!("judged by the descriptor oracle");
    Ok(ExitCode::Fail)
}

fn catalog_levels(
    dir: &std::path::Path,
) -> Result<std::collections::BTreeMap<String, String>, Failure> {
    let path = dir.join("requirements/catalog.json");
    let text =
        std::fs::read_to_string(&path).map_err(|e| usage(format!("{}: {e}", path.display())))?;
    let catalog = cetp_proto::catalog::Catalog::from_json(&text)
        .map_err(|e| usage(format!("{}: {e}", path.display())))?;
    Ok(catalog
        .active()
        .map(|r| {
            (
                r.id.clone(),
                if r.level.is_mandatory() {
                    "MUST"
                } else {
                    "SHOULD"
                }
                .to_string(),
            )
        })
        .collect())
}
