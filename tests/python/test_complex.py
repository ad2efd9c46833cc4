"""Complex dtypes (complex64, complex128) and the barebones unsigned dtypes
(uint16, uint32, uint64), compared with torch 2.x and NumPy: the dtype layer,
Python and NumPy interop, serialization, the ops that take complex, the
errors of those that do not, and autograd under torch's conjugate-Wirtinger
convention."""

import io

import numpy as np
import pytest

import strata as st

torch = pytest.importorskip("torch")

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64", "uint16",
          "uint32", "uint64", "complex64", "complex128"]
CDTYPES = ["complex64", "complex128"]


def sdt(name):
    return getattr(st, name)


def tdt(name):
    return getattr(torch, name)


def crand(shape, dtype="complex128", seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def assert_close(a, b, rtol=1e-6, atol=1e-6):
    a = a.numpy() if isinstance(a, st.Tensor) else (a.detach().resolve_conj().numpy() if isinstance(a, torch.Tensor) else a)
    b = b.numpy() if isinstance(b, st.Tensor) else (b.detach().resolve_conj().numpy() if isinstance(b, torch.Tensor) else b)
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol)


# ---- 1. dtype layer -------------------------------------------------------------------------------------------------

def test_dtype_objects_and_aliases():
    assert st.cfloat is st.complex64 and st.cdouble is st.complex128
    for name in ["complex64", "complex128", "uint16", "uint32", "uint64"]:
        d, t = sdt(name), tdt(name)
        assert repr(d) == "strata." + name
        assert d.itemsize == t.itemsize
        assert d.is_complex == t.is_complex
        assert d.is_floating_point == t.is_floating_point
        assert d.is_signed == t.is_signed
    assert st.float32.to_complex() is st.complex64 and st.float64.to_complex() is st.complex128
    assert st.complex64.to_real() is st.float32 and st.complex128.to_real() is st.float64


def test_promotion_lattice_matches_torch():
    for a in DTYPES:
        for b in DTYPES:
            try:
                want = str(torch.promote_types(tdt(a), tdt(b))).split(".")[1]
            except RuntimeError:
                with pytest.raises(RuntimeError, match="Promotion for uint16, uint32, uint64 types is not supported"):
                    st.promote_types(sdt(a), sdt(b))
                continue
            assert repr(st.promote_types(sdt(a), sdt(b))) == "strata." + want, (a, b)


@pytest.mark.parametrize("default", ["float32", "float64"])
def test_python_complex_scalars_follow_default_dtype(default):
    old = st.get_default_dtype()
    st.set_default_dtype(sdt(default))
    torch.set_default_dtype(tdt(default))
    try:
        assert repr(st.tensor([1 + 2j]).dtype) == repr(torch.tensor([1 + 2j]).dtype).replace("torch", "strata")
        assert repr(st.tensor(3j).dtype) == repr(torch.tensor(3j).dtype).replace("torch", "strata")
        cases = [("int64", 1j), ("bool", 1j), ("float32", 1j), ("float64", 1j), ("complex64", 1.5),
                 ("complex128", 1j), ("int32", 2.0)]
        for dt, scalar in cases:
            s = st.ones(2, dtype=sdt(dt)) * scalar
            t = torch.ones(2, dtype=tdt(dt)) * scalar
            assert str(s.dtype).split(".")[1] == str(t.dtype).split(".")[1], (dt, scalar)
            assert_close(s.to(st.complex128) if s.is_complex() else s.double(),
                         t.to(torch.complex128) if t.is_complex() else t.double())
        # torch gives complex32 here; strata has no complex32 and widens to complex64.
        assert (st.ones(2, dtype=st.float16) * 2j).dtype is st.complex64
        # A 0-d complex tensor does not lift a float tensor's width, but its category wins.
        s = st.ones(2, dtype=st.float64) + st.tensor(1j, dtype=st.complex64)
        t = torch.ones(2, dtype=torch.float64) + torch.tensor(1j, dtype=torch.complex64)
        assert str(s.dtype).split(".")[1] == str(t.dtype).split(".")[1]
    finally:
        st.set_default_dtype(old)
        torch.set_default_dtype(torch.float32)


def test_is_complex():
    z = st.tensor([1 + 1j])
    assert z.is_complex() and st.is_complex(z) and not z.is_floating_point()
    assert not st.ones(2).is_complex()
    assert not z.is_conj()


# ---- 2. Python and NumPy interop --------------------------------------------------------------------------------

def test_tensor_from_python_complex_and_item():
    s = st.tensor([[1 + 2j, 3], [0.5, -1j]])
    t = torch.tensor([[1 + 2j, 3], [0.5, -1j]])
    assert s.dtype is st.complex64 and s.shape == (2, 2)
    assert s.tolist() == t.tolist()
    v = st.tensor(2 - 3j, dtype=st.complex128).item()
    assert isinstance(v, complex) and v == 2 - 3j
    assert st.tensor([1, 2], dtype=st.complex128).tolist() == [1 + 0j, 2 + 0j]
    assert complex(st.tensor(1 + 1j)) == 1 + 1j


@pytest.mark.parametrize("name", ["complex64", "complex128", "uint16", "uint32", "uint64"])
def test_numpy_round_trip_shares_memory(name):
    a = (np.arange(6).reshape(2, 3) * (1 + 1j)).astype(name) if "complex" in name else np.arange(6, dtype=name).reshape(2, 3)
    s = st.from_numpy(a)
    assert s.dtype is sdt(name)
    np.testing.assert_array_equal(s.numpy(), a)
    a[0, 0] = 7
    assert s[0, 0].item() == 7
    back = s.numpy()
    back[1, 2] = 9
    assert a[1, 2] == 9
    np.testing.assert_array_equal(st.tensor(a).numpy(), a)  # a copy through the nested-data path
    np.testing.assert_array_equal(np.asarray(st.as_tensor(a)), a)


def test_uint64_item_keeps_large_values():
    a = np.array([2**63 + 5], dtype=np.uint64)
    assert st.from_numpy(a).item() == 2**63 + 5


def test_repr_matches_torch():
    data = [[1 + 2j, -3.5 - 0.25j], [0, 1e-3j]]
    for dt in ["complex64", "complex128"]:
        assert repr(st.tensor(data, dtype=sdt(dt))) == repr(torch.tensor(data, dtype=tdt(dt))).replace("torch.", "strata.")
    assert repr(st.tensor([1 + 1j, 2 - 2j])) == repr(torch.tensor([1 + 1j, 2 - 2j]))
    assert repr(st.tensor(3 - 4j)) == repr(torch.tensor(3 - 4j))
    for dt in ["uint16", "uint32", "uint64"]:
        assert repr(st.tensor([1, 2], dtype=sdt(dt))) == repr(torch.tensor([1, 2], dtype=tdt(dt))).replace("torch.", "strata.")


@pytest.mark.parametrize("name", ["complex64", "complex128", "uint16", "uint32", "uint64"])
def test_torch_checkpoint_round_trip(name, tmp_path):
    if "complex" in name:
        a = crand((3, 2), name)
    else:
        a = np.array([[1, 2], [3, 60000]], dtype=name)
    path = tmp_path / "t.pt"
    torch.save({"x": torch.from_numpy(a.copy())}, path)
    got = st.load(path)["x"]
    assert got.dtype is sdt(name)
    np.testing.assert_array_equal(got.numpy(), a)
    # and strata's file loads in torch
    path2 = tmp_path / "s.pt"
    st.save({"x": st.from_numpy(a.copy())}, path2)
    back = torch.load(path2)["x"]
    assert back.dtype == tdt(name)
    np.testing.assert_array_equal(back.numpy(), a)


def test_safetensors_complex64_and_unsigned(tmp_path):
    safetensors = pytest.importorskip("safetensors.numpy")
    arrays = {"c": crand((2, 3), "complex64"), "u16": np.arange(4, dtype=np.uint16),
              "u32": np.arange(3, dtype=np.uint32), "u64": np.arange(2, dtype=np.uint64), "f": np.ones(2, np.float32)}
    ref = tmp_path / "ref.safetensors"
    safetensors.save_file(arrays, str(ref))
    got = st.load(str(ref))
    for k, v in arrays.items():
        assert got[k].dtype is sdt(str(v.dtype))
        np.testing.assert_array_equal(got[k].numpy(), v)
    mine = tmp_path / "mine.safetensors"
    st.save({k: st.from_numpy(v) for k, v in arrays.items()}, str(mine))
    assert mine.read_bytes() == ref.read_bytes()  # the library's byte layout, dtype ranks included
    with pytest.raises(TypeError, match="complex128 cannot be stored in safetensors"):
        st.save({"z": st.ones(2, dtype=st.complex128)}, str(tmp_path / "bad.safetensors"))


# ---- 3. ops -------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dt", CDTYPES)
def test_creation(dt):
    for fn in ("zeros", "ones"):
        s = getattr(st, fn)(2, 3, dtype=sdt(dt))
        assert s.dtype is sdt(dt)
        np.testing.assert_array_equal(s.numpy(), getattr(np, fn)((2, 3), dtype=dt))
    f = st.full((2,), 1 - 2j, dtype=sdt(dt))
    np.testing.assert_array_equal(f.numpy(), np.full((2,), 1 - 2j, dtype=dt))
    assert st.full((2,), 1 - 2j).dtype is st.complex64
    assert st.empty(3, dtype=sdt(dt)).shape == (3,)
    with pytest.raises(RuntimeError, match="cannot be converted"):
        st.zeros(2).fill_(1j)


def test_randn_and_rand_complex():
    st.manual_seed(0)
    z = st.randn(20000, dtype=st.complex128)
    assert z.dtype is st.complex128
    re, im = z.real.numpy(), z.imag.numpy()
    # real and imaginary parts each N(0, 1/2): E|z|^2 = 1
    assert abs(re.var() - 0.5) < 0.03 and abs(im.var() - 0.5) < 0.03
    assert abs(np.mean(np.abs(z.numpy()) ** 2) - 1) < 0.05
    u = st.rand(20000, dtype=st.complex64)
    assert u.dtype is st.complex64
    assert 0 <= u.real.numpy().min() and u.real.numpy().max() < 1 and 0 <= u.imag.numpy().min()
    assert abs(u.imag.numpy().mean() - 0.5) < 0.02


def test_conversions():
    z = st.tensor([1.5 + 2j, -3 - 1j], dtype=st.complex128)
    assert z.to(st.complex64).dtype is st.complex64
    np.testing.assert_array_equal(z.to(st.complex64).numpy(), z.numpy().astype(np.complex64))
    np.testing.assert_array_equal(z.to(st.float32).numpy(), np.array([1.5, -3], np.float32))
    np.testing.assert_array_equal(z.to(st.int64).numpy(), np.array([1, -3]))
    np.testing.assert_array_equal(z.to(st.bool).numpy(), np.array([True, True]))
    np.testing.assert_array_equal(st.tensor([0j, 1j]).bool().numpy(), np.array([False, True]))
    x = st.tensor([1.0, 2.0])
    np.testing.assert_array_equal(x.to(st.complex64).numpy(), np.array([1, 2], np.complex64))
    u = st.tensor([1, 65535], dtype=st.uint16)
    np.testing.assert_array_equal(u.to(st.int64).numpy(), np.array([1, 65535]))
    np.testing.assert_array_equal(st.tensor([3, 4]).to(st.uint32).numpy(), np.array([3, 4], np.uint32))
    np.testing.assert_array_equal(u.to(st.complex64).numpy(), np.array([1, 65535], np.complex64))


BINARY = [("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("div", np.divide), ("pow", np.power)]


@pytest.mark.parametrize("dt", CDTYPES)
@pytest.mark.parametrize("name,ref", BINARY)
def test_binary_arithmetic(dt, name, ref):
    a, b = crand((3, 4), dt, 1), crand((4,), dt, 2)
    got = getattr(st, name)(st.from_numpy(a), st.from_numpy(b))
    assert got.dtype is sdt(dt)
    tol = 1e-5 if dt == "complex64" else 1e-12
    assert_close(got, ref(a, b), rtol=tol * 10, atol=tol)
    tg = getattr(torch, name)(torch.from_numpy(a), torch.from_numpy(b))
    assert_close(got, tg, rtol=tol * 10, atol=tol)


def test_operators_with_python_complex():
    a = crand((5,), "complex64", 3)
    s, t = st.from_numpy(a), torch.from_numpy(a)
    for fn in [lambda x: x + 1j, lambda x: 2j * x, lambda x: x - (1 + 1j), lambda x: (1 - 1j) / x, lambda x: -x,
               lambda x: x ** 2, lambda x: 2 ** x, lambda x: x * 0.5, lambda x: x + 3]:
        r, e = fn(s), fn(t)
        assert r.dtype is st.complex64 and e.dtype == torch.complex64
        assert_close(r, e, rtol=1e-5, atol=1e-5)
    r = st.ones(3, dtype=st.float64) * 1j
    assert r.dtype is st.complex128
    s2 = st.from_numpy(a.copy())
    s2 += 1j
    s2 *= 2
    assert_close(s2, (a + 1j) * 2, rtol=1e-6, atol=1e-6)
    with pytest.raises(RuntimeError, match="can't be cast"):
        x = st.ones(2)
        x += 1j
    with pytest.raises(RuntimeError):
        st.ones(2, dtype=st.uint16) + st.ones(2, dtype=st.int8)


UNARY = ["exp", "log", "sqrt", "sin", "cos", "tan", "tanh", "sinh", "cosh", "asin", "acos", "atan", "reciprocal",
         "rsqrt", "sigmoid", "exp2", "expm1", "log2", "log10", "log1p", "neg", "square"]


@pytest.mark.parametrize("dt", CDTYPES)
@pytest.mark.parametrize("name", UNARY)
def test_unary_matches_torch(dt, name):
    a = crand((17,), dt, 4) * 0.8
    a[0] = 1e-5 + 2e-5j  # near zero: expm1 and log1p keep their accuracy
    got = getattr(st, name)(st.from_numpy(a))
    want = getattr(torch, name)(torch.from_numpy(a))
    assert got.dtype is sdt(dt)
    tol = 2e-5 if dt == "complex64" else 1e-12
    assert_close(got, want, rtol=tol, atol=tol)


def test_abs_angle_sgn_real_imag_conj():
    a = crand((6,), "complex128", 5)
    a[0] = 0
    s, t = st.from_numpy(a), torch.from_numpy(a)
    assert st.abs(s).dtype is st.float64 and st.abs(s.to(st.complex64)).dtype is st.float32
    assert_close(st.abs(s), torch.abs(t))
    assert_close(s.abs(), np.abs(a))
    assert_close(st.angle(s), torch.angle(t))
    assert_close(st.sgn(s), torch.sgn(t))
    assert_close(st.conj(s), np.conj(a))
    assert_close(st.conj_physical(s), np.conj(a))
    assert_close(st.resolve_conj(s), a)
    x = st.tensor([-2.0, 0.0, 3.0])
    assert_close(st.angle(x), torch.angle(torch.tensor([-2.0, 0.0, 3.0])))
    assert st.conj(x) is x or st.conj(x)._is_same(x)
    assert x.real is x
    with pytest.raises(RuntimeError, match="imag is not implemented for tensors with non-complex dtypes"):
        x.imag


def test_real_imag_are_views():
    z = st.tensor([1 + 2j, 3 + 4j], dtype=st.complex128)
    re, im = z.real, z.imag
    assert re.dtype is st.float64 and im.dtype is st.float64
    assert re._storage_ptr() == z._storage_ptr()
    re[0] = 10
    im.mul_(2)
    assert z.tolist() == [10 + 4j, 3 + 8j]
    z.imag = st.tensor([0.0, -1.0], dtype=st.float64)
    assert z.tolist() == [10 + 0j, 3 - 1j]
    m = st.from_numpy(crand((3, 4))).t()  # a strided complex tensor
    np.testing.assert_array_equal(m.real.numpy(), m.numpy().real)
    np.testing.assert_array_equal(m.imag.numpy(), m.numpy().imag)


def test_view_as_real_and_complex():
    z = st.from_numpy(crand((2, 3), "complex64"))
    r = st.view_as_real(z)
    assert r.shape == (2, 3, 2) and r.dtype is st.float32
    np.testing.assert_array_equal(r.numpy(), torch.view_as_real(torch.from_numpy(z.numpy())).numpy())
    r[0, 0, 1] = 42
    assert z[0, 0].item().imag == 42
    back = st.view_as_complex(r)
    assert back.dtype is st.complex64 and back._storage_ptr() == z._storage_ptr()
    np.testing.assert_array_equal(back.numpy(), z.numpy())
    with pytest.raises(RuntimeError, match="last dimension of size 2"):
        st.view_as_complex(st.ones(2, 3))
    with pytest.raises(RuntimeError, match="stride 1"):
        st.view_as_complex(st.ones(2, 4)[:, ::2].t().contiguous().t())
    with pytest.raises(RuntimeError, match="only supported for float and double"):
        st.view_as_complex(st.ones(2, 2, dtype=st.int32))
    with pytest.raises(RuntimeError, match="only supported for complex tensors"):
        st.view_as_real(st.ones(2))


def test_complex_and_polar():
    re, im = np.array([1.0, -2.0, 0.5]), np.array([[0.5], [3.0]])
    s = st.complex(st.from_numpy(re), st.from_numpy(im))
    t = torch.complex(torch.from_numpy(re), torch.from_numpy(im))
    assert s.dtype is st.complex128 and s.shape == (2, 3)
    assert_close(s, t)
    assert st.complex(st.ones(2), st.zeros(2)).dtype is st.complex64
    r, th = np.array([1.0, 2.0]), np.array([0.3, -2.0])
    assert_close(st.polar(st.from_numpy(r), st.from_numpy(th)), torch.polar(torch.from_numpy(r), torch.from_numpy(th)))
    with pytest.raises(RuntimeError, match="Expected both inputs to be Float or Double"):
        st.complex(st.ones(2), st.ones(2, dtype=st.float64))
    with pytest.raises(RuntimeError, match="Expected both inputs to be Float or Double"):
        st.complex(st.ones(2, dtype=st.int64), st.ones(2, dtype=st.int64))


@pytest.mark.parametrize("dt", CDTYPES)
def test_reductions(dt):
    a = crand((3, 5), dt, 6)
    s, t = st.from_numpy(a), torch.from_numpy(a)
    tol = 1e-5 if dt == "complex64" else 1e-12
    for fn in [lambda x: x.sum(), lambda x: x.sum(0), lambda x: x.mean(), lambda x: x.mean(1, keepdim=True),
               lambda x: x.prod(1), lambda x: x.prod()]:
        r, e = fn(s), fn(t)
        assert str(r.dtype).split(".")[1] == str(e.dtype).split(".")[1]
        assert_close(r, e, rtol=tol * 10, atol=tol)
    u = st.tensor([1, 2, 3], dtype=st.uint32)
    assert u.sum().item() == 6 and u.sum().dtype is st.int64


def test_comparisons_and_closeness():
    a = crand((4,), "complex64", 7)
    b = a.copy()
    b[1] += 1j
    s, sb = st.from_numpy(a), st.from_numpy(b)
    np.testing.assert_array_equal((s == sb).numpy(), a == b)
    np.testing.assert_array_equal((s != sb).numpy(), a != b)
    np.testing.assert_array_equal(st.isclose(s, sb).numpy(), np.isclose(a, b))
    assert st.allclose(s, s + 1e-9) and not st.allclose(s, sb)
    np.testing.assert_array_equal(st.isnan(st.tensor([complex("nan+1j"), 1j])).numpy(), [True, False])
    np.testing.assert_array_equal(st.isfinite(st.tensor([complex("inf+1j"), 1j])).numpy(), [False, True])
    u = st.tensor([1, 5], dtype=st.uint64)
    np.testing.assert_array_equal((u == st.tensor([1, 6], dtype=st.uint64)).numpy(), [True, False])


def test_shape_ops_and_indexing():
    a = crand((3, 4), "complex64", 8)
    s = st.from_numpy(a)
    np.testing.assert_array_equal(st.cat([s, s], 0).numpy(), np.concatenate([a, a], 0))
    np.testing.assert_array_equal(st.stack([s, s], 1).numpy(), np.stack([a, a], 1))
    np.testing.assert_array_equal(s[1:, ::2].numpy(), a[1:, ::2])
    np.testing.assert_array_equal(s[st.tensor([2, 0])].numpy(), a[[2, 0]])
    np.testing.assert_array_equal(s[s.real > 0].numpy(), a[a.real > 0])
    np.testing.assert_array_equal(s.reshape(2, 6).numpy(), a.reshape(2, 6))
    np.testing.assert_array_equal(s.t().contiguous().numpy(), a.T)
    np.testing.assert_array_equal(st.where(s.real > 0, s, st.zeros_like(s)).numpy(), np.where(a.real > 0, a, 0))
    s2 = s.clone()
    s2[0] = 1j
    assert s2[0, 0].item() == 1j
    u = st.tensor([1, 2, 3], dtype=st.uint16)
    np.testing.assert_array_equal(st.cat([u, u]).numpy(), np.array([1, 2, 3, 1, 2, 3], np.uint16))
    np.testing.assert_array_equal(u[st.tensor([2, 0])].numpy(), np.array([3, 1], np.uint16))


@pytest.mark.parametrize("dt", CDTYPES)
def test_matmul_family(dt):
    tol = 1e-4 if dt == "complex64" else 1e-12
    a, b = crand((3, 4), dt, 9), crand((4, 5), dt, 10)
    s, sb = st.from_numpy(a), st.from_numpy(b)
    assert_close(s @ sb, a @ b, rtol=tol, atol=tol)
    assert_close(st.mm(s, sb), a @ b, rtol=tol, atol=tol)
    assert_close(s.t().conj() @ s, a.T.conj() @ a, rtol=tol, atol=tol)  # strided operands
    ba, bb = crand((2, 3, 4), dt, 11), crand((2, 4, 2), dt, 12)
    assert_close(st.bmm(st.from_numpy(ba), st.from_numpy(bb)), ba @ bb, rtol=tol, atol=tol)
    assert_close(st.matmul(st.from_numpy(ba), sb), ba @ b, rtol=tol, atol=tol)
    v, w = crand((4,), dt, 13), crand((4,), dt, 14)
    assert_close(st.dot(st.from_numpy(v), st.from_numpy(w)), np.dot(v, w), rtol=tol, atol=tol)
    assert_close(st.vdot(st.from_numpy(v), st.from_numpy(w)), np.vdot(v, w), rtol=tol, atol=tol)
    assert_close(s @ st.from_numpy(v), a @ v, rtol=tol, atol=tol)
    assert_close(st.addmm(st.from_numpy(crand((3, 5), dt, 15)), s, sb, beta=0.5, alpha=2.0),
                 0.5 * crand((3, 5), dt, 15) + 2.0 * (a @ b), rtol=tol, atol=tol)


def _err(fn, match):
    with pytest.raises((RuntimeError, NotImplementedError), match=match):
        fn()


def test_unsupported_ops_raise_naming_op_and_dtype():
    z = st.tensor([1 + 1j, 2j])
    _err(lambda: z < z, "lt.*ComplexFloat")
    _err(lambda: z >= 1, "ge.*ComplexFloat")
    _err(lambda: st.maximum(z, z), "maximum.*ComplexFloat")
    _err(lambda: st.floor(z), "floor.*ComplexFloat")
    _err(lambda: st.sign(z), "sign.*ComplexFloat")
    _err(lambda: st.atan2(z, z), "atan2.*ComplexFloat")
    _err(lambda: z % z, "remainder.*ComplexFloat")
    _err(lambda: st.erf(z), "erf.*ComplexFloat")
    _err(lambda: z.clamp(0, 1), "clamp.*ComplexFloat")
    _err(lambda: st.relu(z), "ComplexFloat|complex")
    _err(lambda: z.max(), "ComplexFloat|complex")
    u = st.tensor([1, 2], dtype=st.uint32)
    _err(lambda: u + u, "add.*UInt32")
    _err(lambda: -u, "neg.*UInt32")
    _err(lambda: u < u, "lt.*UInt32")
    _err(lambda: st.mm(st.ones(2, 2, dtype=st.uint16), st.ones(2, 2, dtype=st.uint16)), "mm.*UInt16")
    # on the meta device too
    _err(lambda: z.to("meta") < z.to("meta"), "lt.*ComplexFloat")


# ---- 4. autograd --------------------------------------------------------------------------------------------------

def _leaf(a, lib):
    return (st.from_numpy(a.copy()) if lib is st else torch.from_numpy(a.copy())).requires_grad_()


LOSSES = {
    "abs(z*w).sum": lambda L, z, w: (z * w).abs().sum(),
    "real(z/w).sum": lambda L, z, w: (z / w).real.sum(),
    "imag(exp(z)*w).sum": lambda L, z, w: (L.exp(z) * w).imag.sum(),
    "abs(log(z)+sqrt(w))^2": lambda L, z, w: ((L.log(z) + L.sqrt(w)).abs() ** 2).sum(),
    "angle(sin(z)*cos(w))": lambda L, z, w: L.angle(L.sin(z) * L.cos(w)).sum(),
    "abs(tanh(z)-conj(w))": lambda L, z, w: (L.tanh(z) - w.conj()).abs().sum(),
    "view_as_real(z@w)": lambda L, z, w: (L.view_as_real(z.reshape(2, 2) @ w.reshape(2, 2)) ** 2).sum(),
    "real(reciprocal(z)*w.mean)": lambda L, z, w: (L.reciprocal(z) * w.mean()).real.sum(),
    "abs(complex(z.real,w.imag))": lambda L, z, w: L.complex(z.real, w.imag).abs().sum(),
    "abs(pow(z,2)*w)": lambda L, z, w: (z ** 2 * w).abs().sum(),
}


@pytest.mark.parametrize("name", list(LOSSES))
def test_gradients_match_torch(name):
    a, b = crand((4,), "complex128", 20), crand((4,), "complex128", 21)
    fn = LOSSES[name]
    zs, ws = _leaf(a, st), _leaf(b, st)
    zt, wt = _leaf(a, torch), _leaf(b, torch)
    fn(st, zs, ws).backward()
    fn(torch, zt, wt).backward()
    assert zs.grad.dtype is st.complex128
    assert_close(zs.grad, zt.grad, rtol=1e-9, atol=1e-10)
    assert_close(ws.grad, wt.grad, rtol=1e-9, atol=1e-10)


def test_gradient_to_real_input_through_complex_ops():
    x = np.array([0.3, -1.2, 2.0])
    xs = st.from_numpy(x.copy()).requires_grad_()
    xt = torch.from_numpy(x.copy()).requires_grad_()
    ((xs * (1 + 2j)).exp().abs().sum()).backward()
    ((xt * (1 + 2j)).exp().abs().sum()).backward()
    assert xs.grad.dtype is st.float64
    assert_close(xs.grad, xt.grad, rtol=1e-9, atol=1e-10)


GRADCHECK = {
    "mul": lambda z, w: z * w,
    "div": lambda z, w: z / w,
    "exp_log": lambda z, w: st.log(st.exp(z) + w),
    "sqrt": lambda z, w: st.sqrt(z) * w,
    "trig": lambda z, w: st.sin(z) + st.cos(w) + st.tanh(z * w),
    "abs": lambda z, w: st.abs(z * w),
    "real_imag": lambda z, w: z.real * w.imag,
    "conj": lambda z, w: z.conj() * w,
    "matmul": lambda z, w: z.reshape(2, 2) @ w.reshape(2, 2),
    "sum_mean": lambda z, w: (z * w).sum() + z.mean(),
    "view_as_real": lambda z, w: st.view_as_real(z * w),
    "reciprocal_pow": lambda z, w: st.reciprocal(z) + z ** 2,
}


@pytest.mark.parametrize("name", list(GRADCHECK))
def test_gradcheck_complex128(name):
    z = st.from_numpy(crand((4,), "complex128", 30) + 2).requires_grad_()
    w = st.from_numpy(crand((4,), "complex128", 31) + 2).requires_grad_()
    assert st.autograd.gradcheck(GRADCHECK[name], (z, w), eps=1e-6, atol=1e-6)


def test_gradcheck_detects_a_wrong_complex_gradient():
    # conj_physical's derivative is conj; checking `z * w` against a function
    # whose backward forgets a conjugate must fail: use a custom Function.
    class BadMul(st.autograd.Function):
        @staticmethod
        def forward(ctx, z, w):
            ctx.save_for_backward(z, w)
            return z * w

        @staticmethod
        def backward(ctx, g):
            z, w = ctx.saved_tensors
            return g * w, g * z  # missing conj

    z = st.from_numpy(crand((3,), "complex128", 40)).requires_grad_()
    w = st.from_numpy(crand((3,), "complex128", 41)).requires_grad_()
    assert not st.autograd.gradcheck(BadMul.apply, (z, w), raise_exception=False)
    assert st.autograd.gradcheck(lambda a, b: a * b, (z, w))


def test_requires_grad_on_complex_and_not_on_unsigned():
    assert st.ones(2, dtype=st.complex64).requires_grad_().requires_grad
    with pytest.raises(RuntimeError, match="floating point and complex"):
        st.ones(2, dtype=st.uint32).requires_grad_()


def test_complex_to_real_cast_drops_imaginary_part():
    z = st.tensor([1 + 5j])
    with pytest.warns(UserWarning, match="discards the imaginary part"):
        assert z.float().item() == 1.0
    assert z.real.item() == 1.0


def test_save_and_pickle_keep_complex(tmp_path):
    z = st.from_numpy(crand((2, 2), "complex64"))
    buf = io.BytesIO()
    st.save(z, buf)
    buf.seek(0)
    got = st.load(buf)
    assert got.dtype is st.complex64
    np.testing.assert_array_equal(got.numpy(), z.numpy())
    import pickle
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(z)).numpy(), z.numpy())


def test_var_std_and_adjoints():
    a = crand((3, 4), "complex128", 50)
    s, t = st.from_numpy(a), torch.from_numpy(a)
    for fn in [lambda x: x.var(), lambda x: x.std(1), lambda x: x.var(0, correction=0, keepdim=True)]:
        r, e = fn(s), fn(t)
        assert str(r.dtype).split(".")[1] == str(e.dtype).split(".")[1]
        assert_close(r, e, rtol=1e-10, atol=1e-12)
    vm, vt = st.var_mean(s, 1), torch.var_mean(t, 1)
    assert_close(vm[0], vt[0]) and assert_close(vm[1], vt[1])
    assert_close(s.H, t.H)
    assert_close(s.mH, t.mH)
    assert_close(s.adjoint(), t.adjoint())
    x = st.ones(2, 3)
    assert_close(x.H, x.t())
    with pytest.raises(NotImplementedError, match="nansum does not support complex"):
        s.nansum()
    z = st.from_numpy(a.copy()).requires_grad_()
    zt = torch.from_numpy(a.copy()).requires_grad_()
    z.var().backward()
    zt.var().backward()
    assert_close(z.grad, zt.grad, rtol=1e-9, atol=1e-10)


def test_scans_logical_reductions_and_product_gradients():
    a = crand((3, 4), "complex64", 60)
    a[1, 2] = 0
    s, t = st.from_numpy(a), torch.from_numpy(a)
    for fn in [lambda x: x.cumsum(1), lambda x: x.cumsum(0), lambda x: x.cumprod(1), lambda x: x.all(),
               lambda x: x.any(1), lambda x: st.count_nonzero(x) if isinstance(x, st.Tensor) else torch.count_nonzero(x)]:
        r, e = fn(s), fn(t)
        assert str(r.dtype).split(".")[1] == str(e.dtype).split(".")[1]
        assert_close(r, e, rtol=1e-5, atol=1e-5)
    b = crand((3, 4), "complex128", 61)
    for fn in [lambda x: (x.prod(1) * x.cumprod(0).sum()).abs().sum(), lambda x: x.prod().real]:
        zs, zt = _leaf(b, st), _leaf(b, torch)
        fn(zs).backward()
        fn(zt).backward()
        assert_close(zs.grad, zt.grad, rtol=1e-9, atol=1e-10)


def test_complex_alpha():
    a, b = crand((3,), "complex64", 70), crand((3,), "complex64", 71)
    for fn in ("add", "sub"):
        r = getattr(st, fn)(st.from_numpy(a), st.from_numpy(b), alpha=2 - 1j)
        e = getattr(torch, fn)(torch.from_numpy(a), torch.from_numpy(b), alpha=2 - 1j)
        assert r.dtype is st.complex64
        assert_close(r, e, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("n", [5, 40])
@pytest.mark.parametrize("dt", CDTYPES)
def test_complex_random_streams_match_torch(dt, n):
    # Same seed, same draws: the parts are drawn in view_as_real order, as torch does.
    for fn, tol in (("randn", 1e-6 if dt == "complex64" else 1e-14), ("rand", 1e-7)):
        st.manual_seed(7)
        torch.manual_seed(7)
        a = getattr(st, fn)(n, dtype=sdt(dt)).numpy()
        b = getattr(torch, fn)(n, dtype=tdt(dt)).numpy()
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def test_inplace_abs_of_complex_raises_like_torch():
    z = st.tensor([3 + 4j])
    with pytest.raises(RuntimeError, match="In-place abs is not supported for complex tensors"):
        z.abs_()
    assert z.item() == 3 + 4j
    out = st.empty(1)
    st.abs(z, out=out)
    assert out.item() == 5.0
    with pytest.raises(RuntimeError, match="In-place abs is not supported for complex tensors"):
        z.absolute_()
    # out= the complex input itself is not in place for torch: |z| + 0j is written (found by the
    # differential test's out= aliasing variant).
    for lib in (st, torch):
        w = lib.tensor([3 + 4j, -1j, 0j])
        assert lib.abs(w, out=w) is w
        assert w.tolist() == [5 + 0j, 1 + 0j, 0j]


def test_sgn_in_place_matches_torch():
    # sgn_ went missing when sgn became its own op (it was an alias of sign).
    for data in ([-1.5, 0.0, 2.0], [3 + 4j, 0j, -1j]):
        s, t = st.tensor(data), torch.tensor(data)
        out = s.sgn_()
        assert out is s
        np.testing.assert_allclose(s.numpy(), t.sgn_().numpy(), rtol=1e-6)
