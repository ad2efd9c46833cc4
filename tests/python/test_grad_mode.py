import threading

import strata as st


def test_no_grad_excludes_autograd_key_on_this_thread_only():
    assert st.is_grad_enabled()
    seen = {}
    with st.no_grad():
        assert not st.is_grad_enabled()
        t = threading.Thread(target=lambda: seen.setdefault("other", st.is_grad_enabled()))
        t.start()
        t.join()
        with st.enable_grad():
            assert st.is_grad_enabled()
        assert not st.is_grad_enabled()
    assert st.is_grad_enabled()
    assert seen["other"] is True


def test_decorators_and_set_grad_enabled():
    @st.no_grad()
    def f():
        return st.is_grad_enabled()

    assert f() is False and st.is_grad_enabled()
    st.set_grad_enabled(False)
    assert not st.is_grad_enabled()
    st.set_grad_enabled(True)
    with st.set_grad_enabled(False):
        assert not st.is_grad_enabled()
    assert st.is_grad_enabled()
    with st.inference_mode():
        assert not st.is_grad_enabled()
    with st.inference_mode(False):
        assert st.is_grad_enabled()
