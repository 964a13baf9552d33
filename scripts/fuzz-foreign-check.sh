#!/usr/bin/env bash
# cetp fuzz on Providers not built on the Rust reference engine, on clocks
# that cannot move, with the observers vendors write (issue 40):
#
#  1. the Java sample (examples/java-provider) on the JVM device, through the
#     descriptor oracle, once per observer a vendor may write
#     (profiles/README.md): a counter of effects (profile.toml), an integer
#     count of objects (profile-count.toml), a list (profile-list.toml);
#     each: no finding, no oracle note, at least MIN_JUDGED % of sequences
#     judged;
#  2. each seeded defect of the sample (defects.tsv) found by the fuzzer
#     within DEFECT_BUDGET, no vectors involved;
#  3. the Kotlin sample (examples/kotlin-provider, its own base class, no
#     async_operations) with its two vendor profiles (an integer count, a
#     capped page), clean as in 1, and its seeded defects, each reported
#     found or not within DEFECT_BUDGET (KOTLIN_DEFECTS_MUST=1 fails the
#     check on one not found; KOTLIN_DEFECTS=0 skips them, as the test
#     command does to keep CI short: they gate nothing there);
#  4. the reference on `cetp sim --fixed-clock`, through the descriptor
#     oracle: no finding, no note, judged share as above.
#
#   scripts/fuzz-foreign-check.sh [--no-build]
#
# PARTS (default "java java-defects kotlin kotlin-defects sim") picks the
# parts to run; JAVA_PROFILES (default the three) the Java sample's
# profiles; SIM_VARIANTS names legal variants run on `cetp sim
# --fixed-clock` after the reference, each for VARIANT_BUDGET (default
# FUZZ_BUDGET). The ten-minute runs of docs/fuzz-measurements.md:
#   CETP_BIN=target/release/cetp FUZZ_BUDGET=600s PARTS="java kotlin" \
#     JAVA_PROFILES="profile-count.toml profile-list.toml" scripts/fuzz-foreign-check.sh
#
# FUZZ_BUDGET (default 30s) and DEFECT_BUDGET (default 60s) set the runs'
# lengths; the figures (share judged, envelopes/s, time to each defect) are
# printed. FILL_COMPARE=1 runs each clean run again with `--no-fill` (the
# waits slept out rather than filled with quiet sequences) and prints its
# figures beside (scripts/fuzz-bench.sh sets it). Needs what scripts/jvm-device.sh needs, and cargo unless
# CETP_BIN=path.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
build=1
[ "${1:-}" = "--no-build" ] && build=0
FUZZ_BUDGET="${FUZZ_BUDGET:-30s}"
DEFECT_BUDGET="${DEFECT_BUDGET:-60s}"
MIN_JUDGED="${MIN_JUDGED:-80}"
PARTS=" ${PARTS:-java java-defects kotlin kotlin-defects sim} "
JAVA_PROFILES="${JAVA_PROFILES:-profile.toml profile-count.toml profile-list.toml}"
SIM_VARIANTS="${SIM_VARIANTS:-}"
VARIANT_BUDGET="${VARIANT_BUDGET:-$FUZZ_BUDGET}"
part() { [[ "$PARTS" == *" $1 "* ]]; }
check=fuzz-foreign-check
. scripts/lib/check.sh
check_cetp
# KEEP_WORK=DIR keeps every run's directory (fuzz.json, findings) there.
work="${KEEP_WORK:-$(mktemp -d)}"
mkdir -p "$work"
trap 'stop_all; [ -n "${KEEP_WORK:-}" ] || rm -rf "$work"' EXIT

# Judges one fuzz run's fuzz.json: $1 the label, $2 the directory, $3
# "clean" (no finding, no note, judged share) or a requirement the defect
# breaks (a finding).
judge() {
    python3 - "$1" "$2/fuzz.json" "$3" "$MIN_JUDGED" <<'PY'
import json, sys
label, path, want, min_judged = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
r = json.load(open(path))
s = r["stats"]
cases = max(s["cases"], 1)
judged = s["cases"] - s["unjudged"]
share = 100.0 * judged / cases
secs = max(s["elapsed_ms"], 1) / 1000.0
waits = s.get("during_waits", 0)
others = s["cases"] - waits
others_judged = judged - s.get("during_waits_judged", 0)
line = (f"{label}: {s['cases']} sequences, {judged} judged ({share:.0f}%), "
        f"{s['envelopes']} envelopes ({s['envelopes'] / secs:.1f}/s), "
        f"{waits} of them during real-time waits, {others_judged} of the other {others} judged, "
        f"{len(r['findings'])} findings, {len(r['oracle_notes'])} oracle notes, "
        f"{len(r.get('flaky', []))} flaky, effects unjudged in {s.get('effects_unjudged', 0)} sequences")
problems = []
if want == "clean":
    for f in r["findings"]:
        problems.append(f"finding {f['id']}: {f['signature']}: {f['message'][:400]}")
    for n in r["oracle_notes"]:
        problems.append(f"oracle note: {n[:400]}")
    if share < min_judged:
        problems.append(f"only {share:.0f}% of sequences judged (at least {min_judged:.0f}% expected)")
else:
    if not r["findings"]:
        if want.startswith("report:"):
            line += "; NOT found"
        else:
            problems.append("the seeded defect was not found")
    else:
        first = r.get("first_finding_ms")
        line += f"; first finding after {first / 1000.0:.1f}s: " + r["findings"][0]["signature"][:200]
print("fuzz-foreign-check: " + line)
# A flaky failure is not charged, but says where the target's timing or the
# oracle's reach is thin: shown, never hidden behind its count.
for f in r.get("flaky", [])[:3]:
    print("  flaky: " + json.dumps(f)[:400])
if problems:
    for p in problems:
        print("  " + p)
    sys.exit(1)
PY
}

# A clean run ($1 label, $2 budget, then the fuzz flags), judged clean;
# with FILL_COMPARE=1, once more with --no-fill, for the figures.
clean() {
    local label="$1" budget="$2"
    shift 2
    fuzz "$label" "$budget" "$@"
    judge "$label" "$work/$label" clean || { cat "$work/$label.out"; exit 1; }
    if [ "${FILL_COMPARE:-0}" = 1 ]; then
        fuzz "$label-no-fill" "$budget" "$@" --no-fill
        judge "$label --no-fill" "$work/$label-no-fill" clean || { cat "$work/$label-no-fill.out"; exit 1; }
    fi
}

fuzz() {
    local label="$1" budget="$2" dir="$work/$1"
    shift 2
    set +e
    "$cetp" fuzz --oracle descriptor --budget "$budget" --seed 9 --out "$dir" --quiet "$@" \
        > "$work/$label.out" 2>&1
    local code=$?
    set -e
    if [ ! -f "$dir/fuzz.json" ]; then
        cat "$work/$label.out" >&2
        echo "fuzz-foreign-check: $label wrote no fuzz.json (exit $code)" >&2
        exit 1
    fi
}

if [ "$build" -eq 1 ]; then
    nice -n 10 scripts/jvm-device.sh --build-only 2>/dev/null
fi

# 1. The Java sample, once per observer.
if part java; then
start_jvm "$work/device.log"
for p in $JAVA_PROFILES; do
    label="java-${p%.toml}"
    clean "$label" "$FUZZ_BUDGET" --target "tcp:$a" --target-b "$b" \
        --profile "examples/java-provider/$p" --max-findings 3
done
stop_all
fi

# 2. Each seeded defect, found by the fuzzer alone.
part java-defects && while IFS=$'\t' read -r name req _cases _what; do
    start_jvm "$work/device.log" --defect "$name"
    fuzz "defect-$name" "$DEFECT_BUDGET" --target "tcp:$a" --target-b "$b" \
        --profile examples/java-provider/profile.toml --max-findings 1
    stop_all
    judge "defect $name ($req)" "$work/defect-$name" "$req" || { cat "$work/defect-$name.out"; exit 1; }
done < <(grep -v '^#' examples/java-provider/defects.tsv)

# 3. The Kotlin sample: built as scripts/jvm-jar-check.sh builds it.
kt="$root/examples/kotlin-provider"
if part kotlin || part kotlin-defects; then
if [ ! -f "$kt/target/notes.jar" ] || [ -n "$(find "$kt/src" -newer "$kt/target/notes.jar" -print -quit)" ]; then
    nice -n 10 mvn -q -B -f "$kt/pom.xml" generate-resources > "$work/kotlin-mvn.log" 2>&1 ||
        { cat "$work/kotlin-mvn.log" >&2; exit 3; }
    nice -n 10 java -XX:TieredStopAtLevel=1 -cp "$(cat "$kt/target/kotlinc.classpath")" \
        org.jetbrains.kotlin.cli.jvm.K2JVMCompiler -no-stdlib -no-reflect -jvm-target 17 -Werror \
        -classpath "$(cat android-probe-app/jvm/target/framework.path):$(cat "$kt/target/stdlib.path")" \
        -d "$kt/target/notes.jar" "$kt/src/main/kotlin"
fi
kotlin=(--provider-jar "$kt/target/notes.jar" --classpath "$(cat "$kt/target/stdlib.path")"
        --manifest "$kt/src/main/AndroidManifest.xml")
fi
if part kotlin; then
start_jvm "$work/device.log" "${kotlin[@]}"
for p in profile.toml profile-list.toml; do
    label="kotlin-${p%.toml}"
    clean "$label" "$FUZZ_BUDGET" --target "tcp:$a" --target-b "$b" --profile "$kt/$p" --max-findings 3
done
stop_all
fi
part kotlin-defects && [ "${KOTLIN_DEFECTS:-1}" = 1 ] && while IFS=$'\t' read -r name req _cases _what; do
    start_jvm "$work/device.log" "${kotlin[@]}" --jvm-prop "com.example.cetp.notes.defect=$name"
    fuzz "kotlin-defect-$name" "$DEFECT_BUDGET" --target "tcp:$a" --target-b "$b" \
        --profile "$kt/profile.toml" --max-findings 1
    stop_all
    want="report:$req"
    [ "${KOTLIN_DEFECTS_MUST:-0}" = 1 ] && want="$req"
    judge "kotlin defect $name ($req)" "$work/kotlin-defect-$name" "$want" ||
        { cat "$work/kotlin-defect-$name.out"; exit 1; }
done < <(grep -v '^#' "$kt/defects.tsv")

# 4. The reference on a clock that cannot move, then each legal variant
#    asked for.
sim_fixed() {
    local label="$1" budget="$2"
    shift 2
    sa="127.0.0.1:$(free_port)"
    sb="127.0.0.1:$(free_port)"
    "$cetp" sim --listen "$sa" --listen-b "$sb" --fixed-clock "$@" > "$work/sim.log" 2>&1 &
    pids+=($!)
    wait_ready "$work/sim.log" "$!" "listening identity=b"
    clean "$label" "$budget" --target "tcp:$sa" --target-b "$sb" \
        --profile profiles/reference.toml --max-findings 3
    stop_all
}
if part sim; then
    sim_fixed sim-fixed-clock "$FUZZ_BUDGET"
    for v in $SIM_VARIANTS; do
        sim_fixed "sim-fixed-clock-$v" "$VARIANT_BUDGET" --variant "$v"
    done
fi
echo "fuzz-foreign-check: ok"
