#!/usr/bin/env bash
# Runs .clusterfuzzlite/build.sh without a container, as the OSS-Fuzz
# base-builder-rust image runs it (SRC, OUT, WORK and the engine variables
# set; the repository as $SRC/cetp), then checks that every target `cargo
# fuzz list` names landed in $OUT with its seed corpus, and that each binary
# runs CFLITE_RUNS inputs (default 200) from that corpus. On the stable
# toolchain without sanitizers (`-s none`): the build is the one
# scripts/fuzz-smoke.sh made (same flags), so this adds seconds, not a
# second build. Prints how long it took.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)
runs=${CFLITE_RUNS:-200}
command -v cargo-fuzz >/dev/null 2>&1 || cargo install --locked cargo-fuzz
command -v python3 >/dev/null 2>&1 || { echo "cflite-build-check: python3 is needed (scripts/setup.sh installs it)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export SRC="$tmp/src" OUT="$tmp/out" WORK="$tmp/work"
mkdir -p "$SRC" "$OUT" "$WORK"
export FUZZING_ENGINE=libfuzzer SANITIZER=none ARCHITECTURE=x86_64 FUZZING_LANGUAGE=rust
# Not CFLAGS/CXXFLAGS/RUSTFLAGS: the image's carry its sanitizer, which a
# stable `-s none` build has not, and changing them would rebuild
# libFuzzer and every crate the smoke run just built.
# The image copies the repository to $SRC/cetp; here the build runs in
# place (a copy or a link would give cargo other paths, and a full rebuild).
export CETP_SRC_DIR="$PWD"
export CETP_CFLITE_FUZZ_FLAGS="-s none"
bash -eu .clusterfuzzlite/build.sh
targets=$(cargo fuzz list --fuzz-dir fuzz)
[ -n "$targets" ] || { echo "cflite-build-check: cargo fuzz list names no target" >&2; exit 1; }
for t in $targets; do
  if [ ! -x "$OUT/$t" ]; then
    echo "cflite-build-check: build.sh left no $t in \$OUT" >&2
    exit 1
  fi
  seeds="$WORK/$t-seeds"
  mkdir -p "$seeds"
  if [ -d "fuzz/corpus/$t" ] && [ -n "$(ls -A "fuzz/corpus/$t")" ]; then
    if [ ! -f "$OUT/${t}_seed_corpus.zip" ]; then
      echo "cflite-build-check: no seed corpus zip for $t" >&2
      exit 1
    fi
    python3 -m zipfile -e "$OUT/${t}_seed_corpus.zip" "$seeds"
    want=$(ls -A "fuzz/corpus/$t" | wc -l)
    got=$(ls -A "$seeds" | wc -l)
    if [ "$want" -ne "$got" ]; then
      echo "cflite-build-check: ${t}_seed_corpus.zip holds $got seeds, fuzz/corpus/$t $want" >&2
      exit 1
    fi
  fi
  log="$WORK/$t.log"
  # As ClusterFuzzLite runs a target: the binary alone, from $OUT, on a
  # copy of its seeds (libFuzzer adds to the corpus directory it is given).
  if ! (cd "$WORK" && "$OUT/$t" -runs="$runs" -seed=1 "$seeds" >"$log" 2>&1); then
    tail -30 "$log"
    echo "cflite-build-check: $t failed in $runs runs" >&2
    exit 1
  fi
  echo "cflite $t: $(grep -oE 'Done [0-9]+ runs' "$log" || echo ran) from $OUT"
done
echo "cflite-build-check: $(echo "$targets" | wc -w) targets built by .clusterfuzzlite/build.sh and run; $(( $(date +%s) - started ))s"
