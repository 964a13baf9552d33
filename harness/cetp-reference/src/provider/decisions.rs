//! Provider-side authorization and per-call confirmation (§4.3, §7.2): the
//! resolution PendingIntent, the resume token and the user's decision.

use super::state::{Answer, DedupeKey, Failure, PendingDecision, Purpose, Record, RecordState};
use super::tool::ToolDef;
use super::util::lock;
use super::{notes, Cx, FixtureSet, Mutant, ReferenceProvider, Variant, IMPOSTOR_PACKAGE};
use cetp_proto::provider::{Decision, IntentTarget, ResolveOutcome};
use cetp_proto::ErrorCode;

/// Android's activity results.
const RESULT_OK: i32 = -1;
const RESULT_CANCELED: i32 = 0;

/// What presenting a resume token leads to.
pub(crate) enum Redeem {
    Approved(Purpose),
    Denied,
    /// Not decided yet: the same request for a decision, again.
    Again(Failure),
    Invalid(&'static str),
}

impl ReferenceProvider {
    /// AUTH_REQUIRED or USER_ACTION_REQUIRED with a resolution and a resume
    /// token. A retry of the same logical execution gets the same pending
    /// decision back rather than piling up new ones.
    pub(crate) fn ask(
        &self,
        cx: &Cx<'_>,
        tool: &ToolDef,
        args: &str,
        digest: &str,
        key: &DedupeKey,
        purpose: Purpose,
    ) -> Answer {
        let mut d = lock(&self.durable.state);
        let by_request = (cx.uid, cx.request_id.to_string());
        if let Some(p) = d
            .pending_by_request
            .get(&by_request)
            .and_then(|id| d.decisions.get(id))
        {
            if p.purpose == purpose
                && !p.used
                && cx.now_ms <= p.expires_ms
                && p.tool == tool.name
                && p.args == args
            {
                return self.decision_failure(p).into();
            }
        }
        let confirmation = d.rng.hex("confirmation")[..32].to_string();
        let resume_token = self.issued(if self.takes(Variant::ResumeTokensLong) {
            let mut t = String::new();
            while t.len() < 200 {
                t.push_str(&d.rng.hex("resume"));
            }
            t.truncate(200);
            t
        } else {
            match self.cfg.fixtures {
                FixtureSet::Reference => d.rng.hex("resume"),
                FixtureSet::Notes => notes::resume_token(&mut d.rng),
            }
        });
        let foreign = self.has(Mutant::ForeignPendingIntent);
        let target = IntentTarget {
            creator_package: if foreign {
                IMPOSTOR_PACKAGE.to_string()
            } else {
                self.cfg.package.clone()
            },
            creator_uid: if foreign { 10_666 } else { self.cfg.uid },
            immutable: !self.has(Mutant::MutablePendingIntent),
            activity: true,
            component: if foreign || self.has(Mutant::ResolutionImplicitIntent) {
                None
            } else {
                Some(match purpose {
                    Purpose::Grant(_) => format!("{}/.GrantActivity", self.cfg.package),
                    Purpose::Confirm => format!("{}/.ConfirmActivity", self.cfg.package),
                })
            },
            confirmation: confirmation.clone(),
        };
        let pending = PendingDecision {
            purpose,
            uid: cx.uid,
            tool: tool.name.clone(),
            args: args.to_string(),
            request_id: cx.request_id.to_string(),
            resume_token: resume_token.clone(),
            expires_ms: cx.now_ms.saturating_add(self.cfg.resume_token_ttl_ms),
            decision: None,
            used: false,
            target,
        };
        let failure = self.decision_failure(&pending);
        d.resume_tokens.insert(resume_token, confirmation.clone());
        d.decisions.insert(confirmation.clone(), pending);
        d.pending_by_request.insert(by_request, confirmation);
        // §6: the id is now bound to this tool and these args, so a reuse
        // with other content is refused even before anything executes.
        if !tool.is_read() && !self.has(Mutant::NoDedupe) && !d.records.contains_key(key) {
            d.records.insert(
                key.clone(),
                Record {
                    tool: tool.name.clone(),
                    digest: digest.to_string(),
                    created_ms: cx.now_ms,
                    state: RecordState::Pending,
                },
            );
        }
        failure.into()
    }

    fn decision_failure(&self, p: &PendingDecision) -> Failure {
        let app = &self.cfg.provider_name;
        let (code, message) = match p.purpose {
            Purpose::Grant(_) => (
                ErrorCode::AuthRequired,
                format!("This action needs your permission in the {app} app."),
            ),
            Purpose::Confirm if self.takes(Variant::ConfirmWithAuthRequired) => (
                ErrorCode::AuthRequired,
                format!("Sign in to the {app} app and confirm this action."),
            ),
            Purpose::Confirm => (
                ErrorCode::UserActionRequired,
                format!("Confirm this action in the {app} app."),
            ),
        };
        let mut f = Failure::new(code, message);
        let hide = p.purpose == Purpose::Confirm && self.has(Mutant::NoResolutionOnUserAction);
        if !hide {
            f.resolution = Some(Box::new(p.target.clone()));
        }
        f.resume_token = Some(p.resume_token.clone());
        f
    }

    /// §4.3: a resume token is single-use and bound to the caller, the tool,
    /// the exact args bytes, the request id and an expiry.
    pub(crate) fn redeem(&self, cx: &Cx<'_>, tool: &ToolDef, args: &str, token: &str) -> Redeem {
        let mut d = lock(&self.durable.state);
        let Some(id) = d.resume_tokens.get(token).cloned() else {
            return Redeem::Invalid("Unknown resume_token.");
        };
        let Some(p) = d.decisions.get(&id) else {
            return Redeem::Invalid("Unknown resume_token.");
        };
        if p.used && !self.has(Mutant::ResumeTokenReusable) {
            return Redeem::Invalid("The resume_token was already used.");
        }
        if p.uid != cx.uid && !self.has(Mutant::ResumeTokenOtherCaller) {
            return Redeem::Invalid("The resume_token was not issued to this caller.");
        }
        if p.tool != tool.name {
            return Redeem::Invalid("The resume_token was issued for another tool.");
        }
        if p.args != args && !self.has(Mutant::ResumeTokenArgsUnbound) {
            return Redeem::Invalid("The args differ from those the resume_token was issued for.");
        }
        if p.request_id != cx.request_id && !self.has(Mutant::ResumeTokenNotBoundToRequest) {
            return Redeem::Invalid("The resume_token was issued for another request_id.");
        }
        if cx.now_ms > p.expires_ms && !self.has(Mutant::ResumeTokenNeverExpires) {
            return Redeem::Invalid("The resume_token has expired.");
        }
        let (decision, purpose) = (p.decision, p.purpose.clone());
        if decision.is_none() {
            return Redeem::Again(self.decision_failure(p));
        }
        if let Some(p) = d.decisions.get_mut(&id) {
            p.used = true;
        }
        match decision {
            Some(Decision::Deny) if !self.has(Mutant::DenialExecutes) => Redeem::Denied,
            _ => Redeem::Approved(purpose),
        }
    }

    /// The user acts in our confirmation activity. The first decision counts;
    /// dismissing leaves the request undecided.
    pub(crate) fn decide(
        &self,
        target: &IntentTarget,
        decision: Decision,
        now_ms: i64,
    ) -> ResolveOutcome {
        let not_applied = ResolveOutcome {
            launched: true,
            decision_applied: false,
            result_code: RESULT_CANCELED,
            launched_package: Some(self.cfg.package.clone()),
        };
        // §5 lets USER_CANCELLED report a confirmation the user abandoned:
        // a Provider may record backing out as a refusal.
        let dismissed = decision == Decision::Dismiss;
        let decision = match decision {
            Decision::Dismiss if self.takes(Variant::DismissCancels) => Decision::Deny,
            Decision::Dismiss => return not_applied,
            d => d,
        };
        let mut d = lock(&self.durable.state);
        let Some(p) = d.decisions.get_mut(&target.confirmation) else {
            return not_applied;
        };
        if p.decision.is_some() || p.used || now_ms > p.expires_ms {
            // The variant's screen comes up again once the user backed out
            // and takes a click (the UI plays it), but the abandonment
            // stands: the resumed call is still USER_CANCELLED. A screen
            // that took no click here would stop the judgement of a
            // Provider that shows it again (the Java sample).
            if self.takes(Variant::DismissCancels) && !p.used && now_ms <= p.expires_ms {
                return ResolveOutcome {
                    decision_applied: true,
                    result_code: if decision == Decision::Approve {
                        RESULT_OK
                    } else {
                        RESULT_CANCELED
                    },
                    ..not_applied
                };
            }
            return not_applied;
        }
        p.decision = Some(decision);
        let grant = match (&p.purpose, decision) {
            (Purpose::Grant(scopes), Decision::Approve) => Some((p.uid, scopes.clone())),
            _ => None,
        };
        if let Some((uid, scopes)) = grant {
            let default = self.cfg.default_grants.clone();
            d.grants.entry(uid).or_insert(default).extend(scopes);
        }
        ResolveOutcome {
            launched: true,
            decision_applied: true,
            // Backed out: the activity finishes as cancelled, whatever it recorded.
            result_code: if dismissed {
                RESULT_CANCELED
            } else {
                RESULT_OK
            },
            launched_package: Some(self.cfg.package.clone()),
        }
    }
}
