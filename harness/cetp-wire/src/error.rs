//! Decoding errors, each with a stable class name shared with the Java codec
//! and the invalid golden frames (`vectors/wire/invalid.jsonl`).

use std::fmt;

/// Where in a frame an error was found: a byte offset while parsing JSON, or
/// a JSON Pointer (RFC 6901) into the frame once it was parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum At {
    /// A byte offset into the frame's line.
    Byte(usize),
    /// A JSON Pointer into the parsed frame (empty: the frame itself).
    Field(String),
}

impl fmt::Display for At {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            At::Byte(offset) => write!(f, "byte {offset}"),
            At::Field(p) if p.is_empty() => f.write_str("the frame"),
            At::Field(p) => write!(f, "`{p}`"),
        }
    }
}

/// Why a frame could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WireDecodeError {
    /// The frame is over [`crate::MAX_FRAME_BYTES`] including its newline.
    #[error("frame is larger than {limit} bytes including its newline")]
    FrameTooLarge {
        /// The largest frame allowed, in bytes.
        limit: usize,
    },
    /// The frame is not valid UTF-8 (surrogates encoded as UTF-8 included).
    #[error("invalid UTF-8 at byte {offset}")]
    BadUtf8 {
        /// Byte offset of the first invalid sequence.
        offset: usize,
    },
    /// JSON syntax: an unexpected character or end, a bad escape, a raw
    /// control character, trailing data.
    #[error("bad JSON at byte {offset}: {reason}")]
    BadJson {
        /// Byte offset where parsing failed.
        offset: usize,
        /// What the parser expected or found there.
        reason: String,
    },
    /// JSON nested over [`crate::MAX_JSON_DEPTH`], or Bundles nested over
    /// [`crate::MAX_BUNDLE_DEPTH`].
    #[error("nesting deeper than {limit} levels at {at}")]
    TooDeep {
        /// Where the limit was passed.
        at: At,
        /// The depth allowed.
        limit: usize,
    },
    /// A key twice in one object.
    #[error("duplicate key `{key}` at byte {offset}")]
    DuplicateKey {
        /// Byte offset of the second occurrence.
        offset: usize,
        /// The repeated key.
        key: String,
    },
    /// Not an object, or not exactly one frame kind (request, final, chunk,
    /// event).
    #[error("not a frame: {reason}")]
    NotAFrame {
        /// What made it none.
        reason: String,
    },
    /// A required member is absent.
    #[error("missing field `{path}`: expected {expected}")]
    MissingField {
        /// JSON Pointer of the absent member.
        path: String,
        /// What it should have held.
        expected: &'static str,
    },
    /// A member has the wrong JSON type.
    #[error("at {at}: expected {expected}, found {found}", at = At::Field(path.clone()))]
    WrongType {
        /// JSON Pointer of the member.
        path: String,
        /// The type it should have.
        expected: &'static str,
        /// The JSON type it has.
        found: &'static str,
    },
    /// A Bundle value's `t` is not a known type tag.
    #[error("at {at}: unknown Bundle type tag {tag:?}", at = At::Field(path.clone()))]
    BadTypeTag {
        /// JSON Pointer of the Bundle value.
        path: String,
        /// The tag it carries.
        tag: String,
    },
    /// A number with a fraction or exponent where an integer is required.
    #[error("at {at}: expected {expected}, found {found} (not an integer)", at = At::Field(path.clone()))]
    NotInteger {
        /// JSON Pointer of the number.
        path: String,
        /// The integer type required.
        expected: &'static str,
        /// The number's literal.
        found: String,
    },
    /// A number outside its field's range, a literal that overflows a
    /// double, or a literal over [`crate::MAX_NUMBER_LEN`] bytes.
    #[error("at {at}: expected {expected}, found {found} (out of range)")]
    OutOfRange {
        /// Where the number is.
        at: At,
        /// The range or type required.
        expected: &'static str,
        /// The number found, or what is wrong with its literal.
        found: String,
    },
    /// Base64 that is not canonical RFC 4648 §4.
    #[error("at {at}: bad base64: {reason}", at = At::Field(path.clone()))]
    BadBase64 {
        /// JSON Pointer of the string.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A lone UTF-16 surrogate where a Unicode string is required.
    #[error("lone UTF-16 surrogate at {at} ({detail})")]
    LoneSurrogate {
        /// Where the string is.
        at: At,
        /// Which surrogate, and in what string.
        detail: String,
    },
    /// A value outside its allowed set (a decision, a non-finite number's
    /// name), or a `reply` whose outcome fields conflict.
    #[error("at {at}: expected {expected}, found {found}", at = At::Field(path.clone()))]
    BadValue {
        /// JSON Pointer of the value.
        path: String,
        /// What is allowed there.
        expected: &'static str,
        /// What was found.
        found: String,
    },
}

impl WireDecodeError {
    /// The stable class of this error, as listed in `vectors/wire/README.md`.
    pub fn class(&self) -> &'static str {
        match self {
            WireDecodeError::FrameTooLarge { .. } => "frame_too_large",
            WireDecodeError::BadUtf8 { .. } => "bad_utf8",
            WireDecodeError::BadJson { .. } => "bad_json",
            WireDecodeError::TooDeep { .. } => "too_deep",
            WireDecodeError::DuplicateKey { .. } => "duplicate_key",
            WireDecodeError::NotAFrame { .. } => "not_a_frame",
            WireDecodeError::MissingField { .. } => "missing_field",
            WireDecodeError::WrongType { .. } => "wrong_type",
            WireDecodeError::BadTypeTag { .. } => "bad_type_tag",
            WireDecodeError::NotInteger { .. } => "not_integer",
            WireDecodeError::OutOfRange { .. } => "out_of_range",
            WireDecodeError::BadBase64 { .. } => "bad_base64",
            WireDecodeError::LoneSurrogate { .. } => "lone_surrogate",
            WireDecodeError::BadValue { .. } => "bad_value",
        }
    }

    /// Every class, for tests and documentation.
    pub const CLASSES: [&'static str; 14] = [
        "frame_too_large",
        "bad_utf8",
        "bad_json",
        "too_deep",
        "duplicate_key",
        "not_a_frame",
        "missing_field",
        "wrong_type",
        "bad_type_tag",
        "not_integer",
        "out_of_range",
        "bad_base64",
        "lone_surrogate",
        "bad_value",
    ];
}

/// A location inside a parsed frame, built on the stack while descending and
/// rendered as a JSON Pointer only when an error is reported.
#[derive(Clone, Copy, Debug)]
pub struct Path<'a> {
    parent: Option<&'a Path<'a>>,
    seg: Seg<'a>,
}

#[derive(Clone, Copy, Debug)]
enum Seg<'a> {
    Root,
    Key(&'a str),
    Index(usize),
}

impl<'a> Path<'a> {
    /// The frame itself.
    pub const ROOT: Path<'static> = Path {
        parent: None,
        seg: Seg::Root,
    };

    /// The member `key` of the object at this path.
    pub fn key<'b>(&'b self, key: &'b str) -> Path<'b> {
        Path {
            parent: Some(self),
            seg: Seg::Key(key),
        }
    }

    /// Element `i` of the array at this path.
    pub fn index<'b>(&'b self, i: usize) -> Path<'b> {
        Path {
            parent: Some(self),
            seg: Seg::Index(i),
        }
    }

    /// This path as a JSON Pointer (RFC 6901); `""` for the frame itself.
    pub fn render(&self) -> String {
        let mut segs = Vec::new();
        let mut cur = Some(self);
        while let Some(p) = cur {
            segs.push(p.seg);
            cur = p.parent;
        }
        let mut out = String::new();
        for seg in segs.iter().rev() {
            match seg {
                Seg::Root => {}
                Seg::Key(k) => {
                    cetp_proto::pointer::push(&mut out, k);
                }
                Seg::Index(i) => {
                    out.push('/');
                    out.push_str(&i.to_string());
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_render_as_json_pointers() {
        let root = Path::ROOT;
        let extras = root.key("extras");
        let key = extras.key("a/b~c");
        let v = key.key("v");
        let idx = v.index(3);
        assert_eq!(idx.render(), "/extras/a~1b~0c/v/3");
        assert_eq!(root.render(), "");
    }

    #[test]
    fn messages_name_the_field() {
        let e = WireDecodeError::WrongType {
            path: "/extras/x/v".into(),
            expected: "an integer",
            found: "a string",
        };
        assert_eq!(
            e.to_string(),
            "at `/extras/x/v`: expected an integer, found a string"
        );
        assert_eq!(e.class(), "wrong_type");
    }
}
