//! The same probe-wire session through a real adb server (adb transport,
//! the simulated device's adb endpoint), through TCP, and in-process, with
//! identical (normalized) results.
//!
//! Needs `adb` on PATH (fails with a clear message otherwise, unless
//! `CETP_SKIP_ADB=1`). The adb server runs on a private port with a private
//! HOME and is killed at the end, also when the test fails.

mod common;

use cetp_proto::device::{AdbErrorKind, ErrorKind};
use cetp_targets::{open, TargetSpec};
use common::{adb_or_skip, run_session, session_sim_config, AdbServer, SimHost};

#[test]
fn one_session_three_transports_identical_results() {
    let Some(adb) = adb_or_skip("one_session_three_transports_identical_results") else {
        return;
    };
    let over_adb = SimHost::start(session_sim_config(), true);
    let over_tcp = SimHost::start(session_sim_config(), false);
    let server = AdbServer::start(adb);
    server.connect(&over_adb.adbd_addr());

    // The probe APKs are installed as the target opens (push + pm install).
    let apk_dir = std::env::temp_dir().join(format!("cetp-targets-apk-{}", std::process::id()));
    std::fs::create_dir_all(&apk_dir).unwrap();
    let apk = apk_dir.join("cetp-probe.apk");
    std::fs::write(&apk, b"PK\x03\x04 not really an apk").unwrap();
    let adb_spec = TargetSpec::parse(&format!(
        "adb:{},server={},install={}",
        over_adb.adbd_addr(),
        server.addr(),
        apk.display()
    ))
    .unwrap();
    let adb_target = open(&adb_spec).unwrap_or_else(|e| panic!("open {adb_spec}: {e}"));
    assert!(adb_target.b.is_some(), "the sim offers identity b over adb");
    assert_eq!(
        over_adb.sim.installed_apks(),
        vec!["/data/local/tmp/cetp-probe.apk".to_string()]
    );
    let _ = std::fs::remove_dir_all(&apk_dir);
    let via_adb = run_session(&adb_target);

    let tcp_target = open(&TargetSpec::parse(&over_tcp.tcp_spec()).unwrap()).unwrap();
    let via_tcp = run_session(&tcp_target);

    let sim_spec = TargetSpec::parse(&format!(
        "sim:seed={},effect_delay_ms=0",
        common::SESSION_SEED
    ))
    .unwrap();
    let via_sim = run_session(&open(&sim_spec).unwrap());

    let pretty = |v: &serde_json::Value| serde_json::to_string_pretty(v).unwrap();
    assert_eq!(pretty(&via_adb), pretty(&via_tcp), "adb and tcp differ");
    assert_eq!(
        pretty(&via_tcp),
        pretty(&via_sim),
        "tcp and in-process differ"
    );
    assert_eq!(via_adb["hello_b"], serde_json::json!("b"));
    assert_eq!(
        via_adb["resolve"]["decision_applied"],
        serde_json::json!(true)
    );

    // The adb side of the target: the probe sockets were forwarded, and
    // nothing else was left behind once the target is gone.
    let forwards = server.ok(&["forward", "--list"]);
    assert_eq!(
        forwards.lines().filter(|l| !l.trim().is_empty()).count(),
        2,
        "{forwards}"
    );
    drop(adb_target);
    let forwards = server.ok(&["forward", "--list"]);
    assert_eq!(forwards.trim(), "", "forwards left behind: {forwards}");
}

/// With two devices on one server, the serial decides which one the probe
/// sockets are forwarded to (adb_client's `forward` is sent after a
/// transport switch; this pins that the server honours the serial).
#[test]
fn the_serial_picks_the_device_when_several_are_attached() {
    let Some(adb) = adb_or_skip("the_serial_picks_the_device_when_several_are_attached") else {
        return;
    };
    const DAY_MS: i64 = 86_400_000;
    let near = SimHost::start(session_sim_config(), true);
    let far = SimHost::start(
        cetp_sim::SimConfig {
            clock_skew_ms: 10 * DAY_MS,
            ..session_sim_config()
        },
        true,
    );
    let server = AdbServer::start(adb);
    server.connect(&near.adbd_addr());
    server.connect(&far.adbd_addr());
    let host_now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    for (host, skewed) in [(&far, true), (&near, false)] {
        let spec = TargetSpec::parse(&format!(
            "adb:{},server={},b=off",
            host.adbd_addr(),
            server.addr()
        ))
        .unwrap();
        let t = open(&spec).unwrap_or_else(|e| panic!("open {spec}: {e}"));
        let now = t.a.hello().unwrap().now_ms;
        assert_eq!(
            now - host_now > 5 * DAY_MS,
            skewed,
            "{spec} reached the wrong device (device clock {now}, host {host_now})"
        );
    }
    // Without a serial, two devices are ambiguous: a named error, not a guess.
    let spec = TargetSpec::parse(&format!("adb,server={}", server.addr())).unwrap();
    let e = open(&spec).err().expect("ambiguous device must fail");
    assert_eq!(
        e.device_kind(),
        Some(ErrorKind::Adb(AdbErrorKind::DeviceAmbiguous)),
        "{e}"
    );
}

mod no_restart {
    //! A device whose probe answers `restart_provider` with `unsupported`
    //! (probe-wire allows it): a frame-level proxy in front of the sim's
    //! probe sockets; everything else is the sim's.

    use cetp_adbd::{BoxFuture, DeviceServices, DuplexStream, FileStat, ShellOutput};
    use cetp_sim::Sim;
    use cetp_wire::{encode_frame, AsyncFrameReader, ErrorKind, Frame, WireError};
    use std::sync::Arc;
    use tokio::io::{AsyncWriteExt, BufReader};

    pub struct NoRestartProbe {
        pub sim: Arc<Sim>,
        pub inner: Arc<dyn DeviceServices>,
    }

    impl DeviceServices for NoRestartProbe {
        fn properties(&self) -> Vec<(String, String)> {
            self.inner.properties()
        }

        fn open_stream(
            &self,
            service: &str,
        ) -> BoxFuture<'static, Result<Box<dyn DuplexStream>, String>> {
            let identity = match service {
                "localabstract:cetp-probe" => "a",
                "localabstract:cetp-probe-b" => "b",
                _ => return self.inner.open_stream(service),
            };
            let sim = self.sim.clone();
            Box::pin(async move {
                let (host_end, proxy_host) = tokio::io::duplex(1 << 20);
                let (proxy_sim, sim_end) = tokio::io::duplex(1 << 20);
                tokio::spawn(sim.serve_connection(identity, sim_end));
                tokio::spawn(proxy(proxy_host, proxy_sim));
                Ok(Box::new(host_end) as Box<dyn DuplexStream>)
            })
        }

        fn shell(&self, command: &str) -> BoxFuture<'static, ShellOutput> {
            self.inner.shell(command)
        }

        fn push_file(
            &self,
            path: &str,
            mode: u32,
            data: Vec<u8>,
        ) -> BoxFuture<'static, Result<(), String>> {
            self.inner.push_file(path, mode, data)
        }

        fn stat(&self, path: &str) -> Option<FileStat> {
            self.inner.stat(path)
        }
    }

    async fn proxy(host: tokio::io::DuplexStream, sim: tokio::io::DuplexStream) {
        let (host_r, host_w) = tokio::io::split(host);
        let (sim_r, mut sim_w) = tokio::io::split(sim);
        let host_w = Arc::new(tokio::sync::Mutex::new(host_w));
        let back = host_w.clone();
        tokio::spawn(async move {
            let mut r = AsyncFrameReader::new(BufReader::new(sim_r));
            while let Ok(Some(line)) = r.read_line().await {
                let mut framed = line.to_vec();
                framed.push(b'\n');
                if back.lock().await.write_all(&framed).await.is_err() {
                    return;
                }
            }
        });
        let mut r = AsyncFrameReader::new(BufReader::new(host_r));
        while let Ok(Some(line)) = r.read_line().await {
            match cetp_wire::decode_frame(line) {
                Ok(Frame::Request(req)) if req.op == "restart_provider" => {
                    let no = Frame::error(
                        req.id,
                        WireError::new(ErrorKind::Unsupported, "no process control here"),
                    );
                    if host_w
                        .lock()
                        .await
                        .write_all(&encode_frame(&no))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
                _ => {
                    let mut framed = line.to_vec();
                    framed.push(b'\n');
                    if sim_w.write_all(&framed).await.is_err() {
                        return;
                    }
                }
            }
        }
    }
}

/// probe-wire: a device may answer `restart_provider` with `unsupported`;
/// the host then restarts the Provider over adb with `am force-stop`.
#[test]
fn restart_falls_back_to_am_force_stop() {
    use cetp_proto::device::CallAnswer;
    use cetp_proto::{Bundle, Value};
    use cetp_reference::provider::{AUTHORITY, PACKAGE};

    let Some(adb) = adb_or_skip("restart_falls_back_to_am_force_stop") else {
        return;
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let sim = cetp_sim::Sim::new(session_sim_config()).unwrap();
    let services = std::sync::Arc::new(no_restart::NoRestartProbe {
        sim: sim.clone(),
        inner: sim.clone().adb_services(),
    });
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let device = listener.local_addr().unwrap().to_string();
    rt.spawn(cetp_adbd::serve(
        listener,
        services,
        cetp_adbd::AdbdConfig::default(),
    ));
    let server = AdbServer::start(adb);
    server.connect(&device);
    let trace = cetp_targets::WireTrace::new();
    let t = cetp_targets::open_with(
        &TargetSpec::parse(&format!("adb:{device},server={},b=off", server.addr())).unwrap(),
        &cetp_targets::OpenOptions::traced(trace.clone()),
    )
    .unwrap();

    let negotiate = Bundle::new()
        .with("consumer_versions", Value::IntArray(vec![2]))
        .with("consumer_capabilities", Value::str("[]"));
    let Ok(CallAnswer::Result(Some(b))) =
        t.a.call(AUTHORITY, "negotiate", None, Some(&negotiate), 5000)
    else {
        panic!("negotiate failed");
    };
    let token = b.get_json("data").unwrap()["session_token"]
        .as_str()
        .unwrap()
        .to_string();
    let quote = |rid: &str| {
        let extras = Bundle::new()
            .with("protocol_version", Value::Int(2))
            .with("session_token", Value::str(token.clone()))
            .with("request_id", Value::str(rid))
            .with("deadline_at_ms", Value::Long(t.a.now_ms() + 30_000))
            .with("tool_name", Value::str("get_quote"))
            .with("args", Value::str(r#"{"symbol":"ACME"}"#));
        match t
            .a
            .call(AUTHORITY, "execute_tool", None, Some(&extras), 5000)
        {
            Ok(CallAnswer::Result(Some(b))) => b.opt_string("error_code").unwrap(),
            other => panic!("execute_tool: {other:?}"),
        }
    };
    assert_eq!(quote("00000000-0000-4000-8000-000000000001"), None);

    t.a.restart_provider(PACKAGE).expect("restart through adb");

    // The device refused, adb did it: the session lived in the killed process.
    assert!(
        trace.render().contains("\"kind\":\"unsupported\""),
        "{}",
        trace.render()
    );
    assert!(
        sim.log_lines()
            .iter()
            .any(|l| l.contains("force-stop com.clawseed.reference")),
        "{:?}",
        sim.log_lines()
    );
    assert_eq!(
        quote("00000000-0000-4000-8000-000000000002").as_deref(),
        Some("NEGOTIATION_REQUIRED")
    );
    drop(t);
    rt.shutdown_background();
}

mod late_probe {
    //! A device whose probes listen only a while after `am instrument`
    //! starts them, as an app process takes time to come up on a phone:
    //! until then the probe sockets refuse connections.

    use cetp_adbd::{BoxFuture, DeviceServices, DuplexStream, FileStat, ShellOutput};
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    pub struct LateProbe {
        pub inner: Arc<dyn DeviceServices>,
        pub delay: Duration,
        pub started: Mutex<Option<Instant>>,
        pub refused: Mutex<u32>,
    }

    impl DeviceServices for LateProbe {
        fn properties(&self) -> Vec<(String, String)> {
            self.inner.properties()
        }

        fn open_stream(
            &self,
            service: &str,
        ) -> BoxFuture<'static, Result<Box<dyn DuplexStream>, String>> {
            let listening = self
                .started
                .lock()
                .unwrap()
                .is_some_and(|t| t.elapsed() >= self.delay);
            if service.starts_with("localabstract:cetp-probe") && !listening {
                *self.refused.lock().unwrap() += 1;
                return Box::pin(async { Err("connection refused".to_string()) });
            }
            self.inner.open_stream(service)
        }

        fn shell(&self, command: &str) -> BoxFuture<'static, ShellOutput> {
            if command.starts_with("am instrument") {
                self.started
                    .lock()
                    .unwrap()
                    .get_or_insert_with(Instant::now);
            }
            self.inner.shell(command)
        }

        fn push_file(
            &self,
            path: &str,
            mode: u32,
            data: Vec<u8>,
        ) -> BoxFuture<'static, Result<(), String>> {
            self.inner.push_file(path, mode, data)
        }

        fn stat(&self, path: &str) -> Option<FileStat> {
            self.inner.stat(path)
        }
    }
}

/// Android gives the probe its UiAutomation only under `am instrument -w`:
/// the target starts each probe that way, on a shell stream it keeps open
/// for the whole run and ends when the run ends. The probe APKs are
/// installed after the Provider, whose permission they need.
#[test]
fn probes_run_as_waiting_instrumentations_that_end_with_the_run() {
    use cetp_targets::spec::{DEFAULT_PROBE_B_SERVICE, DEFAULT_PROBE_SERVICE};
    use std::time::{Duration, Instant};

    let Some(adb) = adb_or_skip("probes_run_as_waiting_instrumentations_that_end_with_the_run")
    else {
        return;
    };
    let host = SimHost::start(session_sim_config(), true);
    let server = AdbServer::start(adb);
    server.connect(&host.adbd_addr());
    let dir = std::env::temp_dir().join(format!("cetp-targets-order-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let apk = |name: &str| {
        let p = dir.join(name);
        std::fs::write(&p, b"PK\x03\x04 not really an apk").unwrap();
        p.display().to_string()
    };
    // Options in the "wrong" order: the probes still go in last.
    let spec = TargetSpec::parse(&format!(
        "adb:{},server={},probe_apk={},probe_apk={},install={}",
        host.adbd_addr(),
        server.addr(),
        apk("probe-a.apk"),
        apk("probe-b.apk"),
        apk("provider.apk"),
    ))
    .unwrap();
    let t = open(&spec).unwrap_or_else(|e| panic!("open {spec}: {e}"));
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        host.sim.installed_apks(),
        [
            "/data/local/tmp/provider.apk",
            "/data/local/tmp/probe-a.apk",
            "/data/local/tmp/probe-b.apk"
        ]
    );
    let log = host.sim.log_lines().join("\n");
    for component in [DEFAULT_PROBE_SERVICE, DEFAULT_PROBE_B_SERVICE] {
        assert!(
            log.contains(&format!("shell: am instrument -w -r {component}")),
            "{log}"
        );
    }
    // Both streams are still open while the run goes on.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        host.sim.running_instrumentations(),
        [DEFAULT_PROBE_SERVICE, DEFAULT_PROBE_B_SERVICE]
    );
    t.a.hello().unwrap();

    drop(t);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !host.sim.running_instrumentations().is_empty() {
        assert!(
            Instant::now() < deadline,
            "still running after the run: {:?}",
            host.sim.running_instrumentations()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let log = host.sim.log_lines().join("\n");
    for (component, package) in [
        (DEFAULT_PROBE_SERVICE, "com.clawseed.probe"),
        (DEFAULT_PROBE_B_SERVICE, "com.clawseed.probe.b"),
    ] {
        // Closed by the target, or ended by its force-stop, whichever the
        // device saw first: the two travel on different adb streams.
        assert!(
            log.contains(&format!("am instrument {component}: ended")),
            "{log}"
        );
        assert!(
            log.contains(&format!("shell: am force-stop {package}\n"))
                || log.ends_with(&format!("shell: am force-stop {package}")),
            "{log}"
        );
    }
}

/// A probe takes a moment to listen after `am instrument` starts it; the
/// target keeps trying its socket meanwhile instead of failing the run.
#[test]
fn a_probe_that_listens_late_is_waited_for() {
    use std::time::Duration;

    let Some(adb) = adb_or_skip("a_probe_that_listens_late_is_waited_for") else {
        return;
    };
    let server = AdbServer::start(adb);
    // Through a forward (a local server's default), and relayed by the
    // server (a remote server's, whose forwards a host cannot dial: finding
    // 9 of issue 27): a late probe shows differently, and is waited for.
    for relay in ["forward", "server"] {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let sim = cetp_sim::Sim::new(session_sim_config()).unwrap();
        let services = std::sync::Arc::new(late_probe::LateProbe {
            inner: sim.clone().adb_services(),
            delay: Duration::from_millis(700),
            started: Default::default(),
            refused: Default::default(),
        });
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let device = listener.local_addr().unwrap().to_string();
        rt.spawn(cetp_adbd::serve(
            listener,
            services.clone(),
            cetp_adbd::AdbdConfig::default(),
        ));
        server.connect(&device);
        let t = open(
            &TargetSpec::parse(&format!(
                "adb:{device},server={},b=off,relay={relay}",
                server.addr()
            ))
            .unwrap(),
        )
        .unwrap_or_else(|e| panic!("relay={relay}: the late probe was not waited for: {e}"));
        assert!(
            *services.refused.lock().unwrap() > 0,
            "relay={relay}: the probe was never late"
        );
        assert_eq!(t.a.hello().unwrap().identity_name, "a");
        let forwards = server.ok(&["forward", "--list"]);
        let n = forwards.lines().filter(|l| !l.trim().is_empty()).count();
        assert_eq!(
            n,
            usize::from(relay == "forward"),
            "relay={relay}: {forwards}"
        );
        drop(t);
        rt.shutdown_background();
    }
}
