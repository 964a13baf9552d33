//! Typed reads of JSON values with errors that name the field.

use crate::error::{At, Path, WireDecodeError};
use crate::json::{Json, Map, NumberMismatch};
use base64::Engine as _;
use std::collections::BTreeMap;

type Result<T> = std::result::Result<T, WireDecodeError>;

pub(crate) fn wrong_type(path: &Path<'_>, expected: &'static str, found: &Json) -> WireDecodeError {
    WireDecodeError::WrongType {
        path: path.render(),
        expected,
        found: found.kind(),
    }
}

pub(crate) fn string(v: &Json, path: &Path<'_>) -> Result<String> {
    match v {
        Json::String(s) => Ok(s.clone()),
        Json::Utf16String(units) => Err(WireDecodeError::LoneSurrogate {
            at: At::Field(path.render()),
            detail: cetp_proto::bundle::lone_surrogate_description(units),
        }),
        other => Err(wrong_type(path, "a string", other)),
    }
}

pub(crate) fn object<'m>(v: &'m Json, path: &Path<'_>) -> Result<&'m Map> {
    match v {
        Json::Object(m) => Ok(m),
        other => Err(wrong_type(path, "an object", other)),
    }
}

pub(crate) fn array<'m>(v: &'m Json, path: &Path<'_>) -> Result<&'m [Json]> {
    match v {
        Json::Array(a) => Ok(a),
        other => Err(wrong_type(path, "an array", other)),
    }
}

pub(crate) fn boolean(v: &Json, path: &Path<'_>) -> Result<bool> {
    match v {
        Json::Bool(b) => Ok(*b),
        other => Err(wrong_type(path, "a boolean", other)),
    }
}

/// An integer that must fit `T`; `expected` names the type in messages.
pub(crate) fn integer<T: TryFrom<i128>>(
    v: &Json,
    path: &Path<'_>,
    expected: &'static str,
) -> Result<T> {
    let Json::Number(n) = v else {
        return Err(wrong_type(path, expected, v));
    };
    match n.as_integer() {
        Ok(i) => T::try_from(i).map_err(|_| WireDecodeError::OutOfRange {
            at: At::Field(path.render()),
            expected,
            found: i.to_string(),
        }),
        Err(NumberMismatch::NotInteger) => Err(WireDecodeError::NotInteger {
            path: path.render(),
            expected,
            found: n.to_string(),
        }),
        Err(NumberMismatch::OutOfRange) => Err(WireDecodeError::OutOfRange {
            at: At::Field(path.render()),
            expected,
            found: n.to_string(),
        }),
    }
}

pub(crate) fn base64(v: &Json, path: &Path<'_>) -> Result<Vec<u8>> {
    let text = string(v, path)?;
    base64::engine::general_purpose::STANDARD
        .decode(text.as_bytes())
        .map_err(|e| WireDecodeError::BadBase64 {
            path: path.render(),
            reason: e.to_string(),
        })
}

pub(crate) fn base64_text(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

pub(crate) fn string_array(v: &Json, path: &Path<'_>) -> Result<Vec<String>> {
    array(v, path)?
        .iter()
        .enumerate()
        .map(|(i, item)| string(item, &path.index(i)))
        .collect()
}

pub(crate) fn string_map(v: &Json, path: &Path<'_>) -> Result<BTreeMap<String, String>> {
    object(v, path)?
        .iter()
        .map(|(k, item)| Ok((k.clone(), string(item, &path.key(k))?)))
        .collect()
}

/// The members of one object, read by name.
pub(crate) struct Fields<'m, 'p> {
    pub map: &'m Map,
    pub path: Path<'p>,
}

impl<'m, 'p> Fields<'m, 'p> {
    pub fn new(map: &'m Map, path: Path<'p>) -> Self {
        Fields { map, path }
    }

    pub fn req(&self, key: &str, expected: &'static str) -> Result<&'m Json> {
        self.map
            .get(key)
            .ok_or_else(|| WireDecodeError::MissingField {
                path: self.path.key(key).render(),
                expected,
            })
    }

    /// Absent and `null` both mean "none".
    pub fn opt(&self, key: &str) -> Option<&'m Json> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    pub fn string(&self, key: &str) -> Result<String> {
        string(self.req(key, "a string")?, &self.path.key(key))
    }

    pub fn opt_string(&self, key: &str) -> Result<Option<String>> {
        self.opt(key)
            .map(|v| string(v, &self.path.key(key)))
            .transpose()
    }

    pub fn boolean(&self, key: &str) -> Result<bool> {
        boolean(self.req(key, "a boolean")?, &self.path.key(key))
    }

    pub fn opt_boolean(&self, key: &str) -> Result<Option<bool>> {
        self.opt(key)
            .map(|v| boolean(v, &self.path.key(key)))
            .transpose()
    }

    pub fn integer<T: TryFrom<i128>>(&self, key: &str, expected: &'static str) -> Result<T> {
        integer(self.req(key, expected)?, &self.path.key(key), expected)
    }

    pub fn opt_integer<T: TryFrom<i128>>(
        &self,
        key: &str,
        expected: &'static str,
    ) -> Result<Option<T>> {
        self.opt(key)
            .map(|v| integer(v, &self.path.key(key), expected))
            .transpose()
    }

    pub fn object(&self, key: &str) -> Result<&'m Map> {
        object(self.req(key, "an object")?, &self.path.key(key))
    }

    pub fn string_array(&self, key: &str) -> Result<Vec<String>> {
        string_array(self.req(key, "an array of strings")?, &self.path.key(key))
    }

    pub fn opt_string_array(&self, key: &str) -> Result<Option<Vec<String>>> {
        self.opt(key)
            .map(|v| string_array(v, &self.path.key(key)))
            .transpose()
    }

    pub fn string_map(&self, key: &str) -> Result<BTreeMap<String, String>> {
        string_map(self.req(key, "an object of strings")?, &self.path.key(key))
    }

    /// Members other than `known`, kept for forwarding.
    pub fn extra(&self, known: &[&str]) -> Map {
        self.map
            .iter()
            .filter(|(k, _)| !known.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}
