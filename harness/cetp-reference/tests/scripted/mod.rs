//! A small scripted Provider for Consumer and device tests: well-behaved by
//! default (negotiate, provider info, tool list, session tokens that die on
//! restart), with every answer overridable by the test, and a record of what
//! it was asked.

// Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

use cetp_proto::device::{CallAnswer, DeviceError, FdRead};
use cetp_proto::envelope::{keys, ErrorEnvelope, Response};
use cetp_proto::provider::{
    Attachment, CallerIdentity, Decision, FdSource, IntentTarget, ProviderCall, Reply,
    ResolveOutcome, ServiceManifest,
};
use cetp_proto::{Bundle, ErrorCode, FdValue, PendingIntentValue, Value};
use cetp_reference::app::ProviderApp;
use cetp_reference::device::{DeviceClock, DeviceConnection, LocalDevice};
use cetp_reference::port::ConsumerPort;
use serde_json::{json, Value as Json};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

pub const PACKAGE: &str = "com.hostile.app";
pub const AUTHORITY: &str = "com.hostile.app.clawseed.tools";
pub const T0: i64 = 1_800_000_000_000;

/// One call the scripted Provider received.
#[derive(Clone, Debug)]
pub struct Seen {
    pub caller: CallerIdentity,
    pub now_ms: i64,
    pub method: String,
    pub extras: Bundle,
}

impl Seen {
    pub fn str(&self, key: &str) -> Option<String> {
        self.extras.opt_string(key).ok().flatten()
    }
    pub fn request_id(&self) -> Option<String> {
        self.str(keys::REQUEST_ID)
    }
    pub fn is_v2(&self) -> bool {
        self.method == "negotiate" || self.extras.contains(keys::PROTOCOL_VERSION)
    }
}

type Handler = Box<dyn FnMut(&Seen) -> Option<Reply> + Send>;

pub struct Scripted {
    pub package: String,
    pub authority: String,
    pub meta: BTreeMap<String, String>,
    pub authority_package: Option<String>,
    pub caps: Vec<String>,
    pub tools: Json,
    handler: Mutex<Handler>,
    pub seen: Mutex<Vec<Seen>>,
    pub resolved: Mutex<Vec<(CallerIdentity, IntentTarget, Decision)>>,
    pub restarts: AtomicU32,
    generation: AtomicU32,
}

pub fn default_tools() -> Json {
    json!([
        {"name": "get_value", "description": "Reads a value",
         "input_schema": {"type": "object"},
         "output_schema": {"type": "object", "properties": {"v": {"type": "integer"}}, "required": ["v"]},
         "scopes": ["things.read"],
         "annotations": {"effect": "read", "risk": "low", "confirmation": "never", "execution": "sync"}},
        {"name": "delete_thing", "description": "Deletes a thing",
         "input_schema": {"type": "object"},
         "output_schema": {"type": "object", "properties": {"deleted": {"type": "boolean"}}, "required": ["deleted"]},
         "scopes": ["things.write"],
         "annotations": {"effect": "delete", "risk": "moderate", "destructive": true, "confirmation": "always", "execution": "sync"}},
        {"name": "slow_job", "description": "Runs in the background",
         "input_schema": {"type": "object"},
         "output_schema": {"type": "object", "properties": {"done": {"type": "boolean"}}, "required": ["done"]},
         "scopes": ["things.write"],
         "annotations": {"effect": "update", "risk": "low", "confirmation": "never", "execution": "sync_or_async", "idempotent": true}},
        {"name": "export", "description": "Large export",
         "input_schema": {"type": "object"},
         "output_schema": {"type": "object", "properties": {"rows": {"type": "array"}}, "required": ["rows"]},
         "scopes": ["things.read"],
         "annotations": {"effect": "read", "risk": "low", "confirmation": "never", "execution": "sync"}}
    ])
}

impl Scripted {
    /// A dual-stack Provider (`version=1`, `versions=1,2`) granting every
    /// capability, whose answers `handler` may override (None: default).
    pub fn new(handler: impl FnMut(&Seen) -> Option<Reply> + Send + 'static) -> Self {
        Scripted {
            package: PACKAGE.into(),
            authority: AUTHORITY.into(),
            meta: [
                ("com.clawseed.tools.authority", AUTHORITY),
                ("com.clawseed.tools.version", "1"),
                ("com.clawseed.tools.versions", "1,2"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
            authority_package: Some(PACKAGE.into()),
            caps: vec![
                "async_operations".into(),
                "cancellation".into(),
                "large_results".into(),
            ],
            tools: default_tools(),
            handler: Mutex::new(Box::new(handler)),
            seen: Mutex::new(Vec::new()),
            resolved: Mutex::new(Vec::new()),
            restarts: AtomicU32::new(0),
            generation: AtomicU32::new(1),
        }
    }

    pub fn with_meta(mut self, key: &str, value: Option<&str>) -> Self {
        match value {
            Some(v) => self.meta.insert(key.to_string(), v.to_string()),
            None => self.meta.remove(key),
        };
        self
    }

    pub fn with_caps(mut self, caps: &[&str]) -> Self {
        self.caps = caps.iter().map(|c| c.to_string()).collect();
        self
    }

    pub fn with_tools(mut self, tools: Json) -> Self {
        self.tools = tools;
        self
    }

    pub fn with_authority_package(mut self, p: Option<&str>) -> Self {
        self.authority_package = p.map(str::to_string);
        self
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    pub fn seen_method(&self, method: &str) -> Vec<Seen> {
        self.seen()
            .into_iter()
            .filter(|s| s.method == method)
            .collect()
    }

    pub fn token(&self) -> String {
        format!("tok-{}", self.generation.load(Ordering::SeqCst))
    }

    fn default_answer(&self, seen: &Seen) -> Reply {
        if seen.method == "negotiate" {
            let offered: Vec<String> = seen
                .extras
                .get_json(keys::CONSUMER_CAPABILITIES)
                .ok()
                .and_then(|j| serde_json::from_value(j).ok())
                .unwrap_or_default();
            let granted: Vec<&String> = self.caps.iter().filter(|c| offered.contains(c)).collect();
            return Reply::bundle(
                Response::Success {
                    protocol_version: None,
                    request_id: None,
                    data: json!({
                        "selected_version": 2, "provider_id": self.package, "provider_name": "Hostile",
                        "session_token": self.token(), "capabilities": granted,
                        "limits": {"max_request_bytes": 65536, "max_inline_result_bytes": 262144,
                                   "max_concurrent_requests": 4, "idempotency_window_seconds": 86400}
                    }),
                }
                .to_bundle(),
            );
        }
        match seen.method.as_str() {
            "get_provider_info" => ok(
                seen,
                json!({"provider_id": self.package, "provider_name": "Hostile", "description": "d",
                    "scopes": [
                        {"name": "things.read", "access": "read", "sensitivity": "personal"},
                        {"name": "things.write", "access": "write", "sensitivity": "personal"}]}),
            ),
            "list_tools" if seen.is_v2() => {
                ok(seen, json!({"revision": "r1", "tools": self.tools.clone()}))
            }
            "list_tools" => Reply::bundle(
                cetp_proto::envelope::V1Response::Success(
                    json!({"tools": [{"name": "get_value", "description": "v1 read"}]}),
                )
                .to_bundle(),
            ),
            "execute_tool" if !seen.is_v2() => Reply::bundle(
                cetp_proto::envelope::V1Response::Success(json!({"v": 1})).to_bundle(),
            ),
            _ => err(seen, ErrorCode::MethodNotFound, false),
        }
    }
}

impl ProviderApp for Scripted {
    fn manifests(&self) -> Vec<ServiceManifest> {
        vec![ServiceManifest {
            package: self.package.clone(),
            service: format!("{}/.cetp.ToolProviderService", self.package),
            exported: true,
            permission: None,
            meta: self.meta.clone(),
            authority_package: self.authority_package.clone(),
            signing_cert_sha256: Vec::new(),
            meta_types: None,
        }]
    }

    fn authority(&self) -> String {
        self.authority.clone()
    }

    fn call(&self, caller: &CallerIdentity, now_ms: i64, call: &ProviderCall) -> Reply {
        let seen = Seen {
            caller: caller.clone(),
            now_ms,
            method: call.method.clone(),
            extras: call.extras.clone().unwrap_or_default(),
        };
        self.seen.lock().unwrap().push(seen.clone());
        // Sessions die with the process, whatever the script says.
        if seen.is_v2()
            && seen.method != "negotiate"
            && seen.str(keys::SESSION_TOKEN) != Some(self.token())
        {
            return err(&seen, ErrorCode::NegotiationRequired, true);
        }
        let scripted = (self.handler.lock().unwrap_or_else(|e| e.into_inner()))(&seen);
        scripted.unwrap_or_else(|| self.default_answer(&seen))
    }

    fn resolve(
        &self,
        launcher: &CallerIdentity,
        target: &IntentTarget,
        decision: Decision,
        _now_ms: i64,
    ) -> ResolveOutcome {
        self.resolved
            .lock()
            .unwrap()
            .push((launcher.clone(), target.clone(), decision));
        ResolveOutcome {
            launched: true,
            decision_applied: decision != Decision::Dismiss,
            result_code: if decision == Decision::Approve { -1 } else { 0 },
            launched_package: None,
        }
    }

    fn restart(&self) {
        self.restarts.fetch_add(1, Ordering::SeqCst);
        self.generation.fetch_add(1, Ordering::SeqCst);
    }
}

// ---------------------------------------------------------------- answers

fn echo(seen: &Seen) -> Option<String> {
    seen.request_id()
}

pub fn ok(seen: &Seen, data: Json) -> Reply {
    Reply::bundle(Response::success(echo(seen).as_deref(), data).to_bundle())
}

pub fn inline(seen: &Seen, value: Json) -> Reply {
    ok(seen, json!({"kind": "inline", "value": value}))
}

pub fn error_envelope(seen: &Seen, code: ErrorCode, retryable: bool) -> ErrorEnvelope {
    let mut e = ErrorEnvelope::new(code, "scripted error", retryable);
    e.request_id = echo(seen);
    e
}

pub fn err(seen: &Seen, code: ErrorCode, retryable: bool) -> Reply {
    Reply::bundle(error_envelope(seen, code, retryable).to_bundle())
}

pub fn accepted(seen: &Seen, op: &str, poll_after_ms: u64) -> Reply {
    Reply::bundle(
        Response::Accepted {
            protocol_version: Some(2),
            request_id: echo(seen),
            data: json!({"operation_id": op, "poll_after_ms": poll_after_ms}),
        }
        .to_bundle(),
    )
}

/// A kind=file result: `declared_size` and `declared_sha` as claimed, `src`
/// as the descriptor really holds.
pub fn file(seen: &Seen, src: FdSource, declared_size: u64, declared_sha: &str) -> Reply {
    let mut b = Response::success(
        echo(seen).as_deref(),
        json!({"kind": "file", "media_type": "application/json",
               "size_bytes": declared_size, "sha256": declared_sha}),
    )
    .to_bundle();
    b.insert(
        keys::RESULT_FD,
        Value::Fd(FdValue {
            handle: "p-fd".into(),
        }),
    );
    Reply::Result {
        bundle: Some(b),
        attachments: vec![("p-fd".into(), Attachment::File(src))],
    }
}

pub fn confirmation_target(immutable: bool, activity: bool, creator: &str) -> IntentTarget {
    IntentTarget {
        creator_package: creator.to_string(),
        creator_uid: 10500,
        immutable,
        activity,
        component: Some(format!("{creator}/.ConfirmActivity")),
        confirmation: "c-1".into(),
    }
}

/// USER_ACTION_REQUIRED (or AUTH_REQUIRED) with a resolution and token.
pub fn needs_action(seen: &Seen, code: ErrorCode, target: IntentTarget, token: &str) -> Reply {
    let mut e = error_envelope(seen, code, false);
    e.resolution = Some(PendingIntentValue {
        handle: "p-pi".into(),
        creator_package: None,
        creator_uid: None,
        immutable: None,
        activity: None,
    });
    e.resume_token = Some(token.to_string());
    Reply::Result {
        bundle: Some(e.to_bundle()),
        attachments: vec![("p-pi".into(), Attachment::Intent(target))],
    }
}

// ---------------------------------------------------------------- setup

pub fn device_with(app: Arc<dyn ProviderApp>) -> LocalDevice {
    LocalDevice::new(app, DeviceClock::manual(T0))
}

type CallHook<'a> =
    dyn FnMut(&str, Result<CallAnswer, DeviceError>) -> Result<CallAnswer, DeviceError> + 'a;

/// A port that lets a test rewrite what the device answered to a call.
pub struct HookPort<'a> {
    pub inner: &'a mut DeviceConnection,
    pub hook: Box<CallHook<'a>>,
    pub timeouts: Vec<u64>,
    /// Every call sent, with its extras.
    pub sent: Vec<(String, Bundle)>,
}

impl<'a> HookPort<'a> {
    /// A port that changes nothing and records what was sent.
    pub fn recording(inner: &'a mut DeviceConnection) -> Self {
        HookPort::new(inner, |_, answer| answer)
    }

    pub fn sent_method(&self, method: &str) -> Vec<Bundle> {
        self.sent
            .iter()
            .filter(|(m, _)| m == method)
            .map(|(_, b)| b.clone())
            .collect()
    }

    pub fn new(
        inner: &'a mut DeviceConnection,
        hook: impl FnMut(&str, Result<CallAnswer, DeviceError>) -> Result<CallAnswer, DeviceError> + 'a,
    ) -> Self {
        HookPort {
            inner,
            hook: Box::new(hook),
            timeouts: Vec::new(),
            sent: Vec::new(),
        }
    }
}

impl ConsumerPort for HookPort<'_> {
    fn now_ms(&mut self) -> i64 {
        self.inner.device().now_ms()
    }
    fn sleep_ms(&mut self, ms: u64) {
        self.inner.device().clock().sleep(ms)
    }
    fn discover(&mut self) -> Result<Vec<ServiceManifest>, DeviceError> {
        Ok(self.inner.device().discover())
    }
    fn call(
        &mut self,
        authority: &str,
        method: &str,
        arg: Option<&str>,
        extras: Option<&Bundle>,
        timeout_ms: u64,
    ) -> Result<CallAnswer, DeviceError> {
        self.timeouts.push(timeout_ms);
        self.sent
            .push((method.to_string(), extras.cloned().unwrap_or_default()));
        let r = self.inner.call(authority, method, arg, extras, timeout_ms);
        (self.hook)(method, r)
    }
    fn read_fd(&mut self, handle: &str, max_bytes: u64) -> Result<FdRead, DeviceError> {
        self.inner.read_fd(handle, max_bytes)
    }
    fn close_fd(&mut self, handle: &str) -> Result<(), DeviceError> {
        self.inner.close_fd(handle)
    }
    fn resolve(&mut self, handle: &str, decision: Decision) -> Result<ResolveOutcome, DeviceError> {
        self.inner.resolve(handle, decision)
    }
}
