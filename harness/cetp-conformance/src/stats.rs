//! Run statistics: what a run's finished cases, checks and stale baseline
//! entries add up to (cargo-nextest's `RunStats`). The summary, the §9
//! claim and the exit code of both halves (Provider and Consumer) are read
//! from here, and from nothing else, so a verdict counts the same way
//! everywhere.

use crate::exit::ExitCode;
use cetp_proto::envelope::Capability;
use cetp_vectors::event::{CapabilityClaim, Claim, Summary, Unjudged, Verdict};
use cetp_vectors::interp::Env;
use std::collections::{BTreeMap, BTreeSet};

/// A finished case, as the dispatcher records it.
#[derive(Clone, Debug, PartialEq)]
pub struct CaseOutcome {
    /// Id of the case.
    pub id: String,
    /// Title of the case.
    pub title: String,
    /// Requirement ids the case covers.
    pub requirements: Vec<String>,
    /// Its verdict.
    pub verdict: Verdict,
    /// Why, for a human.
    pub reason: String,
    /// Optional capabilities (§2.3) the case belongs to, for the claim.
    pub needs: Vec<String>,
    /// A FAIL the baseline accepts as a known failure.
    pub baselined: bool,
    /// For a FAIL or WARN: the requirements its finding cites (the failing
    /// step's); empty otherwise.
    pub cited: Vec<String>,
    /// A NOT_APPLICABLE that comes from the setup, not the spec: the profile
    /// field or device ability that would let the case judge. It keeps the
    /// §9 claim from being established.
    pub unjudged: Option<String>,
}

/// A check judged over every answer of the run.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckOutcome {
    /// Name of the check.
    pub id: String,
    /// Requirement ids the check covers.
    pub requirements: Vec<String>,
    /// For a FAIL or WARN: the requirements its findings' rules map to.
    pub cited: Vec<String>,
    /// Its verdict.
    pub verdict: Verdict,
    /// Why, for a human.
    pub reason: String,
    /// A FAIL the baseline accepts as a known failure.
    pub baselined: bool,
}

/// Everything a run finished, in the order it finished.
#[derive(Clone, Debug, Default)]
pub struct RunStats {
    /// Every finished case.
    pub cases: Vec<CaseOutcome>,
    /// Every judged check.
    pub checks: Vec<CheckOutcome>,
    /// Baseline entries that matched no failure.
    pub stale_baseline: Vec<String>,
    /// The target could not be identified: nothing was judged.
    pub unidentified: bool,
    /// A case was stopped short (Ctrl-C, `--run-timeout`): the run did not
    /// reach its end.
    pub cut: bool,
}

impl RunStats {
    /// Records a finished case.
    pub fn case(&mut self, o: CaseOutcome) {
        self.cases.push(o);
    }

    /// Records a judged check.
    pub fn check(&mut self, o: CheckOutcome) {
        self.checks.push(o);
    }

    /// Records a stale baseline entry.
    pub fn stale(&mut self, id: String) {
        self.stale_baseline.push(id);
    }

    /// Counts of every verdict, cases then checks.
    pub fn summary(&self) -> Summary {
        let mut s = Summary::default();
        for c in &self.cases {
            s.add(c.verdict);
            if c.verdict == Verdict::NotApplicable && c.unjudged.is_some() {
                s.not_judged += 1;
            }
        }
        for v in self.checks.iter().map(|c| c.verdict) {
            s.add(v);
        }
        s
    }

    /// By who is at fault: a FAIL or FLAKY the baseline does not accept, or
    /// a stale baseline entry, is the target's; then device trouble; a
    /// Ctrl-C that cut a case wins over both (`interrupted` says whether
    /// one came: one after the last step cut nothing).
    pub fn exit(&self, interrupted: bool) -> ExitCode {
        let unbaselined_fail = self
            .cases
            .iter()
            .any(|o| matches!(o.verdict, Verdict::Fail | Verdict::Flaky) && !o.baselined)
            || self
                .checks
                .iter()
                .any(|c| c.verdict == Verdict::Fail && !c.baselined);
        let infra = self.cases.iter().any(|o| o.verdict == Verdict::InfraError);
        if self.cut && interrupted {
            ExitCode::Interrupted
        } else if unbaselined_fail || !self.stale_baseline.is_empty() {
            ExitCode::Fail
        } else if infra || self.unidentified {
            ExitCode::Infra
        } else {
            ExitCode::Ok
        }
    }

    /// The Provider half's §9 claim ([`provider_claim`]).
    pub fn provider_claim(
        &self,
        env: Option<&Env>,
        caps: Option<&BTreeSet<String>>,
        filtered: bool,
    ) -> Claim {
        provider_claim(env, &self.cases, &self.checks, caps, filtered)
    }

    /// The Consumer half of §9: every scenario passed (a WARN, a scenario
    /// left unjudged or an infra error is not a pass), in an unfiltered run.
    /// A scenario that passed with an expectation the target could not see
    /// (a descriptor's reads on any device) is only partly judged: it keeps
    /// the claim from being established, grouped by what would judge it.
    pub fn consumer_claim(&self, consumer: &str, filtered: bool) -> Claim {
        let summary = self.summary();
        let partly: Vec<&CaseOutcome> = self
            .cases
            .iter()
            .filter(|c| c.verdict == Verdict::Pass && c.unjudged.is_some())
            .collect();
        let established = summary.fail == 0
            && summary.infra_error == 0
            && summary.not_applicable == 0
            && summary.warn == 0
            && partly.is_empty()
            && !filtered;
        let groups = unjudged_groups(partly.iter().copied());
        let statement = if filtered {
            "Consumer half of §9: no claim (a filtered run)".to_string()
        } else if established {
            format!(
                "Consumer half of §9: established for {consumer}: every Consumer scenario passed"
            )
        } else {
            let mut s = format!(
                "Consumer half of §9: not established for {consumer}: {} FAIL, {} WARN, {} not judged, {} infra errors",
                summary.fail, summary.warn, summary.not_applicable, summary.infra_error
            );
            if !partly.is_empty() {
                let each: Vec<String> = groups
                    .iter()
                    .map(|g| format!("{} need {}", g.cases.join(", "), g.needs))
                    .collect();
                s.push_str(&format!(
                    ", {} passed only in part (this target cannot see all they judge: {})",
                    partly.len(),
                    each.join("; ")
                ));
            }
            s
        };
        Claim {
            v2_declared: true,
            cetp_v2: established,
            capabilities: Vec::new(),
            v1_passed: None,
            unjudged: if filtered { Vec::new() } else { groups },
            filtered,
            statement,
            fixes: Vec::new(),
        }
    }
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

/// Core cases the setup left unjudged, grouped by what would judge them.
fn unjudged_groups<'a>(core: impl Iterator<Item = &'a CaseOutcome>) -> Vec<Unjudged> {
    let mut groups: BTreeMap<String, (Vec<String>, BTreeSet<String>)> = BTreeMap::new();
    for c in core {
        if let Some(n) = &c.unjudged {
            let g = groups.entry(n.clone()).or_default();
            g.0.push(c.id.clone());
            g.1.extend(c.requirements.iter().cloned());
        }
    }
    groups
        .into_iter()
        .map(|(needs, (cases, reqs))| Unjudged {
            needs,
            cases,
            requirements: reqs.into_iter().collect(),
        })
        .collect()
}

/// Each optional capability: claimed only when declared, v2 claimed, and
/// its own cases judged and passed.
fn capability_claims(
    cases: &[CaseOutcome],
    caps: Option<&BTreeSet<String>>,
    cetp_v2: bool,
) -> Vec<CapabilityClaim> {
    Capability::ALL
        .iter()
        .map(|cap| {
            let name = cap.as_str().to_string();
            let declared = caps.is_some_and(|c| c.contains(&name));
            let own: Vec<&CaseOutcome> = cases.iter().filter(|c| c.needs.contains(&name)).collect();
            let ok = declared
                && cetp_v2
                && !own.is_empty()
                && own.iter().all(|c| passed(c.verdict, &c.unjudged))
                && own.iter().any(|c| c.verdict == Verdict::Pass);
            CapabilityClaim {
                capability: name,
                declared,
                passed: ok,
            }
        })
        .collect()
}

/// The claim §9 allows: v2 only when every core case and check was judged
/// and passed; each optional capability only when declared and its own
/// cases were judged and passed. A filtered run makes no claim.
pub fn provider_claim(
    env: Option<&Env>,
    cases: &[CaseOutcome],
    checks: &[CheckOutcome],
    caps: Option<&BTreeSet<String>>,
    filtered: bool,
) -> Claim {
    let v2_declared = env.is_some_and(Env::declares_v2);
    let core = || cases.iter().filter(|c| c.needs.is_empty());
    let unjudged = unjudged_groups(core().filter(|c| c.verdict == Verdict::NotApplicable));
    let failed = core()
        .filter(|c| !passed(c.verdict, &c.unjudged) && c.unjudged.is_none())
        .count()
        + checks
            .iter()
            .filter(|c| !matches!(c.verdict, Verdict::Pass | Verdict::Warn))
            .count();
    let core_ran = core().filter(|c| c.verdict == Verdict::Pass).count();
    let cetp_v2 = v2_declared && !filtered && failed == 0 && unjudged.is_empty() && core_ran > 0;
    let capabilities = capability_claims(cases, caps, cetp_v2);
    let v1_passed = (!v2_declared && env.is_some())
        .then(|| cases.iter().all(|c| passed(c.verdict, &c.unjudged)));
    let mut claim = Claim {
        v2_declared,
        cetp_v2,
        capabilities,
        v1_passed,
        unjudged,
        filtered,
        statement: String::new(),
        fixes: Vec::new(),
    };
    let not_applicable = cases
        .iter()
        .filter(|c| c.verdict == Verdict::NotApplicable)
        .count();
    claim.statement = statement(&claim, env.is_some(), failed, not_applicable);
    if env.is_some() && claim.v2_declared && !claim.cetp_v2 {
        claim.fixes = fixes(&claim, cases, checks, core_ran);
    }
    claim
}

/// The tools the cases left unjudged for `[execute] allow` would have
/// executed, read from their reasons (`not executed: TOOL has effect=…`,
/// the interpreter's words), so that the fix names them.
fn refused_tools(cases: &[CaseOutcome]) -> BTreeSet<&str> {
    cases
        .iter()
        .filter(|c| c.unjudged.as_deref() == Some("[execute] allow"))
        .filter_map(|c| {
            let rest = c.reason.split("not executed: ").nth(1)?;
            rest.split(" has effect=").next()
        })
        .filter(|t| !t.is_empty())
        .collect()
}

/// The shortest list of changes that would establish the claim: the cases
/// and checks to make pass, then one change per missing field, the one
/// that judges most core cases first. A need another one covers is left
/// out (an observer counting effects also says how many).
fn fixes(
    claim: &Claim,
    cases: &[CaseOutcome],
    checks: &[CheckOutcome],
    core_ran: usize,
) -> Vec<String> {
    let mut out = Vec::new();
    if claim.filtered {
        out.push("run every core case: drop --only/--skip (§9)".to_string());
        return out;
    }
    let not_passed: Vec<&str> = cases
        .iter()
        .filter(|c| c.needs.is_empty() && !passed(c.verdict, &c.unjudged) && c.unjudged.is_none())
        .map(|c| c.id.as_str())
        .chain(
            checks
                .iter()
                .filter(|c| !matches!(c.verdict, Verdict::Pass | Verdict::Warn))
                .map(|c| c.id.as_str()),
        )
        .collect();
    if !not_passed.is_empty() {
        let shown: Vec<&str> = not_passed.iter().take(12).copied().collect();
        out.push(format!(
            "make the Provider pass {}{} (a FAIL, FLAKY or INFRA_ERROR is not a pass)",
            shown.join(", "),
            if not_passed.len() > shown.len() {
                format!(" and {} more", not_passed.len() - shown.len())
            } else {
                String::new()
            }
        ));
    }
    let needs: BTreeSet<&str> = claim.unjudged.iter().map(|u| u.needs.as_str()).collect();
    let mut groups: Vec<&Unjudged> = claim
        .unjudged
        .iter()
        .filter(|u| {
            !(u.needs == "[observer] counts" && needs.contains("[observer] counts = \"effects\""))
        })
        .collect();
    // A real-time wait (an hour, for a one-hour lifetime) is the longest
    // path to a judgement: it comes after every change of setup.
    let waits = |u: &Unjudged| u.needs.starts_with(cetp_vectors::advice::MAX_WAIT.flag);
    groups.sort_by(|a, b| {
        waits(a)
            .cmp(&waits(b))
            .then(b.cases.len().cmp(&a.cases.len()))
            .then(a.needs.cmp(&b.needs))
    });
    for u in groups {
        let mut n = u.cases.len();
        if u.needs == "[observer] counts = \"effects\"" {
            n += claim
                .unjudged
                .iter()
                .filter(|o| o.needs == "[observer] counts")
                .map(|o| o.cases.len())
                .sum::<usize>();
        }
        let mut fix = cetp_vectors::advice::fix_for(&u.needs);
        if u.needs == "[execute] allow" {
            let tools = refused_tools(cases);
            if !tools.is_empty() {
                fix.push_str(&format!(
                    " (the cases would execute: {})",
                    tools.into_iter().collect::<Vec<_>>().join(", ")
                ));
            }
        }
        out.push(format!(
            "{fix} (judges {n} core case(s): {})",
            u.cases.join(", ")
        ));
    }
    if out.is_empty() && core_ran == 0 {
        out.push("run the core cases against a Provider that declares v2".into());
    }
    out
}

/// The claim in one sentence.
fn statement(claim: &Claim, identified: bool, failed: usize, not_applicable: usize) -> String {
    if !identified {
        "No claim: the target could not be identified.".to_string()
    } else if claim.filtered {
        "No claim: a run filtered with --only/--skip does not run every core test (§9).".into()
    } else if !claim.v2_declared {
        format!(
            "v2 not declared. v1 and discovery cases: {}.",
            if claim.v1_passed == Some(true) {
                "passed"
            } else {
                "FAILED"
            }
        )
    } else if claim.cetp_v2 {
        let caps: Vec<String> = claim
            .capabilities
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
    } else if !claim.unjudged.is_empty() {
        let parts: Vec<String> = claim
            .unjudged
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(id: &str, verdict: Verdict, unjudged: Option<&str>) -> CaseOutcome {
        CaseOutcome {
            id: id.into(),
            title: String::new(),
            requirements: vec![format!("REQ-{id}")],
            verdict,
            reason: String::new(),
            needs: Vec::new(),
            baselined: false,
            cited: Vec::new(),
            unjudged: unjudged.map(str::to_string),
        }
    }

    fn env() -> Env {
        Env {
            package: "p".into(),
            authority: "a".into(),
            manifest_kind: "v2_only".into(),
            declared: Some(cetp_proto::discovery::Declared {
                authority: "a".into(),
                versions: BTreeSet::from([2]),
                source: cetp_proto::discovery::VersionSource::Versions,
                legacy_version: None,
            }),
            manifest: None,
            identity_a: serde_json::Value::Null,
        }
    }

    #[test]
    fn a_claim_not_established_lists_the_changes_that_would_establish_it() {
        let cases = [
            case("P", Verdict::Pass, None),
            case("F", Verdict::Fail, None),
            case("S", Verdict::NotApplicable, None),
            case("O1", Verdict::NotApplicable, Some("[observer]")),
            case("O2", Verdict::NotApplicable, Some("[observer]")),
            case("B", Verdict::NotApplicable, Some("--target-b")),
            case("C1", Verdict::NotApplicable, Some("[observer] counts")),
            case(
                "C2",
                Verdict::NotApplicable,
                Some("[observer] counts = \"effects\""),
            ),
        ];
        let c = provider_claim(Some(&env()), &cases, &[], None, false);
        assert!(!c.cetp_v2);
        // The FAIL first; then the field judging most cases; the counts
        // an effects counter also gives are not listed twice.
        assert_eq!(c.fixes.len(), 4, "{:?}", c.fixes);
        assert!(
            c.fixes[0].starts_with("make the Provider pass F "),
            "{:?}",
            c.fixes
        );
        assert!(
            c.fixes[1].starts_with("add an [observer]")
                && c.fixes[1].contains("2 core case(s): O1, O2")
        );
        assert!(c.fixes.iter().any(|f| f.contains("--target-b")));
        assert!(c
            .fixes
            .iter()
            .any(|f| f.contains("counts = \"effects\"") && f.contains("judges 2 core")));
        assert!(!c
            .fixes
            .iter()
            .any(|f| f.contains("(judges 1 core case(s): C1)")));
        // A real-time wait comes last, however many cases it judges, and
        // its fix names the build and the clock before the wait.
        let waits = [
            case("W1", Verdict::NotApplicable, Some("--max-wait 3660s")),
            case("W2", Verdict::NotApplicable, Some("--max-wait 3660s")),
            case("R", Verdict::NotApplicable, Some("[roles.async]")),
        ];
        let w = provider_claim(Some(&env()), &waits, &[], None, false);
        assert!(w.fixes[0].starts_with("add [roles.async]"), "{:?}", w.fixes);
        assert!(
            w.fixes[1].starts_with("use a build whose lifetimes are shorter")
                && w.fixes[1].contains("give --max-wait 3660s"),
            "{:?}",
            w.fixes
        );
        // The spec's NOT_APPLICABLE needs no change; the setup's are counted.
        let mut stats = RunStats::default();
        for o in cases {
            stats.case(o);
        }
        assert_eq!(
            (stats.summary().not_applicable, stats.summary().not_judged),
            (6, 5)
        );
        // The tools the unjudged cases would have executed are named.
        let mut refused = case("X1", Verdict::NotApplicable, Some("[execute] allow"));
        refused.reason = "not judged: not executed: create_note has effect=create and the profile does not allow executing it (needs [execute] allow)".into();
        let mut other = case("X2", Verdict::NotApplicable, Some("[execute] allow"));
        other.reason = "not judged: not executed: delete_note has effect=delete and the profile does not allow executing it".into();
        let c = provider_claim(Some(&env()), &[refused, other], &[], None, false);
        assert!(
            c.fixes[0].contains("(the cases would execute: create_note, delete_note)"),
            "{:?}",
            c.fixes
        );
        // An established claim lists nothing.
        let ok = [
            case("P", Verdict::Pass, None),
            case("S", Verdict::NotApplicable, None),
        ];
        assert!(provider_claim(Some(&env()), &ok, &[], None, false)
            .fixes
            .is_empty());
    }
}
