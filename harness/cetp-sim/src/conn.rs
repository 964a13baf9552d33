//! One probe-wire connection: the frame loop, the ops, and the writer.
//!
//! The read loop decodes frames and spawns one task per request, so requests
//! are answered as they complete (out of order when a later one is faster)
//! and Provider calls overlap. All output goes through one bounded queue to
//! a writer task, which keeps frames whole and lets a slow host slow the
//! device down instead of making it buffer.

use crate::handles::{AppRef, FdCursor, Handles};
use crate::{
    lock, Sim, FINGERPRINT, MAX_HANDLES_PER_CONNECTION, MAX_OUTSTANDING_BYTES,
    MAX_OUTSTANDING_REQUESTS, MAX_READ_BYTES, MAX_WAIT_MS, MODEL, PROBE_NAME, SDK_INT,
};
use cetp_proto::provider::{ProviderCall, Reply};
use cetp_reference::app::launch_intent;
use cetp_reference::device::DeviceIdentity;
use cetp_wire::ops::{
    CallOk, CallParams, DeviceInfo, DiscoverOk, Empty, HelloOk, HostProviderParams, Identity,
    OkPayload, OpRequest, ReadFdOk, ReadFdParams, ReplyParams, ResolveOk, ResolveParams,
};
use cetp_wire::{
    decode_frame, encode_frame, encode_frame_checked, request_id_hint, AsyncFrameReader, ErrorKind,
    Frame, Map, Request, WireError, MAX_CHUNK_BYTES, WIRE_VERSION,
};
use sha2::{Digest, Sha256};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
use tokio::sync::{mpsc, oneshot, Semaphore};
use tokio::task::JoinSet;

/// Encoded frames waiting for the writer. Small: a `read_fd` chunk is over
/// a megabyte once encoded.
const OUT_QUEUE: usize = 8;

/// The ops this device serves, as `hello` lists them.
pub(crate) const OPS: [&str; 11] = [
    "hello",
    "discover",
    "call",
    "read_fd",
    "close_fd",
    "resolve",
    "restart_provider",
    "host_provider",
    "reply",
    "advance_clock",
    "consumer_act",
];

/// A built-in Consumer of this connection and its view of the device.
pub(crate) type BuiltIn = Arc<
    Mutex<(
        cetp_reference::consumer::DrivenConsumer,
        crate::consumer::SimPort,
    )>,
>;

pub(crate) struct Conn {
    sim: Arc<Sim>,
    identity: DeviceIdentity,
    number: u64,
    handles: Mutex<Handles>,
    out: mpsc::Sender<Vec<u8>>,
}

fn bad_request(message: impl Into<String>) -> WireError {
    WireError::new(ErrorKind::BadRequest, message)
}

fn unknown_handle(handle: &str) -> WireError {
    WireError::new(
        ErrorKind::UnknownHandle,
        format!("this connection holds no handle {handle:?}"),
    )
}

/// How long to wait for a Provider: the host's `timeout_ms`, within the
/// device's own ceiling (`0`: only that ceiling).
fn wait_for(timeout_ms: u64) -> Duration {
    let ms = if timeout_ms == 0 {
        MAX_WAIT_MS
    } else {
        timeout_ms.min(MAX_WAIT_MS)
    };
    Duration::from_millis(ms)
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

pub(crate) async fn serve<S>(sim: Arc<Sim>, identity: DeviceIdentity, number: u64, stream: S)
where
    S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let (rd, wr) = tokio::io::split(stream);
    let (tx, rx) = mpsc::channel(OUT_QUEUE);
    let (finish_tx, finish_rx) = oneshot::channel();
    let writer = tokio::spawn(write_loop(wr, rx, finish_rx));
    let conn = Arc::new(Conn {
        sim,
        identity,
        number,
        handles: Mutex::new(Handles::default()),
        out: tx,
    });
    conn.log('I', "connected");
    // Also runs when this future is dropped (a runtime shutting down):
    // Consumer threads waiting on this connection's scripted Providers must
    // not outlive it.
    let hosted = HostedCleanup {
        sim: Arc::clone(&conn.sim),
        number,
    };
    let mut reader = AsyncFrameReader::new(BufReader::with_capacity(64 * 1024, rd));
    let limits = Limits {
        count: Arc::new(Semaphore::new(MAX_OUTSTANDING_REQUESTS)),
        bytes: Arc::new(Semaphore::new(MAX_OUTSTANDING_BYTES / 1024)),
    };
    let mut tasks = JoinSet::new();
    let clean = loop {
        while tasks.try_join_next().is_some() {}
        let (req, len) = match conn.next_request(&mut reader).await {
            Incoming::Request(req, len) => (req, len),
            Incoming::Answered => continue,
            Incoming::End(clean) => break clean,
        };
        let Some(permits) = conn.admit(&limits, &req, len).await else {
            continue;
        };
        let c = Arc::clone(&conn);
        tasks.spawn(async move {
            c.handle(req).await;
            drop(permits);
        });
    };
    if clean {
        // The host may half-close and still read: answer what it asked.
        while tasks.join_next().await.is_some() {}
    } else {
        tasks.abort_all();
        while tasks.join_next().await.is_some() {}
    }
    drop(hosted);
    conn.log('I', if clean { "disconnected" } else { "closed" });
    drop(conn);
    if clean {
        let _ = finish_tx.send(());
        let _ = writer.await;
    } else {
        writer.abort();
    }
}

/// What `serve`'s read loop does with the next frame from the host.
enum Incoming {
    /// A request to answer, with its frame's length in bytes.
    Request(Request, usize),
    /// A bad frame, already answered with an error: read on.
    Answered,
    /// The connection ends: `true` when the host closed it cleanly.
    End(bool),
}

/// The caps on what a connection has outstanding: requests, and their
/// frames' bytes in KiB.
struct Limits {
    count: Arc<Semaphore>,
    bytes: Arc<Semaphore>,
}

/// A request's hold on [`Limits`], released when its task ends.
type Permits = (
    tokio::sync::OwnedSemaphorePermit,
    tokio::sync::OwnedSemaphorePermit,
);

/// `serve`'s phases for one frame, split out so that its loop reads as
/// read, admit, spawn.
impl Conn {
    /// Reads and decodes the host's next frame: a request, or a bad frame
    /// answered by id, or the end (a frame without an id closes the
    /// connection, as it cannot be answered).
    async fn next_request<R>(&self, reader: &mut AsyncFrameReader<R>) -> Incoming
    where
        R: tokio::io::AsyncBufRead + Unpin,
    {
        let line = match reader.read_line().await {
            Ok(Some(line)) => line,
            Ok(None) => return Incoming::End(true),
            Err(e) => {
                self.log('W', &format!("closing: {e}"));
                return Incoming::End(false);
            }
        };
        let len = line.len();
        let frame = match decode_frame(line) {
            Ok(frame) => frame,
            Err(e) => match request_id_hint(line) {
                Some(id) => {
                    self.log('W', &format!("request {id}: undecodable frame: {e}"));
                    self.send_final(Frame::error(
                        id,
                        bad_request(format!("undecodable frame: {e}")),
                    ))
                    .await;
                    return Incoming::Answered;
                }
                None => {
                    self.log(
                        'W',
                        &format!("closing: undecodable frame without an id: {e}"),
                    );
                    return Incoming::End(false);
                }
            },
        };
        let req = match frame {
            Frame::Request(req) => req,
            other => match other.id() {
                Some(id) => {
                    self.send_final(Frame::error(
                        id,
                        bad_request("a device accepts only requests from the host"),
                    ))
                    .await;
                    return Incoming::Answered;
                }
                None => {
                    self.log('W', "closing: the host sent an event");
                    return Incoming::End(false);
                }
            },
        };
        Incoming::Request(req, len)
    }

    /// Takes the request's share of the connection's [`Limits`], or answers
    /// it with an error when the device already holds too much (None).
    async fn admit(&self, limits: &Limits, req: &Request, len: usize) -> Option<Permits> {
        let kib = u32::try_from(len / 1024 + 1).unwrap_or(u32::MAX);
        match (
            Arc::clone(&limits.count).try_acquire_owned(),
            Arc::clone(&limits.bytes).try_acquire_many_owned(kib),
        ) {
            (Ok(c), Ok(b)) => Some((c, b)),
            _ => {
                self.log(
                    'W',
                    &format!("request {}: too many outstanding requests", req.id),
                );
                self.send_final(Frame::error(
                    req.id,
                    bad_request(format!(
                        "too many outstanding requests (at most {MAX_OUTSTANDING_REQUESTS}, {} MiB)",
                        MAX_OUTSTANDING_BYTES >> 20
                    )),
                ))
                .await;
                None
            }
        }
    }
}

struct HostedCleanup {
    sim: Arc<Sim>,
    number: u64,
}

impl Drop for HostedCleanup {
    fn drop(&mut self) {
        let gone = self.sim.hosted.remove_owned_by(self.number);
        if !gone.is_empty() {
            self.sim.log(
                'I',
                &format!(
                    "conn#{}: scripted providers gone: {}",
                    self.number,
                    gone.join(", ")
                ),
            );
        }
    }
}

async fn write_loop<W: AsyncWrite + Unpin>(
    wr: W,
    mut rx: mpsc::Receiver<Vec<u8>>,
    mut finish: oneshot::Receiver<()>,
) {
    let mut wr = BufWriter::with_capacity(64 * 1024, wr);
    loop {
        let line = tokio::select! {
            biased;
            line = rx.recv() => line,
            // Sent (or dropped) when the connection is done: a scripted
            // Provider's thread may still hold a sender.
            _ = &mut finish => {
                while let Ok(line) = rx.try_recv() {
                    if wr.write_all(&line).await.is_err() {
                        return;
                    }
                }
                None
            }
        };
        let Some(line) = line else { break };
        if wr.write_all(&line).await.is_err() {
            return;
        }
        if rx.is_empty() && wr.flush().await.is_err() {
            return;
        }
    }
    let _ = wr.flush().await;
    let _ = wr.shutdown().await;
}

impl Conn {
    fn log(&self, level: char, message: &str) {
        self.sim.log(
            level,
            &format!("conn#{}/{}: {message}", self.number, self.identity.name),
        );
    }

    /// Queues a final answer. An `ok` too large for a frame becomes
    /// `transaction_too_large`, which is what the Binder buffer would have
    /// made of it long before.
    async fn send_final(&self, frame: Frame) {
        let id = frame.id().unwrap_or(0);
        let line = match encode_frame_checked(&frame) {
            Ok(line) => line,
            Err(_) => {
                self.log('W', &format!("request {id}: answer too large for a frame"));
                encode_frame(&Frame::error(
                    id,
                    WireError::new(
                        ErrorKind::TransactionTooLarge,
                        "the answer is larger than a probe-wire frame",
                    ),
                ))
            }
        };
        // A closed connection has no one left to answer.
        let _ = self.out.send(line).await;
    }

    async fn handle(self: Arc<Self>, req: Request) {
        let id = req.id;
        let op = match OpRequest::decode(&req) {
            Ok(op) => op,
            Err(e) => {
                self.log('W', &format!("request {id} ({}): {e}", req.op));
                self.send_final(Frame::error(id, bad_request(e.to_string())))
                    .await;
                return;
            }
        };
        let result = match op {
            OpRequest::Hello => Ok(self.hello().to_ok()),
            OpRequest::Discover => Ok(DiscoverOk {
                providers: self.sim.discover(),
            }
            .to_ok()),
            OpRequest::Call(p) => self.call(p).await,
            OpRequest::ReadFd(p) => self.read_fd(id, p).await,
            OpRequest::CloseFd { handle } => self.close_fd(&handle),
            OpRequest::Resolve(p) => self.resolve(p).await,
            OpRequest::RestartProvider { package } => self.restart(&package),
            OpRequest::HostProvider(p) => self.host_provider(&p),
            OpRequest::Reply(p) => self.reply(p),
            // Extension of the simulated device (optional op, probe-wire
            // compatible): let device time pass at once, so expiry and
            // retention can be tested without waiting. Real devices answer
            // `unknown_op` and the cases that need it are not applicable.
            // `--fixed-clock` answers it as a phone does (below).
            OpRequest::Unknown { op, params }
                if op == "advance_clock" && !self.sim.config().fixed_clock =>
            {
                self.advance_clock(&params)
            }
            OpRequest::Unknown { op, params } if op == "consumer_act" => {
                self.consumer_act(&params).await
            }
            OpRequest::Unknown { op, .. } => Err(WireError::new(
                ErrorKind::UnknownOp,
                format!("this device does not know op {op:?}"),
            )),
        };
        match result {
            Ok(ok) => self.send_final(Frame::ok(id, ok)).await,
            Err(e) => {
                self.log('W', &format!("request {id} ({}): {e}", req.op));
                self.send_final(Frame::error(id, e)).await
            }
        }
    }

    fn hello(&self) -> HelloOk {
        let caller = &self.identity.caller;
        HelloOk {
            wire: WIRE_VERSION,
            probe: format!("{PROBE_NAME}/{}", env!("CARGO_PKG_VERSION")),
            identity: Identity {
                name: self.identity.name.clone(),
                uid: caller.uid,
                packages: caller.packages.clone(),
                cert_sha256: caller.cert_sha256.clone(),
                extra: Map::new(),
            },
            device: DeviceInfo {
                sdk_int: SDK_INT,
                model: MODEL.to_string(),
                fingerprint: FINGERPRINT.to_string(),
                extra: Map::new(),
            },
            now_ms: self.sim.now_ms(),
            // A device with a fixed clock does not offer to move it.
            ops: OPS
                .iter()
                .filter(|op| !(self.sim.config().fixed_clock && **op == "advance_clock"))
                .map(|s| s.to_string())
                .collect(),
            extra: {
                let mut extra = Map::new();
                extra.insert(
                    "consumers".into(),
                    cetp_wire::json::Json::from(serde_json::Value::from(crate::consumer::names())),
                );
                // Compatible extensions of `reply` this device plays
                // (`pending_intent`: a result value it turns into a real
                // PendingIntent), and what it lets a host shape (hosted.rs).
                self.sim
                    .cfg
                    .hosting
                    .hello_members(&self.identity.name, &mut extra);
                extra
            },
        }
    }

    /// `consumer_act`: the named built-in Consumer (one per name on the
    /// device, kept between acts and connections) performs one action.
    async fn consumer_act(&self, params: &Map) -> Result<Map, WireError> {
        let name = params
            .get("consumer")
            .and_then(cetp_wire::json::Json::as_str)
            .unwrap_or("default")
            .to_string();
        let action = params
            .get("action")
            .ok_or_else(|| bad_request("consumer_act needs an action"))
            .and_then(|a| {
                let a = a
                    .to_serde()
                    .map_err(|_| bad_request("the action is not valid Unicode"))?;
                cetp_reference::consumer::Action::from_json(&a).map_err(bad_request)
            })?;
        let timeout_ms = params
            .get("timeout_ms")
            .and_then(cetp_wire::json::Json::as_u64)
            .unwrap_or(60_000);
        let built_in = {
            let mut all = lock(&self.sim.consumers);
            match all.get(&name) {
                Some(c) => Arc::clone(c),
                None => {
                    let consumer = crate::consumer::built_in(&name).ok_or_else(|| {
                        WireError::new(
                            ErrorKind::Unsupported,
                            format!("this device hosts no Consumer named {name:?}"),
                        )
                    })?;
                    let port = crate::consumer::SimPort::new(
                        Arc::clone(&self.sim),
                        self.identity.caller.clone(),
                    );
                    let c = Arc::new(Mutex::new((consumer, port)));
                    all.insert(name.clone(), Arc::clone(&c));
                    c
                }
            }
        };
        let job = tokio::task::spawn_blocking(move || {
            let mut guard = lock(&built_in);
            let (consumer, port) = &mut *guard;
            consumer.act(port, &action)
        });
        let outcome = match tokio::time::timeout(wait_for(timeout_ms), job).await {
            Err(_) => {
                return Err(WireError::new(
                    ErrorKind::Timeout,
                    format!("the Consumer {name:?} did not finish within {timeout_ms} ms"),
                ))
            }
            Ok(Err(e)) => {
                return Err(WireError::new(
                    ErrorKind::ProviderDied,
                    format!("the Consumer {name:?} died: {e}"),
                ))
            }
            Ok(Ok(o)) => o,
        };
        self.log('I', &format!("consumer_act {name} -> {}", outcome.kind()));
        match cetp_wire::json::Json::from(outcome.to_json()) {
            cetp_wire::json::Json::Object(m) => Ok(m),
            _ => Ok(Map::new()),
        }
    }

    async fn call(&self, p: CallParams) -> Result<Map, WireError> {
        let app = self.sim.app_for(&p.authority).ok_or_else(|| {
            WireError::new(
                ErrorKind::UnknownAuthority,
                format!("no provider is installed for authority {:?}", p.authority),
            )
        })?;
        let method = p.method.clone();
        self.hang_if_configured(&p, &method).await?;
        let caller = self.identity.caller.clone();
        let now_ms = self.sim.device().app_now_ms();
        let call = ProviderCall {
            method: p.method,
            arg: p.arg,
            extras: p.extras,
        };
        let started = Instant::now();
        let job_app = app.clone();
        let job = tokio::task::spawn_blocking(move || {
            catch_unwind(AssertUnwindSafe(|| match &job_app {
                AppRef::Installed(a) => Ok(a.call(&caller, now_ms, &call)),
                AppRef::Hosted(h) => h.call(&caller, now_ms, &call),
            }))
        });
        let waited = tokio::time::timeout(wait_for(p.timeout_ms), job).await;
        let elapsed_us = micros(started.elapsed());
        let reply = match waited {
            Err(_) => {
                return Err(WireError::new(
                    ErrorKind::Timeout,
                    format!(
                        "stopped waiting for {method:?} after {} ms; the call may still complete on the provider side",
                        wait_for(p.timeout_ms).as_millis()
                    ),
                ))
            }
            Ok(Ok(Ok(reply))) => reply?,
            Ok(Ok(Err(_))) | Ok(Err(_)) => {
                // Android restarts a crashed Provider process on the next
                // call; the caller saw a DeadObjectException.
                self.restart_crashed(&app);
                return Err(WireError::new(
                    ErrorKind::ProviderDied,
                    format!("the provider of {:?} crashed during {method:?}", p.authority),
                ));
            }
        };
        self.call_answer(reply, &app, &method, elapsed_us)
    }

    /// The `hang` setting at work: a call of the tool (or method) it names
    /// never returns, and the device stops waiting after the call's
    /// timeout. Ok for any other call.
    async fn hang_if_configured(&self, p: &CallParams, method: &str) -> Result<(), WireError> {
        if let Some(hang) = self.sim.config().hang.as_deref() {
            let tool = p
                .extras
                .as_ref()
                .and_then(|b| b.opt_string("tool_name").ok().flatten());
            if tool.as_deref().unwrap_or(method) == hang {
                // The Provider's binder thread never returns: the device
                // waits as long as it was asked to, then gives up.
                tokio::time::sleep(wait_for(p.timeout_ms)).await;
                return Err(WireError::new(
                    ErrorKind::Timeout,
                    format!(
                        "stopped waiting for {hang:?} after {} ms; the provider never answered",
                        wait_for(p.timeout_ms).as_millis()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The `call` answer for a Provider's reply, once it crossed Binder: its
    /// exception, or its bundle with the handles in it adopted by this
    /// connection (logged with its status).
    fn call_answer(
        &self,
        reply: Reply,
        app: &AppRef,
        method: &str,
        elapsed_us: u64,
    ) -> Result<Map, WireError> {
        // The probe is another app: the Provider's exception crosses Binder.
        match crate::binder::cross(reply) {
            Reply::Threw { class, message } => Err(WireError::provider_exception(class, message)),
            Reply::Result {
                bundle: None,
                attachments: _,
            } => {
                self.log('I', &format!("call {method} -> null ({elapsed_us} us)"));
                Ok(CallOk {
                    result: None,
                    elapsed_us,
                }
                .to_ok())
            }
            Reply::Result {
                bundle: Some(mut bundle),
                attachments,
            } => {
                lock(&self.handles)
                    .adopt(&mut bundle, attachments, app, MAX_HANDLES_PER_CONNECTION)
                    .map_err(|_| {
                        WireError::new(
                            ErrorKind::Unsupported,
                            format!(
                                "this connection would hold more than {MAX_HANDLES_PER_CONNECTION} handles; read, close or resolve some"
                            ),
                        )
                    })?;
                let status = bundle
                    .opt_string(cetp_proto::envelope::keys::STATUS)
                    .ok()
                    .flatten()
                    .unwrap_or_else(|| "-".into());
                let code = bundle
                    .opt_string(cetp_proto::envelope::keys::ERROR_CODE)
                    .ok()
                    .flatten()
                    .map(|c| format!(" {c}"))
                    .unwrap_or_default();
                self.log(
                    'I',
                    &format!("call {method} -> {status}{code} ({elapsed_us} us)"),
                );
                Ok(CallOk {
                    result: Some(bundle),
                    elapsed_us,
                }
                .to_ok())
            }
        }
    }

    fn restart_crashed(&self, app: &AppRef) {
        if let AppRef::Installed(a) = app {
            let a = Arc::clone(a);
            self.log('E', "provider process crashed; restarting it");
            tokio::task::spawn_blocking(move || {
                let _ = catch_unwind(AssertUnwindSafe(|| a.restart()));
            });
        }
    }

    async fn read_fd(&self, id: u64, p: ReadFdParams) -> Result<Map, WireError> {
        let (src, writable) = {
            let mut h = lock(&self.handles);
            let writable = h.fd_writable(&p.handle);
            let src = h
                .take_fd(&p.handle)
                .ok_or_else(|| unknown_handle(&p.handle))?;
            (src, writable)
        };
        let mut cursor = FdCursor::new(src, p.max_bytes.min(MAX_READ_BYTES));
        let mut hasher = Sha256::new();
        while let Some(chunk) = cursor.next_chunk(MAX_CHUNK_BYTES) {
            hasher.update(&chunk);
            if self
                .out
                .send(encode_frame(&Frame::chunk(id, chunk)))
                .await
                .is_err()
            {
                return Err(WireError::new(ErrorKind::BadRequest, "connection closed"));
            }
        }
        let ok = ReadFdOk {
            bytes: cursor.position(),
            sha256: hex::encode(hasher.finalize()),
            eof: cursor.at_eof(),
            error: None,
            // The simulated device knows the mode the Provider opened it in.
            writable: Some(writable),
        };
        self.log(
            'I',
            &format!("read_fd {} -> {} bytes, eof={}", p.handle, ok.bytes, ok.eof),
        );
        Ok(ok.to_ok())
    }

    fn close_fd(&self, handle: &str) -> Result<Map, WireError> {
        lock(&self.handles)
            .take_fd(handle)
            .map(|_| Empty.to_ok())
            .ok_or_else(|| unknown_handle(handle))
    }

    async fn resolve(&self, p: ResolveParams) -> Result<Map, WireError> {
        let held = lock(&self.handles)
            .take_intent(&p.handle)
            .ok_or_else(|| unknown_handle(&p.handle))?;
        let app = held.app.clone();
        let launcher = self.identity.caller.clone();
        let now_ms = self.sim.device().app_now_ms();
        let decision = p.decision;
        let job = tokio::task::spawn_blocking(move || {
            catch_unwind(AssertUnwindSafe(|| match &held.app {
                AppRef::Installed(a) => Ok(launch_intent(
                    a.as_ref(),
                    &launcher,
                    &held.target,
                    decision,
                    now_ms,
                )),
                AppRef::Hosted(h) => h.resolve(&launcher, &held.target, decision, now_ms),
            }))
        });
        let outcome = match tokio::time::timeout(wait_for(p.timeout_ms), job).await {
            Err(_) => {
                return Err(WireError::new(
                    ErrorKind::Timeout,
                    format!(
                        "the activity of {} did not finish within {} ms",
                        p.handle,
                        wait_for(p.timeout_ms).as_millis()
                    ),
                ))
            }
            Ok(Ok(Ok(outcome))) => outcome?,
            Ok(Ok(Err(_))) | Ok(Err(_)) => {
                self.restart_crashed(&app);
                return Err(WireError::new(
                    ErrorKind::ProviderDied,
                    format!("the confirmation activity of {} crashed", p.handle),
                ));
            }
        };
        self.log(
            'I',
            &format!(
                "resolve {} {} -> launched={} ({}) applied={} result_code={}",
                p.handle,
                decision.as_str(),
                outcome.launched,
                outcome.launched_package.as_deref().unwrap_or("?"),
                outcome.decision_applied,
                outcome.result_code
            ),
        );
        Ok(ResolveOk {
            launched: outcome.launched,
            decision_applied: outcome.decision_applied,
            result_code: outcome.result_code,
            launched_package: outcome.launched_package,
        }
        .to_ok())
    }

    fn advance_clock(&self, params: &Map) -> Result<Map, WireError> {
        // At most a year per request: enough for every window the spec
        // defines, and far from overflowing the clock.
        const MAX_ADVANCE_MS: u64 = 366 * 24 * 3_600_000;
        let ms = params
            .get("ms")
            .and_then(cetp_wire::json::Json::as_u64)
            .filter(|ms| *ms <= MAX_ADVANCE_MS)
            .ok_or_else(|| {
                bad_request(format!(
                    "advance_clock needs `ms`, an integer from 0 to {MAX_ADVANCE_MS}"
                ))
            })?;
        self.sim.device().clock().advance(ms);
        self.log('I', &format!("device clock advanced by {ms} ms"));
        let mut ok = Map::new();
        ok.insert(
            "now_ms".into(),
            cetp_wire::json::Json::from(self.sim.now_ms()),
        );
        Ok(ok)
    }

    fn restart(&self, package: &str) -> Result<Map, WireError> {
        self.sim
            .restart_package(package)
            .map(|()| Empty.to_ok())
            .map_err(|e| WireError::new(e.kind, e.message))
    }

    fn host_provider(&self, p: &HostProviderParams) -> Result<Map, WireError> {
        let sim = &self.sim;
        let shape = sim.cfg.hosting.check_host(&self.identity.name, p)?;
        if shape == crate::hosted::Shape::Service {
            let package = sim.hosted.host_service(self.number, p)?;
            self.log(
                'I',
                &format!(
                    "declaring a discovery service in {package} for authority {}",
                    p.authority
                ),
            );
            return Ok(Empty.to_ok());
        }
        let hosted = sim
            .hosted
            .host(self.number, p, shape, self.out.clone(), |authority| {
                sim.device()
                    .apps()
                    .iter()
                    .any(|a| a.authority() == authority)
            })?;
        self.log(
            'I',
            &format!(
                "hosting a scripted provider: package {} authority {}",
                hosted.package(),
                hosted.authority()
            ),
        );
        Ok(Empty.to_ok())
    }

    fn reply(&self, p: ReplyParams) -> Result<Map, WireError> {
        let call = p.call.clone();
        // A reply this device cannot play is refused and leaves the call
        // waiting, so the host can still answer it.
        self.sim.cfg.hosting.check_reply(&p)?;
        self.sim.hosted.reply(self.number, p)?;
        self.log('I', &format!("reply to {call}"));
        Ok(Empty.to_ok())
    }
}
