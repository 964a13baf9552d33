#!/usr/bin/env bash
# What real-time waits cost on a device whose clock cannot move (a phone):
# `cetp sim --fixed-clock` hosting the reference Provider with lifetimes of
# W seconds (a debug build's), lifetime plus a 1 s margin per wait. Prints
# the wall time of a few quick cases alone, with one time-bound case, and
# with two (BIND-005: the session's expires_at, CONF-010: the resume
# token's lifetime): overlapping waits cost about W, not 2W.
#   scripts/bench-waits.sh [W_SECONDS] [--full]
# W defaults to 60 (the issue's figure). --full also times the whole suite
# on the fixed clock against the same device with a movable clock.
set -euo pipefail
cd "$(dirname "$0")/.."
w=60; full=0
for arg in "$@"; do
  case "$arg" in
    --full) full=1 ;;
    *) w=$arg ;;
  esac
done
cargo build -q -p cetp-cli
bin=target/debug/cetp
ttl=$(( w * 1000 - 1000 ))
work=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT

sed "s/^resume_token_ttl_ms = .*/resume_token_ttl_ms = $ttl\nexpiry_margin_ms = 1000/" \
  profiles/reference.toml >"$work/profile.toml"
grep -q "^expiry_margin_ms = 1000" "$work/profile.toml"

# start_sim NAME [FLAGS...]: a device on free ports; sets $a and $b.
start_sim() {
  local name=$1; shift
  "$bin" sim --listen 127.0.0.1:0 "$@" >"$work/$name.out" 2>/dev/null &
  pids+=($!)
  for _ in $(seq 1 100); do
    grep -q "identity=b" "$work/$name.out" && break
    sleep 0.1
  done
  a=$(sed -n 's/^listening identity=a addr=//p' "$work/$name.out")
  b=$(sed -n 's/^listening identity=b addr=//p' "$work/$name.out")
}

ms() { date +%s%3N; }
# timed LABEL ARGS...: one run, its wall time and exit code in a row.
timed() {
  local label=$1; shift
  local rc=0 t0 t1
  t0=$(ms)
  "$bin" run --target "tcp:$a" --target-b "$b" --profile "$work/profile.toml" --color never "$@" >"$work/last.txt" 2>&1 || rc=$?
  t1=$(ms)
  printf '%-52s %10s %6s\n' "$label" "$(awk -v d=$((t1 - t0)) 'BEGIN { printf "%.1f", d / 1000 }')" "$rc"
}

start_sim fixed --fixed-clock --session-ttl-ms "$ttl" --resume-token-ttl-ms "$ttl"
quick=(--only 'NEG-00*' --only 'ENV-00*')
printf 'waits of %s s (lifetime %s ms + 1 s margin), fixed clock\n' "$w" "$ttl"
printf '%-52s %10s %6s\n' "run" "wall (s)" "exit"
timed "quick cases, no wait" "${quick[@]}"
timed "quick cases + BIND-005 (one wait)" "${quick[@]}" --only BIND-005
timed "quick cases + BIND-005 + CONF-010 (two waits)" "${quick[@]}" --only BIND-005 --only CONF-010
if [ "$full" = 1 ]; then
  timed "full suite, fixed clock" --max-wait 5m
  start_sim movable --session-ttl-ms "$ttl" --resume-token-ttl-ms "$ttl"
  timed "full suite, movable clock (same lifetimes)"
fi
