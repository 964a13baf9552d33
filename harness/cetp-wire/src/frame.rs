//! Frames: the envelope of probe wire v1 and its canonical encoding.

use crate::error::{Path, WireDecodeError};
use crate::fields::{self, Fields};
use crate::json::{self, Json, Map};
use std::fmt;

/// Largest frame, including its terminating newline (probe-wire "Connection").
pub const MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;

/// Largest raw payload of one `chunk` frame (probe-wire `read_fd`).
pub const MAX_CHUNK_BYTES: usize = 1024 * 1024;

/// The probe wire version this crate speaks (`hello` → `wire`).
pub const WIRE_VERSION: u32 = 1;

/// One line of the probe wire.
#[derive(Clone, Debug, PartialEq)]
pub enum Frame {
    /// A request, host to device.
    Request(Request),
    /// The one final answer to a request, device to host.
    Final(Final),
    /// Raw bytes ahead of a final answer (`read_fd`'s data).
    Chunk(Chunk),
    /// An unsolicited event, device to host.
    Event(Event),
}

/// Host to device: `{"id": n, "op": "...", ...params}`.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    /// The request id, echoed by every frame that answers it.
    pub id: u64,
    /// The op's name (`hello`, `call`, ...; see [`crate::KNOWN_OPS`]).
    pub op: String,
    /// Every member other than `id` and `op`. Members named `id` or `op` in
    /// here are not written.
    pub params: Map,
}

/// The one final answer to a request.
#[derive(Clone, Debug, PartialEq)]
pub enum Final {
    /// `{"id": n, "ok": {...}}`: the op succeeded.
    Ok {
        /// The request id answered.
        id: u64,
        /// The op's payload.
        ok: Map,
    },
    /// `{"id": n, "error": {...}}`: a device-level error.
    Error {
        /// The request id answered.
        id: u64,
        /// What went wrong.
        error: WireError,
    },
}

impl Final {
    /// The request id this answers.
    pub fn id(&self) -> u64 {
        match self {
            Final::Ok { id, .. } | Final::Error { id, .. } => *id,
        }
    }
}

/// Raw bytes sent ahead of a final answer (base64 on the wire).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chunk {
    /// The request id this chunk belongs to.
    pub id: u64,
    /// The raw bytes (base64 on the wire).
    pub data: Vec<u8>,
}

/// Device to host, unsolicited: `{"event": "...", ...fields}`.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// The event's name (`incoming_call`, ...).
    pub event: String,
    /// Every member other than `event`. Events carry no `id`: a member of
    /// that name is not written.
    pub fields: Map,
}

/// A device-level error (never a CETP error).
#[derive(Clone, Debug, PartialEq)]
pub struct WireError {
    /// What kind of failure (probe-wire's error kind table).
    pub kind: ErrorKind,
    /// Human-readable text; for `device_error`, the fix.
    pub message: String,
    /// The exception class, for `provider_exception`.
    pub class: Option<String>,
    /// Members other than `kind`, `message` and `class`.
    pub extra: Map,
}

impl WireError {
    /// An error of `kind` with `message` and no other member.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        WireError {
            kind,
            message: message.into(),
            class: None,
            extra: Map::new(),
        }
    }

    /// A `provider_exception`: the Provider threw `class` (a Java exception
    /// class name).
    pub fn provider_exception(class: impl Into<String>, message: impl Into<String>) -> Self {
        WireError {
            class: Some(class.into()),
            ..WireError::new(ErrorKind::ProviderException, message)
        }
    }
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.kind.as_str())?;
        if let Some(class) = &self.class {
            write!(f, " ({class})")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// The error kinds: probe-wire v1's, the host side's, and any other a
/// device sends (kept). The core owns them, so that every crate compares
/// the same enum.
pub use cetp_proto::device::ErrorKind;

impl Frame {
    /// A request frame: `op` with `params`.
    pub fn request(id: u64, op: impl Into<String>, params: Map) -> Frame {
        Frame::Request(Request {
            id,
            op: op.into(),
            params,
        })
    }

    /// A successful final answer with the payload `ok`.
    pub fn ok(id: u64, ok: Map) -> Frame {
        Frame::Final(Final::Ok { id, ok })
    }

    /// A failed final answer.
    pub fn error(id: u64, error: WireError) -> Frame {
        Frame::Final(Final::Error { id, error })
    }

    /// A chunk of raw bytes for request `id`.
    pub fn chunk(id: u64, data: Vec<u8>) -> Frame {
        Frame::Chunk(Chunk { id, data })
    }

    /// An event named `event` with `fields`.
    pub fn event(event: impl Into<String>, fields: Map) -> Frame {
        Frame::Event(Event {
            event: event.into(),
            fields,
        })
    }

    /// The request id this frame answers or carries; events have none.
    pub fn id(&self) -> Option<u64> {
        match self {
            Frame::Request(r) => Some(r.id),
            Frame::Final(f) => Some(f.id()),
            Frame::Chunk(c) => Some(c.id),
            Frame::Event(_) => None,
        }
    }
}

// ---------------------------------------------------------------------------
// Encoding

/// Encodes a frame in canonical form: one line of compact JSON with sorted
/// keys, ending in `\n`. The result may exceed [`MAX_FRAME_BYTES`]; use
/// [`encode_frame_checked`] before sending to a peer that enforces it.
pub fn encode_frame(frame: &Frame) -> Vec<u8> {
    let mut out = Vec::new();
    write_frame(&mut out, frame);
    out.push(b'\n');
    out
}

/// Like [`encode_frame`], refusing a frame the peer would have to reject.
pub fn encode_frame_checked(frame: &Frame) -> Result<Vec<u8>, WireDecodeError> {
    let out = encode_frame(frame);
    if out.len() > MAX_FRAME_BYTES {
        return Err(WireDecodeError::FrameTooLarge {
            limit: MAX_FRAME_BYTES,
        });
    }
    Ok(out)
}

fn write_merged(out: &mut Vec<u8>, fixed: Vec<(&str, Json)>, rest: &Map) {
    let mut entries: Vec<(&str, &Json)> = rest
        .iter()
        .filter(|(k, _)| !fixed.iter().any(|(f, _)| f == k))
        .map(|(k, v)| (k.as_str(), v))
        .collect();
    entries.extend(fixed.iter().map(|(k, v)| (*k, v)));
    entries.sort_by(|a, b| a.0.cmp(b.0));
    json::write_object(out, entries.into_iter());
}

fn write_frame(out: &mut Vec<u8>, frame: &Frame) {
    match frame {
        Frame::Request(r) => write_merged(
            out,
            vec![("id", Json::from(r.id)), ("op", Json::from(r.op.as_str()))],
            &r.params,
        ),
        Frame::Final(Final::Ok { id, ok }) => {
            // "id" sorts before "ok"; written directly to avoid copying `ok`.
            out.extend_from_slice(format!("{{\"id\":{id},\"ok\":").as_bytes());
            json::write_object(out, ok.iter().map(|(k, v)| (k.as_str(), v)));
            out.push(b'}');
        }
        Frame::Final(Final::Error { id, error }) => write_merged(
            out,
            vec![
                ("error", wire_error_to_json(error)),
                ("id", Json::from(*id)),
            ],
            &Map::new(),
        ),
        Frame::Chunk(c) => write_merged(
            out,
            vec![
                ("chunk", Json::from(fields::base64_text(&c.data))),
                ("id", Json::from(c.id)),
            ],
            &Map::new(),
        ),
        Frame::Event(e) => {
            // An `id` would make the line a request or an answer.
            let fields: Map = e
                .fields
                .iter()
                .filter(|(k, _)| k.as_str() != "id")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            write_merged(out, vec![("event", Json::from(e.event.as_str()))], &fields)
        }
    }
}

fn wire_error_to_json(e: &WireError) -> Json {
    let mut m: Map = e
        .extra
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "kind" | "message" | "class"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    m.insert("kind".into(), Json::from(e.kind.as_str()));
    m.insert("message".into(), Json::from(e.message.as_str()));
    if let Some(class) = &e.class {
        m.insert("class".into(), Json::from(class.as_str()));
    }
    Json::Object(m)
}

// ---------------------------------------------------------------------------
// Decoding

/// What a frame with an `id` is, by the one of these members it holds.
const KINDS: [&str; 4] = ["op", "ok", "error", "chunk"];

/// Decodes one frame. `line` may end with its `\n`; it must hold no other
/// newline. Op parameters and payloads are decoded separately
/// ([`crate::ops::OpRequest::decode`] and the `OkPayload` types), so a device
/// can answer a request whose parameters are wrong with `bad_request` and
/// its id.
pub fn decode_frame(line: &[u8]) -> Result<Frame, WireDecodeError> {
    let body = line.strip_suffix(b"\n").unwrap_or(line);
    if body.len() >= MAX_FRAME_BYTES {
        return Err(WireDecodeError::FrameTooLarge {
            limit: MAX_FRAME_BYTES,
        });
    }
    let text = std::str::from_utf8(body).map_err(|e| WireDecodeError::BadUtf8 {
        offset: e.valid_up_to(),
    })?;
    let value = json::parse(text)?;
    frame_from_json(value)
}

/// The `id` of a line that could not be decoded as a frame, when it is a
/// JSON object with a valid `id`: lets a device answer `bad_request` to the
/// right request.
pub fn request_id_hint(line: &[u8]) -> Option<u64> {
    let body = line.strip_suffix(b"\n").unwrap_or(line);
    if body.len() >= MAX_FRAME_BYTES {
        return None;
    }
    let text = std::str::from_utf8(body).ok()?;
    json::parse(text).ok()?.get("id")?.as_u64()
}

fn id_of(f: &Fields<'_, '_>) -> Result<u64, WireDecodeError> {
    f.integer("id", "a request id (unsigned 64-bit integer)")
}

fn frame_from_json(value: Json) -> Result<Frame, WireDecodeError> {
    let Json::Object(mut map) = value else {
        return Err(WireDecodeError::NotAFrame {
            reason: format!("a frame is a JSON object, found {}", value.kind()),
        });
    };
    // Events carry no id and may hold any member; everything else is
    // answered by id and is exactly one of KINDS.
    if !map.contains_key("id") {
        if map.contains_key("event") {
            let event = fields::string(&map["event"], &Path::ROOT.key("event"))?;
            map.remove("event");
            return Ok(Frame::Event(Event { event, fields: map }));
        }
        if KINDS.iter().any(|k| map.contains_key(*k)) {
            return Err(WireDecodeError::MissingField {
                path: "/id".into(),
                expected: "a request id (unsigned 64-bit integer)",
            });
        }
        return Err(WireDecodeError::NotAFrame {
            reason: "neither an `id` nor an `event` member".into(),
        });
    }
    let present: Vec<&str> = KINDS
        .iter()
        .copied()
        .filter(|k| map.contains_key(*k))
        .collect();
    let kind = match present.as_slice() {
        [one] => *one,
        [] => {
            return Err(WireDecodeError::NotAFrame {
                reason: "it has an `id` but none of `op`, `ok`, `error`, `chunk`".into(),
            })
        }
        several => {
            return Err(WireDecodeError::NotAFrame {
                reason: format!("it has several of {}", several.join(", ")),
            })
        }
    };
    let root = Path::ROOT;
    let f = Fields::new(&map, root);
    match kind {
        "op" => {
            let id = id_of(&f)?;
            let op = f.string("op")?;
            map.remove("id");
            map.remove("op");
            Ok(Frame::Request(Request {
                id,
                op,
                params: map,
            }))
        }
        "ok" => {
            let id = id_of(&f)?;
            f.object("ok")?;
            match map.remove("ok") {
                Some(Json::Object(ok)) => Ok(Frame::Final(Final::Ok { id, ok })),
                _ => Ok(Frame::Final(Final::Ok { id, ok: Map::new() })),
            }
        }
        "error" => {
            let id = id_of(&f)?;
            let error = wire_error_from(f.object("error")?, &root.key("error"))?;
            Ok(Frame::Final(Final::Error { id, error }))
        }
        _ => {
            let id = id_of(&f)?;
            let data = fields::base64(f.req("chunk", "base64 text")?, &root.key("chunk"))?;
            Ok(Frame::Chunk(Chunk { id, data }))
        }
    }
}

fn wire_error_from(map: &Map, path: &Path<'_>) -> Result<WireError, WireDecodeError> {
    let f = Fields::new(map, *path);
    Ok(WireError {
        kind: ErrorKind::parse(&f.string("kind")?),
        message: f.string("message")?,
        class: f.opt_string("class")?,
        extra: f.extra(&["kind", "message", "class"]),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(line: &str) {
        let frame = decode_frame(line.as_bytes()).unwrap_or_else(|e| panic!("{line}: {e}"));
        let back = encode_frame(&frame);
        assert_eq!(std::str::from_utf8(&back).unwrap(), format!("{line}\n"));
    }

    fn class(line: &str) -> &'static str {
        decode_frame(line.as_bytes())
            .map(|_| "ok")
            .unwrap_or_else(|e| e.class())
    }

    #[test]
    fn envelopes_round_trip() {
        round_trip(r#"{"id":1,"op":"hello"}"#);
        round_trip(
            r#"{"arg":null,"authority":"a.b","id":3,"method":"m","op":"call","timeout_ms":5000}"#,
        );
        round_trip(r#"{"id":2,"ok":{}}"#);
        round_trip(
            r#"{"error":{"class":"java.lang.SecurityException","kind":"provider_exception","message":"no"},"id":3}"#,
        );
        round_trip(
            r#"{"error":{"kind":"future_kind","message":"m","retry_after_ms":5},"id":18446744073709551615}"#,
        );
        round_trip(r#"{"chunk":"AAEC","id":4}"#);
        round_trip(r#"{"call":"c-1","event":"incoming_call","now_ms":1}"#);
    }

    #[test]
    fn typed_envelope_parts() {
        let f = decode_frame(br#"{"id":9,"error":{"kind":"timeout","message":"slow"}}"#).unwrap();
        let Frame::Final(Final::Error { id: 9, error }) = f else {
            panic!("{f:?}")
        };
        assert_eq!(error.kind, ErrorKind::Timeout);
        assert_eq!(error.to_string(), "timeout: slow");
        let f = decode_frame(b"{\"id\":4,\"chunk\":\"AAEC\"}\n").unwrap();
        assert_eq!(f, Frame::chunk(4, vec![0, 1, 2]));
    }

    #[test]
    fn envelope_errors() {
        assert_eq!(class("[]"), "not_a_frame");
        assert_eq!(class(r#"{"id":1}"#), "not_a_frame");
        assert_eq!(class(r#"{"id":1,"ok":{},"error":{}}"#), "not_a_frame");
        assert_eq!(class(r#"{"op":"hello"}"#), "missing_field");
        assert_eq!(class(r#"{"id":-1,"op":"hello"}"#), "out_of_range");
        assert_eq!(class(r#"{"id":1.5,"op":"hello"}"#), "not_integer");
        assert_eq!(class(r#"{"id":"1","op":"hello"}"#), "wrong_type");
        assert_eq!(class(r#"{"id":1,"op":7}"#), "wrong_type");
        assert_eq!(class(r#"{"id":1,"op":"\udfff"}"#), "lone_surrogate");
        assert_eq!(class(r#"{"id":1,"ok":[]}"#), "wrong_type");
        assert_eq!(
            class(r#"{"id":1,"error":{"message":"m"}}"#),
            "missing_field"
        );
        assert_eq!(class(r#"{"id":1,"chunk":"AA=A"}"#), "bad_base64");
        assert_eq!(class(r#"{"event":null}"#), "wrong_type");
        assert_eq!(class(r#"{"id":1,"event":"x"}"#), "not_a_frame");
        assert_eq!(class(r#"{"ok":{}}"#), "missing_field");
        assert_eq!(class("{\"id\":1,\"op\":\"hello\"}\n\n"), "bad_json");
        assert_eq!(class("{\"id\":1,\n\"op\":\"hello\"}"), "bad_json");
        let mut invalid = br#"{"id":1,"op":"x"#.to_vec();
        invalid.extend_from_slice(&[0xED, 0xA0, 0x80, b'"', b'}']);
        assert_eq!(
            decode_frame(&invalid).unwrap_err(),
            WireDecodeError::BadUtf8 { offset: 15 }
        );
    }

    #[test]
    fn size_limit_counts_the_newline() {
        let pad = MAX_FRAME_BYTES - r#"{"id":1,"op":"hello","p":""}"#.len() - 1;
        let line = format!(r#"{{"id":1,"op":"hello","p":"{}"}}"#, "x".repeat(pad));
        assert_eq!(line.len() + 1, MAX_FRAME_BYTES);
        assert!(decode_frame(line.as_bytes()).is_ok());
        let line = format!(r#"{{"id":1,"op":"hello","p":"{}"}}"#, "x".repeat(pad + 1));
        assert_eq!(class(&line), "frame_too_large");
    }

    #[test]
    fn id_hint_recovers_the_request() {
        assert_eq!(request_id_hint(br#"{"id":7,"op":5}"#), Some(7));
        assert_eq!(request_id_hint(br#"{"id":7,"op":"#), None);
    }

    #[test]
    fn request_params_cannot_shadow_the_envelope() {
        let mut params = Map::new();
        params.insert("id".into(), Json::from(99u64));
        params.insert("x".into(), Json::Null);
        let line = encode_frame(&Frame::request(1, "hello", params));
        assert_eq!(line, b"{\"id\":1,\"op\":\"hello\",\"x\":null}\n");
    }
}
