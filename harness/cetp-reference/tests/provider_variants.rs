//! One test per legal variant: the same scenario against the reference and
//! against the reference taking one [`Variant`] must be told apart by what a
//! Consumer can observe. The conformance suite has to pass every variant;
//! these prove each variant is a real change, so that "passes every legal
//! variant" is not a claim about copies of the reference.

mod provider_support;

use cetp_proto::discovery::META_VERSIONS;
use cetp_proto::envelope::{is_uuid, keys, V1Response};
use cetp_proto::Value;
use cetp_reference::app::ProviderApp;
use cetp_reference::provider::{ProviderConfig, Variant};
use provider_support::*;
use serde_json::Value as Json;
use std::collections::BTreeSet;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

const CREATE: &str = r#"{"symbol":"CLAW","price":2}"#;
/// The same args as [`CREATE`], keys in the other order: the same canonical
/// JSON, other bytes.
const CREATE_REORDERED: &str = r#"{"price":2,"symbol":"CLAW"}"#;
/// A price that escalates `create_alert` to a confirmation.
const HIGH: &str = r#"{"symbol":"CLAW","price":25000}"#;
const QUOTE: &str = r#"{"symbol":"CLAW"}"#;
/// Over the inline limit of the reference (262 144 bytes), under 1 MiB.
const BIG_EXPORT: &str = r#"{"rows":5000}"#;

fn brief(o: &Outcome) -> String {
    format!(
        "{} {:?} retryable={:?}",
        o.status(),
        o.code(),
        o.retryable()
    )
}

/// Holds a mutation inside its effect (with its admission slot taken) until
/// the scenario lets it go, so a second request surely arrives while the
/// first is in flight: no race against a sleep on a loaded machine.
struct Gate {
    /// (a mutation entered its effect, the scenario released it)
    state: Mutex<(bool, bool)>,
    changed: Condvar,
}

/// Bounds every wait, so a broken scenario fails instead of hanging.
const GATE_WAIT: Duration = Duration::from_secs(10);

static GATE: Gate = Gate {
    state: Mutex::new((false, false)),
    changed: Condvar::new(),
};
/// One gated scenario at a time: tests run in parallel and share [`GATE`].
static GATED: Mutex<()> = Mutex::new(());

impl Gate {
    fn lock(&self) -> MutexGuard<'_, (bool, bool)> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
    /// Waits (bounded) until `done` holds of the state.
    fn wait(&self, done: impl Fn(&(bool, bool)) -> bool) -> bool {
        let g = self.lock();
        let (g, _) = self
            .changed
            .wait_timeout_while(g, GATE_WAIT, |s| !done(s))
            .unwrap_or_else(PoisonError::into_inner);
        done(&g)
    }
    fn set(&self, f: impl FnOnce(&mut (bool, bool))) {
        f(&mut self.lock());
        self.changed.notify_all();
    }
    /// The Provider's sleeper: announce the effect, wait for the release.
    fn hold(&self) {
        self.set(|s| s.0 = true);
        self.wait(|s| s.1);
    }
}

fn gated() -> ProviderConfig {
    ProviderConfig {
        effect_delay_ms: 1,
        sleeper: Arc::new(|_| GATE.hold()),
        ..ProviderConfig::default()
    }
}

fn start_op(w: &mut World) -> String {
    w.connect(A);
    w.exec(A, &rid(1), "sync_portfolio", "{}")
        .operation_id()
        .expect("accepted")
}

/// The `execution` annotation `list_tools` gives `tool` in an async session.
fn execution(w: &mut World, tool: &str) -> String {
    w.connect(A);
    let data = w.v2(A, "list_tools", &rid(90)).data();
    data["tools"]
        .as_array()
        .and_then(|ts| ts.iter().find(|t| t["name"] == tool))
        .map(|t| t["annotations"]["execution"].to_string())
        .unwrap_or_default()
}

fn tool_names(data: &Json) -> Vec<String> {
    data["tools"]
        .as_array()
        .map(|ts| {
            ts.iter()
                .filter_map(|t| t["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// `immutable` of the resolution PendingIntent, as the Consumer reads it.
fn resolution_immutable(o: &Outcome) -> Option<bool> {
    match o.bundle.get(keys::RESOLUTION) {
        Some(Value::PendingIntent(pi)) => pi.immutable,
        _ => None,
    }
}

/// One latitude's scenario: its starting configuration (the latitude is
/// added on top of it) and what it observes.
struct Scenario {
    name: &'static str,
    base: ProviderConfig,
    run: fn(&mut World) -> String,
}

impl Scenario {
    fn latitude(&self) -> Variant {
        Variant::parse(self.name).unwrap_or_else(|| panic!("no latitude {}", self.name))
    }
    fn reference(&self) -> String {
        (self.run)(&mut World::with_config(self.base.clone()))
    }
    fn variant(&self) -> String {
        let cfg = self.base.clone().with_latitude(self.latitude());
        (self.run)(&mut World::with_config(cfg))
    }
}

fn scenario(name: &str) -> Scenario {
    scenarios()
        .into_iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no scenario {name}"))
}

fn differs(name: &str) {
    let s = scenario(name);
    let reference = s.reference();
    // The outcome must be a function of the configuration: a scenario that
    // reported a fresh random value would "differ" without the latitude.
    assert_eq!(reference, s.reference(), "{name}: not deterministic");
    let variant = s.variant();
    assert_ne!(
        reference, variant,
        "{name}: the latitude changed nothing observable ({reference})"
    );
}

macro_rules! variants {
    ($( $name:ident $([$cfg:expr])? => $scenario:expr; )*) => {
        fn scenarios() -> Vec<Scenario> {
            vec![$(
                Scenario {
                    name: stringify!($name),
                    base: {
                        #[allow(unused_mut, unused_assignments)]
                        let mut base = ProviderConfig::default();
                        $( base = $cfg; )?
                        base
                    },
                    run: $scenario,
                },
            )*]
        }
        $(
            #[test]
            fn $name() {
                differs(stringify!($name));
            }
        )*
        const TESTED: &[&str] = &[$(stringify!($name)),*];
    };
}

variants! {
    // ---- asynchronous work
    sync_for_async_tool => |w| {
        w.connect(A);
        brief(&w.exec(A, &rid(1), "sync_portfolio", "{}"))
    };
    large_result_via_operation => |w| {
        w.connect(A);
        let o = w.exec(A, &rid(1), "export_history", BIG_EXPORT);
        let first = format!("{} {} fd={}", brief(&o), o.data()["kind"], o.file().is_some());
        let Some(op) = o.operation_id() else {
            return first;
        };
        w.now += 400;
        let g = w.get_op(A, &rid(1), &op);
        let file = g.file().unwrap_or_default();
        format!(
            "{first} / {} {} fd={} sha256_ok={}",
            brief(&g),
            g.data()["state"],
            g.bundle.contains(keys::RESULT_FD),
            g.data()["result"]["sha256"].as_str()
                == Some(cetp_proto::canonical::sha256_hex(&file).as_str())
        )
    };
    async_read_tool => |w| {
        let exec = execution(w, "get_quote");
        format!("{exec} {}", brief(&w.exec(A, &rid(1), "get_quote", QUOTE)))
    };
    slow_operations => |w| {
        w.connect(A);
        let o = w.exec(A, &rid(1), "sync_portfolio", "{}");
        let op = o.operation_id().expect("accepted");
        w.now += 400;
        let state = w.get_op(A, &rid(1), &op).data()["state"].clone();
        format!("poll_after_ms={} after 400 ms: {state}", o.data()["poll_after_ms"])
    };
    operation_ids_uuid => |w| is_uuid(&start_op(w)).to_string();
    progress_omitted => |w| {
        let op = start_op(w);
        // Past the start, before the end: running.
        w.now += 150;
        let d = w.get_op(A, &rid(1), &op).data();
        format!("{} progress={}", d["state"], d.get("progress").is_some())
    };
    cancel_finished_acknowledged => |w| {
        let op = start_op(w);
        w.now += 400;
        let c = w.cancel_op(A, &rid(1), &op);
        let after = w.get_op(A, &rid(1), &op).data()["state"].clone();
        format!("{} {} then {after}", brief(&c), c.data()["state"])
    };
    cancel_refused_committed => |w| {
        let op = start_op(w);
        // Past the start, before the end: running.
        w.now += 150;
        let c = w.cancel_op(A, &rid(1), &op);
        w.now += 400;
        let after = w.get_op(A, &rid(1), &op).data()["state"].clone();
        format!("{} then {after}", brief(&c))
    };
    replay_returns_terminal => |w| {
        let op = start_op(w);
        w.now += 400;
        let o = w.exec(A, &rid(1), "sync_portfolio", "{}");
        format!("{} same_op={}", brief(&o), o.operation_id().as_deref() == Some(op.as_str()))
    };
    // ---- de-duplication and validation
    dedupe_raw_args => |w| {
        w.connect(A);
        w.exec(A, &rid(1), "create_alert", CREATE);
        let retry = w.exec(A, &rid(1), "create_alert", CREATE_REORDERED);
        format!("{} effects={}", brief(&retry), w.effects())
    };
    validate_before_dedupe => |w| {
        w.connect(A);
        w.exec(A, &rid(1), "create_alert", CREATE);
        // The retry comes after its deadline: the recorded result, or the
        // deadline checked first.
        let mut b = w.exec_bundle(A, &rid(1), "create_alert", CREATE);
        b.insert(keys::DEADLINE_AT_MS, Value::Long(w.now - 1));
        let o = w.call(A, "execute_tool", Some(b));
        format!("{} effects={}", brief(&o), w.effects())
    };
    // ---- confirmation and authorization
    confirm_with_auth_required => |w| {
        w.connect(A);
        brief(&w.exec(A, &rid(1), "create_alert", HIGH))
    };
    escalation_refused => |w| {
        w.connect(A);
        let o = w.exec(A, &rid(1), "create_alert", HIGH);
        format!("{} resolution={}", brief(&o), o.bundle.contains(keys::RESOLUTION))
    };
    dismiss_cancels => |w| {
        w.connect(A);
        let ask = w.exec(A, &rid(1), "create_alert", HIGH);
        let played = w.decide(A, &ask, cetp_proto::provider::Decision::Dismiss);
        let token = ask.resume_token().unwrap_or_default();
        // Asked again under the same request id, approved on the screen
        // that comes up again: the abandonment stands.
        let again = w.exec(A, &rid(1), "create_alert", HIGH);
        let approved = w.decide(A, &again, cetp_proto::provider::Decision::Approve);
        let resumed = w.resume(A, &rid(1), "create_alert", HIGH, &token);
        format!(
            "{} code={} approved={} effects={}",
            brief(&resumed),
            played.result_code,
            approved.decision_applied,
            w.effects()
        )
    };
    resume_tokens_long => |w| {
        w.connect(A);
        let o = w.exec(A, &rid(1), "create_alert", HIGH);
        o.resume_token().map(|t| t.len()).unwrap_or_default().to_string()
    };
    hide_tools_without_scope => |w| {
        w.connect(B);
        let names = tool_names(&w.v2(B, "list_tools", &rid(1)).data());
        format!("{names:?} {}", brief(&w.exec(B, &rid(2), "create_alert", CREATE)))
    };
    // ---- sessions and envelopes
    session_tokens_signed => |w| {
        let a = w.connect(A);
        let b = w.connect(A);
        let shared = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
        format!("parts={} long_shared_prefix={}", a.split('.').count(), shared >= 30)
    };
    session_tokens_uuid => |w| is_uuid(&w.connect(A)).to_string();
    sessions_survive_restart => |w| {
        w.connect(A);
        w.restart();
        brief(&w.v2(A, "list_tools", &rid(1)))
    };
    unknown_extras_rejected => |w| {
        w.connect(A);
        let b = w.common(A, &rid(1)).with("x_trace_id", Value::str("t-1"));
        brief(&w.call(A, "list_tools", Some(b)))
    };
    negotiate_errors_without_version => |w| {
        let o = w.negotiate_raw(A, &[3], &[]);
        format!("{} protocol_version={:?}", brief(&o), o.protocol_version())
    };
    error_details_everywhere => |w| {
        w.connect(A);
        let o = w.exec(A, &rid(1), "teleport", "{}");
        format!("{} details={}", brief(&o), o.bundle.contains(keys::ERROR_DETAILS))
    };
    descriptor_unknown_fields => |w| {
        w.connect(A);
        let tools = w.v2(A, "list_tools", &rid(1)).data();
        let info = w.v2(A, "get_provider_info", &rid(2)).data();
        format!("tool={} info={}", tools["tools"][0]["x_vendor_category"], info["x_vendor"])
    };
    provider_id_custom => |w| {
        let n = w.negotiate_raw(A, &[2], &[]).data()["provider_id"].clone();
        w.connect(A);
        let info = w.v2(A, "get_provider_info", &rid(1)).data()["provider_id"].clone();
        format!("{n} {info}")
    };
    // ---- limits
    generous_limits => |w| {
        let limits = w.negotiate_raw(A, &[2], &[]).data()["limits"].clone();
        w.connect(A);
        // Valid args, padded past the reference's 65 536 bytes.
        let padded = format!("{QUOTE}{}", " ".repeat(70_000));
        let args = brief(&w.exec(A, &rid(1), "get_quote", &padded));
        let export = w.exec(A, &rid(2), "export_history", BIG_EXPORT).data()["kind"].clone();
        format!("{limits} args: {args} export: {export}")
    };
    single_concurrent_request [gated()] => |w| {
        let _one = GATED.lock().unwrap_or_else(PoisonError::into_inner);
        GATE.set(|s| *s = (false, false));
        w.connect(A);
        std::thread::scope(|s| {
            let w = &*w;
            let first = s.spawn(move || brief(&w.exec(A, &rid(1), "create_alert", CREATE)));
            assert!(GATE.wait(|s| s.0), "the mutation never reached its effect");
            // A second request while the first holds its slot.
            let second = brief(&w.exec(A, &rid(2), "get_quote", QUOTE));
            GATE.set(|s| s.1 = true);
            format!("{} / {second}", first.join().unwrap())
        })
    };
    // ---- observation and shape
    no_effect_counter => |w| {
        let value = w.observe();
        let keys: BTreeSet<&str> = value
            .as_object()
            .map(|o| o.keys().map(String::as_str).collect())
            .unwrap_or_default();
        format!("{keys:?}")
    };
    v2_only_manifest => |w| {
        let versions = w.p.manifests()[0].meta.get(META_VERSIONS).cloned();
        // A v1 call: no protocol_version.
        let o = w.call(A, "list_tools", None);
        let v1 = match V1Response::from_bundle(&o.bundle) {
            Ok(V1Response::Success(_)) => "v1 success".to_string(),
            _ => brief(&o),
        };
        format!("{versions:?} {v1}")
    };
    pending_intent_mutability_unknown => |w| {
        w.connect(A);
        let o = w.exec(A, &rid(1), "create_alert", HIGH);
        format!("{} immutable={:?}", brief(&o), resolution_immutable(&o))
    };
    // ---- free text
    hostile_text => |w| {
        w.connect(A);
        let marked = |s: &Json| {
            let t = s.as_str().unwrap_or_default();
            let has = |c: char| t.contains(c);
            format!(
                "script={} esc={} rlo={} isolate={}",
                t.contains("<script>"),
                has('\u{1b}'),
                has('\u{202E}'),
                has('\u{2067}')
            )
        };
        let info = w.v2(A, "get_provider_info", &rid(1)).data();
        let tools = w.v2(A, "list_tools", &rid(2)).data();
        let export = w.exec(A, &rid(3), "export_history", r#"{"rows":2}"#);
        let notes: Vec<usize> = export.value()["rows"]
            .as_array()
            .map(|rows| rows.iter().map(|r| r["note"].as_str().map_or(0, str::len)).collect())
            .unwrap_or_default();
        let error = w.exec(A, &rid(4), "teleport", "{}");
        format!(
            "name: {} tool: {} notes: {notes:?} {} error: {} {}",
            marked(&info["provider_name"]),
            marked(&tools["tools"][0]["description"]),
            export.data()["kind"],
            brief(&error),
            marked(&Json::String(error.message())),
        )
    };
    // ---- order, issued strings, limits and availability
    lists_shuffled => |w| {
        w.connect(A);
        // Two answers of each, same session: the orders differ between
        // them, the sets do not.
        let orders = |w: &mut World, method: &str, key: &str, n: u64| {
            let d = w.v2(A, method, &rid(n)).data();
            let names: Vec<String> = d[key]
                .as_array()
                .map(|a| a.iter().map(|x| x.get("name").unwrap_or(x).to_string()).collect())
                .unwrap_or_default();
            names.join(",")
        };
        let t1 = orders(w, "list_tools", "tools", 1);
        let t2 = orders(w, "list_tools", "tools", 2);
        let s1 = orders(w, "get_provider_info", "scopes", 3);
        let s2 = orders(w, "get_provider_info", "scopes", 4);
        let caps = |w: &World| {
            w.negotiate_raw(A, &[2], &["async_operations", "cancellation", "large_results"])
                .data()["capabilities"]
                .to_string()
        };
        let (c1, c2, c3) = (caps(w), caps(w), caps(w));
        format!(
            "tools differ={} scopes differ={} caps differ={}",
            t1 != t2,
            s1 != s2,
            c1 != c2 || c2 != c3
        )
    };
    template_syntax_in_ids => |w| {
        let token = w.connect(A);
        let op = start_op(w);
        let rev = w.v2(A, "list_tools", &rid(2)).data()["revision"].clone();
        let resume = w.exec(A, &rid(3), "create_alert", HIGH).resume_token().unwrap_or_default();
        format!(
            "token={} op={} revision={} resume={}",
            token.contains("${"),
            op.contains("${"),
            rev.as_str().unwrap_or_default().contains("${"),
            resume.contains("${")
        )
    };
    inline_limit_fits_large_result => |w| {
        w.connect(A);
        let big = w.exec(A, &rid(1), "export_history", r#"{"rows":20000}"#);
        w.connect_with(A, &[]);
        let plain = w.exec(A, &rid(2), "export_history", r#"{"rows":20000}"#);
        format!("{} {} / {}", brief(&big), big.data()["kind"], brief(&plain))
    };
    unavailable_after_restart => |w| {
        w.connect(A);
        w.restart();
        w.connect(A);
        let first = w.v2(A, "list_tools", &rid(1));
        let again = w.v2(A, "list_tools", &rid(1));
        format!(
            "{} after={:?} / {}",
            brief(&first),
            first.bundle.get(keys::RETRY_AFTER_MS),
            brief(&again)
        )
    };
    operation_results_as_files => |w| {
        let op = start_op(w);
        w.now += 400;
        let g = w.get_op(A, &rid(1), &op);
        let file = g.file().unwrap_or_default();
        format!(
            "{} {} fd={} file_matches={}",
            brief(&g),
            g.data()["result"]["kind"],
            g.bundle.contains(keys::RESULT_FD),
            g.data()["result"]["sha256"].as_str()
                == Some(cetp_proto::canonical::sha256_hex(&file).as_str())
        )
    };
    // ---- the order of refusals
    deadline_checked_first => |w| {
        w.connect(A);
        // Two faults: a session of nobody's and a passed deadline.
        let b = w
            .exec_bundle(A, &rid(1), "create_alert", CREATE)
            .with(keys::SESSION_TOKEN, Value::str("no-such-session"))
            .with(keys::DEADLINE_AT_MS, Value::Long(w.now - 1_000));
        brief(&w.call(A, "execute_tool", Some(b)))
    };
    session_checked_first => |w| {
        w.connect(A);
        // Two faults: no request id, and a session of nobody's.
        let mut b = w.common(A, &rid(1)).with(keys::SESSION_TOKEN, Value::str("no-such-session"));
        b.remove(keys::REQUEST_ID);
        let two = brief(&w.call(A, "get_provider_info", Some(b)));
        // A token that is not a String, read as Bundle.getString reads it:
        // absent, so no session.
        let typed = w.common(A, &rid(2)).with(keys::SESSION_TOKEN, Value::Int(7));
        format!("{two} / {}", brief(&w.call(A, "list_tools", Some(typed))))
    };
    v2_only_v1_calls_unknown [ProviderConfig::default().with_latitude(Variant::V2OnlyManifest)] => |w| {
        brief(&w.call(A, "list_tools", None))
    };
    lenient_args_text => |w| {
        w.connect(A);
        let bom = format!("\u{feff}{CREATE}");
        brief(&w.exec(A, &rid(1), "create_alert", &bom))
    };
    foreign_operations_expired => |w| {
        let op = start_op(w);
        w.connect(B);
        brief(&w.get_op(B, &rid(1), &op))
    };
    large_result_inline_via_operation => |w| {
        w.connect(A);
        let o = w.exec(A, &rid(1), "export_history", r#"{"rows":20000}"#);
        let first = format!("{} {} fd={}", brief(&o), o.data()["kind"], o.file().is_some());
        let Some(op) = o.operation_id() else {
            return first;
        };
        w.now += 400;
        let g = w.get_op(A, &rid(1), &op);
        format!(
            "{first} / {} {} {} fd={} bytes={}",
            brief(&g),
            g.data()["state"],
            g.data()["result"]["kind"],
            g.bundle.contains(keys::RESULT_FD),
            g.data()["result"].to_string().len() > 1_000_000
        )
    };
}

#[test]
fn every_latitude_has_a_differential_test() {
    let all: Vec<&str> = Variant::ALL.iter().map(|l| l.name()).collect();
    let tested: BTreeSet<&str> = TESTED.iter().copied().collect();
    let missing: Vec<&&str> = all.iter().filter(|n| !tested.contains(**n)).collect();
    assert!(
        missing.is_empty(),
        "latitudes without a scenario: {missing:?}"
    );
    assert_eq!(TESTED.len(), all.len(), "a latitude has two scenarios");
    for s in scenarios() {
        assert!(
            Variant::parse(s.name).is_some(),
            "{}: no such latitude",
            s.name
        );
    }
}

/// The whole table at once, independent of the per-latitude tests (which a
/// filter or an `#[ignore]` could skip): every latitude's reference outcome
/// and variant outcome differ, and neither is empty.
#[test]
fn no_scenario_is_vacuous() {
    let mut same = Vec::new();
    for l in Variant::ALL {
        let s = scenario(l.name());
        let (reference, variant) = (s.reference(), s.variant());
        assert!(!reference.is_empty() && !variant.is_empty(), "{}", s.name);
        if reference == variant {
            same.push(format!("{}: {reference}", s.name));
        }
    }
    assert!(same.is_empty(), "latitudes that change nothing: {same:#?}");
}

/// session_checked_first reads a session token as Android's
/// `Bundle.getString` does: one that is not a String is absent, so the
/// call has no session (§5: NEGOTIATION_REQUIRED); the reference calls it
/// a malformed envelope (INVALID_REQUEST). The fuzz oracle admits both.
#[test]
fn a_session_token_of_another_type_is_no_session_to_session_checked_first() {
    let s = scenario("session_checked_first");
    let (reference, variant) = (s.reference(), s.variant());
    let second = |o: &str| o.rsplit(" / ").next().unwrap_or_default().to_string();
    assert!(
        second(&reference).contains("INVALID_REQUEST"),
        "{reference}"
    );
    assert!(
        second(&variant).contains("NEGOTIATION_REQUIRED"),
        "{variant}"
    );
}
