#!/usr/bin/env bash
# The ThreadSanitizer job (docs/HARDENING.md, docs/THREADS.md), run by scripts/test.sh after
# scripts/sanitize.sh unless STRATA_SKIP_TSAN=1 (or STRATA_SKIP_SANITIZERS=1: no clang).
# Builds build-tsan (clang, -fsanitize=thread, the core library at one ISA level and the C++ tests only:
# no Python extension, no benchmarks, no fuzzers; ccache) and then:
#   1. checks that the planted data race (src/core/sanitizer_canary.h, Canary::data_race) is reported;
#   2. runs the C++ suite (STRATA_TSAN_TESTS, a gtest filter, default every test but the canaries; the
#      thread tests are Threads.* and Random.*) under TSan, with every report fatal, on 2 OpenMP threads.
#      OpenMP regions are checked through LLVM's libomp and its TSan tool, Archer (libarcher.so, in
#      Debian's libomp-$LLVM-dev), which tells TSan about OpenMP's barriers and tasks; libomp itself is
#      not instrumented (ignore_noninstrumented_modules=1, as Archer asks).
# Exits non-zero on any finding or if the canary survives.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BIN=${STRATA_VENV_BIN:-$ROOT/.venv/bin}
[ -x "$BIN/cmake" ] || { echo "[tsan] no $BIN/cmake: run scripts/setup.sh first"; exit 1; }
B=${STRATA_TSAN_BUILD_DIR:-$ROOT/build-tsan}
LLVM=${STRATA_LLVM:-19}
JOBS=${STRATA_JOBS:-$(nproc)}
TESTS=${STRATA_TSAN_TESTS:-*-SanitizerCanary.*}
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/strata-ccache} CCACHE_BASEDIR=$ROOT CCACHE_NOHASHDIR=1

command -v "clang++-$LLVM" >/dev/null || { echo "[tsan] clang++-$LLVM not found (scripts/setup.sh installs it)"; exit 1; }
ARCHER=/usr/lib/llvm-$LLVM/lib/libarcher.so
[ -f "$ARCHER" ] || { echo "[tsan] $ARCHER not found: install libomp-$LLVM-dev"; exit 1; }

t0=$(date +%s)
if [ ! -f "$B/build.ninja" ]; then
  CC=clang-$LLVM CXX=clang++-$LLVM "$BIN/cmake" -S . -B "$B" -G Ninja -DCMAKE_MAKE_PROGRAM="$BIN/ninja" \
    -DSTRATA_SANITIZE=thread -DSTRATA_CAPS=default -DSTRATA_BUILD_PYTHON=OFF -DSTRATA_BUILD_BENCH=OFF >/dev/null \
    || exit 1
fi
echo "[tsan] building build-tsan (TSan, clang-$LLVM, $JOBS jobs; compiler output in build-tsan/build.log)"
"$BIN/cmake" --build "$B" -j "$JOBS" --target strata_tests >"$B/build.log" 2>&1 \
  || { grep -E -A5 'error|FAILED' "$B/build.log" | tail -60; echo "[tsan] build failed"; exit 1; }
echo "[tsan] build: $(( $(date +%s) - t0 )) s"

# Every report ends the process with status 66; Archer makes libomp's synchronization visible.
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:history_size=4:ignore_noninstrumented_modules=1}
[ -x "/usr/lib/llvm-$LLVM/bin/llvm-symbolizer" ] && TSAN_OPTIONS="$TSAN_OPTIONS:external_symbolizer_path=/usr/lib/llvm-$LLVM/bin/llvm-symbolizer"
export OMP_TOOL_LIBRARIES=$ARCHER OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
status=0
fail() { echo "[tsan] FAILED: $*"; status=1; }
T=$B/tests/cpp/strata_tests

echo "=== TSan canary (a planted data race must be reported) ==="
"$T" --gtest_filter="SanitizerCanary.*" --gtest_death_test_style=threadsafe --gtest_brief=1 || fail "the planted data race was not reported"

echo "=== $TESTS under ThreadSanitizer ==="
t=$(date +%s)
"$T" --gtest_filter="$TESTS" --gtest_brief=1 || fail "thread tests under TSan"
echo "[tsan] tests: $(( $(date +%s) - t )) s"
echo "[tsan] total: $(( $(date +%s) - t0 )) s"
exit $status
