//! The payloads of `send` and `recv` records: each device op's request and
//! answer as JSON.
//!
//! Requests are the probe-wire op's own parameters, encoded by cetp-wire
//! ([`OpRequest::params`]), so a journaled request reads as the frame that
//! carried it. Answers reuse cetp-wire's codecs where format 1 has the same
//! shape (Bundles, manifests, resolve outcomes); where it differs (a call's
//! answer holds no timing, a descriptor read holds its bytes, members the
//! wire omits when unknown are written `null`) the difference is format 1's
//! and is kept here, in one place.

use super::record::obj;
use base64::Engine;
use cetp_proto::device::{CallAnswer, FdRead};
use cetp_proto::provider::{Decision, ResolveOutcome, ServiceManifest};
use cetp_proto::Bundle;
use cetp_vectors::device::HelloInfo;
use cetp_wire::bundle::opt_bundle_to_json;
use cetp_wire::json::Json;
use cetp_wire::ops::{manifest_from_json, manifest_to_json};
use cetp_wire::{
    CallParams, OkPayload, OpRequest, ReadFdParams, Request, ResolveOk, ResolveParams,
};

fn params(op: OpRequest) -> Json {
    Json::Object(op.params())
}

fn base64() -> &'static base64::engine::GeneralPurpose {
    &base64::engine::general_purpose::STANDARD
}

/// `hello` and `discover` take no parameters.
pub fn empty() -> Json {
    obj([])
}

/// The request of a `call` op: `ContentResolver.call` on `authority`.
pub fn call_request(
    authority: &str,
    method: &str,
    arg: Option<&str>,
    extras: Option<&Bundle>,
    timeout_ms: u64,
) -> Json {
    params(OpRequest::Call(CallParams {
        authority: authority.into(),
        method: method.into(),
        arg: arg.map(str::to_string),
        extras: extras.cloned(),
        timeout_ms,
    }))
}

/// A journaled `call` request, decoded by the probe wire's rules.
pub fn call_of(req: &Json) -> Result<CallParams, String> {
    let request = Request {
        id: 0,
        op: "call".into(),
        params: req.as_object().cloned().unwrap_or_default(),
    };
    match OpRequest::decode(&request) {
        Ok(OpRequest::Call(p)) => Ok(p),
        Ok(other) => Err(format!("a `{}` request as a call", other.op())),
        Err(e) => Err(e.to_string()),
    }
}

/// The journaled answer of a `call`: its result Bundle, or what it threw.
pub fn call_answer(a: &CallAnswer) -> Json {
    match a {
        CallAnswer::Result(b) => obj([("result", opt_bundle_to_json(b.as_ref()))]),
        CallAnswer::Threw { class, message } => obj([(
            "threw",
            obj([
                ("class", class.as_str().into()),
                ("message", message.as_str().into()),
            ]),
        )]),
    }
}

/// A `call` answer back from its journaled form.
pub fn call_answer_of(v: &Json) -> Result<CallAnswer, String> {
    if let Some(t) = v.get("threw") {
        let f = |k: &str| {
            t.get(k)
                .and_then(Json::as_str)
                .unwrap_or_default()
                .to_string()
        };
        return Ok(CallAnswer::Threw {
            class: f("class"),
            message: f("message"),
        });
    }
    match v.get("result").unwrap_or(&Json::Null) {
        Json::Null => Ok(CallAnswer::Result(None)),
        b => cetp_wire::bundle_from_json(b, &cetp_wire::Path::ROOT)
            .map(|b| CallAnswer::Result(Some(b)))
            .map_err(|e| e.to_string()),
    }
}

/// The request of a `read_fd` op.
pub fn read_fd_request(handle: &str, max_bytes: u64) -> Json {
    params(OpRequest::ReadFd(ReadFdParams {
        handle: handle.into(),
        max_bytes,
    }))
}

/// Format 1 keeps the bytes read (base64), where the wire sends them in
/// chunks ahead of the answer.
pub fn fd_read(r: &FdRead) -> Json {
    obj([
        ("bytes", base64().encode(&r.bytes).into()),
        ("eof", r.eof.into()),
        ("error", Json::from(r.error.clone())),
        ("writable", Json::from(r.writable)),
    ])
}

/// A `read_fd` answer back from its journaled form (bytes in base64).
pub fn fd_read_of(v: &Json) -> Result<FdRead, String> {
    let bytes = v
        .get("bytes")
        .and_then(Json::as_str)
        .and_then(|b| base64().decode(b).ok())
        .ok_or("a journaled read_fd answer has no bytes")?;
    Ok(FdRead {
        bytes,
        eof: v.get("eof").and_then(Json::as_bool).unwrap_or(false),
        error: v.get("error").and_then(Json::as_str).map(str::to_string),
        writable: v.get("writable").and_then(Json::as_bool),
    })
}

/// The request of a `close_fd` op.
pub fn close_fd_request(handle: &str) -> Json {
    params(OpRequest::CloseFd {
        handle: handle.into(),
    })
}

/// The request of a `restart_provider` op.
pub fn restart_request(package: &str) -> Json {
    params(OpRequest::RestartProvider {
        package: package.into(),
    })
}

/// Format 1 writes `ui` always (`null` when absent) and keeps it as the
/// profile gave it, object or not.
pub fn resolve_request(
    handle: &str,
    decision: Decision,
    ui: Option<&serde_json::Value>,
    timeout_ms: u64,
) -> Json {
    let mut m = OpRequest::Resolve(ResolveParams {
        handle: handle.into(),
        decision,
        timeout_ms,
        ui: None,
    })
    .params();
    m.insert("ui".into(), ui.cloned().map_or(Json::Null, Json::from));
    Json::Object(m)
}

/// Format 1 writes `launched_package` always (`null` when unknown).
pub fn resolve_outcome(o: ResolveOutcome) -> Json {
    let mut m = ResolveOk {
        launched: o.launched,
        decision_applied: o.decision_applied,
        result_code: o.result_code,
        launched_package: o.launched_package,
    }
    .to_ok();
    m.entry("launched_package".into()).or_insert(Json::Null);
    Json::Object(m)
}

/// A `resolve` answer back from its journaled form.
pub fn resolve_outcome_of(v: &Json) -> Result<ResolveOutcome, String> {
    let m = v
        .as_object()
        .ok_or("a resolve answer that is not an object")?;
    ResolveOk::from_ok(m)
        .map(ResolveOutcome::from)
        .map_err(|e| e.to_string())
}

/// Format 1 writes `signing_cert_sha256` always (`[]` when the device does
/// not say), where the wire omits it.
pub fn manifests(list: &[ServiceManifest]) -> Json {
    Json::Array(
        list.iter()
            .map(|m| {
                let mut j = manifest_to_json(m);
                if let Json::Object(o) = &mut j {
                    o.entry("signing_cert_sha256".into())
                        .or_insert(Json::Array(Vec::new()));
                }
                j
            })
            .collect(),
    )
}

/// A `discover` answer back from its journaled form.
pub fn manifests_of(v: &Json) -> Result<Vec<ServiceManifest>, String> {
    v.as_array()
        .ok_or("a discover answer that is not an array")?
        .iter()
        .map(|m| manifest_from_json(m).map_err(|e| e.to_string()))
        .collect()
}

/// The journaled answer of `hello`.
pub fn hello(h: &HelloInfo) -> Json {
    Json::from(serde_json::to_value(h).unwrap_or_default())
}

/// A `hello` answer back from its journaled form.
pub fn hello_of(v: &Json) -> Result<HelloInfo, String> {
    v.to_serde()
        .ok()
        .and_then(|v| serde_json::from_value(v).ok())
        .ok_or_else(|| "a journaled hello answer does not read back".into())
}

/// `advance_clock` is the simulated device's extension, not a wire op.
pub fn advance_request(ms: u64) -> Json {
    obj([("ms", Json::from(ms))])
}

/// The journaled answer of `advance_clock`: the new device time.
pub fn now(ms: i64) -> Json {
    obj([("now", Json::from(ms))])
}

/// An `advance_clock` answer back from its journaled form.
pub fn now_of(v: &Json) -> Result<i64, String> {
    v.get("now")
        .and_then(Json::as_i64)
        .ok_or_else(|| "a journaled advance_clock answer has no time".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_read_back() {
        let r = FdRead {
            bytes: vec![0, 255],
            eof: false,
            error: None,
            writable: Some(true),
        };
        assert_eq!(fd_read_of(&fd_read(&r)).unwrap(), r);
        let o = ResolveOutcome {
            launched: true,
            decision_applied: false,
            result_code: 0,
            launched_package: None,
        };
        assert_eq!(resolve_outcome_of(&resolve_outcome(o.clone())).unwrap(), o);
        let m = ServiceManifest {
            package: "p".into(),
            ..ServiceManifest::default()
        };
        assert_eq!(
            manifests_of(&manifests(std::slice::from_ref(&m))).unwrap(),
            vec![m]
        );
        let req = call_request("a", "m", None, None, 5);
        let p = call_of(&req).unwrap();
        assert_eq!((p.method.as_str(), p.timeout_ms), ("m", 5));
        assert!(call_of(&obj([])).is_err());
    }
}
