"""Runs a script with `--local-rank=$LOCAL_RANK` appended to its arguments (strata.distributed.launch)."""

import os
import runpy
import sys

if __name__ == "__main__":
    script = sys.argv[1]
    sys.argv = [script, f"--local-rank={os.environ['LOCAL_RANK']}"] + sys.argv[2:]
    runpy.run_path(script, run_name="__main__")
