"""strata.xpu and the strata.cuda additions (OutOfMemoryError, default_generators, nccl) answer as torch 2.13's
CPU-only build does."""

import pytest

import strata


def _outcome(fn):
    try:
        return ("ok", fn())
    except Exception as e:  # noqa: BLE001 - the exception type is what is compared
        return ("raises", type(e).__name__)


XPU_CALLS = {
    "is_available": lambda m: m.is_available(),
    "device_count": lambda m: m.device_count(),
    "is_initialized": lambda m: m.is_initialized(),
    "empty_cache": lambda m: m.empty_cache(),
    "synchronize": lambda m: m.synchronize(),
    "init": lambda m: m.init(),
    "current_device": lambda m: m.current_device(),
    "set_device": lambda m: m.set_device(0),
    "memory_allocated": lambda m: m.memory_allocated(),
    "memory_reserved": lambda m: m.memory_reserved(),
    "max_memory_allocated": lambda m: m.max_memory_allocated(),
    "is_bf16_supported": lambda m: m.is_bf16_supported(),
    "get_device_name": lambda m: m.get_device_name(),
    "get_device_properties": lambda m: m.get_device_properties(0),
    "manual_seed": lambda m: m.manual_seed(3),
    "manual_seed_all": lambda m: m.manual_seed_all(3),
    "seed_all": lambda m: m.seed_all(),
    "initial_seed": lambda m: m.initial_seed(),
    "get_rng_state": lambda m: m.get_rng_state(),
    "get_rng_state_all": lambda m: m.get_rng_state_all(),
    "memory_stats": lambda m: dict(m.memory_stats()),
    "mem_get_info": lambda m: m.mem_get_info(),
    "get_arch_list": lambda m: m.get_arch_list(),
    "default_generators": lambda m: m.default_generators,
    "Stream": lambda m: m.Stream(),
    "Event": lambda m: m.Event(),
    "stream(None)": lambda m: type(m.stream(None)).__name__,
}


@pytest.mark.parametrize("call", sorted(XPU_CALLS))
def test_xpu_answers_as_torch_without_xpu(call):
    torch = pytest.importorskip("torch")
    assert _outcome(lambda: XPU_CALLS[call](strata.xpu)) == _outcome(lambda: XPU_CALLS[call](torch.xpu))


def test_xpu_errors_name_the_function():
    with pytest.raises(AssertionError, match=r"strata\.xpu\.set_device\(\).*no XPU backend"):
        strata.xpu.set_device(0)
    with pytest.raises(AssertionError, match="not compiled with XPU"):
        with strata.xpu.device(0):
            pass


def test_out_of_memory_error_is_torch_shaped_and_raised_by_the_allocator():
    assert strata.cuda.OutOfMemoryError is strata.OutOfMemoryError
    assert issubclass(strata.OutOfMemoryError, RuntimeError)
    assert issubclass(strata.OutOfMemoryError, MemoryError)  # Python's own out-of-memory type still catches it
    with pytest.raises(strata.cuda.OutOfMemoryError, match="out of memory"):
        strata.empty(1 << 50)
    with pytest.raises(RuntimeError):
        strata.empty(1 << 50, dtype=strata.float64)


def test_cuda_default_generators_and_nccl():
    torch = pytest.importorskip("torch")
    assert strata.cuda.default_generators == torch.cuda.default_generators == ()
    assert strata.cuda.nccl.is_available([strata.ones(1)]) is False
    with pytest.raises(AttributeError, match="no NCCL"):
        strata.cuda.nccl.version()
    with pytest.raises(RuntimeError, match="no NCCL"):
        strata.cuda.nccl.all_reduce([strata.ones(1)])
    import strata.cuda.nccl as nccl_mod  # importable as a module, as torch.cuda.nccl
    assert nccl_mod is strata.cuda.nccl


def test_tensor_xpu_raises_as_torch():
    torch = pytest.importorskip("torch")
    assert _outcome(lambda: strata.ones(2).xpu()) == _outcome(lambda: torch.ones(2).xpu())
    with pytest.raises(AssertionError, match="Tensor.xpu"):
        strata.ones(2).xpu()
