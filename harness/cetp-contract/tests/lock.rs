//! Building, writing and reading `cetp-lock/1` files.

use cetp_contract::lock::{build, Answers, Lock, FORMAT};
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{json, Value as Json};
use std::path::Path;

fn answers() -> Answers {
    Answers {
        negotiate: json!({
            "selected_version": 2, "provider_id": "com.example.app", "provider_name": "Example",
            "session_token": "opaque", "capabilities": ["async_operations"],
            "limits": {"max_request_bytes": 65536, "max_inline_result_bytes": 262144,
                       "max_concurrent_requests": 4, "idempotency_window_seconds": 86400}
        }),
        provider_info: Some(json!({
            "provider_id": "com.example.app", "provider_name": "Example", "description": "Alerts",
            "scopes": [
                {"name": "alerts.write", "title": "Manage alerts", "access": "write", "sensitivity": "financial"},
                {"name": "alerts.read", "access": "read", "sensitivity": "personal"}
            ]
        })),
        list_tools: json!({"revision": "tools-42", "tools": [
            {"name": "list_alerts", "description": "Your alerts",
             "input_schema": {"type": "object"}, "output_schema": {"type": "object"},
             "scopes": ["alerts.read"],
             "annotations": {"effect": "read", "risk": "low", "idempotent": true, "confirmation": "never"}},
            {"name": "create_alert", "title": "Create alert", "description": "Create a price alert",
             "input_schema": {"type": "object", "properties": {"symbol": {"type": "string"},
                 "price": {"type": "number", "exclusiveMinimum": 0}},
                 "required": ["symbol", "price"], "additionalProperties": false},
             "output_schema": {"type": "object", "properties": {"alert_id": {"type": "string"}}, "required": ["alert_id"]},
             "scopes": ["alerts.write"],
             "annotations": {"effect": "create", "risk": "moderate", "destructive": false, "idempotent": false,
                             "open_world": false, "confirmation": "provider_policy", "execution": "sync_or_async"},
             "x-vendor": "ignored, as §3.2 requires"}
        ]}),
    }
}

fn offered() -> Vec<String> {
    ["async_operations", "cancellation", "large_results"]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

/// Fails on the first object whose keys are not in ascending order.
struct SortedKeys;

impl<'de> Deserialize<'de> for SortedKeys {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(SortedKeysVisitor)
    }
}

struct SortedKeysVisitor;

impl<'de> Visitor<'de> for SortedKeysVisitor {
    type Value = SortedKeys;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<SortedKeys, A::Error> {
        let mut last: Option<String> = None;
        while let Some(k) = map.next_key::<String>()? {
            if last.as_ref().is_some_and(|l| *l >= k) {
                return Err(serde::de::Error::custom(format!(
                    "key {k:?} after {last:?}"
                )));
            }
            map.next_value::<SortedKeys>()?;
            last = Some(k);
        }
        Ok(SortedKeys)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<SortedKeys, A::Error> {
        while seq.next_element::<SortedKeys>()?.is_some() {}
        Ok(SortedKeys)
    }
    fn visit_bool<E>(self, _: bool) -> Result<SortedKeys, E> {
        Ok(SortedKeys)
    }
    fn visit_i64<E>(self, _: i64) -> Result<SortedKeys, E> {
        Ok(SortedKeys)
    }
    fn visit_u64<E>(self, _: u64) -> Result<SortedKeys, E> {
        Ok(SortedKeys)
    }
    fn visit_f64<E>(self, _: f64) -> Result<SortedKeys, E> {
        Ok(SortedKeys)
    }
    fn visit_str<E>(self, _: &str) -> Result<SortedKeys, E> {
        Ok(SortedKeys)
    }
    fn visit_unit<E>(self) -> Result<SortedKeys, E> {
        Ok(SortedKeys)
    }
}

fn assert_valid_lock(text: &str) {
    serde_json::from_str::<SortedKeys>(text).expect("keys sorted at every level");
    let schema: Json = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../vectors/schema/lock.schema.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let v = jsonschema::options().build(&schema).unwrap();
    let value: Json = serde_json::from_str(text).unwrap();
    let errors: Vec<String> = v
        .iter_errors(&value)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
}

#[test]
fn a_clean_provider_gives_a_schema_valid_sorted_lock() {
    let built = build(&answers(), &offered(), Some("com.example.app"));
    assert!(built.problems.is_empty(), "{:?}", built.problems);
    let lock = &built.lock;
    assert_eq!(lock.format, FORMAT);
    assert_eq!(lock.revision, "tools-42");
    assert_eq!(lock.capabilities, vec!["async_operations"]);
    let names: Vec<&str> = lock.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["create_alert", "list_alerts"]);
    let scopes: Vec<&str> = lock.scopes.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(scopes, ["alerts.read", "alerts.write"]);
    let list = lock.tool("list_alerts").unwrap();
    assert_eq!(list.effect_class, "PURE");
    assert_eq!(list.annotations.execution, "sync");
    assert_eq!(
        lock.tool("create_alert").unwrap().effect_class,
        "REPLAYABLE"
    );
    let text = lock.to_pretty_json();
    assert_valid_lock(&text);
    assert_eq!(Lock::parse(&text).unwrap(), *lock);
}

#[test]
fn the_lock_does_not_depend_on_answer_order_or_key_order() {
    let a = build(&answers(), &offered(), None).lock.to_pretty_json();
    let mut shuffled = answers();
    shuffled.list_tools["tools"]
        .as_array_mut()
        .unwrap()
        .reverse();
    shuffled.provider_info.as_mut().unwrap()["scopes"]
        .as_array_mut()
        .unwrap()
        .reverse();
    shuffled.list_tools["tools"][0]["scopes"] = json!(["alerts.write", "alerts.write"]);
    let b = build(&shuffled, &offered(), None).lock.to_pretty_json();
    assert_eq!(a, b);
}

#[test]
fn hashes_are_rfc_8785() {
    let lock = build(&answers(), &offered(), None).lock;
    let t = lock.tool("create_alert").unwrap();
    assert_eq!(
        t.input_schema_sha256,
        cetp_proto::canonical::canonical_hash(&t.input_schema).unwrap()
    );
}

#[test]
fn broken_answers_are_problems_naming_the_tool() {
    let mut a = answers();
    a.list_tools["tools"][1]["annotations"]["risk"] = json!("negligible");
    a.list_tools["tools"][1]["input_schema"]["maximum"] = json!(9_007_199_254_740_993u64);
    let built = build(&a, &offered(), None);
    let got: Vec<(&str, Option<&str>, &str)> = built
        .problems
        .iter()
        .map(|p| (p.rule, p.tool.as_deref(), p.pointer.as_str()))
        .collect();
    assert_eq!(
        got,
        vec![
            (
                "enum.unknown",
                Some("create_alert"),
                "/tools/1/annotations/risk"
            ),
            (
                "schema.canonical",
                Some("create_alert"),
                "/tools/1/input_schema"
            ),
        ]
    );
}

#[test]
fn reading_refuses_what_is_not_a_consistent_lock() {
    let good = build(&answers(), &offered(), None).lock;
    let text = good.to_pretty_json();
    let cases: Vec<(String, &str)> = vec![
        (text.replace("cetp-lock/1", "cetp-lock/9"), "format"),
        (text.replace("\"tools-42\"", "42"), "not a lock file"),
        (
            text.replace("\"revision\"", "\"extra\": 1, \"revision\""),
            "unknown field",
        ),
        (
            {
                let mut l = good.clone();
                l.tools.reverse();
                l.to_pretty_json()
            },
            "sorted",
        ),
        (
            {
                let mut l = good.clone();
                l.tools[0].input_schema = json!({"type": "string"});
                l.to_pretty_json()
            },
            "input_schema_sha256",
        ),
        (
            {
                let mut l = good.clone();
                l.tools[0].annotations.effect = "read".into();
                l.to_pretty_json()
            },
            "effect_class",
        ),
    ];
    for (text, expected) in cases {
        let err = Lock::parse(&text).unwrap_err();
        assert!(err.contains(expected), "{expected}: {err}");
    }
}

/// A lock and its problems from answers with every oddity `build` handles
/// (a scope and a tool named twice, a nameless scope, annotations outside
/// their enums, a schema RFC 8785 cannot hash, provider_id from both
/// answers), pinned whole: the lock is what drift is judged against.
#[test]
fn odd_answers_lock_snapshot() {
    let mut a = answers();
    let scopes = a.provider_info.as_mut().unwrap()["scopes"]
        .as_array_mut()
        .unwrap();
    scopes.push(json!({"name": "alerts.read", "access": "write", "sensitivity": "health"}));
    scopes.push(json!({"access": "read"}));
    a.provider_info.as_mut().unwrap()["provider_id"] = json!("com.example.app.info");
    let tools = a.list_tools["tools"].as_array_mut().unwrap();
    let mut twin = tools[0].clone();
    twin["description"] = json!("the second list_alerts");
    tools.push(twin);
    tools[1]["annotations"]["risk"] = json!("negligible");
    tools[1]["annotations"]["execution"] = json!("later");
    tools[1]["scopes"] = json!(["alerts.write", "alerts.read", "alerts.write"]);
    tools[0]["output_schema"]["maximum"] = json!(9_007_199_254_740_993u64);
    let built = build(&a, &offered(), Some("com.example"));
    let problems: Vec<String> = built.problems.iter().map(|p| format!("{p:?}")).collect();
    insta::assert_snapshot!(format!(
        "{}\n{}",
        built.lock.to_pretty_json(),
        problems.join("\n")
    ));
    let without_info = build(
        &Answers {
            provider_info: None,
            ..answers()
        },
        &offered(),
        None,
    );
    insta::assert_snapshot!("without_provider_info", without_info.lock.to_pretty_json());
}
