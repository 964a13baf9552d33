//! A minimal probe-wire host for the tests: sends requests, collects frames
//! by id, and speaks just enough CETP v2 to drive the reference Provider.

use cetp_proto::envelope::keys;
use cetp_proto::{Bundle, Value};
use cetp_reference::provider::AUTHORITY;
use cetp_sim::{Sim, SimConfig};
use cetp_wire::ops::{CallOk, CallParams, HelloOk, OkPayload, OpRequest};
use cetp_wire::{encode_frame, AsyncFrameReader, Chunk, Event, Final, Frame, Map, WireError};
use serde_json::Value as Json;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, ReadHalf, WriteHalf};

pub const WAIT: Duration = Duration::from_secs(20);

pub trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

pub struct Client {
    reader: AsyncFrameReader<BufReader<ReadHalf<Box<dyn Io>>>>,
    writer: WriteHalf<Box<dyn Io>>,
    next_id: u64,
    /// Frames read while waiting for another id.
    stash: VecDeque<Frame>,
    pub events: Vec<Event>,
}

impl Client {
    pub fn new(stream: impl Io + 'static) -> Client {
        let boxed: Box<dyn Io> = Box::new(stream);
        let (rd, wr) = tokio::io::split(boxed);
        Client {
            reader: AsyncFrameReader::new(BufReader::new(rd)),
            writer: wr,
            next_id: 0,
            stash: VecDeque::new(),
            events: Vec::new(),
        }
    }

    /// A client on an in-process pipe to `sim` as `identity`.
    pub fn duplex(sim: &Arc<Sim>, identity: &str) -> Client {
        let (ours, theirs) = tokio::io::duplex(1 << 20);
        let identity = identity.to_string();
        let sim = Arc::clone(sim);
        tokio::spawn(async move { sim.serve_connection(&identity, theirs).await });
        Client::new(ours)
    }

    pub async fn send_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.writer.write_all(bytes).await?;
        self.writer.flush().await
    }

    pub async fn send(&mut self, op: &OpRequest) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        self.send_raw(&encode_frame(&op.to_frame(id)))
            .await
            .expect("send");
        id
    }

    /// The next frame from the device; `None` when it closed the
    /// connection.
    pub async fn next_frame(&mut self) -> Option<Frame> {
        if let Some(f) = self.stash.pop_front() {
            return Some(f);
        }
        self.read_frame().await
    }

    async fn read_frame(&mut self) -> Option<Frame> {
        match tokio::time::timeout(WAIT, self.reader.read_frame()).await {
            Ok(Ok(frame)) => frame,
            Ok(Err(e)) if e.is_fatal() => None,
            Ok(Err(e)) => panic!("the device sent an undecodable frame: {e}"),
            Err(_) => panic!("the device went silent for {WAIT:?}"),
        }
    }

    /// Whether the device closed the connection (EOF) within the wait.
    pub async fn closed(&mut self) -> bool {
        loop {
            match self.read_frame().await {
                None => return true,
                Some(Frame::Event(e)) => self.events.push(e),
                Some(other) => panic!("expected the connection to close, got {other:?}"),
            }
        }
    }

    /// Reads until the final answer to `id`, returning the chunks sent
    /// before it. Frames of other ids are kept for later.
    pub async fn final_for(&mut self, id: u64) -> (Vec<Chunk>, Final) {
        let mut chunks = Vec::new();
        let mut kept = VecDeque::new();
        let mut pending = std::mem::take(&mut self.stash);
        loop {
            let frame = match pending.pop_front() {
                Some(f) => f,
                None => self.read_frame().await.expect("connection closed"),
            };
            match frame {
                Frame::Final(f) if f.id() == id => {
                    kept.extend(pending);
                    self.stash = kept;
                    return (chunks, f);
                }
                Frame::Chunk(c) if c.id == id => chunks.push(c),
                Frame::Event(e) => self.events.push(e),
                other => kept.push_back(other),
            }
        }
    }

    /// Waits for the next event of the given name.
    pub async fn event(&mut self, name: &str) -> Event {
        loop {
            if let Some(i) = self.events.iter().position(|e| e.event == name) {
                return self.events.remove(i);
            }
            let frame = self.read_frame().await.expect("connection closed");
            match frame {
                Frame::Event(e) => self.events.push(e),
                other => self.stash.push_back(other),
            }
        }
    }

    pub async fn request(&mut self, op: OpRequest) -> Result<Map, WireError> {
        let id = self.send(&op).await;
        match self.final_for(id).await.1 {
            Final::Ok { ok, .. } => Ok(ok),
            Final::Error { error, .. } => Err(error),
        }
    }

    pub async fn ok(&mut self, op: OpRequest) -> Map {
        let name = op.op().to_string();
        self.request(op)
            .await
            .unwrap_or_else(|e| panic!("{name} failed: {e}"))
    }

    pub async fn err(&mut self, op: OpRequest) -> WireError {
        let name = op.op().to_string();
        match self.request(op).await {
            Ok(ok) => panic!("{name} succeeded: {ok:?}"),
            Err(e) => e,
        }
    }

    pub async fn hello(&mut self) -> HelloOk {
        HelloOk::from_ok(&self.ok(OpRequest::Hello).await).expect("hello payload")
    }

    pub async fn call(
        &mut self,
        method: &str,
        extras: Option<Bundle>,
    ) -> Result<CallOk, WireError> {
        self.call_on(AUTHORITY, method, extras, 10_000).await
    }

    pub async fn call_on(
        &mut self,
        authority: &str,
        method: &str,
        extras: Option<Bundle>,
        timeout_ms: u64,
    ) -> Result<CallOk, WireError> {
        let ok = self
            .request(call_op(authority, method, extras, timeout_ms))
            .await?;
        Ok(CallOk::from_ok(&ok).expect("call payload"))
    }

    /// The Provider's answer Bundle of a successful `call`.
    pub async fn bundle(&mut self, method: &str, extras: Option<Bundle>) -> Bundle {
        self.call(method, extras)
            .await
            .unwrap_or_else(|e| panic!("{method}: {e}"))
            .result
            .expect("a Bundle")
    }

    /// Negotiates v2 with `caps`; returns the session token.
    pub async fn negotiate(&mut self, caps: &[&str]) -> String {
        let b = self.bundle("negotiate", Some(negotiate_extras(caps))).await;
        assert_eq!(status(&b), "success", "{b:?}");
        data(&b)["session_token"]
            .as_str()
            .expect("session_token")
            .to_string()
    }
}

pub fn call_op(
    authority: &str,
    method: &str,
    extras: Option<Bundle>,
    timeout_ms: u64,
) -> OpRequest {
    OpRequest::Call(CallParams {
        authority: authority.to_string(),
        method: method.to_string(),
        arg: None,
        extras,
        timeout_ms,
    })
}

pub fn negotiate_extras(caps: &[&str]) -> Bundle {
    Bundle::new()
        .with(keys::CONSUMER_VERSIONS, Value::IntArray(vec![2, 1]))
        .with(
            keys::CONSUMER_CAPABILITIES,
            Value::String(serde_json::json!(caps).to_string()),
        )
}

pub fn rid(n: u64) -> String {
    format!("00000000-0000-4000-8000-{n:012x}")
}

/// The common v2 request fields, with a deadline 30 s after `now_ms`
/// (device time).
pub fn common(token: &str, request_id: &str, now_ms: i64) -> Bundle {
    Bundle::new()
        .with(keys::PROTOCOL_VERSION, Value::Int(2))
        .with(keys::SESSION_TOKEN, Value::str(token))
        .with(keys::REQUEST_ID, Value::str(request_id))
        .with(keys::DEADLINE_AT_MS, Value::Long(now_ms + 30_000))
}

pub fn exec_extras(token: &str, request_id: &str, now_ms: i64, tool: &str, args: &str) -> Bundle {
    common(token, request_id, now_ms)
        .with(keys::TOOL_NAME, Value::str(tool))
        .with(keys::ARGS, Value::str(args))
}

pub fn status(b: &Bundle) -> String {
    b.get_string(keys::STATUS).unwrap_or_default()
}

pub fn code(b: &Bundle) -> Option<String> {
    b.opt_string(keys::ERROR_CODE).ok().flatten()
}

pub fn data(b: &Bundle) -> Json {
    b.get_json(keys::DATA).unwrap_or(Json::Null)
}

pub fn sim(cfg: SimConfig) -> Arc<Sim> {
    Sim::new(cfg).expect("sim")
}

pub fn reference() -> Arc<Sim> {
    sim(SimConfig::default())
}
