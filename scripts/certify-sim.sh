#!/usr/bin/env bash
# The main job: a certification run against the built-in simulated device.
# Writes the reports to reports/latest/ (report.json, junit.xml,
# events.ndjson, summary.md). Needs nothing but a Rust toolchain: no root,
# no apt (the test tools are the test command's business).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v cargo >/dev/null 2>&1; then
  echo "certify-sim: cargo is not on PATH; install a Rust toolchain (rustup) first" >&2
  exit 2
fi
cargo build --release -p cetp-cli
exec target/release/cetp run --target sim --report-dir reports/latest "$@"
