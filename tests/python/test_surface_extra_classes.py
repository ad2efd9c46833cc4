"""strata.classes answers like torch.classes, and does not break pickle's module search."""
import pickle
import sys

import pytest

import strata


def test_missing_class_raises_runtime_error_like_torch():
    with pytest.raises(RuntimeError, match="Tried to instantiate class 'ns.Foo'"):
        strata.classes.ns.Foo


def test_pickle_module_search_skips_strata_classes():
    # pickle looks a module-less object up by its name in every module of sys.modules (whichmodule);
    # strata.classes answers any first-level name, so the second level must fail as an AttributeError.
    class Token:
        def __reduce__(self):
            return "nowhere.token"

    assert "strata.classes" in sys.modules
    # whichmodule returns '__main__' when no module has the name: pickling then fails with PicklingError,
    # not with strata's RuntimeError raised from inside the search.
    with pytest.raises(pickle.PicklingError):
        pickle.dumps(Token())
    with pytest.raises(AttributeError):
        getattr(strata.classes.torch, "contiguous_format")
