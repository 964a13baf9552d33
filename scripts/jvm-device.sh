#!/usr/bin/env bash
# The end-to-end JVM device: the probe app's own ProbeSession, Dispatcher and
# AndroidBackend under Robolectric, serving probe wire over TCP for identity
# a and identity b, in front of the sample CETP v2 Provider of
# examples/java-provider (a real android.content.ContentProvider, registered
# from its manifest as Robolectric registers providers). No phone: see
# examples/java-provider/README.md for what differs from one.
#
#   scripts/jvm-device.sh --listen HOST:PORT --listen-b HOST:PORT [--defect NAME]
#       serves until killed; prints a line with "ready" once both ports accept
#   ... --no-build: use the classes the last run built
#   scripts/jvm-device.sh --build-only
#       builds and exits (scripts/jvm-device-check.sh builds once, then starts
#       the device several times with --no-build)
#   scripts/jvm-device.sh --list-defects
#       the seeded defects of the sample, one name per line
#
# Then: cetp run --target tcp:HOST:PORT --target-b HOST:PORT \
#         --profile examples/java-provider/profile.toml
#
# Needs what scripts/probe-app-check.sh needs (scripts/setup.sh installs it);
# builds under android-probe-app/jvm/target/.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
defects="$root/examples/java-provider/defects.tsv"
usage="usage: $0 --listen HOST:PORT --listen-b HOST:PORT [--defect NAME] [--no-build] | --list-defects | --build-only"

names() { grep -v '^#' "$defects" | cut -f1; }

listen="" listen_b="" defect="" build=1 build_only=0
while [ $# -gt 0 ]; do
    case "$1" in
        --list-defects) names; exit 0 ;;
        --listen) listen="${2:?$usage}"; shift 2 ;;
        --listen-b) listen_b="${2:?$usage}"; shift 2 ;;
        --defect) defect="${2:?$usage}"; shift 2 ;;
        --no-build) build=0; shift ;;
        --build-only) build_only=1; shift ;;
        *) echo "$usage" >&2; exit 2 ;;
    esac
done
if [ "$build_only" -eq 0 ]; then
    [ -n "$listen" ] && [ -n "$listen_b" ] || { echo "$usage" >&2; exit 2; }
    for hp in "$listen" "$listen_b"; do
        [[ "$hp" =~ ^.+:[0-9]+$ ]] || { echo "jvm-device: not HOST:PORT: $hp" >&2; exit 2; }
    done
fi
if [ -n "$defect" ] && ! names | grep -qxF -- "$defect"; then
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
        -cp "$out/sample-classes:$(cat "$out/run.classpath")" -d "$out/device-classes" @"$out/device-sources"
    [ "$build_only" -eq 1 ] && exit 0
elif [ ! -d "$out/device-classes" ]; then
    echo "jvm-device: --no-build, but nothing was built yet" >&2
    exit 2
fi
cp="$(cat "$out/run.classpath")"
mapfile -t jvmflags < "$out/run.jvmflags"

defect_flag=()
[ -n "$defect" ] && defect_flag=("-Dcom.example.cetp.tasks.defect=$defect")
echo "jvm-device: starting Robolectric (identity a on $listen, b on $listen_b)" >&2
# exec: killing this script's process kills the JVM.
exec java "${jvmflags[@]}" "${defect_flag[@]}" \
    -Dcetp.jvm.listen="$listen" -Dcetp.jvm.listen_b="$listen_b" \
    -cp "$out/device-classes:$out/sample-classes:$cp" \
    org.junit.platform.console.ConsoleLauncher \
    --select-method com.clawseed.probe.JvmDevice#serve \
    --disable-banner --details=none
