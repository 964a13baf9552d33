//! The scripted hostile Provider (sans-IO): a well-behaved CETP v2 Provider
//! by default, whose every answer a scenario may override, and which records
//! what the Consumer under test asked, when, with which token valid.
//!
//! The same engine answers in-process ([`super::port::HostilePort`]) and
//! over the probe wire (`host_provider` / `incoming_call` / `reply`).

pub use super::record::CallRecord;
use super::scenario::{ProviderSpec, Rule};
use cetp_proto::envelope::{keys, ErrorEnvelope, Response, V1Response};
use cetp_proto::{Bundle, ErrorCode, FdValue, PendingIntentValue, Value};
use serde_json::{json, Value as Json};
use std::collections::BTreeMap;

/// The hostile Provider's package, unless a device hosts it under another
/// ([`Hostile::hosted_as`]).
pub const PACKAGE: &str = "org.cetp.hostile";
/// The hostile Provider's authority (§2.1), unless a device hosts it under
/// another ([`Hostile::hosted_as`]).
pub const AUTHORITY: &str = "org.cetp.hostile.clawseed.tools";
/// The decoy Provider of a scenario with `provider.decoy` (§3.1 routing).
pub const DECOY_PACKAGE: &str = "org.cetp.decoy";
/// Authority of the decoy Provider.
pub const DECOY_AUTHORITY: &str = "org.cetp.decoy.clawseed.tools";
/// How acts name the decoy's authority.
pub const DECOY_PLACEHOLDER: &str = "$decoy";
/// Device time the scenarios start at (manual clock).
pub const T0: i64 = 1_800_000_000_000;

/// What a result descriptor holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FdSpec {
    /// Exactly these bytes, then EOF.
    Bytes(Vec<u8>),
    /// These bytes, then `fill` forever: a descriptor that never ends.
    Endless {
        /// Bytes read first.
        prefix: Vec<u8>,
        /// The byte repeated after them, without end.
        fill: u8,
    },
}

/// What the hostile Provider does with one call.
#[derive(Clone, Debug, PartialEq)]
pub enum Scripted {
    /// `call()` returns this Bundle. A `result_fd` or `resolution` in it is
    /// described by `fd` / `intent` (handle, resume token).
    Reply {
        /// The Bundle returned.
        bundle: Bundle,
        /// The handle and content of the descriptor it carries, if any (§4.5).
        fd: Option<(String, FdSpec)>,
        /// The handle and resume token of the PendingIntent it carries, if any (§4.3).
        intent: Option<(String, String)>,
    },
    /// `call()` throws.
    Throw {
        /// The Java exception class.
        class: String,
        /// Its message.
        message: String,
    },
    /// The call never returns within the Consumer's timeout.
    Timeout,
    /// The Provider's process dies during the call (dead Binder).
    Died,
}

/// A PendingIntent the Provider issued for a confirmation.
#[derive(Clone, Debug)]
pub struct IssuedIntent {
    /// The handle the device knows the PendingIntent by.
    pub handle: String,
    /// The `resume_token` issued with it.
    pub resume_token: String,
    /// Index in the call log of the call whose answer carried it.
    pub call_index: usize,
}

/// The hostile Provider engine: answers calls as its scenario scripts
/// them, and keeps the log a judge reads.
pub struct Hostile {
    spec: ProviderSpec,
    rules: Vec<Rule>,
    /// Matches per rule so far (for `nth`).
    tokens_issued: u32,
    current_token: Option<String>,
    expires_at_ms: Option<i64>,
    granted: Vec<String>,
    operations: BTreeMap<String, String>,
    handles: u32,
    /// Index of the act in progress (stamped on each call).
    pub act: usize,
    /// Consumer life in progress (bumped by every `reset` act).
    pub life: u32,
    /// Every call received, in order.
    pub log: Vec<CallRecord>,
    /// Every PendingIntent issued, in order.
    pub intents: Vec<IssuedIntent>,
    /// The authority and package it is hosted as: [`AUTHORITY`] and
    /// [`PACKAGE`], or what a device can host (`hello`'s `hosted_provider`).
    authority: String,
    package: String,
}

/// The tool list served when the scenario names none (§3.3, §3.4): a read
/// tool, a delete that always needs confirmation, an update that may run
/// in the background, and a second read (`export`).
pub fn default_tools() -> Json {
    json!([
        {"name": "get_value", "title": "Get value", "description": "Reads a value",
         "input_schema": {"type": "object"},
         "output_schema": {"type": "object", "properties": {"v": {"type": "integer"}}, "required": ["v"]},
         "scopes": ["things.read"],
         "annotations": {"effect": "read", "risk": "low", "confirmation": "never", "execution": "sync"}},
        {"name": "delete_thing", "title": "Delete thing", "description": "Deletes a thing",
         "input_schema": {"type": "object"},
         "output_schema": {"type": "object", "properties": {"deleted": {"type": "boolean"}}, "required": ["deleted"]},
         "scopes": ["things.write"],
         "annotations": {"effect": "delete", "risk": "moderate", "destructive": true, "confirmation": "always", "execution": "sync"}},
        {"name": "slow_job", "title": "Slow job", "description": "Runs in the background",
         "input_schema": {"type": "object"},
         "output_schema": {"type": "object", "properties": {"done": {"type": "boolean"}}, "required": ["done"]},
         "scopes": ["things.write"],
         "annotations": {"effect": "update", "risk": "low", "confirmation": "never", "execution": "sync_or_async", "idempotent": true}},
        {"name": "export", "title": "Export", "description": "Large export",
         "input_schema": {"type": "object"},
         "output_schema": {"type": "object", "properties": {"rows": {"type": "array"}}, "required": ["rows"]},
         "scopes": ["things.read"],
         "annotations": {"effect": "read", "risk": "low", "confirmation": "never", "execution": "sync"}}
    ])
}

/// The value a tool returns when the script says nothing.
fn default_value(tool: &str) -> Json {
    match tool {
        "get_value" => json!({"v": 1}),
        "delete_thing" => json!({"deleted": true}),
        "slow_job" => json!({"done": true}),
        "export" => json!({"rows": []}),
        _ => json!({}),
    }
}

/// RFC 3339 UTC of a Unix epoch time in ms.
pub fn rfc3339(ms: i64) -> String {
    chrono::DateTime::<chrono::Utc>::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
        .unwrap_or_default()
}

fn nested(depth: usize) -> Json {
    let mut v = json!(1);
    for _ in 0..depth {
        v = Json::Array(vec![v]);
    }
    v
}

impl Hostile {
    /// A Provider of shape `spec` scripted by `rules`, hosted at [`AUTHORITY`] in [`PACKAGE`].
    pub fn new(spec: ProviderSpec, rules: Vec<Rule>) -> Self {
        Hostile {
            spec,
            rules,
            tokens_issued: 0,
            current_token: None,
            expires_at_ms: None,
            granted: Vec::new(),
            operations: BTreeMap::new(),
            handles: 0,
            act: 0,
            life: 0,
            log: Vec::new(),
            intents: Vec::new(),
            authority: AUTHORITY.to_string(),
            package: PACKAGE.to_string(),
        }
    }

    /// Hosted as `authority` in `package` (a phone's probe can host only its
    /// own): the discovery meta-data, the default `authority_package` and
    /// the `provider_id` it answers follow.
    pub fn hosted_as(mut self, authority: &str, package: &str) -> Self {
        self.authority = authority.to_string();
        self.package = package.to_string();
        self
    }

    /// The authority it is hosted at.
    pub fn authority(&self) -> &str {
        &self.authority
    }

    /// The decoy of a scenario with `provider.decoy`: the default,
    /// well-behaved dual-stack Provider, unscripted, in its own package.
    pub fn decoy() -> Self {
        Hostile::new(ProviderSpec::default(), Vec::new()).hosted_as(DECOY_AUTHORITY, DECOY_PACKAGE)
    }

    /// The package it runs as.
    pub fn package(&self) -> &str {
        &self.package
    }

    /// Its shape, as the scenario gave it.
    pub fn spec(&self) -> &ProviderSpec {
        &self.spec
    }

    /// The discovery meta-data of the hostile service.
    pub fn meta(&self) -> BTreeMap<String, String> {
        let mut meta = BTreeMap::new();
        meta.insert(
            "com.clawseed.tools.authority".to_string(),
            self.authority.clone(),
        );
        match self.spec.manifest.as_str() {
            "v2_only" => {
                meta.insert("com.clawseed.tools.versions".into(), "2".into());
            }
            "v1_only" => {
                meta.insert("com.clawseed.tools.version".into(), "1".into());
            }
            _ => {
                meta.insert("com.clawseed.tools.version".into(), "1".into());
                meta.insert("com.clawseed.tools.versions".into(), "1,2".into());
            }
        }
        meta
    }

    /// The package the ContentProvider behind the authority belongs to.
    pub fn authority_package(&self) -> String {
        self.spec
            .authority_package
            .clone()
            .unwrap_or_else(|| self.package.clone())
    }

    fn next_handle(&mut self, kind: &str) -> String {
        self.handles += 1;
        format!("{kind}-{}", self.handles)
    }

    /// The tools it lists. The default tools are listed as a well-behaved
    /// Provider would (§3.4): a `sync_or_async` tool says `sync` to a
    /// session without async_operations, so that a Consumer that offers
    /// fewer capabilities (a legal choice, §2.3) still gets a valid list.
    /// Scripted `tools` are sent as written.
    fn tools(&self) -> Json {
        if let Some(t) = &self.spec.tools {
            return t.clone();
        }
        let mut tools = default_tools();
        if !self.granted.iter().any(|g| g == "async_operations") {
            for t in tools.as_array_mut().into_iter().flatten() {
                if t["annotations"]["execution"] == "sync_or_async" {
                    t["annotations"]["execution"] = json!("sync");
                }
            }
        }
        tools
    }

    /// Answers one call made at device time `now_ms`.
    pub fn on_call(&mut self, method: &str, extras: &Bundle, now_ms: i64) -> Scripted {
        if self
            .expires_at_ms
            .is_some_and(|t| now_ms >= t && self.current_token.is_some())
        {
            // The session expired: the Provider forgets it (§2.2).
            self.current_token = None;
        }
        let mut rec = CallRecord {
            act: self.act,
            life: self.life,
            method: method.to_string(),
            extras: extras.clone(),
            now_ms,
            valid_token: self.current_token.clone(),
            granted: self.granted.clone(),
            answered: "default",
            error_code: None,
        };
        let index = self.log.len();
        let scripted = self.scripted_reply(&rec, now_ms, index);
        let out = match scripted {
            Some(s) => {
                rec.answered = "scripted";
                s
            }
            None => self.default_reply(&rec, now_ms),
        };
        if let Scripted::Reply { bundle, .. } = &out {
            if let Some(Value::String(code)) = bundle.get(keys::ERROR_CODE) {
                rec.error_code = Some(code.clone());
                if code == ErrorCode::NegotiationRequired.as_str() {
                    // Whatever the script says, a session answered so is over.
                    self.current_token = None;
                }
            }
        }
        rec.answered = match &out {
            Scripted::Timeout => "timeout",
            Scripted::Died => "died",
            Scripted::Throw { .. } => "threw",
            Scripted::Reply { .. } => rec.answered,
        };
        self.log.push(rec);
        out
    }

    fn scripted_reply(&mut self, rec: &CallRecord, now_ms: i64, index: usize) -> Option<Scripted> {
        let mut chosen = None;
        for rule in &self.rules {
            if !rule.when.matches(rec) {
                continue;
            }
            if let Some(m) = &rule.when.after {
                if !self.log.iter().any(|r| r.method == *m) {
                    continue;
                }
            }
            let count = 1 + self.log.iter().filter(|r| rule.when.matches(r)).count() as u32;
            if rule.when.nth.is_some_and(|n| n != count) {
                continue;
            }
            if rule.when.upto.is_some_and(|n| count > n) {
                continue;
            }
            chosen = Some(rule.reply.clone());
            break;
        }
        chosen.map(|reply| self.build(&reply, rec, now_ms, index))
    }

    fn echo(rec: &CallRecord) -> Option<String> {
        rec.str(keys::REQUEST_ID)
    }

    fn ok(rec: &CallRecord, data: Json) -> Scripted {
        plain(Response::success(Self::echo(rec).as_deref(), data).to_bundle())
    }

    fn error(rec: &CallRecord, code: &str, retryable: bool) -> ErrorEnvelope {
        ErrorEnvelope {
            code: code.to_string(),
            message: "scripted error".into(),
            retryable,
            protocol_version: Some(2),
            request_id: Self::echo(rec),
            details: None,
            retry_after_ms: None,
            resolution: None,
            resume_token: None,
        }
    }

    fn negotiate_data(&mut self, rec: &CallRecord, now_ms: i64, overrides: &Json) -> Json {
        let offered: Vec<String> = match rec.extras.get(keys::CONSUMER_CAPABILITIES) {
            Some(Value::String(s)) => serde_json::from_str(s).unwrap_or_default(),
            _ => Vec::new(),
        };
        let caps = self.spec.caps.clone().unwrap_or_else(|| {
            vec![
                "async_operations".into(),
                "cancellation".into(),
                "large_results".into(),
            ]
        });
        let granted: Vec<String> = caps.into_iter().filter(|c| offered.contains(c)).collect();
        self.tokens_issued += 1;
        let token = format!("tok-{}", self.tokens_issued);
        let mut data = json!({
            "selected_version": 2, "provider_id": self.package, "provider_name": "Hostile",
            "session_token": token, "capabilities": granted,
            "limits": {"max_request_bytes": 65536, "max_inline_result_bytes": 262144,
                       "max_concurrent_requests": 4, "idempotency_window_seconds": 86400}
        });
        self.expires_at_ms = None;
        if let Some(o) = overrides.as_object() {
            for (k, v) in o {
                if k == "expires_in_ms" {
                    let at = now_ms.saturating_add(v.as_i64().unwrap_or(0));
                    self.expires_at_ms = Some(at);
                    data["expires_at"] = json!(rfc3339(at));
                } else {
                    data[k] = v.clone();
                }
            }
        }
        self.current_token = data["session_token"].as_str().map(str::to_string);
        self.granted = data["capabilities"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|c| c.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        data
    }

    fn default_reply(&mut self, rec: &CallRecord, now_ms: i64) -> Scripted {
        if rec.method == "negotiate" {
            if self.spec.manifest == "v1_only" {
                return plain(
                    V1Response::Error {
                        code: "TOOL_NOT_FOUND".into(),
                        message: "no such method".into(),
                    }
                    .to_bundle(),
                );
            }
            let data = self.negotiate_data(rec, now_ms, &Json::Null);
            return plain(
                Response::Success {
                    protocol_version: None,
                    request_id: None,
                    data,
                }
                .to_bundle(),
            );
        }
        if rec.is_v1() {
            return match rec.method.as_str() {
                "list_tools" => plain(
                    V1Response::Success(
                        json!({"tools": [{"name": "get_value", "description": "v1 read"}]}),
                    )
                    .to_bundle(),
                ),
                "execute_tool" => plain(V1Response::Success(json!({"v": 1})).to_bundle()),
                _ => plain(
                    V1Response::Error {
                        code: "TOOL_NOT_FOUND".into(),
                        message: "no such method".into(),
                    }
                    .to_bundle(),
                ),
            };
        }
        let token = rec.str(keys::SESSION_TOKEN);
        if token.is_none() || token != self.current_token {
            return plain(Self::error(rec, "NEGOTIATION_REQUIRED", true).to_bundle());
        }
        match rec.method.as_str() {
            "get_provider_info" => Self::ok(
                rec,
                json!({"provider_id": self.package, "provider_name": "Hostile", "description": "A scripted Provider",
                    "scopes": [
                        {"name": "things.read", "access": "read", "sensitivity": "personal"},
                        {"name": "things.write", "access": "write", "sensitivity": "personal"}]}),
            ),
            "list_tools" => Self::ok(
                rec,
                json!({"revision": self.spec.revision.clone().unwrap_or_else(|| "r1".into()),
                       "tools": self.tools()}),
            ),
            "execute_tool" => {
                let tool = rec.tool().unwrap_or_default();
                Self::ok(
                    rec,
                    json!({"kind": "inline", "value": default_value(&tool)}),
                )
            }
            "get_operation" => {
                let op = rec.str(keys::OPERATION_ID).unwrap_or_default();
                let tool = self.operations.get(&op).cloned().unwrap_or_default();
                Self::ok(
                    rec,
                    json!({"operation_id": op, "state": "succeeded",
                           "result": {"kind": "inline", "value": default_value(&tool)}}),
                )
            }
            "cancel_operation" => {
                let op = rec.str(keys::OPERATION_ID).unwrap_or_default();
                Self::ok(
                    rec,
                    json!({"operation_id": op, "state": "cancellation_requested"}),
                )
            }
            _ => plain(Self::error(rec, "METHOD_NOT_FOUND", false).to_bundle()),
        }
    }

    /// Builds a scripted reply (format in `vectors/consumer/README.md`).
    fn build(&mut self, reply: &Json, rec: &CallRecord, now_ms: i64, index: usize) -> Scripted {
        let get = |k: &str| reply.get(k);
        if get("timeout").is_some() {
            return Scripted::Timeout;
        }
        if get("disconnect").is_some() {
            return Scripted::Died;
        }
        if let Some(class) = get("throw").and_then(Json::as_str) {
            return Scripted::Throw {
                class: class.to_string(),
                message: "scripted exception".into(),
            };
        }
        if let Some(over) = get("negotiate") {
            let data = self.negotiate_data(rec, now_ms, over);
            return plain(
                Response::Success {
                    protocol_version: None,
                    request_id: None,
                    data,
                }
                .to_bundle(),
            );
        }
        if let Some(v) = get("v1") {
            return plain(V1Response::Success(v.clone()).to_bundle());
        }
        if get("negotiation_required").is_some() {
            return plain(Self::error(rec, "NEGOTIATION_REQUIRED", true).to_bundle());
        }
        if let Some(code) = get("error").and_then(Json::as_str) {
            return self.scripted_error(reply, rec, code);
        }
        if let Some(n) = get("needs_user") {
            return self.needs_user(n, rec, index);
        }
        if let Some(v) = get("success") {
            return Self::ok(rec, json!({"kind": "inline", "value": v}));
        }
        if let Some(d) = get("deep_success").and_then(Json::as_u64) {
            let value = json!({"v": 1, "deep": nested(d as usize)});
            return Self::ok(rec, json!({"kind": "inline", "value": value}));
        }
        if let Some(d) = get("data") {
            return Self::ok(rec, d.clone());
        }
        if let Some(a) = get("accepted") {
            return self.accepted(a, rec);
        }
        if let Some(o) = get("operation") {
            let mut data = o.clone();
            data["operation_id"] = json!(rec.str(keys::OPERATION_ID).unwrap_or_default());
            return Self::ok(rec, data);
        }
        if let Some(t) = get("tools") {
            let revision = get("revision").and_then(Json::as_str).unwrap_or("r1");
            return Self::ok(rec, json!({"revision": revision, "tools": t}));
        }
        if let Some(f) = get("file") {
            return self.file(rec, f);
        }
        // An unknown reply form answers by default (a data test refuses
        // such scenarios).
        self.default_reply(rec, now_ms)
    }

    /// `{"error": CODE, …}`: an error answer, optionally with a descriptor.
    fn scripted_error(&mut self, reply: &Json, rec: &CallRecord, code: &str) -> Scripted {
        let mut e = Self::error(
            rec,
            code,
            reply
                .get("retryable")
                .and_then(Json::as_bool)
                .unwrap_or(false),
        );
        if let Some(m) = reply.get("message").and_then(Json::as_str) {
            e.message = m.to_string();
        }
        e.retry_after_ms = reply.get("retry_after_ms").and_then(Json::as_i64);
        e.details = reply.get("details").cloned();
        let mut bundle = e.to_bundle();
        let fd = reply.get("result_fd").and_then(Json::as_str).map(|text| {
            let h = self.next_handle("fd");
            bundle.insert(keys::RESULT_FD, Value::Fd(FdValue { handle: h.clone() }));
            (h, FdSpec::Bytes(text.as_bytes().to_vec()))
        });
        Scripted::Reply {
            bundle,
            fd,
            intent: None,
        }
    }

    /// `{"needs_user": …}`: a confirmation with an immutable PendingIntent
    /// of the Provider's own activity and a resume token.
    fn needs_user(&mut self, n: &Json, rec: &CallRecord, index: usize) -> Scripted {
        let code = n
            .get("code")
            .and_then(Json::as_str)
            .unwrap_or("USER_ACTION_REQUIRED");
        let token = n
            .get("resume_token")
            .and_then(Json::as_str)
            .unwrap_or("rt-1")
            .to_string();
        let handle = self.next_handle("pi");
        let mut e = Self::error(rec, code, false);
        e.message = "confirm in the Provider's screen".into();
        e.resolution = Some(PendingIntentValue {
            handle: handle.clone(),
            creator_package: Some(self.package.clone()),
            creator_uid: Some(10_300),
            immutable: Some(true),
            activity: Some(true),
        });
        e.resume_token = Some(token.clone());
        self.intents.push(IssuedIntent {
            handle: handle.clone(),
            resume_token: token.clone(),
            call_index: index,
        });
        Scripted::Reply {
            bundle: e.to_bundle(),
            fd: None,
            intent: Some((handle, token)),
        }
    }

    /// `{"accepted": …}`: a background operation, remembered for its tool.
    fn accepted(&mut self, a: &Json, rec: &CallRecord) -> Scripted {
        let op = a
            .get("operation_id")
            .and_then(Json::as_str)
            .unwrap_or("op-1")
            .to_string();
        self.operations
            .insert(op.clone(), rec.tool().unwrap_or_default());
        plain(
            Response::Accepted {
                protocol_version: Some(2),
                request_id: Self::echo(rec),
                data: a.clone(),
            }
            .to_bundle(),
        )
    }

    fn file(&mut self, rec: &CallRecord, f: &Json) -> Scripted {
        let content = match f.get("content_text").and_then(Json::as_str) {
            Some(t) => t.as_bytes().to_vec(),
            None => f
                .get("content")
                .cloned()
                .unwrap_or_else(|| json!({"rows": []}))
                .to_string()
                .into_bytes(),
        };
        let size = f
            .get("size_bytes")
            .and_then(Json::as_u64)
            .unwrap_or(content.len() as u64);
        let sha = f
            .get("sha256")
            .and_then(Json::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| cetp_proto::canonical::sha256_hex(&content));
        let extra = f.get("extra_bytes").and_then(Json::as_u64).unwrap_or(0);
        let spec = if f.get("endless").and_then(Json::as_bool) == Some(true) {
            FdSpec::Endless {
                prefix: content,
                fill: b' ',
            }
        } else {
            let mut bytes = content;
            bytes.extend(std::iter::repeat_n(b' ', extra as usize));
            FdSpec::Bytes(bytes)
        };
        let media = f
            .get("media_type")
            .and_then(Json::as_str)
            .unwrap_or("application/json");
        let handle = self.next_handle("fd");
        let mut bundle = Response::success(
            Self::echo(rec).as_deref(),
            json!({"kind": "file", "media_type": media, "size_bytes": size, "sha256": sha}),
        )
        .to_bundle();
        bundle.insert(
            keys::RESULT_FD,
            Value::Fd(FdValue {
                handle: handle.clone(),
            }),
        );
        Scripted::Reply {
            bundle,
            fd: Some((handle, spec)),
            intent: None,
        }
    }
}

fn plain(bundle: Bundle) -> Scripted {
    Scripted::Reply {
        bundle,
        fd: None,
        intent: None,
    }
}
