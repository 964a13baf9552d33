//! A device that hosts the hostile Provider and a Consumer under test over
//! the probe wire (`host_provider`, `incoming_call`, `reply`,
//! `intent_launched`, `consumer_act`): the simulated device's built-in
//! Consumer, or any device that offers `consumer_act`.

use cetp_consumer::{ConsumerDevice, DeviceEvent, HostedAs, WireAnswer};
use cetp_reference::consumer::ActOutcome;
use cetp_transport::client::{ClientConfig, EventStream, ProbeClient};
use cetp_wire::json::Json as WireJson;
use cetp_wire::ops::{HostProviderParams, IncomingCall, OpRequest, ReplyOutcome, ReplyParams};
use cetp_wire::{ErrorKind, Map};
use serde_json::Value as Json;
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::runtime::Runtime;

/// How long one act may take, the Consumer's retries and waits included.
const ACT_TIMEOUT: Duration = Duration::from_secs(120);
const OP_TIMEOUT: Duration = Duration::from_secs(30);
/// How long `host` retries an authority the device still holds for a
/// connection that has closed.
const HOST_RETRY: Duration = Duration::from_secs(3);

/// Who makes the Consumer act.
#[derive(Clone, Debug)]
pub enum Actor {
    /// The device's own `consumer_act`, for the Consumer of this name.
    Device(String),
    /// A vendor's driver command (a Consumer profile), run on the host once
    /// per act; it prints the outcome as its last stdout line.
    Driver {
        /// The driver's argv, with the action's placeholders still in it.
        command: Vec<String>,
        /// How long one act may run before the driver is killed.
        timeout: Duration,
    },
}

/// The probe of an adb device, made ready as `cetp run` makes it
/// (finding 8 of issue 27): the `install=` APKs and then the `probe_apk=`
/// ones installed, the probe started as `am instrument -w -r` (unless
/// `start=0`) and waited for until it answers `hello`. It lives for the
/// whole `cetp consumer` run, across the scenarios' connections, and ends
/// the probe when dropped.
pub struct AdbProbe {
    rt: Runtime,
    probe: Option<cetp_transport::adb::ProbeInstrumentation>,
    /// Identity b's probe, the peer that hosts a second Provider or
    /// another package's ContentProvider (unless `b=off`).
    probe_b: Option<cetp_transport::adb::ProbeInstrumentation>,
}

impl AdbProbe {
    /// Makes the probe of the adb TARGET string `target` ready, or says
    /// which step failed.
    pub fn prepare(target: &str) -> Result<AdbProbe, String> {
        let spec = match crate::TargetSpec::parse(target).map_err(|e| e.to_string())? {
            crate::TargetSpec::Adb(s) => s,
            _ => return Err(format!("{target:?} is not an adb target")),
        };
        let op_timeout = Duration::from_millis(spec.op_timeout_ms);
        let adb = cetp_transport::adb::Adb::new(cetp_transport::adb::AdbConfig {
            server: spec.server,
            serial: spec.serial.clone(),
            op_timeout,
            relay_through_server: spec.relay_through_server,
            install_timeout: Duration::from_millis(spec.install_timeout_ms),
            ..cetp_transport::adb::AdbConfig::default()
        });
        let rt = runtime()?;
        rt.block_on(adb.check_device())
            .map_err(|e| format!("adb server {}: {e}", spec.server))?;
        rt.block_on(crate::install_apks_async(&adb, &spec))
            .map_err(|(step, e)| format!("{step}: {e}"))?;
        if !spec.start {
            return Ok(AdbProbe {
                rt,
                probe: None,
                probe_b: None,
            });
        }
        let probe = rt
            .block_on(adb.start_probe(&spec.probe_service))
            .map_err(|e| format!("starting {}: {e}", spec.probe_service))?;
        let mut ready = AdbProbe {
            rt,
            probe: Some(probe),
            probe_b: None,
        };
        ready.wait_for_hello(&adb, op_timeout, false)?;
        if spec.b != crate::IdentityB::Off {
            match ready.rt.block_on(adb.start_probe(&spec.probe_b_service)) {
                Ok(b) => {
                    ready.probe_b = Some(b);
                    if let Err(e) = ready.wait_for_hello(&adb, op_timeout, true) {
                        if spec.b == crate::IdentityB::Required {
                            return Err(e);
                        }
                        // Without the peer, the scenarios that need it are
                        // a setup gap, named in the run.
                        eprintln!("cetp: the peer probe (identity b) is not used: {e}");
                    }
                }
                Err(e) if spec.b == crate::IdentityB::Required => {
                    return Err(format!("starting {}: {e}", spec.probe_b_service))
                }
                Err(_) => {}
            }
        }
        Ok(ready)
    }

    /// A probe just started may not listen yet: the device refuses the
    /// socket, and the first request sees the connection closed.
    fn wait_for_hello(
        &self,
        adb: &cetp_transport::adb::Adb,
        op_timeout: Duration,
        b: bool,
    ) -> Result<(), String> {
        let (probe, socket) = if b {
            (self.probe_b.as_ref(), cetp_transport::adb::PROBE_SOCKET_B)
        } else {
            (self.probe.as_ref(), cetp_transport::adb::PROBE_SOCKET_A)
        };
        let probe = probe.expect("started");
        let deadline = std::time::Instant::now() + op_timeout;
        loop {
            let attempt = self.rt.block_on(async {
                let (stream, port) = adb.connect_socket(socket).await?;
                let client = ProbeClient::connect(stream, ClientConfig::default());
                let r = client.request("hello", Map::new(), 0, op_timeout).await;
                client.close();
                let _ = adb.forward_remove(port).await;
                r
            });
            match attempt {
                Ok(_) => return Ok(()),
                Err(e) if probe.has_ended() => {
                    return Err(format!(
                        "`am instrument -w -r {}` ended before the probe served ({}): {e}",
                        probe.component(),
                        probe.output().trim()
                    ))
                }
                Err(e)
                    if crate::probe_not_listening(e.kind())
                        && std::time::Instant::now() + crate::PROBE_RETRY < deadline =>
                {
                    std::thread::sleep(crate::PROBE_RETRY);
                }
                Err(e) => {
                    return Err(format!(
                        "the probe {} did not answer hello: {e}",
                        probe.component()
                    ))
                }
            }
        }
    }

    /// Whether the probe this run started is still running.
    pub fn running(&self) -> bool {
        self.probe.as_ref().is_some_and(|p| !p.has_ended())
    }
}

impl Drop for AdbProbe {
    fn drop(&mut self) {
        for probe in [self.probe_b.take(), self.probe.take()]
            .into_iter()
            .flatten()
        {
            let _ = self.rt.block_on(async {
                tokio::time::timeout(crate::device::PROBE_STOP_TIMEOUT, probe.stop()).await
            });
        }
    }
}

/// The peer probe of a phone (identity b's app, another package): it hosts
/// a second Provider, or the ContentProvider another package's service
/// names.
struct Peer {
    client: ProbeClient,
    events: EventStream,
    /// What it hosts the Provider as (its `hello`'s `hosted_provider`).
    hosted: Option<HostedAs>,
    forward: Option<(cetp_transport::adb::Adb, u16)>,
}

/// A Consumer under test reached over the probe wire: the device hosts the
/// hostile Provider for it and the [`Actor`] makes it act, as the
/// conformance runner's [`ConsumerDevice`].
pub struct WireConsumer {
    rt: Runtime,
    client: ProbeClient,
    events: EventStream,
    actor: Actor,
    peer: Option<Peer>,
    /// Calls answered with `fd_data`, in order (their descriptors' closes
    /// are reported as `fd_closed`).
    fd_calls: Vec<String>,
    /// `fd_closed` events seen: call id → `how`.
    fd_closed: BTreeMap<String, String>,
    /// The Consumers the device offers (`hello`'s `consumers`).
    pub offered: Vec<String>,
    /// The `reply` extensions it plays (`hello`'s `reply_extensions`).
    pub extensions: Vec<String>,
    /// The `fail` kinds it plays (`hello`'s `reply_fail`).
    pub fail_kinds: Vec<ErrorKind>,
    /// What it hosts the Provider as (`hello`'s `hosted_provider`).
    pub hosted: Option<HostedAs>,
    /// It enforces Binder's transaction limit on the hosted Provider's
    /// answers (`hello`'s `binder_transaction_limit: true`).
    pub binder_limit: bool,
    /// The adb forward this connection goes through, removed on drop.
    forward: Option<(cetp_transport::adb::Adb, u16)>,
}

impl Drop for WireConsumer {
    fn drop(&mut self) {
        self.client.close();
        if let Some((adb, port)) = self.forward.take() {
            let _ = self.rt.block_on(adb.forward_remove(port));
        }
        if let Some(mut peer) = self.peer.take() {
            peer.client.close();
            if let Some((adb, port)) = peer.forward.take() {
                let _ = self.rt.block_on(adb.forward_remove(port));
            }
        }
    }
}

/// Most `fd_closed` events and descriptor calls remembered in one scenario
/// (a hostile device may send without end).
const MAX_FD_RECORDS: usize = 1024;

/// Records an `fd_closed` event (bounded; the first report of a call wins).
fn record_fd_closed(fd_closed: &mut BTreeMap<String, String>, fields: &Map) {
    let s = |k: &str| {
        fields
            .get(k)
            .and_then(WireJson::as_str)
            .map(|v| v.chars().take(64).collect::<String>())
    };
    if let (Some(call), Some(how)) = (s("call"), s("how")) {
        if fd_closed.len() < MAX_FD_RECORDS {
            fd_closed.entry(call).or_insert(how);
        }
    }
}

fn to_wire(v: Json) -> Map {
    match WireJson::from(v) {
        WireJson::Object(m) => m,
        _ => Map::new(),
    }
}

impl WireConsumer {
    /// Connects to `addr` (HOST:PORT) and checks that the device offers
    /// `consumer_act` and the Consumer named `consumer`.
    pub fn connect_tcp(addr: &str, consumer: &str) -> Result<WireConsumer, String> {
        WireConsumer::connect(addr, Actor::Device(consumer.to_string()))
    }

    /// Connects to `addr` (HOST:PORT), a device that hosts the hostile
    /// Provider; `actor` makes the Consumer under test act.
    pub fn connect(addr: &str, actor: Actor) -> Result<WireConsumer, String> {
        WireConsumer::connect_with_peer(addr, None, actor)
    }

    /// As [`WireConsumer::connect`], with the peer probe at `peer`
    /// (HOST:PORT of identity b's probe), which must answer.
    pub fn connect_with_peer(
        addr: &str,
        peer: Option<&str>,
        actor: Actor,
    ) -> Result<WireConsumer, String> {
        let rt = runtime()?;
        let stream = rt
            .block_on(cetp_transport::tcp::connect(addr, Duration::from_secs(10)))
            .map_err(|e| format!("cannot connect to {addr}: {e}"))?;
        let peer = match peer {
            Some(p) => {
                let stream = rt
                    .block_on(cetp_transport::tcp::connect(p, Duration::from_secs(10)))
                    .map_err(|e| format!("cannot connect to the peer probe at {p}: {e}"))?;
                Some(Peer::over(&rt, stream, None)?)
            }
            None => None,
        };
        let mut w = WireConsumer::over(rt, stream, addr, actor, None)?;
        w.peer = peer;
        Ok(w)
    }

    /// Connects through an adb server to the probe of a device
    /// (`adb:SERIAL[,server=HOST:PORT]`, as for `cetp run`).
    pub fn connect_adb(target: &str, actor: Actor) -> Result<WireConsumer, String> {
        let spec = match crate::TargetSpec::parse(target).map_err(|e| e.to_string())? {
            crate::TargetSpec::Adb(s) => s,
            _ => return Err(format!("{target:?} is not an adb target")),
        };
        let adb = cetp_transport::adb::Adb::new(cetp_transport::adb::AdbConfig {
            server: spec.server,
            serial: spec.serial.clone(),
            op_timeout: Duration::from_millis(spec.op_timeout_ms),
            relay_through_server: spec.relay_through_server,
            install_timeout: Duration::from_millis(spec.install_timeout_ms),
            ..cetp_transport::adb::AdbConfig::default()
        });
        let rt = runtime()?;
        rt.block_on(adb.check_device())
            .map_err(|e| format!("adb server {}: {e}", spec.server))?;
        let (stream, port) = rt
            .block_on(adb.connect_socket(cetp_transport::adb::PROBE_SOCKET_A))
            .map_err(|e| format!("the probe of {}: {e}", adb.device_label()))?;
        // Identity b's probe, when it runs, is the peer: the scenarios that
        // need a second Provider or another package's ContentProvider are
        // played through it, and are a setup gap without it.
        let reach_b = spec.b != crate::IdentityB::Off;
        let peer = match reach_b
            .then(|| rt.block_on(adb.connect_socket(cetp_transport::adb::PROBE_SOCKET_B)))
        {
            None => None,
            Some(Ok((stream, port))) => match Peer::over(&rt, stream, Some((adb.clone(), port))) {
                Ok(p) => Some(p),
                Err(_) => {
                    let _ = rt.block_on(adb.forward_remove(port));
                    None
                }
            },
            Some(Err(_)) => None,
        };
        let label = adb.device_label();
        let mut w = WireConsumer::over(rt, stream, &label, actor, Some((adb, port)))?;
        w.peer = peer;
        Ok(w)
    }

    fn over(
        rt: Runtime,
        stream: tokio::net::TcpStream,
        addr: &str,
        actor: Actor,
        forward: Option<(cetp_transport::adb::Adb, u16)>,
    ) -> Result<WireConsumer, String> {
        let (client, events) = client_over(&rt, stream)?;
        let mut w = WireConsumer {
            rt,
            client,
            events,
            actor,
            peer: None,
            fd_calls: Vec::new(),
            fd_closed: BTreeMap::new(),
            offered: Vec::new(),
            extensions: Vec::new(),
            fail_kinds: Vec::new(),
            hosted: None,
            binder_limit: false,
            forward,
        };
        let hello = w.op("hello", Map::new(), OP_TIMEOUT)?;
        let strings = |key: &str| -> Vec<String> {
            hello
                .get(key)
                .and_then(WireJson::as_array)
                .map(|a| {
                    a.iter()
                        .take(256)
                        .filter_map(|o| o.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default()
        };
        let ops = strings("ops");
        w.extensions = strings("reply_extensions");
        w.fail_kinds = strings("reply_fail")
            .iter()
            .map(|k| ErrorKind::parse(k))
            .collect();
        let hello_json = WireJson::Object(hello.clone())
            .to_serde()
            .map_err(|e| format!("hello: {e:?}"))?;
        w.hosted = HostedAs::from_hello(&hello_json)?;
        // Only a literal `true` says so: a device that says nothing, or
        // anything else, carries what it is given (a TCP rig).
        w.binder_limit = hello.get("binder_transaction_limit") == Some(&WireJson::Bool(true));
        if !ops.iter().any(|o| o == "host_provider") {
            return Err(format!(
                "the device at {addr} offers no host_provider: it cannot host the hostile Provider"
            ));
        }
        let Actor::Device(consumer) = &w.actor else {
            return Ok(w);
        };
        let consumer = consumer.clone();
        if !ops.iter().any(|o| o == "consumer_act") {
            return Err(format!(
                "the device at {addr} offers no consumer_act: it hosts no Consumer under test (name a driver in a Consumer profile)"
            ));
        }
        w.offered = strings("consumers");
        if !w.offered.contains(&consumer) {
            return Err(format!(
                "the device offers no Consumer named {consumer:?} (it offers {:?})",
                w.offered
            ));
        }
        Ok(w)
    }

    fn op(&self, op: &str, params: Map, timeout: Duration) -> Result<Map, String> {
        let reply = self
            .rt
            .block_on(self.client.request(op, params, 0, timeout))
            .map_err(|e| format!("{op}: {e}"))?;
        reply.result.map_err(|e| format!("{op}: {e}"))
    }
}

impl Peer {
    /// The peer probe over `stream`: it must answer `hello` and offer
    /// `host_provider`.
    fn over(
        rt: &Runtime,
        stream: tokio::net::TcpStream,
        forward: Option<(cetp_transport::adb::Adb, u16)>,
    ) -> Result<Peer, String> {
        let (client, events) = client_over(rt, stream)?;
        let hello = rt
            .block_on(client.request("hello", Map::new(), 0, OP_TIMEOUT))
            .map_err(|e| format!("peer hello: {e}"))?
            .result
            .map_err(|e| format!("peer hello: {e}"))?;
        let offers_hosting = hello
            .get("ops")
            .and_then(WireJson::as_array)
            .is_some_and(|a| {
                a.iter()
                    .take(256)
                    .any(|o| o.as_str() == Some("host_provider"))
            });
        if !offers_hosting {
            client.close();
            return Err("the peer probe offers no host_provider".into());
        }
        let hello_json = WireJson::Object(hello)
            .to_serde()
            .map_err(|e| format!("peer hello: {e:?}"))?;
        Ok(Peer {
            client,
            events,
            hosted: HostedAs::from_hello(&hello_json)?,
            forward,
        })
    }
}

/// Answers one `incoming_call` event through `client` with what `on` says.
/// Returns the call's id when the answer handed out a descriptor of
/// `fd_data`.
async fn answer_call(
    client: &ProbeClient,
    ev: &cetp_wire::Event,
    peer: Option<&str>,
    on: &mut dyn FnMut(DeviceEvent) -> Option<WireAnswer>,
) -> Result<Option<String>, String> {
    let call = IncomingCall::from_event(ev).map_err(|e| format!("incoming_call: {e}"))?;
    let authority = call
        .extra
        .get("authority")
        .and_then(WireJson::as_str)
        .map(str::to_string)
        // The peer hosts one Provider: a call it reports is to that one.
        .or_else(|| peer.map(str::to_string));
    let answer = on(DeviceEvent::Call {
        authority,
        peer: peer.is_some(),
        method: call.method.clone(),
        extras: call.extras.clone().unwrap_or_default(),
        now_ms: call.now_ms,
    });
    let mut fd_call = None;
    let outcome = match answer {
        Some(WireAnswer::Result { bundle, fd_data }) => {
            if fd_data.is_some() {
                fd_call = Some(call.call.clone());
            }
            ReplyOutcome::Result {
                result: Some(bundle),
                fd_data,
            }
        }
        Some(WireAnswer::Throw { class }) => ReplyOutcome::Throw {
            class,
            message: None,
        },
        Some(WireAnswer::Fail { kind }) => ReplyOutcome::Fail { kind },
        Some(WireAnswer::EndlessFd { bundle, fill }) => ReplyOutcome::EndlessFd {
            result: Some(bundle),
            fill,
        },
        None => ReplyOutcome::Result {
            result: None,
            fd_data: None,
        },
    };
    let req = OpRequest::Reply(ReplyParams {
        call: call.call,
        outcome,
        delay_ms: 0,
    });
    let r = client
        .request(req.op(), req.params(), 0, OP_TIMEOUT)
        .await
        .map_err(|e| format!("reply: {e}"))?;
    r.result.map_err(|e| format!("reply: {e}"))?;
    Ok(fd_call)
}

/// A probe-wire client over `stream`, with its event stream.
fn client_over(
    rt: &Runtime,
    stream: tokio::net::TcpStream,
) -> Result<(ProbeClient, EventStream), String> {
    rt.block_on(async {
        let client = ProbeClient::connect(stream, ClientConfig::default());
        let events = client
            .take_events()
            .ok_or("the event stream was already taken")?;
        Ok::<_, String>((client, events))
    })
}

/// Sends `host_provider` through `client`. The device drops the Providers a
/// connection hosted when it sees that connection close, which may come
/// after the next case's connection asks for the same authority (seen on a
/// loaded CI machine): that refusal is retried, for a bounded time.
fn host_through(rt: &Runtime, client: &ProbeClient, p: HostProviderParams) -> Result<(), String> {
    let req = OpRequest::HostProvider(p);
    let until = std::time::Instant::now() + HOST_RETRY;
    loop {
        let r = rt
            .block_on(client.request(req.op(), req.params(), 0, OP_TIMEOUT))
            .map_err(|e| format!("host_provider: {e}"))
            .and_then(|r| r.result.map_err(|e| format!("host_provider: {e}")));
        match r {
            Err(e)
                if e.contains("a provider already answers on authority")
                    && std::time::Instant::now() < until =>
            {
                std::thread::sleep(Duration::from_millis(20));
            }
            r => return r.map(|_| ()),
        }
    }
}

/// The next event of an optional stream; never, without one.
async fn next_event(events: Option<&mut EventStream>) -> Option<cetp_wire::Event> {
    match events {
        Some(e) => e.recv().await,
        None => std::future::pending().await,
    }
}

impl ConsumerDevice for WireConsumer {
    fn host(
        &mut self,
        meta: &BTreeMap<String, String>,
        package: &str,
        authority_package: &str,
    ) -> Result<(), String> {
        let mut extra = Map::new();
        extra.insert("package".into(), WireJson::from(package));
        extra.insert(
            "authority_package".into(),
            WireJson::from(authority_package),
        );
        let p = HostProviderParams {
            authority: meta
                .get("com.clawseed.tools.authority")
                .cloned()
                .unwrap_or_default(),
            meta: meta.clone(),
            extra,
        };
        host_through(&self.rt, &self.client, p)
    }

    fn reply_extensions(&self) -> Vec<String> {
        self.extensions.clone()
    }

    fn reply_fail(&self) -> Vec<ErrorKind> {
        self.fail_kinds.clone()
    }

    fn binder_limit(&self) -> bool {
        self.binder_limit
    }

    fn hosted_as(&self) -> Option<HostedAs> {
        self.hosted.clone()
    }

    fn advance_clock(&mut self, ms: u64) -> Result<(), String> {
        let mut p = Map::new();
        p.insert("ms".into(), WireJson::from(ms));
        self.op("advance_clock", p, OP_TIMEOUT).map(|_| ())
    }

    fn peer_hosted_as(&self) -> Option<HostedAs> {
        self.peer.as_ref().and_then(|p| p.hosted.clone())
    }

    fn host_on_peer(
        &mut self,
        meta: &BTreeMap<String, String>,
        package: &str,
        authority_package: &str,
        discoverable: bool,
    ) -> Result<(), String> {
        let Some(peer) = &self.peer else {
            return Err("host_provider: unsupported: this device reaches no peer probe".into());
        };
        let mut extra = Map::new();
        extra.insert("package".into(), WireJson::from(package));
        extra.insert(
            "authority_package".into(),
            WireJson::from(authority_package),
        );
        if !discoverable {
            extra.insert("discoverable".into(), WireJson::Bool(false));
        }
        let p = HostProviderParams {
            authority: meta
                .get("com.clawseed.tools.authority")
                .cloned()
                .unwrap_or_default(),
            meta: if discoverable {
                meta.clone()
            } else {
                BTreeMap::new()
            },
            extra,
        };
        host_through(&self.rt, &peer.client, p).map_err(|e| format!("peer {e}"))
    }

    fn fd_closes(&mut self, wait: Duration) -> Option<BTreeMap<String, Option<String>>> {
        if !self.extensions.iter().any(|e| e == "fd_closed") {
            return None;
        }
        let deadline = tokio::time::Instant::now() + wait;
        let calls = self.fd_calls.clone();
        let events = &mut self.events;
        let seen = &mut self.fd_closed;
        self.rt.block_on(async {
            while !calls.iter().all(|c| seen.contains_key(c)) {
                match tokio::time::timeout_at(deadline, events.recv()).await {
                    Ok(Some(ev)) if ev.event == "fd_closed" => record_fd_closed(seen, &ev.fields),
                    // Calls the Consumer makes after its last act are not
                    // answered: the scenario is over, and the device fails
                    // them when this connection closes.
                    Ok(Some(_)) => {}
                    Ok(None) | Err(_) => break,
                }
            }
        });
        Some(
            calls
                .into_iter()
                .map(|c| {
                    let how = self.fd_closed.get(&c).cloned();
                    (c, how)
                })
                .collect(),
        )
    }

    fn act(
        &mut self,
        action: &Json,
        on: &mut dyn FnMut(DeviceEvent) -> Option<WireAnswer>,
    ) -> Result<ActOutcome, String> {
        let client = &self.client;
        let events = &mut self.events;
        let actor = self.actor.clone();
        let (mut peer_events, peer_client, peer_authority) = match self.peer.as_mut() {
            Some(p) => (
                Some(&mut p.events),
                Some(&p.client),
                Some(
                    p.hosted
                        .as_ref()
                        .map_or(String::new(), |h| h.authority.clone()),
                ),
            ),
            None => (None, None, None),
        };
        let fd_calls = &mut self.fd_calls;
        let fd_closed = &mut self.fd_closed;
        self.rt.block_on(async {
            let act = async {
                match actor {
                    Actor::Device(consumer) => {
                        let params = to_wire(serde_json::json!({
                            "consumer": consumer,
                            "timeout_ms": ACT_TIMEOUT.as_millis() as u64,
                            "action": action,
                        }));
                        let reply = client
                            .request("consumer_act", params, 0, ACT_TIMEOUT + OP_TIMEOUT)
                            .await
                            .map_err(|e| format!("consumer_act: {e}"))?;
                        let ok = reply.result.map_err(|e| format!("consumer_act: {e}"))?;
                        let v = WireJson::Object(ok)
                            .to_serde()
                            .map_err(|e| format!("consumer_act: {e:?}"))?;
                        ActOutcome::from_json(&v)
                    }
                    Actor::Driver { command, timeout } => {
                        let argv = cetp_consumer::driver_argv(&command, action);
                        let (tx, rx) = tokio::sync::oneshot::channel();
                        std::thread::spawn(move || {
                            let _ = tx.send(run_driver(&argv, timeout));
                        });
                        let stdout = rx.await.map_err(|_| "the driver thread died".to_string())??;
                        cetp_consumer::driver_outcome(&stdout)
                    }
                }
            };
            tokio::pin!(act);
            loop {
                tokio::select! {
                    done = &mut act => return done,
                    ev = events.recv() => {
                        let Some(ev) = ev else {
                            return Err("the device closed the connection".to_string());
                        };
                        match ev.event.as_str() {
                            "incoming_call" => {
                                if let Some(call) = answer_call(client, &ev, None, on).await? {
                                    if fd_calls.len() < MAX_FD_RECORDS {
                                        fd_calls.push(call);
                                    }
                                }
                            }
                            "intent_launched" => {
                                let s = |k: &str| ev.fields.get(k).and_then(WireJson::as_str).unwrap_or_default().to_string();
                                on(DeviceEvent::Launched { handle: s("handle"), decision: s("decision") });
                            }
                            "fd_closed" => record_fd_closed(fd_closed, &ev.fields),
                            _ => {}
                        }
                    }
                    ev = next_event(peer_events.as_deref_mut()) => {
                        let (Some(ev), Some(peer_client)) = (ev, peer_client) else {
                            return Err("the peer probe closed the connection".to_string());
                        };
                        if ev.event == "incoming_call" {
                            answer_call(peer_client, &ev, peer_authority.as_deref(), on).await?;
                        }
                    }
                }
            }
        })
    }
}

fn runtime() -> Result<Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())
}

/// Runs a driver command to its end (killed after `timeout`) and returns
/// its stdout.
fn run_driver(argv: &[String], timeout: Duration) -> Result<String, String> {
    use std::io::Read;
    let (prog, rest) = argv.split_first().ok_or("the driver command is empty")?;
    let mut child = std::process::Command::new(prog)
        .args(rest)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run the driver {prog:?}: {e}"))?;
    let mut out = child.stdout.take().ok_or("no driver stdout")?;
    let mut err = child.stderr.take().ok_or("no driver stderr")?;
    // Bounded: a driver's outcome is one line, its log is not the harness's.
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = out.by_ref().take(16 * 1024 * 1024).read_to_end(&mut buf);
        buf
    });
    let err_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = err.by_ref().take(64 * 1024).read_to_end(&mut buf);
        buf
    });
    let deadline = std::time::Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if std::time::Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "the driver {prog:?} did not finish within {} ms",
                    timeout.as_millis()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(format!("waiting for the driver: {e}")),
        }
    };
    let stdout = String::from_utf8_lossy(&reader.join().unwrap_or_default()).into_owned();
    let stderr = String::from_utf8_lossy(&err_reader.join().unwrap_or_default()).into_owned();
    if !status.success() && stdout.trim().is_empty() {
        return Err(format!(
            "the driver {prog:?} failed ({status}): {}",
            stderr.lines().last().unwrap_or_default()
        ));
    }
    Ok(stdout)
}
