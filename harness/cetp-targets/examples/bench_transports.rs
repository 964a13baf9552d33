//! Transport benchmark: a `call` (execute_tool on a read tool of the
//! reference Provider) against the raw probe-wire `hello` round trip, on
//! each transport, through the runner's `Device` trait.
//!
//! Run by `scripts/bench-transports.sh`, which builds in release and starts
//! (and always stops) a private adb server for the adb row.
//!
//! ```text
//! bench_transports [--duration-ms N] [--adb PATH --adb-server HOST:PORT | --adb-skip REASON]
//! bench_transports --free-port
//! ```

use cetp_proto::device::CallAnswer;
use cetp_proto::{Bundle, Value};
use cetp_reference::provider::AUTHORITY;
use cetp_sim::{Sim, SimConfig};
use cetp_targets::{open, TargetSpec};
use cetp_vectors::device::{Device, Target};
use std::process::Command;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;

struct Args {
    duration: Duration,
    adb: Option<(String, String)>,
    adb_skip: Option<String>,
}

fn parse_args() -> Result<Option<Args>, String> {
    let mut args = Args {
        duration: Duration::from_millis(2000),
        adb: None,
        adb_skip: None,
    };
    let mut adb_path = None;
    let mut adb_server = None;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--duration-ms" => {
                let v = value()?;
                args.duration =
                    Duration::from_millis(v.parse().map_err(|_| format!("bad --duration-ms {v}"))?);
            }
            "--adb" => adb_path = Some(value()?),
            "--adb-server" => adb_server = Some(value()?),
            "--adb-skip" => args.adb_skip = Some(value()?),
            "--free-port" => {
                let port = std::net::TcpListener::bind("127.0.0.1:0")
                    .and_then(|l| l.local_addr())
                    .map_err(|e| e.to_string())?
                    .port();
                println!("{port}");
                return Ok(None);
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    match (adb_path, adb_server) {
        (Some(p), Some(s)) => args.adb = Some((p, s)),
        (None, None) => {}
        _ => return Err("--adb and --adb-server go together".into()),
    }
    Ok(Some(args))
}

/// Latency samples of one op.
struct Stats {
    samples: Vec<Duration>,
    wall: Duration,
}

impl Stats {
    fn per_second(&self) -> f64 {
        self.samples.len() as f64 / self.wall.as_secs_f64()
    }
    fn quantile(&self, q: f64) -> Duration {
        let mut s = self.samples.clone();
        s.sort();
        let i = ((s.len() as f64 - 1.0) * q).round() as usize;
        s.get(i).copied().unwrap_or_default()
    }
}

fn measure(
    duration: Duration,
    mut op: impl FnMut() -> Result<(), String>,
) -> Result<Stats, String> {
    // Warm-up: connections, allocations, the Provider's caches.
    for _ in 0..20 {
        op()?;
    }
    let mut samples = Vec::new();
    let start = Instant::now();
    while start.elapsed() < duration {
        let t = Instant::now();
        op()?;
        samples.push(t.elapsed());
    }
    Ok(Stats {
        samples,
        wall: start.elapsed(),
    })
}

/// Calls from `threads` threads at once for `duration`: calls per second.
fn concurrent(
    target: &Target,
    session: &str,
    threads: usize,
    duration: Duration,
) -> Result<f64, String> {
    let start = Instant::now();
    let counts: Vec<Result<u64, String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    let mut n = 0u64;
                    while start.elapsed() < duration {
                        read_call(target.a.as_ref(), session, (t as u64) << 32 | n)?;
                        n += 1;
                    }
                    Ok(n)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("thread panicked".into())))
            .collect()
    });
    let mut total = 0;
    for c in counts {
        total += c?;
    }
    Ok(total as f64 / start.elapsed().as_secs_f64())
}

fn negotiate(dev: &dyn Device) -> Result<String, String> {
    let extras = Bundle::new()
        .with("consumer_versions", Value::IntArray(vec![2, 1]))
        .with("consumer_capabilities", Value::str("[]"));
    match dev.call(AUTHORITY, "negotiate", None, Some(&extras), 10_000) {
        Ok(CallAnswer::Result(Some(b))) => b
            .get_json("data")
            .ok()
            .and_then(|d| d["session_token"].as_str().map(str::to_string))
            .ok_or_else(|| format!("negotiate answered {b:?}")),
        other => Err(format!("negotiate: {other:?}")),
    }
}

fn read_call(dev: &dyn Device, session: &str, n: u64) -> Result<(), String> {
    let extras = Bundle::new()
        .with("protocol_version", Value::Int(2))
        .with("session_token", Value::str(session))
        .with(
            "request_id",
            Value::str(format!(
                "00000000-0000-4000-8000-{:012x}",
                n & 0xffff_ffff_ffff
            )),
        )
        .with("deadline_at_ms", Value::Long(dev.now_ms() + 30_000))
        .with("tool_name", Value::str("get_quote"))
        .with("args", Value::str(r#"{"symbol":"ACME"}"#));
    match dev.call(AUTHORITY, "execute_tool", None, Some(&extras), 10_000) {
        Ok(CallAnswer::Result(Some(b))) if b.get_string("status").as_deref() == Ok("success") => {
            Ok(())
        }
        other => Err(format!("execute_tool: {other:?}")),
    }
}

struct Row {
    name: &'static str,
    result: Result<(Stats, Stats, f64), String>,
}

fn bench(target: &Target, duration: Duration) -> Result<(Stats, Stats, f64), String> {
    let dev = target.a.as_ref();
    let session = negotiate(dev)?;
    let mut n = 0u64;
    let call = measure(duration, || {
        n += 1;
        read_call(dev, &session, n)
    })?;
    let hello = measure(duration, || {
        dev.hello().map(|_| ()).map_err(|e| e.to_string())
    })?;
    let parallel = concurrent(target, &session, 4, duration / 2)?;
    Ok((call, hello, parallel))
}

/// A simulated device served on loopback: probe wire on TCP and its adb
/// endpoint.
struct Host {
    _rt: tokio::runtime::Runtime,
    tcp: u16,
    adbd: u16,
}

fn host(cfg: SimConfig) -> Result<Host, String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let sim = Sim::new(cfg).map_err(|e| e.to_string())?;
    let (tcp, adbd) = rt
        .block_on(async {
            let l = TcpListener::bind("127.0.0.1:0").await?;
            let a = TcpListener::bind("127.0.0.1:0").await?;
            let ports = (l.local_addr()?.port(), a.local_addr()?.port());
            tokio::spawn(sim.clone().serve_tcp("a", l));
            tokio::spawn(cetp_adbd::serve(
                a,
                sim.clone().adb_services(),
                cetp_adbd::AdbdConfig::default(),
            ));
            Ok::<_, std::io::Error>(ports)
        })
        .map_err(|e| e.to_string())?;
    Ok(Host { _rt: rt, tcp, adbd })
}

fn adb_connect(adb: &str, server: &str, device: &str) -> Result<(), String> {
    let port = server.rsplit_once(':').map(|(_, p)| p).unwrap_or(server);
    let run = |args: &[&str]| -> Result<String, String> {
        let out = Command::new(adb)
            .arg("-P")
            .arg(port)
            .args(args)
            .env("ANDROID_ADB_SERVER_PORT", port)
            .output()
            .map_err(|e| format!("running adb: {e}"))?;
        Ok(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    };
    let out = run(&["connect", device])?;
    if !out.contains("connected to") {
        return Err(format!("adb connect {device}: {}", out.trim()));
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if run(&["devices"])?
            .lines()
            .any(|l| l == format!("{device}\tdevice"))
        {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(format!("{device} never came online"))
}

fn us(d: Duration) -> String {
    format!("{:.0} µs", d.as_secs_f64() * 1e6)
}

fn main() {
    let args = match parse_args() {
        Ok(Some(a)) => a,
        Ok(None) => return,
        Err(e) => {
            eprintln!("bench_transports: {e}");
            std::process::exit(2);
        }
    };
    let cfg = SimConfig {
        effect_delay_ms: 0,
        ..SimConfig::default()
    };
    let mut rows = Vec::new();

    let run = |spec: &str| -> Result<(Stats, Stats, f64), String> {
        let spec = TargetSpec::parse(spec).map_err(|e| e.to_string())?;
        let target = open(&spec).map_err(|e| e.to_string())?;
        bench(&target, args.duration)
    };
    rows.push(Row {
        name: "in-process",
        result: run("sim:effect_delay_ms=0"),
    });
    let served = host(cfg);
    rows.push(Row {
        name: "tcp",
        result: served
            .as_ref()
            .map_err(Clone::clone)
            .and_then(|h| run(&format!("tcp:127.0.0.1:{}", h.tcp))),
    });
    let adb_row = match (&args.adb, &args.adb_skip, &served) {
        (_, _, Err(e)) => Err(e.clone()),
        (Some((adb, server)), _, Ok(h)) => {
            let device = format!("127.0.0.1:{}", h.adbd);
            adb_connect(adb, server, &device)
                .and_then(|()| run(&format!("adb:{device},server={server},b=off")))
        }
        (None, Some(reason), _) => Err(format!("skipped: {reason}")),
        (None, None, _) => Err("skipped: no adb server given (--adb, --adb-server)".into()),
    };
    rows.push(Row {
        name: "adb",
        result: adb_row,
    });

    println!(
        "reference Provider on the simulated device; {} ms per measurement, one caller thread (x4: four)",
        args.duration.as_millis()
    );
    println!(
        "{:<11} {:>9} {:>10} {:>10} {:>9} {:>10} {:>10} {:>10} {:>11}",
        "transport",
        "calls/s",
        "call p50",
        "call p99",
        "hello/s",
        "hello p50",
        "hello p99",
        "call/hello",
        "calls/s x4"
    );
    for r in &rows {
        match &r.result {
            Ok((call, hello, par)) => {
                let ratio = call.quantile(0.5).as_secs_f64() / hello.quantile(0.5).as_secs_f64();
                println!(
                    "{:<11} {:>9.0} {:>10} {:>10} {:>9.0} {:>10} {:>10} {:>10.2} {:>11.0}",
                    r.name,
                    call.per_second(),
                    us(call.quantile(0.5)),
                    us(call.quantile(0.99)),
                    hello.per_second(),
                    us(hello.quantile(0.5)),
                    us(hello.quantile(0.99)),
                    ratio,
                    par
                );
            }
            Err(e) => println!("{:<11} {e}", r.name),
        }
    }
    if rows
        .iter()
        .any(|r| r.result.as_ref().is_err_and(|e| !e.starts_with("skipped")))
    {
        std::process::exit(1);
    }
}
