#!/usr/bin/env bash
# Wall time of the full suite: against the built-in simulated device
# (in-process, through the wire codec) and against a separately started
# simulated device over TCP. Prints one table.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p cetp-cli
bin=target/release/cetp

ms() { date +%s%3N; }

t0=$(ms); $bin run --target sim >/dev/null; rc_sim=$?; t1=$(ms)

out=$(mktemp)
$bin sim --listen 127.0.0.1:0 >"$out" 2>/dev/null &
sim_pid=$!
trap 'kill $sim_pid 2>/dev/null || true; rm -f "$out"' EXIT
for _ in $(seq 1 50); do grep -q "identity=b" "$out" && break; sleep 0.1; done
a=$(sed -n 's/^listening identity=a addr=//p' "$out")
b=$(sed -n 's/^listening identity=b addr=//p' "$out")
t2=$(ms); $bin run --target "tcp:$a" --target-b "$b" --profile profiles/reference.toml >/dev/null; rc_tcp=$?; t3=$(ms)

printf '%-28s %10s %6s\n' "target" "wall (s)" "exit"
printf '%-28s %10.2f %6s\n' "sim (in-process wire)" "$(echo "($t1-$t0)/1000" | bc -l)" "$rc_sim"
printf '%-28s %10.2f %6s\n' "tcp (separate cetp sim)" "$(echo "($t3-$t2)/1000" | bc -l)" "$rc_tcp"
