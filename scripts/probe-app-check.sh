#!/usr/bin/env bash
# The probe app (android-probe-app/app) without an Android SDK:
#   1. fetches, through Maven by coordinates (android-probe-app/jvm/pom.xml),
#      the Android framework of API 34 as Robolectric publishes it, the same
#      framework instrumented for Robolectric, and Robolectric with JUnit 4;
#   2. generates what the Android Gradle plugin would (BuildConfig, R, the
#      merged manifest: android-probe-app/jvm/gen-sources.py) for identity a
#      and for identity b;
#   3. compiles every source of app/ with core/ against the framework, with
#      warnings as errors, once per identity;
#   4. runs the Robolectric tests (app/src/test/java) with the JUnit console
#      launcher, Robolectric offline (it never downloads by itself).
# Exit 0 only when all of it succeeds. Works from any directory.
#
#   scripts/probe-app-check.sh                 everything
#   scripts/probe-app-check.sh --compile-only  steps 1-3
#   scripts/probe-app-check.sh --prepare       steps 1-3, the sample Provider
#       of examples/java-provider compiled the same way, the tests compiled;
#       writes target/run.classpath and target/run.jvmflags for
#       scripts/jvm-device.sh, runs nothing
#
# Needs mvn, python3, a JDK 17 and Debian's junit5 (scripts/setup.sh
# installs them). Built files go under android-probe-app/jvm/target/.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
app="$root/android-probe-app"
jvm="$app/jvm"
out="$jvm/target"

compile_only=0
prepare_only=0
case "${1:-}" in
    "") ;;
    --compile-only) compile_only=1 ;;
    --prepare) prepare_only=1 ;;
    *) echo "usage: $0 [--compile-only | --prepare]" >&2; exit 2 ;;
esac

junit="${JUNIT_CONSOLE_JAR:-/usr/share/java/junit-platform-console-standalone.jar}"
for tool in mvn python3 javac java; do
    command -v "$tool" >/dev/null || { echo "probe-app-check: $tool is missing (scripts/setup.sh installs it)" >&2; exit 2; }
done
[ -f "$junit" ] || { echo "probe-app-check: $junit is missing: install Debian's junit5 or set JUNIT_CONSOLE_JAR" >&2; exit 2; }

echo "probe-app-check: fetching the framework and Robolectric (mvn)"
# -q: Maven prints only what went wrong; -B: no progress bars in CI logs.
mkdir -p "$out"
if ! mvn -q -B -f "$jvm/pom.xml" generate-resources > "$out/mvn.log" 2>&1; then
    cat "$out/mvn.log" >&2
    echo "probe-app-check: mvn could not fetch the framework or Robolectric" >&2
    exit 3
fi
framework="$(cat "$out/framework.path")"
instrumented="$(cat "$out/framework-instrumented.path")"
# Robolectric's offline mode looks for ARTIFACT-VERSION.jar in its
# dependency dir: the local repository's own file name, linked.
offline="$out/robolectric-deps"
rm -rf "$offline" "$out/android-all"
mkdir -p "$offline"
ln -s "$instrumented" "$offline/$(basename "$instrumented")"

# Robolectric's classpath holds two .aar files (androidx.test); a JVM reads
# their classes.jar.
cp_list=""
mkdir -p "$out/aar"
# (The file ends without a newline, on which read returns 1.)
IFS=":" read -r -a entries < "$out/test.classpath" || true
for e in "${entries[@]}"; do
    if [[ "$e" == *.aar ]]; then
        jar="$out/aar/$(basename "$e" .aar).jar"
        [ -f "$jar" ] || python3 -c 'import sys, zipfile; open(sys.argv[2], "wb").write(zipfile.ZipFile(sys.argv[1]).read("classes.jar"))' "$e" "$jar"
        e="$jar"
    fi
    cp_list="$cp_list:$e"
done
test_cp="${cp_list#:}"

# Lints: all of them, as errors, but one:
#   -classfile: the framework's classes carry @UnsupportedAppUsage (hidden
#   API bookkeeping), whose annotation class is not in the published jar;
#   javac warns on every framework class it reads. Nothing in our code can
#   change that.
lint="-Xlint:all,-classfile -Werror"

for flavor in a b; do
    gen="$out/gen-$flavor"
    rm -rf "$gen" "$out/classes-$flavor"
    python3 "$jvm/gen-sources.py" --flavor "$flavor" --out "$gen" >/dev/null
    find "$app/core/src/main/java" "$app/app/src/main/java" "$gen/java" -name '*.java' > "$out/sources-$flavor"
    echo "probe-app-check: compiling app/ (identity $flavor) against $(basename "$framework")"
    javac --release 17 $lint -encoding UTF-8 -cp "$framework" -d "$out/classes-$flavor" @"$out/sources-$flavor"
done
echo "probe-app-check: app/ compiles against the framework (both identities)"

# The sample Provider a vendor copies (examples/java-provider): Java against
# the same framework, the same lints. Its manifest is read at run time by
# the JVM device (scripts/jvm-device.sh).
sample="$root/examples/java-provider"
rm -rf "$out/sample-classes"
find "$sample/src/main/java" -name '*.java' > "$out/sample-sources"
echo "probe-app-check: compiling the sample Provider (examples/java-provider)"
javac --release 17 $lint -encoding UTF-8 -cp "$framework" -d "$out/sample-classes" @"$out/sample-sources"
[ "$compile_only" -eq 1 ] && exit 0

# The tests run as identity a, against the manifest the plugin would merge,
# with the framework on the classpath as the plugin puts android.jar there
# (Robolectric loads its own instrumented copy of it into each test sandbox).
tests="$out/test-classes"
rm -rf "$tests"
mkdir -p "$tests/com/android/tools"
find "$app/app/src/test/java" -name '*.java' > "$out/test-sources"
cp -r "$app/app/src/test/resources/." "$tests/"
javac --release 17 $lint -encoding UTF-8 -cp "$out/classes-a:$test_cp:$framework" -d "$tests" @"$out/test-sources"
# What the Android Gradle plugin writes for Robolectric
# (unitTests.isIncludeAndroidResources): where the merged manifest and
# resources are.
cat > "$tests/com/android/tools/test_config.properties" <<PROPS
android_merged_manifest=$out/gen-a/AndroidManifest.xml
android_merged_resources=$out/gen-a/res
android_merged_assets=$out/gen-a/assets
android_custom_package=com.clawseed.probe
PROPS

# What a JVM that runs the app under Robolectric needs (the tests below,
# scripts/jvm-device.sh).
# --add-opens: Robolectric's framework moves descriptors between
# java.io.FileDescriptor objects by reflection (as Android Studio's
# Robolectric setup on JDK 17 does).
printf '%s' "$junit:$out/classes-a:$tests:$test_cp:$framework" > "$out/run.classpath"
printf '%s\n' --add-opens=java.base/java.io=ALL-UNNAMED --add-opens=java.base/java.lang=ALL-UNNAMED \
    -Drobolectric.offline=true -Drobolectric.dependency.dir="$offline" \
    -Drobolectric.logging.enabled=false -Dcetp.repo.dir="$root" > "$out/run.jvmflags"
[ "$prepare_only" -eq 1 ] && exit 0

echo "probe-app-check: Robolectric tests (offline, framework API 34)"
# The classpath goes on the JVM's own -cp, not the launcher's --class-path:
# the launcher closes a class loader of its own before Robolectric's
# shutdown hook runs, which then fails to load its classes.
mapfile -t jvmflags < "$out/run.jvmflags"
java "${jvmflags[@]}" \
    -cp "$(cat "$out/run.classpath")" \
    org.junit.platform.console.ConsoleLauncher \
    --scan-class-path "$tests" \
    --disable-banner \
    --details=summary \
    --fail-if-no-tests
