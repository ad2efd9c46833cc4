"""Out-of-tree extensibility: tests/cpp/out_of_tree/libstrata_ext_example.so
(built by the normal build, not part of libstrata) defines the custom op
myext::scaled_add and an "npu" backend on PrivateUse1. Loaded here with
strata.ops.load_library.

The library is looked up at $STRATA_EXT_EXAMPLE, else at
<repo>/build/tests/cpp/out_of_tree/libstrata_ext_example.so. Without a build
tree (e.g. strata installed from a wheel) the tests skip; with one, a missing
library is a failure."""

import os
import subprocess
import sys
import textwrap

import pytest

import strata

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_BUILD = os.path.join(_ROOT, "build")
_DEFAULT = os.path.join(_BUILD, "tests", "cpp", "out_of_tree", "libstrata_ext_example.so")

# Indices into myext::counters() (see ext_example.cpp).
ALLOCS, ALLOC_BYTES, COPY_HOOK, NPU_ADD, NPU_SCALED_ADD, CPU_SCALED_ADD, NPU_COPY = range(7)


def _ext_path():
    path = os.environ.get("STRATA_EXT_EXAMPLE", _DEFAULT)
    if os.path.exists(path):
        return path
    if "STRATA_EXT_EXAMPLE" in os.environ or os.path.exists(os.path.join(_BUILD, "CMakeCache.txt")):
        pytest.fail(f"extension library not found at {path}: the build should produce it "
                    "(tests/cpp/out_of_tree, built with STRATA_BUILD_TESTS=ON)")
    pytest.skip("no build tree, so no extension library to load")


@pytest.fixture(scope="module")
def ext():
    path = _ext_path()
    strata.ops.load_library(path)
    return path


def counters():
    return strata.ops.myext.counters().tolist()


def test_fresh_process_before_and_after_loading():
    # In a clean interpreter: nothing of the extension exists until it is loaded.
    path = _ext_path()
    code = textwrap.dedent(f'''
        import strata
        try:
            strata.ops.myext.scaled_add
            raise SystemExit("myext.scaled_add exists before loading")
        except AttributeError:
            pass
        try:
            strata.device("npu")
            raise SystemExit("npu device exists before loading")
        except RuntimeError:
            pass
        strata.ops.load_library({path!r})
        a = strata.tensor([1.0, 2.0]).to("npu")
        print(strata.ops.myext.scaled_add(a, a, 3.0).cpu().tolist())
    ''')
    env = dict(os.environ)
    pydir = os.path.dirname(os.path.dirname(os.path.abspath(strata.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in [pydir, env.get("PYTHONPATH", "")] if p)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.strip() == "[4.0, 8.0]"


def test_load_library_binds_new_ops(ext):
    assert callable(strata.ops.myext.scaled_add)
    assert "scaled_add" in dir(strata.ops.myext)
    assert os.path.abspath(ext) in strata.ops.loaded_libraries
    strata.ops.load_library(ext)  # a second load is harmless
    schemas = [s for s in strata._C._op_schemas() if s["name"] == "myext::scaled_add"]
    assert len(schemas) == 1
    assert schemas[0]["schema"] == "myext::scaled_add(Tensor a, Tensor b, float alpha=1.0) -> Tensor"
    assert sorted(strata._C._kernel_keys("myext::scaled_add")) == ["CPU", "Meta", "PrivateUse1"]
    assert "PrivateUse1" in strata._C._kernel_keys("add")
    assert "PrivateUse1" not in strata._C._kernel_keys("exp")


def test_custom_op_on_cpu_and_meta(ext):
    a = strata.tensor([1.0, 2.0, 3.0])
    b = strata.tensor([10.0, 20.0, 30.0])
    c0 = counters()
    assert strata.ops.myext.scaled_add(a, b, 0.5).tolist() == [6.0, 12.0, 18.0]
    assert strata.ops.myext.scaled_add(a, b).tolist() == [11.0, 22.0, 33.0]  # default alpha
    assert strata.ops.myext.scaled_add(a, b=b, alpha=2).tolist() == [21.0, 42.0, 63.0]
    assert counters()[CPU_SCALED_ADD] - c0[CPU_SCALED_ADD] == 3
    m = strata.ops.myext.scaled_add(a.to("meta"), strata.tensor([[1.0], [2.0]], device="meta"))
    assert m.device.type == "meta" and tuple(m.shape) == (2, 3)
    with pytest.raises(TypeError, match=r"myext::scaled_add\(Tensor a, Tensor b, float alpha=1.0\)"):
        strata.ops.myext.scaled_add(a, b, "x")
    with pytest.raises(TypeError, match="missing required argument 'b'"):
        strata.ops.myext.scaled_add(a)


def test_npu_device_and_copies(ext):
    c0 = counters()
    a = strata.tensor([1.0, 2.0, 3.0]).to("npu")
    assert a.device.type == "npu" and str(a.device) == "npu:0"
    assert a.device == strata.device("npu:0")
    assert not a.is_cpu and not a.is_meta
    assert a.cpu().tolist() == [1.0, 2.0, 3.0]
    assert a.tolist() == [1.0, 2.0, 3.0]  # tolist copies to the cpu itself
    b = strata.tensor([10.0, 20.0, 30.0], device="npu")
    assert b.device.type == "npu"
    c = counters()
    assert c[ALLOCS] - c0[ALLOCS] == 2  # the npu allocator, not the cpu one
    assert c[COPY_HOOK] - c0[COPY_HOOK] >= 3  # cpu->npu twice, npu->cpu at least once
    d = a.to(strata.float64)
    assert d.device.type == "npu" and d.dtype is strata.float64 and d.cpu().tolist() == [1.0, 2.0, 3.0]
    assert strata.tensor([2.5]).to("npu").item() == 2.5
    i = strata.tensor([1, 2]).to("npu", strata.int32)
    assert i.dtype is strata.int32 and i.cpu().tolist() == [1, 2]


def test_builtin_add_on_npu(ext):
    a = strata.tensor([1.0, 2.0, 3.0], device="npu")
    b = strata.tensor([10.0, 20.0, 30.0], device="npu")
    c0 = counters()
    s = a + b
    assert s.device.type == "npu" and s.cpu().tolist() == [11.0, 22.0, 33.0]
    assert strata.add(a, b, alpha=2).cpu().tolist() == [21.0, 42.0, 63.0]
    r = a + 1  # a Python number (a CPU scalar) mixes with npu tensors
    assert r.device.type == "npu" and r.dtype is strata.float32 and r.cpu().tolist() == [2.0, 3.0, 4.0]
    a.add_(b)  # in place, through out=
    assert a.cpu().tolist() == [11.0, 22.0, 33.0]
    assert counters()[NPU_ADD] - c0[NPU_ADD] == 4


def test_custom_op_on_npu(ext):
    a = strata.tensor([1.0, 2.0, 3.0], device="npu")
    b = strata.tensor([10.0, 20.0, 30.0], device="npu")
    c0 = counters()
    r = strata.ops.myext.scaled_add(a, b, 0.5)
    assert r.device.type == "npu" and r.cpu().tolist() == [6.0, 12.0, 18.0]
    r64 = strata.ops.myext.scaled_add(a.to(strata.float64), b, 2.0)  # mixed dtypes: promoted
    assert r64.dtype is strata.float64 and r64.cpu().tolist() == [21.0, 42.0, 63.0]
    c = counters()
    assert c[NPU_SCALED_ADD] - c0[NPU_SCALED_ADD] == 2
    assert c[CPU_SCALED_ADD] == c0[CPU_SCALED_ADD]


def test_npu_errors(ext):
    a = strata.tensor([1.0, 2.0], device="npu")
    with pytest.raises(NotImplementedError, match=r"Could not run 'exp' with arguments from the 'PrivateUse1' backend"):
        strata.exp(a)
    with pytest.raises(NotImplementedError, match=r"'mul'.*PrivateUse1"):
        a * 2
    with pytest.raises(RuntimeError, match="same device"):
        a + strata.tensor([1.0, 2.0])
    with pytest.raises(RuntimeError, match="same device"):
        strata.ops.myext.scaled_add(a, strata.tensor([1.0, 2.0]))
    with pytest.raises(RuntimeError, match="same device"):
        a + strata.tensor([1.0, 2.0], device="meta")
    with pytest.raises(TypeError, match="npu"):
        a.numpy()
    with pytest.raises(RuntimeError, match="meta"):
        strata.tensor([1.0], device="meta").to("npu")
