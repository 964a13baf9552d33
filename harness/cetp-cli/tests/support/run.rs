//! Runs the `cetp` binary the way a user does, for the test files that
//! check it end to end.
#![allow(dead_code)]

use std::process::{Command, Output};

/// `cetp ARGS…`, waited for, its output kept.
pub fn cetp(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cetp"))
        .args(args)
        .output()
        .expect("cetp runs")
}

/// stdout then stderr, for assertions and their failure messages.
pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}
