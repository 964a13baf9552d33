//! Fuzzing that scales out (issue 31): one worker per target, each running
//! the ordinary fuzz loop ([`crate::Fuzzer::run`]) on its own device with
//! its own seed stream, a corpus directory the workers share, and findings
//! deduplicated by their signature.
//!
//! - **Seeds.** Worker `i` fuzzes with [`worker_seed`]`(seed, i)`; worker 0
//!   with the run's seed itself, so a one-target run and worker 0 of a
//!   campaign generate the same sequences. Without a corpus every worker's
//!   run is reproducible from its seed alone; with one, a worker also
//!   derives sequences from what the others wrote, which depends on when
//!   they wrote it (each finding's case file replays regardless).
//! - **Corpus.** A sequence whose run on the target showed something no
//!   earlier run of this worker did (an answer outcome of a method, a pair
//!   of successive outcomes, a check firing, a way of stopping: see
//!   [`features`]) is written as one JSON file; workers (and other `cetp
//!   fuzz` processes given the same directory) read each other's files and
//!   derive sequences from them: the entry's moves with their
//!   schema-drawn args drawn anew, or a prefix of them followed by freshly
//!   generated moves. Every read and write is bounded ([`MAX_ENTRY_BYTES`],
//!   [`MAX_ENTRIES`]), and an entry naming a tool this worker's profile does
//!   not let it execute is never run.
//! - **Findings.** The first worker to see a signature claims it and
//!   shrinks it; a worker that sees a claimed signature only adds itself to
//!   the finding's sightings. In a campaign over several Provider builds
//!   (`--mixed-builds`) the same signature on two builds is two findings.
//! - **Lost devices.** A worker whose device stops answering (see
//!   [`crate::FuzzReport::lost`]), that cannot start, or that panics is
//!   reported as such; the others go on.

use crate::moves::{redraw_generated, Generator, Move};
use crate::world::World;
use crate::{case_seed, exec::CaseRun, FuzzConfig, FuzzError, FuzzReport, Fuzzer, Stats};
use cetp_conformance::pin::Pin;
use cetp_vectors::device::Target;
use cetp_vectors::interp::{Env, Stop};
use cetp_vectors::profile::Profile;
use cetp_vectors::template::literal;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value as Json};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Largest corpus file read or written: an entry is a few moves (a few KiB);
/// a bigger file is not one of ours and is skipped.
pub const MAX_ENTRY_BYTES: u64 = 256 * 1024;
/// Entries one worker keeps in memory, and files it writes, at most.
pub const MAX_ENTRIES: usize = 4096;
/// Directory entries one worker looks at, at most (files skipped included).
const MAX_SEEN: usize = 4 * MAX_ENTRIES;
/// Distinct features one worker remembers.
const MAX_FEATURES: usize = 1 << 16;
/// Sightings kept per finding.
const MAX_SIGHTINGS: usize = 32;
/// The corpus directory is read again after this many sequences.
const SYNC_EVERY: u64 = 16;
/// One sequence in this many is derived from a corpus entry (when there is
/// one).
const FROM_CORPUS_ONE_IN: u32 = 3;

const WORKER_SALT: u64 = 0x6A09_E667_F3BC_C908;
const CORPUS_SALT: u64 = 0xBB67_AE85_84CA_A73B;
const FORMAT: &str = "cetp-fuzz-corpus";

/// The seed worker `worker` of a run seeded `seed` fuzzes with.
pub fn worker_seed(seed: u64, worker: usize) -> u64 {
    if worker == 0 {
        seed
    } else {
        case_seed(seed ^ WORKER_SALT, worker as u64)
    }
}

pub use cetp_conformance::pin::{build_differences, BUILD_FIELDS};

/// A short digest of a pin's build fields.
pub fn build_key(pin: &Pin) -> String {
    let fields: BTreeMap<&str, Option<&Json>> = BUILD_FIELDS
        .iter()
        .map(|f| (*f, pin.fields.get(*f)))
        .collect();
    hex::encode(Sha256::digest(json!(fields).to_string().as_bytes()))[..16].to_string()
}

/// One corpus file.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Entry {
    /// Always `cetp-fuzz-corpus`: a file without it is skipped.
    pub format: String,
    /// Version of the entry format; only 1 is read.
    pub version: u32,
    /// The target (and worker) whose run wrote it.
    pub found_by: String,
    /// Seed of the sequence whose run wrote it.
    pub seed: u64,
    /// What the run showed first (see [`features`]).
    pub features: Vec<String>,
    /// The sequence's moves, that workers derive new sequences from.
    pub moves: Vec<Move>,
}

/// Figures of one worker's use of the corpus.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct CorpusStats {
    /// Entries read from the directory (its own writes not counted).
    pub read: usize,
    /// Entries this worker wrote.
    pub written: usize,
    /// Files skipped: too large, not an entry, or naming a tool this
    /// worker may not execute.
    pub skipped: usize,
    /// Sequences derived from an entry.
    pub derived: u64,
}

/// One worker's view of a corpus directory.
pub struct Corpus {
    dir: PathBuf,
    seen: HashSet<OsString>,
    entries: Vec<Entry>,
    features: HashSet<String>,
    /// This worker's figures of reading and writing the corpus.
    pub stats: CorpusStats,
}

impl Corpus {
    /// The directory, made if missing; nothing is read before [`Corpus::sync`].
    pub fn open(dir: &Path) -> std::io::Result<Corpus> {
        std::fs::create_dir_all(dir)?;
        Ok(Corpus {
            dir: dir.to_path_buf(),
            seen: HashSet::new(),
            entries: Vec::new(),
            features: HashSet::new(),
            stats: CorpusStats::default(),
        })
    }

    /// The entries read from the directory that this worker may run (its
    /// own writes are not among them).
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Reads the files not read yet; `runnable` says whether this worker
    /// may run an entry. Returns how many entries were added.
    pub fn sync(&mut self, runnable: &dyn Fn(&Entry) -> bool) -> usize {
        let Ok(dir) = std::fs::read_dir(&self.dir) else {
            return 0;
        };
        let mut added = 0;
        for item in dir.flatten() {
            if self.seen.len() >= MAX_SEEN || self.entries.len() >= MAX_ENTRIES {
                break;
            }
            let name = item.file_name();
            let text = name.to_string_lossy();
            // Dot files are writes in progress (renamed when complete).
            if text.starts_with('.') || !text.ends_with(".json") || self.seen.contains(&name) {
                continue;
            }
            self.seen.insert(name);
            match read_entry(&item.path()) {
                Some(e) if runnable(&e) => {
                    self.absorb(&e.features);
                    self.entries.push(e);
                    self.stats.read += 1;
                    added += 1;
                }
                _ => self.stats.skipped += 1,
            }
        }
        added
    }

    fn absorb(&mut self, features: &[String]) {
        for f in features {
            if self.features.len() >= MAX_FEATURES {
                break;
            }
            self.features.insert(f.clone());
        }
    }

    /// Writes `moves` as an entry when `features` holds one this corpus
    /// has not seen; returns the file written.
    pub fn offer(
        &mut self,
        features: &BTreeSet<String>,
        moves: &[Move],
        found_by: &str,
        seed: u64,
    ) -> Option<PathBuf> {
        let novel: Vec<String> = features
            .iter()
            .filter(|f| !self.features.contains(*f))
            .cloned()
            .collect();
        if novel.is_empty() || self.stats.written >= MAX_ENTRIES {
            return None;
        }
        self.absorb(&novel);
        let entry = Entry {
            format: FORMAT.into(),
            version: 1,
            found_by: found_by.to_string(),
            seed,
            features: novel,
            moves: moves.to_vec(),
        };
        let text = serde_json::to_string_pretty(&entry).ok()?;
        if text.len() as u64 > MAX_ENTRY_BYTES {
            return None;
        }
        // Named by the digest of the moves: the same sequence found twice is
        // one file.
        let moves_text = serde_json::to_string(&entry.moves).ok()?;
        let name = format!(
            "{}.json",
            &hex::encode(Sha256::digest(moves_text.as_bytes()))[..20]
        );
        let path = self.dir.join(&name);
        self.seen.insert(name.clone().into());
        if path.exists() {
            return None;
        }
        // Written under a dot name and renamed: a reader never sees half a
        // file.
        let tmp = self
            .dir
            .join(format!(".{name}.{}.{seed:x}", std::process::id()));
        if std::fs::write(&tmp, text + "\n").is_err() || std::fs::rename(&tmp, &path).is_err() {
            let _ = std::fs::remove_file(&tmp);
            return None;
        }
        self.stats.written += 1;
        if self.entries.len() < MAX_ENTRIES {
            self.entries.push(entry);
        }
        Some(path)
    }
}

/// A corpus file, or `None` when it is too large or not an entry.
fn read_entry(path: &Path) -> Option<Entry> {
    let file = std::fs::File::open(path).ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut text = String::new();
    file.take(MAX_ENTRY_BYTES + 1)
        .read_to_string(&mut text)
        .ok()?;
    if text.len() as u64 > MAX_ENTRY_BYTES {
        return None;
    }
    let e: Entry = serde_json::from_str(&text).ok()?;
    (e.format == FORMAT && e.version == 1 && !e.moves.is_empty()).then_some(e)
}

/// The step kinds the generator writes ([`crate::moves`]): a corpus entry
/// holding any other (a `sleep`, an `each_tool`) is not one of ours and is
/// not run. A test holds the generator to this list.
pub const GENERATED_STEPS: &[&str] = &[
    "advance_clock",
    "call",
    "cancel_consistent",
    "concurrent",
    "discover",
    "equal",
    "negotiate",
    "observe",
    "poll",
    "read_fd",
    "resolve",
    "restart",
    "revision_consistent",
    "same",
    "settle",
    "tokens_unpredictable",
    "uuid",
    "v1_read_only",
];

/// The longest time (device clock moved, operation waited for) a corpus
/// entry's step may name: ten days, past the longest the generator moves
/// the clock (eight days, `advance` in [`crate::moves`]).
pub const MAX_ENTRY_MS: u64 = 10 * 24 * 3_600_000;

/// Whether this worker may run an entry: only step kinds the generator
/// writes ([`GENERATED_STEPS`]), no time beyond [`MAX_ENTRY_MS`], and every
/// tool named one `world` lets this worker execute (a tool by name, or a
/// profile role it has): an entry written against another profile or
/// Provider, or by hand, never makes this worker execute what its own
/// profile does not allow, nor wait without bound.
pub fn runnable(entry: &Entry, world: &World) -> bool {
    fn ok(j: &Json, world: &World) -> bool {
        match j {
            Json::Array(a) => a.iter().all(|x| ok(x, world)),
            Json::Object(o) => {
                if let Some(kind) = o.get("do") {
                    if !kind.as_str().is_some_and(|k| GENERATED_STEPS.contains(&k)) {
                        return false;
                    }
                    // The fields that make the harness wait or move a
                    // clock (a call's deadline is sent, not waited for).
                    let too_long = ["ms", "max_ms", "plus_ms", "fixed_clock_wait_ms"]
                        .iter()
                        .filter_map(|k| o.get(*k))
                        .any(|v| v.as_u64().is_none_or(|ms| ms > MAX_ENTRY_MS));
                    if too_long {
                        return false;
                    }
                    if let Some(tool) = o.get("tool") {
                        let named = match (tool.get("name"), tool.get("profile_role")) {
                            (Some(Json::String(n)), None) => {
                                world.executable().any(|t| literal(&t.name) == *n)
                            }
                            (None, Some(Json::String(r))) => world.roles.contains_key(r),
                            _ => false,
                        };
                        if !named {
                            return false;
                        }
                    }
                }
                o.values().all(|x| ok(x, world))
            }
            _ => true,
        }
    }
    entry
        .moves
        .iter()
        .flat_map(|m| &m.steps)
        .all(|s| ok(&s.step, world))
}

/// What a run on the target showed, as feature strings: each answer's
/// method and outcome (status and error code, or a throw), each pair of
/// successive outcomes, each check that fired and how the run stopped.
pub fn features(case: &Json, run: &CaseRun) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut prev: Option<String> = None;
    let steps = case.get("steps").and_then(Json::as_array);
    for step in steps.into_iter().flatten() {
        let Some(bind) = step.get("bind").and_then(Json::as_str) else {
            continue;
        };
        let Some(doc) = run.bindings.get(bind).filter(|d| d.is_object()) else {
            continue;
        };
        let method = step
            .get("method")
            .and_then(Json::as_str)
            .or_else(|| step.get("do").and_then(Json::as_str))
            .unwrap_or("?");
        let outcome = if doc.get("_threw").is_some() {
            "threw".to_string()
        } else if doc.get("_null").is_some() {
            "null".to_string()
        } else {
            let s = |k: &str| doc.get(k).and_then(Json::as_str).unwrap_or("-");
            format!("{}/{}", s("status"), s("error_code"))
        };
        let here = format!("{method}:{outcome}");
        // Provider strings go into corpus files: bounded, one line each.
        let here: String = here.chars().filter(|c| !c.is_control()).take(120).collect();
        if let Some(p) = &prev {
            out.insert(format!("then {p} -> {here}"));
        }
        out.insert(format!("answer {here}"));
        prev = Some(here);
    }
    for check in run.checks.keys() {
        out.insert(format!("check {check}"));
    }
    out.insert(
        match &run.stop {
            None => "stop none",
            Some(Stop::Fail(_)) => "stop fail",
            Some(Stop::NotApplicable(_)) => "stop not_applicable",
            Some(Stop::Setup { .. }) => "stop setup",
            Some(Stop::Infra(_)) => "stop infra",
            Some(Stop::Cut(_)) => "stop cut",
            Some(Stop::Withdraw { .. }) => "stop withdraw",
        }
        .to_string(),
    );
    out
}

/// The number after which fresh bind names start for moves appended to
/// `moves`: past every `<letters><digits>` string they hold.
fn next_name(moves: &[Move]) -> usize {
    fn walk(j: &Json, max: &mut usize) {
        match j {
            Json::String(s) => {
                let digits = s.trim_start_matches(|c: char| c.is_ascii_lowercase() || c == '_');
                if digits.len() < s.len()
                    && (1..=9).contains(&digits.len())
                    && digits.bytes().all(|b| b.is_ascii_digit())
                {
                    *max = (*max).max(digits.parse().unwrap_or(0));
                }
            }
            Json::Array(a) => a.iter().for_each(|x| walk(x, max)),
            Json::Object(o) => o.values().for_each(|x| walk(x, max)),
            _ => {}
        }
    }
    let mut max = 0;
    for s in moves.iter().flat_map(|m| &m.steps) {
        walk(&s.step, &mut max);
    }
    max + 1
}

/// A sequence derived from an entry's moves (seeded by `seed`): the same
/// moves with their schema-drawn args drawn anew, or a prefix of them
/// followed by freshly generated moves (at most `max_moves` in all but the
/// first session).
pub fn derive(moves: &[Move], world: &World, seed: u64, max_moves: usize) -> Vec<Move> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ CORPUS_SALT);
    if rng.random_bool(0.3) {
        if let Some(m) = redraw_generated(moves, world, seed) {
            return m;
        }
    }
    let keep = rng.random_range(1..=moves.len().clamp(1, max_moves.max(1)));
    let mut out: Vec<Move> = moves[..keep.min(moves.len())].to_vec();
    let tail = Generator::new(world, seed)
        .sequence_named_from(max_moves.saturating_sub(keep).max(1), next_name(&out));
    out.extend(tail.moves);
    out
}

/// Where a worker saw a finding.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Sighting {
    /// Index of the worker that saw it.
    pub worker: usize,
    /// Its target's label.
    pub target: String,
    /// Index of the sequence that failed in that worker.
    pub case_index: u64,
    /// That sequence's seed.
    pub case_seed: u64,
}

/// The findings the workers claimed, by build and signature.
#[derive(Default)]
pub struct Hub {
    claims: Mutex<BTreeMap<String, Vec<Sighting>>>,
}

impl Hub {
    fn key(build: &str, signature: &str) -> String {
        format!("{build}\u{1f}{signature}")
    }

    /// Records a sighting of `signature` on `build`; true when it is the
    /// first (the caller then shrinks and reports the finding).
    pub fn claim(&self, build: &str, signature: &str, s: Sighting) -> bool {
        let mut claims = self.claims.lock().unwrap_or_else(|p| p.into_inner());
        let seen = claims.entry(Self::key(build, signature)).or_default();
        let first = seen.is_empty();
        if seen.len() < MAX_SIGHTINGS && !seen.iter().any(|x| x.worker == s.worker) {
            seen.push(s);
        }
        first
    }

    /// Distinct findings claimed so far.
    pub fn distinct(&self) -> usize {
        self.claims.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Every worker that saw `signature` on `build`, the claiming one first
    /// (at most 32 kept).
    pub fn sightings(&self, build: &str, signature: &str) -> Vec<Sighting> {
        self.claims
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&Self::key(build, signature))
            .cloned()
            .unwrap_or_default()
    }
}

/// What makes a [`Fuzzer`] one worker of a campaign.
pub struct Member {
    /// The campaign's shared record of claimed findings.
    pub hub: Arc<Hub>,
    /// This worker's index (its seed is [`worker_seed`] of it).
    pub worker: usize,
    /// Its target's label, named in sightings and corpus entries.
    pub label: String,
    /// [`build_key`] of its target.
    pub build: String,
    /// The shared corpus directory, when the campaign has one.
    pub corpus: Option<Corpus>,
    pub(crate) sequences: u64,
}

impl Member {
    /// Worker `worker` of the campaign sharing `hub`, on the target labelled
    /// `label` of build `build`, without a corpus.
    pub fn new(hub: Arc<Hub>, worker: usize, label: &str, build: &str) -> Member {
        Member {
            hub,
            worker,
            label: label.to_string(),
            build: build.to_string(),
            corpus: None,
            sequences: 0,
        }
    }

    /// The same worker, reading and writing `corpus`.
    pub fn with_corpus(mut self, corpus: Corpus) -> Member {
        self.corpus = Some(corpus);
        self
    }

    /// A sequence derived from a corpus entry, one time in
    /// [`FROM_CORPUS_ONE_IN`] when there is one (its own draws, so the
    /// generator's stream is that of a run without a corpus).
    pub(crate) fn derived(
        &mut self,
        world: &World,
        seed: u64,
        max_moves: usize,
    ) -> Option<Vec<Move>> {
        let corpus = self.corpus.as_mut()?;
        if self.sequences.is_multiple_of(SYNC_EVERY) {
            corpus.sync(&|e| runnable(e, world));
        }
        self.sequences += 1;
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ CORPUS_SALT ^ 1);
        if corpus.entries.is_empty() || rng.random_range(0..FROM_CORPUS_ONE_IN) != 0 {
            return None;
        }
        let entry = &corpus.entries[rng.random_range(0..corpus.entries.len())];
        let moves = derive(&entry.moves, world, seed, max_moves);
        corpus.stats.derived += 1;
        Some(moves)
    }
}

/// One target of a campaign, identified.
pub struct WorkerSpec {
    /// The target's label in reports and sightings.
    pub label: String,
    /// Its devices, one per identity.
    pub target: Target,
    /// Its profile: what the fuzzer may execute, and its observer.
    pub profile: Profile,
    /// What identifying the target found (package, manifest kind, ...).
    pub env: Env,
    /// [`build_key`] of its pin.
    pub build: String,
}

/// How a worker ended.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(tag = "state", content = "reason", rename_all = "snake_case")]
pub enum WorkerState {
    /// Its budget, case count or the campaign's finding limit ended it.
    Finished,
    /// Its device stopped answering part-way.
    Lost(String),
    /// It could not start: its target could not be learned.
    NotStarted(String),
    /// Its profile and target leave nothing it may call (as a one-target
    /// run refuses to start).
    Refused(String),
    /// The target failed the descriptor oracle's learning case: that case
    /// is its finding, and nothing was fuzzed.
    Unlearnable,
    /// The worker panicked (a defect of the harness, never charged).
    Died(String),
}

/// One worker's figures.
#[derive(Clone, Debug, serde::Serialize)]
pub struct WorkerReport {
    /// The worker's index.
    pub worker: usize,
    /// Its target's label.
    pub target: String,
    /// The seed it fuzzed with ([`worker_seed`]).
    pub seed: u64,
    /// How it ended.
    #[serde(flatten)]
    pub state: WorkerState,
    /// `differential` or `descriptor`, once its fuzzer was built.
    pub oracle_kind: Option<String>,
    /// Its totals.
    pub stats: Stats,
    /// Ids of the findings this worker claimed first.
    pub findings: Vec<String>,
    /// Ids of findings another worker claimed that this one saw too.
    pub also_saw: Vec<String>,
    /// Its descriptor-oracle failures that did not reproduce.
    pub flaky: Vec<crate::Flaky>,
    /// Checks that fired on its oracle's members (harness defects, never
    /// charged).
    pub oracle_notes: Vec<String>,
    /// Effects its target's observer counted over its run.
    pub effects_observed: Option<i64>,
    /// Why its effect judgements stopped part-way, if they did.
    pub effects_unjudged: Option<String>,
    /// Its use of the corpus, in a campaign with one.
    pub corpus: Option<CorpusStats>,
}

/// A finding and every worker that saw it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct CampaignFinding {
    /// The finding as the claiming worker shrank it.
    #[serde(flatten)]
    pub finding: crate::Finding,
    /// [`build_key`] of the build it was seen on.
    pub build: String,
    /// Every worker that saw it, the claiming one first.
    pub found_by: Vec<Sighting>,
}

/// What a campaign found and did: the report `cetp fuzz` writes for
/// several targets.
#[derive(Clone, Debug, serde::Serialize)]
pub struct CampaignReport {
    /// The campaign's seed: worker `i` fuzzed with [`worker_seed`]`(seed, i)`.
    pub seed: u64,
    /// Each worker's target label, in worker order.
    pub targets: Vec<String>,
    /// `same` (every target runs one Provider build) or `mixed`.
    pub builds: String,
    /// The shared corpus directory, if any.
    pub corpus: Option<PathBuf>,
    /// The workers' figures summed.
    pub stats: Stats,
    /// Each worker's figures, in worker order.
    pub workers: Vec<WorkerReport>,
    /// Distinct findings (by build and signature), in the order found.
    pub findings: Vec<CampaignFinding>,
    /// Milliseconds from the start to the first finding.
    pub first_finding_ms: Option<u64>,
}

impl CampaignReport {
    /// Whether a worker refused to start (a usage error, as in a one-target
    /// run).
    pub fn refused(&self) -> bool {
        self.workers
            .iter()
            .any(|w| matches!(w.state, WorkerState::Refused(_)))
    }

    /// Whether every worker ran to its end.
    pub fn complete(&self) -> bool {
        self.workers
            .iter()
            .all(|w| matches!(w.state, WorkerState::Finished | WorkerState::Unlearnable))
    }
}

enum Outcome {
    Ran(Box<FuzzReport>, Option<CorpusStats>),
    Unlearnable(Box<crate::Finding>),
    NotStarted(String),
    Refused(String),
}

/// Runs one worker per spec until each ends, calling `progress` with every
/// worker's running figures about twice a second. `corpus` is made if
/// missing; an error making it is returned before anything runs.
pub fn run(
    specs: Vec<WorkerSpec>,
    rules: &BTreeMap<String, Vec<String>>,
    cfg: &FuzzConfig,
    corpus: Option<&Path>,
    progress: &mut dyn FnMut(&[Stats]),
) -> Result<CampaignReport, String> {
    if let Some(dir) = corpus {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot make the corpus directory {}: {e}", dir.display()))?;
    }
    let hub = Arc::new(Hub::default());
    let mixed = specs.iter().any(|s| s.build != specs[0].build);
    let targets: Vec<String> = specs.iter().map(|s| s.label.clone()).collect();
    let builds: Vec<String> = specs.iter().map(|s| s.build.clone()).collect();
    let slots: Mutex<Vec<Stats>> = Mutex::new(vec![Stats::default(); specs.len()]);
    let outcomes: Vec<Result<Outcome, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = specs
            .into_iter()
            .enumerate()
            .map(|(i, spec)| {
                let (hub, slots) = (hub.clone(), &slots);
                let mut wcfg = cfg.clone();
                wcfg.seed = worker_seed(cfg.seed, i);
                scope.spawn(move || {
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        work(i, spec, rules, wcfg, hub, corpus, slots)
                    }))
                    .map_err(|p| panic_text(p.as_ref()))
                })
            })
            .collect();
        let mut last = Instant::now();
        while !handles.iter().all(|h| h.is_finished()) {
            std::thread::sleep(Duration::from_millis(50));
            if last.elapsed() >= Duration::from_millis(500) {
                progress(&slots.lock().unwrap_or_else(|p| p.into_inner()));
                last = Instant::now();
            }
        }
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| Err(panic_text(p.as_ref()))))
            .collect()
    });
    progress(&slots.lock().unwrap_or_else(|p| p.into_inner()));
    Ok(assemble(
        cfg.seed, targets, builds, mixed, corpus, outcomes, &hub,
    ))
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".into())
}

/// One worker's whole life: its fuzzer, joined to the campaign, run.
fn work(
    i: usize,
    spec: WorkerSpec,
    rules: &BTreeMap<String, Vec<String>>,
    cfg: FuzzConfig,
    hub: Arc<Hub>,
    corpus: Option<&Path>,
    slots: &Mutex<Vec<Stats>>,
) -> Outcome {
    let seed = cfg.seed;
    let mut fuzzer = match Fuzzer::new(spec.target, &spec.profile, spec.env, rules, cfg) {
        Ok(f) => f,
        Err(FuzzError::Unlearnable(f)) => {
            let s = Sighting {
                worker: i,
                target: spec.label.clone(),
                case_index: 0,
                case_seed: seed,
            };
            return if hub.claim(&spec.build, &f.signature, s) {
                Outcome::Unlearnable(f)
            } else {
                Outcome::NotStarted(format!(
                    "failed the descriptor oracle's learning case as another worker's target did: {}",
                    f.signature
                ))
            };
        }
        Err(FuzzError::Refused(why)) => return Outcome::Refused(why),
        Err(e) => return Outcome::NotStarted(e.to_string()),
    };
    let mut member = Member::new(hub, i, &spec.label, &spec.build);
    if let Some(dir) = corpus {
        match Corpus::open(dir) {
            Ok(c) => member = member.with_corpus(c),
            Err(e) => return Outcome::NotStarted(format!("corpus {}: {e}", dir.display())),
        }
    }
    fuzzer.join_campaign(member);
    let report = fuzzer.run(&mut |s: &Stats| {
        if let Some(slot) = slots.lock().unwrap_or_else(|p| p.into_inner()).get_mut(i) {
            *slot = s.clone();
        }
    });
    let corpus_stats = fuzzer
        .campaign_member()
        .and_then(|m| m.corpus.as_ref())
        .map(|c| c.stats.clone());
    Outcome::Ran(Box::new(report), corpus_stats)
}

/// The campaign's report from its workers' outcomes.
fn assemble(
    seed: u64,
    targets: Vec<String>,
    builds: Vec<String>,
    mixed: bool,
    corpus: Option<&Path>,
    outcomes: Vec<Result<Outcome, String>>,
    hub: &Hub,
) -> CampaignReport {
    let mut workers = Vec::new();
    let mut findings: Vec<CampaignFinding> = Vec::new();
    let mut stats = Stats::default();
    for (i, outcome) in outcomes.into_iter().enumerate() {
        let mut w = WorkerReport {
            worker: i,
            target: targets[i].clone(),
            seed: worker_seed(seed, i),
            state: WorkerState::Finished,
            oracle_kind: None,
            stats: Stats::default(),
            findings: Vec::new(),
            also_saw: Vec::new(),
            flaky: Vec::new(),
            oracle_notes: Vec::new(),
            effects_observed: None,
            effects_unjudged: None,
            corpus: None,
        };
        let mut mine = Vec::new();
        match outcome {
            Err(panic) => w.state = WorkerState::Died(panic),
            Ok(Outcome::NotStarted(why)) => w.state = WorkerState::NotStarted(why),
            Ok(Outcome::Refused(why)) => w.state = WorkerState::Refused(why),
            Ok(Outcome::Unlearnable(f)) => {
                w.state = WorkerState::Unlearnable;
                w.oracle_kind = Some("descriptor".into());
                mine.push(*f);
            }
            Ok(Outcome::Ran(r, c)) => {
                if let Some(why) = &r.lost {
                    w.state = WorkerState::Lost(why.clone());
                }
                w.oracle_kind = Some(r.oracle_kind.clone());
                w.stats = r.stats.clone();
                w.flaky = r.flaky.clone();
                w.oracle_notes = r.oracle_notes.clone();
                w.effects_observed = r.effects_observed;
                w.effects_unjudged = r.effects_unjudged.clone();
                w.corpus = c;
                mine = r.findings;
            }
        }
        add_stats(&mut stats, &w.stats);
        for f in mine {
            w.findings.push(f.id.clone());
            findings.push(CampaignFinding {
                found_by: hub.sightings(&builds[i], &f.signature),
                build: builds[i].clone(),
                finding: f,
            });
        }
        workers.push(w);
    }
    for f in &findings {
        for s in f.found_by.iter().skip(1) {
            if let Some(w) = workers.get_mut(s.worker) {
                w.also_saw.push(f.finding.id.clone());
            }
        }
    }
    findings.sort_by_key(|f| f.finding.found_after_ms);
    stats.findings = findings.len();
    CampaignReport {
        seed,
        targets,
        builds: if mixed { "mixed" } else { "same" }.into(),
        corpus: corpus.map(Path::to_path_buf),
        stats,
        first_finding_ms: findings.first().map(|f| f.finding.found_after_ms),
        workers,
        findings,
    }
}

/// `into` plus `s` (elapsed: the longest).
pub fn add_stats(into: &mut Stats, s: &Stats) {
    into.cases += s.cases;
    into.judged += s.judged;
    into.unjudged += s.unjudged;
    into.findings += s.findings;
    into.envelopes += s.envelopes;
    into.dispatched += s.dispatched;
    into.effects_unjudged += s.effects_unjudged;
    into.elapsed_ms = into.elapsed_ms.max(s.elapsed_ms);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sighting(worker: usize) -> Sighting {
        Sighting {
            worker,
            target: format!("t{worker}"),
            case_index: worker as u64,
            case_seed: 0,
        }
    }

    #[test]
    fn a_signature_is_claimed_once_per_build_and_names_every_worker_that_saw_it() {
        let hub = Hub::default();
        assert!(hub.claim("b1", "check X (rule)", sighting(0)));
        assert!(!hub.claim("b1", "check X (rule)", sighting(1)));
        // The same worker seeing it again adds nothing.
        assert!(!hub.claim("b1", "check X (rule)", sighting(1)));
        let workers: Vec<usize> = hub
            .sightings("b1", "check X (rule)")
            .iter()
            .map(|s| s.worker)
            .collect();
        assert_eq!(workers, [0, 1]);
        // Another signature, or the same one on another build, is new.
        assert!(hub.claim("b1", "check Y (rule)", sighting(1)));
        assert!(hub.claim("b2", "check X (rule)", sighting(2)));
        assert_eq!(hub.distinct(), 3);
        for w in 0..100 {
            hub.claim("b1", "check X (rule)", sighting(w));
        }
        assert_eq!(hub.sightings("b1", "check X (rule)").len(), MAX_SIGHTINGS);
    }

    #[test]
    fn build_differences_name_only_the_build_fields() {
        let a = Pin {
            fields: BTreeMap::from([
                ("package".to_string(), json!("p")),
                ("revision".to_string(), json!("r1")),
                ("target".to_string(), json!("sim")),
                ("device".to_string(), json!("d1")),
            ]),
        };
        let mut b = a.clone();
        b.fields.insert("target".into(), json!("tcp:h:1"));
        b.fields.insert("device".into(), json!("d2"));
        assert!(build_differences(&a, &b).is_empty(), "devices may differ");
        assert_eq!(build_key(&a), build_key(&b));
        b.fields.insert("revision".into(), json!("r2"));
        b.fields.insert("signing_cert".into(), json!(["ab"]));
        assert_eq!(build_differences(&a, &b), ["signing_cert", "revision"]);
        assert_ne!(build_key(&a), build_key(&b));
    }

    /// The corpus runs only the step kinds the generator writes: every one
    /// it writes must be on the list, or its own entries would be skipped.
    #[test]
    fn every_generated_sequence_is_runnable_from_the_corpus() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let profile = cetp_vectors::profile::Profile::from_toml(
            &std::fs::read_to_string(dir.join("profiles/reference.toml")).unwrap(),
        )
        .unwrap();
        let spec = cetp_targets::TargetSpec::parse("sim").unwrap();
        let target = cetp_targets::open(&spec).unwrap();
        let (_, env) = cetp_conformance::runner::identify(&target, &profile).unwrap();
        let world = crate::world::learn(&target, &profile, &env, 1).unwrap();
        let mut kinds = BTreeSet::new();
        for seed in 0..400 {
            let moves = Generator::new(&world, seed).sequence(8).moves;
            let entry = Entry {
                format: FORMAT.into(),
                version: 1,
                found_by: "test".into(),
                seed,
                features: vec![],
                moves: moves.clone(),
            };
            for s in moves.iter().flat_map(|m| &m.steps) {
                kinds.insert(s.step["do"].as_str().unwrap_or("?").to_string());
            }
            assert!(runnable(&entry, &world), "seed {seed}: {moves:#?}");
            let mut slow = entry.clone();
            slow.moves[0].steps[0].step = json!({"do": "sleep", "ms": 1});
            assert!(!runnable(&slow, &world), "a step kind not generated");
            slow.moves[0].steps[0].step = json!({"do": "advance_clock", "ms": MAX_ENTRY_MS + 1});
            assert!(!runnable(&slow, &world), "too long a wait");
        }
        // The generator reaches most kinds in 400 sequences: the list is
        // not wider than it needs to be by much.
        assert!(kinds.len() + 4 >= GENERATED_STEPS.len(), "{kinds:?}");
    }

    #[test]
    fn worker_zero_keeps_the_run_seed_and_the_others_get_their_own() {
        assert_eq!(worker_seed(42, 0), 42);
        let seeds: BTreeSet<u64> = (0..64).map(|i| worker_seed(42, i)).collect();
        assert_eq!(seeds.len(), 64);
        assert_eq!(worker_seed(42, 3), worker_seed(42, 3));
    }

    #[test]
    fn fresh_names_start_past_every_name_a_prefix_binds() {
        let m = |j: Json| Move {
            steps: vec![crate::moves::GenStep {
                step: j,
                meta: crate::moves::Meta::Plain,
            }],
        };
        let moves = [
            m(json!({"do": "negotiate", "bind": "s1"})),
            m(json!({"do": "call", "session": "s1", "bind": "e17", "operation_id": "op-unknown"})),
            m(json!({"do": "same", "a": "e17", "b": "r1234567890"})),
        ];
        // Ten digits is no name the generator makes: ignored.
        assert_eq!(next_name(&moves), 18);
        assert_eq!(next_name(&[]), 1);
    }
}
