//! Drives the endpoint with hand-made packets, including hostile ones, to
//! check the bounds that the real adb server never exercises.

mod common;

use std::sync::Arc;
use std::time::Duration;

use cetp_adbd::packet::{
    read_packet, Packet, A_CLSE, A_CNXN, A_OKAY, A_OPEN, A_VERSION, A_VERSION_MIN, A_WRTE,
};
use cetp_adbd::{serve, AdbdConfig};
use common::TestDevice;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const WAIT: Duration = Duration::from_secs(5);

async fn start(
    config: AdbdConfig,
) -> (
    u16,
    TestDevice,
    tokio::task::JoinHandle<std::io::Result<()>>,
) {
    let device = TestDevice::default();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let task = tokio::spawn(serve(listener, Arc::new(device.clone()), config));
    (port, device, task)
}

struct Host {
    sock: TcpStream,
}

impl Host {
    async fn connect(port: u16) -> Host {
        Host {
            sock: TcpStream::connect(("127.0.0.1", port)).await.unwrap(),
        }
    }

    async fn send(&mut self, p: Packet) {
        self.sock.write_all(&p.encode()).await.unwrap();
    }

    /// Next packet, or None if the endpoint closed the connection.
    async fn recv(&mut self) -> Option<Packet> {
        tokio::time::timeout(WAIT, read_packet(&mut self.sock, 1 << 20, |_| true))
            .await
            .expect("endpoint went silent")
            .ok()
    }

    /// Whether a packet arrives within `d`.
    async fn quiet_for(&mut self, d: Duration) -> bool {
        tokio::time::timeout(d, read_packet(&mut self.sock, 1 << 20, |_| true))
            .await
            .is_err()
    }

    async fn handshake(port: u16) -> (Host, Packet) {
        let mut h = Host::connect(port).await;
        h.send(Packet::new(
            A_CNXN,
            A_VERSION,
            1 << 20,
            b"host::features=shell_v2,cmd\0".to_vec(),
        ))
        .await;
        let reply = h.recv().await.expect("no CNXN reply");
        (h, reply)
    }

    /// OPEN `service` as host stream `remote`; returns the OKAY or CLSE.
    async fn open(&mut self, remote: u32, service: &str) -> Packet {
        let mut name = service.as_bytes().to_vec();
        name.push(0);
        self.send(Packet::new(A_OPEN, remote, 0, name)).await;
        self.recv().await.expect("connection closed on OPEN")
    }

    /// Read until EOF; the connection must close within the wait.
    async fn expect_eof(&mut self) {
        let mut buf = [0u8; 4096];
        loop {
            match tokio::time::timeout(WAIT, self.sock.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) => return,
                Ok(Ok(_)) => continue,
                Err(_) => panic!("connection not closed"),
            }
        }
    }
}

#[tokio::test]
async fn handshake_banner_and_limits() {
    let (port, _dev, _t) = start(AdbdConfig::default()).await;
    let (_h, reply) = Host::handshake(port).await;
    assert_eq!(reply.command, A_CNXN);
    assert_eq!(reply.arg0, A_VERSION);
    assert_eq!(
        reply.arg1,
        256 * 1024,
        "max payload is min(host 1 MiB, cap 256 KiB)"
    );
    let banner = String::from_utf8(reply.payload).unwrap();
    assert!(
        banner.starts_with("device::ro.product.name=cetp_sim;ro.product.model=CETP Simulator;ro.product.device=cetpsim;features="),
        "{banner}"
    );
    assert!(
        !banner.contains("shell_v2") && !banner.contains("cmd"),
        "{banner}"
    );

    // A host with a smaller max payload gets that back.
    let mut h = Host::connect(port).await;
    h.send(Packet::new(A_CNXN, A_VERSION, 4096, b"host::\0".to_vec()))
        .await;
    assert_eq!(h.recv().await.unwrap().arg1, 4096);
}

#[tokio::test]
async fn malformed_input_ends_only_that_connection() {
    let (port, _dev, _t) = start(AdbdConfig::default()).await;

    // Bad magic before the handshake.
    let mut h = Host::connect(port).await;
    let mut bytes = Packet::new(A_CNXN, A_VERSION, 1 << 20, b"host::\0".to_vec()).encode();
    bytes[20] ^= 0xff;
    h.sock.write_all(&bytes).await.unwrap();
    h.expect_eof().await;

    // Garbage.
    let mut h = Host::connect(port).await;
    h.sock.write_all(&[0x41; 100]).await.unwrap();
    h.expect_eof().await;

    // A payload larger than what we advertised, after the handshake.
    let (mut h, _) = Host::handshake(port).await;
    let (mut other, _) = Host::handshake(port).await;
    let mut hdr = Packet::new(A_WRTE, 1, 1, vec![]).encode();
    hdr[12..16].copy_from_slice(&(256 * 1024 + 1u32).to_le_bytes());
    h.sock.write_all(&hdr).await.unwrap();
    h.expect_eof().await;

    // Truncated packet then EOF.
    let mut t = Host::connect(port).await;
    t.sock
        .write_all(&Packet::new(A_CNXN, A_VERSION, 1 << 20, b"host::".to_vec()).encode()[..30])
        .await
        .unwrap();
    t.sock.shutdown().await.unwrap();
    t.expect_eof().await;

    // A host max payload too small to make progress.
    let mut t = Host::connect(port).await;
    t.send(Packet::new(A_CNXN, A_VERSION, 0, b"host::\0".to_vec()))
        .await;
    t.expect_eof().await;

    // The other connection is unaffected.
    let okay = other.open(5, "shell:echo still here").await;
    assert_eq!(okay.command, A_OKAY);
    let data = other.recv().await.unwrap();
    assert_eq!(
        (data.command, data.payload.as_slice()),
        (A_WRTE, &b"still here\n"[..])
    );
}

#[tokio::test]
async fn old_protocol_versions_have_checksums_verified() {
    let (port, _dev, _t) = start(AdbdConfig::default()).await;
    let (mut h, reply) = {
        let mut h = Host::connect(port).await;
        h.send(Packet::new(
            A_CNXN,
            A_VERSION_MIN,
            4096,
            b"host::\0".to_vec(),
        ))
        .await;
        let r = h.recv().await.unwrap();
        (h, r)
    };
    assert_eq!(reply.command, A_CNXN);
    // A correct checksum works.
    assert_eq!(h.open(3, "shell:echo ok").await.command, A_OKAY);
    // A wrong one ends the connection.
    let mut bytes = Packet::new(A_OPEN, 4, 0, b"shell:echo x\0".to_vec()).encode();
    bytes[16] ^= 1;
    h.sock.write_all(&bytes).await.unwrap();
    h.expect_eof().await;
}

#[tokio::test]
async fn silent_connections_time_out() {
    let (port, _dev, _t) = start(AdbdConfig {
        handshake_timeout: Duration::from_millis(200),
        ..AdbdConfig::default()
    })
    .await;
    let mut h = Host::connect(port).await;
    h.expect_eof().await;
    // Packets other than CNXN do not extend the deadline.
    let mut h = Host::connect(port).await;
    let start = std::time::Instant::now();
    let mut closed = false;
    for _ in 0..20 {
        if h.sock
            .write_all(&Packet::new(cetp_adbd::packet::A_AUTH, 1, 0, vec![0; 20]).encode())
            .await
            .is_err()
        {
            closed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    if !closed {
        h.expect_eof().await;
    }
    assert!(start.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn shell_stream_lifecycle() {
    let (port, dev, _t) = start(AdbdConfig::default()).await;
    let (mut h, _) = Host::handshake(port).await;

    let okay = h.open(7, "shell:echo hi; echo __rc=$?").await;
    assert_eq!((okay.command, okay.arg1), (A_OKAY, 7));
    let local = okay.arg0;
    assert_ne!(local, 0);
    let w = h.recv().await.unwrap();
    assert_eq!((w.command, w.arg0, w.arg1), (A_WRTE, local, 7));
    assert_eq!(w.payload, b"hi\n__rc=0\n");
    h.send(Packet::new(A_OKAY, 7, local, vec![])).await;
    let c = h.recv().await.unwrap();
    assert_eq!((c.command, c.arg0, c.arg1), (A_CLSE, local, 7));
    assert_eq!(dev.state().shell_log, ["echo hi"]);

    // A large output is split into WRTEs of at most the negotiated payload,
    // and the next is sent only after our OKAY.
    let (mut h, _) = {
        let mut h = Host::connect(port).await;
        h.send(Packet::new(A_CNXN, A_VERSION, 4096, b"host::\0".to_vec()))
            .await;
        let r = h.recv().await.unwrap();
        (h, r)
    };
    let long = "x".repeat(10_000);
    let okay = h.open(9, "shell:repeat 10000").await;
    let local = okay.arg0;
    let mut got = Vec::new();
    loop {
        let p = h.recv().await.unwrap();
        if p.command == A_CLSE {
            break;
        }
        assert_eq!(p.command, A_WRTE);
        assert!(p.payload.len() <= 4096);
        got.extend_from_slice(&p.payload);
        assert!(
            h.quiet_for(Duration::from_millis(50)).await,
            "sent a WRTE before our OKAY"
        );
        h.send(Packet::new(A_OKAY, 9, local, vec![])).await;
    }
    assert_eq!(got, format!("{long}\n").into_bytes());
}

#[tokio::test]
async fn refused_services_get_clse_with_zero_id() {
    let (port, _dev, _t) = start(AdbdConfig::default()).await;
    let (mut h, _) = Host::handshake(port).await;
    for (i, svc) in [
        "exec:ls",
        "shell:",
        "shell,v2,raw:ls",
        "reboot:",
        "frobnicate",
        "localabstract:nope",
        "localabstract:",
    ]
    .iter()
    .enumerate()
    {
        let remote = 100 + i as u32;
        let p = h.open(remote, svc).await;
        assert_eq!((p.command, p.arg0, p.arg1), (A_CLSE, 0, remote), "{svc}");
    }
    // Non-UTF-8 service name.
    h.send(Packet::new(A_OPEN, 200, 0, vec![0xff, 0xfe, 0]))
        .await;
    let p = h.recv().await.unwrap();
    assert_eq!((p.command, p.arg0, p.arg1), (A_CLSE, 0, 200));
    // A service that panics still closes its stream.
    let okay = h.open(201, "shell:panic").await;
    assert_eq!(okay.command, A_OKAY);
    let p = h.recv().await.unwrap();
    assert_eq!((p.command, p.arg0, p.arg1), (A_CLSE, okay.arg0, 201));
    // And the connection still works.
    assert_eq!(h.open(202, "shell:echo x").await.command, A_OKAY);
}

#[tokio::test]
async fn stream_count_is_capped() {
    let (port, _dev, _t) = start(AdbdConfig {
        max_streams: 4,
        ..AdbdConfig::default()
    })
    .await;
    let (mut h, _) = Host::handshake(port).await;
    let mut locals = Vec::new();
    for r in 1..=4 {
        let p = h.open(r, "localabstract:echo").await;
        assert_eq!(p.command, A_OKAY);
        locals.push(p.arg0);
    }
    let p = h.open(5, "localabstract:echo").await;
    assert_eq!((p.command, p.arg0, p.arg1), (A_CLSE, 0, 5));
    // Closing one frees a slot; we echo the close as adbd does.
    h.send(Packet::new(A_CLSE, 1, locals[0], vec![])).await;
    let p = h.recv().await.unwrap();
    assert_eq!((p.command, p.arg0, p.arg1), (A_CLSE, locals[0], 1));
    assert_eq!(h.open(6, "localabstract:echo").await.command, A_OKAY);
}

#[tokio::test]
async fn echo_stream_and_backpressure() {
    let (port, _dev, _t) = start(AdbdConfig::default()).await;
    let (mut h, _) = Host::handshake(port).await;

    // Echo: our WRTE is acknowledged and echoed.
    let local = h.open(1, "localabstract:echo").await.arg0;
    h.send(Packet::new(A_WRTE, 1, local, b"ping".to_vec()))
        .await;
    let mut saw_okay = false;
    let mut echoed = Vec::new();
    while !(saw_okay && echoed == b"ping") {
        let p = h.recv().await.unwrap();
        match p.command {
            A_OKAY => saw_okay = true,
            A_WRTE => {
                echoed.extend_from_slice(&p.payload);
                h.send(Packet::new(A_OKAY, 1, local, vec![])).await;
            }
            c => panic!("unexpected {c:#x}"),
        }
    }

    // A service that stops reading: the OKAY is withheld...
    let sink = h.open(2, "localabstract:sink").await.arg0;
    h.send(Packet::new(A_WRTE, 2, sink, vec![7; 1000])).await;
    assert!(
        h.quiet_for(Duration::from_millis(300)).await,
        "OKAY sent for data the service did not take"
    );
    // ...and a host that ignores flow control loses the stream instead of
    // making us buffer without bound.
    for _ in 0..4 {
        h.send(Packet::new(A_WRTE, 2, sink, vec![7; 1000])).await;
    }
    let p = h.recv().await.unwrap();
    assert_eq!((p.command, p.arg0, p.arg1), (A_CLSE, sink, 2));
    // WRTE to the closed stream, or to ids that never existed, is ignored.
    h.send(Packet::new(A_WRTE, 2, sink, vec![1])).await;
    h.send(Packet::new(A_WRTE, 99, 12345, vec![1])).await;
    h.send(Packet::new(A_OKAY, 99, 12345, vec![])).await;
    h.send(Packet::new(A_CLSE, 99, 12345, vec![])).await;
    assert!(h.quiet_for(Duration::from_millis(200)).await);
    assert_eq!(h.open(3, "shell:echo alive").await.command, A_OKAY);
}

#[tokio::test]
async fn sync_push_limits() {
    let (port, dev, _t) = start(AdbdConfig {
        max_push_bytes: 10,
        ..AdbdConfig::default()
    })
    .await;
    let (mut h, _) = Host::handshake(port).await;
    let local = h.open(1, "sync:").await.arg0;
    let mut req = Vec::new();
    let add = |req: &mut Vec<u8>, id: &[u8], len: u32, body: &[u8]| {
        req.extend_from_slice(id);
        req.extend_from_slice(&len.to_le_bytes());
        req.extend_from_slice(body);
    };
    let spec = b"/data/local/tmp/small,33188";
    add(&mut req, b"SEND", spec.len() as u32, spec);
    add(&mut req, b"DATA", 5, b"hello");
    add(&mut req, b"DONE", 0, b"");
    let spec = b"/data/local/tmp/big,33188";
    add(&mut req, b"SEND", spec.len() as u32, spec);
    add(&mut req, b"DATA", 20, &[1; 20]);
    add(&mut req, b"DONE", 0, b"");
    add(&mut req, b"STAT", 15, b"/data/local/tmp");
    // Deliver in awkward pieces: requests straddle WRTEs.
    let mut replies = Vec::new();
    for piece in req.chunks(7) {
        h.send(Packet::new(A_WRTE, 1, local, piece.to_vec())).await;
        loop {
            let p = h.recv().await.unwrap();
            if p.command == A_OKAY {
                break;
            }
            assert_eq!(p.command, A_WRTE);
            replies.extend_from_slice(&p.payload);
            h.send(Packet::new(A_OKAY, 1, local, vec![])).await;
        }
    }
    assert_eq!(&replies[..8], b"OKAY\0\0\0\0");
    assert_eq!(&replies[8..12], b"FAIL");
    let n = u32::from_le_bytes(replies[12..16].try_into().unwrap()) as usize;
    assert!(String::from_utf8_lossy(&replies[16..16 + n]).contains("too large"));
    let stat = &replies[16 + n..];
    assert_eq!(&stat[..4], b"STAT");
    assert_eq!(
        u32::from_le_bytes(stat[4..8].try_into().unwrap()) & 0o170000,
        0o040000
    );
    assert_eq!(stat.len(), 16);
    let pushed = &dev.state().pushed;
    assert_eq!(pushed.len(), 1);
    assert_eq!(
        (pushed[0].0.as_str(), pushed[0].1, pushed[0].2.as_slice()),
        ("/data/local/tmp/small", 33188, &b"hello"[..])
    );
}
