//! The contract lock against in-process Providers: recording, drift, and
//! LOCK-001 in a run.

use cetp_conformance::in_process::in_process_target;
use cetp_conformance::lock_target::{drift, record, LOCK_CASE_ID};
use cetp_conformance::runner::{run, RunConfig};
use cetp_contract::drift::Class;
use cetp_contract::lock::Lock;
use cetp_proto::provider::{
    CallerIdentity, Decision, IntentTarget, ProviderCall, Reply, ResolveOutcome, ServiceManifest,
};
use cetp_proto::Value;
use cetp_reference::app::ProviderApp;
use cetp_reference::device::{DeviceClock, IDENTITY_A, IDENTITY_B};
use cetp_reference::provider::{thread_sleeper, Mutant, ProviderConfig, ReferenceProvider};
use cetp_vectors::device::Target;
use cetp_vectors::event::{Fanout, Verdict};
use cetp_vectors::profile::Profile;
use cetp_vectors::suite::{default_vectors_dir, Suite};
use serde_json::Value as Json;
use std::collections::BTreeSet;
use std::sync::Arc;

fn profile() -> Profile {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../profiles/reference.toml"
    ))
    .unwrap();
    Profile::from_toml(&text).unwrap()
}

fn target(app: Arc<dyn ProviderApp>) -> Target {
    in_process_target(app, DeviceClock::system(0))
}

fn reference() -> Target {
    target(Arc::new(ReferenceProvider::new(ProviderConfig::default())))
}

fn reference_lock() -> Lock {
    let built = record(&reference(), &profile()).expect("the reference answers");
    assert!(built.problems.is_empty(), "{:?}", built.problems);
    built.lock
}

/// The reference Provider with its `list_tools` answers edited: a release
/// of it, made in the test.
struct Edited {
    inner: ReferenceProvider,
    edit: fn(&mut Json),
}

impl ProviderApp for Edited {
    fn manifests(&self) -> Vec<ServiceManifest> {
        self.inner.manifests()
    }
    fn authority(&self) -> String {
        self.inner.authority()
    }
    fn call(&self, caller: &CallerIdentity, now_ms: i64, call: &ProviderCall) -> Reply {
        let mut reply = self.inner.call(caller, now_ms, call);
        if call.method == "list_tools" {
            if let Reply::Result {
                bundle: Some(b), ..
            } = &mut reply
            {
                if let Ok(mut data) = b.get_json("data") {
                    if data.get("revision").is_some() {
                        (self.edit)(&mut data);
                        b.insert("data", Value::String(data.to_string()));
                    }
                }
            }
        }
        reply
    }
    fn resolve(
        &self,
        launcher: &CallerIdentity,
        target: &IntentTarget,
        decision: Decision,
        now_ms: i64,
    ) -> ResolveOutcome {
        self.inner.resolve(launcher, target, decision, now_ms)
    }
    fn restart(&self) {
        self.inner.restart()
    }
}

fn edited(edit: fn(&mut Json)) -> Target {
    target(Arc::new(Edited {
        inner: ReferenceProvider::new(ProviderConfig::default()),
        edit,
    }))
}

/// `get_quote` takes at most 8 characters; the revision stays.
fn narrowed_same_revision(data: &mut Json) {
    data["tools"][0]["input_schema"]["properties"]["symbol"]["maxLength"] = 8.into();
}

/// The same change under a new revision.
fn narrowed_new_revision(data: &mut Json) {
    narrowed_same_revision(data);
    data["revision"] = "tools-next".into();
}

fn lock_case(t: &Target, lock: Lock) -> (Verdict, String) {
    let suite = Suite::load(&default_vectors_dir()).unwrap();
    let cfg = RunConfig {
        seed: 3,
        only: vec![LOCK_CASE_ID.into()],
        harness_version: "test".into(),
        lock: Some(lock),
        ..Default::default()
    };
    let out = run(&suite, t, &profile(), &cfg, &mut Fanout::default());
    assert_eq!(out.cases.len(), 1, "{:?}", out.cases);
    let c = &out.cases[0];
    assert_eq!(c.id, LOCK_CASE_ID);
    assert_eq!(c.requirements, vec!["CETP2-3.3-03".to_string()]);
    (c.verdict, c.reason.clone())
}

#[test]
fn the_reference_lock_is_schema_valid_and_deterministic() {
    let a = reference_lock().to_pretty_json();
    assert_eq!(a, reference_lock().to_pretty_json());
    let schema: Json = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../vectors/schema/lock.schema.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let v = jsonschema::options().build(&schema).unwrap();
    let doc: Json = serde_json::from_str(&a).unwrap();
    let errors: Vec<String> = v.iter_errors(&doc).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:?}");
    let lock = Lock::parse(&a).unwrap();
    assert_eq!(lock.tools.len(), 6);
    assert_eq!(
        lock.tool("delete_alert").unwrap().effect_class,
        "IDEMPOTENT"
    );
    assert_eq!(
        lock.tool("sync_portfolio").unwrap().annotations.execution,
        "sync_or_async",
        "every capability is offered when locking"
    );
}

#[test]
fn the_reference_does_not_drift_from_its_own_lock() {
    let report = drift(&reference(), &profile(), &reference_lock()).unwrap();
    assert!(report.findings.is_empty(), "{:?}", report.findings);
    assert_eq!(lock_case(&reference(), reference_lock()).0, Verdict::Pass);
}

#[test]
fn a_schema_change_under_the_old_revision_is_a_violation() {
    let report = drift(
        &edited(narrowed_same_revision),
        &profile(),
        &reference_lock(),
    )
    .unwrap();
    assert_eq!(report.worst(), Some(Class::Violation), "{report:#?}");
    assert_eq!(report.summary.violation, 1);
    assert_eq!(report.summary.breaking, 1);
    let (verdict, reason) = lock_case(&edited(narrowed_same_revision), reference_lock());
    assert_eq!(verdict, Verdict::Fail);
    assert!(
        reason.contains("get_quote /input_schema/properties/symbol/maxLength"),
        "{reason}"
    );
}

#[test]
fn a_schema_change_under_a_new_revision_is_breaking_drift_never_a_violation() {
    let report = drift(
        &edited(narrowed_new_revision),
        &profile(),
        &reference_lock(),
    )
    .unwrap();
    assert_eq!(report.worst(), Some(Class::Breaking), "{report:#?}");
    assert_eq!(report.summary.violation, 0);
    let (verdict, reason) = lock_case(&edited(narrowed_new_revision), reference_lock());
    assert_eq!(verdict, Verdict::Pass, "{reason}");
    assert!(reason.contains("1 breaking"), "{reason}");
}

#[test]
fn without_a_lock_the_run_has_no_lock_case() {
    let suite = Suite::load(&default_vectors_dir()).unwrap();
    let cfg = RunConfig {
        only: vec!["DESC-004".into(), LOCK_CASE_ID.into()],
        harness_version: "test".into(),
        ..Default::default()
    };
    let out = run(
        &suite,
        &edited(narrowed_same_revision),
        &profile(),
        &cfg,
        &mut Fanout::default(),
    );
    let ids: Vec<&str> = out.cases.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["DESC-004"]);
    assert_eq!(out.cases[0].verdict, Verdict::Pass);
}

fn provider(cfg: ProviderConfig) -> Target {
    target(Arc::new(ReferenceProvider::new(cfg)))
}

fn mutant() -> Target {
    provider(ProviderConfig {
        faults: BTreeSet::from([Mutant::SchemaChangedRevisionKept]),
        ..ProviderConfig::default()
    })
}

/// The legal variant: the next release, with its new revision.
fn next_release() -> Target {
    provider(ProviderConfig {
        next_release: true,
        ..ProviderConfig::default()
    })
}

#[test]
fn the_revision_kept_mutant_is_caught_by_drift_and_by_lock_001() {
    let report = drift(&mutant(), &profile(), &reference_lock()).unwrap();
    assert_eq!(report.worst(), Some(Class::Violation), "{report:#?}");
    let v: Vec<(&str, &str)> = report
        .findings
        .iter()
        .map(|f| (f.tool.as_deref().unwrap_or_default(), f.rule.as_str()))
        .collect();
    assert_eq!(
        v,
        [
            ("get_quote", "revision.unchanged"),
            ("get_quote", "schema.maxLength.narrowed")
        ]
    );
    let (verdict, reason) = lock_case(&mutant(), reference_lock());
    assert_eq!(verdict, Verdict::Fail, "{reason}");
}

#[test]
fn the_next_release_is_breaking_drift_never_a_violation() {
    let report = drift(&next_release(), &profile(), &reference_lock()).unwrap();
    assert_eq!(report.worst(), Some(Class::Breaking), "{report:#?}");
    assert_eq!(report.summary.violation, 0);
    assert_ne!(report.locked_revision, report.current_revision);
    let (verdict, reason) = lock_case(&next_release(), reference_lock());
    assert_eq!(verdict, Verdict::Pass, "{reason}");
}

/// A legal variant passes the whole suite, held to the previous release's
/// lock; the plain suite cannot tell the mutant from the reference, and the
/// lock can.
#[test]
fn with_the_lock_the_next_release_passes_everything_and_the_mutant_fails_only_lock_001() {
    let suite = Suite::load(&default_vectors_dir()).unwrap();
    let config = |next_release: bool, faults: BTreeSet<Mutant>| {
        let mut cfg = ProviderConfig {
            next_release,
            faults,
            effect_delay_ms: 20,
            sleeper: thread_sleeper(),
            ..ProviderConfig::default()
        };
        let mut b = ProviderConfig::all_scopes();
        b.remove("portfolio.sync");
        b.remove("history.read");
        cfg.grants
            .insert(IDENTITY_A.uid, ProviderConfig::all_scopes());
        cfg.grants.insert(IDENTITY_B.uid, b);
        cfg
    };
    let failing = |t: &Target, lock: Option<Lock>| -> Vec<String> {
        let cfg = RunConfig {
            seed: 11,
            harness_version: "test".into(),
            lock,
            ..Default::default()
        };
        let out = run(&suite, t, &profile(), &cfg, &mut Fanout::default());
        out.cases
            .iter()
            .filter(|c| !matches!(c.verdict, Verdict::Pass | Verdict::NotApplicable))
            .map(|c| c.id.clone())
            .chain(
                out.checks
                    .iter()
                    .filter(|c| c.verdict != Verdict::Pass)
                    .map(|c| c.id.clone()),
            )
            .collect()
    };
    let next = provider(config(true, BTreeSet::new()));
    assert_eq!(failing(&next, Some(reference_lock())), Vec::<String>::new());
    // A fresh device per run: one device remembers the request ids of a run
    // with the same seed and start time for a day (§6).
    let mutant = || {
        provider(config(
            false,
            BTreeSet::from([Mutant::SchemaChangedRevisionKept]),
        ))
    };
    assert_eq!(failing(&mutant(), None), Vec::<String>::new());
    assert_eq!(failing(&mutant(), Some(reference_lock())), [LOCK_CASE_ID]);
}
