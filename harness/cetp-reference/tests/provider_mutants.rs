//! One test per mutant and app: the same scenario against the unmutated app
//! and against the mutant must be told apart by what a Consumer can observe.
//! The conformance suite adds the real killing cases; these prove every fault
//! is reachable through the public Provider interface of each app it has a
//! place in.

mod provider_support;

use cetp_proto::canonical::sha256_hex;
use cetp_proto::descriptor::{
    validate_provider_info, validate_tool_list, ToolListContext, Violation,
};
use cetp_proto::envelope::{keys, V1Response};
use cetp_proto::error::leaks_internal_detail;
use cetp_proto::provider::{Attachment, Decision, ProviderCall, Reply};
use cetp_proto::schema::DEFAULT_DIALECT;
use cetp_proto::Value;
use cetp_reference::app::ProviderApp;
use cetp_reference::provider::{
    thread_sleeper, FixtureSet, Mutant, ProviderConfig, ReferenceProvider, PACKAGE,
};
use provider_support::*;
use serde_json::{json, Value as Json};
use std::collections::BTreeSet;
use std::sync::Barrier;

const CREATE: &str = r#"{"symbol":"CLAW","price":2}"#;
const HIGH: &str = r#"{"symbol":"CLAW","price":25000}"#;
const QUOTE: &str = r#"{"symbol":"CLAW"}"#;
const BAD_CREATE: &str = r#"{"symbol":"CLAW","price":-1}"#;

fn brief(o: &Outcome) -> String {
    format!(
        "{} {:?} retryable={:?}",
        o.status(),
        o.code(),
        o.retryable()
    )
}

/// Identity b without `history.read`, so that `export_history` is refused to it.
fn b_without_history() -> ProviderConfig {
    let mut c = ProviderConfig::default();
    let mut b = ProviderConfig::all_scopes();
    b.remove("history.read");
    c.grants.insert(B, b);
    c
}

fn slow() -> ProviderConfig {
    ProviderConfig {
        effect_delay_ms: 300,
        sleeper: thread_sleeper(),
        ..ProviderConfig::default()
    }
}

fn rules(v: &[Violation]) -> Vec<&'static str> {
    v.iter().map(|v| v.rule).collect()
}

fn tool_list_rules(w: &mut World, caps: &[&str]) -> String {
    w.connect_with(A, caps);
    let negotiated: BTreeSet<String> = caps.iter().map(|s| s.to_string()).collect();
    let data = w.v2(A, "list_tools", &rid(1)).data();
    let (_, v) = validate_tool_list(
        &data,
        &ToolListContext {
            negotiated: &negotiated,
            known_scopes: None,
            dialect: DEFAULT_DIALECT,
        },
    );
    format!("{:?}", rules(&v))
}

fn tools(w: &mut World, caps: &[&str]) -> Json {
    w.connect_with(A, caps);
    w.v2(A, "list_tools", &rid(1)).data()
}

fn provider_info_rules(w: &mut World) -> String {
    w.connect(A);
    let (_, v) =
        validate_provider_info(&w.v2(A, "get_provider_info", &rid(1)).data(), Some(PACKAGE));
    format!("{:?}", rules(&v))
}

/// Asks for confirmation of an escalated create, plays `decision`, resumes.
fn confirm_high(w: &mut World, decision: Decision) -> Outcome {
    w.connect(A);
    w.exec_confirmed(A, &rid(1), "create_alert", HIGH, decision)
}

fn start_op(w: &mut World) -> String {
    w.connect(A);
    w.exec(A, &rid(1), "sync_portfolio", "{}")
        .operation_id()
        .expect("accepted")
}

fn differs(name: &str, base: ProviderConfig, scenario: fn(&mut World) -> String) {
    let fault = Mutant::parse(name).unwrap_or_else(|| panic!("no fault {name}"));
    let reference = scenario(&mut World::with_config(base.clone()));
    let mut cfg = base;
    cfg.faults.insert(fault);
    let mutant = scenario(&mut World::with_config(cfg));
    assert_ne!(
        reference, mutant,
        "{name}: the fault changed nothing observable ({reference})"
    );
}

macro_rules! mutants {
    ($( $name:ident $([$cfg:expr])? => $scenario:expr; )*) => {
        $(
            #[test]
            fn $name() {
                #[allow(unused_mut, unused_assignments)]
                let mut base = ProviderConfig::default();
                $( base = $cfg; )?
                differs(stringify!($name), base, $scenario);
            }
        )*
        const TESTED: &[&str] = &[$(stringify!($name)),*];
    };
}

mutants! {
    // ---- negotiation and sessions
    negotiate_picks_lowest => |w| w.negotiate_raw(A, &[2, 1], &[]).data()["selected_version"].to_string();
    negotiate_ignores_no_common => |w| brief(&w.negotiate_raw(A, &[3], &[]));
    negotiate_extra_capability => |w| w.negotiate_raw(A, &[2], &[]).data()["capabilities"].to_string();
    negotiate_limits_below_minimum => |w| {
        let limit = w.negotiate_raw(A, &[2], &[]).data()["limits"]["max_request_bytes"].clone();
        w.connect(A);
        let args = json!({"symbol": "X".repeat(20_000)}).to_string();
        format!("{limit} {}", brief(&w.exec(A, &rid(1), "get_quote", &args)))
    };
    session_token_too_long => |w| w.connect(A).len().to_string();
    session_token_predictable => |w| {
        let t = w.connect(A);
        format!("{}", t.starts_with("session-"))
    };
    session_not_bound_to_caller => |w| {
        w.connect(A);
        let b = w.common(A, &rid(1));
        brief(&w.call(B, "list_tools", Some(b)))
    };
    session_not_checked => |w| {
        let mut b = w.common(A, &rid(1));
        b.remove(keys::SESSION_TOKEN);
        let missing = brief(&w.call(A, "list_tools", Some(b)));
        let mut b = w.common(A, &rid(1));
        b.insert(keys::SESSION_TOKEN, Value::str("garbage"));
        format!("{missing} / {}", brief(&w.call(A, "list_tools", Some(b))))
    };
    negotiation_required_not_retryable => |w| brief(&w.v2(A, "list_tools", &rid(1)));
    session_never_expires => |w| {
        w.connect(A);
        w.now += 2 * 3_600_000;
        brief(&w.v2(A, "list_tools", &rid(1)))
    };
    capabilities_changed_in_session => |w| {
        let first = w.connect(A);
        let before = w.v2(A, "list_tools", &rid(1)).data()["revision"].clone();
        w.connect_with(A, &[]);
        w.tokens.insert(A, first);
        let after = w.v2(A, "list_tools", &rid(2)).data()["revision"].clone();
        format!("{}", before == after)
    };
    // ---- envelope
    long_protocol_version_as_v1 => |w| {
        w.connect(A);
        let mut b = w.common(A, &rid(1));
        b.insert(keys::PROTOCOL_VERSION, Value::Long(2));
        let o = w.call(A, "list_tools", Some(b));
        format!("{} revision={}", brief(&o), o.data().get("revision").is_some())
    };
    missing_deadline_answers_deadline_exceeded => |w| {
        w.connect(A);
        let mut b = w.exec_bundle(A, &rid(1), "get_quote", QUOTE);
        b.remove(keys::DEADLINE_AT_MS);
        brief(&w.call(A, "execute_tool", Some(b)))
    };
    lenient_request_id => |w| {
        w.connect(A);
        brief(&w.exec(A, "req-1", "get_quote", QUOTE))
    };
    unsupported_version_accepted => |w| {
        w.connect(A);
        let mut b = w.exec_bundle(A, &rid(1), "get_quote", QUOTE);
        b.insert(keys::PROTOCOL_VERSION, Value::Int(3));
        brief(&w.call(A, "execute_tool", Some(b)))
    };
    unknown_method_wrong_code => |w| {
        w.connect(A);
        brief(&w.v2(A, "teleport", &rid(1)))
    };
    unknown_v1_method_wrong_code => |w| {
        format!("{:?}", w.call(A, "teleport", None).code())
    };
    // ---- errors
    no_request_id_echo => |w| {
        w.connect(A);
        format!("{:?}", w.exec(A, &rid(1), "teleport", "{}").request_id())
    };
    no_protocol_version_echo => |w| {
        w.connect(A);
        format!("{:?}", w.exec(A, &rid(1), "teleport", "{}").protocol_version())
    };
    wrong_request_id_echo => |w| {
        w.connect(A);
        let o = w.exec(A, &rid(1), "get_quote", QUOTE);
        format!("{}", o.request_id() == Some(rid(1)))
    };
    invalid_args_retryable => |w| {
        w.connect(A);
        brief(&w.exec(A, &rid(1), "create_alert", BAD_CREATE))
    };
    unknown_error_code => |w| {
        w.connect(A);
        brief(&w.exec(A, &rid(1), "create_alert", BAD_CREATE))
    };
    stack_trace_in_message => |w| {
        w.connect(A);
        let o = w.exec(A, &rid(1), "create_alert", BAD_CREATE);
        format!("{:?}", leaks_internal_detail(&o.message()))
    };
    error_missing_retryable => |w| {
        w.connect(A);
        format!("{}", w.exec(A, &rid(1), "teleport", "{}").bundle.contains(keys::RETRYABLE))
    };
    refusals_thrown => |w| {
        w.connect(A);
        let r = w.p.call(
            &identity(A),
            w.now,
            &ProviderCall {
                method: "execute_tool".into(),
                arg: None,
                extras: Some(w.exec_bundle(A, &rid(1), "teleport", "{}")),
            },
        );
        format!("{}", matches!(r, Reply::Threw { .. }))
    };
    invalid_args_wrong_code => |w| {
        w.connect(A);
        brief(&w.exec(A, &rid(1), "create_alert", BAD_CREATE))
    };
    rate_limited_not_retryable [slow()] => |w| {
        w.connect(A);
        let barrier = Barrier::new(5);
        let outs: Vec<Outcome> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..5u64)
                .map(|i| {
                    let (w, barrier) = (&*w, &barrier);
                    s.spawn(move || {
                        barrier.wait();
                        w.exec(A, &rid(10 + i), "create_alert", CREATE)
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let limited: Vec<String> = outs
            .iter()
            .filter(|o| o.code().as_deref() == Some("RATE_LIMITED"))
            .map(brief)
            .collect();
        assert!(!limited.is_empty());
        format!("{limited:?}")
    };
    // ---- descriptors
    tool_name_invalid => |w| tool_list_rules(w, ALL_CAPS);
    duplicate_tool_names => |w| tool_list_rules(w, ALL_CAPS);
    high_risk_without_always => |w| {
        let rules = tool_list_rules(w, ALL_CAPS);
        let o = w.exec(A, &rid(2), "delete_alert", r#"{"alert_id":"alert-1"}"#);
        format!("{rules} {}", brief(&o))
    };
    sync_or_async_without_negotiation => |w| tool_list_rules(w, &[]);
    unknown_annotation_enum => |w| tool_list_rules(w, ALL_CAPS);
    remote_ref_in_schema => |w| tool_list_rules(w, ALL_CAPS);
    scope_name_invalid => provider_info_rules;
    unknown_scope_sensitivity => provider_info_rules;
    provider_id_outside_namespace => |w| {
        let n = w.negotiate_raw(A, &[2], &[]).data()["provider_id"].clone();
        format!("{n} {}", provider_info_rules(w))
    };
    provider_id_unstable => |w| {
        w.connect(A);
        w.v2(A, "get_provider_info", &rid(1)).data()["provider_id"].to_string()
    };
    annotation_booleans_as_strings => |w| tools(w, &[])["tools"][0]["annotations"]["destructive"].to_string();
    no_escalation => |w| {
        w.connect(A);
        brief(&w.exec(A, &rid(1), "create_alert", HIGH))
    };
    cancel_reports_wrong_state => |w| {
        let op = start_op(w);
        w.cancel_op(A, &rid(1), &op).data()["state"].to_string()
    };
    poll_after_ms_missing => |w| {
        w.connect(A);
        w.exec(A, &rid(1), "sync_portfolio", "{}").data()["poll_after_ms"].to_string()
    };
    operation_result_unwrapped => |w| {
        let op = start_op(w);
        w.now += 400;
        w.get_op(A, &rid(1), &op).data()["result"].to_string()
    };
    failed_operation_without_error => |w| {
        w.connect(A);
        let op = w.exec(A, &rid(1), "sync_portfolio", r#"{"fail":true}"#).operation_id().expect("accepted");
        w.now += 400;
        w.get_op(A, &rid(1), &op).data()["error"].to_string()
    };
    provider_info_missing => |w| {
        w.connect(A);
        brief(&w.v2(A, "get_provider_info", &rid(1)))
    };
    static_revision => |w| {
        let a = tools(w, &[])["revision"].clone();
        let b = tools(w, ALL_CAPS)["revision"].clone();
        format!("{}", a == b)
    };
    schema_changed_revision_kept => |w| {
        let list = tools(w, ALL_CAPS);
        format!(
            "{} {}",
            list["revision"], list["tools"][0]["input_schema"]["properties"]["symbol"]["maxLength"]
        )
    };
    output_violates_schema => |w| {
        w.connect(A);
        w.exec(A, &rid(1), "get_quote", QUOTE).value()["price"].is_number().to_string()
    };
    missing_output_schema => |w| tool_list_rules(w, ALL_CAPS);
    // ---- v1 and manifest
    v1_lists_write_tools => |w| w.call(B, "list_tools", None).bundle.get_json(keys::DATA).unwrap()["tools"]
        .as_array()
        .map(|t| t.len())
        .unwrap_or(0)
        .to_string();
    v1_executes_write_tool => |w| {
        let b = cetp_proto::envelope::v1_execute_bundle("create_alert", CREATE, None);
        let o = w.call(A, "execute_tool", Some(b));
        let kind = match V1Response::from_bundle(&o.bundle).unwrap() {
            V1Response::Success(_) => "success".to_string(),
            V1Response::Error { code, .. } => code,
        };
        format!("{kind} effects={}", w.effects())
    };
    v1_skips_scope_check [b_without_history()] => |w| {
        let b = cetp_proto::envelope::v1_execute_bundle("export_history", r#"{"rows":10}"#, None);
        let o = w.call(B, "execute_tool", Some(b));
        match V1Response::from_bundle(&o.bundle).unwrap() {
            V1Response::Success(_) => "success".to_string(),
            V1Response::Error { code, .. } => code,
        }
    };
    dual_stack_without_version_1 => |w| format!("{:?}", w.p.manifests()[0].meta);
    authority_package_mismatch => |w| format!("{:?}", w.p.manifests()[0].authority_package);
    // ---- idempotency
    no_dedupe => |w| {
        w.connect(A);
        w.exec(A, &rid(1), "create_alert", CREATE);
        w.exec(A, &rid(1), "create_alert", CREATE);
        w.effects().to_string()
    };
    dedupe_ignores_args => |w| {
        w.connect(A);
        w.exec(A, &rid(1), "create_alert", CREATE);
        brief(&w.exec(A, &rid(1), "create_alert", r#"{"symbol":"SEED","price":3}"#))
    };
    dedupe_per_tool => |w| {
        w.connect_with(A, &[]);
        w.exec(A, &rid(1), "create_alert", CREATE);
        let o = w.exec(A, &rid(1), "sync_portfolio", "{}");
        format!("{} effects={}", brief(&o), w.effects())
    };
    dedupe_not_caller_bound [both_full()] => |w| {
        w.connect(A);
        w.connect(B);
        let a = w.exec(A, &rid(1), "create_alert", CREATE);
        let b = w.exec(B, &rid(1), "create_alert", CREATE);
        format!("same={} effects={}", a.value() == b.value(), w.effects())
    };
    dedupe_lost_on_restart => |w| {
        w.connect(A);
        w.exec(A, &rid(1), "create_alert", CREATE);
        w.restart();
        w.connect(A);
        w.exec(A, &rid(1), "create_alert", CREATE);
        w.effects().to_string()
    };
    concurrent_double_execution [slow()] => |w| {
        w.connect(A);
        let barrier = Barrier::new(2);
        std::thread::scope(|s| {
            let w = &*w;
            let hs: Vec<_> = (0..2)
                .map(|_| {
                    let barrier = &barrier;
                    s.spawn(move || {
                        barrier.wait();
                        w.exec(A, &rid(1), "create_alert", CREATE)
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
        });
        w.effects().to_string()
    };
    // ---- deadlines
    deadline_checked_after_effect => |w| {
        w.connect(A);
        let mut b = w.exec_bundle(A, &rid(1), "create_alert", CREATE);
        b.insert(keys::DEADLINE_AT_MS, Value::Long(w.now - 1));
        let o = w.call(A, "execute_tool", Some(b));
        format!("{} effects={}", brief(&o), w.effects())
    };
    deadline_ignored => |w| {
        w.connect(A);
        let mut b = w.exec_bundle(A, &rid(1), "create_alert", CREATE);
        b.insert(keys::DEADLINE_AT_MS, Value::Long(w.now - 1));
        let o = w.call(A, "execute_tool", Some(b));
        format!("{} effects={}", brief(&o), w.effects())
    };
    // ---- tool execution
    read_tool_has_effect => |w| {
        w.connect(A);
        w.exec(A, &rid(1), "get_quote", QUOTE);
        w.effects().to_string()
    };
    schema_not_validated => |w| {
        w.connect(A);
        brief(&w.exec(A, &rid(1), "create_alert", r#"{"symbol":"CLAW","price":2,"note":"x"}"#))
    };
    args_limit_not_enforced => |w| {
        w.connect(A);
        let args = json!({"symbol": "X".repeat(70_000)}).to_string();
        brief(&w.exec(A, &rid(1), "get_quote", &args))
    };
    scope_not_enforced => |w| {
        w.connect(B);
        let o = w.exec(B, &rid(1), "create_alert", CREATE);
        format!("{} effects={}", brief(&o), w.effects())
    };
    scope_degraded_data => |w| {
        w.connect(B);
        brief(&w.exec(B, &rid(1), "create_alert", CREATE))
    };
    // ---- authorization and confirmation
    effect_before_confirmation => |w| {
        w.connect(A);
        let o = w.exec(A, &rid(1), "create_alert", HIGH);
        format!("{} effects={}", brief(&o), w.effects())
    };
    consumer_confirmed_flag_trusted => |w| {
        w.connect(A);
        let b = w.exec_bundle(A, &rid(1), "create_alert", HIGH).with("confirmed", Value::Bool(true));
        let o = w.call(A, "execute_tool", Some(b));
        format!("{} effects={}", brief(&o), w.effects())
    };
    claimed_caller_trusted => |w| {
        w.connect(B);
        let b = w
            .exec_bundle(B, &rid(1), "create_alert", CREATE)
            .with("calling_uid", Value::Int(A as i32));
        let o = w.call(B, "execute_tool", Some(b));
        format!("{} effects={}", brief(&o), w.effects())
    };
    resume_token_not_bound_to_request => |w| {
        w.connect(A);
        let ask = w.exec(A, &rid(1), "create_alert", HIGH);
        w.decide(A, &ask, Decision::Approve);
        brief(&w.resume(A, &rid(2), "create_alert", HIGH, &ask.resume_token().unwrap()))
    };
    resume_token_other_caller [both_full()] => |w| {
        w.connect(A);
        w.connect(B);
        let ask = w.exec(A, &rid(1), "create_alert", HIGH);
        w.decide(A, &ask, Decision::Approve);
        brief(&w.resume(B, &rid(1), "create_alert", HIGH, &ask.resume_token().unwrap()))
    };
    resume_token_args_unbound => |w| {
        w.connect(A);
        let ask = w.exec(A, &rid(1), "create_alert", HIGH);
        w.decide(A, &ask, Decision::Approve);
        let reencoded = r#"{"price":25000,"symbol":"CLAW"}"#;
        brief(&w.resume(A, &rid(1), "create_alert", reencoded, &ask.resume_token().unwrap()))
    };
    resume_token_reusable => |w| {
        w.connect(B);
        let del = r#"{"alert_id":"alert-1"}"#;
        let auth = w.exec(B, &rid(1), "delete_alert", del);
        w.decide(B, &auth, Decision::Approve);
        let t1 = auth.resume_token().unwrap();
        w.resume(B, &rid(1), "delete_alert", del, &t1);
        brief(&w.resume(B, &rid(1), "delete_alert", del, &t1))
    };
    resume_token_never_expires => |w| {
        w.connect(A);
        let ask = w.exec(A, &rid(1), "create_alert", HIGH);
        w.decide(A, &ask, Decision::Approve);
        w.now += 700_000;
        w.connect(A);
        brief(&w.resume(A, &rid(1), "create_alert", HIGH, &ask.resume_token().unwrap()))
    };
    denial_executes => |w| {
        let o = confirm_high(w, Decision::Deny);
        format!("{} effects={}", brief(&o), w.effects())
    };
    denial_wrong_code => |w| brief(&confirm_high(w, Decision::Deny));
    mutable_pending_intent => |w| {
        w.connect(A);
        let t = w.exec(A, &rid(1), "create_alert", HIGH).resolution().unwrap();
        let pi = match w.exec(A, &rid(1), "create_alert", HIGH).bundle.get(keys::RESOLUTION) {
            Some(Value::PendingIntent(pi)) => pi.immutable,
            _ => None,
        };
        format!("{} {pi:?}", t.immutable)
    };
    foreign_pending_intent => |w| {
        w.connect(A);
        let t = w.exec(A, &rid(1), "create_alert", HIGH).resolution().unwrap();
        format!("{} {:?}", t.creator_package, t.component)
    };
    resolution_implicit_intent => |w| {
        w.connect(A);
        let t = w.exec(A, &rid(1), "create_alert", HIGH).resolution().unwrap();
        format!("{} {}", t.creator_package, t.launched_package())
    };
    no_resolution_on_user_action => |w| {
        w.connect(A);
        let o = w.exec(A, &rid(1), "create_alert", HIGH);
        format!("{} {}", brief(&o), o.bundle.contains(keys::RESOLUTION))
    };
    // ---- operations
    operation_other_caller [both_full()] => |w| {
        let op = start_op(w);
        w.connect(B);
        brief(&w.get_op(B, &rid(1), &op))
    };
    operation_request_id_unbound => |w| {
        let op = start_op(w);
        brief(&w.get_op(A, &rid(2), &op))
    };
    cancel_other_caller [both_full()] => |w| {
        let op = start_op(w);
        w.connect(B);
        let c = w.cancel_op(B, &rid(1), &op);
        w.now += 1000;
        let state = w.get_op(A, &rid(1), &op).data()["state"].clone();
        format!("{} {state}", brief(&c))
    };
    cancel_request_id_unbound => |w| {
        let op = start_op(w);
        let c = w.cancel_op(A, &rid(2), &op);
        w.now += 1000;
        let state = w.get_op(A, &rid(1), &op).data()["state"].clone();
        format!("{} {state}", brief(&c))
    };
    cancel_reports_cancelled_after_effect => |w| {
        let op = start_op(w);
        w.now += 100;
        w.cancel_op(A, &rid(1), &op);
        w.now += 1000;
        let state = w.get_op(A, &rid(1), &op).data()["state"].clone();
        format!("{state} effects={}", w.effects())
    };
    async_without_negotiation => |w| {
        w.connect_with(A, &[]);
        brief(&w.exec(A, &rid(1), "sync_portfolio", "{}"))
    };
    get_operation_without_capability => |w| {
        let op = start_op(w);
        w.connect_with(A, &["cancellation"]);
        brief(&w.get_op(A, &rid(1), &op))
    };
    cancel_without_capability => |w| {
        let op = start_op(w);
        w.connect_with(A, &["async_operations"]);
        brief(&w.cancel_op(A, &rid(1), &op))
    };
    operation_lost_on_restart => |w| {
        let op = start_op(w);
        w.restart();
        w.now += 400;
        w.connect(A);
        format!("{} effects={}", brief(&w.get_op(A, &rid(1), &op)), w.effects())
    };
    operation_expired_early => |w| {
        let op = start_op(w);
        w.now += 120_000;
        w.connect(A);
        brief(&w.get_op(A, &rid(1), &op))
    };
    // ---- large results
    file_wrong_sha256 => |w| {
        w.connect(A);
        let o = w.exec(A, &rid(1), "export_history", r#"{"rows":5000}"#);
        let bytes = o.file().unwrap_or_default();
        format!("{}", o.data()["sha256"].as_str() == Some(sha256_hex(&bytes).as_str()))
    };
    file_wrong_size => |w| {
        w.connect(A);
        let o = w.exec(A, &rid(1), "export_history", r#"{"rows":5000}"#);
        let bytes = o.file().unwrap_or_default();
        format!("{}", o.data()["size_bytes"].as_u64() == Some(bytes.len() as u64))
    };
    inline_over_limit => |w| {
        w.connect(A);
        let o = w.exec(A, &rid(1), "export_history", r#"{"rows":5000}"#);
        format!("{} {}", brief(&o), o.data()["kind"])
    };
    file_without_negotiation => |w| {
        w.connect_with(A, &["async_operations"]);
        let o = w.exec(A, &rid(1), "export_history", r#"{"rows":5000}"#);
        format!("{} {} fd={}", brief(&o), o.data()["kind"], o.bundle.contains(keys::RESULT_FD))
    };
    file_content_violates_schema => |w| {
        w.connect(A);
        let o = w.exec(A, &rid(1), "export_history", r#"{"rows":5000}"#);
        let file: Json = serde_json::from_slice(&o.file().expect("a file")).expect("JSON");
        format!("rows={}", file["rows"].is_array())
    };
    writable_result_fd => |w| {
        w.connect(A);
        let o = w.exec(A, &rid(1), "export_history", r#"{"rows":5000}"#);
        let writable = o
            .attachments
            .iter()
            .any(|(_, a)| matches!(a, Attachment::WritableFile(_)));
        format!("writable={writable}")
    };
    // ---- found against Providers shaped further from the reference
    dedupe_tool_not_bound => |w| {
        w.connect(A);
        w.exec(A, &rid(1), "create_alert", CREATE);
        // delete_alert always confirms: nothing but the record answers.
        brief(&w.exec(A, &rid(1), "delete_alert", r#"{"alert_id":"alert-1"}"#))
    };
    negotiate_ignores_offer => |w| {
        let one = w.negotiate_raw(A, &[1], &[]).data()["selected_version"].to_string();
        let three_one = w.negotiate_raw(A, &[3, 1], &[]).data()["selected_version"].to_string();
        format!("{one} {three_one}")
    };
    denial_not_recorded => |w| {
        w.connect(A);
        let denied = w.exec_confirmed(A, &rid(1), "create_alert", HIGH, Decision::Deny);
        let again = w.exec(A, &rid(1), "create_alert", HIGH);
        format!("{} / {} effects={}", brief(&denied), brief(&again), w.effects())
    };
    cancelled_then_succeeds => |w| {
        w.connect(A);
        let op = w
            .exec(A, &rid(1), "sync_portfolio", "{}")
            .operation_id()
            .expect("accepted");
        w.cancel_op(A, &rid(1), &op);
        let first = w.get_op(A, &rid(1), &op).data()["state"].clone();
        w.now += 10_000;
        let later = w.get_op(A, &rid(1), &op).data()["state"].clone();
        format!("{first} then {later} effects={}", w.effects())
    };
    dedupe_forgotten_early => |w| {
        w.connect(A);
        w.exec(A, &rid(1), "create_alert", CREATE);
        w.now += 3_600_000;
        w.connect(A);
        let again = w.exec(A, &rid(1), "create_alert", CREATE);
        format!("{} effects={}", again.value(), w.effects())
    };
}

// ---------------------------------------------------------------- the notes app

/// Identity b without `notes.read`, so that `list_notes` is refused to it.
fn notes_b_without_read() -> ProviderConfig {
    let mut c = ProviderConfig::notes();
    let mut b = FixtureSet::Notes.all_scopes();
    b.remove("notes.read");
    c.grants.insert(B, b);
    c
}

macro_rules! notes_mutants {
    ($( $test:ident : $name:ident $([$cfg:expr])? => $scenario:expr; )*) => {
        $(
            #[test]
            fn $test() {
                #[allow(unused_mut, unused_assignments)]
                let mut base = ProviderConfig::notes();
                $( base = $cfg; )?
                differs(stringify!($name), base, $scenario);
            }
        )*
        const NOTES_TESTED: &[&str] = &[$(stringify!($name)),*];
    };
}

fn note_args(id: &str) -> String {
    json!({ "note_id": id }).to_string()
}

/// A note, then `archive_notes {"all": true}` (a background job when async
/// is negotiated); the operation id.
fn notes_archive_all(w: &mut World) -> (String, String) {
    w.connect(A);
    let id = w.add_note(A, &rid(100), "Groceries");
    let op = w
        .exec(A, &rid(1), "archive_notes", r#"{"all":true}"#)
        .operation_id()
        .expect("accepted");
    (id, op)
}

notes_mutants! {
    notes_no_dedupe: no_dedupe => |w| {
        w.connect(A);
        w.add_note(A, &rid(1), "Once");
        w.add_note(A, &rid(1), "Once");
        w.note_count().to_string()
    };
    notes_dedupe_lost_on_restart: dedupe_lost_on_restart => |w| {
        w.connect(A);
        w.add_note(A, &rid(1), "Once");
        w.restart();
        w.connect(A);
        w.add_note(A, &rid(1), "Once");
        w.note_count().to_string()
    };
    notes_effect_before_confirmation: effect_before_confirmation => |w| {
        w.connect(A);
        let id = w.add_note(A, &rid(1), "Old");
        let o = w.exec(A, &rid(2), "delete_note", &note_args(&id));
        format!("{} notes={}", brief(&o), w.note_count())
    };
    notes_denial_executes: denial_executes => |w| {
        w.connect(A);
        let id = w.add_note(A, &rid(1), "Old");
        let o = w.exec_confirmed(A, &rid(2), "delete_note", &note_args(&id), Decision::Deny);
        format!("{} notes={}", brief(&o), w.note_count())
    };
    notes_no_escalation: no_escalation => |w| {
        w.connect(A);
        let o = w.exec(A, &rid(1), "add_note", r#"{"title":"Party","share_publicly":true}"#);
        format!("{} notes={}", brief(&o), w.note_count())
    };
    notes_resume_token_args_unbound: resume_token_args_unbound => |w| {
        w.connect(A);
        let id = w.add_note(A, &rid(1), "Old");
        let ask = w.exec(A, &rid(2), "delete_note", &note_args(&id));
        w.decide(A, &ask, Decision::Approve);
        // The same request, other bytes.
        let spaced = format!(r#"{{ "note_id": "{id}" }}"#);
        let o = w.resume(A, &rid(2), "delete_note", &spaced, &ask.resume_token().unwrap());
        format!("{} notes={}", brief(&o), w.note_count())
    };
    notes_scope_not_enforced: scope_not_enforced => |w| {
        w.connect(A);
        w.connect(B);
        let id = w.add_note(A, &rid(1), "Mine");
        let o = w.exec(B, &rid(2), "archive_notes", &json!({"note_ids": [id]}).to_string());
        format!("{} archived={:?}", brief(&o), w.archived(&id))
    };
    notes_operation_lost_on_restart: operation_lost_on_restart => |w| {
        let (_, op) = notes_archive_all(w);
        w.restart();
        w.now += 1000;
        w.connect(A);
        brief(&w.get_op(A, &rid(1), &op))
    };
    notes_cancel_reports_cancelled_after_effect: cancel_reports_cancelled_after_effect => |w| {
        let (id, op) = notes_archive_all(w);
        w.now += 200;
        w.cancel_op(A, &rid(1), &op);
        w.now += 1000;
        let state = w.get_op(A, &rid(1), &op).data()["state"].clone();
        format!("{state} archived={:?}", w.archived(&id))
    };
    notes_inline_over_limit: inline_over_limit => |w| {
        w.connect(A);
        let o = w.exec(A, &rid(1), "export_notes", r#"{"copies":5000}"#);
        format!("{} {}", brief(&o), o.data()["kind"])
    };
    notes_v1_skips_scope_check: v1_skips_scope_check [notes_b_without_read()] => |w| {
        let b = cetp_proto::envelope::v1_execute_bundle("list_notes", "{}", None);
        let o = w.call(B, "execute_tool", Some(b));
        match V1Response::from_bundle(&o.bundle).unwrap() {
            V1Response::Success(_) => "success".to_string(),
            V1Response::Error { code, .. } => code,
        }
    };
    notes_delete_note_unconfirmed: delete_note_unconfirmed => |w| {
        w.connect(A);
        let id = w.add_note(A, &rid(1), "Old");
        let o = w.exec(A, &rid(2), "delete_note", &note_args(&id));
        format!("{} notes={}", brief(&o), w.note_count())
    };
    notes_get_note_creates_missing: get_note_creates_missing => |w| {
        w.connect(A);
        let o = w.exec(A, &rid(1), "get_note", &note_args("n_aaaaaaaaaa"));
        format!("{} notes={}", brief(&o), w.note_count())
    };
    notes_background_archive_skips_scope: background_archive_skips_scope => |w| {
        w.connect(A);
        w.connect(B);
        let id = w.add_note(A, &rid(1), "Mine");
        let o = w.exec(B, &rid(2), "archive_notes", r#"{"all":true}"#);
        w.now += 1000;
        format!("{} archived={:?}", brief(&o), w.archived(&id))
    };
    notes_archive_replayed_after_restart: archive_replayed_after_restart => |w| {
        let (_, op) = notes_archive_all(w);
        w.now += 1000;
        let before = w.get_op(A, &rid(1), &op).data()["result"].clone();
        let later = w.add_note(A, &rid(2), "Added after the archive");
        w.restart();
        w.connect(A);
        let after = w.get_op(A, &rid(1), &op).data()["result"].clone();
        format!("{before} {after} archived={:?}", w.archived(&later))
    };
    notes_background_archive_result_shape: background_archive_result_shape => |w| {
        let (_, op) = notes_archive_all(w);
        w.now += 1000;
        w.get_op(A, &rid(1), &op).data()["result"].to_string()
    };
    notes_sync_archive_not_deduped: sync_archive_not_deduped => |w| {
        w.connect(A);
        let id = w.add_note(A, &rid(1), "Once");
        let args = json!({"note_ids": [id]}).to_string();
        let first = w.exec(A, &rid(2), "archive_notes", &args);
        let again = w.exec(A, &rid(2), "archive_notes", &args);
        format!("{}", first.bundle == again.bundle)
    };
}

/// The mutant publishes (and enforces) what the legal `next_release`
/// publishes, under the reference's revision; `next_release` changes it.
#[test]
fn schema_changed_revision_kept_is_next_release_under_the_old_revision() {
    let list = |cfg: ProviderConfig| tools(&mut World::with_config(cfg), ALL_CAPS);
    let reference = list(ProviderConfig::default());
    let next = list(ProviderConfig {
        next_release: true,
        ..ProviderConfig::default()
    });
    let mutant = list(ProviderConfig {
        faults: BTreeSet::from([Mutant::SchemaChangedRevisionKept]),
        ..ProviderConfig::default()
    });
    assert_eq!(mutant["tools"], next["tools"]);
    assert_ne!(mutant["tools"], reference["tools"]);
    assert_eq!(mutant["revision"], reference["revision"]);
    assert_ne!(next["revision"], reference["revision"]);

    let long_symbol = json!({"symbol": "S".repeat(20)}).to_string();
    for (cfg, expected) in [
        (ProviderConfig::default(), "success"),
        (
            ProviderConfig {
                next_release: true,
                ..ProviderConfig::default()
            },
            "error",
        ),
    ] {
        let mut w = World::with_config(cfg);
        w.connect(A);
        let o = w.exec(A, &rid(1), "get_quote", &long_symbol);
        assert_eq!(o.status(), expected, "{}", brief(&o));
    }
}

#[test]
fn every_fault_has_a_differential_test_in_each_of_its_apps() {
    for (set, tested) in [
        (FixtureSet::Reference, TESTED),
        (FixtureSet::Notes, NOTES_TESTED),
    ] {
        let tested: BTreeSet<&str> = tested.iter().copied().collect();
        let expected: BTreeSet<&str> = Mutant::ALL
            .iter()
            .filter(|f| f.applies_to(set))
            .map(|f| f.name())
            .collect();
        assert_eq!(tested, expected, "{set}: tested vs applicable");
    }
    assert_eq!(TESTED.len() + NOTES_TESTED.len(), {
        let mut n = 0;
        for f in Mutant::ALL {
            n += f.providers().len();
        }
        n
    });
}

#[test]
fn every_fault_builds_by_name_for_its_apps_only() {
    for f in Mutant::ALL {
        for set in FixtureSet::ALL {
            match ReferenceProvider::mutant_of(set, f.name()) {
                Ok(p) => {
                    assert!(f.applies_to(set), "{f} built for {set}");
                    assert_eq!(p.config().faults, BTreeSet::from([*f]));
                    assert_eq!(p.config().fixtures, set);
                }
                Err(_) => assert!(!f.applies_to(set), "{f} refused for {set}"),
            }
        }
    }
    assert!(ReferenceProvider::mutant("no_such_mutant").is_err());
    assert!(ReferenceProvider::mutant("delete_note_unconfirmed").is_err());
}

/// `vectors/mutants/mutants.json` and [`Mutant::ALL`] list the same mutants,
/// in the same order, and each entry is well formed.
#[test]
fn mutants_json_matches_fault_list() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../vectors/mutants/mutants.json"
    );
    let text = std::fs::read_to_string(path).expect("mutants.json");
    let doc: Json = serde_json::from_str(&text).expect("valid JSON");
    assert_eq!(doc["format_version"], 1);
    let entries = doc["mutants"].as_array().expect("mutants array");
    let names: Vec<&str> = entries
        .iter()
        .map(|e| e["name"].as_str().expect("name"))
        .collect();
    let all: Vec<&str> = Mutant::ALL.iter().map(|f| f.name()).collect();
    assert_eq!(names, all);
    let sections: BTreeSet<&str> = [
        "0", "1", "2.1", "2.2", "2.3", "3.1", "3.2", "3.3", "3.4", "4", "4.1", "4.2", "4.3", "4.4",
        "4.5", "5", "6", "7.1", "7.2", "7.3", "8", "9", "10",
    ]
    .into();
    for e in entries {
        let name = e["name"].as_str().unwrap_or_default();
        let obj = e.as_object().expect("object");
        let keys: BTreeSet<&str> = obj.keys().map(String::as_str).collect();
        let required = BTreeSet::from([
            "name",
            "sections",
            "description",
            "requirements",
            "observed_in_the_wild",
        ]);
        let optional = BTreeSet::from(["equivalent", "providers"]);
        assert!(keys.is_superset(&required), "{name}: missing keys");
        for k in &keys {
            assert!(
                required.contains(k) || optional.contains(k),
                "{name}: unknown key {k}"
            );
        }
        if let Some(why) = e.get("equivalent") {
            assert!(why.as_str().is_some_and(|w| w.len() >= 20), "{name}");
        }
        for r in e["requirements"].as_array().expect("requirements array") {
            let id = r.as_str().unwrap_or_default();
            let section = id
                .strip_prefix("CETP2-")
                .and_then(|rest| rest.rsplit_once('-'))
                .map(|(sec, _)| sec);
            assert!(
                section.is_some_and(|sec| sections.contains(sec)),
                "{name}: bad requirement id {id:?}"
            );
        }
        let secs = e["sections"].as_array().expect("sections");
        assert!(!secs.is_empty(), "{name}");
        for s in secs {
            assert!(sections.contains(s.as_str().unwrap_or("?")), "{name}: {s}");
        }
        let d = e["description"].as_str().unwrap_or_default();
        assert!(d.len() >= 20, "{name}: description too short");
        // Our own words, in English: never a copy of the (Chinese) spec.
        assert!(
            d.chars().all(|c| c.is_ascii() || "§—–’“”".contains(c)),
            "{name}"
        );
        assert!(e["observed_in_the_wild"].is_boolean(), "{name}");
        // Absent means the reference app only.
        let providers: Vec<&str> = match e.get("providers") {
            None => vec!["reference"],
            Some(p) => p
                .as_array()
                .filter(|a| !a.is_empty())
                .unwrap_or_else(|| panic!("{name}: providers must be a non-empty array"))
                .iter()
                .map(|v| v.as_str().expect("provider name"))
                .collect(),
        };
        let fault = Mutant::parse(name).expect("a fault");
        let expected: Vec<&str> = fault.providers().iter().map(|s| s.name()).collect();
        assert_eq!(providers, expected, "{name}: providers");
    }
}

/// Retired mutants (`retired` in mutants.json) describe behaviour the spec
/// allows: they are legal variants now, never faults again.
#[test]
fn retired_mutants_are_not_faults() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../vectors/mutants/mutants.json"
    );
    let doc: Json = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let retired = doc["retired"].as_array().expect("retired array");
    assert!(!retired.is_empty());
    for r in retired {
        let name = r["name"].as_str().unwrap();
        assert!(Mutant::parse(name).is_none(), "{name} is retired");
        assert!(
            r["reason"].as_str().is_some_and(|w| w.len() >= 20),
            "{name}"
        );
    }
}
