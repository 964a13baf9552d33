//! A run: identify the target, run the selected cases, judge the checks,
//! apply the baseline, and state the §9 claim. Emits the event stream.

use crate::device::{HelloInfo, Target};
use crate::event::{CapabilityClaim, Claim, Event, Fanout, Summary, Unjudged, Verdict};
use crate::exit::ExitCode;
use crate::interp::{CaseRunner, CheckTally, Env, Stop};
use crate::profile::Profile;
use crate::suite::{Baseline, Suite};
use crate::vector::{Case, Level, Role};
use cetp_proto::discovery::{parse_manifest, Declared};
use cetp_proto::envelope::Capability;
use rand::SeedableRng;
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
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

#[derive(Clone, Debug, PartialEq)]
pub struct CaseOutcome {
    pub id: String,
    pub title: String,
    pub requirements: Vec<String>,
    pub verdict: Verdict,
    pub reason: String,
    pub needs: Vec<String>,
    pub baselined: bool,
    /// For a FAIL or WARN: the requirements its finding cites (the failing
    /// step's); empty otherwise.
    pub cited: Vec<String>,
    /// A NOT_APPLICABLE that comes from the setup, not the spec: the profile
    /// field or device ability that would let the case judge. It keeps the
    /// §9 claim from being established.
    pub unjudged: Option<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct CheckOutcome {
    pub id: String,
    pub requirements: Vec<String>,
    /// For a FAIL or WARN: the requirements its findings' rules map to.
    pub cited: Vec<String>,
    pub verdict: Verdict,
    pub reason: String,
}

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

/// Runs the suite against a target and emits every event to `out`.
pub fn run(
    suite: &Suite,
    target: &Target,
    profile: &Profile,
    cfg: &RunConfig,
    out: &mut Fanout,
) -> RunOutcome {
    let started = Instant::now();
    let cases = selected(suite, cfg);
    let config_hash = config_hash(suite, target, profile, cfg);
    let run_id = format!(
        "run-{}-{}",
        cfg.started_at_ms,
        &config_hash[..12.min(config_hash.len())]
    );
    out.emit(Event::RunStarted {
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

    let mut outcomes = Vec::new();
    let mut tally = CheckTally::new(suite.rules.clone());
    let identified = identify(target, profile);
    let mut hello_a = None;
    let env = match identified {
        Ok((hello, env)) => {
            hello_a = hello.clone();
            out.emit(Event::TargetIdentified {
                hello,
                package: Some(env.package.clone()),
                authority: Some(env.authority.clone()),
                manifest: env.manifest_kind.clone(),
                declared_versions: env
                    .declared
                    .as_ref()
                    .map(|d| d.versions.iter().copied().collect())
                    .unwrap_or_default(),
            });
            Some(env)
        }
        Err(reason) => {
            out.emit(Event::TargetIdentified {
                hello: None,
                package: None,
                authority: None,
                manifest: "unknown".into(),
                declared_versions: vec![],
            });
            for c in &cases {
                outcomes.push(CaseOutcome {
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
            None
        }
    };

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
    out.emit(Event::RunPinned {
        pin_hash: pin.hash(),
        fields: pin.fields.clone(),
    });
    let stalls = crate::stall::Stalls::new();
    let deadline = cfg.run_timeout.map(|t| started + t);
    let interrupt = cfg.interrupt.clone().unwrap_or_default();
    // Whether a case was stopped short: the run did not reach its end.
    let mut cut = false;
    if let Some(env) = &env {
        for (i, case) in cases.iter().enumerate() {
            let case_started = Instant::now();
            out.emit(Event::CaseStarted {
                case_id: case.id.clone(),
                title: case.title.clone(),
            });
            // A case that does not pass may be attempted again
            // (`attempts`); attempts that disagree make it FLAKY, with every
            // attempt's outcome kept in the reason, never merged into a pass.
            let mut outcomes_seen: Vec<(Verdict, String, Option<String>)> = Vec::new();
            let mut cited = Vec::new();
            for attempt in 0..cfg.attempts.max(1) {
                let rng = run_rng(cfg, i, attempt);
                // Straight to the reporters, so that the journal
                // (events.ndjson, flushed per event) holds each step, and
                // each dispatch record, before the next call goes out.
                let result = {
                    let mut emit = |e: Event| out.emit(e);
                    let mut runner =
                        CaseRunner::new(target, profile, env, &mut emit, &mut tally, rng)
                            .guarded(&stalls, deadline, &interrupt);
                    let r = runner.run(case);
                    if r.is_err() {
                        cited = runner.cited.clone();
                    }
                    r
                };
                let seen = match result {
                    Ok(()) => (Verdict::Pass, String::new(), None),
                    Err(Stop::Fail(r)) => (
                        if case.level == Level::Should {
                            Verdict::Warn
                        } else {
                            Verdict::Fail
                        },
                        r,
                        None,
                    ),
                    Err(Stop::NotApplicable(r)) => (Verdict::NotApplicable, r, None),
                    Err(Stop::Setup { needs, reason }) => (
                        Verdict::NotApplicable,
                        format!("not judged: {reason} (needs {needs})"),
                        Some(needs),
                    ),
                    Err(Stop::Infra(r)) => (Verdict::InfraError, r, None),
                    Err(Stop::Cut(r)) => {
                        cut = true;
                        (Verdict::InfraError, r, None)
                    }
                };
                let settled = matches!(seen.0, Verdict::Pass | Verdict::NotApplicable);
                outcomes_seen.push(seen);
                if settled {
                    break;
                }
            }
            let (verdict, reason, unjudged) =
                if outcomes_seen.iter().all(|o| o.0 == outcomes_seen[0].0) {
                    outcomes_seen.swap_remove(0)
                } else {
                    let all: Vec<String> = outcomes_seen
                        .iter()
                        .enumerate()
                        .map(|(n, (v, r, _))| {
                            if r.is_empty() {
                                format!("attempt {}: {}", n + 1, v.as_str())
                            } else {
                                format!("attempt {}: {} ({r})", n + 1, v.as_str())
                            }
                        })
                        .collect();
                    (Verdict::Flaky, all.join("; "), None)
                };
            let baseline_reason = cfg
                .baseline
                .as_ref()
                .and_then(|b| b.reason_for(&case.id))
                .filter(|_| verdict == Verdict::Fail)
                .map(str::to_string);
            if !matches!(verdict, Verdict::Fail | Verdict::Warn) {
                cited.clear();
            }
            out.emit(Event::CaseFinished {
                case_id: case.id.clone(),
                title: case.title.clone(),
                requirements: case.requirements.clone(),
                cited: cited.clone(),
                verdict,
                reason: reason.clone(),
                baseline: baseline_reason.clone(),
                duration_ms: case_started.elapsed().as_millis() as u64,
            });
            outcomes.push(CaseOutcome {
                id: case.id.clone(),
                title: case.title.clone(),
                requirements: case.requirements.clone(),
                verdict,
                reason,
                needs: case.needs.clone(),
                baselined: baseline_reason.is_some(),
                cited,
                unjudged,
            });
        }
        if let Some(lock) = cfg.lock.as_ref().filter(|_| crate::contract::selected(cfg)) {
            let o = crate::contract::run_lock_case(target, env, lock, cfg, out);
            outcomes.push(o);
        }
    }

    // Checks: judged over every answer of the run.
    let mut checks = Vec::new();
    for def in &suite.checks {
        let (verdict, reason) = match tally.first.get(def.id.as_str()) {
            Some((case, step, f)) => {
                let v = if f.level == Level::Should {
                    Verdict::Warn
                } else {
                    Verdict::Fail
                };
                let more = tally.counts.get(def.id.as_str()).copied().unwrap_or(1);
                (
                    v,
                    format!(
                        "{case} step {step}: {}{}",
                        f.message,
                        if more > 1 {
                            format!(" (and {} more)", more - 1)
                        } else {
                            String::new()
                        }
                    ),
                )
            }
            None if tally.answers == 0 => {
                (Verdict::NotApplicable, "no answers were checked".into())
            }
            None => (Verdict::Pass, String::new()),
        };
        let requirements = def.requirements.clone();
        let cited: Vec<String> = if matches!(verdict, Verdict::Fail | Verdict::Warn) {
            tally
                .cited
                .get(def.id.as_str())
                .map(|s| s.iter().cloned().collect())
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        out.emit(Event::CheckVerdict {
            check: def.id.clone(),
            title: def.title.clone(),
            requirements: requirements.clone(),
            cited: cited.clone(),
            verdict,
            reason: reason.clone(),
            answers_checked: tally.answers,
        });
        checks.push(CheckOutcome {
            id: def.id.clone(),
            requirements,
            cited,
            verdict,
            reason,
        });
    }

    // Baseline entries that no longer match a failure are stale: the run
    // fails so the baseline gets cleaned up.
    let mut stale = Vec::new();
    if let Some(b) = &cfg.baseline {
        for entry in &b.entries {
            let failing = outcomes
                .iter()
                .any(|o| o.id == entry.id && o.verdict == Verdict::Fail)
                || checks
                    .iter()
                    .any(|c| c.id == entry.id && c.verdict == Verdict::Fail);
            let exists = suite.cases.iter().any(|c| c.id == entry.id)
                || suite.checks.iter().any(|c| c.id == entry.id);
            if !failing {
                let why = if exists {
                    "it no longer fails"
                } else {
                    "no such case or check exists"
                };
                out.emit(Event::BaselineStale {
                    id: entry.id.clone(),
                    reason: why.into(),
                });
                stale.push(entry.id.clone());
            }
        }
    }
    let checks_baselined: BTreeSet<String> = checks
        .iter()
        .filter(|c| {
            c.verdict == Verdict::Fail
                && cfg
                    .baseline
                    .as_ref()
                    .and_then(|b| b.reason_for(&c.id))
                    .is_some()
        })
        .map(|c| c.id.clone())
        .collect();

    let mut summary = Summary::default();
    for o in &outcomes {
        summary.add(o.verdict);
    }
    for c in &checks {
        summary.add(c.verdict);
    }
    let filtered = !cfg.only.is_empty() || !cfg.skip.is_empty();
    let claim = claim(
        env.as_ref(),
        &outcomes,
        &checks,
        negotiated.as_ref().map(|n| &n.capabilities),
        filtered,
    );
    let unbaselined_fail = outcomes
        .iter()
        .any(|o| matches!(o.verdict, Verdict::Fail | Verdict::Flaky) && !o.baselined)
        || checks
            .iter()
            .any(|c| c.verdict == Verdict::Fail && !checks_baselined.contains(&c.id));
    let infra = outcomes.iter().any(|o| o.verdict == Verdict::InfraError) || env.is_none();
    let exit = if unbaselined_fail || !stale.is_empty() {
        ExitCode::Fail
    } else if infra {
        ExitCode::Infra
    } else {
        ExitCode::Ok
    };
    // A Ctrl-C that came after the last step cut nothing: the run ended.
    let exit = if cut && interrupt.load(std::sync::atomic::Ordering::SeqCst) {
        ExitCode::Interrupted
    } else {
        exit
    };
    out.emit(Event::RunFinished {
        summary: summary.clone(),
        claim: claim.clone(),
        exit_code: exit.code(),
        duration_ms: started.elapsed().as_millis() as u64,
    });
    RunOutcome {
        run_id,
        config_hash,
        pin,
        cases: outcomes,
        checks,
        stale_baseline: stale,
        summary,
        claim,
        exit,
        interrupted: cut,
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
        Ok(cetp_reference::port::CallAnswer::Result(Some(b))) => b.get_json("data").ok(),
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

/// Judged and not failed. A NOT_APPLICABLE that the setup caused is not a
/// pass: §9 grants the claim only for tests that passed.
fn passed(verdict: Verdict, unjudged: &Option<String>) -> bool {
    match verdict {
        Verdict::Pass | Verdict::Warn => true,
        Verdict::NotApplicable => unjudged.is_none(),
        _ => false,
    }
}

/// The claim §9 allows: v2 only when every core case and check was judged
/// and passed; each optional capability only when declared and its own
/// cases were judged and passed. A filtered run makes no claim.
pub fn claim(
    env: Option<&Env>,
    cases: &[CaseOutcome],
    checks: &[CheckOutcome],
    caps: Option<&BTreeSet<String>>,
    filtered: bool,
) -> Claim {
    let v2_declared = env.is_some_and(Env::declares_v2);
    let core = || cases.iter().filter(|c| c.needs.is_empty());
    let mut groups: BTreeMap<String, (Vec<String>, BTreeSet<String>)> = BTreeMap::new();
    for c in core().filter(|c| c.verdict == Verdict::NotApplicable) {
        if let Some(n) = &c.unjudged {
            let g = groups.entry(n.clone()).or_default();
            g.0.push(c.id.clone());
            g.1.extend(c.requirements.iter().cloned());
        }
    }
    let unjudged: Vec<Unjudged> = groups
        .into_iter()
        .map(|(needs, (cases, reqs))| Unjudged {
            needs,
            cases,
            requirements: reqs.into_iter().collect(),
        })
        .collect();
    let failed = core()
        .filter(|c| !passed(c.verdict, &c.unjudged) && c.unjudged.is_none())
        .count()
        + checks
            .iter()
            .filter(|c| !matches!(c.verdict, Verdict::Pass | Verdict::Warn))
            .count();
    let core_ran = core().filter(|c| c.verdict == Verdict::Pass).count();
    let cetp_v2 = v2_declared && !filtered && failed == 0 && unjudged.is_empty() && core_ran > 0;
    let mut capabilities = Vec::new();
    for cap in Capability::ALL {
        let name = cap.as_str().to_string();
        let declared = caps.is_some_and(|c| c.contains(&name));
        let own: Vec<&CaseOutcome> = cases.iter().filter(|c| c.needs.contains(&name)).collect();
        let ok = declared
            && cetp_v2
            && !own.is_empty()
            && own.iter().all(|c| passed(c.verdict, &c.unjudged))
            && own.iter().any(|c| c.verdict == Verdict::Pass);
        capabilities.push(CapabilityClaim {
            capability: name,
            declared,
            passed: ok,
        });
    }
    let v1_passed = (!v2_declared && env.is_some())
        .then(|| cases.iter().all(|c| passed(c.verdict, &c.unjudged)));
    let not_applicable = cases
        .iter()
        .filter(|c| c.verdict == Verdict::NotApplicable)
        .count();
    let statement = if env.is_none() {
        "No claim: the target could not be identified.".to_string()
    } else if filtered {
        "No claim: a run filtered with --only/--skip does not run every core test (§9).".into()
    } else if !v2_declared {
        format!(
            "v2 not declared. v1 and discovery cases: {}.",
            if v1_passed == Some(true) {
                "passed"
            } else {
                "FAILED"
            }
        )
    } else if cetp_v2 {
        let caps: Vec<String> = capabilities
            .iter()
            .filter(|c| c.passed)
            .map(|c| c.capability.clone())
            .collect();
        format!(
            "May claim CETP v2{}. ({} case(s) not applicable by the spec.)",
            if caps.is_empty() {
                String::new()
            } else {
                format!(" with {}", caps.join(", "))
            },
            not_applicable
        )
    } else if failed > 0 {
        format!("May NOT claim CETP v2: {failed} core case(s) or check(s) did not pass.")
    } else if !unjudged.is_empty() {
        let parts: Vec<String> = unjudged
            .iter()
            .map(|u| {
                format!(
                    "{} ({} case(s), {} requirement(s))",
                    u.needs,
                    u.cases.len(),
                    u.requirements.len()
                )
            })
            .collect();
        format!(
            "CETP v2 not established: core tests were left unjudged by the setup; provide {}.",
            parts.join(", ")
        )
    } else {
        "CETP v2 not established: no core case passed.".to_string()
    };
    Claim {
        v2_declared,
        cetp_v2,
        capabilities,
        v1_passed,
        unjudged,
        filtered,
        statement,
    }
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
