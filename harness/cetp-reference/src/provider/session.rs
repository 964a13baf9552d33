//! Request decoding, `negotiate` and sessions (§2.2, §2.3, §4.1), and the
//! per-caller concurrency limit.

use super::state::{Answer, Failure, Session};
use super::util::{lock, rfc3339_utc};
use super::{notes, FixtureSet, Mutant, ReferenceProvider, Variant, RETRY_AFTER_MS};
use cetp_proto::envelope::{
    decode_v2_request, is_uuid, keys, Capability, Method, NegotiateRequest, V2Request,
};
use cetp_proto::{Bundle, ErrorCode, Value};
use serde_json::json;
use std::collections::BTreeSet;

/// Stands in for a non-UUID request id while the lenient mutant decodes.
const PLACEHOLDER_ID: &str = "00000000-0000-4000-8000-000000000000";

/// Capabilities the reference implements (§2.3).
const PROVIDER_CAPABILITIES: [Capability; 3] = Capability::ALL;

impl ReferenceProvider {
    /// The refusal-order latitudes: no clause orders the checks of a
    /// request that carries several faults (§2.2, §2.3, §4.1, §5), so a
    /// Provider may read the deadline first ([`Variant::DeadlineCheckedFirst`])
    /// or the session and the capability it grants
    /// ([`Variant::SessionCheckedFirst`]) before the rest of the envelope.
    /// Each reads only fields of the right Bundle type: a field of the wrong
    /// type is the envelope's fault, judged after; but a session token is
    /// read as Android's `Bundle.getString` reads it, so one of another
    /// type is no token, and the request has no session (§5
    /// NEGOTIATION_REQUIRED: "session missing").
    pub(crate) fn early_refusal(
        &self,
        uid: u32,
        now_ms: i64,
        method: Method,
        extras: Option<&Bundle>,
    ) -> Option<Failure> {
        if method == Method::Negotiate {
            return None;
        }
        let b = extras?;
        if self.takes(Variant::DeadlineCheckedFirst) {
            if let Some(Value::Long(deadline)) = b.get(keys::DEADLINE_AT_MS) {
                // §6: a retry of a recorded execution gets its terminal
                // result, whatever its deadline.
                let recorded = method == Method::ExecuteTool
                    && b.opt_string(keys::REQUEST_ID)
                        .ok()
                        .flatten()
                        .is_some_and(|id| {
                            let key = self.dedupe_key(uid, &id);
                            lock(&self.durable.state).records.contains_key(&key)
                        });
                if now_ms > *deadline && !recorded {
                    return Some(Failure::new(
                        ErrorCode::DeadlineExceeded,
                        "The request deadline has passed; nothing was done.",
                    ));
                }
            }
        }
        if self.takes(Variant::SessionCheckedFirst) {
            match b.opt_string(keys::SESSION_TOKEN) {
                Ok(Some(token)) => {
                    let caps = match self.session(uid, now_ms, &token) {
                        Ok(caps) => caps,
                        Err(f) => return Some(f),
                    };
                    if let Some(cap) = method.capability().filter(|c| !caps.contains(c)) {
                        return Some(Failure::new(
                            ErrorCode::UnsupportedCapability,
                            format!("{} was not negotiated in this session.", cap.as_str()),
                        ));
                    }
                }
                Err(_) => {
                    return Some(Failure::new(
                        ErrorCode::NegotiationRequired,
                        "No session: negotiate first.",
                    ))
                }
                Ok(None) => {}
            }
        }
        None
    }

    /// Strict decoding (cetp-proto), with the envelope mutants bending the
    /// input before it and restoring what they hid after it.
    pub(crate) fn decode(
        &self,
        method: Method,
        extras: Option<&Bundle>,
    ) -> Result<V2Request, Failure> {
        let mut b = extras.cloned().unwrap_or_default();
        let mut hidden_id = None;
        if self.takes(Variant::UnknownExtrasRejected) {
            const KNOWN: &[&str] = &[
                keys::PROTOCOL_VERSION,
                keys::SESSION_TOKEN,
                keys::REQUEST_ID,
                keys::DEADLINE_AT_MS,
                keys::TOOL_NAME,
                keys::ARGS,
                keys::RESUME_TOKEN,
                keys::OPERATION_ID,
                keys::CONSUMER_VERSIONS,
                keys::CONSUMER_CAPABILITIES,
            ];
            if let Some(k) = b.keys().find(|k| !KNOWN.contains(k)) {
                return Err(Failure::new(
                    ErrorCode::InvalidRequest,
                    format!("Unknown field {k}."),
                ));
            }
        }
        if method != Method::Negotiate {
            if self.has(Mutant::UnsupportedVersionAccepted) {
                if let Some(Value::Int(v)) = b.get(keys::PROTOCOL_VERSION) {
                    if *v != 2 {
                        b.insert(keys::PROTOCOL_VERSION, Value::Int(2));
                    }
                }
            }
            if self.has(Mutant::MissingDeadlineAnswersDeadlineExceeded)
                && !b.contains(keys::DEADLINE_AT_MS)
            {
                return Err(Failure::new(
                    ErrorCode::DeadlineExceeded,
                    "The request deadline has passed.",
                ));
            }
            if self.has(Mutant::SessionNotChecked) && !b.contains(keys::SESSION_TOKEN) {
                b.insert(keys::SESSION_TOKEN, Value::str(""));
            }
            if self.has(Mutant::LenientRequestId) {
                if let Ok(Some(id)) = b.opt_string(keys::REQUEST_ID) {
                    if !is_uuid(&id) {
                        b.insert(keys::REQUEST_ID, Value::str(PLACEHOLDER_ID));
                        hidden_id = Some(id);
                    }
                }
            }
        }
        let mut req = decode_v2_request(method, Some(&b)).map_err(|e| {
            if e.code == ErrorCode::NegotiationRequired {
                // No session at all: the same answer as an invalid one.
                self.no_session()
            } else {
                Failure::new(e.code, format!("Malformed request: {}", e.message))
            }
        })?;
        if let Some(id) = hidden_id {
            if let Some(c) = common_mut(&mut req) {
                c.request_id = id;
            }
        }
        Ok(req)
    }

    /// §2.2: highest common version, the offered capabilities we support,
    /// limits at or above the minimums, and a token bound to this caller.
    pub(crate) fn negotiate(
        &self,
        caller: &cetp_proto::provider::CallerIdentity,
        now_ms: i64,
        n: &NegotiateRequest,
    ) -> Answer {
        let uid = caller.uid;
        let ours = self.versions();
        let common: BTreeSet<i32> = n
            .consumer_versions
            .iter()
            .copied()
            .filter(|v| ours.contains(v))
            .collect();
        let picked = if self.has(Mutant::NegotiatePicksLowest) {
            common.first()
        } else {
            common.last()
        };
        let selected = match picked {
            Some(_) if self.has(Mutant::NegotiateIgnoresOffer) => ours.last().copied().unwrap_or(2),
            Some(v) => *v,
            None if self.has(Mutant::NegotiateIgnoresNoCommon) => 2,
            None => {
                return Failure::new(
                    ErrorCode::UnsupportedVersion,
                    format!(
                        "No common protocol version; this provider supports {}.",
                        ours.iter()
                            .map(i32::to_string)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )
                .into()
            }
        };
        let capabilities: BTreeSet<Capability> = PROVIDER_CAPABILITIES
            .into_iter()
            .filter(|c| {
                self.has(Mutant::NegotiateExtraCapability)
                    || n.consumer_capabilities.iter().any(|o| o == c.as_str())
            })
            // A described app grants what the Provider it describes granted.
            .filter(|c| self.described().is_none_or(|d| d.capabilities.contains(c)))
            .collect();
        let expires_ms = now_ms.saturating_add(self.cfg.session_ttl_ms);
        // Draw from the generator before taking the memory lock: the lock
        // order is memory, then durable, and never the other way round.
        let random = self.random_session_token();
        let token = {
            let mut mem = lock(&self.memory);
            mem.issued += 1;
            let token = match random {
                None => format!("session-{}", mem.issued),
                // 320 bytes, beyond the 256 of §2.2.
                Some(t) if self.has(Mutant::SessionTokenTooLong) => t.repeat(5),
                Some(t) => self.issued(t),
            };
            // Forget expired sessions so memory stays bounded by live ones.
            mem.sessions
                .retain(|_, s| self.session_live(s.expires_ms, now_ms));
            mem.sessions.insert(
                token.clone(),
                Session {
                    uid,
                    version: selected,
                    capabilities: capabilities.clone(),
                    expires_ms,
                },
            );
            mem.latest_caps.insert(uid, capabilities.clone());
            token
        };
        let limits = self.limits();
        Answer::ok(json!({
            "selected_version": selected,
            "provider_id": self.provider_id(),
            "provider_name": self.vendor_text(&self.cfg.provider_name),
            "session_token": token,
            "expires_at": rfc3339_utc(expires_ms),
            "capabilities": capabilities.iter().map(|c| c.as_str()).collect::<Vec<_>>(),
            "limits": {
                "max_request_bytes": limits.max_request_bytes,
                "max_inline_result_bytes": limits.max_inline_result_bytes,
                "max_concurrent_requests": limits.max_concurrent_requests,
                "idempotency_window_seconds": limits.idempotency_window_seconds,
            },
        }))
    }

    /// The random part of a new session token, in the shape the app and its
    /// latitudes issue, drawn from the durable generator (`None` for the
    /// predictable-token mutant, which numbers its sessions instead). Kept
    /// apart from `negotiate` because it takes the durable lock, which must
    /// not be held with the memory lock.
    fn random_session_token(&self) -> Option<String> {
        (!self.has(Mutant::SessionTokenPredictable)).then(|| {
            let mut d = lock(&self.durable.state);
            if self.takes(Variant::SessionTokensUuid) {
                d.rng.uuid()
            } else if self.takes(Variant::SessionTokensSigned) {
                // A JWS-like blob: a fixed header shared by every token, then
                // random claims and a signature.
                let claims = d.rng.hex("session");
                let sig = d.rng.hex("signature");
                format!(
                    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.{}.{}",
                    &claims[..40],
                    &sig[..43]
                )
            } else {
                match self.cfg.fixtures {
                    FixtureSet::Reference => d.rng.hex("session"),
                    FixtureSet::Notes => notes::session_token(&mut d.rng),
                }
            }
        })
    }

    /// The capabilities of a valid v2 session of this caller, or
    /// NEGOTIATION_REQUIRED (§2.2). A token of another UID gets the same
    /// answer as an unknown one, so tokens cannot be probed.
    pub(crate) fn session(
        &self,
        uid: u32,
        now_ms: i64,
        token: &str,
    ) -> Result<BTreeSet<Capability>, Failure> {
        let mem = lock(&self.memory);
        match mem.sessions.get(token) {
            Some(s)
                if (s.uid == uid || self.has(Mutant::SessionNotBoundToCaller))
                    && self.session_live(s.expires_ms, now_ms)
                    && s.version == 2 =>
            {
                if self.has(Mutant::CapabilitiesChangedInSession) {
                    if let Some(latest) = mem.latest_caps.get(&s.uid) {
                        return Ok(latest.clone());
                    }
                }
                Ok(s.capabilities.clone())
            }
            _ if self.has(Mutant::SessionNotChecked) => Ok(BTreeSet::new()),
            _ => Err(self.no_session()),
        }
    }

    /// Whether a session expiring at `expires_ms` is still valid.
    fn session_live(&self, expires_ms: i64, now_ms: i64) -> bool {
        now_ms < expires_ms || self.has(Mutant::SessionNeverExpires)
    }

    fn no_session(&self) -> Failure {
        Failure::new(
            ErrorCode::NegotiationRequired,
            "The session is missing, expired or not valid here; negotiate again.",
        )
        .retryable(!self.has(Mutant::NegotiationRequiredNotRetryable))
    }

    /// Admits one more concurrent request of `uid`, or RATE_LIMITED.
    pub(crate) fn admit(&self, uid: u32) -> Result<Slot<'_>, Failure> {
        let limit = usize::try_from(self.limits().max_concurrent_requests).unwrap_or(usize::MAX);
        let mut mem = lock(&self.memory);
        let epoch = mem.epoch;
        let n = mem.in_flight.entry(uid).or_insert(0);
        if *n >= limit {
            let mut f = Failure::new(
                ErrorCode::RateLimited,
                "Too many concurrent requests; retry shortly.",
            )
            .retryable(!self.has(Mutant::RateLimitedNotRetryable));
            f.retry_after_ms = Some(RETRY_AFTER_MS);
            return Err(f);
        }
        *n += 1;
        Ok(Slot {
            provider: self,
            uid,
            epoch,
        })
    }
}

/// One admitted request; leaving frees the slot.
pub(crate) struct Slot<'a> {
    provider: &'a ReferenceProvider,
    uid: u32,
    epoch: u64,
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        let mut mem = lock(&self.provider.memory);
        // A restart already forgot the old process's counters.
        if mem.epoch == self.epoch {
            if let Some(n) = mem.in_flight.get_mut(&self.uid) {
                *n = n.saturating_sub(1);
            }
        }
    }
}

fn common_mut(req: &mut V2Request) -> Option<&mut cetp_proto::envelope::Common> {
    match req {
        V2Request::Negotiate(_) => None,
        V2Request::GetProviderInfo(c) | V2Request::ListTools(c) => Some(c),
        V2Request::ExecuteTool { common, .. }
        | V2Request::GetOperation { common, .. }
        | V2Request::CancelOperation { common, .. } => Some(common),
    }
}
