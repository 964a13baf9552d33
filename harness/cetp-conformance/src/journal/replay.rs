//! The journaled device: each identity's device wrapped so that every
//! exchange is journaled, and, while a resumed run replays, answered from
//! the journal (see the module docs of [`super`]).

use super::codec;
use super::reader::{Exchange, Recorded};
use super::record::{Answer, Sent};
use super::{journal_error, lock, Journal};
use cetp_proto::device::{CallAnswer, FdRead};
use cetp_proto::provider::{Decision, ResolveOutcome, ServiceManifest};
use cetp_proto::{Bundle, Value};
use cetp_vectors::device::{Device, DeviceError, ErrorKind, HelloInfo};
use cetp_wire::json::{self as wj, Json};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

/// A reconciled call whose deadline has passed gets this much more.
const REFRESHED_DEADLINE_MS: i64 = 30_000;

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

/// What a resumed run still has to take from the journal.
#[derive(Default)]
pub(super) struct Replay {
    /// Answered exchanges by request, in journal order.
    answered: HashMap<String, VecDeque<Exchange>>,
    remaining: usize,
    in_flight: HashMap<String, VecDeque<Exchange>>,
    now: HashMap<String, VecDeque<i64>>,
    /// Replayed exchanges by seq (to re-obtain their handles).
    origin: HashMap<u64, Exchange>,
    /// `HANDLE@jSEQ` → the live handle it was re-obtained as.
    revived: HashMap<String, String>,
    pub(super) diverged: Option<String>,
    pub(super) stats: ReplayStats,
}

impl Replay {
    pub(super) fn of(rec: &Recorded) -> Replay {
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
        replay
    }

    fn active(&self) -> bool {
        self.remaining > 0
    }
}

/// The key a request is matched by: identity, op and the request as it
/// was sent (journal-renamed handles put back).
fn key(dev: &str, op: &str, req: &Json) -> String {
    let mut text = Vec::new();
    wj::write(&mut text, &normalized(req));
    format!(
        "{dev}\u{0}{op}\u{0}{}",
        String::from_utf8(text).unwrap_or_default()
    )
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

/// What a send record says beyond its request.
#[derive(Default)]
struct SendMeta {
    /// For `advance_clock`: the device time before it.
    at: Option<i64>,
    /// The seq whose handles this call re-obtains.
    revives: Option<u64>,
}

/// How an exchange's send record stands.
enum Sending<'e> {
    /// A new request: its send record is written first.
    New(SendMeta),
    /// An in-flight exchange sent again: its send record is in the journal.
    Again(&'e Exchange),
}

/// What answers a request.
enum Served {
    /// The journal.
    Replayed(Exchange),
    /// The device, for an in-flight exchange sent again.
    Reconcile(Exchange),
    /// The device, for a new exchange.
    Live,
}

/// One identity's device, journaled (and replayed while resuming).
pub(super) struct Journaled {
    dev: String,
    inner: Box<dyn Device>,
    journal: Arc<Journal>,
}

impl Journaled {
    pub(super) fn new(dev: &str, inner: Box<dyn Device>, journal: Arc<Journal>) -> Journaled {
        Journaled {
            dev: dev.to_string(),
            inner,
            journal,
        }
    }

    /// What answers a request: the journal, or the device.
    fn lookup(&self, op: &str, req: &Json) -> Result<Served, DeviceError> {
        let mut r = lock(&self.journal.replay);
        if let Some(why) = &r.diverged {
            return Err(DeviceError::new(ErrorKind::JournalDiverged, why.clone()));
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
            return Err(DeviceError::new(ErrorKind::JournalDiverged, why));
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
        sending: Sending<'_>,
        live: impl FnOnce() -> Result<Json, DeviceError>,
    ) -> Result<Json, DeviceError> {
        let seq = match sending {
            Sending::Again(e) => e.seq,
            Sending::New(SendMeta { at, revives }) => {
                let seq = self.journal.next_seq();
                // The dispatch record of a call that may have an effect
                // reaches the disk before the call leaves the harness.
                let sync = op == "call"
                    && req.get("method").and_then(Json::as_str) == Some("execute_tool");
                let sent = Sent {
                    seq,
                    dev: self.dev.clone(),
                    op: op.to_string(),
                    req: req.clone(),
                    at,
                    revives,
                };
                self.journal.send_record(sent, sync)?;
                seq
            }
        };
        self.journal.pause.pause_if(false, what);
        let started = Instant::now();
        let result = live();
        self.journal.pause.pause_if(true, what);
        self.journal.recv_record(
            seq,
            Answer::of(&result),
            started.elapsed().as_micros() as u64,
        )?;
        result
    }

    /// A journaled `call` request sent to the device, its answer as JSON.
    fn send_call(&self, req: &Json) -> Result<Json, DeviceError> {
        let p = codec::call_of(req).map_err(|e| journal_error(format!("a request: {e}")))?;
        self.inner
            .call(
                &p.authority,
                &p.method,
                p.arg.as_deref(),
                p.extras.as_ref(),
                p.timeout_ms,
            )
            .map(|a| codec::call_answer(&a))
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
            Served::Replayed(e) => replayed(&e).map(|v| (v, Some(e.seq))),
            Served::Reconcile(e) => {
                let req = self.live_handles(&self.refreshed(&req))?;
                self.exchange(what, op, &req, Sending::Again(&e), || live(&req))
                    .map(|v| (v, None))
            }
            Served::Live => {
                let req = self.live_handles(&req)?;
                self.exchange(what, op, &req, Sending::New(SendMeta::default()), || {
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
                    d.insert(
                        "v".into(),
                        Json::from(now.saturating_add(REFRESHED_DEADLINE_MS)),
                    );
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
        let old = match &origin.ans {
            Some(Answer::Ok(v)) => v.get("result"),
            _ => None,
        };
        let old = old.ok_or_else(|| cannot("its answer held no Bundle".into()))?;
        let path = find_handle(old, orig).ok_or_else(|| cannot("not in its answer".into()))?;
        let req = self.refreshed(&origin.req);
        // Not a step of the run: no pause point counts it.
        let meta = SendMeta {
            revives: Some(origin_seq),
            ..SendMeta::default()
        };
        let result = self.exchange("revive", "call", &req, Sending::New(meta), || {
            self.send_call(&req)
        });
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

    /// A resolve lost with the harness may have reached the Provider: a
    /// confirmation takes one decision, so the repeat then launches the
    /// Provider's own UI, which no longer takes one. That is the evidence
    /// the lost decision was applied; the case's next step (redeeming the
    /// decision) judges it. Anything else is the repeat's own outcome.
    fn reconcile_resolve(&self, decision: Decision, mut v: Json) -> Json {
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
        v
    }

    /// An advance lost with the harness is reconciled by the clock: the
    /// device is advanced only by what its time still lacks of the time the
    /// lost advance was to reach.
    fn reconcile_advance(&self, lost: &Exchange, ms: u64) -> Result<Json, DeviceError> {
        let now = self.inner.now_ms();
        match lost.at.map(|at| at.saturating_add(ms as i64)) {
            Some(t) if now >= t => Ok(codec::now(now)),
            Some(t) => self.inner.advance_clock((t - now) as u64).map(codec::now),
            None => self.inner.advance_clock(ms).map(codec::now),
        }
    }
}

/// The answer a replayed exchange holds.
fn replayed(e: &Exchange) -> Result<Json, DeviceError> {
    match &e.ans {
        Some(a) => a.result().cloned(),
        // Replayed exchanges are answered ones; an absent answer reads as
        // the empty error it always did.
        None => Err(DeviceError::new(ErrorKind::parse(""), "")),
    }
}

fn decoded<T>(r: Result<T, String>) -> Result<T, DeviceError> {
    r.map_err(|why| journal_error(format!("a journaled answer: {why}")))
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

impl Device for Journaled {
    fn hello(&self) -> Result<HelloInfo, DeviceError> {
        let (v, _) = self.io("hello", "hello", codec::empty(), |_| {
            self.inner.hello().map(|h| codec::hello(&h))
        })?;
        codec::hello_of(&v).map_err(journal_error)
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
        self.journal.now_record(&self.dev, ms);
        ms
    }

    fn sleep_ms(&self, ms: u64) {
        // Waiting for what the journal already answered costs nothing.
        if !self.replaying() {
            self.inner.sleep_ms(ms);
        }
    }

    fn discover(&self) -> Result<Vec<ServiceManifest>, DeviceError> {
        let (v, _) = self.io("discover", "discover", codec::empty(), |_| {
            self.inner.discover().map(|l| codec::manifests(&l))
        })?;
        decoded(codec::manifests_of(&v))
    }

    fn call(
        &self,
        authority: &str,
        method: &str,
        arg: Option<&str>,
        extras: Option<&Bundle>,
        timeout_ms: u64,
    ) -> Result<CallAnswer, DeviceError> {
        let req = codec::call_request(authority, method, arg, extras, timeout_ms);
        let (v, replayed) = self.io(method, "call", req, |req| self.send_call(req))?;
        let mut answer = decoded(codec::call_answer_of(&v))?;
        if let (CallAnswer::Result(Some(b)), Some(seq)) = (&mut answer, replayed) {
            tag_handles(b, seq);
        }
        Ok(answer)
    }

    fn read_fd(&self, handle: &str, max_bytes: u64) -> Result<FdRead, DeviceError> {
        let req = codec::read_fd_request(handle, max_bytes);
        let (v, _) = self.io("read_fd", "read_fd", req, |req| {
            let h = req.get("handle").and_then(Json::as_str).unwrap_or_default();
            self.inner.read_fd(h, max_bytes).map(|r| codec::fd_read(&r))
        })?;
        codec::fd_read_of(&v).map_err(journal_error)
    }

    fn close_fd(&self, handle: &str) -> Result<(), DeviceError> {
        let req = codec::close_fd_request(handle);
        self.io("close_fd", "close_fd", req, |req| {
            let h = req.get("handle").and_then(Json::as_str).unwrap_or_default();
            self.inner.close_fd(h).map(|()| codec::empty())
        })
        .map(|_| ())
    }

    fn resolve(
        &self,
        handle: &str,
        decision: Decision,
        ui: Option<&serde_json::Value>,
        timeout_ms: u64,
    ) -> Result<ResolveOutcome, DeviceError> {
        let req = codec::resolve_request(handle, decision, ui, timeout_ms);
        let send = |req: &Json| {
            let h = req.get("handle").and_then(Json::as_str).unwrap_or_default();
            self.inner
                .resolve(h, decision, ui, timeout_ms)
                .map(codec::resolve_outcome)
        };
        let v = match self.lookup("resolve", &req)? {
            Served::Replayed(e) => replayed(&e)?,
            Served::Reconcile(e) => {
                let req = self.live_handles(&req)?;
                self.exchange("resolve", "resolve", &req, Sending::Again(&e), || {
                    send(&req).map(|v| self.reconcile_resolve(decision, v))
                })?
            }
            Served::Live => {
                let req = self.live_handles(&req)?;
                let sending = Sending::New(SendMeta::default());
                self.exchange("resolve", "resolve", &req, sending, || send(&req))?
            }
        };
        decoded(codec::resolve_outcome_of(&v))
    }

    fn restart_provider(&self, package: &str) -> Result<(), DeviceError> {
        let req = codec::restart_request(package);
        self.io("restart_provider", "restart_provider", req, |_| {
            self.inner
                .restart_provider(package)
                .map(|()| codec::empty())
        })
        .map(|_| ())
    }

    fn advance_clock(&self, ms: u64) -> Result<i64, DeviceError> {
        let req = codec::advance_request(ms);
        let what = "advance_clock";
        let v = match self.lookup(what, &req)? {
            Served::Replayed(e) => replayed(&e)?,
            Served::Reconcile(e) => self.exchange(what, what, &req, Sending::Again(&e), || {
                self.reconcile_advance(&e, ms)
            })?,
            Served::Live => {
                let meta = SendMeta {
                    at: Some(self.inner.now_ms()),
                    ..SendMeta::default()
                };
                self.exchange(what, what, &req, Sending::New(meta), || {
                    self.inner.advance_clock(ms).map(codec::now)
                })?
            }
        };
        codec::now_of(&v).map_err(journal_error)
    }

    fn resync_clock(&self) -> Result<(), DeviceError> {
        if self.replaying() {
            return Ok(());
        }
        self.inner.resync_clock()
    }

    fn clock_moves_wall_only(&self) -> bool {
        self.inner.clock_moves_wall_only()
    }

    fn work_runs_in_real_time(&self) -> bool {
        self.inner.work_runs_in_real_time()
    }

    fn restore_clock(&self) -> Result<(), DeviceError> {
        if self.replaying() {
            return Ok(());
        }
        self.inner.restore_clock()
    }
}

#[cfg(test)]
mod tests {
    use super::super::record::obj;
    use super::*;

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
