//! Answers as JSON documents, so that vectors can bind and assert on them
//! with JSON pointers, and templates (`${NAME/pointer}`) can reuse them.
//!
//! Document shape for a call:
//! - every Bundle key as plain JSON (`int`/`long` as numbers, handles as
//!   their handle string, `pending_intent` as an object);
//! - `data` parsed as JSON when it is JSON text (else kept as text and
//!   `/_data_error` says why);
//! - `/_types/KEY`: the probe-wire type tag of each key (to assert "an Int");
//! - `/_null`: `call()` returned null; `/_threw`: `{class, message}`;
//! - `/_request`: what was sent (`request_id`, `args_text`, `tool_name`,
//!   `session`).

use cetp_proto::bundle::{lone_surrogate_description, Value};
use cetp_proto::device::CallAnswer;
use cetp_proto::Bundle;
use serde_json::{json, Map, Value as Json};

/// One Bundle value as document JSON (see the module docs for the shape).
pub fn value_to_json(v: &Value) -> Json {
    match v {
        Value::Null => Json::Null,
        Value::Bool(b) => json!(b),
        Value::Int(i) => json!(i),
        Value::Long(l) => json!(l),
        Value::Float(f) => json!(f),
        Value::Double(d) => json!(d),
        Value::String(s) => json!(s),
        Value::Utf16String(u) => json!(format!(
            "<invalid string: {}>",
            lone_surrogate_description(u)
        )),
        Value::IntArray(a) => json!(a),
        Value::LongArray(a) => json!(a),
        Value::BoolArray(a) => json!(a),
        Value::DoubleArray(a) => json!(a),
        Value::StringArray(a) | Value::StringList(a) => json!(a),
        Value::Bytes(b) => json!({"bytes": b.len()}),
        Value::Bundle(b) => bundle_to_json(b),
        Value::PendingIntent(pi) => json!({
            "handle": pi.handle,
            "creator_package": pi.creator_package,
            "creator_uid": pi.creator_uid,
            "immutable": pi.immutable,
            "activity": pi.activity,
        }),
        Value::Fd(fd) => json!(fd.handle),
        Value::Other { class } => json!({ "other": class }),
    }
}

/// A Bundle as a JSON object of its keys, without the `_types` member.
pub fn bundle_to_json(b: &Bundle) -> Json {
    let mut m = Map::new();
    for (k, v) in &b.0 {
        m.insert(k.clone(), value_to_json(v));
    }
    Json::Object(m)
}

/// The Bundle type of each value of `b` (`long`, `int`, `string`, …), as
/// a request document's `_types` records it: a case such as ENV-001 tests
/// the type, which the JSON view of the value does not show.
pub fn bundle_types(b: &Bundle) -> Json {
    Json::Object(
        b.0.iter()
            .map(|(k, v)| (k.clone(), json!(v.type_tag())))
            .collect(),
    )
}

/// Builds the answer document of a call.
pub fn answer_document(answer: &CallAnswer, request: Json) -> Json {
    let mut doc = match answer {
        CallAnswer::Result(None) => json!({"_null": true}),
        CallAnswer::Threw { class, message } => {
            json!({"_threw": {"class": class, "message": message}})
        }
        CallAnswer::Result(Some(b)) => {
            let mut doc = bundle_to_json(b);
            let types: Map<String, Json> =
                b.0.iter()
                    .map(|(k, v)| (k.clone(), json!(v.type_tag())))
                    .collect();
            let obj = doc
                .as_object_mut()
                .expect("bundle_to_json builds an object");
            obj.insert("_types".into(), Json::Object(types));
            if let Some(Json::String(text)) = obj.get("data").cloned() {
                match cetp_proto::bundle::parse_json_text("data", &text) {
                    Ok(parsed) => {
                        obj.insert("data".into(), parsed);
                    }
                    Err(e) => {
                        obj.insert("_data_error".into(), json!(e.to_string()));
                    }
                }
            }
            if let Some(Json::String(text)) = obj.get("error_details").cloned() {
                if let Ok(parsed) = serde_json::from_str::<Json>(&text) {
                    obj.insert("error_details".into(), parsed);
                }
            }
            doc
        }
    };
    if let Some(obj) = doc.as_object_mut() {
        obj.insert("_request".into(), request);
    }
    doc
}

/// A short human description of an answer for reasons and traces.
pub fn describe(doc: &Json) -> String {
    if doc.get("_null").is_some() {
        return "null (call() returned null)".into();
    }
    if let Some(t) = doc.get("_threw") {
        return format!(
            "exception {}",
            t.get("class").and_then(Json::as_str).unwrap_or("?")
        );
    }
    let status = doc
        .get("status")
        .and_then(Json::as_str)
        .unwrap_or("<no status>");
    match doc.get("error_code").and_then(Json::as_str) {
        Some(code) if status == "error" => format!("error {code}"),
        _ => status.to_string(),
    }
}
