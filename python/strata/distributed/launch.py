"""python -m strata.distributed.launch: torch.distributed.launch's older interface, served by
strata.distributed.run. The script also gets `--local-rank=N` unless --use-env is given (then it reads LOCAL_RANK,
which is always set)."""

import sys

from . import run as _run


def main(argv=None):
    p = _run._parser("strata.distributed.launch")
    p.add_argument("--use-env", "--use_env", action="store_true")
    args = p.parse_args(argv)
    if args.use_env:
        sys.exit(_run.run(args))
    # Each rank needs its own --local-rank: start them through a per-rank wrapper reading LOCAL_RANK.
    args.training_script_args = [args.training_script] + list(args.training_script_args)
    args.training_script = "strata.distributed._local_rank_arg"
    args.module = True
    sys.exit(_run.run(args))


if __name__ == "__main__":
    main()
