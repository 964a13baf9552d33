#!/usr/bin/env bash
# Builds four signed APKs under target/apk/ without Gradle or an Android SDK:
#
#   probe-a.apk            the probe app, identity a (com.clawseed.probe)
#   probe-b.apk            the probe app, identity b (com.clawseed.probe.b)
#   java-provider.apk      examples/java-provider (com.example.cetp.tasks)
#   kotlin-provider.apk    examples/kotlin-provider (com.example.cetp.notes),
#                          kotlin-stdlib dexed into it
#
# From the sources Gradle builds (android-probe-app/app + core, the
# samples' src/main), with the tools fetched through Maven by coordinates
# (android-probe-app/apk/pom.xml: aapt2, D8; android-probe-app/jvm/pom.xml:
# the framework of API 34 as Robolectric publishes it, which holds
# resources.arsc and serves as aapt2's -I and the compile and D8 library):
#
#   1. what the Android Gradle plugin generates (BuildConfig, the merged
#      manifest with full class names, <uses-sdk> and the version:
#      android-probe-app/jvm/gen-sources.py --apk);
#   2. aapt2 compile + link of the resources and manifest (R.java from it);
#   3. javac (kotlinc for the Kotlin sample) against the framework;
#   4. D8 to classes.dex at the APK's minSdk;
#   5. zipalign, then apksigner with the committed TEST keystores
#      (android-probe-app/app/probe-{a,b}-test.keystore, examples/samples-test.keystore:
#      public passwords, never for anything released).
#
# An APK newer than every input it is built from is not built again (--force
# builds all). Needs mvn, python3, a JDK 17, zipalign and apksigner
# (scripts/setup.sh installs them). Prints each APK's path.
#
#   scripts/build-apks.sh [--force] [--out DIR]
#   scripts/build-apks.sh --tools-only    fetch the tools, put aapt2 in
#       target/apk/build/tools/, build nothing (scripts/jvm-device.sh
#       --provider-apk reads APKs with them)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
app="$root/android-probe-app"
out="$root/target/apk"
force=0
tools_only=0
while [ $# -gt 0 ]; do
    case "$1" in
        --force) force=1 ;;
        --tools-only) tools_only=1 ;;
        --out) out="$2"; shift ;;
        *) echo "usage: $0 [--force] [--out DIR] | --tools-only" >&2; exit 2 ;;
    esac
    shift
done

die() {
    echo "build-apks: $*" >&2
    exit 2
}
for tool in mvn python3 javac java zipalign apksigner; do
    command -v "$tool" >/dev/null || die "$tool is missing (scripts/setup.sh installs it)"
done

work="$out/build"
mkdir -p "$work/tools"

fetch() { # POM LOG: mvn generate-resources, its output shown only on failure
    if ! mvn -q -B -f "$1" generate-resources > "$2" 2>&1; then
        cat "$2" >&2
        echo "build-apks: mvn could not fetch what $1 names" >&2
        exit 3
    fi
}
echo "build-apks: fetching aapt2, D8 and the framework (mvn)" >&2
fetch "$app/apk/pom.xml" "$work/mvn-tools.log"
fetch "$app/jvm/pom.xml" "$work/mvn-jvm.log"
framework="$(cat "$app/jvm/target/framework.path")"
r8="$(cat "$app/apk/target/r8.path")"
aapt2_jar="$(cat "$app/apk/target/aapt2.path")"
aapt2="$work/tools/aapt2"
if [ ! -x "$aapt2" ] || [ "$aapt2_jar" -nt "$aapt2" ]; then
    python3 -c 'import sys, zipfile; open(sys.argv[2], "wb").write(zipfile.ZipFile(sys.argv[1]).read("aapt2"))' "$aapt2_jar" "$aapt2"
    chmod 755 "$aapt2"
fi
[ "$tools_only" -eq 1 ] && exit 0

# Stale when the APK is missing or any input is newer than it.
stale() { # APK INPUT...
    local apk="$1"
    shift
    [ "$force" -eq 1 ] && return 0
    [ -f "$apk" ] || return 0
    [ -n "$(find "$@" -newer "$apk" -print -quit 2>/dev/null)" ]
}

lint="-Xlint:all,-classfile -Werror"

# APK NAME: link, compile, dex, align, sign. Reads the variables set by its
# caller: manifest, res (a directory or empty), classes_from (a function
# compiling into $1), minsdk, targetsdk, vcode, vname, custom_package, libs
# (jars dexed into the APK), keystore, storepass, alias.
package_apk() {
    local name="$1" dir="$work/$1"
    local apk="$out/$name.apk"
    rm -rf "$dir"
    mkdir -p "$dir/java" "$dir/classes" "$dir/dex"
    local res_args=()
    if [ -n "$res" ]; then
        "$aapt2" compile --dir "$res" -o "$dir/res.zip"
        res_args=("$dir/res.zip")
    fi
    "$aapt2" link -I "$framework" --manifest "$manifest" -o "$dir/linked.apk" \
        --java "$dir/java" --custom-package "$custom_package" \
        --min-sdk-version "$minsdk" --target-sdk-version "$targetsdk" \
        --version-code "$vcode" --version-name "$vname" "${res_args[@]}"
    "$classes_from" "$dir/classes" "$dir/java"
    (cd "$dir/classes" && jar cf "$dir/classes.jar" .)
    # --release: line numbers kept, locals dropped (a debug build would keep them).
    java -cp "$r8" com.android.tools.r8.D8 --release --min-api "$minsdk" \
        --lib "$framework" --output "$dir/dex" "$dir/classes.jar" ${libs[@]+"${libs[@]}"}
    cp "$dir/linked.apk" "$dir/unaligned.apk"
    (cd "$dir/dex" && zip -q -X "$dir/unaligned.apk" classes*.dex)
    zipalign -p -f 4 "$dir/unaligned.apk" "$dir/aligned.apk"
    # v1 off (every minSdk here is 24 or later), v2 and v3 on: apksigner
    # otherwise leaves v2 out of an APK whose minSdk needs only v3.
    apksigner sign --v1-signing-enabled false --v2-signing-enabled true --v3-signing-enabled true --ks "$keystore" --ks-pass "pass:$storepass" --ks-key-alias "$alias" \
        --key-pass "pass:$storepass" --out "$apk.tmp" "$dir/aligned.apk"
    mv "$apk.tmp" "$apk"
    rm -f "$apk.tmp.idsig"
}

# ---- the probe app, both identities
probe_classes() { # CLASSES GENERATED_JAVA
    find "$app/core/src/main/java" "$app/app/src/main/java" "$gen/java" "$2" -name '*.java' > "$1.sources"
    javac --release 17 $lint -encoding UTF-8 -cp "$framework" -d "$1" @"$1.sources"
}
for flavor in a b; do
    apk="$out/probe-$flavor.apk"
    if stale "$apk" "$app/app/src/main" "$app/core/src/main" "$app/app/build.gradle.kts" \
        "$app/jvm/gen-sources.py" "$app/app/probe-$flavor-test.keystore" "$0"; then
        gen="$work/gen-$flavor"
        rm -rf "$gen"
        python3 "$app/jvm/gen-sources.py" --flavor "$flavor" --out "$gen" --apk >/dev/null
        # aapt2 writes the R class that matches its resource table.
        rm -f "$gen/java/com/clawseed/probe/R.java"
        manifest="$gen/AndroidManifest.xml" res="$gen/res" classes_from=probe_classes
        read -r minsdk targetsdk vcode vname < <(python3 - "$manifest" <<'PY'
import sys, xml.etree.ElementTree as ET
A = "{http://schemas.android.com/apk/res/android}"
m = ET.parse(sys.argv[1]).getroot()
s = m.find("uses-sdk")
print(s.get(A + "minSdkVersion"), s.get(A + "targetSdkVersion"), m.get(A + "versionCode"), m.get(A + "versionName"))
PY
)
        custom_package=com.clawseed.probe libs=()
        keystore="$app/app/probe-$flavor-test.keystore" storepass="cetp-probe-$flavor" alias="probe-$flavor"
        echo "build-apks: building probe-$flavor.apk" >&2
        package_apk "probe-$flavor"
    fi
    echo "$apk"
done

# ---- the sample Providers. Their SDK levels and version are what their
# READMEs ask of a vendor's module (minSdk 28: GET_SIGNING_CERTIFICATES).
samples_ks="$root/examples/samples-test.keystore"
java_classes() { # CLASSES GENERATED_JAVA
    find "$root/examples/java-provider/src/main/java" "$2" -name '*.java' > "$1.sources"
    javac --release 17 $lint -encoding UTF-8 -cp "$framework" -d "$1" @"$1.sources"
}
kotlin_classes() { # CLASSES GENERATED_JAVA
    # The Kotlin sample has no resources, so no R class to compile.
    java -XX:TieredStopAtLevel=1 -cp "$(cat "$kt/target/kotlinc.classpath")" org.jetbrains.kotlin.cli.jvm.K2JVMCompiler \
        -no-stdlib -no-reflect -jvm-target 17 -Werror -classpath "$framework:$stdlib" \
        -d "$1" "$kt/src/main/kotlin"
}
sample() { # NAME DIR PACKAGE CLASSES_FN LIBS...
    local name="$1" src="$2" package="$3" fn="$4"
    shift 4
    local apk="$out/$name.apk"
    if stale "$apk" "$src/src/main" "$samples_ks" "$app/apk/sample-manifest.py" "$0"; then
        mkdir -p "$work/$name-manifest"
        python3 "$app/apk/sample-manifest.py" "$src/src/main/AndroidManifest.xml" "$package" \
            "$work/$name-manifest/AndroidManifest.xml"
        manifest="$work/$name-manifest/AndroidManifest.xml" res="" classes_from="$fn"
        minsdk=28 targetsdk=34 vcode=1 vname=1.0 custom_package="$package"
        libs=("$@")
        keystore="$samples_ks" storepass=cetp-samples alias=samples
        echo "build-apks: building $name.apk" >&2
        package_apk "$name"
    fi
    echo "$apk"
}
sample java-provider "$root/examples/java-provider" com.example.cetp.tasks java_classes
kt="$root/examples/kotlin-provider"
fetch "$kt/pom.xml" "$work/mvn-kotlin.log"
stdlib="$(cat "$kt/target/stdlib.path")"
sample kotlin-provider "$kt" com.example.cetp.notes kotlin_classes "$stdlib"
