//! Request and response envelopes of the CETP v2 methods (§2.2, §4, §5) and of
//! v1's `list_tools`, `execute_tool` and `get_provider_info`.
//!
//! Decoding is strict and precise: the error names the key, the Bundle type
//! expected and what was found, because "protocol_version was a Long" is the
//! report a vendor needs, not "bad request".

use crate::bundle::{parse_json_text, Bundle, FieldError, Found, PendingIntentValue, Value};
use crate::error::ErrorCode;
use serde_json::Value as Json;
use std::fmt;

/// Bundle keys of the CETP envelopes, spelled once so a typo cannot create a new key.
pub mod keys {
    /// `success`, `accepted` or `error` in every answer (§4.2, §4.4, §5).
    pub const STATUS: &str = "status";
    /// JSON text of a successful answer's payload (§4.2).
    pub const DATA: &str = "data";
    /// `Int` 2 on every v2 request but `negotiate`, echoed in answers (§4.1); its presence marks a v2 call (§4).
    pub const PROTOCOL_VERSION: &str = "protocol_version";
    /// The negotiated session token (§2.2, §4.1).
    pub const SESSION_TOKEN: &str = "session_token";
    /// UUID naming one logical execution or read, kept across retries (§4.1).
    pub const REQUEST_ID: &str = "request_id";
    /// `Long` deadline in Unix epoch milliseconds (§4.1).
    pub const DEADLINE_AT_MS: &str = "deadline_at_ms";
    /// The tool `execute_tool` runs (§4.1).
    pub const TOOL_NAME: &str = "tool_name";
    /// The tool arguments as JSON text (§4.1).
    pub const ARGS: &str = "args";
    /// Token that resumes a call after the Provider's confirmation (§4.3).
    pub const RESUME_TOKEN: &str = "resume_token";
    /// The background operation `get_operation` / `cancel_operation` address (§4.4).
    pub const OPERATION_ID: &str = "operation_id";
    /// `int[]` of the Consumer's major versions, highest first (§2.2).
    pub const CONSUMER_VERSIONS: &str = "consumer_versions";
    /// JSON array text of the capabilities the Consumer offers (§2.2).
    pub const CONSUMER_CAPABILITIES: &str = "consumer_capabilities";
    /// The §5 error code of an error answer.
    pub const ERROR_CODE: &str = "error_code";
    /// User-facing, safe description of an error (§5).
    pub const ERROR_MESSAGE: &str = "error_message";
    /// `Boolean`: may the Consumer retry automatically (§5).
    pub const RETRYABLE: &str = "retryable";
    /// Optional JSON text with error specifics (§5).
    pub const ERROR_DETAILS: &str = "error_details";
    /// Optional `Long`: how long to wait before a retry (§5).
    pub const RETRY_AFTER_MS: &str = "retry_after_ms";
    /// The PendingIntent of AUTH_REQUIRED / USER_ACTION_REQUIRED (§4.3).
    pub const RESOLUTION: &str = "resolution";
    /// The read-only descriptor of a large result (§4.5).
    pub const RESULT_FD: &str = "result_fd";
}

/// The v2 methods (§4) and their capability requirement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Method {
    /// `negotiate`: pick version, capabilities and limits (§2.2).
    Negotiate,
    /// `get_provider_info`: identity, description and scopes (§3.2).
    GetProviderInfo,
    /// `list_tools`: the tools visible to the caller (§3.3).
    ListTools,
    /// `execute_tool`: start or resume a tool execution (§4.1).
    ExecuteTool,
    /// `get_operation`: poll a background operation (needs `async_operations`, §4.4).
    GetOperation,
    /// `cancel_operation`: ask to cancel one (needs `cancellation`, §4.4).
    CancelOperation,
}

impl Method {
    /// Every v2 method, in the order of the §4 table.
    pub const ALL: [Method; 6] = [
        Method::Negotiate,
        Method::GetProviderInfo,
        Method::ListTools,
        Method::ExecuteTool,
        Method::GetOperation,
        Method::CancelOperation,
    ];

    /// The method name passed to `call()`.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Negotiate => "negotiate",
            Method::GetProviderInfo => "get_provider_info",
            Method::ListTools => "list_tools",
            Method::ExecuteTool => "execute_tool",
            Method::GetOperation => "get_operation",
            Method::CancelOperation => "cancel_operation",
        }
    }

    /// The v2 method of this name; `None` for anything else (METHOD_NOT_FOUND, §4).
    pub fn parse(s: &str) -> Option<Method> {
        Method::ALL.into_iter().find(|m| m.as_str() == s)
    }

    /// The optional capability a method needs, if any (§4 table).
    pub fn capability(self) -> Option<Capability> {
        match self {
            Method::GetOperation => Some(Capability::AsyncOperations),
            Method::CancelOperation => Some(Capability::Cancellation),
            _ => None,
        }
    }
}

/// Optional capabilities (§2.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Capability {
    /// `get_operation`, and `execute_tool` answering `accepted` (§4.4).
    AsyncOperations,
    /// `cancel_operation` (§4.4).
    Cancellation,
    /// Results delivered through a descriptor (§4.5).
    LargeResults,
}

impl Capability {
    /// Every optional capability of §2.3.
    pub const ALL: [Capability; 3] = [
        Capability::AsyncOperations,
        Capability::Cancellation,
        Capability::LargeResults,
    ];
    /// The capability as named in `consumer_capabilities` and `capabilities`.
    pub fn as_str(self) -> &'static str {
        match self {
            Capability::AsyncOperations => "async_operations",
            Capability::Cancellation => "cancellation",
            Capability::LargeResults => "large_results",
        }
    }
    /// The capability of this name; `None` for one §2.3 does not define.
    pub fn parse(s: &str) -> Option<Capability> {
        Capability::ALL.into_iter().find(|c| c.as_str() == s)
    }
}

/// `request_id` must be a UUID (§4.1). We accept the canonical 8-4-4-4-12 hex
/// form in either case, and nothing looser (no braces, no missing hyphens).
pub fn is_uuid(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}

// ---------------------------------------------------------------- requests

/// The extras of a `negotiate` call (§2.2).
#[derive(Clone, Debug, PartialEq)]
pub struct NegotiateRequest {
    /// Supported major versions, highest first.
    pub consumer_versions: Vec<i32>,
    /// Optional capabilities offered (sent as a JSON string array).
    pub consumer_capabilities: Vec<String>,
}

impl NegotiateRequest {
    /// The extras Bundle, with the Bundle types §2.2 requires.
    pub fn to_bundle(&self) -> Bundle {
        Bundle::new()
            .with(
                keys::CONSUMER_VERSIONS,
                Value::IntArray(self.consumer_versions.clone()),
            )
            .with(
                keys::CONSUMER_CAPABILITIES,
                Value::String(Json::from(self.consumer_capabilities.clone()).to_string()),
            )
    }
}

/// Fields every v2 method but `negotiate` carries (§4.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Common {
    /// The token `negotiate` returned.
    pub session_token: String,
    /// UUID of the logical execution or read (§4.1).
    pub request_id: String,
    /// Deadline, Unix epoch milliseconds; checked before any side effect (§4.1).
    pub deadline_at_ms: i64,
}

impl Common {
    /// The common keys as a Bundle (`protocol_version` as an `Int` 2, the deadline as a `Long`).
    pub fn to_bundle(&self) -> Bundle {
        Bundle::new()
            .with(keys::PROTOCOL_VERSION, Value::Int(2))
            .with(keys::SESSION_TOKEN, Value::str(&self.session_token))
            .with(keys::REQUEST_ID, Value::str(&self.request_id))
            .with(keys::DEADLINE_AT_MS, Value::Long(self.deadline_at_ms))
    }
}

/// A decoded v2 request, one variant per method (§4).
#[derive(Clone, Debug, PartialEq)]
pub enum V2Request {
    /// `negotiate` (no common fields).
    Negotiate(NegotiateRequest),
    /// `get_provider_info`.
    GetProviderInfo(Common),
    /// `list_tools`.
    ListTools(Common),
    /// `execute_tool`, first call or resumption.
    ExecuteTool {
        /// The §4.1 fields.
        common: Common,
        /// The tool to run.
        tool_name: String,
        /// The args JSON text exactly as sent: resume tokens and dedupe
        /// records bind to these bytes (§4.3, §6).
        args: String,
        /// Present when resuming after a confirmation (§4.3).
        resume_token: Option<String>,
    },
    /// `get_operation`.
    GetOperation {
        /// The §4.1 fields; `request_id` must be the one that created the operation.
        common: Common,
        /// The operation to query.
        operation_id: String,
    },
    /// `cancel_operation`.
    CancelOperation {
        /// The §4.1 fields; `request_id` must be the one that created the operation.
        common: Common,
        /// The operation to cancel.
        operation_id: String,
    },
}

impl V2Request {
    /// Which method the request is for.
    pub fn method(&self) -> Method {
        match self {
            V2Request::Negotiate(_) => Method::Negotiate,
            V2Request::GetProviderInfo(_) => Method::GetProviderInfo,
            V2Request::ListTools(_) => Method::ListTools,
            V2Request::ExecuteTool { .. } => Method::ExecuteTool,
            V2Request::GetOperation { .. } => Method::GetOperation,
            V2Request::CancelOperation { .. } => Method::CancelOperation,
        }
    }

    /// The §4.1 common fields; `None` for `negotiate`, which has none.
    pub fn common(&self) -> Option<&Common> {
        match self {
            V2Request::Negotiate(_) => None,
            V2Request::GetProviderInfo(c) | V2Request::ListTools(c) => Some(c),
            V2Request::ExecuteTool { common, .. }
            | V2Request::GetOperation { common, .. }
            | V2Request::CancelOperation { common, .. } => Some(common),
        }
    }

    /// The extras Bundle a Consumer sends for this request.
    pub fn to_bundle(&self) -> Bundle {
        match self {
            V2Request::Negotiate(n) => n.to_bundle(),
            V2Request::GetProviderInfo(c) | V2Request::ListTools(c) => c.to_bundle(),
            V2Request::ExecuteTool {
                common,
                tool_name,
                args,
                resume_token,
            } => {
                let mut b = common
                    .to_bundle()
                    .with(keys::TOOL_NAME, Value::str(tool_name))
                    .with(keys::ARGS, Value::str(args));
                if let Some(t) = resume_token {
                    b.insert(keys::RESUME_TOKEN, Value::str(t));
                }
                b
            }
            V2Request::GetOperation {
                common,
                operation_id,
            }
            | V2Request::CancelOperation {
                common,
                operation_id,
            } => common
                .to_bundle()
                .with(keys::OPERATION_ID, Value::str(operation_id)),
        }
    }
}

/// Why a request could not be decoded, and the error code a Provider answers.
#[derive(Clone, Debug, PartialEq)]
pub struct RequestError {
    /// The code of the error answer the Provider owes.
    pub code: ErrorCode,
    /// What is wrong with the request.
    pub message: String,
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl From<FieldError> for RequestError {
    fn from(e: FieldError) -> Self {
        RequestError {
            code: ErrorCode::InvalidRequest,
            message: e.to_string(),
        }
    }
}

/// How a Provider must read a call (§4): by `protocol_version` presence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    /// No `protocol_version`: a v1 call (on a dual-stack Provider).
    V1,
    /// `protocol_version` present: must be an Int 2, else INVALID_REQUEST or
    /// UNSUPPORTED_VERSION, never silently v1.
    V2,
}

/// Which protocol a call with these extras is (§4: no `protocol_version` is v1, except `negotiate`, which only v2 has).
pub fn dialect_of(method: &str, extras: Option<&Bundle>) -> Dialect {
    if method == Method::Negotiate.as_str() {
        return Dialect::V2;
    }
    match extras {
        Some(b) if b.contains(keys::PROTOCOL_VERSION) => Dialect::V2,
        _ => Dialect::V1,
    }
}

/// Decodes a v2 call. `method` must already be known to be a v2 method.
pub fn decode_v2_request(
    method: Method,
    extras: Option<&Bundle>,
) -> Result<V2Request, RequestError> {
    let empty = Bundle::new();
    let b = extras.unwrap_or(&empty);
    if method == Method::Negotiate {
        let consumer_versions = b.get_int_array(keys::CONSUMER_VERSIONS)?;
        let caps_json = b.get_json(keys::CONSUMER_CAPABILITIES)?;
        let consumer_capabilities = json_string_array(keys::CONSUMER_CAPABILITIES, &caps_json)?;
        return Ok(V2Request::Negotiate(NegotiateRequest {
            consumer_versions,
            consumer_capabilities,
        }));
    }
    let version = b.get_int(keys::PROTOCOL_VERSION)?;
    if version != 2 {
        return Err(RequestError {
            code: ErrorCode::UnsupportedVersion,
            message: format!("protocol_version {version} is not 2"),
        });
    }
    let request_id = b.get_string(keys::REQUEST_ID)?;
    if !is_uuid(&request_id) {
        return Err(RequestError {
            code: ErrorCode::InvalidRequest,
            message: "request_id is not a UUID".into(),
        });
    }
    // §5: a missing session is NEGOTIATION_REQUIRED (retryable), not a
    // malformed envelope; a session_token of the wrong type stays INVALID_REQUEST.
    let session_token = match b.opt_string(keys::SESSION_TOKEN)? {
        Some(t) => t,
        None => {
            return Err(RequestError {
                code: ErrorCode::NegotiationRequired,
                message: "session_token is missing".into(),
            })
        }
    };
    let common = Common {
        session_token,
        request_id,
        deadline_at_ms: b.get_long(keys::DEADLINE_AT_MS)?,
    };
    Ok(match method {
        Method::Negotiate => unreachable!("handled above"),
        Method::GetProviderInfo => V2Request::GetProviderInfo(common),
        Method::ListTools => V2Request::ListTools(common),
        Method::ExecuteTool => V2Request::ExecuteTool {
            tool_name: b.get_string(keys::TOOL_NAME)?,
            args: b.get_string(keys::ARGS)?,
            resume_token: b.opt_string(keys::RESUME_TOKEN)?,
            common,
        },
        Method::GetOperation => V2Request::GetOperation {
            operation_id: b.get_string(keys::OPERATION_ID)?,
            common,
        },
        Method::CancelOperation => V2Request::CancelOperation {
            operation_id: b.get_string(keys::OPERATION_ID)?,
            common,
        },
    })
}

fn json_string_array(key: &str, v: &Json) -> Result<Vec<String>, FieldError> {
    let items = v
        .as_array()
        .ok_or_else(|| FieldError::invalid(key, "JSON array of strings", "not an array"))?;
    items
        .iter()
        .map(|i| {
            i.as_str().map(str::to_string).ok_or_else(|| {
                FieldError::invalid(key, "JSON array of strings", "an element is not a string")
            })
        })
        .collect()
}

/// A v1 `execute_tool` call (v1 doc §2.3): `tool_name`, `args`, optional
/// `request_id`.
pub fn v1_execute_bundle(tool_name: &str, args: &str, request_id: Option<&str>) -> Bundle {
    let mut b = Bundle::new()
        .with(keys::TOOL_NAME, Value::str(tool_name))
        .with(keys::ARGS, Value::str(args));
    if let Some(id) = request_id {
        b.insert(keys::REQUEST_ID, Value::str(id));
    }
    b
}

// ---------------------------------------------------------------- responses

/// The error envelope (§5), plus the resolution fields of §4.3.
#[derive(Clone, Debug, PartialEq)]
pub struct ErrorEnvelope {
    /// Raw text: an unknown code is kept so it can be reported.
    pub code: String,
    /// The `error_message`.
    pub message: String,
    /// The `retryable` flag; its allowed value depends on the code ([`ErrorCode::retry_rule`]).
    pub retryable: bool,
    /// The echoed `protocol_version`, `None` when absent.
    pub protocol_version: Option<i32>,
    /// The echoed `request_id`, `None` when absent.
    pub request_id: Option<String>,
    /// The parsed `error_details`.
    pub details: Option<Json>,
    /// The `retry_after_ms` the Consumer must honour (§5).
    pub retry_after_ms: Option<i64>,
    /// The `resolution` PendingIntent (§4.3).
    pub resolution: Option<PendingIntentValue>,
    /// The `resume_token` that comes with a resolution (§4.3).
    pub resume_token: Option<String>,
}

impl ErrorEnvelope {
    /// A v2 error answer with `protocol_version` 2 and no optional field set.
    pub fn new(code: ErrorCode, message: impl Into<String>, retryable: bool) -> Self {
        ErrorEnvelope {
            code: code.as_str().to_string(),
            message: message.into(),
            retryable,
            protocol_version: Some(2),
            request_id: None,
            details: None,
            retry_after_ms: None,
            resolution: None,
            resume_token: None,
        }
    }

    /// The code as a §5 code, `None` when it is not one.
    pub fn known_code(&self) -> Option<ErrorCode> {
        ErrorCode::parse(&self.code)
    }

    /// The error Bundle a Provider returns.
    pub fn to_bundle(&self) -> Bundle {
        let mut b = Bundle::new()
            .with(keys::STATUS, Value::str("error"))
            .with(keys::ERROR_CODE, Value::str(&self.code))
            .with(keys::ERROR_MESSAGE, Value::str(&self.message))
            .with(keys::RETRYABLE, Value::Bool(self.retryable));
        if let Some(v) = self.protocol_version {
            b.insert(keys::PROTOCOL_VERSION, Value::Int(v));
        }
        if let Some(id) = &self.request_id {
            b.insert(keys::REQUEST_ID, Value::str(id));
        }
        if let Some(d) = &self.details {
            b.insert(keys::ERROR_DETAILS, Value::String(d.to_string()));
        }
        if let Some(ms) = self.retry_after_ms {
            b.insert(keys::RETRY_AFTER_MS, Value::Long(ms));
        }
        if let Some(pi) = &self.resolution {
            b.insert(keys::RESOLUTION, Value::PendingIntent(pi.clone()));
        }
        if let Some(t) = &self.resume_token {
            b.insert(keys::RESUME_TOKEN, Value::str(t));
        }
        b
    }
}

/// The `data` of a successful `execute_tool` (§4.2, §4.5).
#[derive(Clone, Debug, PartialEq)]
pub enum ExecResult {
    /// `{"kind":"inline","value":...}`: the result value itself (§4.2).
    Inline(Json),
    /// `{"kind":"file",...}`: the result is in `result_fd` (§4.5).
    File {
        /// Media type of the file's content.
        media_type: String,
        /// Declared size, which the Consumer must verify (§4.5).
        size_bytes: u64,
        /// Declared SHA-256, lowercase hex, which the Consumer must verify (§4.5).
        sha256: String,
    },
}

impl ExecResult {
    /// The `data` JSON of this result.
    pub fn to_json(&self) -> Json {
        match self {
            ExecResult::Inline(v) => serde_json::json!({"kind": "inline", "value": v}),
            ExecResult::File {
                media_type,
                size_bytes,
                sha256,
            } => serde_json::json!({
                "kind": "file", "media_type": media_type, "size_bytes": size_bytes, "sha256": sha256
            }),
        }
    }

    /// Reads a result `data` object, checking `kind` and the file fields' types.
    pub fn from_json(v: &Json) -> Result<ExecResult, String> {
        let obj = v.as_object().ok_or("result is not a JSON object")?;
        match obj.get("kind").and_then(Json::as_str) {
            Some("inline") => Ok(ExecResult::Inline(
                obj.get("value")
                    .cloned()
                    .ok_or("inline result has no `value`")?,
            )),
            Some("file") => {
                let media_type = obj
                    .get("media_type")
                    .and_then(Json::as_str)
                    .ok_or("file result has no string `media_type`")?
                    .to_string();
                let size_bytes = obj
                    .get("size_bytes")
                    .and_then(Json::as_u64)
                    .ok_or("file result has no non-negative integer `size_bytes`")?;
                let sha256 = obj
                    .get("sha256")
                    .and_then(Json::as_str)
                    .ok_or("file result has no string `sha256`")?
                    .to_string();
                if sha256.len() != 64
                    || !sha256
                        .bytes()
                        .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
                {
                    return Err("file result `sha256` is not 64 lowercase hex digits".into());
                }
                Ok(ExecResult::File {
                    media_type,
                    size_bytes,
                    sha256,
                })
            }
            Some(other) => Err(format!("unknown result kind `{other}`")),
            None => Err("result has no string `kind`".into()),
        }
    }
}

/// A decoded answer Bundle.
#[derive(Clone, Debug, PartialEq)]
pub enum Response {
    /// `status = "success"` (§4.2).
    Success {
        /// The echoed `protocol_version`, if present.
        protocol_version: Option<i32>,
        /// The echoed `request_id`, if present.
        request_id: Option<String>,
        /// The parsed `data`.
        data: Json,
    },
    /// `status = "accepted"`: a background operation was started (§4.4).
    Accepted {
        /// The echoed `protocol_version`, if present.
        protocol_version: Option<i32>,
        /// The echoed `request_id`, if present.
        request_id: Option<String>,
        /// The parsed `data` (`operation_id`, `poll_after_ms`).
        data: Json,
    },
    /// `status = "error"` (§5).
    Error(ErrorEnvelope),
}

/// Why an answer Bundle is not a well-formed envelope.
#[derive(Clone, Debug, PartialEq)]
pub struct ResponseError {
    /// What is wrong, naming the key.
    pub message: String,
}

impl fmt::Display for ResponseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<FieldError> for ResponseError {
    fn from(e: FieldError) -> Self {
        ResponseError {
            message: e.to_string(),
        }
    }
}

impl Response {
    /// The `status` text of this answer.
    pub fn status(&self) -> &'static str {
        match self {
            Response::Success { .. } => "success",
            Response::Accepted { .. } => "accepted",
            Response::Error(_) => "error",
        }
    }

    /// A v2 success answer echoing `protocol_version` 2 and the request id.
    pub fn success(request_id: Option<&str>, data: Json) -> Self {
        Response::Success {
            protocol_version: Some(2),
            request_id: request_id.map(str::to_string),
            data,
        }
    }

    /// The answer Bundle a Provider returns.
    pub fn to_bundle(&self) -> Bundle {
        match self {
            Response::Success {
                protocol_version,
                request_id,
                data,
            }
            | Response::Accepted {
                protocol_version,
                request_id,
                data,
            } => {
                let mut b = Bundle::new()
                    .with(keys::STATUS, Value::str(self.status()))
                    .with(keys::DATA, Value::String(data.to_string()));
                if let Some(v) = protocol_version {
                    b.insert(keys::PROTOCOL_VERSION, Value::Int(*v));
                }
                if let Some(id) = request_id {
                    b.insert(keys::REQUEST_ID, Value::str(id));
                }
                b
            }
            Response::Error(e) => e.to_bundle(),
        }
    }

    /// Strict decoding of a v2 answer. Missing required keys are errors; the
    /// echo fields are decoded when present and their presence is judged by
    /// the checks (which know whether an echo was due).
    pub fn from_bundle(b: &Bundle) -> Result<Response, ResponseError> {
        let status = b.get_string(keys::STATUS)?;
        let protocol_version = b.opt_int(keys::PROTOCOL_VERSION)?;
        let request_id = b.opt_string(keys::REQUEST_ID)?;
        match status.as_str() {
            "success" | "accepted" => {
                let data = b.get_json(keys::DATA)?;
                Ok(if status == "success" {
                    Response::Success {
                        protocol_version,
                        request_id,
                        data,
                    }
                } else {
                    Response::Accepted {
                        protocol_version,
                        request_id,
                        data,
                    }
                })
            }
            "error" => {
                let details = match b.opt_string(keys::ERROR_DETAILS)? {
                    None => None,
                    Some(text) => Some(parse_json_text(keys::ERROR_DETAILS, &text)?),
                };
                Ok(Response::Error(ErrorEnvelope {
                    code: b.get_string(keys::ERROR_CODE)?,
                    message: b.get_string(keys::ERROR_MESSAGE)?,
                    retryable: b.get_bool(keys::RETRYABLE)?,
                    protocol_version,
                    request_id,
                    details,
                    retry_after_ms: b.opt_long(keys::RETRY_AFTER_MS)?,
                    resolution: b.opt_pending_intent(keys::RESOLUTION)?,
                    resume_token: b.opt_string(keys::RESUME_TOKEN)?,
                }))
            }
            other => Err(ResponseError {
                message: format!(
                    "key `status`: expected \"success\", \"accepted\" or \"error\", found {other:?}"
                ),
            }),
        }
    }
}

/// A v1 answer (v1 doc §2.3): `status`, `data` or `error_code`/`error_message`.
#[derive(Clone, Debug, PartialEq)]
pub enum V1Response {
    /// `status = "success"` with the parsed `data`.
    Success(Json),
    /// `status = "error"`.
    Error {
        /// The `error_code` as sent.
        code: String,
        /// The `error_message`, empty when absent.
        message: String,
    },
}

impl V1Response {
    /// Decodes a v1 answer; `error_message` may be absent in v1.
    pub fn from_bundle(b: &Bundle) -> Result<V1Response, ResponseError> {
        match b.get_string(keys::STATUS)?.as_str() {
            "success" => Ok(V1Response::Success(b.get_json(keys::DATA)?)),
            "error" => Ok(V1Response::Error {
                code: b.get_string(keys::ERROR_CODE)?,
                message: b.opt_string(keys::ERROR_MESSAGE)?.unwrap_or_default(),
            }),
            other => Err(ResponseError {
                message: format!(
                    "key `status`: expected \"success\" or \"error\", found {other:?}"
                ),
            }),
        }
    }

    /// The answer Bundle a v1 Provider returns.
    pub fn to_bundle(&self) -> Bundle {
        match self {
            V1Response::Success(data) => Bundle::new()
                .with(keys::STATUS, Value::str("success"))
                .with(keys::DATA, Value::String(data.to_string())),
            V1Response::Error { code, message } => Bundle::new()
                .with(keys::STATUS, Value::str("error"))
                .with(keys::ERROR_CODE, Value::str(code))
                .with(keys::ERROR_MESSAGE, Value::str(message)),
        }
    }
}

/// States of a background operation (§4.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpState {
    /// Accepted, not started yet.
    Queued,
    /// Executing.
    Running,
    /// Finished; carries the `result` (terminal).
    Succeeded,
    /// Finished with an `error` object (terminal).
    Failed,
    /// Cancelled: no further effect will follow (terminal).
    Cancelled,
    /// Only as the answer of `cancel_operation`.
    CancellationRequested,
}

impl OpState {
    /// The state as it travels in `state`.
    pub fn as_str(self) -> &'static str {
        match self {
            OpState::Queued => "queued",
            OpState::Running => "running",
            OpState::Succeeded => "succeeded",
            OpState::Failed => "failed",
            OpState::Cancelled => "cancelled",
            OpState::CancellationRequested => "cancellation_requested",
        }
    }
    /// The state of this name; `None` for an unknown one.
    pub fn parse(s: &str) -> Option<OpState> {
        [
            OpState::Queued,
            OpState::Running,
            OpState::Succeeded,
            OpState::Failed,
            OpState::Cancelled,
            OpState::CancellationRequested,
        ]
        .into_iter()
        .find(|st| st.as_str() == s)
    }
    /// Whether the operation can no longer change (§4.4: only `cancelled` proves no further effect).
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            OpState::Succeeded | OpState::Failed | OpState::Cancelled
        )
    }
}

/// Describes what a found value was, for messages about JSON data.
pub fn json_type(v: &Json) -> &'static str {
    match v {
        Json::Null => "null",
        Json::Bool(_) => "boolean",
        Json::Number(_) => "number",
        Json::String(_) => "string",
        Json::Array(_) => "array",
        Json::Object(_) => "object",
    }
}

/// A FieldError for a JSON member (used by descriptor validation).
pub fn json_field_error(pointer: &str, expected: &'static str, found: &Json) -> FieldError {
    FieldError {
        key: pointer.to_string(),
        expected,
        found: Found::Type(json_type(found)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exec() -> V2Request {
        V2Request::ExecuteTool {
            common: Common {
                session_token: "t".into(),
                request_id: "123e4567-e89b-12d3-a456-426614174000".into(),
                deadline_at_ms: 1_000,
            },
            tool_name: "create_alert".into(),
            args: r#"{"symbol":"X","price":1}"#.into(),
            resume_token: None,
        }
    }

    #[test]
    fn request_round_trip() {
        let req = exec();
        let back = decode_v2_request(Method::ExecuteTool, Some(&req.to_bundle())).unwrap();
        assert_eq!(back, req);
    }

    #[test]
    fn long_protocol_version_is_invalid_not_v1() {
        let mut b = exec().to_bundle();
        b.insert(keys::PROTOCOL_VERSION, Value::Long(2));
        assert_eq!(dialect_of("execute_tool", Some(&b)), Dialect::V2);
        let err = decode_v2_request(Method::ExecuteTool, Some(&b)).unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidRequest);
        assert!(err.message.contains("expected int, found long"), "{err}");
    }

    #[test]
    fn missing_deadline_is_invalid_request() {
        let mut b = exec().to_bundle();
        b.remove(keys::DEADLINE_AT_MS);
        let err = decode_v2_request(Method::ExecuteTool, Some(&b)).unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidRequest);
        assert!(err.message.contains("deadline_at_ms"));
    }

    #[test]
    fn missing_session_is_negotiation_required() {
        let mut b = exec().to_bundle();
        b.remove(keys::SESSION_TOKEN);
        let err = decode_v2_request(Method::ExecuteTool, Some(&b)).unwrap_err();
        assert_eq!(err.code, ErrorCode::NegotiationRequired);
        b.insert(keys::SESSION_TOKEN, Value::Int(1));
        let err = decode_v2_request(Method::ExecuteTool, Some(&b)).unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidRequest);
    }

    #[test]
    fn uuid_is_strict() {
        assert!(is_uuid("123e4567-e89b-12d3-a456-426614174000"));
        assert!(is_uuid("123E4567-E89B-12D3-A456-426614174000"));
        assert!(!is_uuid("123e4567e89b12d3a456426614174000"));
        assert!(!is_uuid("{123e4567-e89b-12d3-a456-426614174000}"));
        assert!(!is_uuid("123e4567-e89b-12d3-a456-42661417400g"));
    }

    #[test]
    fn error_envelope_round_trip() {
        let mut e = ErrorEnvelope::new(ErrorCode::RateLimited, "slow down", true);
        e.request_id = Some("r".into());
        e.retry_after_ms = Some(500);
        e.details = Some(serde_json::json!({"limit": 4}));
        let back = Response::from_bundle(&e.to_bundle()).unwrap();
        assert_eq!(back, Response::Error(e));
    }

    #[test]
    fn bad_status_is_precise() {
        let b = Bundle::new().with("status", Value::str("ok"));
        let err = Response::from_bundle(&b).unwrap_err();
        assert!(err.message.contains("\"ok\""));
    }

    #[test]
    fn file_result_rejects_uppercase_digest() {
        let v = serde_json::json!({"kind":"file","media_type":"application/json","size_bytes":3,"sha256":"AB".repeat(32)});
        assert!(ExecResult::from_json(&v).is_err());
    }
}
