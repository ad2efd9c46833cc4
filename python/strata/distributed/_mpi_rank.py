"""Runs a script as one rank of an mpirun job started by `strata.distributed.run --mpi-runtime`: RANK,
LOCAL_RANK, WORLD_SIZE and LOCAL_WORLD_SIZE come from Open MPI's OMPI_COMM_WORLD_* variables."""

import os
import runpy
import sys

if __name__ == "__main__":
    e = os.environ
    e["RANK"] = e["ROLE_RANK"] = e["OMPI_COMM_WORLD_RANK"]
    e["WORLD_SIZE"] = e["ROLE_WORLD_SIZE"] = e["OMPI_COMM_WORLD_SIZE"]
    e["LOCAL_RANK"] = e.get("OMPI_COMM_WORLD_LOCAL_RANK", e["OMPI_COMM_WORLD_RANK"])
    e["LOCAL_WORLD_SIZE"] = e.get("OMPI_COMM_WORLD_LOCAL_SIZE", e["OMPI_COMM_WORLD_SIZE"])
    args = sys.argv[1:]
    try:
        if args and args[0] == "-m":
            sys.argv = [args[1]] + args[2:]
            runpy.run_module(args[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = args
            runpy.run_path(args[0], run_name="__main__")
    except Exception as e:
        # mpirun names a failing process by its job id; say which rank failed and why, then fail as Python does.
        sys.excepthook(type(e), e, e.__traceback__)
        sys.stderr.write(f"strata.distributed: rank {e_rank} failed: {type(e).__name__}: {e}\n"
                         if (e_rank := os.environ.get("RANK")) else "")
        sys.stderr.flush()
        os._exit(1)
