//! Probe wire v1 codec (`probe-wire.md`): the frames the host harness and a
//! device exchange, typed op payloads, and typed Bundles.
//!
//! ```text
//! bytes ──FrameReader──▶ line ──decode_frame──▶ Frame ──OpRequest::decode / OkPayload::from_ok──▶ typed
//! typed ──to_frame──▶ Frame ──encode_frame──▶ one canonical line
//! ```
//!
//! Frames are JSON, but not serde_json's: a Java String may hold a lone
//! UTF-16 surrogate and must come back unchanged, so this crate has its own
//! strict, bounded parser and a canonical writer ([`json`]). The canonical
//! form is specified in `vectors/wire/README.md`; the golden frames there are
//! shared with the Java codec of the Android probe app.
//!
//! Nothing here panics on input: every read is bounded (frame size, nesting
//! depth, Bundle depth, number length) and every failure is a
//! [`WireDecodeError`] with a stable class.

#![forbid(unsafe_code)]

pub mod bundle;
pub mod error;
mod fields;
pub mod float;
pub mod frame;
pub mod json;
pub mod ops;
pub mod reader;

pub use bundle::{bundle_from_json, bundle_to_json, value_to_json, MAX_BUNDLE_DEPTH};
pub use error::{At, Path, WireDecodeError};
pub use frame::{
    decode_frame, encode_frame, encode_frame_checked, request_id_hint, Chunk, ErrorKind, Event,
    Final, Frame, Request, WireError, MAX_CHUNK_BYTES, MAX_FRAME_BYTES, WIRE_VERSION,
};
pub use json::{Json, Map, Number, MAX_JSON_DEPTH, MAX_NUMBER_LEN};
pub use ops::{
    CallOk, CallParams, Caller, DeviceInfo, DiscoverOk, Empty, HelloOk, HostProviderParams,
    Identity, IncomingCall, OkPayload, OpRequest, ReadFdOk, ReadFdParams, ReplyOutcome,
    ReplyParams, ResolveOk, ResolveParams, KNOWN_OPS,
};
#[cfg(feature = "tokio")]
pub use reader::AsyncFrameReader;
pub use reader::{FrameReader, ReadError};
