#!/bin/bash -eu
# ClusterFuzzLite / OSS-Fuzz build script for the cargo-fuzz targets of
# fuzz/: every target `cargo fuzz list` names is built with `cargo fuzz
# build -O --debug-assertions` (optimized, with the overflow checks and
# assertions a fuzzer should trip; the same flags as the smoke run's
# default build) and copied to $OUT, with its seed corpus as
# $OUT/<target>_seed_corpus.zip.
#
# In the base-builder-rust image $SRC, $OUT and $WORK are set, the nightly
# toolchain and cargo-fuzz are installed, and the sanitizer flags come from
# the image's cargo. scripts/cflite-build-check.sh runs this same script
# without a container on every CI run (stable toolchain, no sanitizer:
# CETP_CFLITE_FUZZ_FLAGS="-s none"), so it cannot rot unnoticed.
cd "${CETP_SRC_DIR:-$SRC/cetp}"
# Extra `cargo fuzz build` flags (the check passes `-s none`); empty in the
# image.
# shellcheck disable=SC2086
cargo fuzz build -O --debug-assertions --fuzz-dir fuzz ${CETP_CFLITE_FUZZ_FLAGS:-}
release=fuzz/target/x86_64-unknown-linux-gnu/release
for target in $(cargo fuzz list --fuzz-dir fuzz); do
  cp "$release/$target" "$OUT/$target"
  if [ -n "$(ls -A "fuzz/corpus/$target" 2>/dev/null)" ]; then
    # python3's zipfile: the image has no guarantee of `zip`.
    (cd "fuzz/corpus/$target" && python3 -m zipfile -c "$OUT/${target}_seed_corpus.zip" ./*)
  fi
done
