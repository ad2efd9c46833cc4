#!/usr/bin/env bash
# Runs every test: C++ (GoogleTest through ctest) and Python (pytest).
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || exit 1
status=0
echo "=== C++ tests (ctest) ==="
.venv/bin/ctest --test-dir build --output-on-failure -j "$(nproc)" || status=1
echo "=== Python tests (pytest) ==="
.venv/bin/python -m pytest tests/python -q -p no:cacheprovider "$@" || status=1
exit $status
