//! The whole suite against the reference Provider in-process: every case
//! must PASS or be NOT_APPLICABLE.

use cetp_conformance::in_process::in_process_target;
use cetp_conformance::runner::{run, RunConfig};
use cetp_reference::device::{DeviceClock, IDENTITY_A, IDENTITY_B};
use cetp_reference::provider::{thread_sleeper, ProviderConfig, ReferenceProvider};
use cetp_vectors::event::{Fanout, Verdict};
use cetp_vectors::profile::Profile;
use cetp_vectors::suite::{default_vectors_dir, Suite};
use std::sync::Arc;

/// The reference Provider's setup for the suite: identity `a` granted
/// every scope, identity `b` all but `portfolio.sync` and `history.read`
/// (a second caller with less authority, §7.2), effects delayed 20 ms on a
/// real-time sleeper.
pub fn reference_config() -> ProviderConfig {
    let mut cfg = ProviderConfig::default();
    let mut b = ProviderConfig::all_scopes();
    b.remove("portfolio.sync");
    b.remove("history.read");
    cfg.grants
        .insert(IDENTITY_A.uid, ProviderConfig::all_scopes());
    cfg.grants.insert(IDENTITY_B.uid, b);
    cfg.effect_delay_ms = 20;
    cfg.sleeper = thread_sleeper();
    cfg
}

fn profile() -> Profile {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../profiles/reference.toml"
    ))
    .unwrap();
    Profile::from_toml(&text).unwrap()
}

/// Runs `suite` against a fresh in-process reference Provider, seed 7.
fn run_on_reference(suite: &Suite) -> cetp_conformance::runner::RunOutcome {
    let app = Arc::new(ReferenceProvider::new(reference_config()));
    let target = in_process_target(app, DeviceClock::system(0));
    let cfg = RunConfig {
        seed: 7,
        harness_version: "test".into(),
        ..Default::default()
    };
    run(suite, &target, &profile(), &cfg, &mut Fanout::default())
}

#[test]
fn reference_passes_everything() {
    let suite = Suite::load(&default_vectors_dir()).unwrap();
    let out = run_on_reference(&suite);
    let mut bad = Vec::new();
    for c in &out.cases {
        if !matches!(c.verdict, Verdict::Pass | Verdict::NotApplicable) {
            bad.push(format!("{} {:?}: {}", c.id, c.verdict, c.reason));
        }
    }
    for c in &out.checks {
        if c.verdict != Verdict::Pass {
            bad.push(format!("{} {:?}: {}", c.id, c.verdict, c.reason));
        }
    }
    // A case written for another manifest shape (NEG-014, v2-only) does not
    // apply to the dual-stack reference; any other N/A is a gap.
    let other_shape = |id: &str| {
        suite.cases.iter().any(|c| {
            c.id == id && !c.manifests.is_empty() && !c.manifests.iter().any(|m| m == "dual_stack")
        })
    };
    let na: Vec<String> = out
        .cases
        .iter()
        .filter(|c| c.verdict == Verdict::NotApplicable && !other_shape(&c.id))
        .map(|c| format!("{}: {}", c.id, c.reason))
        .collect();
    assert!(
        bad.is_empty(),
        "not passing:\n{}\n(not applicable: {na:?})",
        bad.join("\n")
    );
    assert!(out.claim.cetp_v2, "{}", out.claim.statement);
    assert!(
        na.is_empty(),
        "the reference is complete, nothing should be N/A: {na:?}"
    );
}

/// Throws on the first `negotiate` of the case, then behaves: a flaky
/// Provider. (The run's own first negotiate, the pin's probe before any
/// case, is answered.)
struct FlakyOnce {
    inner: ReferenceProvider,
    negotiated: std::sync::atomic::AtomicU32,
}

impl cetp_reference::app::ProviderApp for FlakyOnce {
    fn manifests(&self) -> Vec<cetp_proto::provider::ServiceManifest> {
        self.inner.manifests()
    }
    fn authority(&self) -> String {
        self.inner.authority()
    }
    fn call(
        &self,
        caller: &cetp_proto::provider::CallerIdentity,
        now_ms: i64,
        call: &cetp_proto::provider::ProviderCall,
    ) -> cetp_proto::provider::Reply {
        if call.method == "negotiate"
            && self
                .negotiated
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
                == 1
        {
            return cetp_proto::provider::Reply::Threw {
                class: "java.lang.IllegalStateException".into(),
                message: "not ready".into(),
            };
        }
        self.inner.call(caller, now_ms, call)
    }
    fn resolve(
        &self,
        launcher: &cetp_proto::provider::CallerIdentity,
        target: &cetp_proto::provider::IntentTarget,
        decision: cetp_proto::provider::Decision,
        now_ms: i64,
    ) -> cetp_proto::provider::ResolveOutcome {
        self.inner.resolve(launcher, target, decision, now_ms)
    }
    fn restart(&self) {
        self.inner.restart()
    }
}

#[test]
fn disagreeing_attempts_are_flaky_never_a_pass() {
    let suite = Suite::load(&default_vectors_dir()).unwrap();
    let run_with = |attempts: u32| {
        let app = Arc::new(FlakyOnce {
            inner: ReferenceProvider::new(reference_config()),
            negotiated: Default::default(),
        });
        let target = in_process_target(app, DeviceClock::system(0));
        let cfg = RunConfig {
            seed: 7,
            attempts,
            only: vec!["NEG-002".into()],
            harness_version: "test".into(),
            ..Default::default()
        };
        run(&suite, &target, &profile(), &cfg, &mut Fanout::default())
    };
    let once = run_with(1);
    assert_eq!(
        once.cases[0].verdict,
        Verdict::Fail,
        "{}",
        once.cases[0].reason
    );
    let twice = run_with(2);
    assert_eq!(
        twice.cases[0].verdict,
        Verdict::Flaky,
        "{}",
        twice.cases[0].reason
    );
    assert!(
        twice.cases[0].reason.contains("attempt 1: FAIL")
            && twice.cases[0].reason.contains("attempt 2: PASS")
    );
    assert_eq!(twice.exit, cetp_conformance::exit::ExitCode::Fail);
}

#[test]
fn a_second_run_against_the_same_device_is_not_answered_from_the_first() {
    // The Provider keeps de-duplication records for a day; a second run
    // with the same seed must still send fresh request ids.
    let suite = Suite::load(&default_vectors_dir()).unwrap();
    let app = Arc::new(ReferenceProvider::new(reference_config()));
    let target = in_process_target(app, DeviceClock::system(0));
    for started_at_ms in [1_000, 2_000] {
        let cfg = RunConfig {
            seed: 7,
            started_at_ms,
            only: vec!["IDEM-*".into(), "CONF-00*".into(), "ASYNC-001".into()],
            harness_version: "test".into(),
            ..Default::default()
        };
        let out = run(&suite, &target, &profile(), &cfg, &mut Fanout::default());
        let bad: Vec<String> = out
            .cases
            .iter()
            .filter(|c| c.verdict != Verdict::Pass)
            .map(|c| format!("{} {:?}: {}", c.id, c.verdict, c.reason))
            .collect();
        assert!(bad.is_empty(), "run at {started_at_ms}: {bad:?}");
    }
}

/// Plays no decision: the UI selectors missed (or the device has no UI
/// automation), so the Provider's confirmation never got the user's answer.
struct UiMisses(ReferenceProvider);

impl cetp_reference::app::ProviderApp for UiMisses {
    fn manifests(&self) -> Vec<cetp_proto::provider::ServiceManifest> {
        self.0.manifests()
    }
    fn authority(&self) -> String {
        self.0.authority()
    }
    fn call(
        &self,
        caller: &cetp_proto::provider::CallerIdentity,
        now_ms: i64,
        call: &cetp_proto::provider::ProviderCall,
    ) -> cetp_proto::provider::Reply {
        self.0.call(caller, now_ms, call)
    }
    fn resolve(
        &self,
        _launcher: &cetp_proto::provider::CallerIdentity,
        _target: &cetp_proto::provider::IntentTarget,
        _decision: cetp_proto::provider::Decision,
        _now_ms: i64,
    ) -> cetp_proto::provider::ResolveOutcome {
        cetp_proto::provider::ResolveOutcome {
            launched: true,
            decision_applied: false,
            result_code: 0,
            launched_package: None,
        }
    }
    fn restart(&self) {
        self.0.restart()
    }
}

#[test]
fn an_unapplied_decision_is_infra_error_never_a_verdict() {
    let suite = Suite::load(&default_vectors_dir()).unwrap();
    let app = Arc::new(UiMisses(ReferenceProvider::new(reference_config())));
    let target = in_process_target(app, DeviceClock::system(0));
    let cfg = RunConfig {
        seed: 7,
        only: vec!["CONF-*".into()],
        harness_version: "test".into(),
        ..Default::default()
    };
    let out = run(&suite, &target, &profile(), &cfg, &mut Fanout::default());
    // Every case that plays a decision (approve, deny) is INFRA_ERROR: no
    // PASS on a binding never exercised, no FAIL charged to the Provider.
    for id in [
        "CONF-001", "CONF-002", "CONF-004", "CONF-005", "CONF-006", "CONF-009",
    ] {
        let c = out.cases.iter().find(|c| c.id == id).unwrap();
        assert_eq!(c.verdict, Verdict::InfraError, "{id}: {}", c.reason);
        assert!(c.reason.contains("not applied"), "{id}: {}", c.reason);
    }
    assert!(out.cases.iter().all(|c| c.verdict != Verdict::Fail));
    assert_eq!(out.exit, cetp_conformance::exit::ExitCode::Infra);
}

/// A device whose `resolve` fails with `error` (kind, message), every
/// other op answered by the in-process device: what the JVM device answers
/// when the Provider's activity throws, or when a selector matches nothing.
struct ResolveFails {
    inner: Box<dyn cetp_vectors::device::Device>,
    error: (cetp_vectors::device::ErrorKind, &'static str),
}

impl cetp_vectors::device::Device for ResolveFails {
    fn hello(&self) -> Result<cetp_vectors::device::HelloInfo, cetp_vectors::device::DeviceError> {
        self.inner.hello()
    }
    fn now_ms(&self) -> i64 {
        self.inner.now_ms()
    }
    fn sleep_ms(&self, ms: u64) {
        self.inner.sleep_ms(ms)
    }
    fn discover(
        &self,
    ) -> Result<Vec<cetp_proto::provider::ServiceManifest>, cetp_vectors::device::DeviceError> {
        self.inner.discover()
    }
    fn call(
        &self,
        authority: &str,
        method: &str,
        arg: Option<&str>,
        extras: Option<&cetp_proto::Bundle>,
        timeout_ms: u64,
    ) -> Result<cetp_proto::device::CallAnswer, cetp_vectors::device::DeviceError> {
        self.inner.call(authority, method, arg, extras, timeout_ms)
    }
    fn read_fd(
        &self,
        handle: &str,
        max_bytes: u64,
    ) -> Result<cetp_proto::device::FdRead, cetp_vectors::device::DeviceError> {
        self.inner.read_fd(handle, max_bytes)
    }
    fn close_fd(&self, handle: &str) -> Result<(), cetp_vectors::device::DeviceError> {
        self.inner.close_fd(handle)
    }
    fn resolve(
        &self,
        _handle: &str,
        _decision: cetp_proto::provider::Decision,
        _ui: Option<&serde_json::Value>,
        _timeout_ms: u64,
    ) -> Result<cetp_proto::provider::ResolveOutcome, cetp_vectors::device::DeviceError> {
        Err(cetp_vectors::device::DeviceError::new(
            self.error.0.clone(),
            self.error.1,
        ))
    }
    fn restart_provider(&self, package: &str) -> Result<(), cetp_vectors::device::DeviceError> {
        self.inner.restart_provider(package)
    }
    fn advance_clock(&self, ms: u64) -> Result<i64, cetp_vectors::device::DeviceError> {
        self.inner.advance_clock(ms)
    }
    fn resync_clock(&self) -> Result<(), cetp_vectors::device::DeviceError> {
        self.inner.resync_clock()
    }
}

/// The CONF cases on a device whose every `resolve` fails with `error`.
fn conf_cases_when_resolve_fails(
    error: (cetp_vectors::device::ErrorKind, &'static str),
) -> cetp_conformance::runner::RunOutcome {
    let suite = Suite::load(&default_vectors_dir()).unwrap();
    let app = Arc::new(ReferenceProvider::new(reference_config()));
    let inner = in_process_target(app, DeviceClock::system(0));
    let target = cetp_vectors::device::Target {
        label: inner.label,
        a: Box::new(ResolveFails {
            inner: inner.a,
            error: error.clone(),
        }),
        b: inner.b.map(|b| {
            Box::new(ResolveFails { inner: b, error }) as Box<dyn cetp_vectors::device::Device>
        }),
    };
    let cfg = RunConfig {
        seed: 7,
        only: vec!["CONF-*".into()],
        harness_version: "test".into(),
        ..Default::default()
    };
    run(&suite, &target, &profile(), &cfg, &mut Fanout::default())
}

const PLAYS_A_DECISION: [&str; 7] = [
    "CONF-001", "CONF-002", "CONF-004", "CONF-005", "CONF-006", "CONF-007", "CONF-009",
];

#[test]
fn a_confirmation_activity_that_throws_fails_the_case_naming_the_exception() {
    let out = conf_cases_when_resolve_fails((
        cetp_vectors::device::ErrorKind::ProviderException,
        "device error provider_exception: the Provider's activity com.example.ConfirmActivity threw when its approve view was clicked: java.lang.IllegalStateException: boom (java.lang.IllegalStateException)",
    ));
    for id in PLAYS_A_DECISION {
        let c = out.cases.iter().find(|c| c.id == id).unwrap();
        assert_eq!(c.verdict, Verdict::Fail, "{id}: {}", c.reason);
        assert!(
            c.reason.contains("confirmation activity threw")
                && c.reason.contains("java.lang.IllegalStateException: boom"),
            "{id}: {}",
            c.reason
        );
        assert_eq!(c.cited, vec!["CETP2-4.3-06".to_string()], "{id}");
    }
}

#[test]
fn a_selector_that_matched_nothing_is_infra_error_with_the_devices_words() {
    let out = conf_cases_when_resolve_fails((
        cetp_vectors::device::ErrorKind::DeviceError,
        "device error device_error: the approve decision was not played: the selector {text = \"Allow\"} matched no view on the screen of com.example.ConfirmActivity; on screen: text \"CONFIRM\" (resource_id \"android:id/button1\")",
    ));
    for id in PLAYS_A_DECISION {
        let c = out.cases.iter().find(|c| c.id == id).unwrap();
        assert_eq!(c.verdict, Verdict::InfraError, "{id}: {}", c.reason);
        assert!(
            c.reason.contains("{text = \"Allow\"} matched no view")
                && c.reason.contains("on screen: text \"CONFIRM\""),
            "{id}: {}",
            c.reason
        );
    }
    assert!(out.cases.iter().all(|c| c.verdict != Verdict::Fail));
}

#[test]
fn a_provider_that_refuses_by_throwing_fails_the_refusal_cases() {
    let suite = Suite::load(&default_vectors_dir()).unwrap();
    let app = Arc::new(ReferenceProvider::new(ProviderConfig {
        faults: std::collections::BTreeSet::from([cetp_reference::provider::Mutant::parse(
            "refusals_thrown",
        )
        .unwrap()]),
        ..reference_config()
    }));
    let target = in_process_target(app, DeviceClock::system(0));
    let cfg = RunConfig {
        seed: 7,
        harness_version: "test".into(),
        ..Default::default()
    };
    let out = run(&suite, &target, &profile(), &cfg, &mut Fanout::default());
    let verdict = |id: &str| out.cases.iter().find(|c| c.id == id).unwrap().clone();
    // An exception is never a refusal (§5): the cases that expect one fail.
    for id in ["NEG-007", "CONF-004", "CONF-005", "CONF-006"] {
        let c = verdict(id);
        assert_eq!(c.verdict, Verdict::Fail, "{id}: {}", c.reason);
    }
    // And the envelope check judges the exception, naming its class and
    // citing the error-envelope rule only.
    let env = out.checks.iter().find(|c| c.id == "CHK-ENVELOPE").unwrap();
    assert_eq!(env.verdict, Verdict::Fail);
    assert!(env.reason.contains("threw"), "{}", env.reason);
    assert_eq!(env.cited, vec!["CETP2-5-01".to_string()]);
    assert!(!out.claim.cetp_v2);
}

/// `advance_clock` with a list of `until` times moves to the latest: a
/// session negotiated a second and a half after another has expired too,
/// where a jump past the first one's `expires_at` alone leaves it alive
/// (the fuzzer's false finding on slow devices came from that).
#[test]
fn advance_until_a_list_passes_every_lifetime_named() {
    let case = |until: serde_json::Value, second: &str| {
        serde_json::json!({"format_version": 1, "group": "until-test", "description": "until", "cases": [{
            "id": "UNTIL-1", "title": "until", "role": "provider", "level": "MUST",
            "requirements": ["CETP2-2.2-13"],
            "steps": [
                {"do": "negotiate", "bind": "s1"},
                {"do": "sleep", "ms": 1500},
                {"do": "negotiate", "bind": "s2"},
                {"do": "advance_clock", "until": until, "plus_ms": 1000},
                {"do": "call", "method": "list_tools", "session": "s1",
                 "expect": {"status": ["error"], "error_code": ["NEGOTIATION_REQUIRED"]}},
                {"do": "call", "method": "list_tools", "session": "s2",
                 "expect": {"status": [second]}}
            ]
        }]})
    };
    let run_case = |file: serde_json::Value| {
        let mut suite = Suite::load(&default_vectors_dir()).unwrap();
        suite.cases = cetp_vectors::vector::VectorFile::from_json(&file.to_string())
            .unwrap()
            .cases;
        let out = run_on_reference(&suite);
        (out.cases[0].verdict, out.cases[0].reason.clone())
    };
    let only_first = run_case(case(serde_json::json!("${s1/data/expires_at}"), "success"));
    assert_eq!(only_first.0, Verdict::Pass, "{}", only_first.1);
    let both = case(
        serde_json::json!(["${s1/data/expires_at}", "${s2/data/expires_at}"]),
        "error",
    );
    let latest = run_case(both);
    assert_eq!(latest.0, Verdict::Pass, "{}", latest.1);
    // Nothing to wait for: the case is not applicable, never a verdict.
    let na = run_case(case(serde_json::json!(["${s1/data/nothing}"]), "error"));
    assert_eq!(na.0, Verdict::NotApplicable, "{}", na.1);
}

/// Answers the first `remaining` execute_tool calls UNAVAILABLE (retryable,
/// `retry_after_ms` 50), recording the request id of every call it sees.
struct Unavailable {
    inner: ReferenceProvider,
    remaining: std::sync::atomic::AtomicU32,
    seen: std::sync::Mutex<Vec<String>>,
}

impl cetp_reference::app::ProviderApp for Unavailable {
    fn manifests(&self) -> Vec<cetp_proto::provider::ServiceManifest> {
        self.inner.manifests()
    }
    fn authority(&self) -> String {
        self.inner.authority()
    }
    fn call(
        &self,
        caller: &cetp_proto::provider::CallerIdentity,
        now_ms: i64,
        call: &cetp_proto::provider::ProviderCall,
    ) -> cetp_proto::provider::Reply {
        use cetp_proto::envelope::{keys, ErrorEnvelope};
        use std::sync::atomic::Ordering;
        let rid = call
            .extras
            .as_ref()
            .and_then(|b| b.opt_string(keys::REQUEST_ID).ok().flatten());
        if call.method == "execute_tool" {
            self.seen
                .lock()
                .unwrap()
                .push(rid.clone().unwrap_or_default());
            let left = self.remaining.load(Ordering::SeqCst);
            if left > 0 {
                self.remaining.store(left - 1, Ordering::SeqCst);
                let env = ErrorEnvelope {
                    code: "UNAVAILABLE".into(),
                    message: "Warming up.".into(),
                    retryable: true,
                    protocol_version: Some(2),
                    request_id: rid,
                    details: None,
                    retry_after_ms: Some(50),
                    resolution: None,
                    resume_token: None,
                };
                return cetp_proto::provider::Reply::Result {
                    bundle: Some(env.to_bundle()),
                    attachments: Vec::new(),
                };
            }
        }
        self.inner.call(caller, now_ms, call)
    }
    fn resolve(
        &self,
        launcher: &cetp_proto::provider::CallerIdentity,
        target: &cetp_proto::provider::IntentTarget,
        decision: cetp_proto::provider::Decision,
        now_ms: i64,
    ) -> cetp_proto::provider::ResolveOutcome {
        self.inner.resolve(launcher, target, decision, now_ms)
    }
    fn restart(&self) {
        self.inner.restart()
    }
}

#[test]
fn a_retryable_answer_is_retried_with_its_request_id_before_it_is_judged() {
    let suite = Suite::load(&default_vectors_dir()).unwrap();
    let run_with = |unavailable: u32| {
        let app = Arc::new(Unavailable {
            inner: ReferenceProvider::new(reference_config()),
            remaining: unavailable.into(),
            seen: Default::default(),
        });
        let target = in_process_target(app.clone(), DeviceClock::system(0));
        let cfg = RunConfig {
            seed: 7,
            only: vec!["EXE-002".into()],
            harness_version: "test".into(),
            ..Default::default()
        };
        let out = run(&suite, &target, &profile(), &cfg, &mut Fanout::default());
        let seen = app.seen.lock().unwrap().clone();
        (out, seen)
    };
    // Two UNAVAILABLE answers, then the real one: retried, judged, passed.
    let (out, seen) = run_with(2);
    assert_eq!(
        out.cases[0].verdict,
        Verdict::Pass,
        "{}",
        out.cases[0].reason
    );
    // The observer's reads are executions too; the create is sent three
    // times under one request id.
    let mut counts = std::collections::BTreeMap::<&str, usize>::new();
    for r in &seen {
        *counts.entry(r.as_str()).or_default() += 1;
    }
    assert!(
        counts.values().any(|&n| n >= 3),
        "no request id was retried: {seen:?}"
    );
    // Unavailable for good: the retries are bounded and the last answer is
    // judged (a FAIL), never skipped as not judged.
    let (out, seen) = run_with(1_000);
    assert_eq!(
        out.cases[0].verdict,
        Verdict::Fail,
        "{}",
        out.cases[0].reason
    );
    assert!(
        out.cases[0].reason.contains("UNAVAILABLE"),
        "{}",
        out.cases[0].reason
    );
    assert!(
        seen.len() <= 6 * 3,
        "unbounded retries: {} calls",
        seen.len()
    );
}
