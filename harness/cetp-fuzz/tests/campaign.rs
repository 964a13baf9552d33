//! `cetp fuzz` over several targets (issue 31): one worker per target,
//! findings claimed once across workers, a corpus directory the workers
//! share, and a worker whose device goes away reported while the others
//! finish.

use cetp_fuzz::campaign::{self, Corpus, Hub, Member, WorkerSpec, WorkerState};
use cetp_fuzz::moves::{GenStep, Meta, Move};
use cetp_fuzz::{FuzzConfig, Fuzzer, Judgement};
use cetp_targets::{open, TargetSpec};
use cetp_vectors::profile::Profile;
use cetp_vectors::suite::Suite;
use serde_json::json;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn profile(name: &str) -> Profile {
    let path = root().join("profiles").join(name);
    Profile::from_toml(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cetp-campaign-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn spec(target: &str) -> WorkerSpec {
    let profile = profile("reference.toml");
    let t = open(&TargetSpec::parse(target).unwrap()).unwrap();
    let (_, env) = cetp_conformance::runner::identify(&t, &profile).unwrap();
    WorkerSpec {
        label: target.to_string(),
        target: t,
        profile,
        env,
        build: "one-build".into(),
    }
}

fn cfg(seed: u64, cases: u64, max_findings: usize) -> FuzzConfig {
    FuzzConfig {
        seed,
        cases: Some(cases),
        max_findings,
        shrink_runs: 12,
        ..FuzzConfig::default()
    }
}

/// A mutant and the reference fuzzed at once: the mutant's findings are
/// reported once each, all charged to the mutant's worker; the reference's
/// worker, fed the same corpus, gets none; both run their sequences.
#[test]
fn a_mutant_and_the_reference_fuzzed_at_once_charge_only_the_mutant() {
    let suite = Suite::load(&root().join("vectors")).unwrap();
    let corpus = tmp("two-sims");
    let report = campaign::run(
        vec![spec("sim"), spec("sim:mutant=no_dedupe")],
        &suite.rules,
        &cfg(3, 16, 10),
        Some(&corpus),
        &mut |_| {},
    )
    .unwrap();
    assert!(report.complete(), "{:#?}", report.workers);
    assert_eq!(report.targets, ["sim", "sim:mutant=no_dedupe"]);
    assert_eq!(report.workers[0].stats.cases, 16, "{:?}", report.workers[0]);
    assert_eq!(report.workers[1].stats.cases, 16, "{:?}", report.workers[1]);
    assert_eq!(
        report.workers[0].seed, 3,
        "worker 0 fuzzes with the run's seed"
    );
    assert_ne!(report.workers[1].seed, 3, "worker 1 with one of its own");
    assert!(!report.findings.is_empty(), "no_dedupe is found");
    assert!(
        report.workers[0].findings.is_empty(),
        "{:#?}",
        report.findings
    );
    assert!(report.workers[0].oracle_notes.is_empty());
    let mut sigs = std::collections::BTreeSet::new();
    for f in &report.findings {
        assert!(
            sigs.insert(&f.finding.signature),
            "reported twice: {}",
            f.finding.signature
        );
        assert!(f.found_by.iter().all(|s| s.worker == 1), "{:?}", f.found_by);
        assert!(f.finding.cited.iter().any(|c| c.starts_with("CETP2-")));
    }
    assert_eq!(report.stats.cases, 32);
    let written: usize = report
        .workers
        .iter()
        .map(|w| w.corpus.as_ref().unwrap().written)
        .sum();
    let files = std::fs::read_dir(&corpus).unwrap().count();
    assert!(
        written > 0 && files == written,
        "{written} written, {files} files"
    );
}

fn no_dedupe_fuzzer<'a>(
    profile: &'a Profile,
    rules: &'a std::collections::BTreeMap<String, Vec<String>>,
) -> Fuzzer<'a> {
    let t = open(&TargetSpec::parse("sim:mutant=no_dedupe").unwrap()).unwrap();
    let (_, env) = cetp_conformance::runner::identify(&t, profile).unwrap();
    // Shrinking is not what is tested here, and is most of the time a
    // finding takes.
    let cfg = FuzzConfig {
        shrink_runs: 1,
        ..cfg(5, 2, 10)
    };
    Fuzzer::new(t, profile, env, rules, cfg).unwrap()
}

/// The same defect seen by two workers is one finding, shrunk and reported
/// by the first, naming both: the second worker runs the very sequences
/// the first did (same seed, same mutant), and reports nothing itself.
#[test]
fn a_defect_two_workers_find_is_one_finding_naming_both() {
    let suite = Suite::load(&root().join("vectors")).unwrap();
    let profile = profile("reference.toml");
    let hub = Arc::new(Hub::default());
    let mut first = no_dedupe_fuzzer(&profile, &suite.rules);
    first.join_campaign(Member::new(hub.clone(), 0, "first", "b"));
    let r1 = first.run(&mut |_| {});
    assert!(!r1.findings.is_empty());
    let mut second = no_dedupe_fuzzer(&profile, &suite.rules);
    second.join_campaign(Member::new(hub.clone(), 1, "second", "b"));
    let r2 = second.run(&mut |_| {});
    assert!(r2.findings.is_empty(), "{:#?}", r2.findings);
    for f in &r1.findings {
        let seen = hub.sightings("b", &f.signature);
        let workers: Vec<usize> = seen.iter().map(|s| s.worker).collect();
        assert_eq!(workers, [0, 1], "{}", f.signature);
        assert_eq!(seen[1].target, "second");
    }
    assert_eq!(hub.distinct(), r1.findings.len());
    // On another build the same signature is a finding of its own.
    let mut other = no_dedupe_fuzzer(&profile, &suite.rules);
    other.join_campaign(Member::new(hub.clone(), 2, "other build", "c"));
    assert_eq!(other.run(&mut |_| {}).findings.len(), r1.findings.len());
}

fn step(j: serde_json::Value) -> GenStep {
    GenStep {
        step: j,
        meta: Meta::Plain,
    }
}

/// A session and one `create_alert` call: a side effect the reference
/// profile allows and the default profile does not.
fn create_alert_moves() -> Vec<Move> {
    vec![
        Move {
            steps: vec![step(json!({"do": "negotiate", "as": "a", "bind": "s1"}))],
        },
        Move {
            steps: vec![step(
                json!({"do": "call", "as": "a", "method": "execute_tool",
                "session": "s1", "tool": {"name": "create_alert"}, "args": "valid",
                "bind": "e2", "expect": {}, "requirements": []}),
            )],
        },
    ]
}

/// A corpus entry worker 0 writes, worker 1 reads from the directory and
/// derives sequences from that the reference passes; what is not an entry,
/// is too large, or names a tool the reader may not execute is skipped.
#[test]
fn an_entry_one_worker_writes_the_other_reads_and_runs() {
    let dir = tmp("shared");
    let suite = Suite::load(&root().join("vectors")).unwrap();
    let allowed = profile("reference.toml");
    let t = open(&TargetSpec::parse("sim").unwrap()).unwrap();
    let (_, env) = cetp_conformance::runner::identify(&t, &allowed).unwrap();
    let world = cetp_fuzz::world::learn(&t, &allowed, &env, 1).unwrap();
    let strict = cetp_fuzz::world::learn(&t, &Profile::default(), &env, 1).unwrap();

    let mut w0 = Corpus::open(&dir).unwrap();
    let features = ["answer execute_tool:success/-".to_string()].into();
    let moves = create_alert_moves();
    let path = w0
        .offer(&features, &moves, "worker 0 sim", 7)
        .expect("written");
    assert!(path.starts_with(&dir));
    assert!(
        w0.offer(&features, &moves, "worker 0 sim", 8).is_none(),
        "nothing new"
    );
    // Junk the reader must skip, and a write in progress it must not see.
    std::fs::write(dir.join("junk.json"), "{not json").unwrap();
    std::fs::write(dir.join(".half.json"), "{").unwrap();
    let big = format!("{{\"pad\": \"{}\"}}", "x".repeat(300 * 1024));
    std::fs::write(dir.join("big.json"), big).unwrap();

    let mut w1 = Corpus::open(&dir).unwrap();
    assert_eq!(w1.sync(&|e| campaign::runnable(e, &world)), 1);
    assert_eq!(w1.stats.read, 1);
    assert_eq!(w1.stats.skipped, 2, "junk and the oversized file");
    let entry = w1.entries()[0].clone();
    assert_eq!(entry.found_by, "worker 0 sim");
    assert_eq!(
        serde_json::to_value(&entry.moves).unwrap(),
        serde_json::to_value(&moves).unwrap()
    );
    assert_eq!(w1.sync(&|e| campaign::runnable(e, &world)), 0, "read once");
    assert!(
        w1.offer(&features, &moves, "worker 1", 9).is_none(),
        "what it read is not new to it"
    );
    // A worker whose profile allows no side effect never runs the entry.
    let mut w2 = Corpus::open(&dir).unwrap();
    assert_eq!(w2.sync(&|e| campaign::runnable(e, &strict)), 0);
    assert_eq!(w2.stats.skipped, 3);

    // Worker 1 runs sequences derived from it on the reference: judged,
    // and nothing found.
    let t = open(&TargetSpec::parse("sim").unwrap()).unwrap();
    let mut fuzzer = Fuzzer::new(t, &allowed, env.clone(), &suite.rules, cfg(11, 12, 10)).unwrap();
    let mut passed = 0;
    for seed in 0..6 {
        let derived = campaign::derive(&entry.moves, &world, seed, 6);
        assert!(derived.len() >= 2);
        match fuzzer.judge_moves(&derived, seed) {
            Judgement::Pass => passed += 1,
            Judgement::Unjudged => {}
            other => panic!("seed {seed}: {other:?}"),
        }
    }
    assert!(passed >= 3, "{passed} of 6 derived sequences judged");
    // And a worker joined to the corpus derives some of its sequences from
    // the entry it reads there.
    let t = open(&TargetSpec::parse("sim").unwrap()).unwrap();
    let mut fuzzer = Fuzzer::new(t, &allowed, env, &suite.rules, cfg(11, 12, 10)).unwrap();
    let hub = Arc::new(Hub::default());
    fuzzer.join_campaign(Member::new(hub, 1, "sim", "b").with_corpus(Corpus::open(&dir).unwrap()));
    let r = fuzzer.run(&mut |_| {});
    assert!(r.findings.is_empty(), "{:#?}", r.findings);
    let stats = &fuzzer
        .campaign_member()
        .unwrap()
        .corpus
        .as_ref()
        .unwrap()
        .stats;
    assert!(stats.read >= 1 && stats.derived >= 1, "{stats:?}");
}

/// A target served over TCP that goes away while it is fuzzed: its worker
/// is reported lost (nothing charged) and the other runs to its end.
#[test]
fn a_tcp_target_that_closes_is_reported_lost_while_the_other_finishes() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let sim = cetp_sim::Sim::new(cetp_sim::SimConfig::default()).unwrap();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    rt.spawn(sim.serve_tcp("a", listener));
    let rt = Mutex::new(Some(rt));
    let suite = Suite::load(&root().join("vectors")).unwrap();
    // A budget, not a case count: however fast the TCP worker goes, it is
    // still fuzzing when its device goes away (after its first progress
    // report, about a second in).
    let budget = FuzzConfig {
        cases: None,
        budget: Some(std::time::Duration::from_secs(4)),
        ..cfg(3, 0, 10)
    };
    let report = campaign::run(
        vec![spec("sim"), spec(&format!("tcp:{addr}"))],
        &suite.rules,
        &budget,
        None,
        &mut |slots| {
            // The device goes away once its worker has fuzzed a little:
            // its runtime, listener and connections with it.
            if slots[1].cases >= 2 {
                if let Some(rt) = rt.lock().unwrap().take() {
                    rt.shutdown_background();
                }
            }
        },
    )
    .unwrap();
    assert!(rt.lock().unwrap().is_none(), "the device was taken away");
    assert!(matches!(report.workers[0].state, WorkerState::Finished));
    assert!(
        report.workers[0].stats.elapsed_ms >= 4000,
        "{:?}",
        report.workers[0].stats
    );
    match &report.workers[1].state {
        WorkerState::Lost(why) => assert!(why.contains("hello"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert!(
        report.workers[1].stats.cases >= 2 && report.workers[1].stats.elapsed_ms < 4000,
        "{:?}",
        report.workers[1].stats
    );
    assert!(!report.complete());
    assert!(report.findings.is_empty(), "{:#?}", report.findings);
}

/// A worker its configuration leaves nothing to do (here: the differential
/// oracle for a package the reference does not implement) is reported as
/// refused, as a one-target run refuses to start; the other runs.
#[test]
fn a_worker_that_refuses_to_start_is_reported_and_the_other_runs() {
    let suite = Suite::load(&root().join("vectors")).unwrap();
    let mut odd = spec("sim");
    odd.env.package = "com.example.unknown".into();
    let report = campaign::run(
        vec![spec("sim"), odd],
        &suite.rules,
        &FuzzConfig {
            oracle: cetp_fuzz::OracleChoice::Differential,
            ..cfg(3, 2, 10)
        },
        None,
        &mut |_| {},
    )
    .unwrap();
    assert!(matches!(report.workers[0].state, WorkerState::Finished));
    assert_eq!(report.workers[0].stats.cases, 2);
    match &report.workers[1].state {
        WorkerState::Refused(why) => assert!(why.contains("no differential oracle"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert!(report.refused() && !report.complete());
}
