#!/usr/bin/env bash
# Idempotent set-up: system packages, the virtual environment at .venv, and an
# incremental build (ccache). Called by scripts/demo.sh and scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

# --- Debian packages ----------------------------------------------------------
PKGS="ccache libopenblas-dev libdnnl-dev libgtest-dev libbenchmark-dev libopenmpi-dev openmpi-bin"
# The sanitizer and fuzzing job (scripts/sanitize.sh, docs/HARDENING.md) builds with clang: its ASan and
# libFuzzer runtimes, its OpenMP runtime, and llvm-symbolizer for readable reports. STRATA_SKIP_SANITIZERS=1 skips the job and these packages.
if [ "${STRATA_SKIP_SANITIZERS:-0}" != "1" ]; then
  PKGS="$PKGS clang-${STRATA_LLVM:-19} libclang-rt-${STRATA_LLVM:-19}-dev libomp-${STRATA_LLVM:-19}-dev llvm-${STRATA_LLVM:-19}"
fi
missing=""
for p in $PKGS; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  echo "[setup] installing Debian packages:$missing"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

# --- Python environment -------------------------------------------------------
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating .venv"
  "$PY" -m venv .venv
fi
if ! .venv/bin/python -c "import nanobind, numpy, pytest, hypothesis, cmake, ninja, sklearn, matplotlib" >/dev/null 2>&1; then
  echo "[setup] installing Python packages"
  .venv/bin/pip install -q --disable-pip-version-check -r requirements-dev.txt
fi
# oneMKL from PyPI (libraries only, no Python module): the FFT library strata.fft loads at run time
# (backends/cpu/mkl_dft.cpp; docs/DESIGN.md, "FFT"). Without it strata.fft raises and test_fft.py skips.
if ! ls .venv/lib/libmkl_rt.so.* >/dev/null 2>&1; then
  echo "[setup] installing mkl (strata.fft's FFT library)"
  .venv/bin/pip install -q --disable-pip-version-check "mkl==2026.2.0" || echo "[setup] mkl unavailable: strata.fft will raise"
fi
# PyTorch is the reference the tests and benchmarks compare against (CPU build, local file).
if [ "${STRATA_SKIP_TORCH:-0}" != "1" ] && ! .venv/bin/python -c "import torch" >/dev/null 2>&1; then
  echo "[setup] installing torch==2.13.0 (reference for tests and benchmarks)"
  .venv/bin/pip install -q --disable-pip-version-check torch==2.13.0 || echo "[setup] torch unavailable: parity tests will skip"
fi
# NVRTC and the CUDA 13.0 headers for the generated CUDA kernels (python/strata/_inductor/cuda_compile.py),
# pinned to the 13.0 line of the lent GPU machines (driver 580): a newer NVRTC emits PTX they reject. nvdisasm and
# cuobjdump have no 13.0 wheel; 13.2.51 is the oldest and reads sm_90a cubins. Without them the CUDA codegen
# tests skip.
if ! ls .venv/lib/python3*/site-packages/nvidia/cu13/lib/libnvrtc.so.13 >/dev/null 2>&1 \
   || ! ls .venv/lib/python3*/site-packages/nvidia/cu13/bin/nvdisasm >/dev/null 2>&1; then
  echo "[setup] installing NVRTC 13.0 and the CUDA headers (generated CUDA kernels)"
  .venv/bin/pip install -q --disable-pip-version-check --no-deps nvidia-cuda-nvrtc==13.0.88 nvidia-cuda-crt==13.0.88 \
    nvidia-cuda-runtime==13.0.96 nvidia-cuda-cccl==13.0.85 nvidia-cuda-nvdisasm==13.2.51 nvidia-cuda-cuobjdump==13.2.51 \
    || echo "[setup] CUDA 13.0 wheels unavailable: the CUDA codegen tests will skip"
fi

# --- Build ----------------------------------------------------------------------
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/strata-ccache}
export CCACHE_BASEDIR=$ROOT
export CCACHE_NOHASHDIR=1
BIN=$ROOT/.venv/bin
if [ ! -f build/build.ninja ]; then
  "$BIN/cmake" -S . -B build -G Ninja -DCMAKE_MAKE_PROGRAM="$BIN/ninja" \
    -DPython_EXECUTABLE="$BIN/python" -DSTRATA_INPLACE_PYTHON=ON >/dev/null
fi
echo "[setup] building (ninja, $(nproc) jobs)"
"$BIN/cmake" --build build -j "$(nproc)" | grep -vE '^\[[0-9]+/[0-9]+\] (Building|Linking)' || { echo "[setup] build failed"; exit 1; }

# Make `import strata` work from .venv (editable, points at python/).
SITE=$(.venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
echo "$ROOT/python" > "$SITE/strata-dev.pth"

# --- CPython 3.12: a second extension, for the compile tests --------------------------
# strata.compile interprets bytecode, which differs between 3.11 and 3.12, so scripts/test.sh
# runs tests/python/compile under 3.12 too. A small venv (.venv312: nanobind, numpy, pytest)
# and a second build dir (build-py312) that builds only _C against the libstrata.so above
# (STRATA_PREBUILT_CORE); the extension lands beside the 3.11 one in python/strata (its file
# name carries the ABI tag). STRATA_PY312 names another interpreter, STRATA_SKIP_PY312=1 skips.
PY312=${STRATA_PY312:-$HOME/.pyenv/versions/3.12.1/bin/python3}
if [ "${STRATA_SKIP_PY312:-0}" = "1" ]; then
  echo "[setup] STRATA_SKIP_PY312=1: no CPython 3.12 extension"
elif [ ! -x "$PY312" ]; then
  echo "[setup] $PY312 not found: no CPython 3.12 extension, the compile tests run under 3.11 only"
else
  if [ ! -x .venv312/bin/python ]; then
    echo "[setup] creating .venv312 ($("$PY312" -V))"
    "$PY312" -m venv .venv312
  fi
  if ! .venv312/bin/python -c "import nanobind, numpy, pytest" >/dev/null 2>&1; then
    echo "[setup] installing Python packages for 3.12"
    .venv312/bin/pip install -q --disable-pip-version-check $(grep -E '^(nanobind|numpy|pytest)\b' requirements-dev.txt)
  fi
  if [ ! -f build-py312/build.ninja ]; then
    "$BIN/cmake" -S . -B build-py312 -G Ninja -DCMAKE_MAKE_PROGRAM="$BIN/ninja" \
      -DPython_EXECUTABLE="$ROOT/.venv312/bin/python" -DSTRATA_INPLACE_PYTHON=ON \
      -DSTRATA_PREBUILT_CORE="$ROOT/python/strata/libstrata.so" -DSTRATA_BUILD_TESTS=OFF -DSTRATA_BUILD_BENCH=OFF >/dev/null
  fi
  echo "[setup] building the 3.12 extension"
  "$BIN/cmake" --build build-py312 --target _C -j "$(nproc)" | { grep -vE '^\[[0-9]+/[0-9]+\] (Building|Linking)' || true; } \
    || { echo "[setup] 3.12 build failed"; exit 1; }
  SITE312=$(.venv312/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  echo "$ROOT/python" > "$SITE312/strata-dev.pth"
fi
