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
# strata.compile interprets bytecode, which differs between CPython versions: its tests run
# under 3.12 as well when scripts/setup.sh built the 3.12 extension (.venv312).
if [ "${STRATA_SKIP_PY312:-0}" != "1" ] && [ -x .venv312/bin/python ]; then
  echo "=== Python tests under $(.venv312/bin/python -V) (tests/python/compile) ==="
  .venv312/bin/python -m pytest tests/python/compile -q -p no:cacheprovider || status=1
else
  echo "=== no CPython 3.12 environment: tests/python/compile ran under 3.11 only ==="
fi
# ASan+UBSan build, the C++ suite and the hostile-input Python tests under it, and a short run of each
# libFuzzer harness (docs/HARDENING.md). STRATA_SKIP_SANITIZERS=1 skips it.
if [ "${STRATA_SKIP_SANITIZERS:-0}" != "1" ]; then
  echo "=== sanitizers and fuzzers (scripts/sanitize.sh; STRATA_SKIP_SANITIZERS=1 skips) ==="
  bash scripts/sanitize.sh || status=1
  # ThreadSanitizer build and the C++ suite under it (docs/HARDENING.md; cold build ~4.5 min on 2 cores).
  if [ "${STRATA_SKIP_TSAN:-0}" != "1" ]; then
    echo "=== ThreadSanitizer (scripts/tsan.sh; STRATA_SKIP_TSAN=1 skips) ==="
    bash scripts/tsan.sh || status=1
  fi
else
  echo "=== STRATA_SKIP_SANITIZERS=1: no sanitizer build, no fuzzing ==="
fi
exit $status
