"""strata.save / strata.load in torch's zip checkpoint format: exchange with torch both ways, weights_only, pickling
and deepcopy of tensors, atomic saves, hostile archives (nothing in a file may run code) and a fuzz test."""

import copy
import io
import math
import os
import pickle
import struct
import zipfile
from collections import Counter, OrderedDict

import numpy as np
import pytest

import strata
from strata import serialization
from strata import _torch_format

ALL_DTYPES = [
    "float32", "float16", "bfloat16", "float64", "int64", "int32", "int16", "int8", "uint8", "bool",
]
LOAD_ERRORS = (ValueError, RuntimeError, pickle.UnpicklingError)


def bits(t):
    flat = t.contiguous().reshape(-1)
    if flat.numel() == 0:
        return b""
    return flat.view(strata.uint8).numpy().tobytes()


def torch_bits(t):
    import torch

    flat = t.contiguous().reshape(-1)
    if flat.numel() == 0:
        return b""
    return flat.view(torch.uint8).numpy().tobytes()


def random_bits(dtype, shape, seed=0):
    rng = np.random.default_rng(seed)
    n = math.prod(shape)
    if dtype == strata.bool:
        return strata.from_numpy(rng.integers(0, 2, n).astype(np.bool_)).reshape(shape)
    if n == 0:
        return strata.empty(shape, dtype=dtype)
    itemsize = strata.empty(0, dtype=dtype).element_size()
    return strata.from_numpy(rng.integers(0, 256, n * itemsize, dtype=np.uint8)).view(dtype).reshape(shape)


def to_torch(t):
    import torch

    out = torch.from_numpy(np.frombuffer(bytearray(bits(t)), dtype=np.uint8)).view(getattr(torch, str(t.dtype).split(".")[1]))
    return out.reshape(tuple(t.shape))


def save_bytes(obj, **kw):
    buf = io.BytesIO()
    strata.save(obj, buf, **kw)
    return buf.getvalue()


def load_bytes(data, **kw):
    return strata.load(io.BytesIO(data), **kw)


def torch_save_bytes(obj, **kw):
    import torch

    buf = io.BytesIO()
    torch.save(obj, buf, **kw)
    return buf.getvalue()


def torch_load_bytes(data, **kw):
    import torch

    return torch.load(io.BytesIO(data), **kw)


def archive(records, prefix="archive"):
    """A zip written by Python's zipfile from {name: bytes}; names are relative to ``prefix`` unless they already
    start with a top folder of their own ("archive/...", "other/...")."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in records.items():
            whole = name.split("/")[0] in (prefix, "other")
            z.writestr(name if whole else f"{prefix}/{name}", data)
    return buf.getvalue()


def records_of(data):
    z = zipfile.ZipFile(io.BytesIO(data))
    prefix = z.namelist()[0].split("/")[0]
    return {n[len(prefix) + 1 :]: z.read(n) for n in z.namelist()}


# ----------------------------------------------------------------------------------------------------------------------
# Exchange with torch
# ----------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL_DTYPES)
@pytest.mark.parametrize("shape", [(), (0,), (2, 0, 3), (1,), (3, 5)], ids=str)
def test_every_dtype_both_ways_bit_exact(name, shape):
    torch = pytest.importorskip("torch")
    t = random_bits(getattr(strata, name), shape, seed=len(shape))
    back = torch_load_bytes(save_bytes({"t": t}))["t"]
    assert back.dtype == getattr(torch, name) and tuple(back.shape) == shape
    assert torch_bits(back) == bits(t)
    again = load_bytes(torch_save_bytes({"t": back}))["t"]
    assert again.dtype == t.dtype and tuple(again.shape) == shape and bits(again) == bits(t)


def test_non_contiguous_tensors_keep_their_geometry_both_ways():
    torch = pytest.importorskip("torch")
    base = strata.arange(24, dtype=strata.float32).reshape(2, 3, 4)
    cases = {"t": base.transpose(0, 2), "s": base[:, ::2, 1::2], "o": base[1], "e": strata.arange(3.0).reshape(3, 1).expand(3, 4)}
    out = torch_load_bytes(save_bytes(cases))
    for k, v in cases.items():
        assert out[k].stride() == tuple(v.stride()) and out[k].storage_offset() == v.storage_offset()
        np.testing.assert_array_equal(out[k].numpy(), v.numpy())
    tb = torch.arange(24.0).reshape(2, 3, 4)
    tcases = {"t": tb.transpose(0, 2), "s": tb[:, ::2, 1::2], "o": tb[1]}
    back = load_bytes(torch_save_bytes(tcases))
    for k, v in tcases.items():
        assert tuple(back[k].stride()) == v.stride() and back[k].storage_offset() == v.storage_offset()
        np.testing.assert_array_equal(back[k].numpy(), v.numpy())


def test_shared_storage_survives_both_ways():
    torch = pytest.importorskip("torch")
    x = strata.arange(6.0)
    data = save_bytes({"a": x, "b": x[2:].view(2, 2), "same": x})
    assert sorted(n for n in records_of(data) if n.startswith("data/")) == ["data/0"]  # one storage record
    t = torch_load_bytes(data)
    t["a"][3] = 100.0
    assert t["b"][0, 1].item() == 100.0 and t["same"] is t["a"]
    back = load_bytes(torch_save_bytes(t))
    back["a"][4] = -5.0
    assert back["b"].tolist() == [[2.0, 100.0], [-5.0, 5.0]]
    assert back["same"] is back["a"]


def test_views_of_one_storage_as_different_dtypes_are_refused():
    x = strata.zeros(4, dtype=strata.float32)
    with pytest.raises(RuntimeError, match="different types"):
        save_bytes([x, x.view(strata.int32)])


def _strata_net():
    strata.manual_seed(0)
    return strata.nn.Sequential(
        strata.nn.Conv2d(1, 3, 3), strata.nn.BatchNorm2d(3), strata.nn.ReLU(), strata.nn.Flatten(),
        strata.nn.Linear(12, 5), strata.nn.LayerNorm(5), strata.nn.Identity(),
    )


def _torch_net(torch):
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 3, 3), torch.nn.BatchNorm2d(3), torch.nn.ReLU(), torch.nn.Flatten(),
        torch.nn.Linear(12, 5), torch.nn.LayerNorm(5), torch.nn.Identity(),
    )


def test_module_state_dicts_both_ways(tmp_path):
    torch = pytest.importorskip("torch")
    net = _strata_net()
    net.train()
    net(strata.randn(4, 1, 4, 4))  # moves the BatchNorm running stats
    net.eval()
    p = tmp_path / "strata_net.pt"
    strata.save(net.state_dict(), p)
    tnet = _torch_net(torch).eval()
    tsd = torch.load(p)  # weights_only=True: strata's file references only torch's allowed globals
    assert list(tsd) == list(net.state_dict())
    tnet.load_state_dict(tsd)
    x = np.random.default_rng(0).standard_normal((2, 1, 4, 4)).astype(np.float32)
    want = net(strata.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(tnet(torch.from_numpy(x)).detach().numpy(), want, rtol=1e-5, atol=1e-6)
    assert tsd["1.num_batches_tracked"].dtype == torch.int64

    # torch -> strata: torch's own file, into a fresh strata model.
    torch.manual_seed(1)
    tnet2 = _torch_net(torch).eval()
    tp = tmp_path / "torch_net.pt"
    torch.save(tnet2.state_dict(), tp)
    net2 = _strata_net().eval()
    sd = strata.load(tp)
    assert isinstance(sd, OrderedDict)
    net2.load_state_dict(sd)
    np.testing.assert_allclose(
        net2(strata.from_numpy(x)).detach().numpy(), tnet2(torch.from_numpy(x)).detach().numpy(), rtol=1e-5, atol=1e-6
    )


def _assert_tree_equal(a, b):
    import torch

    if isinstance(a, (strata.Tensor, torch.Tensor)):
        assert isinstance(b, (strata.Tensor, torch.Tensor))
        assert tuple(a.shape) == tuple(b.shape) and str(a.dtype).split(".")[1] == str(b.dtype).split(".")[1]
        assert np.asarray(a.detach()).tobytes() == np.asarray(b.detach()).tobytes()
        return
    assert type(a) is type(b) or (isinstance(a, dict) and isinstance(b, dict)), (type(a), type(b))
    if isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _assert_tree_equal(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _assert_tree_equal(x, y)
    else:
        assert a == b


def test_optimizer_state_dicts_both_ways():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.Adam(model.parameters(), lr=0.01, betas=(0.8, 0.99))
    model(torch.randn(4, 3)).sum().backward()
    opt.step()
    tsd = opt.state_dict()
    ssd = load_bytes(torch_save_bytes(tsd))
    _assert_tree_equal(tsd, ssd)
    assert ssd["param_groups"][0]["betas"] == (0.8, 0.99) and ssd["state"][0]["step"].ndim == 0

    smodel = strata.nn.Linear(3, 2)
    sopt = strata.optim.Adam(smodel.parameters(), lr=0.01)
    smodel(strata.randn(4, 3)).sum().backward()
    sopt.step()
    ssd = sopt.state_dict()
    back = torch_load_bytes(save_bytes(ssd))
    _assert_tree_equal(ssd, back)
    # And a strata optimizer takes torch's state dict back.
    sopt.load_state_dict(load_bytes(save_bytes(ssd)))


def test_nested_containers_and_python_values_both_ways():
    pytest.importorskip("torch")
    obj = {
        "list": [1, 2.5, None, True, "s", b"\x00\xffbytes", (1, (2, 3)), strata.ones(2)],
        "od": OrderedDict([("z", 1), ("a", strata.zeros(1))]),
        "set": {1, 2, 3}, "cplx": 1 + 2j, "nan": float("nan"), "big": 2**100,
        "counter": Counter("aab"), 3: "int key", (1, 2): "tuple key", "empty": {}, "ba": bytearray(b"xy"),
        "dtype": strata.bfloat16, "size": strata.Size([2, 3]), "dev": strata.device("cpu"),
    }
    back = load_bytes(save_bytes(obj))
    t = torch_load_bytes(save_bytes(obj))
    for loaded in (back, load_bytes(torch_save_bytes(t))):
        assert loaded["list"][:7] == obj["list"][:7]
        assert loaded["list"][7].tolist() == [1.0, 1.0]
        assert isinstance(loaded["od"], OrderedDict) and list(loaded["od"]) == ["z", "a"]
        assert loaded["set"] == {1, 2, 3} and loaded["cplx"] == 1 + 2j
        assert math.isnan(loaded["nan"]) and loaded["big"] == 2**100 and loaded["counter"] == Counter("aab")
        assert loaded[3] == "int key" and loaded[(1, 2)] == "tuple key" and loaded["ba"] == bytearray(b"xy")
        assert loaded["dtype"] is strata.bfloat16 and loaded["size"] == strata.Size([2, 3])
        assert isinstance(loaded["size"], strata.Size) and loaded["dev"] == strata.device("cpu")
    import torch

    assert t["dtype"] is torch.bfloat16 and isinstance(t["size"], torch.Size) and t["dev"] == torch.device("cpu")
    # torch's weights_only refuses frozensets; strata's allow-list builds them.
    assert load_bytes(save_bytes({"fs": frozenset({"a", 1})}))["fs"] == frozenset({"a", 1})


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_pickle_protocols(protocol):
    pytest.importorskip("torch")
    x = strata.arange(4.0)
    data = save_bytes({"x": x, "v": x[1:], "d": strata.int8}, pickle_protocol=protocol)
    # torch's weights_only unpickler does not take protocol 4's FRAME opcode: those files need weights_only=False there.
    for loaded in (load_bytes(data), torch_load_bytes(data, weights_only=protocol < 4)):
        assert loaded["x"].tolist() == [0.0, 1.0, 2.0, 3.0] and loaded["v"].tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(ValueError, match="pickle_protocol"):
        save_bytes(x, pickle_protocol=1)


def test_parameters_and_requires_grad_both_ways():
    torch = pytest.importorskip("torch")
    p = strata.nn.Parameter(strata.ones(2))
    q = strata.nn.Parameter(strata.ones(2), requires_grad=False)
    r = strata.ones(3).requires_grad_(True)
    t = torch_load_bytes(save_bytes([p, q, r]))
    assert isinstance(t[0], torch.nn.Parameter) and t[0].requires_grad and not t[1].requires_grad
    assert t[2].requires_grad and not isinstance(t[2], torch.nn.Parameter)
    back = load_bytes(torch_save_bytes(t))
    assert type(back[0]) is strata.nn.Parameter and back[0].requires_grad
    assert type(back[1]) is strata.nn.Parameter and not back[1].requires_grad
    assert type(back[2]) is strata.Tensor and back[2].requires_grad and back[2].is_leaf


def test_files_look_like_torchs():
    torch = pytest.importorskip("torch")
    data = save_bytes({"w": strata.ones(3)})
    recs = records_of(data)
    assert set(recs) == {"data.pkl", ".format_version", ".storage_alignment", "byteorder", "data/0", "version",
                         ".data/serialization_id"}
    assert recs["byteorder"] == b"little" and recs["version"] == b"3\n" and recs["data/0"] == np.ones(3, "<f4").tobytes()
    assert len(recs[".data/serialization_id"]) == 40
    z = zipfile.ZipFile(io.BytesIO(data))
    for info in z.infolist():  # every record's data starts on a 64-byte boundary, as torch writes them
        n, e = struct.unpack("<HH", data[info.header_offset + 26 : info.header_offset + 30])
        assert (info.header_offset + 30 + n + e) % 64 == 0, info.filename
        assert info.compress_type == zipfile.ZIP_STORED
    # The pickle names torch's globals exactly as torch's own file does: byte for byte the same data.pkl.
    assert b"ctorch._utils\n_rebuild_tensor_v2\n" in recs["data.pkl"] and b"ctorch\nFloatStorage\n" in recs["data.pkl"]
    theirs = records_of(torch_save_bytes({"w": torch.ones(3)}))["data.pkl"]
    assert recs["data.pkl"] == theirs


def test_torch_maps_strata_files(tmp_path):
    pytest.importorskip("torch")
    import torch

    p = tmp_path / "m.pt"
    x = strata.arange(10.0)
    strata.save({"x": x, "v": x[2:5], "h": strata.ones(3, dtype=strata.float16)}, p)
    d = torch.load(p, mmap=True)
    d["x"][3] = 9.0
    assert d["v"].tolist() == [2.0, 9.0, 4.0] and d["h"].dtype == torch.float16


# ----------------------------------------------------------------------------------------------------------------------
# Formats, paths, numpy, whole modules
# ----------------------------------------------------------------------------------------------------------------------


def test_format_selection(tmp_path):
    sd = {"w": strata.ones(2)}
    strata.save(sd, tmp_path / "a.pt")
    assert (tmp_path / "a.pt").read_bytes()[:4] == b"PK\x03\x04"
    strata.save(sd, tmp_path / "a.safetensors")
    assert (tmp_path / "a.safetensors").read_bytes()[:4] != b"PK\x03\x04"
    strata.save(sd, tmp_path / "b.pt", format="safetensors")
    assert serialization.load_metadata(tmp_path / "b.pt") == {}
    strata.save(sd, tmp_path / "c.bin", metadata={"k": "v"})
    assert serialization.load_metadata(tmp_path / "c.bin") == {"k": "v"}
    for name in ("a.pt", "a.safetensors", "b.pt", "c.bin"):  # load tells the format from the bytes
        assert strata.load(tmp_path / name)["w"].tolist() == [1.0, 1.0]
    with pytest.raises(ValueError, match="format"):
        strata.save(sd, io.BytesIO(), format="npz")
    with pytest.raises(ValueError, match="metadata"):
        strata.save(sd, io.BytesIO(), format="torch", metadata={"a": "b"})
    data = save_bytes(sd, _use_new_zipfile_serialization=True, pickle_module=pickle)
    assert load_bytes(data)["w"].tolist() == [1.0, 1.0]


def test_rezipped_archives_with_folders_and_compression_load():
    x = strata.arange(100.0)
    recs = records_of(save_bytes({"x": x, "v": x[3:7]}))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("ckpt/", b"")
        z.writestr("ckpt/data/", b"")
        for name, data in recs.items():
            z.writestr(f"ckpt/{name}", data)
    out = load_bytes(buf.getvalue())
    assert out["x"].tolist() == x.tolist() and out["v"].tolist() == [3.0, 4.0, 5.0, 6.0]


@pytest.mark.parametrize("protocol", [2, 4])
def test_legacy_format_both_ways(protocol):
    torch = pytest.importorskip("torch")
    x = strata.arange(5.0)
    obj = {"x": x, "v": x[1:4], "p": strata.nn.Parameter(strata.ones(2)), "h": strata.ones(3, dtype=strata.float16),
           "e": strata.empty(0, 2), "n": [1, "two", (3.0,)]}
    data = save_bytes(obj, _use_new_zipfile_serialization=False, pickle_protocol=protocol)
    assert not data.startswith(b"PK")
    t = torch_load_bytes(data, weights_only=protocol < 4)
    t["x"][2] = 50.0
    assert t["v"].tolist() == [1.0, 50.0, 3.0] and isinstance(t["p"], torch.nn.Parameter)
    assert t["h"].dtype == torch.float16 and t["n"] == [1, "two", (3.0,)]
    back = load_bytes(torch_save_bytes(t, _use_new_zipfile_serialization=False))
    back["x"][3] = -1.0
    assert back["v"].tolist() == [1.0, 50.0, -1.0] and type(back["p"]) is strata.nn.Parameter
    assert back["e"].shape == (0, 2) and back["h"].dtype == strata.float16
    mine = load_bytes(data, weights_only=False)
    assert mine["v"].tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(ValueError, match="mmap"):
        strata.load(io.BytesIO(data), mmap=True)


def test_legacy_hostile_files():
    data = save_bytes({"x": strata.arange(6.0)}, _use_new_zipfile_serialization=False)
    for cut in range(0, len(data), 5):
        with pytest.raises(LOAD_ERRORS):
            load_bytes(data[:cut])
    # A pickle that claims a storage far bigger than the file allocates nothing.
    huge = data.replace(b"K\x06N", b"\x8a\x06\x00\x00\x00\x00\x00\x01N", 1)
    assert huge != data
    with pytest.raises(ValueError, match="more than the whole rest of the file"):
        load_bytes(huge)
    # Element count before the data disagreeing with the pickle.
    i = data.rindex(struct.pack("<q", 6))
    with pytest.raises(ValueError, match="holds 7 elements"):
        load_bytes(data[:i] + struct.pack("<q", 7) + data[i + 8 :])


def test_file_objects_at_an_offset_and_streams(tmp_path):
    sd = {"w": strata.arange(3.0)}
    p = tmp_path / "x.pt"
    with open(p, "wb") as f:
        f.write(b"HEADER")
        strata.save(sd, f)
    with open(p, "rb") as f:
        f.read(6)
        assert strata.load(f)["w"].tolist() == [0.0, 1.0, 2.0]

    class Pipe(io.RawIOBase):
        def __init__(self, data):
            self.data, self.pos = data, 0

        def readable(self):
            return True

        def readinto(self, b):
            n = min(len(b), 5, len(self.data) - self.pos)
            b[:n] = self.data[self.pos : self.pos + n]
            self.pos += n
            return n

    assert strata.load(Pipe(save_bytes(sd)))["w"].tolist() == [0.0, 1.0, 2.0]


def test_numpy_arrays_and_python_objects_need_weights_only_false():
    arr = np.arange(6, dtype=np.float64).reshape(2, 3)
    data = save_bytes(arr)
    with pytest.raises(pickle.UnpicklingError, match="numpy"):
        load_bytes(data)
    np.testing.assert_array_equal(load_bytes(data, weights_only=False), arr)
    obj = {"arr": arr, "t": strata.ones(2), "fn": math.floor}
    back = load_bytes(save_bytes(obj), weights_only=False)
    np.testing.assert_array_equal(back["arr"], arr)
    assert back["fn"] is math.floor and back["t"].tolist() == [1.0, 1.0]


def test_whole_module_pickles():
    net = _strata_net().eval()
    data = save_bytes(net)
    with pytest.raises(pickle.UnpicklingError, match=r"strata\.nn\.modules\.container\.Sequential"):
        load_bytes(data)
    back = load_bytes(data, weights_only=False)
    assert type(back) is strata.nn.Sequential and type(back[4].weight) is strata.nn.Parameter
    x = strata.randn(2, 1, 4, 4)
    np.testing.assert_array_equal(back(x).detach().numpy(), net(x).detach().numpy())
    # Pickle and copy.deepcopy of modules too.
    for other in (pickle.loads(pickle.dumps(net)), copy.deepcopy(net)):
        np.testing.assert_array_equal(other(x).detach().numpy(), net(x).detach().numpy())
        assert other[0].weight.data_ptr() != net[0].weight.data_ptr()


def test_whole_torch_module_loads_into_strata_modules():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    tnet = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    data = torch_save_bytes(tnet)
    with pytest.raises(pickle.UnpicklingError, match="torch.nn.modules.container.Sequential"):
        load_bytes(data)
    net = load_bytes(data, weights_only=False)
    assert type(net) is strata.nn.Sequential and type(net[0]) is strata.nn.Linear
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    np.testing.assert_allclose(
        net(strata.from_numpy(x)).detach().numpy(), tnet(torch.from_numpy(x)).detach().numpy(), rtol=1e-6
    )
    assert list(net.state_dict()) == list(tnet.state_dict())


# ----------------------------------------------------------------------------------------------------------------------
# weights_only and the allow-list
# ----------------------------------------------------------------------------------------------------------------------


class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y


def test_safe_globals_allow_list():
    data = save_bytes({"p": Point(1, strata.ones(1))})
    with pytest.raises(pickle.UnpicklingError) as err:
        load_bytes(data)
    msg = str(err.value)
    assert "Unsupported global: GLOBAL test_serialization_torch.Point" in msg and "add_safe_globals([Point])" in msg
    assert "weights_only" in msg
    serialization.clear_safe_globals()
    try:
        with serialization.safe_globals([Point]):
            assert serialization.get_safe_globals() == [Point]
            p = load_bytes(data)["p"]
            assert type(p) is Point and p.x == 1 and p.y.tolist() == [1.0]
        assert serialization.get_safe_globals() == []
        with pytest.raises(pickle.UnpicklingError):
            load_bytes(data)
        serialization.add_safe_globals([(Point, "test_serialization_torch.Point")])
        assert load_bytes(data)["p"].x == 1
    finally:
        serialization.clear_safe_globals()
    assert serialization.get_safe_globals() == []
    with pytest.raises(TypeError):
        serialization.add_safe_globals(Point)
    with pytest.raises(TypeError):
        serialization.add_safe_globals([(Point, 3)])


def test_weights_only_refuses_foreign_dtypes_clearly():
    torch = pytest.importorskip("torch")
    with pytest.raises(pickle.UnpicklingError, match="float4_e2m1fn_x2"):
        load_bytes(torch_save_bytes({"c": torch.ones(2, dtype=torch.uint8).view(torch.float4_e2m1fn_x2)}))
    # complex and the barebones unsigned dtypes load (tests/python/test_complex.py checks their values)
    assert load_bytes(torch_save_bytes({"c": torch.ones(2, dtype=torch.complex64)}))["c"].dtype is strata.complex64


def test_map_location_forms():
    x = strata.arange(4.0)
    data = save_bytes({"x": x, "v": x[1:]})
    seen = []

    def keep(storage, location):
        seen.append((type(storage).__name__, location))
        return storage

    out = load_bytes(data, map_location=keep)
    assert seen == [("UntypedStorage", "cpu")] and out["v"].tolist() == [1.0, 2.0, 3.0]
    assert load_bytes(data, map_location=lambda s, loc: None)["x"].tolist() == [0.0, 1.0, 2.0, 3.0]
    assert load_bytes(data, map_location={"cuda:0": "cpu"})["x"].tolist() == [0.0, 1.0, 2.0, 3.0]
    with pytest.raises(TypeError, match="map_location returned"):
        load_bytes(data, map_location=lambda s, loc: "cpu")

    # A checkpoint whose storages were saved on a GPU: needs a map_location, as in torch.
    recs = records_of(data)
    recs["data.pkl"] = recs["data.pkl"].replace(b"X\x03\x00\x00\x00cpu", b"X\x06\x00\x00\x00cuda:0")
    gpu = archive(recs)
    with pytest.raises(RuntimeError, match="map_location"):
        load_bytes(gpu)
    for loc in ("cpu", strata.device("cpu"), {"cuda:0": "cpu"}, lambda s, loc: s):
        assert load_bytes(gpu, map_location=loc)["v"].tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(ValueError, match="map_location"):
        load_bytes(gpu, map_location="cuda")


def test_mmap_maps_the_file(tmp_path):
    p = tmp_path / "m.pt"
    x = strata.arange(1000.0)
    strata.save({"x": x, "v": x[10:20], "b": strata.ones(3, dtype=strata.bool)}, p)
    out = strata.load(p, mmap=True)
    ranges = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            if line.rstrip().endswith(str(p)):
                lo, hi = (int(v, 16) for v in line.split()[0].split("-"))
                ranges.append((lo, hi))
    assert ranges, "the checkpoint is not mapped"
    for k in ("x", "v", "b"):
        assert any(lo <= out[k].data_ptr() < hi for lo, hi in ranges), k
    assert out["v"].tolist() == [float(i) for i in range(10, 20)]
    out["x"][15] = -1.0  # copy-on-write: the view sees it, the file does not
    assert out["v"][5].item() == -1.0
    assert strata.load(p)["x"][15].item() == 15.0
    st = tmp_path / "m.safetensors"
    strata.save({"x": x}, st)
    assert strata.load(st, mmap=True)["x"].tolist() == x.tolist()
    with pytest.raises(ValueError, match="mmap"):
        strata.load(io.BytesIO(p.read_bytes()), mmap=True)


# ----------------------------------------------------------------------------------------------------------------------
# pickle, copy, deepcopy
# ----------------------------------------------------------------------------------------------------------------------


def test_pickle_tensors_parameters_and_sharing():
    x = strata.arange(6.0)
    p = strata.nn.Parameter(strata.ones(2))
    obj = {"x": x, "v": x[2:].view(2, 2), "p": p, "q": strata.nn.Parameter(strata.ones(1), requires_grad=False)}
    for proto in range(2, pickle.HIGHEST_PROTOCOL + 1):
        back = pickle.loads(pickle.dumps(obj, protocol=proto))
        back["x"][3] = 100.0
        assert back["v"].tolist() == [[2.0, 100.0], [4.0, 5.0]] and x[3].item() == 3.0
        assert type(back["p"]) is strata.nn.Parameter and back["p"].requires_grad
        assert type(back["q"]) is strata.nn.Parameter and not back["q"].requires_grad
    t = strata.ones(2, dtype=strata.bfloat16).requires_grad_(True)
    b = pickle.loads(pickle.dumps(t))
    assert b.requires_grad and b.dtype == strata.bfloat16 and b.is_leaf
    assert pickle.loads(pickle.dumps(strata.device("cpu"))) == strata.device("cpu")


def test_deepcopy_keeps_sharing_and_copy_aliases():
    x = strata.arange(6.0)
    obj = [x, x[2:].view(2, 2)]
    c = copy.deepcopy(obj)
    c[0][3] = -1.0
    assert c[1].tolist() == [[2.0, -1.0], [4.0, 5.0]] and x[3].item() == 3.0
    p = strata.nn.Parameter(strata.ones(2))
    p.grad = strata.full((2,), 3.0)
    q = copy.deepcopy(p)
    assert type(q) is strata.nn.Parameter and q.requires_grad and q.grad.tolist() == [3.0, 3.0]
    assert q.data_ptr() != p.data_ptr()
    alias = copy.copy(x)
    alias[0] = 9.0
    assert x[0].item() == 9.0
    y = strata.ones(2, requires_grad=True) * 2
    with pytest.raises(RuntimeError, match="graph leaves"):
        copy.deepcopy(y)
    m = copy.deepcopy(strata.empty(2, 3, device="meta"))
    assert m.is_meta and m.shape == (2, 3)
    with pytest.raises(RuntimeError, match="meta"):
        pickle.dumps(strata.empty(2, device="meta"))


def test_torch_tensors_with_python_attributes():
    torch = pytest.importorskip("torch")
    t = torch.ones(2)
    t.tag = "hello"
    p = torch.nn.Parameter(torch.ones(2))
    p.note = 3
    out = load_bytes(torch_save_bytes({"t": t, "p": p}))
    assert out["t"].tag == "hello" and out["p"].note == 3 and type(out["p"]) is strata.nn.Parameter


# ----------------------------------------------------------------------------------------------------------------------
# Atomic saves
# ----------------------------------------------------------------------------------------------------------------------


def test_failed_save_leaves_the_old_file(tmp_path, monkeypatch):
    p = tmp_path / "ckpt.pt"
    strata.save({"w": strata.ones(2)}, p)
    before = p.read_bytes()

    class Unpicklable:
        def __reduce__(self):
            raise TypeError("nope")

    with pytest.raises(TypeError, match="nope"):
        strata.save({"w": strata.zeros(2), "bad": Unpicklable()}, p)

    def broken(pickled, fh, prefix="archive"):
        fh.write(b"PK\x03\x04 half an archive")
        raise OSError("disk full")

    monkeypatch.setattr(_torch_format, "write_archive", broken)
    with pytest.raises(OSError, match="disk full"):
        strata.save({"w": strata.zeros(2)}, p)
    assert p.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["ckpt.pt"]  # no temporary file left behind
    monkeypatch.undo()
    strata.save({"w": strata.zeros(2)}, p)
    assert strata.load(p)["w"].tolist() == [0.0, 0.0]
    assert sorted(os.listdir(tmp_path)) == ["ckpt.pt"]
    new = tmp_path / "new.pt"
    with pytest.raises(TypeError):
        strata.save({"bad": Unpicklable()}, new)
    assert not new.exists()


def test_save_through_a_symlink_keeps_the_link(tmp_path):
    real = tmp_path / "real.pt"
    link = tmp_path / "link.pt"
    strata.save({"w": strata.ones(1)}, real)
    link.symlink_to(real)
    strata.save({"w": strata.zeros(1)}, link)
    assert link.is_symlink() and strata.load(real)["w"].tolist() == [0.0]


# ----------------------------------------------------------------------------------------------------------------------
# Hostile archives: nothing may run, everything must fail clearly
# ----------------------------------------------------------------------------------------------------------------------


def _evil_pickles(cmd):
    c = cmd.encode()
    lc = struct.pack("<I", len(c))
    return {
        "global_reduce": b"\x80\x02cos\nsystem\nX" + lc + c + b"\x85R.",
        "posix_reduce": b"\x80\x02cposix\nsystem\nX" + lc + c + b"\x85R.",
        "stack_global": b"\x80\x04\x8c\x02os\x8c\x06system\x93X" + lc + c + b"\x85R.",
        "inst": b"\x80\x02(X" + lc + c + b"ios\nsystem\n.",
        "obj": b"\x80\x02(cos\nsystem\nX" + lc + c + b"o.",
        "newobj_on_a_function": b"\x80\x02cbuiltins\nset\n)\x81.",
        "build_setstate": b"\x80\x02ccollections\nOrderedDict\n)R}X\x0c\x00\x00\x00__setstate__cos\nsystem\nsb.",
        "build_on_a_counter": b"\x80\x02ccollections\nCounter\n)R}X\x01\x00\x00\x00ak\x01sb.",
        "ext1": b"\x80\x02\x82\x01.",
        "subprocess": b"\x80\x02csubprocess\ncall\nX" + lc + c + b"\x85R.",
        "eval": b"\x80\x02cbuiltins\neval\nX" + lc + c + b"\x85R.",
        "getattr": b"\x80\x02cbuiltins\ngetattr\n.",
        "reduce_on_a_tensor": b"\x80\x02ctorch\nSize\n)R)R.",
    }


@pytest.mark.parametrize("case", sorted(_evil_pickles("x")))
def test_code_never_runs(tmp_path, case):
    canary = tmp_path / "canary"
    pkl = _evil_pickles(f"touch {canary}")[case]
    data = archive({"data.pkl": pkl, "byteorder": b"little", "version": b"3\n"})
    with pytest.raises(pickle.UnpicklingError):
        load_bytes(data)
    assert not canary.exists()


def test_hostile_error_messages_name_the_global(tmp_path):
    data = archive({"data.pkl": _evil_pickles("true")["global_reduce"]})
    with pytest.raises(pickle.UnpicklingError, match=r"GLOBAL os\.system was not an allowed global"):
        load_bytes(data)


def _valid():
    return records_of(save_bytes({"x": strata.arange(6.0), "v": strata.arange(6.0)[1:3]}))


@pytest.mark.parametrize(
    "case,match",
    [
        ("not_zip", "not a valid zip"),
        ("dotdot", r"\.\."),
        ("absolute", "bad record name"),
        ("two_prefixes", "bad record name"),
        ("no_pickle", "data.pkl"),
        ("short_record", "holds 20 bytes but the pickle says"),
        ("long_record", "holds 28 bytes but the pickle says"),
        ("missing_record", "no record"),
        ("bad_byteorder", "byteorder"),
        ("bad_version", "version"),
        ("key_traversal", "bad storage key"),
        ("offset_oob", "out of bounds"),
        ("size_oob", "out of bounds"),
        ("huge_numel", "holds 24 bytes"),
        ("negative_stride", "non-negative"),
        ("many_dims", "dimensions"),
        ("bad_pid", "persistent id"),
        ("memo_miss", "memo"),
        ("huge_string", "truncated"),
        ("huge_bytearray", "bytearray"),
        ("huge_put_index", None),
        ("deflate_bomb_claim", "claims"),
        ("lying_central_size", "run past the end"),
    ],
)
def test_hostile_archives(case, match):
    recs = _valid()
    pkl = recs["data.pkl"]
    if case == "not_zip":
        data = b"PK\x03\x04" + b"\x00" * 100
    elif case == "dotdot":
        data = archive({**recs, "archive/../evil": b"x"})
    elif case == "absolute":
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as z:
            z.writestr("archive/data.pkl", pkl)
            zi = zipfile.ZipInfo("x")
            zi.filename = "/etc/passwd"
            z.writestr(zi, b"x")
        data = buf.getvalue()
    elif case == "two_prefixes":
        data = archive({**recs, "other/data.pkl": pkl})
    elif case == "no_pickle":
        data = archive({k: v for k, v in recs.items() if k != "data.pkl"})
    elif case == "short_record":
        data = archive({**recs, "data/0": recs["data/0"][:20]})
    elif case == "long_record":
        data = archive({**recs, "data/0": recs["data/0"] + b"\x00" * 4})
    elif case == "missing_record":
        data = archive({k: v for k, v in recs.items() if k != "data/0"})
    elif case == "bad_byteorder":
        data = archive({**recs, "byteorder": b"middle"})
    elif case == "bad_version":
        data = archive({**recs, "version": b"three"})
    elif case == "key_traversal":
        data = archive({**recs, "data.pkl": pkl.replace(b"X\x01\x00\x00\x000", b"X\x04\x00\x00\x00../0")})
    elif case == "offset_oob":  # storage offset 1 of the view -> 6
        data = archive({**recs, "data.pkl": pkl.replace(b"QK\x01K\x02\x85", b"QK\x06K\x02\x85")})
    elif case == "size_oob":  # the view's size 2 -> 200
        data = archive({**recs, "data.pkl": pkl.replace(b"QK\x01K\x02\x85", b"QK\x01K\xc8\x85")})
    elif case == "huge_numel":
        data = archive({**recs, "data.pkl": pkl.replace(b"K\x06t", b"\x8a\x08" + struct.pack("<q", 1 << 60) + b"t", 1)})
    elif case == "negative_stride":
        data = archive({**recs, "data.pkl": pkl.replace(b"K\x01\x85q", b"J\xff\xff\xff\xff\x85q", 1)})
    elif case == "many_dims":
        dims = b"(" + b"K\x01" * 2000 + b"t"
        data = archive({**recs, "data.pkl": pkl.replace(b"K\x06\x85", dims, 1).replace(b"K\x01\x85", dims, 1)})
    elif case == "bad_pid":
        data = archive({**recs, "data.pkl": b"\x80\x02X\x03\x00\x00\x00abcQ."})
    elif case == "memo_miss":
        data = archive({**recs, "data.pkl": b"\x80\x02h\x07."})
    elif case == "huge_string":
        data = archive({**recs, "data.pkl": b"\x80\x04\x8d" + struct.pack("<Q", 1 << 62) + b"abc."})
    elif case == "huge_bytearray":
        data = archive({**recs, "data.pkl": b"\x80\x02cbuiltins\nbytearray\n\x8a\x06\x00\x00\x00\x00\x00\x10\x85R."})
    elif case == "huge_put_index":  # a memo index of 4 billion allocates nothing here
        data = archive({**recs, "data.pkl": b"\x80\x02Nr\xff\xff\xff\xffj\xff\xff\xff\xff."})
        assert load_bytes(data) is None
        return
    elif case == "deflate_bomb_claim":
        raw = save_bytes({"x": strata.zeros(1 << 14)})
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as z:
            for k, v in records_of(raw).items():
                z.writestr(f"archive/{k}", v)
        data = bytearray(buf.getvalue())
        # Make the central directory claim a gigantic uncompressed size for data/0.
        cd = data.rfind(b"PK\x01\x02", 0, data.find(b"archive/data/0", data.find(b"PK\x01\x02")) + 1)
        data[cd + 24 : cd + 28] = struct.pack("<I", 0xFFFFFF00)
        data = bytes(data)
        match = "claims|holds"
    elif case == "lying_central_size":
        data = bytearray(save_bytes({"x": strata.arange(6.0)}))
        cd = data.find(b"PK\x01\x02" , data.find(b"PK\x01\x02"))
        pos = data.find(b"archive/data/0", cd) - 46
        data[pos + 20 : pos + 24] = struct.pack("<I", 1 << 30)  # compressed size
        data[pos + 24 : pos + 28] = struct.pack("<I", 1 << 30)  # uncompressed size
        data = bytes(data)
        match = "run past the end|holds"
    with pytest.raises(LOAD_ERRORS, match=match):
        load_bytes(data)


def test_truncated_archives_fail_cleanly():
    data = save_bytes({"x": strata.arange(6.0), "n": [1, 2.0, "s"]})
    for cut in list(range(0, len(data), 7)) + [len(data) - 1]:
        with pytest.raises(LOAD_ERRORS):
            load_bytes(data[:cut])


def test_fuzzed_archives_raise_only_expected_errors(tmp_path):
    hypothesis = pytest.importorskip("hypothesis")
    st = hypothesis.strategies
    canary = tmp_path / "canary"
    base = bytearray(save_bytes({"x": strata.arange(6.0), "v": strata.arange(6.0)[2:], "o": [1, (2.5, "s")]}))
    recs = records_of(bytes(base))
    pkl = bytearray(recs["data.pkl"])
    legacy = bytearray(save_bytes({"x": strata.arange(6.0), "v": strata.arange(6.0)[2:]},
                                  _use_new_zipfile_serialization=False))

    @hypothesis.settings(max_examples=int(os.environ.get("STRATA_FUZZ_EXAMPLES", "300")), deadline=None, database=None,
                         suppress_health_check=list(hypothesis.HealthCheck))
    @hypothesis.given(
        target=st.sampled_from(["archive", "pickle", "legacy"]),
        edits=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255), st.sampled_from(["set", "insert", "delete"])),
                       min_size=1, max_size=6),
    )
    def run(target, edits):
        buf = bytearray({"archive": base, "pickle": pkl, "legacy": legacy}[target])
        for pos, val, kind in edits:
            i = pos % (len(buf) + 1)
            if kind == "set" and i < len(buf):
                buf[i] = val
            elif kind == "insert":
                buf[i:i] = bytes([val])
            elif kind == "delete" and i < len(buf):
                del buf[i]
        data = archive({**recs, "data.pkl": bytes(buf)}) if target == "pickle" else bytes(buf)
        try:
            load_bytes(data)
        except LOAD_ERRORS:
            pass
        assert not canary.exists()

    run()
