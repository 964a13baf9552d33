//! `cetp lock` and `cetp drift`: a Provider's contract recorded, and held
//! against a live Provider or another lock.

use super::*;

pub(crate) fn open_target(
    spec: &TargetSpec,
    label: &str,
) -> Result<cetp_vectors::device::Target, Failure> {
    open_with(spec, &OpenOptions::default()).map_err(|e| cannot_open(label, e))
}

pub(crate) fn fetch_failure(e: FetchError) -> Failure {
    match e {
        FetchError::Infra(m) => infra(escape::terminal(&m, 500)),
        FetchError::Provider(m) => Failure {
            code: ExitCode::Fail,
            message: escape::terminal(&m, 500),
        },
    }
}

pub(crate) fn lock_command(args: &LockArgs) -> Result<ExitCode, Failure> {
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

pub(crate) fn drift_command(args: &DriftArgs) -> Result<ExitCode, Failure> {
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
