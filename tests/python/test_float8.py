"""The float8 dtypes (issue 12): names, limits, conversions bit for bit against torch, the ops torch's CPU build
allows and the ones it refuses, checkpoints (torch's zip format and safetensors)."""

import io
import math
import pickle

import numpy as np
import pytest

import strata

torch = pytest.importorskip("torch")

NAMES = ["float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu"]


def sd(name):
    return getattr(strata, name)


def td(name):
    return getattr(torch, name)


def s_bits(t):
    return t.contiguous().view(strata.uint8).tolist()


def t_bits(t):
    return t.contiguous().view(torch.uint8).tolist()


def f32_bits(values):
    """float32 values as a list of uint32 bit patterns (NaN payloads included)."""
    return np.asarray(values, dtype=np.float32).view(np.uint32).tolist()


def special_floats():
    vals = [0.0, -0.0, math.inf, -math.inf, math.nan, -math.nan, 1e-45, -1e-45, 1e-39, 3e-39, 1.17549435e-38,
            1e-10, 1e-5, 2.0 ** -6, 2.0 ** -7, 2.0 ** -9, 2.0 ** -10, 2.0 ** -16, 2.0 ** -17, 2.0 ** -127, 0.1, 0.5,
            1.0, 1.0625, 1.125, 1.1875, 2.5, 3.3, 100.0, 232.0, 240.0, 247.0, 248.0, 256.0, 300.0, 448.0, 449.0,
            464.0, 465.0, 480.0, 500.0, 1e4, 57344.0, 61439.0, 61440.0, 65504.0, 1e6, 3.4e38, 2.0 ** 127, 2.0 ** 128 - 2.0 ** 104]
    vals += [-v for v in vals]
    rng = np.random.default_rng(0)
    rnd = rng.integers(0, 2 ** 32, size=20000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    # Values near the float8 ranges, where rounding decides: exponents -20..17 with random mantissas.
    near = (rng.uniform(1.0, 2.0, 20000) * 2.0 ** rng.integers(-20, 18, 20000)).astype(np.float32)
    near *= np.where(rng.random(20000) < 0.5, -1, 1).astype(np.float32)
    return np.concatenate([np.asarray(vals, dtype=np.float32), rnd, near])


# ---- dtype objects ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_dtype_attributes(name):
    d, t = sd(name), td(name)
    assert repr(d) == f"strata.{name}"
    assert d.itemsize == t.itemsize == 1
    assert d.is_floating_point == t.is_floating_point
    assert d.is_signed == t.is_signed
    assert not d.is_complex
    fs, ft = strata.finfo(d), torch.finfo(t)
    for attr in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution"):
        assert getattr(fs, attr) == getattr(ft, attr), attr
    assert repr(fs) == repr(ft)
    assert strata.empty(3, dtype=d).element_size() == 1
    assert pickle.loads(pickle.dumps(d)) is d


def test_promotion_refused_as_torch():
    for name in NAMES:
        assert strata.promote_types(sd(name), sd(name)) is sd(name)
        for other in ("float32", "int64", "bool", "float8_e5m2" if name != "float8_e5m2" else "float8_e4m3fn"):
            with pytest.raises(RuntimeError) as te:
                torch.promote_types(td(name), getattr(torch, other))
            with pytest.raises(RuntimeError) as se:
                strata.promote_types(sd(name), getattr(strata, other))
            assert str(se.value) == str(te.value)
    a = strata.ones(3, dtype=strata.float8_e4m3fn)
    with pytest.raises(RuntimeError, match="Promotion for Float8 Types is not supported"):
        a.float() + a
    with pytest.raises(RuntimeError, match="Promotion for Float8 Types is not supported"):
        strata.cat([a, a.float()])
    assert strata.result_type(a, 1.0) is strata.float8_e4m3fn


# ---- conversions -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_all_bit_patterns_to_float32(name):
    s = strata.arange(256).to(strata.uint8).view(sd(name)).float()
    t = torch.arange(256).to(torch.uint8).view(td(name)).float()
    assert s.view(strata.int32).tolist() == t.view(torch.int32).tolist()
    # and to float64 / float16 / bfloat16 (through float32, as torch)
    for other in ("float64", "float16", "bfloat16"):
        so = strata.arange(256).to(strata.uint8).view(sd(name)).to(getattr(strata, other))
        to = torch.arange(256).to(torch.uint8).view(td(name)).to(getattr(torch, other))
        sv = so.view(strata.int64 if other == "float64" else strata.int16).tolist()
        tv = to.view(torch.int64 if other == "float64" else torch.int16).tolist()
        assert sv == tv, other


@pytest.mark.parametrize("name", NAMES)
def test_float32_to_float8_bit_exact(name):
    x = special_floats()
    s = strata.tensor(f32_bits(x), dtype=strata.int64).to(strata.int32)  # exact bit patterns, NaN payloads too
    sx = s.view(strata.float32)
    tx = torch.from_numpy(x.copy())
    assert s_bits(sx.to(sd(name))) == t_bits(tx.to(td(name)))
    # the scalar paths: one element, strata.tensor(..., dtype=), full
    for v in [0.0, -0.0, math.inf, -math.inf, math.nan, 300.0, 470.0, 61440.0, 1e-10, 3.3, -2.5]:
        assert s_bits(strata.tensor([v], dtype=sd(name))) == t_bits(torch.tensor([v], dtype=td(name))), v
        # full/fill_ check the scalar's range as torch does (inf only for e5m2; e8m0fnu is unsigned, 0 overflows)
        try:
            expected = t_bits(torch.full((2,), v, dtype=td(name)))
        except RuntimeError as e:
            assert "without overflow" in str(e)
            with pytest.raises(RuntimeError, match="cannot be converted to type .* without overflow"):
                strata.full((2,), v, dtype=sd(name))
            with pytest.raises(RuntimeError, match="without overflow"):
                strata.zeros(2, dtype=sd(name)).fill_(v)
        else:
            assert s_bits(strata.full((2,), v, dtype=sd(name))) == expected, v
    assert s_bits(strata.zeros(3, dtype=sd(name))) == t_bits(torch.zeros(3, dtype=td(name)))


@pytest.mark.parametrize("name", NAMES)
def test_other_dtypes_to_float8(name):
    x = special_floats()[:3000]
    for src, bits in (("float64", "int64"), ("float16", "int16"), ("bfloat16", "int16")):
        # the same source bits on both sides (NaN signs of float32 -> bfloat16 are not what is tested here)
        tx = torch.from_numpy(x.copy()).to(getattr(torch, src))
        sx = strata.tensor(tx.view(getattr(torch, bits)).tolist(), dtype=getattr(strata, bits)).view(
            getattr(strata, src))
        assert s_bits(sx.to(sd(name))) == t_bits(tx.to(td(name))), src
    ints = [0, 1, -1, 3, 7, 17, 255, 448, 449, 1000, 57344, 70000, -123456, 2 ** 40]
    for src in ("int64", "int32", "int16", "int8", "uint8", "bool"):
        vals = [bool(v) for v in ints] if src == "bool" else ints
        tx = torch.tensor(vals).to(getattr(torch, src))
        sx = strata.tensor(vals).to(getattr(strata, src))
        assert s_bits(sx.to(sd(name))) == t_bits(tx.to(td(name))), src
    c = [1.5 + 2j, -3.25 - 1j, complex(math.inf, 1)]
    assert s_bits(strata.tensor(c).to(sd(name))) == t_bits(torch.tensor(c).to(td(name)))


@pytest.mark.parametrize("name", NAMES)
def test_float8_to_other_dtypes(name):
    for dst in ("int64", "int32", "int16", "int8", "uint8", "bool", "complex64", "complex128", "float16"):
        s = strata.arange(256).to(strata.uint8).view(sd(name))
        t = torch.arange(256).to(torch.uint8).view(td(name))
        # float -> integer of NaN/inf/out-of-range is undefined in C++; compare the finite in-range values.
        keep = t.float().isfinite() & (t.float().abs() < 100) if dst not in ("bool", "complex64", "complex128",
                                                                              "float16") else torch.ones(256, dtype=torch.bool)
        if dst == "uint8":
            keep &= t.float() >= 0
        idx = torch.nonzero(keep).flatten().tolist()
        sr = s.to(getattr(strata, dst)).tolist()
        tr = t.to(getattr(torch, dst)).tolist()
        for i in idx:
            a, b = sr[i], tr[i]
            if isinstance(b, complex):
                assert (a.real == b.real or (math.isnan(a.real) and math.isnan(b.real))) and a.imag == b.imag, i
            elif isinstance(b, float) and math.isnan(b):
                assert math.isnan(a), i
            else:
                assert a == b, (i, a, b)
    for other in NAMES:
        s = strata.arange(256).to(strata.uint8).view(sd(name)).to(sd(other))
        t = torch.arange(256).to(torch.uint8).view(td(name)).to(td(other))
        assert s_bits(s) == t_bits(t), other


# ---- creation, shape ops, the ops torch allows -----------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_creation_and_shape_ops(name):
    d, D = sd(name), td(name)
    vals = [1.0, 2.5, -3.0, 0.0, 448.0, 0.1]
    s, t = strata.tensor(vals, dtype=d), torch.tensor(vals, dtype=D)
    assert s.dtype is d and s_bits(s) == t_bits(t)
    assert s.tolist() == t.tolist() or all(
        (a == b) or (math.isnan(a) and math.isnan(b)) for a, b in zip(s.tolist(), t.tolist()))
    assert s[1].item() == t[1].item()
    for f in ("zeros", "ones"):
        assert s_bits(getattr(strata, f)(2, 3, dtype=d)) == t_bits(getattr(torch, f)(2, 3, dtype=D))
    assert strata.empty(2, 3, dtype=d).shape == (2, 3)
    assert s_bits(strata.zeros_like(s)) == t_bits(torch.zeros_like(t))
    assert s_bits(s.new_full((2,), 3.3)) == t_bits(t.new_full((2,), 3.3))
    s2, t2 = s.reshape(2, 3), t.reshape(2, 3)
    checks = [lambda x: x.clone(), lambda x: x.t().contiguous(), lambda x: x[:, 1:], lambda x: x.flatten(),
              lambda x: x.unsqueeze(0), lambda x: x.expand(2, 2, 3).clone(), lambda x: x.reshape(-1)[[0, 2, 4]]]
    for fn in checks:
        assert s_bits(fn(s2)) == t_bits(fn(t2))
    mask = [True, False, True, True, False, True]
    assert s_bits(s[strata.tensor(mask)]) == t_bits(t[torch.tensor(mask)])
    assert s_bits(strata.cat([s, s])) == t_bits(torch.cat([t, t]))
    assert s_bits(strata.stack([s, s])) == t_bits(torch.stack([t, t]))
    assert s_bits(s.index_select(0, strata.tensor([4, 0]))) == t_bits(t.index_select(0, torch.tensor([4, 0])))
    assert s.view(strata.uint8).tolist() == t.view(torch.uint8).tolist()
    assert s.view(strata.int8).tolist() == t.view(torch.int8).tolist()
    assert s_bits(s.view(strata.uint8).view(d)) == t_bits(t)
    # in-place writes: copy_, fill_, zero_, setitem
    s3, t3 = s.clone(), t.clone()
    s3.copy_(strata.tensor([0.3, -7.0, 1e9, -1e-9, 12.0, 5.5]))
    t3.copy_(torch.tensor([0.3, -7.0, 1e9, -1e-9, 12.0, 5.5]))
    assert s_bits(s3) == t_bits(t3)
    s3[0] = 2.0
    t3[0] = 2.0
    s3[1] = s3[4]
    t3[1] = t3[4]
    assert s_bits(s3) == t_bits(t3)
    assert s_bits(s3.fill_(0.75)) == t_bits(t3.fill_(0.75))
    assert s_bits(s3.zero_()) == t_bits(t3.zero_())
    # the pointwise ops torch's CPU build has for float8
    assert (s == s).tolist() == (t == t).tolist()
    assert (s != strata.tensor(vals[::-1], dtype=d)).tolist() == (t != torch.tensor(vals[::-1], dtype=D)).tolist()
    assert s.eq(1).tolist() == t.eq(1).tolist()
    assert s.isnan().tolist() == t.isnan().tolist()
    assert s.bool().tolist() == t.bool().tolist()
    assert s.any().item() == t.any().item() and s.all().item() == t.all().item()
    assert s_bits(s * s) == t_bits(t * t)
    assert s_bits(strata.where(s.float() > 0, s, s * s)) == t_bits(torch.where(t.float() > 0, t, t * t))
    if name != "float8_e8m0fnu":
        assert s_bits(s.abs()) == t_bits(t.abs())


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e8m0fnu"])
def test_refused_ops_name_op_and_dtype(name):
    d, D = sd(name), td(name)
    s, t = strata.ones(3, dtype=d), torch.ones(3, dtype=D)
    for fn in (lambda x: x + x, lambda x: -x, lambda x: x.sum(), lambda x: x * 2, lambda x: x.exp(),
               lambda x: x.max(), lambda x: x.sort(), lambda x: x < x):
        with pytest.raises(NotImplementedError):
            fn(t)
        with pytest.raises(NotImplementedError) as e:
            fn(s)
        assert name.replace("float8", "Float8") in str(e.value)
    with pytest.raises(TypeError, match="Got unsupported ScalarType Float8"):
        s.numpy()


def test_repr_and_type():
    for name in NAMES:
        vals = [1.0, 2.5, -3.0] if name != "float8_e8m0fnu" else [1.0, 2.0, 0.25]
        s, t = strata.tensor(vals, dtype=sd(name)), torch.tensor(vals, dtype=td(name))
        assert repr(s) == repr(t).replace("torch.", "strata.")
        assert s.type() == t.type().replace("torch.", "strata.")


# ---- checkpoints -----------------------------------------------------------------------------------------------------
def test_torch_checkpoint_both_ways():
    raw = list(range(256))
    ts = {n: torch.tensor(raw, dtype=torch.uint8).view(td(n))[3:40] for n in NAMES}
    buf = io.BytesIO()
    torch.save(ts, buf)
    loaded = strata.load(io.BytesIO(buf.getvalue()))
    for n in NAMES:
        assert loaded[n].dtype is sd(n) and s_bits(loaded[n]) == t_bits(ts[n])
    out = io.BytesIO()
    strata.save(loaded, out)
    back = torch.load(io.BytesIO(out.getvalue()), weights_only=True)
    for n in NAMES:
        assert back[n].dtype == td(n) and t_bits(back[n]) == t_bits(ts[n])


def test_safetensors_codes():
    safetensors_torch = pytest.importorskip("safetensors.torch")
    names = {"float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2", "float8_e8m0fnu": "F8_E8M0"}
    ts = {n: torch.arange(256).to(torch.uint8).view(td(n)).reshape(16, 16) for n in names}
    ts["f32"] = torch.arange(3.0)
    data = safetensors_torch.save(ts)
    loaded = strata.load(io.BytesIO(data))
    for n in names:
        assert loaded[n].dtype is sd(n) and s_bits(loaded[n]) == t_bits(ts[n])
    buf = io.BytesIO()
    strata.save({n: loaded[n] for n in ts}, buf, format="safetensors")
    assert buf.getvalue() == data  # byte-identical to the safetensors library's file
    with pytest.raises(TypeError, match="float8_e4m3fnuz"):
        strata.save({"x": strata.ones(2, dtype=strata.float8_e4m3fnuz)}, io.BytesIO(), format="safetensors")
