//! A hostile device offering an endless `read_fd` result: the client reads
//! at most `max_bytes` (plus one chunk) and its memory stays bounded.
//!
//! In its own test binary, and each case in a fresh process (this binary
//! re-run on the ignored `memory_case` test), so that nothing else
//! allocates while the peak is measured and memory freed by an earlier case
//! cannot hide a later one's. The peak (VmHWM) is reset through
//! `/proc/self/clear_refs` once everything is set up, when the kernel allows
//! it; the scripted device runs in the same process, so whatever it
//! allocates while sending counts against the budget.

mod common;

use cetp_proto::device::ErrorKind;
use cetp_targets::{open_with, OpenOptions, TargetSpec};
use cetp_transport::ClientConfig;
use cetp_wire::{encode_frame, Frame, OkPayload, ReadFdOk, MAX_FRAME_BYTES};
use common::{honest_hello, Act, Script, ScriptedPeer};
use std::sync::Arc;
use std::time::{Duration, Instant};

const MIB: u64 = 1024 * 1024;
const BUDGET: u64 = 64 * MIB;

fn status_kib(key: &str) -> u64 {
    let text = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("{key} not in /proc/self/status"))
}

/// Resets the peak to the current RSS; false when the kernel refuses.
fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// The base64 text of a chunk of `raw` bytes, made once and shared.
fn chunk_body(raw: usize) -> Arc<[u8]> {
    let data: Vec<u8> = (0..raw).map(|i| (i % 251) as u8).collect();
    let line = encode_frame(&Frame::chunk(0, data));
    let text = std::str::from_utf8(&line).unwrap();
    let start = text.find("\"chunk\":\"").unwrap() + 9;
    let end = start + text[start..].find('"').unwrap();
    Arc::from(&line[start..end])
}

/// `{"chunk":"<body>","id":ID}` in parts.
fn chunk_parts(id: u64, body: &Arc<[u8]>) -> Vec<Arc<[u8]>> {
    vec![
        Arc::from(&b"{\"chunk\":\""[..]),
        body.clone(),
        Arc::from(format!("\",\"id\":{id}}}").as_bytes()),
    ]
}

/// The largest chunk whose frame still fits in 16 MiB.
fn max_chunk_raw() -> usize {
    (MAX_FRAME_BYTES - 64) / 4 * 3
}

struct Case {
    name: &'static str,
    max_bytes: u64,
    script: Box<Script>,
    expect: Result<u64, ErrorKind>,
}

const CASES: usize = 5;
const CASE_ENV: &str = "CETP_MEMORY_CASE";

#[test]
fn a_hostile_read_fd_is_bounded() {
    let exe = std::env::current_exe().unwrap();
    let mut report = Vec::new();
    for case in 0..CASES {
        let out = std::process::Command::new(&exe)
            .args([
                "--exact",
                "memory_case",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CASE_ENV, case.to_string())
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "case {case} failed:\n{text}");
        let line = text
            .lines()
            .find_map(|l| l.split_once("memory case: ").map(|(_, r)| r))
            .unwrap_or_else(|| panic!("case {case} printed no result:\n{text}"));
        report.push(format!("memory case {case}: {line}"));
    }
    eprintln!("{}", report.join("\n"));
}

/// One case per process; run by `a_hostile_read_fd_is_bounded` (all cases
/// in this process when run by hand without the variable).
#[test]
#[ignore = "run in a fresh process by a_hostile_read_fd_is_bounded"]
fn memory_case() {
    let only: Option<usize> = std::env::var(CASE_ENV).ok().and_then(|v| v.parse().ok());
    let one_mib = chunk_body(MIB as usize);
    let largest = chunk_body(max_chunk_raw());
    let largest_too = largest.clone();
    let four_mib = chunk_body(4 * MIB as usize);
    // 16 identical 1 MiB chunks, so the peer shares one body.
    let pattern: Vec<u8> = (0..MIB as usize).map(|i| (i % 251) as u8).collect();
    let honest_sha = cetp_proto::canonical::sha256_hex(&pattern.repeat(16));
    drop(pattern);
    let honest_body = one_mib.clone();
    let cases: Vec<Case> = vec![
        Case {
            name: "endless 1 MiB chunks (1 GiB offered), max_bytes 8 MiB",
            max_bytes: 8 * MIB,
            script: Box::new(move |op, id| {
                honest_hello(op, id).unwrap_or_else(|| Act::Repeat {
                    parts: chunk_parts(id, &one_mib),
                    times: 1024,
                })
            }),
            expect: Err(ErrorKind::BadFrame),
        },
        Case {
            name: "endless 16 MiB chunk frames (1 GiB offered), max_bytes 8 MiB",
            max_bytes: 8 * MIB,
            script: Box::new(move |op, id| {
                honest_hello(op, id).unwrap_or_else(|| Act::Repeat {
                    parts: chunk_parts(id, &largest),
                    times: 86,
                })
            }),
            expect: Err(ErrorKind::BadFrame),
        },
        Case {
            // The other member order: recognised without the full decoder.
            name: "endless id-first 16 MiB chunk frames, max_bytes 8 MiB",
            max_bytes: 8 * MIB,
            script: Box::new(move |op, id| {
                honest_hello(op, id).unwrap_or_else(|| Act::Repeat {
                    parts: vec![
                        Arc::from(format!("{{\"id\":{id},\"chunk\":\"").as_bytes()),
                        largest_too.clone(),
                        Arc::from(&b"\"}"[..]),
                    ],
                    times: 86,
                })
            }),
            expect: Err(ErrorKind::BadFrame),
        },
        Case {
            // Spaces make it non-canonical: every frame goes through the full
            // JSON decoder (about 3x the frame), so these are 4 MiB frames,
            // still four times what a chunk may carry.
            name: "endless non-canonical 4 MiB chunk frames, max_bytes 8 MiB",
            max_bytes: 8 * MIB,
            script: Box::new(move |op, id| {
                honest_hello(op, id).unwrap_or_else(|| Act::Repeat {
                    parts: vec![
                        Arc::from(format!("{{ \"id\": {id}, \"chunk\": \"").as_bytes()),
                        four_mib.clone(),
                        Arc::from(&b"\" }"[..]),
                    ],
                    times: 256,
                })
            }),
            expect: Err(ErrorKind::BadFrame),
        },
        Case {
            name: "16 MiB read within max_bytes, more pending",
            max_bytes: 16 * MIB,
            script: Box::new(move |op, id| {
                honest_hello(op, id).unwrap_or_else(|| {
                    // Exactly max_bytes in 1 MiB chunks, then "more was pending".
                    let mut parts = Vec::new();
                    for _ in 0..16 {
                        parts.extend(chunk_parts(id, &honest_body));
                        parts.push(Arc::from(&b"\n"[..]));
                    }
                    let ok = ReadFdOk {
                        bytes: 16 * MIB,
                        sha256: honest_sha.clone(),
                        eof: false,
                        error: None,
                        writable: None,
                    };
                    parts.push(Arc::from(encode_frame(&ok.to_frame(id))));
                    Act::SendParts(parts)
                })
            }),
            expect: Ok(16 * MIB),
        },
    ];
    assert_eq!(cases.len(), CASES);
    let opts = OpenOptions {
        client: ClientConfig {
            read_fd_timeout: Duration::from_secs(20),
            ..ClientConfig::default()
        },
        ..OpenOptions::default()
    };
    let resettable = reset_peak();
    for (i, case) in cases.into_iter().enumerate() {
        if only.is_some_and(|o| o != i) {
            continue;
        }
        let script = Arc::new(case.script);
        let s2 = script.clone();
        let peer = ScriptedPeer::start(move |op, id| s2(op, id));
        let target = open_with(&TargetSpec::parse(&peer.spec()).unwrap(), &opts).unwrap();
        // Baseline: everything set up, nothing read yet.
        reset_peak();
        let base = if resettable {
            status_kib("VmHWM")
        } else {
            status_kib("VmHWM").max(status_kib("VmRSS"))
        };
        let start = Instant::now();
        let got = target.a.read_fd("fd-1", case.max_bytes);
        let elapsed = start.elapsed();
        match (&got, case.expect) {
            (Ok(r), Ok(len)) => {
                assert_eq!(r.bytes.len() as u64, len, "{}", case.name);
                assert!(!r.eof, "{}", case.name);
            }
            (Err(e), Err(kind)) => assert_eq!(e.kind, kind, "{}: {e}", case.name),
            (other, want) => panic!("{}: got {other:?}, want {want:?}", case.name),
        }
        drop(got);
        drop(target);
        drop(peer);
        let peak = status_kib("VmHWM");
        let grew = peak.saturating_sub(base) * 1024;
        println!(
            "memory case: {}: peak {:.1} MiB above baseline (VmHWM{}), {elapsed:?}",
            case.name,
            grew as f64 / MIB as f64,
            if resettable {
                ""
            } else {
                ", not resettable here"
            }
        );
        assert!(
            grew < BUDGET,
            "{}: peak grew by {} MiB (budget {} MiB)",
            case.name,
            grew / MIB,
            BUDGET / MIB
        );
        assert!(
            elapsed < Duration::from_secs(20),
            "{}: {elapsed:?}",
            case.name
        );
    }
}
