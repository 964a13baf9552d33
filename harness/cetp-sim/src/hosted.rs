//! Hostile Providers a host scripts over the probe wire (`host_provider`,
//! `incoming_call`, `reply`), for testing Consumers.
//!
//! A connection exports a Provider on an authority; every `call()` any
//! Consumer on the device makes to it becomes an `incoming_call` event on
//! that connection, and the Consumer's Binder thread waits until the host
//! answers with `reply` (a Bundle, optionally a `result_fd` with given bytes,
//! or an exception). The Provider dies with the connection that hosts it:
//! waiting callers then see `provider_died`, later ones `unknown_authority`.
//!
//! Compatible extensions of probe-wire.md, all optional for a host:
//! - `host_provider` takes optional `package`, `service`, `exported`,
//!   `permission` and `authority_package` to shape the discovered manifest.
//! - A `pending_intent` value in a reply's `result` becomes a real
//!   PendingIntent created by the hosted app (creator facts are the app's,
//!   whatever the script claims; `immutable` and `activity` are the
//!   script's, default true). When a Consumer launches it (`resolve`), the
//!   host gets an `intent_launched` event naming the script's `handle` and
//!   the decision played. `hello` lists it as `pending_intent` under
//!   `reply_extensions`. (The probe app sends the same event from its own
//!   confirmation activity once the user decided there, with `launcher`
//!   left out when Android does not name the app that launched it.)
//! - `incoming_call` names the `authority` called: one connection may host
//!   several Providers (a Consumer scenario's decoy, §3.1 routing).
//! - `reply` may carry `"fail": "timeout"|"provider_died"` instead of a
//!   result (the Consumer's call fails as that device error: a Provider that
//!   never answers, or dies mid-call), or `"fd_endless": BYTE` with a result
//!   (its `result_fd` never reaches EOF). `hello` lists them under
//!   `reply_extensions`.
//! - `fd_closed` (listed under `reply_extensions`): once the Consumer lets
//!   go of the descriptor of an `fd_data` reply, the hosting connection
//!   gets `{"event":"fd_closed","call":"c-N","how":..,"now_ms":..}`, at
//!   most once per call. `how` is `closed` (here: read to its end or
//!   closed), or on a phone `detached`, `leaked` (garbage-collected
//!   unclosed), `dead` (every copy gone without a status) or `error`.
//! - `host_provider` takes `"discoverable": false`: the Provider answers
//!   but no discovery service of its own is listed (another package's
//!   service names its authority, CETP §2.1).
//! - With `--hosting probe-app`, each identity is one flavor of the probe
//!   app (a: `com.clawseed.probe`, b: `com.clawseed.probe.b`), and
//!   `hosted_provider` adds `foreign_metas` and `foreign_package`: the
//!   meta-data of the service in its package that names the other
//!   flavor's authority (`$Foreign`). `host_provider` with that authority,
//!   one of those sets and `authority_package` = `foreign_package` lists
//!   that service alone; the other identity's connection hosts the
//!   ContentProvider (`discoverable: false`).

use crate::lock;
use cetp_proto::provider::{
    Attachment, CallerIdentity, Decision, FdSource, IntentTarget, ProviderCall, Reply,
    ResolveOutcome, ServiceManifest,
};
use cetp_proto::{Bundle, FdValue, Value};
use cetp_wire::ops::{Caller, HostProviderParams, IncomingCall, ReplyOutcome, ReplyParams};
use cetp_wire::{encode_frame_checked, ErrorKind, Frame, Json, Map, WireError};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Scripted Providers on one device at once.
pub(crate) const MAX_HOSTED: usize = 16;
/// Calls of one scripted Provider waiting for their `reply`.
pub(crate) const MAX_PENDING_CALLS: usize = 256;
/// How long a Consumer's call waits for the host's `reply`.
pub(crate) const REPLY_WAIT: Duration = Duration::from_secs(120);
/// Longest `delay_ms` a reply may ask for.
pub(crate) const MAX_REPLY_DELAY_MS: u64 = 120_000;
/// First UID given to a scripted Provider app.
const FIRST_UID: u32 = 10300;
/// The handle written for the `result_fd` of `fd_endless`.
const SCRIPTED_FD: &str = "scripted-fd";
/// The prefix of the handle written for the `result_fd` made of `fd_data`,
/// followed by the call's id: its close is reported as `fd_closed`.
const SCRIPTED_DATA_FD: &str = "scripted-fd:";

pub(crate) struct HostedProvider {
    /// The connection that hosts it.
    owner: u64,
    authority: String,
    package: String,
    uid: u32,
    manifest: ServiceManifest,
    /// Whether its discovery service is listed (`discoverable`).
    listed: bool,
    /// The hosting connection's outgoing frames.
    out: mpsc::Sender<Vec<u8>>,
    calls: Arc<AtomicU64>,
    pending: Mutex<HashMap<String, SyncSender<ReplyParams>>>,
    closed: AtomicBool,
}

fn died(authority: &str) -> WireError {
    WireError::new(
        ErrorKind::ProviderDied,
        format!("the scripted provider of {authority:?} died: its hosting connection closed"),
    )
}

impl HostedProvider {
    pub fn authority(&self) -> &str {
        &self.authority
    }

    pub fn package(&self) -> &str {
        &self.package
    }

    fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        // Dropping the senders wakes every waiting call with `Disconnected`.
        lock(&self.pending).clear();
    }

    /// Queues a frame for the host, waiting (bounded) while its queue is
    /// full. Runs on a blocking thread.
    fn send_to_host(&self, frame: Vec<u8>, until: Instant) -> Result<(), WireError> {
        let mut frame = frame;
        loop {
            if self.closed.load(Ordering::SeqCst) {
                return Err(died(&self.authority));
            }
            match self.out.try_send(frame) {
                Ok(()) => return Ok(()),
                Err(mpsc::error::TrySendError::Closed(_)) => return Err(died(&self.authority)),
                Err(mpsc::error::TrySendError::Full(back)) => {
                    if Instant::now() >= until {
                        return Err(WireError::new(
                            ErrorKind::Timeout,
                            "the host does not read its connection",
                        ));
                    }
                    frame = back;
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
        }
    }

    /// `ContentProvider.call()`: asks the host and waits for its reply.
    /// Blocking; the device runs it on a blocking thread.
    pub fn call(
        &self,
        caller: &CallerIdentity,
        now_ms: i64,
        call: &ProviderCall,
    ) -> Result<Reply, WireError> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(died(&self.authority));
        }
        let id = format!("c-{}", self.calls.fetch_add(1, Ordering::Relaxed) + 1);
        let event = IncomingCall {
            call: id.clone(),
            caller: Caller {
                uid: caller.uid,
                packages: caller.packages.clone(),
                extra: Map::new(),
            },
            method: call.method.clone(),
            arg: call.arg.clone(),
            extras: call.extras.clone(),
            now_ms,
            // Which hosted Provider was called: a connection may host several.
            extra: [("authority".to_string(), Json::from(self.authority.as_str()))]
                .into_iter()
                .collect(),
        };
        let line = encode_frame_checked(&event.to_frame()).map_err(|_| {
            WireError::new(
                ErrorKind::TransactionTooLarge,
                "the call is too large to forward to the host",
            )
        })?;
        let (tx, rx) = sync_channel(1);
        {
            let mut pending = lock(&self.pending);
            if pending.len() >= MAX_PENDING_CALLS {
                return Err(WireError::new(
                    ErrorKind::Unsupported,
                    format!(
                        "at most {MAX_PENDING_CALLS} calls may wait for a scripted reply at once"
                    ),
                ));
            }
            pending.insert(id.clone(), tx);
        }
        let until = Instant::now() + REPLY_WAIT;
        if let Err(e) = self.send_to_host(line, until) {
            lock(&self.pending).remove(&id);
            return Err(e);
        }
        let reply = match rx.recv_timeout(REPLY_WAIT) {
            Ok(reply) => reply,
            Err(RecvTimeoutError::Timeout) => {
                lock(&self.pending).remove(&id);
                return Err(WireError::new(
                    ErrorKind::Timeout,
                    format!(
                        "the host did not reply to {id} within {} s",
                        REPLY_WAIT.as_secs()
                    ),
                ));
            }
            Err(RecvTimeoutError::Disconnected) => return Err(died(&self.authority)),
        };
        if reply.delay_ms > 0 {
            std::thread::sleep(Duration::from_millis(
                reply.delay_ms.min(MAX_REPLY_DELAY_MS),
            ));
        }
        if self.closed.load(Ordering::SeqCst) {
            return Err(died(&self.authority));
        }
        if let ReplyOutcome::Fail { kind } = &reply.outcome {
            return Err(match kind {
                ErrorKind::Timeout => WireError::new(
                    ErrorKind::Timeout,
                    format!(
                        "the scripted provider of {:?} never answered",
                        self.authority
                    ),
                ),
                _ => died(&self.authority),
            });
        }
        Ok(self.reply_of(&id, reply.outcome))
    }

    /// The Consumer let go of one of this Provider's descriptors (`handle`,
    /// as [`Self::reply_of`] wrote it): the descriptor of an `fd_data` reply
    /// is reported to the host as `fd_closed` (a compatible extension:
    /// `hello` lists `fd_closed` under `reply_extensions`). Best effort: a
    /// host gone or not reading loses the event, as on a phone.
    pub fn fd_released(&self, handle: &str, now_ms: i64) {
        let Some(call) = handle.strip_prefix(SCRIPTED_DATA_FD) else {
            return;
        };
        let mut fields = Map::new();
        fields.insert("call".into(), Json::from(call));
        fields.insert("how".into(), Json::from("closed"));
        fields.insert("now_ms".into(), Json::from(now_ms));
        if let Ok(line) = encode_frame_checked(&Frame::event("fd_closed", fields)) {
            let _ = self.send_to_host(line, Instant::now() + Duration::from_secs(5));
        }
    }

    fn reply_of(&self, call: &str, outcome: ReplyOutcome) -> Reply {
        match outcome {
            // Answered by `call` before a reply is made.
            ReplyOutcome::Fail { .. } => Reply::Result {
                bundle: None,
                attachments: Vec::new(),
            },
            ReplyOutcome::EndlessFd { result, fill } => {
                let mut attachments = Vec::new();
                let mut bundle = result;
                if let Some(b) = bundle.as_mut() {
                    self.own_intents(b, &mut attachments, 0);
                }
                bundle.get_or_insert_with(Bundle::new).insert(
                    cetp_proto::envelope::keys::RESULT_FD,
                    Value::Fd(FdValue {
                        handle: SCRIPTED_FD.to_string(),
                    }),
                );
                attachments.push((
                    SCRIPTED_FD.to_string(),
                    Attachment::File(FdSource::Pattern {
                        len: None,
                        byte: fill,
                    }),
                ));
                Reply::Result {
                    bundle,
                    attachments,
                }
            }
            ReplyOutcome::Throw { class, message } => Reply::Threw {
                class,
                message: message.unwrap_or_default(),
            },
            ReplyOutcome::Result { result, fd_data } => {
                let mut attachments = Vec::new();
                let mut bundle = result;
                if let Some(b) = bundle.as_mut() {
                    self.own_intents(b, &mut attachments, 0);
                }
                if let Some(data) = fd_data {
                    let handle = format!("{SCRIPTED_DATA_FD}{call}");
                    bundle.get_or_insert_with(Bundle::new).insert(
                        cetp_proto::envelope::keys::RESULT_FD,
                        Value::Fd(FdValue {
                            handle: handle.clone(),
                        }),
                    );
                    attachments.push((handle, Attachment::File(FdSource::bytes(data))));
                }
                Reply::Result {
                    bundle,
                    attachments,
                }
            }
        }
    }

    /// Turns the script's PendingIntent values into intents this app
    /// created. Descriptor values other than `fd_data` stand for nothing and
    /// reach the Consumer as `other`.
    fn own_intents(&self, b: &mut Bundle, out: &mut Vec<(String, Attachment)>, depth: usize) {
        if depth > cetp_wire::MAX_BUNDLE_DEPTH * 2 {
            return;
        }
        for value in b.0.values_mut() {
            match value {
                Value::Bundle(inner) => self.own_intents(inner, out, depth + 1),
                Value::PendingIntent(pi) => {
                    if pi.handle == SCRIPTED_FD
                        || pi.handle.starts_with(SCRIPTED_DATA_FD)
                        || out.iter().any(|(h, _)| *h == pi.handle)
                    {
                        continue;
                    }
                    out.push((
                        pi.handle.clone(),
                        Attachment::Intent(IntentTarget {
                            creator_package: self.package.clone(),
                            creator_uid: self.uid,
                            immutable: pi.immutable.unwrap_or(true),
                            activity: pi.activity.unwrap_or(true),
                            component: None,
                            confirmation: pi.handle.clone(),
                        }),
                    ));
                }
                _ => {}
            }
        }
    }

    /// A Consumer launched one of this app's PendingIntents: tells the host
    /// and reports the decision as the activity's result.
    pub fn resolve(
        &self,
        launcher: &CallerIdentity,
        target: &IntentTarget,
        decision: Decision,
        now_ms: i64,
    ) -> Result<ResolveOutcome, WireError> {
        let mut caller = Map::new();
        caller.insert("uid".into(), Json::from(launcher.uid));
        caller.insert(
            "packages".into(),
            Json::Array(
                launcher
                    .packages
                    .iter()
                    .map(|p| Json::from(p.as_str()))
                    .collect(),
            ),
        );
        let mut fields = Map::new();
        fields.insert("handle".into(), Json::from(target.confirmation.as_str()));
        fields.insert("decision".into(), Json::from(decision.as_str()));
        fields.insert("launcher".into(), Json::Object(caller));
        fields.insert("authority".into(), Json::from(self.authority.as_str()));
        fields.insert("now_ms".into(), Json::from(now_ms));
        let line =
            encode_frame_checked(&Frame::event("intent_launched", fields)).map_err(|_| {
                WireError::new(ErrorKind::TransactionTooLarge, "intent too large to report")
            })?;
        self.send_to_host(line, Instant::now() + REPLY_WAIT)?;
        Ok(ResolveOutcome {
            launched: true,
            decision_applied: decision != Decision::Dismiss,
            result_code: if decision == Decision::Approve { -1 } else { 0 },
            // The scripted Provider's own confirmation activity.
            launched_package: Some(self.package.clone()),
        })
    }
}

/// What a host may shape when it hosts a Provider on this device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Hosting {
    /// The simulated device's own latitude: any authority, package and
    /// manifest shape, every `reply` extension.
    #[default]
    Open,
    /// What the probe app allows on a phone (android-probe-app/README.md,
    /// "What `host_provider` accepts"): its one declared authority in its
    /// own package, one of its declared meta-data sets, the exceptions that
    /// cross Binder as themselves, `fd_endless`, `fail: timeout` (a call
    /// held past the Consumer's timeout), `fail: provider_died` (its hosted
    /// process, `:hosted`, kills itself mid-call), a `pending_intent` only
    /// as an immutable intent of its own confirmation activity, and no
    /// descriptor or foreign value in a result. `hello` says so as the app
    /// does (`hosted_provider`, `reply_extensions`, `reply_fail`), so the
    /// host's phone path is tested end to end here.
    ProbeApp,
}

/// The probe app's package (its `applicationId`) and hostile authority,
/// identity a's flavor.
pub const PROBE_PACKAGE: &str = "com.clawseed.probe";
pub const PROBE_HOSTED_AUTHORITY: &str = "com.clawseed.probe.hostile.clawseed.tools";
/// Identity b's flavor of the probe app: another package, so another
/// authority (two apps cannot declare one).
pub const PROBE_B_PACKAGE: &str = "com.clawseed.probe.b";
pub const PROBE_B_HOSTED_AUTHORITY: &str = "com.clawseed.probe.b.hostile.clawseed.tools";

/// One identity's probe app and its peer (the other flavor): each declares
/// a discovery service naming the other's authority (`$Foreign`), so that
/// a service whose ContentProvider is in another package can be hosted
/// across the two (CETP §2.1).
#[derive(Clone, Copy, Debug)]
struct Probe {
    package: &'static str,
    authority: &'static str,
    peer_package: &'static str,
    peer_authority: &'static str,
}

impl Probe {
    fn of(identity: &str) -> Option<Probe> {
        match identity {
            "a" => Some(Probe {
                package: PROBE_PACKAGE,
                authority: PROBE_HOSTED_AUTHORITY,
                peer_package: PROBE_B_PACKAGE,
                peer_authority: PROBE_B_HOSTED_AUTHORITY,
            }),
            "b" => Some(Probe {
                package: PROBE_B_PACKAGE,
                authority: PROBE_B_HOSTED_AUTHORITY,
                peer_package: PROBE_PACKAGE,
                peer_authority: PROBE_HOSTED_AUTHORITY,
            }),
            _ => None,
        }
    }

    /// The meta-data sets of its three discovery services.
    fn metas(&self) -> Vec<BTreeMap<String, String>> {
        vec![
            meta_set(
                self.authority,
                &[
                    ("com.clawseed.tools.version", "1"),
                    ("com.clawseed.tools.versions", "1,2"),
                ],
            ),
            meta_set(self.authority, &[("com.clawseed.tools.version", "1")]),
            meta_set(self.authority, &[("com.clawseed.tools.versions", "2")]),
        ]
    }

    /// The meta-data set of its `$Foreign` service, which names the peer's
    /// authority.
    fn foreign_metas(&self) -> Vec<BTreeMap<String, String>> {
        vec![meta_set(
            self.peer_authority,
            &[
                ("com.clawseed.tools.version", "1"),
                ("com.clawseed.tools.versions", "1,2"),
            ],
        )]
    }
}

fn meta_set(authority: &str, pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    std::iter::once(("com.clawseed.tools.authority", authority))
        .chain(pairs.iter().copied())
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// What a `host_provider` the rules accept makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shape {
    /// A Provider answering on the authority; its discovery service is
    /// listed unless `discoverable: false` (a ContentProvider a peer's
    /// service names).
    Provider {
        /// Whether its discovery service is listed.
        discoverable: bool,
    },
    /// Only a discovery service, naming an authority another connection's
    /// Provider answers on (the probe app's `$Foreign`).
    Service,
}

/// The classes the probe app's hosted Provider may throw (its
/// `HostedProvider.THROWABLE`): carried by Binder as themselves
/// ([`crate::binder::CARRIED`]), never a plain `RuntimeException`.
const PROBE_THROWABLE: [&str; 5] = [
    "java.lang.SecurityException",
    "java.lang.IllegalArgumentException",
    "java.lang.IllegalStateException",
    "java.lang.NullPointerException",
    "java.lang.UnsupportedOperationException",
];

/// The probe app's `reply` extensions (its `HostedProvider.REPLY_EXTENSIONS`)
/// and `fail` kinds (`HostedProvider.FAIL_KINDS`): what its `hello` lists.
const PROBE_REPLY_EXTENSIONS: [&str; 3] = ["fd_closed", "fd_endless", "pending_intent"];
const PROBE_FAIL_KINDS: [ErrorKind; 2] = [ErrorKind::Timeout, ErrorKind::ProviderDied];

impl Hosting {
    /// Parses `cetp sim --hosting`: `open` or `probe-app`.
    pub fn parse(s: &str) -> Result<Hosting, String> {
        match s {
            "open" => Ok(Hosting::Open),
            "probe-app" => Ok(Hosting::ProbeApp),
            _ => Err(format!("unknown hosting {s:?}: use open or probe-app")),
        }
    }

    /// Whether a hosted Provider's answers are held to Binder's
    /// transaction limit, as a phone's are (the probe app's rules); the
    /// open hosting carries any size, as a TCP rig does.
    pub fn enforces_binder_limit(self) -> bool {
        self == Hosting::ProbeApp
    }

    /// `hello` members that describe hosting on a connection of
    /// `identity`.
    pub(crate) fn hello_members(self, identity: &str, extra: &mut Map) {
        let json = |v: serde_json::Value| Json::from(v);
        match self {
            Hosting::Open => {
                extra.insert(
                    "reply_extensions".into(),
                    json(serde_json::json!([
                        "fail",
                        "fd_closed",
                        "fd_endless",
                        "pending_intent"
                    ])),
                );
            }
            Hosting::ProbeApp => {
                extra.insert(
                    "reply_extensions".into(),
                    json(serde_json::json!(PROBE_REPLY_EXTENSIONS)),
                );
                let fails: Vec<&str> = PROBE_FAIL_KINDS.iter().map(|k| k.as_str()).collect();
                extra.insert("reply_fail".into(), json(serde_json::json!(fails)));
                // Said only where it is so (`enforces_binder_limit`).
                extra.insert(
                    "binder_transaction_limit".into(),
                    json(serde_json::json!(self.enforces_binder_limit())),
                );
                // An identity with no probe app of its own hosts nothing.
                if let Some(probe) = Probe::of(identity) {
                    extra.insert(
                        "hosted_provider".into(),
                        json(serde_json::json!({
                            "authority": probe.authority,
                            "package": probe.package,
                            "metas": probe.metas(),
                            "throw_classes": PROBE_THROWABLE,
                            "foreign_metas": probe.foreign_metas(),
                            "foreign_package": probe.peer_package,
                        })),
                    );
                }
            }
        }
    }

    /// What a `host_provider` on a connection of `identity` makes, or the
    /// refusal the probe app would give.
    pub(crate) fn check_host(
        self,
        identity: &str,
        p: &HostProviderParams,
    ) -> Result<Shape, WireError> {
        let discoverable = extra_bool(&p.extra, "discoverable", true)?;
        if self == Hosting::Open {
            return Ok(Shape::Provider { discoverable });
        }
        let unsupported = |m: String| Err(WireError::new(ErrorKind::Unsupported, m));
        let Some(probe) = Probe::of(identity) else {
            return unsupported(format!(
                "identity {identity:?} has no probe app that hosts a scripted provider"
            ));
        };
        let package = extra_str(&p.extra, "package")?;
        let authority_package = extra_str(&p.extra, "authority_package")?;
        if let Some(v) = package.as_deref().filter(|v| *v != probe.package) {
            return unsupported(format!(
                "`package` {v:?}: this device hosts the provider only in its own package {:?}",
                probe.package
            ));
        }
        let shape = if p.authority == probe.authority {
            if let Some(v) = authority_package.as_deref().filter(|v| *v != probe.package) {
                return unsupported(format!(
                    "`authority_package` {v:?}: this probe's ContentProvider is in {:?}; a service naming {:?} is hosted with `authority` {:?}",
                    probe.package, probe.peer_package, probe.peer_authority
                ));
            }
            let metas = probe.metas();
            if discoverable && !metas.contains(&p.meta) {
                return unsupported(format!(
                    "this device declares its scripted provider's meta-data in its manifest; `meta` must be one of {metas:?}"
                ));
            }
            Shape::Provider { discoverable }
        } else if p.authority == probe.peer_authority && discoverable {
            // The `$Foreign` service: this package's service, the peer's
            // ContentProvider.
            if authority_package.as_deref() != Some(probe.peer_package) {
                return unsupported(format!(
                    "a service naming {:?} declares `authority_package` {:?}, the package whose ContentProvider answers there",
                    probe.peer_authority, probe.peer_package
                ));
            }
            let metas = probe.foreign_metas();
            if !metas.contains(&p.meta) {
                return unsupported(format!(
                    "this device's service naming another package's authority has the meta-data {metas:?}"
                ));
            }
            Shape::Service
        } else {
            return unsupported(format!(
                "this device hosts its scripted provider only on {:?} (or, as `discoverable` service naming the other probe's provider, {:?})",
                probe.authority, probe.peer_authority
            ));
        };
        if matches!(p.extra.get("exported"), Some(Json::Bool(false))) {
            return unsupported("`exported` false: the declared provider is exported".into());
        }
        if extra_str(&p.extra, "permission")?.is_some() {
            return unsupported("`permission`: the declared provider needs none".into());
        }
        Ok(shape)
    }

    /// Refuses a `reply` the probe app cannot play.
    pub(crate) fn check_reply(self, p: &ReplyParams) -> Result<(), WireError> {
        if self == Hosting::Open {
            return Ok(());
        }
        let unsupported = |m: String| Err(WireError::new(ErrorKind::Unsupported, m));
        match &p.outcome {
            ReplyOutcome::Throw { class, .. } if !PROBE_THROWABLE.contains(&class.as_str()) => {
                unsupported(format!(
                    "`throw` {class:?}: this device throws only {PROBE_THROWABLE:?}"
                ))
            }
            ReplyOutcome::Fail { kind } if !PROBE_FAIL_KINDS.contains(kind) => {
                unsupported(format!(
                    "`fail` {:?}: this device plays `fail` only as {:?}",
                    kind.as_str(),
                    PROBE_FAIL_KINDS
                        .iter()
                        .map(|k| k.as_str())
                        .collect::<Vec<_>>()
                ))
            }
            ReplyOutcome::Result {
                result: Some(b), ..
            }
            | ReplyOutcome::EndlessFd {
                result: Some(b), ..
            } => match foreign_value(b) {
                Some(tag) => unsupported(format!(
                    "a result holding a {tag}: this device returns plain Bundle values and PendingIntents of its own confirmation activity only"
                )),
                None => Ok(()),
            },
            _ => Ok(()),
        }
    }
}

/// The first value in `b` (nested Bundles too) a phone's probe cannot put
/// in a result: a descriptor, a foreign class, or a PendingIntent other
/// than the one it makes (immutable, of its own confirmation activity).
fn foreign_value(b: &Bundle) -> Option<&'static str> {
    b.0.values().find_map(|v| match v {
        Value::PendingIntent(pi) if pi.immutable == Some(false) || pi.activity == Some(false) => {
            Some("`pending_intent` that is not an immutable activity intent")
        }
        Value::Fd(_) => Some("`fd` value"),
        Value::Other { .. } => Some("`other` value"),
        Value::Bundle(inner) => foreign_value(inner),
        _ => None,
    })
}

/// The scripted Providers of one device.
#[derive(Default)]
pub(crate) struct Registry {
    by_authority: Mutex<BTreeMap<String, Arc<HostedProvider>>>,
    /// Discovery services alone (the probe app's `$Foreign`), with the
    /// connection that declared each.
    services: Mutex<Vec<(u64, ServiceManifest)>>,
    calls: Arc<AtomicU64>,
    uids: AtomicU32,
}

/// The discovery service a `host_provider` shapes (its optional
/// `package`, `service`, `exported`, `permission`, `authority_package`).
fn manifest_of(params: &HostProviderParams) -> Result<ServiceManifest, WireError> {
    let authority = &params.authority;
    if authority.is_empty() || authority.len() > 256 {
        return Err(WireError::new(
            ErrorKind::BadRequest,
            "`authority` must hold 1 to 256 bytes",
        ));
    }
    let package = match extra_str(&params.extra, "package")? {
        Some(p) => p,
        None => authority
            .strip_suffix(".clawseed.tools")
            .filter(|p| !p.is_empty())
            .unwrap_or("com.clawseed.scripted")
            .to_string(),
    };
    let service = extra_str(&params.extra, "service")?
        .unwrap_or_else(|| format!("{package}/.cetp.ToolProviderService"));
    let exported = extra_bool(&params.extra, "exported", true)?;
    let authority_package = if params.extra.contains_key("authority_package") {
        extra_str(&params.extra, "authority_package")?
    } else {
        Some(package.clone())
    };
    Ok(ServiceManifest {
        package,
        service,
        exported,
        permission: extra_str(&params.extra, "permission")?,
        meta: params.meta.clone(),
        authority_package,
        signing_cert_sha256: Vec::new(),
        meta_types: None,
    })
}

/// An optional boolean member of `extra` (`default` when absent or null).
fn extra_bool(extra: &Map, key: &str, default: bool) -> Result<bool, WireError> {
    match extra.get(key) {
        None | Some(Json::Null) => Ok(default),
        Some(Json::Bool(b)) => Ok(*b),
        Some(other) => Err(WireError::new(
            ErrorKind::BadRequest,
            format!("`{key}` must be a boolean, found {}", other.kind()),
        )),
    }
}

fn extra_str(extra: &Map, key: &str) -> Result<Option<String>, WireError> {
    match extra.get(key) {
        None | Some(Json::Null) => Ok(None),
        Some(Json::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(WireError::new(
            ErrorKind::BadRequest,
            format!("`{key}` must be a string, found {}", other.kind()),
        )),
    }
}

impl Registry {
    pub fn manifests(&self) -> Vec<ServiceManifest> {
        let mut all: Vec<ServiceManifest> = lock(&self.by_authority)
            .values()
            .filter(|p| p.listed)
            .map(|p| p.manifest.clone())
            .collect();
        all.extend(lock(&self.services).iter().map(|(_, m)| m.clone()));
        all
    }

    /// Declares a discovery service alone for connection `owner` (a
    /// [`Shape::Service`] the rules accepted): its authority is another
    /// connection's Provider. One connection at a time declares a package's
    /// service. Returns the package.
    pub fn host_service(
        &self,
        owner: u64,
        params: &HostProviderParams,
    ) -> Result<String, WireError> {
        let manifest = manifest_of(params)?;
        let mut services = lock(&self.services);
        if services
            .iter()
            .any(|(_, m)| m.package == manifest.package && m.meta == manifest.meta)
        {
            return Err(WireError::new(
                ErrorKind::BadRequest,
                format!(
                    "another connection already declares this service of {:?}",
                    manifest.package
                ),
            ));
        }
        if services.len() >= MAX_HOSTED {
            return Err(WireError::new(
                ErrorKind::Unsupported,
                format!("the simulator declares at most {MAX_HOSTED} services alone"),
            ));
        }
        let package = manifest.package.clone();
        services.push((owner, manifest));
        Ok(package)
    }

    pub fn has_package(&self, package: &str) -> bool {
        lock(&self.by_authority)
            .values()
            .any(|p| p.package == package)
    }

    pub fn get(&self, authority: &str) -> Option<Arc<HostedProvider>> {
        lock(&self.by_authority).get(authority).cloned()
    }

    /// Exports a scripted Provider for connection `owner`. `taken` says
    /// whether an installed app already answers on an authority.
    pub fn host(
        &self,
        owner: u64,
        params: &HostProviderParams,
        shape: Shape,
        out: mpsc::Sender<Vec<u8>>,
        taken: impl Fn(&str) -> bool,
    ) -> Result<Arc<HostedProvider>, WireError> {
        let authority = params.authority.clone();
        let manifest = manifest_of(params)?;
        let package = manifest.package.clone();
        let mut all = lock(&self.by_authority);
        if taken(&authority) || all.contains_key(&authority) {
            return Err(WireError::new(
                ErrorKind::BadRequest,
                format!("a provider already answers on authority {authority:?}"),
            ));
        }
        if all.len() >= MAX_HOSTED {
            return Err(WireError::new(
                ErrorKind::Unsupported,
                format!("the simulator hosts at most {MAX_HOSTED} scripted providers"),
            ));
        }
        let uid = FIRST_UID + self.uids.fetch_add(1, Ordering::Relaxed);
        let p = Arc::new(HostedProvider {
            owner,
            authority: authority.clone(),
            package,
            uid,
            manifest,
            listed: shape
                != (Shape::Provider {
                    discoverable: false,
                }),
            out,
            calls: Arc::clone(&self.calls),
            pending: Mutex::new(HashMap::new()),
            closed: AtomicBool::new(false),
        });
        all.insert(authority, Arc::clone(&p));
        Ok(p)
    }

    /// Removes the Providers connection `owner` hosts; their waiting calls
    /// fail with `provider_died`.
    pub fn remove_owned_by(&self, owner: u64) -> Vec<String> {
        lock(&self.services).retain(|(o, _)| *o != owner);
        let mut all = lock(&self.by_authority);
        let gone: Vec<String> = all
            .iter()
            .filter(|(_, p)| p.owner == owner)
            .map(|(a, _)| a.clone())
            .collect();
        for a in &gone {
            if let Some(p) = all.remove(a) {
                p.close();
            }
        }
        gone
    }

    /// Delivers the host's answer to a waiting call of one of its Providers.
    pub fn reply(&self, owner: u64, params: ReplyParams) -> Result<(), WireError> {
        let providers: Vec<Arc<HostedProvider>> = lock(&self.by_authority)
            .values()
            .filter(|p| p.owner == owner)
            .cloned()
            .collect();
        for p in providers {
            let waiting = lock(&p.pending).remove(&params.call);
            if let Some(tx) = waiting {
                // The caller may have given up since (its slot is gone); the
                // reply then has no one to reach, as on a device.
                let _ = tx.try_send(params);
                return Ok(());
            }
        }
        Err(WireError::new(
            ErrorKind::UnknownHandle,
            format!(
                "no call {:?} is waiting for a reply from this connection",
                params.call
            ),
        ))
    }
}

#[cfg(test)]
mod hosting_tests {
    use super::*;

    fn params(
        authority: &str,
        meta: &BTreeMap<String, String>,
        extra: &[(&str, Json)],
    ) -> HostProviderParams {
        HostProviderParams {
            authority: authority.into(),
            meta: meta.clone(),
            extra: extra
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        }
    }

    fn reply(outcome: ReplyOutcome) -> ReplyParams {
        ReplyParams {
            call: "c-1".into(),
            outcome,
            delay_ms: 0,
        }
    }

    #[test]
    fn the_probe_apps_throw_classes_are_its_java_list_and_all_cross_binder() {
        // The probe app's own list (core/HostedProvider.THROWABLE).
        assert_eq!(java_list("THROWABLE"), PROBE_THROWABLE);
        for c in PROBE_THROWABLE {
            assert_eq!(
                crate::binder::crossed_class(c),
                Some(c),
                "{c} crosses Binder as itself"
            );
        }
        assert!(!PROBE_THROWABLE.contains(&"java.lang.RuntimeException"));
    }

    /// A `List` of strings in HostedProvider.java (`NAME = ...;`), read from
    /// its source so that the sim and the app cannot drift apart.
    fn java_list(name: &str) -> Vec<String> {
        let java = include_str!(
            "../../../android-probe-app/core/src/main/java/com/clawseed/probe/core/HostedProvider.java"
        );
        let start = java
            .find(&format!("{name} = "))
            .unwrap_or_else(|| panic!("{name} in HostedProvider.java"));
        let list = &java[start..start + java[start..].find(");").unwrap()];
        list.split('"')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn the_probe_apps_reply_extensions_and_fail_kinds_are_its_java_lists_and_its_hello() {
        let extensions = java_list("REPLY_EXTENSIONS");
        assert_eq!(extensions, PROBE_REPLY_EXTENSIONS);
        let fails = java_list("FAIL_KINDS");
        let kinds: Vec<&str> = PROBE_FAIL_KINDS.iter().map(|k| k.as_str()).collect();
        assert_eq!(fails, kinds);
        let mut hello = Map::new();
        Hosting::ProbeApp.hello_members("a", &mut hello);
        let listed = |key: &str| -> Vec<String> {
            hello[key]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(listed("reply_extensions"), extensions);
        assert_eq!(listed("reply_fail"), fails);
        // Binder's transaction limit: the probe app says it holds its
        // answers to it, and so does this device only with its rules.
        let java = include_str!(
            "../../../android-probe-app/core/src/main/java/com/clawseed/probe/core/HostedProvider.java"
        );
        assert!(java.contains("BINDER_TRANSACTION_LIMIT = true;"));
        assert_eq!(hello["binder_transaction_limit"], Json::Bool(true));
        assert!(Hosting::ProbeApp.enforces_binder_limit());
        let mut open = Map::new();
        Hosting::Open.hello_members("a", &mut open);
        assert!(!open.contains_key("binder_transaction_limit"));
        assert!(!Hosting::Open.enforces_binder_limit());
        // Every fail kind listed is played: none is refused by the rules.
        for kind in PROBE_FAIL_KINDS {
            assert!(Hosting::ProbeApp
                .check_reply(&reply(ReplyOutcome::Fail { kind }))
                .is_ok());
        }
    }

    #[test]
    fn the_probe_apps_rules_refuse_what_a_phone_cannot_host_or_play() {
        let p = Hosting::ProbeApp;
        let probe = Probe::of("a").unwrap();
        let metas = probe.metas();
        let ok = params(
            PROBE_HOSTED_AUTHORITY,
            &metas[0],
            &[("package", Json::from(PROBE_PACKAGE))],
        );
        assert_eq!(
            p.check_host("a", &ok).unwrap(),
            Shape::Provider { discoverable: true }
        );
        // The provider alone, with no service listed (a peer's names it).
        let silent = params(
            PROBE_HOSTED_AUTHORITY,
            &BTreeMap::new(),
            &[("discoverable", Json::Bool(false))],
        );
        assert_eq!(
            p.check_host("a", &silent).unwrap(),
            Shape::Provider {
                discoverable: false
            }
        );
        // The service naming the peer's authority, in this package.
        let foreign = params(
            PROBE_B_HOSTED_AUTHORITY,
            &probe.foreign_metas()[0],
            &[
                ("package", Json::from(PROBE_PACKAGE)),
                ("authority_package", Json::from(PROBE_B_PACKAGE)),
            ],
        );
        assert_eq!(p.check_host("a", &foreign).unwrap(), Shape::Service);
        // Identity b's probe is the other flavor: its own authority, and
        // a's as the foreign one.
        let b = Probe::of("b").unwrap();
        assert_eq!(
            p.check_host(
                "b",
                &params(
                    PROBE_B_HOSTED_AUTHORITY,
                    &b.metas()[1],
                    &[("package", Json::from(PROBE_B_PACKAGE))]
                )
            )
            .unwrap(),
            Shape::Provider { discoverable: true }
        );
        assert_eq!(
            p.check_host("b", &ok).unwrap_err().kind,
            ErrorKind::Unsupported
        );
        assert_eq!(
            p.check_host("c", &ok).unwrap_err().kind,
            ErrorKind::Unsupported
        );
        let mut other = metas[0].clone();
        other.insert("com.clawseed.tools.versions".into(), "2,1".into());
        for bad in [
            params("org.cetp.hostile.clawseed.tools", &metas[0], &[]),
            params(PROBE_HOSTED_AUTHORITY, &other, &[]),
            params(
                PROBE_HOSTED_AUTHORITY,
                &metas[1],
                &[("authority_package", Json::from("com.attacker.app"))],
            ),
            params(
                PROBE_HOSTED_AUTHORITY,
                &metas[1],
                &[("exported", Json::Bool(false))],
            ),
            params(
                PROBE_HOSTED_AUTHORITY,
                &metas[2],
                &[("permission", Json::from("x.P"))],
            ),
            // The foreign service without the peer as authority_package,
            // in another package, or with another meta-data set.
            params(PROBE_B_HOSTED_AUTHORITY, &probe.foreign_metas()[0], &[]),
            params(
                PROBE_B_HOSTED_AUTHORITY,
                &probe.foreign_metas()[0],
                &[
                    ("package", Json::from("com.attacker.app")),
                    ("authority_package", Json::from(PROBE_B_PACKAGE)),
                ],
            ),
            params(
                PROBE_B_HOSTED_AUTHORITY,
                &metas[0],
                &[("authority_package", Json::from(PROBE_B_PACKAGE))],
            ),
            // The peer's provider is the peer's to answer.
            params(
                PROBE_B_HOSTED_AUTHORITY,
                &BTreeMap::new(),
                &[("discoverable", Json::Bool(false))],
            ),
        ] {
            let e = p.check_host("a", &bad).unwrap_err();
            assert_eq!(e.kind, ErrorKind::Unsupported, "{bad:?}");
            assert!(Hosting::Open.check_host("a", &bad).is_ok());
        }
        let e = p
            .check_host(
                "a",
                &params(
                    PROBE_HOSTED_AUTHORITY,
                    &metas[0],
                    &[("discoverable", Json::from("no"))],
                ),
            )
            .unwrap_err();
        assert_eq!(e.kind, ErrorKind::BadRequest);
        // A confirmation's PendingIntent, nested as a CETP error carries it.
        let nested = |v: Value| {
            let mut inner = Bundle::default();
            inner.0.insert("resolution".into(), v);
            let mut b = Bundle::default();
            b.0.insert("error".into(), Value::Bundle(inner));
            b
        };
        let intent = |immutable: Option<bool>, activity: Option<bool>| {
            nested(Value::PendingIntent(cetp_proto::PendingIntentValue {
                handle: "pi-1".into(),
                creator_package: None,
                creator_uid: None,
                immutable,
                activity,
            }))
        };
        for (outcome, played) in [
            (
                ReplyOutcome::Throw {
                    class: "java.lang.SecurityException".into(),
                    message: None,
                },
                true,
            ),
            (
                ReplyOutcome::Throw {
                    class: "java.io.IOException".into(),
                    message: None,
                },
                false,
            ),
            (
                ReplyOutcome::Fail {
                    kind: ErrorKind::Timeout,
                },
                true,
            ),
            (
                ReplyOutcome::Fail {
                    kind: ErrorKind::ProviderDied,
                },
                true,
            ),
            (
                ReplyOutcome::Fail {
                    kind: ErrorKind::TransactionTooLarge,
                },
                false,
            ),
            (
                ReplyOutcome::Result {
                    result: Some(Bundle::default()),
                    fd_data: Some(vec![1]),
                },
                true,
            ),
            // The probe's own confirmation intent: immutable, an activity,
            // whether the script says so or leaves it to the device.
            (
                ReplyOutcome::Result {
                    result: Some(intent(None, None)),
                    fd_data: None,
                },
                true,
            ),
            (
                ReplyOutcome::Result {
                    result: Some(intent(Some(true), Some(true))),
                    fd_data: None,
                },
                true,
            ),
            (
                ReplyOutcome::Result {
                    result: Some(intent(Some(false), Some(true))),
                    fd_data: None,
                },
                false,
            ),
            (
                ReplyOutcome::EndlessFd {
                    result: Some(intent(Some(true), Some(false))),
                    fill: b' ',
                },
                false,
            ),
            (
                ReplyOutcome::Result {
                    result: Some(nested(Value::Fd(FdValue {
                        handle: "fd-1".into(),
                    }))),
                    fd_data: None,
                },
                false,
            ),
            (
                ReplyOutcome::Result {
                    result: Some(nested(Value::Other {
                        class: "android.os.Binder".into(),
                    })),
                    fd_data: None,
                },
                false,
            ),
            (
                ReplyOutcome::EndlessFd {
                    result: None,
                    fill: b' ',
                },
                true,
            ),
        ] {
            let r = reply(outcome.clone());
            assert_eq!(p.check_reply(&r).is_ok(), played, "{outcome:?}");
            assert!(Hosting::Open.check_reply(&r).is_ok());
        }
    }
}
