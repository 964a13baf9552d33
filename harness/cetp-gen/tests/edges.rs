//! Small schemas at the edges of what the generator handles: each must
//! generate, its valid values validate and its invalid values fail.

use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::{json, Value as Json};

fn edges() -> Vec<Json> {
    vec![
        json!(true),
        json!({}),
        json!({"type": ["string", "null"], "maxLength": 2}),
        json!({"type": "array", "prefixItems": [{"type": "integer"}, {"const": "x"}], "items": false}),
        json!({"const": {"a": [1, 2], "b": null}}),
        json!({"enum": [1, 1.5, "1", null, [1]], "type": ["number", "array"]}),
        json!({"type": "object", "properties": {"a": {}, "b": {}, "c": {}}, "additionalProperties": false, "minProperties": 3}),
        json!({"type": "object", "propertyNames": {"pattern": "^[a-c]+$"}, "minProperties": 1}),
        json!({"allOf": [{"properties": {"a": {"type": "integer"}}, "required": ["a"]}], "unevaluatedProperties": false}),
        json!({"type": "object", "properties": {"card": {"type": "string"}}, "dependentSchemas": {"card": {"required": ["cvv"]}}}),
        json!({"type": "array", "contains": {"type": "integer"}, "minContains": 2, "maxContains": 3, "maxItems": 5}),
        json!({"type": "integer", "exclusiveMaximum": 2.5, "exclusiveMinimum": -0.5}),
        json!({"type": "number", "multipleOf": 0.1, "minimum": 0, "maximum": 3}),
        json!({"type": "integer", "multipleOf": 0.5, "maximum": 10}),
        json!({"type": "string", "format": "x-vendor-format", "minLength": 2}),
        json!({"type": "string", "format": "email", "pattern": "^[a-m]"}),
        json!({"type": "string", "format": "date", "pattern": "^20"}),
        json!({"type": "string", "pattern": "^$"}),
        json!({"type": "string", "pattern": "^(ab|cd)$|^x"}),
        json!({"type": "string", "pattern": "^\\p{L}{2,4}$"}),
        json!({"type": "string", "pattern": "[.]\\s\\w+", "minLength": 5, "maxLength": 9}),
        json!({"$defs": {"a": {"$anchor": "pos", "type": "integer", "minimum": 1}}, "$ref": "#pos", "maximum": 3}),
        json!({"anyOf": [{"type": "null"}, {"type": "array", "items": {"$ref": "#"}, "maxItems": 2}]}),
        json!({"type": "object", "properties": {"next": {"$ref": "#"}, "v": {"type": "integer"}}, "required": ["v"]}),
        json!({"oneOf": [{"type": "integer", "multipleOf": 2}, {"type": "integer", "multipleOf": 3}], "minimum": 0, "maximum": 30}),
        json!({"not": {"type": ["string", "object", "array"]}}),
        json!({"type": "object", "patternProperties": {"^a": {"type": "integer"}, "^ab": {"minimum": 5}}, "additionalProperties": false}),
        json!({"type": "array", "items": {"enum": [true, false, null]}, "uniqueItems": true, "minItems": 3}),
        json!({"properties": {"x": {"$ref": "#/$defs/a%20b"}}, "required": ["x"], "$defs": {"a b": {"type": "boolean"}}}),
        json!({"type": "object", "properties": {"a/b": {"type": "string", "minLength": 1}, "c~d": {"const": 1}}, "required": ["a/b", "c~d"]}),
    ]
}

fn judge(schema: &Json) -> jsonschema::Validator {
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .should_validate_formats(true)
        .offline()
        .build(schema)
        .expect("compiles")
}

#[test]
fn edge_schemas_generate_valid_and_invalid_values() {
    let mut r = TestRunner::new_with_rng(
        Config {
            max_local_rejects: 1_000_000,
            ..Config::default()
        },
        TestRng::deterministic_rng(RngAlgorithm::ChaCha),
    );
    for schema in edges() {
        let v = judge(&schema);
        let s = cetp_gen::valid(&schema).unwrap_or_else(|e| panic!("{schema}: {e}"));
        for _ in 0..100 {
            let x = s
                .new_tree(&mut r)
                .unwrap_or_else(|e| panic!("{schema}: {e}"))
                .current();
            assert!(v.is_valid(&x), "{schema}: {x} is invalid");
        }
        for (violation, s) in cetp_gen::invalid(&schema).unwrap_or_else(|e| panic!("{schema}: {e}"))
        {
            for _ in 0..10 {
                let x = s
                    .new_tree(&mut r)
                    .unwrap_or_else(|e| panic!("{schema} {violation}: {e}"))
                    .current();
                assert!(!v.is_valid(&x), "{schema} {violation}: {x} is valid");
            }
        }
    }
}

#[test]
fn the_schema_false_has_only_invalid_values() {
    let e = cetp_gen::valid(&json!(false)).expect_err("no valid value");
    assert_eq!(e.keyword, "false");
    let inv = cetp_gen::invalid(&json!(false)).expect("invalid values");
    assert_eq!(inv.len(), 1);
    assert_eq!(inv[0].0.keyword, "false");
}
