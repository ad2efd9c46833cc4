#!/usr/bin/env bash
# Runs scripts/test_gpu.sh here the way the lent GPU machine's image would see the tree (docs/CUDA.md, "GPU test
# suite"): a copy of the tree as the device tool sends it (tracked + untracked-not-ignored files + .gpu-deps), a
# Python 3.12 venv of your choice, and Debian's dev packages that the image lacks hidden by bind mounts in a private
# mount namespace (no container; needs root and unshare): GoogleTest, Google Benchmark, oneDNN, Open MPI, OpenBLAS,
# /usr/src/googletest and the interpreter's own Python headers. Nothing outside the namespace is changed.
#
#   sudo scripts/simulate_gpu_image.sh build|test [jobs]      (test: STRATA_GPU_DRY=1 is implied, there is no GPU)
#   env: SIM (copy's folder, /tmp/strata-gpu-sim), SIM_VENV (a venv with nanobind cmake ninja numpy pytest [scipy
#        hypothesis]; default .venv312)
set -u
cd "$(dirname "$0")/.."
SRC=$PWD
MODE=${1:-build}; J=${2:-2}
SIM=${SIM:-/tmp/strata-gpu-sim}
VENV=${SIM_VENV:-$SRC/.venv312}
[ -x "$VENV/bin/python3" ] || { echo "no venv at $VENV (SIM_VENV=...)"; exit 3; }
[ -d .gpu-deps ] || { echo "run scripts/test_gpu.sh prepare first"; exit 3; }
mkdir -p "$SIM"
git ls-files -co --exclude-standard -z | xargs -0 tar cf - .gpu-deps | tar xf - -C "$SIM"
PYINC=$("$VENV/bin/python3" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
exec unshare -m --propagation private bash -c '
E=$(mktemp -d); F=$(mktemp)
for d in /usr/include/gtest /usr/include/gmock /usr/include/benchmark /usr/include/oneapi /usr/lib/x86_64-linux-gnu/cmake/GTest \
         /usr/lib/x86_64-linux-gnu/cmake/benchmark /usr/lib/x86_64-linux-gnu/cmake/dnnl /usr/lib/x86_64-linux-gnu/openmpi \
         /usr/src/googletest "'"$PYINC"'"; do
  [ -e "$d" ] && mount --bind $E "$d"
done
for f in /usr/include/dnnl*.h* /lib/x86_64-linux-gnu/libopenblas.so* /lib/x86_64-linux-gnu/libdnnl.so* \
         /lib/x86_64-linux-gnu/libmpi.so* /lib/x86_64-linux-gnu/libgtest* /lib/x86_64-linux-gnu/libbenchmark*; do
  [ -e "$f" ] && mount --bind $F "$f"
done
cd "'"$SIM"'"
export PATH="'"$VENV"'/bin:/usr/bin:/bin" CCACHE_DISABLE=1 JOBS='"$J"' PYTHON=python3 STRATA_GPU_DRY=1
export STRATA_GPU_BUILD_LIMIT=${STRATA_GPU_BUILD_LIMIT:-3600}
unset PYTHONPATH VIRTUAL_ENV
time scripts/test_gpu.sh '"$MODE"'
'
