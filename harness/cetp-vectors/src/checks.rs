//! Checks applied to every answer, whatever the case.
//!
//! A check is code; which requirements it enforces is data
//! (`vectors/checks/checks.json`), as is the mapping from descriptor rule
//! keys to requirement ids (`vectors/checks/rules.json`).

use crate::vector::Level;
use cetp_proto::bundle::Value;
use cetp_proto::descriptor::{
    validate_negotiate, validate_provider_info, validate_tool_list, NegotiateContext, Negotiated,
    Severity, ToolListContext, ToolSummary, Violation,
};
use cetp_proto::device::CallAnswer;
use cetp_proto::envelope::{keys, ExecResult, OpState, Response};
use cetp_proto::error::{leaks_internal_detail, ErrorCode, V1_ERROR_CODES};
use cetp_proto::schema::CompiledSchema;
use cetp_proto::Bundle;
use serde_json::Value as Json;
use std::collections::BTreeSet;

/// Every v2 answer is a well-formed envelope of its status (§4.2, §4.4, §5).
pub const ENVELOPE: &str = "CHK-ENVELOPE";
/// Answers echo `protocol_version` and the request's `request_id` (§4.1).
pub const ECHO: &str = "CHK-ECHO";
/// `retryable` follows the error code table (§5).
pub const RETRYABLE: &str = "CHK-RETRYABLE";
/// Only error codes the spec defines (§5).
pub const ERROR_CODE: &str = "CHK-ERROR-CODE";
/// `error_message` leaks no stack trace or internals (§5, §7.3).
pub const ERROR_MESSAGE: &str = "CHK-ERROR-MESSAGE";
/// Inline results match the tool's `output_schema` (§3.3, §4.2).
pub const OUTPUT_SCHEMA: &str = "CHK-OUTPUT-SCHEMA";
/// `negotiate` answers are valid (§2.2).
pub const NEGOTIATION: &str = "CHK-NEGOTIATION";
/// Provider info and tool descriptors follow §3.
pub const DESCRIPTORS: &str = "CHK-DESCRIPTORS";
/// Inline results stay within the negotiated `max_inline_result_bytes` (§4.5).
pub const INLINE_SIZE: &str = "CHK-INLINE-SIZE";
/// No optional capability used that was not negotiated (§2.3).
pub const CAPABILITY_USE: &str = "CHK-CAPABILITY-USE";
/// Confirmation errors carry a PendingIntent and a `resume_token` (§4.3).
pub const RESOLUTION: &str = "CHK-RESOLUTION";
/// v1 answers keep the v1 shape and codes (§8).
pub const V1_SHAPE: &str = "CHK-V1-SHAPE";

/// Every check id, in report order.
pub const ALL: &[&str] = &[
    ENVELOPE,
    ECHO,
    RETRYABLE,
    ERROR_CODE,
    ERROR_MESSAGE,
    OUTPUT_SCHEMA,
    NEGOTIATION,
    DESCRIPTORS,
    INLINE_SIZE,
    CAPABILITY_USE,
    RESOLUTION,
    V1_SHAPE,
];

/// One problem a check found in one answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Finding {
    /// The check that found it (one of [`ALL`]).
    pub check: &'static str,
    /// The rule broken: a descriptor rule key (`cetp_proto::descriptor::RULES`)
    /// or one of [`RULES`]. `vectors/checks/checks.json` maps each to the
    /// requirement ids this finding cites, so a FAIL names the rule it
    /// proved broken, not its check's whole list.
    pub rule: String,
    /// MUST (the answer FAILs) or SHOULD (it WARNs).
    pub level: Level,
    /// What was found, for a human.
    pub message: String,
}

impl Finding {
    fn must(check: &'static str, rule: impl Into<String>, message: impl Into<String>) -> Self {
        Finding {
            check,
            rule: rule.into(),
            level: Level::Must,
            message: message.into(),
        }
    }

    fn from_violation(check: &'static str, v: Violation) -> Self {
        Finding {
            check,
            rule: format!("{}@{}", v.rule, field_of(&v.at)),
            level: match v.severity {
                Severity::Must => Level::Must,
                Severity::Should => Level::Should,
            },
            message: format!("{} (at `{}`, §{})", v.message, v.at, v.section),
        }
    }
}

/// Every rule key a check's own code can emit, with the check that emits
/// it; `retryable.CODE` stands for one key per error code whose §5 row fixes
/// `retryable`. A data test holds `vectors/checks/checks.json` to this list.
pub const RULES: &[(&str, &str)] = &[
    (ENVELOPE, "envelope.answer"),
    (ENVELOPE, "envelope.error"),
    (ENVELOPE, "envelope.success"),
    (ENVELOPE, "envelope.negotiate"),
    (ENVELOPE, "envelope.operation"),
    (ENVELOPE, "envelope.accepted"),
    (ENVELOPE, "envelope.status"),
    (ENVELOPE, "error.retry_after_ms"),
    (ENVELOPE, "accepted.method"),
    (ENVELOPE, "accepted.operation_id"),
    (ENVELOPE, "accepted.poll_after_ms"),
    (ENVELOPE, "operation.state"),
    (ENVELOPE, "operation.result"),
    (ENVELOPE, "operation.error"),
    (ENVELOPE, "cancel.state"),
    (ENVELOPE, "result.envelope"),
    (ENVELOPE, "result.file_fd"),
    (ECHO, "echo.protocol_version.success"),
    (ECHO, "echo.protocol_version.accepted"),
    (ECHO, "echo.protocol_version.error"),
    (ECHO, "echo.request_id.success"),
    (ECHO, "echo.request_id.accepted"),
    (ECHO, "echo.request_id.error"),
    (ERROR_CODE, "error.code"),
    (ERROR_MESSAGE, "error.message.internal"),
    (ERROR_MESSAGE, "error.message.empty"),
    (OUTPUT_SCHEMA, "result.output_schema"),
    (INLINE_SIZE, "result.inline_size"),
    (CAPABILITY_USE, "capability.async_operations"),
    (CAPABILITY_USE, "capability.large_results"),
    (RESOLUTION, "resolution.authorize_intent"),
    (RESOLUTION, "resolution.immutable"),
    (RESOLUTION, "resolution.activity"),
    (RESOLUTION, "resolution.package"),
    (RESOLUTION, "resolution.pending_intent"),
    (RESOLUTION, "resolution.resume_token"),
    (V1_SHAPE, "v1.error_code"),
    (V1_SHAPE, "v1.shape"),
    (RETRYABLE, "retryable.CODE"),
];

/// The field a descriptor violation is about, without array indices
/// (`/tools/0/annotations/destructive` → `tools.annotations.destructive`):
/// a generic rule (`shape.type`) cites the clause of that field when the
/// data maps `rule@field` (§3.2's scope enums, §3.4's annotations).
fn field_of(pointer: &str) -> String {
    pointer
        .split('/')
        .filter(|s| !s.is_empty() && !s.bytes().all(|b| b.is_ascii_digit()))
        .collect::<Vec<_>>()
        .join(".")
}

/// The rule of a `retryable` that contradicts the §5 row of `code`.
pub fn retry_rule_key(code: ErrorCode) -> String {
    format!("retryable.{}", code.as_str())
}

/// The envelope rule an answer breaks, by the status it claims: each
/// status has its own clause (§2.2, §4.2, §4.4, §5).
fn envelope_rule(bundle: &Bundle, method: &str) -> &'static str {
    match bundle.opt_string(keys::STATUS).ok().flatten().as_deref() {
        Some("error") => "envelope.error",
        Some("accepted") => "envelope.accepted",
        Some("success") if method == "negotiate" => "envelope.negotiate",
        Some("success") if matches!(method, "get_operation" | "cancel_operation") => {
            "envelope.operation"
        }
        Some("success") => "envelope.success",
        _ => "envelope.status",
    }
}

/// The echo rule of `member`, by the answer's status (§4.2, §4.4, §5).
fn echo_rule(member: &str, response: &Response) -> String {
    let status = match response {
        Response::Error(_) => "error",
        Response::Success { .. } => "success",
        Response::Accepted { .. } => "accepted",
    };
    format!("echo.{member}.{status}")
}

/// What the harness knows around one answer.
pub struct AnswerContext<'a> {
    /// The protocol method called.
    pub method: &'a str,
    /// The call was made as v1 (no protocol_version).
    pub v1: bool,
    /// The request sent, when there was one.
    pub request: Option<&'a Bundle>,
    /// The answer received.
    pub answer: &'a CallAnswer,
    /// The session the call ran in (None for negotiate and v1 calls).
    pub negotiated: Option<&'a Negotiated>,
    /// The tool executed, when known (execute_tool, get_operation).
    pub tool: Option<&'a ToolSummary>,
    /// Package of the Provider under test, for the checks that compare with it
    /// (a PendingIntent's creator, §4.3; negotiate answers).
    pub package: Option<&'a str>,
    /// JSON Schema dialect the Provider's schemas use.
    pub dialect: &'a str,
    /// Scopes from get_provider_info, when known.
    pub known_scopes: Option<&'a BTreeSet<String>>,
    /// What negotiate offered (versions, capabilities), for negotiate answers.
    pub offer: Option<(&'a [i32], &'a [String])>,
    /// Versions the Provider's manifest declares (§2.1), for negotiate answers.
    pub provider_versions: Option<&'a BTreeSet<i32>>,
}

/// Runs every check on one answer.
pub fn check_answer(cx: &AnswerContext<'_>) -> Vec<Finding> {
    let mut out = Vec::new();
    let bundle = match cx.answer {
        CallAnswer::Result(Some(b)) => b,
        // §4.2-§5: every v2 answer is a Bundle envelope, a refusal included;
        // an exception or null is never a way to say no.
        CallAnswer::Threw { class, .. } if !cx.v1 => {
            out.push(Finding::must(
                ENVELOPE,
                "envelope.answer",
                format!("call() threw {class} instead of answering a v2 envelope"),
            ));
            return out;
        }
        CallAnswer::Result(None) if !cx.v1 => {
            out.push(Finding::must(
                ENVELOPE,
                "envelope.answer",
                "call() returned null instead of a v2 envelope",
            ));
            return out;
        }
        _ => return out,
    };
    if cx.v1 {
        check_v1(bundle, &mut out);
        return out;
    }
    let response = match Response::from_bundle(bundle) {
        Ok(r) => r,
        Err(e) => {
            out.push(Finding::must(
                ENVELOPE,
                envelope_rule(bundle, cx.method),
                format!("answer is not a valid CETP v2 envelope: {e}"),
            ));
            return out;
        }
    };
    check_echo(cx, bundle, &response, &mut out);
    // §4.3: v2 resolves through the PendingIntent only, never v1's implicit
    // authorize_intent action string.
    if bundle.contains("authorize_intent") {
        out.push(Finding::must(
            RESOLUTION,
            "resolution.authorize_intent",
            "a v2 answer carries v1's authorize_intent",
        ));
    }
    match &response {
        Response::Error(e) => check_error(cx, bundle, e, &mut out),
        Response::Success { data, .. } => check_success(cx, bundle, data, &mut out),
        Response::Accepted { data, .. } => check_accepted(cx, data, &mut out),
    }
    out
}

/// An error answer: a known code, its retryable flag (§5), its resolution
/// when it asks for one (§4.3), and a message that is neither empty nor a
/// leak of internals.
fn check_error(
    cx: &AnswerContext<'_>,
    bundle: &Bundle,
    e: &cetp_proto::envelope::ErrorEnvelope,
    out: &mut Vec<Finding>,
) {
    match e.known_code() {
        None => out.push(Finding::must(
            ERROR_CODE,
            "error.code",
            format!("unknown error code {:?}", e.code),
        )),
        Some(code) => {
            if !code.retry_rule().allows(e.retryable) {
                out.push(Finding::must(
                    RETRYABLE,
                    retry_rule_key(code),
                    format!(
                        "{code} must have retryable={}, found {}",
                        !e.retryable, e.retryable
                    ),
                ));
            }
            if matches!(
                code,
                ErrorCode::UserActionRequired | ErrorCode::AuthRequired
            ) {
                check_resolution(cx, bundle, code, out);
            }
        }
    }
    if let Some(what) = leaks_internal_detail(&e.message) {
        out.push(Finding::must(
            ERROR_MESSAGE,
            "error.message.internal",
            format!("error_message exposes {what}"),
        ));
    }
    if e.message.trim().is_empty() {
        out.push(Finding::must(
            ERROR_MESSAGE,
            "error.message.empty",
            "error_message is empty",
        ));
    }
    if let Some(ms) = e.retry_after_ms {
        if ms < 0 {
            out.push(Finding::must(
                ENVELOPE,
                "error.retry_after_ms",
                format!("retry_after_ms is negative ({ms})"),
            ));
        }
    }
}

/// An `accepted` answer (§4.4): only for execute_tool, only with
/// async_operations negotiated, with an operation id and when to poll.
fn check_accepted(cx: &AnswerContext<'_>, data: &Json, out: &mut Vec<Finding>) {
    if cx.method != "execute_tool" {
        out.push(Finding::must(
            ENVELOPE,
            "accepted.method",
            format!(
                "status=accepted is only defined for execute_tool, not {}",
                cx.method
            ),
        ));
    }
    if let Some(n) = cx.negotiated {
        if !n.has(cetp_proto::envelope::Capability::AsyncOperations) {
            out.push(Finding::must(
                CAPABILITY_USE,
                "capability.async_operations",
                "status=accepted without a negotiated async_operations capability",
            ));
        }
    }
    if data.get("operation_id").and_then(Json::as_str).is_none() {
        out.push(Finding::must(
            ENVELOPE,
            "accepted.operation_id",
            "accepted data has no string operation_id",
        ));
    }
    // §4.4's acceptance names when to poll; a Consumer told nothing
    // can only guess (CETP2-4.4-03, as the operation_id above).
    if !data
        .get("poll_after_ms")
        .and_then(Json::as_f64)
        .is_some_and(|ms| ms >= 0.0)
    {
        out.push(Finding::must(
            ENVELOPE,
            "accepted.poll_after_ms",
            "accepted data has no non-negative poll_after_ms",
        ));
    }
}

fn check_echo(
    cx: &AnswerContext<'_>,
    bundle: &Bundle,
    response: &Response,
    out: &mut Vec<Finding>,
) {
    // A negotiate request carries neither protocol_version nor request_id,
    // so §5's echo has nothing to repeat there, error or not.
    let sent_id = cx
        .request
        .and_then(|r| r.opt_string(keys::REQUEST_ID).ok().flatten());
    match bundle.get(keys::PROTOCOL_VERSION) {
        Some(Value::Int(2)) => {}
        Some(Value::Int(v)) => out.push(Finding::must(
            ECHO,
            echo_rule("protocol_version", response),
            format!("protocol_version echoed as {v}, not 2"),
        )),
        Some(other) => out.push(Finding::must(
            ECHO,
            echo_rule("protocol_version", response),
            format!(
                "protocol_version echoed as a {}, not an Int",
                other.type_tag()
            ),
        )),
        None if cx.method != "negotiate" => out.push(Finding::must(
            ECHO,
            echo_rule("protocol_version", response),
            "protocol_version is not echoed",
        )),
        None => {}
    }
    if let Some(sent) = sent_id {
        match bundle.opt_string(keys::REQUEST_ID) {
            Ok(Some(echoed)) if echoed == sent => {}
            Ok(Some(echoed)) => out.push(Finding::must(
                ECHO,
                echo_rule("request_id", response),
                format!("request_id echoed as {echoed:?}, sent {sent:?}"),
            )),
            Ok(None) => out.push(Finding::must(
                ECHO,
                echo_rule("request_id", response),
                "request_id is not echoed",
            )),
            Err(e) => out.push(Finding::must(
                ECHO,
                echo_rule("request_id", response),
                e.to_string(),
            )),
        }
    }
}

fn check_resolution(
    cx: &AnswerContext<'_>,
    bundle: &Bundle,
    code: ErrorCode,
    out: &mut Vec<Finding>,
) {
    match bundle.get(keys::RESOLUTION) {
        Some(Value::PendingIntent(pi)) => {
            if pi.immutable != Some(true) {
                out.push(Finding::must(
                    RESOLUTION,
                    "resolution.immutable",
                    format!(
                        "{code}: resolution PendingIntent is not known to be immutable ({:?})",
                        pi.immutable
                    ),
                ));
            }
            if pi.activity == Some(false) {
                out.push(Finding::must(
                    RESOLUTION,
                    "resolution.activity",
                    format!("{code}: resolution PendingIntent does not start an activity"),
                ));
            }
            if let Some(pkg) = cx.package {
                if pi.creator_package.as_deref() != Some(pkg) {
                    out.push(Finding::must(
                        RESOLUTION, "resolution.package",
                        format!("{code}: resolution PendingIntent was created by {:?}, not the Provider {pkg:?}", pi.creator_package),
                    ));
                }
            }
        }
        Some(other) => out.push(Finding::must(
            RESOLUTION,
            "resolution.pending_intent",
            format!(
                "{code}: resolution is a {}, not a PendingIntent",
                other.type_tag()
            ),
        )),
        None => out.push(Finding::must(
            RESOLUTION,
            "resolution.pending_intent",
            format!("{code} carries no resolution PendingIntent"),
        )),
    }
    match bundle.opt_string(keys::RESUME_TOKEN) {
        Ok(Some(t)) if !t.is_empty() => {}
        Ok(_) => out.push(Finding::must(
            RESOLUTION,
            "resolution.resume_token",
            format!("{code} carries no resume_token"),
        )),
        Err(e) => out.push(Finding::must(
            RESOLUTION,
            "resolution.resume_token",
            e.to_string(),
        )),
    }
}

fn check_success(cx: &AnswerContext<'_>, bundle: &Bundle, data: &Json, out: &mut Vec<Finding>) {
    match cx.method {
        "negotiate" => {
            let (versions, caps) = cx.offer.unwrap_or((&[], &[]));
            let ncx = NegotiateContext {
                consumer_versions: versions,
                consumer_capabilities: caps,
                provider_versions: cx.provider_versions,
                package: cx.package,
            };
            let (_, v) = validate_negotiate(data, &ncx);
            out.extend(
                v.into_iter()
                    .map(|v| Finding::from_violation(NEGOTIATION, v)),
            );
        }
        "get_provider_info" => {
            let (_, v) = validate_provider_info(data, cx.package);
            out.extend(
                v.into_iter()
                    .map(|v| Finding::from_violation(DESCRIPTORS, v)),
            );
        }
        "list_tools" => {
            let empty = BTreeSet::new();
            let negotiated = cx.negotiated.map(|n| &n.capabilities).unwrap_or(&empty);
            let tcx = ToolListContext {
                negotiated,
                known_scopes: cx.known_scopes,
                dialect: cx.dialect,
            };
            let (_, v) = validate_tool_list(data, &tcx);
            out.extend(
                v.into_iter()
                    .map(|v| Finding::from_violation(DESCRIPTORS, v)),
            );
        }
        "execute_tool" => check_result(cx, bundle, data, out),
        "get_operation" => {
            let state = data.get("state").and_then(Json::as_str);
            match state.and_then(OpState::parse) {
                None => out.push(Finding::must(ENVELOPE, "operation.state", format!("get_operation state {state:?} is not a defined state"))),
                Some(OpState::CancellationRequested) => out.push(Finding::must(
                    ENVELOPE, "operation.state",
                    "get_operation reports cancellation_requested, which only cancel_operation may answer",
                )),
                Some(OpState::Succeeded) => match data.get("result") {
                    Some(result) => check_result(cx, bundle, result, out),
                    None => out.push(Finding::must(ENVELOPE, "operation.result", "a succeeded operation carries no result")),
                },
                Some(OpState::Failed) => {
                    let err = data.get("error");
                    let code = err.and_then(|e| e.get("error_code")).and_then(Json::as_str);
                    match code {
                        None => out.push(Finding::must(ENVELOPE, "operation.error", "a failed operation carries no error object with error_code")),
                        Some(c) => match ErrorCode::parse(c) {
                            None => out.push(Finding::must(ERROR_CODE, "error.code", format!("operation error code {c:?} is unknown"))),
                            Some(code) => {
                                if let Some(r) = err.and_then(|e| e.get("retryable")).and_then(Json::as_bool) {
                                    if !code.retry_rule().allows(r) {
                                        out.push(Finding::must(RETRYABLE, retry_rule_key(code), format!("operation error {code} must not have retryable={r}")));
                                    }
                                }
                            }
                        },
                    }
                }
                Some(_) => {}
            }
        }
        "cancel_operation" => {
            let state = data.get("state").and_then(Json::as_str);
            if state != Some("cancellation_requested") {
                out.push(Finding::must(ENVELOPE, "cancel.state", format!("cancel_operation success must report state=cancellation_requested, found {state:?}")));
            }
        }
        _ => {}
    }
}

fn check_result(cx: &AnswerContext<'_>, bundle: &Bundle, result: &Json, out: &mut Vec<Finding>) {
    let parsed = match ExecResult::from_json(result) {
        Ok(r) => r,
        Err(e) => {
            out.push(Finding::must(
                ENVELOPE,
                "result.envelope",
                format!("tool result envelope: {e}"),
            ));
            return;
        }
    };
    match parsed {
        ExecResult::Inline(value) => {
            if let Some(limit) = cx
                .negotiated
                .and_then(|n| n.limit("max_inline_result_bytes"))
            {
                let size = result.to_string().len() as i64;
                if size > limit {
                    out.push(Finding::must(
                        INLINE_SIZE,
                        "result.inline_size",
                        format!(
                            "inline result is {size} bytes, over max_inline_result_bytes {limit}"
                        ),
                    ));
                }
            }
            if let Some(tool) = cx.tool {
                match CompiledSchema::compile(&tool.output_schema, cx.dialect) {
                    Ok(schema) => {
                        let errors = schema.errors(&value);
                        if !errors.is_empty() {
                            out.push(Finding::must(
                                OUTPUT_SCHEMA,
                                "result.output_schema",
                                format!(
                                    "result of {} does not match its output_schema: {}",
                                    tool.name,
                                    errors.join("; ")
                                ),
                            ));
                        }
                    }
                    Err(e) => out.push(Finding::must(
                        OUTPUT_SCHEMA,
                        "result.output_schema",
                        format!("output_schema of {} cannot be used: {e}", tool.name),
                    )),
                }
            }
        }
        ExecResult::File { .. } => {
            if let Some(n) = cx.negotiated {
                if !n.has(cetp_proto::envelope::Capability::LargeResults) {
                    out.push(Finding::must(
                        CAPABILITY_USE,
                        "capability.large_results",
                        "file result without a negotiated large_results capability",
                    ));
                }
            }
            if !matches!(bundle.get(keys::RESULT_FD), Some(Value::Fd(_)))
                && cx.method == "execute_tool"
            {
                out.push(Finding::must(
                    ENVELOPE,
                    "result.file_fd",
                    "file result without a result_fd descriptor",
                ));
            }
        }
    }
}

fn check_v1(bundle: &Bundle, out: &mut Vec<Finding>) {
    match cetp_proto::envelope::V1Response::from_bundle(bundle) {
        Ok(cetp_proto::envelope::V1Response::Error { code, .. }) => {
            if !V1_ERROR_CODES.contains(&code.as_str()) && ErrorCode::parse(&code).is_none() {
                out.push(Finding::must(
                    V1_SHAPE,
                    "v1.error_code",
                    format!("v1 answer uses unknown error code {code:?}"),
                ));
            }
        }
        Ok(_) => {}
        Err(e) => out.push(Finding::must(
            V1_SHAPE,
            "v1.shape",
            format!("v1 answer is malformed: {e}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cetp_proto::envelope::ErrorEnvelope;

    fn cx<'a>(method: &'a str, request: &'a Bundle, answer: &'a CallAnswer) -> AnswerContext<'a> {
        AnswerContext {
            method,
            v1: false,
            request: Some(request),
            answer,
            negotiated: None,
            tool: None,
            package: Some("com.x"),
            dialect: cetp_proto::schema::DEFAULT_DIALECT,
            known_scopes: None,
            offer: None,
            provider_versions: None,
        }
    }

    fn req() -> Bundle {
        Bundle::new().with("protocol_version", Value::Int(2)).with(
            "request_id",
            Value::str("123e4567-e89b-12d3-a456-426614174000"),
        )
    }

    fn checks_of(f: &[Finding]) -> Vec<&'static str> {
        f.iter().map(|f| f.check).collect()
    }

    #[test]
    fn good_error_passes() {
        let mut e = ErrorEnvelope::new(ErrorCode::InvalidArgs, "price must be positive", false);
        e.request_id = Some("123e4567-e89b-12d3-a456-426614174000".into());
        let a = CallAnswer::Result(Some(e.to_bundle()));
        let r = req();
        assert!(check_answer(&cx("execute_tool", &r, &a)).is_empty());
    }

    #[test]
    fn each_error_check_can_fail() {
        let r = req();
        let mut e = ErrorEnvelope::new(
            ErrorCode::InvalidArgs,
            "java.lang.IllegalStateException: x\n\tat a.B(B.java:1)",
            true,
        );
        e.request_id = Some("other".into());
        e.protocol_version = None;
        let a = CallAnswer::Result(Some(e.to_bundle()));
        let f = check_answer(&cx("execute_tool", &r, &a));
        assert_eq!(checks_of(&f), vec![ECHO, ECHO, RETRYABLE, ERROR_MESSAGE]);

        let mut e = ErrorEnvelope::new(ErrorCode::InvalidArgs, "x", false);
        e.code = "BAD_ARGS".into();
        e.request_id = Some("123e4567-e89b-12d3-a456-426614174000".into());
        let a = CallAnswer::Result(Some(e.to_bundle()));
        assert_eq!(
            checks_of(&check_answer(&cx("execute_tool", &r, &a))),
            vec![ERROR_CODE]
        );
    }

    #[test]
    fn long_protocol_version_echo_is_caught() {
        let r = req();
        let mut b = ErrorEnvelope::new(ErrorCode::InvalidArgs, "x", false).to_bundle();
        b.insert("protocol_version", Value::Long(2));
        b.insert(
            "request_id",
            Value::str("123e4567-e89b-12d3-a456-426614174000"),
        );
        let a = CallAnswer::Result(Some(b));
        let f = check_answer(&cx("execute_tool", &r, &a));
        assert_eq!(f.len(), 1);
        assert!(f[0].message.contains("long"), "{f:?}");
    }

    #[test]
    fn user_action_needs_a_proper_resolution() {
        let r = req();
        let mut e = ErrorEnvelope::new(ErrorCode::UserActionRequired, "confirm", false);
        e.request_id = Some("123e4567-e89b-12d3-a456-426614174000".into());
        let a = CallAnswer::Result(Some(e.to_bundle()));
        let f = check_answer(&cx("execute_tool", &r, &a));
        assert_eq!(checks_of(&f), vec![RESOLUTION, RESOLUTION]);
        e.resolution = Some(cetp_proto::PendingIntentValue {
            handle: "pi-1".into(),
            creator_package: Some("com.evil".into()),
            creator_uid: Some(1),
            immutable: Some(false),
            activity: Some(true),
        });
        e.resume_token = Some("t".into());
        let a = CallAnswer::Result(Some(e.to_bundle()));
        let f = check_answer(&cx("execute_tool", &r, &a));
        assert_eq!(checks_of(&f), vec![RESOLUTION, RESOLUTION]);
    }

    #[test]
    fn output_schema_and_inline_size() {
        let tool = ToolSummary {
            name: "t".into(),
            input_schema: serde_json::json!({}),
            output_schema: serde_json::json!({"type":"object","required":["alert_id"]}),
            scopes: vec![],
            effect: "create".into(),
            risk: "low".into(),
            destructive: false,
            idempotent: false,
            open_world: false,
            confirmation: "never".into(),
            execution: "sync".into(),
        };
        let mut n = Negotiated::default();
        n.limits.insert("max_inline_result_bytes".into(), 10);
        let r = req();
        let ok = Response::success(
            Some("123e4567-e89b-12d3-a456-426614174000"),
            serde_json::json!({"kind":"inline","value":{"x":1}}),
        );
        let a = CallAnswer::Result(Some(ok.to_bundle()));
        let mut c = cx("execute_tool", &r, &a);
        c.tool = Some(&tool);
        c.negotiated = Some(&n);
        assert_eq!(
            checks_of(&check_answer(&c)),
            vec![INLINE_SIZE, OUTPUT_SCHEMA]
        );
    }

    #[test]
    fn v1_shape_can_fail() {
        let r = Bundle::new();
        let good = CallAnswer::Result(Some(
            cetp_proto::envelope::V1Response::Error {
                code: "TOOL_NOT_FOUND".into(),
                message: "no".into(),
            }
            .to_bundle(),
        ));
        let mut c = cx("execute_tool", &r, &good);
        c.v1 = true;
        assert!(check_answer(&c).is_empty());
        let unknown = CallAnswer::Result(Some(
            cetp_proto::envelope::V1Response::Error {
                code: "NOPE".into(),
                message: "no".into(),
            }
            .to_bundle(),
        ));
        let mut c = cx("execute_tool", &r, &unknown);
        c.v1 = true;
        assert_eq!(checks_of(&check_answer(&c)), vec![V1_SHAPE]);
        let malformed = CallAnswer::Result(Some(Bundle::new().with("status", Value::Int(1))));
        let mut c = cx("list_tools", &r, &malformed);
        c.v1 = true;
        assert_eq!(checks_of(&check_answer(&c)), vec![V1_SHAPE]);
    }

    #[test]
    fn v1_authorize_intent_in_a_v2_answer_is_caught() {
        let r = req();
        let mut e = ErrorEnvelope::new(ErrorCode::PermissionDenied, "denied", false);
        e.request_id = Some("123e4567-e89b-12d3-a456-426614174000".into());
        let mut b = e.to_bundle();
        b.insert("authorize_intent", Value::str("com.example.AUTHORIZE"));
        let a = CallAnswer::Result(Some(b));
        assert_eq!(
            checks_of(&check_answer(&cx("execute_tool", &r, &a))),
            vec![RESOLUTION]
        );
    }
}
