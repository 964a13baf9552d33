//! `cetp merge DIR… --report-dir OUT`: the report directories of the
//! partitions of one split run (`cetp run --partition M/N`) read back
//! (their `events.ndjson`, bounded), checked and joined
//! (`cetp_conformance::merge`), and written as one report set by the
//! reporters a run writes its own with.

use crate::{dir_failure, infra, load_suite, usage, ColorWhen, Failure};
use cetp_conformance::exit::ExitCode;
use cetp_conformance::merge::{self, MergeError, Part, MAX_EVENTS_BYTES};
use cetp_conformance::rundir::RunDir;
use cetp_report::escape;
use cetp_report::terminal::Terminal;
use cetp_vectors::event::Fanout;
use cetp_vectors::suite::Baseline;
use clap::Args;
use std::path::{Path, PathBuf};

#[derive(Args)]
pub struct MergeArgs {
    /// The report directories of all N partitions (`cetp run --partition
    /// slice:M/N --report-dir DIR`), in any order.
    #[arg(required = true, value_name = "DIR")]
    dirs: Vec<PathBuf>,
    /// Where the merged report set goes: report.json, junit.xml,
    /// report.sarif, index.html, events.ndjson, summary.md.
    #[arg(long)]
    report_dir: PathBuf,
    /// Known failures (TOML), as the partitions ran with: applied to the
    /// merged verdicts as a run applies them.
    #[arg(long)]
    baseline: Option<PathBuf>,
    /// The vectors the partitions ran [default: this cetp's].
    #[arg(long)]
    vectors: Option<PathBuf>,
    /// Exit 1 unless the merged run establishes the §9 claim.
    #[arg(long)]
    require_claim: bool,
    /// Print passing cases too.
    #[arg(short, long)]
    verbose: bool,
    #[arg(long, value_enum, default_value_t = ColorWhen::Auto)]
    color: ColorWhen,
}

fn failure(e: MergeError) -> Failure {
    Failure {
        code: e.exit,
        // The pins and ids quoted come from files of another machine.
        message: escape::terminal(&e.message, 4000),
    }
}

fn read_baseline(path: &Path) -> Result<Baseline, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| usage(format!("baseline {}: {e}", path.display())))?;
    Baseline::from_toml(&text).map_err(|e| usage(format!("baseline {}: {e}", path.display())))
}

/// Each partition's run, read from its directory.
fn read_parts(dirs: &[PathBuf]) -> Result<Vec<Part>, Failure> {
    dirs.iter()
        .map(|dir| {
            if !dir.is_dir() {
                return Err(usage(format!(
                    "{}: no such report directory",
                    dir.display()
                )));
            }
            let events = merge::read_events(&dir.join("events.ndjson"), MAX_EVENTS_BYTES)
                .map_err(failure)?;
            Part::read(&dir.display().to_string(), events).map_err(failure)
        })
        .collect()
}

/// The output must not be one of the inputs: its report would be
/// overwritten by the merge.
fn distinct_output(out: &Path, dirs: &[PathBuf]) -> Result<(), Failure> {
    let Ok(out_real) = out.canonicalize() else {
        return Ok(());
    };
    for d in dirs {
        if d.canonicalize().is_ok_and(|d| d == out_real) {
            return Err(usage(format!(
                "--report-dir {} is one of the partitions' directories: the merge would overwrite its report",
                out.display()
            )));
        }
    }
    Ok(())
}

fn terminal(args: &MergeArgs) -> Terminal<Box<dyn std::io::Write + Send>> {
    let out = std::io::stdout();
    let color = match args.color {
        ColorWhen::Always => true,
        ColorWhen::Never => false,
        ColorWhen::Auto => anstream::AutoStream::choice(&out) != anstream::ColorChoice::Never,
    };
    Terminal::new(
        Box::new(out) as Box<dyn std::io::Write + Send>,
        args.verbose,
        false,
    )
    .with_color(color)
    .with_progress(false)
}

pub fn merge_command(args: &MergeArgs) -> Result<ExitCode, Failure> {
    let (vectors_dir, suite) = load_suite(&args.vectors)?;
    let baseline = args.baseline.as_deref().map(read_baseline).transpose()?;
    distinct_output(&args.report_dir, &args.dirs)?;
    let mut parts = read_parts(&args.dirs)?;
    let harness = format!("cetp {}", env!("CARGO_PKG_VERSION"));
    merge::check(&mut parts, &suite, baseline.as_ref(), &harness).map_err(failure)?;
    let out_dir = RunDir::for_new_run(&args.report_dir).map_err(dir_failure)?;
    let mut fanout = Fanout::default();
    fanout.reporters.push(Box::new(terminal(args)));
    let rules = cetp_report::sarif::catalog_rules(&vectors_dir).map_err(usage)?;
    fanout
        .reporters
        .extend(cetp_report::standard_reporters(out_dir.path(), rules));
    let (finished, mut fanout) = merge::merge(&parts, &suite, baseline.as_ref(), fanout);
    for r in &mut fanout.reporters {
        r.finish()
            .map_err(|e| infra(format!("cannot write the report: {e}")))?;
    }
    println!(
        "report: {} (merged from {} partitions)",
        args.report_dir.join("report.json").display(),
        parts.len()
    );
    if args.require_claim && !finished.claim.cetp_v2 && finished.exit == ExitCode::Ok {
        println!("--require-claim: {}", finished.claim.statement);
        return Ok(ExitCode::Fail);
    }
    Ok(finished.exit)
}
