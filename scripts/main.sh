#!/usr/bin/env bash
# The main job: set up and build, then train the digits classifier and the
# character language model (examples/main.py; pass --framework torch to run
# the same scripts under PyTorch, --quick for a smoke run).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python examples/main.py "$@"
