//! Every check of `cetp_vectors::checks` on an arbitrary answer, in an
//! arbitrary context (method, v1 or v2, the request id sent, the negotiated
//! session, the tool and its output_schema, the offer): a check judges
//! device input and must never panic on it, and each finding names a check
//! and a rule that `vectors/checks/checks.json` can map to requirements.
//! The answer document the runner binds (`answer::answer_document`) is built
//! from the same answer.
//!
//! Two input forms. A JSON object is a readable context around a probe-wire
//! answer (the seeds are real answers of the reference Provider):
//!
//! ```json
//! {"method": "execute_tool", "v1": false, "request_id": "…",
//!  "answer": {"status": {"t": "string", "v": "success"}, …} | null,
//!  "threw": {"class": "…", "message": "…"},
//!  "negotiated": {"capabilities": ["…"], "limits": {"max_inline_result_bytes": 64}},
//!  "tool": {"name": "…", "output_schema": {…}}, "dialect": "…",
//!  "package": "…", "known_scopes": ["…"],
//!  "offer": {"versions": [2, 1], "capabilities": ["…"]}, "provider_versions": [1, 2]}
//! ```
//!
//! Any other input drives a generator that speaks the envelope's vocabulary
//! (its keys, statuses, error codes, result kinds), so that random bytes
//! reach past `Response::from_bundle` as well.
#![no_main]

use cetp_vectors::answer::{answer_document, describe};
use cetp_vectors::checks::{check_answer, AnswerContext, ALL, RULES};
use cetp_proto::bundle::{FdValue, PendingIntentValue, Value};
use cetp_proto::descriptor::{Negotiated, ToolSummary};
use cetp_proto::error::ErrorCode;
use cetp_proto::Bundle;
use cetp_proto::device::CallAnswer;
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Map, Value as Json};
use std::collections::BTreeSet;

#[derive(Debug)]
struct Input {
    method: String,
    v1: bool,
    request_id: Option<String>,
    answer: CallAnswer,
    negotiated: Option<Negotiated>,
    tool: Option<ToolSummary>,
    dialect: String,
    package: Option<String>,
    known_scopes: Option<BTreeSet<String>>,
    offer: Option<(Vec<i32>, Vec<String>)>,
    provider_versions: Option<BTreeSet<i32>>,
}

const METHODS: &[&str] = &[
    "negotiate",
    "get_provider_info",
    "list_tools",
    "execute_tool",
    "get_operation",
    "cancel_operation",
    "no_such_method",
];
const DIALECTS: &[&str] = &[
    cetp_proto::schema::DEFAULT_DIALECT,
    "https://json-schema.org/draft/2019-09/schema",
    "http://json-schema.org/draft-07/schema#",
    "http://json-schema.org/draft-04/schema",
    "https://example.com/unknown",
];
const CAPABILITIES: &[&str] = &[
    "async_operations",
    "cancellation",
    "large_results",
    "teleport",
];
const LIMITS: &[&str] = &[
    "max_inline_result_bytes",
    "max_request_bytes",
    "max_concurrent_requests",
    "idempotency_window_seconds",
];
const REQUEST_ID: &str = "123e4567-e89b-42d3-a456-426614174000";

// ---- the JSON form ----------------------------------------------------

fn strings(v: Option<&cetp_wire::Json>) -> Option<Vec<String>> {
    v.and_then(|v| v.as_array()).map(|a| {
        a.iter()
            .filter_map(|s| s.as_str().map(str::to_string))
            .collect()
    })
}

fn ints(v: Option<&cetp_wire::Json>) -> Option<Vec<i32>> {
    v.and_then(|v| v.as_array()).map(|a| {
        a.iter()
            .filter_map(|n| n.as_i64().and_then(|n| i32::try_from(n).ok()))
            .collect()
    })
}

fn from_json(text: &str) -> Option<Input> {
    // One probe-wire line; a seed written by hand may end with its newline.
    let text = text.strip_suffix('\n').unwrap_or(text);
    let doc = cetp_wire::json::parse(text).ok()?;
    let o = doc.as_object()?;
    let answer = if let Some(t) = o.get("threw") {
        CallAnswer::Threw {
            class: t.get("class")?.as_str()?.into(),
            message: t
                .get("message")
                .and_then(|m| m.as_str())
                .unwrap_or("")
                .into(),
        }
    } else {
        match o.get("answer")? {
            cetp_wire::Json::Null => CallAnswer::Result(None),
            // A Bundle the wire refuses never reaches the checks.
            b => CallAnswer::Result(Some(
                cetp_wire::bundle_from_json(b, &cetp_wire::Path::ROOT).ok()?,
            )),
        }
    };
    let negotiated = o.get("negotiated").map(|n| Negotiated {
        selected_version: 2,
        capabilities: strings(n.get("capabilities"))
            .unwrap_or_default()
            .into_iter()
            .collect(),
        limits: n
            .get("limits")
            .and_then(|l| l.as_object())
            .map(|l| {
                l.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_i64()?)))
                    .collect()
            })
            .unwrap_or_default(),
        ..Negotiated::default()
    });
    let tool = match o.get("tool") {
        Some(t) => Some(tool(
            t.get("name").and_then(|n| n.as_str()).unwrap_or("t"),
            t.get("output_schema")?.to_serde().ok()?,
        )),
        None => None,
    };
    let offer = o.get("offer").map(|f| {
        (
            ints(f.get("versions")).unwrap_or_default(),
            strings(f.get("capabilities")).unwrap_or_default(),
        )
    });
    Some(Input {
        method: o
            .get("method")
            .and_then(|m| m.as_str())
            .unwrap_or("execute_tool")
            .into(),
        v1: o.get("v1").and_then(|v| v.as_bool()).unwrap_or(false),
        request_id: o
            .get("request_id")
            .and_then(|r| r.as_str())
            .map(str::to_string),
        answer,
        negotiated,
        tool,
        dialect: o
            .get("dialect")
            .and_then(|d| d.as_str())
            .unwrap_or(cetp_proto::schema::DEFAULT_DIALECT)
            .into(),
        package: o
            .get("package")
            .and_then(|p| p.as_str())
            .map(str::to_string),
        known_scopes: strings(o.get("known_scopes")).map(|s| s.into_iter().collect()),
        offer,
        provider_versions: ints(o.get("provider_versions")).map(|v| v.into_iter().collect()),
    })
}

fn tool(name: &str, output_schema: Json) -> ToolSummary {
    ToolSummary {
        name: name.into(),
        input_schema: json!({"type": "object"}),
        output_schema,
        scopes: vec![],
        effect: "read".into(),
        risk: "low".into(),
        destructive: false,
        idempotent: true,
        open_world: false,
        confirmation: "never".into(),
        execution: "sync".into(),
    }
}

// ---- the generated form -----------------------------------------------

/// Keys of result data, operations and descriptors.
const DATA_KEYS: &[&str] = &[
    "kind",
    "value",
    "state",
    "result",
    "error",
    "error_code",
    "retryable",
    "operation_id",
    "poll_after_ms",
    "media_type",
    "size_bytes",
    "sha256",
    "tools",
    "revision",
    "name",
    "title",
    "description",
    "input_schema",
    "output_schema",
    "scopes",
    "annotations",
    "effect",
    "risk",
    "destructive",
    "idempotent",
    "open_world",
    "confirmation",
    "execution",
    "selected_version",
    "provider_id",
    "provider_name",
    "session_token",
    "capabilities",
    "limits",
    "expires_at",
    "schema_dialect",
    "access",
    "sensitivity",
    "type",
    "properties",
    "required",
    "pattern",
    "$ref",
    "$defs",
    "items",
    "enum",
    "minimum",
];
const DATA_STRINGS: &[&str] = &[
    "inline",
    "file",
    "queued",
    "running",
    "succeeded",
    "failed",
    "cancelled",
    "cancellation_requested",
    "read",
    "create",
    "update",
    "delete",
    "transaction",
    "low",
    "moderate",
    "high",
    "never",
    "always",
    "sync",
    "async",
    "sync_or_async",
    "object",
    "string",
    "number",
    "integer",
    "array",
    "boolean",
    "null",
    "async_operations",
    "large_results",
    "cancellation",
    "create_alert",
    "Bad Name",
    "com.clawseed.reference",
    "2026-12-02T02:35:00Z",
    "#/$defs/x",
    "http://example.com/s",
    "^(a+)+$",
    "java.lang.IllegalStateException: x\n\tat a.B(B.java:1)",
];

fn text(u: &mut Unstructured<'_>, vocabulary: &[&str]) -> Result<String> {
    Ok(if u.ratio(3, 4)? {
        u.choose(vocabulary)?.to_string()
    } else {
        u.arbitrary()?
    })
}

fn gen_json(u: &mut Unstructured<'_>, depth: u32) -> Result<Json> {
    let top = if depth >= 5 { 4 } else { 6 };
    Ok(match u.int_in_range(0..=top)? {
        0 => Json::Null,
        1 => Json::Bool(u.arbitrary()?),
        2 => match u.int_in_range(0..=3)? {
            0 => json!(u.int_in_range(-2i64..=70)?),
            1 => json!(u.arbitrary::<i64>()?),
            2 => json!(u.arbitrary::<u64>()?),
            _ => serde_json::Number::from_f64(u.arbitrary()?).map_or(Json::Null, Json::Number),
        },
        3 | 4 => Json::String(text(u, DATA_STRINGS)?),
        5 => {
            let n = u.int_in_range(0..=3)?;
            Json::Array(
                (0..n)
                    .map(|_| gen_json(u, depth + 1))
                    .collect::<Result<_>>()?,
            )
        }
        _ => {
            let mut m = Map::new();
            for _ in 0..u.int_in_range(0..=5)? {
                m.insert(text(u, DATA_KEYS)?, gen_json(u, depth + 1)?);
            }
            Json::Object(m)
        }
    })
}

fn gen_value(u: &mut Unstructured<'_>, key: &str, depth: u32) -> Result<Value> {
    // Mostly the type the spec gives the key, so that the envelope decodes;
    // now and then any other type, which the checks must report.
    if u.ratio(4, 5)? {
        let strings = |u: &mut Unstructured<'_>, v: &[&str]| text(u, v).map(Value::String);
        match key {
            "protocol_version" => return Ok(Value::Int(u.int_in_range(1..=3)?)),
            "status" => return strings(u, &["success", "error", "accepted", "pending"]),
            "error_code" => {
                let codes: Vec<&str> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
                return strings(u, &codes);
            }
            "request_id" => return strings(u, &[REQUEST_ID, "other"]),
            "retryable" => return Ok(Value::Bool(u.arbitrary()?)),
            "retry_after_ms" => return Ok(Value::Long(u.int_in_range(-5..=5000)?)),
            "data" | "error_details" => {
                return Ok(Value::String(if u.ratio(9, 10)? {
                    gen_json(u, 0)?.to_string()
                } else {
                    u.arbitrary()?
                }))
            }
            "resolution" => {
                return Ok(Value::PendingIntent(PendingIntentValue {
                    handle: "pi-1".into(),
                    creator_package: u
                        .arbitrary::<bool>()?
                        .then(|| "com.clawseed.reference".into()),
                    creator_uid: u.arbitrary()?,
                    immutable: u.arbitrary()?,
                    activity: u.arbitrary()?,
                }))
            }
            "result_fd" => {
                return Ok(Value::Fd(FdValue {
                    handle: "fd-1".into(),
                }))
            }
            _ => {}
        }
    }
    Ok(match u.int_in_range(0..=15)? {
        0 => Value::Null,
        1 => Value::Bool(u.arbitrary()?),
        2 => Value::Int(u.arbitrary()?),
        3 => Value::Long(u.arbitrary()?),
        4 => Value::Float(u.arbitrary()?),
        5 => Value::Double(u.arbitrary()?),
        6 => Value::String(text(u, DATA_STRINGS)?),
        7 => Value::Utf16String(vec![0x61, 0xD800]),
        8 => Value::IntArray(u.arbitrary()?),
        9 => Value::LongArray(u.arbitrary()?),
        10 => Value::StringArray(u.arbitrary()?),
        11 => Value::Bytes(u.arbitrary()?),
        12 if depth < 3 => Value::Bundle(gen_bundle(u, depth + 1)?),
        13 => Value::Other {
            class: "android.graphics.Point".into(),
        },
        14 => Value::DoubleArray(u.arbitrary()?),
        _ => Value::StringList(u.arbitrary()?),
    })
}

fn gen_bundle(u: &mut Unstructured<'_>, depth: u32) -> Result<Bundle> {
    const KEYS: &[&str] = &[
        "status",
        "protocol_version",
        "request_id",
        "data",
        "error_code",
        "error_message",
        "retryable",
        "retry_after_ms",
        "error_details",
        "resolution",
        "resume_token",
        "result_fd",
        "authorize_intent",
        "session_token",
        "result",
    ];
    let mut b = Bundle::new();
    for _ in 0..u.int_in_range(0..=8)? {
        let key = text(u, KEYS)?;
        let v = gen_value(u, &key, depth)?;
        b.insert(&key, v);
    }
    Ok(b)
}

fn generated(u: &mut Unstructured<'_>) -> Result<Input> {
    let answer = match u.int_in_range(0..=9)? {
        0 => CallAnswer::Result(None),
        1 => CallAnswer::Threw {
            class: "java.lang.SecurityException".into(),
            message: u.arbitrary()?,
        },
        _ => CallAnswer::Result(Some(gen_bundle(u, 1)?)),
    };
    let negotiated = if u.arbitrary()? {
        let mut n = Negotiated {
            selected_version: 2,
            ..Negotiated::default()
        };
        for c in CAPABILITIES {
            if u.arbitrary()? {
                n.capabilities.insert(c.to_string());
            }
        }
        for l in LIMITS {
            if u.arbitrary()? {
                n.limits.insert(l.to_string(), u.int_in_range(-1..=300)?);
            }
        }
        Some(n)
    } else {
        None
    };
    let tool = if u.arbitrary()? {
        Some(tool("t", gen_json(u, 0)?))
    } else {
        None
    };
    Ok(Input {
        method: u.choose(METHODS)?.to_string(),
        v1: u.ratio(1, 5)?,
        request_id: if u.ratio(4, 5)? {
            Some(REQUEST_ID.into())
        } else {
            None
        },
        answer,
        negotiated,
        tool,
        dialect: u.choose(DIALECTS)?.to_string(),
        package: u
            .arbitrary::<bool>()?
            .then(|| "com.clawseed.reference".into()),
        known_scopes: if u.arbitrary()? {
            Some(
                ["alerts.read", "alerts.write"]
                    .iter()
                    .map(|s| s.to_string())
                    .collect(),
            )
        } else {
            None
        },
        offer: if u.arbitrary()? {
            Some((
                vec![2, 1],
                CAPABILITIES[..3].iter().map(|s| s.to_string()).collect(),
            ))
        } else {
            None
        },
        provider_versions: if u.arbitrary()? {
            Some([1, 2].into())
        } else {
            None
        },
    })
}

// ---- the checks -------------------------------------------------------

/// A rule `checks.json` can map: one of the checks' own, one per error code
/// for `retryable`, or a descriptor rule (with or without `@field`).
fn declared(rule: &str) -> bool {
    let base = rule.split_once('@').map_or(rule, |(b, _)| b);
    RULES.iter().any(|(_, r)| *r == base)
        || cetp_proto::descriptor::RULES.contains(&base)
        || base
            .strip_prefix("retryable.")
            .is_some_and(|c| ErrorCode::parse(c).is_some())
}

fn judge(input: &Input) {
    let request = input.request_id.as_ref().map(|id| {
        Bundle::new()
            .with("protocol_version", Value::Int(2))
            .with("request_id", Value::str(id.clone()))
    });
    let cx = AnswerContext {
        method: &input.method,
        v1: input.v1,
        request: request.as_ref(),
        answer: &input.answer,
        negotiated: input.negotiated.as_ref(),
        tool: input.tool.as_ref(),
        package: input.package.as_deref(),
        dialect: &input.dialect,
        known_scopes: input.known_scopes.as_ref(),
        offer: input
            .offer
            .as_ref()
            .map(|(v, c)| (v.as_slice(), c.as_slice())),
        provider_versions: input.provider_versions.as_ref(),
    };
    let findings = check_answer(&cx);
    for f in &findings {
        assert!(ALL.contains(&f.check), "finding of an unknown check: {f:?}");
        assert!(declared(&f.rule), "finding with an undeclared rule: {f:?}");
    }
    match &input.answer {
        // §4.2-§5: a v2 call that throws or returns null is one broken
        // envelope, nothing more to judge.
        CallAnswer::Threw { .. } | CallAnswer::Result(None) if !input.v1 => {
            assert_eq!(findings.len(), 1, "{findings:?}");
            assert_eq!(findings[0].rule, "envelope.answer");
        }
        CallAnswer::Result(Some(_)) if input.v1 => {
            assert!(findings
                .iter()
                .all(|f| f.check == cetp_vectors::checks::V1_SHAPE));
        }
        _ => {}
    }
    let doc = answer_document(
        &input.answer,
        json!({"request_id": input.request_id, "tool_name": input.tool.as_ref().map(|t| &t.name)}),
    );
    assert!(doc.get("_request").is_some());
    let _ = describe(&doc);
}

fuzz_target!(|data: &[u8]| {
    let parsed = std::str::from_utf8(data).ok().and_then(from_json);
    let input = match parsed {
        Some(i) => i,
        None => match generated(&mut Unstructured::new(data)) {
            Ok(i) => i,
            Err(_) => return,
        },
    };
    judge(&input);
});
