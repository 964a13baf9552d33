#!/usr/bin/env bash
# The main job: a certification run against the built-in simulated device.
# Writes the report to reports/latest/ (report.json and friends).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo build --release -q -p cetp-cli
exec target/release/cetp run --target sim --report-dir reports/latest "$@"
