import os
import sys

# Make tests/python importable (the opdb package).
sys.path.insert(0, os.path.dirname(__file__))


def pytest_runtest_setup(item):
    # Tests marked `cuda` (pytest.ini) need a real GPU: skipped, with the reason, where there is none.
    if item.get_closest_marker("cuda") is not None:
        from gpu_check import no_gpu_reason

        why = no_gpu_reason()
        if why is not None:
            import pytest

            pytest.skip(f"needs a GPU: {why}")
