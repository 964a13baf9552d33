//! The probe-wire client against small scripted peers.

use cetp_proto::device::CallAnswer;
use cetp_proto::{Bundle, Value};
use cetp_transport::{ClientConfig, Direction, ProbeClient, TransportError};
use cetp_wire::{
    decode_frame, encode_frame, AsyncFrameReader, CallOk, ErrorKind, Frame, Map, OkPayload,
    ReadFdOk, Request, WireError,
};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncWriteExt, BufReader, DuplexStream, ReadHalf, WriteHalf};

type Lines = AsyncFrameReader<BufReader<ReadHalf<DuplexStream>>>;

/// A scripted device: the test reads requests and writes whatever it likes.
struct Peer {
    r: Lines,
    w: WriteHalf<DuplexStream>,
}

impl Peer {
    async fn request(&mut self) -> Request {
        match self
            .r
            .read_frame()
            .await
            .expect("a frame")
            .expect("not EOF")
        {
            Frame::Request(r) => r,
            other => panic!("peer got {other:?}"),
        }
    }

    async fn send(&mut self, f: &Frame) {
        self.w.write_all(&encode_frame(f)).await.unwrap();
    }

    async fn raw(&mut self, bytes: &[u8]) {
        self.w.write_all(bytes).await.unwrap();
    }
}

fn pair(cfg: ClientConfig) -> (ProbeClient, Peer) {
    let (host, dev) = tokio::io::duplex(1 << 20);
    let (r, w) = tokio::io::split(dev);
    let client = ProbeClient::connect(host, cfg);
    (
        client,
        Peer {
            r: AsyncFrameReader::new(BufReader::new(r)),
            w,
        },
    )
}

fn call_ok(s: &str) -> Map {
    CallOk {
        result: Some(Bundle::new().with("v", Value::str(s))),
        elapsed_us: 7,
    }
    .to_ok()
}

#[tokio::test]
async fn pipelined_calls_get_their_own_answers_out_of_order() {
    let (client, mut peer) = pair(ClientConfig::default());
    let client = Arc::new(client);
    let c1 = client.clone();
    let c2 = client.clone();
    let first = tokio::spawn(async move { c1.call("auth", "one", None, None, 1000).await });
    let r1 = peer.request().await;
    let second = tokio::spawn(async move { c2.call("auth", "two", None, None, 1000).await });
    let r2 = peer.request().await;
    assert_ne!(r1.id, r2.id);
    // Answer the second first.
    for r in [&r2, &r1] {
        let method = r.params["method"].as_str().unwrap().to_string();
        peer.send(&Frame::ok(r.id, call_ok(&method))).await;
    }
    let want = |s: &str| CallAnswer::Result(Some(Bundle::new().with("v", Value::str(s))));
    assert_eq!(first.await.unwrap().unwrap(), want("one"));
    assert_eq!(second.await.unwrap().unwrap(), want("two"));
}

#[tokio::test]
async fn provider_exception_is_an_answer_and_other_errors_are_typed() {
    let (client, mut peer) = pair(ClientConfig::default());
    let client = Arc::new(client);
    let c = client.clone();
    let t = tokio::spawn(async move { c.call("auth", "m", None, None, 1000).await });
    let r = peer.request().await;
    peer.send(&Frame::error(
        r.id,
        WireError::provider_exception("java.lang.SecurityException", "denied"),
    ))
    .await;
    assert_eq!(
        t.await.unwrap().unwrap(),
        CallAnswer::Threw {
            class: "java.lang.SecurityException".into(),
            message: "denied".into()
        }
    );
    for kind in [
        ErrorKind::ProviderDied,
        ErrorKind::TransactionTooLarge,
        ErrorKind::UnknownAuthority,
        ErrorKind::Timeout,
    ] {
        let c = client.clone();
        let t = tokio::spawn(async move { c.call("auth", "m", None, None, 1000).await });
        let r = peer.request().await;
        peer.send(&Frame::error(r.id, WireError::new(kind.clone(), "x")))
            .await;
        let e = t.await.unwrap().unwrap_err();
        assert_eq!(e.kind(), kind);
    }
    let c = client.clone();
    let t = tokio::spawn(async move { c.close_fd("fd-9").await });
    let r = peer.request().await;
    assert_eq!(r.op, "close_fd");
    peer.send(&Frame::error(
        r.id,
        WireError::new(ErrorKind::UnknownHandle, "no"),
    ))
    .await;
    assert_eq!(
        t.await.unwrap().unwrap_err().kind(),
        ErrorKind::UnknownHandle
    );
}

#[tokio::test]
async fn read_fd_collects_chunks_and_checks_them() {
    let (client, mut peer) = pair(ClientConfig::default());
    let client = Arc::new(client);
    let data: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8).collect();

    let c = client.clone();
    let t = tokio::spawn(async move { c.read_fd("fd-1", 10_000).await });
    let r = peer.request().await;
    assert_eq!(r.params["max_bytes"].as_u64(), Some(10_000));
    for part in data.chunks(1000) {
        peer.send(&Frame::chunk(r.id, part.to_vec())).await;
    }
    let ok = ReadFdOk {
        bytes: data.len() as u64,
        sha256: cetp_proto::canonical::sha256_hex(&data),
        eof: true,
        error: None,
        writable: None,
    };
    peer.send(&ok.to_frame(r.id)).await;
    let got = t.await.unwrap().unwrap();
    assert_eq!(got.bytes, data);
    assert!(got.eof);

    // A hash that does not match the bytes is the device's fault.
    let c = client.clone();
    let t = tokio::spawn(async move { c.read_fd("fd-2", 10_000).await });
    let r = peer.request().await;
    peer.send(&Frame::chunk(r.id, b"abc".to_vec())).await;
    let bad = ReadFdOk {
        bytes: 3,
        sha256: "00".repeat(32),
        eof: true,
        error: None,
        writable: None,
    };
    peer.send(&bad.to_frame(r.id)).await;
    assert_eq!(t.await.unwrap().unwrap_err().kind(), ErrorKind::BadFrame);
}

#[tokio::test]
async fn chunks_beyond_max_bytes_stop_the_read_and_the_connection() {
    let (client, mut peer) = pair(ClientConfig::default());
    let client = Arc::new(client);
    let c = client.clone();
    let t = tokio::spawn(async move { c.read_fd("fd-1", 10).await });
    let c = client.clone();
    let other = tokio::spawn(async move { c.call("a", "m", None, None, 60_000).await });
    let r = peer.request().await;
    peer.request().await;
    // One chunk of slack is allowed (max_bytes + 1 MiB), then the read fails.
    let big = vec![7u8; 600 * 1024];
    for _ in 0..2 {
        peer.send(&Frame::chunk(r.id, big.clone())).await;
    }
    let e = t.await.unwrap().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::BadFrame, "{e}");
    assert!(e.to_string().contains("more than 1048586 bytes"), "{e}");
    let e = other.await.unwrap().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ConnectionClosed, "{e}");
    assert!(client.is_closed());
}

#[tokio::test]
async fn a_chunk_over_one_mib_is_refused() {
    let (client, mut peer) = pair(ClientConfig::default());
    let client = Arc::new(client);
    let c = client.clone();
    let t = tokio::spawn(async move { c.read_fd("fd-1", 64 << 20).await });
    let r = peer.request().await;
    peer.send(&Frame::chunk(r.id, vec![1u8; (1 << 20) + 1]))
        .await;
    let e = t.await.unwrap().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::BadFrame, "{e}");
    assert!(client.is_closed());
}

#[tokio::test]
async fn late_and_unknown_answers_are_counted_and_dropped() {
    let (client, mut peer) = pair(ClientConfig::default());
    let client = Arc::new(client);
    peer.send(&Frame::ok(99, Map::new())).await;
    peer.send(&Frame::chunk(98, b"x".to_vec())).await;
    let c = client.clone();
    let t = tokio::spawn(async move { c.restart_provider("com.x").await });
    let r = peer.request().await;
    peer.send(&Frame::ok(r.id, Map::new())).await;
    t.await.unwrap().unwrap();
    assert_eq!(client.stats().unmatched_frames, 2);
    assert!(!client.is_closed());
}

#[tokio::test]
async fn a_closed_stream_fails_every_pending_request_at_once() {
    let (client, mut peer) = pair(ClientConfig::default());
    let client = Arc::new(client);
    let mut tasks = Vec::new();
    for _ in 0..3 {
        let c = client.clone();
        tasks.push(tokio::spawn(async move {
            c.call("a", "m", None, None, 60_000).await
        }));
        peer.request().await;
    }
    let start = Instant::now();
    drop(peer);
    for t in tasks {
        let e = t.await.unwrap().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ConnectionClosed, "{e}");
    }
    assert!(start.elapsed() < Duration::from_secs(2));
    assert!(client.is_closed());
    let e = client.hello().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ConnectionClosed);
}

#[tokio::test]
async fn undecodable_lines() {
    // With the id of a pending request: that request fails, the rest go on.
    let (client, mut peer) = pair(ClientConfig::default());
    let client = Arc::new(client);
    let c = client.clone();
    let t = tokio::spawn(async move { c.hello().await });
    let r = peer.request().await;
    peer.raw(format!("{{\"id\":{},\"ok\":5}}\n", r.id).as_bytes())
        .await;
    assert_eq!(t.await.unwrap().unwrap_err().kind(), ErrorKind::BadFrame);
    assert!(!client.is_closed());

    // Without an id: the stream cannot be trusted any more.
    let c = client.clone();
    let t = tokio::spawn(async move { c.discover().await });
    peer.request().await;
    peer.raw(b"\x00\xffgarbage\n").await;
    assert_eq!(t.await.unwrap().unwrap_err().kind(), ErrorKind::BadFrame);
    assert!(client.is_closed());
    assert_eq!(client.stats().bad_frames, 2);
}

#[tokio::test]
async fn a_wrong_answer_shape_is_a_bad_frame() {
    let (client, mut peer) = pair(ClientConfig::default());
    let client = Arc::new(client);
    let c = client.clone();
    let t = tokio::spawn(async move { c.hello().await });
    let r = peer.request().await;
    peer.send(&Frame::ok(r.id, Map::new())).await;
    let e = t.await.unwrap().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::BadFrame);
    assert!(e.to_string().contains("hello"), "{e}");
}

#[tokio::test(start_paused = true)]
async fn silence_is_a_timeout_and_late_answers_are_dropped() {
    let cfg = ClientConfig {
        call_margin: Duration::from_millis(100),
        ..ClientConfig::default()
    };
    let (client, mut peer) = pair(cfg);
    let client = Arc::new(client);
    let c = client.clone();
    let t = tokio::spawn(async move { c.call("a", "m", None, None, 500).await });
    let r = peer.request().await;
    let e = t.await.unwrap().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Timeout);
    assert!(e.to_string().contains("600 ms"), "{e}");
    peer.send(&Frame::ok(r.id, call_ok("late"))).await;
    // The connection is still usable.
    let c = client.clone();
    let t = tokio::spawn(async move { c.call("a", "m", None, None, 500).await });
    let r = peer.request().await;
    peer.send(&Frame::ok(r.id, call_ok("x"))).await;
    t.await.unwrap().unwrap();
    assert_eq!(client.stats().unmatched_frames, 1);
}

#[tokio::test]
async fn events_are_delivered_or_counted_as_dropped() {
    let (client, mut peer) = pair(ClientConfig {
        event_capacity: 2,
        ..ClientConfig::default()
    });
    let ev = |n: u64| {
        let mut m = Map::new();
        m.insert("n".into(), n.into());
        Frame::event("tick", m)
    };
    let client = Arc::new(client);
    // A request round trip orders the events before what follows.
    async fn sync(client: &Arc<ProbeClient>, peer: &mut Peer) {
        let c = client.clone();
        let t = tokio::spawn(async move { c.close_fd("fd-1").await });
        let r = peer.request().await;
        peer.send(&Frame::ok(r.id, Map::new())).await;
        t.await.unwrap().unwrap();
    }
    // Nobody reads yet: dropped.
    peer.send(&ev(0)).await;
    sync(&client, &mut peer).await;
    let mut events = client.take_events().expect("first take");
    assert!(client.take_events().is_none());
    for n in 1..=4 {
        peer.send(&ev(n)).await;
    }
    sync(&client, &mut peer).await;
    let first = events.recv().await.unwrap();
    assert_eq!(first.event, "tick");
    assert_eq!(first.fields["n"].as_u64(), Some(1));
    assert_eq!(events.recv().await.unwrap().fields["n"].as_u64(), Some(2));
    let s = client.stats();
    assert_eq!(s.events_received, 5);
    assert_eq!(s.events_dropped, 3);
}

#[tokio::test]
async fn the_tap_sees_every_frame_in_both_directions() {
    type Seen = Vec<(Direction, Vec<u8>)>;
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let s2 = seen.clone();
    let (client, mut peer) = pair(ClientConfig {
        tap: Some(Arc::new(move |d, b: &[u8]| {
            s2.lock().unwrap().push((d, b.to_vec()))
        })),
        ..ClientConfig::default()
    });
    let client = Arc::new(client);
    let c = client.clone();
    let t = tokio::spawn(async move { c.restart_provider("com.x").await });
    let r = peer.request().await;
    peer.raw(b"not a frame at all but has an id? no\n").await;
    let _ = t.await;
    let _ = r;
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].0, Direction::Sent);
    assert!(decode_frame(&seen[0].1).is_ok());
    assert!(!seen[0].1.ends_with(b"\n"));
    assert_eq!(seen[1].0, Direction::Received);
    assert_eq!(seen[1].1, b"not a frame at all but has an id? no".to_vec());
}

#[tokio::test]
async fn oversized_frames() {
    let (client, mut peer) = pair(ClientConfig {
        max_frame_bytes: 4096,
        ..ClientConfig::default()
    });
    let client = Arc::new(client);
    // Refused before sending: the request would be too large for the peer.
    let big = Bundle::new().with("x", Value::str("y".repeat(5000)));
    let e = client
        .call("a", "m", None, Some(&big), 1000)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::FrameTooLarge);
    assert!(!client.is_closed());
    // Received: the connection closes.
    let c = client.clone();
    let t = tokio::spawn(async move { c.hello().await });
    peer.request().await;
    peer.raw(&vec![b'x'; 10_000]).await;
    let e = t.await.unwrap().unwrap_err();
    assert!(
        matches!(e, TransportError::FrameTooLarge { limit: 4096 }),
        "{e}"
    );
    assert!(client.is_closed());
}
