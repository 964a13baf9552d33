//! A run of the Provider half, whatever started it (`cetp run`, `cetp
//! replay`, `cetp resume`, on one device or several): its inputs read and
//! checked ([`prepare`]), its reporters, its last lines, and a resumed
//! run's pin held against its journal's. The run itself is
//! `cetp_conformance::runner`'s (and `cetp_conformance::devices`').

use crate::failure::{dir_failure, infra, usage, Failure};
use crate::inputs::{load_suite, profile_for, provider_apks, read_lock};
use crate::options::{Color, RunOptions};
use cetp_conformance::exit::ExitCode;
use cetp_conformance::journal::PausePoint;
use cetp_conformance::pin::Pin;
use cetp_conformance::rundir::RunDir;
use cetp_conformance::runner::{run as run_suite, RunConfig, RunOutcome};
use cetp_report::document::{self, Document, Kept};
use cetp_report::escape;
use cetp_report::terminal::Terminal;
use cetp_targets::{TargetSpec, WireTrace};
use cetp_vectors::device::Target;
use cetp_vectors::event::Fanout;
use cetp_vectors::profile::Profile;
use cetp_vectors::suite::{Baseline, Suite};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// A run's inputs, read and checked before anything is sent.
pub struct Prepared {
    /// The options the run was given (or replayed, or resumed with).
    pub args: RunOptions,
    /// The vectors directory.
    pub vectors_dir: PathBuf,
    /// The suite, or a replayed case file's cases with its checks.
    pub suite: Suite,
    /// The roles of the whole vector set, when `suite` holds a replayed
    /// case file's cases only (the profile check's `check_part`).
    pub vector_roles: std::collections::BTreeSet<String>,
    /// The first target's spec.
    pub spec: TargetSpec,
    /// The vendor profile (or the simulated target's own).
    pub profile: Profile,
    /// The runner's configuration.
    pub cfg: RunConfig,
}

/// Reads and checks a run's inputs: the vectors (or `replay`'s case file
/// or case), the target, profile, baseline and lock, and that every
/// `--only`/`--skip` pattern selects something.
pub fn prepare(
    args: &RunOptions,
    replay: Option<&str>,
    started_at_ms: i64,
) -> Result<Prepared, Failure> {
    let (vectors_dir, mut suite) = load_suite(&args.vectors)?;
    let mut vector_roles = std::collections::BTreeSet::new();
    // `cetp replay FILE`: the cases of one case file (a fuzz finding, a
    // regression) with the suite's checks and rules.
    let replay = match replay {
        Some(path) if path.ends_with(".json") || Path::new(path).is_file() => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| usage(format!("case file {path}: {e}")))?;
            let file = cetp_vectors::vector::VectorFile::from_json(&text)
                .map_err(|e| usage(format!("case file {path}: {e}")))?;
            vector_roles = cetp_profile::profile_check::roles_used(&suite);
            suite.cases = file.cases;
            suite.fingerprint = cetp_proto::canonical::sha256_hex(text.as_bytes());
            None
        }
        other => other,
    };
    let spec = crate::inputs::parse_target(args.first_target(), &args.target_b, &args.adb_server)?;
    let profile = profile_for(&args.profile, &spec)?;
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
        // The workspace's crates share one version: the binary's.
        harness_version: format!("cetp {}", env!("CARGO_PKG_VERSION")),
        started_at_ms,
        lock,
        run_timeout: args.run_timeout,
        interrupt: None,
        provider_apks: provider_apks(&spec)?,
        max_wait: Some(args.max_wait),
        partition: args.partition,
        rerun: rerun_flags(args),
    };
    Ok(Prepared {
        args: args.clone(),
        vectors_dir,
        suite,
        vector_roles,
        spec,
        profile,
        cfg,
    })
}

/// The flags besides `--target` and `--seed` that rerun one case of this
/// run as it ran: a replay without the profile leaves a case that needs
/// its roles or observer unjudged, and one without `--target-b` has no
/// second identity.
pub fn rerun_flags(args: &RunOptions) -> Vec<String> {
    rerun_flags_of(
        args.target_b.as_deref(),
        args.adb_server.as_deref(),
        args.profile.as_deref(),
    )
}

/// [`rerun_flags`] from the flags themselves, for the commands (`cetp
/// fuzz`) whose options are not a run's.
pub fn rerun_flags_of(
    target_b: Option<&str>,
    adb_server: Option<&str>,
    profile: Option<&Path>,
) -> Vec<String> {
    let mut flags = Vec::new();
    if let Some(b) = target_b {
        flags.extend(["--target-b".to_string(), b.to_string()]);
    }
    if let Some(s) = adb_server {
        flags.extend(["--adb-server".to_string(), s.to_string()]);
    }
    if let Some(p) = profile {
        flags.extend(["--profile".to_string(), p.display().to_string()]);
    }
    flags
}

/// `CETP_PAUSE_AT` (crash tests only): see `cetp_conformance::journal::PausePoint`.
pub fn pause_point() -> Result<Option<PausePoint>, Failure> {
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
pub fn on_interrupt() -> Arc<AtomicBool> {
    let flag = Arc::new(AtomicBool::new(false));
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

/// `cetp run` checks its profile first (`cetp profile check`): a wrong
/// field stops the run before anything executes; a missing one only says
/// what it will leave unjudged. The built-in profiles of simulated targets
/// are skipped: they are the fixtures' own, also run against mutants whose
/// descriptors break the spec on purpose, which the run must judge.
pub fn precheck(p: &Prepared, target: &Target, quiet: bool) -> Result<(), Failure> {
    if p.args.profile.is_none() && matches!(p.spec, TargetSpec::Sim(_)) {
        return Ok(());
    }
    let live = match cetp_profile::profile_check::read_live(target, &p.profile) {
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
    let report = cetp_profile::profile_check::check_part(
        &p.profile,
        &p.suite,
        &p.vector_roles,
        live.as_ref().map(|l| &l.facts),
    );
    if !report.errors.is_empty() {
        return crate::profile::conclude(&report, "profile").map(|_| ());
    }
    if !quiet {
        for m in &report.missing {
            eprintln!(
                "profile: without {}, {} case(s) will not be judged ({} core): {}",
                escape::terminal(&m.needs, 200),
                m.cases.len(),
                m.core_cases.len(),
                escape::terminal(&cetp_profile::profile_check::fix_for(&m.needs), 400)
            );
        }
    }
    Ok(())
}

/// The terminal view of a run: on stdout, or on stderr when stdout
/// carries a `--format` document. Auto colour: NO_COLOR, CLICOLOR(_FORCE),
/// TERM and whether that stream is a terminal.
fn terminal_view(args: &RunOptions, replay: bool) -> Terminal<Box<dyn std::io::Write + Send>> {
    let (view, auto_color): (Box<dyn std::io::Write + Send>, anstream::ColorChoice) =
        if args.format.is_none() {
            let out = std::io::stdout();
            let c = anstream::AutoStream::choice(&out);
            (Box::new(out), c)
        } else {
            let err = std::io::stderr();
            let c = anstream::AutoStream::choice(&err);
            (Box::new(err), c)
        };
    let color = match args.color {
        Color::Always => true,
        Color::Never => false,
        Color::Auto => auto_color != anstream::ColorChoice::Never,
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
    if p.args.format.is_some() {
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
pub fn execute(
    p: Prepared,
    target: Target,
    run_dir: Option<RunDir>,
    replay: Option<&str>,
    trace: Option<Arc<WireTrace>>,
    resumed: bool,
) -> Result<ExitCode, Failure> {
    let journal = run_dir.as_ref().and_then(RunDir::journal).cloned();
    let target = match &journal {
        Some(j) => j.wrap(target),
        None => target,
    };
    reported(p, run_dir, replay, trace, resumed, |p, fanout| {
        run_suite(&p.suite, &target, &p.profile, &p.cfg, fanout)
    })
}

/// Runs `body` (the run itself, on one device or several) with the run's
/// reporters, and writes its reports and last lines.
pub fn reported(
    mut p: Prepared,
    run_dir: Option<RunDir>,
    replay: Option<&str>,
    trace: Option<Arc<WireTrace>>,
    resumed: bool,
    body: impl FnOnce(&Prepared, &mut Fanout) -> RunOutcome,
) -> Result<ExitCode, Failure> {
    let journals = run_dir.as_ref().map(RunDir::journals).unwrap_or_default();
    p.cfg.interrupt = Some(on_interrupt());
    let kept = Kept::default();
    let mut fanout = run_reporters(&p, run_dir.as_ref(), replay.is_some(), resumed, &kept)?;
    let args = &p.args;
    // The harness's own lines go where the terminal view goes.
    let say = |line: &str| {
        if args.format.is_none() {
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
    if let Some(doc) = args.format {
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
    // `cetp resume` refuses a run against a device the harness started:
    // the Provider's state ended with it. The line says so rather than
    // suggest a command that would refuse.
    let own_device = matches!(p.spec, TargetSpec::Sim(_) | TargetSpec::Jvm(_));
    match (&run_dir, outcome.interrupted) {
        (Some(_), true) if own_device => say(
            "the run stopped before its end; the device it started ended with it, so run it again (cetp resume continues runs against a device you start: --target tcp:… or adb:…)",
        ),
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

/// Fail-closed: a resumed run's live pin must be the journaled one, or it
/// is refused before anything is replayed, naming every field that moved.
pub fn check_pin(dir: &Path, journaled: Option<&Pin>, live: &Pin) -> Result<(), Failure> {
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
                dir.display(),
                moved.join(", "),
                lines.join("\n")
            )));
        }
    }
    Ok(())
}
