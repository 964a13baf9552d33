#!/usr/bin/env bash
# A vendor's own compiled Provider certified on the JVM device
# (scripts/jvm-device.sh --provider-jar), as a vendor's CI does it: not a
# phone (see "Certify your Provider in CI without a phone" in
# examples/java-provider/README.md).
#
#  1. The sample Provider built as a jar and registered from flags alone
#     (no manifest) gives, case by case, the verdicts of the built-in sample
#     (--baseline: the built-in run's report.json; without it, this script
#     runs the built-in sample first).
#  1b. The sample from its APK (scripts/build-apks.sh; --provider-apk: the
#     dex read back into class files with frames computed, the manifest
#     from the APK's binary XML) gives, case by case, the same verdicts.
#  2. A Kotlin Provider (examples/kotlin-provider), compiled here by the
#     Kotlin compiler Maven fetches, on its own base class, with
#     kotlin-stdlib on --classpath and registered from its manifest: the
#     whole suite with profile.toml (its count of changes) may claim CETP
#     v2, every core case judged (escalation, a scope identity b lacks, a
#     too-large result, an idempotent update's effect); with
#     profile-list.toml no FAIL, no INFRA; then each of its seeded defects
#     (--jvm-prop, defects.tsv) FAILs citing its requirement.
#  2b. The Kotlin Provider from its APK (kotlin-stdlib from the APK's own
#     dex) gives, case by case, the verdicts of its jar, and the claim.
#  3. A Provider whose call() throws, a class Binder carries, one it
#     cannot, and an Error (which kills a phone's Provider process), and
#     one whose onCreate() throws: FAILs charged to the Provider, with the
#     reason, never INFRA.
#  3b. The sample guarded by a signature-level permission of its own
#     (fixtures/manifests/signature-guarded.xml): refused to the probes as a
#     phone refuses it, a FAIL naming the SecurityException.
#  4. A class that is not there, a class whose base class is missing, and
#     the Kotlin Provider without kotlin-stdlib: exit 2 before serving,
#     naming the missing class.
#
#   scripts/jvm-jar-check.sh [--no-build] [--baseline REPORT.json]
#
# Needs what scripts/jvm-device.sh needs, and cargo unless CETP_BIN=path.
# Prints each part's time.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
build=1 baseline=""
while [ $# -gt 0 ]; do
    case "$1" in
        --no-build) build=0; shift ;;
        --baseline) baseline="${2:?--baseline REPORT.json}"; shift 2 ;;
        *) echo "usage: $0 [--no-build] [--baseline REPORT.json]" >&2; exit 2 ;;
    esac
done
check=jvm-jar-check
. scripts/lib/check.sh
check_cetp
out="$root/android-probe-app/jvm/target"
work="$(mktemp -d)"
trap 'stop_all; rm -rf "$work"' EXIT

t0=$(date +%s)
if [ "$build" -eq 1 ]; then
    nice -n 10 scripts/jvm-device.sh --build-only 2>/dev/null
fi
fw="$(cat "$out/framework.path")"

# Starts the device with the flags given, waits for its "ready"; sets
# target and target_b. The device's log is $work/device.log.
start_device() {
    start_jvm "$work/device.log" "$@"
    target="tcp:$a"
    target_b="$b"
}

# cetp run against the device started last; the report lands in $work/$1.
run_cetp() {
    local name="$1"
    shift
    set +e
    "$cetp" run --target "$target" --target-b "$target_b" --report-dir "$work/$name" "$@" > "$work/$name.out" 2>&1
    set -e
    stop_all
    [ -f "$work/$name/report.json" ] || { cat "$work/$name.out" "$work/device.log"; echo "jvm-jar-check: $name: no report"; exit 1; }
}

sample_flags=(--profile examples/java-provider/profile.toml)

# same_verdicts WHAT BASE_LABEL BASE_REPORT LABEL REPORT [claim]: the run of
# REPORT gave BASE_REPORT's verdict in every case and check (and, with
# `claim`, may claim CETP v2); prints the differences and fails otherwise.
same_verdicts() {
    python3 - "$@" <<'PY'
import json, sys
what, base_label, base_path, label, path = sys.argv[1:6]
need_claim = sys.argv[6:] == ["claim"]
base, run = json.load(open(base_path)), json.load(open(path))
def verdicts(r):
    return {c["id"]: c["verdict"] for c in r["cases"] + r["checks"]}
b, r = verdicts(base), verdicts(run)
diff = [f"{i}: {base_label} {b.get(i)}, {label} {r.get(i)}" for i in sorted(set(b) | set(r)) if b.get(i) != r.get(i)]
if diff or (need_claim and not run["claim"]["cetp_v2"]):
    print(f"jvm-jar-check: {what} differs from the {base_label} run, or may not claim CETP v2:")
    for d in diff:
        print("  " + d)
    print("  claim: " + run["claim"]["statement"])
    sys.exit(1)
s = run["summary"]
print(f"jvm-jar-check: {what}: the {base_label} run's verdicts in all {len(r)} cases and checks "
      f"({s['pass']} passed, {s['fail']} failed, {s['not_applicable']} not applicable, {s['infra_error']} infra)"
      + (f"; {run['claim']['statement']}" if need_claim else ""))
PY
}

# ---- 1. the sample as a jar, registered from flags
t1=$(date +%s)
if [ -z "$baseline" ]; then
    start_device
    run_cetp builtin "${sample_flags[@]}"
    baseline="$work/builtin/report.json"
fi
mkdir -p "$work/jar"
jar cf "$work/jar/sample-tasks.jar" -C "$out/sample-classes" .
# The sample's manifest, said with flags (what a vendor without a manifest
# at hand does): the discovery service's meta-data and the provider's own.
certs="$(sed -n 's/.*android:value="\([0-9a-f]\{64\}\)".*/\1/p' examples/java-provider/src/main/AndroidManifest.xml)"
start_device --provider-jar "$work/jar/sample-tasks.jar" \
    --provider-class com.example.cetp.tasks.TaskToolProvider \
    --authority com.example.cetp.tasks.clawseed.tools --package com.example.cetp.tasks \
    --permission com.clawseed.permission.ACCESS_TOOLS \
    --meta com.clawseed.tools.version=2 --meta com.clawseed.tools.versions=2 \
    --provider-meta "com.example.cetp.tasks.manager_certs=$certs"
run_cetp sample-jar "${sample_flags[@]}"
same_verdicts "the sample as a jar" built-in "$baseline" jar "$work/sample-jar/report.json" ||
    { cat "$work/sample-jar.out"; exit 1; }
echo "jvm-jar-check: part 1 took $(( $(date +%s) - t1 )) s"

# ---- 1b. the sample from its APK, as a vendor ships it (issue 41)
t1b=$(date +%s)
"$root/scripts/build-apks.sh" >/dev/null
start_device --provider-apk "$root/target/apk/java-provider.apk"
grep -h "apk-to-jar:" "$work/device.log" || true
run_cetp sample-apk "${sample_flags[@]}"
same_verdicts "the sample from its APK" built-in "$baseline" APK "$work/sample-apk/report.json" ||
    { cat "$work/sample-apk.out"; exit 1; }
echo "jvm-jar-check: part 1b took $(( $(date +%s) - t1b )) s"

# ---- 2. a Kotlin Provider on its own base class
t2=$(date +%s)
kt="$root/examples/kotlin-provider"
if ! nice -n 10 mvn -q -B -f "$kt/pom.xml" generate-resources > "$work/kotlin-mvn.log" 2>&1; then
    cat "$work/kotlin-mvn.log" >&2
    echo "jvm-jar-check: mvn could not fetch the Kotlin compiler" >&2
    exit 3
fi
stdlib="$(cat "$kt/target/stdlib.path")"
rm -f "$kt/target/notes.jar"
# The client compiler only: a compiler run this short is mostly JIT work (half the time).
nice -n 10 java -XX:TieredStopAtLevel=1 -cp "$(cat "$kt/target/kotlinc.classpath")" org.jetbrains.kotlin.cli.jvm.K2JVMCompiler \
    -no-stdlib -no-reflect -jvm-target 17 -Werror -classpath "$fw:$stdlib" \
    -d "$kt/target/notes.jar" "$kt/src/main/kotlin"
echo "jvm-jar-check: compiled examples/kotlin-provider with kotlinc in $(( $(date +%s) - t2 )) s"
kotlin_flags=(--provider-jar "$kt/target/notes.jar" --classpath "$stdlib" --manifest "$kt/src/main/AndroidManifest.xml")
# The whole suite with the vendor's profile (profile.toml: a count of
# changes) and with the capped list observer (profile-list.toml).
for profile in profile profile-list; do
    start_device "${kotlin_flags[@]}"
    # IDEM-008's two-minute window and CONF-010's token lifetime run out on
    # the device's moved clock.
    run_cetp "kotlin-$profile" --profile "$kt/$profile.toml"
    python3 - "$work/kotlin-$profile/report.json" "$profile" <<'PY' || { cat "$work/kotlin-$profile.out"; exit 1; }
import json, sys
r, profile = json.load(open(sys.argv[1])), sys.argv[2]
bad = [f"{c['id']} {c['verdict']}: {c['reason']}" for c in r["cases"] + r["checks"]
       if c["verdict"] in ("FAIL", "INFRA_ERROR", "FLAKY", "WARN")]
s = r["summary"]
# What the sample's side-effecting tools, confirmation and observer must
# let the suite judge (a run that judged less lost something).
if s["pass"] < 75:
    bad.append(f"only {s['pass']} passed")
if profile == "profile":
    # The vendor's profile judges every core case: the claim, and the cases
    # only its roles and its count of changes reach.
    verdicts = {c["id"]: c["verdict"] for c in r["cases"]}
    for case in ("CONF-008", "CONF-009", "EXE-009", "EXE-010", "IDEM-007", "LARGE-002", "CONF-010", "BIND-005"):
        if verdicts.get(case) != "PASS":
            bad.append(f"{case} is {verdicts.get(case)}, not PASS")
    if not r["claim"]["cetp_v2"]:
        bad.append(f"claim: {r['claim']['statement']}")
if bad:
    print(f"jvm-jar-check: the Kotlin Provider with {profile}.toml does not pass ({s['pass']} passed):")
    for b in bad:
        print("  " + b)
    sys.exit(1)
print(f"jvm-jar-check: Kotlin Provider, {profile}.toml: {s['pass']} passed, 0 failed, "
      f"{s['not_applicable']} not applicable, 0 infra; {r['claim']['statement']}")
PY
done
# 2b. The same Provider from its APK (built in part 1b by build-apks.sh):
# kotlin-stdlib comes from the APK's own dex, nothing on --classpath.
start_device --provider-apk "$root/target/apk/kotlin-provider.apk"
run_cetp kotlin-apk --profile "$kt/profile.toml"
same_verdicts "the Kotlin Provider from its APK" jar "$work/kotlin-profile/report.json" APK "$work/kotlin-apk/report.json" claim ||
    { cat "$work/kotlin-apk.out"; exit 1; }
# Each seeded defect (examples/kotlin-provider/defects.tsv): the cases that
# show it, a FAIL citing its requirement.
while IFS=$'\t' read -r name req cases _what; do
    start_device "${kotlin_flags[@]}" --jvm-prop "com.example.cetp.notes.defect=$name"
    only=()
    for c in $cases; do only+=(--only "$c"); done
    run_cetp "kotlin-$name" --profile "$kt/profile.toml" "${only[@]}"
    python3 - "$work/kotlin-$name/report.json" "$name" "$req" <<'PY' || { cat "$work/kotlin-$name.out"; exit 1; }
import json, sys
report, name, req = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
fails = [c for c in report["cases"] + report["checks"] if c["verdict"] == "FAIL"]
citing = [c["id"] for c in fails if req in (c.get("cited") or [])]
if not citing:
    print(f"jvm-jar-check: Kotlin seeded defect {name}: no FAIL cites {req}; FAILs: "
          + "; ".join(f"{c['id']} {c.get('cited')}" for c in fails))
    sys.exit(1)
print(f"jvm-jar-check: Kotlin seeded defect {name}: FAIL citing {req} ({', '.join(citing)})")
PY
done < <(grep -v '^#' "$kt/defects.tsv")
echo "jvm-jar-check: part 2 took $(( $(date +%s) - t2 )) s"

# ---- 3. the vendor's exceptions are the vendor's
t3=$(date +%s)
fixtures="$root/android-probe-app/jvm/fixtures/java"
mkdir -p "$work/broken-classes"
find "$fixtures" -name '*.java' > "$work/broken-sources"
javac --release 17 -Xlint:all,-classfile -Werror -encoding UTF-8 -cp "$fw" -d "$work/broken-classes" @"$work/broken-sources"
jar cf "$work/jar/broken.jar" -C "$work/broken-classes" .
for where in call call-plain call-error create; do
    start_device --provider-jar "$work/jar/broken.jar" --provider-class com.example.cetp.broken.BrokenProvider \
        --authority com.example.cetp.broken.clawseed.tools \
        --meta com.clawseed.tools.version=2 --meta com.clawseed.tools.versions=2 \
        --provider-meta "com.example.cetp.broken.throw=$where"
    run_cetp "broken-$where" --only NEG-001 --only DESC-001
    python3 - "$work/broken-$where/report.json" "$where" <<'PY' || { cat "$work/broken-$where.out"; exit 1; }
import json, sys
r, where = json.load(open(sys.argv[1])), sys.argv[2]
# What the host must be told, per place of the throw, as a phone tells it:
# the carried class the Provider's own subclass crosses Binder as; nothing
# (an empty reply, judged as the Provider's answer); the process that died
# during the call, or while starting (with the Error, or the onCreate's
# exception, in the message).
expect = {"call": "exception java.lang.IllegalStateException where", "call-plain": "answered <no status>",
          "call-error": "provider_died", "create": "provider_died"}[where]
also = {"call": None, "call-plain": None, "call-error": "java.lang.AssertionError",
        "create": "its onCreate threw"}[where]
cases = [c for c in r["cases"] if c["verdict"] != "NOT_APPLICABLE"]
problems = []
if not cases:
    problems.append("no case ran")
for c in cases:
    if c["verdict"] != "FAIL":
        problems.append(f"{c['id']} is {c['verdict']}, not FAIL: {c['reason']}")
    elif expect not in c["reason"] or (also and also not in c["reason"]):
        problems.append(f"{c['id']} FAILs without saying '{expect}' and '{also}': {c['reason']}")
if r["summary"]["infra_error"]:
    problems.append(f"{r['summary']['infra_error']} INFRA_ERROR")
if problems:
    print(f"jvm-jar-check: BrokenProvider throwing in {where}:")
    for p in problems:
        print("  " + p)
    sys.exit(1)
print(f"jvm-jar-check: BrokenProvider throwing in {where}: "
      + "; ".join(f"{c['id']} FAIL ({c['reason'][:300]})" for c in cases))
PY
done
echo "jvm-jar-check: part 3 took $(( $(date +%s) - t3 )) s"

# ---- 3b. a Provider no other app may acquire is refused, as on a phone (issue 44)
t3b=$(date +%s)
# The sample guarded by a signature permission of its own: the probes,
# signed with other keys, do not hold it (BinderRules), so negotiate meets
# the system server's SecurityException; before, the JVM device served it.
start_device --provider-jar "$work/jar/sample-tasks.jar" \
    --manifest "$root/android-probe-app/jvm/fixtures/manifests/signature-guarded.xml"
run_cetp signature-guarded --profile examples/java-provider/profile.toml --only NEG-001
python3 - "$work/signature-guarded/report.json" <<'PY' || { cat "$work/signature-guarded.out"; exit 1; }
import json, sys
r = json.load(open(sys.argv[1]))
cases = [c for c in r["cases"] if c["verdict"] != "NOT_APPLICABLE"]
bad = [c for c in cases if c["verdict"] != "FAIL" or "java.lang.SecurityException" not in c["reason"]]
if not cases or bad or r["summary"]["infra_error"]:
    print("jvm-jar-check: the signature-guarded Provider was not refused as on a phone: "
          + "; ".join(f"{c['id']} {c['verdict']}: {c['reason']}" for c in cases))
    sys.exit(1)
print("jvm-jar-check: the signature-guarded Provider: "
      + "; ".join(f"{c['id']} FAIL ({c['reason'][:200]})" for c in cases))
PY
echo "jvm-jar-check: part 3b took $(( $(date +%s) - t3b )) s"

# ---- 4. a class that cannot be loaded is a usage error
t4=$(date +%s)
# The jar of NeedsMissing without its base class, as a vendor who forgot a jar.
(cd "$work/broken-classes" && jar cf "$work/jar/partial.jar" com/example/cetp/broken/NeedsMissing.class)
usage_error() {
    local expect="$1"
    shift
    local a b code
    a="127.0.0.1:$(free_port)"
    b="127.0.0.1:$(free_port)"
    set +e
    nice -n 10 scripts/jvm-device.sh --listen "$a" --listen-b "$b" --no-build "$@" > "$work/usage.log" 2>&1
    code=$?
    set -e
    if [ "$code" -ne 2 ] || ! grep -v 'starting Robolectric' "$work/usage.log" | grep -- "$expect" >/dev/null ||
        grep -q ready "$work/usage.log"; then
        cat "$work/usage.log"
        echo "jvm-jar-check: expected exit 2 naming $expect before serving; got exit $code"
        exit 1
    fi
    echo "jvm-jar-check: usage error (exit 2): $(grep -v 'starting Robolectric' "$work/usage.log" | grep -m1 -- "$expect")"
}
usage_error com.example.cetp.broken.NoSuchProvider --provider-jar "$work/jar/broken.jar" \
    --provider-class com.example.cetp.broken.NoSuchProvider --authority com.example.cetp.broken.clawseed.tools
usage_error com.example.cetp.broken.MissingBase --provider-jar "$work/jar/partial.jar" \
    --provider-class com.example.cetp.broken.NeedsMissing --authority com.example.cetp.broken.clawseed.tools
# The Kotlin Provider without kotlin-stdlib on --classpath: the classes its
# code names (not its superclass) are missing.
usage_error kotlin.jvm.internal.Intrinsics --provider-jar "$kt/target/notes.jar" \
    --manifest "$kt/src/main/AndroidManifest.xml"
echo "jvm-jar-check: part 4 took $(( $(date +%s) - t4 )) s"
echo "jvm-jar-check: all of it took $(( $(date +%s) - t0 )) s"
