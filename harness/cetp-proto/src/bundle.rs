//! Android `Bundle` values with their exact Java types.
//!
//! CETP rides on `ContentResolver.call()`, whose extras and results are Bundles.
//! The spec gives each key a Bundle type (`protocol_version` is an `Int`,
//! `deadline_at_ms` a `Long`), and real Providers go wrong exactly there, so the
//! harness never collapses numeric types: an `Int` 2 and a `Long` 2 are
//! different values.

use std::collections::BTreeMap;
use std::fmt;

/// A PendingIntent as the device describes it (probe-wire `pending_intent`).
///
/// The creator fields are `None` when the device could not read them; the
/// harness treats "unknown" as "not proven", never as "fine".
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingIntentValue {
    /// Connection-scoped handle the host names this PendingIntent by (probe-wire `resolve`).
    pub handle: String,
    /// Package that created the PendingIntent; §7.2 requires it to be the Provider's own.
    pub creator_package: Option<String>,
    /// UID of the creator, compared with the Provider's UID (§7.2).
    pub creator_uid: Option<i64>,
    /// Whether `FLAG_IMMUTABLE` is set; §7.2 requires an immutable PendingIntent.
    pub immutable: Option<bool>,
    /// Whether it launches an activity (a confirmation UI, §4.3) rather than a service or broadcast.
    pub activity: Option<bool>,
}

/// A ParcelFileDescriptor, known to the host only by its connection handle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FdValue {
    /// Connection-scoped handle the host reads the descriptor through (probe-wire `read_fd`).
    pub handle: String,
}

/// One Bundle value. Variants map one-to-one to probe-wire type tags.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A Java `null` stored under a key (present, unlike an absent key).
    Null,
    /// Java `boolean` (`putBoolean`).
    Bool(bool),
    /// Java `int` (`putInt`); distinct from `Long` even for the same number.
    Int(i32),
    /// Java `long` (`putLong`), e.g. `deadline_at_ms` (§4.1).
    Long(i64),
    /// Java `float` (`putFloat`).
    Float(f32),
    /// Java `double` (`putDouble`).
    Double(f64),
    /// A Java `String` that is valid Unicode.
    String(String),
    /// A Java String that is not valid Unicode (it holds a lone UTF-16
    /// surrogate). Kept losslessly so the harness can report it exactly and
    /// echo it back; it never compares equal to any `String`.
    Utf16String(Vec<u16>),
    /// Java `int[]`, e.g. `consumer_versions` (§2.2).
    IntArray(Vec<i32>),
    /// Java `long[]`.
    LongArray(Vec<i64>),
    /// Java `boolean[]`.
    BoolArray(Vec<bool>),
    /// Java `double[]`.
    DoubleArray(Vec<f64>),
    /// Java `String[]` (`putStringArray`).
    StringArray(Vec<String>),
    /// Java `ArrayList<String>` (`putStringArrayList`), a different Bundle type from `String[]`.
    StringList(Vec<String>),
    /// Java `byte[]`.
    Bytes(Vec<u8>),
    /// A nested Bundle.
    Bundle(Bundle),
    /// A PendingIntent, such as the `resolution` of §4.3.
    PendingIntent(PendingIntentValue),
    /// A ParcelFileDescriptor, such as the `result_fd` of §4.5.
    Fd(FdValue),
    /// Anything else a Provider put in a Bundle (device to host only).
    Other {
        /// The Java class name of the value as the device saw it.
        class: String,
    },
}

impl Value {
    /// The probe-wire type tag of this value; also used in error messages.
    pub fn type_tag(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Long(_) => "long",
            Value::Float(_) => "float",
            Value::Double(_) => "double",
            Value::String(_) | Value::Utf16String(_) => "string",
            Value::IntArray(_) => "int[]",
            Value::LongArray(_) => "long[]",
            Value::BoolArray(_) => "bool[]",
            Value::DoubleArray(_) => "double[]",
            Value::StringArray(_) => "string[]",
            Value::StringList(_) => "string_list",
            Value::Bytes(_) => "bytes",
            Value::Bundle(_) => "bundle",
            Value::PendingIntent(_) => "pending_intent",
            Value::Fd(_) => "fd",
            Value::Other { .. } => "other",
        }
    }

    /// Shorthand for a [`Value::String`] from anything string-like.
    pub fn str(s: impl Into<String>) -> Value {
        Value::String(s.into())
    }
}

/// What was found where a typed value was expected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found {
    /// The key is not in the Bundle.
    Absent,
    /// A value of another Bundle type, named by its probe-wire type tag.
    Type(&'static str),
    /// Right type, unusable content (bad JSON, lone surrogate, out of range).
    Invalid(String),
}

impl fmt::Display for Found {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Found::Absent => f.write_str("nothing (key absent)"),
            Found::Type(t) => write!(f, "{t}"),
            Found::Invalid(why) => write!(f, "an unusable value: {why}"),
        }
    }
}

/// A precise decoding error: which key, which type was expected, what was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// The Bundle key (or JSON field) that was read.
    pub key: String,
    /// The type tag the spec requires for this key (`int`, `long`, `string`, `JSON text`...).
    pub expected: &'static str,
    /// What the key actually held.
    pub found: Found,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "key `{}`: expected {}, found {}",
            self.key, self.expected, self.found
        )
    }
}

impl std::error::Error for FieldError {}

impl FieldError {
    /// The key is missing although `expected` was required.
    pub fn absent(key: &str, expected: &'static str) -> Self {
        FieldError {
            key: key.to_string(),
            expected,
            found: Found::Absent,
        }
    }
    /// The key has the expected type but content that cannot be used (`why` says how).
    pub fn invalid(key: &str, expected: &'static str, why: impl Into<String>) -> Self {
        FieldError {
            key: key.to_string(),
            expected,
            found: Found::Invalid(why.into()),
        }
    }
}

/// An Android Bundle: string keys to typed values. Ordered so that encodings
/// and reports are deterministic.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Bundle(pub BTreeMap<String, Value>);

macro_rules! typed_getter {
    ($get:ident, $opt:ident, $variant:ident, $ty:ty, $tag:literal) => {
        /// Required key of exactly this Bundle type.
        pub fn $get(&self, key: &str) -> Result<$ty, FieldError> {
            self.$opt(key)?.ok_or_else(|| FieldError::absent(key, $tag))
        }
        /// Optional key: absent is `None`, present with another type is an error.
        pub fn $opt(&self, key: &str) -> Result<Option<$ty>, FieldError> {
            match self.0.get(key) {
                None => Ok(None),
                Some(Value::$variant(v)) => Ok(Some(v.clone())),
                Some(other) => Err(FieldError {
                    key: key.to_string(),
                    expected: $tag,
                    found: Found::Type(other.type_tag()),
                }),
            }
        }
    };
}

impl Bundle {
    /// An empty Bundle.
    pub fn new() -> Self {
        Bundle(BTreeMap::new())
    }

    /// Builder-style insert, for writing requests and replies as one expression.
    pub fn with(mut self, key: &str, value: Value) -> Self {
        self.0.insert(key.to_string(), value);
        self
    }

    /// Puts `value` under `key`, returning what was there before.
    pub fn insert(&mut self, key: &str, value: Value) -> Option<Value> {
        self.0.insert(key.to_string(), value)
    }

    /// The raw value under `key`, of whatever type; use the typed getters to check the type.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.get(key)
    }

    /// Takes the value under `key` out of the Bundle.
    pub fn remove(&mut self, key: &str) -> Option<Value> {
        self.0.remove(key)
    }

    /// Whether `key` is present (even when its value is [`Value::Null`]).
    pub fn contains(&self, key: &str) -> bool {
        self.0.contains_key(key)
    }

    /// The keys, in sorted order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }

    /// How many keys the Bundle holds.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the Bundle holds no key at all.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    typed_getter!(get_bool, opt_bool, Bool, bool, "bool");
    typed_getter!(get_int, opt_int, Int, i32, "int");
    typed_getter!(get_long, opt_long, Long, i64, "long");
    typed_getter!(get_int_array, opt_int_array, IntArray, Vec<i32>, "int[]");
    typed_getter!(get_bundle, opt_bundle, Bundle, Bundle, "bundle");
    typed_getter!(
        get_pending_intent,
        opt_pending_intent,
        PendingIntent,
        PendingIntentValue,
        "pending_intent"
    );
    typed_getter!(get_fd, opt_fd, Fd, FdValue, "fd");

    /// A String key. A Java String holding a lone surrogate is reported as an
    /// unusable value rather than silently repaired.
    pub fn opt_string(&self, key: &str) -> Result<Option<String>, FieldError> {
        match self.0.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(Value::Utf16String(units)) => Err(FieldError::invalid(
                key,
                "string",
                lone_surrogate_description(units),
            )),
            Some(other) => Err(FieldError {
                key: key.to_string(),
                expected: "string",
                found: Found::Type(other.type_tag()),
            }),
        }
    }

    /// A required String key; see [`Bundle::opt_string`] for lone surrogates.
    pub fn get_string(&self, key: &str) -> Result<String, FieldError> {
        self.opt_string(key)?
            .ok_or_else(|| FieldError::absent(key, "string"))
    }

    /// A String key whose content is JSON text (CETP's `data`, `args`,
    /// `error_details`, `consumer_capabilities`).
    pub fn get_json(&self, key: &str) -> Result<serde_json::Value, FieldError> {
        let text = self.get_string(key)?;
        parse_json_text(key, &text)
    }

    /// An optional String key holding JSON text (e.g. `error_details`, §5); absent is `None`.
    pub fn opt_json(&self, key: &str) -> Result<Option<serde_json::Value>, FieldError> {
        match self.opt_string(key)? {
            None => Ok(None),
            Some(text) => parse_json_text(key, &text).map(Some),
        }
    }
}

/// Parses JSON text found under `key`, with a bounded nesting depth: hostile
/// Providers send deeply nested JSON to blow the stack of naive parsers.
pub fn parse_json_text(key: &str, text: &str) -> Result<serde_json::Value, FieldError> {
    if let Some(depth) = exceeds_depth(text, MAX_JSON_DEPTH) {
        return Err(FieldError::invalid(
            key,
            "JSON text",
            format!("nesting deeper than {depth} levels"),
        ));
    }
    serde_json::from_str(text).map_err(|e| FieldError::invalid(key, "JSON text", e.to_string()))
}

/// serde_json itself stops at 128; we stop earlier and say so precisely.
pub const MAX_JSON_DEPTH: usize = 64;

/// Returns `Some(limit)` when brackets outside strings nest deeper than `limit`.
pub fn exceeds_depth(text: &str, limit: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for b in text.bytes() {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return Some(limit);
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

/// Describes where a Java string holds a lone surrogate.
pub fn lone_surrogate_description(units: &[u16]) -> String {
    let mut i = 0;
    while i < units.len() {
        let u = units[i];
        if (0xD800..0xDC00).contains(&u) {
            if i + 1 < units.len() && (0xDC00..0xE000).contains(&units[i + 1]) {
                i += 2;
                continue;
            }
            return format!("lone high surrogate U+{u:04X} at UTF-16 index {i}");
        }
        if (0xDC00..0xE000).contains(&u) {
            return format!("lone low surrogate U+{u:04X} at UTF-16 index {i}");
        }
        i += 1;
    }
    "a string that is not valid Unicode".to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int_and_long_are_different_types() {
        let b = Bundle::new().with("protocol_version", Value::Long(2));
        let err = b.get_int("protocol_version").unwrap_err();
        assert_eq!(err.expected, "int");
        assert_eq!(err.found, Found::Type("long"));
        assert_eq!(
            err.to_string(),
            "key `protocol_version`: expected int, found long"
        );
    }

    #[test]
    fn absent_key_is_reported() {
        let err = Bundle::new().get_long("deadline_at_ms").unwrap_err();
        assert_eq!(err.found, Found::Absent);
    }

    #[test]
    fn lone_surrogate_is_not_a_string() {
        let b = Bundle::new().with("request_id", Value::Utf16String(vec![0x61, 0xD800]));
        let err = b.get_string("request_id").unwrap_err();
        assert!(
            err.to_string().contains("U+D800 at UTF-16 index 1"),
            "{err}"
        );
    }

    #[test]
    fn deep_json_is_refused_before_parsing() {
        let text = "[".repeat(10_000) + &"]".repeat(10_000);
        let b = Bundle::new().with("data", Value::String(text));
        let err = b.get_json("data").unwrap_err();
        assert!(err.to_string().contains("nesting deeper"), "{err}");
        // Brackets inside strings do not count.
        let ok = format!("\"{}\"", "[".repeat(1000));
        assert!(exceeds_depth(&ok, 4).is_none());
    }
}
