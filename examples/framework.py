"""Framework selection for the training scripts.

The scripts are written once against PyTorch's API and bind the chosen module
to the name ``torch``::

    torch = load_framework(args.framework)   # "strata" (default) or "torch"

so the same code runs under ``import strata as torch`` and under PyTorch. The
only framework-specific lookup is the profiler module (torch.profiler or
strata.profiler), which ``profiler_module`` resolves.
"""

import importlib
import os
import sys

FRAMEWORKS = ("strata", "torch")
_REPO_PYTHON = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python")


def add_framework_argument(parser):
    parser.add_argument("--framework", choices=FRAMEWORKS, default="strata",
                        help="array/autograd framework to run under (default: strata)")


def load_framework(name):
    """Returns the top-level module (strata or torch) for ``name``."""
    if name not in FRAMEWORKS:
        raise ValueError(f"unknown framework {name!r}; expected one of {', '.join(FRAMEWORKS)}")
    if name == "strata":
        try:
            return importlib.import_module("strata")
        except ImportError:
            # Running from a checkout without the .pth that scripts/setup.sh installs: use the in-tree package.
            if _REPO_PYTHON not in sys.path:
                sys.path.insert(0, _REPO_PYTHON)
            return importlib.import_module("strata")
    return importlib.import_module("torch")


def profiler_module(torch):
    """torch.profiler or strata.profiler, whichever belongs to the loaded framework."""
    return importlib.import_module(torch.__name__ + ".profiler")


def framework_name(torch):
    return torch.__name__


def print_profile(torch, run_steps, row_limit=15):
    """Runs ``run_steps()`` under the framework's profiler and prints where the time went, sorted by self CPU
    time. A framework without a profiler module gets a note instead: the profile reports, it does not gate."""
    try:
        profiler = profiler_module(torch)
    except ImportError as e:
        print(f"{torch.__name__}.profiler is not available ({e}); no profile")
        return False
    with profiler.profile() as prof:
        run_steps()
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=row_limit))
    return True
