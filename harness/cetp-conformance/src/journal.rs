//! The run journal (`journal.ndjson` in the run directory) and the device
//! wrapper that writes it and, on `cetp resume`, replays it.
//!
//! Every exchange with the device goes through [`Journal::wrap`]: a `send`
//! record is written before a request leaves the harness (and synced to
//! disk for `execute_tool`, the call that may have a side effect), a `recv`
//! record after its answer, a `now` record for each reading of the device
//! clock. The file is append-only; a run that dies leaves it ending
//! mid-exchange, with at most a torn last line.
//!
//! Resuming runs the same cases again, with the same seed and start, through
//! a wrapper that answers from the journal: the runner is deterministic in
//! the device's answers, so it asks the same questions in the same order
//! and reaches the same bindings, observer snapshots and check findings
//! without sending anything. A request the journal sent but holds no answer
//! for (in flight when the harness died) is sent again as it was, with the
//! same `request_id` and args, and the Provider's answer is taken as the
//! evidence of what happened (§4.1: a retry with the same id; §6: the
//! Provider de-duplicates it, so an effect already made is not made again).
//! Only then does the run go on with new requests.
//!
//! Two things cannot be replayed and are re-obtained instead:
//! - PendingIntent and descriptor handles belong to the probe-wire
//!   connection that received them, which died with the harness. A replayed
//!   answer's handles are renamed `HANDLE@jSEQ`; when a live step uses one,
//!   the call that returned it (record SEQ) is sent again, with its
//!   `request_id`, and the handle at the same place in the new answer is
//!   used.
//! - A clock advance (`advance_clock`) in flight is reconciled by the
//!   clock: applied only for what the device's time still lacks.
//!
//! Fail-closed: a request that matches nothing the journal holds while
//! answers remain to be replayed means the resumed run is not the journaled
//! one (another build of the harness, a profile the pin did not catch);
//! from then on the wrapper sends nothing and every call fails with
//! `journal_diverged`.

use crate::device::{Device, DeviceError, HelloInfo, Target};
use crate::pin::Pin;
use base64::Engine;
use cetp_proto::provider::{Decision, ResolveOutcome, ServiceManifest};
use cetp_proto::{Bundle, Value};
use cetp_reference::port::{CallAnswer, FdRead};
use cetp_wire::json::{self as wj, Json, Map};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

/// The journal's file name inside a run directory.
pub const FILE_NAME: &str = "journal.ndjson";
/// Format of the records; a journal of another format is not resumed.
pub const FORMAT: u64 = 1;
/// Longest record read back. A record holds one answer, which the probe
/// wire bounds (its frames), written once more as JSON.
const MAX_RECORD_BYTES: usize = 4 * cetp_wire::MAX_FRAME_BYTES + 4096;
/// Records read back at most (a full run writes a few thousand).
const MAX_RECORDS: usize = 2_000_000;
/// A reconciled call whose deadline has passed gets this much more.
const REFRESHED_DEADLINE_MS: i64 = 30_000;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn obj<const N: usize>(fields: [(&str, Json); N]) -> Json {
    Json::Object(
        fields
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect::<Map>(),
    )
}

fn text(v: &Json) -> String {
    let mut out = Vec::new();
    wj::write(&mut out, v);
    String::from_utf8(out).unwrap_or_default()
}

fn opt_str(s: Option<&str>) -> Json {
    s.map_or(Json::Null, Json::from)
}

fn int(n: i64) -> Json {
    Json::from(n)
}

fn journal_error(message: impl Into<String>) -> DeviceError {
    DeviceError::new("journal", message)
}

// ---------------------------------------------------------------------------
// Reading a journal back

/// One exchange of a journaled run.
#[derive(Clone, Debug)]
pub struct Exchange {
    pub seq: u64,
    pub dev: String,
    pub op: String,
    pub req: Json,
    /// `{"ok": ...}` or `{"err": {"kind", "message"}}`; `None` while in
    /// flight.
    pub ans: Option<Json>,
    /// For `advance_clock`: the device time when it was sent.
    pub at: Option<i64>,
    /// A call sent again to re-obtain handles (not part of the run's own
    /// sequence).
    pub revives: Option<u64>,
}

/// What a journal holds.
#[derive(Clone, Debug, Default)]
pub struct Recorded {
    /// The run's configuration as the CLI wrote it.
    pub config: serde_json::Value,
    /// The pin of the run (the latest one recorded).
    pub pin: Option<Pin>,
    /// The run's exit code, when it ended.
    pub finished: Option<i64>,
    pub exchanges: Vec<Exchange>,
    pub now: Vec<(String, i64)>,
    /// Times the run was resumed before.
    pub resumes: usize,
    /// A torn last line (the harness died writing it) was dropped.
    pub torn_tail: bool,
}

impl Recorded {
    /// Exchanges sent but never answered.
    pub fn in_flight(&self) -> impl Iterator<Item = &Exchange> {
        self.exchanges.iter().filter(|e| e.ans.is_none())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path} line {line}: {why}")]
    Corrupt {
        path: String,
        line: usize,
        why: String,
    },
}

/// Reads a journal: every record, bounded; a torn last line is dropped.
pub fn read(path: &Path) -> Result<Recorded, ReadError> {
    let shown = path.display().to_string();
    let io = |source| ReadError::Io {
        path: shown.clone(),
        source,
    };
    let file = File::open(path).map_err(io)?;
    let mut reader = BufReader::new(file);
    let mut n = 0;
    // One record at a time, each bounded; a line is known to be the last
    // (the only one that may be torn) when the next read finds nothing.
    let mut next_line = || -> Result<Option<(usize, Vec<u8>, bool)>, ReadError> {
        let mut buf = Vec::new();
        let got = (&mut reader)
            .take(MAX_RECORD_BYTES as u64 + 1)
            .read_until(b'\n', &mut buf)
            .map_err(io)?;
        if got == 0 {
            return Ok(None);
        }
        n += 1;
        let too = |why: String| ReadError::Corrupt {
            path: shown.clone(),
            line: n,
            why,
        };
        if buf.len() > MAX_RECORD_BYTES {
            return Err(too(format!(
                "a record longer than {MAX_RECORD_BYTES} bytes"
            )));
        }
        if n > MAX_RECORDS {
            return Err(too(format!("more than {MAX_RECORDS} records")));
        }
        let complete = buf.last() == Some(&b'\n');
        if complete {
            buf.pop();
        }
        Ok(Some((n, buf, complete)))
    };
    let mut rec = Recorded::default();
    let mut by_seq: HashMap<u64, usize> = HashMap::new();
    let mut ahead = next_line()?;
    while let Some((line, bytes, complete)) = ahead.take() {
        ahead = next_line()?;
        let last = ahead.is_none();
        let corrupt = |why: String| ReadError::Corrupt {
            path: shown.clone(),
            line,
            why,
        };
        let parsed = std::str::from_utf8(&bytes)
            .map_err(|e| e.to_string())
            .and_then(|t| wj::parse(t).map_err(|e| e.to_string()));
        let v = match parsed {
            Ok(v) if complete => v,
            // Only the last line may be torn: the harness died writing it.
            _ if last => {
                rec.torn_tail = true;
                break;
            }
            Ok(_) => return Err(corrupt("a record without its line end".into())),
            Err(e) => return Err(corrupt(e)),
        };
        let kind = v.get("j").and_then(Json::as_str).unwrap_or("");
        let num = |k: &str| v.get(k).and_then(Json::as_i64);
        match kind {
            "run" => {
                if num("format") != Some(FORMAT as i64) {
                    return Err(corrupt(format!(
                        "journal format {:?}, this cetp reads {FORMAT}",
                        num("format")
                    )));
                }
                rec.config = v
                    .get("config")
                    .and_then(|c| c.to_serde().ok())
                    .unwrap_or_default();
            }
            "pin" => {
                let fields = v
                    .get("fields")
                    .and_then(|f| f.to_serde().ok())
                    .and_then(|f| serde_json::from_value(f).ok())
                    .ok_or_else(|| corrupt("a pin without fields".into()))?;
                rec.pin = Some(Pin { fields });
            }
            "send" => {
                let seq = num("seq").ok_or_else(|| corrupt("send without seq".into()))? as u64;
                let field = |k: &str| {
                    v.get(k)
                        .and_then(Json::as_str)
                        .map(str::to_string)
                        .ok_or_else(|| corrupt(format!("send without {k}")))
                };
                by_seq.insert(seq, rec.exchanges.len());
                rec.exchanges.push(Exchange {
                    seq,
                    dev: field("dev")?,
                    op: field("op")?,
                    req: v.get("req").cloned().unwrap_or(Json::Null),
                    ans: None,
                    at: num("at"),
                    revives: num("revives").map(|s| s as u64),
                });
            }
            "recv" => {
                let seq = num("seq").ok_or_else(|| corrupt("recv without seq".into()))? as u64;
                let at = *by_seq
                    .get(&seq)
                    .ok_or_else(|| corrupt(format!("recv of unknown seq {seq}")))?;
                rec.exchanges[at].ans = v.get("ans").cloned();
            }
            "now" => {
                let dev = v.get("dev").and_then(Json::as_str).unwrap_or("a");
                let ms = num("ms").ok_or_else(|| corrupt("now without ms".into()))?;
                rec.now.push((dev.to_string(), ms));
            }
            "resumed" => rec.resumes += 1,
            "end" => rec.finished = num("exit").or(Some(0)),
            other => return Err(corrupt(format!("unknown record {other:?}"))),
        }
    }
    Ok(rec)
}

// ---------------------------------------------------------------------------
// Pause points (crash testing)

/// Where the harness stops dead, for crash tests: `before:OP:N` (the Nth
/// live OP's send record is written, the request not yet sent) or
/// `after:OP:N` (its answer is back, not yet journaled). OP is a `call`'s
/// method (`execute_tool`, `negotiate`, ...), a device op (`resolve`,
/// `read_fd`, `restart_provider`, `advance_clock`, ...) or `any`. The
/// harness prints one line to stderr and waits to be killed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PausePoint {
    pub after: bool,
    pub op: String,
    pub nth: u64,
}

impl PausePoint {
    pub fn parse(s: &str) -> Result<PausePoint, String> {
        let parts: Vec<&str> = s.split(':').collect();
        let bad = || format!("pause point {s:?}: expected before|after:OP:N");
        let [when, op, n] = parts.as_slice() else {
            return Err(bad());
        };
        let after = match *when {
            "before" => false,
            "after" => true,
            _ => return Err(bad()),
        };
        let nth: u64 = n.parse().map_err(|_| bad())?;
        if nth == 0 || op.is_empty() {
            return Err(bad());
        }
        Ok(PausePoint {
            after,
            op: op.to_string(),
            nth,
        })
    }
}

// ---------------------------------------------------------------------------
// The journal

/// How a resumed run went.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReplayStats {
    /// Answers served from the journal.
    pub replayed: u64,
    /// In-flight calls sent again with their request_id.
    pub reconciled: u64,
    /// Calls sent again to re-obtain handles.
    pub revived: u64,
    /// New exchanges after the journal was used up.
    pub live: u64,
}

#[derive(Default)]
struct Replay {
    /// Answered exchanges by request, in journal order.
    answered: HashMap<String, VecDeque<Exchange>>,
    remaining: usize,
    in_flight: HashMap<String, VecDeque<Exchange>>,
    now: HashMap<String, VecDeque<i64>>,
    /// Replayed exchanges by seq (to re-obtain their handles).
    origin: HashMap<u64, Exchange>,
    /// `HANDLE@jSEQ` → the live handle it was re-obtained as.
    revived: HashMap<String, String>,
    diverged: Option<String>,
    stats: ReplayStats,
}

impl Replay {
    fn active(&self) -> bool {
        self.remaining > 0
    }
}

/// What a send record says beyond its request.
#[derive(Default)]
struct SendMeta {
    /// For `advance_clock`: the device time before it.
    at: Option<i64>,
    /// The seq whose handles this call re-obtains.
    revives: Option<u64>,
    /// Synced to disk before the call leaves (a dispatch record).
    sync: bool,
}

pub struct Journal {
    path: PathBuf,
    file: Mutex<File>,
    seq: AtomicU64,
    pause: Option<PausePoint>,
    pause_seen: AtomicU64,
    replay: Mutex<Replay>,
}

fn key(dev: &str, op: &str, req: &Json) -> String {
    format!("{dev}\u{0}{op}\u{0}{}", text(&normalized(req)))
}

/// A request with journal-renamed handles put back as they were sent.
fn normalized(req: &Json) -> Json {
    match req {
        Json::Object(m) => match m.get("handle").and_then(Json::as_str) {
            Some(h) => {
                let mut m = m.clone();
                m.insert("handle".into(), Json::from(split_handle(h).0));
                Json::Object(m)
            }
            None => req.clone(),
        },
        _ => req.clone(),
    }
}

/// `HANDLE@jSEQ` → (HANDLE, Some(SEQ)); a live handle → (it, None).
fn split_handle(h: &str) -> (&str, Option<u64>) {
    match h.rsplit_once("@j") {
        Some((orig, seq)) => match seq.parse() {
            Ok(n) => (orig, Some(n)),
            Err(_) => (h, None),
        },
        None => (h, None),
    }
}

impl Journal {
    /// Starts the journal of a new run. Refuses to overwrite one.
    pub fn create(
        path: &Path,
        config: &serde_json::Value,
        pause: Option<PausePoint>,
    ) -> std::io::Result<Arc<Journal>> {
        let file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(path)?;
        let j = Journal {
            path: path.to_path_buf(),
            file: Mutex::new(file),
            seq: AtomicU64::new(1),
            pause,
            pause_seen: AtomicU64::new(0),
            replay: Mutex::new(Replay::default()),
        };
        j.append(
            &obj([
                ("j", "run".into()),
                ("format", Json::from(FORMAT)),
                ("config", Json::from(config.clone())),
            ]),
            true,
        )?;
        Ok(Arc::new(j))
    }

    /// Opens a journal to continue its run, replaying what it holds.
    pub fn resume(
        path: &Path,
        rec: &Recorded,
        pause: Option<PausePoint>,
        host_now_ms: i64,
    ) -> std::io::Result<Arc<Journal>> {
        let mut file = OpenOptions::new().append(true).open(path)?;
        if rec.torn_tail {
            // The torn record is dropped; a new record must start a line.
            file.write_all(b"\n")?;
        }
        let mut replay = Replay::default();
        for e in &rec.exchanges {
            if e.revives.is_some() {
                // Its handles belonged to a connection that is gone too.
                continue;
            }
            let k = key(&e.dev, &e.op, &e.req);
            if e.ans.is_some() {
                replay.origin.insert(e.seq, e.clone());
                replay.answered.entry(k).or_default().push_back(e.clone());
                replay.remaining += 1;
            } else {
                replay.in_flight.entry(k).or_default().push_back(e.clone());
            }
        }
        for (dev, ms) in &rec.now {
            replay.now.entry(dev.clone()).or_default().push_back(*ms);
        }
        let next = rec.exchanges.iter().map(|e| e.seq).max().unwrap_or(0) + 1;
        let in_flight: Vec<Json> = rec.in_flight().map(|e| Json::from(e.seq)).collect();
        let j = Journal {
            path: path.to_path_buf(),
            file: Mutex::new(file),
            seq: AtomicU64::new(next),
            pause,
            pause_seen: AtomicU64::new(0),
            replay: Mutex::new(replay),
        };
        j.append(
            &obj([
                ("j", "resumed".into()),
                ("at_ms", int(host_now_ms)),
                ("replaying", Json::from(next - 1)),
                ("in_flight", Json::Array(in_flight)),
            ]),
            true,
        )?;
        Ok(Arc::new(j))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// One record, written through (no buffer in the harness), so that a
    /// harness that dies leaves it in the file; `sync` also asks the disk.
    fn append(&self, record: &Json, sync: bool) -> std::io::Result<()> {
        let mut line = Vec::new();
        wj::write(&mut line, record);
        line.push(b'\n');
        let mut f = lock(&self.file);
        f.write_all(&line)?;
        if sync {
            f.sync_data()?;
        }
        Ok(())
    }

    pub fn record_pin(&self, pin: &Pin) -> std::io::Result<()> {
        self.append(
            &obj([
                ("j", "pin".into()),
                ("hash", pin.hash().into()),
                ("fields", Json::from(serde_json::json!(pin.fields))),
            ]),
            true,
        )
    }

    /// The run ended: nothing is left to resume.
    pub fn record_end(&self, exit: i32) -> std::io::Result<()> {
        self.append(
            &obj([("j", "end".into()), ("exit", int(i64::from(exit)))]),
            true,
        )
    }

    /// Why the resumed run stopped sending, if it diverged from the journal.
    pub fn diverged(&self) -> Option<String> {
        lock(&self.replay).diverged.clone()
    }

    pub fn stats(&self) -> ReplayStats {
        lock(&self.replay).stats.clone()
    }

    /// The target with every identity's device journaled.
    pub fn wrap(self: &Arc<Self>, target: Target) -> Target {
        let Target { label, a, b } = target;
        Target {
            label,
            a: Box::new(Journaled {
                dev: "a".into(),
                inner: a,
                journal: self.clone(),
            }),
            b: b.map(|b| {
                Box::new(Journaled {
                    dev: "b".into(),
                    inner: b,
                    journal: self.clone(),
                }) as Box<dyn Device>
            }),
        }
    }

    fn pause_if(&self, after: bool, op: &str) {
        let Some(p) = &self.pause else { return };
        if p.after != after || (p.op != op && p.op != "any") {
            return;
        }
        let seen = self.pause_seen.fetch_add(1, Ordering::SeqCst) + 1;
        if seen == p.nth {
            eprintln!(
                "cetp: paused {} {op} #{seen} (CETP_PAUSE_AT); waiting to be killed",
                if after { "after" } else { "before" }
            );
            loop {
                std::thread::park();
            }
        }
    }

    fn next_seq(&self) -> u64 {
        self.seq.fetch_add(1, Ordering::SeqCst)
    }

    fn send_record(
        &self,
        seq: u64,
        dev: &str,
        op: &str,
        req: &Json,
        meta: SendMeta,
    ) -> Result<(), DeviceError> {
        let SendMeta { at, revives, sync } = meta;
        let mut m = Map::new();
        m.insert("j".into(), "send".into());
        m.insert("seq".into(), Json::from(seq));
        m.insert("dev".into(), dev.into());
        m.insert("op".into(), op.into());
        m.insert("req".into(), req.clone());
        if let Some(at) = at {
            m.insert("at".into(), int(at));
        }
        if let Some(r) = revives {
            m.insert("revives".into(), Json::from(r));
        }
        self.append(&Json::Object(m), sync).map_err(|e| {
            journal_error(format!(
                "cannot write the journal {} ({e}); the call was not sent",
                self.path.display()
            ))
        })
    }

    fn recv_record(&self, seq: u64, ans: &Json, us: u64) -> Result<(), DeviceError> {
        self.append(
            &obj([
                ("j", "recv".into()),
                ("seq", Json::from(seq)),
                ("ans", ans.clone()),
                ("us", Json::from(us)),
            ]),
            false,
        )
        .map_err(|e| {
            journal_error(format!(
                "cannot write the journal {} ({e})",
                self.path.display()
            ))
        })
    }
}

/// One identity's device, journaled (and replayed while resuming).
struct Journaled {
    dev: String,
    inner: Box<dyn Device>,
    journal: Arc<Journal>,
}

fn ok(v: Json) -> Json {
    obj([("ok", v)])
}

fn err_json(e: &DeviceError) -> Json {
    obj([(
        "err",
        obj([
            ("kind", e.kind.as_str().into()),
            ("message", e.message.as_str().into()),
        ]),
    )])
}

fn answer_of(ans: &Json) -> Result<&Json, DeviceError> {
    if let Some(v) = ans.get("ok") {
        return Ok(v);
    }
    let e = ans.get("err");
    let field = |k: &str| {
        e.and_then(|e| e.get(k))
            .and_then(Json::as_str)
            .unwrap_or("")
            .to_string()
    };
    Err(DeviceError::new(&field("kind"), field("message")))
}

/// How an exchange's send record stands.
enum Sent<'e> {
    /// A new request: its send record is written first.
    New(SendMeta),
    /// An in-flight exchange sent again: its send record is in the journal.
    Again(&'e Exchange),
}

enum Served {
    /// From the journal.
    Replayed(Exchange),
    /// An in-flight exchange to send again.
    Reconcile(Exchange),
    Live,
}

impl Journaled {
    /// What answers a request: the journal, or the device.
    fn lookup(&self, op: &str, req: &Json) -> Result<Served, DeviceError> {
        let mut r = lock(&self.journal.replay);
        if let Some(why) = &r.diverged {
            return Err(DeviceError::new("journal_diverged", why.clone()));
        }
        let k = key(&self.dev, op, req);
        if let Some(e) = r.answered.get_mut(&k).and_then(VecDeque::pop_front) {
            r.remaining -= 1;
            r.stats.replayed += 1;
            return Ok(Served::Replayed(e));
        }
        if let Some(e) = r.in_flight.get_mut(&k).and_then(VecDeque::pop_front) {
            r.stats.reconciled += 1;
            return Ok(Served::Reconcile(e));
        }
        if r.active() {
            let why = format!(
                "the resumed run asked identity {} for `{op}` with a request the journal does not hold, while {} journaled answer(s) were still to be replayed: this is not the run that was journaled, so nothing more is sent",
                self.dev, r.remaining
            );
            r.diverged = Some(why.clone());
            return Err(DeviceError::new("journal_diverged", why));
        }
        r.stats.live += 1;
        Ok(Served::Live)
    }

    /// Sends `req` to the device through `live`, journaled: a new send
    /// record, or the in-flight exchange's when reconciling it. `what`
    /// names the request for pause points: a call's method, else the op.
    fn exchange(
        &self,
        what: &str,
        op: &str,
        req: &Json,
        sent: Sent<'_>,
        live: impl FnOnce() -> Result<Json, DeviceError>,
    ) -> Result<Json, DeviceError> {
        let seq = match sent {
            Sent::Again(e) => e.seq,
            Sent::New(mut meta) => {
                let seq = self.journal.next_seq();
                // The dispatch record of a call that may have an effect
                // reaches the disk before the call leaves the harness.
                meta.sync |= op == "call"
                    && req.get("method").and_then(Json::as_str) == Some("execute_tool");
                self.journal.send_record(seq, &self.dev, op, req, meta)?;
                seq
            }
        };
        self.journal.pause_if(false, what);
        let started = Instant::now();
        let result = live();
        self.journal.pause_if(true, what);
        let ans = match &result {
            Ok(v) => ok(v.clone()),
            Err(e) => err_json(e),
        };
        self.journal
            .recv_record(seq, &ans, started.elapsed().as_micros() as u64)?;
        result
    }

    /// A journaled `call` request sent to the device, its answer as JSON.
    fn send_call(&self, req: &Json) -> Result<Json, DeviceError> {
        let (authority, method, arg, extras, timeout) =
            decode_call(req).map_err(|e| journal_error(format!("a request: {e}")))?;
        self.inner
            .call(
                &authority,
                &method,
                arg.as_deref(),
                extras.as_ref(),
                timeout,
            )
            .map(|a| call_answer_json(&a))
    }

    /// The whole path of one request: the journal's answer (and the seq of
    /// its exchange), or the device's.
    fn io(
        &self,
        what: &str,
        op: &str,
        req: Json,
        live: impl Fn(&Json) -> Result<Json, DeviceError>,
    ) -> Result<(Json, Option<u64>), DeviceError> {
        match self.lookup(op, &req)? {
            Served::Replayed(e) => {
                let ans = e.ans.as_ref().cloned().unwrap_or(Json::Null);
                answer_of(&ans).map(|v| (v.clone(), Some(e.seq)))
            }
            Served::Reconcile(e) => {
                let req = self.live_handles(&self.refreshed(&req))?;
                self.exchange(what, op, &req, Sent::Again(&e), || live(&req))
                    .map(|v| (v, None))
            }
            Served::Live => {
                let req = self.live_handles(&req)?;
                self.exchange(what, op, &req, Sent::New(SendMeta::default()), || {
                    live(&req)
                })
                .map(|v| (v, None))
            }
        }
    }

    /// A request sent again after the harness died: its deadline moved
    /// forward if it has passed (same request_id and args: §4.1's retry).
    fn refreshed(&self, req: &Json) -> Json {
        let mut req = req.clone();
        let now = self.inner.now_ms();
        if let Some(Json::Object(extras)) = match &mut req {
            Json::Object(m) => m.get_mut("extras"),
            _ => None,
        } {
            if let Some(Json::Object(d)) = extras.get_mut("deadline_at_ms") {
                let passed = d
                    .get("v")
                    .and_then(Json::as_i64)
                    .is_some_and(|ms| ms < now.saturating_add(1_000));
                if passed {
                    d.insert("v".into(), int(now.saturating_add(REFRESHED_DEADLINE_MS)));
                }
            }
        }
        req
    }

    /// Puts the live handle in place of a journal-renamed one, re-obtaining
    /// it first if needed.
    fn live_handles(&self, req: &Json) -> Result<Json, DeviceError> {
        let Some(h) = req.get("handle").and_then(Json::as_str) else {
            return Ok(req.clone());
        };
        let (orig, Some(origin_seq)) = split_handle(h) else {
            return Ok(req.clone());
        };
        let known = lock(&self.journal.replay).revived.get(h).cloned();
        let live = match known {
            Some(l) => l,
            None => self.revive(h, orig, origin_seq)?,
        };
        let mut m = req.as_object().cloned().unwrap_or_default();
        m.insert("handle".into(), live.into());
        Ok(Json::Object(m))
    }

    /// Sends again the call whose journaled answer held `orig`, and takes
    /// the handle at the same place in the new answer.
    fn revive(&self, tagged: &str, orig: &str, origin_seq: u64) -> Result<String, DeviceError> {
        let origin = lock(&self.journal.replay).origin.get(&origin_seq).cloned();
        let cannot = |why: String| {
            journal_error(format!(
                "cannot re-obtain handle {orig} (from journal record {origin_seq}): {why}"
            ))
        };
        let origin = origin.ok_or_else(|| cannot("no such answered call".into()))?;
        if origin.op != "call" || origin.dev != self.dev {
            return Err(cannot(format!(
                "it came from `{}` of identity {}, which cannot be sent again here",
                origin.op, origin.dev
            )));
        }
        let old = origin
            .ans
            .as_ref()
            .and_then(|a| a.get("ok"))
            .and_then(|a| a.get("result"))
            .ok_or_else(|| cannot("its answer held no Bundle".into()))?;
        let path = find_handle(old, orig).ok_or_else(|| cannot("not in its answer".into()))?;
        let req = self.refreshed(&origin.req);
        // Not a step of the run: no pause point counts it.
        let result = self.exchange(
            "revive",
            "call",
            &req,
            Sent::New(SendMeta {
                revives: Some(origin_seq),
                ..SendMeta::default()
            }),
            || self.send_call(&req),
        );
        let fresh = result.map_err(|e| cannot(format!("sending it again failed: {e}")))?;
        let live = fresh
            .get("result")
            .and_then(|b| handle_at(b, &path))
            .ok_or_else(|| {
                cannot(format!(
                    "sent again (request {}), the Provider's answer holds no handle at {}",
                    origin_seq,
                    path.join("/")
                ))
            })?;
        let mut r = lock(&self.journal.replay);
        r.stats.revived += 1;
        r.revived.insert(tagged.to_string(), live.clone());
        Ok(live)
    }

    fn replaying(&self) -> bool {
        lock(&self.journal.replay).active()
    }
}

/// The keys leading to the handle `h` in a typed Bundle JSON.
fn find_handle(bundle: &Json, h: &str) -> Option<Vec<String>> {
    let m = bundle.as_object()?;
    for (k, v) in m {
        let t = v.get("t").and_then(Json::as_str);
        let inner = v.get("v");
        match t {
            Some("pending_intent" | "fd")
                if inner.and_then(|i| i.get("handle")).and_then(Json::as_str) == Some(h) =>
            {
                return Some(vec![k.clone()]);
            }
            Some("bundle") => {
                if let Some(mut p) = inner.and_then(|i| find_handle(i, h)) {
                    p.insert(0, k.clone());
                    return Some(p);
                }
            }
            _ => {}
        }
    }
    None
}

fn handle_at(bundle: &Json, path: &[String]) -> Option<String> {
    let (first, rest) = path.split_first()?;
    let v = bundle.get(first)?;
    let inner = v.get("v")?;
    if rest.is_empty() {
        inner
            .get("handle")
            .and_then(Json::as_str)
            .map(str::to_string)
    } else {
        handle_at(inner, rest)
    }
}

/// Renames every handle of a replayed Bundle `HANDLE@jSEQ`.
fn tag_handles(b: &mut Bundle, seq: u64) {
    for v in b.0.values_mut() {
        match v {
            Value::PendingIntent(p) => p.handle = format!("{}@j{seq}", p.handle),
            Value::Fd(f) => f.handle = format!("{}@j{seq}", f.handle),
            Value::Bundle(inner) => tag_handles(inner, seq),
            _ => {}
        }
    }
}

// ---------------------------------------------------------------------------
// Encodings of requests and answers

fn bundle_json(b: Option<&Bundle>) -> Json {
    cetp_wire::bundle::opt_bundle_to_json(b)
}

fn bundle_of(v: &Json) -> Result<Option<Bundle>, String> {
    if v.is_null() {
        return Ok(None);
    }
    cetp_wire::bundle_from_json(v, &cetp_wire::Path::ROOT)
        .map(Some)
        .map_err(|e| e.to_string())
}

type CallRequest = (String, String, Option<String>, Option<Bundle>, u64);

fn decode_call(req: &Json) -> Result<CallRequest, String> {
    let s = |k: &str| req.get(k).and_then(Json::as_str).map(str::to_string);
    Ok((
        s("authority").ok_or("no authority")?,
        s("method").ok_or("no method")?,
        s("arg"),
        bundle_of(req.get("extras").unwrap_or(&Json::Null))?,
        req.get("timeout_ms")
            .and_then(Json::as_u64)
            .unwrap_or(10_000),
    ))
}

fn call_answer_json(a: &CallAnswer) -> Json {
    match a {
        CallAnswer::Result(b) => obj([("result", bundle_json(b.as_ref()))]),
        CallAnswer::Threw { class, message } => obj([(
            "threw",
            obj([
                ("class", class.as_str().into()),
                ("message", message.as_str().into()),
            ]),
        )]),
    }
}

fn call_answer_of(v: &Json, seq: Option<u64>) -> Result<CallAnswer, DeviceError> {
    let bad = |why: String| journal_error(format!("a journaled answer: {why}"));
    if let Some(t) = v.get("threw") {
        let f = |k: &str| {
            t.get(k)
                .and_then(Json::as_str)
                .unwrap_or_default()
                .to_string()
        };
        return Ok(CallAnswer::Threw {
            class: f("class"),
            message: f("message"),
        });
    }
    let mut b = bundle_of(v.get("result").unwrap_or(&Json::Null)).map_err(bad)?;
    if let (Some(b), Some(seq)) = (b.as_mut(), seq) {
        tag_handles(b, seq);
    }
    Ok(CallAnswer::Result(b))
}

fn hello_json(h: &HelloInfo) -> Json {
    Json::from(serde_json::to_value(h).unwrap_or_default())
}

fn manifest_json(m: &ServiceManifest) -> Json {
    let mut out = obj([
        ("package", m.package.as_str().into()),
        ("service", m.service.as_str().into()),
        ("exported", m.exported.into()),
        ("permission", opt_str(m.permission.as_deref())),
        (
            "meta",
            Json::Object(
                m.meta
                    .iter()
                    .map(|(k, v)| (k.clone(), Json::from(v.as_str())))
                    .collect(),
            ),
        ),
        ("authority_package", opt_str(m.authority_package.as_deref())),
        (
            "signing_cert_sha256",
            Json::Array(
                m.signing_cert_sha256
                    .iter()
                    .map(|c| Json::from(c.as_str()))
                    .collect(),
            ),
        ),
    ]);
    if let (Some(types), Json::Object(o)) = (&m.meta_types, &mut out) {
        o.insert(
            "meta_types".into(),
            Json::Object(
                types
                    .iter()
                    .map(|(k, v)| (k.clone(), Json::from(v.as_str())))
                    .collect(),
            ),
        );
    }
    out
}

fn manifest_of(v: &Json) -> ServiceManifest {
    let s = |k: &str| v.get(k).and_then(Json::as_str).map(str::to_string);
    ServiceManifest {
        package: s("package").unwrap_or_default(),
        service: s("service").unwrap_or_default(),
        exported: v.get("exported").and_then(Json::as_bool).unwrap_or(false),
        permission: s("permission"),
        meta: v
            .get("meta")
            .and_then(Json::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
                    .collect::<BTreeMap<_, _>>()
            })
            .unwrap_or_default(),
        authority_package: s("authority_package"),
        signing_cert_sha256: v
            .get("signing_cert_sha256")
            .and_then(Json::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Json::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default(),
        meta_types: v.get("meta_types").and_then(Json::as_object).map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
                .collect()
        }),
    }
}

fn decision_str(d: Decision) -> &'static str {
    match d {
        Decision::Approve => "approve",
        Decision::Deny => "deny",
        Decision::Dismiss => "dismiss",
    }
}

impl Device for Journaled {
    fn hello(&self) -> Result<HelloInfo, DeviceError> {
        let v = self
            .io("hello", "hello", obj([]), |_| {
                self.inner.hello().map(|h| hello_json(&h))
            })?
            .0;
        v.to_serde()
            .ok()
            .and_then(|v| serde_json::from_value(v).ok())
            .ok_or_else(|| journal_error("a journaled hello answer does not read back"))
    }

    fn now_ms(&self) -> i64 {
        {
            let mut r = lock(&self.journal.replay);
            if r.active() {
                if let Some(ms) = r.now.get_mut(&self.dev).and_then(VecDeque::pop_front) {
                    return ms;
                }
            }
        }
        let ms = self.inner.now_ms();
        // A clock reading that is not journaled only makes a resumed run
        // diverge later, which is caught; it never sends anything wrong.
        let _ = self.journal.append(
            &obj([
                ("j", "now".into()),
                ("dev", self.dev.as_str().into()),
                ("ms", int(ms)),
            ]),
            false,
        );
        ms
    }

    fn sleep_ms(&self, ms: u64) {
        // Waiting for what the journal already answered costs nothing.
        if !self.replaying() {
            self.inner.sleep_ms(ms);
        }
    }

    fn discover(&self) -> Result<Vec<ServiceManifest>, DeviceError> {
        let (v, _) = self.io("discover", "discover", obj([]), |_| {
            self.inner
                .discover()
                .map(|l| Json::Array(l.iter().map(manifest_json).collect()))
        })?;
        Ok(v.as_array()
            .map(|a| a.iter().map(manifest_of).collect())
            .unwrap_or_default())
    }

    fn call(
        &self,
        authority: &str,
        method: &str,
        arg: Option<&str>,
        extras: Option<&Bundle>,
        timeout_ms: u64,
    ) -> Result<CallAnswer, DeviceError> {
        let req = obj([
            ("authority", authority.into()),
            ("method", method.into()),
            ("arg", opt_str(arg)),
            ("extras", bundle_json(extras)),
            ("timeout_ms", Json::from(timeout_ms)),
        ]);
        let (v, replayed) = self.io(method, "call", req, |req| self.send_call(req))?;
        call_answer_of(&v, replayed)
    }

    fn read_fd(&self, handle: &str, max_bytes: u64) -> Result<FdRead, DeviceError> {
        let req = obj([
            ("handle", handle.into()),
            ("max_bytes", Json::from(max_bytes)),
        ]);
        let (v, _) = self.io("read_fd", "read_fd", req, |req| {
            let h = req.get("handle").and_then(Json::as_str).unwrap_or_default();
            self.inner.read_fd(h, max_bytes).map(|r| {
                obj([
                    (
                        "bytes",
                        base64::engine::general_purpose::STANDARD
                            .encode(&r.bytes)
                            .into(),
                    ),
                    ("eof", r.eof.into()),
                    ("error", opt_str(r.error.as_deref())),
                    ("writable", r.writable.map_or(Json::Null, Json::from)),
                ])
            })
        })?;
        let bytes = v
            .get("bytes")
            .and_then(Json::as_str)
            .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
            .ok_or_else(|| journal_error("a journaled read_fd answer has no bytes"))?;
        Ok(FdRead {
            bytes,
            eof: v.get("eof").and_then(Json::as_bool).unwrap_or(false),
            error: v.get("error").and_then(Json::as_str).map(str::to_string),
            writable: v.get("writable").and_then(Json::as_bool),
        })
    }

    fn close_fd(&self, handle: &str) -> Result<(), DeviceError> {
        self.io(
            "close_fd",
            "close_fd",
            obj([("handle", handle.into())]),
            |req| {
                let h = req.get("handle").and_then(Json::as_str).unwrap_or_default();
                self.inner.close_fd(h).map(|()| obj([]))
            },
        )
        .map(|_| ())
    }

    fn resolve(
        &self,
        handle: &str,
        decision: Decision,
        ui: Option<&serde_json::Value>,
        timeout_ms: u64,
    ) -> Result<ResolveOutcome, DeviceError> {
        let req = obj([
            ("handle", handle.into()),
            ("decision", decision_str(decision).into()),
            ("ui", ui.cloned().map_or(Json::Null, Json::from)),
            ("timeout_ms", Json::from(timeout_ms)),
        ]);
        let outcome_json = |o: ResolveOutcome| {
            obj([
                ("launched", o.launched.into()),
                ("decision_applied", o.decision_applied.into()),
                ("result_code", int(i64::from(o.result_code))),
                ("launched_package", opt_str(o.launched_package.as_deref())),
            ])
        };
        let send = |req: &Json| {
            let h = req.get("handle").and_then(Json::as_str).unwrap_or_default();
            self.inner
                .resolve(h, decision, ui, timeout_ms)
                .map(outcome_json)
        };
        let v = match self.lookup("resolve", &req)? {
            Served::Replayed(e) => answer_of(e.ans.as_ref().unwrap_or(&Json::Null))?.clone(),
            Served::Reconcile(e) => {
                // A resolve lost with the harness may have reached the
                // Provider: a confirmation takes one decision, so the repeat
                // then launches the Provider's own UI, which no longer
                // takes one. That is the evidence the lost decision was
                // applied; the case's next step (redeeming the decision)
                // judges it. Anything else is the repeat's own outcome.
                let req = self.live_handles(&req)?;
                self.exchange("resolve", "resolve", &req, Sent::Again(&e), || {
                    let mut v = send(&req)?;
                    let launched = v.get("launched").and_then(Json::as_bool) == Some(true);
                    let applied = v.get("decision_applied").and_then(Json::as_bool) == Some(true);
                    if launched && !applied && decision != Decision::Dismiss {
                        if let Json::Object(m) = &mut v {
                            m.insert("decision_applied".into(), true.into());
                            m.insert(
                                "reconciled".into(),
                                "the confirmation no longer takes a decision: the resolve lost with the harness applied it".into(),
                            );
                        }
                    }
                    Ok(v)
                })?
            }
            Served::Live => {
                let req = self.live_handles(&req)?;
                self.exchange(
                    "resolve",
                    "resolve",
                    &req,
                    Sent::New(SendMeta::default()),
                    || send(&req),
                )?
            }
        };
        Ok(ResolveOutcome {
            launched: v.get("launched").and_then(Json::as_bool).unwrap_or(false),
            decision_applied: v
                .get("decision_applied")
                .and_then(Json::as_bool)
                .unwrap_or(false),
            result_code: v
                .get("result_code")
                .and_then(Json::as_i64)
                .and_then(|n| i32::try_from(n).ok())
                .unwrap_or(0),
            launched_package: v
                .get("launched_package")
                .and_then(Json::as_str)
                .map(str::to_string),
        })
    }

    fn restart_provider(&self, package: &str) -> Result<(), DeviceError> {
        self.io(
            "restart_provider",
            "restart_provider",
            obj([("package", package.into())]),
            |_| self.inner.restart_provider(package).map(|()| obj([])),
        )
        .map(|_| ())
    }

    fn advance_clock(&self, ms: u64) -> Result<i64, DeviceError> {
        let req = obj([("ms", Json::from(ms))]);
        let answer = |v: Json| {
            v.get("now")
                .and_then(Json::as_i64)
                .ok_or_else(|| journal_error("a journaled advance_clock answer has no time"))
        };
        match self.lookup("advance_clock", &req)? {
            Served::Replayed(e) => {
                answer(answer_of(e.ans.as_ref().unwrap_or(&Json::Null))?.clone())
            }
            Served::Reconcile(e) => {
                // By the clock: advance only by what the device still lacks
                // of the time the lost advance was to reach.
                let v = self.exchange(
                    "advance_clock",
                    "advance_clock",
                    &req,
                    Sent::Again(&e),
                    || {
                        let now = self.inner.now_ms();
                        let target = e.at.map(|at| at.saturating_add(ms as i64));
                        match target {
                            Some(t) if now >= t => Ok(obj([("now", int(now))])),
                            Some(t) => self
                                .inner
                                .advance_clock((t - now) as u64)
                                .map(|n| obj([("now", int(n))])),
                            None => self.inner.advance_clock(ms).map(|n| obj([("now", int(n))])),
                        }
                    },
                )?;
                answer(v)
            }
            Served::Live => {
                let meta = SendMeta {
                    at: Some(self.inner.now_ms()),
                    ..SendMeta::default()
                };
                let v = self.exchange(
                    "advance_clock",
                    "advance_clock",
                    &req,
                    Sent::New(meta),
                    || self.inner.advance_clock(ms).map(|n| obj([("now", int(n))])),
                )?;
                answer(v)
            }
        }
    }

    fn resync_clock(&self) -> Result<(), DeviceError> {
        if self.replaying() {
            return Ok(());
        }
        self.inner.resync_clock()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pause_points_parse() {
        assert_eq!(
            PausePoint::parse("before:execute_tool:3"),
            Ok(PausePoint {
                after: false,
                op: "execute_tool".into(),
                nth: 3
            })
        );
        assert!(PausePoint::parse("during:x:1").is_err());
        assert!(PausePoint::parse("after:x:0").is_err());
        assert!(PausePoint::parse("after:x").is_err());
    }

    #[test]
    fn a_torn_last_record_is_dropped_and_a_torn_middle_one_refused() {
        let dir = std::env::temp_dir().join(format!("cetp-journal-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(FILE_NAME);
        let _ = std::fs::remove_file(&path);
        let j = Journal::create(&path, &serde_json::json!({"seed": 1}), None).unwrap();
        j.send_record(
            7,
            "a",
            "call",
            &obj([("method", "negotiate".into())]),
            SendMeta::default(),
        )
        .unwrap();
        drop(j);
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str("{\"j\":\"recv\",\"seq\":7,\"an");
        std::fs::write(&path, &text).unwrap();
        let rec = read(&path).unwrap();
        assert!(rec.torn_tail);
        assert_eq!(rec.config["seed"], 1);
        assert_eq!(rec.in_flight().map(|e| e.seq).collect::<Vec<_>>(), [7]);
        // The same torn record with a complete one after it: corrupt.
        text.push_str("\n{\"j\":\"end\",\"exit\":0}\n");
        std::fs::write(&path, &text).unwrap();
        let err = read(&path).unwrap_err().to_string();
        assert!(err.contains("line 3"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn handles_split_and_normalize() {
        assert_eq!(split_handle("pi-3@j12"), ("pi-3", Some(12)));
        assert_eq!(split_handle("pi-3"), ("pi-3", None));
        assert_eq!(split_handle("a@jx"), ("a@jx", None));
        let req = obj([
            ("handle", "fd-1@j7".into()),
            ("max_bytes", Json::from(5u64)),
        ]);
        assert_eq!(
            key("a", "read_fd", &req),
            key(
                "a",
                "read_fd",
                &obj([("handle", "fd-1".into()), ("max_bytes", Json::from(5u64))])
            )
        );
    }
}
