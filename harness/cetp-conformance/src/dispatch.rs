//! The dispatcher both halves of a run go through (cargo-nextest's
//! dispatcher/executor split): it emits the run's events around each case an
//! executor runs, applies the baseline, and records every finished case,
//! check and stale baseline entry into the [`RunStats`] that give the
//! summary, the claim and the exit code. The Provider half
//! ([`crate::runner`]) and the Consumer half (`cetp_consumer::runner`)
//! differ only in their executors and their claim.
//!
//! The statistics are kept from the same typed records the events are made
//! of, one record per `CaseFinished` / `CheckVerdict` / `BaselineStale`
//! event, because what the claim needs (a case's capability, a setup-caused
//! NOT_APPLICABLE) is not in the published event schema.

use crate::exit::ExitCode;
use crate::stats::{CaseOutcome, CheckOutcome, RunStats};
use cetp_vectors::event::{Claim, Event, Fanout, Summary, Verdict};
use cetp_vectors::suite::Baseline;
use std::time::Instant;

/// What the dispatcher reports of a case besides its executor's result.
#[derive(Clone, Debug, Default)]
pub struct CaseInfo {
    /// Id of the case.
    pub id: String,
    /// Title of the case.
    pub title: String,
    /// Requirement ids the case covers.
    pub requirements: Vec<String>,
    /// Optional capabilities the case belongs to (empty: core).
    pub needs: Vec<String>,
    /// The device that ran it, in a run of several devices.
    pub device: Option<String>,
}

/// What an executor found running one attempt of a case.
#[derive(Clone, Debug, PartialEq)]
pub struct Executed {
    /// The attempt's verdict.
    pub verdict: Verdict,
    /// Why, for a human.
    pub reason: String,
    /// Requirements the finding cites (kept for a FAIL or WARN only).
    pub cited: Vec<String>,
    /// For a NOT_APPLICABLE the setup caused: what would let it judge.
    pub unjudged: Option<String>,
    /// The attempt was stopped short (Ctrl-C, `--run-timeout`).
    pub cut: bool,
}

impl Executed {
    /// An attempt with this verdict and reason: nothing cited, not left
    /// unjudged by the setup, not cut short.
    pub fn new(verdict: Verdict, reason: impl Into<String>) -> Executed {
        Executed {
            verdict,
            reason: reason.into(),
            cited: Vec::new(),
            unjudged: None,
            cut: false,
        }
    }
}

/// Folds the attempts of one case (`--attempts`): attempts that agree give
/// their verdict; attempts that disagree make it FLAKY, with every
/// attempt's outcome kept in the reason, never merged into a pass.
#[derive(Debug, Default)]
pub struct AttemptFolder {
    seen: Vec<Executed>,
    /// The requirements cited by the last attempt that did not pass.
    cited: Vec<String>,
}

impl AttemptFolder {
    /// Records an attempt; true when the case is settled (a PASS or a
    /// NOT_APPLICABLE is not attempted again).
    pub fn push(&mut self, attempt: Executed) -> bool {
        let settled = matches!(attempt.verdict, Verdict::Pass | Verdict::NotApplicable);
        if attempt.verdict != Verdict::Pass {
            self.cited = attempt.cited.clone();
        }
        self.seen.push(attempt);
        settled
    }

    /// The case's outcome from every attempt recorded: their common verdict,
    /// or FLAKY when they disagree.
    pub fn fold(mut self) -> Executed {
        let cut = self.seen.iter().any(|a| a.cut);
        let Some(first) = self.seen.first() else {
            return Executed::new(Verdict::InfraError, "no attempt ran");
        };
        let mut folded = if self.seen.iter().all(|a| a.verdict == first.verdict) {
            self.seen.swap_remove(0)
        } else {
            let all: Vec<String> = self
                .seen
                .iter()
                .enumerate()
                .map(|(n, a)| {
                    if a.reason.is_empty() {
                        format!("attempt {}: {}", n + 1, a.verdict.as_str())
                    } else {
                        format!("attempt {}: {} ({})", n + 1, a.verdict.as_str(), a.reason)
                    }
                })
                .collect();
            Executed::new(Verdict::Flaky, all.join("; "))
        };
        folded.cited = self.cited;
        folded.cut = cut;
        folded
    }
}

/// Emits the events of the cases, checks and baseline of one run and keeps
/// its statistics.
pub struct Dispatcher<'o> {
    /// Where the events go.
    pub out: &'o mut Fanout,
    baseline: Option<&'o Baseline>,
    stats: RunStats,
    started: Instant,
}

impl<'o> Dispatcher<'o> {
    /// Starts the run's clock; `baseline` accepts known failures.
    pub fn new(out: &'o mut Fanout, baseline: Option<&'o Baseline>) -> Dispatcher<'o> {
        Dispatcher {
            out,
            baseline,
            stats: RunStats::default(),
            started: Instant::now(),
        }
    }

    /// Emits an event to every reporter.
    pub fn emit(&mut self, e: Event) {
        self.out.emit(e);
    }

    /// The statistics so far, without the `RunFinished` of [`Self::finish`].
    pub fn into_stats(self) -> RunStats {
        self.stats
    }

    /// The statistics so far.
    pub fn stats(&self) -> &RunStats {
        &self.stats
    }

    /// The statistics so far, to amend (e.g. to mark the target unidentified).
    pub fn stats_mut(&mut self) -> &mut RunStats {
        &mut self.stats
    }

    /// The baseline's reason for a FAIL it accepts.
    pub fn known_failure(&self, id: &str, verdict: Verdict) -> Option<String> {
        self.baseline
            .and_then(|b| b.reason_for(id))
            .filter(|_| verdict == Verdict::Fail)
            .map(str::to_string)
    }

    /// Runs one case: `CaseStarted`, whatever the executor emits (steps,
    /// findings) to the fan-out it is handed, then `CaseFinished`.
    pub fn run_case(&mut self, case: CaseInfo, execute: impl FnOnce(&mut Fanout) -> Executed) {
        self.run_case_since(case, Instant::now(), execute)
    }

    /// [`Self::run_case`] for a case that began at `started`: one that
    /// waited in real time while other cases ran, whose events come
    /// together now.
    pub fn run_case_since(
        &mut self,
        case: CaseInfo,
        started: Instant,
        execute: impl FnOnce(&mut Fanout) -> Executed,
    ) {
        self.out.emit(Event::CaseStarted {
            case_id: case.id.clone(),
            title: case.title.clone(),
            device: case.device.clone(),
        });
        let mut e = execute(self.out);
        let baseline = self.known_failure(&case.id, e.verdict);
        if !matches!(e.verdict, Verdict::Fail | Verdict::Warn) {
            e.cited.clear();
        }
        self.out.emit(Event::CaseFinished {
            case_id: case.id.clone(),
            title: case.title.clone(),
            requirements: case.requirements.clone(),
            cited: e.cited.clone(),
            verdict: e.verdict,
            reason: e.reason.clone(),
            baseline: baseline.clone(),
            duration_ms: started.elapsed().as_millis() as u64,
            unjudged: e.unjudged.clone(),
        });
        self.stats.cut |= e.cut;
        self.stats.case(CaseOutcome {
            id: case.id,
            title: case.title,
            requirements: case.requirements,
            verdict: e.verdict,
            reason: e.reason,
            needs: case.needs,
            baselined: baseline.is_some(),
            cited: e.cited,
            unjudged: e.unjudged,
        });
    }

    /// A case that finished without running (the target could not be
    /// identified): recorded, no event.
    pub fn record_case(&mut self, o: CaseOutcome) {
        self.stats.case(o);
    }

    /// A check's verdict over the whole run.
    pub fn check(&mut self, title: &str, answers_checked: usize, mut o: CheckOutcome) {
        o.baselined = self.known_failure(&o.id, o.verdict).is_some();
        self.out.emit(Event::CheckVerdict {
            check: o.id.clone(),
            title: title.to_string(),
            requirements: o.requirements.clone(),
            cited: o.cited.clone(),
            verdict: o.verdict,
            reason: o.reason.clone(),
            answers_checked,
        });
        self.stats.check(o);
    }

    /// Baseline entries that no longer match a failure are stale: the run
    /// fails so the baseline gets cleaned up. `exists` says whether an id
    /// names a case or check at all.
    pub fn stale_baseline(&mut self, exists: impl Fn(&str) -> bool) {
        self.stale_baseline_where(exists, |_| true)
    }

    /// [`Self::stale_baseline`] of the entries this run can judge
    /// (`judged`): a partition judges only its own cases'.
    pub fn stale_baseline_where(
        &mut self,
        exists: impl Fn(&str) -> bool,
        judged: impl Fn(&str) -> bool,
    ) {
        let Some(b) = self.baseline else { return };
        for entry in b.entries.iter().filter(|e| judged(&e.id)) {
            let failing = self
                .stats
                .cases
                .iter()
                .any(|o| o.id == entry.id && o.verdict == Verdict::Fail)
                || self
                    .stats
                    .checks
                    .iter()
                    .any(|c| c.id == entry.id && c.verdict == Verdict::Fail);
            if !failing {
                let why = if exists(&entry.id) {
                    "it no longer fails"
                } else {
                    "no such case or check exists"
                };
                self.out.emit(Event::BaselineStale {
                    id: entry.id.clone(),
                    reason: why.into(),
                });
                self.stats.stale(entry.id.clone());
            }
        }
    }

    /// Ends the run: `RunFinished` with the summary, `claim` and exit code
    /// the statistics give. `interrupted`: whether a Ctrl-C came.
    pub fn finish(self, claim: Claim, interrupted: bool) -> Finished {
        let summary = self.stats.summary();
        let exit = self.stats.exit(interrupted);
        self.out.emit(Event::RunFinished {
            summary: summary.clone(),
            claim: claim.clone(),
            exit_code: exit.code(),
            duration_ms: self.started.elapsed().as_millis() as u64,
        });
        Finished {
            stats: self.stats,
            summary,
            claim,
            exit,
        }
    }
}

/// A finished run's statistics and what they gave.
#[derive(Clone, Debug)]
pub struct Finished {
    /// Every case and check finished.
    pub stats: RunStats,
    /// Count per verdict.
    pub summary: Summary,
    /// The §9 claim they allow.
    pub claim: Claim,
    /// The exit code the run ends with.
    pub exit: ExitCode,
}

#[cfg(test)]
mod tests {
    use super::*;
    use cetp_proto::discovery::{Declared, VersionSource};
    use cetp_vectors::event::Collect;
    use cetp_vectors::interp::Env;
    use std::collections::BTreeSet;
    use std::sync::{Arc, Mutex};

    /// Keeps the events for the test to read after the dispatcher is done.
    struct Shared(Arc<Mutex<Collect>>);

    impl cetp_vectors::event::Reporter for Shared {
        fn on_event(&mut self, e: &Event) {
            self.0.lock().unwrap().events.push(e.clone());
        }
    }

    fn fanout() -> (Fanout, Arc<Mutex<Collect>>) {
        let seen = Arc::new(Mutex::new(Collect::default()));
        let mut f = Fanout::default();
        f.reporters.push(Box::new(Shared(seen.clone())));
        (f, seen)
    }

    fn case(id: &str, needs: &[&str]) -> CaseInfo {
        CaseInfo {
            id: id.into(),
            title: format!("{id} title"),
            requirements: vec![format!("REQ-{id}")],
            needs: needs.iter().map(|n| n.to_string()).collect(),
            device: None,
        }
    }

    fn failed(reason: &str, cited: &[&str]) -> Executed {
        Executed {
            cited: cited.iter().map(|c| c.to_string()).collect(),
            ..Executed::new(Verdict::Fail, reason)
        }
    }

    fn env_v2() -> Env {
        Env {
            package: "p".into(),
            authority: "a".into(),
            manifest_kind: "dual_stack".into(),
            declared: Some(Declared {
                authority: "a".into(),
                versions: BTreeSet::from([1, 2]),
                source: VersionSource::Versions,
                legacy_version: None,
            }),
            manifest: None,
            identity_a: serde_json::Value::Null,
        }
    }

    fn baseline(ids: &[&str]) -> Baseline {
        let text: String = ids
            .iter()
            .map(|id| format!("[[known_failure]]\nid = \"{id}\"\nreason = \"bug {id}\"\n"))
            .collect();
        Baseline::from_toml(&text).unwrap()
    }

    #[test]
    fn attempts_that_disagree_are_flaky_with_every_attempt_kept() {
        let mut f = AttemptFolder::default();
        assert!(!f.push(failed("boom", &["R1"])));
        assert!(f.push(Executed::new(Verdict::Pass, "")));
        let e = f.fold();
        assert_eq!(e.verdict, Verdict::Flaky);
        assert_eq!(e.reason, "attempt 1: FAIL (boom); attempt 2: PASS");
        assert_eq!(e.unjudged, None);
        // FLAKY is never a pass, and no baseline entry accepts it.
        let (mut out, _) = fanout();
        let b = baseline(&["C1"]);
        let mut d = Dispatcher::new(&mut out, Some(&b));
        d.run_case(case("C1", &[]), |_| e);
        d.stale_baseline(|_| true);
        assert_eq!(d.stats().summary().flaky, 1);
        assert_eq!(d.stats().exit(false), ExitCode::Fail);
        assert!(!d.stats().cases[0].baselined);
        assert_eq!(d.stats().stale_baseline, vec!["C1".to_string()]);
    }

    #[test]
    fn attempts_that_agree_keep_the_first_reason_and_the_last_citation() {
        let mut f = AttemptFolder::default();
        assert!(!f.push(failed("first", &["R1"])));
        assert!(!f.push(failed("second", &["R2"])));
        let e = f.fold();
        assert_eq!((e.verdict, e.reason.as_str()), (Verdict::Fail, "first"));
        assert_eq!(e.cited, vec!["R2".to_string()]);
        // A setup-caused NOT_APPLICABLE settles at once and keeps its need.
        let mut f = AttemptFolder::default();
        let na = Executed {
            unjudged: Some("profile.observer".into()),
            ..Executed::new(Verdict::NotApplicable, "not judged")
        };
        assert!(f.push(na));
        assert_eq!(f.fold().unjudged.as_deref(), Some("profile.observer"));
        // A cut attempt marks the folded case cut.
        let mut f = AttemptFolder::default();
        f.push(Executed {
            cut: true,
            ..Executed::new(Verdict::InfraError, "stopped")
        });
        assert!(f.fold().cut);
    }

    #[test]
    fn the_dispatcher_reports_each_case_and_keeps_only_a_failures_citation() {
        let (mut out, seen) = fanout();
        let mut d = Dispatcher::new(&mut out, None);
        d.run_case(case("P", &[]), |out| {
            out.emit(Event::CheckFinding {
                case_id: "P".into(),
                step: 0,
                check: "x".into(),
                requirements: vec![],
                level: "MUST".into(),
                message: "m".into(),
            });
            Executed {
                cited: vec!["R".into()],
                ..Executed::new(Verdict::Pass, "")
            }
        });
        d.run_case(case("F", &[]), |_| failed("bad", &["R-F"]));
        let finished = d.finish(Claim::default(), false);
        let kinds: Vec<String> = seen
            .lock()
            .unwrap()
            .events
            .iter()
            .map(|e| match e {
                Event::CaseStarted { case_id, .. } => format!("start {case_id}"),
                Event::CheckFinding { case_id, .. } => format!("finding {case_id}"),
                Event::CaseFinished { case_id, cited, .. } => {
                    format!("finish {case_id} {cited:?}")
                }
                Event::RunFinished { exit_code, .. } => format!("end {exit_code}"),
                _ => "other".into(),
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "start P",
                "finding P",
                "finish P []",
                "start F",
                "finish F [\"R-F\"]",
                "end 1"
            ]
        );
        assert_eq!((finished.summary.pass, finished.summary.fail), (1, 1));
        assert_eq!(finished.exit, ExitCode::Fail);
    }

    #[test]
    fn the_baseline_accepts_known_failures_and_fails_on_stale_entries() {
        let (mut out, seen) = fanout();
        let b = baseline(&["C1", "CHK-X", "C2", "GONE"]);
        let mut d = Dispatcher::new(&mut out, Some(&b));
        d.run_case(case("C1", &[]), |_| failed("known", &[]));
        d.run_case(case("C2", &[]), |_| Executed::new(Verdict::Pass, ""));
        let check = CheckOutcome {
            id: "CHK-X".into(),
            requirements: vec![],
            cited: vec![],
            verdict: Verdict::Fail,
            reason: "r".into(),
            baselined: false,
        };
        d.check("a check", 3, check);
        assert!(d.stats().cases[0].baselined && d.stats().checks[0].baselined);
        assert_eq!(d.stats().exit(false), ExitCode::Ok);
        d.stale_baseline(|id| id != "GONE");
        assert_eq!(d.stats().stale_baseline, ["C2", "GONE"]);
        assert_eq!(d.stats().exit(false), ExitCode::Fail);
        let events = &seen.lock().unwrap().events;
        let stale: Vec<(&str, &str)> = events
            .iter()
            .filter_map(|e| match e {
                Event::BaselineStale { id, reason } => Some((id.as_str(), reason.as_str())),
                _ => None,
            })
            .collect();
        assert_eq!(
            stale,
            [
                ("C2", "it no longer fails"),
                ("GONE", "no such case or check exists")
            ]
        );
        assert!(events.iter().any(|e| matches!(e,
            Event::CaseFinished { case_id, baseline: Some(r), .. } if case_id == "C1" && r == "bug C1")));
    }

    #[test]
    fn the_exit_code_goes_by_who_is_at_fault() {
        let stats = |verdicts: &[Verdict]| {
            let (mut out, _) = fanout();
            let mut d = Dispatcher::new(&mut out, None);
            for (i, v) in verdicts.iter().enumerate() {
                d.run_case(case(&format!("C{i}"), &[]), |_| Executed::new(*v, "r"));
            }
            d.into_stats()
        };
        assert_eq!(
            stats(&[Verdict::Pass, Verdict::Warn]).exit(false),
            ExitCode::Ok
        );
        assert_eq!(stats(&[Verdict::NotApplicable]).exit(false), ExitCode::Ok);
        assert_eq!(stats(&[Verdict::InfraError]).exit(false), ExitCode::Infra);
        assert_eq!(
            stats(&[Verdict::InfraError, Verdict::Fail]).exit(false),
            ExitCode::Fail
        );
        let mut unidentified = stats(&[]);
        unidentified.unidentified = true;
        assert_eq!(unidentified.exit(false), ExitCode::Infra);
        // A cut run is interrupted only when a Ctrl-C came; a
        // `--run-timeout` cut is device-side trouble.
        let mut cut = stats(&[Verdict::Fail]);
        cut.cut = true;
        assert_eq!(cut.exit(true), ExitCode::Interrupted);
        assert_eq!(cut.exit(false), ExitCode::Fail);
    }

    #[test]
    fn the_provider_claim_needs_every_core_case_judged_and_passed() {
        let env = env_v2();
        let caps = BTreeSet::from(["async_operations".to_string()]);
        let run = |core: Executed, cap: Verdict| {
            let (mut out, _) = fanout();
            let mut d = Dispatcher::new(&mut out, None);
            d.run_case(case("CORE", &[]), |_| core);
            d.run_case(case("ASYNC", &["async_operations"]), |_| {
                Executed::new(cap, "")
            });
            d.into_stats()
        };
        let pass = || Executed::new(Verdict::Pass, "");
        let c = run(pass(), Verdict::Pass).provider_claim(Some(&env), Some(&caps), false);
        assert!(c.cetp_v2);
        assert_eq!(
            c.statement,
            "May claim CETP v2 with async_operations. (0 case(s) not applicable by the spec.)"
        );
        let c = run(pass(), Verdict::Fail).provider_claim(Some(&env), Some(&caps), false);
        assert!(c.cetp_v2 && !c.capabilities[0].passed);
        let c = run(failed("x", &[]), Verdict::Pass).provider_claim(Some(&env), Some(&caps), false);
        assert_eq!(
            c.statement,
            "May NOT claim CETP v2: 1 core case(s) or check(s) did not pass."
        );
        let unjudged = Executed {
            unjudged: Some("profile.observer".into()),
            ..Executed::new(Verdict::NotApplicable, "not judged")
        };
        let c = run(unjudged, Verdict::Pass).provider_claim(Some(&env), Some(&caps), false);
        assert!(!c.cetp_v2);
        assert_eq!(c.unjudged[0].cases, ["CORE"]);
        assert_eq!(
            c.statement,
            "CETP v2 not established: core tests were left unjudged by the setup; provide profile.observer (1 case(s), 1 requirement(s))."
        );
        let c = run(pass(), Verdict::Pass).provider_claim(Some(&env), Some(&caps), true);
        assert!(!c.cetp_v2 && c.filtered);
        let c = run(pass(), Verdict::Pass).provider_claim(None, None, false);
        assert_eq!(c.statement, "No claim: the target could not be identified.");
    }

    #[test]
    fn the_consumer_claim_counts_every_scenario() {
        let run = |verdicts: &[Verdict]| {
            let (mut out, _) = fanout();
            let mut d = Dispatcher::new(&mut out, None);
            for (i, v) in verdicts.iter().enumerate() {
                d.run_case(case(&format!("S{i}"), &[]), |_| Executed::new(*v, "r"));
            }
            d.into_stats()
        };
        let ok = run(&[Verdict::Pass, Verdict::Pass]);
        let c = ok.consumer_claim("the reference", false);
        assert!(c.cetp_v2);
        assert_eq!(
            c.statement,
            "Consumer half of §9: established for the reference: every Consumer scenario passed"
        );
        assert_eq!(ok.exit(false), ExitCode::Ok);
        assert!(!ok.consumer_claim("x", true).cetp_v2);
        let mixed = run(&[Verdict::Warn, Verdict::NotApplicable, Verdict::InfraError]);
        assert_eq!(
            mixed.consumer_claim("m", false).statement,
            "Consumer half of §9: not established for m: 0 FAIL, 1 WARN, 1 not judged, 1 infra errors"
        );
        assert_eq!(mixed.exit(false), ExitCode::Infra);
    }

    #[test]
    fn a_scenario_passed_only_in_part_keeps_the_consumer_claim_and_names_what_would_judge_it() {
        let (mut out, _) = fanout();
        let mut d = Dispatcher::new(&mut out, None);
        d.run_case(case("S0", &[]), |_| Executed::new(Verdict::Pass, "r"));
        for id in ["S1", "S2"] {
            d.run_case(case(id, &[]), |_| Executed {
                unjudged: Some("descriptor reads".into()),
                ..Executed::new(Verdict::Pass, "the other expectations held")
            });
        }
        let stats = d.into_stats();
        // Every scenario passed, so the run exits 0; the claim is not made.
        assert_eq!(stats.exit(false), ExitCode::Ok);
        let c = stats.consumer_claim("v", false);
        assert!(!c.cetp_v2);
        assert_eq!(
            c.statement,
            "Consumer half of §9: not established for v: 0 FAIL, 0 WARN, 0 not judged, 0 infra errors, 2 passed only in part (this target cannot see all they judge: S1, S2 need descriptor reads)"
        );
        assert_eq!(c.unjudged.len(), 1);
        assert_eq!(c.unjudged[0].cases, ["S1", "S2"]);
        assert_eq!(c.unjudged[0].requirements, ["REQ-S1", "REQ-S2"]);
        // A filtered run makes no claim and names nothing.
        assert!(stats.consumer_claim("v", true).unjudged.is_empty());
    }
}
