//! `${NAME/json/pointer}` templates over bound answers.
//!
//! A string that is exactly one template becomes the referenced JSON value
//! (a number stays a number); templates inside a longer string are
//! interpolated as text.

use serde_json::Value as Json;
use std::collections::BTreeMap;

/// Values bound by a case's steps, by name; templates look them up.
pub type Bindings = BTreeMap<String, Json>;

/// Looks up `NAME/pointer` (or just `NAME`).
pub fn lookup(bindings: &Bindings, reference: &str) -> Result<Json, String> {
    let (name, pointer) = match reference.find('/') {
        Some(i) => (&reference[..i], &reference[i..]),
        None => (reference, ""),
    };
    let root = bindings
        .get(name)
        .ok_or_else(|| format!("nothing is bound to `{name}`"))?;
    root.pointer(pointer)
        .cloned()
        .ok_or_else(|| format!("`{name}` has nothing at `{pointer}`"))
}

/// A template that refers to the value at `pointer` of the answer bound to
/// `name`. Code that passes a bound value on (an operation id, a token) uses
/// this, never the value itself: a value from the Provider is data, and a
/// `${…}` inside it must reach the Provider as it came.
pub fn reference(name: &str, pointer: &str) -> String {
    format!("${{{name}{pointer}}}")
}

/// Text that expands to exactly `text`: every `$` doubled, so no `${` in it
/// starts a template. The one way a string the harness did not write (a
/// Provider's tool name, id or token) may enter a step's template field.
pub fn literal(text: &str) -> String {
    text.replace('$', "$$")
}

/// Expands a template string into a JSON value. `$$` stands for one `$`
/// ([`literal`]).
pub fn expand(bindings: &Bindings, text: &str) -> Result<Json, String> {
    if let Some(inner) = text.strip_prefix("${").and_then(|t| t.strip_suffix('}')) {
        if !inner.contains("${") && !inner.contains('}') && !inner.contains('$') {
            return lookup(bindings, inner);
        }
    }
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find('$') {
        out.push_str(&rest[..start]);
        let after = &rest[start + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
            continue;
        }
        let Some(after) = after.strip_prefix('{') else {
            out.push('$');
            rest = after;
            continue;
        };
        let end = after
            .find('}')
            .ok_or_else(|| format!("unterminated template in {text:?}"))?;
        match lookup(bindings, &after[..end])? {
            Json::String(s) => out.push_str(&s),
            other => out.push_str(&other.to_string()),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(Json::String(out))
}

/// Expands a template that must yield a string.
pub fn expand_string(bindings: &Bindings, text: &str) -> Result<String, String> {
    match expand(bindings, text)? {
        Json::String(s) => Ok(s),
        other => Err(format!("{text:?} expands to {other}, not a string")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn whole_and_interpolated() {
        let mut b = Bindings::new();
        b.insert(
            "r1".into(),
            json!({"data": {"operation_id": "op_1", "n": 3}}),
        );
        assert_eq!(expand(&b, "${r1/data/n}").unwrap(), json!(3));
        assert_eq!(
            expand(&b, "id=${r1/data/operation_id};n=${r1/data/n}").unwrap(),
            json!("id=op_1;n=3")
        );
        assert_eq!(expand(&b, "plain").unwrap(), json!("plain"));
        assert!(expand(&b, "${r2/x}").unwrap_err().contains("`r2`"));
        assert!(expand(&b, "${r1/nope}").unwrap_err().contains("/nope"));
        assert!(expand(&b, "${r1").is_err());
    }

    #[test]
    fn a_bound_value_is_never_expanded_again() {
        // A Provider's id that looks like a template comes back as it came,
        // whether it is referred to whole or interpolated.
        let mut b = Bindings::new();
        b.insert("secret".into(), json!({"token": "tok-of-b"}));
        b.insert(
            "acc".into(),
            json!({"data": {"operation_id": "op_${secret/token}_${1}"}}),
        );
        let whole = reference("acc", "/data/operation_id");
        assert_eq!(
            expand(&b, &whole).unwrap(),
            json!("op_${secret/token}_${1}")
        );
        assert_eq!(
            expand(&b, "id=${acc/data/operation_id}").unwrap(),
            json!("id=op_${secret/token}_${1}")
        );
        for text in [
            "${secret/token}",
            "a$${b}",
            "$",
            "$$",
            "x${",
            "}${}",
            "cost: $5",
        ] {
            assert_eq!(expand(&b, &literal(text)).unwrap(), json!(text), "{text}");
        }
        assert_eq!(expand(&b, "cost: $5").unwrap(), json!("cost: $5"));
    }
}
