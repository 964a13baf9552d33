#!/usr/bin/env bash
# The end-to-end JVM run of the test command: `cetp run --target jvm:sample`,
# which starts scripts/jvm-device.sh (the probe app's own code under
# Robolectric in front of the sample Java Provider, examples/java-provider)
# on ports of its own, runs against it with the sample's profile and stops it.
#
#  0. The JVM device's own tests (scripts/jvm-device.sh --self-test: its
#     shadows, and resolve: a selector found is clicked, one that matches
#     nothing names the screen, an activity that throws is the Provider's).
#  1. The sample as written: no case FAILs, no check FAILs, nothing is
#     INFRA; every case that plays the user's decision (a `resolve` step:
#     the sample's confirmation dialog, run by Robolectric, its buttons
#     clicked by the profile's [ui] selectors) PASSes; every other
#     NOT_APPLICABLE case is so by the spec. The device moves the clock
#     the Provider reads (DeviceClock): BIND-005 (an hour-long session),
#     IDEM-008 and ASYNC-008 (two-minute windows) and CONF-010 (a
#     five-minute resume token) PASS in seconds, and no case is left
#     unjudged for want of --max-wait. So the sample may claim CETP v2.
#  2. Each seeded defect (examples/java-provider/defects.tsv): the cases that
#     show it FAIL, a FAIL citing the defect's requirement (acts-on-deny: a
#     denied confirmation carried out, CONF-002 citing CETP2-4.3-12).
#  3. scripts/jvm-jar-check.sh: vendors' compiled Providers loaded with
#     --provider-jar (the sample as a jar gives the verdicts of run 1 case
#     by case; a Kotlin Provider; Providers that throw; missing classes).
#
# Needs cargo (it builds the debug cetp; CETP_BIN=path uses another) and what
# scripts/probe-app-check.sh needs. Prints each run's figures and its time.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
check=jvm-device-check
. scripts/lib/check.sh
check_cetp
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# This checkout's device, whichever cetp runs (CETP_BIN); built once below,
# so each run starts it with build=no. cetp writes its output to the run's
# report directory (jvm-device.log) and quotes its tail if it does not start.
export CETP_JVM_DEVICE="$root/scripts/jvm-device.sh"

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
set +e
"$cetp" run --target jvm:sample,build=no --profile examples/java-provider/profile.toml \
    --report-dir "$work/clean" > "$work/clean.out" 2>&1
code=$?
set -e
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
# The user's decision is played: every case with a resolve is judged and PASSes.
decided = []
for c in report["cases"]:
    if c["id"] not in resolving:
        continue
    if c["verdict"] != "PASS":
        problems.append(f"{c['id']} plays the user's decision, yet is {c['verdict']}: {c['reason']}")
    else:
        decided.append(c["id"])
if len(decided) < 9:
    problems.append(f"only {len(decided)} cases that play the user's decision passed: {decided}")
for c in by.get("NOT_APPLICABLE", []):
    r = c["reason"]
    if not r.startswith("applies to "):
        problems.append(f"{c['id']} is NOT_APPLICABLE by the setup: {r}")
verdicts = {c["id"]: c["verdict"] for c in report["cases"]}
for moved in ("BIND-005", "IDEM-008", "ASYNC-008"):
    if verdicts.get(moved) != "PASS":
        problems.append(f"{moved} is {verdicts.get(moved)}, not PASS on the device's moved clock")
passed = len(by.get("PASS", []))
if passed < 80:
    problems.append(f"only {passed} cases and checks passed")
claim = report["claim"]
if not claim["cetp_v2"] or not claim["v2_declared"]:
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
      f"{s['not_applicable']} not applicable, {s['infra_error']} infra; the user's decision played "
      f"and judged in {', '.join(sorted(decided))}; claim: {claim['statement']}")
PY
echo "jvm-device-check: clean run (device start and cetp run) took $(( $(date +%s) - t1 )) s (cetp exit $code)"
# cetp stopped the device it started: nothing serves its port any more.
port="$(sed -n 's/^jvm-device: ready: identity a on [^:]*:\([0-9]*\),.*/\1/p' "$work/clean/jvm-device.log")"
if [ -z "$port" ] || pgrep -f -- "-Dcetp.jvm.listen=127.0.0.1:$port " >/dev/null; then
    echo "jvm-device-check: the JVM device of the clean run (port ${port:-unknown}) outlived cetp run"
    exit 1
fi

# ---- 2. each seeded defect
while IFS=$'\t' read -r name req cases _what; do
    t2=$(date +%s)
    only=()
    for c in $cases; do only+=(--only "$c"); done
    set +e
    "$cetp" run --target "jvm:sample,defect=$name,build=no" --profile examples/java-provider/profile.toml \
        "${only[@]}" --report-dir "$work/$name" > "$work/$name.out" 2>&1
    set -e
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
