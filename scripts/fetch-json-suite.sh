#!/usr/bin/env bash
# The official JSON-Schema-Test-Suite, for cetp-gen's suite run
# (harness/cetp-gen/tests/suite/README.md) and scripts/gen-bench.sh:
# python-jsonschema's source distribution ships it under json/tests/.
# Fetched by name and version with pip, unpacked under target/ (never
# committed). Idempotent: does nothing when it is there.
set -euo pipefail
cd "$(dirname "$0")/.."
version=4.23.0
suite_dir="${CARGO_TARGET_DIR:-$PWD/target}/test-tools/jsonschema-suite"
if [ -f "$suite_dir/json/tests/draft2020-12/oneOf.json" ]; then
  exit 0
fi
echo "fetch-json-suite: fetching the JSON-Schema-Test-Suite (pip: jsonschema $version sdist)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m pip download --quiet --disable-pip-version-check --no-deps \
  --no-binary :all: "jsonschema==$version" -d "$work"
tar -xzf "$work/jsonschema-$version.tar.gz" -C "$work" "jsonschema-$version/json"
if [ ! -f "$work/jsonschema-$version/json/tests/draft2020-12/oneOf.json" ]; then
  echo "fetch-json-suite: jsonschema $version's sdist has no json/tests/draft2020-12" >&2
  exit 1
fi
rm -rf "$suite_dir"
mkdir -p "$suite_dir"
mv "$work/jsonschema-$version/json" "$suite_dir/json"
