"""strata.save / strata.load: safetensors checkpoints (round trips, interop with safetensors, hostile files)."""

import io
import json
import math
import os
import pathlib
import struct
import subprocess
import sys
import textwrap
from collections import OrderedDict

import numpy as np
import pytest

import strata
from strata import serialization

ALL_DTYPES = [
    strata.float32,
    strata.float16,
    strata.bfloat16,
    strata.float64,
    strata.int64,
    strata.int32,
    strata.int16,
    strata.int8,
    strata.uint8,
    strata.bool,
]
_NP_BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def bits(t):
    """The tensor's values as raw bytes (bit-exact comparison, NaN payloads and bfloat16 included)."""
    flat = t.contiguous().reshape(-1)
    if flat.numel() == 0:
        return b""
    return flat.view(strata.uint8).numpy().tobytes()


def assert_same(a, b):
    assert isinstance(b, strata.Tensor)
    assert a.dtype == b.dtype
    assert tuple(a.shape) == tuple(b.shape)
    assert bits(a) == bits(b)


def random_bits(dtype, shape, seed=0):
    """A tensor of the given dtype whose bytes are random (every bit pattern: NaNs, infs, subnormals)."""
    rng = np.random.default_rng(seed)
    n = math.prod(shape)
    if dtype == strata.bool:
        return strata.from_numpy(rng.integers(0, 2, n).astype(np.bool_)).reshape(shape)
    itemsize = strata.empty(0, dtype=dtype).element_size()
    raw = rng.integers(0, 256, n * itemsize, dtype=np.uint8)
    t = strata.from_numpy(raw)
    if n == 0:
        return strata.empty(shape, dtype=dtype)
    return t.view(dtype).reshape(shape)


def roundtrip(obj, **kw):
    # strata.save writes torch's zip format by default; these tests are about the safetensors format.
    kw.setdefault("format", "safetensors")
    buf = io.BytesIO()
    strata.save(obj, buf, **kw)
    buf.seek(0)
    return strata.load(buf), buf.getvalue()


def st_file(header, data=b"", raw_header=None, length=None):
    """A hand-made safetensors file: header dict (or raw bytes), data buffer, optionally a lying length field."""
    h = raw_header if raw_header is not None else json.dumps(header, separators=(",", ":")).encode()
    n = len(h) if length is None else length
    return struct.pack("<Q", n) + h + data


def load_bytes(data):
    return strata.load(io.BytesIO(data))


# ----------------------------------------------------------------------------------------------------------------------
# Round trips
# ----------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(), (0,), (3, 0, 2), (1,), (7,), (2, 3, 5)], ids=str)
def test_roundtrip_every_dtype_bit_exact(dtype, shape):
    t = random_bits(dtype, shape, seed=len(shape))
    out, _ = roundtrip({"t": t})
    assert list(out) == ["t"]
    assert_same(t, out["t"])


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_bare_tensor_roundtrip(dtype):
    t = random_bits(dtype, (4, 3), seed=3)
    out, _ = roundtrip(t)
    assert_same(t, out)


def test_bfloat16_and_half_special_values_bit_exact():
    # Raw bit patterns: +-0, +-inf, quiet/signalling NaNs with payloads, smallest subnormal, largest finite.
    pats = np.array([0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC1, 0x7F81, 0xFFFF, 0x0001, 0x7F7F], dtype=np.uint16)
    for dtype in (strata.bfloat16, strata.float16):
        t = strata.from_numpy(pats.view(np.int16).copy()).view(dtype)
        out, _ = roundtrip({"x": t})
        assert out["x"].view(strata.int16).numpy().view(np.uint16).tolist() == pats.tolist()


def test_non_contiguous_inputs_are_saved_as_their_values():
    base = strata.arange(24, dtype=strata.float32).reshape(2, 3, 4)
    cases = {
        "transposed": base.transpose(0, 2),
        "strided": base[:, ::2, 1::2],
        "expanded": strata.arange(3, dtype=strata.float32).reshape(3, 1).expand(3, 4),
        "offset": base[1],
        "bf16_t": base.to(strata.bfloat16).transpose(1, 2),
    }
    for v in cases.values():
        assert not v.is_contiguous() or v.storage_offset() != 0
    out, _ = roundtrip(cases)
    for k, v in cases.items():
        assert out[k].is_contiguous()
        assert_same(v, out[k])
        np.testing.assert_array_equal(out[k].float().numpy(), v.float().numpy())


def test_shared_storage_entries_become_independent_copies():
    base = strata.arange(6, dtype=strata.float32)
    sd = {"a": base, "b": base[2:], "c": base.view(2, 3)}
    out, data = roundtrip(sd)
    header = json.loads(data[8 : 8 + struct.unpack("<Q", data[:8])[0]])
    assert sum(e[1] - e[0] for e in (header[k]["data_offsets"] for k in sd)) == 4 * (6 + 4 + 6)
    out["a"].fill_(-1.0)
    assert out["b"].tolist() == [2.0, 3.0, 4.0, 5.0]
    assert out["c"].tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]


def test_loaded_tensors_are_writable_and_independent_of_the_file(tmp_path):
    p = tmp_path / "w.safetensors"
    strata.save({"w": strata.ones(4)}, p)
    out = strata.load(p)
    out["w"].add_(1.0)
    assert out["w"].tolist() == [2.0] * 4
    assert strata.load(p)["w"].tolist() == [1.0] * 4


def test_many_dimensions():
    t = strata.arange(2, dtype=strata.int16).reshape((1,) * 69 + (2,))
    out, _ = roundtrip({"t": t})
    assert_same(t, out["t"])


def optimizer_like_state():
    p0 = strata.arange(3, dtype=strata.float32)
    return {
        "state": {
            0: {"step": strata.tensor(3.0), "exp_avg": p0 * 0.5, "exp_avg_sq": (p0 * p0).to(strata.bfloat16)},
            1: {"step": 7, "momentum_buffer": None},
        },
        "param_groups": [
            {
                "lr": 1e-3,
                "betas": (0.9, 0.999),
                "eps": 1e-8,
                "weight_decay": 0.0,
                "amsgrad": False,
                "maximize": True,
                "foreach": None,
                "params": [0, 1],
                "name": "decoder.layers.ü",
                "max_norm": float("inf"),
                "min_norm": float("-inf"),
                "bad": float("nan"),
                "huge": 2**80,
                "nested": [[], (), {}, [(1, "x")]],
            }
        ],
    }


def _assert_struct_equal(a, b):
    assert type(a) is type(b), (a, b)
    if isinstance(a, strata.Tensor):
        assert_same(a, b)
    elif isinstance(a, dict):
        assert list(a.keys()) == list(b.keys())
        for k in a:
            assert type(k) is type(next(kk for kk in b if kk == k))
            _assert_struct_equal(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _assert_struct_equal(x, y)
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b)
    else:
        assert a == b


def test_nested_optimizer_state_roundtrip():
    state = optimizer_like_state()
    out, data = roundtrip(state)
    _assert_struct_equal(state, out)
    assert 0 in out["state"] and "0" not in out["state"]
    assert isinstance(out["param_groups"][0]["betas"], tuple)


def test_nested_structure_types_preserved():
    obj = OrderedDict([("z", 1), ("a", [strata.ones(1), (True, None, 2.5)]), (3, {"k": "v"}), (None, 0), (1.5, -2)])
    out, _ = roundtrip(obj)
    assert isinstance(out, OrderedDict)
    _assert_struct_equal(obj, out)
    for top in ([strata.zeros(2), 1], (strata.zeros(1),), 5, None, "text", [], {}):
        got, _ = roundtrip(top)
        _assert_struct_equal(top, got)


def test_same_tensor_object_is_stored_once_and_comes_back_shared():
    t = strata.arange(4, dtype=strata.float32)
    out, data = roundtrip({"a": [t, t], "b": {"c": t}})
    assert out["a"][0] is out["a"][1] is out["b"]["c"]
    n = struct.unpack("<Q", data[:8])[0]
    assert len(data) == 8 + n + 16


def test_dotted_name_collisions_are_disambiguated():
    a, b = strata.zeros(1), strata.ones(1)
    obj = {"x.y": a, "x": {"y": b}, "__metadata__": strata.full((1,), 2.0)}
    out, data = roundtrip(obj)
    assert out["x.y"].tolist() == [0.0] and out["x"]["y"].tolist() == [1.0] and out["__metadata__"].tolist() == [2.0]


def test_plain_state_dict_has_no_structure_metadata_and_loads_as_sorted_dict():
    sd = OrderedDict([("w2", strata.ones(2)), ("b1", strata.zeros(3)), ("a", strata.tensor([1, 2]))])
    out, data = roundtrip(sd)
    assert type(out) is dict
    assert list(out) == ["a", "b1", "w2"]
    assert b"__metadata__" not in data


def test_writer_is_deterministic_and_aligned():
    sd = {"b": strata.ones(3, dtype=strata.int8), "a": strata.ones(5, dtype=strata.float64), "c": strata.ones(1)}
    _, d1 = roundtrip(sd)
    _, d2 = roundtrip(dict(reversed(list(sd.items()))))
    assert d1 == d2
    n = struct.unpack("<Q", d1[:8])[0]
    assert n % 8 == 0 and d1[8 : 8 + n].endswith(b"}" + b" " * (len(d1[8 : 8 + n]) - len(d1[8 : 8 + n].rstrip())))
    header = json.loads(d1[8 : 8 + n])
    # Largest dtype first, then by name, as the reference library lays data out.
    assert list(header) == ["a", "c", "b"]
    assert header["a"]["data_offsets"] == [0, 40]


def test_user_metadata_and_load_metadata():
    buf = io.BytesIO()
    strata.save({"w": strata.ones(1)}, buf, metadata={"format": "pt", "b": "2"})
    data = buf.getvalue()
    assert b'"__metadata__":{"b":"2","format":"pt"}' in data
    buf.seek(0)
    assert serialization.load_metadata(buf) == {"format": "pt", "b": "2"}
    buf.seek(0)
    assert list(strata.load(buf)) == ["w"]


# ----------------------------------------------------------------------------------------------------------------------
# Arguments: paths, file objects, map_location, torch-compat keywords
# ----------------------------------------------------------------------------------------------------------------------


def test_paths_and_file_objects(tmp_path):
    sd = {"w": strata.arange(5, dtype=strata.float32)}
    p = tmp_path / "m.safetensors"
    strata.save(sd, str(p))
    assert_same(sd["w"], strata.load(str(p))["w"])
    strata.save(sd, p)  # pathlib.Path
    assert_same(sd["w"], strata.load(p)["w"])
    with open(p, "wb") as f:
        strata.save(sd, f)
    with open(p, "rb") as f:
        assert_same(sd["w"], strata.load(f)["w"])
    # A checkpoint embedded after other bytes: load reads from the current position to the end.
    with open(p, "wb") as f:
        f.write(b"PREFIX")
        strata.save(sd, f)
    with open(p, "rb") as f:
        f.read(6)
        assert_same(sd["w"], strata.load(f)["w"])


class _Pipe(io.RawIOBase):
    """A non-seekable stream that returns data in small dribbles."""

    def __init__(self, data):
        self._data, self._pos = data, 0

    def readable(self):
        return True

    def readinto(self, b):
        n = min(len(b), 3, len(self._data) - self._pos)
        b[:n] = self._data[self._pos : self._pos + n]
        self._pos += n
        return n


def test_non_seekable_stream():
    t = random_bits(strata.bfloat16, (9,))
    _, data = roundtrip({"t": t})
    assert_same(t, strata.load(_Pipe(data))["t"])
    with pytest.raises(ValueError, match="header length"):
        strata.load(_Pipe(st_file({}, length=1 << 40)))


@pytest.mark.parametrize("loc", [None, "cpu", strata.device("cpu")])
def test_map_location_cpu(loc):
    buf = io.BytesIO()
    strata.save({"w": strata.ones(2)}, buf)
    buf.seek(0)
    assert strata.load(buf, map_location=loc, weights_only=True)["w"].tolist() == [1.0, 1.0]
    buf.seek(0)
    assert strata.load(buf, loc, weights_only=False)["w"].tolist() == [1.0, 1.0]


def test_bad_arguments():
    buf = io.BytesIO()
    strata.save({"w": strata.ones(2)}, buf, format="safetensors")
    data = buf.getvalue()
    with pytest.raises(ValueError, match="map_location"):
        strata.load(io.BytesIO(data), map_location="meta")
    with pytest.raises(TypeError, match="map_location"):
        strata.load(io.BytesIO(data), map_location=42)
    with pytest.raises(TypeError, match="BytesIO"):
        strata.load(data)
    # torch's rules (the default format became torch's zip): an explicit pickle_module needs weights_only=False,
    # pickle load arguments are accepted, mmap needs a path.
    with pytest.raises(RuntimeError, match="pickle_module"):
        strata.load(io.BytesIO(data), pickle_module=object())
    assert strata.load(io.BytesIO(data), encoding="latin1")["w"].tolist() == [1.0, 1.0]
    with pytest.raises(TypeError, match="unexpected keyword"):
        strata.load(io.BytesIO(data), fix_imports=False, bogus=1)
    with pytest.raises(ValueError, match="mmap"):
        strata.load(io.BytesIO(data), mmap=True)
    strata.save({"w": strata.ones(1)}, io.BytesIO(), format="safetensors", _use_new_zipfile_serialization=False)
    with pytest.raises(TypeError, match="path or a"):
        strata.save({"w": strata.ones(1)}, 3)
    with pytest.raises(TypeError, match="binary"):
        strata.save({"w": strata.ones(1)}, io.StringIO())
    with pytest.raises(TypeError, match="binary"):
        strata.load(io.StringIO("x" * 20))


def test_save_errors(tmp_path):
    with pytest.raises(ValueError, match="meta"):
        strata.save({"m": strata.zeros(2, device="meta")}, io.BytesIO(), format="safetensors")
    p = tmp_path / "keep.safetensors"
    strata.save({"w": strata.ones(1)}, p)
    with pytest.raises(ValueError, match="meta"):
        strata.save({"a": strata.ones(1), "m": strata.zeros(2, device="meta")}, p)
    assert strata.load(p)["w"].tolist() == [1.0]  # a refused save leaves the old file alone
    with pytest.raises(TypeError, match="object"):
        strata.save({"opt": object()}, io.BytesIO(), format="safetensors")
    with pytest.raises(TypeError, match="key"):
        strata.save({(1, 2): strata.ones(1)}, io.BytesIO(), format="safetensors")
    cyc = []
    cyc.append(cyc)
    with pytest.raises(ValueError, match="cycle"):
        strata.save(cyc, io.BytesIO(), format="safetensors")
    with pytest.raises(TypeError, match="metadata"):
        strata.save({"w": strata.ones(1)}, io.BytesIO(), format="safetensors", metadata={"a": 1})
    with pytest.raises(ValueError, match="Unicode"):
        strata.save({"\ud800": strata.ones(1)}, io.BytesIO(), format="safetensors")
    with pytest.raises(ValueError, match="reserved"):
        strata.save({"w": strata.ones(1)}, io.BytesIO(), format="safetensors", metadata={"strata.structure": "{}"})


# ----------------------------------------------------------------------------------------------------------------------
# Interop with the safetensors package
# ----------------------------------------------------------------------------------------------------------------------


def _np_value(t):
    return t.view(strata.int16).numpy() if t.dtype == strata.bfloat16 else t.numpy()


def test_interop_numpy_byte_identical_both_ways(tmp_path):
    st_np = pytest.importorskip("safetensors.numpy")
    sd = {
        "layer.weight": random_bits(strata.float32, (3, 4), 1),
        "layer.bias": random_bits(strata.float64, (4,), 2),
        "emb": random_bits(strata.float16, (2, 2), 3),
        "mask": random_bits(strata.bool, (5,), 4),
        "idx": random_bits(strata.int64, (0, 3), 5),
        "scalar": random_bits(strata.int32, (), 6),
        "q": random_bits(strata.int8, (3,), 7),
        "u": random_bits(strata.uint8, (2,), 8),
        "s": random_bits(strata.int16, (2,), 9),
        'é\n\x01\x7f"\\ \u2028 \U0001F600': random_bits(strata.float32, (1,), 10),
        "": random_bits(strata.uint8, (1,), 11),
    }
    _, ours = roundtrip(sd)
    theirs = st_np.save({k: v.numpy() for k, v in sd.items()})
    assert ours == theirs
    p = tmp_path / "a.safetensors"
    strata.save(sd, p)
    loaded = st_np.load_file(str(p))
    assert sorted(loaded) == sorted(sd)
    for k, v in sd.items():
        assert loaded[k].dtype == v.numpy().dtype and loaded[k].shape == tuple(v.shape)
        assert loaded[k].tobytes() == bits(v)
    back = load_bytes(theirs)
    for k, v in sd.items():
        assert_same(v, back[k])


def test_interop_torch_all_dtypes_both_ways(tmp_path):
    pytest.importorskip("safetensors")
    torch = pytest.importorskip("torch")
    st_torch = pytest.importorskip("safetensors.torch")
    tdt = {
        strata.float32: torch.float32, strata.float16: torch.float16, strata.bfloat16: torch.bfloat16,
        strata.float64: torch.float64, strata.int64: torch.int64, strata.int32: torch.int32,
        strata.int16: torch.int16, strata.int8: torch.int8, strata.uint8: torch.uint8, strata.bool: torch.bool,
    }
    sd = {f"t{i}": random_bits(d, (2, 3) if i % 2 else (), i) for i, d in enumerate(ALL_DTYPES)}
    sd["empty"] = strata.empty((0, 4), dtype=strata.bfloat16)
    p = tmp_path / "ours.safetensors"
    strata.save(sd, p)
    loaded = st_torch.load_file(str(p))
    assert sorted(loaded) == sorted(sd)
    for k, v in sd.items():
        assert loaded[k].dtype == tdt[v.dtype] and tuple(loaded[k].shape) == tuple(v.shape)
        assert loaded[k].reshape(-1).view(torch.uint8).numpy().tobytes() == bits(v)

    # The other way: a file torch wrote (with the metadata transformers adds) loads as a plain dict.
    tsd = {
        "w": torch.randn(3, 5).to(torch.bfloat16),
        "h": torch.randn(4).half(),
        "n": torch.tensor([float("nan"), -0.0, float("inf")]),
        "i": torch.arange(6).reshape(2, 3),
        "b": torch.tensor([True, False, True]),
        "z": torch.tensor(7, dtype=torch.int8),
    }
    q = tmp_path / "theirs.safetensors"
    st_torch.save_file(tsd, str(q), metadata={"format": "pt"})
    back = strata.load(q)
    assert type(back) is dict and sorted(back) == sorted(tsd)
    for k, v in tsd.items():
        assert str(back[k].dtype).split(".")[-1] == str(v.dtype).split(".")[-1]
        assert tuple(back[k].shape) == tuple(v.shape)
        assert bits(back[k]) == v.reshape(-1).view(torch.uint8).numpy().tobytes()
    assert serialization.load_metadata(q) == {"format": "pt"}


def test_interop_nested_state_is_still_a_valid_safetensors_file():
    st_np = pytest.importorskip("safetensors.numpy")
    state = optimizer_like_state()
    state["state"][0].pop("exp_avg_sq")  # numpy has no bfloat16
    _, data = roundtrip(state)
    loaded = st_np.load(data)
    assert sorted(loaded) == ["state.0.exp_avg", "state.0.step"]


# ----------------------------------------------------------------------------------------------------------------------
# Hostile files
# ----------------------------------------------------------------------------------------------------------------------


def _small_file():
    _, data = roundtrip({"a": strata.arange(3, dtype=strata.float32), "b": strata.ones(2, dtype=strata.bfloat16)})
    return data


def test_truncated_at_every_byte():
    data = _small_file()
    assert load_bytes(data)
    for n in range(len(data)):
        with pytest.raises(ValueError, match="strata.load"):
            load_bytes(data[:n])


def test_truncated_file_on_disk_names_the_file(tmp_path):
    p = tmp_path / "cut.safetensors"
    p.write_bytes(_small_file()[:-1])
    with pytest.raises(ValueError, match="cut.safetensors"):
        strata.load(p)
    p.write_bytes(b"\x01\x02")
    with pytest.raises(ValueError, match="too short"):
        strata.load(p)


def _entry(dtype="F32", shape=(2,), offsets=(0, 8)):
    return {"dtype": dtype, "shape": list(shape), "data_offsets": list(offsets)}


# (case id, file bytes, message fragment, whether the safetensors package must reject it too)
HOSTILE = [
    ("empty", b"", "too short", True),
    ("huge-header-len", struct.pack("<Q", 2**64 - 1) + b"{}", "exceeds", True),
    ("header-len-over-cap", struct.pack("<Q", 100_000_001) + b"{}", "exceeds", True),
    ("lying-header-len-long", st_file({}, length=4096), "larger than", True),
    ("lying-header-len-short", st_file({"a": _entry()}, b"\0" * 8, length=5), "JSON", True),
    ("not-utf8", st_file(None, raw_header=b'{"\xff\xfe":1}'), "UTF-8", True),
    ("not-json", st_file(None, raw_header=b"{nope"), "JSON", True),
    ("json-list", st_file(None, raw_header=b"[1,2,3]"), "must be a JSON object", True),
    ("json-string", st_file(None, raw_header=b'"{}"'), "must be a JSON object", True),
    ("json-nan", st_file(None, raw_header=b'{"__metadata__":{"a":NaN}}'), "JSON", True),
    ("trailing-garbage", st_file(None, raw_header=b"{}x"), "JSON", True),
    ("deep-nesting", st_file(None, raw_header=b'{"a":' + b"[" * 100000 + b"]" * 100000 + b"}"), "too deeply", True),
    ("duplicate-keys", st_file(None, raw_header=b'{"a":' + json.dumps(_entry()).encode() + b',"a":'
                               + json.dumps(_entry()).encode() + b"}", data=b"\0" * 8), "duplicate", False),
    ("entry-not-object", st_file({"a": [1, 2]}), "must be an object", True),
    ("missing-dtype", st_file({"a": {"shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4), "dtype", True),
    ("missing-shape", st_file({"a": {"dtype": "F32", "data_offsets": [0, 4]}}, b"\0" * 4), "shape", True),
    ("missing-offsets", st_file({"a": {"dtype": "F32", "shape": [1]}}, b"\0" * 4), "data_offsets", True),
    ("dtype-not-str", st_file({"a": _entry(dtype=5)}, b"\0" * 8), "dtype", True),
    ("bad-dtype", st_file({"a": _entry(dtype="F33")}, b"\0" * 8), "unknown dtype", True),
    ("foreign-dtype", st_file({"a": _entry(dtype="F6_E2M3", shape=(8,))}, b"\0" * 8), "no strata dtype", False),
    ("shape-not-list", st_file({"a": _entry() | {"shape": 2}}, b"\0" * 8), "shape", True),
    ("shape-float", st_file({"a": _entry(shape=(2.0,))}, b"\0" * 8), "shape", True),
    ("shape-bool", st_file({"a": _entry(shape=(True,), offsets=(0, 4))}, b"\0" * 4), "shape", True),
    ("shape-negative", st_file({"a": _entry(shape=(-2,))}, b"\0" * 8), "negative", True),
    ("shape-neg-product-ok", st_file({"a": _entry(shape=(-1, -2))}, b"\0" * 8), "negative", True),
    ("shape-2^62", st_file({"a": _entry(shape=(2**62,))}, b"\0" * 8), "overflows", True),
    ("shape-overflow-wraps", st_file({"a": _entry(dtype="U8", shape=(2**32, 2**32), offsets=(0, 0))}), "overflows",
     True),
    ("shape-zero-huge", st_file({"a": _entry(shape=(0, 2**62), offsets=(0, 0))}), "overflows", False),
    ("too-many-dims", st_file({"a": _entry(shape=(0,) * 1025, offsets=(0, 0))}), "dimensions", False),
    ("size-mismatch", st_file({"a": _entry(shape=(3,))}, b"\0" * 8), "needs 12 bytes", True),
    ("offsets-negative", st_file({"a": _entry(offsets=(-8, 0))}, b"\0" * 8), "data_offsets", True),
    ("offsets-reversed", st_file({"a": _entry(offsets=(8, 0))}, b"\0" * 8), "end before", True),
    ("offsets-one", st_file({"a": _entry() | {"data_offsets": [0]}}, b"\0" * 8), "two integers", True),
    ("offsets-float", st_file({"a": _entry(offsets=(0.0, 8.0))}, b"\0" * 8), "two integers", True),
    ("offsets-out-of-buffer", st_file({"a": _entry(offsets=(1 << 40, (1 << 40) + 8))}, b"\0" * 8), "hole", True),
    ("end-out-of-buffer", st_file({"a": _entry()}, b"\0" * 4), "past the data buffer", True),
    ("overlap", st_file({"a": _entry(), "b": _entry(offsets=(4, 12))}, b"\0" * 12), "overlap", True),
    ("same-range", st_file({"a": _entry(), "b": _entry()}, b"\0" * 8), "overlap", True),
    ("hole", st_file({"a": _entry(offsets=(4, 12))}, b"\0" * 12), "hole", True),
    ("trailing-bytes", st_file({"a": _entry()}, b"\0" * 9), "cover 8 bytes", True),
    ("metadata-not-object", st_file({"__metadata__": "x"}), "__metadata__", True),
    ("metadata-int-value", st_file({"__metadata__": {"a": 1}}), "__metadata__", True),
    ("bool-byte-2", st_file({"a": _entry(dtype="BOOL", shape=(2,), offsets=(0, 2))}, b"\x01\x02"), "BOOL", False),
    ("structure-bad-json", st_file({"__metadata__": {"strata.structure": "{"}}), "JSON", False),
    ("structure-missing-tensor", st_file({"__metadata__": {"strata.structure": json.dumps(
        {"version": 1, "root": {"$tensor": "nope"}})}}), "not in the file", False),
    ("structure-unknown-tag", st_file({"__metadata__": {"strata.structure": json.dumps(
        {"version": 1, "root": {"$pickle": "os.system"}})}}), "unknown tag", False),
    ("structure-bad-version", st_file({"__metadata__": {"strata.structure": json.dumps(
        {"version": 99, "root": 1})}}), "version", False),
    ("structure-dup-dict-key", st_file({"__metadata__": {"strata.structure": json.dumps(
        {"version": 1, "root": {"$dict": [[1, 2], [1, 3]]}})}}), "duplicate", False),
    ("structure-unhashable-key", st_file({"__metadata__": {"strata.structure": json.dumps(
        {"version": 1, "root": {"$dict": [[[1], 2]]}})}}), "key", False),
    ("structure-deep", st_file({"__metadata__": {"strata.structure": '{"version":1,"root":' + "[" * 200000
                                                   + "]" * 200000 + "}"}}), "too deeply", False),
]


@pytest.mark.parametrize("case", HOSTILE, ids=[c[0] for c in HOSTILE])
def test_hostile_file_raises_value_error(case):
    name, data, fragment, _ = case
    with pytest.raises(ValueError, match=fragment) as info:
        load_bytes(data)
    assert "strata.load" in str(info.value)


@pytest.mark.parametrize("case", [c for c in HOSTILE if c[3]], ids=[c[0] for c in HOSTILE if c[3]])
def test_hostile_file_also_rejected_by_reference(case):
    st = pytest.importorskip("safetensors.numpy")
    with pytest.raises(Exception):
        st.load(case[1])


def test_hostile_files_in_a_subprocess(tmp_path):
    """The nastiest inputs, loaded by a separate interpreter: it must report a ValueError for each and exit cleanly."""
    nasty = [c for c in HOSTILE if c[0] in {
        "huge-header-len", "lying-header-len-long", "shape-2^62", "shape-overflow-wraps", "offsets-out-of-buffer",
        "overlap", "end-out-of-buffer", "deep-nesting", "structure-deep", "bool-byte-2", "duplicate-keys",
    }]
    data = _small_file()
    files = []
    for i, (name, blob, _, _) in enumerate(nasty):
        files.append(str(tmp_path / f"{i}.safetensors"))
        pathlib.Path(files[-1]).write_bytes(blob)
    for n in range(0, len(data), 7):
        files.append(str(tmp_path / f"cut{n}.safetensors"))
        pathlib.Path(files[-1]).write_bytes(data[:n])
    script = textwrap.dedent(
        """
        import sys, strata
        ok = 0
        for p in sys.argv[1:]:
            try:
                strata.load(p)
            except ValueError:
                ok += 1
            else:
                print("LOADED", p)
        print("REJECTED", ok)
        """
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(pathlib.Path(strata.__file__).parent.parent), env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, "-c", script, *files], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"REJECTED {len(files)}" in proc.stdout, proc.stdout + proc.stderr[-2000:]


def test_zero_size_entries_may_share_an_offset():
    data = st_file({"a": _entry(shape=(0,), offsets=(0, 0)), "b": _entry(shape=(0, 3), offsets=(0, 0)),
                    "c": _entry(shape=(1,), offsets=(0, 4))}, b"\0" * 4)
    out = load_bytes(data)
    assert tuple(out["b"].shape) == (0, 3) and out["c"].tolist() == [0.0]


def test_header_with_unaligned_offsets_still_loads():
    # Nothing in the format requires alignment; an odd offset for an F32 must load correctly, not crash.
    payload = b"\x07" + struct.pack("<2f", 1.5, -2.0)
    data = st_file({"p": _entry(dtype="U8", shape=(1,), offsets=(0, 1)), "f": _entry(offsets=(1, 9))}, payload)
    out = load_bytes(data)
    assert out["p"].tolist() == [7] and out["f"].tolist() == [1.5, -2.0]


def test_real_torch_optimizer_state_dict_roundtrip():
    torch = pytest.importorskip("torch")
    params = [torch.nn.Parameter(torch.randn(3, 2)), torch.nn.Parameter(torch.randn(4))]
    opt = torch.optim.Adam(params, lr=1e-3, betas=(0.8, 0.99))
    sum((p * p).sum() for p in params).backward()
    opt.step()

    def to_strata(x):
        if isinstance(x, torch.Tensor):
            return strata.from_numpy(x.detach().numpy().copy())
        if isinstance(x, dict):
            return type(x)((k, to_strata(v)) for k, v in x.items())
        if isinstance(x, (list, tuple)):
            return type(x)(to_strata(v) for v in x)
        return x

    sd = to_strata(opt.state_dict())
    out, _ = roundtrip(sd)
    _assert_struct_equal(sd, out)
    assert out["param_groups"][0]["betas"] == (0.8, 0.99)
    assert sorted(out["state"]) == [0, 1]


def test_torch_checkpoints_load():
    # Changed with the default format: torch's zip and legacy checkpoints load instead of being refused
    # (more in tests/python/test_serialization_torch.py).
    torch = pytest.importorskip("torch")
    for zipped in (True, False):
        buf = io.BytesIO()
        torch.save({"w": torch.ones(2)}, buf, _use_new_zipfile_serialization=zipped)
        assert load_bytes(buf.getvalue())["w"].tolist() == [1.0, 1.0]


def test_valid_header_lengths_that_resemble_pickle_magic_load():
    # Header length 0x280 encodes as b"\x80\x02...", the first bytes of a legacy torch pickle: still a valid file.
    h = json.dumps({"a": _entry()}, separators=(",", ":")).encode()
    data = st_file(None, struct.pack("<2f", 1.0, 2.0), raw_header=h + b" " * (0x280 - len(h)))
    assert data[:2] == b"\x80\x02"
    assert load_bytes(data)["a"].tolist() == [1.0, 2.0]
