import numpy as np
import pytest

import strata as st


def test_add_broadcast_promotes_like_torch():
    a = st.tensor([[1.0, 2.0], [3.0, 4.0]])
    b = st.tensor([1, 2])
    c = a + b
    assert c.dtype is st.float32
    np.testing.assert_allclose(c.numpy(), np.array([[2.0, 4.0], [4.0, 6.0]]))


def test_python_scalars_are_weak():
    i = st.tensor([1, 2, 3], dtype=st.int32)
    assert (i + 1).dtype is st.int32
    assert (i + 1.5).dtype is st.float32
    h = st.tensor([1.0], dtype=st.float16)
    assert (h * 2.0).dtype is st.float16


def test_bad_shapes_raise_with_facts():
    with pytest.raises(RuntimeError, match=r"\[2\].*\[3\]|size of tensor a \(2\)"):
        st.tensor([1.0, 2.0]) + st.tensor([1.0, 2.0, 3.0])


def test_integer_division_by_zero_raises():
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        st.tensor([1, 2]) // st.tensor([0, 1])
