#!/usr/bin/env bash
# Idempotent set-up: system packages, the virtual environment at .venv, and an
# incremental build (ccache). Called by scripts/demo.sh and scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

# --- Debian packages ----------------------------------------------------------
PKGS="ccache libopenblas-dev libdnnl-dev libgtest-dev libbenchmark-dev"
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
# PyTorch is the reference the tests and benchmarks compare against (CPU build, local file).
if [ "${STRATA_SKIP_TORCH:-0}" != "1" ] && ! .venv/bin/python -c "import torch" >/dev/null 2>&1; then
  echo "[setup] installing torch==2.13.0 (reference for tests and benchmarks)"
  .venv/bin/pip install -q --disable-pip-version-check torch==2.13.0 || echo "[setup] torch unavailable: parity tests will skip"
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
