//! The described app (`described.rs`): the engine hosting another
//! Provider's descriptors keeps the protocol's decisions whatever its
//! business answers, and takes the business's answer where it decides.

mod provider_support;

use cetp_proto::envelope::Capability;
use cetp_proto::provider::Decision;
use cetp_proto::ErrorCode;
use cetp_reference::provider::{
    Business, BusinessAnswer, BusinessCall, Described, DescribedTool, Flavour, ProviderConfig,
    ReferenceProvider,
};
use provider_support::*;
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

/// A business that answers what it is told, and counts its calls.
struct Scripted {
    answer: Mutex<BusinessAnswer>,
    calls: Mutex<usize>,
}

impl Business for Scripted {
    fn decide(&self, _: &BusinessCall<'_>) -> BusinessAnswer {
        *self.calls.lock().unwrap() += 1;
        self.answer.lock().unwrap().clone()
    }
}

fn tool(name: &str, effect: &str, confirmation: &str, execution: &str) -> DescribedTool {
    DescribedTool::from_json(&json!({
        "name": name,
        "input_schema": {"type": "object", "properties": {"n": {"type": "integer"}},
                         "required": ["n"], "additionalProperties": false},
        "output_schema": {"type": "object"},
        "scopes": ["things.write"],
        "annotations": {"effect": effect, "risk": "low", "destructive": false,
                        "idempotent": false, "open_world": false,
                        "confirmation": confirmation, "execution": execution}
    }))
    .unwrap()
}

fn world(answer: BusinessAnswer) -> (World, Arc<Scripted>) {
    let business = Arc::new(Scripted {
        answer: Mutex::new(answer),
        calls: Mutex::new(0),
    });
    let cfg = ProviderConfig {
        described: Some(Arc::new(Described {
            tools: vec![
                tool("make_thing", "create", "never", "sync_or_async"),
                tool("drop_thing", "delete", "always", "sync"),
                tool("read_thing", "read", "never", "sync"),
            ],
            info: json!({"provider_id": "com.clawseed.reference", "provider_name": "X",
                         "description": "x", "schema_dialect": "https://json-schema.org/draft/2020-12/schema",
                         "scopes": []}),
            capabilities: BTreeSet::from([Capability::AsyncOperations]),
            hidden: BTreeMap::new(),
            business: business.clone(),
            flavour: Flavour::QUICK,
        })),
        ..ProviderConfig::default()
    };
    (World::new(ReferenceProvider::new(cfg)), business)
}

#[test]
fn the_business_answers_where_it_decides_and_the_protocol_where_it_does() {
    let (mut w, business) = world(BusinessAnswer::Value(json!({"id": "t-1"})));
    w.connect(A);
    // Args that break the schema: the protocol refuses, the business is
    // never asked.
    let bad = w.exec(A, &rid(1), "make_thing", r#"{"n": "x"}"#);
    assert_eq!(bad.code().as_deref(), Some("INVALID_ARGS"));
    assert_eq!(*business.calls.lock().unwrap(), 0);
    // The business's value, one effect; the replay is the same answer and
    // asks the business nothing.
    let ok = w.exec(A, &rid(2), "make_thing", r#"{"n": 1}"#);
    assert!(ok.is_success(), "{:?}", ok.bundle);
    assert_eq!(ok.value(), json!({"id": "t-1"}));
    let again = w.exec(A, &rid(2), "make_thing", r#"{"n": 1}"#);
    assert_eq!(again.comparable(), ok.comparable());
    assert_eq!(*business.calls.lock().unwrap(), 1);
    assert_eq!(w.p.effects(), 1);
    // The same id with other args: the protocol's INVALID_REQUEST.
    let other = w.exec(A, &rid(2), "make_thing", r#"{"n": 2}"#);
    assert_eq!(other.code().as_deref(), Some("INVALID_REQUEST"));
    // A business refusal is passed on, with no effect.
    *business.answer.lock().unwrap() = BusinessAnswer::Error {
        code: ErrorCode::Conflict,
        retryable: Some(false),
    };
    let refused = w.exec(A, &rid(3), "make_thing", r#"{"n": 3}"#);
    assert_eq!(refused.code().as_deref(), Some("CONFLICT"));
    assert_eq!(w.p.effects(), 1);
}

#[test]
fn a_tool_that_always_confirms_never_acts_unconfirmed() {
    let (mut w, _business) = world(BusinessAnswer::Value(json!({})));
    w.connect(A);
    let asked = w.exec(A, &rid(1), "drop_thing", r#"{"n": 1}"#);
    assert_eq!(asked.code().as_deref(), Some("USER_ACTION_REQUIRED"));
    assert_eq!(w.p.effects(), 0);
    w.decide(A, &asked, Decision::Approve);
    let token = asked.resume_token().unwrap();
    let done = w.resume(A, &rid(1), "drop_thing", r#"{"n": 1}"#, &token);
    assert!(done.is_success(), "{:?}", done.bundle);
    assert_eq!(w.p.effects(), 1);
}

#[test]
fn accepted_only_for_a_sync_or_async_tool_with_async_negotiated() {
    let (mut w, _business) = world(BusinessAnswer::Accepted { value: json!({}) });
    w.connect_with(A, &["async_operations"]);
    let op = w.exec(A, &rid(1), "make_thing", r#"{"n": 1}"#);
    assert_eq!(op.status(), "accepted");
    // A sync tool: the business's choice of an operation is not the
    // protocol's to grant.
    let sync = w.exec(A, &rid(2), "read_thing", r#"{"n": 1}"#);
    assert_eq!(sync.status(), "success");
    let (mut w, _business) = world(BusinessAnswer::Accepted { value: json!({}) });
    w.connect_with(A, &[]);
    let no_async = w.exec(A, &rid(3), "make_thing", r#"{"n": 1}"#);
    assert_eq!(no_async.status(), "success");
}
