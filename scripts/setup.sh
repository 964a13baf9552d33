#!/usr/bin/env bash
# Installs what a fresh machine lacks for building and testing cetp.
# Idempotent: every step checks first, so a warm machine pays nothing.
set -euo pipefail

need_apt=()
command -v adb >/dev/null 2>&1 || need_apt+=(adb)
command -v bc >/dev/null 2>&1 || need_apt+=(bc)
command -v javac >/dev/null 2>&1 || need_apt+=(default-jdk-headless)
[ -n "$(ls /usr/share/java/junit-platform-console-standalone*.jar 2>/dev/null)" ] || need_apt+=(junit5)
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
  if ! rustup component list --installed 2>/dev/null | grep -q "^$comp"; then
    rustup component add "$comp"
  fi
done
