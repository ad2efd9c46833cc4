#!/usr/bin/env bash
# The GPU test suite (docs/CUDA.md, "GPU test suite"): builds Strata on the lent GPU machine's image from the copied
# working tree and runs every CUDA test against the real driver, the op database on cuda against the CPU, and
# bench/cuda.py against the image's own torch.
#
#   scripts/test_gpu.sh prepare   on the dev machine, once: copies GoogleTest's sources (and Python's headers, for an
#                                 image without them) into .gpu-deps/, an ignored folder that `run` carries
#   scripts/test_gpu.sh build     configure and build (no GPU needed): libstrata, _C, strata_tests
#   scripts/test_gpu.sh test      the tests and the benchmark (needs the build)
#   scripts/test_gpu.sh [all]     build, then test
#
# Without a GPU, `test` and `all` print "no GPU: <why>" and exit 0 at once (exit code 2 with STRATA_GPU_REQUIRED=1).
# Other exit codes: 1 a test failed, 3 the build failed or a tool is missing.
# Everything is logged to $OUT/test_gpu.log (OUT: the device tool's result folder; else $BUILD_DIR/gpu-out).
# Settings: PYTHON (python3), BUILD_DIR (build-gpu), JOBS (nproc), STRATA_GPU_BENCH=0 skips the benchmark,
# STRATA_GPU_DRY=1 runs `test` without looking for a GPU (the real-GPU tests then skip: checks the script itself).
# Files in $OUT: test_gpu.log, summary.txt, cpp_real.xml, pytest.xml, opdb_cuda.txt, bench_cuda.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
MODE=${1:-all}
PY=${PYTHON:-python3}
BUILD=${BUILD_DIR:-build-gpu}
JOBS=${JOBS:-$(nproc)}
DEPS=$ROOT/.gpu-deps
OUT=${OUT:-$ROOT/$BUILD/gpu-out}
mkdir -p "$OUT"
LOG=$OUT/test_gpu.log
SUMMARY=$OUT/summary.txt
T0=$(date +%s)

log() { echo "[test_gpu $(($(date +%s) - T0))s] $*" | tee -a "$LOG"; }
# Runs a command with a time limit, its output into the log (and the terminal); returns its status.
step() {
  local limit=$1 name=$2; shift 2
  log "== $name: $*"
  local t=$(date +%s)
  timeout --kill-after=10 "$limit" "$@" 2>&1 | tee -a "$LOG"
  local rc=${PIPESTATUS[0]}
  local msg="$name: $([ "$rc" = 0 ] && echo ok || echo "FAILED (exit $rc$([ "$rc" = 124 ] && echo ", over ${limit}s"))") in $(($(date +%s) - t))s"
  echo "$msg" >>"$SUMMARY"
  log "$msg"
  return "$rc"
}

prepare() {
  mkdir -p "$DEPS"
  local gt=${STRATA_GTEST_SRC:-/usr/src/googletest}
  if [ ! -f "$DEPS/googletest/CMakeLists.txt" ]; then
    [ -f "$gt/CMakeLists.txt" ] || { echo "prepare: no GoogleTest sources at $gt (Debian: googletest; or STRATA_GTEST_SRC=...)"; exit 3; }
    cp -r "$gt" "$DEPS/googletest"
  fi
  # Python 3.12's headers, used on the image only if its interpreter has none (the ABI is the same across 3.12.x).
  local py312=${STRATA_PY312:-$HOME/.pyenv/versions/3.12.1/bin/python3}
  if [ ! -f "$DEPS/python3.12/Python.h" ] && [ -x "$py312" ]; then
    local inc; inc=$("$py312" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
    [ -f "$inc/Python.h" ] && cp -r "$inc" "$DEPS/python3.12"
  fi
  # nanobind at the version requirements-dev.txt pins (its package holds the sources the extension is built from),
  # so that the image's own nanobind, of whatever version, is not what the build depends on.
  local want; want=$(sed -n 's/^nanobind==//p' "$ROOT/requirements-dev.txt")
  if [ ! -f "$DEPS/py/nanobind/__init__.py" ]; then
    for cand in "$ROOT/.venv/bin/python" "$ROOT/.venv312/bin/python" /work/main/.venv/bin/python "${PYTHON:-python3}"; do
      [ -x "$cand" ] || command -v "$cand" >/dev/null 2>&1 || continue
      local nb; nb=$("$cand" -c "import nanobind, os; print(nanobind.__version__, os.path.dirname(nanobind.__file__))" 2>/dev/null) || continue
      if [ "${nb%% *}" = "$want" ]; then mkdir -p "$DEPS/py" && cp -r "${nb#* }" "$DEPS/py/nanobind"; break; fi
    done
    [ -f "$DEPS/py/nanobind/__init__.py" ] || echo "prepare: no nanobind==$want found; the image's own nanobind will be used"
  fi
  du -sh "$DEPS"
  echo "prepare: done; carry .gpu-deps in the device tool's run (docs/CUDA.md, GPU test suite)"
}

# Prints why there is no usable GPU, or nothing when there is one.
no_gpu_reason() {
  if ! command -v nvidia-smi >/dev/null 2>&1 && ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1'; then
    echo "neither nvidia-smi nor libcuda.so.1 is on this machine"; return
  fi
  # The driver itself: cuInit and a device count, through ctypes (needs no CUDA toolkit).
  "$PY" - <<'EOF' 2>&1
import ctypes
try:
    cu = ctypes.CDLL("libcuda.so.1")
except OSError as e:
    print(f"libcuda.so.1 could not be loaded: {e}"); raise SystemExit
rc = cu.cuInit(0)
n = ctypes.c_int(0)
if rc != 0:
    print(f"cuInit failed with CUDA error {rc}")
elif cu.cuDeviceGetCount(ctypes.byref(n)) != 0 or n.value == 0:
    print("the driver counts no device")
EOF
}

build() {
  local cxx=${CXX:-$(command -v c++ || command -v g++ || true)}
  [ -n "$cxx" ] || { log "no C++ compiler (c++/g++) on this machine"; return 3; }
  local cmake ninja
  cmake=$(command -v cmake || true)
  [ -n "$cmake" ] || cmake=$("$PY" -c 'import cmake, os; print(os.path.join(cmake.CMAKE_BIN_DIR, "cmake"))' 2>/dev/null)
  ninja=$(command -v ninja || true)
  [ -n "$ninja" ] || ninja=$("$PY" -c 'import ninja, os; print(os.path.join(ninja.BIN_DIR, "ninja"))' 2>/dev/null)
  [ -x "$cmake" ] || { log "no cmake (PATH or the Python package)"; return 3; }
  local gen=(-G Ninja -DCMAKE_MAKE_PROGRAM="$ninja")
  [ -x "$ninja" ] || gen=(-G "Unix Makefiles")
  local extra=()
  # The carried nanobind (prepare) rather than the image's: the same version as the dev machine's.
  if [ -f "$DEPS/py/nanobind/__init__.py" ]; then
    export PYTHONPATH=$DEPS/py${PYTHONPATH:+:$PYTHONPATH}
  fi
  "$PY" -c 'import nanobind' 2>/dev/null || { log "no nanobind for $PY (scripts/test_gpu.sh prepare carries one)"; return 3; }
  [ -f "$DEPS/googletest/CMakeLists.txt" ] && extra+=(-DSTRATA_GTEST_SOURCE_DIR="$DEPS/googletest")
  if ! "$PY" -c 'import sysconfig, os, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'; then
    if [ -f "$DEPS/python3.12/Python.h" ] && "$PY" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))'; then
      log "$PY has no Python.h: using the carried headers in .gpu-deps/python3.12"
      extra+=(-DPython_INCLUDE_DIR="$DEPS/python3.12")
    fi
  fi
  log "build: $("$PY" -V 2>&1) ($PY), nanobind $("$PY" -c 'import nanobind; print(nanobind.__version__)'), $("$cxx" --version | head -1), cmake $("$cmake" --version | head -1 | awk '{print $3}'), $JOBS jobs, into $BUILD"
  if [ ! -f "$BUILD/CMakeCache.txt" ]; then
    step 300 configure "$cmake" -S . -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DPython_EXECUTABLE="$(command -v "$PY")" \
      -DSTRATA_INPLACE_PYTHON=ON -DSTRATA_BUILD_BENCH=OFF "${extra[@]}" || return 3
  fi
  # Only what the suite runs: the core, the extension, the C++ tests (and the extension library they load).
  # In `all`, the build must leave the tests time inside the device tool's 10 minutes: past the limit it stops with
  # a clear line, and `build` (a second call; ninja picks up where it stopped) then `test` finish the job.
  local limit=${STRATA_GPU_BUILD_LIMIT:-$([ "$MODE" = all ] && echo 420 || echo 570)}
  step "$limit" build "$cmake" --build "$BUILD" --target strata _C strata_tests -j "$JOBS" || return 3
}

gpu_tests() {
  local fail=0
  command -v nvidia-smi >/dev/null && { step 30 gpu nvidia-smi || true; }
  export PYTHONPATH=$ROOT/python${PYTHONPATH:+:$PYTHONPATH}
  export PYTHONUNBUFFERED=1 STRATA_OPDB_CUDA_REPORT=$OUT/opdb_cuda.txt
  # C++: the runtime and allocator against the real driver, then the fake-driver tests (their own process:
  # the driver is chosen once per process).
  STRATA_CUDA_TEST_REAL=1 step 120 cpp-real "$BUILD/tests/cpp/strata_tests" --gtest_filter='CudaReal*' \
    --gtest_output=xml:"$OUT/cpp_real.xml" || fail=1
  step 120 cpp-fake "$BUILD/tests/cpp/strata_tests" --gtest_filter='Cuda*:-CudaReal*' || fail=1
  # Python: every test file that uses the `cuda` marker (real GPU), all of its tests (the fake-driver ones
  # too), with the reasons of the skips.
  local files
  files=$( (grep -l 'pytest.mark.cuda' tests/python/*.py tests/python/*/*.py; ls tests/python/test_cuda*.py \
    tests/python/*/test_cuda*.py) 2>/dev/null | grep -v conftest | sort -u | tr '\n' ' ')
  log "python test files with the cuda marker: $files"
  # shellcheck disable=SC2086
  step 300 pytest "$PY" -m pytest -q -rs -p no:cacheprovider --junitxml="$OUT/pytest.xml" \
    -o addopts= $files || fail=1
  if [ "${STRATA_GPU_BENCH:-1}" != 0 ]; then
    step 120 bench "$PY" bench/cuda.py --out "$OUT/bench_cuda.txt" || fail=1
  fi
  return $fail
}

case "$MODE" in
  prepare) prepare; exit 0 ;;
  build|test|all) ;;
  *) echo "usage: scripts/test_gpu.sh [prepare|build|test|all]"; exit 3 ;;
esac

: >"$SUMMARY"
log "mode $MODE on $(hostname), $(nproc) cores; log: $LOG"
if [ "$MODE" != build ] && [ "${STRATA_GPU_DRY:-0}" = 1 ]; then
  log "STRATA_GPU_DRY=1: running without checking for a GPU (the real-GPU tests skip; checks the script itself)"
elif [ "$MODE" != build ]; then
  why=$(no_gpu_reason)
  if [ -n "$why" ]; then
    log "no GPU: $why"
    echo "no GPU: $why" >>"$SUMMARY"
    [ "${STRATA_GPU_REQUIRED:-0}" = 1 ] && exit 2
    exit 0
  fi
fi
if [ "$MODE" != test ]; then
  build || { log "build failed"; exit 3; }
fi
[ "$MODE" = build ] && { log "built in $(($(date +%s) - T0))s"; exit 0; }
[ -x "$BUILD/tests/cpp/strata_tests" ] || { log "no build in $BUILD: run scripts/test_gpu.sh build first"; exit 3; }
gpu_tests
rc=$?
log "done in $(($(date +%s) - T0))s: $([ $rc = 0 ] && echo ALL PASSED || echo SOME FAILED)"
cat "$SUMMARY"
exit $rc
