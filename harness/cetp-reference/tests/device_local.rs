//! LocalDevice: connection-scoped handles, bounded descriptor reads, device
//! errors, identities and the clock.

mod scripted;

use cetp_proto::device::{CallAnswer, ErrorKind};
use cetp_proto::envelope::keys;
use cetp_proto::provider::{Attachment, Decision, FdSource, Reply};
use cetp_proto::{Bundle, FdValue, PendingIntentValue, Value};
use cetp_reference::app::ProviderApp;
use cetp_reference::device::{
    DeviceClock, DeviceConfig, DeviceConnection, LocalDevice, IDENTITY_A, IDENTITY_B,
};
use cetp_reference::port::ConsumerPort;
use scripted::*;
use std::sync::Arc;

/// A Provider whose every answer carries one descriptor and one
/// PendingIntent, the descriptor nested one Bundle deep.
fn handing_out(src: FdSource) -> Arc<Scripted> {
    Arc::new(Scripted::new(move |_| {
        let inner = Bundle::new().with(
            keys::RESULT_FD,
            Value::Fd(FdValue {
                handle: "mine".into(),
            }),
        );
        let b = Bundle::new()
            .with("nested", Value::Bundle(inner))
            .with(
                "pi",
                Value::PendingIntent(PendingIntentValue {
                    handle: "intent".into(),
                    // The device must not believe these.
                    creator_package: Some("com.liar".into()),
                    creator_uid: Some(0),
                    immutable: Some(true),
                    activity: Some(true),
                }),
            )
            .with(
                "ghost",
                Value::Fd(FdValue {
                    handle: "unattached".into(),
                }),
            );
        Some(Reply::Result {
            bundle: Some(b),
            attachments: vec![
                ("mine".into(), Attachment::File(src.clone())),
                (
                    "intent".into(),
                    Attachment::Intent(confirmation_target(false, true, PACKAGE)),
                ),
            ],
        })
    }))
}

fn call(conn: &DeviceConnection) -> Bundle {
    match conn.call(AUTHORITY, "anything", None, None, 5_000).unwrap() {
        CallAnswer::Result(Some(b)) => b,
        other => panic!("{other:?}"),
    }
}

fn fd_of(b: &Bundle) -> String {
    b.get_bundle("nested")
        .unwrap()
        .get_fd(keys::RESULT_FD)
        .unwrap()
        .handle
}

#[test]
fn handles_are_fresh_and_scoped_to_the_connection() {
    let app = handing_out(FdSource::bytes(b"hello".to_vec()));
    let device = device_with(app.clone());
    let a = device.connect_as("a").unwrap();
    let b = device.connect_as("b").unwrap();

    let first = call(&a);
    assert_eq!(fd_of(&first), "fd-1");
    let pi = first.get_pending_intent("pi").unwrap();
    assert_eq!(pi.handle, "pi-1");
    // Creator facts come from the object, not from what the Provider wrote.
    assert_eq!(pi.creator_package.as_deref(), Some(PACKAGE));
    assert_eq!(pi.creator_uid, Some(10500));
    assert_eq!(pi.immutable, Some(false));
    // A value with no object behind it names nothing.
    assert_eq!(
        first.get("ghost"),
        Some(&Value::Other {
            class: "android.os.ParcelFileDescriptor".into()
        })
    );
    assert_eq!(fd_of(&call(&a)), "fd-2");

    // Connection b has its own numbering and cannot reach a's objects.
    assert_eq!(
        b.read_fd("fd-2", 10).unwrap_err().kind,
        ErrorKind::UnknownHandle
    );
    assert_eq!(
        b.close_fd("fd-1").unwrap_err().kind,
        ErrorKind::UnknownHandle
    );
    assert_eq!(
        b.resolve("pi-1", Decision::Approve).unwrap_err().kind,
        ErrorKind::UnknownHandle
    );
    assert_eq!(fd_of(&call(&b)), "fd-1");
    assert_eq!(b.held_handles(), vec!["fd-1", "pi-1"]);

    // a's objects are untouched by b's attempts.
    assert_eq!(a.read_fd("fd-1", 100).unwrap().bytes, b"hello");
    let out = a.resolve("pi-1", Decision::Deny).unwrap();
    assert!(out.launched);
    let resolved = app.resolved.lock().unwrap().clone();
    assert_eq!(resolved.len(), 1);
    assert_eq!(resolved[0].0, IDENTITY_A.caller());
    assert_eq!(resolved[0].2, Decision::Deny);
    assert_eq!(a.held_handles(), vec!["fd-2", "pi-2"]);
}

#[test]
fn handles_are_used_up() {
    let device = device_with(handing_out(FdSource::bytes(b"abc".to_vec())));
    let conn = device.connect_as("a").unwrap();
    call(&conn);
    let r = conn.read_fd("fd-1", 2).unwrap();
    assert_eq!(r.bytes, b"ab");
    assert!(!r.eof);
    assert_eq!(
        conn.read_fd("fd-1", 2).unwrap_err().kind,
        ErrorKind::UnknownHandle
    );
    conn.resolve("pi-1", Decision::Approve).unwrap();
    assert_eq!(
        conn.resolve("pi-1", Decision::Approve).unwrap_err().kind,
        ErrorKind::UnknownHandle
    );
    call(&conn);
    conn.close_fd("fd-2").unwrap();
    assert_eq!(
        conn.close_fd("fd-2").unwrap_err().kind,
        ErrorKind::UnknownHandle
    );
    // A PendingIntent is not a descriptor.
    assert_eq!(
        conn.read_fd("pi-2", 1).unwrap_err().kind,
        ErrorKind::UnknownHandle
    );
    assert_eq!(
        conn.close_fd("nonsense").unwrap_err().kind,
        ErrorKind::UnknownHandle
    );
}

#[test]
fn endless_descriptors_are_read_no_further_than_asked() {
    let device = device_with(handing_out(FdSource::Pattern {
        len: None,
        byte: b'z',
    }));
    let conn = device.connect_as("a").unwrap();
    call(&conn);
    let r = conn.read_fd("fd-1", 4096).unwrap();
    assert_eq!(r.bytes.len(), 4096);
    assert!(r.bytes.iter().all(|b| *b == b'z'));
    assert!(!r.eof);
    assert_eq!(r.error, None);

    // The device ceiling caps what a caller may ask for.
    let app = handing_out(FdSource::Pattern { len: None, byte: 0 });
    let small = LocalDevice::with_config(
        vec![app as Arc<dyn ProviderApp>],
        DeviceClock::manual(T0),
        DeviceConfig {
            max_read_bytes: 1000,
            ..DeviceConfig::default()
        },
    );
    let conn = small.connect_as("a").unwrap();
    call(&conn);
    let r = conn.read_fd("fd-1", u64::MAX).unwrap();
    assert_eq!(r.bytes.len(), 1000);
    assert!(!r.eof);
}

#[test]
fn finite_patterns_report_eof_exactly() {
    let device = device_with(handing_out(FdSource::Pattern {
        len: Some(10),
        byte: 1,
    }));
    let conn = device.connect_as("a").unwrap();
    call(&conn);
    let r = conn.read_fd("fd-1", 11).unwrap();
    assert_eq!(r.bytes.len(), 10);
    assert!(r.eof);
}

#[test]
fn device_errors() {
    let app = Arc::new(Scripted::new(|s| match s.method.as_str() {
        "throw" => Some(Reply::Threw {
            class: "java.lang.SecurityException".into(),
            message: "no".into(),
        }),
        "null" => Some(Reply::Result {
            bundle: None,
            attachments: vec![],
        }),
        "crash" => panic!("provider bug"),
        _ => None,
    }));
    let device = device_with(app.clone());
    let conn = device.connect_as("a").unwrap();
    assert_eq!(
        conn.call("no.such.authority", "negotiate", None, None, 0)
            .unwrap_err()
            .kind,
        ErrorKind::UnknownAuthority
    );
    assert_eq!(
        conn.call(AUTHORITY, "throw", None, None, 0).unwrap(),
        CallAnswer::Threw {
            class: "java.lang.SecurityException".into(),
            message: "no".into()
        }
    );
    assert_eq!(
        conn.call(AUTHORITY, "null", None, None, 0).unwrap(),
        CallAnswer::Result(None)
    );
    // A panicking Provider is a dead process, not a dead device; Android
    // starts it again.
    let died = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        conn.call(AUTHORITY, "crash", None, None, 0)
    }))
    .expect("the device must not panic");
    assert_eq!(died.unwrap_err().kind, ErrorKind::ProviderDied);
    assert_eq!(app.restarts.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert!(conn.call(AUTHORITY, "negotiate", None, None, 0).is_ok());
    assert_eq!(
        device.connect_as("c").unwrap_err().kind,
        ErrorKind::Unsupported
    );
}

#[test]
fn discover_restart_and_identities() {
    let app = Arc::new(Scripted::new(|_| None));
    let device = device_with(app.clone());
    let manifests = device.discover();
    assert_eq!(manifests.len(), 1);
    assert_eq!(manifests[0].package, PACKAGE);
    let mut conn = device.connect_as("b").unwrap();
    assert_eq!(conn.identity().caller, IDENTITY_B.caller());
    assert_eq!(ConsumerPort::discover(&mut conn).unwrap(), manifests);

    device.restart_provider(PACKAGE).unwrap();
    assert_eq!(app.restarts.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(
        device.restart_provider("com.unknown").unwrap_err().kind,
        ErrorKind::BadRequest
    );
    assert_eq!(IDENTITY_A.uid, 10123);
    assert_eq!(IDENTITY_A.packages, &["com.clawseed.probe"]);
    assert_eq!(IDENTITY_B.uid, 10200);
    assert_ne!(IDENTITY_A.cert_sha256, IDENTITY_B.cert_sha256);

    // A second app installed later is reachable at once.
    let mut other = Scripted::new(|_| None);
    other.authority = "com.other.tools".into();
    device.install(Arc::new(other));
    assert_eq!(device.discover().len(), 2);
    assert!(conn
        .call("com.other.tools", "negotiate", None, None, 0)
        .is_ok());
}

#[test]
fn the_provider_sees_the_connection_identity_and_device_time() {
    let app = Arc::new(Scripted::new(|_| None));
    let device = device_with(app.clone());
    let mut a = device.connect_as("a").unwrap();
    let b = device.connect_as("b").unwrap();
    ConsumerPort::call(&mut a, AUTHORITY, "x", None, None, 0).unwrap();
    a.sleep_ms(1234);
    assert_eq!(ConsumerPort::now_ms(&mut a), T0 + 1234);
    b.call(AUTHORITY, "y", None, None, 0).unwrap();
    let seen = app.seen();
    assert_eq!(seen[0].caller, IDENTITY_A.caller());
    assert_eq!(seen[0].now_ms, T0);
    assert_eq!(seen[1].caller, IDENTITY_B.caller());
    assert_eq!(seen[1].now_ms, T0 + 1234);
}

#[test]
fn system_clock_applies_the_skew() {
    let real = DeviceClock::system(0).now_ms();
    let ahead = DeviceClock::system(3_600_000).now_ms();
    assert!(ahead - real >= 3_590_000, "{}", ahead - real);
    // A system clock is moved by growing its skew (the simulated device's
    // advance_clock op).
    let c = DeviceClock::system(0);
    let before = c.now_ms();
    c.advance(1_000_000);
    let moved = c.now_ms() - before;
    assert!((1_000_000..1_100_000).contains(&moved), "{moved}");
}

#[test]
fn slow_answers_past_the_timeout_are_dropped() {
    let app = Arc::new(Scripted::new(|s| {
        (s.method == "slow").then(|| {
            std::thread::sleep(std::time::Duration::from_millis(30));
            Reply::bundle(Bundle::new())
        })
    }));
    let device = device_with(app.clone());
    let conn = device.connect_as("a").unwrap();
    assert_eq!(
        conn.call(AUTHORITY, "slow", None, None, 5)
            .unwrap_err()
            .kind,
        ErrorKind::Timeout
    );
    // The Provider still ran it.
    assert_eq!(app.seen_method("slow").len(), 1);
    assert!(conn.call(AUTHORITY, "slow", None, None, 0).is_ok());
}

#[test]
fn connections_can_be_shared_across_threads() {
    let app = handing_out(FdSource::bytes(b"x".to_vec()));
    let device = device_with(app);
    let conn = Arc::new(device.connect_as("a").unwrap());
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let c = conn.clone();
            std::thread::spawn(move || {
                for _ in 0..25 {
                    call(&c);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    // 100 calls, 100 distinct descriptors and intents.
    assert_eq!(conn.held_handles().len(), 200);
    assert!(conn.read_fd("fd-100", 1).is_ok());
}
