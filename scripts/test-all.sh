#!/usr/bin/env bash
# Every test of the project, from a fresh machine: installs what is missing
# (scripts/setup.sh), then formatting, lints, the Rust suites (including the
# real-adb integration tests and one test per vector case), the probe app's
# JVM tests, the installed binary, the HTML report in headless Chromium, the
# coverage-report and proof staleness checks and the mutant self-test.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each stage's wall time, listed at the end: what a CI run spent where.
stage_name=""
stage_t0=$(date +%s)
timings=()
stage() {
    local now
    now=$(date +%s)
    if [ -n "$stage_name" ]; then
        timings+=("$(printf '%5d s  %s' $((now - stage_t0)) "${stage_name:0:90}")")
    fi
    stage_name="$1"
    stage_t0=$now
    [ -z "$1" ] || echo "== $1"
}
# Printed on every exit: CI keeps the log of a run that failed, and then
# the stage it stopped in is the last line.
print_timings() {
    stage ""
    echo "== time per stage"
    printf '%s\n' "${timings[@]}"
}

stage "setup: what is missing installed (scripts/setup.sh)"
scripts/setup.sh
# Disk is the resource a CI machine has run out of: say what there is.
df -h . | sed 's/^/disk: /'
# The SARIF schema setup fetched: the SARIF tests must validate, not skip.
export CETP_SARIF_SCHEMA="$PWD/target/test-tools/sarif/sarif-2.1.0-rtm.5.json"
export CETP_REQUIRE_SARIF_SCHEMA=1
# Likewise the JUnit XSD: junit.xml must validate, not skip.
export CETP_JUNIT_XSD="$PWD/target/test-tools/junit/jenkins-junit.xsd"
export CETP_REQUIRE_JUNIT_XSD=1

log=$(mktemp)
trap 'rm -f "$log"; print_timings' EXIT

stage "cargo fmt --check"
cargo fmt --all -- --check

stage "cargo clippy"
cargo clippy --workspace --all-targets -q -- -D warnings

stage "no function of harness/ over 100 lines (scripts/long-functions.allow lists none)"
python3 scripts/long-functions.py --max 100

stage "no import loop between the files of any crate (scripts/import-graph.py)"
python3 scripts/import-graph.py

stage "cargo test"
cargo test --workspace 2>&1 | tee "$log"

stage "cetp-gen on the official JSON-Schema-Test-Suite (draft 2020-12, 5 s limit per schema)"
# The debug build cargo test just made: about 10 s.
cargo run -q -p cetp-gen --bin cetp-gen-suite -- \
  "${CARGO_TARGET_DIR:-target}/test-tools/jsonschema-suite/json/tests/draft2020-12" \
  --refused harness/cetp-gen/tests/suite/refused.json

if [ -n "${CI:-}" ]; then
  # The test binaries have run; nothing below needs them, and the fuzz build
  # that follows needs the room.
  find target/debug/deps -maxdepth 1 -type f -executable -delete
  df -h . | sed 's/^/disk after cargo test: /'
fi

stage "cargo install: a cetp that works outside the source tree"
inst=$(mktemp -d)
cargo install -q --debug --locked --path harness/cetp-cli --root "$inst" --target-dir target
# From the file system root, with the embedded vectors and profiles forced:
# nothing of the source tree is read.
(cd / && CETP_EMBEDDED=1 "$inst/bin/cetp" run --target sim --require-claim >/dev/null)
# grep reads to the end (not -q): an early exit would kill cetp with SIGPIPE,
# which pipefail reports as this step failing.
(cd / && CETP_EMBEDDED=1 "$inst/bin/cetp" list cases | grep '^NEG-001 ' >/dev/null)
rm -rf "$inst"

stage "index.html in headless Chromium: no Provider markup, no script, rendered"
scripts/html-report-check.sh

stage "probe app (JVM)"
android-probe-app/core/run-tests.sh 2>&1 | tee -a "$log"

stage "probe app compiled against the Android framework, its Robolectric tests"
scripts/probe-app-check.sh 2>&1 | tee -a "$log"

stage "the probe app and the sample Providers as signed APKs, without Gradle or an SDK: apksigner verify, what each declares, the API level of each dex (never installed on a phone here)"
scripts/apk-check.sh 2>&1 | tee -a "$log"

stage "end to end on the JVM, not a phone (Robolectric: no Binder; the user's decision played in the Provider's activity under Robolectric): cetp run against the probe's own code and the sample Java Provider, then vendors' compiled Providers (--provider-jar)"
# About 3 minutes: the sample passes (the confirmation cases too: the decision
# is clicked in its dialog), each seeded defect draws a FAIL citing its requirement. Then about
# 2.5 minutes more (scripts/jvm-jar-check.sh): the sample as a jar gives the same
# verdicts, a Kotlin Provider compiled here passes, thrown exceptions FAIL the
# Provider, a missing class is a usage error.
scripts/jvm-device-check.sh

stage "a vendor's Consumer on the JVM, not a phone: the sample Java Consumer loaded from its jar, made to act by cetp consumer while the device hosts the hostile Provider"
# About 3.5 minutes: the sample, from its jar and from its dex, passes every
# scenario (identity b's probe app is the peer; a descriptor's close is
# heard), the claim kept only by the read bounds no device shows; each
# seeded defect FAILs citing its requirement; a missing adapter class is a
# usage error.
scripts/jvm-consumer-check.sh --no-build

stage "cetp fuzz on Providers not built on the reference engine, on clocks that cannot move: the Java and Kotlin samples on the JVM device with each observer a vendor may write, their seeded defects, the reference on sim --fixed-clock"
# About 5 minutes: clean runs of 15 s (no finding, no oracle note, 80 % of
# sequences judged; with the sequences judged during real-time waits, a few
# hundred per run), each of the Java sample's seeded defects within 60 s
# (the Kotlin sample's, which gate nothing, are left to scripts/fuzz-bench.sh).
FUZZ_BUDGET=15s KOTLIN_DEFECTS=0 scripts/fuzz-foreign-check.sh --no-build

stage "coverage report is current and has no gaps"
cargo run -q -p cetp-cli -- coverage --check

stage "fuzz smoke run"
scripts/fuzz-smoke.sh

stage "ClusterFuzzLite build script, without a container (the smoke run's build: a few seconds)"
scripts/cflite-build-check.sh

stage "selftest: the suite kills every mutant"
cargo run -q -p cetp-cli -- selftest --jobs 8 --check-proof reports/proof.json

stage "selftest (Consumer half): every Consumer mutant killed, its proof current"
cargo run -q -p cetp-cli -- selftest --consumer-only --check-proof reports/consumer-proof.json

# One closing line for CI: the sum over every runner above.
# cargo's "N passed; N failed" lines plus JUnit's "[ N tests successful ]".
passed=$(grep -hoE '([0-9]+) (passed|tests successful)' "$log" | awk '{s+=$1} END {print s+0}')
failed=$(grep -hoE '([0-9]+) (failed|tests failed)' "$log" | awk '{s+=$1} END {print s+0}')
echo "all: ${passed} passed, ${failed} failed"
[ "$failed" -eq 0 ]
