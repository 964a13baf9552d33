//! Typed ops: every constructor and decoder, and their errors.

use cetp_proto::bundle::{Bundle, Value};
use cetp_proto::provider::{Decision, ServiceManifest};
use cetp_wire::{
    decode_frame, encode_frame, CallOk, CallParams, Caller, DeviceInfo, DiscoverOk, Empty,
    ErrorKind, Final, Frame, HelloOk, HostProviderParams, Identity, IncomingCall, Json, Map,
    OkPayload, OpRequest, ReadFdOk, ReadFdParams, ReplyOutcome, ReplyParams, ResolveOk,
    ResolveParams, WireError,
};

fn through_wire(frame: &Frame) -> Frame {
    let line = encode_frame(frame);
    assert_eq!(line.last(), Some(&b'\n'));
    decode_frame(&line).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&line)))
}

fn request_round_trip(op: OpRequest) {
    let Frame::Request(req) = through_wire(&op.to_frame(42)) else {
        panic!("not a request")
    };
    assert_eq!(req.id, 42);
    assert_eq!(req.decode_op().unwrap(), op);
}

fn ok_round_trip<T: OkPayload + PartialEq + std::fmt::Debug>(payload: T) {
    let Frame::Final(Final::Ok { id: 7, ok }) = through_wire(&payload.to_frame(7)) else {
        panic!("not an ok")
    };
    assert_eq!(T::from_ok(&ok).unwrap(), payload);
}

fn sample_bundle() -> Bundle {
    Bundle::new()
        .with("protocol_version", Value::Int(2))
        .with("request_id", Value::Utf16String(vec![0x72, 0xD800]))
        .with(
            "nested",
            Value::Bundle(Bundle::new().with("x", Value::Long(-1))),
        )
}

#[test]
fn every_request_round_trips() {
    request_round_trip(OpRequest::Hello);
    request_round_trip(OpRequest::Discover);
    request_round_trip(OpRequest::Call(CallParams {
        authority: "com.example.app.clawseed.tools".into(),
        method: "negotiate".into(),
        arg: Some("a".into()),
        extras: Some(sample_bundle()),
        timeout_ms: 5000,
    }));
    request_round_trip(OpRequest::Call(CallParams {
        authority: "a".into(),
        method: "m".into(),
        arg: None,
        extras: None,
        timeout_ms: 0,
    }));
    request_round_trip(OpRequest::ReadFd(ReadFdParams {
        handle: "fd-1".into(),
        max_bytes: 1 << 20,
    }));
    request_round_trip(OpRequest::CloseFd {
        handle: "fd-2".into(),
    });
    let mut ui = Map::new();
    ui.insert("approve".into(), Json::from("Allow"));
    for (decision, ui) in [
        (Decision::Approve, Some(ui)),
        (Decision::Deny, None),
        (Decision::Dismiss, Some(Map::new())),
    ] {
        request_round_trip(OpRequest::Resolve(ResolveParams {
            handle: "pi-1".into(),
            decision,
            timeout_ms: 30_000,
            ui,
        }));
    }
    request_round_trip(OpRequest::RestartProvider {
        package: "com.example.app".into(),
    });
    request_round_trip(OpRequest::HostProvider(HostProviderParams {
        authority: "hostile.tools".into(),
        meta: [("com.clawseed.tools.versions".to_string(), "1,2".to_string())].into(),
        extra: Map::new(),
    }));
    request_round_trip(OpRequest::Reply(ReplyParams {
        call: "c-1".into(),
        outcome: ReplyOutcome::Result {
            result: Some(sample_bundle()),
            fd_data: Some(vec![0, 255]),
        },
        delay_ms: 10,
    }));
    request_round_trip(OpRequest::Reply(ReplyParams {
        call: "c-2".into(),
        outcome: ReplyOutcome::Result {
            result: None,
            fd_data: None,
        },
        delay_ms: 0,
    }));
    request_round_trip(OpRequest::Reply(ReplyParams {
        call: "c-3".into(),
        outcome: ReplyOutcome::Throw {
            class: "java.lang.SecurityException".into(),
            message: Some("no".into()),
        },
        delay_ms: 0,
    }));
    // The simulated device's `reply` extensions (hello's reply_extensions).
    request_round_trip(OpRequest::Reply(ReplyParams {
        call: "c-4".into(),
        outcome: ReplyOutcome::Fail {
            kind: ErrorKind::Timeout,
        },
        delay_ms: 0,
    }));
    request_round_trip(OpRequest::Reply(ReplyParams {
        call: "c-5".into(),
        outcome: ReplyOutcome::EndlessFd {
            result: Some(sample_bundle()),
            fill: b' ',
        },
        delay_ms: 0,
    }));
    let mut params = Map::new();
    params.insert("level".into(), Json::from(3u64));
    request_round_trip(OpRequest::Unknown {
        op: "frobnicate".into(),
        params,
    });
}

#[test]
fn every_answer_round_trips() {
    let mut extra = Map::new();
    extra.insert("abi".into(), Json::from("arm64-v8a"));
    ok_round_trip(HelloOk {
        wire: 1,
        probe: "cetp-probe-android/0.1.0".into(),
        identity: Identity {
            name: "a".into(),
            uid: 10123,
            packages: vec!["com.clawseed.probe".into()],
            cert_sha256: vec!["00ff".into()],
            extra: Map::new(),
        },
        device: DeviceInfo {
            sdk_int: 34,
            model: "Pixel".into(),
            fingerprint: "f".into(),
            extra: extra.clone(),
        },
        now_ms: 1_717_171_717_171,
        ops: vec!["hello".into(), "call".into()],
        extra,
    });
    ok_round_trip(DiscoverOk {
        providers: vec![ServiceManifest {
            package: "p".into(),
            service: "p/.S".into(),
            exported: true,
            permission: None,
            meta: [("k".to_string(), "v".to_string())].into(),
            authority_package: Some("p".into()),
            signing_cert_sha256: Vec::new(),
            meta_types: None,
        }],
    });
    // The signing certificate extension, when the device reports it.
    ok_round_trip(DiscoverOk {
        providers: vec![ServiceManifest {
            package: "p".into(),
            service: "p/.S".into(),
            exported: true,
            permission: None,
            meta: Default::default(),
            authority_package: None,
            signing_cert_sha256: vec!["ab".repeat(32), "cd".repeat(32)],
            meta_types: None,
        }],
    });
    // Meta-data types, when the device reports them: empty means every value
    // is a String, which is not the same as not knowing (None).
    for types in [
        Some([("k".to_string(), "int".to_string())].into()),
        Some(Default::default()),
    ] {
        ok_round_trip(DiscoverOk {
            providers: vec![ServiceManifest {
                package: "p".into(),
                service: "p/.S".into(),
                exported: true,
                permission: None,
                meta: [("k".to_string(), "2".to_string())].into(),
                authority_package: None,
                signing_cert_sha256: Vec::new(),
                meta_types: types,
            }],
        });
    }
    ok_round_trip(CallOk {
        result: Some(sample_bundle()),
        elapsed_us: 812,
    });
    ok_round_trip(CallOk {
        result: None,
        elapsed_us: 0,
    });
    ok_round_trip(ReadFdOk {
        bytes: 3,
        sha256: "ab".into(),
        eof: false,
        error: Some("EPIPE".into()),
        writable: Some(false),
    });
    ok_round_trip(ResolveOk {
        launched: true,
        decision_applied: false,
        result_code: -1,
        launched_package: None,
    });
    ok_round_trip(ResolveOk {
        launched: true,
        decision_applied: true,
        result_code: -1,
        launched_package: Some("com.example.provider".into()),
    });
    ok_round_trip(Empty);
}

#[test]
fn errors_and_events_round_trip() {
    for kind in ErrorKind::WIRE {
        let f = Frame::error(3, WireError::new(kind.clone(), "m"));
        assert_eq!(through_wire(&f), f);
    }
    let mut e = WireError::provider_exception("java.lang.SecurityException", "denied");
    e.extra.insert("stack".into(), Json::from("at X"));
    let f = Frame::error(4, e);
    assert_eq!(through_wire(&f), f);

    let call = IncomingCall {
        call: "c-1".into(),
        caller: Caller {
            uid: 10200,
            packages: vec!["com.example.consumer".into()],
            extra: Map::new(),
        },
        method: "negotiate".into(),
        arg: None,
        extras: Some(sample_bundle()),
        now_ms: 5,
        extra: Map::new(),
    };
    let Frame::Event(ev) = through_wire(&call.to_frame()) else {
        panic!()
    };
    assert_eq!(IncomingCall::from_event(&ev).unwrap(), call);
}

fn ok_error<T: OkPayload>(ok: &str) -> String {
    let Json::Object(m) = cetp_wire::json::parse(ok).unwrap() else {
        panic!()
    };
    match T::from_ok(&m) {
        Ok(_) => "ok".into(),
        Err(e) => format!("{}: {e}", e.class()),
    }
}

#[test]
fn answer_errors_point_into_the_frame() {
    assert_eq!(
        ok_error::<CallOk>(r#"{"result":null}"#),
        "missing_field: missing field `/ok/elapsed_us`: expected an unsigned 64-bit integer"
    );
    assert_eq!(
        ok_error::<CallOk>(r#"{"result":{"a":{"t":"int","v":1.5}},"elapsed_us":1}"#),
        "not_integer: at `/ok/result/a/v`: expected an int (32-bit integer), found 1.5 (not an integer)"
    );
    assert!(ok_error::<HelloOk>(
        r#"{"wire":1,"probe":"p","identity":{"name":"a","uid":-1,"packages":[],"cert_sha256":[]},"device":{"sdk_int":1,"model":"m","fingerprint":"f"},"now_ms":0,"ops":[]}"#
    )
    .starts_with("out_of_range: at `/ok/identity/uid`"));
    assert!(ok_error::<DiscoverOk>(
        r#"{"providers":[{"package":"p","service":"s","exported":"yes","permission":null,"meta":{},"authority_package":null}]}"#
    )
    .starts_with("wrong_type: at `/ok/providers/0/exported`"));
    assert!(ok_error::<ReadFdOk>(r#"{"bytes":1,"sha256":"x","eof":true}"#).starts_with("ok"));
    assert!(ok_error::<ResolveOk>(
        r#"{"launched":true,"decision_applied":true,"result_code":2147483648}"#
    )
    .starts_with("out_of_range"));
}

#[test]
fn unknown_members_are_ignored_or_kept() {
    let line = br#"{"id":1,"op":"read_fd","handle":"fd-1","max_bytes":5,"priority":"high"}"#;
    let Frame::Request(r) = decode_frame(line).unwrap() else {
        panic!()
    };
    assert_eq!(
        r.decode_op().unwrap(),
        OpRequest::ReadFd(ReadFdParams {
            handle: "fd-1".into(),
            max_bytes: 5
        })
    );
    let Json::Object(ok) = cetp_wire::json::parse(
        r#"{"wire":1,"probe":"p","identity":{"name":"a","uid":1,"packages":[],"cert_sha256":[],"selinux":"u:r:untrusted_app"},"device":{"sdk_int":1,"model":"m","fingerprint":"f"},"now_ms":0,"ops":[],"boot_id":"b"}"#,
    )
    .unwrap() else {
        panic!()
    };
    let hello = HelloOk::from_ok(&ok).unwrap();
    assert_eq!(hello.extra.get("boot_id"), Some(&Json::from("b")));
    assert_eq!(
        hello.identity.extra.get("selinux"),
        Some(&Json::from("u:r:untrusted_app"))
    );
    assert_eq!(hello.to_ok(), ok);
    assert_eq!(hello.identity.caller_identity().uid, 1);
}

#[test]
fn incoming_call_rejects_other_events() {
    let Frame::Event(e) = decode_frame(br#"{"event":"tick"}"#).unwrap() else {
        panic!()
    };
    assert_eq!(
        IncomingCall::from_event(&e).unwrap_err().class(),
        "bad_value"
    );
}
