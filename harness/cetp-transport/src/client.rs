//! A probe-wire client over any byte stream.
//!
//! One reader task and one writer task own the two halves of the stream.
//! Requests are pipelined: each gets an id from the client and waits on a
//! oneshot for its final frame, so several threads can have calls in flight
//! on one connection (the device must run outstanding `call`s concurrently).
//!
//! Everything the device sends is untrusted: a frame is bounded by the frame
//! reader, the bytes of `read_fd` chunks by the request's `max_bytes` (plus
//! one chunk) and each chunk by probe-wire's 1 MiB, queued events by a byte
//! budget, and every wait by a timeout. A device that sends more chunk bytes
//! than asked for is not read any further: that request fails with
//! `bad_frame` and the connection closes. A broken stream fails every
//! pending request at once.

use crate::error::TransportError;
use base64::Engine as _;
use cetp_proto::device::{CallAnswer, FdRead};
use cetp_proto::provider::{Decision, ResolveOutcome, ServiceManifest};
use cetp_proto::Bundle;
use cetp_wire::ops::{CallParams, ReadFdParams, ResolveParams};
use cetp_wire::{
    decode_frame, encode_frame, request_id_hint, AsyncFrameReader, CallOk, DiscoverOk, ErrorKind,
    Event, Final, Frame, HelloOk, Json, Map, OkPayload, OpRequest, ReadError, ReadFdOk, ResolveOk,
    WireError, MAX_CHUNK_BYTES, MAX_FRAME_BYTES,
};
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::runtime::Handle;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

/// Which way a frame went.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Host to device.
    Sent,
    /// Device to host.
    Received,
}

impl Direction {
    /// `->` or `<-`, as traces print a frame's direction.
    pub fn arrow(self) -> &'static str {
        match self {
            Direction::Sent => "->",
            Direction::Received => "<-",
        }
    }
}

/// Sees every raw frame (without its newline) in wire order per direction,
/// including lines that fail to decode. Called on the client's I/O tasks:
/// keep it cheap and non-blocking.
pub type Tap = Arc<dyn Fn(Direction, &[u8]) + Send + Sync>;

/// The bounds a [`ProbeClient`] holds a device to: frame size, queued
/// events, and how long each kind of op is waited for.
#[derive(Clone)]
pub struct ClientConfig {
    /// Largest frame accepted, newline included. Clamped to the probe-wire
    /// maximum of 16 MiB.
    pub max_frame_bytes: usize,
    /// Most events queued for [`ProbeClient::take_events`]'s reader.
    pub event_capacity: usize,
    /// Most bytes (as received on the wire) of queued events.
    pub event_budget_bytes: usize,
    /// `hello`, `discover`, `close_fd`, `restart_provider`.
    pub op_timeout: Duration,
    /// Added to a `call`'s or `resolve`'s own `timeout_ms`: the device gives
    /// up first and answers `timeout`; the margin covers the transport.
    pub call_margin: Duration,
    /// `read_fd`, whose answer may be many MiB over a slow link.
    pub read_fd_timeout: Duration,
    /// Sees every raw frame, for traces; `None` for none.
    pub tap: Option<Tap>,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            max_frame_bytes: MAX_FRAME_BYTES,
            event_capacity: 256,
            event_budget_bytes: 16 * 1024 * 1024,
            op_timeout: Duration::from_secs(15),
            call_margin: Duration::from_secs(5),
            read_fd_timeout: Duration::from_secs(60),
            tap: None,
        }
    }
}

impl fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientConfig")
            .field("max_frame_bytes", &self.max_frame_bytes)
            .field("event_capacity", &self.event_capacity)
            .field("event_budget_bytes", &self.event_budget_bytes)
            .field("op_timeout", &self.op_timeout)
            .field("call_margin", &self.call_margin)
            .field("read_fd_timeout", &self.read_fd_timeout)
            .field("tap", &self.tap.is_some())
            .finish()
    }
}

/// Counters of what the connection has seen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientStats {
    /// Request frames written to the device.
    pub frames_sent: u64,
    /// Lines read from the device, valid or not.
    pub frames_received: u64,
    /// Event frames read, queued or dropped.
    pub events_received: u64,
    /// Events dropped because nobody reads them or the queue was full.
    pub events_dropped: u64,
    /// Finals and chunks for ids that are not pending (answered, timed out,
    /// or never sent).
    pub unmatched_frames: u64,
    /// Lines that were not valid frames, and requests sent by the device.
    pub bad_frames: u64,
}

#[derive(Default)]
struct Stats {
    frames_sent: AtomicU64,
    frames_received: AtomicU64,
    events_received: AtomicU64,
    events_dropped: AtomicU64,
    unmatched_frames: AtomicU64,
    bad_frames: AtomicU64,
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// A final answer and the chunk bytes that preceded it.
#[derive(Clone, Debug, PartialEq)]
pub struct RawReply {
    /// The final frame: its `ok` payload, or the error it carried.
    pub result: Result<Map, WireError>,
    /// The `chunk` frames' bytes, decoded, in order (only `read_fd` has any).
    pub data: Vec<u8>,
}

struct Pending {
    tx: oneshot::Sender<Result<RawReply, TransportError>>,
    data: Vec<u8>,
    cap: usize,
}

struct State {
    next_id: u64,
    pending: HashMap<u64, Pending>,
    closed: Option<TransportError>,
}

struct Shared {
    state: Mutex<State>,
    stats: Stats,
    tap: Option<Tap>,
    events: mpsc::Sender<(Event, usize)>,
    events_taken: AtomicBool,
    event_bytes: Arc<AtomicUsize>,
    event_budget: usize,
    shutdown: watch::Sender<bool>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave `State` inconsistent
        // (every update is a single map operation), so poisoning is ignored.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Marks the connection closed and fails every pending request with
    /// `err`. Later requests fail with `connection_closed`.
    fn close(&self, err: TransportError) {
        let pending = {
            let mut st = self.lock();
            if st.closed.is_none() {
                st.closed = Some(err.clone());
            }
            std::mem::take(&mut st.pending)
        };
        for (_, p) in pending {
            let _ = p.tx.send(Err(err.clone()));
        }
        self.shutdown.send_replace(true);
    }

    fn closed_error(&self) -> TransportError {
        match &self.lock().closed {
            Some(TransportError::ConnectionClosed { reason }) => TransportError::ConnectionClosed {
                reason: reason.clone(),
            },
            Some(e) => TransportError::ConnectionClosed {
                reason: format!("after {e}"),
            },
            None => TransportError::ConnectionClosed {
                reason: "the client's I/O tasks stopped".into(),
            },
        }
    }

    fn tap(&self, dir: Direction, line: &[u8]) {
        if let Some(tap) = &self.tap {
            tap(dir, line);
        }
    }

    /// Handles one line from the device. `Err` closes the connection.
    fn on_line(&self, line: &[u8]) -> Result<(), TransportError> {
        self.tap(Direction::Received, line);
        bump(&self.stats.frames_received);
        if let Some((id, b64, len)) = canonical_chunk(line) {
            return self.on_chunk(id, len, |buf| {
                base64::engine::general_purpose::STANDARD
                    .decode_vec(b64, buf)
                    .map_err(|e| e.to_string())
            });
        }
        match decode_frame(line) {
            Ok(Frame::Final(f)) => {
                let id = f.id();
                let pending = self.lock().pending.remove(&id);
                match pending {
                    Some(p) => {
                        let result = match f {
                            Final::Ok { ok, .. } => Ok(ok),
                            Final::Error { error, .. } => Err(error),
                        };
                        let _ = p.tx.send(Ok(RawReply {
                            result,
                            data: p.data,
                        }));
                    }
                    None => bump(&self.stats.unmatched_frames),
                }
            }
            Ok(Frame::Chunk(c)) => {
                return self.on_chunk(c.id, c.data.len(), |buf| {
                    buf.extend_from_slice(&c.data);
                    Ok(())
                })
            }
            Ok(Frame::Event(e)) => {
                bump(&self.stats.events_received);
                let budget_left =
                    self.event_bytes.load(Ordering::Relaxed) + line.len() <= self.event_budget;
                let queued = self.events_taken.load(Ordering::Relaxed)
                    && budget_left
                    && self.events.try_send((e, line.len())).is_ok();
                if queued {
                    self.event_bytes.fetch_add(line.len(), Ordering::Relaxed);
                } else {
                    bump(&self.stats.events_dropped);
                }
            }
            Ok(Frame::Request(_)) => {
                // A device never sends requests; nothing waits for one.
                bump(&self.stats.bad_frames);
            }
            Err(e) => {
                bump(&self.stats.bad_frames);
                let pending = request_id_hint(line).and_then(|id| self.lock().pending.remove(&id));
                match pending {
                    Some(p) => {
                        let _ = p.tx.send(Err(TransportError::bad_frame(format!(
                            "undecodable answer: {e}"
                        ))));
                    }
                    // Without an id the line cannot be attributed, and a
                    // peer sending such lines has lost the frame boundary.
                    None => {
                        return Err(TransportError::bad_frame(format!(
                            "undecodable frame ({} bytes): {e}",
                            line.len()
                        )))
                    }
                }
            }
        }
        Ok(())
    }

    /// One chunk of `len` bytes for request `id`; `fill` appends them.
    /// The bounds are checked before anything is decoded or copied.
    fn on_chunk(
        &self,
        id: u64,
        len: usize,
        fill: impl FnOnce(&mut Vec<u8>) -> Result<(), String>,
    ) -> Result<(), TransportError> {
        let mut st = self.lock();
        let Some(p) = st.pending.get_mut(&id) else {
            drop(st);
            bump(&self.stats.unmatched_frames);
            return Ok(());
        };
        let overflow = if len > MAX_CHUNK_BYTES {
            Some(format!(
                "a chunk of {len} bytes for request {id} (probe-wire allows {MAX_CHUNK_BYTES})"
            ))
        } else if p.data.len().saturating_add(len) > p.cap {
            Some(format!(
                "more than {} bytes of chunks for request {id}",
                p.cap
            ))
        } else {
            None
        };
        if let Some(why) = overflow {
            // A device that sends more than it was asked for would keep the
            // reader busy for as long as it likes: stop reading it.
            let p = st.pending.remove(&id);
            drop(st);
            if let Some(p) = p {
                let _ = p.tx.send(Err(TransportError::bad_frame(why.clone())));
            }
            return Err(TransportError::ConnectionClosed {
                reason: format!("closed after the device sent {why}"),
            });
        }
        let before = p.data.len();
        if let Err(e) = fill(&mut p.data) {
            p.data.truncate(before);
            let p = st.pending.remove(&id);
            drop(st);
            bump(&self.stats.bad_frames);
            if let Some(p) = p {
                let _ = p.tx.send(Err(TransportError::bad_frame(format!(
                    "chunk for request {id}: {e}"
                ))));
            }
        }
        Ok(())
    }
}

/// A chunk frame of exactly its two members, in either order:
/// `{"chunk":"B64","id":N}` (the canonical form every encoder of this codec
/// writes) or `{"id":N,"chunk":"B64"}`. It is read without building a JSON
/// value: returns the id, the base64 text and its decoded length. Anything
/// else (escapes, spaces, extra members, bad padding) is left to the full
/// decoder.
///
/// Why: a 16 MiB chunk frame costs the full decoder its JSON string and the
/// decoded bytes on top of the line (about 3x the frame); here the size is
/// known before decoding, so an oversized or unwanted chunk costs nothing.
fn canonical_chunk(line: &[u8]) -> Option<(u64, &[u8], usize)> {
    let (b64, digits) = if let Some(rest) = line.strip_prefix(b"{\"chunk\":\"") {
        let end = rest.iter().position(|&b| b == b'"')?;
        let (b64, tail) = rest.split_at(end);
        (b64, tail.strip_prefix(b"\",\"id\":")?.strip_suffix(b"}")?)
    } else {
        let rest = line.strip_prefix(b"{\"id\":")?;
        let end = rest.iter().position(|&b| b == b',')?;
        let (digits, tail) = rest.split_at(end);
        let b64 = tail.strip_prefix(b",\"chunk\":\"")?.strip_suffix(b"\"}")?;
        (b64, digits)
    };
    let canonical_number = !digits.is_empty()
        && digits.iter().all(u8::is_ascii_digit)
        && (digits.len() == 1 || digits[0] != b'0');
    let alphabet = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=');
    if !canonical_number || b64.len() % 4 != 0 || !b64.iter().all(alphabet) {
        return None;
    }
    let id = std::str::from_utf8(digits).ok()?.parse().ok()?;
    let pad = b64.iter().rev().take_while(|&&b| b == b'=').count();
    if pad > 2 {
        return None;
    }
    Some((id, b64, b64.len() / 4 * 3 - pad))
}

/// Removes a request's pending entry when its waiter goes away (timeout,
/// cancellation), so late answers are counted as unmatched and dropped.
struct PendingGuard<'a> {
    shared: &'a Shared,
    id: u64,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        self.shared.lock().pending.remove(&self.id);
    }
}

/// Unsolicited events from the device (`incoming_call`, ...).
pub struct EventStream {
    rx: mpsc::Receiver<(Event, usize)>,
    bytes: Arc<AtomicUsize>,
}

impl EventStream {
    /// The next event; `None` once the connection is gone.
    pub async fn recv(&mut self) -> Option<Event> {
        let (e, n) = self.rx.recv().await?;
        self.bytes.fetch_sub(n, Ordering::Relaxed);
        Some(e)
    }

    /// The next event already queued, without waiting; `None` when there is
    /// none yet.
    pub fn try_recv(&mut self) -> Option<Event> {
        let (e, n) = self.rx.try_recv().ok()?;
        self.bytes.fetch_sub(n, Ordering::Relaxed);
        Some(e)
    }
}

/// A connection to a device over the probe wire.
pub struct ProbeClient {
    shared: Arc<Shared>,
    writer: mpsc::Sender<Vec<u8>>,
    events_rx: Mutex<Option<EventStream>>,
    cfg: ClientConfig,
    max_frame: usize,
    tasks: [JoinHandle<()>; 2],
}

impl fmt::Debug for ProbeClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProbeClient")
            .field("cfg", &self.cfg)
            .field("stats", &self.stats())
            .field("closed", &self.is_closed())
            .finish()
    }
}

impl Drop for ProbeClient {
    fn drop(&mut self) {
        self.shared.close(TransportError::ConnectionClosed {
            reason: "the client was dropped".into(),
        });
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl ProbeClient {
    /// Starts the client's tasks on the current Tokio runtime.
    ///
    /// # Panics
    /// Outside a Tokio runtime (use [`ProbeClient::connect_on`] there).
    pub fn connect<S>(stream: S, cfg: ClientConfig) -> ProbeClient
    where
        S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
    {
        Self::connect_on(&Handle::current(), stream, cfg)
    }

    /// Starts the client's tasks on `handle`'s runtime.
    pub fn connect_on<S>(handle: &Handle, stream: S, cfg: ClientConfig) -> ProbeClient
    where
        S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
    {
        let max_frame = cfg.max_frame_bytes.clamp(64, MAX_FRAME_BYTES);
        let (events_tx, events_rx) = mpsc::channel(cfg.event_capacity.max(1));
        let (shutdown, _) = watch::channel(false);
        let event_bytes = Arc::new(AtomicUsize::new(0));
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                next_id: 1,
                pending: HashMap::new(),
                closed: None,
            }),
            stats: Stats::default(),
            tap: cfg.tap.clone(),
            events: events_tx,
            events_taken: AtomicBool::new(false),
            event_bytes: event_bytes.clone(),
            event_budget: cfg.event_budget_bytes,
            shutdown,
        });
        let (read_half, write_half) = tokio::io::split(stream);
        let (writer, writer_rx) = mpsc::channel::<Vec<u8>>(64);
        let reader_task = handle.spawn(read_loop(read_half, shared.clone(), max_frame));
        let writer_task = handle.spawn(write_loop(write_half, writer_rx, shared.clone()));
        ProbeClient {
            shared,
            writer,
            events_rx: Mutex::new(Some(EventStream {
                rx: events_rx,
                bytes: event_bytes,
            })),
            cfg,
            max_frame,
            tasks: [reader_task, writer_task],
        }
    }

    /// The bounds this connection holds the device to.
    pub fn config(&self) -> &ClientConfig {
        &self.cfg
    }

    /// The event stream, once. Until it is taken, events are dropped (and
    /// counted in [`ClientStats::events_dropped`]).
    pub fn take_events(&self) -> Option<EventStream> {
        let s = self
            .events_rx
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if s.is_some() {
            self.shared.events_taken.store(true, Ordering::Relaxed);
        }
        s
    }

    /// What the connection has seen so far, for reports and the runner's
    /// checks on unmatched and bad frames.
    pub fn stats(&self) -> ClientStats {
        let s = &self.shared.stats;
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        ClientStats {
            frames_sent: get(&s.frames_sent),
            frames_received: get(&s.frames_received),
            events_received: get(&s.events_received),
            events_dropped: get(&s.events_dropped),
            unmatched_frames: get(&s.unmatched_frames),
            bad_frames: get(&s.bad_frames),
        }
    }

    /// Whether the connection is gone: every later request fails at once.
    pub fn is_closed(&self) -> bool {
        self.shared.lock().closed.is_some()
    }

    /// Why the connection closed, if it did.
    pub fn closed_reason(&self) -> Option<TransportError> {
        self.shared.lock().closed.clone()
    }

    /// Closes the connection; pending requests fail with `connection_closed`.
    pub fn close(&self) {
        self.shared.close(TransportError::ConnectionClosed {
            reason: "closed by the host".into(),
        });
    }

    /// Sends one request and waits for its final answer. `chunk_cap` bounds
    /// the chunk bytes accepted before the final.
    pub async fn request(
        &self,
        op: &str,
        params: Map,
        chunk_cap: usize,
        timeout: Duration,
    ) -> Result<RawReply, TransportError> {
        let (tx, rx) = oneshot::channel();
        let id = {
            let mut st = self.shared.lock();
            if st.closed.is_some() {
                drop(st);
                return Err(self.shared.closed_error());
            }
            let id = st.next_id;
            st.next_id += 1;
            st.pending.insert(
                id,
                Pending {
                    tx,
                    data: Vec::new(),
                    cap: chunk_cap,
                },
            );
            id
        };
        let _guard = PendingGuard {
            shared: &self.shared,
            id,
        };
        let bytes = encode_frame(&Frame::request(id, op, params));
        if bytes.len() > self.max_frame {
            return Err(TransportError::FrameTooLarge {
                limit: self.max_frame,
            });
        }
        let exchange = async {
            self.writer
                .send(bytes)
                .await
                .map_err(|_| self.shared.closed_error())?;
            rx.await.map_err(|_| self.shared.closed_error())?
        };
        match tokio::time::timeout(timeout, exchange).await {
            Ok(r) => r,
            Err(_) => Err(TransportError::timeout(op, timeout)),
        }
    }

    async fn op(
        &self,
        req: OpRequest,
        chunk_cap: usize,
        timeout: Duration,
    ) -> Result<RawReply, TransportError> {
        self.request(req.op(), req.params(), chunk_cap, timeout)
            .await
    }

    /// An op whose only acceptable answer is `ok`, decoded as `T`.
    async fn typed<T: OkPayload>(
        &self,
        req: OpRequest,
        timeout: Duration,
    ) -> Result<T, TransportError> {
        let op = req.op().to_string();
        let reply = self.op(req, MAX_CHUNK_BYTES, timeout).await?;
        decode_ok(&op, reply.result)
    }

    /// `hello`: the probe, its caller identity, the device, the device's
    /// clock and the ops it serves. The host's first request.
    pub async fn hello(&self) -> Result<HelloOk, TransportError> {
        self.typed(OpRequest::Hello, self.cfg.op_timeout).await
    }

    /// `discover`: every service declaring the tool-provider intent action,
    /// with its raw meta-data and the package owning its authority (§2.1).
    pub async fn discover(&self) -> Result<Vec<ServiceManifest>, TransportError> {
        let d: DiscoverOk = self.typed(OpRequest::Discover, self.cfg.op_timeout).await?;
        Ok(d.providers)
    }

    /// `ContentResolver.call()`. A Provider that threw is an answer
    /// ([`CallAnswer::Threw`]); other device errors are errors.
    pub async fn call(
        &self,
        authority: &str,
        method: &str,
        arg: Option<&str>,
        extras: Option<&Bundle>,
        timeout_ms: u64,
    ) -> Result<CallAnswer, TransportError> {
        self.call_timed(authority, method, arg, extras, timeout_ms)
            .await
            .map(|(answer, _)| answer)
    }

    /// Like [`ProbeClient::call`], with the device's `elapsed_us` when the
    /// call returned.
    pub async fn call_timed(
        &self,
        authority: &str,
        method: &str,
        arg: Option<&str>,
        extras: Option<&Bundle>,
        timeout_ms: u64,
    ) -> Result<(CallAnswer, Option<u64>), TransportError> {
        let req = OpRequest::Call(CallParams {
            authority: authority.to_string(),
            method: method.to_string(),
            arg: arg.map(str::to_string),
            extras: extras.cloned(),
            timeout_ms,
        });
        let timeout = Duration::from_millis(timeout_ms).saturating_add(self.cfg.call_margin);
        let reply = self.op(req, MAX_CHUNK_BYTES, timeout).await?;
        match reply.result {
            Err(WireError {
                kind: ErrorKind::ProviderException,
                message,
                class,
                ..
            }) => Ok((
                CallAnswer::Threw {
                    class: class.unwrap_or_default(),
                    message,
                },
                None,
            )),
            other => {
                let ok: CallOk = decode_ok("call", other)?;
                Ok((CallAnswer::Result(ok.result), Some(ok.elapsed_us)))
            }
        }
    }

    /// Reads a descriptor once, to EOF or `max_bytes`. Never buffers more
    /// than `max_bytes` plus one chunk, whatever the device sends.
    pub async fn read_fd(&self, handle: &str, max_bytes: u64) -> Result<FdRead, TransportError> {
        let req = OpRequest::ReadFd(ReadFdParams {
            handle: handle.to_string(),
            max_bytes,
        });
        let cap = usize::try_from(max_bytes)
            .unwrap_or(usize::MAX)
            .saturating_add(MAX_CHUNK_BYTES);
        let reply = self.op(req, cap, self.cfg.read_fd_timeout).await?;
        let ok: ReadFdOk = decode_ok("read_fd", reply.result)?;
        let data = reply.data;
        if data.len() as u64 > max_bytes {
            return Err(TransportError::bad_frame(format!(
                "read_fd sent {} bytes for max_bytes {max_bytes}",
                data.len()
            )));
        }
        if ok.bytes != data.len() as u64 {
            return Err(TransportError::bad_frame(format!(
                "read_fd reported {} bytes but sent {}",
                ok.bytes,
                data.len()
            )));
        }
        let sha = cetp_proto::canonical::sha256_hex(&data);
        if !ok.sha256.eq_ignore_ascii_case(&sha) {
            return Err(TransportError::bad_frame(format!(
                "read_fd reported sha256 {} but the bytes hash to {sha}",
                ok.sha256
            )));
        }
        Ok(FdRead {
            bytes: data,
            eof: ok.eof,
            error: ok.error,
            writable: ok.writable,
        })
    }

    /// `close_fd`: closes a result descriptor unread, using its handle up.
    pub async fn close_fd(&self, handle: &str) -> Result<(), TransportError> {
        let req = OpRequest::CloseFd {
            handle: handle.to_string(),
        };
        self.typed::<cetp_wire::Empty>(req, self.cfg.op_timeout)
            .await
            .map(|_| ())
    }

    /// Launches a PendingIntent and plays `decision`. `ui` holds the
    /// profile's selectors for UI automation on a real device.
    pub async fn resolve(
        &self,
        handle: &str,
        decision: Decision,
        ui: Option<Map>,
        timeout_ms: u64,
    ) -> Result<ResolveOutcome, TransportError> {
        let req = OpRequest::Resolve(ResolveParams {
            handle: handle.to_string(),
            decision,
            timeout_ms,
            ui,
        });
        let timeout = Duration::from_millis(timeout_ms).saturating_add(self.cfg.call_margin);
        let ok: ResolveOk = self.typed(req, timeout).await?;
        Ok(ok.into())
    }

    /// Kills the Provider's process. A device may answer `unsupported`; the
    /// caller then restarts it another way (adb `am force-stop`).
    pub async fn restart_provider(&self, package: &str) -> Result<(), TransportError> {
        let req = OpRequest::RestartProvider {
            package: package.to_string(),
        };
        self.typed::<cetp_wire::Empty>(req, self.cfg.op_timeout)
            .await
            .map(|_| ())
    }
}

/// Converts a `ui` object from a profile to wire JSON.
pub fn ui_to_wire(ui: &serde_json::Value) -> Option<Map> {
    match Json::from(ui.clone()) {
        Json::Object(m) => Some(m),
        _ => None,
    }
}

fn decode_ok<T: OkPayload>(op: &str, result: Result<Map, WireError>) -> Result<T, TransportError> {
    match result {
        Ok(ok) => {
            T::from_ok(&ok).map_err(|e| TransportError::bad_frame(format!("{op} answer: {e}")))
        }
        Err(e) => Err(TransportError::Device {
            kind: e.kind,
            message: e.message,
            class: e.class,
        }),
    }
}

async fn read_loop<R: AsyncRead + Unpin>(read: R, shared: Arc<Shared>, limit: usize) {
    let mut reader = AsyncFrameReader::with_limit(BufReader::with_capacity(64 * 1024, read), limit);
    let mut shutdown = shared.shutdown.subscribe();
    let err = loop {
        let line = tokio::select! {
            biased;
            _ = shutdown.wait_for(|closed| *closed) => return,
            line = reader.read_line() => line,
        };
        match line {
            Ok(Some(line)) => {
                if let Err(e) = shared.on_line(line) {
                    break e;
                }
            }
            Ok(None) => {
                break TransportError::ConnectionClosed {
                    reason: "the device closed the connection".into(),
                }
            }
            Err(ReadError::FrameTooLarge { limit }) => {
                break TransportError::FrameTooLarge { limit }
            }
            Err(ReadError::Truncated { len }) => {
                break TransportError::ConnectionClosed {
                    reason: format!(
                        "the device closed the connection inside a frame ({len} bytes)"
                    ),
                }
            }
            Err(ReadError::Io(e)) => {
                break TransportError::ConnectionClosed {
                    reason: format!("reading from the device: {e}"),
                }
            }
            Err(ReadError::Decode { error, .. }) => {
                break TransportError::bad_frame(error.to_string())
            }
        }
    };
    shared.close(err);
}

async fn write_loop<W: AsyncWrite + Unpin>(
    mut write: W,
    mut rx: mpsc::Receiver<Vec<u8>>,
    shared: Arc<Shared>,
) {
    let mut shutdown = shared.shutdown.subscribe();
    loop {
        let buf = tokio::select! {
            biased;
            _ = shutdown.wait_for(|closed| *closed) => break,
            m = rx.recv() => match m {
                Some(b) => b,
                None => break,
            },
        };
        shared.tap(Direction::Sent, buf.strip_suffix(b"\n").unwrap_or(&buf));
        let written = tokio::select! {
            biased;
            _ = shutdown.wait_for(|closed| *closed) => break,
            r = async {
                write.write_all(&buf).await?;
                write.flush().await
            } => r,
        };
        if let Err(e) = written {
            shared.close(TransportError::ConnectionClosed {
                reason: format!("writing to the device: {e}"),
            });
            break;
        }
        bump(&shared.stats.frames_sent);
    }
    // Tell the peer we are done; a peer that stopped reading must not hold
    // the task.
    let _ = tokio::time::timeout(Duration::from_secs(1), write.shutdown()).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_chunks_are_read_without_json() {
        for data in [&b""[..], b"a", b"ab", b"abc", &[0u8, 255, 10, 34, 92][..]] {
            let line = encode_frame(&Frame::chunk(42, data.to_vec()));
            let line = &line[..line.len() - 1];
            let (id, b64, len) = canonical_chunk(line).expect("canonical");
            assert_eq!((id, len), (42, data.len()));
            let mut out = Vec::new();
            base64::engine::general_purpose::STANDARD
                .decode_vec(b64, &mut out)
                .unwrap();
            assert_eq!(out, data);
        }
        // The other member order is read the same way.
        assert_eq!(
            canonical_chunk(br#"{"id":7,"chunk":"YWI="}"#),
            Some((7, &b"YWI="[..], 2))
        );
        for other in [
            &br#"{"id":1,"chunk":"YQ==","x":1}"#[..],
            br#"{"id":01,"chunk":"YQ=="}"#,
            br#"{"id": 1,"chunk":"YQ=="}"#,
            br#"{"chunk":"YQ==","id":01}"#,
            br#"{"chunk":"YQ==","id":1} "#,
            br#"{"chunk":"Y\/Q=","id":1}"#,
            br#"{"chunk":"YQ=","id":1}"#,
            br#"{"chunk":"Y===","id":1}"#,
            br#"{"chunk":"YQ==","id":99999999999999999999}"#,
            br#"{"chunk":"YQ==","id":}"#,
            br#"{"chunk":"Y\\/Q","id":1}"#,
        ] {
            assert!(
                canonical_chunk(other).is_none(),
                "{}",
                String::from_utf8_lossy(other)
            );
        }
    }
}
