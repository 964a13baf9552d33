//! Canonical JSON (RFC 8785, JCS) and the hashes built on it.
//!
//! Used for schema hashes (contract lock), argument digests (dedupe records
//! are bound to "the same args", §6) and run config hashes. Hashing raw bytes
//! would make `{"a":1,"b":2}` and `{"b":2,"a":1}` different requests.

use sha2::{Digest, Sha256};
use std::fmt;

/// Largest integer that survives a round trip through an IEEE double, which
/// is what JCS serializes numbers as.
pub const MAX_SAFE_INTEGER: i64 = (1 << 53) - 1;

/// Why a JSON value cannot be turned into canonical (JCS) text for hashing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CanonicalError {
    /// JCS would silently round it, so two different values could hash alike.
    UnsafeInteger {
        /// JSON Pointer to the offending number.
        pointer: String,
        /// The number as written in the source JSON.
        value: String,
    },
    /// The JCS serializer itself failed; the text is its message.
    Serialize(String),
}

impl fmt::Display for CanonicalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CanonicalError::UnsafeInteger { pointer, value } => write!(
                f,
                "integer {value} at `{pointer}` is beyond ±(2^53-1) and cannot be canonicalized exactly"
            ),
            CanonicalError::Serialize(e) => write!(f, "cannot canonicalize: {e}"),
        }
    }
}

impl std::error::Error for CanonicalError {}

fn check_integers(value: &serde_json::Value, pointer: &mut String) -> Result<(), CanonicalError> {
    match value {
        serde_json::Value::Number(n) => {
            let unsafe_int = if let Some(i) = n.as_i64() {
                !(-MAX_SAFE_INTEGER..=MAX_SAFE_INTEGER).contains(&i)
            } else {
                n.as_u64().is_some()
            };
            if unsafe_int {
                return Err(CanonicalError::UnsafeInteger {
                    pointer: if pointer.is_empty() {
                        "/".into()
                    } else {
                        pointer.clone()
                    },
                    value: n.to_string(),
                });
            }
            Ok(())
        }
        serde_json::Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let len = pointer.len();
                pointer.push('/');
                pointer.push_str(&i.to_string());
                check_integers(item, pointer)?;
                pointer.truncate(len);
            }
            Ok(())
        }
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                let len = pointer.len();
                crate::pointer::push(pointer, k);
                check_integers(v, pointer)?;
                pointer.truncate(len);
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// RFC 8785 text of a JSON value.
pub fn canonicalize(value: &serde_json::Value) -> Result<String, CanonicalError> {
    check_integers(value, &mut String::new())?;
    serde_json_canonicalizer::to_string(value).map_err(|e| CanonicalError::Serialize(e.to_string()))
}

/// Lowercase hex SHA-256 of arbitrary bytes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Lowercase hex SHA-256 of the canonical form of a JSON value.
pub fn canonical_hash(value: &serde_json::Value) -> Result<String, CanonicalError> {
    Ok(sha256_hex(canonicalize(value)?.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_order_does_not_matter() {
        let a: serde_json::Value =
            serde_json::from_str(r#"{"b":2,"a":[1,{"d":1,"c":2}]}"#).unwrap();
        let b: serde_json::Value =
            serde_json::from_str(r#"{"a":[1,{"c":2,"d":1}],"b":2}"#).unwrap();
        assert_eq!(canonical_hash(&a).unwrap(), canonical_hash(&b).unwrap());
        assert_eq!(
            canonicalize(&a).unwrap(),
            r#"{"a":[1,{"c":2,"d":1}],"b":2}"#
        );
    }

    #[test]
    fn numbers_follow_jcs() {
        assert_eq!(canonicalize(&json!(1.0)).unwrap(), "1");
        assert_eq!(canonicalize(&json!(1e21)).unwrap(), "1e+21");
    }

    #[test]
    fn unsafe_integers_are_refused() {
        let v = json!({"x": [1, 9007199254740993i64]});
        let err = canonicalize(&v).unwrap_err();
        assert_eq!(
            err,
            CanonicalError::UnsafeInteger {
                pointer: "/x/1".into(),
                value: "9007199254740993".into()
            }
        );
        assert!(canonicalize(&json!(MAX_SAFE_INTEGER)).is_ok());
        assert!(canonicalize(&json!(u64::MAX)).is_err());
    }

    #[test]
    fn sha256_is_lowercase_hex() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
