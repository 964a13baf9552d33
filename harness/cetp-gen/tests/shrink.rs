//! Generated values shrink: a failing property ends at a small value.

use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, TestError, TestRunner};
use serde_json::{json, Value as Json};

fn minimal_failure(schema: &Json, fails: impl Fn(&Json) -> bool) -> Json {
    let s = cetp_gen::valid(schema).expect("generates");
    let mut runner = TestRunner::new(Config {
        cases: 512,
        failure_persistence: None,
        ..Config::default()
    });
    match runner.run(&s, |v| {
        proptest::prop_assert!(!fails(&v));
        Ok(())
    }) {
        Err(TestError::Fail(_, v)) => v,
        other => panic!("expected a failure, got {other:?}"),
    }
}

#[test]
fn a_failing_object_shrinks_to_its_smallest_form() {
    let schema = json!({
        "type": "object",
        "properties": {
            "count": {"type": "integer", "minimum": 0, "maximum": 100000},
            "name": {"type": "string", "minLength": 2, "maxLength": 40},
            "note": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}}
        },
        "required": ["count", "name"],
        "additionalProperties": false
    });
    // Fails for every count of at least 1000: the smallest such value has
    // count 1000, the shortest name and no optional property.
    let v = minimal_failure(&schema, |v| v["count"].as_i64().unwrap() >= 1000);
    assert_eq!(v["count"], json!(1000), "{v}");
    assert_eq!(v["name"].as_str().unwrap().chars().count(), 2, "{v}");
    assert_eq!(v.as_object().unwrap().len(), 2, "{v}");
}

#[test]
fn a_failing_nested_array_shrinks_to_one_small_item() {
    let entry: Json = serde_json::from_str(include_str!("schemas/nested_orders.json")).unwrap();
    let schema = &entry["schema"];
    // Fails when some order has a quantity of at least 50.
    let v = minimal_failure(schema, |v| {
        v["orders"]
            .as_array()
            .unwrap()
            .iter()
            .any(|o| o["qty"].as_i64().unwrap() >= 50)
    });
    let orders = v["orders"].as_array().unwrap();
    assert_eq!(orders.len(), 1, "{v}");
    assert_eq!(orders[0]["qty"], json!(50), "{v}");
    // The pattern's own shrinking: the sku is still a valid sku.
    assert!(regex::Regex::new("^[A-Z]{3}-[0-9]{4}$")
        .unwrap()
        .is_match(orders[0]["sku"].as_str().unwrap()));
}

#[test]
fn recursion_is_bounded() {
    let entry: Json = serde_json::from_str(include_str!("schemas/ref_tree.json")).unwrap();
    let s = cetp_gen::valid(&entry["schema"]).unwrap();
    fn depth(v: &Json) -> usize {
        match v {
            Json::Array(a) => 1 + a.iter().map(depth).max().unwrap_or(0),
            Json::Object(m) => 1 + m.values().map(depth).max().unwrap_or(0),
            _ => 0,
        }
    }
    let mut r = TestRunner::deterministic();
    let mut deepest = 0;
    for _ in 0..500 {
        deepest = deepest.max(depth(&s.new_tree(&mut r).unwrap().current()));
    }
    // Eight nesting levels of the generator, each object and its array.
    assert!((3..=9).contains(&deepest), "deepest {deepest}");
}
