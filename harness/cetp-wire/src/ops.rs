//! Typed parameters, answers and events of every probe-wire op.
//!
//! Decoders ignore members they do not know (probe wire: "Both sides MUST
//! ignore unknown fields"); where a device may add facts worth reporting
//! (hello, errors, events) the unknown members are kept in `extra`.
//! Nullable members accept absent as `null`; encoders always write them.

use crate::bundle::{opt_bundle, opt_bundle_to_json};
use crate::error::{Path, WireDecodeError};
use crate::fields::{self, Fields};
use crate::frame::{ErrorKind, Event, Frame, Request};
use crate::json::{Json, Map};
use cetp_proto::bundle::Bundle;
use cetp_proto::provider::{CallerIdentity, Decision, ServiceManifest};
use std::collections::BTreeMap;

type Result<T> = std::result::Result<T, WireDecodeError>;

const U64: &str = "an unsigned 64-bit integer";
const I64: &str = "a 64-bit integer";
const U32: &str = "an unsigned 32-bit integer";
const I32: &str = "a 32-bit integer";

/// The ops this crate knows, in the order of probe-wire.md.
pub const KNOWN_OPS: [&str; 9] = [
    "hello",
    "discover",
    "call",
    "read_fd",
    "close_fd",
    "resolve",
    "restart_provider",
    "host_provider",
    "reply",
];

fn map_of<const N: usize>(entries: [(&str, Json); N]) -> Map {
    entries
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
}

fn strings(items: &[String]) -> Json {
    Json::Array(items.iter().map(|s| Json::from(s.as_str())).collect())
}

fn string_map(m: &BTreeMap<String, String>) -> Json {
    Json::Object(
        m.iter()
            .map(|(k, v)| (k.clone(), Json::from(v.as_str())))
            .collect(),
    )
}

fn with_extra(mut m: Map, extra: &Map) -> Map {
    for (k, v) in extra {
        m.entry(k.clone()).or_insert_with(|| v.clone());
    }
    m
}

/// The answer payload (`ok`) of an op.
pub trait OkPayload: Sized {
    /// Encodes the payload as the `ok` member of a final answer.
    fn to_ok(&self) -> Map;
    /// Decodes `ok`; error paths point into the frame (`/ok/...`).
    fn from_ok(ok: &Map) -> Result<Self>;

    /// The final answer to request `id` carrying this payload.
    fn to_frame(&self, id: u64) -> Frame {
        Frame::ok(id, self.to_ok())
    }
}

/// The `{}` answer of `close_fd`, `restart_provider`, `host_provider`, `reply`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Empty;

impl OkPayload for Empty {
    fn to_ok(&self) -> Map {
        Map::new()
    }
    fn from_ok(_: &Map) -> Result<Self> {
        Ok(Empty)
    }
}

// ---------------------------------------------------------------------------
// Requests

/// A request with typed parameters.
#[derive(Clone, Debug, PartialEq)]
pub enum OpRequest {
    /// `hello`: the host's first request on a connection.
    Hello,
    /// `discover`: every service that answers the TOOL_PROVIDER action.
    Discover,
    /// `call`: one `ContentResolver.call` to a Provider.
    Call(CallParams),
    /// `read_fd`: read a result descriptor once, then close it.
    ReadFd(ReadFdParams),
    /// `close_fd`: close a descriptor unread.
    CloseFd {
        /// The `fd-N` handle.
        handle: String,
    },
    /// `resolve`: launch a PendingIntent and play one user decision.
    Resolve(ResolveParams),
    /// `restart_provider`: kill the Provider's process as `am force-stop` does.
    RestartProvider {
        /// The Provider's package.
        package: String,
    },
    /// `host_provider`: export a Provider whose answers the host scripts
    /// (Consumer conformance).
    HostProvider(HostProviderParams),
    /// `reply`: the scripted answer to one `incoming_call`.
    Reply(ReplyParams),
    /// An op this crate does not know; a device answers `unknown_op`.
    Unknown {
        /// The op's name.
        op: String,
        /// Its parameters, undecoded.
        params: Map,
    },
}

impl OpRequest {
    /// The op's name on the wire.
    pub fn op(&self) -> &str {
        match self {
            OpRequest::Hello => "hello",
            OpRequest::Discover => "discover",
            OpRequest::Call(_) => "call",
            OpRequest::ReadFd(_) => "read_fd",
            OpRequest::CloseFd { .. } => "close_fd",
            OpRequest::Resolve(_) => "resolve",
            OpRequest::RestartProvider { .. } => "restart_provider",
            OpRequest::HostProvider(_) => "host_provider",
            OpRequest::Reply(_) => "reply",
            OpRequest::Unknown { op, .. } => op,
        }
    }

    /// The parameters as written on the wire (every member but `id` and `op`).
    pub fn params(&self) -> Map {
        match self {
            OpRequest::Hello | OpRequest::Discover => Map::new(),
            OpRequest::Call(p) => p.to_params(),
            OpRequest::ReadFd(p) => map_of([
                ("handle", Json::from(p.handle.as_str())),
                ("max_bytes", Json::from(p.max_bytes)),
            ]),
            OpRequest::CloseFd { handle } => map_of([("handle", Json::from(handle.as_str()))]),
            OpRequest::Resolve(p) => p.to_params(),
            OpRequest::RestartProvider { package } => {
                map_of([("package", Json::from(package.as_str()))])
            }
            OpRequest::HostProvider(p) => with_extra(
                map_of([
                    ("authority", Json::from(p.authority.as_str())),
                    ("meta", string_map(&p.meta)),
                ]),
                &p.extra,
            ),
            OpRequest::Reply(p) => p.to_params(),
            OpRequest::Unknown { params, .. } => params.clone(),
        }
    }

    /// This request as a [`Request`] with id `id`.
    pub fn to_request(&self, id: u64) -> Request {
        Request {
            id,
            op: self.op().to_string(),
            params: self.params(),
        }
    }

    /// This request as a frame with id `id`.
    pub fn to_frame(&self, id: u64) -> Frame {
        Frame::Request(self.to_request(id))
    }

    /// Decodes the parameters of a request for its op.
    pub fn decode(req: &Request) -> Result<OpRequest> {
        let f = Fields::new(&req.params, Path::ROOT);
        Ok(match req.op.as_str() {
            "hello" => OpRequest::Hello,
            "discover" => OpRequest::Discover,
            "call" => OpRequest::Call(CallParams::decode(&f)?),
            "read_fd" => OpRequest::ReadFd(ReadFdParams {
                handle: f.string("handle")?,
                max_bytes: f.integer("max_bytes", U64)?,
            }),
            "close_fd" => OpRequest::CloseFd {
                handle: f.string("handle")?,
            },
            "resolve" => OpRequest::Resolve(ResolveParams::decode(&f)?),
            "restart_provider" => OpRequest::RestartProvider {
                package: f.string("package")?,
            },
            "host_provider" => OpRequest::HostProvider(HostProviderParams {
                authority: f.string("authority")?,
                meta: f.string_map("meta")?,
                extra: f.extra(&["authority", "meta"]),
            }),
            "reply" => OpRequest::Reply(ReplyParams::decode(&f)?),
            other => OpRequest::Unknown {
                op: other.to_string(),
                params: req.params.clone(),
            },
        })
    }
}

impl Request {
    /// Typed parameters; see [`OpRequest::decode`].
    pub fn decode_op(&self) -> Result<OpRequest> {
        OpRequest::decode(self)
    }
}

/// `call`: `ContentResolver.call(Uri.parse("content://" + authority), ...)`.
#[derive(Clone, Debug, PartialEq)]
pub struct CallParams {
    /// The Provider's authority (the URI called is `content://` + it).
    pub authority: String,
    /// The CETP method (`negotiate`, `execute_tool`, ...).
    pub method: String,
    /// The `arg` string of `call()`; `None` is Java null.
    pub arg: Option<String>,
    /// The extras Bundle; `None` is Java null.
    pub extras: Option<Bundle>,
    /// How long the device waits for `call()` before answering `timeout`.
    pub timeout_ms: u64,
}

impl CallParams {
    fn to_params(&self) -> Map {
        map_of([
            ("authority", Json::from(self.authority.as_str())),
            ("method", Json::from(self.method.as_str())),
            ("arg", Json::from(self.arg.clone())),
            ("extras", opt_bundle_to_json(self.extras.as_ref())),
            ("timeout_ms", Json::from(self.timeout_ms)),
        ])
    }

    fn decode(f: &Fields<'_, '_>) -> Result<CallParams> {
        Ok(CallParams {
            authority: f.string("authority")?,
            method: f.string("method")?,
            arg: f.opt_string("arg")?,
            extras: opt_bundle(f, "extras")?,
            timeout_ms: f.integer("timeout_ms", U64)?,
        })
    }
}

/// `read_fd`: read a result descriptor once, to EOF or `max_bytes`, then
/// close it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadFdParams {
    /// The `fd-N` handle from a call's result.
    pub handle: String,
    /// Most bytes to read; the answer's `eof` is false when data was still
    /// pending.
    pub max_bytes: u64,
}

/// `resolve`: launch a PendingIntent and play one decision in its UI.
#[derive(Clone, Debug, PartialEq)]
pub struct ResolveParams {
    /// The `pi-N` handle from a call's result.
    pub handle: String,
    /// The user's decision to play: approve, deny or dismiss.
    pub decision: Decision,
    /// How long to wait for the activity to finish.
    pub timeout_ms: u64,
    /// UI automation selectors from the vendor's profile; opaque here.
    pub ui: Option<Map>,
}

impl ResolveParams {
    fn to_params(&self) -> Map {
        let mut m = map_of([
            ("handle", Json::from(self.handle.as_str())),
            ("decision", Json::from(self.decision.as_str())),
            ("timeout_ms", Json::from(self.timeout_ms)),
        ]);
        if let Some(ui) = &self.ui {
            m.insert("ui".into(), Json::Object(ui.clone()));
        }
        m
    }

    fn decode(f: &Fields<'_, '_>) -> Result<ResolveParams> {
        let handle = f.string("handle")?;
        let decision_text = f.string("decision")?;
        let decision =
            Decision::parse(&decision_text).ok_or_else(|| WireDecodeError::BadValue {
                path: f.path.key("decision").render(),
                expected: "`approve`, `deny` or `dismiss`",
                found: format!("{decision_text:?}"),
            })?;
        let timeout_ms = f.integer("timeout_ms", U64)?;
        let ui = f
            .opt("ui")
            .map(|v| fields::object(v, &f.path.key("ui")).cloned())
            .transpose()?;
        Ok(ResolveParams {
            handle,
            decision,
            timeout_ms,
            ui,
        })
    }
}

/// `host_provider`: export a Provider whose answers the host scripts.
#[derive(Clone, Debug, PartialEq)]
pub struct HostProviderParams {
    /// The authority the hosted Provider answers for.
    pub authority: String,
    /// The hosted service's meta-data (`com.clawseed.tools.*`), as raw strings.
    pub meta: BTreeMap<String, String>,
    /// Members other than `authority` and `meta`, kept.
    pub extra: Map,
}

/// `reply`: the scripted answer to one `incoming_call`.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplyParams {
    /// The call id (`c-N`) of the `incoming_call` this answers.
    pub call: String,
    /// What the hosted Provider does.
    pub outcome: ReplyOutcome,
    /// Wait before answering; absent means 0.
    pub delay_ms: u64,
}

/// What a hosted Provider does with one incoming call.
#[derive(Clone, Debug, PartialEq)]
pub enum ReplyOutcome {
    /// Return this Bundle (or null); `fd_data` becomes its `result_fd`.
    Result {
        /// The Bundle returned; `None` is null.
        result: Option<Bundle>,
        /// Bytes handed to the caller as the reply's `result_fd`, if any.
        fd_data: Option<Vec<u8>>,
    },
    /// Throw an exception of this class instead.
    Throw {
        /// The Java exception class thrown.
        class: String,
        /// The exception's message, if any.
        message: Option<String>,
    },
    /// Extension (simulated device, `hello`'s `reply_extensions`): the
    /// caller's call fails as this device error instead of returning:
    /// `timeout` (the Provider never answers within the caller's timeout) or
    /// `provider_died` (its process dies during the call).
    Fail {
        /// The device error the caller's call fails as.
        kind: ErrorKind,
    },
    /// Extension: return this Bundle with a `result_fd` that never reaches
    /// EOF (`fill` repeated forever).
    EndlessFd {
        /// The Bundle returned; `None` is null.
        result: Option<Bundle>,
        /// The byte the descriptor repeats.
        fill: u8,
    },
}

impl ReplyParams {
    fn to_params(&self) -> Map {
        let mut m = map_of([
            ("call", Json::from(self.call.as_str())),
            ("delay_ms", Json::from(self.delay_ms)),
        ]);
        match &self.outcome {
            ReplyOutcome::Result { result, fd_data } => {
                m.insert("result".into(), opt_bundle_to_json(result.as_ref()));
                if let Some(data) = fd_data {
                    m.insert("fd_data".into(), Json::from(fields::base64_text(data)));
                }
            }
            ReplyOutcome::Throw { class, message } => {
                let mut t = map_of([("class", Json::from(class.as_str()))]);
                if let Some(msg) = message {
                    t.insert("message".into(), Json::from(msg.as_str()));
                }
                m.insert("throw".into(), Json::Object(t));
            }
            ReplyOutcome::Fail { kind } => {
                m.insert("fail".into(), Json::from(kind.as_str()));
            }
            ReplyOutcome::EndlessFd { result, fill } => {
                m.insert("result".into(), opt_bundle_to_json(result.as_ref()));
                m.insert("fd_endless".into(), Json::from(u64::from(*fill)));
            }
        }
        m
    }

    fn decode(f: &Fields<'_, '_>) -> Result<ReplyParams> {
        let call = f.string("call")?;
        if let Some(kind) = f.opt_string("fail")?.map(|k| ErrorKind::parse(&k)) {
            if f.map.contains_key("result") || f.map.contains_key("throw") {
                return Err(WireDecodeError::BadValue {
                    path: f.path.key("fail").render(),
                    expected: "`fail` alone, without `result` or `throw`",
                    found: "both".into(),
                });
            }
            return Ok(ReplyParams {
                call,
                outcome: ReplyOutcome::Fail { kind },
                delay_ms: f.opt_integer("delay_ms", U64)?.unwrap_or(0),
            });
        }
        if let Some(fill) = f.opt_integer::<u64>("fd_endless", U64)? {
            return Ok(ReplyParams {
                call,
                outcome: ReplyOutcome::EndlessFd {
                    result: opt_bundle(f, "result")?,
                    fill: u8::try_from(fill).map_err(|_| WireDecodeError::BadValue {
                        path: f.path.key("fd_endless").render(),
                        expected: "a byte value 0..=255",
                        found: fill.to_string(),
                    })?,
                },
                delay_ms: f.opt_integer("delay_ms", U64)?.unwrap_or(0),
            });
        }
        let outcome = match (f.map.contains_key("result"), f.map.contains_key("throw")) {
            (true, true) => {
                return Err(WireDecodeError::BadValue {
                    path: f.path.key("throw").render(),
                    expected: "either `result` or `throw`",
                    found: "both".into(),
                })
            }
            (false, false) => {
                return Err(WireDecodeError::MissingField {
                    path: f.path.key("result").render(),
                    expected: "a Bundle, null, or a `throw` object instead",
                })
            }
            (true, false) => ReplyOutcome::Result {
                result: opt_bundle(f, "result")?,
                fd_data: f
                    .opt("fd_data")
                    .map(|v| fields::base64(v, &f.path.key("fd_data")))
                    .transpose()?,
            },
            (false, true) => {
                let tp = f.path.key("throw");
                let t = Fields::new(f.object("throw")?, tp);
                ReplyOutcome::Throw {
                    class: t.string("class")?,
                    message: t.opt_string("message")?,
                }
            }
        };
        Ok(ReplyParams {
            call,
            outcome,
            delay_ms: f.opt_integer("delay_ms", U64)?.unwrap_or(0),
        })
    }
}

// ---------------------------------------------------------------------------
// Answers

/// Runs `decode` with fields rooted at `/ok`.
fn decode_ok<T>(ok: &Map, decode: impl FnOnce(&Fields<'_, '_>) -> Result<T>) -> Result<T> {
    let root = Path::ROOT;
    let okp = root.key("ok");
    let f = Fields::new(ok, okp);
    decode(&f)
}

/// The caller identity a connection speaks for.
#[derive(Clone, Debug, PartialEq)]
pub struct Identity {
    /// The endpoint's name (`a`, `b`).
    pub name: String,
    /// The app's Linux UID.
    pub uid: u32,
    /// The packages sharing that UID.
    pub packages: Vec<String>,
    /// SHA-256 of each signing certificate, in hex.
    pub cert_sha256: Vec<String>,
    /// Members the device added, kept.
    pub extra: Map,
}

impl Identity {
    /// This identity as a Provider sees its caller.
    pub fn caller_identity(&self) -> CallerIdentity {
        CallerIdentity {
            uid: self.uid,
            packages: self.packages.clone(),
            cert_sha256: self.cert_sha256.clone(),
        }
    }

    fn to_json(&self) -> Json {
        Json::Object(with_extra(
            map_of([
                ("name", Json::from(self.name.as_str())),
                ("uid", Json::from(self.uid)),
                ("packages", strings(&self.packages)),
                ("cert_sha256", strings(&self.cert_sha256)),
            ]),
            &self.extra,
        ))
    }

    fn decode(f: &Fields<'_, '_>) -> Result<Identity> {
        Ok(Identity {
            name: f.string("name")?,
            uid: f.integer("uid", U32)?,
            packages: f.string_array("packages")?,
            cert_sha256: f.string_array("cert_sha256")?,
            extra: f.extra(&["name", "uid", "packages", "cert_sha256"]),
        })
    }
}

/// What the device is (`hello` → `device`).
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceInfo {
    /// Android API level.
    pub sdk_int: u32,
    /// Device model.
    pub model: String,
    /// Build fingerprint.
    pub fingerprint: String,
    /// Members the device added, kept.
    pub extra: Map,
}

/// `hello`: who and what the device is.
#[derive(Clone, Debug, PartialEq)]
pub struct HelloOk {
    /// Probe wire version the device speaks ([`crate::WIRE_VERSION`] here).
    pub wire: u32,
    /// `<name>/<version>`.
    pub probe: String,
    /// The caller identity this connection speaks for.
    pub identity: Identity,
    /// What the device is.
    pub device: DeviceInfo,
    /// Device clock, Unix epoch milliseconds.
    pub now_ms: i64,
    /// Ops the device supports.
    pub ops: Vec<String>,
    /// Members the device added (`consumers`, `reply_extensions`, ...), kept.
    pub extra: Map,
}

impl OkPayload for HelloOk {
    fn to_ok(&self) -> Map {
        let device = Json::Object(with_extra(
            map_of([
                ("sdk_int", Json::from(self.device.sdk_int)),
                ("model", Json::from(self.device.model.as_str())),
                ("fingerprint", Json::from(self.device.fingerprint.as_str())),
            ]),
            &self.device.extra,
        ));
        with_extra(
            map_of([
                ("wire", Json::from(self.wire)),
                ("probe", Json::from(self.probe.as_str())),
                ("identity", self.identity.to_json()),
                ("device", device),
                ("now_ms", Json::from(self.now_ms)),
                ("ops", strings(&self.ops)),
            ]),
            &self.extra,
        )
    }

    fn from_ok(ok: &Map) -> Result<Self> {
        decode_ok(ok, |f| {
            let wire = f.integer("wire", U32)?;
            let probe = f.string("probe")?;
            let identity =
                Identity::decode(&Fields::new(f.object("identity")?, f.path.key("identity")))?;
            let dp = f.path.key("device");
            let d = Fields::new(f.object("device")?, dp);
            let device = DeviceInfo {
                sdk_int: d.integer("sdk_int", U32)?,
                model: d.string("model")?,
                fingerprint: d.string("fingerprint")?,
                extra: d.extra(&["sdk_int", "model", "fingerprint"]),
            };
            Ok(HelloOk {
                wire,
                probe,
                identity,
                device,
                now_ms: f.integer("now_ms", I64)?,
                ops: f.string_array("ops")?,
                extra: f.extra(&["wire", "probe", "identity", "device", "now_ms", "ops"]),
            })
        })
    }
}

/// `discover`: every service answering the TOOL_PROVIDER action.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DiscoverOk {
    /// One entry per service, with its meta-data and the authority's owner.
    pub providers: Vec<ServiceManifest>,
}

/// One `discover` entry as the probe wire writes it (also the run journal's
/// encoding of a manifest).
pub fn manifest_to_json(m: &ServiceManifest) -> Json {
    let mut out = map_of([
        ("package", Json::from(m.package.as_str())),
        ("service", Json::from(m.service.as_str())),
        ("exported", Json::Bool(m.exported)),
        ("permission", Json::from(m.permission.clone())),
        ("meta", string_map(&m.meta)),
        ("authority_package", Json::from(m.authority_package.clone())),
    ]);
    // A compatible extension: written only when the device knows it.
    if !m.signing_cert_sha256.is_empty() {
        out.insert(
            "signing_cert_sha256".into(),
            Json::Array(
                m.signing_cert_sha256
                    .iter()
                    .map(|c| Json::from(c.as_str()))
                    .collect(),
            ),
        );
    }
    if let Some(types) = &m.meta_types {
        out.insert("meta_types".into(), string_map(types));
    }
    Json::Object(out)
}

/// Decodes one `discover` entry; error paths are relative to `v`.
pub fn manifest_from_json(v: &Json) -> Result<ServiceManifest> {
    let path = Path::ROOT;
    manifest_from(&Fields::new(fields::object(v, &path)?, path))
}

fn manifest_from(f: &Fields<'_, '_>) -> Result<ServiceManifest> {
    Ok(ServiceManifest {
        package: f.string("package")?,
        service: f.string("service")?,
        exported: f.boolean("exported")?,
        permission: f.opt_string("permission")?,
        meta: f.string_map("meta")?,
        authority_package: f.opt_string("authority_package")?,
        signing_cert_sha256: f
            .opt_string_array("signing_cert_sha256")?
            .unwrap_or_default(),
        meta_types: f
            .opt("meta_types")
            .map(|_| f.string_map("meta_types"))
            .transpose()?,
    })
}

impl OkPayload for DiscoverOk {
    fn to_ok(&self) -> Map {
        map_of([(
            "providers",
            Json::Array(self.providers.iter().map(manifest_to_json).collect()),
        )])
    }

    fn from_ok(ok: &Map) -> Result<Self> {
        decode_ok(ok, |f| {
            let pp = f.path.key("providers");
            let items = fields::array(f.req("providers", "an array")?, &pp)?;
            let providers = items
                .iter()
                .enumerate()
                .map(|(i, item)| {
                    let ip = pp.index(i);
                    manifest_from(&Fields::new(fields::object(item, &ip)?, ip))
                })
                .collect::<Result<_>>()?;
            Ok(DiscoverOk { providers })
        })
    }
}

/// `call`: the Provider's Bundle (`None` when `call()` returned null).
#[derive(Clone, Debug, PartialEq)]
pub struct CallOk {
    /// The Provider's Bundle; `None` when `call()` returned null.
    pub result: Option<Bundle>,
    /// Time the call took on the device, in microseconds.
    pub elapsed_us: u64,
}

impl OkPayload for CallOk {
    fn to_ok(&self) -> Map {
        map_of([
            ("result", opt_bundle_to_json(self.result.as_ref())),
            ("elapsed_us", Json::from(self.elapsed_us)),
        ])
    }

    fn from_ok(ok: &Map) -> Result<Self> {
        decode_ok(ok, |f| {
            Ok(CallOk {
                result: opt_bundle(f, "result")?,
                elapsed_us: f.integer("elapsed_us", U64)?,
            })
        })
    }
}

/// `read_fd`: what was read (the bytes came in chunks before this).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadFdOk {
    /// How many bytes were read.
    pub bytes: u64,
    /// Lowercase hex SHA-256 of the bytes read.
    pub sha256: String,
    /// Whether reading reached EOF (false when it stopped at `max_bytes`
    /// with data pending).
    pub eof: bool,
    /// The error the writer reported through a reliable pipe, if any.
    pub error: Option<String>,
    /// Extension: whether the descriptor was open for writing (its access
    /// mode); written only when the device knows.
    pub writable: Option<bool>,
}

impl OkPayload for ReadFdOk {
    fn to_ok(&self) -> Map {
        let mut m = map_of([
            ("bytes", Json::from(self.bytes)),
            ("sha256", Json::from(self.sha256.as_str())),
            ("eof", Json::Bool(self.eof)),
            ("error", Json::from(self.error.clone())),
        ]);
        if let Some(w) = self.writable {
            m.insert("writable".into(), Json::Bool(w));
        }
        m
    }

    fn from_ok(ok: &Map) -> Result<Self> {
        decode_ok(ok, |f| {
            Ok(ReadFdOk {
                bytes: f.integer("bytes", U64)?,
                sha256: f.string("sha256")?,
                eof: f.boolean("eof")?,
                error: f.opt_string("error")?,
                writable: f.opt_boolean("writable")?,
            })
        })
    }
}

/// `resolve`: what launching the PendingIntent and playing the decision did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolveOk {
    /// Whether the activity was launched.
    pub launched: bool,
    /// Whether the decision was played in the Provider's UI.
    pub decision_applied: bool,
    /// -1 RESULT_OK, 0 RESULT_CANCELED.
    pub result_code: i32,
    /// Optional extension: the package of the activity that came to the
    /// foreground, when the device can tell. Absent from devices that do not
    /// report it.
    pub launched_package: Option<String>,
}

impl OkPayload for ResolveOk {
    fn to_ok(&self) -> Map {
        let mut m = map_of([
            ("launched", Json::Bool(self.launched)),
            ("decision_applied", Json::Bool(self.decision_applied)),
            ("result_code", Json::from(self.result_code)),
        ]);
        if let Some(p) = &self.launched_package {
            m.insert("launched_package".into(), Json::from(p.as_str()));
        }
        m
    }

    fn from_ok(ok: &Map) -> Result<Self> {
        decode_ok(ok, |f| {
            Ok(ResolveOk {
                launched: f.boolean("launched")?,
                decision_applied: f.boolean("decision_applied")?,
                result_code: f.integer("result_code", I32)?,
                launched_package: f.opt_string("launched_package")?,
            })
        })
    }
}

impl From<ResolveOk> for cetp_proto::provider::ResolveOutcome {
    fn from(r: ResolveOk) -> Self {
        cetp_proto::provider::ResolveOutcome {
            launched: r.launched,
            decision_applied: r.decision_applied,
            result_code: r.result_code,
            launched_package: r.launched_package,
        }
    }
}

// ---------------------------------------------------------------------------
// Events

/// The app calling a hosted Provider.
#[derive(Clone, Debug, PartialEq)]
pub struct Caller {
    /// The calling app's UID.
    pub uid: u32,
    /// The calling app's packages.
    pub packages: Vec<String>,
    /// Members the device added, kept.
    pub extra: Map,
}

/// `incoming_call`: a Consumer called the Provider the host scripts.
#[derive(Clone, Debug, PartialEq)]
pub struct IncomingCall {
    /// The call id (`c-N`) a `reply` answers.
    pub call: String,
    /// The calling app.
    pub caller: Caller,
    /// The CETP method called.
    pub method: String,
    /// The `arg` of the call; `None` is Java null.
    pub arg: Option<String>,
    /// The extras Bundle; `None` is Java null.
    pub extras: Option<Bundle>,
    /// Device clock when the call came in, Unix epoch milliseconds.
    pub now_ms: i64,
    /// Members the device added, kept.
    pub extra: Map,
}

impl IncomingCall {
    /// The event's name on the wire.
    pub const EVENT: &'static str = "incoming_call";

    /// This call as an event.
    pub fn to_event(&self) -> Event {
        let caller = Json::Object(with_extra(
            map_of([
                ("uid", Json::from(self.caller.uid)),
                ("packages", strings(&self.caller.packages)),
            ]),
            &self.caller.extra,
        ));
        Event {
            event: Self::EVENT.to_string(),
            fields: with_extra(
                map_of([
                    ("call", Json::from(self.call.as_str())),
                    ("caller", caller),
                    ("method", Json::from(self.method.as_str())),
                    ("arg", Json::from(self.arg.clone())),
                    ("extras", opt_bundle_to_json(self.extras.as_ref())),
                    ("now_ms", Json::from(self.now_ms)),
                ]),
                &self.extra,
            ),
        }
    }

    /// This call as an event frame.
    pub fn to_frame(&self) -> Frame {
        Frame::Event(self.to_event())
    }

    /// Decodes an `incoming_call` event; other events are a `bad_value`.
    pub fn from_event(e: &Event) -> Result<IncomingCall> {
        if e.event != Self::EVENT {
            return Err(WireDecodeError::BadValue {
                path: "/event".into(),
                expected: "`incoming_call`",
                found: format!("{:?}", e.event),
            });
        }
        let f = Fields::new(&e.fields, Path::ROOT);
        let call = f.string("call")?;
        let cp = f.path.key("caller");
        let c = Fields::new(f.object("caller")?, cp);
        let caller = Caller {
            uid: c.integer("uid", U32)?,
            packages: c.string_array("packages")?,
            extra: c.extra(&["uid", "packages"]),
        };
        Ok(IncomingCall {
            call,
            caller,
            method: f.string("method")?,
            arg: f.opt_string("arg")?,
            extras: opt_bundle(&f, "extras")?,
            now_ms: f.integer("now_ms", I64)?,
            extra: f.extra(&["call", "caller", "method", "arg", "extras", "now_ms"]),
        })
    }
}
