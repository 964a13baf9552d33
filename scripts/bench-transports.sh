#!/usr/bin/env bash
# Transport benchmark: calls/s and p50/p99 latency of a `call` (execute_tool
# on a read tool of the reference Provider) beside the raw probe-wire `hello`
# round trip, for the in-process, TCP and adb transports, in one table.
#
# Builds in release. The adb row needs a real adb server: one is started on
# a private port (with a private HOME) and always killed on exit; without
# `adb` on PATH the row is printed as skipped.
#
#   DURATION_MS=2000 scripts/bench-transports.sh
set -euo pipefail
cd "$(dirname "$0")/.."

duration_ms="${DURATION_MS:-2000}"
cargo build --release --quiet -p cetp-targets --example bench_transports
bench=target/release/examples/bench_transports
args=(--duration-ms "$duration_ms")

if adb_bin="$(command -v adb)"; then
    port="$("$bench" --free-port)"
    adb_home="$(mktemp -d)"
    stop_adb() {
        ANDROID_ADB_SERVER_PORT="$port" HOME="$adb_home" timeout 15 "$adb_bin" -P "$port" kill-server >/dev/null 2>&1 || true
        rm -rf "$adb_home"
    }
    trap stop_adb EXIT
    ANDROID_ADB_SERVER_PORT="$port" HOME="$adb_home" timeout 30 "$adb_bin" -P "$port" start-server >/dev/null 2>&1
    args+=(--adb "$adb_bin" --adb-server "127.0.0.1:$port")
else
    args+=(--adb-skip "adb not found on PATH")
fi

# Bounded: three rows of 2.5 x DURATION_MS each, plus setup.
timeout $((duration_ms * 9 / 1000 + 60)) "$bench" "${args[@]}"
