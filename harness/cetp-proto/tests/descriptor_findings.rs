//! The findings of the descriptor validators on broken `negotiate` and
//! `list_tools` answers, pinned as a snapshot: rule, section, pointer and
//! message reach the conformance reports and proofs, in this order, and
//! must not move when the validators' code does.

use cetp_proto::descriptor::{
    validate_negotiate, validate_tool_list, NegotiateContext, ToolListContext,
};
use cetp_proto::schema::DEFAULT_DIALECT;
use serde_json::{json, Value as Json};
use std::collections::BTreeSet;
use std::fmt::Write;

fn negotiate_answers() -> Vec<Json> {
    vec![
        json!([]),
        json!({}),
        json!({"selected_version": "2", "provider_id": 7, "session_token": "",
               "capabilities": "all", "limits": []}),
        json!({"selected_version": 3, "provider_id": "org.other.p", "provider_name": 1,
               "session_token": "x".repeat(300), "expires_at": 5,
               "capabilities": ["streaming", "teleport", 4],
               "limits": {"max_request_bytes": 10, "max_inline_result_bytes": "big",
                          "max_concurrent_requests": 1}}),
        json!({"selected_version": 1, "provider_id": "org.example.notes",
               "session_token": "tok", "capabilities": [],
               "limits": {"max_request_bytes": 65536, "max_inline_result_bytes": 262144,
                          "max_concurrent_requests": 4, "idempotency_window_seconds": 86400}}),
        json!({"selected_version": 4, "provider_id": "org.example", "session_token": "t",
               "capabilities": [], "limits": {"max_request_bytes": 1.5}}),
        json!({"selected_version": 2.5, "provider_id": "org.example", "session_token": "t",
               "capabilities": ["streaming"], "limits": {}}),
    ]
}

fn tool_lists() -> Vec<Json> {
    let good = json!({
        "name": "add_note", "title": "Add", "description": "adds",
        "input_schema": {"type": "object"}, "output_schema": {"type": "object"},
        "scopes": ["notes.write"],
        "annotations": {"effect": "create", "risk": "low", "confirmation": "never"}
    });
    vec![
        json!(7),
        json!({"revision": 1}),
        json!({"revision": "r", "tools": {}}),
        json!({"revision": "r", "tools": [
            good,
            good,
            3,
            {"name": "Bad-Name", "description": 1, "title": 2,
             "input_schema": {"$ref": "http://example.com/s"},
             "output_schema": {"type": "nonsense"},
             "scopes": ["notes.write", "other.scope", 9],
             "annotations": {"effect": "delete", "risk": "extreme", "confirmation": "never",
                             "execution": "sync_or_async", "destructive": "yes",
                             "idempotent": true, "open_world": 0}},
            {"description": "no name", "scopes": [],
             "annotations": {"effect": "read", "risk": "high", "confirmation": "provider_policy"}},
            {"name": "no_annotations", "description": "d", "input_schema": true,
             "output_schema": false, "scopes": [], "annotations": []},
            {"name": "", "description": "d", "input_schema": {}, "output_schema": {},
             "annotations": {"effect": "transaction", "risk": "moderate",
                             "confirmation": "always", "execution": "sync", "destructive": true}}
        ]}),
    ]
}

#[test]
fn descriptor_findings_snapshot() {
    let mut out = String::new();
    let versions = BTreeSet::from([1, 2]);
    let offered = vec!["streaming".to_string()];
    for (i, a) in negotiate_answers().iter().enumerate() {
        for provider_versions in [None, Some(&versions)] {
            let cx = NegotiateContext {
                consumer_versions: &[1, 2, 3],
                consumer_capabilities: &offered,
                provider_versions,
                package: Some("org.example"),
            };
            let (n, vs) = validate_negotiate(a, &cx);
            let _ = writeln!(out, "negotiate {i} (manifest {provider_versions:?}): {n:?}");
            for v in vs {
                let _ = writeln!(out, "  {v:?}");
            }
        }
    }
    let scopes = BTreeSet::from(["notes.write".to_string()]);
    for (i, l) in tool_lists().iter().enumerate() {
        for (negotiated, known) in [
            (BTreeSet::new(), Some(&scopes)),
            (BTreeSet::from(["async_operations".to_string()]), None),
        ] {
            let cx = ToolListContext {
                negotiated: &negotiated,
                known_scopes: known,
                dialect: DEFAULT_DIALECT,
            };
            let (list, vs) = validate_tool_list(l, &cx);
            let _ = writeln!(
                out,
                "tool list {i} (async {}, scopes {}): {list:?}",
                !negotiated.is_empty(),
                known.is_some()
            );
            for v in vs {
                let _ = writeln!(out, "  {v:?}");
            }
        }
    }
    insta::assert_snapshot!(out);
}
