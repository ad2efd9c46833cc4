"""Runs pytest with the frame hook installed and a callback that answers None
for every code object (so every function frame is offered to it, and all run
normally), then prints how many frames the callback saw.

    python tests/python/compile/run_under_hook.py tests/python/test_autograd.py -q
"""
import sys

import pytest

from strata import _C

EF = _C._eval_frame


def main(argv):
    asked = 0

    def callback(code, func):
        nonlocal asked
        asked += 1
        return None

    EF.set_callback(callback)
    try:
        rc = pytest.main(argv)
    finally:
        EF.set_callback(None)
    print(f"frames asked: {asked}")
    return int(rc)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
