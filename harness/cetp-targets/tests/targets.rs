//! Opening targets: the in-process sim through the wire codec, traces,
//! the self-test factory, and errors that name what failed.

mod common;

use cetp_proto::device::ErrorKind;
use cetp_targets::{open, open_with, target_factory, OpenOptions, TargetSpec, WireTrace};
use cetp_transport::Direction;
use std::time::{Duration, Instant};

#[test]
fn the_sim_target_speaks_the_wire_for_both_identities() {
    let trace = WireTrace::new();
    let t = open_with(
        &TargetSpec::parse("sim:seed=3").unwrap(),
        &OpenOptions::traced(trace.clone()),
    )
    .unwrap();
    assert_eq!(t.label, "sim:seed=3");
    let a = t.a.hello().unwrap();
    let b = t.b.as_ref().expect("identity b").hello().unwrap();
    assert_eq!(
        (a.identity_name.as_str(), b.identity_name.as_str()),
        ("a", "b")
    );
    assert_ne!(a.uid, b.uid);
    // The device clock estimate follows the device's.
    let drift = (t.a.now_ms() - a.now_ms).abs();
    assert!(drift < 1_000, "{drift}");
    assert!(!t.a.discover().unwrap().is_empty());

    // Every frame of both connections is in the trace, in order per identity.
    let frames = trace.frames();
    for id in ["a", "b"] {
        let mine: Vec<_> = frames.iter().filter(|f| f.identity == id).collect();
        assert!(mine.len() >= 4, "{id}: {mine:?}");
        assert_eq!(mine[0].direction, Direction::Sent);
        assert!(String::from_utf8_lossy(&mine[0].bytes).contains("\"op\":\"hello\""));
        assert_eq!(mine[1].direction, Direction::Received);
    }
    let text = trace.render();
    assert!(text.contains("a -> {\"id\":1,\"op\":\"hello\"}"), "{text}");
    assert!(text.contains("b <- {\"id\":1,\"ok\":{"), "{text}");
}

#[test]
fn device_errors_keep_the_device_kind() {
    let t = open(&TargetSpec::parse("sim").unwrap()).unwrap();
    let e = t.a.read_fd("fd-404", 10).unwrap_err();
    assert_eq!(e.kind, ErrorKind::UnknownHandle, "{e}");
    assert_eq!(e.fault(), cetp_vectors::device::Fault::Infra);
    let e =
        t.a.call("no.such.authority", "m", None, None, 1000)
            .unwrap_err();
    assert_eq!(e.kind, ErrorKind::UnknownAuthority, "{e}");
}

#[test]
fn the_factory_builds_the_reference_and_its_mutants() {
    let make = target_factory();
    let reference = make("sim").unwrap();
    assert_eq!(reference.label, "sim");
    let mutant = make("sim:mutant=session_not_checked").unwrap();
    assert_eq!(mutant.label, "sim:mutant=session_not_checked");
    mutant.a.hello().unwrap();
    let e = make("sim:mutant=no_such_mutant")
        .err()
        .expect("unknown mutant");
    assert!(e.contains("no_such_mutant"), "{e}");
    let variant = make("sim:variant=sync_for_async_tool").unwrap();
    assert_eq!(variant.label, "sim:variant=sync_for_async_tool");
    let e = make("sim:variant=no_such_variant")
        .err()
        .expect("unknown variant");
    assert!(
        e.contains("no_such_variant") && e.contains("legal variant"),
        "{e}"
    );
}

#[test]
fn blocking_calls_also_work_from_inside_a_runtime() {
    let t = open(&TargetSpec::parse("sim").unwrap()).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let hello = rt.block_on(async { t.a.hello() }).unwrap();
    assert_eq!(hello.identity_name, "a");
}

#[test]
fn nothing_to_connect_to_is_named() {
    let port = common::free_port();
    let start = Instant::now();
    let e = open(&TargetSpec::parse(&format!("tcp:127.0.0.1:{port},timeout_ms=2000")).unwrap())
        .err()
        .expect("nothing listens");
    assert_eq!(e.device_kind(), Some(ErrorKind::Io), "{e}");
    assert!(e.to_string().contains("identity a"), "{e}");
    assert!(start.elapsed() < Duration::from_secs(2));
    // A mutant the app has no place for is a wrong target string, found
    // when it is parsed, not a device that failed to start.
    let e = TargetSpec::parse("sim:mutant=nope").unwrap_err();
    assert!(e.to_string().contains("unknown mutant"), "{e}");
}

#[test]
fn a_device_that_cannot_restart_says_so_without_adb() {
    let peer = common::ScriptedPeer::start(|op, id| {
        common::honest_hello(op, id).unwrap_or_else(|| {
            common::Act::Send(cetp_wire::encode_frame(&cetp_wire::Frame::error(
                id,
                cetp_wire::WireError::new(cetp_wire::ErrorKind::Unsupported, "no process control"),
            )))
        })
    });
    let t = open(&TargetSpec::parse(&peer.spec()).unwrap()).unwrap();
    let e = t.a.restart_provider("com.clawseed.reference").unwrap_err();
    assert_eq!(e.kind, ErrorKind::OpUnavailable, "{e}");
}

/// A device whose `hello` leaves `resolve` and `restart_provider` out of
/// `ops` (the Android probe without UiAutomation) is never asked for them:
/// the host answers `op_unavailable` naming the reason the device gave, an
/// infrastructure error rather than a Provider failure.
#[test]
fn ops_missing_from_hello_are_named_without_asking_the_device() {
    use cetp_vectors::device::Fault;
    use cetp_wire::OkPayload;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    let asked = Arc::new(AtomicUsize::new(0));
    let seen = asked.clone();
    let peer = common::ScriptedPeer::start(move |op, id| {
        if op == "hello" {
            let mut hello = cetp_wire::HelloOk::from_ok(
                match &cetp_wire::decode_frame(&common::hello_frame(id)).unwrap() {
                    cetp_wire::Frame::Final(cetp_wire::Final::Ok { ok, .. }) => ok,
                    other => panic!("{other:?}"),
                },
            )
            .unwrap();
            let why = "the probe has no UiAutomation: it was started without `am instrument -w`";
            let mut unavailable = cetp_wire::Map::new();
            unavailable.insert("resolve".into(), cetp_wire::Json::from(why));
            unavailable.insert("restart_provider".into(), cetp_wire::Json::from(why));
            hello.extra.insert(
                "ops_unavailable".into(),
                cetp_wire::Json::Object(unavailable),
            );
            return common::Act::Send(cetp_wire::encode_frame(&hello.to_frame(id)));
        }
        seen.fetch_add(1, Ordering::SeqCst);
        common::Act::Send(cetp_wire::encode_frame(&cetp_wire::Frame::error(
            id,
            cetp_wire::WireError::new(cetp_wire::ErrorKind::Unsupported, "asked anyway"),
        )))
    });
    let t = open(&TargetSpec::parse(&peer.spec()).unwrap()).unwrap();
    let e =
        t.a.resolve("pi-1", cetp_proto::provider::Decision::Approve, None, 1000)
            .unwrap_err();
    assert_eq!(e.kind, ErrorKind::OpUnavailable, "{e}");
    assert_eq!(e.fault(), Fault::Infra, "{e}");
    assert!(
        e.message.contains("identity a") && e.message.contains("without `am instrument -w`"),
        "{e}"
    );
    let e = t.a.restart_provider("com.clawseed.reference").unwrap_err();
    assert_eq!(e.kind, ErrorKind::OpUnavailable, "{e}");
    assert!(e.message.contains("`restart_provider`"), "{e}");
    assert_eq!(
        asked.load(Ordering::SeqCst),
        0,
        "the device was asked anyway"
    );
}
