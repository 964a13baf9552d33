//! Rewrites probe-wire frames, one per line on stdin, in canonical form on
//! stdout. Used to prepare golden frames (`vectors/wire/`): write a frame by
//! hand, canonicalize it, check it by eye.
//!
//! `cargo run -p cetp-wire --example wire_canon < frames.jsonl`
//!
//! Requests of known ops are also decoded through their typed parameters to
//! check them (the output keeps unknown members); a line that does not decode
//! is reported with its error class and the run fails.

use cetp_wire::{decode_frame, encode_frame, Frame};
use std::io::{BufRead, Write};
use std::process::ExitCode;

fn main() -> ExitCode {
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    let mut failed = false;
    for (n, line) in stdin.lock().split(b'\n').enumerate() {
        let line = match line {
            Ok(l) => l,
            Err(e) => {
                eprintln!("read error: {e}");
                return ExitCode::FAILURE;
            }
        };
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let frame = decode_frame(&line).and_then(|f| match f {
            Frame::Request(r) => r.decode_op().map(|_| Frame::Request(r)),
            other => Ok(other),
        });
        match frame {
            Ok(f) => {
                if out.write_all(&encode_frame(&f)).is_err() {
                    return ExitCode::FAILURE;
                }
            }
            Err(e) => {
                eprintln!("line {}: {} ({})", n + 1, e, e.class());
                failed = true;
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
