//! Decoding errors, each with a stable class name shared with the Java codec
//! and the invalid golden frames (`vectors/wire/invalid.jsonl`).

use std::fmt;

/// Where in a frame an error was found: a byte offset while parsing JSON, or
/// a JSON Pointer (RFC 6901) into the frame once it was parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum At {
    Byte(usize),
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
    #[error("frame is larger than {limit} bytes including its newline")]
    FrameTooLarge { limit: usize },
    #[error("invalid UTF-8 at byte {offset}")]
    BadUtf8 { offset: usize },
    #[error("bad JSON at byte {offset}: {reason}")]
    BadJson { offset: usize, reason: String },
    #[error("nesting deeper than {limit} levels at {at}")]
    TooDeep { at: At, limit: usize },
    #[error("duplicate key `{key}` at byte {offset}")]
    DuplicateKey { offset: usize, key: String },
    #[error("not a frame: {reason}")]
    NotAFrame { reason: String },
    #[error("missing field `{path}`: expected {expected}")]
    MissingField {
        path: String,
        expected: &'static str,
    },
    #[error("at {at}: expected {expected}, found {found}", at = At::Field(path.clone()))]
    WrongType {
        path: String,
        expected: &'static str,
        found: &'static str,
    },
    #[error("at {at}: unknown Bundle type tag {tag:?}", at = At::Field(path.clone()))]
    BadTypeTag { path: String, tag: String },
    #[error("at {at}: expected {expected}, found {found} (not an integer)", at = At::Field(path.clone()))]
    NotInteger {
        path: String,
        expected: &'static str,
        found: String,
    },
    #[error("at {at}: expected {expected}, found {found} (out of range)")]
    OutOfRange {
        at: At,
        expected: &'static str,
        found: String,
    },
    #[error("at {at}: bad base64: {reason}", at = At::Field(path.clone()))]
    BadBase64 { path: String, reason: String },
    #[error("lone UTF-16 surrogate at {at} ({detail})")]
    LoneSurrogate { at: At, detail: String },
    #[error("at {at}: expected {expected}, found {found}", at = At::Field(path.clone()))]
    BadValue {
        path: String,
        expected: &'static str,
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

    pub fn key<'b>(&'b self, key: &'b str) -> Path<'b> {
        Path {
            parent: Some(self),
            seg: Seg::Key(key),
        }
    }

    pub fn index<'b>(&'b self, i: usize) -> Path<'b> {
        Path {
            parent: Some(self),
            seg: Seg::Index(i),
        }
    }

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
