//! Code shared by the fuzz targets (`fuzz_targets/`): what the runner does
//! with a loaded vector file, so that the text target and the structured one
//! exercise the same paths.

use cetp_vectors::interp::{check_assertion, tokens_unpredictable};
use cetp_vectors::template::{expand, expand_string, Bindings};
use cetp_vectors::vector::{Expect, Step, VectorFile};
use serde_json::{json, Value as Json};
use std::sync::OnceLock;

/// Answer documents as the runner binds them (`cetp_vectors::answer`),
/// shaped like the reference Provider's answers in a simulated run (a
/// session, a tool list, an error, a null): what a vector's templates and
/// assertions meet at run time.
pub fn bindings() -> &'static Bindings {
    static B: OnceLock<Bindings> = OnceLock::new();
    B.get_or_init(|| {
        let mut b = Bindings::new();
        b.insert("s".into(), json!({
            "_request": {"request_id": null, "session": null, "tool_name": null, "args_text": null},
            "_types": {"data": "string", "status": "string"},
            "data": {
                "capabilities": ["async_operations", "cancellation", "large_results"],
                "expires_at": "2026-12-02T02:35:00Z",
                "limits": {"idempotency_window_seconds": 86400, "max_concurrent_requests": 4,
                           "max_inline_result_bytes": 65536, "max_request_bytes": 262144},
                "provider_id": "com.clawseed.reference",
                "selected_version": 2,
                "session_token": "6f1c2a9e4b7d4c3f8a2e5d1b9c0f7a6e"
            },
            "status": "success"
        }));
        b.insert("t".into(), json!({
            "_request": {"request_id": "123e4567-e89b-42d3-a456-426614174000", "session": "s", "tool_name": null, "args_text": null},
            "_types": {"data": "string", "protocol_version": "int", "request_id": "string", "status": "string"},
            "data": {"revision": "tools-1", "tools": [{
                "name": "create_alert", "title": "Create alert", "description": "Creates a price alert.",
                "input_schema": {"type": "object", "required": ["symbol", "price"],
                                 "properties": {"symbol": {"type": "string"}, "price": {"type": "number", "exclusiveMinimum": 0}}},
                "output_schema": {"type": "object", "required": ["alert_id"], "properties": {"alert_id": {"type": "string"}}},
                "scopes": ["alerts.write"],
                "annotations": {"effect": "create", "risk": "low", "destructive": false, "idempotent": false,
                                "open_world": false, "confirmation": "never", "execution": "sync"}
            }]},
            "protocol_version": 2,
            "request_id": "123e4567-e89b-42d3-a456-426614174000",
            "status": "success"
        }));
        b.insert("e".into(), json!({
            "_request": {"request_id": "f47ac10b-58cc-4372-a567-0e02b2c3d479", "session": "s", "tool_name": "create_alert", "args_text": "{\"price\":-1,\"symbol\":\"ACME\"}"},
            "_types": {"error_code": "string", "error_message": "string", "protocol_version": "int", "request_id": "string", "retryable": "bool", "status": "string"},
            "error_code": "INVALID_ARGS",
            "error_message": "price must be positive",
            "protocol_version": 2,
            "request_id": "f47ac10b-58cc-4372-a567-0e02b2c3d479",
            "retryable": false,
            "status": "error"
        }));
        b.insert("env".into(), json!({"package": "com.clawseed.reference", "authority": "com.clawseed.reference.cetp", "manifest": "dual_stack"}));
        b.insert("n".into(), json!({"_null": true, "_request": {}}));
        b
    })
}

/// Parses `text` as a case file the way `Suite::load` does and, when it is
/// one, runs what the runner computes from a case without a device: the
/// requirement ids each step cites, every template against real bindings,
/// and every assertion against real answers. None of it may panic.
pub fn exercise_vector_text(text: &str) {
    let Ok(file) = VectorFile::from_json(text) else {
        return;
    };
    exercise_vector_file(&file);
    // Templates may sit in any string of a case (names, args, pointers).
    if let Ok(raw) = serde_json::from_str::<Json>(text) {
        each_string(&raw, &mut |s| {
            let _ = expand(bindings(), s);
        });
    }
}

pub fn exercise_vector_file(file: &VectorFile) {
    for case in &file.cases {
        for s in &case.steps {
            let cited = s.cites(case);
            // A step cites its own ids, its case's, or none: never others.
            assert!(
                cited == case.requirements.as_slice()
                    || s.requirements.as_deref() == Some(cited)
                    || cited.is_empty()
            );
            step(&s.step);
        }
    }
}

fn step(s: &Step) {
    match s {
        Step::Negotiate { expect, .. }
        | Step::Call { expect, .. }
        | Step::Poll { expect, .. }
        | Step::Settle { expect, .. } => {
            if let Some(e) = expect {
                expectation(e)
            }
        }
        Step::Concurrent { steps } | Step::EachTool { steps, .. } => {
            for s in steps {
                step(s)
            }
        }
        Step::Assert { value, assertion } => {
            // As the runner's `assert` step: the expanded value is judged
            // under `/value`.
            if let Ok(v) = expand(bindings(), value) {
                let mut a = assertion.clone();
                a.pointer = format!("/value{}", assertion.pointer);
                let _ = check_assertion(&json!({ "value": v }), &a);
            }
        }
        Step::TokensUnpredictable { tokens } => {
            let values: Result<Vec<String>, String> = tokens
                .iter()
                .map(|t| expand_string(bindings(), t))
                .collect();
            if let Ok(v) = values {
                let _ = tokens_unpredictable(&v);
            }
        }
        _ => {}
    }
}

fn expectation(e: &Expect) {
    for a in &e.data {
        for doc in bindings().values() {
            let _ = check_assertion(doc, a);
        }
    }
}

/// Calls `f` on every string of a JSON value, object keys included.
pub fn each_string(v: &Json, f: &mut impl FnMut(&str)) {
    match v {
        Json::String(s) => f(s),
        Json::Array(a) => a.iter().for_each(|x| each_string(x, f)),
        Json::Object(m) => {
            for (k, x) in m {
                f(k);
                each_string(x, f);
            }
        }
        _ => {}
    }
}
