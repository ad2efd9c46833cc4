"""Every strata.compile test starts and ends with empty compile caches."""

import pytest

import strata


@pytest.fixture(autouse=True)
def _fresh_compile_caches():
    strata.compiler.reset()
    yield
    strata.compiler.reset()
