//! `cetp run`, `cetp replay` and `cetp resume`: a run's inputs read and
//! checked (`prepare`), its reporters, its run directory and journal, and
//! its last lines. The run itself is the library's
//! (`cetp_conformance::runner`, `cetp_conformance::devices`).

use super::*;

/// The built-in profile of a simulated target: the one its vendor wrote.
pub(crate) fn sim_profile(s: &cetp_targets::SimSpec) -> &'static str {
    match (s.provider, s.variant.as_deref()) {
        (cetp_targets::FixtureSet::Notes, _) => builtin::NOTES,
        (_, Some("no_effect_counter")) => builtin::NO_COUNTER,
        _ => builtin::REFERENCE,
    }
}

pub(crate) fn target_spec(args: &RunArgs) -> Result<TargetSpec, Failure> {
    parse_target(args.first_target(), &args.target_b, &args.adb_server)
}

pub(crate) fn load_profile(args: &RunArgs, spec: &TargetSpec) -> Result<Profile, Failure> {
    profile_for(&args.profile, spec)
}

pub(crate) fn profile_for(
    profile: &Option<PathBuf>,
    spec: &TargetSpec,
) -> Result<Profile, Failure> {
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
pub(crate) fn replayed(args: &RunArgs, path: &Path) -> Result<(RunArgs, i64), Failure> {
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
pub(crate) struct Prepared {
    pub(crate) args: RunArgs,
    pub(crate) vectors_dir: PathBuf,
    pub(crate) suite: Suite,
    /// The roles of the whole vector set, when `suite` holds a replayed
    /// case file's cases only (the profile check's `check_part`).
    pub(crate) vector_roles: std::collections::BTreeSet<String>,
    pub(crate) spec: TargetSpec,
    pub(crate) profile: Profile,
    pub(crate) cfg: RunConfig,
}

pub(crate) fn prepare(
    args: &RunArgs,
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
        vector_roles,
        spec,
        profile,
        cfg,
    })
}

/// SHA-256 of each Provider APK an adb target installs, for the pin.
pub(crate) fn provider_apks(spec: &TargetSpec) -> Result<Vec<String>, Failure> {
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

pub(crate) fn absolute(p: &Option<PathBuf>) -> serde_json::Value {
    match p {
        Some(p) => serde_json::json!(std::path::absolute(p).unwrap_or_else(|_| p.clone())),
        None => serde_json::Value::Null,
    }
}

/// What `cetp resume` needs to run the same run again: the journal's
/// `run` record. Paths are made absolute so a resume from another
/// directory reads the same files; the pin then checks their content.
pub(crate) fn journal_config(args: &RunArgs, cfg: &RunConfig) -> serde_json::Value {
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
pub(crate) fn pause_point() -> Result<Option<PausePoint>, Failure> {
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
pub(crate) fn on_interrupt() -> std::sync::Arc<std::sync::atomic::AtomicBool> {
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

pub(crate) fn run_command(args: &RunArgs, replay: Option<&str>) -> Result<ExitCode, Failure> {
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
pub(crate) fn precheck(
    p: &Prepared,
    target: &cetp_vectors::device::Target,
    quiet: bool,
) -> Result<(), Failure> {
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

pub(crate) fn profile_check_fix(needs: &str) -> String {
    cetp_profile::profile_check::fix_for(needs)
}

/// The terminal view of a run: on stdout, or on stderr when stdout
/// carries a `--format` document. Auto colour: NO_COLOR, CLICOLOR(_FORCE),
/// TERM and whether that stream is a terminal.
pub(crate) fn terminal_view(
    args: &RunArgs,
    replay: bool,
) -> Terminal<Box<dyn std::io::Write + Send>> {
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
pub(crate) fn run_reporters(
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
pub(crate) fn execute(
    p: Prepared,
    target: cetp_vectors::device::Target,
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
pub(crate) fn reported(
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

/// The run arguments a journal's `run` record holds.
pub(crate) fn args_of_journal(
    config: &serde_json::Value,
    r: &ResumeArgs,
) -> Result<RunArgs, Failure> {
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

pub(crate) fn resume_command(r: &ResumeArgs) -> Result<ExitCode, Failure> {
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
pub(crate) fn check_pin(
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
