//! Runs of several devices carrying one Provider build (`--target` given
//! more than once): sharded, each case on whichever device is free, or as
//! a matrix, every case on every device.
//!
//! Each device runs the same loop a one-device run does
//! ([`crate::runner`]'s `CaseExecutor::drive`), with its own stall breaker
//! and its own observer window (an observer sees the effects of its own
//! device only). In a sharded run the devices take cases from one shared
//! list, and their finished cases come to the one dispatcher over a
//! bounded channel, so the event stream, the statistics and the claim are
//! those of one run; a case keeps its index in the selection, so its
//! request ids and generated values are the ones a one-device run gives
//! it, whatever device runs it.
//!
//! A device that is lost (its probe no longer answers `hello`, or its
//! Provider stopped answering altogether) hands the cases it had not
//! finished back to the list, the one that found it lost included: that
//! case's result on the lost device is discarded, never a FAIL. With no
//! device left, the cases left are INFRA_ERROR.
//!
//! Devices are checked before anything runs: targets whose pins differ in
//! the Provider's build ([`crate::pin::BUILD_FIELDS`]: package, manifest,
//! revision, signing certificate, APK, negotiated capabilities) are
//! refused, naming the field, since one report and one claim cannot cover
//! two builds.

use crate::dispatch::{Dispatcher, Executed};
use crate::pin::{Negotiated, Pin};
use crate::runner::{
    case_info, config_hash_of, identify, probe_capabilities, run_rng, selected, CaseExecutor,
    RunConfig, RunOutcome, Sink, Source, Take,
};
use cetp_vectors::device::{HelloInfo, Target};
use cetp_vectors::event::{Event, Fanout, Verdict};
use cetp_vectors::interp::{CheckTally, Env};
use cetp_vectors::profile::Profile;
use cetp_vectors::suite::Suite;
use cetp_vectors::vector::Case;
use serde_json::json;
use std::collections::VecDeque;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

/// Finished cases in flight between the devices and the dispatcher.
const CHANNEL_BOUND: usize = 16;

/// One device of the run, identified and pinned.
pub struct Identified {
    /// Its `hello` answer.
    pub hello: Option<HelloInfo>,
    /// What was learnt of the Provider on it.
    pub env: Env,
    /// What negotiating with every capability gave, for the pin.
    pub negotiated: Option<Negotiated>,
    /// Its pin: the devices of one run must agree on the Provider build
    /// fields of it ([`crate::pin::BUILD_FIELDS`]).
    pub pin: Pin,
}

/// Why a run of several devices does not start.
#[derive(Debug)]
pub struct Refused(pub String);

/// Identifies and pins every target, and refuses targets whose Provider
/// builds differ (naming the fields and the devices), or that cannot be
/// identified. Nothing but `hello`, `discover`, `negotiate` and
/// `list_tools` reaches a device here.
pub fn identify_all(
    suite: &Suite,
    targets: &[Target],
    profile: &Profile,
    cfg: &RunConfig,
) -> Result<Vec<Identified>, Refused> {
    let probe_index = selected(suite, cfg).len();
    let mut all: Vec<Identified> = Vec::with_capacity(targets.len());
    for t in targets {
        let (hello, env) =
            identify(t, profile).map_err(|e| Refused(format!("{}: {e}", t.label)))?;
        let negotiated = probe_capabilities(t, &env, run_rng(cfg, probe_index, 0));
        let pin = crate::pin::pin(
            suite,
            t,
            profile,
            cfg,
            Some((&env, hello.as_ref())),
            negotiated.as_ref(),
        );
        all.push(Identified {
            hello,
            env,
            negotiated,
            pin,
        });
    }
    let first = &all[0].pin;
    for (k, other) in all.iter().enumerate().skip(1) {
        let differ = crate::pin::build_differences(first, &other.pin);
        if !differ.is_empty() {
            return Err(Refused(format!(
                "{} and {} do not carry the same Provider build: their pins differ in {} ({}); run each build on its own",
                targets[0].label,
                targets[k].label,
                differ.join(", "),
                shown(first, &other.pin, &differ),
            )));
        }
    }
    Ok(all)
}

/// What differs in `fields` between two pins, short, for a refusal: of
/// an object (the manifest), only its keys that differ.
fn shown(a: &Pin, b: &Pin, fields: &[String]) -> String {
    let short = |v: Option<&serde_json::Value>| -> String {
        let s = v.map_or("absent".into(), |v| v.to_string());
        s.chars().take(100).collect()
    };
    let mut out = Vec::new();
    for f in fields {
        let (x, y) = (a.fields.get(f), b.fields.get(f));
        match (x.and_then(|x| x.as_object()), y.and_then(|y| y.as_object())) {
            (Some(x), Some(y)) => {
                let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
                for k in keys.into_iter().filter(|k| x.get(*k) != y.get(*k)) {
                    out.push(format!(
                        "{f}.{k}: {} vs {}",
                        short(x.get(k)),
                        short(y.get(k))
                    ));
                }
            }
            _ => out.push(format!("{f}: {} vs {}", short(x), short(y))),
        }
    }
    out.join("; ")
}

/// The pin of a run of several devices: the build's fields, with the
/// device fields listing every device in the order given.
pub fn joined_pin(targets: &[Target], ids: &[Identified]) -> Pin {
    let mut fields = ids[0].pin.fields.clone();
    fields.insert(
        "target".into(),
        json!(targets.iter().map(|t| t.label.clone()).collect::<Vec<_>>()),
    );
    let devices: Vec<_> = ids
        .iter()
        .map(|i| i.hello.as_ref().map(|h| h.fingerprint.clone()))
        .collect();
    if devices.iter().any(Option::is_some) {
        fields.insert("device".into(), json!(devices));
    }
    Pin { fields }
}

/// The label of a run of several devices.
pub fn joined_label(targets: &[Target]) -> String {
    targets
        .iter()
        .map(|t| t.label.as_str())
        .collect::<Vec<_>>()
        .join(" + ")
}

/// The case list the devices of a sharded run share.
struct Board {
    queue: VecDeque<usize>,
    /// Cases taken and not yet finished or handed back.
    busy: usize,
    /// In a resumed run, the device that takes each case its journal says
    /// it took: such a case handed back by another device does not go back
    /// to the list.
    claimed: std::collections::BTreeMap<usize, usize>,
}

/// What a sharded run journals, or replays: per device, its journal (the
/// cases it takes are recorded there) and the cases it took before, in
/// order, which it takes again first.
#[derive(Default)]
pub struct Journaling {
    /// Per device, its journal (none when not journaling).
    pub journals: Vec<Option<std::sync::Arc<crate::journal::Journal>>>,
    /// Per device, the case ids it took before, in order.
    pub took: Vec<Vec<String>>,
}

struct Shared {
    board: Mutex<Board>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Board> {
        self.board.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A device's view of the shared list: a case it may take now, none now
/// (another device's case may still come back), or none left at all.
struct SharedSource<'s> {
    shared: &'s Shared,
    /// Cases this device took before the run was resumed, in order.
    again: VecDeque<usize>,
    journal: Option<std::sync::Arc<crate::journal::Journal>>,
    cases: &'s [&'s Case],
}

impl Source for SharedSource<'_> {
    fn take(&mut self, fits: &dyn Fn(usize) -> bool) -> Take {
        let mut b = self.shared.lock();
        // Replayed: the device asks what its journal answers in the order
        // it asked then, so it takes the same cases in the same order.
        if let Some(i) = self.again.pop_front() {
            b.busy += 1;
            return Take::Case(i);
        }
        if let Some(k) = b.queue.iter().position(|&i| fits(i)) {
            if let Some(i) = b.queue.remove(k) {
                b.busy += 1;
                if let Some(j) = &self.journal {
                    // Before the case's first exchange: a journal that
                    // cannot say which case comes is no journal; the case
                    // still runs (the resume then diverges, fail-closed).
                    let _ = j.record_take(&self.cases[i].id);
                }
                return Take::Case(i);
            }
        }
        if b.queue.is_empty() && b.busy == 0 {
            Take::Done
        } else {
            Take::NotNow
        }
    }
}

/// What a device sends the dispatcher.
enum Msg {
    Case {
        i: usize,
        device: usize,
        started: Instant,
        events: Vec<Event>,
        executed: Executed,
    },
    Lost {
        device: usize,
        reason: String,
        back: Vec<usize>,
    },
    Tally(CheckTally),
}

/// A device's sink: finished cases go to the dispatcher's thread.
struct ChannelSink<'s> {
    shared: &'s Shared,
    device: usize,
    tx: SyncSender<Msg>,
    /// Whether any other device is left to take this one's cases.
    others: bool,
}

impl<'c> Sink<'c> for ChannelSink<'_> {
    fn done(
        &mut self,
        _case: &'c Case,
        i: usize,
        started: Instant,
        events: Vec<Event>,
        e: Executed,
    ) {
        let mut b = self.shared.lock();
        b.busy = b.busy.saturating_sub(1);
        drop(b);
        // The dispatcher's thread ends only after every device: a send
        // fails only if it panicked, and then the run is lost anyway.
        let _ = self.tx.send(Msg::Case {
            i,
            device: self.device,
            started,
            events,
            executed: e,
        });
    }

    fn hands_back(&self) -> bool {
        self.others
    }

    fn hand_back(&mut self, back: &[usize], why: &str) {
        {
            let mut b = self.shared.lock();
            for &i in back.iter().rev() {
                if b.claimed.get(&i).is_some_and(|&k| k != self.device) {
                    continue;
                }
                b.queue.push_front(i);
            }
            b.busy = b.busy.saturating_sub(back.len());
        }
        let _ = self.tx.send(Msg::Lost {
            device: self.device,
            reason: why.to_string(),
            back: back.to_vec(),
        });
    }
}

/// The shared list of a run, and the cases each device takes again first
/// (a resumed run's: those its journal says it took).
fn board(
    cases: &[&Case],
    devices: usize,
    journaling: &Journaling,
) -> (Shared, Vec<VecDeque<usize>>) {
    let index = |id: &String| cases.iter().position(|c| &c.id == id);
    let again: Vec<VecDeque<usize>> = (0..devices)
        .map(|k| {
            journaling
                .took
                .get(k)
                .map(|t| t.iter().filter_map(index).collect())
                .unwrap_or_default()
        })
        .collect();
    let mut claimed = std::collections::BTreeMap::new();
    for (k, list) in again.iter().enumerate() {
        for &i in list {
            claimed.insert(i, k);
        }
    }
    let shared = Shared {
        board: Mutex::new(Board {
            queue: (0..cases.len())
                .filter(|i| !claimed.contains_key(i))
                .collect(),
            busy: 0,
            claimed,
        }),
    };
    (shared, again)
}

/// Runs the selected cases sharded over `targets` (identified by
/// [`identify_all`]) and emits one run's events to `out`.
pub fn run_sharded(
    suite: &Suite,
    targets: &[Target],
    ids: &[Identified],
    profile: &Profile,
    cfg: &RunConfig,
    journaling: &Journaling,
    out: &mut Fanout,
) -> RunOutcome {
    let started = Instant::now();
    let mut d = Dispatcher::new(out, cfg.baseline.as_ref());
    let cases = selected(suite, cfg);
    let label = joined_label(targets);
    let config_hash = config_hash_of(suite, &label, profile, cfg);
    let run_id = format!(
        "run-{}-{}",
        cfg.started_at_ms,
        &config_hash[..12.min(config_hash.len())]
    );
    d.emit(crate::runner::run_started(
        &run_id,
        &label,
        &config_hash,
        cases.len(),
        cfg,
    ));
    if let Some(p) = &cfg.partition {
        d.emit(p.event());
    }
    for id in ids {
        d.emit(crate::runner::identified_event(id.hello.as_ref(), &id.env));
    }
    let pin = joined_pin(targets, ids);
    d.emit(Event::RunPinned {
        pin_hash: pin.hash(),
        fields: pin.fields.clone(),
    });
    let interrupt = cfg.interrupt.clone().unwrap_or_default();
    let (shared, again) = board(&cases, targets.len(), journaling);
    let (tx, rx) = sync_channel::<Msg>(CHANNEL_BOUND);
    let mut tally = CheckTally::new(suite.rules.clone());
    let mut lost = vec![false; targets.len()];
    std::thread::scope(|scope| {
        for ((k, (target, id)), again) in targets.iter().zip(ids).enumerate().zip(again) {
            let tx = tx.clone();
            let (cases, shared, interrupt) = (&cases, &shared, interrupt.clone());
            let journal = journaling.journals.get(k).cloned().flatten();
            let others = targets.len() > 1;
            scope.spawn(move || {
                let exec = CaseExecutor {
                    target,
                    profile,
                    env: &id.env,
                    cfg,
                    stalls: cetp_vectors::stall::Stalls::new(),
                    deadline: cfg.run_timeout.map(|t| started + t),
                    interrupt,
                    wall_clock_untrusted: Default::default(),
                };
                let mut tally = CheckTally::new(suite.rules.clone());
                let mut sink = ChannelSink {
                    shared,
                    device: k,
                    tx: tx.clone(),
                    others,
                };
                let mut source = SharedSource {
                    shared,
                    again,
                    journal,
                    cases,
                };
                let _ = exec.drive(cases, &mut source, &mut tally, &mut sink);
                let _ = tx.send(Msg::Tally(tally));
            });
        }
        drop(tx);
        dispatch_all(&rx, &cases, targets, &mut d, &mut tally, &mut lost);
    });
    left_and_lock(&shared, &cases, targets, ids, cfg, &lost, &mut d);
    let run = crate::runner::RunIds {
        run_id,
        config_hash,
        pin,
    };
    crate::runner::conclude(
        suite,
        cfg,
        &cases,
        &tally,
        Some(&ids[0].env),
        ids[0].negotiated.as_ref(),
        run,
        &interrupt,
        d,
    )
}

/// After the devices: the cases no device was left to run (INFRA_ERROR),
/// then `LOCK-001` on the first device still there.
fn left_and_lock(
    shared: &Shared,
    cases: &[&Case],
    targets: &[Target],
    ids: &[Identified],
    cfg: &RunConfig,
    lost: &[bool],
    d: &mut Dispatcher<'_>,
) {
    // Every device lost: nobody is left to run the cases left.
    let left: Vec<usize> = shared.lock().queue.drain(..).collect();
    for i in left {
        let mut info = case_info(cases[i]);
        info.device = None;
        d.run_case(info, |_| {
            Executed::new(
                Verdict::InfraError,
                "every device of the run was lost before this case could run",
            )
        });
    }
    let live = lost.iter().position(|l| !l);
    if let (Some(lock), Some(k)) = (
        cfg.lock
            .as_ref()
            .filter(|_| crate::lock_target::selected(cfg)),
        live,
    ) {
        d.run_case(crate::lock_target::lock_case_info(), |_| {
            crate::lock_target::lock_executed(&targets[k], &ids[k].env, lock)
        });
    }
}

/// The dispatcher's side of a sharded run: each finished case reported as
/// it comes, each lost device said, each device's check tally merged.
fn dispatch_all(
    rx: &Receiver<Msg>,
    cases: &[&Case],
    targets: &[Target],
    d: &mut Dispatcher<'_>,
    tally: &mut CheckTally,
    lost: &mut [bool],
) {
    let order = |id: &str| cases.iter().position(|c| c.id == id);
    while let Ok(msg) = rx.recv() {
        match msg {
            Msg::Case {
                i,
                device,
                started,
                events,
                executed,
            } => {
                let mut info = case_info(cases[i]);
                info.device = Some(targets[device].label.clone());
                d.run_case_since(info, started, |out| {
                    for e in events {
                        out.emit(e);
                    }
                    executed
                });
            }
            Msg::Lost {
                device,
                reason,
                back,
            } => {
                lost[device] = true;
                d.emit(Event::DeviceLost {
                    device: targets[device].label.clone(),
                    reason,
                    handed_back: back.iter().map(|&i| cases[i].id.clone()).collect(),
                });
            }
            Msg::Tally(t) => tally.merge(t, &order),
        }
    }
}
