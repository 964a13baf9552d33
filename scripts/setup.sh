#!/usr/bin/env bash
# Installs what a fresh machine lacks for building and testing cetp.
# Idempotent: every step checks first, so a warm machine pays nothing.
set -euo pipefail

need_apt=()
command -v adb >/dev/null 2>&1 || need_apt+=(adb)
command -v bc >/dev/null 2>&1 || need_apt+=(bc)
command -v javac >/dev/null 2>&1 || need_apt+=(default-jdk-headless)
[ -n "$(ls /usr/share/java/junit-platform-console-standalone*.jar 2>/dev/null)" ] || need_apt+=(junit5)
command -v mvn >/dev/null 2>&1 || need_apt+=(maven)
command -v npm >/dev/null 2>&1 || need_apt+=(npm)
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
command -v python3 >/dev/null 2>&1 || need_apt+=(python3)
python3 -m pip --version >/dev/null 2>&1 || need_apt+=(python3-pip)
command -v xmllint >/dev/null 2>&1 || need_apt+=(libxml2-utils)
command -v xz >/dev/null 2>&1 || need_apt+=(xz-utils)
# scripts/build-apks.sh: aligning and signing the APKs (issue 41).
command -v zipalign >/dev/null 2>&1 || need_apt+=(zipalign)
command -v apksigner >/dev/null 2>&1 || need_apt+=(apksigner)
command -v zip >/dev/null 2>&1 || need_apt+=(zip)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing ${need_apt[*]} (apt)"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null 2>&1; then
  echo "setup: cargo is not on PATH; install a Rust toolchain (rustup) first" >&2
  exit 1
fi
for comp in rustfmt clippy; do
  if ! rustup component list --installed 2>/dev/null | grep "^$comp" >/dev/null; then
    rustup component add "$comp"
  fi
done

# The SARIF 2.1.0 JSON Schema, for the tests that validate report.sarif and
# the drift SARIF: npm's @microsoft/jest-sarif ships it. Kept under target/
# (never committed).
sarif_dir=target/test-tools/sarif
if [ ! -f "$sarif_dir/sarif-2.1.0-rtm.5.json" ]; then
  echo "setup: fetching the SARIF 2.1.0 schema (npm @microsoft/jest-sarif)"
  work=$(mktemp -d)
  (cd "$work" && npm pack --silent @microsoft/jest-sarif@1.0.0-beta.0 >/dev/null)
  tar -xzf "$work"/*.tgz -C "$work"
  mkdir -p "$sarif_dir"
  cp "$work/package/lib/schemas/sarif-2.1.0-rtm.5.json" "$sarif_dir/"
  rm -rf "$work"
fi

# The Jenkins JUnit XSD, for the tests that validate junit.xml with xmllint:
# the JUnit team's junit5 sources ship it. apt fetches Debian's source
# package of junit5 by name, through a private apt state under target/ whose
# deb-src entries are the machine's own Debian entries (so no host is named
# here and the system's apt configuration is left alone). Kept under
# target/ (never committed).
junit_dir=target/test-tools/junit
if [ ! -f "$junit_dir/jenkins-junit.xsd" ]; then
  echo "setup: fetching the Jenkins JUnit XSD (apt-get source junit5)"
  work=$(mktemp -d)
  mkdir -p "$work/parts" "$work/lists/partial" "$work/src"
  # deb822 stanzas signed by the Debian archive key, and one-line Debian entries.
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk -v RS= -v ORS='\n\n' '/debian-archive-keyring/ { sub(/Types: deb\n/, "Types: deb-src\n"); print }' \
      "$f" >"$work/parts/$(basename "$f")"
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    { grep -E '^deb .*debian' "$f" || true; } | sed 's/^deb /deb-src /' >"$work/parts/$(basename "$f")"
  done
  apt_src=(apt-get -q -o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$work/parts"
           -o "Dir::State::Lists=$work/lists" -o APT::Sandbox::User=root)
  "${apt_src[@]}" update >/dev/null
  (cd "$work/src" && "${apt_src[@]}" source --download-only junit5 >/dev/null)
  orig=$(ls "$work"/src/junit5_*.orig.tar.* | head -n 1)
  xsd=$(tar -tf "$orig" | grep '/platform-tests/src/test/resources/jenkins-junit.xsd$' | head -n 1)
  [ -n "$xsd" ] || { echo "setup: $orig holds no jenkins-junit.xsd" >&2; exit 1; }
  tar -xf "$orig" -C "$work" "$xsd"
  mkdir -p "$junit_dir"
  cp "$work/$xsd" "$junit_dir/"
  rm -rf "$work"
fi

# The official JSON-Schema-Test-Suite, for cetp-gen's suite run.
scripts/fetch-json-suite.sh
