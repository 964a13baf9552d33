//! The Provider half of a run: identify and pin the target, then run the
//! selected cases through the [`crate::dispatch::Dispatcher`] (this module
//! is their executor), judge the checks over every answer, and state the §9
//! claim the run statistics ([`crate::stats`]) allow. Emits the event stream.

pub use crate::config::{wildcard, RunConfig};
use crate::dispatch::{AttemptFolder, CaseInfo, Dispatcher, Executed};
use crate::exit::ExitCode;
pub use crate::identify::identify;
use cetp_proto::envelope::Capability;
use cetp_vectors::device::{HelloInfo, Target};
use cetp_vectors::event::{Claim, Event, Fanout, Summary, Verdict};
use cetp_vectors::interp::{CaseRunner, CaseState, CheckTally, Env, Stop, DEFAULT_MAX_WAIT_MS};
use cetp_vectors::profile::Profile;
use cetp_vectors::suite::Suite;
use cetp_vectors::vector::{Case, Level, Role, Step};
use rand::SeedableRng;
use serde_json::json;
use std::collections::BTreeMap;
use std::collections::VecDeque;
use std::time::Instant;

pub use crate::stats::{CaseOutcome, CheckOutcome};

/// What a Provider run returns to its caller (the CLI), besides the events.
#[derive(Clone, Debug)]
pub struct RunOutcome {
    /// Unique id of the run.
    pub run_id: String,
    /// Hash of the run's configuration ([`config_hash`]).
    pub config_hash: String,
    /// What the verdicts depend on ([`crate::pin`]).
    pub pin: crate::pin::Pin,
    /// Every finished case.
    pub cases: Vec<CaseOutcome>,
    /// Every judged check.
    pub checks: Vec<CheckOutcome>,
    /// Baseline entries that matched no failure.
    pub stale_baseline: Vec<String>,
    /// Count per verdict.
    pub summary: Summary,
    /// The §9 claim the run allows.
    pub claim: Claim,
    /// The exit code the run ends with.
    pub exit: ExitCode,
    /// The run stopped before its end (Ctrl-C or `--run-timeout`): its
    /// journal is left open for `cetp resume`.
    pub interrupted: bool,
}

/// The cases of `suite` that `cfg`'s `--only` and `--skip` patterns select, in suite order.
pub fn selected<'s>(suite: &'s Suite, cfg: &RunConfig) -> Vec<&'s Case> {
    let cases: Vec<&Case> = suite
        .cases
        .iter()
        .filter(|c| c.role == Role::Provider)
        .filter(|c| cfg.only.is_empty() || cfg.only.iter().any(|p| wildcard(p, &c.id)))
        .filter(|c| !cfg.skip.iter().any(|p| wildcard(p, &c.id)))
        .collect();
    match &cfg.partition {
        Some(p) => p.apply(cases, |c| c.id.as_str()),
        None => cases,
    }
}

/// Hash of what the verdicts of a run depend on (harness, vectors, target,
/// profile, seed, selection): equal hashes mean comparable runs.
pub fn config_hash(suite: &Suite, target: &Target, profile: &Profile, cfg: &RunConfig) -> String {
    config_hash_of(suite, &target.label, profile, cfg)
}

/// [`config_hash`] of a target label (a run of several devices joins
/// theirs).
pub fn config_hash_of(suite: &Suite, label: &str, profile: &Profile, cfg: &RunConfig) -> String {
    let doc = serde_json::json!({
        "harness": cfg.harness_version,
        "vectors": suite.fingerprint,
        "target": label,
        "profile": format!("{profile:?}"),
        "seed": cfg.seed,
        "only": cfg.only,
        "skip": cfg.skip,
    });
    // Only where it differs from the default, so that the runs made before
    // --max-wait existed keep their hash.
    let mut doc = doc;
    if cfg.max_wait_ms() != DEFAULT_MAX_WAIT_MS {
        doc["max_wait_ms"] = json!(cfg.max_wait_ms());
    }
    cetp_proto::canonical::canonical_hash(&doc).unwrap_or_default()
}

/// Runs the suite against a target and emits every event to `out`: the
/// target identified and pinned, the cases through the dispatcher, then the
/// checks over every answer, the stale baseline entries, and the claim and
/// exit code the run statistics give.
pub fn run(
    suite: &Suite,
    target: &Target,
    profile: &Profile,
    cfg: &RunConfig,
    out: &mut Fanout,
) -> RunOutcome {
    let started = Instant::now();
    let mut d = Dispatcher::new(out, cfg.baseline.as_ref());
    let cases = selected(suite, cfg);
    let config_hash = config_hash(suite, target, profile, cfg);
    let run_id = format!(
        "run-{}-{}",
        cfg.started_at_ms,
        &config_hash[..12.min(config_hash.len())]
    );
    d.emit(run_started(
        &run_id,
        &target.label,
        &config_hash,
        cases.len(),
        cfg,
    ));
    if let Some(p) = &cfg.partition {
        d.emit(p.event());
    }
    let (env, hello_a) = identified(target, profile, &cases, &mut d);
    // The pin comes first, before any case: a run continued later
    // (`cetp resume`) is checked against it before anything is sent. Its
    // probe has its own stream of the seeded generator, so the same seed
    // and start give the same request ids here too.
    let negotiated = env
        .as_ref()
        .and_then(|env| probe_capabilities(target, env, run_rng(cfg, cases.len(), 0)));
    let pin = crate::pin::pin(
        suite,
        target,
        profile,
        cfg,
        env.as_ref().map(|e| (e, hello_a.as_ref())),
        negotiated.as_ref(),
    );
    d.emit(Event::RunPinned {
        pin_hash: pin.hash(),
        fields: pin.fields.clone(),
    });
    let mut tally = CheckTally::new(suite.rules.clone());
    let interrupt = cfg.interrupt.clone().unwrap_or_default();
    if let Some(env) = &env {
        let exec = CaseExecutor {
            target,
            profile,
            env,
            cfg,
            stalls: cetp_vectors::stall::Stalls::new(),
            deadline: cfg.run_timeout.map(|t| started + t),
            interrupt: interrupt.clone(),
            wall_clock_untrusted: Default::default(),
        };
        let movable = hello_a
            .as_ref()
            .is_some_and(|h| h.ops.iter().any(|o| o == "advance_clock"));
        let mut source = Pending(start_order(&cases, profile, movable));
        let mut sink = Direct(&mut d);
        // A device that has the run to itself hands nothing back.
        let _ = exec.drive(&cases, &mut source, &mut tally, &mut sink);
        if let Some(lock) = cfg
            .lock
            .as_ref()
            .filter(|_| crate::lock_target::selected(cfg))
        {
            d.run_case(crate::lock_target::lock_case_info(), |_| {
                crate::lock_target::lock_executed(target, env, lock)
            });
        }
    }
    let ids = RunIds {
        run_id,
        config_hash,
        pin,
    };
    let negotiated = env.as_ref().and(negotiated.as_ref());
    conclude(
        suite,
        cfg,
        &cases,
        &tally,
        env.as_ref(),
        negotiated,
        ids,
        &interrupt,
        d,
    )
}

/// What names a run in its outcome.
pub(crate) struct RunIds {
    pub(crate) run_id: String,
    pub(crate) config_hash: String,
    pub(crate) pin: crate::pin::Pin,
}

/// The end of a Provider run, on one device or several: the checks judged
/// over every answer, the stale baseline entries, the §9 claim the
/// statistics allow (none for a filtered run or a partition), and the
/// outcome.
#[allow(clippy::too_many_arguments)]
pub(crate) fn conclude(
    suite: &Suite,
    cfg: &RunConfig,
    cases: &[&Case],
    tally: &CheckTally,
    env: Option<&Env>,
    negotiated: Option<&crate::pin::Negotiated>,
    ids: RunIds,
    interrupt: &std::sync::atomic::AtomicBool,
    mut d: Dispatcher<'_>,
) -> RunOutcome {
    judge_checks(suite, tally, &mut d);
    d.stale_baseline_where(
        |id| suite.cases.iter().any(|c| c.id == id) || suite.checks.iter().any(|c| c.id == id),
        |id| crate::partition::judges_stale(cfg.partition, cases, suite, id),
    );
    let filtered = !cfg.only.is_empty() || !cfg.skip.is_empty();
    let claim = d.stats().provider_claim(
        env,
        negotiated.map(|n| &n.capabilities),
        filtered || cfg.partition.is_some(),
    );
    let claim = crate::partition::partial_claim(claim, cfg.partition, filtered, env.is_some());
    // A Ctrl-C that came after the last step cut nothing: the run ended.
    let finished = d.finish(claim, interrupt.load(std::sync::atomic::Ordering::SeqCst));
    RunOutcome {
        run_id: ids.run_id,
        config_hash: ids.config_hash,
        pin: ids.pin,
        interrupted: finished.stats.cut,
        cases: finished.stats.cases,
        checks: finished.stats.checks,
        stale_baseline: finished.stats.stale_baseline,
        summary: finished.summary,
        claim: finished.claim,
        exit: finished.exit,
    }
}

/// The `RunStarted` event of a run.
pub(crate) fn run_started(
    run_id: &str,
    label: &str,
    config_hash: &str,
    cases: usize,
    cfg: &RunConfig,
) -> Event {
    Event::RunStarted {
        run_id: run_id.to_string(),
        harness: cfg.harness_version.clone(),
        target: label.to_string(),
        seed: cfg.seed,
        config_hash: config_hash.to_string(),
        started_at_ms: cfg.started_at_ms,
        cases,
        only: cfg.only.clone(),
        skip: cfg.skip.clone(),
        attempts: cfg.attempts,
        rerun: cfg.rerun.clone(),
    }
}

/// The `TargetIdentified` event of an identified target.
pub(crate) fn identified_event(hello: Option<&HelloInfo>, env: &Env) -> Event {
    Event::TargetIdentified {
        hello: hello.cloned(),
        package: Some(env.package.clone()),
        authority: Some(env.authority.clone()),
        manifest: env.manifest_kind.clone(),
        declared_versions: env
            .declared
            .as_ref()
            .map(|d| d.versions.iter().copied().collect())
            .unwrap_or_default(),
    }
}

pub(crate) fn case_info(case: &Case) -> CaseInfo {
    CaseInfo {
        id: case.id.clone(),
        title: case.title.clone(),
        requirements: case.requirements.clone(),
        needs: case.needs.clone(),
        device: None,
    }
}

/// Identifies the target and says so (`TargetIdentified`); a target that
/// cannot be identified leaves every selected case INFRA_ERROR.
fn identified(
    target: &Target,
    profile: &Profile,
    cases: &[&Case],
    d: &mut Dispatcher<'_>,
) -> (Option<Env>, Option<HelloInfo>) {
    match identify(target, profile) {
        Ok((hello, env)) => {
            d.emit(identified_event(hello.as_ref(), &env));
            (Some(env), hello)
        }
        Err(reason) => {
            d.emit(Event::TargetIdentified {
                hello: None,
                package: None,
                authority: None,
                manifest: "unknown".into(),
                declared_versions: vec![],
            });
            d.stats_mut().unidentified = true;
            for c in cases {
                d.record_case(CaseOutcome {
                    id: c.id.clone(),
                    title: c.title.clone(),
                    requirements: c.requirements.clone(),
                    verdict: Verdict::InfraError,
                    reason: reason.clone(),
                    needs: c.needs.clone(),
                    baselined: false,
                    cited: Vec::new(),
                    unjudged: None,
                });
            }
            (None, None)
        }
    }
}

/// The Provider half's executor: runs a case's attempts against the target.
pub(crate) struct CaseExecutor<'r> {
    pub(crate) target: &'r Target,
    pub(crate) profile: &'r Profile,
    pub(crate) env: &'r Env,
    pub(crate) cfg: &'r RunConfig,
    pub(crate) stalls: cetp_vectors::stall::Stalls,
    pub(crate) deadline: Option<Instant>,
    pub(crate) interrupt: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Set once a case was judged again in real time after a wall-clock
    /// move: the Provider evidently times lifetimes by another clock, so no
    /// later case moves it (a case waiting in real time meanwhile would
    /// otherwise see its due time come early).
    pub(crate) wall_clock_untrusted: std::sync::atomic::AtomicBool,
}

impl CaseExecutor<'_> {
    fn real_time_only(&self) -> bool {
        self.wall_clock_untrusted
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// A case that does not pass may be attempted again (`attempts`); the
    /// [`AttemptFolder`] makes attempts that disagree FLAKY.
    fn attempts(
        &self,
        case: &Case,
        i: usize,
        tally: &mut CheckTally,
        out: &mut Fanout,
    ) -> Executed {
        let mut folder = AttemptFolder::default();
        let mut wall = WallClockRejudge::default();
        let mut attempt = 0;
        while attempt < self.cfg.attempts.max(1) {
            let rng = run_rng(self.cfg, i, wall.rng_attempt(attempt));
            // Straight to the reporters, so that the journal
            // (events.ndjson, flushed per event) holds each step, and
            // each dispatch record, before the next call goes out.
            let mut emit = |e: Event| out.emit(e);
            let mut runner =
                CaseRunner::new(self.target, self.profile, self.env, &mut emit, tally, rng)
                    .max_wait(self.cfg.max_wait_ms())
                    .guarded(&self.stalls, self.deadline, &self.interrupt);
            if wall.real_time_only || self.real_time_only() {
                runner = runner.real_time_only();
            }
            let result = runner.run(case);
            let cited = if result.is_err() {
                runner.cited.clone()
            } else {
                Vec::new()
            };
            let (waited, moved) = (runner.real_waited_ms(), runner.wall_clock_moved());
            let mut e = executed(case, result);
            e.cited = cited;
            let settled = wall.settle(e, moved, (waited, self.real_time_only()), self.target);
            if wall.real_time_only {
                self.wall_clock_untrusted
                    .store(true, std::sync::atomic::Ordering::SeqCst);
            }
            if let Some(e) = settled {
                attempt += 1;
                if folder.push(e) {
                    break;
                }
            }
        }
        folder.fold()
    }

    /// [`Self::attempts`] for a case that may park at a real-time wait: its
    /// events are kept, to go out together when it finishes (the device
    /// journal still records each exchange as it happens, which is what
    /// `cetp resume` needs). Runs until the case is done or parks again.
    fn attempts_parking<'c>(&self, mut p: Parked<'c>, tally: &mut CheckTally) -> Parked<'c> {
        let attempts = self.cfg.attempts.max(1);
        while p.attempt < attempts {
            let mut events = std::mem::take(&mut p.events);
            let mut emit = |e: Event| events.push(e);
            let resumed = p.state.take();
            let was_parked = resumed.is_some();
            let mut runner = match resumed {
                Some(state) => CaseRunner::resumed(
                    self.target,
                    self.profile,
                    self.env,
                    &mut emit,
                    tally,
                    state,
                ),
                None => {
                    let mut r = CaseRunner::new(
                        self.target,
                        self.profile,
                        self.env,
                        &mut emit,
                        tally,
                        run_rng(self.cfg, p.i, p.rng_attempt()),
                    )
                    .max_wait(self.cfg.max_wait_ms())
                    .parking();
                    if p.wall.real_time_only || self.real_time_only() {
                        r = r.real_time_only();
                    }
                    if p.group.is_some() {
                        r = r.guest();
                    }
                    r
                }
            }
            .guarded(&self.stalls, self.deadline, &self.interrupt);
            let result = if was_parked {
                runner.resume(p.case)
            } else {
                runner.start(p.case)
            };
            let result = match result {
                Ok(Some(due)) => {
                    p.due_ms = due;
                    p.state = Some(runner.into_state());
                    p.events = events;
                    return p;
                }
                Ok(None) => Ok(()),
                Err(Stop::Withdraw { reason, clean }) => {
                    drop(runner);
                    p.events = events;
                    p.withdrawn = Some((reason, clean));
                    return p;
                }
                Err(stop) => Err(stop),
            };
            let cited = if result.is_err() {
                runner.cited.clone()
            } else {
                Vec::new()
            };
            let (waited, moved) = (runner.real_waited_ms(), runner.wall_clock_moved());
            drop(runner);
            p.events = events;
            let mut e = executed(p.case, result);
            e.cited = cited;
            let settled = p
                .wall
                .settle(e, moved, (waited, self.real_time_only()), self.target);
            if p.wall.real_time_only {
                self.wall_clock_untrusted
                    .store(true, std::sync::atomic::Ordering::SeqCst);
            }
            let Some(e) = settled else {
                continue;
            };
            p.attempt += 1;
            if p.folder.push(e) {
                break;
            }
        }
        p.attempt = attempts;
        p
    }

    /// Runs cases from `source` until it has none left: the one loop of a
    /// device, whether it has the run to itself or shares it.
    ///
    /// Cases waiting in real time for a lifetime to run out (a device whose
    /// clock cannot move) park: the device goes on with other cases and
    /// comes back to each once its time is due, so a run costs about its
    /// longest wait, not their sum. The observer sees every caller's
    /// effects on its device: while a case waits between its snapshot and
    /// its judgement of effects, only cases that execute nothing start, or
    /// (with a counter that only grows) cases that expect no effect and
    /// join its window as one group, judged together ([`guest`]); the
    /// others keep their order and wait for it. Nothing parks where the
    /// clock moves, so such a run keeps the suite's order.
    ///
    /// Returns `Err` with the reason when the device is lost (only asked
    /// where another device can take its cases: [`Sink::hand_back`]); its
    /// unfinished cases have then been handed back.
    pub(crate) fn drive<'c>(
        &self,
        cases: &[&'c Case],
        source: &mut dyn Source,
        tally: &mut CheckTally,
        sink: &mut dyn Sink<'c>,
    ) -> Result<(), String> {
        let mut w = Waiting::default();
        let monotonic = monotonic_observer(self.profile);
        loop {
            self.resume_due(&mut w, tally, sink)?;
            let window = w.parked.iter().any(|p| p.window_open());
            // A case judged again alone starts only when no window is open.
            if !window {
                if let Some(p) = w.alone.pop_front() {
                    let p = self.attempts_parking(p, tally);
                    self.settle(p, &mut w, sink)?;
                    continue;
                }
            }
            let joinable = monotonic
                && w.parked
                    .iter()
                    .filter(|p| p.window_open())
                    .all(|p| !p.alone);
            let fits = |i: usize| {
                !window
                    || quiet(&cases[i].steps.iter().map(|s| &s.step).collect::<Vec<_>>())
                    || (joinable && guest(cases[i]))
            };
            match source.take(&fits) {
                Take::Case(i) => {
                    let case = cases[i];
                    let joins =
                        window && !quiet(&case.steps.iter().map(|s| &s.step).collect::<Vec<_>>());
                    if sink.streams() && !may_park(case) && !joins {
                        sink.stream(case_info(case), &mut |out| {
                            self.attempts(case, i, tally, out)
                        });
                    } else {
                        let mut p = Parked::new(case, i);
                        if joins {
                            p.group = Some(w.join());
                        }
                        let p = self.attempts_parking(p, tally);
                        self.settle(p, &mut w, sink)?;
                    }
                }
                Take::Done if w.parked.is_empty() && w.alone.is_empty() => return Ok(()),
                Take::NotNow if w.parked.is_empty() && w.alone.is_empty() => source.idle(),
                _ if w.parked.is_empty() => {}
                _ => self.sleep_to_next(&w.parked),
            }
        }
    }

    /// A case back from [`Self::attempts_parking`]: reported if it is done,
    /// else parked until its time. A case that did not pass on a device
    /// that shares the run is first asked whether its device is still
    /// there: a lost device hands it back, with every case parked on it.
    ///
    /// A case that ran inside another's observer window (a group) is held
    /// until every case of its group has finished: if each passed, each is
    /// reported; otherwise each is run again alone (see [`guest`]).
    fn settle<'c>(
        &self,
        p: Parked<'c>,
        w: &mut Waiting<'c>,
        sink: &mut dyn Sink<'c>,
    ) -> Result<(), String> {
        if p.state.is_some() {
            w.parked.push(p);
            return Ok(());
        }
        if let Some((why, clean)) = &p.withdrawn {
            // Its own judgement comes from a run alone. Its window up to
            // then saw no effect, or its group cannot be trusted either.
            if !clean {
                if let Some(g) = p.group {
                    w.tainted.insert(g);
                }
            }
            let note =
                format!("judged alone: it withdrew from another case's observer window ({why})");
            w.alone.push_back(p.alone_again(note));
            return Ok(());
        }
        let Some(g) = p.group else {
            return self.report(p, w, sink);
        };
        w.held.push(p);
        if w.parked.iter().any(|q| q.group == Some(g)) {
            return Ok(());
        }
        let (members, rest): (Vec<_>, Vec<_>) = w.held.drain(..).partition(|q| q.group == Some(g));
        w.held = rest;
        let mut members: Vec<(Parked<'c>, Executed)> =
            members.into_iter().map(Parked::finish).collect();
        members.sort_by_key(|(p, _)| p.i);
        if !w.tainted.contains(&g)
            && members
                .iter()
                .all(|(_, e)| matches!(e.verdict, Verdict::Pass | Verdict::NotApplicable))
        {
            for (mut p, e) in members {
                p.folded = Some(e);
                self.report(p, w, sink)?;
            }
            return Ok(());
        }
        let ids: Vec<&str> = members.iter().map(|(p, _)| p.case.id.as_str()).collect();
        let mut again = Vec::new();
        for (p, e) in &members {
            let beside: Vec<&str> = ids.iter().copied().filter(|id| *id != p.case.id).collect();
            again.push(p.alone_again(format!(
                "judged alone: run beside {} inside their observer windows it was {}, and a case of them did not pass, so none of them is judged on that run",
                beside.join(", "),
                e.verdict.as_str()
            )));
        }
        w.alone.extend(again);
        Ok(())
    }

    /// Reports a finished case. A case that did not pass on a device that
    /// shares the run is first asked whether its device is still there: a
    /// lost device hands it back, with every case waiting on it.
    fn report<'c>(
        &self,
        p: Parked<'c>,
        w: &mut Waiting<'c>,
        sink: &mut dyn Sink<'c>,
    ) -> Result<(), String> {
        let (p, mut e) = p.finish();
        if let Some(note) = &p.alone_note {
            e.reason = if e.reason.is_empty() {
                note.clone()
            } else {
                format!("{} ({note})", e.reason)
            };
        }
        if sink.hands_back() && !matches!(e.verdict, Verdict::Pass | Verdict::NotApplicable) {
            if let Some(why) = self.lost() {
                let mut back = vec![p.i];
                back.extend(w.drain_indices());
                sink.hand_back(&back, &why);
                return Err(why);
            }
        }
        sink.done(p.case, p.i, p.started, p.events, e);
        Ok(())
    }

    /// Why the device can no longer run cases, if it cannot: its probe
    /// does not answer `hello` (adb disconnected, the probe app died), or
    /// the stall breaker gave up on its Provider.
    fn lost(&self) -> Option<String> {
        if let Some(why) = self.stalls.provider_stalled() {
            return Some(why);
        }
        self.target
            .a
            .hello()
            .err()
            .map(|e| format!("the device no longer answers: {e}"))
    }

    /// Resumes the parked cases whose device time has come (all of them
    /// once the run is stopping: each is then cut at its next step),
    /// earliest first. The device's clock decides (read through the
    /// journal, so a resumed run takes the same decisions), not the host's.
    fn resume_due<'c>(
        &self,
        w: &mut Waiting<'c>,
        tally: &mut CheckTally,
        sink: &mut dyn Sink<'c>,
    ) -> Result<(), String> {
        while !w.parked.is_empty() {
            let stopping = self.stopping();
            let now = self.target.a.now_ms();
            let parked = &w.parked;
            let Some(k) = (0..parked.len())
                .filter(|&k| stopping || (parked[k].due_ms <= now && resumable(parked, k)))
                .min_by_key(|&k| (parked[k].due_ms, parked[k].i))
            else {
                return Ok(());
            };
            let p = w.parked.remove(k);
            let p = self.attempts_parking(p, tally);
            self.settle(p, w, sink)?;
        }
        Ok(())
    }

    /// Sleeps toward the earliest parked case that may resume, in slices so
    /// that Ctrl-C is heard.
    fn sleep_to_next(&self, parked: &[Parked<'_>]) {
        if self.stopping() {
            return;
        }
        let now = self.target.a.now_ms();
        let due = (0..parked.len())
            .filter(|&k| resumable(parked, k))
            .map(|k| parked[k].due_ms)
            .min()
            .unwrap_or(now);
        let left = u64::try_from(due.saturating_sub(now)).unwrap_or(0);
        self.target.a.sleep_ms(left.clamp(1, 1_000));
    }

    /// Ctrl-C or `--run-timeout`: no more waiting.
    fn stopping(&self) -> bool {
        self.interrupt.load(std::sync::atomic::Ordering::SeqCst)
            || self.deadline.is_some_and(|t| Instant::now() >= t)
    }
}

/// What a device's loop may take next.
pub(crate) enum Take {
    Case(usize),
    /// None now; one may come back (handed back by a lost device).
    NotNow,
    Done,
}

/// Where a device's loop takes its cases from: the run's own list, or the
/// list the devices of a run share.
pub(crate) trait Source {
    /// The first case left that `fits` (the observer window rule).
    fn take(&mut self, fits: &dyn Fn(usize) -> bool) -> Take;
    /// Waits a little for a case to come back, after [`Take::NotNow`]
    /// with nothing parked.
    fn idle(&mut self) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Where a device's loop puts the cases it finished.
pub(crate) trait Sink<'c> {
    /// Whether [`Self::stream`] may be used: a device that has the run to
    /// itself runs a case that cannot park straight through the
    /// dispatcher, its events sent as they come, so the journal
    /// (events.ndjson, flushed per event) holds each step.
    fn streams(&self) -> bool {
        false
    }
    fn stream(&mut self, _case: CaseInfo, _execute: &mut dyn FnMut(&mut Fanout) -> Executed) {}
    /// A finished case, its events held until now.
    fn done(&mut self, case: &'c Case, i: usize, started: Instant, events: Vec<Event>, e: Executed);
    /// Whether another device can take this one's cases.
    fn hands_back(&self) -> bool {
        false
    }
    /// The device is lost: cases `back` go to the devices left.
    fn hand_back(&mut self, _back: &[usize], _why: &str) {}
}

/// The cases of a one-device run, in the suite's order.
pub(crate) struct Pending(pub(crate) std::collections::VecDeque<usize>);

impl Source for Pending {
    fn take(&mut self, fits: &dyn Fn(usize) -> bool) -> Take {
        if self.0.is_empty() {
            return Take::Done;
        }
        match self.0.iter().position(|&i| fits(i)) {
            Some(k) => self.0.remove(k).map_or(Take::Done, Take::Case),
            None => Take::NotNow,
        }
    }
}

/// A one-device run's dispatcher as the sink of its device.
pub(crate) struct Direct<'d, 'o>(pub(crate) &'d mut Dispatcher<'o>);

impl<'c> Sink<'c> for Direct<'_, '_> {
    fn streams(&self) -> bool {
        true
    }

    fn stream(&mut self, case: CaseInfo, execute: &mut dyn FnMut(&mut Fanout) -> Executed) {
        self.0.run_case(case, execute);
    }

    fn done(
        &mut self,
        case: &'c Case,
        _i: usize,
        started: Instant,
        events: Vec<Event>,
        e: Executed,
    ) {
        self.0.run_case_since(case_info(case), started, |out| {
            for ev in events {
                out.emit(ev);
            }
            e
        });
    }
}

/// Whether parked case `k` may go on now: its steps left execute nothing,
/// or no other parked case waits between a snapshot and its judgement
/// (the earliest due of those always may, so the run never stalls).
fn resumable(parked: &[Parked<'_>], k: usize) -> bool {
    let order = |p: &Parked<'_>| (p.due_ms, p.i);
    let me = &parked[k];
    let together = |p: &Parked<'_>| p.group.is_some() && p.group == me.group;
    me.rest_quiet()
        || !parked.iter().enumerate().any(|(j, p)| {
            j != k && p.window_open() && !together(p) && (!me.window_open() || order(p) < order(me))
        })
}

/// A case of the run that may wait in real time, and where it is: its
/// attempts so far, the interpreter state of the attempt parked at a wait
/// (`state`), and the events it emitted, held until it finishes.
struct Parked<'c> {
    case: &'c Case,
    i: usize,
    started: Instant,
    folder: AttemptFolder,
    attempt: u32,
    state: Option<CaseState>,
    events: Vec<Event>,
    /// The device time the parked attempt waits for.
    due_ms: i64,
    /// Whether an attempt after a wall-clock move is judged again.
    wall: WallClockRejudge,
    /// The cases run inside each other's observer windows, judged together.
    group: Option<usize>,
    /// Run again alone after its group did not pass: no case joins its
    /// window, and its random draws are fresh.
    alone: bool,
    /// Why it was run again alone, for its reason.
    alone_note: Option<String>,
    /// Its verdict, once its attempts are folded.
    folded: Option<Executed>,
    /// A guest that withdrew from the window it ran in, why, and whether
    /// its window had seen no effect until then.
    withdrawn: Option<(String, bool)>,
}

impl<'c> Parked<'c> {
    /// The steps after the one it waits at.
    fn rest(&self) -> Vec<&'c Step> {
        let at = self.state.as_ref().map_or(0, CaseState::step);
        self.case.steps.iter().skip(at).map(|s| &s.step).collect()
    }

    /// Whether it waits between an observer snapshot and its judgement of
    /// effects: another caller's effect then would be charged to it.
    fn window_open(&self) -> bool {
        let at = self.state.as_ref().map_or(0, CaseState::step);
        let before = self.case.steps.iter().take(at).map(|s| &s.step);
        let observed = before.into_iter().any(|s| {
            let mut found = false;
            visit(s, &mut |s| found |= matches!(s, Step::Observe { .. }));
            found
        });
        observed
            && self.rest().into_iter().any(|s| {
                let mut found = false;
                visit(s, &mut |s| {
                    found |= matches!(
                        s,
                        Step::ExpectEffects { .. } | Step::CancelConsistent { .. }
                    )
                });
                found
            })
    }

    /// Whether its steps left execute nothing.
    fn rest_quiet(&self) -> bool {
        quiet(&self.rest())
    }

    fn new(case: &'c Case, i: usize) -> Self {
        Parked {
            case,
            i,
            started: Instant::now(),
            folder: AttemptFolder::default(),
            attempt: 0,
            state: None,
            events: Vec::new(),
            due_ms: 0,
            wall: WallClockRejudge::default(),
            group: None,
            alone: false,
            alone_note: None,
            folded: None,
            withdrawn: None,
        }
    }

    /// The case again from its start, alone, its earlier events kept for
    /// the trace.
    fn alone_again(&self, note: String) -> Self {
        Parked {
            events: self.events.clone(),
            alone: true,
            alone_note: Some(note),
            ..Parked::new(self.case, self.i)
        }
    }

    /// Its verdict, its attempts folded (once).
    fn finish(mut self) -> (Self, Executed) {
        let e = match self.folded.take() {
            Some(e) => e,
            None => std::mem::take(&mut self.folder).fold(),
        };
        (self, e)
    }

    /// The attempt number its random draws come from: an attempt judged
    /// again (after a wall-clock move, or alone) draws afresh, or its
    /// request ids would be the first attempt's, answered from the
    /// Provider's dedupe records instead of judged.
    fn rng_attempt(&self) -> u32 {
        self.wall.rng_attempt(self.attempt) | if self.alone { 1 << 30 } else { 0 }
    }
}

/// The cases of a device's loop that are not done: parked at a wait, held
/// until their group has finished, or waiting to be run again alone.
#[derive(Default)]
struct Waiting<'c> {
    parked: Vec<Parked<'c>>,
    held: Vec<Parked<'c>>,
    alone: std::collections::VecDeque<Parked<'c>>,
    next_group: usize,
    /// Groups a guest left with an effect seen in its window: none of
    /// their cases is judged on that run.
    tainted: std::collections::BTreeSet<usize>,
}

impl Waiting<'_> {
    /// A case joins the observer windows open now: it and their cases form
    /// one group (merging the groups they were in). Returns the group.
    fn join(&mut self) -> usize {
        let old: Vec<usize> = self.parked.iter().filter_map(|p| p.group).collect();
        let g = self.next_group;
        self.next_group += 1;
        if old.iter().any(|h| self.tainted.contains(h)) {
            self.tainted.insert(g);
        }
        for p in self.parked.iter_mut().chain(self.held.iter_mut()) {
            if p.window_open() || p.group.is_some_and(|h| old.contains(&h)) {
                p.group = Some(g);
            }
        }
        g
    }

    /// Every case not done, for a lost device to hand back.
    fn drain_indices(&mut self) -> Vec<usize> {
        let mut back: Vec<usize> = self.parked.drain(..).map(|p| p.i).collect();
        back.extend(self.held.drain(..).map(|p| p.i));
        back.extend(self.alone.drain(..).map(|p| p.i));
        back
    }
}

/// Each step and the steps nested in it.
fn visit(step: &Step, f: &mut dyn FnMut(&Step)) {
    f(step);
    match step {
        Step::Concurrent { steps }
        | Step::IfAnswer { steps, .. }
        | Step::EachTool { steps, .. } => {
            for s in steps {
                visit(s, f);
            }
        }
        _ => {}
    }
}

/// Whether steps execute nothing that could change the observer's value:
/// no `execute_tool` (v2 or v1), no tool loop, no restart.
fn quiet(steps: &[&Step]) -> bool {
    let mut loud = false;
    for s in steps {
        visit(s, &mut |s| {
            loud |= match s {
                Step::Call {
                    method, v1, tool, ..
                } => method == "execute_tool" || *v1 || tool.is_some(),
                Step::EachTool { .. } | Step::Restart | Step::Resolve { .. } => true,
                _ => false,
            }
        });
    }
    !loud
}

/// Whether the observer's value only grows (a counter of committed
/// effects, `counts = "effects"`): no effect can then hide another, and a
/// window that saw no change saw no effect at all.
fn monotonic_observer(profile: &Profile) -> bool {
    profile
        .observer
        .as_ref()
        .is_some_and(|o| o.counts == cetp_vectors::profile::Counts::Effects)
}

/// Whether a case may start while other cases wait inside their observer
/// windows (a phone's real-time waits, which would otherwise run one after
/// another): its own window expects no effect (every `expect_effects` a
/// delta of 0, no `cancel_consistent`), and it executes nothing outside
/// that window. With a counter that only grows, a run of such cases beside
/// the windows they joined is trusted only when every case of the group
/// passes: the guest's window then saw no effect at all, so nothing it did
/// reached another's window, and each judged only its own. Any other
/// outcome proves nothing about which case moved the counter, and every
/// case of the group is run again alone.
fn guest(case: &Case) -> bool {
    let steps: Vec<&Step> = case.steps.iter().map(|s| &s.step).collect();
    let has = |s: &Step, f: &dyn Fn(&Step) -> bool| {
        let mut found = false;
        visit(s, &mut |s| found |= f(s));
        found
    };
    let judges = |s: &Step| {
        matches!(
            s,
            Step::ExpectEffects { .. } | Step::CancelConsistent { .. }
        )
    };
    let Some(first) = steps
        .iter()
        .position(|s| has(s, &|s| matches!(s, Step::Observe { .. })))
    else {
        return false;
    };
    let Some(last) = steps.iter().rposition(|s| has(s, &judges)) else {
        return false;
    };
    let nothing_expected = steps.iter().all(|s| {
        !has(s, &|s| {
            matches!(s, Step::CancelConsistent { .. })
                || matches!(s, Step::ExpectEffects { delta, .. } if *delta != 0)
        })
    });
    first < last && nothing_expected && quiet(&steps[..first]) && quiet(&steps[last + 1..])
}

/// The order a device takes the cases in: the suite's, except on a device
/// whose clock cannot move, with an observer counter that only grows. There
/// the cases that wait in real time start first, so that their waits
/// overlap: those without an observer window (nothing keeps others out
/// while they wait), then those that wait inside a window and expect an
/// effect there, so that the cases that expect none can join their windows
/// (see [`guest`]) instead of waiting for them to end.
fn start_order(cases: &[&Case], profile: &Profile, movable_clock: bool) -> VecDeque<usize> {
    let all = 0..cases.len();
    if movable_clock || !monotonic_observer(profile) {
        return all.collect();
    }
    let rank = |i: &usize| {
        let c = cases[*i];
        let mut observes = false;
        for s in &c.steps {
            visit(&s.step, &mut |s| {
                observes |= matches!(s, Step::Observe { .. })
            });
        }
        match (may_park(c), observes, guest(c)) {
            (true, false, _) => 0,
            (true, true, false) => 1,
            _ => 2,
        }
    };
    // Among the windows, the longest fixed-clock age first: a short one
    // that started first would hold the long one back for its guests'
    // waits.
    let longest_age = |i: &usize| {
        cases[*i]
            .steps
            .iter()
            .filter_map(|s| match &s.step {
                Step::Age {
                    fixed_clock_wait_ms,
                    ..
                } => Some(*fixed_clock_wait_ms),
                _ => None,
            })
            .max()
            .unwrap_or(0)
    };
    let mut order: Vec<usize> = all.collect();
    // Stable: the suite's order within each rank.
    order.sort_by_key(|i| {
        let r = rank(i);
        (r, if r == 1 { u64::MAX - longest_age(i) } else { 0 })
    });
    order.into()
}

/// Whether a case has a top-level step that may wait in real time for
/// device time (on a device whose clock cannot move): only such a step
/// parks its case.
fn may_park(case: &Case) -> bool {
    case.steps
        .iter()
        .any(|s| matches!(s.step, Step::AdvanceClock { .. } | Step::Age { .. }))
}

/// Says in the reason that device time was waited for in real time (the
/// device's clock could not be moved); where the clock was moved, the
/// trace's `advance_clock` steps say so and the reason is unchanged.
/// A case that did not pass after the device's wall clock alone was set
/// forward (`clock=move` on a phone) proves nothing: the Provider may time
/// its lifetimes by the elapsed clock (`elapsedRealtime`), which Android
/// leaves to the app and which setting the clock does not move. Such an
/// attempt is judged again in real time, the wall clock set back first,
/// and that verdict stands; a PASS after the move stands as it is.
#[derive(Default)]
struct WallClockRejudge {
    /// The next attempt waits in real time.
    real_time_only: bool,
    /// What the attempt after the move ended with, for the reason.
    first: Option<String>,
}

impl WallClockRejudge {
    /// The attempt number the case's random draws come from: the attempt
    /// judged again draws afresh, or its request ids would be the moved
    /// attempt's, and the Provider would answer them from its dedupe
    /// records instead of judging them.
    fn rng_attempt(&self, attempt: u32) -> u32 {
        if self.real_time_only {
            attempt | 1 << 31
        } else {
            attempt
        }
    }

    /// The attempt to record, or `None` when it is to be run again in
    /// real time (not counted as an attempt).
    ///
    /// `waited`: the real time the attempt waited, and whether the run had
    /// stopped moving the clock because an earlier case's moves proved
    /// nothing.
    fn settle(
        &mut self,
        mut e: Executed,
        moved: bool,
        (waited_ms, untrusted): (u64, bool),
        target: &Target,
    ) -> Option<Executed> {
        let charged = matches!(e.verdict, Verdict::Fail | Verdict::Warn);
        if moved && charged && !self.real_time_only {
            self.real_time_only = true;
            self.first = Some(format!("{}: {}", e.verdict.as_str(), e.reason));
            if let Err(err) = restore_clock(target) {
                // Waits reckoned on a wall clock left ahead of the
                // Provider's would be too short: judge nothing.
                return Some(Executed::new(
                    Verdict::InfraError,
                    format!("the device's wall clock, set forward through adb, could not be set back before judging the case again in real time: {err}"),
                ));
            }
            return None;
        }
        let note = match (&self.first, moved) {
            (Some(first), _) if e.unjudged.is_none() && e.verdict != Verdict::NotApplicable => format!(
                "judged again by waiting {} s in real time: with the wall clock set forward through adb it was {first}, which proves nothing where the Provider times lifetimes by the elapsed clock",
                waited_ms.div_ceil(1000)
            ),
            (Some(first), _) => format!(
                "with the wall clock set forward through adb it was {first}, which proves nothing where the Provider times lifetimes by the elapsed clock; judged again in real time"
            ),
            (None, true) => "judged with the device's wall clock set forward through adb".into(),
            (None, false) if untrusted && waited_ms > 0 && e.unjudged.is_none() && e.verdict != Verdict::NotApplicable => format!(
                "judged by waiting {} s in real time: an earlier case showed that setting the wall clock through adb does not age this Provider's lifetimes, so the run stopped moving it",
                waited_ms.div_ceil(1000)
            ),
            (None, false) => {
                noted_wait(&mut e, waited_ms);
                return Some(e);
            }
        };
        e.reason = if e.reason.is_empty() {
            note
        } else {
            format!("{} ({note})", e.reason)
        };
        Some(e)
    }
}

/// Sets back a wall clock the harness moved, and resynchronises the other
/// identity's view of it.
fn restore_clock(target: &Target) -> Result<(), String> {
    target.a.restore_clock().map_err(|e| e.to_string())?;
    if let Some(b) = &target.b {
        b.resync_clock().map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn noted_wait(e: &mut Executed, waited_ms: u64) {
    if waited_ms == 0 || e.unjudged.is_some() || e.verdict == Verdict::NotApplicable {
        return;
    }
    let note = format!(
        "judged by waiting {} s in real time (the device's clock cannot be moved)",
        waited_ms.div_ceil(1000)
    );
    e.reason = if e.reason.is_empty() {
        note
    } else {
        format!("{} ({note})", e.reason)
    };
}

/// What one attempt's stop means: a SHOULD case fails as WARN; a stop the
/// setup caused is NOT_APPLICABLE naming what it needs.
fn executed(case: &Case, result: Result<(), Stop>) -> Executed {
    match result {
        Ok(()) => Executed::new(Verdict::Pass, ""),
        Err(Stop::Fail(r)) => Executed::new(
            if case.level == Level::Should {
                Verdict::Warn
            } else {
                Verdict::Fail
            },
            r,
        ),
        Err(Stop::NotApplicable(r)) => Executed::new(Verdict::NotApplicable, r),
        Err(Stop::Setup { needs, reason }) => Executed {
            unjudged: Some(needs.clone()),
            ..Executed::new(
                Verdict::NotApplicable,
                format!("not judged: {reason} (needs {needs})"),
            )
        },
        Err(Stop::Infra(r)) => Executed::new(Verdict::InfraError, r),
        Err(Stop::Cut(r)) => Executed {
            cut: true,
            ..Executed::new(Verdict::InfraError, r)
        },
        // Only a guest withdraws, and the executor runs it again alone
        // before anything is reported.
        Err(Stop::Withdraw { reason, .. }) => Executed::new(Verdict::InfraError, reason),
    }
}

/// Checks: judged over every answer of the run.
fn judge_checks(suite: &Suite, tally: &CheckTally, d: &mut Dispatcher<'_>) {
    for def in &suite.checks {
        let (verdict, reason) = match tally.first.get(def.id.as_str()) {
            Some((case, step, f)) => {
                let v = if f.level == Level::Should {
                    Verdict::Warn
                } else {
                    Verdict::Fail
                };
                let more = tally.counts.get(def.id.as_str()).copied().unwrap_or(1);
                let and_more = if more > 1 {
                    format!(" (and {} more)", more - 1)
                } else {
                    String::new()
                };
                (v, format!("{case} step {step}: {}{and_more}", f.message))
            }
            None if tally.answers == 0 => {
                (Verdict::NotApplicable, "no answers were checked".into())
            }
            None => (Verdict::Pass, String::new()),
        };
        let cited: Vec<String> = if matches!(verdict, Verdict::Fail | Verdict::Warn) {
            tally
                .cited
                .get(def.id.as_str())
                .map(|s| s.iter().cloned().collect())
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        let outcome = CheckOutcome {
            id: def.id.clone(),
            requirements: def.requirements.clone(),
            cited,
            verdict,
            reason,
            baselined: false,
        };
        d.check(&def.title, tally.answers, outcome);
    }
}

/// The pin a run of `suite` against `target` would have now: the target
/// identified and probed as a run does first (`cetp resume` compares it with
/// the journaled run's before anything is replayed).
pub fn pin_of(
    suite: &Suite,
    target: &Target,
    profile: &Profile,
    cfg: &RunConfig,
) -> Result<crate::pin::Pin, String> {
    let cases = selected(suite, cfg);
    let (hello, env) = identify(target, profile)?;
    let negotiated = probe_capabilities(target, &env, run_rng(cfg, cases.len(), 0));
    Ok(crate::pin::pin(
        suite,
        target,
        profile,
        cfg,
        Some((&env, hello.as_ref())),
        negotiated.as_ref(),
    ))
}

/// The generator of the ids and values of case `i`'s attempt `attempt`.
/// The run's start time is mixed in so two runs against one device never
/// reuse a request id: a Provider rightly answers a reused id from its
/// de-duplication record for a day (§6).
pub(crate) fn run_rng(cfg: &RunConfig, i: usize, attempt: u32) -> rand_chacha::ChaCha8Rng {
    rand_chacha::ChaCha8Rng::seed_from_u64(
        cfg.seed
            ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
            ^ u64::from(attempt)
            ^ (cfg.started_at_ms as u64).wrapping_mul(0xD1B5_4A32_D192_ED03),
    )
}

/// What the target negotiates when offered every capability, and the tool
/// list's revision in that session (for the capability claim and the pin).
pub(crate) fn probe_capabilities(
    target: &Target,
    env: &Env,
    mut rng: rand_chacha::ChaCha8Rng,
) -> Option<crate::pin::Negotiated> {
    if !env.declares_v2() {
        return None;
    }
    let offer: Vec<String> = Capability::ALL
        .iter()
        .map(|c| c.as_str().to_string())
        .collect();
    let extras = cetp_proto::envelope::NegotiateRequest {
        consumer_versions: vec![2, 1],
        consumer_capabilities: offer,
    }
    .to_bundle();
    let call = |method: &str, extras: &cetp_proto::Bundle| match target.a.call(
        &env.authority,
        method,
        None,
        Some(extras),
        10_000,
    ) {
        Ok(cetp_proto::device::CallAnswer::Result(Some(b))) => b.get_json("data").ok(),
        _ => None,
    };
    let data = call("negotiate", &extras)?;
    let capabilities = data
        .get("capabilities")?
        .as_array()?
        .iter()
        .filter_map(|c| c.as_str().map(str::to_string))
        .collect();
    let version = data
        .get("selected_version")
        .and_then(serde_json::Value::as_i64);
    let revision = data
        .get("session_token")
        .and_then(serde_json::Value::as_str)
        .and_then(|token| {
            let list = cetp_proto::envelope::V2Request::ListTools(cetp_proto::envelope::Common {
                session_token: token.to_string(),
                request_id: cetp_vectors::interp::seeded_uuid(&mut rng),
                deadline_at_ms: target.a.now_ms().saturating_add(10_000),
            });
            call("list_tools", &list.to_bundle())
        })
        .and_then(|d| {
            d.get("revision")
                .and_then(serde_json::Value::as_str)
                .map(str::to_string)
        });
    Some(crate::pin::Negotiated {
        version,
        capabilities,
        revision,
    })
}

/// Requirement ids enforced by the selected cases and checks.
pub fn requirement_index(suite: &Suite) -> BTreeMap<String, Vec<String>> {
    let mut idx: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for c in &suite.cases {
        for r in &c.requirements {
            idx.entry(r.clone()).or_default().push(c.id.clone());
        }
    }
    for c in &suite.checks {
        for r in &c.requirements {
            idx.entry(r.clone()).or_default().push(c.id.clone());
        }
    }
    idx
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The case `id` of the repository's vectors, parked after the step
    /// that waits (its first `advance_clock` or `age`), due at `due_ms`.
    fn parked<'c>(suite: &'c Suite, id: &str, due_ms: i64) -> Parked<'c> {
        let case = suite.cases.iter().find(|c| c.id == id).unwrap();
        let at = case
            .steps
            .iter()
            .position(|s| matches!(s.step, Step::AdvanceClock { .. } | Step::Age { .. }))
            .unwrap();
        let mut p = Parked::new(case, 0);
        p.state = Some(CaseState::parked_at(at + 1));
        p.due_ms = due_ms;
        p.i = suite.cases.iter().position(|c| c.id == id).unwrap();
        p
    }

    #[test]
    fn a_case_waiting_inside_an_observer_window_keeps_other_effects_out() {
        let suite = Suite::load(&cetp_vectors::suite::default_vectors_dir()).unwrap();
        let steps = |id: &str| -> Vec<&Step> {
            let c = suite.cases.iter().find(|c| c.id == id).unwrap();
            c.steps.iter().map(|s| &s.step).collect()
        };
        // Negotiation and list_tools execute nothing; a tool call does.
        assert!(quiet(&steps("BIND-005")));
        assert!(!quiet(&steps("CONF-010")));
        assert!(!quiet(&steps("IDEM-001")));
        assert!(may_park(
            suite.cases.iter().find(|c| c.id == "BIND-005").unwrap()
        ));

        // BIND-005 waits with no snapshot open and executes nothing after;
        // CONF-010 and IDEM-008 wait between `before` and their judgement
        // of effects.
        let bind = parked(&suite, "BIND-005", 10);
        assert!(!bind.window_open() && bind.rest_quiet());
        let conf = parked(&suite, "CONF-010", 20);
        assert!(conf.window_open() && !conf.rest_quiet());
        let idem = parked(&suite, "IDEM-008", 30);
        assert!(idem.window_open());
        let async8 = parked(&suite, "ASYNC-008", 5);
        assert!(!async8.window_open());

        // Alone, each may go on when due.
        assert!(resumable(&[parked(&suite, "CONF-010", 20)], 0));
        // A quiet rest goes on whatever is open.
        let set = [conf, bind];
        assert!(resumable(&set, 1));
        let [conf, bind] = set;
        // Two open windows: only the earliest goes on (never a stall), the
        // other's effects wait for it.
        let set = [conf, idem, bind];
        assert!(resumable(&set, 0));
        assert!(!resumable(&set, 1));
        assert!(resumable(&set, 2));
    }

    #[test]
    fn a_case_expecting_no_effect_may_join_a_window_and_the_long_windows_start_first() {
        let suite = Suite::load(&cetp_vectors::suite::default_vectors_dir()).unwrap();
        let case = |id: &str| suite.cases.iter().find(|c| c.id == id).unwrap();
        // CONF-010 expects no effect and executes only inside its window.
        assert!(guest(case("CONF-010")));
        // IDEM-008 expects its create's effect; CANCEL-004 judges by
        // cancel_consistent; BIND-005 has no window.
        for id in ["IDEM-008", "CANCEL-004", "BIND-005", "IDEM-001"] {
            assert!(!guest(case(id)), "{id}");
        }
        // Group members may go on inside each other's windows; others not.
        let conf = parked(&suite, "CONF-010", 20);
        let idem = parked(&suite, "IDEM-008", 10);
        let set = [conf, idem];
        assert!(!resumable(&set, 0));
        let [mut conf, mut idem] = set;
        conf.group = Some(3);
        idem.group = Some(3);
        assert!(resumable(&[conf, idem], 0));

        let counter = Profile::from_toml(
            &std::fs::read_to_string(
                std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("../../profiles/reference.toml"),
            )
            .unwrap(),
        )
        .unwrap();
        let ids = ["NEG-001", "CONF-010", "CANCEL-004", "BIND-005", "IDEM-008"];
        let cases: Vec<&Case> = ids.iter().map(|id| case(id)).collect();
        let order = |p: &Profile, movable: bool| -> Vec<&str> {
            start_order(&cases, p, movable)
                .into_iter()
                .map(|i| ids[i])
                .collect()
        };
        // A clock that moves, or an observer that is not a counter: the
        // suite's order.
        assert_eq!(order(&counter, true), ids);
        assert_eq!(order(&Profile::default(), false), ids);
        // Waits without a window, then the windows, the longest age first.
        assert_eq!(
            order(&counter, false),
            ["BIND-005", "IDEM-008", "CANCEL-004", "NEG-001", "CONF-010"]
        );
    }

    #[test]
    fn wildcards() {
        assert!(wildcard("NEG-*", "NEG-001"));
        assert!(wildcard("*-001", "NEG-001"));
        assert!(wildcard("N*G*1", "NEG-001"));
        assert!(!wildcard("NEG-*", "EXE-001"));
        assert!(wildcard("EXE-002", "EXE-002"));
        assert!(!wildcard("EXE-00", "EXE-002"));
    }
}
