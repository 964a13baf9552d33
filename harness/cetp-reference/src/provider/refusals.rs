//! Every refusal a request's faults could draw, each check taken alone.
//!
//! No clause orders the checks of a request that carries several faults
//! (§2.2, §2.3, §4.1, §5): a Provider may answer any one of them. The
//! engine checks in one order (`session.rs`, `execute.rs`); the fuzz
//! oracle (`cetp-fuzz`'s descriptor shadow) asks this for the others, so
//! that it is never stricter than the suite, whose cases send one fault at
//! a time. What the spec does order stays ordered: a retry of an execution
//! already recorded gets its recorded result (§6), so neither its deadline
//! nor its args are faults then.

use super::state::Answer;
use super::util::lock;
use super::{Cx, ReferenceProvider};
use cetp_proto::envelope::{dialect_of, keys, Dialect, Method};
use cetp_proto::{Bundle, ErrorCode, Value};
use std::collections::BTreeSet;

/// The common fields of a v2 request (§4.1), each checked alone.
const COMMON: [&str; 4] = [
    keys::PROTOCOL_VERSION,
    keys::SESSION_TOKEN,
    keys::REQUEST_ID,
    keys::DEADLINE_AT_MS,
];

/// A well-formed value of each of [`COMMON`], in order: what the other
/// fields hold while one is checked alone (the token is then unknown,
/// which the session check answers, not the decoder).
fn well_formed() -> [Value; 4] {
    [
        Value::Int(2),
        Value::str("a-well-formed-token"),
        Value::str("00000000-0000-4000-8000-000000000000"),
        Value::Long(i64::MAX),
    ]
}

impl ReferenceProvider {
    /// The codes of every refusal one fault of this v2 request (method
    /// `method`, extras `extras`, from caller `uid` at device time
    /// `now_ms`) would draw if it were checked first: the envelope, the
    /// session, the capability the method needs, the deadline, the tool
    /// and its args. Empty for a v1 call, `negotiate` (one refusal at a
    /// time: [`Self::negotiate_refusals`]) and a well-formed request.
    pub fn refusals(
        &self,
        uid: u32,
        now_ms: i64,
        method: &str,
        extras: Option<&Bundle>,
    ) -> BTreeSet<ErrorCode> {
        let mut out = BTreeSet::new();
        let (Some(m), Some(b)) = (Method::parse(method), extras) else {
            return out;
        };
        if m == Method::Negotiate
            || !self.cfg.manifest.speaks_v2()
            || dialect_of(method, extras) != Dialect::V2
        {
            return out;
        }
        if let Err(f) = self.decode(m, extras) {
            out.insert(f.code);
        }
        // The decoder stops at the first malformed common field; each of
        // them is a fault of its own, found with the others made
        // well-formed.
        for k in COMMON {
            let mut alone = b.clone();
            for (other, good) in COMMON.iter().zip(well_formed()) {
                if *other != k {
                    alone.insert(other, good);
                }
            }
            if let Err(f) = self.decode(m, Some(&alone)) {
                out.insert(f.code);
            }
        }
        // A token that is not a string is no session a Provider can look
        // up: "session missing" (§5, NEGOTIATION_REQUIRED) is as true of
        // it as a misused token (INVALID_REQUEST); Android's
        // `Bundle.getString` reads it as absent.
        if b.contains(keys::SESSION_TOKEN) && b.opt_string(keys::SESSION_TOKEN).is_err() {
            out.insert(ErrorCode::NegotiationRequired);
        }
        let mut caps = BTreeSet::new();
        if let Ok(Some(token)) = b.opt_string(keys::SESSION_TOKEN) {
            match self.session(uid, now_ms, &token) {
                Err(f) => {
                    out.insert(f.code);
                }
                // A capability is missing only from a session that exists.
                Ok(c) => {
                    if m.capability().is_some_and(|cap| !c.contains(&cap)) {
                        out.insert(ErrorCode::UnsupportedCapability);
                    }
                    caps = c;
                }
            }
        }
        let request_id = b.opt_string(keys::REQUEST_ID).ok().flatten();
        // §6: a recorded execution's retry gets its recorded result.
        let recorded = m == Method::ExecuteTool
            && request_id.as_deref().is_some_and(|id| {
                let key = self.dedupe_key(uid, id);
                lock(&self.durable.state).records.contains_key(&key)
            });
        if recorded {
            return out;
        }
        if let Some(Value::Long(deadline)) = b.get(keys::DEADLINE_AT_MS) {
            if now_ms > *deadline && matches!(m, Method::ExecuteTool | Method::CancelOperation) {
                out.insert(ErrorCode::DeadlineExceeded);
            }
        }
        if m == Method::ExecuteTool {
            if let (Ok(Some(tool)), Ok(Some(args))) =
                (b.opt_string(keys::TOOL_NAME), b.opt_string(keys::ARGS))
            {
                let cx = Cx {
                    uid,
                    now_ms,
                    extras: b,
                    request_id: request_id.as_deref().unwrap_or_default(),
                    deadline_at_ms: i64::MAX,
                    caps: &caps,
                };
                if let Err(answer) = self.checked_call(&cx, &tool, &args) {
                    if let Answer::Error(f) = *answer {
                        out.insert(f.code);
                    }
                }
            }
        }
        out
    }

    /// The refusals of a `negotiate` whose offer a Provider may read as
    /// malformed rather than as holding no common version: an empty list,
    /// a version below 1, or one not in the descending order §2.2 asks
    /// for. Either answer is true of such a request.
    pub fn negotiate_refusals(&self, extras: Option<&Bundle>) -> BTreeSet<ErrorCode> {
        let mut out = BTreeSet::new();
        if let Some(Value::IntArray(v)) = extras.and_then(|b| b.get(keys::CONSUMER_VERSIONS)) {
            let malformed =
                v.is_empty() || v.iter().any(|x| *x < 1) || v.windows(2).any(|w| w[0] <= w[1]);
            if malformed {
                out.insert(ErrorCode::InvalidRequest);
                out.insert(ErrorCode::UnsupportedVersion);
            }
        }
        out
    }
}
