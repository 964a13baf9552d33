#!/usr/bin/env bash
# Builds the two probe APKs (identity a: com.clawseed.probe, identity b:
# com.clawseed.probe.b) with Gradle where ANDROID_HOME points at an Android
# SDK, and prints their paths. Where there is no SDK (as on this project's
# own machines) it stops with a message naming ANDROID_HOME.
#
#   ANDROID_HOME=/opt/android-sdk scripts/build-probe-apk.sh
#
# Needs JDK 17+ and Gradle 8.7+ (`gradle` on PATH, or a wrapper made with
# `gradle wrapper --gradle-version 8.7` in android-probe-app/).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
app="$root/android-probe-app"

die() {
    echo "build-probe-apk: $*" >&2
    exit 2
}

if [ -z "${ANDROID_HOME:-}" ]; then
    die "ANDROID_HOME is not set: point it at an Android SDK with platform 34 (sdkmanager 'platforms;android-34' 'build-tools;34.0.0'). No APK was built."
fi
if [ ! -d "$ANDROID_HOME" ]; then
    die "ANDROID_HOME=$ANDROID_HOME is not a directory: point it at an Android SDK. No APK was built."
fi
if [ ! -d "$ANDROID_HOME/platforms/android-34" ]; then
    # The Android Gradle plugin can fetch it when the SDK licences are accepted.
    echo "build-probe-apk: note: ANDROID_HOME=$ANDROID_HOME has no platforms/android-34; Gradle will try to install it" >&2
fi

java_major=$(java -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = \([0-9]*\).*/\1/p')
if [ -z "$java_major" ] || [ "$java_major" -lt 17 ]; then
    die "JDK 17 or later is needed (found: ${java_major:-none})"
fi

if [ -x "$app/gradlew" ]; then
    gradle="$app/gradlew"
elif command -v gradle >/dev/null 2>&1; then
    gradle=gradle
else
    die "no Gradle: install Gradle 8.7+ or run 'gradle wrapper --gradle-version 8.7' in android-probe-app/"
fi

"$gradle" -p "$app" --console=plain :app:assembleADebug :app:assembleBDebug

for flavor in a b; do
    apk="$app/app/build/outputs/apk/$flavor/debug/app-$flavor-debug.apk"
    [ -f "$apk" ] || die "Gradle finished but $apk is missing"
    echo "$apk"
done
