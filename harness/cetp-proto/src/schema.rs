//! JSON Schema handling for tool input/output schemas (§3.2, §3.3).
//!
//! Schemas come from untrusted Providers. They must not reference the network
//! and `$ref` may only point into the same document; validators are built
//! offline so that even a `$ref` we failed to spot can never fetch anything.

use crate::violation::Violation;
use serde_json::Value as Json;

/// The dialect v2 assumes when `schema_dialect` is absent.
pub const DEFAULT_DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";

/// Dialects the harness can validate with, by their meta-schema URI.
pub fn draft_for(dialect: &str) -> Option<jsonschema::Draft> {
    let d = dialect.trim_end_matches('#');
    match d {
        "https://json-schema.org/draft/2020-12/schema" => Some(jsonschema::Draft::Draft202012),
        "https://json-schema.org/draft/2019-09/schema" => Some(jsonschema::Draft::Draft201909),
        "http://json-schema.org/draft-07/schema" => Some(jsonschema::Draft::Draft7),
        "http://json-schema.org/draft-06/schema" => Some(jsonschema::Draft::Draft6),
        "http://json-schema.org/draft-04/schema" => Some(jsonschema::Draft::Draft4),
        _ => None,
    }
}

const REF_KEYWORDS: &[&str] = &["$ref", "$dynamicRef", "$recursiveRef"];

/// Finds references that leave the document (§3.2). Returns one violation per
/// offending keyword, with its JSON pointer.
pub fn foreign_refs(schema: &Json, at: &str) -> Vec<Violation> {
    let mut out = Vec::new();
    walk_refs(schema, &mut at.to_string(), &mut out);
    out
}

fn walk_refs(node: &Json, pointer: &mut String, out: &mut Vec<Violation>) {
    match node {
        Json::Object(map) => {
            for (k, v) in map {
                let len = pointer.len();
                crate::pointer::push(pointer, k);
                if REF_KEYWORDS.contains(&k.as_str()) {
                    match v.as_str() {
                        Some(r) if r.starts_with('#') => {}
                        Some(r) => out.push(Violation::must(
                            "schema.ref.same_document",
                            "3.2",
                            pointer.clone(),
                            format!("`{k}` points outside the schema document: {r:?}"),
                        )),
                        None => out.push(Violation::must(
                            "schema.ref.same_document",
                            "3.2",
                            pointer.clone(),
                            format!("`{k}` is not a string"),
                        )),
                    }
                }
                walk_refs(v, pointer, out);
                pointer.truncate(len);
            }
        }
        Json::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                let len = pointer.len();
                pointer.push('/');
                pointer.push_str(&i.to_string());
                walk_refs(v, pointer, out);
                pointer.truncate(len);
            }
        }
        _ => {}
    }
}

/// A schema compiled for validating instances.
#[derive(Clone)]
pub struct CompiledSchema {
    validator: std::sync::Arc<jsonschema::Validator>,
}

/// Compiled schemas by (dialect, schema text): compiling is the costliest
/// step of judging a tool list, and a run (a fuzz run above all) meets the
/// same few schemas thousands of times. Bounded: emptied when full.
type Compiled = std::sync::Mutex<
    std::collections::HashMap<(String, String), std::sync::Arc<jsonschema::Validator>>,
>;
static COMPILED: std::sync::LazyLock<Compiled> = std::sync::LazyLock::new(Default::default);
const MAX_COMPILED: usize = 512;

impl std::fmt::Debug for CompiledSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CompiledSchema")
    }
}

/// At most this many instance errors are reported per validation: a hostile
/// schema/instance pair can otherwise produce millions.
pub const MAX_REPORTED_ERRORS: usize = 8;

impl CompiledSchema {
    /// Compiles offline. Fails on foreign references, unknown dialects and
    /// schemas the library rejects.
    pub fn compile(schema: &Json, dialect: &str) -> Result<CompiledSchema, String> {
        if let Some(v) = foreign_refs(schema, "").first() {
            return Err(v.message.clone());
        }
        if !schema.is_object() && !schema.is_boolean() {
            return Err("a schema must be an object or a boolean".into());
        }
        let draft =
            draft_for(dialect).ok_or_else(|| format!("unknown schema dialect {dialect:?}"))?;
        let key = (dialect.to_string(), schema.to_string());
        let cache = || COMPILED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(v) = cache().get(&key) {
            return Ok(CompiledSchema {
                validator: v.clone(),
            });
        }
        let validator = std::sync::Arc::new(
            jsonschema::options()
                .offline()
                .with_draft(draft)
                .should_validate_formats(true)
                .build(schema)
                .map_err(|e| format!("schema does not compile: {e}"))?,
        );
        let mut c = cache();
        if c.len() >= MAX_COMPILED {
            c.clear();
        }
        c.insert(key, validator.clone());
        Ok(CompiledSchema { validator })
    }

    /// Whether `instance` satisfies the schema (no error messages built).
    pub fn is_valid(&self, instance: &Json) -> bool {
        self.validator.is_valid(instance)
    }

    /// Instance errors as "`/pointer`: message", at most [`MAX_REPORTED_ERRORS`].
    pub fn errors(&self, instance: &Json) -> Vec<String> {
        self.validator
            .iter_errors(instance)
            .take(MAX_REPORTED_ERRORS)
            .map(|e| format!("`{}`: {}", e.instance_path(), e))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn local_refs_are_fine_remote_are_not() {
        let ok =
            json!({"$defs": {"p": {"type": "number"}}, "properties": {"x": {"$ref": "#/$defs/p"}}});
        assert!(foreign_refs(&ok, "").is_empty());
        let s = CompiledSchema::compile(&ok, DEFAULT_DIALECT).unwrap();
        assert!(s.is_valid(&json!({"x": 1})));
        assert!(!s.is_valid(&json!({"x": "a"})));
        assert_eq!(s.errors(&json!({"x": "a"})).len(), 1);

        let bad = json!({"properties": {"x": {"$ref": "https://evil.example/s.json"}}});
        let v = foreign_refs(&bad, "/tools/0/input_schema");
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].at, "/tools/0/input_schema/properties/x/$ref");
        assert!(CompiledSchema::compile(&bad, DEFAULT_DIALECT).is_err());
    }

    #[test]
    fn formats_are_checked() {
        let s = CompiledSchema::compile(
            &json!({"type":"string","format":"date-time"}),
            DEFAULT_DIALECT,
        )
        .unwrap();
        assert!(!s.is_valid(&json!("yesterday")));
        assert!(s.is_valid(&json!("2026-09-02T12:00:00Z")));
    }

    #[test]
    fn unknown_dialect_is_refused() {
        assert!(CompiledSchema::compile(&json!({}), "https://example.com/my-dialect").is_err());
    }
}
