//! Tool execution: requests and retries (§4.1, §5, §6), results (§4.2,
//! §4.5), Provider confirmation (§4.3) and background operations (§4.4).

use super::call::{Budget, V2Call};
use super::error::{ConsumerError, DeviceFault, ProtocolFault, ProviderText, Refusal};
use super::{Consumer, ConsumerMutant, ConsumerVariant, Mode};
use crate::port::ConsumerPort;
use cetp_proto::bundle::exceeds_depth;
use cetp_proto::canonical::sha256_hex;
use cetp_proto::descriptor::{ToolSummary, Violation};
use cetp_proto::device::{DeviceError, ErrorKind, FdRead};
use cetp_proto::envelope::{
    keys, v1_execute_bundle, Capability, ErrorEnvelope, ExecResult, Method, OpState, Response,
    V1Response,
};
use cetp_proto::provider::Decision;
use cetp_proto::schema::CompiledSchema;
use cetp_proto::{ErrorCode, PendingIntentValue, Value};
use serde_json::Value as Json;
use std::sync::Arc;

/// The Chinese verbs `obeys_chinese_instructions` follows (调用 "call",
/// 执行 "execute", 运行 "run", 使用 "use"): the spec is Chinese, and so may
/// be a Provider's text.
const CHINESE: [&str; 4] = ["调用", "执行", "运行", "使用"];

/// One logical execution (§4.1): its request id is the idempotency key, fixed
/// when the execution is prepared and reused by every retry, resume and
/// query, however late.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Execution {
    /// The Provider it runs on.
    pub provider_id: String,
    /// The tool it runs.
    pub tool_name: String,
    /// The args JSON text exactly as sent every time: resume tokens and
    /// dedupe records bind to these bytes (§4.3, §6).
    pub args: String,
    /// UUID fixed for the whole execution (§4.1, §6).
    pub request_id: String,
}

/// How a result arrived.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// `kind = inline` in the Bundle's `data` (§4.2).
    Inline,
    /// `kind = file`: read from `result_fd` and checked (§4.5).
    File {
        /// The size declared and read.
        size_bytes: u64,
        /// The SHA-256 declared and verified, lowercase hex.
        sha256: String,
    },
}

/// A validated tool result. `value` is Provider data (§4.2, §7.3): it
/// matched the tool's output schema, and it is still never an instruction.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolOutput {
    /// The Provider that produced it.
    pub provider_id: String,
    /// The tool that produced it.
    pub tool_name: String,
    /// The execution's request id.
    pub request_id: String,
    /// The operation it came from, when it ran in the background (§4.4).
    pub operation_id: Option<String>,
    /// The result value, untrusted data.
    pub value: Json,
    /// Inline or through a descriptor.
    pub delivery: Delivery,
}

/// The terminal outcome of an execution.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// The tool succeeded with a validated result.
    Succeeded(ToolOutput),
    /// §4.4: only a queried `cancelled` state proves there is no further
    /// effect.
    Cancelled {
        /// The cancelled operation.
        operation_id: String,
    },
}

/// Display-only progress of an operation (§4.4: never a sign of success).
#[derive(Clone, Debug, PartialEq)]
pub struct Progress {
    /// Work done so far, if reported.
    pub current: Option<f64>,
    /// Total work, if reported.
    pub total: Option<f64>,
    /// Status text, untrusted and bounded.
    pub message: Option<ProviderText>,
}

/// A background operation (§4.4), bound to the execution that created it.
#[derive(Clone, Debug, PartialEq)]
pub struct Operation {
    /// The Provider running it.
    pub provider_id: String,
    /// The tool it runs.
    pub tool_name: String,
    /// The creating execution's id: get_operation and cancel_operation must
    /// carry it (§4.1).
    pub request_id: String,
    /// The Provider's `operation_id`, bound to this caller (§4.4).
    pub operation_id: String,
    /// The Provider's latest `poll_after_ms`.
    pub poll_after_ms: Option<u64>,
    /// The last state seen (`queued` right after `accepted`).
    pub state: OpState,
    /// The latest progress the Provider reported, for display.
    pub progress: Option<Progress>,
    /// Whether `cancel_operation` was sent and accepted (or answered CONFLICT).
    pub cancel_requested: bool,
    /// How many `get_operation` calls were made so far.
    pub polls: u32,
}

/// What [`Consumer::run`] got back.
#[derive(Clone, Debug, PartialEq)]
pub enum Started {
    /// The execution ended at once.
    Done(Outcome),
    /// It runs in the background: follow it with [`Consumer::wait`] or [`Consumer::cancel`].
    Pending(Operation),
}

/// What the Consumer shows the user before launching a Provider's
/// confirmation UI (§4.3). The decision itself is taken in the Provider's
/// own UI; the Consumer only carries the user there.
#[derive(Debug)]
pub struct ConfirmationRequest<'a> {
    /// The Provider asking.
    pub provider_id: &'a str,
    /// The tool being executed.
    pub tool_name: &'a str,
    /// The execution's request id, which the resumed call keeps.
    pub request_id: &'a str,
    /// AUTH_REQUIRED or USER_ACTION_REQUIRED.
    pub code: ErrorCode,
    /// The Provider's `error_message`, to show as data.
    pub message: &'a ProviderText,
    /// 1 for the first confirmation of this execution.
    pub round: u32,
}

/// The user, as far as the Consumer is concerned: whether to launch the
/// Provider's confirmation, and (on a simulated device) what to decide there.
pub trait UserAgent {
    /// `None`: do not launch it; the execution ends with the Provider's error.
    fn decide(&mut self, request: &ConfirmationRequest<'_>) -> Option<Decision>;
}

impl<F> UserAgent for F
where
    F: FnMut(&ConfirmationRequest<'_>) -> Option<Decision>,
{
    fn decide(&mut self, request: &ConfirmationRequest<'_>) -> Option<Decision> {
        self(request)
    }
}

/// Always plays the same decision.
impl UserAgent for Decision {
    fn decide(&mut self, _: &ConfirmationRequest<'_>) -> Option<Decision> {
        Some(*self)
    }
}

/// No user present: confirmations are never launched.
#[derive(Clone, Copy, Debug, Default)]
pub struct Unattended;

impl UserAgent for Unattended {
    fn decide(&mut self, _: &ConfirmationRequest<'_>) -> Option<Decision> {
        None
    }
}

/// What a tool result is checked against.
#[derive(Clone)]
struct ToolRef {
    summary: ToolSummary,
    output: Arc<CompiledSchema>,
}

/// The fields of one `execute_tool` request: the tool, its args, and the
/// resume token of an approved decision when there is one (§4.3). Built
/// afresh for each round, since only the token changes between them.
fn execute_fields(exec: &Execution, resume_token: Option<&str>) -> Vec<(&'static str, Value)> {
    let mut fields = vec![
        (keys::TOOL_NAME, Value::str(&exec.tool_name)),
        (keys::ARGS, Value::str(&exec.args)),
    ];
    if let Some(t) = resume_token {
        fields.push((keys::RESUME_TOKEN, Value::str(t)));
    }
    fields
}

impl Consumer {
    /// Prepares an execution of `tool_name` with `args`, under a fresh
    /// request id.
    pub fn prepare(
        &mut self,
        provider_id: &str,
        tool_name: &str,
        args: &Json,
    ) -> Result<Execution, ConsumerError> {
        self.prepare_text(provider_id, tool_name, args.to_string())
    }

    /// As [`prepare`](Consumer::prepare), with the args JSON text exactly as
    /// it will be sent.
    pub fn prepare_text(
        &mut self,
        provider_id: &str,
        tool_name: &str,
        args: impl Into<String>,
    ) -> Result<Execution, ConsumerError> {
        let args = args.into();
        let limit = self.config.limits.max_request_bytes;
        if args.len() > limit {
            return Err(ConsumerError::refused(Refusal::ArgsTooLarge {
                bytes: args.len(),
                limit,
            }));
        }
        if exceeds_depth(&args, self.config.limits.json_depth()).is_some() {
            return Err(ConsumerError::refused(Refusal::ArgsNotJson {
                reason: format!("nested deeper than {}", self.config.limits.json_depth()),
            }));
        }
        if let Err(e) = serde_json::from_str::<Json>(&args) {
            return Err(ConsumerError::refused(Refusal::ArgsNotJson {
                reason: e.to_string(),
            }));
        }
        Ok(Execution {
            provider_id: provider_id.to_string(),
            tool_name: tool_name.to_string(),
            args,
            request_id: self.fresh_request_id(),
        })
    }

    /// Prepares and runs an execution, and waits for a background operation
    /// to end.
    pub fn execute(
        &mut self,
        port: &mut dyn ConsumerPort,
        provider_id: &str,
        tool_name: &str,
        args: &Json,
        agent: &mut dyn UserAgent,
    ) -> Result<Outcome, ConsumerError> {
        let exec = self.prepare(provider_id, tool_name, args)?;
        self.run_to_end(port, &exec, agent)
    }

    /// Runs an execution and waits for its background operation, if any.
    pub fn run_to_end(
        &mut self,
        port: &mut dyn ConsumerPort,
        exec: &Execution,
        agent: &mut dyn UserAgent,
    ) -> Result<Outcome, ConsumerError> {
        let provider_id = exec.provider_id.as_str();
        let description = self
            .cached_tools(provider_id)
            .and_then(|c| c.get(&exec.tool_name))
            .map(|t| t.description.as_str().to_string())
            .unwrap_or_default();
        if self.has(ConsumerMutant::ObeysDescriptionText) {
            self.call_named(port, provider_id, &description, &exec.tool_name, agent);
        }
        if self.has(ConsumerMutant::ObeysDescriptionCall) {
            self.call_phrased(
                port,
                provider_id,
                &description,
                &["call"],
                &exec.tool_name,
                agent,
            );
        }
        if self.has(ConsumerMutant::ObeysChineseInstructions) {
            self.call_phrased(
                port,
                provider_id,
                &description,
                &CHINESE,
                &exec.tool_name,
                agent,
            );
        }
        // An error of the call or of its background operation (§4.4).
        let ended = match self.run(port, exec, agent) {
            Ok(Started::Done(outcome)) => Ok(outcome),
            Ok(Started::Pending(mut op)) => self.wait(port, &mut op),
            Err(e) => Err(e),
        };
        if let Err(e) = &ended {
            let text = format!("{e:?}");
            if self.has(ConsumerMutant::ObeysErrorText) {
                self.call_named(port, provider_id, &text, &exec.tool_name, agent);
            }
            if self.has(ConsumerMutant::ObeysChineseInstructions) {
                self.call_phrased(port, provider_id, &text, &CHINESE, &exec.tool_name, agent);
            }
        }
        let outcome = ended?;
        if self.has(ConsumerMutant::ObeysProviderText) {
            self.obey(port, provider_id, &outcome, agent);
        }
        if let Outcome::Succeeded(out) = &outcome {
            let text = out.value.to_string();
            if self.has(ConsumerMutant::ObeysToolNamesInResults) {
                self.call_named(port, provider_id, &text, &exec.tool_name, agent);
            }
            if self.has(ConsumerMutant::ObeysChineseInstructions) {
                self.call_phrased(port, provider_id, &text, &CHINESE, &exec.tool_name, agent);
            }
        }
        Ok(outcome)
    }

    /// The phrase-following mutants' bug: every other listed tool that
    /// Provider `text` names right after one of the `verbs` ("call TOOL",
    /// "调用 TOOL") is executed (with empty args).
    fn call_phrased(
        &mut self,
        port: &mut dyn ConsumerPort,
        provider_id: &str,
        text: &str,
        verbs: &[&str],
        except: &str,
        agent: &mut dyn UserAgent,
    ) {
        let told = |name: &str| {
            verbs.iter().any(|v| {
                text.contains(&format!("{v} {name}")) || text.contains(&format!("{v}{name}"))
            })
        };
        let named: Vec<String> = self
            .cached_tools(provider_id)
            .map(|c| {
                c.tools
                    .iter()
                    .filter(|t| t.name != except && told(&t.name))
                    .map(|t| t.name.clone())
                    .collect()
            })
            .unwrap_or_default();
        for tool in named {
            if let Ok(exec) = self.prepare(provider_id, &tool, &Json::Object(Default::default())) {
                let _ = self.run(port, &exec, agent);
            }
        }
    }

    /// The prompt-injection mutants' bug: every other listed tool that
    /// Provider `text` names is executed (with empty args).
    fn call_named(
        &mut self,
        port: &mut dyn ConsumerPort,
        provider_id: &str,
        text: &str,
        except: &str,
        agent: &mut dyn UserAgent,
    ) {
        let named: Vec<String> = self
            .cached_tools(provider_id)
            .map(|c| {
                c.tools
                    .iter()
                    .filter(|t| t.name != except && text.contains(t.name.as_str()))
                    .map(|t| t.name.clone())
                    .collect()
            })
            .unwrap_or_default();
        for tool in named {
            if let Ok(exec) = self.prepare(provider_id, &tool, &Json::Object(Default::default())) {
                let _ = self.run(port, &exec, agent);
            }
        }
    }

    /// The mutant's bug: a result that says "call TOOL" makes it call TOOL.
    fn obey(
        &mut self,
        port: &mut dyn ConsumerPort,
        provider_id: &str,
        outcome: &Outcome,
        agent: &mut dyn UserAgent,
    ) {
        let Outcome::Succeeded(out) = outcome else {
            return;
        };
        let text = out.value.to_string();
        let named: Vec<String> = self
            .cached_tools(provider_id)
            .map(|c| {
                c.tools
                    .iter()
                    .filter(|t| {
                        t.name != out.tool_name && text.contains(&format!("call {}", t.name))
                    })
                    .map(|t| t.name.clone())
                    .collect()
            })
            .unwrap_or_default();
        for tool in named {
            if let Ok(exec) = self.prepare(provider_id, &tool, &Json::Object(Default::default())) {
                let _ = self.run(port, &exec, agent);
            }
        }
    }

    /// Runs (or, after a failure, re-runs with the same request id) an
    /// execution until a result, a background operation, or an error.
    pub fn run(
        &mut self,
        port: &mut dyn ConsumerPort,
        exec: &Execution,
        agent: &mut dyn UserAgent,
    ) -> Result<Started, ConsumerError> {
        let budget = self.budget(port);
        let idx = self.route(exec)?;
        if matches!(self.providers[idx].mode, Mode::V1 { .. }) {
            return self.run_v1(port, idx, exec, &budget);
        }
        let mut tool = self.tool_for(port, idx, &exec.tool_name, &budget)?;
        let label = self.providers[idx].label();
        let package = self.providers[idx].found.package.clone();
        self.check_request_size(idx, exec)?;
        let name = Method::ExecuteTool.as_str();
        let mut resume_token: Option<String> = None;
        let mut rounds = 0u32;
        let mut request_id = exec.request_id.clone();
        loop {
            let generation = self.generation(idx);
            let answer = self.call_v2(
                port,
                idx,
                &V2Call {
                    method: Method::ExecuteTool,
                    request_id: &request_id,
                    fields: execute_fields(exec, resume_token.as_deref()),
                    keep_result_fd: true,
                },
                &budget,
            )?;
            let mut result_fd = answer.result_fd;
            if self.generation(idx) != generation {
                tool = self.recheck_tool(port, idx, exec, &budget, &mut result_fd)?;
            }
            match answer.response {
                Response::Success { data, .. } => {
                    return self.succeeded(port, idx, exec, &tool, &data, &mut result_fd, label);
                }
                Response::Accepted { data, .. } => {
                    if let Some(h) = result_fd.take() {
                        self.close_quietly(port, &h);
                    }
                    let op = self.accept_operation(idx, &tool, exec, &data)?;
                    return Ok(Started::Pending(op));
                }
                Response::Error(env) => {
                    let code = self.check_error(&label, name, &env)?;
                    if code == ErrorCode::PermissionDenied
                        && self.has(ConsumerMutant::V1AfterPermissionDenied)
                        && self.providers[idx].found.versions.contains(&1)
                    {
                        self.providers[idx].mode = Mode::V1 { tools: None };
                        return self.run_v1(port, idx, exec, &budget);
                    }
                    if !matches!(
                        code,
                        ErrorCode::AuthRequired | ErrorCode::UserActionRequired
                    ) {
                        return Err(self.cetp_error(&label, name, code, &env));
                    }
                    rounds += 1;
                    let token = match self
                        .confirm(port, &label, &package, exec, code, &env, rounds, agent)
                    {
                        Ok(token) => token,
                        Err(ConsumerError::Cetp(e))
                            if e.code == code
                                && self.has(ConsumerMutant::RetriesUserAction)
                                && rounds <= self.config.max_retries =>
                        {
                            resume_token = None;
                            continue;
                        }
                        Err(e) => return Err(e),
                    };
                    if self.has(ConsumerMutant::ResumeWithNewRequestId) {
                        request_id = self.fresh_request_id();
                    }
                    resume_token = Some(token);
                }
            }
        }
    }

    /// §3.3: a new negotiation happened inside the request; the tool list is
    /// checked once for it before its descriptor is trusted again. When that
    /// check fails, the result descriptor that came with the answer is
    /// closed, since nobody will read it.
    fn recheck_tool(
        &mut self,
        port: &mut dyn ConsumerPort,
        idx: usize,
        exec: &Execution,
        budget: &Budget,
        result_fd: &mut Option<String>,
    ) -> Result<ToolRef, ConsumerError> {
        match self.tool_for(port, idx, &exec.tool_name, budget) {
            Ok(t) => Ok(t),
            Err(e) => {
                if let Some(h) = result_fd.take() {
                    self.close_quietly(port, &h);
                }
                Err(e)
            }
        }
    }

    /// A success answer of `execute_tool`: its result checked (and read,
    /// for a file) into the execution's output. Whatever descriptor is left
    /// is closed on every path, the failing ones included (§4.5).
    #[allow(clippy::too_many_arguments)]
    fn succeeded(
        &mut self,
        port: &mut dyn ConsumerPort,
        idx: usize,
        exec: &Execution,
        tool: &ToolRef,
        data: &Json,
        result_fd: &mut Option<String>,
        label: String,
    ) -> Result<Started, ConsumerError> {
        let name = Method::ExecuteTool.as_str();
        let finished = self.finish_result(port, idx, tool, name, data, result_fd);
        if let Some(h) = result_fd.take() {
            self.close_quietly(port, &h);
        }
        let (value, delivery) = finished?;
        Ok(Started::Done(Outcome::Succeeded(ToolOutput {
            provider_id: label,
            tool_name: exec.tool_name.clone(),
            request_id: exec.request_id.clone(),
            operation_id: None,
            value,
            delivery,
        })))
    }

    /// The Provider an execution goes to: the one it was prepared for
    /// (routing is by provider_id and tool name, §3.3).
    fn route(&self, exec: &Execution) -> Result<usize, ConsumerError> {
        let scanned = if self.has(ConsumerMutant::RoutesByScanOrder) {
            self.first_listing(&exec.tool_name)
        } else {
            None
        };
        match scanned {
            Some(i) => Ok(i),
            None => self.index_of(&exec.provider_id),
        }
    }

    /// §4.1: the args' UTF-8 length must not exceed the negotiated limit;
    /// a request over it is never sent.
    fn check_request_size(&self, idx: usize, exec: &Execution) -> Result<(), ConsumerError> {
        let negotiated = self
            .current_session(idx)
            .and_then(|s| s.limit("max_request_bytes"))
            .and_then(|l| usize::try_from(l).ok())
            .unwrap_or(0);
        if exec.args.len() > negotiated {
            return Err(ConsumerError::refused(Refusal::ArgsTooLarge {
                bytes: exec.args.len(),
                limit: negotiated,
            }));
        }
        Ok(())
    }

    fn current_session(&self, idx: usize) -> Option<&super::Session> {
        match &self.providers[idx].mode {
            Mode::V2(st) => Some(&st.session),
            _ => None,
        }
    }

    fn generation(&self, idx: usize) -> u64 {
        self.current_session(idx).map_or(0, |s| s.generation)
    }

    /// Routes by (provider_id, tool_name) over a tool list checked in the
    /// current negotiation.
    fn tool_for(
        &mut self,
        port: &mut dyn ConsumerPort,
        idx: usize,
        tool_name: &str,
        budget: &Budget,
    ) -> Result<ToolRef, ConsumerError> {
        self.ensure_tools(port, idx, budget)?;
        let label = self.providers[idx].label();
        let not_listed = || {
            ConsumerError::refused(Refusal::ToolNotListed {
                provider: label.clone(),
                tool: tool_name.to_string(),
            })
        };
        let Mode::V2(st) = &self.providers[idx].mode else {
            return Err(not_listed());
        };
        let cache = st.tools.as_ref().ok_or_else(not_listed)?;
        let info = cache.catalog.get(tool_name).ok_or_else(not_listed)?;
        let output = cache
            .output_schemas
            .get(tool_name)
            .cloned()
            .ok_or_else(not_listed)?;
        Ok(ToolRef {
            summary: info.descriptor.clone(),
            output,
        })
    }

    /// §4.3: checks the PendingIntent, lets the user decide in the
    /// Provider's UI, and returns the resume token to retry with.
    #[allow(clippy::too_many_arguments)]
    fn confirm(
        &mut self,
        port: &mut dyn ConsumerPort,
        label: &str,
        package: &str,
        exec: &Execution,
        code: ErrorCode,
        env: &ErrorEnvelope,
        round: u32,
        agent: &mut dyn UserAgent,
    ) -> Result<String, ConsumerError> {
        let name = Method::ExecuteTool.as_str();
        let mut missing = Vec::new();
        if env.resolution.is_none() {
            missing.push(Violation::must(
                "resolution.present",
                "4.3",
                "/resolution".into(),
                format!("{code} without a resolution PendingIntent"),
            ));
        }
        if env.resume_token.as_deref().is_none_or(str::is_empty) {
            missing.push(Violation::must(
                "resume_token.present",
                "4.3",
                "/resume_token".into(),
                format!("{code} without a resume_token"),
            ));
        }
        let (Some(pi), Some(token), true) =
            (&env.resolution, &env.resume_token, missing.is_empty())
        else {
            return Err(ConsumerError::Protocol(ProtocolFault {
                provider: label.to_string(),
                method: name,
                violations: missing,
            }));
        };
        if round > self.config.max_resolutions {
            return Err(ConsumerError::refused(Refusal::TooManyResolutions {
                provider: label.to_string(),
                request_id: exec.request_id.clone(),
                limit: self.config.max_resolutions,
            }));
        }
        self.check_text(
            label,
            "/resume_token",
            token,
            self.config.limits.max_description_bytes,
        )?;
        verify_resolution(label, package, pi)?;
        let message = ProviderText::truncated(&env.message, self.config.limits.max_message_bytes);
        let request = ConfirmationRequest {
            provider_id: label,
            tool_name: &exec.tool_name,
            request_id: &exec.request_id,
            code,
            message: &message,
            round,
        };
        let Some(decision) = agent.decide(&request) else {
            return Err(self.cetp_error(label, name, code, env));
        };
        if self.has(ConsumerMutant::ResumeWithoutResolution) {
            return Ok(token.clone());
        }
        let outcome = port.resolve(&pi.handle, decision).map_err(|e| {
            ConsumerError::Device(DeviceFault {
                provider: Some(label.to_string()),
                op: "resolve".into(),
                request_id: Some(exec.request_id.clone()),
                error: e,
            })
        })?;
        if !outcome.launched {
            return Err(ConsumerError::refused(Refusal::ResolutionNotLaunched {
                provider: label.to_string(),
                request_id: exec.request_id.clone(),
            }));
        }
        // Whatever the user chose, the Provider says what came of it when the
        // call resumes (USER_CANCELLED on a denial).
        Ok(token.clone())
    }

    /// Checks a success `data` (or an operation's `result`) and reads a file
    /// result. Takes the descriptor out of `fd` when it reads it; the caller
    /// closes whatever is left, on every path.
    fn finish_result(
        &mut self,
        port: &mut dyn ConsumerPort,
        idx: usize,
        tool: &ToolRef,
        method: &'static str,
        data: &Json,
        fd: &mut Option<String>,
    ) -> Result<(Json, Delivery), ConsumerError> {
        let label = self.providers[idx].label();
        let result = ExecResult::from_json(data)
            .map_err(|e| ConsumerError::violation(&label, method, "result.envelope", "4.2", e))?;
        match result {
            ExecResult::Inline(value) => {
                self.check_inline_size(idx, &label, method, &value)?;
                self.check_output(&label, method, tool, &value)?;
                Ok((value, Delivery::Inline))
            }
            ExecResult::File {
                media_type,
                size_bytes,
                sha256,
            } => {
                let value = self.read_file_result(
                    port,
                    idx,
                    &label,
                    method,
                    tool,
                    &media_type,
                    size_bytes,
                    &sha256,
                    fd,
                )?;
                Ok((value, Delivery::File { size_bytes, sha256 }))
            }
        }
    }

    /// §4.5: an inline result larger than the negotiated limit must not be in
    /// the Bundle. The value is measured compactly, a lower bound on what the
    /// Provider sent, so no honest Provider is blamed.
    fn check_inline_size(
        &self,
        idx: usize,
        label: &str,
        method: &'static str,
        value: &Json,
    ) -> Result<(), ConsumerError> {
        let limit = self
            .current_session(idx)
            .and_then(|s| s.limit("max_inline_result_bytes"));
        let bytes = value.to_string().len();
        match limit {
            Some(l) if i64::try_from(bytes).unwrap_or(i64::MAX) > l => {
                Err(ConsumerError::violation(
                    label,
                    method,
                    "result.inline.limit",
                    "4.5",
                    format!("inline result of {bytes} bytes exceeds max_inline_result_bytes {l}"),
                ))
            }
            _ => Ok(()),
        }
    }

    /// §4.5: reads at most min(declared, local cap) + 1 bytes, so an overrun
    /// is seen without reading it all, then checks size, digest, JSON and
    /// output schema. §2.3: a file result without `large_results` is
    /// reported, never read.
    #[allow(clippy::too_many_arguments)]
    fn read_file_result(
        &mut self,
        port: &mut dyn ConsumerPort,
        idx: usize,
        label: &str,
        method: &'static str,
        tool: &ToolRef,
        media_type: &str,
        size_bytes: u64,
        sha256: &str,
        fd: &mut Option<String>,
    ) -> Result<Json, ConsumerError> {
        self.check_file_result(idx, label, method, media_type)?;
        let Some(handle) = fd.take() else {
            return Err(ConsumerError::violation(
                label,
                method,
                "result.file.descriptor",
                "4.5",
                "a kind=file result without a result_fd ParcelFileDescriptor",
            ));
        };
        let read = self.read_capped(port, label, &handle, size_bytes)?;
        let violations = self.file_violations(&read, size_bytes, sha256);
        if !violations.is_empty() {
            return Err(ConsumerError::Protocol(ProtocolFault {
                provider: label.to_string(),
                method,
                violations,
            }));
        }
        let text = std::str::from_utf8(&read.bytes).map_err(|e| {
            ConsumerError::violation(label, method, "result.file.json", "4.5", e.to_string())
        })?;
        let depth = self.config.limits.json_depth();
        if exceeds_depth(text, depth).is_some() {
            return Err(ConsumerError::refused(Refusal::JsonTooDeep {
                provider: label.to_string(),
                at: "result_fd".into(),
                limit: depth,
            }));
        }
        let value: Json = serde_json::from_str(text).map_err(|e| {
            ConsumerError::violation(label, method, "result.file.json", "4.5", e.to_string())
        })?;
        self.check_output(label, method, tool, &value)?;
        Ok(value)
    }

    /// What a file result must be before its descriptor is touched: allowed
    /// by a negotiated large_results (§2.3) and JSON (§4.5). Kept apart from
    /// the read so that a refused result is never read.
    fn check_file_result(
        &self,
        idx: usize,
        label: &str,
        method: &'static str,
        media_type: &str,
    ) -> Result<(), ConsumerError> {
        let negotiated = self.negotiated(idx, Capability::LargeResults);
        if !negotiated {
            return Err(ConsumerError::violation(
                label,
                method,
                "capability.large_results.negotiated",
                "2.3",
                "a kind=file result without a negotiated large_results capability",
            ));
        }
        let essence = media_type.split(';').next().unwrap_or_default().trim();
        if !essence.eq_ignore_ascii_case("application/json") {
            return Err(ConsumerError::violation(
                label,
                method,
                "result.file.media_type",
                "4.5",
                format!(
                    "media_type {:?} is not application/json",
                    ProviderText::truncated(media_type, 64).as_str()
                ),
            ));
        }
        Ok(())
    }

    /// §4.5: reads at most min(declared, local cap) + 1 bytes of `handle`,
    /// so an overrun is seen without reading it all; a file over the local
    /// cap is refused unread. The descriptor is closed when the read is
    /// refused or fails; a read the device cut short is the device's fault,
    /// not the Provider's.
    fn read_capped(
        &self,
        port: &mut dyn ConsumerPort,
        label: &str,
        handle: &str,
        size_bytes: u64,
    ) -> Result<FdRead, ConsumerError> {
        let local = self.config.limits.max_file_bytes;
        if size_bytes > local && !self.has(ConsumerMutant::FileReadUncapped) {
            self.close_quietly(port, handle);
            return Err(ConsumerError::refused(Refusal::TooLarge {
                provider: label.to_string(),
                at: "result_fd".into(),
                bytes: size_bytes,
                limit: local,
            }));
        }
        let tail_unread = self.has(ConsumerMutant::FileTailNotRead);
        let ask = if tail_unread {
            size_bytes
        } else {
            size_bytes.saturating_add(1)
        };
        let read = match port.read_fd(handle, ask) {
            Ok(r) => r,
            Err(e) => {
                self.close_quietly(port, handle);
                return Err(ConsumerError::Device(DeviceFault {
                    provider: Some(label.to_string()),
                    op: "read_fd".into(),
                    request_id: None,
                    error: e,
                }));
            }
        };
        let got = read.bytes.len() as u64;
        if got <= size_bytes && !read.eof && !tail_unread {
            // Fewer bytes than asked for and no EOF: the device cut the read,
            // which says nothing about the Provider.
            return Err(ConsumerError::Device(DeviceFault {
                provider: Some(label.to_string()),
                op: "read_fd".into(),
                request_id: None,
                error: DeviceError::new(
                    ErrorKind::Io,
                    format!("read stopped at {got} bytes before EOF"),
                ),
            }));
        }
        Ok(read)
    }

    /// What the bytes read break of §4.5: the writer's error, the declared
    /// size, else the declared digest.
    fn file_violations(&self, read: &FdRead, size_bytes: u64, sha256: &str) -> Vec<Violation> {
        let got = read.bytes.len() as u64;
        let mut violations = Vec::new();
        if let Some(err) = &read.error {
            violations.push(Violation::must(
                "result.file.write_error",
                "4.5",
                "/result_fd".into(),
                format!(
                    "the writer reported an error: {:?}",
                    ProviderText::truncated(err, 256).as_str()
                ),
            ));
        }
        if got != size_bytes && !self.has(ConsumerMutant::FileSizeNotChecked) {
            violations.push(Violation::must(
                "result.file.size",
                "4.5",
                "/size_bytes".into(),
                if got > size_bytes {
                    format!("the file holds more than the declared {size_bytes} bytes")
                } else {
                    format!("the file holds {got} bytes, not the declared {size_bytes}")
                },
            ));
        } else if sha256_hex(&read.bytes) != sha256
            && !self.has(ConsumerMutant::FileSha256NotChecked)
        {
            violations.push(Violation::must(
                "result.file.sha256",
                "4.5",
                "/sha256".into(),
                "the file's SHA-256 differs from the declared digest".into(),
            ));
        }
        violations
    }

    /// §4.4, §2.3: `accepted` is only for a negotiated `async_operations`,
    /// and only from a tool that declared it may answer so (§3.4).
    fn accept_operation(
        &self,
        idx: usize,
        tool: &ToolRef,
        exec: &Execution,
        data: &Json,
    ) -> Result<Operation, ConsumerError> {
        let label = self.providers[idx].label();
        let name = Method::ExecuteTool.as_str();
        let negotiated = self.negotiated(idx, Capability::AsyncOperations);
        if !negotiated {
            return Err(ConsumerError::violation(
                &label,
                name,
                "capability.async_operations.negotiated",
                "2.3",
                "status \"accepted\" without a negotiated async_operations capability",
            ));
        }
        if tool.summary.execution != "sync_or_async" {
            return Err(ConsumerError::violation(
                &label,
                name,
                "annotation.execution.sync",
                "3.4",
                format!(
                    "tool {:?} declares execution={:?} but answered \"accepted\"",
                    exec.tool_name, tool.summary.execution
                ),
            ));
        }
        let operation_id = match data.get("operation_id").and_then(Json::as_str) {
            Some(id) if !id.is_empty() => id,
            _ => {
                return Err(ConsumerError::violation(
                    &label,
                    name,
                    "operation.id",
                    "4.4",
                    "accepted data has no operation_id string",
                ))
            }
        };
        self.check_text(
            &label,
            "/operation_id",
            operation_id,
            self.config.limits.max_name_bytes,
        )?;
        Ok(Operation {
            provider_id: label.clone(),
            tool_name: exec.tool_name.clone(),
            request_id: exec.request_id.clone(),
            operation_id: operation_id.to_string(),
            poll_after_ms: poll_after(&label, name, data)?,
            state: OpState::Queued,
            progress: None,
            cancel_requested: false,
            polls: 0,
        })
    }

    /// One `get_operation` (§4.4). `None` while the operation is not in a
    /// terminal state.
    pub fn poll(
        &mut self,
        port: &mut dyn ConsumerPort,
        op: &mut Operation,
    ) -> Result<Option<Outcome>, ConsumerError> {
        let budget = self.budget(port);
        self.poll_once(port, op, &budget)
    }

    /// Polls until a terminal state, waiting `poll_after_ms` (never less than
    /// the local floor) before each query. Gives up when the budget runs out;
    /// the operation can still be queried later.
    pub fn wait(
        &mut self,
        port: &mut dyn ConsumerPort,
        op: &mut Operation,
    ) -> Result<Outcome, ConsumerError> {
        let budget = self.budget(port);
        self.wait_until(port, op, &budget)
    }

    fn wait_until(
        &mut self,
        port: &mut dyn ConsumerPort,
        op: &mut Operation,
        budget: &Budget,
    ) -> Result<Outcome, ConsumerError> {
        loop {
            // poll_after_ms is the earliest next query (§4.4): a slower
            // cadence is the Consumer's choice.
            let asked = op.poll_after_ms.map(|ms| {
                if self.takes(ConsumerVariant::SlowPolling) {
                    ms.saturating_mul(2)
                } else {
                    ms
                }
            });
            let delay = asked
                .unwrap_or(self.config.default_poll_ms)
                .max(self.config.min_poll_ms)
                .max(1);
            if !self.wait_within(port, delay, budget) {
                if self.abandons_by_cancelling(op) {
                    // The agent no longer waits for it: ask the Provider to
                    // stop, then (§4.4) still query the terminal state,
                    // within a budget of its own.
                    return self.cancel(port, op);
                }
                return Err(ConsumerError::refused(Refusal::BudgetExhausted {
                    provider: op.provider_id.clone(),
                    request_id: op.request_id.clone(),
                    operation_id: Some(op.operation_id.clone()),
                }));
            }
            match self.poll_once(port, op, budget) {
                Ok(Some(outcome)) => return Ok(outcome),
                Ok(None) => {}
                Err(ConsumerError::Refused(r)) => {
                    let mut r = *r;
                    if let Refusal::BudgetExhausted { operation_id, .. } = &mut r {
                        operation_id.get_or_insert_with(|| op.operation_id.clone());
                    }
                    return Err(ConsumerError::Refused(Box::new(r)));
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The `cancels_abandoned` latitude: an operation the Consumer stops
    /// waiting for is cancelled (§4.4: the Consumer 可以 call
    /// cancel_operation once `cancellation` is negotiated), once.
    fn abandons_by_cancelling(&self, op: &Operation) -> bool {
        self.takes(ConsumerVariant::CancelsAbandoned)
            && !op.cancel_requested
            && self
                .index_of(&op.provider_id)
                .is_ok_and(|idx| self.negotiated(idx, Capability::Cancellation))
    }

    /// Asks the Provider to cancel (§4.4), then polls until a terminal state:
    /// `cancellation_requested` is not one, and only `cancelled` proves no
    /// further effect. A CONFLICT (too late to cancel) also ends in polling,
    /// which tells what really happened.
    pub fn cancel(
        &mut self,
        port: &mut dyn ConsumerPort,
        op: &mut Operation,
    ) -> Result<Outcome, ConsumerError> {
        let budget = self.budget(port);
        let idx = self.index_of(&op.provider_id)?;
        let name = Method::CancelOperation.as_str();
        let answer = self.call_v2(
            port,
            idx,
            &V2Call {
                method: Method::CancelOperation,
                request_id: &op.request_id,
                fields: vec![(keys::OPERATION_ID, Value::str(&op.operation_id))],
                keep_result_fd: false,
            },
            &budget,
        )?;
        let label = self.providers[idx].label();
        match &answer.response {
            Response::Success { data, .. } => {
                check_operation_id(&label, name, op, data)?;
                let state = data.get("state").and_then(Json::as_str);
                if state != Some(OpState::CancellationRequested.as_str()) {
                    return Err(ConsumerError::violation(
                        &label,
                        name,
                        "operation.cancel.state",
                        "4.4",
                        format!(
                            "cancel_operation answered state {:?}, not \"cancellation_requested\"",
                            state.map(|s| ProviderText::truncated(s, 64).as_str().to_string())
                        ),
                    ));
                }
                op.state = OpState::CancellationRequested;
                op.poll_after_ms = poll_after(&label, name, data)?.or(op.poll_after_ms);
            }
            Response::Error(env) => {
                let code = self.check_error(&label, name, env)?;
                if code != ErrorCode::Conflict {
                    return Err(self.cetp_error(&label, name, code, env));
                }
            }
            Response::Accepted { .. } => {
                return Err(ConsumerError::accepted_outside_execute(&label, name))
            }
        }
        op.cancel_requested = true;
        if self.has(ConsumerMutant::StopsPollingAfterCancel) {
            return Ok(Outcome::Cancelled {
                operation_id: op.operation_id.clone(),
            });
        }
        self.wait_until(port, op, &budget)
    }

    fn poll_once(
        &mut self,
        port: &mut dyn ConsumerPort,
        op: &mut Operation,
        budget: &Budget,
    ) -> Result<Option<Outcome>, ConsumerError> {
        let idx = self.index_of(&op.provider_id)?;
        let name = Method::GetOperation.as_str();
        let answer = self.call_v2(
            port,
            idx,
            &V2Call {
                method: Method::GetOperation,
                request_id: &op.request_id,
                fields: vec![(keys::OPERATION_ID, Value::str(&op.operation_id))],
                keep_result_fd: true,
            },
            budget,
        )?;
        op.polls = op.polls.saturating_add(1);
        let mut fd = answer.result_fd;
        let r = self.operation_state(port, idx, op, name, &answer.response, &mut fd, budget);
        if let Some(h) = fd.take() {
            self.close_quietly(port, &h);
        }
        r
    }

    #[allow(clippy::too_many_arguments)]
    fn operation_state(
        &mut self,
        port: &mut dyn ConsumerPort,
        idx: usize,
        op: &mut Operation,
        name: &'static str,
        response: &Response,
        fd: &mut Option<String>,
        budget: &Budget,
    ) -> Result<Option<Outcome>, ConsumerError> {
        let label = self.providers[idx].label();
        let data = match response {
            Response::Success { data, .. } => data,
            Response::Error(env) => {
                let code = self.check_error(&label, name, env)?;
                return Err(self.cetp_error(&label, name, code, env));
            }
            Response::Accepted { .. } => {
                return Err(ConsumerError::accepted_outside_execute(&label, name))
            }
        };
        check_operation_id(&label, name, op, data)?;
        let state_text = data.get("state").and_then(Json::as_str).unwrap_or_default();
        let Some(state) = OpState::parse(state_text) else {
            return Err(ConsumerError::violation(
                &label,
                name,
                "operation.state",
                "4.4",
                format!(
                    "unknown operation state {:?}",
                    ProviderText::truncated(state_text, 64).as_str()
                ),
            ));
        };
        op.state = state;
        op.poll_after_ms = poll_after(&label, name, data)?;
        if let Some(p) = data.get("progress") {
            op.progress = Some(progress(p, self.config.limits.max_message_bytes));
        }
        let looks_done = op
            .progress
            .as_ref()
            .is_some_and(|p| p.total.is_some_and(|t| t > 0.0 && p.current == Some(t)));
        if looks_done && self.has(ConsumerMutant::ProgressTakenAsSuccess) && !state.is_terminal() {
            return Ok(Some(Outcome::Succeeded(ToolOutput {
                provider_id: label,
                tool_name: op.tool_name.clone(),
                request_id: op.request_id.clone(),
                operation_id: Some(op.operation_id.clone()),
                value: data.get("result").cloned().unwrap_or(Json::Null),
                delivery: Delivery::Inline,
            })));
        }
        match state {
            OpState::Succeeded => {
                let Some(result) = data.get("result") else {
                    return Err(ConsumerError::violation(
                        &label,
                        name,
                        "operation.result",
                        "4.4",
                        "state succeeded without a result",
                    ));
                };
                let tool = self.tool_for(port, idx, &op.tool_name, budget)?;
                let (value, delivery) = self.finish_result(port, idx, &tool, name, result, fd)?;
                Ok(Some(Outcome::Succeeded(ToolOutput {
                    provider_id: label,
                    tool_name: op.tool_name.clone(),
                    request_id: op.request_id.clone(),
                    operation_id: Some(op.operation_id.clone()),
                    value,
                    delivery,
                })))
            }
            OpState::Failed => {
                let env = operation_error(&label, name, data)?;
                let code = self.check_error(&label, name, &env)?;
                Err(self.cetp_error(&label, name, code, &env))
            }
            OpState::Cancelled => Ok(Some(Outcome::Cancelled {
                operation_id: op.operation_id.clone(),
            })),
            OpState::Queued | OpState::Running | OpState::CancellationRequested => Ok(None),
        }
    }

    /// v1 (§8): only for a Provider that does not declare v2; only tools of
    /// its v1 list; the answer has no schema to check but is bounded.
    fn run_v1(
        &mut self,
        port: &mut dyn ConsumerPort,
        idx: usize,
        exec: &Execution,
        budget: &Budget,
    ) -> Result<Started, ConsumerError> {
        let tools = self.v1_tools(port, idx, budget)?;
        let label = self.providers[idx].label();
        if !tools.contains(&exec.tool_name) {
            return Err(ConsumerError::refused(Refusal::ToolNotListed {
                provider: label,
                tool: exec.tool_name.clone(),
            }));
        }
        let name = "execute_tool";
        let extras = v1_execute_bundle(&exec.tool_name, &exec.args, Some(&exec.request_id));
        let b = self.call_plain(port, idx, name, &extras, budget)?;
        match V1Response::from_bundle(&b).map_err(|e| {
            ConsumerError::violation(&label, name, "response.envelope", "8", e.message)
        })? {
            V1Response::Success(value) => Ok(Started::Done(Outcome::Succeeded(ToolOutput {
                provider_id: label,
                tool_name: exec.tool_name.clone(),
                request_id: exec.request_id.clone(),
                operation_id: None,
                value,
                delivery: Delivery::Inline,
            }))),
            V1Response::Error { code, message } => {
                Err(self.v1_error(&label, name, &code, &message))
            }
        }
    }
}

/// §4.3, §7.2: the PendingIntent must be immutable, launch an activity, and
/// be created by the Provider's own package. What the device could not tell
/// is not proven, and refused as well.
fn verify_resolution(
    label: &str,
    package: &str,
    pi: &PendingIntentValue,
) -> Result<(), ConsumerError> {
    let mut violations = Vec::new();
    let mut unknown = Vec::new();
    match pi.immutable {
        Some(false) => violations.push(Violation::must(
            "resolution.immutable",
            "7.2",
            "/resolution".into(),
            "the resolution PendingIntent is mutable".into(),
        )),
        None => unknown.push("immutable"),
        Some(true) => {}
    }
    match pi.activity {
        Some(false) => violations.push(Violation::must(
            "resolution.activity",
            "4.3",
            "/resolution".into(),
            "the resolution PendingIntent does not launch an activity".into(),
        )),
        None => unknown.push("activity"),
        Some(true) => {}
    }
    match &pi.creator_package {
        Some(p) if p != package => violations.push(Violation::must(
            "resolution.creator",
            "7.2",
            "/resolution".into(),
            format!(
                "the resolution PendingIntent was created by {:?}, not the Provider's package {package:?}",
                ProviderText::truncated(p, 256).as_str()
            ),
        )),
        None => unknown.push("creator_package"),
        Some(_) => {}
    }
    if !violations.is_empty() {
        return Err(ConsumerError::Protocol(ProtocolFault {
            provider: label.to_string(),
            method: Method::ExecuteTool.as_str(),
            violations,
        }));
    }
    if !unknown.is_empty() {
        return Err(ConsumerError::refused(Refusal::UnverifiedResolution {
            provider: label.to_string(),
            unknown,
        }));
    }
    Ok(())
}

impl Consumer {
    /// §4.2: the Provider must validate its own output; the Consumer checks
    /// anyway.
    fn check_output(
        &self,
        label: &str,
        method: &'static str,
        tool: &ToolRef,
        value: &Json,
    ) -> Result<(), ConsumerError> {
        if self.has(ConsumerMutant::OutputSchemaNotChecked) {
            return Ok(());
        }
        check_output(label, method, tool, value)
    }
}

fn check_output(
    label: &str,
    method: &'static str,
    tool: &ToolRef,
    value: &Json,
) -> Result<(), ConsumerError> {
    let errors = tool.output.errors(value);
    if errors.is_empty() {
        return Ok(());
    }
    Err(ConsumerError::Protocol(ProtocolFault {
        provider: label.to_string(),
        method,
        violations: errors
            .into_iter()
            .map(|e| {
                Violation::must(
                    "result.output_schema",
                    "4.2",
                    "/value".into(),
                    format!("{}: {e}", tool.summary.name),
                )
            })
            .collect(),
    }))
}

fn check_operation_id(
    label: &str,
    method: &'static str,
    op: &Operation,
    data: &Json,
) -> Result<(), ConsumerError> {
    match data.get("operation_id").and_then(Json::as_str) {
        Some(id) if id == op.operation_id => Ok(()),
        other => Err(ConsumerError::violation(
            label,
            method,
            "operation.id",
            "4.4",
            format!(
                "answer is about operation {:?}, not {:?}",
                other.map(|s| ProviderText::truncated(s, 64).as_str().to_string()),
                op.operation_id
            ),
        )),
    }
}

fn poll_after(
    label: &str,
    method: &'static str,
    data: &Json,
) -> Result<Option<u64>, ConsumerError> {
    match data.get("poll_after_ms") {
        None | Some(Json::Null) => Ok(None),
        Some(v) => v.as_u64().map(Some).ok_or_else(|| {
            ConsumerError::violation(
                label,
                method,
                "operation.poll_after_ms",
                "4.4",
                "poll_after_ms is not a non-negative integer",
            )
        }),
    }
}

fn progress(p: &Json, message_limit: usize) -> Progress {
    Progress {
        current: p.get("current").and_then(Json::as_f64),
        total: p.get("total").and_then(Json::as_f64),
        message: p
            .get("message")
            .and_then(Json::as_str)
            .map(|m| ProviderText::truncated(m, message_limit)),
    }
}

/// A failed operation's `error` object carries the §5 fields.
fn operation_error(
    label: &str,
    method: &'static str,
    data: &Json,
) -> Result<ErrorEnvelope, ConsumerError> {
    let bad = |why: &str| {
        ConsumerError::violation(label, method, "operation.error", "4.4", why.to_string())
    };
    let e = data
        .get("error")
        .and_then(Json::as_object)
        .ok_or_else(|| bad("state failed without an error object"))?;
    let code = e
        .get("error_code")
        .and_then(Json::as_str)
        .ok_or_else(|| bad("error.error_code is missing or not a string"))?;
    let message = e
        .get("error_message")
        .and_then(Json::as_str)
        .ok_or_else(|| bad("error.error_message is missing or not a string"))?;
    let retryable = e
        .get("retryable")
        .and_then(Json::as_bool)
        .ok_or_else(|| bad("error.retryable is missing or not a boolean"))?;
    Ok(ErrorEnvelope {
        code: code.to_string(),
        message: message.to_string(),
        retryable,
        protocol_version: Some(2),
        request_id: None,
        details: e.get("error_details").cloned(),
        retry_after_ms: e.get("retry_after_ms").and_then(Json::as_i64),
        resolution: None,
        resume_token: None,
    })
}
