#!/usr/bin/env bash
# The sanitizer and fuzzing job (docs/HARDENING.md), run by scripts/test.sh unless STRATA_SKIP_SANITIZERS=1.
# Builds build-asan (clang, ASan+UBSan, one ISA level, ccache) and then:
#   1. checks that the planted bugs (src/core/sanitizer_canary.h) are reported, from C++ and from Python;
#   2. runs the whole C++ suite under the sanitizers (ctest);
#   3. runs the hostile-input Python tests with the interpreter loading the ASan runtime;
#   4. runs each libFuzzer harness in fuzz/ for STRATA_FUZZ_SECONDS (default 20) from its seed corpus.
# Exits non-zero on any finding. STRATA_SANITIZE_STEPS picks steps (default "canary ctest python fuzz").
# A long fuzz session: STRATA_FUZZ_SECONDS=3600 STRATA_SANITIZE_STEPS=fuzz bash scripts/sanitize.sh
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BIN=${STRATA_VENV_BIN:-$ROOT/.venv/bin}  # the virtual environment's bin/ (scripts/setup.sh makes .venv)
[ -x "$BIN/python" ] || { echo "[sanitize] no $BIN/python: run scripts/setup.sh first"; exit 1; }
B=$ROOT/build-asan
LLVM=${STRATA_LLVM:-19}
STEPS=${STRATA_SANITIZE_STEPS:-canary ctest python fuzz}
FUZZ_SECONDS=${STRATA_FUZZ_SECONDS:-20}
JOBS=${STRATA_JOBS:-$(nproc)}
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/strata-ccache} CCACHE_BASEDIR=$ROOT CCACHE_NOHASHDIR=1

if ! command -v "clang++-$LLVM" >/dev/null; then
  echo "[sanitize] clang++-$LLVM not found (scripts/setup.sh installs clang-$LLVM, libclang-rt-$LLVM-dev, libomp-$LLVM-dev)"
  exit 1
fi
RT=$("clang++-$LLVM" -print-file-name=libclang_rt.asan-x86_64.so)
[ -f "$RT" ] || { echo "[sanitize] ASan runtime not found ($RT): install libclang-rt-$LLVM-dev"; exit 1; }

# --- build --------------------------------------------------------------------
t0=$(date +%s)
if [ ! -f "$B/build.ninja" ]; then
  CC=clang-$LLVM CXX=clang++-$LLVM "$BIN/cmake" -S . -B "$B" -G Ninja -DCMAKE_MAKE_PROGRAM="$BIN/ninja" \
    -DPython_EXECUTABLE="$BIN/python" -DSTRATA_SANITIZE=address,undefined >/dev/null || exit 1
fi
echo "[sanitize] building build-asan (ASan+UBSan, clang-$LLVM, $JOBS jobs)"
"$BIN/cmake" --build "$B" -j "$JOBS" | { grep -vE '^\[[0-9]+/[0-9]+\] (Building|Linking)|warnings? generated|warning: loop not vectorized' || true; } \
  || { echo "[sanitize] build failed"; exit 1; }
echo "[sanitize] build: $(( $(date +%s) - t0 )) s"

# The instrumented _C and libstrata are in build-asan/python/strata; the Python sources are linked beside them.
for f in python/strata/*; do
  case "$f" in *.so) continue ;; esac
  ln -sfn "$ROOT/$f" "$B/python/strata/$(basename "$f")"
done

# Every finding stops the process with a report and a non-zero status. Python's own allocations are not
# freed at exit, so leak checking is off in the interpreter (and in the C++ suite, whose op registry lives
# until exit by design).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:halt_on_error=1:abort_on_error=0:detect_stack_use_after_return=0:allocator_may_return_null=1:strict_string_checks=1:check_initialization_order=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
# Reports name functions and lines when llvm-symbolizer is there (Debian's llvm-$LLVM).
[ -x "/usr/lib/llvm-$LLVM/bin/llvm-symbolizer" ] && export ASAN_SYMBOLIZER_PATH=${ASAN_SYMBOLIZER_PATH:-/usr/lib/llvm-$LLVM/bin/llvm-symbolizer}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
PYRUN=(env LD_PRELOAD="$RT" PYTHONPATH="$B/python" PYTHONDONTWRITEBYTECODE=1 "$BIN/python")
status=0
fail() { echo "[sanitize] FAILED: $*"; status=1; }
has() { case " $STEPS " in *" $1 "*) return 0 ;; esac; return 1; }

# --- 1. the planted bugs must be caught ---------------------------------------------------------------
if has canary; then
  echo "=== sanitizer canaries (planted bugs must be reported) ==="
  "$B/tests/cpp/strata_tests" --gtest_filter='SanitizerCanary.*' --gtest_brief=1 || fail "C++ canaries"
  for kind in "0 heap-buffer-overflow" "1 heap-use-after-free" "2 signed integer overflow"; do
    set -- $kind
    out=$("${PYRUN[@]}" -c "import strata; strata._C._sanitizer_canary($1, 16)" 2>&1)
    rc=$?
    if [ $rc -ne 0 ] && grep -q "${*:2}" <<<"$out"; then
      echo "[sanitize] Python canary $1 reported: ${*:2}"
    else
      echo "$out" | tail -5
      fail "Python canary $1 (${*:2}) was NOT reported (rc=$rc)"
    fi
  done
fi

# --- 2. the C++ suite ------------------------------------------------------------------------------
if has ctest; then
  echo "=== C++ tests under ASan+UBSan (ctest) ==="
  t=$(date +%s)
  "$BIN/ctest" --test-dir "$B" --output-on-failure -j "$JOBS" --timeout 600 >"$B/ctest.log" 2>&1 || fail "ctest under sanitizers"
  grep -vE '^ +[0-9]+/[0-9]+ Test +#[0-9]+: .* Passed' "$B/ctest.log" | tail -60
  echo "[sanitize] ctest: $(( $(date +%s) - t )) s"
fi

# --- 3. hostile-input Python tests -----------------------------------------------------------------
PY_TESTS=${STRATA_SANITIZE_PYTESTS:-tests/python/test_hostile.py tests/python/test_indexing.py tests/python/test_views.py
  tests/python/test_overlap.py tests/python/test_serialization.py tests/python/test_fuzz_checkpoint.py}
if has python; then
  echo "=== hostile-input Python tests under ASan+UBSan ==="
  t=$(date +%s)
  "${PYRUN[@]}" -m pytest $PY_TESTS -q -p no:cacheprovider \
    || fail "Python tests under sanitizers"
  echo "[sanitize] python: $(( $(date +%s) - t )) s"
fi

# --- 4. fuzzers --------------------------------------------------------------------------------------
if has fuzz; then
  echo "=== libFuzzer harnesses, ${FUZZ_SECONDS} s each ==="
  work=$B/fuzz-work
  mkdir -p "$work/artifacts"
  for exe in "$B"/fuzz/fuzz_*; do
    name=$(basename "$exe")
    mkdir -p "$work/corpus/$name"
    # New inputs go to the scratch corpus (build-asan/fuzz-work); the committed seeds are read only.
    log=$work/$name.log
    if "$exe" -max_total_time="$FUZZ_SECONDS" -timeout=30 -rss_limit_mb=4096 -print_final_stats=1 \
        -artifact_prefix="$work/artifacts/$name-" "$work/corpus/$name" "fuzz/corpus/$name" >"$log" 2>&1; then
      echo "[sanitize] $name: $(grep -E 'stat::number_of_executed_units' "$log" | awk '{print $2}') runs," \
        "$(grep -oE 'cov: [0-9]+' "$log" | tail -1)"
    else
      tail -40 "$log"
      fail "$name found a crash: reproduce with $exe $(ls -t "$work"/artifacts/"$name"-* 2>/dev/null | head -1)"
    fi
  done
fi
echo "[sanitize] total: $(( $(date +%s) - t0 )) s"
exit $status
