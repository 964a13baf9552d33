#!/usr/bin/env bash
# The end-to-end JVM device: the probe app's own ProbeSession, Dispatcher and
# AndroidBackend under Robolectric, serving probe wire over TCP for identity
# a and identity b, in front of a CETP v2 Provider: the sample of
# examples/java-provider by default, or a vendor's own compiled Provider
# (--provider-jar), registered as Android registers it from its manifest.
# No phone: see examples/java-provider/README.md for what differs from one,
# and "Certify your Provider in CI without a phone" there for vendors.
#
#   scripts/jvm-device.sh --listen HOST:PORT --listen-b HOST:PORT [--defect NAME]
#       the sample; serves until killed; prints a line with "ready" once
#       both ports accept
#   scripts/jvm-device.sh --listen … --listen-b … --provider-jar JAR …
#           [--provider-class CLASS] [--authority AUTH] [--package PKG]
#           [--manifest AndroidManifest.xml] [--meta KEY=VALUE …]
#           [--provider-meta KEY=VALUE …] [--permission PERM] [--classpath CP]
#       a vendor's Provider. --provider-jar (repeatable; a jar or a class
#       directory) is the vendor's own code, checked before serving: every
#       class it names must load. --classpath (repeatable, ':'-separated)
#       holds its dependencies (kotlin-stdlib, …, .aar files too; not the
#       Android framework, which the device provides). From --manifest (the app's manifest
#       source) come the package, the provider (the one named by
#       --provider-class, or the only one), its authority, permission and
#       meta-data, and the discovery service's meta-data; without it give
#       --provider-class and --authority (the package defaults to the
#       class's). The flags win over the manifest. --meta sets the discovery
#       service's meta-data (spec §2.1: com.clawseed.tools.version=2,
#       com.clawseed.tools.versions=2; com.clawseed.tools.authority is the
#       authority), --provider-meta the provider's own; values are typed as
#       aapt2 types android:value (2 is an Integer).
#       A class that cannot be loaded exits 2 naming it, before serving.
#   ... --jvm-prop KEY=VALUE (repeatable): a system property for the
#       Provider's own code, as a vendor's test switch (the Kotlin sample's
#       seeded defects: --jvm-prop com.example.cetp.notes.defect=NAME, see
#       examples/kotlin-provider/defects.tsv). Not a cetp.jvm.* key: those
#       are the device's own.
#   scripts/jvm-device.sh --listen … --listen-b … --provider-apk APP.apk [flags as above]
#       a vendor's Provider from its APK: the code of its classes*.dex
#       (bundled libraries included) read back into class files by dex2jar,
#       with the stack map frames a JVM verifies computed by ASM
#       (android-probe-app/apk/ApkToJar.java; verification stays on), and
#       the manifest from the APK's binary XML (aapt2 dump xmltree,
#       android-probe-app/apk/apk-manifest.py) unless --manifest is given.
#   ... --consumer-jar JAR… --consumer-class CLASS [--consumer-package PKG]
#       a vendor's Consumer under test beside the Provider: CLASS implements
#       com.clawseed.probe.consumer.ConsumerAdapter (compile against
#       android-probe-app/jvm/target/cetp-consumer-api.jar, which
#       --build-only makes, and the framework jar named in
#       android-probe-app/jvm/target/framework.path); --consumer-jar
#       (repeatable; a jar or a class directory) holds it, the client it
#       drives and their dependencies. The device then hosts the
#       hostile Provider on identity a (host_provider, reply, as the probe app
#       does on a phone), lists consumer_act and `consumers: ["default"]` in
#       hello, and `cetp consumer --target tcp:HOST:PORT` certifies it. The
#       Consumer is an app of its own (PKG, default the class's package);
#       its clock reads are pointed at the device clock as the Provider's are.
#       --consumer-apk APP.apk: the Consumer app's code from its APK (its dex
#       read back into class files as --provider-apk's), with the adapter in
#       it or in a --consumer-jar beside it.
#   ... --no-build: use the classes the last run built
#   scripts/jvm-device.sh --build-only
#       builds and exits (scripts/jvm-device-check.sh builds once, then starts
#       the device several times with --no-build)
#   scripts/jvm-device.sh --self-test [--no-build]
#       runs the device's own tests (JvmShadowsTest: each shadow on the case
#       that broke without it; DeviceClockTest: the clock a Provider reads
#       moves; BinderRulesTest: Binder's rules, each on a case whose
#       outcome changes without it) and exits with their status
#   scripts/jvm-device.sh --list-defects
#       the seeded defects of the sample, one name per line
#
# Then: cetp run --target tcp:HOST:PORT --target-b HOST:PORT --profile PROFILE
#
# Needs what scripts/probe-app-check.sh needs (scripts/setup.sh installs it);
# builds under android-probe-app/jvm/target/.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
defects="$root/examples/java-provider/defects.tsv"
usage="usage: $0 --listen HOST:PORT --listen-b HOST:PORT [--defect NAME | --provider-jar JAR… [--provider-class CLASS]
    [--authority AUTH] [--package PKG] [--manifest FILE] [--meta KEY=VALUE…] [--provider-meta KEY=VALUE…]
    [--permission PERM] [--classpath CP]] [--provider-apk APK] [--jvm-prop KEY=VALUE…]
    [--consumer-jar JAR… | --consumer-apk APK] [--consumer-class CLASS [--consumer-package PKG]] [--no-build] | --list-defects | --build-only | --self-test [--no-build]"

names() { grep -v '^#' "$defects" | cut -f1; }
die() { echo "jvm-device: $*" >&2; exit 2; }

listen="" listen_b="" defect="" build=1 build_only=0 self_test=0
jars=() classpath=() metas=() provider_metas=() jvm_props=() apk="" consumer_jars=()
consumer_class="" consumer_package="" consumer_apk=""
provider_class="" authority="" package="" manifest="" permission=""
while [ $# -gt 0 ]; do
    case "$1" in
        --list-defects) names; exit 0 ;;
        --listen) listen="${2:?$usage}"; shift 2 ;;
        --listen-b) listen_b="${2:?$usage}"; shift 2 ;;
        --defect) defect="${2:?$usage}"; shift 2 ;;
        --no-build) build=0; shift ;;
        --build-only) build_only=1; shift ;;
        --self-test) self_test=1; shift ;;
        --provider-jar) jars+=("${2:?$usage}"); shift 2 ;;
        --provider-apk) apk="${2:?$usage}"; shift 2 ;;
        --provider-class) provider_class="${2:?$usage}"; shift 2 ;;
        --authority) authority="${2:?$usage}"; shift 2 ;;
        --package) package="${2:?$usage}"; shift 2 ;;
        --manifest) manifest="${2:?$usage}"; shift 2 ;;
        --meta) metas+=("${2:?$usage}"); shift 2 ;;
        --provider-meta) provider_metas+=("${2:?$usage}"); shift 2 ;;
        --permission) permission="${2:?$usage}"; shift 2 ;;
        --classpath) classpath+=("${2:?$usage}"); shift 2 ;;
        --jvm-prop) jvm_props+=("${2:?$usage}"); shift 2 ;;
        --consumer-jar) consumer_jars+=("${2:?$usage}"); shift 2 ;;
        --consumer-class) consumer_class="${2:?$usage}"; shift 2 ;;
        --consumer-package) consumer_package="${2:?$usage}"; shift 2 ;;
        --consumer-apk) consumer_apk="${2:?$usage}"; shift 2 ;;
        *) echo "$usage" >&2; exit 2 ;;
    esac
done
if [ "$build_only" -eq 0 ] && [ "$self_test" -eq 0 ]; then
    [ -n "$listen" ] && [ -n "$listen_b" ] || { echo "$usage" >&2; exit 2; }
    for hp in "$listen" "$listen_b"; do
        [[ "$hp" =~ ^.+:[0-9]+$ ]] || { echo "jvm-device: not HOST:PORT: $hp" >&2; exit 2; }
    done
fi
# apk_code APK DIR: the APK's dex read back into DIR/code.jar, class files
# with their stack map frames computed (ApkToJar), DIR made afresh.
apk_code() {
    local from="$1" dir="$2" d2j
    [ -f "$from" ] || die "no such file: $from"
    "$root/scripts/build-apks.sh" --tools-only >&2
    rm -rf "$dir"
    mkdir -p "$dir/classes"
    d2j="$(cat "$root/android-probe-app/apk/target/dex2jar.classpath")"
    javac --release 17 -Xlint:all -Werror -cp "$d2j" -d "$dir/classes" "$root/android-probe-app/apk/ApkToJar.java"
    java -cp "$d2j:$dir/classes" ApkToJar "$from" "$dir/code.jar" \
        "$(cat "$root/android-probe-app/jvm/target/framework.path")" >&2 || die "cannot read the code of $from"
}
if [ -n "$apk" ]; then
    # The APK's code as a jar, its manifest as source: then as --provider-jar.
    # One directory per listening address: devices run side by side.
    from_apk="$root/android-probe-app/jvm/target/provider-apk/${listen//[^0-9A-Za-z]/_}"
    tools="$root/android-probe-app/apk"
    apk_code "$apk" "$from_apk"
    jars+=("$from_apk/code.jar")
    if [ -z "$manifest" ]; then
        python3 "$tools/apk-manifest.py" "$root/target/apk/build/tools/aapt2" "$apk" "$from_apk/AndroidManifest.xml" ||
            die "cannot read the manifest of $apk"
        manifest="$from_apk/AndroidManifest.xml"
    fi
fi
vendor_flags="$provider_class$authority$package$manifest$permission${metas[*]-}${provider_metas[*]-}${classpath[*]-}"
if [ "${#jars[@]}" -eq 0 ] && [ -n "$vendor_flags" ]; then
    die "give the Provider's compiled code with --provider-jar (a jar or a class directory)"
fi
if [ "${#jars[@]}" -gt 0 ]; then
    [ -z "$defect" ] || die "--defect seeds a defect in the sample; it does not apply to --provider-jar"
    [ -n "$manifest" ] || { [ -n "$provider_class" ] && [ -n "$authority" ]; } ||
        die "give --provider-class and --authority, or --manifest"
    for f in "${jars[@]}" $manifest; do
        [ -e "$f" ] || die "no such file or directory: $f"
    done
    for kv in "${metas[@]}" "${provider_metas[@]}"; do
        [[ "$kv" == ?*=* ]] || die "not KEY=VALUE: $kv"
    done
fi
if [ -n "$consumer_apk" ]; then
    # The Consumer app's code as a jar, as a Provider's APK is read above
    # (its adapter compiled into it, or in a --consumer-jar beside it).
    from_capk="$root/android-probe-app/jvm/target/consumer-apk/${listen//[^0-9A-Za-z]/_}"
    apk_code "$consumer_apk" "$from_capk"
    consumer_jars+=("$from_capk/code.jar")
fi
if [ "${#consumer_jars[@]}" -gt 0 ] || [ -n "$consumer_class$consumer_package" ]; then
    [ "${#consumer_jars[@]}" -gt 0 ] && [ -n "$consumer_class" ] ||
        die "a Consumer under test needs its code (--consumer-jar or --consumer-apk) and --consumer-class (its adapter)"
    for f in "${consumer_jars[@]}"; do
        [ -e "$f" ] || die "no such file or directory: $f"
    done
    [[ "$consumer_class" =~ ^[A-Za-z_$][A-Za-z0-9_$.]*$ ]] || die "--consumer-class: not a class name: $consumer_class"
fi
for kv in "${jvm_props[@]}"; do
    [[ "$kv" =~ ^[A-Za-z_][A-Za-z0-9_.-]*=.*$ ]] || die "--jvm-prop: not KEY=VALUE: $kv"
    [[ "$kv" != cetp.jvm.* ]] || die "--jvm-prop: cetp.jvm.* properties are the device's own: $kv"
done
if [ -n "$defect" ] && ! names | grep -xF -- "$defect" >/dev/null; then
    echo "jvm-device: no seeded defect named '$defect'; there are: $(names | tr '\n' ' ')" >&2
    exit 2
fi

out="$root/android-probe-app/jvm/target"
if [ "$build" -eq 1 ]; then
    # Compiles the app, the sample and the Robolectric test support; runs nothing.
    "$root/scripts/probe-app-check.sh" --prepare >&2
    rm -rf "$out/device-classes"
    find "$root/android-probe-app/jvm/device/java" -name '*.java' > "$out/device-sources"
    javac --release 17 -Xlint:all,-classfile,-processing -Werror -encoding UTF-8 \
        -cp "$(cat "$out/run.classpath")" -d "$out/device-classes" @"$out/device-sources"
    # What a Consumer vendor compiles its adapter against: the adapter
    # interface and its outcome, nothing of the device.
    rm -f "$out/cetp-consumer-api.jar"
    jar cf "$out/cetp-consumer-api.jar" -C "$out/device-classes" com/clawseed/probe/consumer
    [ "$build_only" -eq 1 ] && exit 0
elif [ ! -d "$out/device-classes" ]; then
    echo "jvm-device: --no-build, but nothing was built yet" >&2
    exit 2
fi
cp="$(cat "$out/run.classpath")"
mapfile -t jvmflags < "$out/run.jvmflags"
if [ "$self_test" -eq 1 ]; then
    # The device's own shadows, each on the case that broke without it.
    exec java "${jvmflags[@]}" --add-opens=java.base/sun.nio.ch=ALL-UNNAMED -cp "$out/device-classes:$cp" \
        org.junit.platform.console.ConsoleLauncher \
        --select-class com.clawseed.probe.JvmShadowsTest \
        --select-class com.clawseed.probe.DeviceClockTest \
        --select-class com.clawseed.probe.BinderRulesTest \
        --select-class com.clawseed.probe.JvmResolverTest \
        --select-class com.clawseed.probe.JvmConsumerTest \
        --disable-banner --details=summary --fail-if-no-tests
fi

# The Provider: the sample as built by scripts/probe-app-check.sh, or the
# vendor's code. Absolute paths: the JVM may resolve them from elsewhere.
abs() { (cd "$(dirname "$1")" && printf '%s/%s' "$(pwd)" "$(basename "$1")"); }
props=()
if [ "${#jars[@]}" -eq 0 ]; then
    code="$out/sample-classes"
    props+=("-Dcetp.jvm.manifest=$root/examples/java-provider/src/main/AndroidManifest.xml")
    [ -n "$defect" ] && props+=("-Dcom.example.cetp.tasks.defect=$defect")
    what="the sample Provider"
else
    own=""
    for j in "${jars[@]}"; do own="$own:$(abs "$j")"; done
    own="${own#:}"
    props+=("-Dcetp.jvm.provider.code=$own")
    code="$own"
    # An Android library (.aar) on --classpath: a JVM reads its classes.jar,
    # extracted once per file under target/vendor-aar/.
    for c in "${classpath[@]}"; do
        IFS=":" read -r -a entries <<< "$c"
        for e in "${entries[@]}"; do
            [ -n "$e" ] || continue
            [ -e "$e" ] || die "--classpath: no such file or directory: $e"
            if [[ "$e" == *.aar ]]; then
                mkdir -p "$out/vendor-aar"
                x="$out/vendor-aar/$(basename "$e" .aar)-$(sha256sum "$e" | cut -c1-12).jar"
                [ -f "$x" ] || python3 -c 'import sys, zipfile; open(sys.argv[2], "wb").write(zipfile.ZipFile(sys.argv[1]).read("classes.jar"))' "$e" "$x" ||
                    die "--classpath: $e has no classes.jar"
                e="$x"
            fi
            code="$code:$e"
        done
    done
    # A --provider-class found nowhere is named at once, before Robolectric
    # starts (the device's own check, in its sandbox, covers the rest).
    if [ -n "$provider_class" ]; then
        python3 - "$provider_class" "$code" <<'PY' || exit 2
import os, sys, zipfile
cls, path = sys.argv[1], sys.argv[2]
entry = cls.replace(".", "/") + ".class"
for e in filter(None, path.split(":")):
    if os.path.isdir(e) and os.path.isfile(os.path.join(e, entry)):
        sys.exit(0)
    if os.path.isfile(e):
        try:
            if entry in zipfile.ZipFile(e).namelist():
                sys.exit(0)
        except zipfile.BadZipFile:
            sys.exit(f"jvm-device: {e} is neither a jar nor a class directory")
sys.exit(f"jvm-device: the Provider class {cls} is in none of --provider-jar and --classpath")
PY
    fi
    [ -n "$manifest" ] && props+=("-Dcetp.jvm.manifest=$(abs "$manifest")")
    [ -n "$provider_class" ] && props+=("-Dcetp.jvm.provider.class=$provider_class")
    [ -n "$authority" ] && props+=("-Dcetp.jvm.provider.authority=$authority")
    [ -n "$package" ] && props+=("-Dcetp.jvm.provider.package=$package")
    [ -n "$permission" ] && props+=("-Dcetp.jvm.provider.permission=$permission")
    # One property per pair, numbered: their order is kept (a later one wins).
    i=0
    for kv in "${metas[@]}"; do props+=("-Dcetp.jvm.meta.$i=$kv"); i=$((i + 1)); done
    i=0
    for kv in "${provider_metas[@]}"; do props+=("-Dcetp.jvm.provider_meta.$i=$kv"); i=$((i + 1)); done
    what="${provider_class:-the Provider of $manifest}"
fi
[ "${#jars[@]}" -eq 0 ] && props+=("-Dcetp.jvm.provider.code=$code")
if [ -n "$consumer_class" ]; then
    # The Consumer's code beside the Provider's: on the classpath, its clock
    # reads rewritten with the Provider's below (both read the device clock
    # that advance_clock moves, as on a phone both read the system's).
    for j in "${consumer_jars[@]}"; do code="$code:$(abs "$j")"; done
    props+=("-Dcetp.jvm.consumer.class=$consumer_class")
    [ -n "$consumer_package" ] && props+=("-Dcetp.jvm.consumer.package=$consumer_package")
    what="$what and the Consumer $consumer_class"
fi
for kv in "${jvm_props[@]}"; do props+=("-D$kv"); done
# The Provider's clock reads (its code and its libraries') pointed at the
# device clock, which advance_clock moves (ClockRewriter): the JVM loads
# these copies under target/clocked/ (one directory per listening address:
# devices run side by side), never the user's files. A read that cannot be
# pointed there is listed in unmovable.txt; the device then does not offer
# to move its clock and says why.
clocked="$out/clocked/${listen//[^0-9A-Za-z]/_}"
rm -rf "$clocked"
mkdir -p "$clocked"
IFS=":" read -r -a code_entries <<< "$code"
code="$(java -XX:TieredStopAtLevel=1 -cp "$out/device-classes:$cp" com.clawseed.probe.ClockRewriter \
    "$clocked" "$clocked/unmovable.txt" "${code_entries[@]}")" || die "cannot rewrite the clock reads of the Provider's code"
props+=("-Dcetp.jvm.clock.unmovable=$clocked/unmovable.txt")
echo "jvm-device: starting Robolectric (identity a on $listen, b on $listen_b) with $what" >&2
# exec: killing this script's process kills the JVM.
# -XX:TieredStopAtLevel=1: the client compiler only. Robolectric's start
# (instrumenting the framework's classes) is mostly JIT work, and a suite
# runs for seconds, never long enough for the optimising compiler to pay
# off: the device is ready in about 5 s instead of 12 on 2 loaded cores.
exec java -XX:TieredStopAtLevel=1 "${jvmflags[@]}" --add-opens=java.base/sun.nio.ch=ALL-UNNAMED "${props[@]}" \
    -Dcetp.jvm.listen="$listen" -Dcetp.jvm.listen_b="$listen_b" \
    -cp "$out/device-classes:$code:$cp" \
    org.junit.platform.console.ConsoleLauncher \
    --select-method com.clawseed.probe.JvmDevice#serve \
    --disable-banner --details=none
