#!/usr/bin/env bash
# Argument generation benchmark: values per second of cetp-gen beside
# hypothesis-jsonschema on the same schemas (harness/cetp-gen/tests/schemas),
# with the share of valid values that validate and of invalid values that
# fail (judged by the jsonschema crate, formats on), in one table.
#
# Installs what the Python side needs: python3-venv through apt when
# `python3 -m venv` is missing, then hypothesis-jsonschema==0.23.1 with
# hypothesis==6.100.0 into a venv under the cargo target directory.
# Builds cetp-gen-bench in release (a few minutes the first time; the
# measurement itself takes about two).
#
# Then the same two generators on the official JSON-Schema-Test-Suite
# (draft 2020-12, fetched by scripts/fetch-json-suite.sh): for how many of
# its schemas each generates only valid values, refuses, or gives no answer
# within SUITE_SECONDS, and the share of valid values (about 15 minutes
# more at 5 s, most of it hypothesis-jsonschema's).
#
#   RUST_SECONDS=0.5 PY_SECONDS=2 SUITE_SECONDS=5 scripts/gen-bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."

target="${CARGO_TARGET_DIR:-$PWD/target}"
venv="$target/test-tools/venv"
schemas=harness/cetp-gen/tests/schemas
rust_seconds="${RUST_SECONDS:-0.5}"
py_seconds="${PY_SECONDS:-2}"
suite_seconds="${SUITE_SECONDS:-5}"

if ! python3 -m venv --help >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
    else
        echo "gen-bench: python3 -m venv is missing; install python3-venv" >&2
        exit 3
    fi
fi
if ! "$venv/bin/python" -c 'import hypothesis_jsonschema' >/dev/null 2>&1; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check \
        'hypothesis==6.100.0' 'hypothesis-jsonschema==0.23.1'
fi

cargo build --release --quiet -p cetp-gen --bins
rust_rows="$(mktemp)"
suite_rows="$(mktemp)"
trap 'rm -f "$rust_rows" "$suite_rows"' EXIT
# Bounded: each side spends its seconds per schema, plus construction and
# the judging of invalid values.
n="$(ls "$schemas"/*.json | wc -l)"
timeout $((n * 10 + 60)) "$target/release/cetp-gen-bench" "$schemas" "$rust_seconds" >"$rust_rows"
echo "cetp-gen: $rust_seconds s per schema; hypothesis-jsonschema: $py_seconds s per schema (hypothesis $("$venv/bin/python" -c 'import hypothesis; print(hypothesis.__version__)'))"
echo
# Hypothesis keeps a storage directory even without an example database:
# under the target directory, not in the work tree.
HYPOTHESIS_STORAGE_DIRECTORY="$target/test-tools/hypothesis" \
    timeout $((n * 20 + 60)) "$venv/bin/python" harness/cetp-gen/bench/compare.py "$schemas" "$py_seconds" <"$rust_rows"

echo
echo "== JSON-Schema-Test-Suite, draft 2020-12 (python-jsonschema 4.23.0's copy): $suite_seconds s per schema on each side"
scripts/fetch-json-suite.sh
suite="$target/test-tools/jsonschema-suite/json/tests/draft2020-12"
m="$(find "$suite" -name '*.json' | wc -l)"
# Exit status 1 means a hang or a wrong value: the table shows which; the
# figures are what this script is for.
timeout $((m * 10 * suite_seconds + 60)) "$target/release/cetp-gen-suite" "$suite" --jsonl \
    --limit-ms $((suite_seconds * 1000)) >"$suite_rows" 2>/dev/null || true
HYPOTHESIS_STORAGE_DIRECTORY="$target/test-tools/hypothesis" \
    timeout $((m * 20 * suite_seconds + 60)) "$venv/bin/python" harness/cetp-gen/bench/suite_compare.py "$suite" "$suite_seconds" <"$suite_rows"
