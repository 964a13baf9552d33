//! The golden frames of `vectors/wire/`, shared with the Java codec of the
//! Android probe app (which runs the same checks on the JVM).

use base64::Engine as _;
use cetp_wire::bundle::TYPE_TAGS;
use cetp_wire::{
    decode_frame, encode_frame, CallOk, DiscoverOk, Empty, ErrorKind, Final, Frame, HelloOk,
    IncomingCall, Json, Map, OkPayload, OpRequest, ReadFdOk, ResolveOk, WireDecodeError, KNOWN_OPS,
    MAX_FRAME_BYTES,
};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

fn vectors_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../vectors/wire")
}

fn golden_files() -> Vec<(String, String)> {
    let mut files: Vec<_> = std::fs::read_dir(vectors_dir())
        .expect("vectors/wire exists")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .filter(|p| p.file_name().is_some_and(|n| n != "invalid.jsonl"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect();
    files.sort();
    assert!(files.len() >= 7, "golden files missing: {files:?}");
    files
}

/// `typed` must hold only members of `generic`, with the same values: typed
/// decoding may drop unknown members but must not invent or change any.
fn assert_subset(typed: &Map, generic: &Map, ctx: &str) {
    for (k, v) in typed {
        assert_eq!(generic.get(k), Some(v), "{ctx}: member `{k}`");
    }
}

fn typed_ok_round_trip(op: &str, ok: &Map) -> Map {
    fn rt<T: OkPayload>(ok: &Map) -> Map {
        T::from_ok(ok).unwrap_or_else(|e| panic!("{e}")).to_ok()
    }
    match op {
        "hello" => rt::<HelloOk>(ok),
        "discover" => rt::<DiscoverOk>(ok),
        "call" => rt::<CallOk>(ok),
        "read_fd" => rt::<ReadFdOk>(ok),
        "resolve" => rt::<ResolveOk>(ok),
        _ => rt::<Empty>(ok),
    }
}

fn collect_tags(json: &Json, tags: &mut BTreeSet<String>) {
    match json {
        Json::Object(m) => {
            if let (Some(Json::String(t)), true) = (m.get("t"), m.contains_key("v")) {
                tags.insert(t.clone());
            }
            m.values().for_each(|v| collect_tags(v, tags));
        }
        Json::Array(a) => a.iter().for_each(|v| collect_tags(v, tags)),
        _ => {}
    }
}

#[test]
fn every_golden_line_round_trips_byte_for_byte() {
    let mut ops_seen = BTreeSet::new();
    let mut kinds_seen = BTreeSet::new();
    let mut tags = BTreeSet::new();
    let mut lines = 0;
    for (name, text) in golden_files() {
        let mut ops_by_id: BTreeMap<u64, String> = BTreeMap::new();
        for (n, line) in text.lines().enumerate() {
            let ctx = format!("{name}:{}", n + 1);
            lines += 1;
            let frame = decode_frame(line.as_bytes()).unwrap_or_else(|e| panic!("{ctx}: {e}"));
            let encoded = encode_frame(&frame);
            assert_eq!(
                String::from_utf8(encoded).unwrap(),
                format!("{line}\n"),
                "{ctx}: not canonical"
            );
            match &frame {
                Frame::Request(req) => {
                    collect_tags(&Json::Object(req.params.clone()), &mut tags);
                    let op = req.decode_op().unwrap_or_else(|e| panic!("{ctx}: {e}"));
                    let typed = op.to_request(req.id);
                    assert_eq!(typed.op, req.op, "{ctx}");
                    assert_subset(&typed.params, &req.params, &ctx);
                    if !matches!(op, OpRequest::Unknown { .. }) {
                        ops_seen.insert(req.op.clone());
                    }
                    ops_by_id.insert(req.id, req.op.clone());
                }
                Frame::Final(Final::Ok { id, ok }) => {
                    collect_tags(&Json::Object(ok.clone()), &mut tags);
                    let op = ops_by_id
                        .get(id)
                        .unwrap_or_else(|| panic!("{ctx}: no request {id} before this answer"));
                    let typed = typed_ok_round_trip(op, ok);
                    assert_subset(&typed, ok, &ctx);
                }
                Frame::Final(Final::Error { error, .. }) => {
                    kinds_seen.insert(error.kind.as_str().to_string());
                }
                Frame::Event(e) => {
                    if let Some(Json::Object(err)) = e.fields.get("error") {
                        if let Some(Json::String(k)) = err.get("kind") {
                            kinds_seen.insert(k.clone());
                        }
                    }
                    collect_tags(&Json::Object(e.fields.clone()), &mut tags);
                    if e.event == IncomingCall::EVENT {
                        let call =
                            IncomingCall::from_event(e).unwrap_or_else(|x| panic!("{ctx}: {x}"));
                        assert_eq!(call.to_event(), *e, "{ctx}");
                    }
                }
                Frame::Chunk(_) => {}
            }
        }
    }
    assert!(lines > 50, "{lines}");
    for op in KNOWN_OPS {
        assert!(ops_seen.contains(op), "no golden request for op `{op}`");
    }
    for kind in ErrorKind::WIRE {
        assert!(
            kinds_seen.contains(kind.as_str()),
            "no golden error of kind `{}`",
            kind.as_str()
        );
    }
    for tag in TYPE_TAGS {
        assert!(tags.contains(tag), "no golden value of type `{tag}`");
    }
}

#[test]
fn golden_values_have_their_exact_types() {
    use cetp_proto::bundle::Value;
    let text = std::fs::read_to_string(vectors_dir().join("call-typed-bundles.jsonl")).unwrap();
    let mut calls = BTreeMap::new();
    for line in text.lines() {
        if let Frame::Request(r) = decode_frame(line.as_bytes()).unwrap() {
            if let OpRequest::Call(c) = r.decode_op().unwrap() {
                calls.insert(c.method.clone(), c);
            }
        }
    }
    let echo = calls["echo"].extras.clone().unwrap();
    assert_eq!(echo.get("int_min"), Some(&Value::Int(i32::MIN)));
    assert_eq!(echo.get("long_max"), Some(&Value::Long(i64::MAX)));
    assert_eq!(echo.get("long_small"), Some(&Value::Long(2)));
    let floats = calls["floats"].extras.clone().unwrap();
    // 298857.125 exactly, a tie between two 8-digit decimals.
    let tie = f32::from_bits(0x4891_ED24);
    assert_eq!(floats.get("f_tie"), Some(&Value::Float(tie)));
    assert_eq!(floats.get("d_min"), Some(&Value::Double(5e-324)));
    assert!(
        matches!(floats.get("d_negzero"), Some(Value::Double(z)) if z.to_bits() == (-0.0f64).to_bits())
    );
    assert!(matches!(floats.get("f_nan"), Some(Value::Float(x)) if x.is_nan()));
    let lone = calls["lone_surrogates"].extras.clone().unwrap();
    assert_eq!(
        lone.get("request_id"),
        Some(&Value::Utf16String(vec![0x72, 0x2D, 0xD800]))
    );
    assert_eq!(
        lone.get("reversed_pair"),
        Some(&Value::Utf16String(vec![0xDC00, 0xD800]))
    );
    let arrays = calls["arrays"].extras.clone().unwrap();
    assert_eq!(
        arrays.get("bytes"),
        Some(&Value::Bytes(vec![0, 1, 2, 3, 0xFE, 0xFF]))
    );
    let keys: Vec<&str> = arrays.keys().collect();
    // Code point order: U+FFFD sorts before U+1F600 (UTF-16 order would not).
    assert!(keys.ends_with(&["z", "\u{FFFD}", "😀"]), "{keys:?}");
}

/// The frame bytes of one invalid case.
fn invalid_frame_bytes(case: &serde_json::Value) -> Vec<u8> {
    if let Some(text) = case.get("frame").and_then(|f| f.as_str()) {
        return text.as_bytes().to_vec();
    }
    if let Some(b64) = case.get("frame_base64").and_then(|f| f.as_str()) {
        return base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap();
    }
    let g = &case["generate"];
    let prefix = g["prefix"].as_str().unwrap();
    let fill = g["fill"].as_str().unwrap();
    let suffix = g["suffix"].as_str().unwrap();
    let total = usize::try_from(g["total_bytes"].as_u64().unwrap()).unwrap();
    // `total_bytes` counts the terminating newline.
    let fill_len = total - 1 - prefix.len() - suffix.len();
    let mut out = prefix.as_bytes().to_vec();
    out.extend(fill.as_bytes().iter().cycle().take(fill_len));
    out.extend_from_slice(suffix.as_bytes());
    out.push(b'\n');
    out
}

/// Frame decoding, then the typed parameters of a request.
fn full_decode(bytes: &[u8]) -> Result<(), WireDecodeError> {
    match decode_frame(bytes)? {
        Frame::Request(r) => r.decode_op().map(|_| ()),
        _ => Ok(()),
    }
}

#[test]
fn every_invalid_frame_is_rejected_with_its_class() {
    let text = std::fs::read_to_string(vectors_dir().join("invalid.jsonl")).unwrap();
    let mut classes = BTreeSet::new();
    for (n, line) in text.lines().enumerate() {
        let case: serde_json::Value = serde_json::from_str(line).unwrap();
        let expected = case["error"].as_str().unwrap();
        let bytes = invalid_frame_bytes(&case);
        if expected == "frame_too_large" {
            assert!(bytes.len() > MAX_FRAME_BYTES);
        }
        let got = full_decode(&bytes)
            .err()
            .map(|e| (e.class(), e.to_string()));
        assert_eq!(
            got.as_ref().map(|g| g.0),
            Some(expected),
            "invalid.jsonl:{} ({}) got {got:?}",
            n + 1,
            case["note"]
        );
        classes.insert(expected.to_string());
    }
    for class in WireDecodeError::CLASSES {
        assert!(
            classes.contains(class),
            "no invalid frame of class `{class}`"
        );
    }
}
