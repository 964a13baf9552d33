//! Property tests of the reference Provider with two caller identities:
//! exactly-once effects under replay, isolation between callers, single-use
//! resume tokens, and invariants under random interleavings of executions,
//! operation queries, cancellations, restarts and clock advances.

mod provider_support;

use cetp_proto::canonical::canonicalize;
use cetp_proto::provider::Decision;
use cetp_proto::Bundle;
use cetp_reference::app::ProviderApp;
use proptest::prelude::*;
use provider_support::*;
use serde_json::{json, Value as Json};
use std::collections::{BTreeMap, BTreeSet};

/// Calls `f`, renegotiating once if a restart ended the caller's session.
fn with_session(w: &mut World, uid: u32, caps: &[&str], f: impl Fn(&World) -> Outcome) -> Outcome {
    if !w.tokens.contains_key(&uid) {
        w.connect_with(uid, caps);
    }
    let o = f(w);
    if o.code().as_deref() == Some("NEGOTIATION_REQUIRED") {
        w.connect_with(uid, caps);
        return f(w);
    }
    o
}

fn code(o: &Outcome) -> String {
    o.code().unwrap_or_default()
}

fn create_args(price: f64, reorder: bool) -> String {
    if reorder {
        format!(r#"{{ "price": {price}, "symbol": "CLAW" }}"#)
    } else {
        json!({"symbol": "CLAW", "price": price}).to_string()
    }
}

#[derive(Clone, Debug)]
enum Kind {
    CreateLow(u32),
    CreateHigh(u32),
    Delete(u8),
    SyncNow,
    SyncAsync,
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        (1u32..9_999).prop_map(Kind::CreateLow),
        (10_000u32..1_000_000).prop_map(Kind::CreateHigh),
        (1u8..4).prop_map(Kind::Delete),
        Just(Kind::SyncNow),
        Just(Kind::SyncAsync),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, .. ProptestConfig::default() })]

    /// One request id replayed N times (with re-encoded args and restarts in
    /// between) gives exactly one effect and the same terminal result.
    #[test]
    fn replays_have_one_effect_and_one_result(
        kind in kind(),
        id in 1u64..1_000_000,
        replays in proptest::collection::vec((any::<bool>(), any::<bool>()), 1..6),
    ) {
        let mut w = World::reference();
        let caps: &[&str] = if matches!(kind, Kind::SyncNow) { &[] } else { ALL_CAPS };
        // Something to delete.
        w.connect(A);
        for i in 0..3u64 {
            w.exec(A, &rid(2_000_000 + i), "create_alert", &create_args(1.0, false));
        }
        let base = w.effects();
        w.connect_with(A, caps);
        let id = rid(id);
        let (tool, args): (&str, Box<dyn Fn(bool) -> String>) = match kind {
            Kind::CreateLow(p) | Kind::CreateHigh(p) => ("create_alert", Box::new(move |r| create_args(f64::from(p), r))),
            Kind::Delete(n) => ("delete_alert", Box::new(move |r| if r {
                format!(r#"{{ "alert_id" : "alert-{n}" }}"#)
            } else {
                json!({"alert_id": format!("alert-{n}")}).to_string()
            })),
            Kind::SyncNow | Kind::SyncAsync => ("sync_portfolio", Box::new(|r| if r { "{ }".to_string() } else { "{}".to_string() })),
        };
        let first = w.exec_confirmed(A, &id, tool, &args(false), Decision::Approve);
        prop_assert!(first.status() == "success" || first.status() == "accepted", "{:?}", first.bundle);
        for (restart, reorder) in replays {
            if restart {
                w.restart();
            }
            let again = with_session(&mut w, A, caps, |w| w.exec(A, &id, tool, &args(reorder)));
            prop_assert_eq!(&again.bundle, &first.bundle);
        }
        if let Some(op) = first.operation_id() {
            w.now += 400;
            let done = with_session(&mut w, A, caps, |w| w.get_op(A, &id, &op));
            prop_assert_eq!(done.data()["state"].clone(), json!("succeeded"));
            let replay = with_session(&mut w, A, caps, |w| w.exec(A, &id, tool, &args(false)));
            prop_assert_eq!(&replay.bundle, &first.bundle);
        }
        prop_assert_eq!(w.effects(), base + 1);
    }

    /// Two callers never see each other's sessions, operations or dedupe
    /// records, even when they choose the same request ids and args.
    #[test]
    fn callers_are_isolated(
        calls in proptest::collection::vec((1u64..6, 1u32..9_999, any::<bool>()), 1..8),
    ) {
        let mut w = World::with_config(both_full());
        w.connect(A);
        w.connect(B);
        let mut expected_effects = 0;
        let mut seen: BTreeMap<(u32, u64), Outcome> = BTreeMap::new();
        for (n, price, sync) in calls {
            let (tool, args) = if sync {
                ("sync_portfolio", "{}".to_string())
            } else {
                ("create_alert", create_args(f64::from(price), false))
            };
            let a = w.exec(A, &rid(n), tool, &args);
            let b = w.exec(B, &rid(n), tool, &args);
            for (uid, o) in [(A, &a), (B, &b)] {
                match seen.get(&(uid, n)) {
                    // Same id reused by the same caller with other content.
                    Some(prev) if prev.bundle.get("data").is_some() && o.code().as_deref() == Some("INVALID_REQUEST") => {}
                    Some(prev) => prop_assert_eq!(&prev.bundle, &o.bundle),
                    None => {
                        prop_assert!(o.status() == "success" || o.status() == "accepted", "{:?}", o.bundle);
                        if o.status() == "success" {
                            expected_effects += 1;
                        }
                        seen.insert((uid, n), o.clone());
                    }
                }
            }
            if a.status() == "success" && b.status() == "success" && seen[&(A, n)].bundle == a.bundle && seen[&(B, n)].bundle == b.bundle {
                prop_assert_ne!(a.value(), b.value());
            }
            if let (Some(op_a), Some(op_b)) = (a.operation_id(), b.operation_id()) {
                prop_assert_ne!(&op_a, &op_b);
                prop_assert_eq!(code(&w.get_op(B, &rid(n), &op_a)), "INVALID_REQUEST");
                prop_assert_eq!(code(&w.cancel_op(B, &rid(n), &op_a)), "INVALID_REQUEST");
                prop_assert_eq!(code(&w.get_op(A, &rid(n), &op_b)), "INVALID_REQUEST");
                prop_assert!(w.get_op(A, &rid(n), &op_a).is_success());
            }
        }
        // Sessions: each caller's token is refused for the other.
        let mut b = w.common(A, &rid(99));
        b.insert("session_token", cetp_proto::Value::str(w.token(B)));
        prop_assert_eq!(code(&w.call(A, "list_tools", Some(b))), "NEGOTIATION_REQUIRED");
        let mut b = w.common(B, &rid(99));
        b.insert("session_token", cetp_proto::Value::str(w.token(A)));
        prop_assert_eq!(code(&w.call(B, "list_tools", Some(b))), "NEGOTIATION_REQUIRED");
        // Operations finish once each.
        w.now += 400;
        let ops: usize = seen.values().filter(|o| o.status() == "accepted").count();
        prop_assert_eq!(w.effects(), expected_effects + ops as u64);
    }

    /// A resume token works once, and never for another caller, other args
    /// or another request id.
    #[test]
    fn resume_tokens_are_single_use_and_bound(
        price in 10_000u32..1_000_000,
        id in 1u64..1_000,
        before in proptest::collection::vec(0u8..4, 0..5),
        after in proptest::collection::vec(0u8..4, 0..5),
    ) {
        let mut w = World::with_config(both_full());
        w.connect(A);
        w.connect(B);
        let args = create_args(f64::from(price), false);
        let ask = w.exec(A, &rid(id), "create_alert", &args);
        prop_assert_eq!(code(&ask), "USER_ACTION_REQUIRED");
        let token = ask.resume_token().unwrap();
        w.decide(A, &ask, Decision::Approve);
        let misuse = |w: &World, m: u8| -> Outcome {
            match m {
                0 => w.resume(B, &rid(id), "create_alert", &args, &token),
                1 => w.resume(A, &rid(id), "create_alert", &create_args(f64::from(price) + 1.0, false), &token),
                2 => w.resume(A, &rid(id + 1_000), "create_alert", &args, &token),
                _ => w.resume(A, &rid(id), "create_alert", &create_args(f64::from(price), true), &token),
            }
        };
        for m in before {
            let o = misuse(&w, m);
            prop_assert_eq!(code(&o), "INVALID_REQUEST", "misuse {} before: {:?}", m, o.bundle);
        }
        prop_assert_eq!(w.effects(), 0);
        let done = w.resume(A, &rid(id), "create_alert", &args, &token);
        prop_assert!(done.is_success(), "{:?}", done.bundle);
        for m in after {
            let o = misuse(&w, m);
            if m == 3 {
                // Same id, canonically equal args: a retry of the finished
                // execution, answered from its dedupe record.
                prop_assert_eq!(&o.bundle, &done.bundle);
            } else {
                prop_assert_eq!(code(&o), "INVALID_REQUEST", "misuse {} after: {:?}", m, o.bundle);
            }
        }
        // The legitimate replay is answered from the dedupe record.
        prop_assert_eq!(&w.resume(A, &rid(id), "create_alert", &args, &token).bundle, &done.bundle);
        prop_assert_eq!(w.effects(), 1);
    }
}

// ---------------------------------------------------------------- interleavings

#[derive(Clone, Debug)]
enum Step {
    Create {
        b: bool,
        id: u8,
        price: u32,
        approve: bool,
        reorder: bool,
    },
    Delete {
        b: bool,
        id: u8,
        alert: u8,
        approve: bool,
    },
    Sync {
        b: bool,
        id: u8,
        fail: bool,
    },
    GetOp(u8),
    Peek(u8),
    Cancel(u8),
    Restart,
    Advance(u16),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (any::<bool>(), 0u8..6, prop_oneof![Just(5u32), Just(7), Just(20_000)], any::<bool>(), any::<bool>())
            .prop_map(|(b, id, price, approve, reorder)| Step::Create { b, id, price, approve, reorder }),
        2 => (any::<bool>(), 0u8..6, 1u8..5, any::<bool>())
            .prop_map(|(b, id, alert, approve)| Step::Delete { b, id, alert, approve }),
        3 => (any::<bool>(), 0u8..6, any::<bool>()).prop_map(|(b, id, fail)| Step::Sync { b, id, fail }),
        3 => any::<u8>().prop_map(Step::GetOp),
        1 => any::<u8>().prop_map(Step::Peek),
        2 => any::<u8>().prop_map(Step::Cancel),
        1 => Just(Step::Restart),
        3 => (0u16..400).prop_map(Step::Advance),
    ]
}

/// Identity b runs without async_operations: its syncs are synchronous.
const B_CAPS: &[&str] = &["large_results"];

fn caps_of(uid: u32) -> &'static [&'static str] {
    if uid == A {
        ALL_CAPS
    } else {
        B_CAPS
    }
}

fn state_rank(s: &str) -> u8 {
    match s {
        "queued" => 0,
        "running" => 1,
        _ => 2,
    }
}

#[derive(Default)]
struct Model {
    /// (caller, request id) -> the (tool, args) it is bound to.
    bound: BTreeMap<(u32, u8), (String, String)>,
    /// (caller, request id) -> first terminal answer.
    terminal: BTreeMap<(u32, u8), Bundle>,
    /// Request ids whose synchronous execution succeeded.
    succeeded: BTreeSet<(u32, u8)>,
    /// Operations: id -> (owner, request id).
    ops: BTreeMap<String, (u32, u8)>,
    /// Terminal data of an operation, once seen.
    op_final: BTreeMap<String, Json>,
    op_rank: BTreeMap<String, u8>,
}

fn is_terminal(o: &Outcome) -> bool {
    matches!(o.status().as_str(), "success" | "accepted")
        || matches!(o.code().as_deref(), Some("USER_CANCELLED" | "CONFLICT"))
}

/// Checks one execution answer against the model. `denied`: the user denied
/// the confirmation this execution needed.
fn check_execution(
    m: &mut Model,
    (uid, id): (u32, u8),
    tool: &str,
    args: &str,
    denied: bool,
    o: &Outcome,
) -> Result<(), TestCaseError> {
    let key = (uid, id);
    // Records bind canonical args: re-encoded JSON is the same request.
    let args =
        &canonicalize(&serde_json::from_str(args).expect("test args are JSON")).expect("canonical");
    if let Some((t, a)) = m.bound.get(&key) {
        if t != tool || a != args {
            prop_assert_eq!(
                code(o),
                "INVALID_REQUEST",
                "reuse of {:?} with other content: {:?}",
                key,
                o.bundle
            );
            return Ok(());
        }
    }
    if let Some(prev) = m.terminal.get(&key) {
        prop_assert_eq!(prev, &o.bundle, "terminal answer of {:?} changed", key);
        return Ok(());
    }
    prop_assert!(is_terminal(o), "{:?}", o.bundle);
    if denied {
        prop_assert_eq!(code(o), "USER_CANCELLED");
    }
    m.bound.insert(key, (tool.to_string(), args.to_string()));
    m.terminal.insert(key, o.bundle.clone());
    if o.is_success() {
        m.succeeded.insert(key);
    }
    if let Some(op) = o.operation_id() {
        m.ops.insert(op, key);
    }
    Ok(())
}

fn observe_op(m: &mut Model, op: &str, o: &Outcome) -> Result<(), TestCaseError> {
    prop_assert!(o.is_success(), "{:?}", o.bundle);
    let data = o.data();
    let state = data["state"].as_str().unwrap_or_default().to_string();
    let rank = state_rank(&state);
    let last = m.op_rank.get(op).copied().unwrap_or(0);
    prop_assert!(rank >= last, "operation {} went back to {}", op, state);
    m.op_rank.insert(op.to_string(), rank);
    if let Some(fin) = m.op_final.get(op) {
        prop_assert_eq!(fin, &data, "terminal operation {} changed", op);
    } else if rank == 2 {
        m.op_final.insert(op.to_string(), data);
    }
    Ok(())
}

fn pick(m: &Model, n: u8) -> Option<(String, u32, u8)> {
    if m.ops.is_empty() {
        return None;
    }
    let (op, (uid, id)) = m.ops.iter().nth(usize::from(n) % m.ops.len())?;
    Some((op.clone(), *uid, *id))
}

/// effects == request ids that succeeded synchronously + operations that
/// succeeded (asking each operation's state first, which also settles it).
fn check_effects(w: &mut World, m: &mut Model) -> Result<(), TestCaseError> {
    let ops: Vec<(String, (u32, u8))> = m.ops.iter().map(|(k, v)| (k.clone(), *v)).collect();
    let mut succeeded_ops = 0;
    for (op, (uid, id)) in ops {
        let o = with_session(w, uid, caps_of(uid), |w| {
            w.get_op(uid, &rid(u64::from(id)), &op)
        });
        observe_op(m, &op, &o)?;
        if o.data()["state"] == "succeeded" {
            succeeded_ops += 1;
        }
    }
    let effects = w.observe()["effects"].as_u64().unwrap_or(u64::MAX);
    prop_assert_eq!(effects, m.succeeded.len() as u64 + succeeded_ops);
    Ok(())
}

fn run_steps(steps: Vec<Step>) -> Result<(), TestCaseError> {
    let mut w = World::with_config(both_full());
    let mut m = Model::default();
    for s in steps {
        match s {
            Step::Create {
                b,
                id,
                price,
                approve,
                reorder,
            } => {
                let uid = if b { B } else { A };
                let args = create_args(f64::from(price), reorder);
                let decision = if approve {
                    Decision::Approve
                } else {
                    Decision::Deny
                };
                let o = with_session(&mut w, uid, caps_of(uid), |w| {
                    w.exec_confirmed(uid, &rid(u64::from(id)), "create_alert", &args, decision)
                });
                let denied = !approve && price >= 10_000;
                check_execution(&mut m, (uid, id), "create_alert", &args, denied, &o)?;
            }
            Step::Delete {
                b,
                id,
                alert,
                approve,
            } => {
                let uid = if b { B } else { A };
                let args = json!({"alert_id": format!("alert-{alert}")}).to_string();
                let decision = if approve {
                    Decision::Approve
                } else {
                    Decision::Deny
                };
                let o = with_session(&mut w, uid, caps_of(uid), |w| {
                    w.exec_confirmed(uid, &rid(u64::from(id)), "delete_alert", &args, decision)
                });
                check_execution(&mut m, (uid, id), "delete_alert", &args, !approve, &o)?;
            }
            Step::Sync { b, id, fail } => {
                let uid = if b { B } else { A };
                let args = json!({"fail": fail}).to_string();
                let o = with_session(&mut w, uid, caps_of(uid), |w| {
                    w.exec(uid, &rid(u64::from(id)), "sync_portfolio", &args)
                });
                check_execution(&mut m, (uid, id), "sync_portfolio", &args, false, &o)?;
            }
            Step::GetOp(n) => {
                if let Some((op, uid, id)) = pick(&m, n) {
                    let o = with_session(&mut w, uid, caps_of(uid), |w| {
                        w.get_op(uid, &rid(u64::from(id)), &op)
                    });
                    observe_op(&mut m, &op, &o)?;
                }
            }
            Step::Peek(n) => {
                if let Some((op, uid, id)) = pick(&m, n) {
                    let other = if uid == A { B } else { A };
                    w.connect_with(other, ALL_CAPS);
                    let o = w.get_op(other, &rid(u64::from(id)), &op);
                    prop_assert_eq!(code(&o), "INVALID_REQUEST");
                    prop_assert!(!o.bundle.contains("data"));
                    // Back to the caller's own capabilities.
                    w.connect_with(other, caps_of(other));
                }
            }
            Step::Cancel(n) => {
                if let Some((op, uid, id)) = pick(&m, n) {
                    let seen_final = m.op_final.get(&op).map(|d| d["state"].clone());
                    let o = with_session(&mut w, uid, caps_of(uid), |w| {
                        w.cancel_op(uid, &rid(u64::from(id)), &op)
                    });
                    match seen_final.as_ref().and_then(Json::as_str) {
                        Some("succeeded" | "failed") => prop_assert_eq!(code(&o), "CONFLICT"),
                        Some(_) => prop_assert!(o.is_success()),
                        None => prop_assert!(
                            o.is_success() || o.code().as_deref() == Some("CONFLICT"),
                            "{:?}",
                            o.bundle
                        ),
                    }
                }
            }
            Step::Restart => {
                w.p.restart();
            }
            Step::Advance(ms) => w.now += i64::from(ms),
        }
        check_effects(&mut w, &mut m)?;
    }
    // Let every operation finish; the invariants still hold.
    w.now += 1_000;
    check_effects(&mut w, &mut m)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

    #[test]
    fn interleavings_keep_the_invariants(steps in proptest::collection::vec(step(), 1..40)) {
        run_steps(steps)?;
    }
}
