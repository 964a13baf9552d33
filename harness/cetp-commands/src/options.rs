//! What a run is asked to do, as plain values: the command line's
//! `--flags`, a report's recorded run (`--replay-run`), or a journal's
//! `run` record (`cetp resume`), and the record a journal keeps of it.

use crate::failure::{usage, Failure};
use cetp_conformance::partition::Partition;
use cetp_report::document::Document;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How a run spreads its cases over several devices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Each case once, on whichever device is free: one report, one claim.
    Shard,
    /// Every case on every device: a case × device table, a claim each.
    Matrix,
}

/// Whether the terminal view is coloured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Color {
    /// When the stream is a terminal and the environment allows it.
    Auto,
    /// Always.
    Always,
    /// Never.
    Never,
}

/// A run's options (`cetp run`, `cetp replay`), as the command line gave
/// them; see `cetp run --help` for each.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// The devices (`--target`), in order; the first is the run's target.
    pub target: Vec<String>,
    /// How several devices share the cases.
    pub devices: Mode,
    /// The second caller identity's endpoint (tcp targets).
    pub target_b: Option<String>,
    /// The adb server's address (adb targets).
    pub adb_server: Option<String>,
    /// The vendor profile.
    pub profile: Option<PathBuf>,
    /// Where the reports and the journal go.
    pub report_dir: Option<PathBuf>,
    /// Only cases whose id matches.
    pub only: Vec<String>,
    /// Cases whose id matches are skipped.
    pub skip: Vec<String>,
    /// Only this part of the selected cases.
    pub partition: Option<Partition>,
    /// Known failures.
    pub baseline: Option<PathBuf>,
    /// Seed of every generated request id and value.
    pub seed: u64,
    /// Attempts per case that does not pass.
    pub attempts: u32,
    /// Bounds the whole run.
    pub run_timeout: Option<Duration>,
    /// The longest real-time wait for a lifetime to run out.
    pub max_wait: Duration,
    /// The vectors directory (the shipped one when none).
    pub vectors: Option<PathBuf>,
    /// Print passing cases too.
    pub verbose: bool,
    /// Exit 1 unless the run establishes the §9 claim.
    pub require_claim: bool,
    /// A contract lock (adds LOCK-001).
    pub lock: Option<PathBuf>,
    /// Run again what this report.json ran.
    pub replay_run: Option<PathBuf>,
    /// Colour of the terminal view.
    pub color: Color,
    /// The report document stdout carries; none for the terminal view.
    pub format: Option<Document>,
}

impl RunOptions {
    /// The first (in most runs the only) `--target`.
    pub fn first_target(&self) -> &str {
        self.target.first().map_or("sim", String::as_str)
    }
}

/// `cetp resume`'s options: the run's directory and what may differ from
/// the run it continues.
#[derive(Clone, Debug)]
pub struct ResumeOptions {
    /// The run's report directory (it holds journal.ndjson).
    pub dir: PathBuf,
    /// Bounds the rest of the run.
    pub run_timeout: Option<Duration>,
    /// Print passing cases too.
    pub verbose: bool,
    /// Colour of the terminal view.
    pub color: Color,
}

/// The options of the run a report.json records, and its nonce.
pub fn replayed(args: &RunOptions, path: &Path) -> Result<(RunOptions, i64), Failure> {
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

fn absolute(p: &Option<PathBuf>) -> serde_json::Value {
    match p {
        Some(p) => serde_json::json!(std::path::absolute(p).unwrap_or_else(|_| p.clone())),
        None => serde_json::Value::Null,
    }
}

/// What `cetp resume` needs to run the same run again: the journal's
/// `run` record. Paths are made absolute so a resume from another
/// directory reads the same files; the pin then checks their content.
pub fn journal_config(
    args: &RunOptions,
    cfg: &cetp_conformance::runner::RunConfig,
) -> serde_json::Value {
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

/// The run options a journal's `run` record holds.
pub fn options_of_journal(
    config: &serde_json::Value,
    r: &ResumeOptions,
) -> Result<RunOptions, Failure> {
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
    Ok(RunOptions {
        // A run of several devices lists them all (`targets`).
        target: match config["targets"].as_array() {
            Some(_) => strings("targets")?,
            None => vec![string("target").ok_or_else(|| bad("target"))?],
        },
        devices: Mode::Shard,
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
        max_wait: config["max_wait_ms"]
            .as_u64()
            .map_or(Duration::from_secs(180), Duration::from_millis),
        vectors: path("vectors"),
        verbose: r.verbose,
        require_claim: config["require_claim"].as_bool().unwrap_or(false),
        lock: path("lock"),
        partition: serde_json::from_value(config["partition"].clone())
            .map_err(|_| bad("partition"))?,
        replay_run: None,
        color: r.color,
        format: None,
    })
}
