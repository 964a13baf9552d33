//! A hostile device offering an endless `read_fd` result: the client reads
//! at most `max_bytes` (plus one chunk) and its memory stays bounded.
//!
//! In its own test binary so that no other test allocates while the peak
//! is measured. The peak (VmHWM) is reset through `/proc/self/clear_refs`
//! before each case when the kernel allows it; the scripted device runs in
//! this process too, so its buffers count against the budget.

mod common;

use cetp_targets::{open_with, OpenOptions, TargetSpec};
use cetp_transport::ClientConfig;
use cetp_wire::{encode_frame, Frame, OkPayload, ReadFdOk, MAX_FRAME_BYTES};
use common::{honest_hello, Act, ScriptedPeer};
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

fn chunk_line(id: u64, raw: usize) -> Vec<u8> {
    let data: Vec<u8> = (0..raw).map(|i| (i % 251) as u8).collect();
    let mut line = encode_frame(&Frame::chunk(id, data));
    line.pop();
    line
}

/// The largest chunk whose frame still fits in 16 MiB.
fn max_chunk_raw() -> usize {
    (MAX_FRAME_BYTES - 64) / 4 * 3
}

struct Case {
    name: &'static str,
    max_bytes: u64,
    script: Box<dyn Fn(&str, u64) -> Act + Send + Sync>,
    expect: Result<u64, &'static str>,
}

#[test]
fn a_hostile_read_fd_is_bounded() {
    let endless_1mib: Box<dyn Fn(&str, u64) -> Act + Send + Sync> = Box::new(|op, id| {
        honest_hello(op, id).unwrap_or_else(|| Act::Repeat {
            // 1 GiB offered.
            line: chunk_line(id, MIB as usize),
            times: 1024,
        })
    });
    let endless_max: Box<dyn Fn(&str, u64) -> Act + Send + Sync> = Box::new(|op, id| {
        honest_hello(op, id).unwrap_or_else(|| Act::Repeat {
            line: chunk_line(id, max_chunk_raw()),
            times: 86,
        })
    });
    let honest: Box<dyn Fn(&str, u64) -> Act + Send + Sync> = Box::new(|op, id| {
        honest_hello(op, id).unwrap_or_else(|| {
            // Exactly max_bytes, in 1 MiB chunks, then "more was pending".
            let mut out = Vec::new();
            let data: Vec<u8> = (0..16 * MIB as usize).map(|i| (i % 251) as u8).collect();
            for part in data.chunks(MIB as usize) {
                out.extend_from_slice(&encode_frame(&Frame::chunk(id, part.to_vec())));
            }
            let ok = ReadFdOk {
                bytes: data.len() as u64,
                sha256: cetp_proto::canonical::sha256_hex(&data),
                eof: false,
                error: None,
            };
            out.extend_from_slice(&encode_frame(&ok.to_frame(id)));
            Act::Send(out)
        })
    });
    let cases = vec![
        Case {
            name: "endless 1 MiB chunks (1 GiB offered), max_bytes 8 MiB",
            max_bytes: 8 * MIB,
            script: endless_1mib,
            expect: Err("bad_frame"),
        },
        Case {
            name: "endless 16 MiB chunk frames, max_bytes 8 MiB",
            max_bytes: 8 * MIB,
            script: endless_max,
            expect: Err("bad_frame"),
        },
        Case {
            name: "16 MiB within max_bytes, more pending",
            max_bytes: 16 * MIB,
            script: honest,
            expect: Ok(16 * MIB),
        },
    ];
    let opts = OpenOptions {
        client: ClientConfig {
            read_fd_timeout: Duration::from_secs(20),
            ..ClientConfig::default()
        },
        trace: None,
    };
    let resettable = reset_peak();
    let mut report = Vec::new();
    for case in cases {
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
        report.push(format!(
            "{}: {:.1} MiB above baseline, {elapsed:?}",
            case.name,
            grew as f64 / MIB as f64
        ));
        assert!(
            grew < BUDGET,
            "{}: peak grew by {} MiB (budget {} MiB)",
            case.name,
            grew / MIB,
            BUDGET / MIB
        );
        assert!(elapsed < Duration::from_secs(20), "{}: {elapsed:?}", case.name);
    }
    eprintln!(
        "peak memory (VmHWM{}):\n  {}",
        if resettable { ", reset per case" } else { ", not resettable here" },
        report.join("\n  ")
    );
}
