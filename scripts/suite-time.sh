#!/usr/bin/env bash
# Wall time of the full suite: against the built-in simulated device
# (in-process, through the wire codec) and against a separately started
# simulated device over TCP. Prints one table.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p cetp-cli
bin=target/release/cetp

ms() { date +%s%3N; }

rc_sim=0; t0=$(ms); $bin run --target sim >/dev/null || rc_sim=$?; t1=$(ms)

out=$(mktemp)
$bin sim --listen 127.0.0.1:0 --adb-listen 127.0.0.1:0 >"$out" 2>/dev/null &
sim_pid=$!
adb_port=$((20000 + RANDOM % 20000))
trap 'kill $sim_pid 2>/dev/null || true; rm -f "$out"; ANDROID_ADB_SERVER_PORT=$adb_port timeout 10 adb kill-server >/dev/null 2>&1 || true' EXIT
for _ in $(seq 1 50); do grep -q "listening adb" "$out" && break; sleep 0.1; done
a=$(sed -n 's/^listening identity=a addr=//p' "$out")
b=$(sed -n 's/^listening identity=b addr=//p' "$out")
rc_tcp=0; t2=$(ms); $bin run --target "tcp:$a" --target-b "$b" --profile profiles/reference.toml >/dev/null || rc_tcp=$?; t3=$(ms)

# The same simulated device through a real adb server (Debian's adb).
rc_adb=skipped; t4=0; t5=0
if command -v adb >/dev/null 2>&1; then
  dev=$(sed -n 's/^listening adb addr=//p' "$out")
  ANDROID_ADB_SERVER_PORT=$adb_port timeout 20 adb start-server >/dev/null 2>&1
  ANDROID_ADB_SERVER_PORT=$adb_port timeout 10 adb connect "$dev" >/dev/null
  rc_adb=0; t4=$(ms); $bin run --target "adb:$dev,server=127.0.0.1:$adb_port" --profile profiles/reference.toml >/dev/null || rc_adb=$?; t5=$(ms)
fi

# A Provider whose observer tool never answers (issue 13): the run stops
# paying the wait after a few timeouts, so the full suite stays bounded; the
# old behaviour (a 15 s wait per call) took 8 minutes.
rc_hang=0; t6=$(ms); $bin run --target sim:hang=list_alerts --report-dir "$out.hang" >/dev/null || rc_hang=$?; t7=$(ms)
named=$(grep -c 'stopped answering `list_alerts`' "$out.hang/report.json" || true)
rm -rf "$out.hang"

printf '%-28s %10s %6s\n' "target" "wall (s)" "exit"
printf '%-28s %10.2f %6s\n' "sim (in-process wire)" "$(echo "($t1-$t0)/1000" | bc -l)" "$rc_sim"
printf '%-28s %10.2f %6s\n' "tcp (separate cetp sim)" "$(echo "($t3-$t2)/1000" | bc -l)" "$rc_tcp"
printf '%-28s %10.2f %6s\n' "adb (real adb server)" "$(echo "($t5-$t4)/1000" | bc -l)" "$rc_adb"
printf '%-28s %10.2f %6s   (%s cases name the stalled tool)\n' "sim, observer stalls" "$(echo "($t7-$t6)/1000" | bc -l)" "$rc_hang" "$named"
