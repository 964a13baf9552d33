#!/usr/bin/env bash
# A vendor's Consumer certified on the JVM device, as a vendor's CI does it
# (no phone; "Certify your Consumer in CI without a phone" in README.md):
# the sample Consumer (examples/java-consumer), compiled here with javac
# against the adapter interface the device publishes
# (android-probe-app/jvm/target/cetp-consumer-api.jar) and the framework jar,
# loaded from its jar (scripts/jvm-device.sh --consumer-jar … --consumer-class
# …), made to act by `cetp consumer --target tcp:…` while the device hosts
# the hostile Provider as the probe app does on a phone.
#
#  1. The sample as written, through `--target jvm:…,consumer_jar=…,
#     consumer_class=…` (cetp starts and stops the device), with its profile (examples/java-consumer/
#     profile.toml: its name and the bounds it declares, no driver: the
#     device makes it act): no FAIL, no WARN, nothing INFRA; at least 38
#     of the Consumer scenarios judged and passed; every other one named
#     not judged, with the ability it needs.
#  1b. The sample from an APK's code (D8, then --consumer-apk: read back
#     into class files by the device): the same verdicts, case by case.
#  2. Each seeded defect (examples/java-consumer/defects.tsv, chosen with
#     --jvm-prop com.example.cetp.agent.defect=NAME): the scenarios that
#     show it FAIL, citing the defect's requirement.
#  3. An adapter class that is not there: exit 2 before serving, naming it.
#
#   scripts/jvm-consumer-check.sh [--no-build]
#
# Needs what scripts/jvm-device.sh needs, and cargo unless CETP_BIN=path.
# Prints each part's time.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
build=1
case "${1:-}" in
    --no-build) build=0 ;;
    "") ;;
    *) echo "usage: $0 [--no-build]" >&2; exit 2 ;;
esac
if [ -n "${CETP_BIN:-}" ]; then
    cetp="$CETP_BIN"
else
    cargo build -q -p cetp-cli
    cetp="${CARGO_TARGET_DIR:-$root/target}/debug/cetp"
fi
out="$root/android-probe-app/jvm/target"
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

t0=$(date +%s)
if [ "$build" -eq 1 ]; then
    nice -n 10 scripts/jvm-device.sh --build-only 2>/dev/null
fi
# ---- the sample Consumer, compiled as its vendor would: against the
# adapter interface and the framework, -Werror.
mkdir -p "$work/classes"
find examples/java-consumer/src -name '*.java' > "$work/sources"
javac --release 17 -Xlint:all,-classfile -Werror -encoding UTF-8 \
    -cp "$out/cetp-consumer-api.jar:$(cat "$out/framework.path")" -d "$work/classes" @"$work/sources" 2>"$work/javac.log" ||
    { cat "$work/javac.log"; echo "jvm-consumer-check: the sample Consumer does not compile"; exit 1; }
jar cf "$work/java-consumer.jar" -C "$work/classes" .
consumer=(--consumer-jar "$work/java-consumer.jar" --consumer-class com.example.cetp.agent.AgentAdapter)
echo "jvm-consumer-check: built in $(( $(date +%s) - t0 )) s"

# Starts the device with the flags given, waits for its "ready"; sets target.
start_device() {
    local a b log="$work/device.log"
    a="127.0.0.1:$(free_port)"
    b="127.0.0.1:$(free_port)"
    : > "$log"
    nice -n 10 scripts/jvm-device.sh --listen "$a" --listen-b "$b" --no-build "$@" > "$log" 2>&1 &
    device_pid=$!
    for _ in $(seq 600); do
        if grep -q ready "$log"; then
            target="tcp:$a"
            return 0
        fi
        if ! kill -0 "$device_pid" 2>/dev/null; then
            cat "$log" >&2
            echo "jvm-consumer-check: the JVM device exited before it was ready" >&2
            exit 1
        fi
        sleep 0.5
    done
    cat "$log" >&2
    echo "jvm-consumer-check: the JVM device was not ready within 300 s" >&2
    exit 1
}

# cetp consumer against the device started last; the report lands in $work/$1.
run_consumer() {
    local name="$1"
    shift
    set +e
    "$cetp" consumer --target "$target" --report-dir "$work/$name" "$@" > "$work/$name.out" 2>&1
    set -e
    stop_device
    [ -f "$work/$name/report.json" ] || { cat "$work/$name.out" "$work/device.log"; echo "jvm-consumer-check: $name: no report"; exit 1; }
}

# ---- 1. the sample as written
t1=$(date +%s)
# Through the jvm: target, as a vendor's CI runs it: cetp starts the device
# itself (on ports of its own) and stops it; with the sample's profile, its
# declared bounds (§7.3) are judged.
set +e
"$cetp" consumer --target "jvm:sample,consumer_jar=$work/java-consumer.jar,consumer_class=com.example.cetp.agent.AgentAdapter,build=no" \
    --profile examples/java-consumer/profile.toml --report-dir "$work/sample" > "$work/sample.out" 2>&1
set -e
cp "$work/sample/jvm-device.log" "$work/device.log" 2>/dev/null || true
[ -f "$work/sample/report.json" ] || { cat "$work/sample.out" "$work/device.log"; echo "jvm-consumer-check: sample: no report"; exit 1; }
python3 - "$work/sample/report.json" <<'PY' || { cat "$work/sample.out"; tail -50 "$work/device.log"; exit 1; }
import json, sys
r = json.load(open(sys.argv[1]))
cases = r["cases"]
bad = [c for c in cases if c["verdict"] not in ("PASS", "NOT_APPLICABLE")]
passed = [c for c in cases if c["verdict"] == "PASS"]
unnamed = [c for c in cases if c["verdict"] == "NOT_APPLICABLE" and "not judged: the scenario" not in c["reason"]]
for c in bad:
    print(f"jvm-consumer-check: {c['id']} {c['verdict']}: {c['reason'][:400]}")
for c in unnamed:
    print(f"jvm-consumer-check: {c['id']} not judged without naming what it needs: {c['reason'][:400]}")
if len(cases) < 44:
    print(f"jvm-consumer-check: only {len(cases)} scenarios ran")
if bad or unnamed or len(passed) < 38 or len(cases) < 44:
    print(f"jvm-consumer-check: {len(passed)} of {len(cases)} passed (at least 38 must be judged and pass)")
    sys.exit(1)
gaps = "; ".join(f"{c['id']}: {c['reason'][:160]}" for c in cases if c["verdict"] == "NOT_APPLICABLE")
print(f"jvm-consumer-check: the sample Consumer: {len(passed)} of {len(cases)} scenarios PASS, no FAIL, WARN or INFRA; not judged: {gaps or 'none'}")
PY
echo "jvm-consumer-check: the sample in $(( $(date +%s) - t1 )) s"

# ---- 1b. the sample from an APK's code (--consumer-apk): its classes D8'd to
# dex as a Gradle build would, read back by the device; case by case the
# verdicts of run 1.
t1b=$(date +%s)
scripts/build-apks.sh --tools-only >/dev/null 2>&1 || { echo "jvm-consumer-check: cannot fetch D8"; exit 1; }
mkdir -p "$work/dex"
java -cp "$(cat android-probe-app/apk/target/r8.path)" com.android.tools.r8.D8 --release --min-api 26 \
    --lib "$(cat "$out/framework.path")" --classpath "$out/cetp-consumer-api.jar" \
    --output "$work/dex" "$work/java-consumer.jar"
(cd "$work/dex" && zip -q -X "$work/java-consumer.apk" classes*.dex)
start_device --consumer-apk "$work/java-consumer.apk" --consumer-class com.example.cetp.agent.AgentAdapter
run_consumer sample-apk --profile examples/java-consumer/profile.toml
python3 - "$work/sample/report.json" "$work/sample-apk/report.json" <<'PY' || { cat "$work/sample-apk.out"; exit 1; }
import json, sys
jar, apk = (json.load(open(p)) for p in sys.argv[1:3])
v = lambda r: {c["id"]: c["verdict"] for c in r["cases"]}
a, b = v(jar), v(apk)
diff = [f"{i}: jar {a.get(i)}, APK {b.get(i)}" for i in sorted(set(a) | set(b)) if a.get(i) != b.get(i)]
if diff:
    print("jvm-consumer-check: the sample from its APK differs from its jar: " + "; ".join(diff))
    sys.exit(1)
print(f"jvm-consumer-check: the sample from its APK: the same {len(b)} verdicts as from its jar")
PY
echo "jvm-consumer-check: the APK in $(( $(date +%s) - t1b )) s"

# ---- 2. each seeded defect FAILs the scenarios that show it, citing its requirement
t2=$(date +%s)
while IFS=$'\t' read -r name req scenarios _; do
    case "$name" in ''|'#'*) continue ;; esac
    only=()
    for s in ${scenarios//,/ }; do only+=(--only "$s"); done
    start_device "${consumer[@]}" --jvm-prop "com.example.cetp.agent.defect=$name"
    run_consumer "defect-$name" "${only[@]}"
    python3 - "$work/defect-$name/report.json" "$name" "$req" <<'PY' || { cat "$work/defect-$name.out"; exit 1; }
import json, sys
r, name, req = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
fails = [c for c in r["cases"] if c["verdict"] == "FAIL" and req in c["cited"]]
if not fails:
    print(f"jvm-consumer-check: the seeded defect {name} drew no FAIL citing {req}: "
          + "; ".join(f"{c['id']} {c['verdict']} {c['reason'][:200]}" for c in r["cases"]))
    sys.exit(1)
print(f"jvm-consumer-check: seeded defect {name}: " + ", ".join(c["id"] for c in fails) + f" FAIL citing {req}")
PY
done < examples/java-consumer/defects.tsv
echo "jvm-consumer-check: the seeded defects in $(( $(date +%s) - t2 )) s"

# ---- 3. a missing adapter class is the command's mistake, before serving
set +e
nice -n 10 scripts/jvm-device.sh --listen "127.0.0.1:$(free_port)" --listen-b "127.0.0.1:$(free_port)" --no-build \
    --consumer-jar "$work/java-consumer.jar" --consumer-class com.example.cetp.agent.NoSuchAdapter > "$work/missing.log" 2>&1
rc=$?
set -e
if [ "$rc" -ne 2 ] || ! grep -q "com.example.cetp.agent.NoSuchAdapter" "$work/missing.log"; then
    cat "$work/missing.log"
    echo "jvm-consumer-check: a missing adapter class exited $rc, not 2 naming it"
    exit 1
fi
echo "jvm-consumer-check: a missing adapter class: exit 2, named"
echo "jvm-consumer-check: all passed in $(( $(date +%s) - t0 )) s"
