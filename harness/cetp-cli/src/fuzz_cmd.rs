//! `cetp fuzz`: the command around `cetp_fuzz` (target, profile, output
//! directory, progress line, exit codes).

use super::{
    cannot_open, infra, on_interrupt, parse_target, profile_for, usage, vectors_or_default, Failure,
};
use cetp_conformance::exit::ExitCode;
use cetp_fuzz::{campaign, FuzzConfig, Fuzzer, Mutator, OracleChoice, Stats};
use cetp_report::escape;
use cetp_vectors::suite::Suite;
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
    /// sim[:...] | tcp:HOST:PORT[,b=HOST:PORT] | adb[:SERIAL][,...] | jvm:... (see below);
    /// repeat it to fuzz several targets at once, one worker each.
    #[arg(long, default_value = "sim")]
    target: Vec<String>,
    /// Fuzz targets that run different Provider builds (package, authority,
    /// manifest, signing certificate or tool revision) in one campaign;
    /// without it they are refused before anything runs.
    #[arg(long)]
    mixed_builds: bool,
    /// A corpus directory shared by the workers (and by other runs given
    /// it): sequences that showed something new are written there, and
    /// sequences are derived from what is there. Made if missing.
    #[arg(long, value_name = "DIR")]
    corpus: Option<PathBuf>,
    /// Endpoint of the second caller identity (one tcp target).
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
    /// How many sequences to generate (per worker, with several targets).
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
    /// Stop after this many distinct findings (over all workers).
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
    /// The longest real-time wait on a device whose clock cannot move (a
    /// phone, the JVM device): for a lifetime a sequence lets run out (a
    /// longer one leaves that sequence unjudged), and for an operation a
    /// sequence left running to end before the next starts (while one is
    /// open, the next sequence's effects are not judged).
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = humantime::parse_duration)]
    max_wait: Duration,
    /// On a device whose clock cannot move, sleep through each real-time
    /// wait (a poll's `poll_after_ms`, a lifetime) instead of judging
    /// effect-free sequences during it: the slower pace to compare with.
    #[arg(long)]
    no_fill: bool,
    /// No progress line.
    #[arg(short, long)]
    quiet: bool,
}

pub fn fuzz_command(args: &FuzzArgs) -> Result<ExitCode, Failure> {
    if args.target.len() > 1 || args.corpus.is_some() {
        return campaign_command(args);
    }
    let dir = vectors_or_default(&args.vectors)?;
    let suite = Suite::load(&dir).map_err(|e| usage(format!("vectors: {e}")))?;
    let levels = catalog_levels(&dir)?;
    let spec = parse_target(first_target(args), &args.target_b, &args.adb_server)?;
    let profile = profile_for(&args.profile, &spec)?;
    let seed = run_seed(args);
    std::fs::create_dir_all(args.out.join("findings"))
        .map_err(|e| infra(format!("cannot write to {}: {e}", args.out.display())))?;
    let opts = cetp_targets::OpenOptions {
        device_log: Some(args.out.join("jvm-device.log")),
        ..cetp_targets::OpenOptions::default()
    };
    let target = cetp_targets::open_with(&spec, &opts)
        .map_err(|e| cannot_open(&escape::terminal(first_target(args), 200), e))?;
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
    Ok(if !report.findings.is_empty() {
        ExitCode::Fail
    } else if report.lost.is_some() {
        ExitCode::Infra
    } else {
        ExitCode::Ok
    })
}

/// The target of a one-target run.
fn first_target(args: &FuzzArgs) -> &str {
    args.target.first().map_or("sim", String::as_str)
}

/// `--target T` and the flags a replay needs to meet the target as this
/// run did (`--target-b`, `--adb-server`, `--profile`: without the profile
/// a finding that uses its roles or observer is not judged), quoted for a
/// shell and made safe for the terminal, never cut short.
fn replay_flags(args: &FuzzArgs) -> String {
    let mut words = vec!["--target".to_string(), first_target(args).to_string()];
    words.extend(cetp_commands::run::rerun_flags_of(
        args.target_b.as_deref(),
        args.adb_server.as_deref(),
        args.profile.as_deref(),
    ));
    escape::terminal(&escape::shell_words(words.iter().map(String::as_str)), 4000)
}

/// `--seed`, or one from the clock.
fn run_seed(args: &FuzzArgs) -> u64 {
    args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
    })
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
        max_wait: args.max_wait,
        fill_waits: !args.no_fill,
        nonce: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64),
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
        escape::terminal(first_target(args), 200),
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
            // As the pace line counts: a sequence stopped by its setup or
            // the harness was run, not judged.
            s.cases.saturating_sub(s.unjudged),
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
    write_out(
        &args.out,
        report.findings.iter(),
        serde_json::to_value(report).unwrap_or_default(),
    )
}

/// Writes `findings/ID.json` for each finding with a case file (moves
/// before it), then `summary` as `fuzz.json` with the findings' files
/// left out: one layout for a run and a campaign.
fn write_out<'f>(
    out: &std::path::Path,
    findings: impl Iterator<Item = &'f cetp_fuzz::Finding>,
    mut summary: serde_json::Value,
) -> Result<(), Failure> {
    for f in findings.filter(|f| f.moves_before > 0) {
        let path = out.join("findings").join(format!("{}.json", f.id));
        let text = serde_json::to_string_pretty(&f.file).unwrap_or_default();
        std::fs::write(&path, text + "\n")
            .map_err(|e| infra(format!("cannot write {}: {e}", path.display())))?;
    }
    if let Some(fs) = summary.get_mut("findings").and_then(|f| f.as_array_mut()) {
        for f in fs {
            if let Some(o) = f.as_object_mut() {
                o.remove("file");
            }
        }
    }
    let summary_path = out.join("fuzz.json");
    std::fs::write(
        &summary_path,
        serde_json::to_string_pretty(&summary).unwrap_or_default() + "\n",
    )
    .map_err(|e| infra(format!("cannot write {}: {e}", summary_path.display())))
}

/// The share of sequences judged (run on the target and judged, not left
/// unjudged by the oracle or the setup) and the pace, for every run: a low
/// share or pace says where to look before the findings do.
fn pace_line(s: &cetp_fuzz::Stats, secs: f64) -> String {
    // Every sequence is either judged or counted unjudged (nothing left to
    // judge, an oracle note, or a setup the target lacks).
    let judged = s.cases.saturating_sub(s.unjudged);
    let share = if s.cases == 0 {
        0.0
    } else {
        100.0 * judged as f64 / s.cases as f64
    };
    let mut line = format!(
        "pace: {judged} of {} sequences judged ({share:.0}%), {:.1} envelopes/s",
        s.cases,
        if secs > 0.0 {
            s.envelopes as f64 / secs
        } else {
            0.0
        }
    );
    if s.during_waits > 0 {
        // The quiet sequences run during waits are many and short: the
        // share of the others is said apart, so that they cannot hide it.
        let others = s.cases.saturating_sub(s.during_waits);
        let others_judged = judged.saturating_sub(s.during_waits_judged);
        line.push_str(&format!(
            "; {} of the sequences ran while another waited in real time ({} judged), {others_judged} of the other {others} judged",
            s.during_waits, s.during_waits_judged
        ));
    }
    if s.effects_unjudged > 0 {
        line.push_str(&format!(
            "; {} sequence(s) started with an earlier operation still open: their effects were not judged",
            s.effects_unjudged
        ));
    }
    line
}

/// The run's figures, its findings with how to replay each, the flaky
/// ones and the oracle's notes.
fn print_report(args: &FuzzArgs, seed: u64, started: Instant, report: &cetp_fuzz::FuzzReport) {
    let s = &report.stats;
    let secs = started.elapsed().as_secs_f64();
    println!(
        "seed {seed}: {} sequences, {} run on the target, {} envelopes, {} findings in {secs:.1}s",
        s.cases,
        s.judged,
        s.envelopes,
        report.findings.len(),
    );
    println!("{}", pace_line(s, secs));
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
            "FINDING {} — {}\n  cites {}\n  replay: cetp run {} --lock {} --only {}",
            f.id,
            escape::terminal(&f.message, 300),
            f.cited.join(", "),
            replay_flags(args),
            escape::terminal(
                &escape::shell_words([args
                    .lock
                    .as_deref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default()
                    .as_str()]),
                4000
            ),
            f.id
        );
    }
    for f in report.findings.iter().filter(|f| f.moves_before > 0) {
        println!(
            "FINDING {} {} — {}\n  cites {}\n  shrunk from {} moves to {} ({} steps); replay: cetp replay {} {}",
            f.id,
            escape::terminal(&f.signature, 200),
            escape::terminal(&f.message, 300),
            if f.cited.is_empty() { "(the check's rule)".to_string() } else { f.cited.join(", ") },
            f.moves_before,
            f.moves_after,
            f.steps_after,
            escape::terminal(
                &escape::shell_words([args
                    .out
                    .join("findings")
                    .join(format!("{}.json", f.id))
                    .display()
                    .to_string()
                    .as_str()]),
                4000
            ),
            replay_flags(args),
        );
    }
    println!("judged by the {} oracle", report.oracle_kind);
    if let Some(why) = &report.lost {
        println!(
            "LOST: the target stopped answering; the run ended early, nothing of it charged: {}",
            escape::terminal(why, 400)
        );
    }
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
        "FINDING {} — the target failed the descriptor oracle's learning case before any fuzzing: {}\n  cites {}\n  replay: cetp replay {} {}",
        f.id,
        escape::terminal(&f.message, 300),
        f.cited.join(", "),
        escape::terminal(
            &escape::shell_words([path.display().to_string().as_str()]),
            4000
        ),
        replay_flags(args),
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

/// `cetp fuzz` over several targets, or with a corpus: one worker per
/// target (`cetp_fuzz::campaign`), every target opened, identified and its
/// Provider build compared before any fuzzing.
fn campaign_command(args: &FuzzArgs) -> Result<ExitCode, Failure> {
    let dir = vectors_or_default(&args.vectors)?;
    let suite = Suite::load(&dir).map_err(|e| usage(format!("vectors: {e}")))?;
    let levels = catalog_levels(&dir)?;
    if args.target.len() > 1 && args.target_b.is_some() {
        return Err(usage(
            "--target-b applies to a single --target: with several, fuzz tcp targets with one identity each",
        ));
    }
    let seed = run_seed(args);
    std::fs::create_dir_all(args.out.join("findings"))
        .map_err(|e| infra(format!("cannot write to {}: {e}", args.out.display())))?;
    let specs = open_workers(args, &suite)?;
    let cfg = fuzz_config(args, seed, levels)?;
    announce_campaign(args, seed, &specs);
    let started = Instant::now();
    let report = {
        let mut progress = ProgressLine::new(args.quiet);
        let report = campaign::run(
            specs,
            &suite.rules,
            &cfg,
            args.corpus.as_deref(),
            &mut |slots: &[Stats]| {
                let mut sum = Stats::default();
                slots.iter().for_each(|s| campaign::add_stats(&mut sum, s));
                progress.show(&sum)
            },
        )
        .map_err(infra)?;
        progress.finish();
        report
    };
    write_campaign(args, &report)?;
    print_campaign(args, started, &report);
    Ok(if !report.findings.is_empty() {
        ExitCode::Fail
    } else if report.refused() {
        // Its profile leaves a worker nothing to call: fix the profile.
        ExitCode::Usage
    } else if !report.complete() {
        // A worker lost or never started: nothing is charged, but the
        // campaign did not fuzz what was asked.
        ExitCode::Infra
    } else {
        ExitCode::Ok
    })
}

/// Every target opened and identified, and refused when its Provider build
/// differs from the first target's (unless `--mixed-builds`), before any
/// worker starts.
fn open_workers(args: &FuzzArgs, suite: &Suite) -> Result<Vec<campaign::WorkerSpec>, Failure> {
    let shown = |t: &str| escape::terminal(t, 200);
    let mut specs: Vec<campaign::WorkerSpec> = Vec::new();
    let mut first: Option<(String, cetp_conformance::pin::Pin)> = None;
    // Every target and profile read before any device is opened.
    let mut parsed = Vec::new();
    for (i, t) in args.target.iter().enumerate() {
        let kind = cetp_targets::TargetSpec::parse(t).map_err(|e| usage(e.to_string()))?;
        // Two workers on one device would each see the other's effects and
        // sessions; simulated targets are a fresh device each.
        if !matches!(kind, cetp_targets::TargetSpec::Sim(_)) && args.target[..i].contains(t) {
            return Err(usage(format!(
                "target {} is named twice: two workers on one device would judge each other's calls",
                shown(t)
            )));
        }
        let is_adb = matches!(kind, cetp_targets::TargetSpec::Adb(_));
        let spec = parse_target(
            t,
            &args.target_b,
            if is_adb { &args.adb_server } else { &None },
        )?;
        let profile = profile_for(&args.profile, &spec)?;
        parsed.push((t, spec, profile));
    }
    for (t, spec, profile) in parsed {
        let target = cetp_targets::open(&spec).map_err(|e| cannot_open(&shown(t), e))?;
        let (_, env) = cetp_conformance::runner::identify(&target, &profile)
            .map_err(|e| infra(format!("cannot identify target {}: {e}", shown(t))))?;
        let pin = cetp_conformance::runner::pin_of(
            suite,
            &target,
            &profile,
            &cetp_conformance::runner::RunConfig::default(),
        )
        .map_err(|e| infra(format!("cannot identify target {}: {e}", shown(t))))?;
        match &first {
            None => first = Some((t.to_string(), pin.clone())),
            Some((t0, p0)) => {
                let moved = campaign::build_differences(p0, &pin);
                if !moved.is_empty() && !args.mixed_builds {
                    let values: Vec<String> = moved
                        .iter()
                        .map(|f| {
                            let v = |p: &cetp_conformance::pin::Pin| {
                                escape::terminal(
                                    &p.fields.get(f).map(|v| v.to_string()).unwrap_or_default(),
                                    120,
                                )
                            };
                            format!("{f} ({} vs {})", v(p0), v(&pin))
                        })
                        .collect();
                    return Err(usage(format!(
                        "target {} runs another Provider build than target {}: it differs in {}; pass --mixed-builds to fuzz different builds in one campaign",
                        shown(t),
                        shown(t0),
                        values.join(", ")
                    )));
                }
            }
        }
        specs.push(campaign::WorkerSpec {
            label: t.to_string(),
            target,
            profile,
            env,
            build: campaign::build_key(&pin),
        });
    }
    Ok(specs)
}

fn announce_campaign(args: &FuzzArgs, seed: u64, specs: &[campaign::WorkerSpec]) {
    eprintln!(
        "cetp fuzz: seed {seed} · {} workers{}{}",
        specs.len(),
        if specs.iter().any(|s| s.build != specs[0].build) {
            " · mixed Provider builds (findings deduplicated per build)"
        } else {
            " · one Provider build"
        },
        args.corpus
            .as_ref()
            .map(|c| format!(
                " · corpus {}",
                escape::terminal(&c.display().to_string(), 200)
            ))
            .unwrap_or_default()
    );
    for (i, s) in specs.iter().enumerate() {
        eprintln!(
            "cetp fuzz: worker {i}: target {} · package {} · seed {}",
            escape::terminal(&s.label, 200),
            escape::terminal(&s.env.package, 200),
            campaign::worker_seed(seed, i)
        );
    }
}

/// `findings/ID.json` for every finding with a case file, and `fuzz.json`
/// (the campaign's report without the findings' files).
fn write_campaign(args: &FuzzArgs, report: &campaign::CampaignReport) -> Result<(), Failure> {
    write_out(
        &args.out,
        report.findings.iter().map(|f| &f.finding),
        serde_json::to_value(report).unwrap_or_default(),
    )
}

/// Every worker's figures and how it ended, the totals, then each finding
/// once with every worker that saw it.
fn print_campaign(args: &FuzzArgs, started: Instant, report: &campaign::CampaignReport) {
    print_workers(report);
    print_campaign_findings(args, started, report);
}

/// One line per worker: its target, seed, state and figures.
fn print_workers(report: &campaign::CampaignReport) {
    use campaign::WorkerState;
    for w in &report.workers {
        let state = match &w.state {
            WorkerState::Finished => "finished".to_string(),
            WorkerState::Unlearnable => "failed the learning case (its finding below)".into(),
            WorkerState::Lost(why) => format!("LOST: {}", escape::terminal(why, 400)),
            WorkerState::NotStarted(why) => {
                format!("NOT STARTED: {}", escape::terminal(why, 400))
            }
            WorkerState::Refused(why) => {
                format!("REFUSED: {}", escape::terminal(why, 400))
            }
            WorkerState::Died(why) => format!(
                "DIED (a defect of cetp, not charged): {}",
                escape::terminal(why, 400)
            ),
        };
        let corpus = w
            .corpus
            .as_ref()
            .map(|c| {
                format!(
                    "; corpus: {} read, {} written, {} skipped, {} sequences derived",
                    c.read, c.written, c.skipped, c.derived
                )
            })
            .unwrap_or_default();
        println!(
            "worker {} {} (seed {}): {state} · {} sequences, {} run on the target, {} envelopes, {} findings first, {} seen again{}{corpus}",
            w.worker,
            escape::terminal(&w.target, 200),
            w.seed,
            w.stats.cases,
            w.stats.judged,
            w.stats.envelopes,
            w.findings.len(),
            w.also_saw.len(),
            w.oracle_kind
                .as_deref()
                .map(|k| format!(", judged by the {k} oracle"))
                .unwrap_or_default(),
        );
    }
}

/// The totals, each finding with the workers that saw it, then what each
/// worker saw that is not charged (flaky failures, oracle notes).
fn print_campaign_findings(args: &FuzzArgs, started: Instant, report: &campaign::CampaignReport) {
    let s = &report.stats;
    println!(
        "seed {}: {} workers, {} sequences, {} run on the target, {} envelopes, {} findings in {:.1}s",
        report.seed,
        report.workers.len(),
        s.cases,
        s.judged,
        s.envelopes,
        report.findings.len(),
        started.elapsed().as_secs_f64()
    );
    println!("{}", pace_line(s, started.elapsed().as_secs_f64()));
    for f in &report.findings {
        let by: Vec<String> = f
            .found_by
            .iter()
            .map(|x| format!("worker {} ({})", x.worker, escape::terminal(&x.target, 200)))
            .collect();
        let target = f.found_by.first().map_or("sim", |x| x.target.as_str());
        let replay = if f.finding.moves_before > 0 {
            format!(
                "cetp replay {} --target {}",
                args.out
                    .join("findings")
                    .join(format!("{}.json", f.finding.id))
                    .display(),
                escape::terminal(target, 200)
            )
        } else {
            format!(
                "cetp run --target {} --lock {} --only {}",
                escape::terminal(target, 200),
                args.lock
                    .as_deref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default(),
                f.finding.id
            )
        };
        println!(
            "FINDING {} {} — {}\n  cites {}\n  found by {}\n  shrunk from {} moves to {} ({} steps); replay: {replay}",
            f.finding.id,
            escape::terminal(&f.finding.signature, 200),
            escape::terminal(&f.finding.message, 300),
            if f.finding.cited.is_empty() {
                "(the check's rule)".to_string()
            } else {
                f.finding.cited.join(", ")
            },
            by.join(", "),
            f.finding.moves_before,
            f.finding.moves_after,
            f.finding.steps_after,
        );
    }
    for w in &report.workers {
        for f in &w.flaky {
            println!(
                "FLAKY on worker {} (failed once, not again on a fresh run of the same moves; not charged) {} — {}",
                w.worker,
                escape::terminal(&f.signature, 200),
                escape::terminal(&f.message, 300)
            );
        }
        for n in &w.oracle_notes {
            println!(
                "ORACLE NOTE on worker {} (a check fired on a legal Provider; not charged): {}",
                w.worker,
                escape::terminal(n, 300)
            );
        }
        if let Some(why) = &w.effects_unjudged {
            println!(
                "effects on worker {}: {}",
                w.worker,
                escape::terminal(why, 400)
            );
        }
    }
}
