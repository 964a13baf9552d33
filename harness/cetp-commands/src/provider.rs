//! The Provider half's commands: `cetp run`, `cetp replay` and `cetp
//! resume`, each from its options to the run's exit code; the run itself
//! is [`crate::run`]'s, on several devices [`crate::devices`]'.

use crate::devices;
use crate::failure::{cannot_open, dir_failure, infra, now_ms, usage, Failure};
use crate::options::{journal_config, options_of_journal, replayed, ResumeOptions, RunOptions};
use crate::run::{check_pin, execute, pause_point, precheck, prepare};
use cetp_conformance::exit::ExitCode;
use cetp_conformance::rundir::RunDir;
use cetp_targets::{open_with, OpenOptions, TargetSpec, WireTrace};

/// `cetp run` (`replay` none) and `cetp replay CASE|FILE`: the whole
/// command, from its options to the run's exit code.
pub fn run(args: &RunOptions, replay: Option<&str>) -> Result<ExitCode, Failure> {
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
    let mut opts = if replay.is_some() {
        OpenOptions::traced(trace.clone())
    } else {
        OpenOptions::default()
    };
    opts.device_log = run_dir.as_ref().map(|d| d.path().join("jvm-device.log"));
    let target = open_with(&p.spec, &opts).map_err(|e| cannot_open(p.args.first_target(), e))?;
    precheck(&p, &target, replay.is_some())?;
    if p.args.target.len() > 1 {
        if replay.is_some() {
            return Err(usage(
                "cetp replay runs one case on one device: give one --target",
            ));
        }
        return devices::run(p, target, run_dir, pause);
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

/// `cetp resume DIR`: the whole command, from its options to the run's
/// exit code.
pub fn resume(r: &ResumeOptions) -> Result<ExitCode, Failure> {
    let (mut run_dir, rec) = RunDir::unfinished(&r.dir).map_err(dir_failure)?;
    let started_at_ms = rec.config["started_at_ms"]
        .as_i64()
        .ok_or_else(|| usage("the journal's run record has no started_at_ms"))?;
    let args = options_of_journal(&rec.config, r)?;
    let p = prepare(&args, None, started_at_ms)?;
    if args.target.len() > 1 {
        return devices::resume(p, run_dir, rec, &r.dir);
    }
    if matches!(p.spec, TargetSpec::Sim(_) | TargetSpec::Jvm(_)) {
        return Err(usage(format!(
            "the run in {} was against `{}`, a device the harness started and ended (the simulated device, the JVM device): the Provider's state died with it, so the run cannot be continued; run it again (start the device yourself and use --target tcp:… for runs that can be resumed)",
            r.dir.display(),
            args.first_target()
        )));
    }
    let target = open_with(&p.spec, &OpenOptions::default())
        .map_err(|e| cannot_open(args.first_target(), e))?;
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
