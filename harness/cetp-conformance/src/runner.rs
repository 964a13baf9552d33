//! The Provider half of a run: identify and pin the target, then run the
//! selected cases through the [`crate::dispatch::Dispatcher`] (this module
//! is their executor), judge the checks over every answer, and state the §9
//! claim the run statistics ([`crate::stats`]) allow. Emits the event stream.

use crate::device::{HelloInfo, Target};
use crate::dispatch::{AttemptFolder, CaseInfo, Dispatcher, Executed};
use crate::event::{Claim, Event, Fanout, Summary, Verdict};
use crate::exit::ExitCode;
use crate::interp::{CaseRunner, CheckTally, Env, Stop};
use crate::profile::Profile;
use crate::suite::{Baseline, Suite};
use crate::vector::{Case, Level, Role};
use cetp_proto::discovery::{parse_manifest, Declared};
use cetp_proto::envelope::Capability;
use rand::SeedableRng;
use serde_json::json;
use std::collections::BTreeMap;
use std::time::Instant;

#[derive(Clone, Debug, Default)]
pub struct RunConfig {
    pub seed: u64,
    /// Attempts per case that does not pass (1 = no retry).
    pub attempts: u32,
    /// Case id patterns (`*` wildcards); empty = all.
    pub only: Vec<String>,
    pub skip: Vec<String>,
    pub baseline: Option<Baseline>,
    /// Included in the config hash: the harness version and anything else
    /// that changes behaviour.
    pub harness_version: String,
    /// Wall clock at start (Unix ms), passed in so runs are reproducible in
    /// tests.
    pub started_at_ms: i64,
    /// A contract lock to hold the target to: adds `LOCK-001`.
    pub lock: Option<cetp_contract::Lock>,
    /// Bounds the whole run (`--run-timeout`): no step starts after it, and
    /// the cases left are INFRA_ERROR.
    pub run_timeout: Option<std::time::Duration>,
    /// Set from outside (Ctrl-C) to stop the run at the next step
    /// boundary; the cases left are INFRA_ERROR and the run can be resumed
    /// from its journal.
    pub interrupt: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// SHA-256 of each Provider APK the target installs before the run
    /// (`adb:…,install=`), pinned: the build under test when it is known.
    pub provider_apks: Vec<String>,
}

pub use crate::stats::{CaseOutcome, CheckOutcome};

#[derive(Clone, Debug)]
pub struct RunOutcome {
    pub run_id: String,
    pub config_hash: String,
    /// What the verdicts depend on ([`crate::pin`]).
    pub pin: crate::pin::Pin,
    pub cases: Vec<CaseOutcome>,
    pub checks: Vec<CheckOutcome>,
    pub stale_baseline: Vec<String>,
    pub summary: Summary,
    pub claim: Claim,
    pub exit: ExitCode,
    /// The run stopped before its end (Ctrl-C or `--run-timeout`): its
    /// journal is left open for `cetp resume`.
    pub interrupted: bool,
}

/// `*` matches any run of characters; everything else matches itself.
pub fn wildcard(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let mut rest = text;
    for (i, part) in parts.iter().enumerate() {
        if i == 0 {
            match rest.strip_prefix(part) {
                Some(r) => rest = r,
                None => return false,
            }
        } else if i == parts.len() - 1 {
            return rest.ends_with(part);
        } else {
            match rest.find(part) {
                Some(at) => rest = &rest[at + part.len()..],
                None => return false,
            }
        }
    }
    true
}

pub fn selected<'s>(suite: &'s Suite, cfg: &RunConfig) -> Vec<&'s Case> {
    suite
        .cases
        .iter()
        .filter(|c| c.role == Role::Provider)
        .filter(|c| cfg.only.is_empty() || cfg.only.iter().any(|p| wildcard(p, &c.id)))
        .filter(|c| !cfg.skip.iter().any(|p| wildcard(p, &c.id)))
        .collect()
}

fn manifest_kind(d: &Declared) -> &'static str {
    match (d.versions.contains(&1), d.versions.contains(&2)) {
        (true, true) => "dual_stack",
        (false, true) => "v2_only",
        (true, false) => "v1_only",
        _ => "other",
    }
}

/// Identifies the Provider under test: the profile's package, or the only
/// discovered Provider.
pub fn identify(target: &Target, profile: &Profile) -> Result<(Option<HelloInfo>, Env), String> {
    let hello = target.a.hello().map_err(|e| format!("hello failed: {e}"))?;
    if let Some(b) = &target.b {
        b.hello()
            .map_err(|e| format!("hello on the second identity failed: {e}"))?;
    }
    let found = target
        .a
        .discover()
        .map_err(|e| format!("discover failed: {e}"))?;
    let manifest = match &profile.target.package {
        Some(p) => found.iter().find(|m| &m.package == p).cloned(),
        None if found.len() == 1 => found.first().cloned(),
        None if found.is_empty() => None,
        None => {
            let names: Vec<&str> = found.iter().map(|m| m.package.as_str()).collect();
            return Err(format!(
                "several Providers were discovered ({}); name one with [target] package in the profile",
                names.join(", ")
            ));
        }
    };
    let package = profile
        .target
        .package
        .clone()
        .or_else(|| manifest.as_ref().map(|m| m.package.clone()))
        .ok_or("no Provider was discovered and the profile names none")?;
    let declared = manifest.as_ref().and_then(|m| parse_manifest(m).ok());
    let authority = profile
        .target
        .authority
        .clone()
        .or_else(|| declared.as_ref().map(|d| d.authority.clone()))
        .ok_or("the Provider declares no authority and the profile names none")?;
    let kind = declared.as_ref().map(manifest_kind).unwrap_or("other");
    let identity_a = json!({"uid": hello.uid, "packages": hello.packages});
    Ok((
        Some(hello),
        Env {
            package,
            authority,
            manifest_kind: kind.to_string(),
            declared,
            manifest,
            identity_a,
        },
    ))
}

pub fn config_hash(suite: &Suite, target: &Target, profile: &Profile, cfg: &RunConfig) -> String {
    let doc = serde_json::json!({
        "harness": cfg.harness_version,
        "vectors": suite.fingerprint,
        "target": target.label,
        "profile": format!("{profile:?}"),
        "seed": cfg.seed,
        "only": cfg.only,
        "skip": cfg.skip,
    });
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
    d.emit(Event::RunStarted {
        run_id: run_id.clone(),
        harness: cfg.harness_version.clone(),
        target: target.label.clone(),
        seed: cfg.seed,
        config_hash: config_hash.clone(),
        started_at_ms: cfg.started_at_ms,
        cases: cases.len(),
        only: cfg.only.clone(),
        skip: cfg.skip.clone(),
        attempts: cfg.attempts,
    });
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
            stalls: crate::stall::Stalls::new(),
            deadline: cfg.run_timeout.map(|t| started + t),
            interrupt: interrupt.clone(),
        };
        for (i, case) in cases.iter().enumerate() {
            d.run_case(case_info(case), |out| {
                exec.attempts(case, i, &mut tally, out)
            });
        }
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
    judge_checks(suite, &tally, &mut d);
    d.stale_baseline(|id| {
        suite.cases.iter().any(|c| c.id == id) || suite.checks.iter().any(|c| c.id == id)
    });
    let filtered = !cfg.only.is_empty() || !cfg.skip.is_empty();
    let claim = d.stats().provider_claim(
        env.as_ref(),
        negotiated.as_ref().map(|n| &n.capabilities),
        filtered,
    );
    // A Ctrl-C that came after the last step cut nothing: the run ended.
    let finished = d.finish(claim, interrupt.load(std::sync::atomic::Ordering::SeqCst));
    RunOutcome {
        run_id,
        config_hash,
        pin,
        interrupted: finished.stats.cut,
        cases: finished.stats.cases,
        checks: finished.stats.checks,
        stale_baseline: finished.stats.stale_baseline,
        summary: finished.summary,
        claim: finished.claim,
        exit: finished.exit,
    }
}

fn case_info(case: &Case) -> CaseInfo {
    CaseInfo {
        id: case.id.clone(),
        title: case.title.clone(),
        requirements: case.requirements.clone(),
        needs: case.needs.clone(),
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
            d.emit(Event::TargetIdentified {
                hello: hello.clone(),
                package: Some(env.package.clone()),
                authority: Some(env.authority.clone()),
                manifest: env.manifest_kind.clone(),
                declared_versions: env
                    .declared
                    .as_ref()
                    .map(|d| d.versions.iter().copied().collect())
                    .unwrap_or_default(),
            });
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
struct CaseExecutor<'r> {
    target: &'r Target,
    profile: &'r Profile,
    env: &'r Env,
    cfg: &'r RunConfig,
    stalls: crate::stall::Stalls,
    deadline: Option<Instant>,
    interrupt: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl CaseExecutor<'_> {
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
        for attempt in 0..self.cfg.attempts.max(1) {
            let rng = run_rng(self.cfg, i, attempt);
            // Straight to the reporters, so that the journal
            // (events.ndjson, flushed per event) holds each step, and
            // each dispatch record, before the next call goes out.
            let mut emit = |e: Event| out.emit(e);
            let mut runner =
                CaseRunner::new(self.target, self.profile, self.env, &mut emit, tally, rng)
                    .guarded(&self.stalls, self.deadline, &self.interrupt);
            let result = runner.run(case);
            let cited = if result.is_err() {
                runner.cited.clone()
            } else {
                Vec::new()
            };
            let mut e = executed(case, result);
            e.cited = cited;
            if folder.push(e) {
                break;
            }
        }
        folder.fold()
    }
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
fn run_rng(cfg: &RunConfig, i: usize, attempt: u32) -> rand_chacha::ChaCha8Rng {
    rand_chacha::ChaCha8Rng::seed_from_u64(
        cfg.seed
            ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
            ^ u64::from(attempt)
            ^ (cfg.started_at_ms as u64).wrapping_mul(0xD1B5_4A32_D192_ED03),
    )
}

/// What the target negotiates when offered every capability, and the tool
/// list's revision in that session (for the capability claim and the pin).
fn probe_capabilities(
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
                request_id: crate::interp::seeded_uuid(&mut rng),
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
