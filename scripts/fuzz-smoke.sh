#!/usr/bin/env bash
# Smoke run of every fuzz target (fuzz/, outside the workspace) on stable
# Rust without sanitizers: SECONDS_PER_TARGET each (default 10), starting
# from the committed seed corpora. A crash fails the script.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${SECONDS_PER_TARGET:-10}
command -v cargo-fuzz >/dev/null 2>&1 || cargo install --locked cargo-fuzz
targets=$(cargo fuzz list --fuzz-dir fuzz)
cargo fuzz build -s none --fuzz-dir fuzz
for t in $targets; do
  work=$(mktemp -d)
  # Copy the seeds: a smoke run must not grow the committed corpus.
  cp -r "fuzz/corpus/$t/." "$work/" 2>/dev/null || true
  echo "== fuzz $t (${secs}s)"
  log=$(mktemp)
  if ! cargo fuzz run -s none --fuzz-dir fuzz "$t" "$work" -- -max_total_time="$secs" -print_final_stats=1 >"$log" 2>&1; then
    tail -40 "$log"
    echo "fuzz target $t failed (crash or build error); the reproducer is under fuzz/artifacts/$t" >&2
    exit 1
  fi
  grep -E "^(Done|stat::number_of_executed_units)" "$log" || true
  rm -rf "$work" "$log"
done
