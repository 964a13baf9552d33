//! Arguments for `execute_tool`, generated from a tool's input_schema when the
//! profile gives no sample. Every generated instance is checked against the
//! compiled schema, so "valid" and "invalid" are never guesses.

use cetp_proto::schema::CompiledSchema;
use serde_json::{json, Map, Value as Json};

const MAX_DEPTH: usize = 12;

fn resolve<'a>(root: &'a Json, schema: &'a Json) -> &'a Json {
    let mut s = schema;
    for _ in 0..MAX_DEPTH {
        match s.get("$ref").and_then(Json::as_str) {
            Some(r) if r.starts_with('#') => match root.pointer(&r[1..]) {
                Some(t) => s = t,
                None => return s,
            },
            _ => return s,
        }
    }
    s
}

fn first_type(schema: &Json) -> Option<String> {
    match schema.get("type") {
        Some(Json::String(t)) => Some(t.clone()),
        Some(Json::Array(ts)) => ts
            .iter()
            .filter_map(Json::as_str)
            .find(|t| *t != "null")
            .or_else(|| ts.first().and_then(Json::as_str))
            .map(str::to_string),
        _ => {
            if schema.get("properties").is_some() || schema.get("required").is_some() {
                Some("object".into())
            } else {
                None
            }
        }
    }
}

fn gen_number(schema: &Json, integer: bool) -> Json {
    let num = |k: &str| schema.get(k).and_then(Json::as_f64);
    let mut v = if let Some(m) = num("exclusiveMinimum") {
        if integer {
            m.floor() + 1.0
        } else {
            m + 1.0
        }
    } else {
        num("minimum").unwrap_or(1.0)
    };
    if let Some(mx) = num("maximum") {
        if v > mx {
            v = mx;
        }
    }
    if let Some(mx) = num("exclusiveMaximum") {
        if v >= mx {
            v = if integer { mx.ceil() - 1.0 } else { mx - 0.5 };
        }
    }
    if integer || v.fract() == 0.0 {
        json!(v as i64)
    } else {
        json!(v)
    }
}

fn gen_string(schema: &Json) -> Json {
    let format = schema.get("format").and_then(Json::as_str).unwrap_or("");
    let base = match format {
        "date-time" => "2026-01-01T00:00:00Z",
        "date" => "2026-01-01",
        "time" => "12:00:00Z",
        "email" => "probe@example.com",
        "uri" | "iri" => "https://example.com/",
        "uuid" => "123e4567-e89b-42d3-a456-426614174000",
        "ipv4" => "192.0.2.1",
        "ipv6" => "2001:db8::1",
        "hostname" => "example.com",
        _ => "ACME",
    };
    let min = schema.get("minLength").and_then(Json::as_u64).unwrap_or(0) as usize;
    let max = schema
        .get("maxLength")
        .and_then(Json::as_u64)
        .map(|m| m as usize);
    let mut s = base.to_string();
    if format.is_empty() {
        while s.chars().count() < min {
            s.push('A');
        }
        if let Some(max) = max {
            s = s.chars().take(max).collect();
        }
    }
    json!(s)
}

fn gen_valid(root: &Json, schema: &Json, depth: usize) -> Option<Json> {
    if depth > MAX_DEPTH {
        return None;
    }
    let schema = resolve(root, schema);
    match schema {
        Json::Bool(true) => return Some(json!({})),
        Json::Bool(false) => return None,
        _ => {}
    }
    if let Some(c) = schema.get("const") {
        return Some(c.clone());
    }
    if let Some(e) = schema.get("enum").and_then(Json::as_array) {
        return e.first().cloned();
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        if let Some(first) = schema
            .get(key)
            .and_then(Json::as_array)
            .and_then(|a| a.first())
        {
            if first_type(schema).is_none() {
                return gen_valid(root, first, depth + 1);
            }
        }
    }
    match first_type(schema).as_deref() {
        Some("object") | None => {
            let mut out = Map::new();
            let props = schema.get("properties").and_then(Json::as_object);
            if let Some(req) = schema.get("required").and_then(Json::as_array) {
                for name in req.iter().filter_map(Json::as_str) {
                    let sub = props
                        .and_then(|p| p.get(name))
                        .cloned()
                        .unwrap_or(json!({}));
                    out.insert(name.to_string(), gen_valid(root, &sub, depth + 1)?);
                }
            }
            Some(Json::Object(out))
        }
        Some("string") => Some(gen_string(schema)),
        Some("integer") => Some(gen_number(schema, true)),
        Some("number") => Some(gen_number(schema, false)),
        Some("boolean") => Some(json!(false)),
        Some("null") => Some(Json::Null),
        Some("array") => {
            let n = schema
                .get("minItems")
                .and_then(Json::as_u64)
                .unwrap_or(0)
                .min(16);
            let item = schema.get("items").cloned().unwrap_or(json!({}));
            let mut items = Vec::new();
            for _ in 0..n {
                items.push(gen_valid(root, &item, depth + 1)?);
            }
            Some(Json::Array(items))
        }
        Some(_) => None,
    }
}

/// A valid instance of `schema` (checked), or `None` when the generator
/// cannot satisfy it (then the profile must give `sample_args`).
pub fn valid_args(schema: &Json, dialect: &str) -> Option<Json> {
    let compiled = CompiledSchema::compile(schema, dialect).ok()?;
    let candidate = gen_valid(schema, schema, 0)?;
    compiled.is_valid(&candidate).then_some(candidate)
}

/// An instance that breaks `schema` (checked), derived from a valid one so
/// that it fails for one reason only where possible.
pub fn invalid_args(schema: &Json, dialect: &str, valid: &Json) -> Option<Json> {
    let compiled = CompiledSchema::compile(schema, dialect).ok()?;
    let root = resolve(schema, schema);
    let mut candidates = Vec::new();
    if let Some(obj) = valid.as_object() {
        // An unknown member where none is allowed: business validation alone
        // rarely notices it, so it shows whether the schema is enforced.
        let mut o = obj.clone();
        o.insert("cetp_unexpected_member".into(), json!(true));
        candidates.push(Json::Object(o));
        // A required member missing.
        if let Some(req) = root.get("required").and_then(Json::as_array) {
            if let Some(first) = req.iter().filter_map(Json::as_str).next() {
                let mut o = obj.clone();
                o.remove(first);
                candidates.push(Json::Object(o));
            }
        }
        // A member of the wrong type.
        for (k, v) in obj {
            let mut o = obj.clone();
            o.insert(
                k.clone(),
                match v {
                    Json::String(_) => json!(12345),
                    _ => json!("not-a-number"),
                },
            );
            candidates.push(Json::Object(o));
        }
    }
    candidates.push(json!(["not", "an", "object"]));
    candidates.into_iter().find(|c| !compiled.is_valid(c))
}

/// JSON text of `v` with every object's keys in reverse order: the same
/// canonical JSON as `serde_json::to_string(v)`, different bytes.
pub fn reordered_text(v: &Json) -> String {
    match v {
        Json::Object(m) => {
            let parts: Vec<String> = m
                .iter()
                .rev()
                .map(|(k, v)| format!("{}:{}", Json::String(k.clone()), reordered_text(v)))
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        Json::Array(a) => format!(
            "[{}]",
            a.iter().map(reordered_text).collect::<Vec<_>>().join(",")
        ),
        other => other.to_string(),
    }
}

/// Args that are still valid against `schema` but differ from `v` in one
/// value, so that a reused request id carries other content that the
/// Provider cannot refuse as invalid args (§6 speaks of other content, not
/// of broken args). Candidates change one leaf at a time: another `enum`
/// member, a number moved within its bounds, a string extended or
/// shortened, a boolean flipped; the first that validates wins. `None` when
/// no value can change without breaking the schema.
pub fn altered_valid(schema: &Json, dialect: &str, v: &Json) -> Option<Json> {
    let compiled = CompiledSchema::compile(schema, dialect).ok()?;
    let mut candidates = Vec::new();
    alternatives(
        schema,
        resolve(schema, schema),
        v,
        &mut Vec::new(),
        &mut candidates,
    );
    candidates
        .into_iter()
        .find(|c| c != v && compiled.is_valid(c))
}

/// Pushes every one-leaf alteration of `whole` at the leaves below `path`.
fn alternatives(
    root: &Json,
    schema: &Json,
    whole: &Json,
    path: &mut Vec<String>,
    out: &mut Vec<Json>,
) {
    if path.len() > MAX_DEPTH || out.len() > 256 {
        return;
    }
    let pointer: String = path.iter().map(|p| format!("/{p}")).collect();
    let Some(here) = whole.pointer(&pointer) else {
        return;
    };
    let mut replace = |value: Json| {
        let mut w = whole.clone();
        if let Some(slot) = w.pointer_mut(&pointer) {
            *slot = value;
            out.push(w);
        }
    };
    for key in ["enum", "examples"] {
        for e in schema
            .get(key)
            .and_then(Json::as_array)
            .into_iter()
            .flatten()
        {
            replace(e.clone());
        }
    }
    match here {
        Json::Object(m) => {
            for k in m.keys() {
                let sub = schema
                    .get("properties")
                    .and_then(|p| p.get(k))
                    .map(|s| resolve(root, s))
                    .unwrap_or(&Json::Null);
                path.push(cetp_proto::pointer::escape(k).into_owned());
                alternatives(root, sub, whole, path, out);
                path.pop();
            }
        }
        Json::Array(a) => {
            let items = schema
                .get("items")
                .map(|s| resolve(root, s))
                .unwrap_or(&Json::Null);
            for i in 0..a.len().min(8) {
                path.push(i.to_string());
                alternatives(root, items, whole, path, out);
                path.pop();
            }
        }
        Json::Number(n) => {
            if let Some(i) = n.as_i64() {
                for d in [1, -1, 2, -2, 10] {
                    replace(json!(i.saturating_add(d)));
                }
            }
            let f = n.as_f64().unwrap_or(0.0);
            for x in [f + 1.0, f - 1.0, f + 0.5, f * 2.0, f / 2.0] {
                if let Some(num) = serde_json::Number::from_f64(x) {
                    replace(Json::Number(num));
                }
            }
        }
        Json::String(s) => {
            replace(json!(format!("{s}X")));
            replace(json!(format!("{s}1")));
            let mut shorter = s.clone();
            if shorter.pop().is_some() && !shorter.is_empty() {
                replace(json!(shorter));
            }
            replace(json!("cetp"));
        }
        Json::Bool(b) => replace(json!(!b)),
        Json::Null => {}
    }
}

/// Valid args padded past `limit` bytes: the longest string member grows, or
/// a padding member is added.
pub fn oversize(valid: &Json, limit: usize) -> String {
    let mut v = valid.clone();
    let pad = "A".repeat(limit + 1);
    let grown = v.as_object_mut().and_then(|m| {
        let key = m
            .iter()
            .find(|(_, val)| val.is_string())
            .map(|(k, _)| k.clone())?;
        m.insert(key, json!(pad.clone()));
        Some(())
    });
    if grown.is_none() {
        if let Some(m) = v.as_object_mut() {
            m.insert("cetp_padding".into(), json!(pad));
        } else {
            v = json!({ "cetp_padding": pad });
        }
    }
    v.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use cetp_proto::schema::DEFAULT_DIALECT;

    fn alert_schema() -> Json {
        json!({"type":"object","properties":{"symbol":{"type":"string"},"price":{"type":"number","exclusiveMinimum":0}},
               "required":["symbol","price"],"additionalProperties":false})
    }

    #[test]
    fn valid_and_invalid_are_checked() {
        let s = alert_schema();
        let v = valid_args(&s, DEFAULT_DIALECT).unwrap();
        assert_eq!(v, json!({"symbol":"ACME","price":1}));
        let bad = invalid_args(&s, DEFAULT_DIALECT, &v).unwrap();
        let c = CompiledSchema::compile(&s, DEFAULT_DIALECT).unwrap();
        assert!(!c.is_valid(&bad));
    }

    #[test]
    fn refs_and_formats() {
        let s = json!({"$defs":{"d":{"type":"string","format":"date-time"}},"type":"object",
                       "properties":{"when":{"$ref":"#/$defs/d"},"n":{"type":"integer","minimum":3,"maximum":9}},
                       "required":["when","n"]});
        assert_eq!(
            valid_args(&s, DEFAULT_DIALECT).unwrap(),
            json!({"when":"2026-01-01T00:00:00Z","n":3})
        );
    }

    #[test]
    fn unsatisfiable_patterns_give_none() {
        let s = json!({"type":"object","properties":{"code":{"type":"string","pattern":"^[0-9]{6}$"}},"required":["code"]});
        assert_eq!(valid_args(&s, DEFAULT_DIALECT), None);
    }

    #[test]
    fn reorder_keeps_canonical_form() {
        let v = json!({"a":1,"b":{"c":2,"d":[{"e":1,"f":2}]}});
        let text = reordered_text(&v);
        assert_ne!(text, v.to_string());
        let back: Json = serde_json::from_str(&text).unwrap();
        assert_eq!(back, v);
        assert!(text.starts_with("{\"b\""));
    }

    #[test]
    fn altered_args_stay_valid() {
        // An enum field changes to another member, never to a value outside
        // the schema (the IDEM-002 false FAIL).
        let s = json!({"type":"object","properties":{"kind":{"enum":["work","home"]}},
                       "required":["kind"],"additionalProperties":false});
        let v = json!({"kind": "work"});
        assert_eq!(
            altered_valid(&s, DEFAULT_DIALECT, &v),
            Some(json!({"kind": "home"}))
        );
        // Bounds hold: a price with exclusiveMinimum 0 moves up, not to 0.
        let v = json!({"symbol":"ACME","price":1});
        let alt = altered_valid(&alert_schema(), DEFAULT_DIALECT, &v).unwrap();
        assert_ne!(alt, v);
        let c = CompiledSchema::compile(&alert_schema(), DEFAULT_DIALECT).unwrap();
        assert!(c.is_valid(&alt));
        // Nothing can change: a single-member enum.
        let s =
            json!({"type":"object","properties":{"k":{"const":"x","enum":["x"]}},"required":["k"]});
        assert_eq!(altered_valid(&s, DEFAULT_DIALECT, &json!({"k":"x"})), None);
    }

    #[test]
    fn oversize_pads() {
        let v = json!({"symbol":"ACME","price":1});
        let big = oversize(&v, 100);
        assert!(big.len() > 100);
        let parsed: Json = serde_json::from_str(&big).unwrap();
        assert_eq!(parsed["price"], json!(1));
    }
}
