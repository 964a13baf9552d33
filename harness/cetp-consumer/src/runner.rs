//! The Consumer half of a run (`cetp consumer`): the same dispatcher,
//! events, run statistics and exit codes as the Provider half
//! ([`cetp_conformance::runner`]); only the executor (a scenario played against the
//! Consumer under test) and the claim differ.

use super::scenario::Scenario;
use super::ScenarioResult;
use cetp_conformance::config::wildcard;
use cetp_conformance::dispatch::{CaseInfo, Dispatcher, Executed, Finished};
use cetp_vectors::event::{Event, Fanout, Verdict};

/// What a Consumer run is, as its `RunStarted` and claim report it.
#[derive(Clone, Debug)]
pub struct ConsumerPlan {
    /// The target as given (`sim:consumer=NAME`, `tcp:…`).
    pub target: String,
    /// Who the claim is about.
    pub consumer: String,
    /// Seed of the run, for the report.
    pub seed: u64,
    /// Scenario id patterns (`*` wildcards) to run; empty: all.
    pub only: Vec<String>,
    /// Scenario id patterns not to run.
    pub skip: Vec<String>,
    /// Version of the harness.
    pub harness: String,
    /// Start time of the run, Unix epoch ms.
    pub started_at_ms: i64,
    /// The flags besides `--target` and `--seed` a rerun of one scenario
    /// needs (`--profile P`: the driver).
    pub rerun: Vec<String>,
}

/// Where the Consumer under test runs: the dispatcher's executor.
pub trait ConsumerPlace {
    /// Readies the device (once, before any scenario) and names where the
    /// hostile Provider is hosted (`package`, `authority`); `None`: the
    /// scripted hostile Provider's own names. An error is the device's.
    fn prepare(&mut self) -> Result<Option<(String, String)>, String>;
    /// Plays one scenario; an error is the device's (INFRA_ERROR).
    fn play(&mut self, s: &Scenario) -> Result<ScenarioResult, String>;
}

/// The scenarios `only` and `skip` select (`*` wildcards); a pattern that
/// selects no scenario is a typo, not a run of none.
pub fn select<'s>(
    all: &'s [Scenario],
    only: &[String],
    skip: &[String],
) -> Result<Vec<&'s Scenario>, String> {
    for p in only.iter().chain(skip) {
        if !all.iter().any(|s| wildcard(p, &s.id)) {
            return Err(format!("--only/--skip pattern {p:?} selects no scenario"));
        }
    }
    Ok(all
        .iter()
        .filter(|s| only.is_empty() || only.iter().any(|p| wildcard(p, &s.id)))
        .filter(|s| !skip.iter().any(|p| wildcard(p, &s.id)))
        .collect())
}

/// Runs the selected scenarios at `place` and emits every event to `out`.
/// An error (the device could not be readied) comes after `RunStarted`.
pub fn run(
    plan: &ConsumerPlan,
    scenarios: &[&Scenario],
    place: &mut dyn ConsumerPlace,
    out: &mut Fanout,
) -> Result<Finished, String> {
    let mut d = Dispatcher::new(out, None);
    d.emit(Event::RunStarted {
        run_id: format!("consumer-{}", plan.started_at_ms),
        harness: plan.harness.clone(),
        target: plan.target.clone(),
        seed: plan.seed,
        config_hash: String::new(),
        started_at_ms: plan.started_at_ms,
        cases: scenarios.len(),
        only: plan.only.clone(),
        skip: plan.skip.clone(),
        attempts: 1,
        rerun: plan.rerun.clone(),
    });
    let (package, authority) = place.prepare()?.unwrap_or_else(|| {
        (
            super::hostile::PACKAGE.to_string(),
            super::hostile::AUTHORITY.to_string(),
        )
    });
    d.emit(Event::TargetIdentified {
        hello: None,
        package: Some(package),
        authority: Some(authority),
        manifest: format!(
            "role: consumer ({}) against the scripted hostile Provider",
            plan.consumer
        ),
        declared_versions: vec![1, 2],
    });
    for s in scenarios {
        let info = CaseInfo {
            id: s.id.clone(),
            title: s.title.clone(),
            requirements: s.requirements.clone(),
            needs: Vec::new(),
            device: None,
        };
        d.run_case(info, |out| executed(s, place.play(s), out));
    }
    let filtered = !plan.only.is_empty() || !plan.skip.is_empty();
    let claim = d.stats().consumer_claim(&plan.consumer, filtered);
    Ok(d.finish(claim, false))
}

/// A played scenario as the dispatcher reports it: each finding as a
/// `CheckFinding`, the first one as the reason.
fn executed(s: &Scenario, played: Result<ScenarioResult, String>, out: &mut Fanout) -> Executed {
    let r = match played {
        Ok(r) => r,
        Err(e) => return Executed::new(Verdict::InfraError, e),
    };
    let unseen: Vec<&str> = r.unseen.iter().map(|(what, _)| what.as_str()).collect();
    let notes: Vec<&str> = r.not_judged.iter().map(String::as_str).collect();
    let reason = if let Some(f) = r.findings.first() {
        format!("{}: {}", f.check, f.message)
    } else if r.verdict == Verdict::NotApplicable {
        r.not_judged.join("; ")
    } else if !unseen.is_empty() {
        format!(
            "the other expectations held; not judged on this target: {}",
            [unseen.as_slice(), notes.as_slice()].concat().join("; ")
        )
    } else if !notes.is_empty() {
        format!("passed; {}", notes.join("; "))
    } else {
        "every expectation held".to_string()
    };
    for f in &r.findings {
        out.emit(Event::CheckFinding {
            case_id: s.id.clone(),
            step: 0,
            check: f.check.clone(),
            requirements: f.cited.clone(),
            level: s.level.clone(),
            message: f.message.clone(),
        });
    }
    let mut e = Executed::new(r.verdict, reason);
    e.cited = r.cited().into_iter().map(str::to_string).collect();
    if r.verdict == Verdict::Pass {
        // Partly judged: the claim names what would judge the rest.
        let mut needs: Vec<&str> = r.unseen.iter().map(|(_, n)| *n).collect();
        needs.dedup();
        if !needs.is_empty() {
            e.unjudged = Some(needs.join("; "));
        }
    }
    e
}

/// While the built-in Consumers run in this process, a panic of one (a
/// mutant's crash, reported as the `crashed` outcome) prints nothing; any
/// other panic still prints as usual.
type PanicHook = Box<dyn Fn(&std::panic::PanicHookInfo<'_>) + Sync + Send + 'static>;

/// Guard that silences the panics of in-process Consumers while it lives;
/// dropping it puts the previous panic hook back.
pub struct QuietConsumerPanics {
    previous: Option<PanicHook>,
}

impl QuietConsumerPanics {
    /// Installs the quiet hook, keeping the previous one for other panics.
    pub fn install() -> QuietConsumerPanics {
        let previous = std::panic::take_hook();
        let shared: std::sync::Arc<dyn Fn(&std::panic::PanicHookInfo<'_>) + Sync + Send> =
            std::sync::Arc::from(previous);
        let inner = shared.clone();
        std::panic::set_hook(Box::new(move |info| {
            let in_consumer = info
                .location()
                .is_some_and(|l| l.file().contains("cetp-reference/src/consumer/"));
            if !in_consumer {
                inner(info);
            }
        }));
        QuietConsumerPanics {
            previous: Some(Box::new(move |info| shared(info))),
        }
    }
}

impl Drop for QuietConsumerPanics {
    fn drop(&mut self) {
        if let Some(p) = self.previous.take() {
            let _ = std::panic::take_hook();
            std::panic::set_hook(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Finding;
    use cetp_conformance::exit::ExitCode;
    use cetp_vectors::event::Collect;
    use std::sync::{Arc, Mutex};

    struct Shared(Arc<Mutex<Collect>>);

    impl cetp_vectors::event::Reporter for Shared {
        fn on_event(&mut self, e: &Event) {
            self.0.lock().unwrap().events.push(e.clone());
        }
    }

    /// Plays nothing: answers each scenario as the test says.
    struct Scripted {
        ready: Result<Option<(String, String)>, String>,
        answers: Vec<Result<ScenarioResult, String>>,
    }

    impl ConsumerPlace for Scripted {
        fn prepare(&mut self) -> Result<Option<(String, String)>, String> {
            self.ready.clone()
        }
        fn play(&mut self, _: &Scenario) -> Result<ScenarioResult, String> {
            self.answers.remove(0)
        }
    }

    fn scenarios() -> Vec<Scenario> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../vectors/consumer");
        crate::scenario::load_dir(&dir).unwrap()
    }

    fn result(s: &Scenario, verdict: Verdict, findings: Vec<Finding>) -> ScenarioResult {
        ScenarioResult {
            id: s.id.clone(),
            title: s.title.clone(),
            verdict,
            findings,
            not_judged: Vec::new(),
            unseen: Vec::new(),
            acts: Vec::new(),
            calls: 0,
        }
    }

    fn plan(only: &[&str]) -> ConsumerPlan {
        ConsumerPlan {
            target: "sim".into(),
            consumer: "the Consumer".into(),
            seed: 1,
            only: only.iter().map(|s| s.to_string()).collect(),
            skip: Vec::new(),
            harness: "cetp test".into(),
            started_at_ms: 7,
            rerun: Vec::new(),
        }
    }

    #[test]
    fn a_consumer_run_goes_through_the_dispatcher_and_its_statistics() {
        let all = scenarios();
        let picked: Vec<&Scenario> = all.iter().take(3).collect();
        let finding = Finding {
            check: "no_call".into(),
            cited: vec!["CETP2-X".into()],
            message: "it called".into(),
        };
        let mut place = Scripted {
            ready: Ok(None),
            answers: vec![
                Ok(result(picked[0], Verdict::Pass, vec![])),
                Ok(result(picked[1], Verdict::Fail, vec![finding])),
                Err("device gone".into()),
            ],
        };
        let seen = Arc::new(Mutex::new(Collect::default()));
        let mut out = Fanout::default();
        out.reporters.push(Box::new(Shared(seen.clone())));
        let f = run(&plan(&[]), &picked, &mut place, &mut out).unwrap();
        assert_eq!(
            (f.summary.pass, f.summary.fail, f.summary.infra_error),
            (1, 1, 1)
        );
        assert_eq!(f.exit, ExitCode::Fail);
        assert_eq!(
            f.claim.statement,
            "Consumer half of §9: not established for the Consumer: 1 FAIL, 0 WARN, 0 not judged, 1 infra errors"
        );
        let events = &seen.lock().unwrap().events;
        assert!(
            matches!(&events[0], Event::RunStarted { run_id, cases: 3, .. } if run_id == "consumer-7")
        );
        assert!(
            matches!(&events[1], Event::TargetIdentified { package: Some(p), .. } if p == super::super::hostile::PACKAGE)
        );
        let failed = events.iter().find_map(|e| match e {
            Event::CaseFinished {
                verdict: Verdict::Fail,
                reason,
                cited,
                ..
            } => Some((reason.clone(), cited.clone())),
            _ => None,
        });
        assert_eq!(
            failed,
            Some(("no_call: it called".into(), vec!["CETP2-X".into()]))
        );
        assert!(events
            .iter()
            .any(|e| matches!(e, Event::CheckFinding { check, .. } if check == "no_call")));
    }

    #[test]
    fn a_device_that_cannot_be_readied_judges_nothing() {
        let all = scenarios();
        let picked: Vec<&Scenario> = all.iter().take(1).collect();
        let mut place = Scripted {
            ready: Err("no probe".into()),
            answers: Vec::new(),
        };
        let mut out = Fanout::default();
        let e = run(&plan(&[]), &picked, &mut place, &mut out).err();
        assert_eq!(e.as_deref(), Some("no probe"));
    }

    #[test]
    fn a_pattern_that_selects_no_scenario_is_refused() {
        let all = scenarios();
        let first = all[0].id.clone();
        assert_eq!(
            select(&all, std::slice::from_ref(&first), &[])
                .unwrap()
                .len(),
            1
        );
        assert_eq!(select(&all, &[], &[first]).unwrap().len(), all.len() - 1);
        assert!(select(&all, &["NOPE-*".into()], &[])
            .unwrap_err()
            .contains("selects no scenario"));
    }
}
