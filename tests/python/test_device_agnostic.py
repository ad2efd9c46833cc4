"""Device-agnostic torch code on a machine without a GPU: strata.cuda, mps,
backends, accelerator, jit, nn.parallel, nn.attention, amp with device "cuda",
and the Tensor methods about devices. Each answer is compared with PyTorch's
own on this GPU-less machine (a CPU build of torch)."""

import warnings

import pytest

import strata

torch = pytest.importorskip("torch")

if torch.cuda.is_available():  # the comparisons below are with torch's answers without a GPU
    pytest.skip("torch sees a GPU here", allow_module_level=True)


def outcome(fn):
    """What a call does: ("ok", value) or ("raises", exception type)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return "ok", fn()
    except Exception as e:  # noqa: BLE001
        return "raises", type(e)


SAME_ANSWER = [
    "cuda.is_available()", "cuda.device_count()", "cuda.is_initialized()", "cuda.manual_seed(1)",
    "cuda.manual_seed_all(1)", "cuda.seed()", "cuda.seed_all()", "cuda.empty_cache()", "cuda.is_bf16_supported()",
    "cuda.memory_allocated()", "cuda.max_memory_allocated()", "cuda.memory_reserved()",
    "cuda.max_memory_reserved()", "cuda.get_rng_state_all()", "cuda.get_arch_list()",
    "mps.is_available()", "mps.device_count()", "mps.manual_seed(0)",
    "backends.mps.is_available()", "backends.mps.is_built()", "backends.cuda.is_built()",
    "backends.cuda.matmul.allow_tf32", "backends.cuda.matmul.allow_fp16_reduced_precision_reduction",
    "backends.cudnn.allow_tf32", "backends.cudnn.benchmark", "backends.cudnn.deterministic",
    "backends.cudnn.enabled", "backends.cudnn.is_available()", "backends.cudnn.version()",
    "backends.mkldnn.enabled", "backends.openmp.is_available()", "backends.cuda.flash_sdp_enabled()",
    "backends.cuda.math_sdp_enabled()", "backends.cuda.mem_efficient_sdp_enabled()",
    "accelerator.is_available()", "accelerator.current_accelerator()", "accelerator.device_count()",
    "get_float32_matmul_precision()", "are_deterministic_algorithms_enabled()",
    "is_deterministic_algorithms_warn_only_enabled()", "compiler.is_compiling()", "jit.is_scripting()",
    "jit.is_tracing()", "version.cuda", "version.hip", "cuda.stream(None).__enter__()",
]
SAME_EXCEPTION = [
    "cuda.synchronize()", "cuda.ipc_collect()", "cuda.current_device()", "cuda.get_device_name()",
    "cuda.get_device_name(0)", "cuda.get_device_capability()", "cuda.get_device_properties(0)", "cuda.init()",
    "cuda.current_stream()", "cuda.default_stream()", "cuda.get_rng_state()", "cuda.initial_seed()",
    "cuda.mem_get_info()", "cuda.set_device('cpu')", "cuda.Event()", "cuda.Stream()", "cuda.device(0).__enter__()",
    "mps.synchronize()", "mps.empty_cache()", "mps.seed()", "accelerator.current_device_index()",
    "accelerator.synchronize()", "accelerator.set_device_index(0)", "set_float32_matmul_precision(3)",
]


def _eval(lib, expr):
    return eval("lib." + expr, {"lib": lib})


@pytest.mark.parametrize("expr", SAME_ANSWER)
def test_same_answer_as_torch(expr):
    got, want = outcome(lambda: _eval(strata, expr)), outcome(lambda: _eval(torch, expr))
    assert got == want, expr


@pytest.mark.parametrize("expr", SAME_EXCEPTION)
def test_same_exception_as_torch(expr):
    got, want = outcome(lambda: _eval(strata, expr)), outcome(lambda: _eval(torch, expr))
    assert want[0] == "raises" and got == want, (expr, got, want)


@pytest.mark.parametrize("fn", ["synchronize", "current_device", "get_device_name", "reset_peak_memory_stats",
                                "set_device"])
def test_cuda_errors_name_the_call(fn):
    with pytest.raises(AssertionError, match=rf"strata\.cuda\.{fn}\(\).*no CUDA backend"):
        getattr(strata.cuda, fn)(*((0,) if fn == "set_device" else ()))


def test_no_gpu_branch_takes_cpu_path():
    # The line every device-agnostic script starts with.
    dev = strata.device("cuda" if strata.cuda.is_available() else "cpu")
    assert dev.type == "cpu" and strata.ones(2, device=dev).device.type == "cpu"
    assert str(strata.device("cuda:1")) == str(torch.device("cuda:1"))
    assert strata.device("cuda", 0).index == 0 and strata.device("cuda").index is None


def test_matmul_precision_and_tf32_are_one_setting():
    try:
        for lib in (strata, torch):
            lib.set_float32_matmul_precision("high")
        assert strata.backends.cuda.matmul.allow_tf32 is torch.backends.cuda.matmul.allow_tf32 is True
        strata.backends.cuda.matmul.allow_tf32 = False
        assert strata.get_float32_matmul_precision() == "highest"
        with pytest.warns(UserWarning, match="is not one of"):
            strata.set_float32_matmul_precision("fast")
        assert strata.get_float32_matmul_precision() == "highest"
        with pytest.raises(AttributeError, match="Unknown attribute"):
            strata.backends.cuda.matmul.allow_tf33 = True
    finally:
        strata.set_float32_matmul_precision("highest")
        torch.set_float32_matmul_precision("highest")


def test_deterministic_flags_as_torch():
    try:
        for args, kw in [((True,), {}), ((True,), {"warn_only": True}), ((False,), {"warn_only": True}),
                         ((False,), {})]:
            strata.use_deterministic_algorithms(*args, **kw)
            torch.use_deterministic_algorithms(*args, **kw)
            assert (strata.are_deterministic_algorithms_enabled(),
                    strata.is_deterministic_algorithms_warn_only_enabled()) == (
                        torch.are_deterministic_algorithms_enabled(),
                        torch.is_deterministic_algorithms_warn_only_enabled())
        with pytest.raises(TypeError, match="must be bool"):
            strata.use_deterministic_algorithms("yes")
    finally:
        strata.use_deterministic_algorithms(False)
        torch.use_deterministic_algorithms(False)


def test_cudnn_flags_are_settable_module_attributes():
    import strata.backends.cudnn as cudnn

    cudnn.benchmark = True
    try:
        assert strata.backends.cudnn.benchmark is True
        with cudnn.flags(enabled=False, deterministic=True):
            assert cudnn.deterministic is True and cudnn.enabled is False
        assert cudnn.deterministic is False and cudnn.enabled is True
    finally:
        cudnn.benchmark = False


def test_default_device():
    assert strata.get_default_device() == strata.device("cpu")
    strata.set_default_device("cpu")
    strata.set_default_device(None)
    with pytest.raises(AssertionError, match="set_default_device\\('cuda'\\).*no CUDA backend"):
        strata.set_default_device("cuda")
    with pytest.raises(NotImplementedError, match="CPU only"):
        strata.set_default_device("meta")
    assert strata.get_default_device().type == "cpu"


# ---- amp with device "cuda": warns and disables, as torch -----------------------------------
def test_autocast_cuda_warns_and_leaves_cpu_state_alone():
    a = strata.randn(3, 3)
    with pytest.warns(UserWarning, match="CUDA is not available. Disabling autocast"):
        ctx = strata.autocast("cuda")
    with ctx:
        assert (a @ a).dtype == strata.float32
    with strata.autocast("cpu"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            inner = strata.amp.autocast("cuda", enabled=False)  # no warning when disabled
        with inner:
            assert (a @ a).dtype == strata.bfloat16  # the enclosing CPU autocast still holds
    assert not strata.is_autocast_enabled()

    @strata.autocast("cuda", enabled=False)
    def f(x):
        return x @ x

    assert f(a).dtype == strata.float32


@pytest.mark.filterwarnings("ignore:CUDA is not available:UserWarning")
@pytest.mark.filterwarnings("ignore:strata.amp.GradScaler is enabled:UserWarning")
def test_cuda_amp_deprecated_spellings():
    with pytest.warns(FutureWarning, match="deprecated"):
        ctx = strata.cuda.amp.autocast()
    assert ctx._enabled is False
    with pytest.warns(FutureWarning, match="deprecated"):
        scaler = strata.cuda.amp.GradScaler()
    assert not scaler.is_enabled()


def test_grad_scaler_cuda_disabled_as_torch():
    for args in [("cuda",), (), ("cpu",)]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            s, t = strata.amp.GradScaler(*args), torch.amp.GradScaler(*args)
        assert s.is_enabled() == t.is_enabled(), args
    with pytest.warns(UserWarning, match="CUDA is not available.  Disabling"):
        s = strata.amp.GradScaler("cuda")
    loss = strata.tensor(2.0)
    assert s.scale(loss) is loss and s.get_scale() == 1.0


# ---- nn.attention.sdpa_kernel -----------------------------------------------------------------
def test_sdpa_kernel_restricts_and_restores():
    from strata.nn.attention import SDPBackend, sdpa_kernel
    import strata.nn.functional as F

    assert [(b.name, int(b)) for b in SDPBackend] == [
        (n, int(v)) for n, v in torch.nn.attention.SDPBackend.__members__.items()]
    q = strata.randn(1, 2, 5, 8)
    ref = F.scaled_dot_product_attention(q, q, q, is_causal=True)
    for b in (SDPBackend.MATH, SDPBackend.FLASH_ATTENTION, [SDPBackend.MATH, SDPBackend.FLASH_ATTENTION]):
        with sdpa_kernel(b):
            out = F.scaled_dot_product_attention(q, q, q, is_causal=True)
        assert strata.allclose(out, ref, atol=1e-5)
    with sdpa_kernel(SDPBackend.MATH):
        assert not strata.backends.cuda.flash_sdp_enabled() and strata.backends.cuda.math_sdp_enabled()
        assert F._sdpa_fused_ok is False
    assert strata.backends.cuda.flash_sdp_enabled() and F._sdpa_fused_ok is True
    for b in (SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION):
        with sdpa_kernel(b):
            with pytest.raises(RuntimeError, match="No viable backend for scaled_dot_product_attention"):
                F.scaled_dot_product_attention(q, q, q)
        with torch.nn.attention.sdpa_kernel(getattr(torch.nn.attention.SDPBackend, b.name)):
            with pytest.raises(RuntimeError, match="No viable backend"):
                torch.nn.functional.scaled_dot_product_attention(*[torch.randn(1, 2, 5, 8)] * 3)
    with pytest.raises(AssertionError, match="SDPBackend"):
        with sdpa_kernel("math"):
            pass
    assert strata.backends.cuda.math_sdp_enabled()


# ---- jit pass-throughs ------------------------------------------------------------------------
def test_jit_script_and_trace_pass_through():
    lin = strata.nn.Linear(3, 2)
    assert strata.jit.script(lin) is lin
    x = strata.randn(4, 3)
    assert strata.allclose(strata.jit.script(lin)(x), lin(x))

    def f(t):
        return t * 2

    assert strata.jit.script(f) is f
    calls = []
    assert strata.jit.trace(lambda t: calls.append(t.shape) or t, x) is not None and calls == [strata.Size([4, 3])]
    assert strata.jit.trace(lin, (x,)) is lin
    with pytest.raises(RuntimeError):  # trace runs the function, so a shape error shows up here
        strata.jit.trace(lin, strata.randn(4, 5))
    with pytest.raises(NotImplementedError, match="TorchScript archives are not supported"):
        strata.jit.script(lin).save("m.pt")
    with pytest.raises(NotImplementedError, match="strata.jit.load"):
        strata.jit.load("m.pt")
    assert "unchanged" in strata.jit.script.__doc__

    class M(strata.nn.Module):
        @strata.jit.ignore
        def a(self):
            return 1

        @strata.jit.ignore(drop=True)
        def b(self):
            return 2

        @strata.jit.unused
        def c(self):
            return 3

        @strata.jit.export
        def d(self):
            return 4

    m = M()
    assert (m.a(), m.b(), m.c(), m.d()) == (1, 2, 3, 4)
    assert strata.jit.annotate(int, 5) == 5


# ---- nn.parallel ------------------------------------------------------------------------------
def test_data_parallel_passes_through_and_ddp_raises():
    lin = strata.nn.Linear(3, 2)
    dp = strata.nn.DataParallel(lin)
    assert dp.module is lin and isinstance(dp, strata.nn.parallel.DataParallel)
    x = strata.randn(4, 3)
    assert strata.equal(dp(x), lin(x))
    assert sorted(dp.state_dict()) == ["module.bias", "module.weight"]
    tdp = torch.nn.DataParallel(torch.nn.Linear(3, 2))  # torch without GPUs: the same pass-through
    assert dp.device_ids == tdp.device_ids == [] and sorted(tdp.state_dict()) == sorted(dp.state_dict())
    with pytest.raises(AssertionError, match="device_ids=\\[0\\]"):
        strata.nn.DataParallel(lin, device_ids=[0])
    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        strata.nn.parallel.DistributedDataParallel(lin)  # as torch: DDP needs init_process_group first


# ---- Tensor methods ---------------------------------------------------------------------------
@pytest.mark.parametrize("value,spec", [(2.5, ".4f"), (2.5, ""), (3, "d"), (3, ".2f"), (True, ""), (-1.25, "+.1e"),
                                        ([1.5], ".4f"), ([1.5], ""), ([[1.0, 2.0]], ".2f"), ([[1.0, 2.0]], "")])
def test_format_as_torch(value, spec):
    s, t = strata.tensor(value), torch.tensor(value)
    got = outcome(lambda: format(s, spec))
    want = outcome(lambda: format(t, spec))
    if want[0] == "ok" and spec == "" and t.ndim > 0:
        assert got == ("ok", str(s))  # the repr, which is Strata's own
    else:
        assert got == want


def test_format_of_grad_tensor():
    assert f"{strata.tensor(2.5, requires_grad=True):.2f}" == "2.50"


def test_type_as_torch():
    m = strata.ones(2, 2)
    names = {"float": "FloatTensor", "double": "DoubleTensor", "half": "HalfTensor", "bfloat16": "BFloat16Tensor",
             "long": "LongTensor", "int": "IntTensor", "short": "ShortTensor", "char": "CharTensor",
             "byte": "ByteTensor", "bool": "BoolTensor"}
    for conv, name in names.items():
        assert getattr(m, conv)().type() == "strata." + name
        assert getattr(torch.ones(2, 2), conv)().type() == "torch." + name
    assert m.type(strata.float32) is m
    assert m.type("torch.DoubleTensor").dtype is strata.float64
    assert m.type("strata.LongTensor").dtype is strata.int64
    assert m.type(dtype=strata.int64, non_blocking=True).dtype is strata.int64
    for bad in ("torch.float64", "float"):
        with pytest.raises(ValueError, match="invalid type"):
            m.type(bad)
        with pytest.raises(ValueError, match="invalid type"):
            torch.ones(1).type(bad)
    with pytest.raises(AssertionError, match="no CUDA backend"):
        m.type("torch.cuda.FloatTensor")


def test_pin_memory_and_cuda_moves():
    m = strata.ones(2)
    assert m.is_pinned() is torch.ones(2).is_pinned() is False
    with pytest.raises(RuntimeError, match="Cannot access accelerator device when none is available"):
        m.pin_memory()
    with pytest.raises(RuntimeError, match="Cannot access accelerator device when none is available"):
        torch.ones(2).pin_memory()
    for move, dev in [(lambda t: t.cuda(), "cuda"), (lambda t: t.cuda(1), "cuda:1"), (lambda t: t.to("cuda"), "cuda"),
                      (lambda t: t.to("cuda:0"), "cuda:0"), (lambda t: t.to(strata.device("cuda")), "cuda"),
                      (lambda t: t.to(device="cuda", dtype=strata.float64), "cuda")]:
        with pytest.raises(AssertionError, match=f"device '{dev}'.*no CUDA backend"):
            move(m)
    assert m.to("cpu") is m and m.cpu() is m


def test_version():
    assert strata.version.cuda is None and isinstance(strata.__version__, str)
    assert strata.__version__ == strata.version.__version__


# ---- legacy tensor types ----------------------------------------------------------------------
LEGACY = ["FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor", "IntTensor", "ShortTensor",
          "CharTensor", "ByteTensor", "BoolTensor"]


@pytest.mark.parametrize("name", LEGACY)
def test_legacy_types_as_torch(name):
    S, T = getattr(strata, name), getattr(torch, name)
    assert str(S.dtype).split(".")[1] == str(T.dtype).split(".")[1]
    assert S(2, 3).shape == (2, 3) and S(2, 3).dtype is S.dtype
    assert S(strata.Size([4])).shape == (4,) and S().shape == (0,)
    data = [[1, 0], [3, 4]]
    assert S(data).tolist() == T(data).tolist()
    assert isinstance(S([1]), S) and not isinstance(strata.ones(1, dtype=strata.float64 if name != "DoubleTensor"
                                                                   else strata.float32), S)
    assert not isinstance(S([1]), getattr(strata.cuda, name))
    assert strata.ones(2).type(S).dtype is S.dtype
    assert strata.ones(2, dtype=S.dtype).new(3).dtype is S.dtype


def test_legacy_type_errors():
    import numpy as np

    assert strata.LongTensor([1.7, 2]).tolist() == torch.LongTensor([1.7, 2]).tolist()
    assert strata.FloatTensor(np.array([1, 2])).tolist() == [1.0, 2.0]
    x = strata.ones(2, dtype=strata.float64)
    assert x.new([1, 2]).dtype is strata.float64 and x.new().shape == (0,) and x.new(2, 3).shape == (2, 3)
    for bad, exc in [(lambda L: L.FloatTensor(2.5), TypeError), (lambda L: L.FloatTensor(-1), RuntimeError),
                     (lambda L: L.FloatTensor(L.ones(2, dtype=L.float64)), TypeError),
                     (lambda L: L.FloatTensor([1], requires_grad=True), TypeError),
                     (lambda L: L.ones(2, dtype=L.float64).new(L.ones(2)), TypeError),
                     (lambda L: L.cuda.FloatTensor([1]), TypeError)]:
        assert outcome(lambda: bad(strata)) == outcome(lambda: bad(torch)) == ("raises", exc)
    with pytest.raises(TypeError, match="strata.cuda.FloatTensor not available.*CUDA"):
        strata.cuda.FloatTensor(2)
    with pytest.raises(AssertionError, match="no CUDA backend"):
        x.type(strata.cuda.FloatTensor)
    with pytest.raises(TypeError, match="CPU only"):
        strata.FloatTensor(2, device="cuda")
    assert strata.FloatTensor(2, device="cpu").shape == (2,)


def test_distributed_guard_takes_single_process_path():
    import strata.distributed as dist

    assert dist.is_available() is torch.distributed.is_available()
    assert dist.is_initialized() is torch.distributed.is_initialized() is False
    assert not (dist.is_available() and dist.is_initialized())
    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        dist.get_rank()
    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        torch.distributed.get_rank()
