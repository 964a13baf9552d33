#!/usr/bin/env bash
# The end-to-end JVM run of the test command: `cetp run --target tcp:` against
# scripts/jvm-device.sh, the probe app's own code under Robolectric in front of
# the sample Java Provider (examples/java-provider), with its profile.
#
#  0. The JVM device's own tests (scripts/jvm-device.sh --self-test).
#  1. The sample as written: no case FAILs, no check FAILs, nothing is
#     INFRA; every case that needs a `resolve` is NOT_APPLICABLE by the setup
#     naming the JVM device's missing windows (Robolectric has none to play
#     the user's decision in: it needs a phone), never PASS; every other
#     NOT_APPLICABLE case is so by the spec. The device moves the clock
#     the Provider reads (DeviceClock): BIND-005 (an hour-long session),
#     IDEM-008 and ASYNC-008 (two-minute windows) PASS in seconds, and no
#     case is left unjudged for want of --max-wait.
#  2. Each seeded defect (examples/java-provider/defects.tsv): the cases that
#     show it FAIL, a FAIL citing the defect's requirement.
#  3. scripts/jvm-jar-check.sh: vendors' compiled Providers loaded with
#     --provider-jar (the sample as a jar gives the verdicts of run 1 case
#     by case; a Kotlin Provider; Providers that throw; missing classes).
#
# Needs cargo (it builds the debug cetp; CETP_BIN=path uses another) and what
# scripts/probe-app-check.sh needs. Prints each run's figures and its time.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
if [ -n "${CETP_BIN:-}" ]; then
    cetp="$CETP_BIN"
else
    cargo build -q -p cetp-cli
    cetp="${CARGO_TARGET_DIR:-$root/target}/debug/cetp"
fi
work="$(mktemp -d)"
device_pid=""
stop_device() {
    if [ -n "$device_pid" ]; then
        kill "$device_pid" 2>/dev/null || true
        wait "$device_pid" 2>/dev/null || true
        device_pid=""
    fi
}
trap 'stop_device; rm -rf "$work"' EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Starts the device (with the defect $1, if any) and waits for its "ready".
start_device() {
    local a b log="$work/device.log"
    a="127.0.0.1:$(free_port)"
    b="127.0.0.1:$(free_port)"
    : > "$log"
    local flags=(--listen "$a" --listen-b "$b" --no-build)
    [ -n "${1:-}" ] && flags+=(--defect "$1")
    nice -n 10 scripts/jvm-device.sh "${flags[@]}" > "$log" 2>&1 &
    device_pid=$!
    for _ in $(seq 600); do
        if grep -q ready "$log"; then
            target="tcp:$a"
            target_b="$b"
            return 0
        fi
        if ! kill -0 "$device_pid" 2>/dev/null; then
            cat "$log" >&2
            echo "jvm-device-check: the JVM device exited before it was ready" >&2
            exit 1
        fi
        sleep 0.5
    done
    cat "$log" >&2
    echo "jvm-device-check: the JVM device was not ready within 300 s" >&2
    exit 1
}

t0=$(date +%s)
echo "jvm-device-check: building the app, the sample and the JVM device"
nice -n 10 scripts/jvm-device.sh --build-only 2>/dev/null
echo "jvm-device-check: built in $(( $(date +%s) - t0 )) s"
# The device's own shadows, each on the case that broke without it (a pipe
# read before its writer finished came back empty).
if ! nice -n 10 scripts/jvm-device.sh --self-test --no-build > "$work/self-test.log" 2>&1; then
    cat "$work/self-test.log"
    echo "jvm-device-check: the JVM device's own tests failed"
    exit 1
fi
echo "jvm-device-check: the JVM device's own tests: $(grep -m1 'tests successful' "$work/self-test.log" | tr -s ' []')"

# ---- 1. the sample as written
t1=$(date +%s)
start_device ""
set +e
"$cetp" run --target "$target" --target-b "$target_b" --profile examples/java-provider/profile.toml \
    --report-dir "$work/clean" > "$work/clean.out" 2>&1
code=$?
set -e
stop_device
python3 - "$work/clean/report.json" vectors/cases <<'PY' || { cat "$work/clean.out"; exit 1; }
import json, pathlib, sys
report = json.load(open(sys.argv[1]))
resolving = set()
for f in pathlib.Path(sys.argv[2]).glob("*.json"):
    for case in json.load(open(f))["cases"]:
        if any(s.get("do") == "resolve" for s in case.get("steps", [])):
            resolving.add(case["id"])
problems = []
by = {}
for c in report["cases"] + report["checks"]:
    by.setdefault(c["verdict"], []).append(c)
for v in ("FAIL", "FLAKY", "WARN"):
    for c in by.get(v, []):
        problems.append(f"{c['id']} is {v}: {c['reason']}")
for c in by.get("INFRA_ERROR", []):
    problems.append(f"{c['id']} is INFRA: {c['reason']}")
for c in report["cases"]:
    if c["id"] in resolving and c["verdict"] == "PASS":
        problems.append(f"{c['id']} needs a resolve, which this device cannot do, yet PASSED")
unjudged = []
for c in by.get("NOT_APPLICABLE", []):
    r = c["reason"]
    if "cannot `resolve` here" in r and "resolve needs a phone" in r:
        unjudged.append(c["id"])
    elif not r.startswith("applies to "):
        problems.append(f"{c['id']} is NOT_APPLICABLE by the setup: {r}")
verdicts = {c["id"]: c["verdict"] for c in report["cases"]}
for moved in ("BIND-005", "IDEM-008", "ASYNC-008"):
    if verdicts.get(moved) != "PASS":
        problems.append(f"{moved} is {verdicts.get(moved)}, not PASS on the device's moved clock")
passed = len(by.get("PASS", []))
if passed < 80:
    problems.append(f"only {passed} cases and checks passed")
claim = report["claim"]
if claim["cetp_v2"] or not claim["v2_declared"]:
    problems.append(f"unexpected claim: {claim['statement']}")
for cap in claim["capabilities"]:
    if not cap["declared"]:
        problems.append(f"capability {cap['capability']} not declared")
if problems:
    print("jvm-device-check: the sample Provider's run is not as expected:")
    for p in problems:
        print("  " + p)
    sys.exit(1)
s = report["summary"]
print(f"jvm-device-check: sample Provider: {s['pass']} passed, {s['fail']} failed, "
      f"{s['not_applicable']} not applicable (not judged for want of resolve: "
      f"{', '.join(sorted(unjudged))}), {s['infra_error']} infra; claim: {claim['statement']}")
PY
echo "jvm-device-check: clean run (device start and cetp run) took $(( $(date +%s) - t1 )) s (cetp exit $code)"

# ---- 2. each seeded defect
while IFS=$'\t' read -r name req cases _what; do
    t2=$(date +%s)
    start_device "$name"
    only=()
    for c in $cases; do only+=(--only "$c"); done
    set +e
    "$cetp" run --target "$target" --target-b "$target_b" --profile examples/java-provider/profile.toml \
        "${only[@]}" --report-dir "$work/$name" > "$work/$name.out" 2>&1
    set -e
    stop_device
    python3 - "$work/$name/report.json" "$name" "$req" <<'PY' || { cat "$work/$name.out"; exit 1; }
import json, sys
report, name, req = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
fails = [c for c in report["cases"] + report["checks"] if c["verdict"] == "FAIL"]
citing = [c["id"] for c in fails if req in (c.get("cited") or [])]
if not citing:
    print(f"jvm-device-check: seeded defect {name}: no FAIL cites {req}; FAILs: "
          + "; ".join(f"{c['id']} {c.get('cited')}" for c in fails))
    sys.exit(1)
print(f"jvm-device-check: seeded defect {name}: FAIL citing {req} ({', '.join(citing)})")
PY
    echo "jvm-device-check: defect $name took $(( $(date +%s) - t2 )) s"
done < <(grep -v '^#' examples/java-provider/defects.tsv)
echo "jvm-device-check: the built-in sample and its defects took $(( $(date +%s) - t0 )) s"

# ---- 3. a vendor's compiled Provider (--provider-jar), compared with the clean run above
CETP_BIN="$cetp" scripts/jvm-jar-check.sh --no-build --baseline "$work/clean/report.json"
echo "jvm-device-check: all of it took $(( $(date +%s) - t0 )) s"
