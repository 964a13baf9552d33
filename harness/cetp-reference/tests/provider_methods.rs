//! Each method and error path of the reference Provider.

mod provider_support;

use cetp_proto::canonical::sha256_hex;
use cetp_proto::descriptor::{
    validate_negotiate, validate_provider_info, validate_tool_list, validate_v1_tool_list,
    NegotiateContext, ToolListContext,
};
use cetp_proto::discovery::{
    check_same_package, manifest_shape_problems, parse_declared, plan, Plan,
};
use cetp_proto::envelope::{is_uuid, keys, V1Response};
use cetp_proto::provider::Decision;
use cetp_proto::schema::{CompiledSchema, DEFAULT_DIALECT};
use cetp_proto::{Bundle, Value};
use cetp_reference::app::ProviderApp;
use cetp_reference::provider::{
    ManifestVariant, ProviderConfig, ReferenceProvider, CONFIRM_ACTIVITY, GRANT_ACTIVITY, PACKAGE,
    PROVIDER_UID,
};
use provider_support::*;
use serde_json::{json, Value as Json};
use std::collections::BTreeSet;

fn caps_set(caps: &[&str]) -> BTreeSet<String> {
    caps.iter().map(|s| s.to_string()).collect()
}

fn assert_error(o: &Outcome, code: &str, retryable: bool) {
    assert_eq!(o.status(), "error", "{:?}", o.bundle);
    assert_eq!(o.code().as_deref(), Some(code), "{:?}", o.bundle);
    assert_eq!(o.retryable(), Some(retryable), "{:?}", o.bundle);
    assert_eq!(o.protocol_version(), Some(&Value::Int(2)), "{:?}", o.bundle);
    assert!(!o.message().is_empty());
    assert!(cetp_proto::error::leaks_internal_detail(&o.message()).is_none());
}

// ---------------------------------------------------------------- manifest

#[test]
fn manifest_variants() {
    let shapes = [
        (ManifestVariant::DualStack, vec![1, 2], Some(1), true, 0),
        (ManifestVariant::V2Only, vec![2], Some(2), true, 0),
        (ManifestVariant::V1Only, vec![1], Some(1), true, 0),
        (ManifestVariant::VersionsOnly, vec![1, 2], None, true, 1),
        (
            ManifestVariant::MismatchedPackage,
            vec![1, 2],
            Some(1),
            false,
            0,
        ),
    ];
    for (variant, versions, legacy, same_package, problems) in shapes {
        let p = ReferenceProvider::new(ProviderConfig {
            manifest: variant,
            ..ProviderConfig::default()
        });
        let m = p.manifests();
        assert_eq!(m.len(), 1);
        let m = &m[0];
        assert_eq!(m.package, PACKAGE);
        assert!(m.exported);
        let d = parse_declared(&m.meta).unwrap();
        assert_eq!(d.authority, p.authority());
        assert_eq!(d.versions, versions.into_iter().collect(), "{variant:?}");
        assert_eq!(d.legacy_version, legacy, "{variant:?}");
        assert_eq!(check_same_package(m).is_ok(), same_package, "{variant:?}");
        assert_eq!(manifest_shape_problems(&d).len(), problems, "{variant:?}");
    }
    let p = ReferenceProvider::reference();
    let d = parse_declared(&p.manifests()[0].meta).unwrap();
    assert_eq!(plan(&d, &[2, 1]), Plan::NegotiateV2);
}

// ---------------------------------------------------------------- negotiate

#[test]
fn negotiate_success_is_valid() {
    let w = World::reference();
    let o = w.negotiate_raw(A, &[2, 1], &["async_operations", "teleport"]);
    assert!(o.is_success());
    assert_eq!(o.protocol_version(), Some(&Value::Int(2)));
    let data = o.data();
    let offered = vec!["async_operations".to_string(), "teleport".to_string()];
    let pv: BTreeSet<i32> = [1, 2].into();
    let (n, violations) = validate_negotiate(
        &data,
        &NegotiateContext {
            consumer_versions: &[2, 1],
            consumer_capabilities: &offered,
            provider_versions: Some(&pv),
            package: Some(PACKAGE),
        },
    );
    assert!(violations.is_empty(), "{violations:?}");
    assert_eq!(n.selected_version, 2);
    assert_eq!(n.capabilities, caps_set(&["async_operations"]));
    assert_eq!(n.provider_id, PACKAGE);
    assert_eq!(n.limit("max_request_bytes"), Some(65_536));
    assert_eq!(n.limit("max_inline_result_bytes"), Some(262_144));
    assert_eq!(n.limit("max_concurrent_requests"), Some(4));
    assert_eq!(n.limit("idempotency_window_seconds"), Some(86_400));
    assert_eq!(data["expires_at"], "2026-09-02T13:00:00Z");
    assert_eq!(n.session_token.len(), 64);
    assert!(n.session_token.bytes().all(|c| c.is_ascii_hexdigit()));
}

#[test]
fn tokens_are_unique_seeded_and_unpredictable_without_the_seed() {
    let mk = |seed| {
        let w = World::new(ReferenceProvider::new(ProviderConfig {
            seed,
            ..ProviderConfig::default()
        }));
        (0..3)
            .map(|_| w.negotiate_raw(A, &[2], &[]).data()["session_token"].clone())
            .collect::<Vec<_>>()
    };
    let (a, b, c) = (mk(1), mk(1), mk(2));
    assert_eq!(a, b, "same seed, same tokens");
    assert_ne!(a, c);
    let distinct: BTreeSet<String> = a.iter().map(|t| t.to_string()).collect();
    assert_eq!(distinct.len(), 3);
}

#[test]
fn negotiate_without_common_version() {
    let w = World::reference();
    let o = w.negotiate_raw(A, &[3], &[]);
    assert_error(&o, "UNSUPPORTED_VERSION", false);
    let o = w.negotiate_raw(A, &[], &[]);
    assert_error(&o, "UNSUPPORTED_VERSION", false);
    let v2only = World::with_config(ProviderConfig {
        manifest: ManifestVariant::V2Only,
        ..ProviderConfig::default()
    });
    assert_error(
        &v2only.negotiate_raw(A, &[1], &[]),
        "UNSUPPORTED_VERSION",
        false,
    );
}

#[test]
fn negotiate_malformed() {
    let w = World::reference();
    let o = w.call(A, "negotiate", Some(Bundle::new()));
    assert_error(&o, "INVALID_REQUEST", false);
    let b = Bundle::new()
        .with(keys::CONSUMER_VERSIONS, Value::IntArray(vec![2]))
        .with(keys::CONSUMER_CAPABILITIES, Value::str("not json"));
    assert_error(&w.call(A, "negotiate", Some(b)), "INVALID_REQUEST", false);
    let o = w.call(A, "negotiate", None);
    assert_error(&o, "INVALID_REQUEST", false);
}

// ---------------------------------------------------------------- sessions and envelope

#[test]
fn session_is_required_bound_and_expires() {
    let mut w = World::reference();
    w.connect(A);
    assert!(w.v2(A, "list_tools", &rid(1)).is_success());
    // Unknown token.
    let mut b = w.common(A, &rid(2));
    b.insert(keys::SESSION_TOKEN, Value::str("nope"));
    let o = w.call(A, "list_tools", Some(b));
    assert_error(&o, "NEGOTIATION_REQUIRED", true);
    assert_eq!(o.request_id(), Some(rid(2)));
    // Another caller's token.
    let mut b = w.common(A, &rid(3));
    b.insert(keys::SESSION_TOKEN, Value::str(w.token(A)));
    assert_error(
        &w.call(B, "list_tools", Some(b)),
        "NEGOTIATION_REQUIRED",
        true,
    );
    // Missing token: no session either.
    let mut b = w.common(A, &rid(4));
    b.remove(keys::SESSION_TOKEN);
    assert_error(
        &w.call(A, "list_tools", Some(b)),
        "NEGOTIATION_REQUIRED",
        true,
    );
    // A token of the wrong type is a broken envelope.
    let mut b = w.common(A, &rid(4));
    b.insert(keys::SESSION_TOKEN, Value::Int(1));
    assert_error(&w.call(A, "list_tools", Some(b)), "INVALID_REQUEST", false);
    // Expiry.
    w.now += 3_600_000;
    assert_error(
        &w.v2(A, "list_tools", &rid(5)),
        "NEGOTIATION_REQUIRED",
        true,
    );
    // Restart forgets sessions.
    w.now = T0;
    w.connect(A);
    w.restart();
    assert_error(
        &w.v2(A, "list_tools", &rid(6)),
        "NEGOTIATION_REQUIRED",
        true,
    );
}

#[test]
fn a_v1_session_does_not_serve_v2_calls() {
    let mut w = World::reference();
    let o = w.negotiate_raw(A, &[1], &[]);
    assert_eq!(o.data()["selected_version"], 1);
    w.tokens
        .insert(A, o.data()["session_token"].as_str().unwrap().to_string());
    assert_error(
        &w.v2(A, "list_tools", &rid(1)),
        "NEGOTIATION_REQUIRED",
        true,
    );
}

#[test]
fn envelope_errors_echo_and_are_precise() {
    let mut w = World::reference();
    w.connect(A);
    type Mutate = Box<dyn Fn(&mut Bundle)>;
    let cases: Vec<(Mutate, &str)> = vec![
        (
            Box::new(|b| {
                b.insert(keys::PROTOCOL_VERSION, Value::Long(2));
            }),
            "INVALID_REQUEST",
        ),
        (
            Box::new(|b| {
                b.insert(keys::PROTOCOL_VERSION, Value::Int(3));
            }),
            "UNSUPPORTED_VERSION",
        ),
        (
            Box::new(|b| {
                b.remove(keys::DEADLINE_AT_MS);
            }),
            "INVALID_REQUEST",
        ),
        (
            Box::new(|b| {
                b.insert(keys::DEADLINE_AT_MS, Value::Int(5));
            }),
            "INVALID_REQUEST",
        ),
        (
            Box::new(|b| {
                b.remove(keys::TOOL_NAME);
            }),
            "INVALID_REQUEST",
        ),
        (
            Box::new(|b| {
                b.insert(keys::ARGS, Value::Bytes(vec![1]));
            }),
            "INVALID_REQUEST",
        ),
    ];
    for (i, (mutate, code)) in cases.into_iter().enumerate() {
        let id = rid(100 + i as u64);
        let mut b = w.exec_bundle(A, &id, "get_quote", r#"{"symbol":"CLAW"}"#);
        mutate(&mut b);
        let o = w.call(A, "execute_tool", Some(b));
        assert_error(&o, code, false);
        assert_eq!(o.request_id(), Some(id), "case {i}");
    }
    // A request id that is not a UUID is refused, and still echoed.
    let b = w.exec_bundle(A, "req-1", "get_quote", r#"{"symbol":"CLAW"}"#);
    let o = w.call(A, "execute_tool", Some(b));
    assert_error(&o, "INVALID_REQUEST", false);
    assert_eq!(o.request_id().as_deref(), Some("req-1"));
}

#[test]
fn unknown_methods() {
    let mut w = World::reference();
    w.connect(A);
    let o = w.v2(A, "teleport", &rid(1));
    assert_error(&o, "METHOD_NOT_FOUND", false);
    assert_eq!(o.request_id(), Some(rid(1)));
    let o = w.call(A, "teleport", None);
    let v1 = V1Response::from_bundle(&o.bundle).unwrap();
    assert!(matches!(v1, V1Response::Error { ref code, .. } if code == "METHOD_NOT_FOUND"));
    assert!(!o.bundle.contains(keys::RETRYABLE));
}

// ---------------------------------------------------------------- descriptors

#[test]
fn provider_info_is_valid() {
    let mut w = World::reference();
    w.connect(A);
    let o = w.v2(A, "get_provider_info", &rid(1));
    assert!(o.is_success());
    assert_eq!(o.request_id(), Some(rid(1)));
    let (s, v) = validate_provider_info(&o.data(), Some(PACKAGE));
    assert!(v.is_empty(), "{v:?}");
    assert_eq!(s.scopes.len(), 5);
    assert_eq!(s.schema_dialect, DEFAULT_DIALECT);
}

#[test]
fn tool_list_is_valid_and_its_revision_follows_capabilities() {
    let mut w = World::reference();
    let mut revisions = BTreeSet::new();
    for caps in [&[][..], &["async_operations"][..], ALL_CAPS] {
        w.connect_with(A, caps);
        let info = w.v2(A, "get_provider_info", &rid(1)).data();
        let (summary, _) = validate_provider_info(&info, Some(PACKAGE));
        let o = w.v2(A, "list_tools", &rid(2));
        assert!(o.is_success());
        let negotiated = caps_set(caps);
        let (list, v) = validate_tool_list(
            &o.data(),
            &ToolListContext {
                negotiated: &negotiated,
                known_scopes: Some(&summary.scopes),
                dialect: DEFAULT_DIALECT,
            },
        );
        assert!(v.is_empty(), "{v:?}");
        let names: Vec<&str> = list.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "get_quote",
                "list_alerts",
                "create_alert",
                "delete_alert",
                "sync_portfolio",
                "export_history"
            ]
        );
        let sync = list
            .tools
            .iter()
            .find(|t| t.name == "sync_portfolio")
            .unwrap();
        let expect = if caps.contains(&"async_operations") {
            "sync_or_async"
        } else {
            "sync"
        };
        assert_eq!(sync.execution, expect);
        let delete = list
            .tools
            .iter()
            .find(|t| t.name == "delete_alert")
            .unwrap();
        assert_eq!(delete.confirmation, "always");
        // Same capabilities, same revision.
        let again = w.v2(A, "list_tools", &rid(3)).data();
        assert_eq!(again["revision"], o.data()["revision"]);
        revisions.insert(o.data()["revision"].as_str().unwrap().to_string());
    }
    // Without and with async_operations the list differs; large_results and
    // cancellation change nothing in it.
    assert_eq!(revisions.len(), 2);
}

// ---------------------------------------------------------------- execute_tool

#[test]
fn read_tool_success() {
    let mut w = World::reference();
    w.connect(A);
    let o = w.exec(A, &rid(1), "get_quote", r#"{"symbol":"CLAW"}"#);
    assert!(o.is_success(), "{:?}", o.bundle);
    assert_eq!(o.protocol_version(), Some(&Value::Int(2)));
    assert_eq!(o.request_id(), Some(rid(1)));
    assert_eq!(o.data()["kind"], "inline");
    assert_eq!(o.value()["symbol"], "CLAW");
    assert!(o.value()["price"].as_f64().unwrap() > 0.0);
    // Reads change nothing.
    assert_eq!(w.effects(), 0);
    // B holds the read scopes by default.
    w.connect(B);
    assert!(w
        .exec(B, &rid(2), "get_quote", r#"{"symbol":"CLAW"}"#)
        .is_success());
}

#[test]
fn execute_error_paths() {
    let mut w = World::reference();
    w.connect(A);
    assert_error(
        &w.exec(A, &rid(1), "teleport", "{}"),
        "TOOL_NOT_FOUND",
        false,
    );
    let o = w.exec(A, &rid(2), "create_alert", "{not json");
    assert_error(&o, "INVALID_ARGS", false);
    let o = w.exec(
        A,
        &rid(3),
        "create_alert",
        r#"{"symbol":"CLAW","price":-1}"#,
    );
    assert_error(&o, "INVALID_ARGS", false);
    assert!(o.bundle.contains(keys::ERROR_DETAILS));
    let o = w.exec(
        A,
        &rid(4),
        "create_alert",
        r#"{"symbol":"CLAW","price":1,"x":1}"#,
    );
    assert_error(&o, "INVALID_ARGS", false);
    let big = format!(r#"{{"symbol":"{}"}}"#, "A".repeat(70_000));
    assert_error(
        &w.exec(A, &rid(5), "get_quote", &big),
        "INVALID_REQUEST",
        false,
    );
    let deep = "[".repeat(1000) + &"]".repeat(1000);
    assert_error(
        &w.exec(A, &rid(6), "get_quote", &deep),
        "INVALID_ARGS",
        false,
    );
    // A deadline in the past: nothing happens.
    let mut b = w.exec_bundle(A, &rid(7), "create_alert", r#"{"symbol":"CLAW","price":1}"#);
    b.insert(keys::DEADLINE_AT_MS, Value::Long(w.now - 1));
    assert_error(
        &w.call(A, "execute_tool", Some(b)),
        "DEADLINE_EXCEEDED",
        true,
    );
    assert_eq!(w.effects(), 0);
    // The same id then runs once its deadline is in the future.
    let o = w.exec(A, &rid(7), "create_alert", r#"{"symbol":"CLAW","price":1}"#);
    assert!(o.is_success());
    assert_eq!(w.effects(), 1);
}

#[test]
fn create_is_deduplicated_on_canonical_args() {
    let mut w = World::reference();
    w.connect(A);
    let first = w.exec(
        A,
        &rid(1),
        "create_alert",
        r#"{"symbol":"CLAW","price":12.5}"#,
    );
    assert!(first.is_success(), "{:?}", first.bundle);
    let id = first.value()["alert_id"].clone();
    let out = CompiledSchema::compile(
        &json!({"type":"object","required":["alert_id"]}),
        DEFAULT_DIALECT,
    )
    .unwrap();
    assert!(out.is_valid(&first.value()));
    for args in [
        r#"{"symbol":"CLAW","price":12.5}"#,
        r#"{"price":12.5,"symbol":"CLAW"}"#,
        r#"{ "price" : 1.25e1, "symbol" : "CLAW" }"#,
    ] {
        let again = w.exec(A, &rid(1), "create_alert", args);
        assert_eq!(again.bundle, first.bundle, "{args}");
    }
    assert_eq!(w.effects(), 1);
    assert_error(
        &w.exec(
            A,
            &rid(1),
            "create_alert",
            r#"{"symbol":"CLAW","price":13}"#,
        ),
        "INVALID_REQUEST",
        false,
    );
    assert_error(
        &w.exec(
            A,
            &rid(1),
            "delete_alert",
            &json!({"alert_id": id}).to_string(),
        ),
        "INVALID_REQUEST",
        false,
    );
    // A survives restart, and the deadline no longer matters for a replay.
    w.restart();
    w.connect(A);
    let mut b = w.exec_bundle(
        A,
        &rid(1),
        "create_alert",
        r#"{"symbol":"CLAW","price":12.5}"#,
    );
    b.insert(keys::DEADLINE_AT_MS, Value::Long(w.now - 1));
    assert_eq!(w.call(A, "execute_tool", Some(b)).bundle, first.bundle);
    assert_eq!(w.effects(), 1);
    // The record is scoped to the caller.
    w.connect(B);
    w.p.restart();
    let mut w2 = World::with_config(both_full());
    w2.connect(A);
    w2.connect(B);
    let a = w2.exec(A, &rid(9), "create_alert", r#"{"symbol":"CLAW","price":1}"#);
    let b = w2.exec(B, &rid(9), "create_alert", r#"{"symbol":"CLAW","price":1}"#);
    assert!(a.is_success() && b.is_success());
    assert_ne!(a.value(), b.value());
    assert_eq!(w2.effects(), 2);
}

#[test]
fn dedupe_window_ends() {
    let mut w = World::reference();
    w.connect(A);
    let args = r#"{"symbol":"CLAW","price":1}"#;
    let first = w.exec(A, &rid(1), "create_alert", args);
    w.now += 86_400_000;
    w.connect(A);
    assert_eq!(
        w.exec(A, &rid(1), "create_alert", args).bundle,
        first.bundle
    );
    assert_eq!(w.effects(), 1);
    w.now += 1;
    w.connect(A);
    let later = w.exec(A, &rid(1), "create_alert", args);
    assert!(later.is_success());
    assert_ne!(later.value(), first.value());
    assert_eq!(w.effects(), 2);
}

#[test]
fn escalated_create_needs_confirmation() {
    let mut w = World::reference();
    w.connect(A);
    let args = r#"{"symbol":"CLAW","price":25000}"#;
    let ask = w.exec(A, &rid(1), "create_alert", args);
    assert_error(&ask, "USER_ACTION_REQUIRED", false);
    assert_eq!(ask.request_id(), Some(rid(1)));
    let target = ask.resolution().unwrap();
    assert_eq!(target.creator_package, PACKAGE);
    assert_eq!(target.creator_uid, PROVIDER_UID);
    assert!(target.immutable && target.activity);
    assert_eq!(target.component.as_deref(), Some(CONFIRM_ACTIVITY));
    match ask.bundle.get(keys::RESOLUTION) {
        Some(Value::PendingIntent(pi)) => {
            assert_eq!(pi.creator_package.as_deref(), Some(PACKAGE));
            assert_eq!(pi.immutable, Some(true));
        }
        other => panic!("resolution {other:?}"),
    }
    let token = ask.resume_token().unwrap();
    assert_eq!(w.effects(), 0, "no effect before approval");
    // A retry without the token gets the same pending confirmation.
    let again = w.exec(A, &rid(1), "create_alert", args);
    assert_eq!(again.resume_token(), Some(token.clone()));
    // Not decided yet.
    assert_eq!(
        w.resume(A, &rid(1), "create_alert", args, &token)
            .resume_token(),
        Some(token.clone())
    );
    // Dismissing decides nothing.
    let r = w.decide(A, &ask, Decision::Dismiss);
    assert!(r.launched && !r.decision_applied);
    assert_eq!(r.result_code, 0);
    let o = w.resume(A, &rid(1), "create_alert", args, &token);
    assert_error(&o, "USER_ACTION_REQUIRED", false);
    assert_eq!(w.effects(), 0);
    let r = w.decide(A, &ask, Decision::Approve);
    assert!(r.launched && r.decision_applied);
    assert_eq!(r.result_code, -1);
    // Other args bytes, even canonically equal ones, are refused.
    let reordered = r#"{"price":25000,"symbol":"CLAW"}"#;
    assert_error(
        &w.resume(A, &rid(1), "create_alert", reordered, &token),
        "INVALID_REQUEST",
        false,
    );
    let done = w.resume(A, &rid(1), "create_alert", args, &token);
    assert!(done.is_success(), "{:?}", done.bundle);
    assert_eq!(w.effects(), 1);
    // Replays return the recorded result; the token cannot start another execution.
    assert_eq!(
        w.resume(A, &rid(1), "create_alert", args, &token).bundle,
        done.bundle
    );
    assert_eq!(w.exec(A, &rid(1), "create_alert", args).bundle, done.bundle);
    assert_error(
        &w.resume(A, &rid(2), "create_alert", args, &token),
        "INVALID_REQUEST",
        false,
    );
    assert_eq!(w.effects(), 1);
    // A decision on a used confirmation is not applied.
    assert!(!w.decide(A, &ask, Decision::Deny).decision_applied);
}

#[test]
fn denial_is_terminal_user_cancelled() {
    let mut w = World::reference();
    w.connect(A);
    let created = w.exec(A, &rid(1), "create_alert", r#"{"symbol":"CLAW","price":1}"#);
    let args = json!({"alert_id": created.value()["alert_id"]}).to_string();
    let o = w.exec_confirmed(A, &rid(2), "delete_alert", &args, Decision::Deny);
    assert_error(&o, "USER_CANCELLED", false);
    assert_eq!(w.effects(), 1);
    assert_eq!(w.exec(A, &rid(2), "delete_alert", &args).bundle, o.bundle);
    assert_eq!(w.alert_ids().len(), 1);
    let o = w.exec_confirmed(A, &rid(3), "delete_alert", &args, Decision::Approve);
    assert!(o.is_success());
    assert_eq!(o.value(), json!({"deleted": true}));
    assert_eq!(w.effects(), 2);
    assert!(w.alert_ids().is_empty());
}

#[test]
fn resume_token_expires() {
    let mut w = World::reference();
    w.connect(A);
    let args = r#"{"symbol":"CLAW","price":25000}"#;
    let ask = w.exec(A, &rid(1), "create_alert", args);
    w.decide(A, &ask, Decision::Approve);
    w.now += 600_001;
    w.connect(A);
    let o = w.resume(
        A,
        &rid(1),
        "create_alert",
        args,
        &ask.resume_token().unwrap(),
    );
    assert_error(&o, "INVALID_REQUEST", false);
    assert_error(
        &w.resume(A, &rid(1), "create_alert", args, "garbage"),
        "INVALID_REQUEST",
        false,
    );
    assert_eq!(w.effects(), 0);
}

#[test]
fn missing_scope_asks_for_authorization() {
    let mut w = World::reference();
    w.connect(B);
    let args = r#"{"symbol":"CLAW","price":1}"#;
    let ask = w.exec(B, &rid(1), "create_alert", args);
    assert_error(&ask, "AUTH_REQUIRED", false);
    let target = ask.resolution().unwrap();
    assert_eq!(target.component.as_deref(), Some(GRANT_ACTIVITY));
    assert!(target.immutable);
    assert_eq!(w.effects(), 0);
    w.decide(B, &ask, Decision::Approve);
    let o = w.resume(
        B,
        &rid(1),
        "create_alert",
        args,
        &ask.resume_token().unwrap(),
    );
    assert!(o.is_success(), "{:?}", o.bundle);
    assert_eq!(w.effects(), 1);
    // The grant persists (and survives restart).
    w.restart();
    w.connect(B);
    assert!(w.exec(B, &rid(2), "create_alert", args).is_success());
    // Then a delete still needs its own confirmation, with a new token.
    let del = json!({"alert_id": o.value()["alert_id"]}).to_string();
    let ask = w.exec(B, &rid(3), "delete_alert", &del);
    assert_error(&ask, "USER_ACTION_REQUIRED", false);
}

#[test]
fn authorization_then_confirmation_uses_two_tokens() {
    let mut w = World::reference();
    w.connect(B);
    let del = r#"{"alert_id":"alert-1"}"#;
    let auth = w.exec(B, &rid(1), "delete_alert", del);
    assert_error(&auth, "AUTH_REQUIRED", false);
    w.decide(B, &auth, Decision::Approve);
    let t1 = auth.resume_token().unwrap();
    let confirm = w.resume(B, &rid(1), "delete_alert", del, &t1);
    assert_error(&confirm, "USER_ACTION_REQUIRED", false);
    let t2 = confirm.resume_token().unwrap();
    assert_ne!(t1, t2);
    assert_error(
        &w.resume(B, &rid(1), "delete_alert", del, &t1),
        "INVALID_REQUEST",
        false,
    );
    w.decide(B, &confirm, Decision::Approve);
    let o = w.resume(B, &rid(1), "delete_alert", del, &t2);
    assert_eq!(o.value(), json!({"deleted": false}));
    assert_eq!(w.effects(), 1);
}

// ---------------------------------------------------------------- operations

fn op_state(o: &Outcome) -> String {
    o.data()["state"].as_str().unwrap_or_default().to_string()
}

#[test]
fn async_operation_lifecycle() {
    let mut w = World::reference();
    w.connect(A);
    let acc = w.exec(A, &rid(1), "sync_portfolio", "{}");
    assert_eq!(acc.status(), "accepted", "{:?}", acc.bundle);
    assert_eq!(acc.request_id(), Some(rid(1)));
    assert_eq!(acc.data()["poll_after_ms"], 100);
    let op = acc.operation_id().unwrap();
    let q = w.get_op(A, &rid(1), &op);
    assert_eq!(op_state(&q), "queued");
    assert_eq!(q.data()["poll_after_ms"], 100);
    w.now += 175;
    let r = w.get_op(A, &rid(1), &op);
    assert_eq!(op_state(&r), "running");
    assert_eq!(r.data()["progress"]["total"], 100);
    assert_eq!(r.data()["progress"]["current"], 50);
    assert_eq!(w.effects(), 0);
    w.now += 125;
    let s = w.get_op(A, &rid(1), &op);
    assert_eq!(op_state(&s), "succeeded");
    assert_eq!(
        s.data()["result"],
        json!({"kind": "inline", "value": {"synced": 1}})
    );
    assert!(s.data().get("poll_after_ms").is_none());
    assert_eq!(w.effects(), 1);
    // Replays of the execution return the same operation.
    assert_eq!(
        w.exec(A, &rid(1), "sync_portfolio", "{}").bundle,
        acc.bundle
    );
    // Cancelling a finished operation is a conflict.
    assert_error(&w.cancel_op(A, &rid(1), &op), "CONFLICT", false);
    assert_eq!(op_state(&w.get_op(A, &rid(1), &op)), "succeeded");
    assert_eq!(w.effects(), 1);
}

#[test]
fn failing_and_cancelled_operations_have_no_effect() {
    let mut w = World::reference();
    w.connect(A);
    let op = w
        .exec(A, &rid(1), "sync_portfolio", r#"{"fail":true}"#)
        .operation_id()
        .unwrap();
    w.now += 400;
    let f = w.get_op(A, &rid(1), &op);
    assert_eq!(op_state(&f), "failed");
    assert_eq!(f.data()["error"]["error_code"], "CONFLICT");
    assert_eq!(f.data()["error"]["retryable"], false);
    assert!(f.data()["error"]["error_message"].is_string());
    let op2 = w
        .exec(A, &rid(2), "sync_portfolio", "{}")
        .operation_id()
        .unwrap();
    w.now += 100;
    let c = w.cancel_op(A, &rid(2), &op2);
    assert!(c.is_success());
    assert_eq!(
        c.data(),
        json!({"operation_id": op2, "state": "cancellation_requested"})
    );
    w.now += 1000;
    assert_eq!(op_state(&w.get_op(A, &rid(2), &op2)), "cancelled");
    assert!(w.cancel_op(A, &rid(2), &op2).is_success());
    assert_eq!(w.effects(), 0);
}

#[test]
fn operations_are_bound_and_gated() {
    let mut w = World::with_config(both_full());
    w.connect(A);
    w.connect(B);
    let op = w
        .exec(A, &rid(1), "sync_portfolio", "{}")
        .operation_id()
        .unwrap();
    assert_error(&w.get_op(A, &rid(2), &op), "INVALID_REQUEST", false);
    let other = w.get_op(B, &rid(1), &op);
    assert_error(&other, "INVALID_REQUEST", false);
    assert!(!other.bundle.contains(keys::DATA));
    assert_error(&w.cancel_op(B, &rid(1), &op), "INVALID_REQUEST", false);
    assert_error(&w.get_op(A, &rid(1), "op_nope"), "INVALID_REQUEST", false);
    // Capabilities.
    w.connect_with(A, &["async_operations"]);
    assert_error(
        &w.cancel_op(A, &rid(1), &op),
        "UNSUPPORTED_CAPABILITY",
        false,
    );
    w.connect_with(A, &[]);
    assert_error(&w.get_op(A, &rid(1), &op), "UNSUPPORTED_CAPABILITY", false);
    // Without async_operations the same tool runs synchronously.
    let o = w.exec(A, &rid(3), "sync_portfolio", "{}");
    assert!(o.is_success(), "{:?}", o.bundle);
    assert_eq!(o.value()["synced"], 1);
    let o = w.exec(A, &rid(4), "sync_portfolio", r#"{"fail":true}"#);
    assert_error(&o, "CONFLICT", false);
    assert_eq!(
        w.exec(A, &rid(4), "sync_portfolio", r#"{"fail":true}"#)
            .bundle,
        o.bundle
    );
}

#[test]
fn a_replay_into_a_session_without_async_operations_never_gets_accepted() {
    // §2.3, §4.4: `accepted` only after async_operations was negotiated.
    // A replay of an execution that became an operation, from a session
    // without it, gets a retryable UNAVAILABLE while the operation runs
    // (asking for the same request_id again after poll_after_ms), then the
    // terminal result (§6: the same result for the same request).
    // validate_before_dedupe reaches the record on another path.
    for config in [
        ProviderConfig::default(),
        ProviderConfig::default()
            .with_latitude(cetp_reference::provider::Variant::ValidateBeforeDedupe),
    ] {
        replay_without_async_operations(World::with_config(config));
    }
}

fn replay_without_async_operations(mut w: World) {
    w.connect(A);
    let acc = w.exec(A, &rid(1), "sync_portfolio", "{}");
    assert_eq!(acc.status(), "accepted", "{:?}", acc.bundle);
    w.connect_with(A, &[]);
    let running = w.exec(A, &rid(1), "sync_portfolio", "{}");
    assert_error(&running, "UNAVAILABLE", true);
    let retry_after = match running.response() {
        cetp_proto::envelope::Response::Error(e) => e.retry_after_ms,
        _ => None,
    };
    assert_eq!(retry_after, Some(100), "{:?}", running.bundle);
    w.now += 400;
    let done = w.exec(A, &rid(1), "sync_portfolio", "{}");
    assert!(done.is_success(), "{:?}", done.bundle);
    assert_eq!(done.value()["synced"], 1);
    assert_eq!(w.effects(), 1);
    // A session with async_operations still gets the same operation.
    w.connect(A);
    assert_eq!(
        w.exec(A, &rid(1), "sync_portfolio", "{}").bundle,
        acc.bundle
    );
}

#[test]
fn operations_survive_restart_and_expire_after_the_window() {
    let mut w = World::reference();
    w.connect(A);
    let op = w
        .exec(A, &rid(1), "sync_portfolio", "{}")
        .operation_id()
        .unwrap();
    w.restart();
    w.now += 500;
    w.connect(A);
    let s = w.get_op(A, &rid(1), &op);
    assert_eq!(op_state(&s), "succeeded");
    assert_eq!(w.effects(), 1);
    w.now = T0 + 86_400_000;
    w.connect(A);
    assert_eq!(w.get_op(A, &rid(1), &op).data(), s.data());
    w.now += 1;
    w.connect(A);
    assert_error(&w.get_op(A, &rid(1), &op), "RESULT_EXPIRED", false);
}

// ---------------------------------------------------------------- large results

#[test]
fn large_results() {
    let mut w = World::reference();
    w.connect(A);
    let small = w.exec(A, &rid(1), "export_history", r#"{"rows":10}"#);
    assert_eq!(small.data()["kind"], "inline");
    assert_eq!(small.value()["rows"].as_array().unwrap().len(), 10);
    let big = w.exec(A, &rid(2), "export_history", r#"{"rows":5000}"#);
    assert!(big.is_success(), "{:?}", big.code());
    let data = big.data();
    assert_eq!(data["kind"], "file");
    assert_eq!(data["media_type"], "application/json");
    let bytes = big.file().expect("result_fd attachment");
    assert_eq!(data["size_bytes"].as_u64(), Some(bytes.len() as u64));
    assert_eq!(data["sha256"].as_str(), Some(sha256_hex(&bytes).as_str()));
    let value: Json = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(value["rows"].as_array().unwrap().len(), 5000);
    assert!(bytes.len() > 262_144);
    w.connect_with(A, &["async_operations"]);
    let refused = w.exec(A, &rid(3), "export_history", r#"{"rows":5000}"#);
    assert_error(&refused, "RESULT_TOO_LARGE", false);
    // The boundary: find the largest row count still answered inline; its
    // data text fits the limit, one more row does not.
    let inline = |n: u64| {
        let o = w.exec(A, &rid(4), "export_history", &format!(r#"{{"rows":{n}}}"#));
        o.is_success()
            .then(|| o.bundle.get_string(keys::DATA).unwrap().len())
    };
    let (mut lo, mut hi) = (10u64, 5000u64);
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if inline(mid).is_some() {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let fits = inline(lo).expect("inline at the boundary");
    assert!(fits <= 262_144 && fits > 262_000, "{fits}");
    assert!(inline(lo + 1).is_none());
}

// ---------------------------------------------------------------- v1 view

#[test]
fn v1_view_is_read_only() {
    let w = World::reference();
    let o = w.call(B, "list_tools", None);
    let V1Response::Success(data) = V1Response::from_bundle(&o.bundle).unwrap() else {
        panic!("{:?}", o.bundle)
    };
    assert!(!o.bundle.contains(keys::PROTOCOL_VERSION));
    let (names, v) = validate_v1_tool_list(&data);
    assert!(v.is_empty());
    assert_eq!(names, ["get_quote", "list_alerts", "export_history"]);
    for t in data["tools"].as_array().unwrap() {
        assert!(t["parameters"].is_object());
    }
    let run = |tool: &str, args: &str| {
        let b = cetp_proto::envelope::v1_execute_bundle(tool, args, None);
        V1Response::from_bundle(&w.call(B, "execute_tool", Some(b)).bundle).unwrap()
    };
    let V1Response::Success(q) = run("get_quote", r#"{"symbol":"CLAW"}"#) else {
        panic!()
    };
    assert_eq!(q["symbol"], "CLAW");
    for tool in ["create_alert", "delete_alert", "sync_portfolio"] {
        assert!(
            matches!(run(tool, "{}"), V1Response::Error { code, .. } if code == "TOOL_NOT_FOUND")
        );
    }
    assert!(
        matches!(run("get_quote", "{}"), V1Response::Error { code, .. } if code == "INVALID_ARGS")
    );
    assert!(
        matches!(run("export_history", r#"{"rows":5000}"#), V1Response::Error { code, .. } if code == "INVALID_ARGS")
    );
    let info = w.call(B, "get_provider_info", None);
    let V1Response::Success(info) = V1Response::from_bundle(&info.bundle).unwrap() else {
        panic!()
    };
    assert!(info["provider_name"].is_string());
    assert_eq!(info["scopes"].as_array().unwrap().len(), 5);
    assert!(info.get("provider_id").is_none());
    let op = w.call(B, "get_operation", None);
    assert!(
        matches!(V1Response::from_bundle(&op.bundle).unwrap(), V1Response::Error { code, .. } if code == "METHOD_NOT_FOUND")
    );
}

#[test]
fn v2_only_and_v1_only() {
    let w = World::with_config(ProviderConfig {
        manifest: ManifestVariant::V2Only,
        ..ProviderConfig::default()
    });
    let o = w.call(B, "list_tools", None);
    assert_error(&o, "INVALID_REQUEST", false);
    let w = World::with_config(ProviderConfig {
        manifest: ManifestVariant::V1Only,
        ..ProviderConfig::default()
    });
    let o = w.negotiate_raw(A, &[2, 1], &[]);
    assert!(
        matches!(V1Response::from_bundle(&o.bundle).unwrap(), V1Response::Error { code, .. } if code == "METHOD_NOT_FOUND")
    );
    assert!(!o.bundle.contains(keys::RETRYABLE));
    let o = w.call(B, "list_tools", None);
    assert!(matches!(
        V1Response::from_bundle(&o.bundle).unwrap(),
        V1Response::Success(_)
    ));
}

#[test]
fn request_ids_are_uuids_and_stable() {
    assert!(is_uuid(&rid(1)));
    let mut w = World::reference();
    w.connect(A);
    // A plain read may reuse its request id freely.
    let a = w.exec(A, &rid(1), "get_quote", r#"{"symbol":"CLAW"}"#);
    let b = w.exec(A, &rid(1), "get_quote", r#"{"symbol":"SEED"}"#);
    assert!(a.is_success() && b.is_success());
}

#[test]
fn lifetimes_are_configurable() {
    let mut w = World::with_config(ProviderConfig {
        session_ttl_ms: 1_000,
        resume_token_ttl_ms: 500,
        ..ProviderConfig::default()
    });
    let o = w.negotiate_raw(A, &[2], &[]);
    assert_eq!(o.data()["expires_at"], "2026-09-02T12:00:01Z");
    w.connect(A);
    let ask = w.exec(
        A,
        &rid(1),
        "create_alert",
        r#"{"symbol":"CLAW","price":25000}"#,
    );
    w.decide(A, &ask, Decision::Approve);
    w.now += 501;
    let late = w.resume(
        A,
        &rid(1),
        "create_alert",
        r#"{"symbol":"CLAW","price":25000}"#,
        &ask.resume_token().unwrap(),
    );
    assert_error(&late, "INVALID_REQUEST", false);
    w.now += 500;
    assert_error(
        &w.v2(A, "list_tools", &rid(2)),
        "NEGOTIATION_REQUIRED",
        true,
    );
}
