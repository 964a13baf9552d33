//! One request, from Bundle to checked answer: deadlines (§4.1), retries
//! with the same request id (§5, §6), renegotiation (§2.2), capability
//! gating (§2.3), bounded reads of untrusted answers (§7.3), and closing
//! every descriptor nobody asked for (§4.5).

use super::error::{CetpError, ConsumerError, DeviceFault, Refusal};
use super::{Consumer, ConsumerMutant, ConsumerVariant, Mode};
use crate::port::ConsumerPort;
use cetp_proto::bundle::exceeds_depth;
use cetp_proto::descriptor::Violation;
use cetp_proto::device::{CallAnswer, DeviceError, ErrorKind};
use cetp_proto::envelope::Capability;
use cetp_proto::envelope::{keys, Common, ErrorEnvelope, Method, Response};
use cetp_proto::{Bundle, ErrorCode, Value};

/// The end of the time one blocking Consumer call may take, device time.
#[derive(Clone, Copy, Debug)]
pub(super) struct Budget {
    pub deadline_ms: i64,
}

pub(super) struct V2Call<'a> {
    pub method: Method,
    pub request_id: &'a str,
    /// Method-specific extras, added to the common fields.
    pub fields: Vec<(&'static str, Value)>,
    /// Whether the caller will consume a `result_fd` (execute_tool and
    /// get_operation results); any other descriptor is closed at once.
    pub keep_result_fd: bool,
}

/// A decoded, echo-checked answer. The caller owns `result_fd` and must
/// read or close it.
pub(super) struct Answer {
    pub response: Response,
    pub result_fd: Option<String>,
}

/// Who is asked what: for messages and fault attribution.
#[derive(Clone, Copy)]
pub(super) struct Site<'a> {
    pub provider: &'a str,
    pub method: &'static str,
}

pub(super) enum Exchange {
    Answer(Bundle, Option<String>),
    Port(DeviceError),
}

/// §6: after a timeout or a dead Binder the request may have run; the only
/// allowed moves are retrying or querying with the same request id.
fn transport_retryable(e: &DeviceError) -> bool {
    matches!(e.kind, ErrorKind::Timeout | ErrorKind::ProviderDied)
}

/// §5: authorization, confirmation and argument errors need a user action or
/// new input, never a blind retry, whatever `retryable` says.
fn auto_retryable(code: ErrorCode) -> bool {
    !matches!(
        code,
        ErrorCode::AuthRequired
            | ErrorCode::UserActionRequired
            | ErrorCode::UserCancelled
            | ErrorCode::InvalidArgs
            | ErrorCode::InvalidRequest
            | ErrorCode::PermissionDenied
            | ErrorCode::NegotiationRequired
    )
}

fn collect_fds(b: &Bundle, out: &mut Vec<String>) {
    for v in b.0.values() {
        match v {
            Value::Fd(fd) => out.push(fd.handle.clone()),
            Value::Bundle(inner) => collect_fds(inner, out),
            _ => {}
        }
    }
}

impl Consumer {
    pub(super) fn close_quietly(&self, port: &mut dyn ConsumerPort, handle: &str) {
        if self.has(ConsumerMutant::FileFdNotClosed) {
            return;
        }
        // Closing is best effort: a handle the device no longer holds is closed.
        let _ = port.close_fd(handle);
    }

    /// Whether the current session of Provider `idx` negotiated `cap`.
    pub(super) fn negotiated(&self, idx: usize, cap: Capability) -> bool {
        if self.has(ConsumerMutant::CapabilityNotNegotiatedUsed) {
            return true;
        }
        matches!(&self.providers[idx].mode, Mode::V2(st) if st.session.has(cap))
    }

    pub(super) fn budget(&self, port: &mut dyn ConsumerPort) -> Budget {
        let budget = i64::try_from(self.config.execution_budget_ms).unwrap_or(i64::MAX);
        Budget {
            deadline_ms: port.now_ms().saturating_add(budget),
        }
    }

    /// Sleeps `ms` through the port if that ends before the budget does.
    pub(super) fn wait_within(
        &self,
        port: &mut dyn ConsumerPort,
        ms: u64,
        budget: &Budget,
    ) -> bool {
        let step = i64::try_from(ms).unwrap_or(i64::MAX);
        // Strictly before the deadline: a wait that ends on it leaves no
        // time for the request it waited for.
        if port.now_ms().saturating_add(step) >= budget.deadline_ms {
            return false;
        }
        port.sleep_ms(ms);
        true
    }

    /// One `call()`; a thrown exception or a null Bundle is the Provider's
    /// fault (§5: errors are structured Bundles). Descriptors other than a
    /// kept `result_fd` are closed before anything else can fail.
    pub(super) fn exchange(
        &self,
        port: &mut dyn ConsumerPort,
        site: Site<'_>,
        authority: &str,
        extras: &Bundle,
        timeout_ms: u64,
        keep_result_fd: bool,
    ) -> Result<Exchange, ConsumerError> {
        let Site { provider, method } = site;
        match port.call(authority, method, None, Some(extras), timeout_ms) {
            Err(e)
                if e.kind == ErrorKind::TransactionTooLarge
                    && self.has(ConsumerMutant::OversizedAnswerCrashes) =>
            {
                panic!("{method}: the transaction failed: {}", e.message);
            }
            Err(e) => Ok(Exchange::Port(e)),
            Ok(CallAnswer::Threw { class, message }) => Err(ConsumerError::violation(
                provider,
                method,
                "response.threw",
                "5",
                format!(
                    "call() threw {:?} ({:?}) instead of answering a structured error",
                    super::ProviderText::truncated(&class, self.config.limits.max_name_bytes)
                        .as_str(),
                    super::ProviderText::truncated(&message, self.config.limits.max_message_bytes)
                        .as_str()
                ),
            )),
            Ok(CallAnswer::Result(None)) => Err(ConsumerError::violation(
                provider,
                method,
                "response.null",
                "4",
                "call() returned null",
            )),
            Ok(CallAnswer::Result(Some(b))) => {
                let mut fds = Vec::new();
                collect_fds(&b, &mut fds);
                let keep = match (keep_result_fd, b.get(keys::RESULT_FD)) {
                    (true, Some(Value::Fd(fd))) => Some(fd.handle.clone()),
                    _ => None,
                };
                for h in fds {
                    if keep.as_deref() != Some(h.as_str()) {
                        self.close_quietly(port, &h);
                    }
                }
                Ok(Exchange::Answer(b, keep))
            }
        }
    }

    /// Bounds JSON text before anything parses it (§7.3). Returns nothing;
    /// a too-large or too-deep answer is refused.
    pub(super) fn screen(&self, provider: &str, b: &Bundle) -> Result<(), ConsumerError> {
        let lim = &self.config.limits;
        for key in [keys::DATA, keys::ERROR_DETAILS] {
            if let Some(Value::String(s)) = b.get(key) {
                if s.len() > lim.max_inline_bytes {
                    return Err(ConsumerError::refused(Refusal::TooLarge {
                        provider: provider.to_string(),
                        at: key.to_string(),
                        bytes: s.len() as u64,
                        limit: lim.max_inline_bytes as u64,
                    }));
                }
                if exceeds_depth(s, lim.json_depth()).is_some()
                    && !self.has(ConsumerMutant::JsonDepthUnbounded)
                {
                    return Err(ConsumerError::refused(Refusal::JsonTooDeep {
                        provider: provider.to_string(),
                        at: key.to_string(),
                        limit: lim.json_depth(),
                    }));
                }
            }
        }
        Ok(())
    }

    /// The error code of an error answer, if it is one §5 defines and its
    /// `retryable` flag obeys §5's table.
    pub(super) fn check_error(
        &self,
        provider: &str,
        method: &'static str,
        env: &ErrorEnvelope,
    ) -> Result<ErrorCode, ConsumerError> {
        let shown = super::ProviderText::truncated(&env.code, self.config.limits.max_name_bytes);
        let Some(code) = env.known_code() else {
            if self.has(ConsumerMutant::UnknownErrorCodePanics) {
                panic!("unknown error code {:?}", shown.as_str());
            }
            return Err(ConsumerError::violation(
                provider,
                method,
                "error.code.known",
                "5",
                format!("unknown error code {:?}", shown.as_str()),
            ));
        };
        if !code.retry_rule().allows(env.retryable) {
            return Err(ConsumerError::violation(
                provider,
                method,
                "error.retryable.rule",
                "5",
                format!("{code} with retryable={}", env.retryable),
            ));
        }
        Ok(code)
    }

    pub(super) fn cetp_error(
        &self,
        provider: &str,
        method: &'static str,
        code: ErrorCode,
        env: &ErrorEnvelope,
    ) -> ConsumerError {
        ConsumerError::Cetp(Box::new(CetpError::from_envelope(
            provider,
            method,
            code,
            env,
            self.config.limits.max_message_bytes,
        )))
    }

    /// Authority, token and label of a v2 Provider, after checking that the
    /// method's capability was negotiated (§2.3).
    fn v2_target(
        &self,
        idx: usize,
        method: Method,
    ) -> Result<(String, String, String), ConsumerError> {
        let entry = &self.providers[idx];
        match &entry.mode {
            Mode::V2(st) => {
                if let Some(cap) = method.capability() {
                    if !self.negotiated(idx, cap) {
                        return Err(ConsumerError::refused(Refusal::CapabilityNotNegotiated {
                            provider: st.session.provider_id.clone(),
                            capability: cap,
                        }));
                    }
                }
                Ok((
                    entry.found.authority.clone(),
                    st.session.token.clone(),
                    st.session.provider_id.clone(),
                ))
            }
            Mode::Disabled(reason) => Err(ConsumerError::refused(Refusal::Disabled {
                provider: entry.found.package.clone(),
                reason: reason.clone(),
            })),
            Mode::V1 { .. } => Err(ConsumerError::refused(Refusal::NotV2 {
                provider: entry.found.package.clone(),
            })),
            Mode::Undecided => Err(ConsumerError::refused(Refusal::NotConnected {
                provider: entry.found.package.clone(),
            })),
        }
    }

    /// Decodes an answer and checks the echo fields every v2 answer but
    /// `negotiate`'s carries (§4.2, §4.4, §5).
    fn decode_v2(
        &self,
        provider: &str,
        method: Method,
        request_id: &str,
        b: &Bundle,
    ) -> Result<Response, ConsumerError> {
        let name = method.as_str();
        self.screen(provider, b)?;
        let response = Response::from_bundle(b).map_err(|e| {
            ConsumerError::violation(provider, name, "response.envelope", "5", e.message)
        })?;
        let (version, id, section) = match &response {
            Response::Success {
                protocol_version,
                request_id,
                ..
            } => (*protocol_version, request_id.as_deref(), "4.2"),
            Response::Accepted {
                protocol_version,
                request_id,
                ..
            } => (*protocol_version, request_id.as_deref(), "4.4"),
            Response::Error(e) => (e.protocol_version, e.request_id.as_deref(), "5"),
        };
        let mut violations = Vec::new();
        if version != Some(2) {
            violations.push(Violation::must(
                "response.protocol_version.echo",
                section,
                "/protocol_version".into(),
                format!("protocol_version is {version:?}, not Int 2"),
            ));
        }
        if id != Some(request_id) {
            violations.push(Violation::must(
                "response.request_id.echo",
                section,
                "/request_id".into(),
                match id {
                    None => "request_id is not echoed".to_string(),
                    Some(other) => format!(
                        "request_id {:?} is not the request's {request_id}",
                        super::ProviderText::truncated(other, 64).as_str()
                    ),
                },
            ));
        }
        if matches!(response, Response::Accepted { .. }) && method != Method::ExecuteTool {
            violations.push(Violation::must(
                "response.accepted.method",
                "4.4",
                "/status".into(),
                format!("status \"accepted\" answers only execute_tool, not {name}"),
            ));
        }
        if violations.is_empty() {
            Ok(response)
        } else {
            Err(ConsumerError::Protocol(super::ProtocolFault {
                provider: provider.to_string(),
                method: name,
                violations,
            }))
        }
    }

    /// The extras of one v2 request: the common fields, as the mutants
    /// under test break them, then the method's own.
    fn v2_extras(&self, call: &V2Call<'_>, common: Common, request_budget: i64) -> Bundle {
        let mut extras = common.to_bundle();
        if self.has(ConsumerMutant::ProtocolVersionLong) {
            extras.insert(keys::PROTOCOL_VERSION, Value::Long(2));
        }
        if self.has(ConsumerMutant::DeadlineRelative) {
            extras.insert(keys::DEADLINE_AT_MS, Value::Long(request_budget));
        }
        if call.method == Method::ExecuteTool && self.has(ConsumerMutant::DeadlineOmitted) {
            extras.remove(keys::DEADLINE_AT_MS);
        }
        if call.method == Method::ListTools && self.has(ConsumerMutant::ListToolsWithoutToken) {
            extras.remove(keys::SESSION_TOKEN);
        }
        for (k, v) in &call.fields {
            extras.insert(k, v.clone());
        }
        extras
    }

    /// §2.2: a session past its expires_at is over; negotiate again rather
    /// than send a dead token. True when it did.
    fn renegotiate_if_expired(
        &mut self,
        port: &mut dyn ConsumerPort,
        idx: usize,
    ) -> Result<bool, ConsumerError> {
        let expired = match &self.providers[idx].mode {
            Mode::V2(st) => st.session.expires_at_ms.is_some_and(|t| port.now_ms() >= t),
            _ => false,
        };
        if expired {
            self.negotiate_at(port, idx)?;
        }
        Ok(expired)
    }

    /// Sends one v2 request until it has an answer worth returning: retries
    /// after a port timeout or a dead Binder, and after retryable errors
    /// (honouring `retry_after_ms`), always with the same request id;
    /// renegotiates once on NEGOTIATION_REQUIRED and retries with the same
    /// id. Error answers that need the caller's judgement (confirmation,
    /// CONFLICT, …) come back as `Response::Error`.
    pub(super) fn call_v2(
        &mut self,
        port: &mut dyn ConsumerPort,
        idx: usize,
        call: &V2Call<'_>,
        budget: &Budget,
    ) -> Result<Answer, ConsumerError> {
        let name = call.method.as_str();
        let mut transport_tries = 0u32;
        let mut error_tries = 0u32;
        let mut renegotiated = false;
        let mut request_id = call.request_id.to_string();
        let mut refreshed = false;
        loop {
            if !refreshed {
                refreshed = self.renegotiate_if_expired(port, idx)?;
            }
            let (authority, token, provider) = self.v2_target(idx, call.method)?;
            let now = port.now_ms();
            if now >= budget.deadline_ms {
                return Err(ConsumerError::refused(Refusal::BudgetExhausted {
                    provider,
                    request_id: request_id.clone(),
                    operation_id: None,
                }));
            }
            let request_budget = i64::try_from(self.config.request_budget_ms).unwrap_or(i64::MAX);
            let deadline_at_ms = now.saturating_add(request_budget).min(budget.deadline_ms);
            let common = Common {
                session_token: token,
                request_id: request_id.clone(),
                deadline_at_ms,
            };
            let extras = self.v2_extras(call, common, request_budget);
            let timeout_ms = u64::try_from(deadline_at_ms - now).unwrap_or(1).max(1);
            let site = Site {
                provider: &provider,
                method: name,
            };
            let (bundle, result_fd) = match self.exchange(
                port,
                site,
                &authority,
                &extras,
                timeout_ms,
                call.keep_result_fd,
            )? {
                Exchange::Answer(b, fd) => (b, fd),
                Exchange::Port(e) => {
                    self.resend_after_port_error(
                        port,
                        site,
                        e,
                        &mut transport_tries,
                        &mut request_id,
                        budget,
                    )?;
                    continue;
                }
            };
            let response =
                self.decode_v2_or_close(port, site, call.method, &request_id, &bundle, &result_fd)?;
            let Response::Error(env) = &response else {
                return Ok(Answer {
                    response,
                    result_fd,
                });
            };
            // An error answer carries no result.
            if let Some(h) = &result_fd {
                self.close_quietly(port, h);
            }
            let code = self.check_error(&provider, name, env)?;
            if code == ErrorCode::NegotiationRequired
                && self.has(ConsumerMutant::RetriesWithDeadToken)
            {
                if error_tries < self.config.max_retries
                    && self.wait_within(port, self.config.default_backoff_ms, budget)
                {
                    error_tries += 1;
                    continue;
                }
            } else if code == ErrorCode::NegotiationRequired && !renegotiated {
                renegotiated = true;
                self.negotiate_at(port, idx)?;
                continue;
            }
            if self.retry_after(port, site, code, env, &mut error_tries, budget)? {
                if self.has(ConsumerMutant::NewRequestIdOnRetry) {
                    request_id = self.fresh_request_id();
                }
                continue;
            }
            return Ok(Answer {
                response,
                result_fd: None,
            });
        }
    }

    /// A port failure of one v2 exchange. After a timeout or a dead Binder
    /// the request may have run (§6), so it is sent again, with the same
    /// request id, while the retry budget lasts: `Ok(())` means send again;
    /// any other failure, or one past the budget, is the device fault to
    /// report. Kept apart so that `call_v2` reads as its answer loop.
    fn resend_after_port_error(
        &mut self,
        port: &mut dyn ConsumerPort,
        site: Site<'_>,
        e: DeviceError,
        tries: &mut u32,
        request_id: &mut String,
        budget: &Budget,
    ) -> Result<(), ConsumerError> {
        if transport_retryable(&e)
            && *tries < self.config.max_retries
            && self.wait_within(port, self.config.default_backoff_ms, budget)
        {
            *tries += 1;
            let fresh = match e.kind {
                ErrorKind::Timeout => self.has(ConsumerMutant::NewRequestIdAfterTimeout),
                _ => self.has(ConsumerMutant::NewRequestIdAfterDisconnect),
            };
            if fresh {
                *request_id = self.fresh_request_id();
            }
            return Ok(());
        }
        Err(ConsumerError::Device(DeviceFault {
            provider: Some(site.provider.to_string()),
            op: site.method.to_string(),
            request_id: Some(request_id.clone()),
            error: e,
        }))
    }

    /// Decodes and echo-checks a v2 answer; when it fails, the descriptor
    /// that came with it is closed, since no caller will read it (§4.5).
    fn decode_v2_or_close(
        &self,
        port: &mut dyn ConsumerPort,
        site: Site<'_>,
        method: Method,
        request_id: &str,
        bundle: &Bundle,
        result_fd: &Option<String>,
    ) -> Result<Response, ConsumerError> {
        match self.decode_v2(site.provider, method, request_id, bundle) {
            Ok(r) => Ok(r),
            Err(e) => {
                if let Some(h) = result_fd {
                    self.close_quietly(port, h);
                }
                Err(e)
            }
        }
    }

    /// A request without the v2 common fields (`negotiate`, v1 methods):
    /// retried after port timeouts only, with the same extras.
    pub(super) fn call_plain(
        &self,
        port: &mut dyn ConsumerPort,
        idx: usize,
        method: &'static str,
        extras: &Bundle,
        budget: &Budget,
    ) -> Result<Bundle, ConsumerError> {
        let provider = self.providers[idx].label();
        let authority = self.providers[idx].found.authority.clone();
        let mut tries = 0u32;
        loop {
            let site = Site {
                provider: &provider,
                method,
            };
            match self.exchange(
                port,
                site,
                &authority,
                extras,
                self.config.request_budget_ms.max(1),
                false,
            )? {
                Exchange::Answer(b, _) => {
                    self.screen(&provider, &b)?;
                    return Ok(b);
                }
                Exchange::Port(e) => {
                    if transport_retryable(&e)
                        && tries < self.config.max_retries
                        && self.wait_within(port, self.config.default_backoff_ms, budget)
                    {
                        tries += 1;
                        continue;
                    }
                    return Err(ConsumerError::Device(DeviceFault {
                        provider: Some(provider),
                        op: method.to_string(),
                        request_id: None,
                        error: e,
                    }));
                }
            }
        }
    }

    /// Whether a retryable error may be retried now, waiting as asked.
    pub(super) fn retry_after(
        &self,
        port: &mut dyn ConsumerPort,
        site: Site<'_>,
        code: ErrorCode,
        env: &ErrorEnvelope,
        tries: &mut u32,
        budget: &Budget,
    ) -> Result<bool, ConsumerError> {
        let Site { provider, method } = site;
        let retryable = env.retryable || self.has(ConsumerMutant::RetriesNotRetryable);
        if !(retryable && auto_retryable(code) && *tries < self.config.max_retries) {
            return Ok(false);
        }
        let wait = match env.retry_after_ms {
            Some(ms) if ms >= 0 && self.has(ConsumerMutant::IgnoresRetryAfter) => {
                self.config.default_backoff_ms
            }
            Some(ms) if ms < 0 => {
                return Err(ConsumerError::violation(
                    provider,
                    method,
                    "error.retry_after_ms",
                    "5",
                    format!("retry_after_ms is negative ({ms})"),
                ))
            }
            // Waiting longer than asked is allowed (§5: "at least").
            Some(ms) if self.takes(ConsumerVariant::ExtraRetryWait) => u64::try_from(ms)
                .unwrap_or(u64::MAX)
                .saturating_add(self.config.default_backoff_ms),
            Some(ms) => u64::try_from(ms).unwrap_or(u64::MAX),
            None => self.config.default_backoff_ms,
        };
        if self.wait_within(port, wait, budget) {
            *tries += 1;
            Ok(true)
        } else {
            Ok(false)
        }
    }
}
