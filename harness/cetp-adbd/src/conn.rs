//! One host connection: packet dispatch, stream table, flow control and the
//! per-stream service tasks.
//!
//! Design: a reader loop owns the stream table and dispatches packets; a
//! writer loop drains a bounded queue of outgoing packets onto the socket;
//! each stream runs in its own task (in a `JoinSet` owned by the reader, so
//! ending the connection aborts them all). The stream table maps our local id
//! to a [`StreamHandle`]; whoever removes a handle from the table (the reader
//! on the host's `CLSE`, or the task when its service ends) sends our `CLSE`,
//! so exactly one is sent. Dropping a handle is the "closed" signal to its
//! task: its inbound channel and its liveness `watch` both close.

use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::io::{AsyncReadExt, AsyncWriteExt, BufWriter};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch, Notify};
use tokio::task::JoinSet;

use crate::packet::{
    read_packet, Packet, ReadError, A_CLSE, A_CNXN, A_OKAY, A_OPEN, A_VERSION, A_WRTE,
    VERSION_SKIP_CHECKSUM,
};
use crate::shell::{builtin_getprop, parse_shell_service, rc_line, split_rc_probe};
use crate::stream::{lock, Outbound, StreamHandle, Streams};
use crate::{banner, AdbdConfig, DeviceServices};

/// Outgoing packets queued per connection (bounded: a host that stops
/// reading stalls us instead of growing memory).
const OUT_QUEUE: usize = 64;
/// `WRTE` payloads queued per stream before the stream task consumes them.
/// A conforming host has at most one unacknowledged `WRTE` per stream; more
/// is a protocol violation and closes the stream.
const INBOUND_QUEUE: usize = 2;
/// Smallest max-payload we accept from a host (real hosts send >= 4096).
const MIN_PAYLOAD: u32 = 256;

/// Why a connection ended.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConnError {
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error("write: {0}")]
    Write(std::io::Error),
    #[error("no CNXN within the handshake timeout")]
    HandshakeTimeout,
    #[error("host max payload {0} is too small")]
    PayloadTooSmall(u32),
    #[error("connection writer ended")]
    WriterGone,
}

/// Negotiated link parameters (after the host's `CNXN`).
#[derive(Clone, Copy)]
struct Link {
    version: u32,
    max_payload: u32,
}

pub(crate) async fn handle_connection(
    sock: TcpStream,
    services: Arc<dyn DeviceServices>,
    config: Arc<AdbdConfig>,
) -> Result<(), ConnError> {
    let (rd, wr) = sock.into_split();
    let (out_tx, out_rx) = mpsc::channel::<Packet>(OUT_QUEUE);
    let reader = read_loop(rd, out_tx, services, config);
    let writer = write_loop(wr, out_rx);
    tokio::select! {
        r = reader => r,
        r = writer => r,
    }
}

async fn write_loop(wr: OwnedWriteHalf, mut rx: mpsc::Receiver<Packet>) -> Result<(), ConnError> {
    let mut w = BufWriter::with_capacity(64 * 1024, wr);
    while let Some(p) = rx.recv().await {
        let mut next = Some(p);
        while let Some(p) = next.take() {
            w.write_all(&p.header_bytes())
                .await
                .map_err(ConnError::Write)?;
            w.write_all(&p.payload).await.map_err(ConnError::Write)?;
            next = rx.try_recv().ok();
        }
        w.flush().await.map_err(ConnError::Write)?;
    }
    Ok(())
}

async fn read_loop(
    mut rd: OwnedReadHalf,
    out: mpsc::Sender<Packet>,
    services: Arc<dyn DeviceServices>,
    config: Arc<AdbdConfig>,
) -> Result<(), ConnError> {
    // One deadline for the whole handshake, so stray pre-CNXN packets
    // (which we ignore) cannot keep a connection alive forever.
    let handshake_deadline = tokio::time::Instant::now() + config.handshake_timeout;
    let mut s = Session {
        streams: Arc::new(Mutex::new(HashMap::new())),
        tasks: JoinSet::new(),
        link: None,
        next_id: 1,
        out,
        services,
        config,
    };
    loop {
        while s.tasks.try_join_next().is_some() {}
        let pkt = s.read(&mut rd, handshake_deadline).await?;
        match pkt.command {
            A_CNXN => s.on_connect(&pkt).await?,
            // Before the handshake (e.g. a stray AUTH) and for commands we do
            // not know (A_SYNC, A_STLS, ...), do what adbd does: ignore.
            _ if s.link.is_none() => {}
            A_OPEN => s.on_open(pkt).await?,
            A_WRTE => s.on_write(pkt).await?,
            A_OKAY => s.on_okay(&pkt),
            A_CLSE => s.on_close(&pkt).await?,
            _ => {}
        }
    }
}

/// The reader's state for one connection: the stream table, the stream
/// tasks, the negotiated link.
struct Session {
    streams: Streams,
    tasks: JoinSet<()>,
    link: Option<Link>,
    next_id: u32,
    out: mpsc::Sender<Packet>,
    services: Arc<dyn DeviceServices>,
    config: Arc<AdbdConfig>,
}

impl Session {
    async fn send(&self, p: Packet) -> Result<(), ConnError> {
        self.out.send(p).await.map_err(|_| ConnError::WriterGone)
    }

    /// The next packet, checksummed as the link (or the host's `CNXN`)
    /// asks; before the handshake, within its deadline.
    async fn read(
        &self,
        rd: &mut OwnedReadHalf,
        handshake_deadline: tokio::time::Instant,
    ) -> Result<Packet, ConnError> {
        let link = self.link;
        let max_in = link.map_or(self.config.max_payload, |l| l.max_payload);
        let verify = |h: &crate::packet::Header| match link {
            Some(l) => l.version < VERSION_SKIP_CHECKSUM,
            None => h.command == A_CNXN && h.arg0 < VERSION_SKIP_CHECKSUM,
        };
        Ok(match link {
            Some(_) => read_packet(rd, max_in, verify).await?,
            None => tokio::time::timeout_at(handshake_deadline, read_packet(rd, max_in, verify))
                .await
                .map_err(|_| ConnError::HandshakeTimeout)??,
        })
    }

    /// The host's `CNXN`: the link is (re)negotiated and answered with our
    /// banner; a second one restarts the session.
    async fn on_connect(&mut self, pkt: &Packet) -> Result<(), ConnError> {
        if pkt.arg1 < MIN_PAYLOAD {
            return Err(ConnError::PayloadTooSmall(pkt.arg1));
        }
        if self.link.is_some() {
            // The host restarted the session: forget every stream.
            lock(&self.streams).clear();
            self.tasks.abort_all();
        }
        let l = Link {
            version: pkt.arg0.clamp(crate::packet::A_VERSION_MIN, A_VERSION),
            max_payload: pkt.arg1.min(self.config.max_payload),
        };
        self.link = Some(l);
        let b = banner(&self.services.properties(), &self.config.features);
        self.send(Packet::new(
            A_CNXN,
            A_VERSION,
            l.max_payload,
            b.into_bytes(),
        ))
        .await
    }

    /// `OPEN`: a stream and its service task, or our `CLSE` when the
    /// service name is not text or the table is full.
    async fn on_open(&mut self, pkt: Packet) -> Result<(), ConnError> {
        let remote = pkt.arg0;
        if remote == 0 {
            return Ok(());
        }
        let full = {
            let map = lock(&self.streams);
            map.len() >= self.config.max_streams
        };
        let service = std::str::from_utf8(&pkt.payload)
            .ok()
            .map(|s| s.trim_end_matches('\0').to_owned());
        let (Some(service), false) = (service, full) else {
            return self.send(Packet::new(A_CLSE, 0, remote, vec![])).await;
        };
        let local = self.free_id();
        let (in_tx, in_rx) = mpsc::channel(INBOUND_QUEUE);
        let okay = Arc::new(Notify::new());
        let (alive_tx, alive_rx) = watch::channel(());
        lock(&self.streams).insert(
            local,
            StreamHandle {
                remote,
                inbound: in_tx,
                okay: okay.clone(),
                _alive: alive_tx,
            },
        );
        let outb = Outbound {
            local,
            remote,
            out: self.out.clone(),
            okay,
            alive: alive_rx,
            max_payload: self.link.map_or(4096, |l| l.max_payload) as usize,
            streams: self.streams.clone(),
        };
        let services = self.services.clone();
        let config = self.config.clone();
        self.tasks.spawn(async move {
            // A panicking service must not leave the host waiting.
            let _ = CatchUnwind(Box::pin(run_stream(
                &outb, in_rx, services, config, service,
            )))
            .await;
            outb.close().await;
        });
        Ok(())
    }

    /// The next local stream id not in use (wrapping past `u32::MAX`).
    fn free_id(&mut self) -> u32 {
        let map = lock(&self.streams);
        loop {
            let id = self.next_id;
            self.next_id = self.next_id.checked_add(1).unwrap_or(1);
            if !map.contains_key(&id) {
                break id;
            }
        }
    }

    /// `WRTE`: the payload to the stream's task; a host that ignored flow
    /// control loses the stream.
    async fn on_write(&mut self, pkt: Packet) -> Result<(), ConnError> {
        let (remote, local) = (pkt.arg0, pkt.arg1);
        let violation = {
            let mut map = lock(&self.streams);
            match map.get(&local) {
                Some(h) if h.remote == remote => match h.inbound.try_send(pkt.payload) {
                    Ok(()) | Err(mpsc::error::TrySendError::Closed(_)) => false,
                    Err(mpsc::error::TrySendError::Full(_)) => {
                        map.remove(&local);
                        true
                    }
                },
                _ => false,
            }
        };
        if violation {
            // The host ignored flow control; drop the stream rather than buffer.
            self.send(Packet::new(A_CLSE, local, remote, vec![]))
                .await?;
        }
        Ok(())
    }

    /// `OKAY`: the stream's task may write again.
    fn on_okay(&self, pkt: &Packet) {
        let (remote, local) = (pkt.arg0, pkt.arg1);
        if let Some(h) = lock(&self.streams).get(&local) {
            if h.remote == remote {
                h.okay.notify_one();
            }
        }
    }

    /// `CLSE`: the stream is removed (which ends its task) and our close
    /// of the pair answers it.
    async fn on_close(&mut self, pkt: &Packet) -> Result<(), ConnError> {
        let (remote, local) = (pkt.arg0, pkt.arg1);
        let removed = {
            let mut map = lock(&self.streams);
            match map.get(&local) {
                Some(h) if h.remote == remote || remote == 0 => map.remove(&local),
                _ => None,
            }
        };
        if let Some(h) = removed {
            // adbd answers a close with its own close of the pair.
            self.send(Packet::new(A_CLSE, local, h.remote, vec![]))
                .await?;
        }
        Ok(())
    }
}

/// What an `OPEN`'s service name asks for.
enum Service {
    Shell(String),
    Socket(String),
    Sync,
    Refused,
}

fn classify(service: &str) -> Service {
    if let Some(req) = parse_shell_service(service) {
        // Interactive shells and the v2 shell protocol are not implemented;
        // we never advertise `shell_v2`, so a conforming host never asks for v2.
        if req.command.trim().is_empty() || req.args.iter().any(|a| a == "v2") {
            return Service::Refused;
        }
        return Service::Shell(req.command);
    }
    if service == "sync:" {
        return Service::Sync;
    }
    const SOCKET_PREFIXES: [&str; 4] = [
        "localabstract:",
        "localreserved:",
        "localfilesystem:",
        "tcp:",
    ];
    if SOCKET_PREFIXES
        .iter()
        .any(|p| service.strip_prefix(p).is_some_and(|rest| !rest.is_empty()))
    {
        return Service::Socket(service.to_owned());
    }
    // exec: (we do not advertise `cmd`), reboot:, remount:, jdwp:, ... are refused.
    Service::Refused
}

async fn run_stream(
    outb: &Outbound,
    inbound: mpsc::Receiver<Vec<u8>>,
    services: Arc<dyn DeviceServices>,
    config: Arc<AdbdConfig>,
    service: String,
) {
    match classify(&service) {
        Service::Refused => outb.refuse().await,
        Service::Shell(cmd) => run_shell(outb, inbound, services, cmd).await,
        Service::Sync => crate::sync::run_sync(outb, inbound, services, config).await,
        Service::Socket(name) => run_socket(outb, inbound, services, name).await,
    }
}

/// Acknowledge and discard host input until the host closes the stream.
/// (A v1 shell's stdin goes nowhere here, but the host must not stall.)
async fn drain(outb: &Outbound, mut inbound: mpsc::Receiver<Vec<u8>>) {
    while inbound.recv().await.is_some() {
        if outb.ack().await.is_err() {
            break;
        }
    }
}

async fn run_shell(
    outb: &Outbound,
    inbound: mpsc::Receiver<Vec<u8>>,
    services: Arc<dyn DeviceServices>,
    cmd: String,
) {
    if outb.ready().await.is_err() {
        return;
    }
    let work = async {
        let output = shell_output(&*services, &cmd).await;
        if !output.is_empty() {
            let _ = outb.write(&output).await;
        }
    };
    tokio::select! {
        _ = work => {}
        _ = drain(outb, inbound) => {}
    }
}

/// The bytes a v1 shell would print for `cmd`, including the emulated
/// `echo __rc=$?`.
pub(crate) async fn shell_output(services: &dyn DeviceServices, cmd: &str) -> Vec<u8> {
    let (body, probe) = match split_rc_probe(cmd) {
        Some(body) => (body, true),
        None => (cmd, false),
    };
    let result = if body.trim().is_empty() {
        crate::ShellOutput::ok(Vec::new())
    } else if let Some(out) = builtin_getprop(body.trim(), || services.properties()) {
        crate::ShellOutput::ok(out)
    } else {
        services.shell(body).await
    };
    let mut bytes = result.stdout;
    if probe {
        bytes.extend_from_slice(rc_line(result.exit_code).as_bytes());
    }
    bytes
}

async fn run_socket(
    outb: &Outbound,
    mut inbound: mpsc::Receiver<Vec<u8>>,
    services: Arc<dyn DeviceServices>,
    name: String,
) {
    let opened = tokio::select! {
        r = services.open_stream(&name) => r,
        _ = outb.closed() => return,
    };
    let stream = match opened {
        Ok(s) => s,
        Err(_reason) => return outb.refuse().await,
    };
    if outb.ready().await.is_err() {
        return;
    }
    let (mut rd, mut wr) = tokio::io::split(stream);
    let to_service = async {
        while let Some(data) = inbound.recv().await {
            if wr.write_all(&data).await.is_err() || wr.flush().await.is_err() {
                return;
            }
            // OKAY only once the service took the bytes: that is the backpressure.
            if outb.ack().await.is_err() {
                return;
            }
        }
    };
    let from_service = async {
        let mut buf = vec![0u8; outb.max_payload];
        loop {
            match rd.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if outb.write(&buf[..n]).await.is_err() {
                        return;
                    }
                }
            }
        }
    };
    tokio::select! {
        _ = to_service => {}
        _ = from_service => {}
    }
}

/// Turns a panic inside a stream task into an ordinary completion, so the
/// task can still close its stream (without the `futures` crate).
struct CatchUnwind<F>(Pin<Box<F>>);

impl<F: Future> Future for CatchUnwind<F> {
    type Output = Result<F::Output, ()>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let fut = self.0.as_mut();
        match std::panic::catch_unwind(AssertUnwindSafe(|| fut.poll(cx))) {
            Ok(Poll::Ready(v)) => Poll::Ready(Ok(v)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(_) => Poll::Ready(Err(())),
        }
    }
}
