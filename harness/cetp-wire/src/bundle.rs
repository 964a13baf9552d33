//! Typed Bundles on the wire: `{"key": {"t": <tag>, "v": <value>}}`.
//!
//! The type tag is kept exactly (an `int` 2 and a `long` 2 differ), numbers
//! are range-checked against their tag, and a `string` may carry lone
//! surrogates. NaN and infinities, which JSON numbers cannot hold, travel in
//! `float`, `double` and `double[]` values as the strings `"NaN"`,
//! `"Infinity"` and `"-Infinity"` (a compatible extension of probe wire v1:
//! such a value could not be sent at all before).

use crate::error::{Path, WireDecodeError};
use crate::fields::{self, Fields};
use crate::json::{Json, Map, Number};
use cetp_proto::bundle::{Bundle, FdValue, PendingIntentValue, Value};

/// Deepest nesting of Bundles accepted (a top-level Bundle is level 1).
pub const MAX_BUNDLE_DEPTH: usize = 32;

type Result<T> = std::result::Result<T, WireDecodeError>;

/// Every type tag of the wire, in the order of the probe-wire table.
pub const TYPE_TAGS: [&str; 18] = [
    "null",
    "bool",
    "int",
    "long",
    "float",
    "double",
    "string",
    "int[]",
    "long[]",
    "bool[]",
    "double[]",
    "string[]",
    "string_list",
    "bytes",
    "bundle",
    "pending_intent",
    "fd",
    "other",
];

/// A Bundle in its wire form: each key mapped to `{"t": <tag>, "v": <value>}`.
pub fn bundle_to_json(bundle: &Bundle) -> Json {
    Json::Object(
        bundle
            .0
            .iter()
            .map(|(k, v)| (k.clone(), value_to_json(v)))
            .collect(),
    )
}

/// `Some(bundle)` as a Bundle object, `None` as `null`.
pub fn opt_bundle_to_json(bundle: Option<&Bundle>) -> Json {
    bundle.map_or(Json::Null, bundle_to_json)
}

fn typed(tag: &str, v: Json) -> Json {
    let mut m = Map::new();
    m.insert("t".into(), Json::from(tag));
    m.insert("v".into(), v);
    Json::Object(m)
}

fn f64_json(v: f64) -> Json {
    match Number::from_f64(v) {
        Some(n) => Json::Number(n),
        None => Json::from(non_finite_name(v.is_nan(), v > 0.0)),
    }
}

fn f32_json(v: f32) -> Json {
    match Number::from_f32(v) {
        Some(n) => Json::Number(n),
        None => Json::from(non_finite_name(v.is_nan(), v > 0.0)),
    }
}

fn non_finite_name(nan: bool, positive: bool) -> &'static str {
    match (nan, positive) {
        (true, _) => "NaN",
        (false, true) => "Infinity",
        (false, false) => "-Infinity",
    }
}

fn strings_json(items: &[String]) -> Json {
    Json::Array(items.iter().map(|s| Json::from(s.as_str())).collect())
}

/// One Bundle value in its wire form, `{"t": <tag>, "v": <value>}`.
pub fn value_to_json(value: &Value) -> Json {
    let tag = value.type_tag();
    let v = match value {
        Value::Null => Json::Null,
        Value::Bool(b) => Json::Bool(*b),
        Value::Int(i) => Json::from(*i),
        Value::Long(l) => Json::from(*l),
        Value::Float(f) => f32_json(*f),
        Value::Double(d) => f64_json(*d),
        Value::String(s) => Json::from(s.as_str()),
        Value::Utf16String(units) => Json::from_utf16(units),
        Value::IntArray(a) => Json::Array(a.iter().map(|&i| Json::from(i)).collect()),
        Value::LongArray(a) => Json::Array(a.iter().map(|&l| Json::from(l)).collect()),
        Value::BoolArray(a) => Json::Array(a.iter().map(|&b| Json::Bool(b)).collect()),
        Value::DoubleArray(a) => Json::Array(a.iter().map(|&d| f64_json(d)).collect()),
        Value::StringArray(a) | Value::StringList(a) => strings_json(a),
        Value::Bytes(b) => Json::from(fields::base64_text(b)),
        Value::Bundle(b) => bundle_to_json(b),
        Value::PendingIntent(pi) => {
            let mut m = Map::new();
            m.insert("handle".into(), Json::from(pi.handle.as_str()));
            m.insert(
                "creator_package".into(),
                Json::from(pi.creator_package.clone()),
            );
            m.insert("creator_uid".into(), Json::from(pi.creator_uid));
            m.insert("immutable".into(), Json::from(pi.immutable));
            m.insert("activity".into(), Json::from(pi.activity));
            Json::Object(m)
        }
        Value::Fd(fd) => {
            let mut m = Map::new();
            m.insert("handle".into(), Json::from(fd.handle.as_str()));
            Json::Object(m)
        }
        Value::Other { class } => {
            let mut m = Map::new();
            m.insert("class".into(), Json::from(class.as_str()));
            Json::Object(m)
        }
    };
    typed(tag, v)
}

/// Decodes a Bundle object found at `path`.
pub fn bundle_from_json(json: &Json, path: &Path<'_>) -> Result<Bundle> {
    bundle_at(json, path, 1)
}

/// A Bundle or `null` (absent counts as `null`).
pub(crate) fn opt_bundle(fields: &Fields<'_, '_>, key: &str) -> Result<Option<Bundle>> {
    fields
        .opt(key)
        .map(|v| bundle_from_json(v, &fields.path.key(key)))
        .transpose()
}

fn bundle_at(json: &Json, path: &Path<'_>, depth: usize) -> Result<Bundle> {
    if depth > MAX_BUNDLE_DEPTH {
        return Err(WireDecodeError::TooDeep {
            at: crate::error::At::Field(path.render()),
            limit: MAX_BUNDLE_DEPTH,
        });
    }
    let map = fields::object(json, path)?;
    let mut bundle = Bundle::new();
    for (key, entry) in map {
        let entry_path = path.key(key);
        let value = value_at(entry, &entry_path, depth)?;
        bundle.0.insert(key.clone(), value);
    }
    Ok(bundle)
}

fn double(v: &Json, path: &Path<'_>, expected: &'static str) -> Result<f64> {
    match v {
        Json::Number(n) => Ok(n.as_f64()),
        Json::String(s) => match s.as_str() {
            "NaN" => Ok(f64::NAN),
            "Infinity" => Ok(f64::INFINITY),
            "-Infinity" => Ok(f64::NEG_INFINITY),
            other => Err(WireDecodeError::BadValue {
                path: path.render(),
                expected,
                found: format!("the string {other:?}"),
            }),
        },
        // Still a string outside the set, as the Java codec sees it.
        Json::Utf16String(_) => Err(WireDecodeError::BadValue {
            path: path.render(),
            expected,
            found: "a string with a lone surrogate".into(),
        }),
        other => Err(fields::wrong_type(path, expected, other)),
    }
}

fn float(v: &Json, path: &Path<'_>) -> Result<f32> {
    const EXPECTED: &str = "a float (number, or \"NaN\", \"Infinity\", \"-Infinity\")";
    match v {
        Json::Number(n) => n.as_f32().map_err(|_| WireDecodeError::OutOfRange {
            at: crate::error::At::Field(path.render()),
            expected: "a float",
            found: n.to_string(),
        }),
        // Only the three names reach here; the cast keeps NaN and the
        // infinities.
        other => double(other, path, EXPECTED).map(|d| d as f32),
    }
}

fn elements<T>(
    v: &Json,
    path: &Path<'_>,
    each: impl Fn(&Json, &Path<'_>) -> Result<T>,
) -> Result<Vec<T>> {
    fields::array(v, path)?
        .iter()
        .enumerate()
        .map(|(i, item)| each(item, &path.index(i)))
        .collect()
}

fn value_at(entry: &Json, path: &Path<'_>, depth: usize) -> Result<Value> {
    const DOUBLE: &str = "a double (number, or \"NaN\", \"Infinity\", \"-Infinity\")";
    let entry_map = fields::object(entry, path)?;
    let f = Fields::new(entry_map, *path);
    let tag = f.string("t")?;
    if !TYPE_TAGS.contains(&tag.as_str()) {
        return Err(WireDecodeError::BadTypeTag {
            path: path.key("t").render(),
            tag,
        });
    }
    let v = f.req("v", "the value `v`")?;
    let vp = path.key("v");
    let vp = &vp;
    Ok(match tag.as_str() {
        "null" => match v {
            Json::Null => Value::Null,
            other => return Err(fields::wrong_type(vp, "null", other)),
        },
        "bool" => Value::Bool(fields::boolean(v, vp)?),
        "int" => Value::Int(fields::integer(v, vp, "an int (32-bit integer)")?),
        "long" => Value::Long(fields::integer(v, vp, "a long (64-bit integer)")?),
        "float" => Value::Float(float(v, vp)?),
        "double" => Value::Double(double(v, vp, DOUBLE)?),
        "string" => match v {
            Json::String(s) => Value::String(s.clone()),
            Json::Utf16String(units) => Value::Utf16String(units.clone()),
            other => return Err(fields::wrong_type(vp, "a string", other)),
        },
        "int[]" => Value::IntArray(elements(v, vp, |x, p| {
            fields::integer(x, p, "an int (32-bit integer)")
        })?),
        "long[]" => Value::LongArray(elements(v, vp, |x, p| {
            fields::integer(x, p, "a long (64-bit integer)")
        })?),
        "bool[]" => Value::BoolArray(elements(v, vp, fields::boolean)?),
        "double[]" => Value::DoubleArray(elements(v, vp, |x, p| double(x, p, DOUBLE))?),
        "string[]" => Value::StringArray(fields::string_array(v, vp)?),
        "string_list" => Value::StringList(fields::string_array(v, vp)?),
        "bytes" => Value::Bytes(fields::base64(v, vp)?),
        "bundle" => Value::Bundle(bundle_at(v, vp, depth + 1)?),
        "pending_intent" => {
            let pf = Fields::new(fields::object(v, vp)?, *vp);
            Value::PendingIntent(PendingIntentValue {
                handle: pf.string("handle")?,
                creator_package: pf.opt_string("creator_package")?,
                creator_uid: pf.opt_integer("creator_uid", "a uid (64-bit integer)")?,
                immutable: pf.opt_boolean("immutable")?,
                activity: pf.opt_boolean("activity")?,
            })
        }
        "fd" => {
            let ff = Fields::new(fields::object(v, vp)?, *vp);
            Value::Fd(FdValue {
                handle: ff.string("handle")?,
            })
        }
        // Only "other" is left: TYPE_TAGS was checked above.
        _ => {
            let of = Fields::new(fields::object(v, vp)?, *vp);
            Value::Other {
                class: of.string("class")?,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json;

    fn decode(text: &str) -> Result<Bundle> {
        bundle_from_json(&json::parse(text)?, &Path::ROOT)
    }

    fn encode(b: &Bundle) -> String {
        json::to_canonical_string(&bundle_to_json(b))
    }

    #[test]
    fn int_and_long_are_kept_apart() {
        let b = decode(r#"{"a":{"t":"int","v":2},"b":{"t":"long","v":2}}"#).unwrap();
        assert_eq!(b.get("a"), Some(&Value::Int(2)));
        assert_eq!(b.get("b"), Some(&Value::Long(2)));
    }

    #[test]
    fn number_checks() {
        let class = |t: &str| decode(t).map(|_| "ok").unwrap_or_else(|e| e.class());
        assert_eq!(class(r#"{"a":{"t":"int","v":2.0}}"#), "not_integer");
        assert_eq!(class(r#"{"a":{"t":"int","v":2147483648}}"#), "out_of_range");
        assert_eq!(
            class(r#"{"a":{"t":"int","v":-2147483649}}"#),
            "out_of_range"
        );
        assert_eq!(class(r#"{"a":{"t":"int","v":-2147483648}}"#), "ok");
        assert_eq!(
            class(r#"{"a":{"t":"long","v":9223372036854775808}}"#),
            "out_of_range"
        );
        assert_eq!(class(r#"{"a":{"t":"long","v":1e3}}"#), "not_integer");
        assert_eq!(class(r#"{"a":{"t":"long","v":"1"}}"#), "wrong_type");
        assert_eq!(class(r#"{"a":{"t":"float","v":3.5e38}}"#), "out_of_range");
        assert_eq!(class(r#"{"a":{"t":"double","v":"nan"}}"#), "bad_value");
        assert_eq!(
            class(r#"{"a":{"t":"double","v":"NaN\ud800"}}"#),
            "bad_value"
        );
        assert_eq!(class(r#"{"a":{"t":"int[]","v":[1,2.5]}}"#), "not_integer");
        assert_eq!(class(r#"{"a":{"t":"Int","v":1}}"#), "bad_type_tag");
        assert_eq!(class(r#"{"a":{"t":"int"}}"#), "missing_field");
        assert_eq!(class(r#"{"a":{"v":1}}"#), "missing_field");
        assert_eq!(class(r#"{"a":{"t":"bytes","v":"AAE"}}"#), "bad_base64");
        assert_eq!(
            class(r#"{"a":{"t":"string[]","v":["\ud800"]}}"#),
            "lone_surrogate"
        );
        assert_eq!(class(r#"{"a":{"t":"null","v":0}}"#), "wrong_type");
        assert_eq!(class(r#"{"a":{"t":"int","v":1,"x":[]}}"#), "ok");
    }

    #[test]
    fn error_names_the_field() {
        let err = decode(r#"{"consumer_versions":{"t":"int[]","v":[2,4294967296]}}"#).unwrap_err();
        assert_eq!(
            err.to_string(),
            "at `/consumer_versions/v/1`: expected an int (32-bit integer), found 4294967296 (out of range)"
        );
    }

    #[test]
    fn nesting_is_bounded() {
        let mut b = Bundle::new().with("leaf", Value::Int(1));
        for _ in 1..MAX_BUNDLE_DEPTH {
            b = Bundle::new().with("n", Value::Bundle(b));
        }
        let text = encode(&b);
        assert_eq!(decode(&text).unwrap(), b);
        let deeper = Bundle::new().with("n", Value::Bundle(b));
        let err = decode(&encode(&deeper)).unwrap_err();
        assert_eq!(err.class(), "too_deep");
    }

    #[test]
    fn non_finite_values_travel_as_names() {
        let b = Bundle::new()
            .with("f", Value::Float(f32::NEG_INFINITY))
            .with("d", Value::Double(f64::INFINITY))
            .with("a", Value::DoubleArray(vec![1.0, f64::NAN]));
        let text = encode(&b);
        assert_eq!(
            text,
            r#"{"a":{"t":"double[]","v":[1.0,"NaN"]},"d":{"t":"double","v":"Infinity"},"f":{"t":"float","v":"-Infinity"}}"#
        );
        let back = decode(&text).unwrap();
        assert_eq!(back.get("f"), Some(&Value::Float(f32::NEG_INFINITY)));
        match back.get("a") {
            Some(Value::DoubleArray(a)) => assert!(a[0] == 1.0 && a[1].is_nan()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn lone_surrogate_string_round_trips() {
        let text = r#"{"request_id":{"t":"string","v":"r-\udc00"}}"#;
        let b = decode(text).unwrap();
        assert_eq!(
            b.get("request_id"),
            Some(&Value::Utf16String(vec![0x72, 0x2D, 0xDC00]))
        );
        assert_eq!(encode(&b), text);
    }
}
