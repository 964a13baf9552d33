//! JSON as the probe wire needs it: a strict, bounded parser and the
//! canonical writer.
//!
//! serde_json cannot be used for frames because a Java `String` may hold a
//! lone UTF-16 surrogate, which travels as a `\udHHH` escape. serde_json only
//! accepts such an escape when it is asked for bytes at a position it already
//! knows holds a string (it then yields WTF-8); a frame is self-describing, so
//! values are read through `deserialize_any`, which refuses lone surrogates.
//! This parser keeps them ([`Json::Utf16String`]) and the writer puts them
//! back as the same escape, so a value survives host -> device -> Provider and
//! back exactly.
//!
//! Everything else follows RFC 8259 strictly, plus the limits a frame from an
//! untrusted peer needs: nesting depth, number literal length, duplicate keys
//! refused (two peers that keep different duplicates would disagree about the
//! frame).

use crate::error::{At, WireDecodeError};
use std::collections::BTreeMap;
use std::fmt;

/// Deepest nesting of arrays and objects accepted in a frame (the frame
/// object itself is level 1). serde_json's own recursion limit is the same.
pub const MAX_JSON_DEPTH: usize = 128;

/// Longest number literal accepted, in bytes. Canonical numbers are at most
/// 24 bytes; the bound keeps exact decimal conversion cheap on every peer.
pub const MAX_NUMBER_LEN: usize = 1024;

/// A JSON object. Keys are ordered by their UTF-8 bytes (that is, by code
/// point), which is the canonical key order.
pub type Map = BTreeMap<String, Json>;

/// A JSON value of the probe wire.
#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number: an exact integer, or a double (see [`Number`]).
    Number(Number),
    /// A string that is valid Unicode.
    String(String),
    /// A string holding at least one lone UTF-16 surrogate, as UTF-16 code
    /// units. The parser never produces it for a string that is valid
    /// Unicode.
    Utf16String(Vec<u16>),
    /// An array.
    Array(Vec<Json>),
    /// An object; a key appears once.
    Object(Map),
}

impl Json {
    /// A short description of the value's kind, for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Json::Null => "null",
            Json::Bool(_) => "a boolean",
            Json::Number(_) => "a number",
            Json::String(_) => "a string",
            Json::Utf16String(_) => "a string with a lone surrogate",
            Json::Array(_) => "an array",
            Json::Object(_) => "an object",
        }
    }

    /// The string, if this is a valid-Unicode string (not a
    /// [`Json::Utf16String`]).
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::String(s) => Some(s),
            _ => None,
        }
    }

    /// The members, if this is an object.
    pub fn as_object(&self) -> Option<&Map> {
        match self {
            Json::Object(m) => Some(m),
            _ => None,
        }
    }

    /// The elements, if this is an array.
    pub fn as_array(&self) -> Option<&[Json]> {
        match self {
            Json::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The number, if this is an integer that fits a `u64`.
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Json::Number(n) => n.as_u64(),
            _ => None,
        }
    }

    /// The number, if this is an integer that fits an `i64`.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Json::Number(n) => n.as_i64(),
            _ => None,
        }
    }

    /// The boolean, if this is one.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Json::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// Whether this is `null`.
    pub fn is_null(&self) -> bool {
        matches!(self, Json::Null)
    }

    /// Member of an object, `None` for other values.
    pub fn get(&self, key: &str) -> Option<&Json> {
        self.as_object().and_then(|m| m.get(key))
    }

    /// Converts to serde_json, which cannot hold a lone surrogate.
    pub fn to_serde(&self) -> Result<serde_json::Value, LoneSurrogateError> {
        Ok(match self {
            Json::Null => serde_json::Value::Null,
            Json::Bool(b) => serde_json::Value::Bool(*b),
            Json::Number(n) => serde_json::Value::Number(n.to_serde()),
            Json::String(s) => serde_json::Value::String(s.clone()),
            Json::Utf16String(units) => return Err(LoneSurrogateError(units.clone())),
            Json::Array(items) => serde_json::Value::Array(
                items.iter().map(Json::to_serde).collect::<Result<_, _>>()?,
            ),
            Json::Object(map) => serde_json::Value::Object(
                map.iter()
                    .map(|(k, v)| Ok((k.clone(), v.to_serde()?)))
                    .collect::<Result<_, _>>()?,
            ),
        })
    }

    /// Builds a string value from UTF-16 code units, keeping lone surrogates.
    pub fn from_utf16(units: &[u16]) -> Json {
        match String::from_utf16(units) {
            Ok(s) => Json::String(s),
            Err(_) => Json::Utf16String(units.to_vec()),
        }
    }
}

/// A value that serde_json cannot represent: a string with a lone surrogate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoneSurrogateError(pub Vec<u16>);

impl fmt::Display for LoneSurrogateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&cetp_proto::bundle::lone_surrogate_description(&self.0))
    }
}

impl std::error::Error for LoneSurrogateError {}

impl From<serde_json::Value> for Json {
    fn from(v: serde_json::Value) -> Json {
        match v {
            serde_json::Value::Null => Json::Null,
            serde_json::Value::Bool(b) => Json::Bool(b),
            serde_json::Value::Number(n) => Json::Number(Number::from_serde(&n)),
            serde_json::Value::String(s) => Json::String(s),
            serde_json::Value::Array(a) => Json::Array(a.into_iter().map(Json::from).collect()),
            serde_json::Value::Object(o) => {
                Json::Object(o.into_iter().map(|(k, v)| (k, Json::from(v))).collect())
            }
        }
    }
}

impl From<&str> for Json {
    fn from(s: &str) -> Json {
        Json::String(s.to_string())
    }
}

impl From<String> for Json {
    fn from(s: String) -> Json {
        Json::String(s)
    }
}

impl From<bool> for Json {
    fn from(b: bool) -> Json {
        Json::Bool(b)
    }
}

impl From<u64> for Json {
    fn from(n: u64) -> Json {
        Json::Number(Number::from(n))
    }
}

impl From<i64> for Json {
    fn from(n: i64) -> Json {
        Json::Number(Number::from(n))
    }
}

impl From<u32> for Json {
    fn from(n: u32) -> Json {
        Json::Number(Number::from(u64::from(n)))
    }
}

impl From<i32> for Json {
    fn from(n: i32) -> Json {
        Json::Number(Number::from(i64::from(n)))
    }
}

impl From<Map> for Json {
    fn from(m: Map) -> Json {
        Json::Object(m)
    }
}

impl<T: Into<Json>> From<Option<T>> for Json {
    fn from(v: Option<T>) -> Json {
        v.map_or(Json::Null, Into::into)
    }
}

/// A JSON number. Integer literals within `i64::MIN..=u64::MAX` stay exact;
/// anything else is a double, as in serde_json. The literal text of a
/// non-integer is kept so that a typed `float` is rounded once, from the
/// decimal text, and never twice through a double.
#[derive(Clone, Debug)]
pub struct Number(N);

#[derive(Clone, Debug)]
enum N {
    Int(i128),
    F64 {
        value: f64,
        literal: Option<Box<str>>,
        /// An integer literal too large for i64/u64.
        big_integer: bool,
    },
    /// Written with the shortest representation of a single-precision value.
    F32(f32),
}

/// Two numbers are equal when they are written the same: the canonical form
/// is what a peer sees, and a float and the double it reads back as are
/// written alike.
impl PartialEq for Number {
    fn eq(&self, other: &Number) -> bool {
        match (&self.0, &other.0) {
            (N::Int(a), N::Int(b)) => a == b,
            (N::Int(_), _) | (_, N::Int(_)) => false,
            _ => self.canonical_text() == other.canonical_text(),
        }
    }
}

/// Why a number does not fit where it was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NumberMismatch {
    /// It has a fraction or exponent where an integer was expected.
    NotInteger,
    /// It is outside the range of the expected type.
    OutOfRange,
}

impl From<i64> for Number {
    fn from(n: i64) -> Number {
        Number(N::Int(i128::from(n)))
    }
}

impl From<u64> for Number {
    fn from(n: u64) -> Number {
        Number(N::Int(i128::from(n)))
    }
}

impl Number {
    /// A double; `None` for NaN and infinities, which JSON cannot hold.
    pub fn from_f64(v: f64) -> Option<Number> {
        v.is_finite().then_some(Number(N::F64 {
            value: v,
            literal: None,
            big_integer: false,
        }))
    }

    /// A float, written with its own shortest representation.
    pub fn from_f32(v: f32) -> Option<Number> {
        v.is_finite().then_some(Number(N::F32(v)))
    }

    fn from_serde(n: &serde_json::Number) -> Number {
        if let Some(i) = n.as_i64() {
            Number::from(i)
        } else if let Some(u) = n.as_u64() {
            Number::from(u)
        } else {
            // serde_json without arbitrary_precision only holds finite doubles.
            Number(N::F64 {
                value: n.as_f64().unwrap_or(0.0),
                literal: None,
                big_integer: false,
            })
        }
    }

    fn to_serde(&self) -> serde_json::Number {
        match self.0 {
            N::Int(i) => match (i64::try_from(i), u64::try_from(i)) {
                (Ok(v), _) => v.into(),
                (_, Ok(v)) => v.into(),
                // Int only ever holds i64::MIN..=u64::MAX.
                _ => serde_json::Number::from(0u8),
            },
            N::F64 { value, .. } => {
                serde_json::Number::from_f64(value).unwrap_or_else(|| 0u8.into())
            }
            N::F32(v) => serde_json::Number::from_f64(f64::from(v)).unwrap_or_else(|| 0u8.into()),
        }
    }

    /// The exact integer, if this number is one.
    pub fn as_integer(&self) -> Result<i128, NumberMismatch> {
        match &self.0 {
            N::Int(i) => Ok(*i),
            N::F64 {
                big_integer: true, ..
            } => Err(NumberMismatch::OutOfRange),
            N::F64 { .. } | N::F32(_) => Err(NumberMismatch::NotInteger),
        }
    }

    /// The integer, if this number is one that fits an `i64`.
    pub fn as_i64(&self) -> Option<i64> {
        self.as_integer().ok().and_then(|i| i64::try_from(i).ok())
    }

    /// The integer, if this number is one that fits a `u64`.
    pub fn as_u64(&self) -> Option<u64> {
        self.as_integer().ok().and_then(|i| u64::try_from(i).ok())
    }

    /// The value as a double, rounded once from the literal.
    pub fn as_f64(&self) -> f64 {
        match &self.0 {
            // i128 -> f64 rounds to nearest, ties to even, like a parser.
            N::Int(i) => *i as f64,
            N::F64 { value, .. } => *value,
            N::F32(v) => f64::from(*v),
        }
    }

    /// The value as a float, rounded once from the literal when there is one.
    pub fn as_f32(&self) -> Result<f32, NumberMismatch> {
        let v = match &self.0 {
            N::Int(i) => *i as f32,
            N::F64 {
                literal: Some(text),
                ..
            } => text
                .parse::<f32>()
                .map_err(|_| NumberMismatch::OutOfRange)?,
            N::F64 { value, .. } => *value as f32,
            N::F32(v) => *v,
        };
        if v.is_finite() {
            Ok(v)
        } else {
            Err(NumberMismatch::OutOfRange)
        }
    }

    /// The literal as it would appear in the canonical form.
    pub fn canonical_text(&self) -> String {
        let mut out = Vec::new();
        write_number(&mut out, self);
        String::from_utf8(out).unwrap_or_default()
    }
}

impl fmt::Display for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.canonical_text())
    }
}

// ---------------------------------------------------------------------------
// Parser

/// Parses one JSON text that is already known to be UTF-8. Whitespace is
/// space, tab and CR: a line feed ends a frame and never appears inside one.
pub fn parse(text: &str) -> Result<Json, WireDecodeError> {
    let mut p = Parser {
        s: text.as_bytes(),
        pos: 0,
    };
    p.skip_ws();
    let value = p.value(1)?;
    p.skip_ws();
    if p.pos < p.s.len() {
        return Err(p.unexpected("the end of the frame"));
    }
    Ok(value)
}

struct Parser<'a> {
    s: &'a [u8],
    pos: usize,
}

enum StrBuf {
    Utf8(String),
    Utf16(Vec<u16>),
}

impl StrBuf {
    fn push_str(&mut self, s: &str) {
        match self {
            StrBuf::Utf8(buf) => buf.push_str(s),
            StrBuf::Utf16(units) => units.extend(s.encode_utf16()),
        }
    }

    fn push_char(&mut self, c: char) {
        match self {
            StrBuf::Utf8(buf) => buf.push(c),
            StrBuf::Utf16(units) => {
                let mut tmp = [0u16; 2];
                units.extend_from_slice(c.encode_utf16(&mut tmp));
            }
        }
    }

    fn push_lone_surrogate(&mut self, unit: u16) {
        if let StrBuf::Utf8(buf) = self {
            *self = StrBuf::Utf16(buf.encode_utf16().collect());
        }
        if let StrBuf::Utf16(units) = self {
            units.push(unit);
        }
    }
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    fn syntax(&self, offset: usize, reason: impl Into<String>) -> WireDecodeError {
        WireDecodeError::BadJson {
            offset,
            reason: reason.into(),
        }
    }

    fn unexpected(&self, expected: &str) -> WireDecodeError {
        let found = match self.peek() {
            None => "the end of the input".to_string(),
            Some(b'\n') => "a raw line feed (a frame holds no raw newline)".to_string(),
            Some(b) if b.is_ascii_graphic() => format!("`{}`", b as char),
            Some(b) => format!("byte 0x{b:02x}"),
        };
        self.syntax(self.pos, format!("expected {expected}, found {found}"))
    }

    fn expect(&mut self, byte: u8, expected: &str) -> Result<(), WireDecodeError> {
        if self.peek() == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.unexpected(expected))
        }
    }

    fn value(&mut self, depth: usize) -> Result<Json, WireDecodeError> {
        match self.peek() {
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => Ok(match self.string()? {
                StrBuf::Utf8(s) => Json::String(s),
                StrBuf::Utf16(units) => Json::Utf16String(units),
            }),
            Some(b'-' | b'0'..=b'9') => self.number().map(Json::Number),
            Some(b't') => self.literal("true", Json::Bool(true)),
            Some(b'f') => self.literal("false", Json::Bool(false)),
            Some(b'n') => self.literal("null", Json::Null),
            _ => Err(self.unexpected("a value")),
        }
    }

    fn literal(&mut self, word: &str, value: Json) -> Result<Json, WireDecodeError> {
        if self.s[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(value)
        } else {
            Err(self.syntax(self.pos, format!("expected `{word}`")))
        }
    }

    fn enter(&self, depth: usize) -> Result<(), WireDecodeError> {
        if depth > MAX_JSON_DEPTH {
            Err(WireDecodeError::TooDeep {
                at: At::Byte(self.pos),
                limit: MAX_JSON_DEPTH,
            })
        } else {
            Ok(())
        }
    }

    fn object(&mut self, depth: usize) -> Result<Json, WireDecodeError> {
        self.enter(depth)?;
        self.pos += 1;
        let mut map = Map::new();
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(Json::Object(map));
        }
        loop {
            if self.peek() != Some(b'"') {
                return Err(self.unexpected("a string key"));
            }
            let key_at = self.pos;
            let key = match self.string()? {
                StrBuf::Utf8(s) => s,
                StrBuf::Utf16(units) => {
                    return Err(WireDecodeError::LoneSurrogate {
                        at: At::Byte(key_at),
                        detail: format!(
                            "object key: {}",
                            cetp_proto::bundle::lone_surrogate_description(&units)
                        ),
                    })
                }
            };
            self.skip_ws();
            self.expect(b':', "`:` after an object key")?;
            self.skip_ws();
            let value = self.value(depth + 1)?;
            if map.contains_key(&key) {
                return Err(WireDecodeError::DuplicateKey {
                    offset: key_at,
                    key,
                });
            }
            map.insert(key, value);
            self.skip_ws();
            match self.peek() {
                Some(b',') => {
                    self.pos += 1;
                    self.skip_ws();
                }
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(Json::Object(map));
                }
                _ => return Err(self.unexpected("`,` or `}` in an object")),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Json, WireDecodeError> {
        self.enter(depth)?;
        self.pos += 1;
        let mut items = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(Json::Array(items));
        }
        loop {
            items.push(self.value(depth + 1)?);
            self.skip_ws();
            match self.peek() {
                Some(b',') => {
                    self.pos += 1;
                    self.skip_ws();
                }
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Json::Array(items));
                }
                _ => return Err(self.unexpected("`,` or `]` in an array")),
            }
        }
    }

    fn hex4(&mut self) -> Result<u16, WireDecodeError> {
        let start = self.pos;
        let digits = self
            .s
            .get(start..start + 4)
            .ok_or_else(|| self.syntax(start, "expected four hex digits after `\\u`"))?;
        let mut unit = 0u16;
        for (i, &b) in digits.iter().enumerate() {
            let d = match b {
                b'0'..=b'9' => b - b'0',
                b'a'..=b'f' => b - b'a' + 10,
                b'A'..=b'F' => b - b'A' + 10,
                _ => {
                    return Err(self.syntax(start + i, "expected four hex digits after `\\u`"));
                }
            };
            unit = (unit << 4) | u16::from(d);
        }
        self.pos += 4;
        Ok(unit)
    }

    fn string(&mut self) -> Result<StrBuf, WireDecodeError> {
        self.pos += 1;
        let mut buf = StrBuf::Utf8(String::new());
        loop {
            let run_start = self.pos;
            while let Some(b) = self.peek() {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.pos += 1;
            }
            if self.pos > run_start {
                // The input is valid UTF-8 and a run stops only at ASCII
                // bytes, so the slice is on character boundaries.
                match std::str::from_utf8(&self.s[run_start..self.pos]) {
                    Ok(run) => buf.push_str(run),
                    Err(_) => return Err(WireDecodeError::BadUtf8 { offset: run_start }),
                }
            }
            match self.peek() {
                None => return Err(self.syntax(self.pos, "unterminated string")),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(buf);
                }
                Some(b'\\') => {
                    let esc_at = self.pos;
                    self.pos += 1;
                    let c = self.peek();
                    self.pos += 1;
                    match c {
                        Some(b'"') => buf.push_char('"'),
                        Some(b'\\') => buf.push_char('\\'),
                        Some(b'/') => buf.push_char('/'),
                        Some(b'b') => buf.push_char('\u{8}'),
                        Some(b'f') => buf.push_char('\u{c}'),
                        Some(b'n') => buf.push_char('\n'),
                        Some(b'r') => buf.push_char('\r'),
                        Some(b't') => buf.push_char('\t'),
                        Some(b'u') => self.unicode_escape(&mut buf)?,
                        _ => return Err(self.syntax(esc_at, "invalid escape sequence")),
                    }
                }
                Some(b) => {
                    let what = if b == b'\n' {
                        "raw line feed in a string (a frame holds no raw newline)".to_string()
                    } else {
                        format!("unescaped control character 0x{b:02x} in a string")
                    };
                    return Err(self.syntax(self.pos, what));
                }
            }
        }
    }

    /// After `\u`: a code unit, a surrogate pair, or a lone surrogate.
    fn unicode_escape(&mut self, buf: &mut StrBuf) -> Result<(), WireDecodeError> {
        let unit = self.hex4()?;
        if (0xD800..0xDC00).contains(&unit) {
            let rest = &self.s[self.pos..];
            if rest.len() >= 6 && rest[0] == b'\\' && rest[1] == b'u' {
                let save = self.pos;
                self.pos += 2;
                let low = self.hex4()?;
                if (0xDC00..0xE000).contains(&low) {
                    let c =
                        0x10000 + ((u32::from(unit) - 0xD800) << 10) + (u32::from(low) - 0xDC00);
                    if let Some(c) = char::from_u32(c) {
                        buf.push_char(c);
                    }
                    return Ok(());
                }
                // Not a pair: the next escape stands on its own.
                self.pos = save;
            }
            buf.push_lone_surrogate(unit);
        } else if (0xDC00..0xE000).contains(&unit) {
            buf.push_lone_surrogate(unit);
        } else if let Some(c) = char::from_u32(u32::from(unit)) {
            buf.push_char(c);
        }
        Ok(())
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
        self.pos - start
    }

    fn number(&mut self) -> Result<Number, WireDecodeError> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(self.unexpected("a digit")),
        }
        let mut integral = true;
        if self.peek() == Some(b'.') {
            self.pos += 1;
            integral = false;
            if self.digits() == 0 {
                return Err(self.unexpected("a digit after the decimal point"));
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            integral = false;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return Err(self.unexpected("a digit in the exponent"));
            }
        }
        if self.pos - start > MAX_NUMBER_LEN {
            return Err(WireDecodeError::OutOfRange {
                at: At::Byte(start),
                expected: "a number literal",
                found: format!(
                    "a literal of {} bytes (at most {MAX_NUMBER_LEN} accepted)",
                    self.pos - start
                ),
            });
        }
        // The literal is ASCII by construction.
        let text = std::str::from_utf8(&self.s[start..self.pos]).unwrap_or("0");
        if integral {
            if let Ok(v) = text.parse::<i64>() {
                return Ok(Number::from(v));
            }
            if let Ok(v) = text.parse::<u64>() {
                return Ok(Number::from(v));
            }
        }
        let value = text.parse::<f64>().unwrap_or(f64::INFINITY);
        if !value.is_finite() {
            return Err(WireDecodeError::OutOfRange {
                at: At::Byte(start),
                expected: "a number within the range of a double",
                found: text.chars().take(40).collect(),
            });
        }
        Ok(Number(N::F64 {
            value,
            literal: Some(text.into()),
            big_integer: integral,
        }))
    }
}

// ---------------------------------------------------------------------------
// Canonical writer

/// Writes `value` in canonical form (see `vectors/wire/README.md`).
pub fn write(out: &mut Vec<u8>, value: &Json) {
    match value {
        Json::Null => out.extend_from_slice(b"null"),
        Json::Bool(true) => out.extend_from_slice(b"true"),
        Json::Bool(false) => out.extend_from_slice(b"false"),
        Json::Number(n) => write_number(out, n),
        Json::String(s) => write_str(out, s),
        Json::Utf16String(units) => write_utf16(out, units),
        Json::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write(out, item);
            }
            out.push(b']');
        }
        Json::Object(map) => write_object(out, map.iter().map(|(k, v)| (k.as_str(), v))),
    }
}

/// Writes an object whose entries are already in canonical key order.
pub(crate) fn write_object<'a>(
    out: &mut Vec<u8>,
    entries: impl Iterator<Item = (&'a str, &'a Json)>,
) {
    out.push(b'{');
    for (i, (k, v)) in entries.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_str(out, k);
        out.push(b':');
        write(out, v);
    }
    out.push(b'}');
}

/// The canonical text of a value.
pub fn to_canonical_string(value: &Json) -> String {
    let mut out = Vec::new();
    write(&mut out, value);
    String::from_utf8(out).unwrap_or_default()
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn write_escaped_char(out: &mut Vec<u8>, c: char) {
    match c {
        '"' => out.extend_from_slice(b"\\\""),
        '\\' => out.extend_from_slice(b"\\\\"),
        '\u{8}' => out.extend_from_slice(b"\\b"),
        '\u{c}' => out.extend_from_slice(b"\\f"),
        '\n' => out.extend_from_slice(b"\\n"),
        '\r' => out.extend_from_slice(b"\\r"),
        '\t' => out.extend_from_slice(b"\\t"),
        c if (c as u32) < 0x20 => write_unit_escape(out, c as u16),
        c => {
            let mut tmp = [0u8; 4];
            out.extend_from_slice(c.encode_utf8(&mut tmp).as_bytes());
        }
    }
}

fn write_unit_escape(out: &mut Vec<u8>, unit: u16) {
    out.extend_from_slice(b"\\u");
    for shift in [12, 8, 4, 0] {
        out.push(HEX[usize::from((unit >> shift) & 0xF)]);
    }
}

/// Escapes exactly as serde_json does: `"`, `\` and control characters;
/// everything else, including DEL and non-ASCII, is written raw.
fn write_str(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut run_start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'"' || b == b'\\' || b < 0x20 {
            out.extend_from_slice(&bytes[run_start..i]);
            write_escaped_char(out, char::from(b));
            run_start = i + 1;
        }
    }
    out.extend_from_slice(&bytes[run_start..]);
    out.push(b'"');
}

fn write_utf16(out: &mut Vec<u8>, units: &[u16]) {
    out.push(b'"');
    for item in char::decode_utf16(units.iter().copied()) {
        match item {
            Ok(c) => write_escaped_char(out, c),
            Err(lone) => write_unit_escape(out, lone.unpaired_surrogate()),
        }
    }
    out.push(b'"');
}

fn write_number(out: &mut Vec<u8>, n: &Number) {
    match &n.0 {
        N::Int(i) => out.extend_from_slice(i.to_string().as_bytes()),
        N::F64 { value, .. } => crate::float::write_f64(out, *value),
        N::F32(v) => crate::float::write_f32(out, *v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_ok(s: &str) -> Json {
        parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn class_of(s: &str) -> &'static str {
        parse(s).map(|_| "ok").unwrap_or_else(|e| e.class())
    }

    #[test]
    fn lone_surrogates_survive() {
        let v = parse_ok(r#""a\ud800b""#);
        assert_eq!(v, Json::Utf16String(vec![0x61, 0xD800, 0x62]));
        assert_eq!(to_canonical_string(&v), r#""a\ud800b""#);
        let v = parse_ok(r#""\uDC00\uD800""#);
        assert_eq!(v, Json::Utf16String(vec![0xDC00, 0xD800]));
        assert_eq!(to_canonical_string(&v), r#""\udc00\ud800""#);
        // A high surrogate followed by a non-surrogate escape.
        let v = parse_ok(r#""\ud800\u0041""#);
        assert_eq!(v, Json::Utf16String(vec![0xD800, 0x41]));
        // A high surrogate then another high surrogate that pairs.
        let v = parse_ok(r#""\ud800\ud83d\ude00""#);
        assert_eq!(v, Json::Utf16String(vec![0xD800, 0xD83D, 0xDE00]));
        assert_eq!(to_canonical_string(&v), "\"\\ud800😀\"");
    }

    #[test]
    fn pairs_become_utf8() {
        let v = parse_ok(r#""\ud83d\ude00\u00e9\/""#);
        assert_eq!(v, Json::String("😀é/".into()));
        assert_eq!(to_canonical_string(&v), "\"😀é/\"");
    }

    #[test]
    fn escapes_match_serde_json() {
        let s: String = (0u32..0x80).filter_map(char::from_u32).collect::<String>() + "é😀\u{2028}";
        let ours = to_canonical_string(&Json::String(s.clone()));
        assert_eq!(ours, serde_json::to_string(&s).unwrap());
    }

    #[test]
    fn numbers() {
        assert_eq!(parse_ok("-0"), Json::from(0i64));
        assert_eq!(parse_ok("18446744073709551615").as_u64(), Some(u64::MAX));
        assert_eq!(parse_ok("-9223372036854775808").as_i64(), Some(i64::MIN));
        let big = parse_ok("18446744073709551616");
        let Json::Number(n) = &big else { panic!() };
        assert_eq!(n.as_integer(), Err(NumberMismatch::OutOfRange));
        assert_eq!(to_canonical_string(&big), "1.8446744073709552e+19");
        let Json::Number(n) = parse_ok("2.0") else {
            panic!()
        };
        assert_eq!(n.as_integer(), Err(NumberMismatch::NotInteger));
        assert_eq!(class_of("1e400"), "out_of_range");
        assert_eq!(class_of(&"1".repeat(MAX_NUMBER_LEN + 1)), "out_of_range");
        assert_eq!(to_canonical_string(&parse_ok("1E2")), "100.0");
        assert_eq!(to_canonical_string(&parse_ok("1e-400")), "0.0");
    }

    #[test]
    fn float_literal_rounds_once() {
        // Halfway between two floats in decimal, but not after a first
        // rounding to double: the f32 must come from the text.
        let text = "1.00000005960464477539062500001";
        let Json::Number(n) = parse_ok(text) else {
            panic!()
        };
        assert_eq!(n.as_f32(), Ok(text.parse::<f32>().unwrap()));
        assert_ne!(
            text.parse::<f32>().unwrap(),
            text.parse::<f64>().unwrap() as f32
        );
    }

    #[test]
    fn syntax_errors() {
        for bad in [
            "",
            " ",
            "{",
            "}",
            "[1,]",
            "{\"a\":1,}",
            "{\"a\" 1}",
            "{1:2}",
            "01",
            "1.",
            ".5",
            "-",
            "1e",
            "+1",
            "tru",
            "nul",
            "\"abc",
            "\"\\x\"",
            "\"\\u12\"",
            "\"\\u12G4\"",
            "[1 2]",
            "{\"a\":1}x",
            "\"a\tb\"",
            "\"a\nb\"",
            "1\n",
            "NaN",
            "Infinity",
        ] {
            assert_eq!(class_of(bad), "bad_json", "{bad:?}");
        }
    }

    #[test]
    fn structural_limits() {
        let deep = "[".repeat(MAX_JSON_DEPTH) + &"]".repeat(MAX_JSON_DEPTH);
        assert_eq!(class_of(&deep), "ok");
        let deeper = "[".repeat(MAX_JSON_DEPTH + 1) + &"]".repeat(MAX_JSON_DEPTH + 1);
        assert_eq!(class_of(&deeper), "too_deep");
        // Far deeper input must not exhaust the stack either.
        assert_eq!(class_of(&"[".repeat(1_000_000)), "too_deep");
        assert_eq!(class_of(r#"{"a":1,"a":2}"#), "duplicate_key");
        assert_eq!(class_of(r#"{"\ud800":1}"#), "lone_surrogate");
    }

    #[test]
    fn serde_conversion() {
        let v = serde_json::json!({"a": [1, -2, 1.5, null, true, "x"], "b": {}});
        let j = Json::from(v.clone());
        assert_eq!(j.to_serde().unwrap(), v);
        assert_eq!(to_canonical_string(&j), serde_json::to_string(&v).unwrap());
        assert!(Json::Utf16String(vec![0xD800]).to_serde().is_err());
    }
}
