//! `cetp selftest`: the fixtures clean, every mutant killed, every legal
//! variant passed (the library's `selftest`), and the proof files written
//! or checked.

use super::*;

/// Writes the proof record or checks it (`--write-proof`,
/// `--check-proof`), saying so; a stale record is a FAIL.
pub(crate) fn settle_proof(
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
pub(crate) fn consumer_selftest(
    dir: &std::path::Path,
    write: Option<&PathBuf>,
    check: Option<&PathBuf>,
) -> Result<ExitCode, Failure> {
    let scenarios = cetp_consumer::scenario::load_dir(&dir.join("consumer")).map_err(usage)?;
    let mutants =
        cetp_consumer::load_mutants(&dir.join("mutants/consumer-mutants.json")).map_err(usage)?;
    let variants = cetp_consumer::load_variants(&dir.join("variants/consumer-variants.json"))
        .map_err(usage)?;
    eprintln!(
        "selftest: Consumer: {} scenarios, reference + {} mutants + {} legal variants",
        scenarios.len(),
        mutants.len(),
        variants.len()
    );
    let quiet = cetp_consumer::runner::QuietConsumerPanics::install();
    let report = cetp_consumer::selftest(&scenarios, &mutants, &variants).map_err(usage);
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

pub(crate) fn selftest_command(args: &SelftestArgs) -> Result<ExitCode, Failure> {
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
