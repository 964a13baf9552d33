//! The descriptor oracle end to end: the shadow built from a target's own
//! descriptors judges the reference, the notes fixture and legal variants
//! without a finding, finds mutants where the protocol decides, reports a
//! failure that does not reproduce as flaky, and, without a profile, runs
//! only read tools.

use cetp_conformance::runner::{run, RunConfig};
use cetp_fuzz::{FuzzConfig, Fuzzer, OracleChoice};
use cetp_proto::device::{CallAnswer, FdRead};
use cetp_proto::provider::{Decision, ResolveOutcome, ServiceManifest};
use cetp_proto::{Bundle, Value};
use cetp_targets::{open, TargetSpec};
use cetp_vectors::device::{Device, DeviceError, HelloInfo, Target};
use cetp_vectors::event::{Fanout, Verdict};
use cetp_vectors::profile::Profile;
use cetp_vectors::suite::Suite;
use cetp_vectors::vector::VectorFile;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

fn vectors() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../vectors")
}

fn profile(name: &str) -> Profile {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../profiles")
        .join(name);
    Profile::from_toml(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn fuzz_on(t: Target, profile: &Profile, cases: u64, seed: u64) -> cetp_fuzz::FuzzReport {
    let suite = Suite::load(&vectors()).unwrap();
    let (_, env) = cetp_conformance::runner::identify(&t, profile).unwrap();
    let cfg = FuzzConfig {
        seed,
        cases: Some(cases),
        max_findings: 1,
        shrink_runs: 16,
        oracle: OracleChoice::Descriptor,
        ..FuzzConfig::default()
    };
    let mut f = Fuzzer::new(t, profile, env, &suite.rules, cfg).unwrap();
    assert_eq!(f.oracle_kind(), "descriptor");
    f.run(&mut |_| {})
}

fn fuzz(target: &str, profile_name: &str, cases: u64, seed: u64) -> cetp_fuzz::FuzzReport {
    let t = open(&TargetSpec::parse(target).unwrap()).unwrap();
    fuzz_on(t, &profile(profile_name), cases, seed)
}

fn replay(
    file: &serde_json::Value,
    target: &str,
    p: &Profile,
) -> cetp_conformance::runner::RunOutcome {
    let mut suite = Suite::load(&vectors()).unwrap();
    suite.cases = VectorFile::from_json(&file.to_string()).unwrap().cases;
    let t = open(&TargetSpec::parse(target).unwrap()).unwrap();
    let cfg = RunConfig {
        seed: 99,
        attempts: 1,
        started_at_ms: 1_700_000_000_000,
        ..RunConfig::default()
    };
    run(&suite, &t, p, &cfg, &mut Fanout::default())
}

/// The reference and the notes fixture, each judged only through its own
/// descriptors (the differential oracle knows them, this one does not), and
/// the legal variants whose answers differ most: no finding, no note.
#[test]
fn conforming_providers_get_no_finding_through_the_descriptor_oracle() {
    for (target, prof, cases) in [
        ("sim", "reference.toml", 60),
        ("sim:provider=notes", "notes.toml", 40),
        (
            "sim:variant=confirm_with_auth_required",
            "reference.toml",
            25,
        ),
        ("sim:variant=sessions_survive_restart", "reference.toml", 25),
        ("sim:variant=hide_tools_without_scope", "reference.toml", 25),
        ("sim:variant=replay_returns_terminal", "reference.toml", 25),
    ] {
        let r = fuzz(target, prof, cases, 5);
        assert_eq!(r.oracle_kind, "descriptor");
        assert!(r.findings.is_empty(), "{target}: {:#?}", r.findings);
        assert!(r.oracle_notes.is_empty(), "{target}: {:#?}", r.oracle_notes);
        assert!(r.stats.judged * 10 >= cases * 8, "{target}: {:?}", r.stats);
    }
}

/// Where the protocol decides (a session that is no longer valid), the
/// descriptor oracle's expectation is exact: the mutant that stops checking
/// tokens is found, and the finding replays as a regular case that fails on
/// the mutant and passes on the reference.
#[test]
fn a_protocol_mutant_is_found_and_replays() {
    let p = profile("reference.toml");
    let r = fuzz("sim:mutant=session_not_checked", "reference.toml", 40, 7);
    let f = r.findings.first().expect("the mutant is found");
    let on_mutant = replay(&f.file, "sim:mutant=session_not_checked", &p);
    assert!(
        on_mutant.cases.iter().any(|c| c.verdict == Verdict::Fail)
            || on_mutant.checks.iter().any(|c| c.verdict == Verdict::Fail),
        "the replay reproduces it: {:?}",
        on_mutant.cases
    );
    let on_reference = replay(&f.file, "sim", &p);
    assert!(
        on_reference
            .cases
            .iter()
            .all(|c| c.verdict == Verdict::Pass),
        "{:?}",
        on_reference.cases
    );
}

/// An effect before confirmation is visible to the observer: the shadow
/// expects none until the confirmation, whatever the business answered.
#[test]
fn an_effect_before_confirmation_is_found() {
    let r = fuzz(
        "sim:mutant=effect_before_confirmation",
        "reference.toml",
        40,
        7,
    );
    assert!(!r.findings.is_empty(), "{:?}", r.stats);
}

/// What only the vendor's profile can tell the oracle: identity b lacks the
/// scope of its `scope_missing_for_b` tool (§3.4, §7.2), and the notes app's
/// observer counts objects, so a delete that happens before its
/// confirmation (§4.3) shows as one note fewer where the shadow committed
/// nothing.
#[test]
fn what_the_profile_tells_finds_scope_and_effect_mutants() {
    for (target, cases) in [
        ("sim:provider=notes,mutant=scope_not_enforced", 12),
        ("sim:provider=notes,mutant=effect_before_confirmation", 8),
    ] {
        let r = fuzz(target, "notes.toml", cases, 7);
        assert!(!r.findings.is_empty(), "{target}: {:?}", r.stats);
    }
}

/// A device that, once, answers one `list_tools` call as if the method did
/// not exist: a failure the same moves do not show again.
struct OnceWrong {
    inner: Box<dyn Device>,
    calls: Arc<AtomicUsize>,
}

impl Device for OnceWrong {
    fn hello(&self) -> Result<HelloInfo, DeviceError> {
        self.inner.hello()
    }
    fn now_ms(&self) -> i64 {
        self.inner.now_ms()
    }
    fn sleep_ms(&self, ms: u64) {
        self.inner.sleep_ms(ms)
    }
    fn discover(&self) -> Result<Vec<ServiceManifest>, DeviceError> {
        self.inner.discover()
    }
    fn call(
        &self,
        authority: &str,
        method: &str,
        arg: Option<&str>,
        extras: Option<&Bundle>,
        timeout_ms: u64,
    ) -> Result<CallAnswer, DeviceError> {
        let r = self
            .inner
            .call(authority, method, arg, extras, timeout_ms)?;
        if method != "list_tools" {
            return Ok(r);
        }
        // The learning runs and the first sequences pass; one later call
        // is answered wrong, once.
        if self.calls.fetch_add(1, Ordering::SeqCst) != 6 {
            return Ok(r);
        }
        match r {
            CallAnswer::Result(Some(mut b)) => {
                b.insert("status", Value::String("error".into()));
                b.insert("error_code", Value::String("METHOD_NOT_FOUND".into()));
                b.insert("error_message", Value::String("No such method.".into()));
                b.insert("retryable", Value::Bool(false));
                b.remove("data");
                Ok(CallAnswer::Result(Some(b)))
            }
            other => Ok(other),
        }
    }
    fn read_fd(&self, handle: &str, max_bytes: u64) -> Result<FdRead, DeviceError> {
        self.inner.read_fd(handle, max_bytes)
    }
    fn close_fd(&self, handle: &str) -> Result<(), DeviceError> {
        self.inner.close_fd(handle)
    }
    fn resolve(
        &self,
        handle: &str,
        decision: Decision,
        ui: Option<&serde_json::Value>,
        timeout_ms: u64,
    ) -> Result<ResolveOutcome, DeviceError> {
        self.inner.resolve(handle, decision, ui, timeout_ms)
    }
    fn restart_provider(&self, package: &str) -> Result<(), DeviceError> {
        self.inner.restart_provider(package)
    }
    fn advance_clock(&self, ms: u64) -> Result<i64, DeviceError> {
        self.inner.advance_clock(ms)
    }
    fn resync_clock(&self) -> Result<(), DeviceError> {
        self.inner.resync_clock()
    }
}

/// A failure that does not come back when the same moves run again is not
/// charged: it is reported as flaky, and the run has no finding.
#[test]
fn a_failure_that_does_not_reproduce_is_flaky_not_a_finding() {
    let t = open(&TargetSpec::parse("sim").unwrap()).unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let t = Target {
        label: t.label,
        a: Box::new(OnceWrong {
            inner: t.a,
            calls: calls.clone(),
        }),
        b: t.b,
    };
    let r = fuzz_on(t, &profile("reference.toml"), 30, 3);
    assert!(
        calls.load(Ordering::SeqCst) > 7,
        "the wrong answer was sent"
    );
    assert!(r.findings.is_empty(), "{:#?}", r.findings);
    assert!(
        r.flaky
            .iter()
            .any(|f| f.message.contains("METHOD_NOT_FOUND")),
        "{:#?}",
        r.flaky
    );
}

/// Without a profile (nothing in `[execute] allow`), only read tools and
/// the protocol surface are fuzzed: no side-effecting call is sent.
#[test]
fn without_a_profile_only_read_tools_run() {
    let t = open(&TargetSpec::parse("sim").unwrap()).unwrap();
    let r = fuzz_on(t, &Profile::default(), 30, 9);
    assert_eq!(r.stats.dispatched, 0, "{:?}", r.stats);
    assert!(r.findings.is_empty(), "{:#?}", r.findings);
    assert!(r.stats.judged > 0);
}
