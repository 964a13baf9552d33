//! Faults of the device, the peer and adb: each ends in its named error,
//! within the timeout of the op that met it.

mod common;

use cetp_proto::device::{AdbErrorKind, ErrorKind};
use cetp_targets::{open_with, OpenOptions, TargetSpec};
use cetp_transport::ClientConfig;
use cetp_vectors::device::{DeviceError, Target};
use common::{adb_or_skip, honest_hello, Act, AdbServer, ScriptedPeer, SimHost};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The transport margin over a call's own `timeout_ms` in these tests.
const MARGIN: Duration = Duration::from_millis(500);
const CALL_MS: u64 = 1500;
/// Per-op timeout given in the specs (hello, adb commands).
const OP_MS: u64 = 3000;

fn opts() -> OpenOptions {
    OpenOptions {
        client: ClientConfig {
            call_margin: MARGIN,
            read_fd_timeout: Duration::from_secs(5),
            ..ClientConfig::default()
        },
        ..OpenOptions::default()
    }
}

fn open_spec(spec: &str) -> Target {
    let spec = TargetSpec::parse(spec).unwrap();
    open_with(&spec, &opts()).unwrap_or_else(|e| panic!("open {spec}: {e}"))
}

/// The bound for a call: its timeout plus the transport's margin.
fn call_bound() -> Duration {
    Duration::from_millis(CALL_MS) + MARGIN
}

#[track_caller]
fn expect_kind<T: std::fmt::Debug>(
    kind: ErrorKind,
    bound: Duration,
    f: impl FnOnce() -> Result<T, DeviceError>,
) -> DeviceError {
    let start = Instant::now();
    let r = f();
    let elapsed = start.elapsed();
    let e = r.expect_err("the op must fail");
    assert_eq!(e.kind, kind, "{e}");
    assert!(
        elapsed < bound,
        "{kind} after {elapsed:?}, bound {bound:?}: {e}"
    );
    e
}

fn call(t: &Target) -> Result<cetp_proto::device::CallAnswer, DeviceError> {
    t.a.call(
        cetp_reference::provider::AUTHORITY,
        "negotiate",
        None,
        None,
        CALL_MS,
    )
}

#[test]
fn a_peer_that_drops_the_connection_mid_call() {
    let peer = ScriptedPeer::start(|op, id| honest_hello(op, id).unwrap_or(Act::Close));
    let t = open_spec(&peer.spec());
    expect_kind(ErrorKind::ConnectionClosed, call_bound(), || call(&t));
    // Everything after fails at once, with the same name.
    expect_kind(
        ErrorKind::ConnectionClosed,
        Duration::from_millis(100),
        || t.a.discover(),
    );
}

#[test]
fn a_frame_that_stalls_mid_line_times_out() {
    let peer = ScriptedPeer::start(|op, id| {
        honest_hello(op, id).unwrap_or_else(|| {
            Act::SendThenStall(
                format!("{{\"id\":{id},\"ok\":{{\"result\":{{\"status\":").into_bytes(),
            )
        })
    });
    let t = open_spec(&peer.spec());
    let start = Instant::now();
    let e = expect_kind(
        ErrorKind::Timeout,
        call_bound() + Duration::from_secs(1),
        || call(&t),
    );
    assert!(start.elapsed() >= Duration::from_millis(CALL_MS), "{e}");
}

#[test]
fn an_oversized_frame_closes_the_connection() {
    // A 17 MiB line, and a line that never ends.
    let too_long = {
        let mut l = b"{\"id\":2,\"ok\":{\"pad\":\"".to_vec();
        l.resize(17 * 1024 * 1024, b'x');
        l.extend_from_slice(b"\"}}\n");
        l
    };
    for (name, body) in [
        ("17 MiB line", too_long),
        ("endless line", vec![b'['; 24 * 1024 * 1024]),
    ] {
        let peer = ScriptedPeer::start(move |op, id| {
            honest_hello(op, id).unwrap_or_else(|| Act::Send(body.clone()))
        });
        let t = open_spec(&peer.spec());
        let e = expect_kind(ErrorKind::FrameTooLarge, call_bound(), || call(&t));
        assert!(e.message.contains("16777216"), "{name}: {e}");
        expect_kind(
            ErrorKind::ConnectionClosed,
            Duration::from_millis(100),
            || call(&t),
        );
    }
}

#[test]
fn garbage_bytes_on_the_socket() {
    let garbage: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    assert!(garbage.contains(&b'\n'));
    // During a call: the stream cannot be trusted any more.
    let g = garbage.clone();
    let peer = ScriptedPeer::start(move |op, id| {
        honest_hello(op, id).unwrap_or_else(|| Act::Send(g.clone()))
    });
    let t = open_spec(&peer.spec());
    expect_kind(ErrorKind::BadFrame, call_bound(), || call(&t));
    expect_kind(
        ErrorKind::ConnectionClosed,
        Duration::from_millis(100),
        || t.a.hello(),
    );

    // Instead of hello: the target does not open, and says why.
    let peer = ScriptedPeer::start(move |_, _| Act::Send(garbage.clone()));
    let spec = TargetSpec::parse(&format!("{},timeout_ms={OP_MS}", peer.spec())).unwrap();
    let start = Instant::now();
    let e = open_with(&spec, &opts())
        .err()
        .expect("garbage is not a device");
    assert_eq!(e.device_kind(), Some(ErrorKind::BadFrame), "{e}");
    assert!(start.elapsed() < Duration::from_millis(OP_MS), "{e}");
}

#[test]
fn an_unreachable_or_stalled_adb_server() {
    // Nothing listens: refused at once.
    let port = common::free_port();
    let spec =
        TargetSpec::parse(&format!("adb:X,server=127.0.0.1:{port},timeout_ms={OP_MS}")).unwrap();
    let start = Instant::now();
    let e = open_with(&spec, &opts()).err().expect("no server");
    assert_eq!(
        e.device_kind(),
        Some(ErrorKind::Adb(AdbErrorKind::ServerUnreachable)),
        "{e}"
    );
    assert!(start.elapsed() < Duration::from_millis(OP_MS), "{e}");

    // A server that accepts and never answers: adb_client would wait forever.
    let stalled = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = stalled.local_addr().unwrap().port();
    let held = std::thread::spawn(move || {
        let mut conns = Vec::new();
        stalled.set_nonblocking(true).unwrap();
        let until = Instant::now() + Duration::from_millis(OP_MS + 1000);
        while Instant::now() < until {
            if let Ok((c, _)) = stalled.accept() {
                conns.push(c);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        // Dropping the sockets releases adb_client's blocked thread.
    });
    let spec =
        TargetSpec::parse(&format!("adb:X,server=127.0.0.1:{port},timeout_ms={OP_MS}")).unwrap();
    let start = Instant::now();
    let e = open_with(&spec, &opts()).err().expect("stalled server");
    assert_eq!(
        e.device_kind(),
        Some(ErrorKind::Adb(AdbErrorKind::Timeout)),
        "{e}"
    );
    let elapsed = start.elapsed();
    assert!(
        elapsed >= Duration::from_millis(OP_MS) && elapsed < Duration::from_millis(OP_MS + 1000),
        "{elapsed:?}: {e}"
    );
    held.join().unwrap();
}

#[test]
fn a_missing_or_offline_device() {
    let Some(adb) = adb_or_skip("a_missing_or_offline_device") else {
        return;
    };
    let server = AdbServer::start(adb.clone());
    let bound = Duration::from_millis(OP_MS);

    let spec = TargetSpec::parse(&format!(
        "adb:no-such-device,server={},timeout_ms={OP_MS}",
        server.addr()
    ))
    .unwrap();
    let start = Instant::now();
    let e = open_with(&spec, &opts()).err().expect("missing device");
    assert_eq!(
        e.device_kind(),
        Some(ErrorKind::Adb(AdbErrorKind::DeviceNotFound)),
        "{e}"
    );
    assert!(start.elapsed() < bound);

    // A device that accepts the connection and never completes the adb
    // handshake is listed `offline`.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap().to_string();
    let mut connecting = std::process::Command::new(&adb)
        .args(["-P", &server.port.to_string(), "connect", &addr])
        .env("ANDROID_ADB_SERVER_PORT", server.port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !server
        .ok(&["devices"])
        .contains(&format!("{addr}\toffline"))
    {
        assert!(
            Instant::now() < deadline,
            "the silent device never showed up"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let spec = TargetSpec::parse(&format!(
        "adb:{addr},server={},timeout_ms={OP_MS}",
        server.addr()
    ))
    .unwrap();
    let start = Instant::now();
    let e = open_with(&spec, &opts()).err().expect("offline device");
    assert_eq!(
        e.device_kind(),
        Some(ErrorKind::Adb(AdbErrorKind::DeviceOffline)),
        "{e}"
    );
    assert!(start.elapsed() < bound);
    let _ = connecting.kill();
    let _ = connecting.wait();
    drop(silent);
}

#[test]
fn the_adb_server_killed_mid_run() {
    let Some(adb) = adb_or_skip("the_adb_server_killed_mid_run") else {
        return;
    };
    let host = SimHost::start(common::session_sim_config(), true);
    let server = AdbServer::start(adb);
    server.connect(&host.adbd_addr());
    let spec = format!(
        "adb:{},server={},timeout_ms={OP_MS}",
        host.adbd_addr(),
        server.addr()
    );
    let t = open_spec(&spec);
    let bound = call_bound();
    std::thread::scope(|s| {
        let worker = s.spawn(|| {
            // Calls keep going until the transport gives up.
            let mut calls = 0u64;
            loop {
                let start = Instant::now();
                match call(&t) {
                    Ok(_) => calls += 1,
                    Err(e) => return (e, start.elapsed(), calls),
                }
            }
        });
        std::thread::sleep(Duration::from_millis(300));
        server.kill();
        let (e, elapsed, calls) = worker.join().unwrap();
        assert!(calls > 0, "no call got through before the kill");
        assert_eq!(e.kind, ErrorKind::ConnectionClosed, "{e}");
        assert!(elapsed < bound, "{elapsed:?}");
        // The device log is unavailable too, and the error says why.
        assert!(e.message.contains("adb_server_unreachable"), "{e}");
    });
    // Restarting the Provider needs the probe connection: gone.
    expect_kind(
        ErrorKind::ConnectionClosed,
        Duration::from_millis(100),
        || t.a.restart_provider(cetp_reference::provider::PACKAGE),
    );
    // Reopening meets the dead server.
    let start = Instant::now();
    let e = open_with(&TargetSpec::parse(&spec).unwrap(), &opts())
        .err()
        .expect("server is dead");
    assert_eq!(
        e.device_kind(),
        Some(ErrorKind::Adb(AdbErrorKind::ServerUnreachable)),
        "{e}"
    );
    assert!(start.elapsed() < Duration::from_millis(OP_MS));
}

#[test]
fn the_device_vanishes_mid_call_behind_adb() {
    let Some(adb) = adb_or_skip("the_device_vanishes_mid_call_behind_adb") else {
        return;
    };
    // Mutations take 10 s in the Provider: the call is in flight when the
    // device goes.
    let mut host = SimHost::start(
        cetp_sim::SimConfig {
            effect_delay_ms: 10_000,
            ..common::session_sim_config()
        },
        true,
    );
    let server = AdbServer::start(adb);
    server.connect(&host.adbd_addr());
    let t = open_spec(&format!(
        "adb:{},server={},timeout_ms={OP_MS}",
        host.adbd_addr(),
        server.addr()
    ));
    let token = negotiate(&t);
    std::thread::scope(|s| {
        let worker = s.spawn(|| {
            let start = Instant::now();
            let extras = cetp_proto::Bundle::new()
                .with("protocol_version", cetp_proto::Value::Int(2))
                .with("session_token", cetp_proto::Value::str(token.clone()))
                .with(
                    "request_id",
                    cetp_proto::Value::str("00000000-0000-4000-8000-000000000001"),
                )
                .with(
                    "deadline_at_ms",
                    cetp_proto::Value::Long(t.a.now_ms() + 60_000),
                )
                .with("tool_name", cetp_proto::Value::str("create_alert"))
                .with(
                    "args",
                    cetp_proto::Value::str(r#"{"symbol":"ACME","price":1}"#),
                );
            let r = t.a.call(
                cetp_reference::provider::AUTHORITY,
                "execute_tool",
                None,
                Some(&extras),
                20_000,
            );
            (r, start.elapsed())
        });
        std::thread::sleep(Duration::from_millis(500));
        host.vanish();
        let (r, elapsed) = worker.join().unwrap();
        let e = r.expect_err("the device is gone");
        assert_eq!(e.kind, ErrorKind::ConnectionClosed, "{e}");
        // Far sooner than the 10 s the call would have taken.
        assert!(elapsed < Duration::from_secs(5), "{elapsed:?}");
    });
}

fn negotiate(t: &Target) -> String {
    let extras = cetp_proto::Bundle::new()
        .with("consumer_versions", cetp_proto::Value::IntArray(vec![2]))
        .with("consumer_capabilities", cetp_proto::Value::str("[]"));
    let answer =
        t.a.call(
            cetp_reference::provider::AUTHORITY,
            "negotiate",
            None,
            Some(&extras),
            5_000,
        )
        .unwrap();
    let cetp_proto::device::CallAnswer::Result(Some(b)) = answer else {
        panic!("negotiate: {answer:?}");
    };
    b.get_json("data").unwrap()["session_token"]
        .as_str()
        .unwrap()
        .to_string()
}
