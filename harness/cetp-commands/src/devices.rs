//! `cetp run` with several `--target`s ([`cetp_conformance::devices`]):
//! the devices opened and checked to carry one Provider build, then a
//! sharded run (one report set, one claim) or a matrix (every case on
//! every device: a report set per device under `devices/`, and at the top
//! the case × device table, a JUnit file with a test suite per device and
//! a SARIF log whose results name their device).

use crate::failure::{cannot_open, dir_failure, infra, now_ms, usage, Failure};
use crate::inputs::parse_target;
use crate::options::{journal_config, Mode};
use crate::run::{check_pin, on_interrupt, pause_point, reported, Prepared};
use cetp_conformance::devices;
use cetp_conformance::devices::Journaling;
use cetp_conformance::exit::ExitCode;
use cetp_conformance::journal::{PausePoint, Recorded};
use cetp_conformance::rundir::RunDir;
use cetp_conformance::runner::RunOutcome;
use cetp_report::escape;
use cetp_report::matrix::{Column, Matrix};
use cetp_targets::{open_with, OpenOptions};
use cetp_vectors::device::Target;
use cetp_vectors::event::Fanout;
use std::path::{Path, PathBuf};

/// Most devices one run drives (each has a thread and a connection).
const MAX_DEVICES: usize = 64;

/// Opens the devices after the first, checks that they carry the first's
/// Provider build, and runs. A sharded run with a report directory is
/// journaled, a journal per device (`cetp resume` continues it); a matrix
/// run is not.
pub fn run(
    p: Prepared,
    first: Target,
    run_dir: Option<RunDir>,
    pause: Option<PausePoint>,
) -> Result<ExitCode, Failure> {
    if p.args.target.len() > MAX_DEVICES {
        return Err(usage(format!("at most {MAX_DEVICES} --target per run")));
    }
    if p.args.target_b.is_some() {
        return Err(usage(
            "--target-b names one device's second identity: with several --target, give each tcp target its own inline (tcp:HOST:PORT,b=HOST:PORT)",
        ));
    }
    if p.args.devices == Mode::Matrix && p.args.format.is_some() {
        return Err(usage(
            "--format puts one run's document on stdout; a matrix run has one per device: use --report-dir (devices/NN-LABEL/ and the matrix at the top)",
        ));
    }
    let targets = open_rest(&p, first)?;
    let ids = devices::identify_all(&p.suite, &targets, &p.profile, &p.cfg)
        .map_err(|e| usage(escape::terminal(&e.0, 2000)))?;
    match (p.args.devices, run_dir) {
        (Mode::Matrix, run_dir) => matrix(p, &targets, run_dir),
        (Mode::Shard, None) => reported(p, None, None, None, false, |p, fanout| {
            let none = Journaling::default();
            devices::run_sharded(&p.suite, &targets, &ids, &p.profile, &p.cfg, &none, fanout)
        }),
        (Mode::Shard, Some(mut d)) => {
            let mut config = journal_config(&p.args, &p.cfg);
            config["devices"] = serde_json::json!("shard");
            let first = d.start_journal(&config, pause).map_err(dir_failure)?;
            let others = d
                .start_device_journals(targets.len())
                .map_err(dir_failure)?;
            let journals: Vec<_> = std::iter::once(first).chain(others).collect();
            let targets: Vec<Target> = targets
                .into_iter()
                .zip(&journals)
                .map(|(t, j)| j.wrap(t))
                .collect();
            let journaling = Journaling {
                journals: journals.into_iter().map(Some).collect(),
                took: Vec::new(),
            };
            reported(p, Some(d), None, None, false, |p, fanout| {
                devices::run_sharded(
                    &p.suite,
                    &targets,
                    &ids,
                    &p.profile,
                    &p.cfg,
                    &journaling,
                    fanout,
                )
            })
        }
    }
}

/// The first device and the others opened, each given once.
fn open_rest(p: &Prepared, first: Target) -> Result<Vec<Target>, Failure> {
    let mut targets = vec![first];
    for label in &p.args.target[1..] {
        let spec = parse_target(label, &None, &p.args.adb_server)?;
        let t = open_with(&spec, &OpenOptions::default())
            .map_err(|e| cannot_open(&escape::terminal(label, 200), e))?;
        targets.push(t);
    }
    let labels: Vec<&str> = targets.iter().map(|t| t.label.as_str()).collect();
    if let Some(k) = (1..labels.len()).find(|&k| labels[..k].contains(&labels[k])) {
        return Err(usage(format!(
            "--target {} is given twice: a device cannot run two cases at once",
            escape::terminal(labels[k], 200)
        )));
    }
    Ok(targets)
}

/// `cetp resume` of a sharded run: every device reopened and the run's
/// pin checked before anything is replayed; then each device takes again
/// the cases its journal says it took, in that order (their answers come
/// from its journal), and the cases no device took are shared as in any
/// run.
pub fn resume(
    p: Prepared,
    mut run_dir: RunDir,
    rec: Recorded,
    dir: &Path,
) -> Result<ExitCode, Failure> {
    for label in &p.args.target {
        if matches!(
            cetp_targets::TargetSpec::parse(label),
            Ok(cetp_targets::TargetSpec::Sim(_) | cetp_targets::TargetSpec::Jvm(_))
        ) {
            return Err(usage(format!(
                "the run in {} had `{}`, a device the harness started and ended (the simulated device, the JVM device): its Provider's state died with it, so the run cannot be continued; run it again (start the device yourself and use --target tcp:… for runs that can be resumed)",
                dir.display(),
                escape::terminal(label, 200)
            )));
        }
    }
    let first_spec = parse_target(p.args.first_target(), &None, &p.args.adb_server)?;
    let first = open_with(&first_spec, &OpenOptions::default())
        .map_err(|e| cannot_open(&escape::terminal(p.args.first_target(), 200), e))?;
    let targets = open_rest(&p, first)?;
    let ids = devices::identify_all(&p.suite, &targets, &p.profile, &p.cfg)
        .map_err(|e| usage(escape::terminal(&e.0, 2000)))?;
    check_pin(dir, rec.pin.as_ref(), &devices::joined_pin(&targets, &ids))?;
    let first = run_dir
        .resume_journal(&rec, pause_point()?, now_ms())
        .map_err(dir_failure)?;
    let others = run_dir
        .resume_device_journals(targets.len(), now_ms())
        .map_err(dir_failure)?;
    let mut took = vec![rec.takes.clone()];
    let mut journals = vec![first];
    for (j, r) in others {
        took.push(r.takes);
        journals.push(j);
    }
    let targets: Vec<Target> = targets
        .into_iter()
        .zip(&journals)
        .map(|(t, j)| j.wrap(t))
        .collect();
    let journaling = Journaling {
        journals: journals.into_iter().map(Some).collect(),
        took,
    };
    reported(p, Some(run_dir), None, None, true, |p, fanout| {
        devices::run_sharded(
            &p.suite,
            &targets,
            &ids,
            &p.profile,
            &p.cfg,
            &journaling,
            fanout,
        )
    })
}

/// A file-name-safe form of a device label.
fn slug(k: usize, label: &str) -> String {
    let s: String = label
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(60)
        .collect();
    format!("{:02}-{s}", k + 1)
}

/// Every case on every device, in parallel: a whole run per device, its
/// own report set under `devices/NN-LABEL/`, then the matrix.
fn matrix(
    mut p: Prepared,
    targets: &[Target],
    run_dir: Option<RunDir>,
) -> Result<ExitCode, Failure> {
    p.cfg.interrupt = Some(on_interrupt());
    let dirs: Vec<Option<PathBuf>> = targets
        .iter()
        .enumerate()
        .map(|(k, t)| {
            run_dir
                .as_ref()
                .map(|d| d.path().join("devices").join(slug(k, &t.label)))
        })
        .collect();
    let rules = match &run_dir {
        Some(_) => cetp_report::sarif::catalog_rules(&p.vectors_dir).map_err(usage)?,
        None => Default::default(),
    };
    let mut fanouts = Vec::new();
    for dir in &dirs {
        let mut f = Fanout::default();
        if let Some(dir) = dir {
            std::fs::create_dir_all(dir)
                .map_err(|e| infra(format!("cannot create {}: {e}", dir.display())))?;
            f.reporters
                .extend(cetp_report::standard_reporters(dir, rules.clone()));
        }
        fanouts.push(f);
    }
    let p = &p;
    let outcomes: Vec<(RunOutcome, Fanout)> = std::thread::scope(|scope| {
        let handles: Vec<_> = targets
            .iter()
            .zip(fanouts)
            .map(|(t, mut f)| {
                scope.spawn(move || {
                    let o = cetp_conformance::runner::run(&p.suite, t, &p.profile, &p.cfg, &mut f);
                    (o, f)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a device's run panicked"))
            .collect()
    });
    let mut outs = Vec::new();
    for (o, mut f) in outcomes {
        for r in &mut f.reporters {
            r.finish()
                .map_err(|e| infra(format!("cannot write the report: {e}")))?;
        }
        outs.push(o);
    }
    let m = matrix_of(targets, &outs, &dirs);
    print!("{}", m.terminal(p.args.verbose));
    if let Some(d) = &run_dir {
        write_matrix(d.path(), &m, &dirs)?;
        println!("report: {}", d.path().join("report.json").display());
        let worst = outs.iter().map(|o| o.exit).max_by_key(|e| severity(*e));
        d.end(worst.unwrap_or(ExitCode::Ok), false)
            .map_err(dir_failure)?;
    }
    let exit = outs
        .iter()
        .map(|o| o.exit)
        .max_by_key(|e| severity(*e))
        .unwrap_or(ExitCode::Ok);
    if p.args.require_claim && exit == ExitCode::Ok && outs.iter().any(|o| !o.claim.cetp_v2) {
        println!("--require-claim: the claim is not established on every device");
        return Ok(ExitCode::Fail);
    }
    Ok(exit)
}

/// Which exit code of several devices the run gives: a FAIL anywhere
/// wins, then an infrastructure error.
fn severity(e: ExitCode) -> u8 {
    match e {
        ExitCode::Ok => 0,
        ExitCode::CompatibleDrift => 1,
        ExitCode::Infra => 2,
        ExitCode::Interrupted => 3,
        ExitCode::Usage => 4,
        ExitCode::Fail => 5,
    }
}

fn matrix_of(targets: &[Target], outs: &[RunOutcome], dirs: &[Option<PathBuf>]) -> Matrix {
    let columns = targets
        .iter()
        .zip(outs)
        .zip(dirs)
        .map(|((t, o), dir)| Column {
            label: t.label.clone(),
            established: o.claim.cetp_v2,
            statement: o.claim.statement.clone(),
            exit: o.exit.code(),
            summary: o.summary.clone(),
            pin: o.pin.hash(),
            dir: dir
                .as_ref()
                .and_then(|d| d.parent()?.parent().map(|top| (d, top)))
                .and_then(|(d, top)| d.strip_prefix(top).ok())
                .map(|d| d.display().to_string()),
        })
        .collect();
    let per_device = |f: &dyn Fn(&RunOutcome) -> cetp_report::matrix::Verdicts| {
        outs.iter().map(f).collect::<Vec<_>>()
    };
    Matrix::new(
        columns,
        per_device(&|o| {
            o.cases
                .iter()
                .map(|c| (c.id.clone(), c.title.clone(), c.verdict))
                .collect()
        }),
        per_device(&|o| {
            o.checks
                .iter()
                .map(|c| (c.id.clone(), String::new(), c.verdict))
                .collect()
        }),
    )
}

/// The top of a matrix run's directory: the table as report.json,
/// summary.md and index.html, junit.xml with a test suite per device, and
/// report.sarif with every device's results, each naming its device.
fn write_matrix(top: &Path, m: &Matrix, dirs: &[Option<PathBuf>]) -> Result<(), Failure> {
    let write = |name: &str, text: String| {
        std::fs::write(top.join(name), text)
            .map_err(|e| infra(format!("cannot write {}: {e}", top.join(name).display())))
    };
    write(
        "report.json",
        serde_json::to_string_pretty(&m.json()).unwrap_or_default() + "\n",
    )?;
    write("summary.md", m.markdown())?;
    write("index.html", m.html())?;
    let read = |d: &Path, name: &str| -> Result<String, Failure> {
        cetp_report::matrix::read_bounded(&d.join(name))
            .map_err(|e| infra(format!("cannot read {}: {e}", d.join(name).display())))
    };
    let mut junits = Vec::new();
    let mut sarifs = Vec::new();
    for (col, dir) in m.columns.iter().zip(dirs) {
        let Some(dir) = dir else { continue };
        junits.push((col.label.clone(), read(dir, "junit.xml")?));
        sarifs.push((col.label.clone(), read(dir, "report.sarif")?));
    }
    write("junit.xml", cetp_report::matrix::junit_per_device(&junits))?;
    let sarif = cetp_report::matrix::sarif_per_device(&sarifs).map_err(infra)?;
    write(
        "report.sarif",
        serde_json::to_string_pretty(&sarif).unwrap_or_default() + "\n",
    )
}
