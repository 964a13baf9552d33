//! Schemas that cannot be satisfied or generated: each is a GenError naming
//! the keyword and where it is.

use cetp_gen::{GenError, Kind};
use serde_json::{json, Value as Json};

fn err(schema: Json) -> GenError {
    match cetp_gen::valid(&schema) {
        Ok(_) => panic!("{schema} generated"),
        Err(e) => e,
    }
}

fn check(schema: Json, kind: Kind, keyword: &str, pointer: &str) -> String {
    let e = err(schema.clone());
    assert_eq!(
        (e.kind, e.keyword.as_str(), e.pointer.as_str()),
        (kind, keyword, pointer),
        "{schema}: {e}"
    );
    e.to_string()
}

#[test]
fn contradictory_bounds_name_the_bound() {
    let m = check(
        json!({"type": "integer", "minimum": 5, "maximum": 1}),
        Kind::Unsatisfiable,
        "maximum",
        "",
    );
    assert_eq!(m, "cannot generate a value for the schema root: `maximum` (1) leaves no number above `minimum` (5)");
    check(
        json!({"properties": {"n": {"type": "number", "exclusiveMinimum": 3, "maximum": 3}}, "required": ["n"]}),
        Kind::Unsatisfiable,
        "maximum",
        "/properties/n",
    );
    check(
        json!({"type": "string", "minLength": 4, "maxLength": 2}),
        Kind::Unsatisfiable,
        "maxLength",
        "",
    );
    check(
        json!({"type": "array", "minItems": 3, "maxItems": 1}),
        Kind::Unsatisfiable,
        "maxItems",
        "",
    );
    check(
        json!({"type": "object", "required": ["a", "b"], "maxProperties": 1}),
        Kind::Unsatisfiable,
        "maxProperties",
        "",
    );
    check(
        json!({"type": "integer", "minimum": 1, "maximum": 4, "multipleOf": 5}),
        Kind::Unsatisfiable,
        "multipleOf",
        "",
    );
}

#[test]
fn types_that_admit_nothing() {
    check(json!({"type": []}), Kind::Unsatisfiable, "type", "");
    check(
        json!({"allOf": [{"type": "string"}, {"type": "integer"}]}),
        Kind::Unsatisfiable,
        "type",
        "/allOf/1",
    );
    check(
        json!({"type": "string", "enum": [1, 2]}),
        Kind::Unsatisfiable,
        "enum",
        "",
    );
    check(
        json!({"properties": {"x": false}, "required": ["x"]}),
        Kind::Unsatisfiable,
        "false",
        "/properties/x",
    );
    check(
        json!({"type": "string", "oneOf": [{"type": "integer"}, {"type": "null"}]}),
        Kind::Unsatisfiable,
        "oneOf",
        "",
    );
}

#[test]
fn references_to_nowhere_and_outside() {
    check(
        json!({"properties": {"x": {"$ref": "#/$defs/missing"}}, "required": ["x"]}),
        Kind::Invalid,
        "$ref",
        "/properties/x",
    );
    check(json!({"$ref": "#nowhere"}), Kind::Invalid, "$ref", "");
    check(
        json!({"properties": {"x": {"$ref": "https://example.com/s.json"}}}),
        Kind::Unsupported,
        "$ref",
        "/properties/x",
    );
    check(
        json!({"$dynamicRef": "#meta"}),
        Kind::Unsupported,
        "$dynamicRef",
        "",
    );
}

#[test]
fn ref_cycles_without_a_way_out_are_too_deep() {
    check(
        json!({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}),
        Kind::TooDeep,
        "$ref",
        // The hop at which the chain was given up, named through the refs.
        &"/$ref".repeat(32),
    );
    let e = err(json!({
        "$defs": {"list": {"type": "object", "properties": {"next": {"$ref": "#/$defs/list"}}, "required": ["next"]}},
        "$ref": "#/$defs/list"
    }));
    assert_eq!(
        (e.kind, e.keyword.as_str()),
        (Kind::TooDeep, "required"),
        "{e}"
    );
}

#[test]
fn unsupported_patterns_say_why() {
    let m = check(
        json!({"properties": {"x": {"type": "string", "pattern": "^(?=a)a+$"}}, "required": ["x"]}),
        Kind::Unsupported,
        "pattern",
        "/properties/x",
    );
    assert_eq!(
        m,
        "cannot generate a value for /properties/x: `pattern` \"^(?=a)a+$\" uses a look-around, which is not supported"
    );
    let m = check(
        json!({"type": "string", "pattern": "(a)\\1"}),
        Kind::Unsupported,
        "pattern",
        "",
    );
    assert!(m.contains("uses a backreference"), "{m}");
    let m = check(
        json!({"type": "string", "pattern": "\\bword\\b"}),
        Kind::Unsupported,
        "pattern",
        "",
    );
    assert!(m.contains("word boundary"), "{m}");
    check(
        json!({"type": "string", "pattern": "(unclosed"}),
        Kind::Invalid,
        "pattern",
        "",
    );
}

#[test]
fn bounds_past_the_generators_limits() {
    let m = check(
        json!({"type": "string", "minLength": 100000}),
        Kind::Unsupported,
        "minLength",
        "",
    );
    assert!(m.contains("bound of 16384"), "{m}");
    check(
        json!({"type": "array", "minItems": 100000}),
        Kind::Unsupported,
        "minItems",
        "",
    );
}

/// An error that rules out only an alternative does not stop generation:
/// the optional property, the `anyOf` branch is left out.
#[test]
fn local_contradictions_leave_the_rest() {
    let schema = json!({
        "type": "object",
        "properties": {
            "never": false,
            "empty": {"type": "integer", "minimum": 2, "maximum": 1},
            "either": {"anyOf": [{"type": "string", "minLength": 3, "maxLength": 1}, {"type": "boolean"}]}
        },
        "required": ["either"]
    });
    let s = cetp_gen::valid(&schema).expect("generates");
    let mut r = proptest::test_runner::TestRunner::deterministic();
    use proptest::strategy::{Strategy, ValueTree};
    for _ in 0..50 {
        let v = s.new_tree(&mut r).unwrap().current();
        assert!(v.get("never").is_none() && v.get("empty").is_none(), "{v}");
        assert!(v["either"].is_boolean(), "{v}");
    }
}
