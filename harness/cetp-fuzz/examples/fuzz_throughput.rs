//! Fuzz throughput: mutated single-call envelopes generated, answered and
//! judged by every answer check, per second, (1) driving the sans-IO
//! reference Provider directly in-process and (2) over TCP to the simulated
//! device from several threads. `scripts/fuzz-bench.sh` prints it.
//!
//!   cargo run --release -p cetp-fuzz --example fuzz_throughput -- [--ms 2000]

use cetp_proto::bundle::Value;
use cetp_proto::device::CallAnswer;
use cetp_proto::provider::ProviderCall;
use cetp_proto::provider::Reply;
use cetp_proto::schema::DEFAULT_DIALECT;
use cetp_proto::Bundle;
use cetp_reference::app::ProviderApp;
use cetp_reference::device::IDENTITY_A;
use cetp_reference::provider::ReferenceProvider;
use cetp_vectors::checks::{check_answer, AnswerContext};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::time::{Duration, Instant};

const AUTHORITY: &str = "com.clawseed.reference.clawseed.tools";
const METHODS: [&str; 6] = [
    "get_provider_info",
    "execute_tool",
    "execute_tool",
    "get_operation",
    "cancel_operation",
    "frobnicate",
];

/// One envelope: a valid request of a random method, then at most one
/// structural mutation (omitted key, type confusion, forged token, bad
/// request id, unknown or confirmation-asserting extra).
fn envelope(rng: &mut ChaCha8Rng, token: &str, now: i64, n: u64) -> (&'static str, Bundle) {
    let method = METHODS[rng.random_range(0..METHODS.len())];
    let mut b = Bundle::new()
        .with("protocol_version", Value::Int(2))
        .with("session_token", Value::str(token))
        .with(
            "request_id",
            Value::str(format!(
                "00000000-0000-4000-8000-{:012x}",
                n & 0xffff_ffff_ffff
            )),
        )
        .with("deadline_at_ms", Value::Long(now + 30_000));
    match method {
        "execute_tool" => {
            b.insert("tool_name", Value::str("get_quote"));
            b.insert("args", Value::str(r#"{"symbol":"ACME"}"#));
        }
        "get_operation" | "cancel_operation" => {
            b.insert("operation_id", Value::str("op-unknown"));
        }
        _ => {}
    }
    match rng.random_range(0..8) {
        0 => {
            let keys = [
                "protocol_version",
                "session_token",
                "request_id",
                "deadline_at_ms",
            ];
            b.0.remove(keys[rng.random_range(0..keys.len())]);
        }
        1 => {
            b.insert("protocol_version", Value::Long(2));
        }
        2 => {
            b.insert("session_token", Value::str("forged-token"));
        }
        3 => {
            b.insert("request_id", Value::str("not-a-uuid"));
        }
        4 => {
            b.insert("confirmed", Value::Bool(true));
        }
        5 => {
            b.insert("deadline_at_ms", Value::Int(5));
        }
        _ => {}
    }
    (method, b)
}

fn judge(method: &str, request: &Bundle, answer: &CallAnswer) -> usize {
    check_answer(&AnswerContext {
        method,
        v1: !request.contains("protocol_version"),
        request: Some(request),
        answer,
        negotiated: None,
        tool: None,
        package: Some("com.clawseed.reference"),
        dialect: DEFAULT_DIALECT,
        known_scopes: None,
        offer: None,
        provider_versions: None,
    })
    .len()
}

fn token_of(answer: &CallAnswer) -> String {
    match answer {
        CallAnswer::Result(Some(b)) => b
            .get_json("data")
            .ok()
            .and_then(|d| d["session_token"].as_str().map(str::to_string))
            .unwrap_or_default(),
        _ => String::new(),
    }
}

fn negotiate_bundle() -> Bundle {
    Bundle::new()
        .with("consumer_versions", Value::IntArray(vec![2, 1]))
        .with("consumer_capabilities", Value::str("[]"))
}

/// In-process: the Provider's `call` with the caller and clock given.
fn in_process(duration: Duration, threads: usize) -> (f64, usize) {
    let p = ReferenceProvider::reference();
    let caller = IDENTITY_A.caller();
    let now = 1_800_000_000_000i64;
    let to_answer = |r: Reply| match r {
        Reply::Result { bundle, .. } => CallAnswer::Result(bundle),
        Reply::Threw { class, message } => CallAnswer::Threw { class, message },
    };
    let neg = to_answer(p.call(
        &caller,
        now,
        &ProviderCall {
            method: "negotiate".into(),
            arg: None,
            extras: Some(negotiate_bundle()),
        },
    ));
    let token = token_of(&neg);
    let start = Instant::now();
    let results: Vec<(u64, usize)> = std::thread::scope(|s| {
        (0..threads)
            .map(|t| {
                let (p, caller, token) = (&p, &caller, &token);
                s.spawn(move || {
                    let mut rng = ChaCha8Rng::seed_from_u64(t as u64);
                    let (mut n, mut findings) = (0u64, 0usize);
                    while start.elapsed() < duration {
                        for _ in 0..256 {
                            let (method, b) = envelope(&mut rng, token, now, (t as u64) << 40 | n);
                            let answer = to_answer(p.call(
                                caller,
                                now,
                                &ProviderCall {
                                    method: method.into(),
                                    arg: None,
                                    extras: Some(b.clone()),
                                },
                            ));
                            findings += judge(method, &b, &answer);
                            n += 1;
                        }
                    }
                    (n, findings)
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|h| h.join().unwrap_or((0, 0)))
            .collect()
    });
    let n: u64 = results.iter().map(|r| r.0).sum();
    (
        n as f64 / start.elapsed().as_secs_f64(),
        results.iter().map(|r| r.1).sum(),
    )
}

/// Over TCP: the simulated device served on loopback, `threads` callers.
fn over_tcp(duration: Duration, threads: usize) -> Result<(f64, usize), String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let sim = cetp_sim::Sim::new(cetp_sim::SimConfig::default()).map_err(|e| e.to_string())?;
    let port = rt
        .block_on(async {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
            let port = l.local_addr()?.port();
            tokio::spawn(sim.clone().serve_tcp("a", l));
            Ok::<_, std::io::Error>(port)
        })
        .map_err(|e| e.to_string())?;
    let spec = cetp_targets::TargetSpec::parse(&format!("tcp:127.0.0.1:{port}"))
        .map_err(|e| e.to_string())?;
    let target = cetp_targets::open(&spec).map_err(|e| e.to_string())?;
    let dev = target.a.as_ref();
    let token = token_of(
        &dev.call(
            AUTHORITY,
            "negotiate",
            None,
            Some(&negotiate_bundle()),
            10_000,
        )
        .map_err(|e| e.to_string())?,
    );
    let start = Instant::now();
    let results: Vec<(u64, usize)> = std::thread::scope(|s| {
        (0..threads)
            .map(|t| {
                let token = &token;
                s.spawn(move || {
                    let mut rng = ChaCha8Rng::seed_from_u64(100 + t as u64);
                    let (mut n, mut findings) = (0u64, 0usize);
                    while start.elapsed() < duration {
                        let (method, b) =
                            envelope(&mut rng, token, dev.now_ms(), (t as u64) << 40 | n);
                        if let Ok(answer) = dev.call(AUTHORITY, method, None, Some(&b), 10_000) {
                            findings += judge(method, &b, &answer);
                        }
                        n += 1;
                    }
                    (n, findings)
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|h| h.join().unwrap_or((0, 0)))
            .collect()
    });
    let n: u64 = results.iter().map(|r| r.0).sum();
    Ok((
        n as f64 / start.elapsed().as_secs_f64(),
        results.iter().map(|r| r.1).sum(),
    ))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let ms = args
        .iter()
        .position(|a| a == "--ms")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000u64);
    let d = Duration::from_millis(ms);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "{:<44} {:>14} {:>10}",
        "fuzz throughput", "envelopes/s", "findings"
    );
    let (rate, f) = in_process(d, threads);
    println!(
        "{:<44} {:>14.0} {:>10}",
        format!("in-process, sans-IO Provider ({threads} threads)"),
        rate,
        f
    );
    match over_tcp(d, 16) {
        Ok((rate, f)) => println!(
            "{:<44} {:>14.0} {:>10}",
            "TCP to the simulated device (16 callers)", rate, f
        ),
        Err(e) => println!("{:<44} {:>14} {e}", "TCP to the simulated device", "error"),
    }
}
