#!/usr/bin/env bash
# Compiles the probe core and its JUnit 5 tests with javac into a temporary
# directory and runs them with the JUnit console launcher against the golden
# frames in vectors/wire. Works from any directory; exits non-zero on failure.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"

jar="${JUNIT_CONSOLE_JAR:-}"
if [ -z "$jar" ]; then
    for candidate in /usr/share/java/junit-platform-console-standalone.jar \
        $(dpkg -L junit5 2>/dev/null | grep 'junit-platform-console-standalone.*\.jar$' || true); do
        if [ -f "$candidate" ]; then
            jar="$candidate"
            break
        fi
    done
fi
if [ -z "$jar" ] || [ ! -f "$jar" ]; then
    echo "junit-platform-console-standalone.jar not found: install Debian's junit5 package or set JUNIT_CONSOLE_JAR" >&2
    exit 2
fi

out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

find "$here/src/main/java" -name '*.java' > "$out/main-sources"
find "$here/src/test/java" -name '*.java' > "$out/test-sources"
javac --release 17 -Xlint:all -Werror -encoding UTF-8 -d "$out/main" @"$out/main-sources"
javac --release 17 -Xlint:all -encoding UTF-8 -d "$out/test" -cp "$out/main:$jar" @"$out/test-sources"

java -Dcetp.vectors.dir=/tmp/vcopy -jar "$jar" \
    --class-path "$out/main:$out/test" \
    --scan-class-path \
    --disable-banner \
    --details=summary \
    --fail-if-no-tests
