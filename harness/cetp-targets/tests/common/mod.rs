//! Shared by the integration tests: a private adb server, simulated devices
//! served on loopback, scripted probe-wire peers, and one CETP session run
//! through the runner's `Device` trait.
#![allow(dead_code)]

use cetp_proto::device::CallAnswer;
use cetp_proto::{Bundle, Value};
use cetp_reference::provider::{AUTHORITY, PACKAGE};
use cetp_sim::{Sim, SimConfig};
use cetp_vectors::device::{Device, Target};
use cetp_wire::{encode_frame, Frame, HelloOk, OkPayload};
use serde_json::{json, Value as Json};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn find_adb() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("adb"))
        .find(|p| p.is_file())
}

/// The `adb` binary; `None` (skip) only when `CETP_SKIP_ADB=1`, otherwise a
/// missing adb fails the test.
pub fn adb_or_skip(test: &str) -> Option<PathBuf> {
    match find_adb() {
        Some(p) => Some(p),
        None if std::env::var("CETP_SKIP_ADB").as_deref() == Ok("1") => {
            eprintln!("{test}: skipped, `adb` is not installed and CETP_SKIP_ADB=1");
            None
        }
        None => panic!(
            "{test}: `adb` is not on PATH. Install it (Debian: apt-get install adb) \
             or set CETP_SKIP_ADB=1 to skip the tests that need a real adb server."
        ),
    }
}

/// A private adb server on a free port with a private HOME; killed on drop.
pub struct AdbServer {
    adb: PathBuf,
    pub port: u16,
    home: PathBuf,
}

const ADB_CLI_TIMEOUT: Duration = Duration::from_secs(30);

impl AdbServer {
    pub fn start(adb: PathBuf) -> AdbServer {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let home =
            std::env::temp_dir().join(format!("cetp-targets-adb-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&home).unwrap();
        let server = AdbServer {
            adb,
            port: free_port(),
            home,
        };
        server.ok(&["start-server"]);
        server
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.adb);
        c.arg("-P")
            .arg(self.port.to_string())
            .args(args)
            .env("ANDROID_ADB_SERVER_PORT", self.port.to_string())
            .env("HOME", &self.home)
            .env_remove("ANDROID_SERIAL")
            .env_remove("ADB_TRACE")
            .stdin(Stdio::null());
        c
    }

    /// `adb -P PORT ARGS...` under a timeout: (success, stdout + stderr).
    pub fn run(&self, args: &[&str]) -> (bool, String) {
        let out_path = self.home.join(format!("out-{}", free_port()));
        let out = std::fs::File::create(&out_path).unwrap();
        let mut child = self
            .command(args)
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("spawn adb");
        let deadline = Instant::now() + ADB_CLI_TIMEOUT;
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("adb {args:?} timed out after {ADB_CLI_TIMEOUT:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let text = std::fs::read_to_string(&out_path).unwrap_or_default();
        let _ = std::fs::remove_file(&out_path);
        (status.success(), text)
    }

    pub fn ok(&self, args: &[&str]) -> String {
        let (ok, out) = self.run(args);
        assert!(ok, "adb {args:?} failed: {out}");
        out
    }

    /// `adb connect ADDR` and waits until the server lists it as `device`.
    pub fn connect(&self, addr: &str) {
        let out = self.ok(&["connect", addr]);
        assert!(out.contains("connected to"), "adb connect {addr}: {out}");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let list = self.ok(&["devices"]);
            if list
                .lines()
                .any(|l| l.starts_with(addr) && l.ends_with("\tdevice"))
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{addr} never came online: {list}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn kill(&self) {
        let _ = self.run(&["kill-server"]);
    }
}

impl Drop for AdbServer {
    fn drop(&mut self) {
        if let Ok(mut child) = self
            .command(&["kill-server"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
        {
            let deadline = Instant::now() + Duration::from_secs(15);
            loop {
                match child.try_wait() {
                    Ok(Some(_)) | Err(_) => break,
                    Ok(None) if Instant::now() > deadline => {
                        let _ = child.kill();
                        let _ = child.wait();
                        break;
                    }
                    Ok(None) => std::thread::sleep(Duration::from_millis(50)),
                }
            }
        }
        let _ = std::fs::remove_dir_all(&self.home);
    }
}

/// A simulated device served on loopback from its own runtime: probe wire
/// over TCP for identities a and b, and optionally its adb endpoint.
/// Dropping it drops every connection at once, as a device that vanishes.
pub struct SimHost {
    rt: Option<tokio::runtime::Runtime>,
    pub sim: Arc<Sim>,
    pub tcp_a: u16,
    pub tcp_b: u16,
    pub adbd: Option<u16>,
}

impl SimHost {
    pub fn start(cfg: SimConfig, with_adbd: bool) -> SimHost {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let sim = Sim::new(cfg).unwrap();
        let (tcp_a, tcp_b, adbd) = rt.block_on(async {
            let la = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let lb = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let ports = (
                la.local_addr().unwrap().port(),
                lb.local_addr().unwrap().port(),
            );
            tokio::spawn(sim.clone().serve_tcp("a", la));
            tokio::spawn(sim.clone().serve_tcp("b", lb));
            let adbd = if with_adbd {
                let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
                let port = l.local_addr().unwrap().port();
                tokio::spawn(cetp_adbd::serve(
                    l,
                    sim.clone().adb_services(),
                    cetp_adbd::AdbdConfig::default(),
                ));
                Some(port)
            } else {
                None
            };
            (ports.0, ports.1, adbd)
        });
        SimHost {
            rt: Some(rt),
            sim,
            tcp_a,
            tcp_b,
            adbd,
        }
    }

    pub fn tcp_spec(&self) -> String {
        format!("tcp:127.0.0.1:{},b=127.0.0.1:{}", self.tcp_a, self.tcp_b)
    }

    pub fn adbd_addr(&self) -> String {
        format!("127.0.0.1:{}", self.adbd.expect("started with adbd"))
    }

    /// The device disappears: listeners and connections close.
    pub fn vanish(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

impl Drop for SimHost {
    fn drop(&mut self) {
        self.vanish();
    }
}

// ---------------------------------------------------------------------------
// Scripted peers

/// How a scripted device answers one request (its op and id).
pub enum Act {
    /// Write these bytes.
    Send(Vec<u8>),
    /// Write these shared pieces one after the other.
    SendParts(Vec<Arc<[u8]>>),
    /// Write these bytes, then keep the connection open doing nothing.
    SendThenStall(Vec<u8>),
    /// Close the connection.
    Close,
    /// Write the concatenation of `parts` and a `\n`, `times` times, until
    /// the host stops reading or closes. Parts are shared so that a huge
    /// line costs the peer nothing per repetition.
    Repeat { parts: Vec<Arc<[u8]>>, times: u64 },
}

/// `Some` answer to `hello` as a device would give it.
pub fn honest_hello(op: &str, id: u64) -> Option<Act> {
    (op == "hello").then(|| Act::Send(hello_frame(id)))
}

/// A valid `hello` answer for identity `a`.
pub fn hello_frame(id: u64) -> Vec<u8> {
    let ident = cetp_reference::device::IDENTITY_A;
    let hello = HelloOk {
        wire: 1,
        probe: "scripted/1".into(),
        identity: cetp_wire::Identity {
            name: "a".into(),
            uid: ident.uid,
            packages: ident.packages.iter().map(|s| s.to_string()).collect(),
            cert_sha256: vec![ident.cert_sha256.to_string()],
            extra: Default::default(),
        },
        device: cetp_wire::DeviceInfo {
            sdk_int: 34,
            model: "scripted".into(),
            fingerprint: "scripted".into(),
            extra: Default::default(),
        },
        now_ms: 1_788_350_400_000,
        ops: vec!["hello".into(), "call".into(), "read_fd".into()],
        extra: Default::default(),
    };
    encode_frame(&hello.to_frame(id))
}

/// A TCP probe-wire peer that answers every request with `script(op, id)`
/// ([`honest_hello`] for a proper `hello`). Runs on its own runtime.
pub struct ScriptedPeer {
    pub port: u16,
    rt: Option<tokio::runtime::Runtime>,
}

impl ScriptedPeer {
    pub fn start(script: impl Fn(&str, u64) -> Act + Send + Sync + 'static) -> ScriptedPeer {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
        let port = listener.local_addr().unwrap().port();
        let script = Arc::new(script);
        rt.spawn(async move {
            loop {
                let Ok((sock, _)) = listener.accept().await else {
                    return;
                };
                let script = script.clone();
                tokio::spawn(serve_scripted(sock, script));
            }
        });
        ScriptedPeer { port, rt: Some(rt) }
    }

    pub fn spec(&self) -> String {
        format!("tcp:127.0.0.1:{}", self.port)
    }
}

impl Drop for ScriptedPeer {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

/// How a scripted device answers a request with op and id.
pub type Script = dyn Fn(&str, u64) -> Act + Send + Sync;

async fn serve_scripted(sock: TcpStream, script: Arc<Script>) {
    let (r, mut w) = sock.into_split();
    let mut r = BufReader::new(r);
    let mut line = Vec::new();
    loop {
        line.clear();
        // Requests from the harness are small; a bounded read is enough here.
        match (&mut r).take(1 << 20).read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let Ok(Frame::Request(req)) = cetp_wire::decode_frame(&line) else {
            return;
        };
        let act = script(&req.op, req.id);
        match act {
            Act::Send(bytes) => {
                if w.write_all(&bytes).await.is_err() {
                    return;
                }
            }
            Act::SendParts(parts) => {
                for p in &parts {
                    if w.write_all(p).await.is_err() {
                        return;
                    }
                }
            }
            Act::SendThenStall(bytes) => {
                let _ = w.write_all(&bytes).await;
                // Hold the socket open until the host goes away.
                let mut sink = Vec::new();
                let _ = r.read_to_end(&mut sink).await;
                return;
            }
            Act::Close => return,
            Act::Repeat { parts, times } => {
                for _ in 0..times {
                    for p in &parts {
                        if w.write_all(p).await.is_err() {
                            return;
                        }
                    }
                    if w.write_all(b"\n").await.is_err() {
                        return;
                    }
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------
// A CETP session through the runner's Device trait

pub const SESSION_SEED: u64 = 7;

fn answer(a: CallAnswer) -> Bundle {
    match a {
        CallAnswer::Result(Some(b)) => b,
        other => panic!("expected a Bundle, got {other:?}"),
    }
}

fn data(b: &Bundle) -> Json {
    b.get_json("data").unwrap_or(Json::Null)
}

/// Keys whose values differ from run to run: issued tokens and ids, clocks
/// and timings.
fn volatile(key: &str) -> bool {
    matches!(
        key,
        "session_token"
            | "resume_token"
            | "request_id"
            | "operation_id"
            | "alert_id"
            | "now_ms"
            | "elapsed_us"
            | "deadline_at_ms"
            | "handle"
            | "negotiated_at_ms"
    ) || key.ends_with("_at_ms")
        || key.ends_with("_at")
}

/// Replaces volatile values (recursively, including JSON text inside
/// strings, such as a Bundle's `data`) by a placeholder.
pub fn normalize(v: &Json) -> Json {
    match v {
        Json::Object(m) => Json::Object(
            m.iter()
                .map(|(k, v)| {
                    let nv = if volatile(k) && !v.is_null() {
                        json!("<volatile>")
                    } else {
                        normalize(v)
                    };
                    (k.clone(), nv)
                })
                .collect(),
        ),
        Json::Array(a) => Json::Array(a.iter().map(normalize).collect()),
        Json::String(s) if s.starts_with('{') || s.starts_with('[') => {
            match serde_json::from_str::<Json>(s) {
                Ok(inner) => json!({ "json": normalize(&inner) }),
                Err(_) => v.clone(),
            }
        }
        _ => v.clone(),
    }
}

fn bundle_json(b: &Bundle) -> Json {
    cetp_wire::bundle_to_json(b)
        .to_serde()
        .expect("no lone surrogates in the reference Provider's answers")
}

struct Session<'a> {
    dev: &'a dyn Device,
    token: String,
    next: u64,
}

impl Session<'_> {
    fn rid(&mut self) -> String {
        self.next += 1;
        format!("00000000-0000-4000-8000-{:012x}", self.next)
    }

    fn common(&self, rid: &str) -> Bundle {
        Bundle::new()
            .with("protocol_version", Value::Int(2))
            .with("session_token", Value::str(self.token.clone()))
            .with("request_id", Value::str(rid))
            .with("deadline_at_ms", Value::Long(self.dev.now_ms() + 30_000))
    }

    fn call(&self, method: &str, extras: Bundle) -> Bundle {
        answer(
            self.dev
                .call(AUTHORITY, method, None, Some(&extras), 10_000)
                .unwrap_or_else(|e| panic!("{method}: {e}")),
        )
    }

    fn exec(&self, rid: &str, tool: &str, args: Json, resume: Option<&str>) -> Bundle {
        let mut b = self
            .common(rid)
            .with("tool_name", Value::str(tool))
            .with("args", Value::str(args.to_string()));
        if let Some(t) = resume {
            b.insert("resume_token", Value::str(t));
        }
        self.call("execute_tool", b)
    }
}

/// hello, discover, negotiate, list_tools, a read tool, an always-confirm
/// tool through resolve + resume, a large file result, restart_provider;
/// every answer normalized.
pub fn run_session(target: &Target) -> Json {
    let dev = target.a.as_ref();
    let mut log = serde_json::Map::new();
    let hello = dev.hello().expect("hello");
    log.insert(
        "hello".into(),
        normalize(&serde_json::to_value(&hello).unwrap()),
    );
    let b_hello = target
        .b
        .as_ref()
        .map(|b| b.hello().expect("hello b").identity_name);
    log.insert("hello_b".into(), json!(b_hello));

    let providers = dev.discover().expect("discover");
    log.insert(
        "discover".into(),
        json!(providers
            .iter()
            .map(|p| json!({"package": p.package, "service": p.service, "exported": p.exported,
                "permission": p.permission, "meta": p.meta, "authority_package": p.authority_package}))
            .collect::<Vec<_>>()),
    );

    let mut s = Session {
        dev,
        token: String::new(),
        next: 0,
    };
    let neg = s.call(
        "negotiate",
        Bundle::new()
            .with("consumer_versions", Value::IntArray(vec![2, 1]))
            .with(
                "consumer_capabilities",
                Value::str(r#"["async_operations","cancellation","large_results"]"#),
            ),
    );
    s.token = data(&neg)["session_token"]
        .as_str()
        .expect("session token")
        .to_string();
    log.insert("negotiate".into(), normalize(&bundle_json(&neg)));

    let rid = s.rid();
    let tools = s.call("list_tools", s.common(&rid));
    log.insert("list_tools".into(), normalize(&bundle_json(&tools)));

    let rid = s.rid();
    let quote = s.exec(&rid, "get_quote", json!({"symbol": "ACME"}), None);
    log.insert("get_quote".into(), normalize(&bundle_json(&quote)));

    let rid = s.rid();
    let created = s.exec(
        &rid,
        "create_alert",
        json!({"symbol": "ACME", "price": 12.5}),
        None,
    );
    log.insert("create_alert".into(), normalize(&bundle_json(&created)));
    let alert_id = data(&created)["value"]["alert_id"]
        .as_str()
        .expect("alert id")
        .to_string();

    let rid = s.rid();
    let args = json!({ "alert_id": alert_id });
    let ask = s.exec(&rid, "delete_alert", args.clone(), None);
    log.insert("delete_alert_ask".into(), normalize(&bundle_json(&ask)));
    let Some(Value::PendingIntent(pi)) = ask.get("resolution") else {
        panic!("delete_alert did not ask for confirmation: {ask:?}");
    };
    let resume = ask.get_string("resume_token").expect("resume token");
    let resolved = dev
        .resolve(
            &pi.handle,
            cetp_proto::provider::Decision::Approve,
            None,
            10_000,
        )
        .expect("resolve");
    log.insert(
        "resolve".into(),
        json!({"launched": resolved.launched, "decision_applied": resolved.decision_applied,
               "result_code": resolved.result_code}),
    );
    let done = s.exec(&rid, "delete_alert", args, Some(&resume));
    log.insert(
        "delete_alert_resumed".into(),
        normalize(&bundle_json(&done)),
    );

    let rid = s.rid();
    let export = s.exec(&rid, "export_history", json!({"rows": 20_000}), None);
    log.insert("export_history".into(), normalize(&bundle_json(&export)));
    let Some(Value::Fd(fd)) = export.get("result_fd") else {
        panic!("export_history did not return a file: {export:?}");
    };
    let file = dev.read_fd(&fd.handle, 64 * 1024 * 1024).expect("read_fd");
    assert!(
        file.bytes.len() > 262_144,
        "only {} bytes",
        file.bytes.len()
    );
    log.insert(
        "read_fd".into(),
        json!({"len": file.bytes.len(), "sha256": cetp_proto::canonical::sha256_hex(&file.bytes),
               "eof": file.eof, "error": file.error}),
    );

    dev.restart_provider(PACKAGE).expect("restart_provider");
    let rid = s.rid();
    let after = s.exec(&rid, "get_quote", json!({"symbol": "ACME"}), None);
    log.insert("after_restart".into(), normalize(&bundle_json(&after)));
    Json::Object(log)
}

/// The sim configuration every compared session runs against.
pub fn session_sim_config() -> SimConfig {
    SimConfig {
        seed: SESSION_SEED,
        effect_delay_ms: 0,
        ..SimConfig::default()
    }
}
