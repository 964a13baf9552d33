#!/usr/bin/env bash
# `cetp fuzz` scaled out, side by side in one run: the same budget on 1, 2
# and 4 simulated devices served over TCP (`cetp sim`, each its own
# process, mutations taking EFFECT_DELAY_MS of real time), one worker per
# device, judged by the differential oracle. Prints sequences, envelopes,
# envelopes/s and the speed-up over one device; every run must end clean
# (no finding, no worker lost).
#
#   BUDGET=30s          per run
#   DEVICES="1 2 4"
#   EFFECT_DELAY_MS=30  real time a mutation takes on the device
#   SEED=7
#   CETP=path/to/cetp   default: a release build made here
set -euo pipefail
cd "$(dirname "$0")/.."
budget=${BUDGET:-30s}
devices=${DEVICES:-1 2 4}
delay=${EFFECT_DELAY_MS:-30}
seed=${SEED:-7}
if [ -z "${CETP:-}" ]; then
  cargo build -q --release -p cetp-cli
  CETP=target/release/cetp
fi
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# One served sim per device; its address from its first line.
serve() {
  local log="$work/sim-$1.log"
  "$CETP" sim --listen 127.0.0.1:0 --effect-delay-ms "$delay" >"$log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 300); do
    addr=$(sed -n 's/^listening identity=a addr=//p' "$log" | head -1)
    [ -n "$addr" ] && { echo "$addr"; return; }
    sleep 0.1
  done
  echo "cetp sim named no address in 30 s" >&2
  exit 1
}

max=0
for n in $devices; do [ "$n" -gt "$max" ] && max=$n; done
addrs=()
for i in $(seq 1 "$max"); do addrs+=("$(serve "$i")"); done

printf '%-8s %10s %10s %12s %8s\n' devices sequences envelopes envelopes/s speed-up
base=""
for n in $devices; do
  args=()
  for i in $(seq 0 $((n - 1))); do args+=(--target "tcp:${addrs[$i]}"); done
  out="$work/run-$n"
  # Worker 0 alone is a one-target run; a corpus makes even that a
  # campaign, so that 1 device is measured through the same code.
  set +e
  "$CETP" fuzz "${args[@]}" --corpus "$out/corpus" --profile profiles/reference.toml \
    --budget "$budget" --seed "$seed" --out "$out" -q >"$out.txt" 2>&1
  rc=$?
  set -e
  if [ "$rc" -ne 0 ]; then
    cat "$out.txt"
    echo "fuzz-scale-bench: the run on $n devices exited $rc (a finding or a lost device)" >&2
    exit 1
  fi
  read -r seqs env ms < <(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
s = r["stats"]
print(s["cases"], s["envelopes"], max(s["elapsed_ms"], 1))' "$out/fuzz.json")
  rate=$(python3 -c "print(f'{$env * 1000 / $ms:.0f}')")
  [ -z "$base" ] && base=$rate
  printf '%-8s %10s %10s %12s %8s\n' "$n" "$seqs" "$env" "$rate" "$(python3 -c "print(f'{$rate / $base:.2f}x')")"
done
