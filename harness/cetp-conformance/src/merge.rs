//! `cetp merge`: the event streams (`events.ndjson`) of the N partitions of
//! one split run ([`crate::partition`]), checked and joined into the event
//! stream of one run, which the caller feeds to the same reporters a run
//! writes its report directory with.
//!
//! Checked before anything is written, each refusal naming the inputs at
//! fault: every input is a finished partition (not interrupted, its target
//! identified) of the same N by the same scheme; each M in 1..=N is there
//! exactly once; the seed, filters, attempts and pins agree (the device
//! fields may differ, [`DEVICE_FIELDS`]: a CI matrix runs the parts on
//! several phones; the merged pin then lists each value); the vectors and
//! harness are these; and each partition ran exactly the cases its part of
//! the selection holds, so the parts are disjoint and cover it.
//!
//! The merged run goes through the run's own [`Dispatcher`]: each case's
//! events (steps, findings) and verdict as its partition recorded them, in
//! the unpartitioned run's order, the baseline given to the merge applied,
//! the summary, exit code and §9 claim computed from the merged statistics
//! as a run computes them. A check is judged over the answers of every
//! partition: its findings in that order (the first one gives the reason and
//! the verdict, the others are counted), its answers summed, its cited
//! requirements joined.

use crate::dispatch::{CaseInfo, Dispatcher, Executed, Finished};
use crate::exit::ExitCode;
use crate::lock_target::{lock_case_info, LOCK_CASE_ID};
use crate::partition::{MergedPart, Partition};
use crate::pin::Pin;
use crate::runner::{selected, RunConfig};
use cetp_vectors::event::{Event, Fanout, Reporter, Verdict};
use cetp_vectors::interp::Env;
use cetp_vectors::suite::{Baseline, Suite};
use serde_json::{json, Value as Json};
use std::collections::{BTreeMap, BTreeSet};
use std::io::BufRead;
use std::path::Path;
use std::time::{Duration, Instant};

/// The largest `events.ndjson` read (a whole run against the reference
/// writes a few MB): a file from another machine cannot exhaust memory.
pub const MAX_EVENTS_BYTES: u64 = 256 << 20;

/// Pin fields that name the device rather than the Provider's build: they
/// may differ between partitions run on several devices. Every other field
/// must agree: the build ([`crate::pin::BUILD_FIELDS`], as between the
/// devices of one run) and the run's configuration (harness, vectors,
/// profile). A simulated
/// target's label (`sim:mutant=…`) names its Provider, not a device: it
/// must agree (`device_only`).
pub const DEVICE_FIELDS: [&str; 2] = ["target", "device"];

/// Whether pin field `field` may differ between two partitions with these
/// values: the devices' build fingerprints, or the addresses of real or
/// served devices (`adb:SERIAL`, `tcp:HOST:PORT`; a list of them for a part
/// sharded over several devices).
fn device_only(field: &str, a: Option<&Json>, b: Option<&Json>) -> bool {
    let sim = |v: Option<&Json>| {
        let labels: Vec<&str> = match v {
            Some(Json::String(l)) => vec![l.as_str()],
            Some(Json::Array(ls)) => ls.iter().filter_map(Json::as_str).collect(),
            _ => return true,
        };
        labels.is_empty() || labels.iter().any(|l| l.starts_with("sim"))
    };
    match field {
        "device" => true,
        "target" => !sim(a) && !sim(b),
        _ => false,
    }
}

/// Why the inputs cannot be merged, with the exit code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MergeError {
    /// The exit code the merge ends with.
    pub exit: ExitCode,
    /// What is wrong, for a human.
    pub message: String,
}

fn usage(message: String) -> MergeError {
    MergeError {
        exit: ExitCode::Usage,
        message,
    }
}

fn infra(message: String) -> MergeError {
    MergeError {
        exit: ExitCode::Infra,
        message,
    }
}

/// Reads an `events.ndjson`, at most `limit` bytes; a malformed line is an
/// error naming the file and line, never a panic.
pub fn read_events(path: &Path, limit: u64) -> Result<Vec<Event>, MergeError> {
    let what = |e: String| infra(format!("{}: {e}", path.display()));
    let file = std::fs::File::open(path).map_err(|e| {
        let m = format!("{}: {e}", path.display());
        if e.kind() == std::io::ErrorKind::NotFound {
            usage(format!("{m} (not the report directory of a cetp run?)"))
        } else {
            infra(m)
        }
    })?;
    let mut reader = std::io::BufReader::new(std::io::Read::take(file, limit.saturating_add(1)));
    let (mut events, mut line, mut read, mut n) = (Vec::new(), Vec::new(), 0u64, 0usize);
    loop {
        line.clear();
        let got = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| what(e.to_string()))?;
        if got == 0 {
            break;
        }
        read += got as u64;
        n += 1;
        if read > limit {
            return Err(what(format!("larger than {} MiB", limit >> 20)));
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let e: Event = serde_json::from_slice(&line)
            .map_err(|e| what(format!("line {n} is not a cetp event: {e}")))?;
        events.push(e);
    }
    Ok(events)
}

/// One case as a partition recorded it.
#[derive(Clone, Debug)]
struct PartCase {
    id: String,
    executed: Executed,
    baseline: Option<String>,
    duration_ms: u64,
    /// The device that ran it, in a part sharded over several.
    device: Option<String>,
    /// Its steps and findings, between `CaseStarted` and `CaseFinished`.
    events: Vec<Event>,
}

/// A case started and not yet finished: its id, device and events so far.
type Open = (String, Option<String>, Vec<Event>);

/// One partition's run, read back from its event stream.
#[derive(Clone, Debug)]
pub struct Part {
    /// Where it was read from (the report directory), for messages.
    pub source: String,
    /// Which part of the split run it is.
    pub partition: Partition,
    run_id: String,
    harness: String,
    target: String,
    seed: u64,
    config_hash: String,
    started_at_ms: i64,
    planned: usize,
    only: Vec<String>,
    skip: Vec<String>,
    attempts: u32,
    /// The part's flags for a rerun of one case (the merge keeps the first part's).
    rerun: Vec<String>,
    /// `TargetIdentified`: one per device (a sharded part has several).
    identified: Vec<Event>,
    /// `DeviceLost` of a sharded part.
    lost: Vec<Event>,
    pin: Option<Pin>,
    cases: Vec<PartCase>,
    /// Each check's answers and cited requirements.
    checks: BTreeMap<String, (usize, Vec<String>)>,
    exit_code: Option<i32>,
    duration_ms: u64,
    /// It is a merge's stream, not a partition's.
    merged: bool,
}

impl Part {
    /// `Part` of the events of one partition's `events.ndjson`.
    pub fn read(source: &str, events: Vec<Event>) -> Result<Part, MergeError> {
        let bad = |m: &str| infra(format!("{source}: {m}"));
        let mut it = events.into_iter();
        let Some(Event::RunStarted {
            run_id,
            harness,
            target,
            seed,
            config_hash,
            started_at_ms,
            cases,
            only,
            skip,
            attempts,
            rerun,
        }) = it.next()
        else {
            return Err(bad("the event stream does not begin with run_started"));
        };
        let mut part = Part {
            source: source.to_string(),
            partition: Partition {
                scheme: crate::partition::Scheme::Slice,
                index: 0,
                count: 0,
            },
            run_id,
            harness,
            target,
            seed,
            config_hash,
            started_at_ms,
            planned: cases,
            only,
            skip,
            attempts,
            rerun,
            identified: Vec::new(),
            lost: Vec::new(),
            pin: None,
            cases: Vec::new(),
            checks: BTreeMap::new(),
            exit_code: None,
            duration_ms: 0,
            merged: false,
        };
        let mut open: Option<Open> = None;
        for e in it {
            if part.exit_code.is_some() {
                return Err(bad("events follow run_finished"));
            }
            part.take(e, &mut open).map_err(|m| bad(&m))?;
        }
        if open.is_some() || part.exit_code.is_none() {
            return Err(bad(
                "the run did not finish (its stream ends before run_finished): continue it with `cetp resume`, or run the partition again",
            ));
        }
        if part.merged {
            return Err(usage(format!(
                "{source} is itself a merge: cetp merge joins the partitions' own directories"
            )));
        }
        if part.partition.index == 0 {
            return Err(usage(format!(
                "{source} is not a partition of a split run (it was not run with --partition{})",
                if part.run_id.starts_with("consumer") {
                    "; it is a Consumer run"
                } else {
                    ""
                }
            )));
        }
        Ok(part)
    }

    /// One event of the stream; `open`: the case whose events are coming.
    fn take(&mut self, e: Event, open: &mut Option<Open>) -> Result<(), String> {
        match e {
            Event::RunPartition {
                scheme,
                count,
                index,
                ..
            } => {
                // A merge's (no index) stays at index 0: not a partition.
                self.partition = Partition {
                    scheme,
                    index: index.unwrap_or(0),
                    count,
                };
                self.merged = index.is_none();
            }
            Event::TargetIdentified { .. } => self.identified.push(e),
            Event::DeviceLost { .. } => self.lost.push(e),
            Event::RunPinned { fields, .. } => self.pin = Some(Pin { fields }),
            Event::CaseStarted {
                case_id, device, ..
            } => {
                if let Some((id, _, _)) = open {
                    return Err(format!("case {case_id} starts inside case {id}"));
                }
                *open = Some((case_id, device, Vec::new()));
            }
            Event::StepSent { .. }
            | Event::StepAnswered { .. }
            | Event::Dispatched { .. }
            | Event::CheckFinding { .. } => match open {
                Some((_, _, events)) => events.push(e),
                None => return Err("a step event outside any case".into()),
            },
            Event::CaseFinished {
                case_id,
                cited,
                verdict,
                reason,
                baseline,
                duration_ms,
                unjudged,
                ..
            } => {
                let (device, events) = match open.take() {
                    Some((id, device, events)) if id == case_id => (device, events),
                    _ => return Err(format!("case {case_id} finishes without starting")),
                };
                self.cases.push(PartCase {
                    id: case_id,
                    executed: Executed {
                        cited,
                        unjudged,
                        ..Executed::new(verdict, reason)
                    },
                    baseline,
                    duration_ms,
                    device,
                    events,
                });
            }
            Event::CheckVerdict {
                check,
                cited,
                answers_checked,
                ..
            } => {
                self.checks.insert(check, (answers_checked, cited));
            }
            Event::BaselineStale { .. } => {}
            Event::RunFinished {
                exit_code,
                duration_ms,
                ..
            } => {
                self.exit_code = Some(exit_code);
                self.duration_ms = duration_ms;
            }
            Event::RunStarted { .. } => return Err("a second run_started".into()),
        }
        Ok(())
    }

    fn name(&self) -> String {
        format!("{} (partition {})", self.source, self.partition)
    }

    fn package(&self) -> Option<&str> {
        match self.identified.first() {
            Some(Event::TargetIdentified {
                package: Some(p), ..
            }) => Some(p),
            _ => None,
        }
    }
}

/// The partitions form one complete split: one N and scheme, each M once.
fn check_split(parts: &[Part]) -> Result<(), MergeError> {
    let Some(first) = parts.first() else {
        return Err(usage("no partition to merge".into()));
    };
    let (scheme, count) = (first.partition.scheme, first.partition.count);
    if parts
        .iter()
        .any(|p| (p.partition.scheme, p.partition.count) != (scheme, count))
    {
        let all: Vec<String> = parts.iter().map(Part::name).collect();
        return Err(usage(format!(
            "the inputs are not partitions of one split (each must be M/N of the same N, by the same scheme): {}",
            all.join(", ")
        )));
    }
    let mut by_index: BTreeMap<u32, Vec<&str>> = BTreeMap::new();
    for p in parts {
        by_index
            .entry(p.partition.index)
            .or_default()
            .push(&p.source);
    }
    let mut problems = Vec::new();
    for (i, sources) in &by_index {
        if sources.len() > 1 {
            problems.push(format!(
                "duplicate partition {}:{i}/{count} in {}",
                scheme.as_str(),
                sources.join(" and ")
            ));
        }
    }
    let missing: Vec<String> = (1..=count)
        .filter(|i| !by_index.contains_key(i))
        .map(|i| format!("{}:{i}/{count}", scheme.as_str()))
        .collect();
    if !missing.is_empty() {
        problems.push(format!(
            "missing partition(s) {} (a merge must hold all {count}: only a complete merge can establish the claim)",
            missing.join(", ")
        ));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(usage(format!("cannot merge: {}", problems.join("; "))))
    }
}

/// The partitions ran one configuration: seed, filters, attempts, and the
/// pin but for its device fields; the vectors and harness are these.
fn check_agreement(parts: &[Part], suite: &Suite, harness: &str) -> Result<(), MergeError> {
    let first = &parts[0];
    for p in parts {
        let mut moved = Vec::new();
        if p.seed != first.seed {
            moved.push(format!("seed ({} vs {})", p.seed, first.seed));
        }
        if (&p.only, &p.skip) != (&first.only, &first.skip) {
            moved.push(format!(
                "--only/--skip ({:?}/{:?} vs {:?}/{:?})",
                p.only, p.skip, first.only, first.skip
            ));
        }
        if p.attempts != first.attempts {
            moved.push(format!("--attempts ({} vs {})", p.attempts, first.attempts));
        }
        if !moved.is_empty() {
            return Err(usage(format!(
                "cannot merge: {} and {} were run differently: {}",
                p.name(),
                first.name(),
                moved.join(", ")
            )));
        }
    }
    let pins = parts
        .iter()
        .map(|p| {
            p.pin
                .clone()
                .ok_or_else(|| infra(format!("{}: the run recorded no pin", p.name())))
        })
        .collect::<Result<Vec<Pin>, _>>()?;
    for (p, pin) in parts.iter().zip(&pins) {
        let moved: Vec<String> = pin
            .differences(&pins[0])
            .into_iter()
            .filter(|f| !device_only(f, pin.fields.get(f), pins[0].fields.get(f)))
            .collect();
        if !moved.is_empty() {
            let show = |pin: &Pin, f: &str| {
                pin.fields
                    .get(f)
                    .map_or("(absent)".to_string(), Json::to_string)
            };
            let each: Vec<String> = moved
                .iter()
                .map(|f| format!("{f}: {} vs {}", show(pin, f), show(&pins[0], f)))
                .collect();
            return Err(usage(format!(
                "cannot merge: the pins differ: {} and {} ran another configuration or Provider build; these fields differ ({}): {}",
                p.name(),
                first.name(),
                moved.join(", "),
                each.join("; ")
            )));
        }
    }
    let vectors = pins[0].fields.get("vectors").and_then(Json::as_str);
    if vectors != Some(suite.fingerprint.as_str()) {
        return Err(usage(format!(
            "cannot merge: the partitions ran other vectors ({}) than these ({}): give --vectors the suite they ran",
            vectors.unwrap_or("unknown"),
            suite.fingerprint
        )));
    }
    if first.harness != harness {
        return Err(usage(format!(
            "cannot merge: the partitions ran {}; this is {harness}: merge with the harness that ran them",
            first.harness
        )));
    }
    Ok(())
}

/// Each partition reached its end and identified its target (else its
/// pin has no Provider to compare).
fn check_finished(parts: &[Part]) -> Result<(), MergeError> {
    for p in parts {
        if p.exit_code == Some(ExitCode::Interrupted.code()) {
            return Err(infra(format!(
                "{}: the run was interrupted before its end: continue it with `cetp resume {}`, then merge",
                p.name(),
                p.source
            )));
        }
        if p.package().is_none() {
            return Err(infra(format!(
                "{}: its target could not be identified, so it judged nothing: run that partition again",
                p.name()
            )));
        }
    }
    Ok(())
}

/// Each partition ran exactly its part, and the baseline given to the
/// merge accepts what the partitions accepted.
fn check_parts(
    parts: &[Part],
    suite: &Suite,
    baseline: Option<&Baseline>,
) -> Result<(), MergeError> {
    for p in parts {
        let cfg = RunConfig {
            only: p.only.clone(),
            skip: p.skip.clone(),
            partition: Some(p.partition),
            ..RunConfig::default()
        };
        let want: BTreeSet<&str> = selected(suite, &cfg)
            .iter()
            .map(|c| c.id.as_str())
            .collect();
        let mut ran = BTreeSet::new();
        for c in &p.cases {
            let lock = c.id == LOCK_CASE_ID && p.partition.runs_lock_case();
            if !ran.insert(c.id.as_str()) {
                return Err(infra(format!("{}: case {} finishes twice", p.name(), c.id)));
            }
            if !lock && !want.contains(c.id.as_str()) {
                return Err(usage(format!(
                    "cannot merge: {} ran {}, which is not in its part of the selection",
                    p.name(),
                    c.id
                )));
            }
            let accepted = baseline.and_then(|b| b.reason_for(&c.id)).is_some();
            if c.baseline.is_some() && !accepted {
                return Err(usage(format!(
                    "cannot merge: {} accepted the FAIL of {} as a known failure: give cetp merge the --baseline the partitions ran with",
                    p.name(),
                    c.id
                )));
            }
        }
        let lacking: Vec<&str> = want.difference(&ran).copied().collect();
        if !lacking.is_empty() {
            return Err(infra(format!(
                "{}: its part of the selection holds case(s) it did not finish: {}",
                p.name(),
                lacking.join(", ")
            )));
        }
        if let Some(c) = suite.checks.iter().find(|c| !p.checks.contains_key(&c.id)) {
            return Err(infra(format!("{}: no verdict of check {}", p.name(), c.id)));
        }
    }
    Ok(())
}

/// Checks that `parts` are one complete split run of `suite`, made by
/// `harness`, and puts them in partition order.
pub fn check(
    parts: &mut [Part],
    suite: &Suite,
    baseline: Option<&Baseline>,
    harness: &str,
) -> Result<(), MergeError> {
    check_split(parts)?;
    parts.sort_by_key(|p| p.partition.index);
    check_finished(parts)?;
    check_agreement(parts, suite, harness)?;
    check_parts(parts, suite, baseline)
}

/// Sets `RunFinished`'s duration (the longest partition's: the parts run
/// side by side) before the reporters see it.
struct Retimed {
    inner: Fanout,
    duration_ms: u64,
}

impl Reporter for Retimed {
    fn on_event(&mut self, event: &Event) {
        match event {
            Event::RunFinished {
                summary,
                claim,
                exit_code,
                ..
            } => self.inner.emit(Event::RunFinished {
                summary: summary.clone(),
                claim: claim.clone(),
                exit_code: *exit_code,
                duration_ms: self.duration_ms,
            }),
            e => self.inner.emit(e.clone()),
        }
    }

    fn finish(&mut self) -> std::io::Result<()> {
        for r in &mut self.inner.reporters {
            r.finish()?;
        }
        Ok(())
    }
}

/// One value if every partition has the same, else each partition's.
fn joined<T: PartialEq + Clone>(values: Vec<T>) -> Result<T, Vec<T>> {
    match values.first() {
        Some(f) if values.iter().all(|v| v == f) => Ok(f.clone()),
        _ => Err(values),
    }
}

/// The merged pin: the partitions', the device fields listing each
/// partition's value where they differ.
fn merged_pin(parts: &[Part]) -> Pin {
    let mut pin = parts[0].pin.clone().unwrap_or_default();
    for f in DEVICE_FIELDS {
        let values: Vec<Json> = parts
            .iter()
            .map(|p| {
                p.pin
                    .as_ref()
                    .and_then(|pin| pin.fields.get(f))
                    .cloned()
                    .unwrap_or(Json::Null)
            })
            .collect();
        if let Err(each) = joined(values) {
            pin.fields.insert(f.to_string(), Json::Array(each));
        }
    }
    pin
}

/// Emits the merged run's opening: `RunStarted`, `RunPartition` naming the
/// parts, the first partition's `TargetIdentified`, and the merged pin.
fn open_run(parts: &[Part], d: &mut Dispatcher<'_>) {
    let first = &parts[0];
    let target = joined(parts.iter().map(|p| p.target.clone()).collect())
        .unwrap_or_else(|each| each.join(", "));
    let config_hash =
        joined(parts.iter().map(|p| p.config_hash.clone()).collect()).unwrap_or_else(|each| {
            cetp_proto::canonical::canonical_hash(&json!(each)).unwrap_or_default()
        });
    let started_at_ms = parts.iter().map(|p| p.started_at_ms).min().unwrap_or(0);
    d.emit(Event::RunStarted {
        run_id: format!(
            "merge-{started_at_ms}-{}",
            &config_hash[..12.min(config_hash.len())]
        ),
        harness: first.harness.clone(),
        target,
        seed: first.seed,
        config_hash,
        started_at_ms,
        cases: parts.iter().map(|p| p.planned).sum(),
        only: first.only.clone(),
        skip: first.skip.clone(),
        attempts: first.attempts,
        rerun: first.rerun.clone(),
    });
    d.emit(Event::RunPartition {
        scheme: first.partition.scheme,
        count: first.partition.count,
        index: None,
        merged: parts
            .iter()
            .map(|p| MergedPart {
                index: p.partition.index,
                run_id: p.run_id.clone(),
                target: p.target.clone(),
                started_at_ms: p.started_at_ms,
                duration_ms: p.duration_ms,
            })
            .collect(),
    });
    // Each device once: a device an earlier part identified too differs
    // only in its clock. (Within a part sharded over several devices, each
    // is its own, however alike.)
    let key = |e: &Event| {
        let mut key = serde_json::to_value(e).unwrap_or_default();
        if let Some(h) = key.get_mut("hello").and_then(Json::as_object_mut) {
            h.remove("now_ms");
        }
        key
    };
    let mut seen: Vec<Json> = Vec::new();
    for p in parts {
        let keys: Vec<Json> = p.identified.iter().map(key).collect();
        for (e, k) in p.identified.iter().zip(&keys) {
            if !seen.contains(k) {
                d.emit(e.clone());
            }
        }
        seen.extend(keys);
    }
    let pin = merged_pin(parts);
    d.emit(Event::RunPinned {
        pin_hash: pin.hash(),
        fields: pin.fields,
    });
}

/// The cases of every partition in the order the unpartitioned run has
/// them (the suite's, `LOCK-001` last).
fn in_run_order<'p>(parts: &'p [Part], suite: &Suite) -> Vec<(CaseInfo, &'p PartCase)> {
    let by_id: BTreeMap<&str, &PartCase> = parts
        .iter()
        .flat_map(|p| p.cases.iter().map(|c| (c.id.as_str(), c)))
        .collect();
    let cfg = RunConfig {
        only: parts[0].only.clone(),
        skip: parts[0].skip.clone(),
        ..RunConfig::default()
    };
    let mut out: Vec<(CaseInfo, &PartCase)> = selected(suite, &cfg)
        .into_iter()
        .filter_map(|c| {
            by_id.get(c.id.as_str()).map(|pc| {
                let info = CaseInfo {
                    id: c.id.clone(),
                    title: c.title.clone(),
                    requirements: c.requirements.clone(),
                    needs: c.needs.clone(),
                    device: pc.device.clone(),
                };
                (info, *pc)
            })
        })
        .collect();
    if let Some(pc) = by_id.get(LOCK_CASE_ID) {
        let info = CaseInfo {
            device: pc.device.clone(),
            ..lock_case_info()
        };
        out.push((info, *pc));
    }
    out
}

/// Each check judged over every partition's answers, as a run judges it
/// over its own: the first finding (in run order) gives the verdict (a
/// SHOULD's is WARN) and the reason, the others are counted.
fn judge_checks(
    parts: &[Part],
    cases: &[(CaseInfo, &PartCase)],
    suite: &Suite,
    d: &mut Dispatcher<'_>,
) {
    let mut first: BTreeMap<&str, (&str, usize, &str, &str)> = BTreeMap::new();
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for (info, pc) in cases {
        for e in &pc.events {
            if let Event::CheckFinding {
                step,
                check,
                level,
                message,
                ..
            } = e
            {
                *counts.entry(check).or_default() += 1;
                first
                    .entry(check)
                    .or_insert((info.id.as_str(), *step, level, message));
            }
        }
    }
    for def in &suite.checks {
        let answers: usize = parts
            .iter()
            .filter_map(|p| p.checks.get(&def.id))
            .map(|c| c.0)
            .sum();
        let (verdict, reason) = match first.get(def.id.as_str()) {
            Some((case, step, level, message)) => {
                let more = counts.get(def.id.as_str()).copied().unwrap_or(1);
                let and_more = if more > 1 {
                    format!(" (and {} more)", more - 1)
                } else {
                    String::new()
                };
                let v = if *level == "SHOULD" {
                    Verdict::Warn
                } else {
                    Verdict::Fail
                };
                (v, format!("{case} step {step}: {message}{and_more}"))
            }
            None if answers == 0 => (Verdict::NotApplicable, "no answers were checked".into()),
            None => (Verdict::Pass, String::new()),
        };
        let cited: Vec<String> = if matches!(verdict, Verdict::Fail | Verdict::Warn) {
            let all: BTreeSet<&String> = parts
                .iter()
                .filter_map(|p| p.checks.get(&def.id))
                .flat_map(|c| c.1.iter())
                .collect();
            all.into_iter().cloned().collect()
        } else {
            Vec::new()
        };
        let outcome = crate::stats::CheckOutcome {
            id: def.id.clone(),
            requirements: def.requirements.clone(),
            cited,
            verdict,
            reason,
            baselined: false,
        };
        d.check(&def.title, answers, outcome);
    }
}

/// The Provider as the partitions identified it, for the claim.
fn env_of(part: &Part) -> Option<Env> {
    let Some(Event::TargetIdentified {
        package: Some(package),
        authority: Some(authority),
        manifest,
        declared_versions,
        ..
    }) = part.identified.first()
    else {
        return None;
    };
    Some(Env {
        package: package.clone(),
        authority: authority.clone(),
        manifest_kind: manifest.clone(),
        declared: Some(cetp_proto::discovery::Declared {
            authority: authority.clone(),
            versions: declared_versions.iter().copied().collect(),
            source: cetp_proto::discovery::VersionSource::Versions,
            legacy_version: None,
        }),
        manifest: None,
        identity_a: Json::Null,
    })
}

/// Emits the merged run of `parts` (checked by [`check`], in partition
/// order) to `out`'s reporters; `baseline` accepts known failures as in a
/// run. Returns what it gave and the fan-out to finish (write) the
/// reporters through.
pub fn merge(
    parts: &[Part],
    suite: &Suite,
    baseline: Option<&Baseline>,
    out: Fanout,
) -> (Finished, Fanout) {
    let duration_ms = parts.iter().map(|p| p.duration_ms).max().unwrap_or(0);
    let mut outer = Fanout::default();
    outer.reporters.push(Box::new(Retimed {
        inner: out,
        duration_ms,
    }));
    let mut d = Dispatcher::new(&mut outer, baseline);
    open_run(parts, &mut d);
    let cases = in_run_order(parts, suite);
    for (info, pc) in &cases {
        let started = Instant::now()
            .checked_sub(Duration::from_millis(pc.duration_ms))
            .unwrap_or_else(Instant::now);
        d.run_case_since(info.clone(), started, |out| {
            for e in &pc.events {
                out.emit(e.clone());
            }
            pc.executed.clone()
        });
    }
    for e in parts.iter().flat_map(|p| &p.lost) {
        d.emit(e.clone());
    }
    judge_checks(parts, &cases, suite, &mut d);
    d.stale_baseline(|id| {
        suite.cases.iter().any(|c| c.id == id) || suite.checks.iter().any(|c| c.id == id)
    });
    let env = env_of(&parts[0]);
    let caps: Option<BTreeSet<String>> = parts[0]
        .pin
        .as_ref()
        .and_then(|p| p.fields.get("capabilities"))
        .and_then(|c| serde_json::from_value(c.clone()).ok());
    let filtered = !parts[0].only.is_empty() || !parts[0].skip.is_empty();
    let claim = d
        .stats()
        .provider_claim(env.as_ref(), caps.as_ref(), filtered);
    let finished = d.finish(claim, false);
    (finished, outer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::partition::Scheme;

    fn tmp(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("cetp-merge-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// The stream of a partition `index`/`count` on `target`, on a device
    /// with build `device`, that ran nothing.
    fn stream(index: u32, count: u32, target: &str, device: &str) -> Vec<Event> {
        vec![
            Event::RunStarted {
                run_id: format!("run-{index}"),
                harness: "cetp 0".into(),
                target: target.into(),
                seed: 1,
                config_hash: "ab".into(),
                started_at_ms: 0,
                cases: 0,
                only: vec![],
                skip: vec![],
                attempts: 1,
                rerun: Vec::new(),
            },
            Event::RunPartition {
                scheme: Scheme::Slice,
                count,
                index: Some(index),
                merged: vec![],
            },
            Event::RunPinned {
                pin_hash: String::new(),
                fields: BTreeMap::from([
                    ("target".to_string(), json!(target)),
                    ("device".to_string(), json!(device)),
                    ("revision".to_string(), json!("tools-1")),
                ]),
            },
            Event::RunFinished {
                summary: Default::default(),
                claim: Default::default(),
                exit_code: 0,
                duration_ms: u64::from(index) * 10,
            },
        ]
    }

    fn part(index: u32, count: u32, target: &str, device: &str) -> Part {
        Part::read(&format!("d{index}"), stream(index, count, target, device)).unwrap()
    }

    #[test]
    fn event_files_are_read_within_bounds_and_bad_lines_named() {
        let dir = tmp("read");
        let path = dir.join("events.ndjson");
        let lines: Vec<String> = stream(1, 2, "sim", "x")
            .iter()
            .map(|e| serde_json::to_string(e).unwrap())
            .collect();
        std::fs::write(&path, lines.join("\n\n") + "\n").unwrap();
        assert_eq!(read_events(&path, 1 << 20).unwrap().len(), 4);
        let e = read_events(&path, 100).unwrap_err();
        assert_eq!(e.exit, ExitCode::Infra);
        assert!(e.message.contains("larger than"), "{}", e.message);
        // Deep nesting, a foreign event, bytes that are not UTF-8: errors.
        for bad in [
            format!("{}\n{}\n", lines[0], "[".repeat(100_000)),
            format!("{}\n{{\"event\": \"party\"}}\n", lines[0]),
            format!("{}\n\u{1}\u{2}\n", lines[0]),
        ] {
            std::fs::write(&path, bad).unwrap();
            let e = read_events(&path, 1 << 20).unwrap_err();
            assert!(
                e.message.contains("line 2 is not a cetp event"),
                "{}",
                e.message
            );
        }
        std::fs::write(&path, [0xff, 0xfe, b'\n']).unwrap();
        assert!(read_events(&path, 1 << 20).is_err());
        let e = read_events(&dir.join("none"), 1 << 20).unwrap_err();
        assert_eq!(e.exit, ExitCode::Usage);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_split_names_every_duplicate_and_missing_partition() {
        let parts = [
            part(1, 4, "sim", "x"),
            part(3, 4, "sim", "x"),
            part(3, 4, "sim", "x"),
        ];
        let e = check_split(&parts).unwrap_err();
        assert_eq!(e.exit, ExitCode::Usage);
        assert!(
            e.message
                .contains("duplicate partition slice:3/4 in d3 and d3")
                && e.message
                    .contains("missing partition(s) slice:2/4, slice:4/4"),
            "{}",
            e.message
        );
        assert!(check_split(&[part(2, 2, "sim", "x"), part(1, 2, "sim", "x")]).is_ok());
        // A stream cut before run_finished, or with no run_started.
        let mut cut = stream(1, 2, "sim", "x");
        cut.pop();
        let e = Part::read("d", cut).unwrap_err();
        assert!(e.message.contains("did not finish"), "{}", e.message);
        let e = Part::read("d", stream(1, 2, "sim", "x")[1..].to_vec()).unwrap_err();
        assert!(e.message.contains("run_started"), "{}", e.message);
        // A part that judged nothing (no Provider identified), or stopped
        // by Ctrl-C: an infrastructure error, with what to do.
        let e = check_finished(&[part(1, 1, "sim", "x")]).unwrap_err();
        assert_eq!(e.exit, ExitCode::Infra);
        assert!(
            e.message.contains("could not be identified"),
            "{}",
            e.message
        );
        let mut stopped = part(1, 1, "sim", "x");
        stopped.exit_code = Some(130);
        let e = check_finished(&[stopped]).unwrap_err();
        assert!(e.message.contains("cetp resume d1"), "{}", e.message);
    }

    #[test]
    fn partitions_on_several_devices_agree_but_simulated_providers_must_match() {
        let suite = Suite {
            cases: vec![],
            checks: vec![],
            rules: BTreeMap::new(),
            fingerprint: "v".into(),
        };
        let with_vectors = |mut p: Part| {
            if let Some(pin) = &mut p.pin {
                pin.fields.insert("vectors".into(), json!("v"));
            }
            p
        };
        // Two phones: their serials and builds differ, the Provider's does not.
        let phones = [
            with_vectors(part(1, 2, "adb:SERIAL1", "google/oriole:12")),
            with_vectors(part(2, 2, "adb:SERIAL2", "google/husky:14")),
        ];
        check_agreement(&phones, &suite, "cetp 0").unwrap();
        let pin = merged_pin(&phones);
        assert_eq!(pin.fields["target"], json!(["adb:SERIAL1", "adb:SERIAL2"]));
        assert_eq!(
            pin.fields["device"],
            json!(["google/oriole:12", "google/husky:14"])
        );
        assert_eq!(pin.fields["revision"], json!("tools-1"));
        // A simulated target's label names its Provider.
        let sims = [
            with_vectors(part(1, 2, "sim", "x")),
            with_vectors(part(2, 2, "sim:mutant=no_dedupe", "x")),
        ];
        let e = check_agreement(&sims, &suite, "cetp 0").unwrap_err();
        assert!(e.message.contains("differ (target)"), "{}", e.message);
        // The Provider's build moved.
        let mut other = with_vectors(part(2, 2, "adb:SERIAL2", "x"));
        if let Some(pin) = &mut other.pin {
            pin.fields.insert("revision".into(), json!("tools-2"));
        }
        let e = check_agreement(&[phones[0].clone(), other], &suite, "cetp 0").unwrap_err();
        assert!(
            e.message.contains("differ (revision)") && e.message.contains("\"tools-2\""),
            "{}",
            e.message
        );
        // Every build field is the Provider's, never the device's.
        for f in crate::pin::BUILD_FIELDS {
            assert!(!DEVICE_FIELDS.contains(f));
            assert!(!device_only(
                f,
                Some(&json!("adb:A")),
                Some(&json!("adb:B"))
            ));
        }
        // Another harness, other vectors.
        let e = check_agreement(&phones, &suite, "cetp 9").unwrap_err();
        assert!(e.message.contains("this is cetp 9"), "{}", e.message);
        let e = check_agreement(&[part(1, 2, "sim", "x")], &suite, "cetp 0").unwrap_err();
        assert!(e.message.contains("other vectors"), "{}", e.message);
    }
}
