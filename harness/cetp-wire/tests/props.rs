//! Properties: every Bundle survives the wire, and no input panics the
//! decoder.

use cetp_proto::bundle::{Bundle, FdValue, PendingIntentValue, Value};
use cetp_wire::{
    bundle_from_json, bundle_to_json, decode_frame, encode_frame, json, CallParams, Frame,
    FrameReader, Json, OpRequest, Path, ReadError,
};
use proptest::prelude::*;
use std::io::BufReader;

/// Equality that treats every NaN alike (the wire has one NaN) and keeps
/// -0.0 apart from 0.0.
fn same_value(a: &Value, b: &Value) -> bool {
    fn f64_same(x: f64, y: f64) -> bool {
        (x.is_nan() && y.is_nan()) || x.to_bits() == y.to_bits()
    }
    match (a, b) {
        (Value::Float(x), Value::Float(y)) => {
            (x.is_nan() && y.is_nan()) || x.to_bits() == y.to_bits()
        }
        (Value::Double(x), Value::Double(y)) => f64_same(*x, *y),
        (Value::DoubleArray(x), Value::DoubleArray(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| f64_same(*p, *q))
        }
        (Value::Bundle(x), Value::Bundle(y)) => same_bundle(x, y),
        _ => a == b,
    }
}

fn same_bundle(a: &Bundle, b: &Bundle) -> bool {
    a.len() == b.len()
        && a.0
            .iter()
            .zip(b.0.iter())
            .all(|((ka, va), (kb, vb))| ka == kb && same_value(va, vb))
}

fn lone_surrogate_units() -> impl Strategy<Value = Vec<u16>> {
    (
        prop::collection::vec(any::<u16>(), 0..6),
        0xD800u16..0xE000,
        prop::collection::vec(any::<u16>(), 0..6),
    )
        .prop_map(|(mut pre, lone, post)| {
            pre.push(lone);
            pre.extend(post);
            pre
        })
        .prop_filter("holds a lone surrogate", |u| String::from_utf16(u).is_err())
}

fn leaf() -> impl Strategy<Value = Value> {
    let s = ".{0,12}";
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i32>().prop_map(Value::Int),
        any::<i64>().prop_map(Value::Long),
        any::<f32>().prop_map(Value::Float),
        any::<u32>().prop_map(|b| Value::Float(f32::from_bits(b))),
        any::<f64>().prop_map(Value::Double),
        any::<u64>().prop_map(|b| Value::Double(f64::from_bits(b))),
        s.prop_map(Value::String),
        lone_surrogate_units().prop_map(Value::Utf16String),
        prop::collection::vec(any::<i32>(), 0..5).prop_map(Value::IntArray),
        prop::collection::vec(any::<i64>(), 0..5).prop_map(Value::LongArray),
        prop::collection::vec(any::<bool>(), 0..5).prop_map(Value::BoolArray),
        prop::collection::vec(any::<u64>().prop_map(f64::from_bits), 0..5)
            .prop_map(Value::DoubleArray),
        prop::collection::vec(s, 0..4).prop_map(Value::StringArray),
        prop::collection::vec(s, 0..4).prop_map(Value::StringList),
        prop::collection::vec(any::<u8>(), 0..20).prop_map(Value::Bytes),
        (
            s,
            prop::option::of(s),
            prop::option::of(any::<i64>()),
            prop::option::of(any::<bool>()),
            prop::option::of(any::<bool>())
        )
            .prop_map(
                |(handle, creator_package, creator_uid, immutable, activity)| {
                    Value::PendingIntent(PendingIntentValue {
                        handle,
                        creator_package,
                        creator_uid,
                        immutable,
                        activity,
                    })
                }
            ),
        s.prop_map(|handle| Value::Fd(FdValue { handle })),
        s.prop_map(|class| Value::Other { class }),
    ]
}

fn bundle() -> impl Strategy<Value = Bundle> {
    let value = leaf().prop_recursive(4, 48, 6, |inner| {
        prop::collection::btree_map(".{0,8}", inner, 0..6).prop_map(|m| Value::Bundle(Bundle(m)))
    });
    prop::collection::btree_map(".{0,8}", value, 0..8).prop_map(Bundle)
}

fn golden_lines() -> Vec<Vec<u8>> {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../vectors/wire");
    let mut lines = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|x| x == "jsonl") {
            let text = std::fs::read(&path).unwrap();
            lines.extend(
                text.split(|&b| b == b'\n')
                    .filter(|l| !l.is_empty())
                    .map(<[u8]>::to_vec),
            );
        }
    }
    lines.sort();
    lines
}

/// Decoding never panics; what decodes re-encodes to a line that decodes to
/// the same frame and is then stable.
fn check_decoder(bytes: &[u8]) -> Result<(), TestCaseError> {
    if let Ok(frame) = decode_frame(bytes) {
        if let Frame::Request(r) = &frame {
            let _ = r.decode_op();
        }
        let line = encode_frame(&frame);
        prop_assert_eq!(line.iter().filter(|&&b| b == b'\n').count(), 1);
        let again = decode_frame(&line).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&again, &frame);
        prop_assert_eq!(encode_frame(&again), line);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn any_bundle_round_trips(b in bundle()) {
        let text = json::to_canonical_string(&bundle_to_json(&b));
        prop_assert!(!text.contains('\n'));
        let parsed = json::parse(&text).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let back = bundle_from_json(&parsed, &Path::ROOT)
            .map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert!(same_bundle(&b, &back), "{:?}\n!=\n{:?}", b, back);
        // Canonical: encoding the decoded Bundle gives the same text.
        prop_assert_eq!(json::to_canonical_string(&bundle_to_json(&back)), text);
    }

    #[test]
    fn any_call_round_trips_as_a_frame(
        extras in prop::option::of(bundle()),
        arg in prop::option::of(".{0,10}"),
        id in any::<u64>(),
        timeout_ms in any::<u64>(),
    ) {
        let call = CallParams {
            authority: "com.example.tools".into(),
            method: "execute".into(),
            arg,
            extras,
            timeout_ms,
        };
        let line = encode_frame(&OpRequest::Call(call.clone()).to_frame(id));
        let Frame::Request(req) = decode_frame(&line).map_err(|e| TestCaseError::fail(e.to_string()))? else {
            return Err(TestCaseError::fail("not a request"));
        };
        prop_assert_eq!(req.id, id);
        let Ok(OpRequest::Call(back)) = req.decode_op() else {
            return Err(TestCaseError::fail("not a call"));
        };
        prop_assert_eq!(&back.arg, &call.arg);
        prop_assert_eq!(back.timeout_ms, call.timeout_ms);
        match (&back.extras, &call.extras) {
            (Some(a), Some(b)) => prop_assert!(same_bundle(a, b)),
            (None, None) => {}
            _ => prop_assert!(false, "extras differ"),
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        check_decoder(&bytes)?;
    }

    #[test]
    fn json_shaped_noise_never_panics(s in r#"[{}\[\]":,0-9.eE+\-a-z\\ ]{0,64}"#) {
        check_decoder(s.as_bytes())?;
    }

    #[test]
    fn mutated_golden_frames_never_panic(
        pick in any::<prop::sample::Index>(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..4),
    ) {
        let lines = golden_lines();
        let mut line = lines[pick.index(lines.len())].clone();
        for (at, byte, how) in edits {
            if line.is_empty() {
                break;
            }
            let i = at.index(line.len());
            match how {
                0 => line[i] = byte,
                1 => line.insert(i, byte),
                _ => line.truncate(i),
            }
        }
        check_decoder(&line)?;
    }

    #[test]
    fn reader_splits_lines_whatever_the_buffering(
        capacity in 1usize..64,
        frames in prop::collection::vec(any::<u64>(), 1..6),
    ) {
        let mut data = Vec::new();
        for id in &frames {
            data.extend(encode_frame(&OpRequest::Hello.to_frame(*id)));
        }
        let mut reader = FrameReader::new(BufReader::with_capacity(capacity, &data[..]));
        for id in &frames {
            let frame = reader.read_frame().map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(frame.and_then(|f| f.id()), Some(*id));
        }
        prop_assert!(matches!(reader.read_frame(), Ok(None)));
    }

    #[test]
    fn reader_never_exceeds_its_limit(
        limit in 1usize..64,
        data in prop::collection::vec(prop_oneof![Just(b'\n'), Just(b'x')], 0..200),
    ) {
        let mut reader = FrameReader::with_limit(BufReader::with_capacity(7, &data[..]), limit);
        loop {
            match reader.read_line() {
                Ok(Some(line)) => prop_assert!(line.len() < limit),
                Ok(None) => break,
                Err(ReadError::FrameTooLarge { .. }) | Err(ReadError::Truncated { .. }) => break,
                Err(e) => return Err(TestCaseError::fail(e.to_string())),
            }
        }
    }
}

#[test]
fn json_values_with_lone_surrogates_round_trip() {
    let v = Json::Array(vec![
        Json::Utf16String(vec![0xD800]),
        Json::String("\u{0}\u{1f}\"\\".into()),
        Json::Null,
    ]);
    let text = json::to_canonical_string(&v);
    assert_eq!(text, r#"["\ud800","\u0000\u001f\"\\",null]"#);
    assert_eq!(json::parse(&text).unwrap(), v);
}
