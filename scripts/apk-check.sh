#!/usr/bin/env bash
# Builds the four APKs (scripts/build-apks.sh) and checks each, without an
# Android SDK or a phone:
#   1. apksigner verify: the signature holds, with v2 and v3 blocks both
#      verified (checked as for minSdk 24, so that both are looked at);
#   2. what the APK declares (aapt2 dump badging and the binary manifest:
#      package, version, minSdk, targetSdk, permissions, components with
#      their full class names, exported/enabled flags, authorities, the
#      instrumentation, the signer's certificate) equals
#      android-probe-app/apk/expected/NAME.facts;
#   3. the API-level check (android-probe-app/apk/ApiCheck.java): every
#      android.* class, method and field the dex references exists in the
#      framework of the APK's minSdk, unless behind a Build.VERSION.SDK_INT
#      check or listed in android-probe-app/apk/api-exceptions.tsv.
# Then shows that each check can fail: a class calling API 28 without a
# guard fails step 3 at minSdk 26 (and passes with the guard), an APK with
# one byte changed fails step 1, probe-b's facts fail probe-a's expectations.
#
#   scripts/apk-check.sh [--no-build]
#
# Exit 0 only when all of it holds. Needs what scripts/build-apks.sh needs.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
data="$root/android-probe-app/apk"
apks="$root/target/apk"
work="$apks/check"

if [ "${1:-}" != "--no-build" ]; then
    "$root/scripts/build-apks.sh" >/dev/null
fi
aapt2="$apks/build/tools/aapt2"
[ -x "$aapt2" ] || { echo "apk-check: $aapt2 is missing: run scripts/build-apks.sh" >&2; exit 2; }
rm -rf "$work"
mkdir -p "$work/classes"

fail=0
bad() {
    echo "apk-check: FAIL: $*" >&2
    fail=1
}

# The framework of one API level (android-probe-app/apk/android-all.tsv), fetched once.
framework_of() { # LEVEL
    local version
    version="$(awk -F'\t' -v l="$1" '$1 == l { print $2 }' "$data/android-all.tsv")"
    [ -n "$version" ] || { echo "apk-check: no android-all version for API $1 in $data/android-all.tsv" >&2; exit 2; }
    local path="$data/target/android-all-$version.path"
    if [ ! -f "$path" ]; then
        if ! mvn -q -B -f "$data/android-all.pom.xml" -Dandroid.all.version="$version" generate-resources > "$work/mvn-$1.log" 2>&1; then
            cat "$work/mvn-$1.log" >&2
            echo "apk-check: mvn could not fetch android-all $version" >&2
            exit 3
        fi
    fi
    cat "$path"
}

cp="$(cat "$data/target/dex2jar.classpath")"
javac --release 17 -Xlint:all -Werror -cp "$cp" -d "$work/classes" "$data/ApiCheck.java"
api_check() { # APK NAME LEVEL
    java -cp "$cp:$work/classes" ApiCheck --apk "$1" --name "$2" --framework "$(framework_of "$3")" \
        --min-sdk "$3" --exceptions "$data/api-exceptions.tsv"
}

signature_ok() { # APK: v2 and v3 verified
    local out
    out="$(apksigner verify -v --min-sdk-version 24 "$1" 2>&1)" || { echo "$out" | head -5 >&2; return 1; }
    grep -q "^Verified using v2 scheme (APK Signature Scheme v2): true" <<<"$out" &&
        grep -q "^Verified using v3 scheme (APK Signature Scheme v3): true" <<<"$out"
}

for name in probe-a probe-b java-provider kotlin-provider; do
    apk="$apks/$name.apk"
    [ -f "$apk" ] || { bad "$apk was not built"; continue; }
    if signature_ok "$apk"; then
        echo "apk-check: $name: apksigner verify: v2 and v3 signatures hold"
    else
        bad "$name: apksigner verify did not verify both v2 and v3"
    fi
    python3 "$data/apk-facts.py" "$aapt2" "$apk" > "$work/$name.facts"
    if diff -u "$data/expected/$name.facts" "$work/$name.facts" > "$work/$name.diff"; then
        echo "apk-check: $name: $(wc -l < "$work/$name.facts") declared facts as expected (package, SDK levels, permissions, components, signer)"
    else
        cat "$work/$name.diff" >&2
        bad "$name: what the APK declares differs from android-probe-app/apk/expected/$name.facts (above: - expected, + built)"
    fi
    level="$(sed -n 's/^minSdk //p' "$work/$name.facts")"
    api_check "$apk" "$name" "$level" || bad "$name: the API-level check at minSdk $level failed (above)"
done

# ---- each check can fail
# 3: the fixtures through javac and D8 into a dex, as an APK's code is.
fw34="$(cat "$root/android-probe-app/jvm/target/framework.path")"
r8="$(cat "$data/target/r8.path")"
for fixture in NewApiUnguarded NewApiGuarded; do
    d="$work/fixture-$fixture"
    mkdir -p "$d/classes" "$d/dex"
    javac --release 17 -Xlint:all,-classfile -Werror -cp "$fw34" -d "$d/classes" "$data/fixtures/$fixture.java"
    (cd "$d/classes" && jar cf "$d/classes.jar" .)
    java -cp "$r8" com.android.tools.r8.D8 --release --min-api 26 --lib "$fw34" --output "$d/dex" "$d/classes.jar"
    (cd "$d/dex" && zip -q "$d/$fixture.apk" classes.dex)
done
if api_check "$work/fixture-NewApiUnguarded/NewApiUnguarded.apk" fixture-unguarded 26 > "$work/unguarded.out"; then
    cat "$work/unguarded.out" >&2
    bad "the API check passed a class calling API 28 without a guard at minSdk 26"
elif ! grep -q "NewApiUnguarded.executor -> android.content.Context.getMainExecutor" "$work/unguarded.out" ||
    ! grep -q "NewApiUnguarded.signed -> android.content.pm.PackageInfo.signingInfo" "$work/unguarded.out"; then
    cat "$work/unguarded.out" >&2
    bad "the API check failed the unguarded fixture without naming both API-28 references"
else
    echo "apk-check: an unguarded call of API 28 at minSdk 26 fails the API check: $(grep -c MISSING "$work/unguarded.out") references named"
fi
if api_check "$work/fixture-NewApiGuarded/NewApiGuarded.apk" fixture-guarded 26 > "$work/guarded.out"; then
    echo "apk-check: the same calls behind Build.VERSION.SDK_INT checks pass"
else
    cat "$work/guarded.out" >&2
    bad "the API check failed calls guarded by Build.VERSION.SDK_INT"
fi
# 1: one byte of the signed content changed.
python3 - "$apks/probe-a.apk" "$work/tampered.apk" <<'PY'
import sys
data = bytearray(open(sys.argv[1], "rb").read())
data[len(data) // 4] ^= 0x01
open(sys.argv[2], "wb").write(bytes(data))
PY
if signature_ok "$work/tampered.apk" 2>/dev/null; then
    bad "apksigner verified an APK with one byte changed"
else
    echo "apk-check: an APK with one byte changed fails apksigner verify"
fi
# 2: another APK's facts.
if diff -q "$data/expected/probe-a.facts" "$work/probe-b.facts" >/dev/null; then
    bad "probe-b's facts matched probe-a's expectations"
else
    echo "apk-check: probe-b's facts differ from probe-a's expectations in $(diff "$data/expected/probe-a.facts" "$work/probe-b.facts" | grep -c '^>') lines"
fi

[ "$fail" -eq 0 ] || { echo "apk-check: FAILED" >&2; exit 1; }
echo "apk-check: all four APKs verified"
