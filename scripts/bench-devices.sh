#!/usr/bin/env bash
# What several devices buy: the whole suite against 1, 2 and 4 simulated
# devices served over TCP (`cetp sim`, each its own process, like phones
# behind `adb connect`), each Provider taking D ms per effect
# (`--effect-delay-ms`, default 100: a phone's Provider writing to its
# database). Prints the wall time of each run beside the ideal (the
# one-device time divided by the devices), and whether the sharded runs
# gave exactly the one-device run's case and check verdicts and claim.
# The alternative a user has without --devices shard: one device, or N
# unrelated runs split by hand.
#   scripts/bench-devices.sh [D_MS]
set -euo pipefail
cd "$(dirname "$0")/.."
delay=${1:-100}
cargo build -q --release -p cetp-cli
bin=target/release/cetp
work=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT

# start_sim NAME: a device on free ports; appends its target to $targets.
targets=()
start_sim() {
  local name=$1
  "$bin" sim --listen 127.0.0.1:0 --effect-delay-ms "$delay" >"$work/$name.out" 2>/dev/null &
  pids+=($!)
  for _ in $(seq 1 100); do
    grep -q "identity=b" "$work/$name.out" && break
    sleep 0.1
  done
  local a b
  a=$(sed -n 's/^listening identity=a addr=//p' "$work/$name.out")
  b=$(sed -n 's/^listening identity=b addr=//p' "$work/$name.out")
  targets+=("tcp:$a,b=$b")
}
for k in 1 2 3 4; do start_sim "dev$k"; done

# verdicts DIR: case and check verdicts and the claim, one line each.
verdicts() {
  python3 - "$1/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for key in ("cases", "checks"):
    for c in sorted(r[key], key=lambda c: c["id"]):
        print(key, c["id"], c["verdict"])
print("claim", r["claim"]["cetp_v2"], r["claim"]["statement"])
PY
}

run() { # N: a run on the first N devices; prints its wall seconds
  local n=$1 args=()
  for t in "${targets[@]:0:$n}"; do args+=(--target "$t"); done
  local t0 t1
  t0=$(date +%s.%N)
  "$bin" run "${args[@]}" --profile profiles/reference.toml \
    --report-dir "$work/run$n" >"$work/run$n.txt" 2>&1 || true
  t1=$(date +%s.%N)
  python3 -c "print(f'{$t1 - $t0:.1f}')"
}

echo "suite against simulated devices over TCP, ${delay} ms per effect, $(nproc) cores"
printf '%-8s %10s %10s %8s  %s\n' devices wall_s ideal_s ratio "verdicts vs 1 device"
one=$(run 1)
verdicts "$work/run1" >"$work/v1"
printf '%-8s %10s %10s %8s  %s\n' 1 "$one" "$one" 1.00 "(reference)"
for n in 2 4; do
  s=$(run "$n")
  verdicts "$work/run$n" >"$work/v$n"
  same=identical
  cmp -s "$work/v1" "$work/v$n" || same="DIFFERENT: $(diff "$work/v1" "$work/v$n" | head -3 | tr '\n' ' ')"
  ideal=$(python3 -c "print(f'{$one / $n:.1f}')")
  ratio=$(python3 -c "print(f'{$s / ($one / $n):.2f}')")
  printf '%-8s %10s %10s %8s  %s\n' "$n" "$s" "$ideal" "$ratio" "$same"
done
echo "ratio: wall time over the ideal quarter/half (1.00 = perfect sharding)"
